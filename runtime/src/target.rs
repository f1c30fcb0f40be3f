//! Where a signal an agent emits goes: one agent, its parent, or a topic's subscribers. Re-exported as
//! [`crate::effect::Target`]; kept apart so a policy can judge where an agent may emit without knowing effects.

use crate::id::AgentId;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where an emitted signal goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "to", content = "id", rename_all = "snake_case")]
pub enum Target {
    /// One agent, by id.
    Agent(AgentId),
    /// The agent's parent, if it has one.
    Parent,
    /// Every subscriber of a topic.
    Topic(String),
}
