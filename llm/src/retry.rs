//! Trying a model call again: only when it may help, no sooner than the provider asked, with jitter so that many
//! agents limited at once do not all come back at the same moment.

use crate::error::ModelError;
use std::future::Future;
use std::time::Duration;

/// How a model call is tried again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (1: never again).
    pub max_attempts: u32,
    /// The wait before the second attempt when the provider says nothing; doubled for each one after.
    pub base: Duration,
    /// The longest wait, whatever the provider says (a longer `Retry-After` gives up instead).
    pub max_wait: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self { max_attempts: 4, base: Duration::from_millis(500), max_wait: Duration::from_secs(60) }
    }
}

impl RetryPolicy {
    /// How long to wait before attempt `attempt + 1` after `error` ended attempt `attempt` (1 for the first),
    /// or `None` to give up. `jitter` in `[0, 1)` adds up to a quarter of the wait: the provider's
    /// `Retry-After` is a floor, never shortened.
    pub fn wait(&self, error: &ModelError, attempt: u32, jitter: f64) -> Option<Duration> {
        if !error.retryable() || attempt >= self.max_attempts {
            return None;
        }
        let wait = match error.retry_after() {
            Some(asked) if asked > self.max_wait => return None,
            Some(asked) => asked,
            None => self.base.saturating_mul(1u32 << attempt.saturating_sub(1).min(16)).min(self.max_wait),
        };
        Some(wait + wait.mul_f64(jitter.clamp(0.0, 1.0) / 4.0))
    }

    /// Runs `call` until it succeeds, fails for good, or the attempts run out, waiting between attempts as
    /// [`RetryPolicy::wait`] says. The jitter is drawn from `seed` (the run's own, so a replay waits the same).
    pub async fn run<T, F, Fut>(&self, seed: u64, mut call: F) -> Result<T, ModelError>
    where
        F: FnMut(u32) -> Fut,
        Fut: Future<Output = Result<T, ModelError>>,
    {
        let mut attempt = 1;
        loop {
            match call(attempt).await {
                Ok(answer) => return Ok(answer),
                Err(error) => match self.wait(&error, attempt, jitter(seed, attempt)) {
                    Some(wait) => {
                        tracing::info!(attempt, wait_ms = wait.as_millis() as u64, %error, "model call retried");
                        tokio::time::sleep(wait).await;
                        attempt += 1;
                    }
                    None => return Err(error),
                },
            }
        }
    }
}

/// A number in `[0, 1)` from the seed and the attempt (SplitMix64's finalizer).
fn jitter(seed: u64, attempt: u32) -> f64 {
    let mut z = seed.wrapping_add(u64::from(attempt).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// Reads a `Retry-After` header: seconds (`120`, `1.5`) or an HTTP date, counted from `now`. A date in the past
/// means at once; anything else is ignored.
pub(crate) fn parse_retry_after(value: &str, now: chrono::DateTime<chrono::Utc>) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds.min(86_400.0)));
    }
    let date = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    Some((date.with_timezone(&chrono::Utc) - now).to_std().unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limited(after: Option<u64>) -> ModelError {
        ModelError::RateLimited { message: "slow down".into(), retry_after: after.map(Duration::from_secs) }
    }

    #[test]
    fn only_what_may_help_is_tried_again() {
        let policy = RetryPolicy::default();
        assert!(policy.wait(&limited(None), 1, 0.0).is_some());
        assert!(policy.wait(&ModelError::Transport("reset".into()), 1, 0.0).is_some());
        for never in [
            ModelError::QuotaExhausted { message: "pay".into() },
            ModelError::Rejected { status: 400, message: "bad".into() },
            ModelError::Unauthorized { status: 401, message: "key".into() },
            ModelError::Malformed("?".into()),
        ] {
            assert_eq!(policy.wait(&never, 1, 0.0), None, "{never}");
        }
        assert_eq!(policy.wait(&limited(None), policy.max_attempts, 0.0), None, "the attempts ran out");
    }

    #[test]
    fn retry_after_is_a_floor_and_jitter_adds_at_most_a_quarter() {
        let policy = RetryPolicy::default();
        for jitter in [0.0, 0.3, 0.999] {
            let wait = policy.wait(&limited(Some(7)), 1, jitter).expect("retried");
            assert!(wait >= Duration::from_secs(7) && wait < Duration::from_secs(7).mul_f64(1.25), "{wait:?}");
        }
        assert_eq!(policy.wait(&limited(Some(3_600)), 1, 0.0), None, "longer than the policy waits: give up");
        let backoff = |attempt| policy.wait(&limited(None), attempt, 0.0).expect("retried");
        assert_eq!((backoff(1), backoff(2), backoff(3)), (policy.base, policy.base * 2, policy.base * 4));
    }

    #[test]
    fn retry_after_reads_seconds_and_dates() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-11-27T10:00:00Z").expect("a date").to_utc();
        assert_eq!(parse_retry_after("20", now), Some(Duration::from_secs(20)));
        assert_eq!(parse_retry_after("1.5", now), Some(Duration::from_millis(1_500)));
        assert_eq!(parse_retry_after("Fri, 27 Nov 2026 10:00:30 GMT", now), Some(Duration::from_secs(30)));
        assert_eq!(parse_retry_after("Fri, 27 Nov 2026 09:00:00 GMT", now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-4", now), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_is_tried_again_until_it_works_and_waits_as_asked() {
        let started = tokio::time::Instant::now();
        let answer = RetryPolicy::default()
            .run(7, |attempt| async move { if attempt < 3 { Err(limited(Some(2))) } else { Ok(attempt) } })
            .await;
        assert_eq!(answer, Ok(3));
        assert!(started.elapsed() >= Duration::from_secs(4), "waited twice as asked: {:?}", started.elapsed());
        let refused = RetryPolicy::default()
            .run(7, |_| async { Err::<(), _>(ModelError::Rejected { status: 422, message: "no".into() }) })
            .await;
        assert!(matches!(refused, Err(ModelError::Rejected { status: 422, .. })));
        assert_eq!(started.elapsed().as_secs(), 4, "a refused request is not tried again");
    }
}
