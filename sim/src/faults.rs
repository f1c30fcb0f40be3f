//! Faults a simulation injects, each switchable, seeded, and written to the trace when it happens.

use crate::error::{SimError, check};
use crate::model::Latency;
use serde::Serialize;
use std::time::Duration;

/// How runs that need approval are decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Approvals {
    /// Every one is approved, this long after it was asked.
    Grant {
        /// The approver's delay.
        after: Duration,
    },
    /// Every one is denied, this long after it was asked.
    Deny {
        /// The approver's delay.
        after: Duration,
    },
    /// Each is approved with probability `grant`, else denied.
    Random {
        /// The share approved.
        grant: f64,
        /// The approver's delay.
        after: Duration,
    },
}

/// The faults to inject. All off by default (no failures, no lost messages, approvals granted at once).
#[derive(Debug, Clone, PartialEq)]
pub struct Faults {
    /// The share of action attempts that fail `Transient` (retried as the action's policy says).
    pub action_failure: f64,
    /// The share of action attempts that time out (after the action's own timeout, in virtual time).
    pub action_timeout: f64,
    /// The share of signals between agents that are lost.
    pub message_drop: f64,
    /// The share of signals between agents delivered twice.
    pub message_duplicate: f64,
    /// How long signals between agents take (none: they arrive at once, in order).
    pub message_delay: Option<Latency>,
    /// How often each agent crashes, per unit of virtual time (a second). A crash loses the runs in flight
    /// (the agent gets them back as `action.failed` with class `Interrupted`) and the agent restarts at once
    /// from its last good state: the state after the last input it handled.
    pub crash_rate: f64,
    /// How runs that need approval are decided.
    pub approvals: Approvals,
}

impl Default for Faults {
    fn default() -> Self {
        Self {
            action_failure: 0.0,
            action_timeout: 0.0,
            message_drop: 0.0,
            message_duplicate: 0.0,
            message_delay: None,
            crash_rate: 0.0,
            approvals: Approvals::Grant { after: Duration::ZERO },
        }
    }
}

impl Faults {
    pub(crate) fn check(&self) -> Result<(), SimError> {
        check("the action failure rate", self.action_failure, true)?;
        check("the action timeout rate", self.action_timeout, true)?;
        check("the action failure and timeout rates together", self.action_failure + self.action_timeout, true)?;
        check("the message drop rate", self.message_drop, true)?;
        check("the message duplication rate", self.message_duplicate, true)?;
        check("the crash rate", self.crash_rate, false)?;
        if let Some(delay) = &self.message_delay {
            delay.check("the message delay")?;
        }
        if let Approvals::Random { grant, .. } = self.approvals {
            check("the approval grant rate", grant, true)?;
        }
        Ok(())
    }
}

/// One fault that happened, as the trace records it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "fault", rename_all = "snake_case")]
pub enum Fault {
    /// An action attempt was made to fail.
    ActionFailed {
        /// The run.
        run: uuid::Uuid,
    },
    /// An action attempt was made to time out.
    ActionTimedOut {
        /// The run.
        run: uuid::Uuid,
    },
    /// A signal to this agent was lost.
    MessageDropped {
        /// The signal.
        signal: uuid::Uuid,
    },
    /// A signal to this agent was delivered twice.
    MessageDuplicated {
        /// The signal.
        signal: uuid::Uuid,
    },
    /// The agent crashed and restarted from its last good state.
    Crashed {
        /// How many runs in flight it lost.
        runs_lost: usize,
    },
    /// A run's approval was decided.
    Approval {
        /// The run.
        run: uuid::Uuid,
        /// Whether it was granted.
        granted: bool,
    },
}
