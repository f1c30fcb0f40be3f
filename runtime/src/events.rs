//! The event stream: everything that happens in the actor layer, as data anyone can subscribe to.

use crate::action::ErrorClass;
use crate::duration_ms;
use crate::id::{ActionId, AgentId, SkillId};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use tokio::sync::broadcast;
use uuid::Uuid;

/// What happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum EventKind {
    /// An agent started.
    AgentStarted,
    /// An agent began draining for a shutdown: it starts no new runs and lets running ones finish.
    AgentDraining {
        /// Runs still going when it began.
        running: usize,
    },
    /// An agent stopped.
    AgentStopped {
        /// Why.
        reason: String,
    },
    /// An idle agent was snapshotted and its actor stopped; a signal or call to it thaws it.
    AgentHibernated,
    /// A hibernated agent was brought back from its snapshot.
    AgentThawed,
    /// A commit of the agent's writes failed (the database went away, the disk filled up), so its state in
    /// memory had gone past what the journal holds: its actor was stopped and it was brought back from the
    /// journal, as a recovery after a crash does. What it did since its last kept write is undone; whoever
    /// waited for those writes to be durable was told they were not kept.
    AgentRolledBack {
        /// Why.
        reason: String,
    },
    /// An agent was restarted: after a panic in its handler, from its last good state; or, after it ended and
    /// its restart policy started it again, afresh.
    AgentRestarted {
        /// Restarts within the current window, this one included.
        restarts: u32,
        /// Started again afresh by its supervisor: a new actor from its spawn state, the signals waiting in its
        /// old mailbox gone with it (false: it went on from its last good state, its mailbox kept).
        #[serde(default)]
        afresh: bool,
    },
    /// A job ended; the agent that submitted it has been sent `job.completed`, `job.failed` or
    /// `job.cancelled`.
    JobEnded {
        /// The job.
        job: Uuid,
        /// How it ended.
        status: crate::action::JobStatus,
    },
    /// A skill was mounted.
    SkillMounted {
        /// The skill.
        skill: SkillId,
    },
    /// A skill was unmounted.
    SkillUnmounted {
        /// The skill.
        skill: SkillId,
    },
    /// A mounted skill was brought up to date with a new build of itself (an MCP server's tools changed).
    SkillRefreshed {
        /// The skill.
        skill: SkillId,
        /// Actions the new build added.
        added: Vec<ActionId>,
        /// Actions it no longer has.
        removed: Vec<ActionId>,
    },
    /// A run changed a resource one of the agent's skills offers (a file in its drive written through `fs.*`):
    /// an MCP server tells the clients that subscribed to it.
    ResourceChanged {
        /// The resource's URI.
        uri: String,
    },
    /// A run passed on a piece of its output as it made it ([`ActionContext::output`]): a language model's
    /// text as it is written, say. The run's outcome still carries the whole output.
    ///
    /// [`ActionContext::output`]: crate::action::ActionContext::output
    ActionOutput {
        /// The action.
        action: ActionId,
        /// The piece.
        text: String,
    },
    /// A run reported something about its work as it went ([`ActionContext::note`]): the tools a model was
    /// offered and how they scored, say. Its progress ([`ActionContext::progress`]) comes as a note of topic
    /// [`PROGRESS`](crate::action::PROGRESS), `{"fraction": 0.0..=1.0, "message": ...}`.
    ///
    /// [`ActionContext::note`]: crate::action::ActionContext::note
    /// [`ActionContext::progress`]: crate::action::ActionContext::progress
    ActionNote {
        /// The action.
        action: ActionId,
        /// What the note is about (`tools_offered`).
        topic: String,
        /// The note.
        data: serde_json::Value,
    },
    /// A run was asked for and goes to the gate.
    ActionQueued {
        /// The action.
        action: ActionId,
        /// The run that called it through its context, for a nested run.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_run: Option<Uuid>,
        /// How deep it is nested: 1 for a run the agent asked for.
        depth: usize,
    },
    /// An attempt started.
    ActionStarted {
        /// The action.
        action: ActionId,
        /// Which attempt, from 1.
        attempt: u32,
    },
    /// An attempt failed and another follows after a backoff.
    ActionRetried {
        /// The action.
        action: ActionId,
        /// The attempt that failed.
        attempt: u32,
        /// Its error's class.
        class: ErrorClass,
        /// The wait before the next attempt.
        #[serde(with = "duration_ms")]
        backoff: Duration,
    },
    /// The run completed.
    ActionCompleted {
        /// The action.
        action: ActionId,
        /// Attempts it took.
        attempts: u32,
    },
    /// The run failed for good.
    ActionFailed {
        /// The action.
        action: ActionId,
        /// The error's class.
        class: ErrorClass,
        /// The error's message.
        message: String,
    },
    /// The run is blocked: refused by the gate, or waiting for approval.
    ActionBlocked {
        /// The action.
        action: ActionId,
        /// Why.
        reason: String,
    },
    /// A run needs approval: what an approver sees, all of it (the action's contract and the params it would
    /// run with), and the digest of both that [`crate::runtime::Runtime::approve_seen`] binds an approval to.
    ApprovalAsked {
        /// The action.
        action: ActionId,
        /// The risk that made the policy ask.
        risk: crate::action::Risk,
        /// The action's contract as it is now.
        contract: Box<crate::action::ActionSpec>,
        /// The params it would run with.
        params: serde_json::Value,
        /// The digest of the contract, the risk and the params ([`crate::action::approval_digest`]).
        digest: uuid::Uuid,
    },
    /// A run waited for approval longer than its policy allows, and was refused.
    ApprovalExpired {
        /// The action.
        action: ActionId,
    },
    /// The agent's server refused to apply an effect (see [`crate::effect::EffectRefusal`]).
    EffectRefused {
        /// What was refused, and why.
        refusal: crate::effect::EffectRefusal,
    },
    /// A run was approved or denied.
    ApprovalGiven {
        /// The action.
        action: ActionId,
        /// Approved (`true`) or denied.
        approved: bool,
    },
}

/// One event: what happened, to which agent, in which run and signal chain, and when.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// When it happened.
    pub at: DateTime<Utc>,
    /// The agent it happened to.
    pub agent: AgentId,
    /// The run it belongs to, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<Uuid>,
    /// The signal chain it belongs to, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation: Option<Uuid>,
    /// What happened.
    #[serde(flatten)]
    pub kind: EventKind,
}

/// How many events a slow subscriber may fall behind before it starts missing the oldest.
pub const EVENT_BUFFER: usize = 4096;

/// Publishes events to every subscriber. Cheap to clone; publishing with no subscriber costs almost nothing.
#[derive(Debug, Clone)]
pub struct EventBus {
    sender: broadcast::Sender<Event>,
}

impl Default for EventBus {
    fn default() -> Self {
        Self::new()
    }
}

impl EventBus {
    /// A bus that keeps up to [`EVENT_BUFFER`] events for slow subscribers.
    pub fn new() -> Self {
        Self { sender: broadcast::channel(EVENT_BUFFER).0 }
    }

    /// Sends an event to every current subscriber.
    pub fn publish(&self, event: Event) {
        // No subscriber is not an error: nobody is listening.
        let _ = self.sender.send(event);
    }

    /// Publishes what just happened to an agent, stamped with the current time.
    pub fn announce(&self, agent: &AgentId, run: Option<Uuid>, correlation: Option<Uuid>, kind: EventKind) {
        if self.is_listened() {
            self.publish(Event { at: Utc::now(), agent: agent.clone(), run, correlation, kind });
        }
    }

    /// Whether anyone subscribes: an event nobody would receive need not be made (nor the clock read for it).
    pub fn is_listened(&self) -> bool {
        self.sender.receiver_count() > 0
    }

    /// Publishes what happened to an agent at `at` (a time also used elsewhere, such as in the journal).
    pub fn announce_at(
        &self,
        at: DateTime<Utc>,
        agent: &AgentId,
        run: Option<Uuid>,
        correlation: Option<Uuid>,
        kind: EventKind,
    ) {
        if self.is_listened() {
            self.publish(Event { at, agent: agent.clone(), run, correlation, kind });
        }
    }

    /// A receiver of every event published from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.sender.subscribe()
    }
}
