//! The runtime's own signals, stamped with the id and time their driver gives: the one shape of each, for the
//! agent's server (which stamps them from the wall clock) and for another driver of agents (the simulator,
//! which stamps them from its seeded generator and virtual clock). Reached from outside the crate through
//! [`agentry::driver`](crate::driver).

use super::{AGENT_CHILD_EXITED, AGENT_MOUNT_FAILED, AGENT_SPAWN_FAILED, report_signal};
use crate::contract::{Outcome, RunReport};
use crate::id::{ActionId, AgentId, SkillId};
use crate::signal::{Signal, SignalBuilder};
use chrono::{DateTime, Utc};
use serde_json::json;
use std::sync::Arc;
use uuid::Uuid;

/// What a driver (the agent's server, or the simulator) knows of a run when it tells the agent how it ended.
pub struct RunRef<'a> {
    /// The run.
    pub run: Uuid,
    /// Its action.
    pub action: &'a ActionId,
    /// The correlation of the signal that asked for it.
    pub correlation: Uuid,
    /// The signal that asked for it, if a signal did.
    pub causation: Option<Uuid>,
}

/// The id and time a runtime-made signal is stamped with.
pub type Stamp = (Uuid, DateTime<Utc>);

/// A runtime-made signal: its source, its stamp, and the cause it follows, if any.
pub(crate) fn made(
    builder: SignalBuilder,
    source: &Arc<str>,
    cause: Option<(Uuid, Uuid)>,
    (id, time): Stamp,
) -> Option<Signal> {
    let mut builder = builder.source(source.clone());
    if let Some((correlation, causation)) = cause {
        builder = builder.caused_by(correlation, causation, time);
    }
    builder.stamped(id, time).build().map_err(|err| tracing::error!(%err, "a runtime signal kind is invalid")).ok()
}

/// The `action.completed`, `action.failed` or `action.blocked` signal that tells an agent how its run ended,
/// caused by the signal that asked for the run, stamped as the caller says: the one shape of an outcome
/// signal, for every driver (the live server stamps it with the time the run ended).
pub fn action_outcome_at(source: &Arc<str>, run: RunRef<'_>, outcome: Outcome, stamp: Stamp) -> Option<Signal> {
    let report = Box::new(RunReport { run_id: run.run, action: run.action.clone(), outcome });
    report_signal(source, (run.correlation, run.causation), report, stamp)
}

/// The `agent.child_exited` signal a parent gets when its child stops, stamped as the caller says.
pub fn child_exited_at(source: &Arc<str>, child: &AgentId, reason: &str, stamp: Stamp) -> Option<Signal> {
    made(Signal::builder(AGENT_CHILD_EXITED).data(json!({"child": child, "reason": reason})), source, None, stamp)
}

/// The `agent.spawn_failed` signal an agent gets when its `SpawnAgent` effect failed, stamped as the caller
/// says.
pub fn spawn_failed_at(source: &Arc<str>, child: &AgentId, error: &str, stamp: Stamp) -> Option<Signal> {
    made(Signal::builder(AGENT_SPAWN_FAILED).data(json!({"child": child, "error": error})), source, None, stamp)
}

/// The `agent.mount_failed` signal an agent gets when its `MountSkill` (`mounting`) or `UnmountSkill` effect
/// was refused with `error`, following `cause` (the signal whose handling asked for it, if one did), stamped as
/// the caller says.
pub fn mount_failed_at(
    source: &Arc<str>,
    (skill, mounting): (&SkillId, bool),
    error: &str,
    cause: Option<&Signal>,
    stamp: Stamp,
) -> Option<Signal> {
    let effect = if mounting { "mount_skill" } else { "unmount_skill" };
    let builder = Signal::builder(AGENT_MOUNT_FAILED).data(json!({"skill": skill, "effect": effect, "error": error}));
    made(builder, source, cause.map(|c| (c.correlation_id(), c.id())), stamp)
}
