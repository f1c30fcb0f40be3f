//! The caller of a run asked for from outside the agent (an MCP client, say), reachable while the run goes on:
//! an action sends it log lines and progress, and asks it for a completion from its model (sampling), for input
//! from its user (elicitation), or to approve a risky run. The runtime only forwards these as plain data on a
//! channel; whoever made the [`Caller`] (the MCP server) speaks to the real caller.

use super::{ActionSpec, Risk};
use crate::id::AgentId;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

/// How severe a log line is: the eight levels of syslog (RFC 5424), which MCP uses too, least severe first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogLevel {
    /// Detail for debugging.
    Debug,
    /// Normal operation.
    #[default]
    Info,
    /// Normal but significant.
    Notice,
    /// Something looks wrong.
    Warning,
    /// Something failed.
    Error,
    /// A critical condition.
    Critical,
    /// Action must be taken at once.
    Alert,
    /// The system is unusable.
    Emergency,
}

/// Who speaks in a sampling message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The user (the prompt).
    User,
    /// The model.
    Assistant,
}

/// A request for a completion from the caller's model ([`super::ActionContext::sample`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sampling {
    /// The conversation so far, as text messages.
    pub messages: Vec<(Role, String)>,
    /// A system prompt, if any.
    pub system: Option<String>,
    /// The most tokens the completion may have.
    pub max_tokens: u32,
}

impl Sampling {
    /// One user message, answered in at most `max_tokens` tokens.
    pub fn prompt(text: impl Into<String>, max_tokens: u32) -> Self {
        Self { messages: vec![(Role::User, text.into())], system: None, max_tokens }
    }
}

/// The caller's model's answer to a [`Sampling`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sampled {
    /// The completion's text (its text content; empty when the model answered with something else).
    pub text: String,
    /// The model that answered, as the caller names it.
    pub model: String,
    /// Why the model stopped (`endTurn`, `maxTokens`, …), if the caller said.
    pub stop_reason: Option<String>,
}

/// What the caller's user did with an elicitation ([`super::ActionContext::elicit`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", content = "content", rename_all = "snake_case")]
pub enum Elicited {
    /// The user submitted the form: its content, an object that fits the schema asked with.
    Accept(Value),
    /// The user said no.
    Decline,
    /// The user dismissed the question without answering.
    Cancel,
}

/// An approval the caller is asked for: a run of the agent waits on the gate for it. The answer goes to the
/// runtime like any approval ([`crate::runtime::AgentRef::approve`] or `deny`, by `run`), so it is journaled
/// and announced the same way.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalAsk {
    /// The agent whose run waits.
    pub agent: AgentId,
    /// The run that waits.
    pub run: Uuid,
    /// The contract of the action it would run.
    pub spec: ActionSpec,
    /// The risk that made the policy ask.
    pub risk: Risk,
    /// The params it would run with.
    pub params: Value,
    /// The digest of the contract, the risk and the params that an approval is bound to
    /// ([`approval_digest`](crate::action::approval_digest)).
    pub digest: Uuid,
}

/// The digest of what an approver is shown (an action's contract, the risk that made the policy ask, and the
/// params it would run with) that an approval binds: a run whose contract or risk changed since (an MCP
/// server's refresh, a new build of its skill, a new policy) is asked about again, and
/// [`Runtime::approve_seen`](crate::runtime::Runtime::approve_seen) with a digest that is not the run's is
/// refused.
pub fn approval_digest(contract: &ActionSpec, risk: Risk, params: &Value) -> Uuid {
    let all = serde_json::json!({"contract": contract, "risk": risk, "params": params});
    // Serializing a `Value` cannot fail; the name is its JSON text.
    Uuid::new_v5(&Uuid::NAMESPACE_OID, &serde_json::to_vec(&all).unwrap_or_default())
}

/// What a run sends its caller; the receiver of [`Caller::new`] gets these in order.
#[derive(Debug)]
pub enum CallerRequest {
    /// A log line from the run (or a run it called).
    Log {
        /// How severe it is.
        level: LogLevel,
        /// The action that logged it.
        logger: String,
        /// The line.
        message: String,
        /// Structured details, if any.
        fields: Option<Value>,
    },
    /// How far the run got: `progress` of `total` (a fraction of 1 when the action reports fractions).
    Progress {
        /// Done so far.
        progress: f64,
        /// The whole, when known.
        total: Option<f64>,
        /// What is going on, if said.
        message: Option<String>,
    },
    /// A completion from the caller's model; answer on `reply` (an error is what went wrong, for the action).
    Sample {
        /// What to complete.
        request: Sampling,
        /// Where the answer goes.
        reply: oneshot::Sender<Result<Sampled, String>>,
    },
    /// Input from the caller's user: a flat form described by a JSON Schema object.
    Elicit {
        /// What to ask.
        message: String,
        /// The form's schema.
        schema: Value,
        /// Where the answer goes.
        reply: oneshot::Sender<Result<Elicited, String>>,
    },
    /// Approve or deny a run (see [`ApprovalAsk`]); answered through the runtime, not on a reply channel. Sent
    /// only to a caller whose [`Approver`] is [`Approver::Caller`], for a run at or below its ceiling.
    Approve(Box<ApprovalAsk>),
    /// A run the caller asked for waits for the operator's approval (the runtime's own approvers, see
    /// [`Approver::Operator`]); nothing to answer, the call goes on once the run is decided.
    AwaitingOperator(Box<ApprovalAsk>),
}

/// Who approves the runs an outside caller asks for when the policy asks for approval. The caller never
/// approves implicitly: a caller whose user can answer questions (elicitation) still waits for the operator
/// unless whoever made the [`Caller`] chose otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Approver {
    /// The runtime's own approvers: the run waits (`AwaitingApproval`) for
    /// [`Runtime::decide`](crate::runtime::Runtime::decide) (or whoever approves through the event stream), and
    /// the caller is told so with [`CallerRequest::AwaitingOperator`].
    #[default]
    Operator,
    /// The caller's user, when the caller can elicit and the run's risk is at most `ceiling`; a riskier run
    /// waits for the operator as with [`Approver::Operator`].
    Caller {
        /// The highest risk the caller's user may approve.
        ceiling: Risk,
    },
}

impl Approver {
    /// Whether a caller that `can` answer what it says may approve a run at `risk`.
    pub fn lets_caller_approve(self, can: CallerCan, risk: Risk) -> bool {
        matches!(self, Self::Caller { ceiling } if can.elicit && risk <= ceiling)
    }
}

/// What a caller can answer besides log lines and progress, which every caller takes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallerCan {
    /// It has a model to sample.
    pub sample: bool,
    /// It has a user to ask (elicitation), who may also approve runs where its [`Approver`] says so.
    pub elicit: bool,
}

/// The way back to whoever asked for a run from outside the agent; give it to
/// [`crate::runtime::Runtime::invoke_with`]. Nested calls the run makes reach the same caller.
///
/// ```
/// use agentry::action::{Caller, CallerCan, CallerRequest};
/// let (caller, mut requests) = Caller::new(CallerCan::default());
/// assert!(!caller.can().sample);
/// drop(caller);
/// assert!(requests.try_recv().is_err());
/// ```
#[derive(Debug, Clone)]
pub struct Caller {
    tx: mpsc::UnboundedSender<CallerRequest>,
    can: CallerCan,
    approver: Approver,
}

impl Caller {
    /// A caller that can answer what `can` says, and the receiver of what runs send it.
    pub fn new(can: CallerCan) -> (Self, mpsc::UnboundedReceiver<CallerRequest>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Self { tx, can, approver: Approver::Operator }, rx)
    }

    /// The same caller, whose runs that need approval are approved by `approver` (by default the operator).
    #[must_use]
    pub fn approved_by(mut self, approver: Approver) -> Self {
        self.approver = approver;
        self
    }

    /// What the caller can answer.
    pub fn can(&self) -> CallerCan {
        self.can
    }

    /// Who approves the caller's runs that need approval.
    pub fn approver(&self) -> Approver {
        self.approver
    }

    /// Sends a request; `false` when the caller is gone.
    pub(crate) fn send(&self, request: CallerRequest) -> bool {
        self.tx.send(request).is_ok()
    }
}
