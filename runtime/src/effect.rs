//! Effects: data that pure code returns and the AgentServer interprets. An effect is never a side effect
//! itself; it is a request, with meta saying where it came from.

use crate::duration_ms;
use crate::id::{ActionId, AgentId, SkillId};
use crate::policy::Policy;
use crate::signal::Signal;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;
use uuid::Uuid;

pub use crate::target::Target;

/// What a schedule does when its time passed while the runtime was down (it is brought back by a durable
/// store's recovery).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum IfMissed {
    /// Fire once, as soon as the agent is back (the default).
    #[default]
    FireLate,
    /// Do not fire at all.
    Skip,
}

impl IfMissed {
    fn is_fire_late(&self) -> bool {
        *self == Self::FireLate
    }
}

/// What an effect asks for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "effect", rename_all = "snake_case")]
pub enum EffectKind {
    /// Add an action to the agent's live action table.
    RegisterAction {
        /// The action.
        action: ActionId,
    },
    /// Remove an action from the live action table.
    DeregisterAction {
        /// The action.
        action: ActionId,
    },
    /// Run an action with these params; the outcome comes back as a signal.
    Run {
        /// The action.
        action: ActionId,
        /// Its params, validated before the run.
        params: Value,
    },
    /// Deliver a signal.
    Emit {
        /// The signal.
        signal: Signal,
        /// Where it goes.
        to: Target,
    },
    /// Answer the `call` whose signal has this id.
    Reply {
        /// The id of the signal that was the call.
        to: Uuid,
        /// The answer.
        data: Value,
    },
    /// Deliver a signal to this agent later, under a key that [`EffectKind::Cancel`] can name.
    Schedule {
        /// Names the schedule; scheduling the same key again replaces it.
        key: String,
        /// How long to wait.
        #[serde(with = "duration_ms")]
        #[schemars(with = "u64")]
        after: Duration,
        /// What to deliver.
        signal: Signal,
        /// What happens if the runtime was down when it was due (with a durable store): fire once, late, or
        /// skip it.
        #[serde(default, skip_serializing_if = "IfMissed::is_fire_late")]
        if_missed: IfMissed,
    },
    /// Cancel a scheduled signal by its key; cancelling a key that is not scheduled does nothing.
    Cancel {
        /// The schedule's key.
        key: String,
    },
    /// Start a child agent of a type the runtime knows by name.
    SpawnAgent {
        /// The child's id.
        id: AgentId,
        /// The agent type's registered name.
        agent: String,
        /// The child's initial domain state.
        init: Value,
        /// The child's policy, which may be narrower than its parent's but never broader; `None`: the parent's.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        policy: Option<Box<Policy>>,
    },
    /// Stop a child agent; the parent gets a signal when it has exited.
    StopChild {
        /// The child's id.
        id: AgentId,
    },
    /// Stop this agent, cancelling its running actions.
    Stop {
        /// Why, for the event stream.
        reason: String,
    },
    /// Mount a skill of the runtime's catalog on this agent: the agent learns it, under its own policy (a skill
    /// the policy does not allow is refused). Mounting a skill already mounted at that version changes nothing.
    MountSkill {
        /// The skill.
        skill: SkillId,
        /// Its mount options.
        #[serde(default)]
        opts: Value,
    },
    /// Unmount a skill from this agent: it forgets it and its actions.
    UnmountSkill {
        /// The skill.
        skill: SkillId,
    },
}

/// Where an effect came from, so every effect can be traced.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct EffectMeta {
    /// The skill that produced it, if a skill did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skill: Option<SkillId>,
    /// Free-form tags.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// The id of the signal whose handling produced it, if a signal did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<Uuid>,
}

/// One effect: what it asks for and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Effect {
    /// What it asks for.
    #[serde(flatten)]
    pub kind: EffectKind,
    /// Where it came from.
    #[serde(default)]
    pub meta: EffectMeta,
}

impl From<EffectKind> for Effect {
    fn from(kind: EffectKind) -> Self {
        Self { kind, meta: EffectMeta::default() }
    }
}

impl Effect {
    /// `MountSkill`: the agent learns a skill of the catalog.
    pub fn mount_skill(skill: SkillId, opts: Value) -> Self {
        EffectKind::MountSkill { skill, opts }.into()
    }

    /// `UnmountSkill`: the agent forgets a skill.
    pub fn unmount_skill(skill: SkillId) -> Self {
        EffectKind::UnmountSkill { skill }.into()
    }

    /// `RegisterAction`.
    pub fn register(action: ActionId) -> Self {
        EffectKind::RegisterAction { action }.into()
    }

    /// `DeregisterAction`.
    pub fn deregister(action: ActionId) -> Self {
        EffectKind::DeregisterAction { action }.into()
    }

    /// `Run` an action with params.
    pub fn run(action: ActionId, params: Value) -> Self {
        EffectKind::Run { action, params }.into()
    }

    /// `Emit` a signal.
    pub fn emit(signal: Signal, to: Target) -> Self {
        EffectKind::Emit { signal, to }.into()
    }

    /// `Reply` to the call whose signal has the id `to`: the call's own signal (`signal.id()`), or, answering
    /// once a run the call started has ended, that outcome signal's `causation_id`.
    pub fn reply(to: Uuid, data: Value) -> Self {
        EffectKind::Reply { to, data }.into()
    }

    /// `Schedule` a signal to this agent.
    pub fn schedule(key: impl Into<String>, after: Duration, signal: Signal) -> Self {
        EffectKind::Schedule { key: key.into(), after, signal, if_missed: IfMissed::FireLate }.into()
    }

    /// The same effect, if it is a `Schedule`, skipped rather than fired late when the runtime was down at its
    /// time (see [`IfMissed`]); any other effect is returned as it is.
    pub fn skip_if_missed(mut self) -> Self {
        if let EffectKind::Schedule { if_missed, .. } = &mut self.kind {
            *if_missed = IfMissed::Skip;
        }
        self
    }

    /// `Cancel` a schedule.
    pub fn cancel(key: impl Into<String>) -> Self {
        EffectKind::Cancel { key: key.into() }.into()
    }

    /// `SpawnAgent`: the child runs under its parent's policy. Needs the `spawn` capability.
    pub fn spawn_agent(id: AgentId, agent: impl Into<String>, init: Value) -> Self {
        EffectKind::SpawnAgent { id, agent: agent.into(), init, policy: None }.into()
    }

    /// `SpawnAgent` under a policy of its own, which must be within the parent's (see
    /// [`Policy::within`]); a broader one is refused.
    pub fn spawn_agent_with_policy(id: AgentId, agent: impl Into<String>, init: Value, policy: Policy) -> Self {
        EffectKind::SpawnAgent { id, agent: agent.into(), init, policy: Some(Box::new(policy)) }.into()
    }

    /// `StopChild`.
    pub fn stop_child(id: AgentId) -> Self {
        EffectKind::StopChild { id }.into()
    }

    /// `Stop` this agent.
    pub fn stop(reason: impl Into<String>) -> Self {
        EffectKind::Stop { reason: reason.into() }.into()
    }

    /// Marks the skill the effect came from.
    pub fn from_skill(mut self, skill: SkillId) -> Self {
        self.meta.skill = Some(skill);
        self
    }

    /// Adds a tag.
    pub fn tagged(mut self, tag: impl Into<String>) -> Self {
        self.meta.tags.push(tag.into());
        self
    }

    /// Marks the signal whose handling produced the effect.
    pub fn caused_by(mut self, signal: Uuid) -> Self {
        self.meta.cause = Some(signal);
        self
    }
}

/// Why the agent's server refused to apply an effect. A refused effect is never applied; the refusal is
/// journaled ([`crate::store::Store::refusals`]) and announced (`effect_refused`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, thiserror::Error)]
#[serde(tag = "refusal", rename_all = "snake_case")]
pub enum EffectRefusal {
    /// A `RegisterAction` or `DeregisterAction` from anything but mounting, unmounting or refreshing a skill.
    #[error(
        "a `{effect}` effect for action `{action}` came from {origin}; only mounting, unmounting and refreshing \
         skills change the action table"
    )]
    TableChange {
        /// `register_action` or `deregister_action`.
        effect: String,
        /// The action it named.
        action: ActionId,
        /// Where it came from.
        origin: String,
    },
    /// A signal of one of the runtime's own kinds (see [`crate::kinds`]), asked for by someone else.
    #[error(
        "a signal of kind `{kind}` was asked for by {origin}; kinds in the `action.`, `job.` and `agent.` \
         namespaces are made only by the runtime"
    )]
    ReservedKind {
        /// The kind asked for.
        kind: String,
        /// Who asked.
        origin: String,
    },
    /// A `SpawnAgent` effect whose policy would give the child more than its parent has.
    #[error("child `{child}` would get a broader policy than its parent: {reason}")]
    PolicyBroader {
        /// The child it would have started.
        child: AgentId,
        /// What the child's policy allows that the parent's does not.
        reason: String,
    },
    /// A `MountSkill` or `UnmountSkill` effect that could not be applied (an unknown skill, one the policy
    /// does not allow, a missing dependency, one another mounted skill needs).
    #[error("{effect} of skill `{skill}`, asked for by {origin}, failed: {reason}")]
    Mount {
        /// `mount_skill` or `unmount_skill`.
        effect: String,
        /// The skill.
        skill: SkillId,
        /// Who asked.
        origin: String,
        /// Why it failed.
        reason: String,
    },
    /// An effect that would make the agent hold more than its policy allows (a schedule beyond
    /// `limits.schedules`).
    #[error(
        "a `{effect}` effect was refused: the agent holds {limit} {what} already, as many as `limits.{knob}` allows"
    )]
    LimitReached {
        /// The effect.
        effect: String,
        /// What it holds too many of.
        what: String,
        /// The policy's knob for it.
        knob: String,
        /// The limit.
        limit: u64,
    },
    /// A `MountSkill` or `UnmountSkill` effect from a run or a job: the skills mounted are the agent's state,
    /// which only its own handling of an input changes (so a recovery replays it).
    #[error(
        "a `{effect}` effect for skill `{skill}` came from {origin}; only the agent's own handling of an input \
         may mount or unmount skills (its state is the fold of its inputs); expected the run to return what the \
         agent should learn, and the agent's handler to ask for the mount"
    )]
    MountOutsideStep {
        /// `mount_skill` or `unmount_skill`.
        effect: String,
        /// The skill.
        skill: SkillId,
        /// Who asked.
        origin: String,
    },
    /// An `Emit` effect to an agent or topic the policy does not let the agent reach.
    #[error("a signal of kind `{kind}` from {origin} was not emitted: {reason}")]
    EmitNotAllowed {
        /// The signal's kind.
        kind: String,
        /// Who asked.
        origin: String,
        /// Which rule refused it.
        reason: String,
    },
    /// A `SpawnAgent` effect from an agent whose policy does not grant `spawn`.
    #[error("spawning child `{child}` needs the `spawn` capability, which the agent's policy does not grant")]
    SpawnNotGranted {
        /// The child it would have started.
        child: AgentId,
    },
}
