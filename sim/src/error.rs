//! What can be wrong with a simulation before it runs, or with a trace asked to replay.

use agentry::agent::StartError;
use agentry::id::{ActionId, AgentId};

/// Why a simulation cannot be built, or an agent added, or a trace replayed. Every one is found before the
/// simulation runs: bad input never stops a run half-way.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// A rate, probability or duration that is negative, not finite, or out of its range.
    #[error("{what} is {value}; expected {expected}")]
    BadNumber {
        /// Which setting.
        what: String,
        /// The value given.
        value: f64,
        /// What it must be.
        expected: &'static str,
    },
    /// A signal kind that is not valid.
    #[error("`{kind}` is not a valid signal kind: {reason}")]
    BadKind {
        /// The kind given.
        kind: String,
        /// Why it is not valid.
        reason: String,
    },
    /// A process was given data that is not a JSON object.
    #[error("the data of process `{kind}` must be a JSON object (a contact is added to it as `peer`), not `{data}`")]
    BadProcessData {
        /// The process's signal kind.
        kind: String,
        /// The data given.
        data: String,
    },
    /// An action model for an action that no skill in the simulation's catalog provides.
    #[error("an action model is given for `{0}`, which no skill in the simulation's catalog provides")]
    UnknownAction(ActionId),
    /// An agent restored with a skill mounted that the simulation's catalog does not have.
    #[error(
        "skill `{0}` is mounted on the agent and not in the simulation's catalog; expected every mounted skill in it"
    )]
    UnknownSkill(agentry::id::SkillId),
    /// Two metrics with one name.
    #[error("metric `{0}` is defined twice; expected every metric name once")]
    DuplicateMetric(String),
    /// An agent id already taken.
    #[error("agent `{0}` is already in the simulation")]
    DuplicateAgent(AgentId),
    /// An agent the simulation does not have.
    #[error("agent `{0}` is not in the simulation")]
    NoSuchAgent(AgentId),
    /// An agent whose start skills could not be mounted.
    #[error("agent `{agent}` could not start: {error}")]
    Start {
        /// The agent.
        agent: AgentId,
        /// Why.
        error: StartError,
    },
    /// A contact network with fewer nodes than the simulation has agents, or a bad generator setting.
    #[error("the contact network is unusable: {0}")]
    Network(String),
    /// A replay asked of a trace that did not keep what it needs.
    #[error("the trace cannot replay agent `{agent}`: {reason}")]
    Replay {
        /// The agent.
        agent: AgentId,
        /// Why.
        reason: String,
    },
    /// Writing a table or a plot failed.
    #[error("could not write {what}: {message}")]
    Output {
        /// What was being written.
        what: String,
        /// The underlying error.
        message: String,
    },
}

/// Checks that `value` is a finite number at least 0 (and at most 1 for a probability).
pub(crate) fn check(what: &str, value: f64, probability: bool) -> Result<(), SimError> {
    let ok = value.is_finite() && value >= 0.0 && (!probability || value <= 1.0);
    if ok {
        return Ok(());
    }
    let expected = if probability { "a probability between 0 and 1" } else { "a finite number, 0 or more" };
    Err(SimError::BadNumber { what: what.to_owned(), value, expected })
}
