//! The runtime's own signal kinds: one name each, one constructor each, and the rule that reserves them.
//!
//! Only the agent's server (or the simulator, which drives the same semantics) makes signals of these kinds; an agent's `Emit` or `Schedule`, an action's
//! [`ActionContext::effect`](crate::ActionContext::effect) and an outside `send` or `call` asking for one are
//! refused with a typed error. So an agent can trust that an `action.completed` it gets is a run that really
//! completed. Every kind in the `action.`, `job.` and `agent.` namespaces is reserved, including ones the
//! runtime does not make yet.
//!
//! ```
//! use agentry::kinds;
//! assert!(kinds::is_reserved(kinds::ACTION_COMPLETED));
//! assert!(kinds::is_reserved("job.anything"));
//! assert!(!kinds::is_reserved("order.placed"));
//! ```

pub use crate::contract::RunReport;
use crate::contract::{JobRecord, JobStatus, OutcomeStatus};
use crate::id::{AgentId, SkillId};
use crate::signal::{Kind, KindError, Signal};
use serde_json::json;
use std::sync::{Arc, LazyLock};
use uuid::Uuid;

pub(crate) mod stamped;
pub(crate) use stamped::{Stamp, child_exited_at, made, mount_failed_at, spawn_failed_at};

/// A run the agent asked for completed; `data` is `{run_id, action, outcome}` (see [`Signal::outcome`]).
pub const ACTION_COMPLETED: &str = "action.completed";
/// A run the agent asked for failed (after its retries); `data` as for [`ACTION_COMPLETED`].
pub const ACTION_FAILED: &str = "action.failed";
/// A run the agent asked for was refused by the gate or denied by its approver (status `Blocked`), or waits for
/// approval (status `AwaitingApproval`, no error: not an end); `data` as for [`ACTION_COMPLETED`].
pub const ACTION_BLOCKED: &str = "action.blocked";
/// A job of the agent completed; `data` is `{job}` (a [`JobRecord`]).
pub const JOB_COMPLETED: &str = "job.completed";
/// A job of the agent failed; `data` is `{job}`.
pub const JOB_FAILED: &str = "job.failed";
/// A job of the agent was cancelled; `data` is `{job}`.
pub const JOB_CANCELLED: &str = "job.cancelled";
/// A child of the agent stopped; `data` is `{child, reason}`.
pub const AGENT_CHILD_EXITED: &str = "agent.child_exited";
/// A `SpawnAgent` effect of the agent failed; `data` is `{child, error}`.
pub const AGENT_SPAWN_FAILED: &str = "agent.spawn_failed";

/// A `MountSkill` or `UnmountSkill` effect of the agent was refused (a skill missing from the catalog, one its
/// policy denies, a missing requirement, …); `data` is `{skill, effect, error}`, `effect` being `mount_skill` or
/// `unmount_skill`. It follows the signal whose handling asked for the change.
pub const AGENT_MOUNT_FAILED: &str = "agent.mount_failed";

/// The namespaces (first kind segments) the runtime keeps for itself.
pub const RESERVED_NAMESPACES: [&str; 3] = ["action", "job", "agent"];

/// Whether a kind is the runtime's: its first segment is one of [`RESERVED_NAMESPACES`].
pub fn is_reserved(kind: &str) -> bool {
    let first = kind.split('.').next().unwrap_or(kind);
    RESERVED_NAMESPACES.contains(&first)
}

/// The source of every signal the runtime itself makes starts with this (`agentry/agent/<id>` for an agent's
/// server). A signal from outside may not claim it.
pub const RUNTIME_SOURCE: &str = "agentry";

/// Whether a source claims to be the runtime (`agentry`, or `agentry/...`).
pub fn is_runtime_source(source: &str) -> bool {
    source == RUNTIME_SOURCE || source.starts_with("agentry/")
}

/// The source of a signal emitted or scheduled by a run a caller outside the agent asked for (with
/// `Runtime::invoke`, or over MCP): the runtime's, so no caller can forge it, and never the agent's own, so a
/// caller cannot pass what it schedules off as the agent's.
pub const OUTSIDE_SOURCE: &str = "agentry/outside";

/// The source of the signals an agent's server makes, and of the signals the agent emits or schedules.
pub fn agent_source(agent: &AgentId) -> Arc<str> {
    format!("{RUNTIME_SOURCE}/agent/{agent}").into()
}

/// A fresh id and the time now: what the live server stamps its signals with (it is not pure: its signals get
/// fresh ids rather than ones derived from their cause and data). The simulator stamps them from its seeded
/// generator and virtual clock instead.
fn now() -> Stamp {
    crate::wall_clock::stamp()
}

/// [`action_outcome_at`](stamped::action_outcome_at) for a run whose report is made already, in the box the signal keeps it in (the live
/// server's runs: the outcome is written once, where it stays, rather than handed on through every step between
/// the run's end and its signal). `chain`: the correlation and causation of the signal that asked for the run.
pub(crate) fn report_signal(
    source: &Arc<str>,
    (correlation, causation): (Uuid, Option<Uuid>),
    mut report: Box<RunReport>,
    (id, time): Stamp,
) -> Option<Signal> {
    // The three kinds are parsed once and shared: an outcome signal allocates no text for its kind.
    static KINDS: LazyLock<Result<[Kind; 3], KindError>> =
        LazyLock::new(|| Ok([Kind::new(ACTION_COMPLETED)?, Kind::new(ACTION_FAILED)?, Kind::new(ACTION_BLOCKED)?]));
    let kinds = match &*KINDS {
        Ok(kinds) => kinds,
        Err(err) => {
            tracing::error!(%err, "a runtime signal kind is invalid");
            return None;
        }
    };
    let kind = match report.outcome.status {
        OutcomeStatus::Completed => &kinds[0],
        OutcomeStatus::Failed => &kinds[1],
        OutcomeStatus::Blocked | OutcomeStatus::AwaitingApproval => &kinds[2],
    };
    // What the JSON form would say of a cost that is not a number (`null`), so both forms read the same.
    report.outcome.cost = report.outcome.cost.filter(|cost| cost.is_finite());
    // Made whole, as `made` would make it through a builder (one made for every run, so without the builder's
    // hand-overs of itself): a signal with a cause correlates with the cause's chain, one without with itself.
    let chain = match causation {
        Some(causation) => (correlation, Some(causation)),
        None => (id, None),
    };
    Some(Signal::from_outcome_parts(id, kind.clone(), source.clone(), None, time, chain, report))
}

/// The `job.completed`, `job.failed` or `job.cancelled` signal for a job that ended.
pub(crate) fn job_ended(source: &Arc<str>, record: &JobRecord) -> Option<Signal> {
    let kind = match record.status {
        JobStatus::Completed => JOB_COMPLETED,
        JobStatus::Cancelled => JOB_CANCELLED,
        _ => JOB_FAILED,
    };
    made(Signal::builder(kind).data(json!({"job": record})), source, None, now())
}

/// The job whose end `signal` tells its agent, if it is a `job.completed`, `job.failed` or `job.cancelled`
/// signal.
pub(crate) fn ended_job(signal: &Signal) -> Option<uuid::Uuid> {
    if !matches!(signal.kind().as_str(), JOB_COMPLETED | JOB_FAILED | JOB_CANCELLED) {
        return None;
    }
    signal.data().get("job")?.get("id")?.as_str()?.parse().ok()
}

/// The `agent.child_exited` signal a parent gets when its child stops.
pub(crate) fn child_exited(source: &Arc<str>, child: &AgentId, reason: &str) -> Option<Signal> {
    child_exited_at(source, child, reason, now())
}

/// The `agent.spawn_failed` signal an agent gets when its `SpawnAgent` effect failed.
pub(crate) fn spawn_failed(source: &Arc<str>, child: &AgentId, error: &str) -> Option<Signal> {
    spawn_failed_at(source, child, error, now())
}

/// [`mount_failed_at`](stamped::mount_failed_at) stamped now.
pub(crate) fn mount_failed(
    source: &Arc<str>,
    change: (&SkillId, bool),
    error: &str,
    cause: Option<&Signal>,
) -> Option<Signal> {
    mount_failed_at(source, change, error, cause, now())
}
