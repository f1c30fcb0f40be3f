//! Restart policy for an agent whose own signal handler panics.

use std::collections::VecDeque;
use std::time::Duration;
use tokio::time::Instant;

/// When an agent is restarted (see the runtime's supervisor). A panic in its own signal handler is survived in
/// place, with its last good state, unless the mode is `Never`; the mode decides what happens when the agent
/// ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RestartMode {
    /// Restarted after any exit but one asked for from outside: after a failure, and after it stopped itself
    /// with a `Stop` effect.
    Permanent,
    /// Restarted only after an abnormal exit (a failure); an agent that stops itself stays stopped.
    Transient,
    /// Never restarted: the first panic stops the agent.
    Never,
}

/// How an agent survives panics and exits: a mode and at most `max_restarts` within `window`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RestartPolicy {
    /// When to restart.
    pub mode: RestartMode,
    /// How many restarts the window allows; one more stops the agent.
    pub max_restarts: u32,
    /// The sliding window restarts are counted in.
    #[serde(with = "crate::duration_ms")]
    pub window: Duration,
}

impl Default for RestartPolicy {
    /// Transient, at most 3 restarts in 5 seconds.
    fn default() -> Self {
        Self { mode: RestartMode::Transient, max_restarts: 3, window: Duration::from_secs(5) }
    }
}

/// What to do after a panic.
pub(crate) enum Verdict {
    /// Go on; this many restarts are in the window now.
    Restart(u32),
    /// Stop the agent, for this reason.
    Stop(String),
}

/// Counts restarts in the sliding window.
pub(crate) struct Restarts {
    policy: RestartPolicy,
    recent: VecDeque<Instant>,
}

impl Restarts {
    pub fn new(policy: RestartPolicy) -> Self {
        Self { policy, recent: VecDeque::new() }
    }

    /// Counts a panic in `place` (the agent's handler, a skill's state init) and says whether to go on.
    pub fn record_panic(&mut self, now: Instant, place: &str) -> Verdict {
        if self.policy.mode == RestartMode::Never {
            return Verdict::Stop(format!("{place} panicked and its restart policy is `never`"));
        }
        while self.recent.front().is_some_and(|t| now.duration_since(*t) > self.policy.window) {
            self.recent.pop_front();
        }
        self.recent.push_back(now);
        let count = u32::try_from(self.recent.len()).unwrap_or(u32::MAX);
        if count > self.policy.max_restarts {
            Verdict::Stop(format!(
                "{place} panicked {count} times within {:?}; its restart policy allows {}",
                self.policy.window, self.policy.max_restarts
            ))
        } else {
            Verdict::Restart(count)
        }
    }
}
