//! The messages an agent's server takes, typed ([`ServerMsg`]) and type-erased ([`Untyped`], what the runtime
//! can send any agent without knowing its type), and what a request for a run carries: the one road every run
//! takes, whoever asked for it.

use crate::action::{ActionContext, ActionError, ActionSpec, DynAction, Outcome};
use crate::agent::Agent;
use crate::effect::Effect;
use crate::error::RuntimeError;
use crate::id::{ActionId, SkillId};
use crate::policy::Policy;
use crate::signal::Signal;
use crate::skill::AgentState;
use ractor::RpcReplyPort;
use serde_json::Value;
use tokio::sync::oneshot;
use uuid::Uuid;

/// The messages an agent server takes. Built by the runtime's handles; never by users.
pub(crate) enum ServerMsg<A: Agent> {
    /// A signal to handle. (Boxed, as in the other messages that carry a signal: the actor's loop keeps room
    /// for the largest message in every idle agent, so a message stays a few words long.)
    Signal(Box<Signal>),
    /// A signal whose handling should answer through a `Reply` effect.
    Call(Box<Signal>, RpcReplyPort<Value>),
    /// Mount a skill from the catalog with options.
    Mount(Box<(SkillId, Value)>, RpcReplyPort<Result<(), RuntimeError>>),
    /// Unmount a skill.
    Unmount(SkillId, RpcReplyPort<Result<(), RuntimeError>>),
    /// A copy of the agent's state.
    Snapshot(RpcReplyPort<AgentState<A>>),
    /// Approve (`true`) or deny a run that waits for approval.
    Decide(Uuid, Verdict, RpcReplyPort<Result<(), RuntimeError>>),
    /// A run that waits for approval waited too long.
    ApprovalExpired(Uuid),
    /// A run a rate limit held may meet the gate again.
    Throttled(Uuid),
    /// A schedule's time came: its key and signal.
    Fire(String, Box<Signal>),
    /// Hibernate if idle (for at least the duration, when one is given); the sender, if any, is told.
    Hibernate(Option<oneshot::Sender<Result<(), RuntimeError>>>, Option<std::time::Duration>),
    /// A run ended (sent by the run's own task): its report, and the outside caller waiting for it, if any.
    Finished(Box<crate::action::RunReport>, Option<Invoker>),
    /// Stop taking runs and let the running ones finish; the sender is told once none is left.
    Drain(oneshot::Sender<()>),
    /// A run asked for by someone other than the agent's own `step` (a routine, an outside caller).
    Request(Box<RunRequest>),
    /// Effects a job's run asked for, and whether the job was an outside caller's doing.
    Effects(Vec<Effect>, bool),
    /// The catalog holds a new build of this skill: bring it up to date if it is mounted.
    Refresh(SkillId, oneshot::Sender<Result<(), RuntimeError>>),
    /// The contracts of the actions in the live table, sorted by id.
    Actions(oneshot::Sender<Vec<ActionSpec>>),
    /// Replace the agent's policy; runs queued or waiting for approval are gated again when they start.
    SetPolicy(Box<Policy>, oneshot::Sender<()>),
    /// See [`Untyped::AlwaysAllow`].
    AlwaysAllow(ActionId, oneshot::Sender<usize>),
    /// The agent's parent has this policy now: narrow the agent's to fit within it.
    NarrowPolicy(std::sync::Arc<Policy>),
    /// Outcome signals made while handling a message, still to be fed (more than one turn's budget).
    Settle,
    /// The skills mounted now, with their versions.
    Mounted(oneshot::Sender<Vec<(SkillId, semver::Version)>>),
}

// With ractor's `cluster` feature (on once the cluster crate is in the build), every message type says it is one;
// an agent's messages never cross the wire (the cluster's gate does, and hands them on here).
#[cfg(feature = "cluster")]
impl<A: Agent> ractor::Message for ServerMsg<A> {}

/// An approver's answer: approve or deny, and, for an approval bound to what the approver saw, its digest
/// ([`crate::action::approval_digest`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Verdict {
    pub approve: bool,
    pub seen: Option<Uuid>,
}

/// What the runtime can tell an agent without knowing its type.
pub(crate) enum Untyped {
    /// A signal to handle.
    Signal(Signal),
    /// A signal to handle, whose `Reply` answers the port (see [`ServerMsg::Call`]).
    Call(Box<Signal>, ractor::RpcReplyPort<Value>),
    /// Start draining (see [`ServerMsg::Drain`]); the sender is told once nothing runs.
    Drain(oneshot::Sender<()>),
    /// A run asked for by a routine or an outside caller.
    Request(Box<RunRequest>),
    /// Effects a job's run asked for, and whether the job was an outside caller's doing.
    Effects(Vec<Effect>, bool),
    /// Bring a refreshed skill up to date.
    Refresh(SkillId, oneshot::Sender<Result<(), RuntimeError>>),
    /// The contracts of the live table's actions.
    Actions(oneshot::Sender<Vec<ActionSpec>>),
    /// Replace the agent's policy.
    SetPolicy(Box<Policy>, oneshot::Sender<()>),
    /// Let an action run without approval from now on, and approve its runs waiting (see
    /// [`crate::runtime::Runtime::always_allow`]); told how many it approved.
    AlwaysAllow(ActionId, oneshot::Sender<usize>),
    /// Narrow the agent's policy to its parent's (see [`ServerMsg::NarrowPolicy`]).
    NarrowPolicy(std::sync::Arc<Policy>),
    /// Hibernate if idle (see [`ServerMsg::Hibernate`]).
    Hibernate(Option<oneshot::Sender<Result<(), RuntimeError>>>, Option<std::time::Duration>),
    /// Approve (`true`) or deny a run that waits for approval.
    Decide(Uuid, Verdict, oneshot::Sender<Result<(), RuntimeError>>),
    /// The skills mounted now, with their versions, sorted by id.
    Mounted(oneshot::Sender<Vec<(SkillId, semver::Version)>>),
}

impl<A: Agent> From<Untyped> for ServerMsg<A> {
    fn from(message: Untyped) -> Self {
        match message {
            Untyped::Signal(signal) => Self::Signal(Box::new(signal)),
            Untyped::Call(signal, reply) => Self::Call(signal, reply),
            Untyped::Drain(done) => Self::Drain(done),
            Untyped::Request(request) => Self::Request(request),
            Untyped::Effects(effects, outside) => Self::Effects(effects, outside),
            Untyped::Refresh(skill, done) => Self::Refresh(skill, done),
            Untyped::Actions(reply) => Self::Actions(reply),
            Untyped::SetPolicy(policy, done) => Self::SetPolicy(policy, done),
            Untyped::AlwaysAllow(action, done) => Self::AlwaysAllow(action, done),
            Untyped::NarrowPolicy(parent) => Self::NarrowPolicy(parent),
            Untyped::Hibernate(done, idle) => Self::Hibernate(done, idle),
            Untyped::Decide(run, verdict, done) => Self::Decide(run, verdict, done.into()),
            Untyped::Mounted(reply) => Self::Mounted(reply),
        }
    }
}

/// A request for one run: which action, with which params, and who asked (where its outcome goes).
pub(crate) struct RunRequest {
    pub action: ActionId,
    pub params: Value,
    pub by: Requester,
    /// Where the run's idempotency key comes from.
    pub key: crate::action::RunKey,
}

/// Who asked for a run, which decides where its outcome (or its refusal) goes.
pub(crate) enum Requester {
    /// The agent itself, through a `Run` effect of the signal with these ids: the outcome comes back to it as an
    /// `action.*` signal caused by that signal.
    Agent {
        /// The correlation id of the chain the run belongs to (`None`: the run starts a chain of its own).
        correlation: Option<Uuid>,
        /// The signal whose effects asked for the run, if any.
        cause: Option<Uuid>,
    },
    /// A running action calling another through its context (a routine): told when the call may run (it then
    /// runs in the caller's task) or why not.
    Routine {
        /// The calling run's context.
        caller: Box<ActionContext>,
        /// Where the caller waits.
        reply: oneshot::Sender<Result<Admitted, ActionError>>,
    },
    /// A caller outside the agent (an MCP client, a command line), which waits for the outcome; the agent gets
    /// no signal for the run. The run (and every call it makes) can reach the caller if one is given.
    Outside(Invoker, Option<crate::action::Caller>),
}

/// A nested call the gate let through: the action and the context of its run.
pub(crate) struct Admitted {
    pub action: DynAction,
    pub ctx: ActionContext,
}

/// Where the outcome of a run asked for from outside the agent goes.
pub(crate) type Invoker = oneshot::Sender<Result<Outcome, RuntimeError>>;
