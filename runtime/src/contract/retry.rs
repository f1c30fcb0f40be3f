//! Retry decisions and backoff: pure functions the action runner applies.

use super::error::ActionError;
use super::spec::ActionSpec;
use crate::duration_ms;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How often and how patiently an action is retried after a retryable failure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RetryPolicy {
    /// Attempts in all, the first included; 1 means never retry.
    pub max_attempts: u32,
    /// The wait before the second attempt.
    #[serde(with = "duration_ms")]
    #[schemars(with = "u64")]
    pub initial_backoff: Duration,
    /// The longest wait between attempts.
    #[serde(with = "duration_ms")]
    #[schemars(with = "u64")]
    pub max_backoff: Duration,
    /// How much each wait grows over the previous one.
    pub multiplier: f64,
    /// The fraction (0..=1) of each wait that is randomized, so retries from many agents spread out.
    pub jitter: f64,
}

impl Default for RetryPolicy {
    /// Three attempts, 100 ms doubling up to 5 s, with 20 % jitter.
    fn default() -> Self {
        Self {
            max_attempts: 3,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
            multiplier: 2.0,
            jitter: 0.2,
        }
    }
}

impl RetryPolicy {
    /// A policy that never retries.
    pub fn never() -> Self {
        Self { max_attempts: 1, ..Self::default() }
    }

    /// A policy of `max_attempts` attempts with the default backoff.
    pub fn attempts(max_attempts: u32) -> Self {
        Self { max_attempts, ..Self::default() }
    }

    /// The wait after failed attempt number `attempt` (from 1), given a uniform random sample in `0..1`
    /// (randomness enters as data, so this stays pure). Never longer than `max_backoff`.
    pub fn backoff(&self, attempt: u32, sample: f64) -> Duration {
        let exponent = i32::try_from(attempt.saturating_sub(1)).unwrap_or(i32::MAX);
        let base = self.initial_backoff.as_secs_f64() * self.multiplier.max(1.0).powi(exponent);
        let capped = base.min(self.max_backoff.as_secs_f64());
        let jitter = self.jitter.clamp(0.0, 1.0);
        let factor = 1.0 - jitter + jitter * sample.clamp(0.0, 1.0);
        Duration::from_secs_f64((capped * factor).max(0.0))
    }
}

/// Whether a run of `spec` that failed with `error` on attempt number `attempt` (from 1) is tried again:
/// only Transient and Timeout errors, only for idempotent or side-effect-free actions, and only while
/// attempts remain.
pub fn should_retry(spec: &ActionSpec, error: &ActionError, attempt: u32) -> bool {
    error.class().is_retryable() && may_retry_after(spec, attempt)
}

/// Whether attempt number `attempt` of a run of `spec` could be followed by another, whatever its error: the
/// action may be retried at all and has attempts left.
pub(crate) fn may_retry_after(spec: &ActionSpec, attempt: u32) -> bool {
    (spec.idempotent || !spec.side_effects) && attempt < spec.retry.max_attempts
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn spec(idempotent: bool, side_effects: bool) -> ActionSpec {
        ActionSpec::new("t.act", "test")
            .unwrap()
            .idempotent(idempotent)
            .side_effects(side_effects)
            .retry(RetryPolicy::attempts(3))
    }

    #[test]
    fn retries_follow_the_design_rules() {
        let transient = ActionError::transient("flaky");
        assert!(should_retry(&spec(true, true), &transient, 1));
        assert!(should_retry(&spec(false, false), &transient, 2));
        assert!(!should_retry(&spec(false, true), &transient, 1), "side effects and not idempotent");
        assert!(!should_retry(&spec(true, false), &transient, 3), "no attempts left");
        let timeout = ActionError::Timeout { after: Duration::from_secs(1) };
        assert!(should_retry(&spec(true, false), &timeout, 1));
        for never in [
            ActionError::validation("x"),
            ActionError::critical("x"),
            ActionError::denied("x"),
            ActionError::cancelled("x"),
        ] {
            assert!(!should_retry(&spec(true, false), &never, 1), "{never}");
        }
    }

    proptest! {
        #[test]
        fn backoff_grows_and_stays_within_bounds(attempt in 1u32..40, sample in 0.0f64..1.0) {
            let policy = RetryPolicy::default();
            let wait = policy.backoff(attempt, sample);
            prop_assert!(wait <= policy.max_backoff);
            let floor = policy.backoff(attempt, 0.0);
            let ceiling = policy.backoff(attempt, 1.0);
            prop_assert!(floor <= wait && wait <= ceiling);
            prop_assert!(policy.backoff(attempt, 1.0) <= policy.backoff(attempt + 1, 1.0));
        }
    }
}
