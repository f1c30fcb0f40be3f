//! What a store that survives the process keeps besides run records: each agent's input log, its latest
//! snapshot, which agents are alive and how they were spawned, their schedules, and each ended run's outcome.
//! An agent is pure, so its state is the fold of its inputs: the latest snapshot plus the inputs logged after it
//! bring it back exactly.

use super::{JournalPen, RunRecord, StoreError};
use crate::id::AgentId;
use crate::signal::Signal;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

/// Resolves once every write made before it was asked for is durable.
pub type Flushed = tokio::sync::oneshot::Receiver<()>;

/// An agent's state as saved at one point of its input log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Whose state.
    pub agent: AgentId,
    /// The sequence number of the last input folded into it (0: none yet).
    pub seq: u64,
    /// The agent type's name ([`crate::agent::Agent::name`]).
    pub agent_type: String,
    /// The agent type's state version ([`crate::agent::Agent::version`]) that wrote it.
    pub version: u32,
    /// The serialized `AgentState`: the domain state and the mounted skills.
    pub state: Value,
    /// When it was taken.
    pub at: DateTime<Utc>,
    /// The incarnation of the agent that took it (a fresh start makes a new one; a recovery goes on with it),
    /// which the keys of the runs its inputs ask for carry. 0 for a snapshot written before incarnations.
    #[serde(default)]
    pub incarnation: u64,
}

/// How an agent was spawned, so a recovering runtime can spawn it again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentRecord {
    /// Its id.
    pub agent: AgentId,
    /// The agent type's name.
    pub agent_type: String,
    /// Its spawn settings (policy, restart policy, limits, parent, name), as the runtime serialized them.
    pub spawn: Value,
    /// Whether it was hibernating: a recovery leaves it asleep until something is sent to it.
    #[serde(default)]
    pub asleep: bool,
}

impl AgentRecord {
    /// The policy it was spawned under (or last given), as its spawn settings keep it.
    pub fn policy(&self) -> Option<crate::policy::Policy> {
        serde_json::from_value(self.spawn.get("policy")?.clone()).ok()
    }
}

/// An agent to bring back as [`Durable::alive`] lists it: enough to order a recovery (parents first) and to
/// leave a sleeper asleep, without reading its spawn settings (a recovery reads those only for the agents it
/// wakes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AliveAgent {
    /// Its id.
    pub agent: AgentId,
    /// The agent type's name.
    pub agent_type: String,
    /// Whether it was hibernating.
    pub asleep: bool,
    /// The agent that spawned it, if any.
    pub parent: Option<AgentId>,
    /// When its first schedule comes due, if it has any (a hibernating agent is woken then).
    pub next_due: Option<DateTime<Utc>>,
    /// Whether it has a job that has not ended, or one whose end it was not given yet: a recovery wakes it
    /// (even from hibernation) to settle them.
    pub jobs_pending: bool,
}

impl AliveAgent {
    /// What the store lists of an agent's record.
    pub fn of(record: &AgentRecord) -> Self {
        Self {
            agent: record.agent.clone(),
            agent_type: record.agent_type.clone(),
            asleep: record.asleep,
            parent: record.parent(),
            next_due: None,
            jobs_pending: false,
        }
    }
}

/// An agent to bring back as a store lists it, from the columns it keeps: an id that does not read is a typed
/// error; a parent that does not read orders nothing; a due time that does not read wakes the agent at once
/// (which then arms its schedules itself).
pub(crate) fn alive_agent(
    agent: String,
    agent_type: String,
    asleep: bool,
    parent: Option<String>,
    due: Option<String>,
    jobs_pending: bool,
) -> Result<AliveAgent, StoreError> {
    let agent = AgentId::new(agent).map_err(|e| StoreError::Decode { what: "agent id", message: e.to_string() })?;
    let parent = parent.and_then(|p| AgentId::new(p).ok());
    let next_due = due.map(|d| DateTime::parse_from_rfc3339(&d).map_or_else(|_| Utc::now(), |d| d.with_timezone(&Utc)));
    Ok(AliveAgent { agent, agent_type, asleep, parent, next_due, jobs_pending })
}

impl AgentRecord {
    /// The agent that spawned it, read from its spawn settings.
    pub fn parent(&self) -> Option<AgentId> {
        self.spawn.get("parent").and_then(|p| serde_json::from_value(p.clone()).ok())
    }
}

/// A schedule armed by an agent: the signal to feed it at `due`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScheduleRecord {
    /// Whose schedule.
    pub agent: AgentId,
    /// The schedule's key (a new schedule with the same key replaces it).
    pub key: String,
    /// When it fires.
    pub due: DateTime<Utc>,
    /// What it feeds the agent.
    pub signal: Signal,
    /// Whether it fires late or is skipped when the runtime was down at `due`.
    #[serde(default)]
    pub if_missed: crate::effect::IfMissed,
}

/// What the recovery needs to start a run again, or to tell its requester how it ended: kept with the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunPlan {
    /// The run's idempotency key.
    pub key: String,
    /// Its params.
    pub params: Value,
    /// Whether the agent itself asked for it (its outcome goes to the agent); otherwise a routine or an outside
    /// caller did, and that caller did not survive the process.
    pub by_agent: bool,
    /// The signal whose handling asked for it.
    pub cause: Option<Uuid>,
    /// Its signal chain.
    pub correlation: Uuid,
}

/// What starting a job again after a crash needs, kept with it from its submission on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobPlan {
    /// The idempotency key of the job's run (the same when it is started again).
    pub key: String,
    /// Its params.
    pub params: Value,
    /// The call stack of the run that submitted it: the job's run is one level below it.
    pub stack: Vec<crate::action::Frame>,
    /// The signal chain of the run that submitted it.
    pub correlation: Uuid,
    /// Whether the run that submitted it was asked for from outside the agent (the job meets the policy's
    /// `deny_outside` too).
    pub from_outside: bool,
}

/// A job as the journal kept it: its record as last written, its plan, and once it ended the signal for its
/// agent and whether the agent consumed it.
#[derive(Debug, Clone, PartialEq)]
pub struct KeptJob {
    /// Its record.
    pub record: crate::action::JobRecord,
    /// How to start it again.
    pub plan: JobPlan,
    /// The `job.*` signal for its agent, once it ended.
    pub end: Option<Signal>,
    /// Whether the agent's `step` consumed that signal.
    pub told: bool,
}

/// A run's plan as the server has it when it journals the run (see [`Durable::run_planned_parts`]): a
/// [`RunPlan`] whose params are the JSON text the server made of them anyway (for their digest).
#[derive(Debug, Clone, Copy)]
pub struct PlanParts<'a> {
    /// The run's idempotency key.
    pub key: &'a str,
    /// Its params, as compact JSON text.
    pub params_json: &'a [u8],
    /// Whether the agent itself asked for it.
    pub by_agent: bool,
    /// The signal whose handling asked for it.
    pub cause: Option<Uuid>,
    /// Its signal chain.
    pub correlation: Uuid,
}

/// A run's record with what the recovery needs beside it: its plan and, once it ended, the outcome signal for
/// the agent and whether the agent was given it.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyedRun {
    /// The run's record.
    pub record: RunRecord,
    /// How to start it again (`None` for a run journaled without one).
    pub plan: Option<RunPlan>,
    /// The outcome signal for the agent, once it ended.
    pub outcome: Option<Signal>,
    /// Whether the agent's `step` consumed that outcome signal.
    pub delivered: bool,
}

/// Everything that brings one agent back, read at once (see [`Durable::revivals`]).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Revival {
    /// How it was spawned; `None` if it is not to be brought back.
    pub record: Option<AgentRecord>,
    /// Its latest snapshot.
    pub snapshot: Option<Snapshot>,
    /// The inputs logged after that snapshot, in order.
    pub inputs: Vec<(u64, Signal)>,
    /// Its armed schedules.
    pub schedules: Vec<ScheduleRecord>,
    /// Its runs the recovery must look at: those that had not ended, those whose outcome it was not given yet,
    /// and those its inputs after the snapshot asked for (their idempotency keys name those inputs).
    pub runs: Vec<KeyedRun>,
    /// Its jobs, oldest first: those that have not ended, those whose end it was not given, and ended ones
    /// still listed.
    pub jobs: Vec<KeptJob>,
    /// The signals it emitted to agents elsewhere that were not sent on yet ([`Durable::sending`]), in the
    /// order it made them, each with its target.
    pub unsent: Vec<(AgentId, Signal)>,
}

/// The part of a store that outlives the process. Writes are queued and made durable in order, in batches;
/// reads see every write made before them. Like [`Store`](super::Store)'s, its writers take the runtime's
/// [`JournalPen`].
pub trait Durable: Send + Sync + 'static {
    /// Resolves once everything written so far is durable.
    fn flushed(&self) -> Flushed;
    /// Resolves once everything written so far is durable, and fails if `agent`'s writes were not kept: a
    /// journal that several nodes share refuses the writes of an agent whose lease this node lost (see
    /// [`super::Fence`]). The same as [`Durable::flushed`] for a journal that writes for every agent; a store
    /// that wraps another must pass this on, or the fence's refusals go unheard.
    fn flushed_for(&self, agent: &AgentId) -> Flushed {
        let _ = agent;
        self.flushed()
    }
    /// The agents a failed commit leaves ahead of the journal (see [`Durable::caught_up`]): given once, to the
    /// runtime, which brings each back from the journal. `None` for a journal whose commits cannot fail, or
    /// once taken. A store that wraps another must pass this and [`Durable::caught_up`] on, or those agents
    /// are never brought back and their writes stay held back.
    fn fallen_behind(&self, pen: &JournalPen) -> Option<tokio::sync::mpsc::UnboundedReceiver<AgentId>> {
        let _ = pen;
        None
    }
    /// An agent that fell behind was brought back from the journal: its writes, held back since its commit
    /// failed (so that its input log has no hole), are kept again from here on.
    fn caught_up(&self, pen: &JournalPen, agent: &AgentId) {
        let _ = (pen, agent);
    }
    /// Logs the input an agent's `step` consumed as number `seq` (1, 2, 3, ... per agent).
    fn append_input(&self, pen: &JournalPen, agent: &AgentId, seq: u64, signal: &Signal);
    /// Replaces the agent's snapshot.
    fn save_snapshot(&self, pen: &JournalPen, snapshot: Snapshot);
    /// An agent was spawned: it is to be brought back after a crash, from `initial` (its state as it starts).
    /// Whatever was kept for an earlier agent of the same id (inputs, schedules) is dropped.
    fn agent_spawned(&self, pen: &JournalPen, record: AgentRecord, initial: Snapshot);
    /// An agent's spawn settings changed (its policy).
    fn agent_alive(&self, pen: &JournalPen, record: AgentRecord);
    /// An agent stopped for good: it is not brought back, and its log, snapshot and schedules are dropped.
    fn agent_ended(&self, pen: &JournalPen, agent: &AgentId);
    /// Arms (or replaces) a schedule.
    fn schedule_armed(&self, pen: &JournalPen, schedule: ScheduleRecord);
    /// A schedule fired or was cancelled.
    fn schedule_cleared(&self, pen: &JournalPen, agent: &AgentId, key: &str);
    /// Keeps with a journaled run what starting it again needs.
    fn run_planned(&self, pen: &JournalPen, run: Uuid, plan: &RunPlan);
    /// [`Durable::run_planned`] for a plan whose params are JSON text already (the server makes it for their
    /// digest), so a store that keeps plans as text need not build the params and serialize them again. By
    /// default the params are read back and the plan kept through [`Durable::run_planned`].
    fn run_planned_parts(&self, pen: &JournalPen, run: Uuid, parts: PlanParts<'_>) {
        match serde_json::from_slice(parts.params_json) {
            Ok(params) => {
                let PlanParts { key, by_agent, cause, correlation, .. } = parts;
                self.run_planned(pen, run, &RunPlan { key: key.to_owned(), params, by_agent, cause, correlation });
            }
            Err(err) => tracing::error!(%run, %err, "a run's params could not be read back for its plan"),
        }
    }
    /// Keeps the outcome signal of an ended run of `agent`, for it (not yet consumed). `safe_again` says whether
    /// starting the run again after a crash is safe: its action has no side effects (or idempotent ones) and
    /// nothing the run asked for (its effects) was done. A store may then make the run's end durable a little
    /// later, while the agent has not consumed the outcome, since a crash before that starts the run again with
    /// the same key; but never after a later snapshot of its agent is durable (the snapshot folds in the input
    /// that asked for the run). A run that is not safe to start again is kept with the next commit.
    fn run_outcome(&self, pen: &JournalPen, agent: &AgentId, run: Uuid, outcome: &Signal, safe_again: bool);
    /// A job was submitted: kept, with what starting it again needs, until its agent ends or it is purged.
    fn job_submitted(&self, pen: &JournalPen, record: &crate::action::JobRecord, plan: &JobPlan);
    /// A job changed (it started, made progress, ended). `end`: the signal for its agent, when it ended (kept
    /// until the agent consumes it, see [`Durable::job_told`]).
    fn job_changed(&self, pen: &JournalPen, record: &crate::action::JobRecord, end: Option<&Signal>);
    /// The agent consumed the end signal of its job `job`.
    fn job_told(&self, pen: &JournalPen, agent: &AgentId, job: Uuid);
    /// Drops the jobs that ended (and whose end their agent consumed) at or before `before`.
    fn jobs_purged(&self, pen: &JournalPen, before: DateTime<Utc>);
    /// Keeps `signal`, which `agent` emitted to `to`, an agent this runtime does not run, until
    /// [`Durable::sent_on`] says it was sent on. Written before the input whose handling made it, so an input the
    /// journal keeps never lost its emits: a recovery of `agent` finds those not sent on yet in
    /// [`Revival::unsent`] and sends them again, under the same ids.
    fn sending(&self, pen: &JournalPen, agent: &AgentId, to: &AgentId, signal: &Signal);
    /// The signal `signal` that `agent` emitted elsewhere ([`Durable::sending`]) was sent on: it is forgotten.
    fn sent_on(&self, pen: &JournalPen, agent: &AgentId, signal: Uuid);
    /// Logs as input `seq` the outcome signal kept for `run` ([`Durable::run_outcome`]): the agent consumed it.
    /// A store that still holds the signal as it kept it can log it from there, without encoding it again; by
    /// default it is logged like any input.
    fn append_kept_outcome(&self, pen: &JournalPen, agent: &AgentId, seq: u64, run: Uuid, signal: &Signal) {
        let _ = run;
        self.append_input(pen, agent, seq, signal);
    }

    /// The agents to bring back, a page at a time in the order of their ids: at most `limit` of those whose id
    /// comes after `after` (from the first with `None`). A recovery of millions of sleepers holds one page.
    fn alive(&self, after: Option<&AgentId>, limit: usize) -> Result<Vec<AliveAgent>, StoreError>;
    /// One agent's record, if it is to be brought back.
    fn agent(&self, agent: &AgentId) -> Result<Option<AgentRecord>, StoreError>;
    /// An agent's latest snapshot.
    fn snapshot(&self, agent: &AgentId) -> Result<Option<Snapshot>, StoreError>;
    /// An agent's inputs after number `after`, in order.
    fn inputs_after(&self, agent: &AgentId, after: u64) -> Result<Vec<(u64, Signal)>, StoreError>;
    /// An agent's armed schedules.
    fn schedules(&self, agent: &AgentId) -> Result<Vec<ScheduleRecord>, StoreError>;
    /// What brings each of these agents back, in their order, each read after every write made before this
    /// call, in one trip to the store: a recovery reads a few hundred agents at a time, a thaw one. An agent
    /// whose rows do not decode gets its own error; the others are unaffected.
    fn revivals(&self, agents: &[AgentId]) -> Result<Vec<Result<Revival, StoreError>>, StoreError>;
}
