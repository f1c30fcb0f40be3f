//! What an action knows about the run it is part of.

use crate::id::{ActionId, AgentId};
use uuid::Uuid;

/// The run an action executes in: who runs it, which attempt this is, and the signal chain that caused it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionContext {
    /// The agent the action runs for.
    pub agent_id: AgentId,
    /// The action being run.
    pub action_id: ActionId,
    /// This run's id: the same across retries of one run.
    pub run_id: Uuid,
    /// Which attempt this is, from 1.
    pub attempt: u32,
    /// The correlation id of the signal chain that caused the run.
    pub correlation_id: Uuid,
    /// The signal whose effects asked for the run, if any.
    pub causation_id: Option<Uuid>,
}
