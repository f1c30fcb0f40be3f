//! Jobs as data: long-running runs an agent submits and checks on later.

use crate::id::{ActionId, AgentId};
use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

/// Where a job is in its life: Queued → Running → Completed, Failed or Cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    /// Waiting for a free slot.
    Queued,
    /// Its action runs.
    Running,
    /// Its action completed.
    Completed,
    /// Its action failed.
    Failed,
    /// It was cancelled before it ended.
    Cancelled,
}

impl JobRecord {
    /// A job waiting for its slot, as submitted at `submitted_at`: nothing reported yet.
    pub fn queued(id: Uuid, agent: AgentId, action: ActionId, submitted_at: DateTime<Utc>) -> Self {
        Self {
            id,
            agent,
            action,
            status: JobStatus::Queued,
            progress: 0.0,
            message: None,
            output: None,
            error: None,
            class: None,
            submitted_at,
            ended_at: None,
        }
    }
}

impl JobStatus {
    /// Whether the job has ended.
    pub fn is_final(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }
}

/// One job as the board knows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JobRecord {
    /// The job's id.
    pub id: Uuid,
    /// The agent that submitted it.
    pub agent: AgentId,
    /// The action it runs.
    pub action: ActionId,
    /// Where it is.
    pub status: JobStatus,
    /// How far along it is, from 0 to 1, as its action reports.
    pub progress: f64,
    /// The latest progress message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// What the action returned, once completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// Why it failed or was cancelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The class of its failure, when it failed (`interrupted`: it was running with side effects when the
    /// process stopped, so it was not started again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<super::ErrorClass>,
    /// When it was submitted.
    pub submitted_at: DateTime<Utc>,
    /// When it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<DateTime<Utc>>,
}
