//! The outcome of an action run: what every run returns, for the agent, people and LLMs.

use super::error::{ActionError, ErrorClass};
use crate::duration_ms;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeStatus {
    /// The action returned its output.
    Completed,
    /// The action failed (after any retries).
    Failed,
    /// The run waits for approval, or was refused by the gate.
    Blocked,
}

/// The error part of a failed or blocked outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct OutcomeError {
    /// The error's class.
    pub class: ErrorClass,
    /// The error's message.
    pub message: String,
}

impl From<&ActionError> for OutcomeError {
    fn from(err: &ActionError) -> Self {
        Self { class: err.class(), message: err.to_string() }
    }
}

/// What a run returned: status, output (JSON and text), error, artifacts, cost, latency and attempts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Outcome {
    /// How the run ended.
    pub status: OutcomeStatus,
    /// The action's output (`null` unless completed).
    pub output: Value,
    /// The output, or the error, as text for people and LLMs.
    pub output_text: String,
    /// Why it failed or is blocked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<OutcomeError>,
    /// Files the run produced.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<PathBuf>,
    /// What the run cost, in the action's own unit (tokens, cents), if it reports one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    /// Wall time from the first attempt's start to the end.
    #[serde(with = "duration_ms")]
    #[schemars(with = "u64")]
    pub latency: Duration,
    /// How many attempts ran.
    pub attempts: u32,
}

impl Outcome {
    /// A completed outcome; `output_text` is the output itself when it is a string, else compact JSON.
    pub fn completed(output: Value, latency: Duration, attempts: u32) -> Self {
        let output_text = match &output {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        Self {
            status: OutcomeStatus::Completed,
            output,
            output_text,
            error: None,
            artifacts: Vec::new(),
            cost: None,
            latency,
            attempts,
        }
    }

    /// A blocked outcome with no error: the run waits for approval.
    pub fn awaiting_approval(output_text: String) -> Self {
        Self {
            status: OutcomeStatus::Blocked,
            output: Value::Null,
            output_text,
            error: None,
            artifacts: Vec::new(),
            cost: None,
            latency: Duration::ZERO,
            attempts: 0,
        }
    }

    /// A failed outcome; a `Denied` error makes it `Blocked`, as the design says.
    pub fn failed(error: &ActionError, latency: Duration, attempts: u32) -> Self {
        let status = match error.class() {
            ErrorClass::Denied => OutcomeStatus::Blocked,
            _ => OutcomeStatus::Failed,
        };
        Self {
            status,
            output: Value::Null,
            output_text: error.to_string(),
            error: Some(error.into()),
            artifacts: Vec::new(),
            cost: None,
            latency,
            attempts,
        }
    }
}
