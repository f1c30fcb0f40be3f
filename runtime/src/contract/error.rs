//! Action errors, always classified so the runner knows whether to retry.

use crate::duration_ms;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Why an action run failed. The class decides what happens next: only `Transient` and `Timeout` may be
/// retried, and only for idempotent or side-effect-free actions.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "class", rename_all = "snake_case")]
pub enum ActionError {
    /// The params were wrong. Fails fast; never retried.
    #[error("invalid params: {message}")]
    Validation {
        /// What was wrong and what was expected.
        message: String,
    },
    /// A passing failure (a dropped connection, a busy peer). May be retried.
    #[error("transient failure: {message}")]
    Transient {
        /// What went wrong.
        message: String,
    },
    /// The run took longer than the action's timeout. May be retried.
    #[error("timed out after {}ms", after.as_millis())]
    Timeout {
        /// The timeout that was exceeded.
        #[serde(with = "duration_ms")]
        #[schemars(with = "u64")]
        after: Duration,
    },
    /// A bug or a panic. Never retried.
    #[error("critical failure: {message}")]
    Critical {
        /// What went wrong.
        message: String,
    },
    /// A policy or permission refused the run. Never retried; the run is blocked.
    #[error("denied: {reason}")]
    Denied {
        /// Which rule refused it.
        reason: String,
    },
    /// The run was cancelled (the agent stopped, or someone cancelled it).
    #[error("cancelled: {reason}")]
    Cancelled {
        /// Why.
        reason: String,
    },
    /// The action ran and reports that it did not succeed: a tool's own error result (an MCP tool's `isError`),
    /// which whoever asked (a model, say) can read and act on, such as a bad timezone given to a time tool. Not
    /// a bug of the runtime or of the action; never retried (the same arguments give the same answer).
    #[error("the tool reported an error: {message}")]
    Reported {
        /// What the tool said.
        message: String,
    },
    /// The agent's budget for its time window is spent (its policy's `budgets`): the run was refused before it
    /// started. Never retried; it may run once the window has moved on or the budget was raised.
    #[error("budget exceeded: {reason}")]
    BudgetExceeded {
        /// Which budget, what was spent and when it frees up.
        reason: String,
    },
    /// The agent ran this action as often as its policy's `rate_limits` allow for now, and the limit refuses
    /// rather than queues: the run was refused before it started. Never retried by the runner; ask again later.
    #[error("rate limited: {reason}")]
    RateLimited {
        /// Which limit, and when the next run would be let through.
        reason: String,
    },
    /// The process stopped (a crash, `kill -9`) while the run was going, and the run has side effects and is not
    /// idempotent, so it was not started again after the restart: whether it did its work is unknown, and the
    /// agent decides what to do. Never retried.
    #[error("interrupted: {reason}")]
    Interrupted {
        /// What is known.
        reason: String,
    },
}

/// The class of an [`ActionError`], as data for journals, outcomes and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    /// See [`ActionError::Validation`].
    Validation,
    /// See [`ActionError::Transient`].
    Transient,
    /// See [`ActionError::Timeout`].
    Timeout,
    /// See [`ActionError::Critical`].
    Critical,
    /// See [`ActionError::Denied`].
    Denied,
    /// See [`ActionError::Cancelled`].
    Cancelled,
    /// See [`ActionError::Interrupted`].
    Interrupted,
    /// See [`ActionError::Reported`].
    Reported,
    /// See [`ActionError::BudgetExceeded`].
    BudgetExceeded,
    /// See [`ActionError::RateLimited`].
    RateLimited,
}

impl ActionError {
    /// A validation error with a message saying what was wrong and what was expected.
    pub fn validation(message: impl Into<String>) -> Self {
        Self::Validation { message: message.into() }
    }

    /// A transient error.
    pub fn transient(message: impl Into<String>) -> Self {
        Self::Transient { message: message.into() }
    }

    /// A critical error.
    pub fn critical(message: impl Into<String>) -> Self {
        Self::Critical { message: message.into() }
    }

    /// A denial.
    pub fn denied(reason: impl Into<String>) -> Self {
        Self::Denied { reason: reason.into() }
    }

    /// A cancellation.
    pub fn cancelled(reason: impl Into<String>) -> Self {
        Self::Cancelled { reason: reason.into() }
    }

    /// A failure the tool reports of its own (see [`ActionError::Reported`]).
    pub fn reported(message: impl Into<String>) -> Self {
        Self::Reported { message: message.into() }
    }

    /// An interruption by a crash (see [`ActionError::Interrupted`]).
    pub fn interrupted(reason: impl Into<String>) -> Self {
        Self::Interrupted { reason: reason.into() }
    }

    /// An error of `class` with this message (a `Timeout` has no message and says it took zero time): for
    /// drivers, models and tests that draw an error class rather than meet one.
    pub fn of_class(class: ErrorClass, message: impl Into<String>) -> Self {
        let message = message.into();
        match class {
            ErrorClass::Validation => Self::validation(message),
            ErrorClass::Transient => Self::transient(message),
            ErrorClass::Timeout => Self::Timeout { after: std::time::Duration::ZERO },
            ErrorClass::Critical => Self::critical(message),
            ErrorClass::Denied => Self::denied(message),
            ErrorClass::Cancelled => Self::cancelled(message),
            ErrorClass::Interrupted => Self::interrupted(message),
            ErrorClass::Reported => Self::reported(message),
            ErrorClass::BudgetExceeded => Self::BudgetExceeded { reason: message },
            ErrorClass::RateLimited => Self::RateLimited { reason: message },
        }
    }

    /// The error's class.
    pub fn class(&self) -> ErrorClass {
        match self {
            Self::Validation { .. } => ErrorClass::Validation,
            Self::Transient { .. } => ErrorClass::Transient,
            Self::Timeout { .. } => ErrorClass::Timeout,
            Self::Critical { .. } => ErrorClass::Critical,
            Self::Denied { .. } => ErrorClass::Denied,
            Self::Cancelled { .. } => ErrorClass::Cancelled,
            Self::Interrupted { .. } => ErrorClass::Interrupted,
            Self::Reported { .. } => ErrorClass::Reported,
            Self::BudgetExceeded { .. } => ErrorClass::BudgetExceeded,
            Self::RateLimited { .. } => ErrorClass::RateLimited,
        }
    }
}

impl ErrorClass {
    /// Whether errors of this class may be retried at all (the action's contract decides the rest).
    pub fn is_retryable(self) -> bool {
        matches!(self, Self::Transient | Self::Timeout)
    }
}
