//! The error of the runtime's operations (spawning, mounting through a server, calls, approvals).

use crate::agent::StartError;
use crate::id::{AgentId, SkillId};
use crate::skill::MountError;
use std::time::Duration;
use uuid::Uuid;

/// Why a runtime operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuntimeError {
    /// An approval was not given: what the approver saw is not what the run would run now (its contract
    /// changed, and it was asked about again; or the digest given is not the run's).
    #[error(
        "run {run} was not approved: {why}; expected an approval of what the run would run now (see the latest \
         `approval_asked` event for its contract, params and digest)"
    )]
    ApprovalStale {
        /// The run.
        run: Uuid,
        /// What changed.
        why: String,
    },
    /// The agent holds as much of something as its policy allows (see [`crate::policy::Limits`]).
    #[error(
        "agent `{agent}` holds as many {what} as its policy allows ({limit}, `limits.{knob}`); nothing was added, \
         expected some of them to be used up first or a policy with a higher limit"
    )]
    LimitReached {
        /// The agent.
        agent: AgentId,
        /// What it holds too many of, in words.
        what: &'static str,
        /// The policy's knob for it, a field of [`crate::policy::Limits`].
        knob: &'static str,
        /// The limit.
        limit: u64,
    },
    /// An agent with this id (or name) already runs.
    #[error("agent `{0}` already exists; expected a new id and name")]
    AlreadyExists(String),
    /// No agent with this id runs.
    #[error("agent `{0}` is not running")]
    NoSuchAgent(AgentId),
    /// The agent exists but is of another type than the one asked for.
    #[error("agent `{0}` is of another type than the one asked for")]
    WrongType(AgentId),
    /// A skill is not in the runtime's catalog.
    #[error(
        "skill `{0}` is not in the runtime's catalog; add it with `RuntimeBuilder::skill` (or `Runtime::add_skill` \
         while it runs)"
    )]
    UnknownSkill(SkillId),
    /// An agent type is not registered.
    #[error("agent type `{0}` is not registered; expected it added with `RuntimeBuilder::agent`")]
    UnknownAgentType(String),
    /// Mounting or unmounting failed.
    #[error(transparent)]
    Mount(#[from] MountError),
    /// The agent could not start.
    #[error(transparent)]
    Start(#[from] StartError),
    /// An action id given as text is malformed.
    #[error("bad action id: {0}")]
    BadAction(#[from] crate::id::IdError),
    /// A skill with this id is in the catalog already.
    #[error("skill `{0}` is in the runtime's catalog already; expected a new id, or `refresh_skill` to replace it")]
    SkillExists(SkillId),
    /// A run asked for from outside the agent with no caller to tell (`Runtime::invoke`) needs approval.
    #[error(
        "action `{action}` on agent `{agent}` needs approval (risk {risk:?}); run {run} was refused, since a caller \
         outside the agent with no way to be told it waits cannot wait for one; expected `Runtime::invoke_with` \
         and a `Caller`, whose run then waits for the operator's approval"
    )]
    NeedsApproval {
        /// The agent.
        agent: AgentId,
        /// The action.
        action: crate::id::ActionId,
        /// The risk that asks for approval.
        risk: crate::action::Risk,
        /// The refused run, journaled as blocked.
        run: Uuid,
    },
    /// No run of this id waits for approval.
    #[error("run {0} is not waiting for approval")]
    NotAwaitingApproval(Uuid),
    /// A `call` got no reply in time.
    #[error("agent `{agent}` did not reply within {}ms", timeout.as_millis())]
    Timeout {
        /// The agent called.
        agent: AgentId,
        /// How long the caller waited.
        timeout: Duration,
    },
    /// The agent stopped before it answered.
    #[error("agent `{0}` stopped before it answered")]
    Stopped(AgentId),
    /// A signal from outside the runtime claimed one of the runtime's own kinds or its source.
    #[error(
        "a signal of kind `{kind}` from `{claimed}` was refused: kinds in the `action.`, `job.` and `agent.` \
         namespaces and sources starting with `agentry` are the runtime's own; expected a kind and source of yours"
    )]
    Forged {
        /// The signal's kind.
        kind: String,
        /// The source the signal claimed.
        claimed: String,
    },
    /// The agent's own code panicked while the runtime ran it outside its signal handler (a skill's state init
    /// while mounting, say); the agent's state is as it was, and its restart policy was applied.
    #[error("agent `{agent}` panicked while {during}; nothing was changed")]
    Panicked {
        /// The agent.
        agent: AgentId,
        /// What it was doing.
        during: String,
    },
    /// The agent's actor could not be started.
    #[error("the actor of agent `{agent}` could not start: {message}")]
    Spawn {
        /// The agent.
        agent: AgentId,
        /// ractor's message.
        message: String,
    },
    /// The runtime's claim before a spawn refused it (see [`crate::runtime::RuntimeBuilder::claim_before_spawn`]):
    /// in a cluster, another node holds the id, or the journal has it already.
    #[error("agent `{agent}` was not started: {reason}")]
    NotClaimed {
        /// The agent.
        agent: AgentId,
        /// Why not.
        reason: String,
    },
    /// The agent cannot hibernate now: something is going on.
    #[error("agent `{agent}` cannot hibernate: {why}; expected an idle agent (no signal waiting, nothing in flight)")]
    Busy {
        /// The agent.
        agent: AgentId,
        /// What is going on.
        why: String,
    },
    /// The durable store failed to keep or give back what an agent needs.
    #[error("the store failed for agent `{agent}`: {message}")]
    Store {
        /// The agent.
        agent: AgentId,
        /// What failed.
        message: String,
    },
    /// A snapshot of an agent's state cannot be read by this build of its type.
    #[error(
        "the snapshot of agent `{agent}` ({agent_type}) was written by state version {stored}, and version {current} cannot read it: {message}"
    )]
    SnapshotVersion {
        /// The agent.
        agent: AgentId,
        /// Its type's name.
        agent_type: String,
        /// The version that wrote the snapshot.
        stored: u32,
        /// This build's version ([`crate::agent::Agent::version`]).
        current: u32,
        /// Why it could not be read.
        message: String,
    },
}

/// The runtime's error for an actor that did not start: the server's own when it refused (an id or name
/// taken), else ractor's message.
pub(crate) fn spawn_error(agent: &AgentId, error: ractor::SpawnErr) -> RuntimeError {
    if let ractor::SpawnErr::StartupFailed(cause) = &error
        && let Some(refused) = cause.downcast_ref::<RuntimeError>()
    {
        return refused.clone();
    }
    RuntimeError::Spawn { agent: agent.clone(), message: error.to_string() }
}
