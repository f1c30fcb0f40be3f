//! How an agent is started and started again: its spawn options, what its supervisor keeps to start it again
//! (`Again`), its restart policy and the restarts counted against it, and how it ended (`Exit`). Plain data at
//! the bottom of the actor layer: the server, the supervisor and the runtime all read it.

use crate::id::AgentId;
use crate::policy::Policy;
use std::collections::VecDeque;
use std::sync::Arc;
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

/// How to spawn one agent.
#[derive(Debug, Clone)]
pub struct SpawnOptions {
    /// Its id (default: a fresh UUID v7).
    pub id: Option<AgentId>,
    /// A unique name to find it by.
    pub name: Option<String>,
    /// Its policy.
    pub policy: Policy,
    /// How it survives its own handler's panics.
    pub restart: RestartPolicy,
    /// How many of its runs may be in flight at once; more wait in a queue.
    pub max_in_flight: usize,
    /// Its parent, which gets `agent.child_exited` when it stops.
    pub parent: Option<AgentId>,
}

impl Default for SpawnOptions {
    fn default() -> Self {
        Self {
            id: None,
            name: None,
            policy: Policy::default(),
            restart: RestartPolicy::default(),
            max_in_flight: 64,
            parent: None,
        }
    }
}

/// How an agent was spawned, kept once (in an `Arc`) for its server, its supervisor's record and the way to
/// start it again: its spawn options, with the default policy shared by every agent that has it. Kept by every
/// live agent, so it stays small.
pub(crate) struct Again {
    pub id: AgentId,
    pub name: Option<String>,
    pub parent: Option<AgentId>,
    /// The agent's policy now: what `set_policy` last gave it (or its parent's narrowed it to), so a restart
    /// starts it under that, not the one it was spawned with.
    policy: std::sync::Mutex<Arc<Policy>>,
    pub restart: RestartPolicy,
    pub max_in_flight: usize,
}

impl Again {
    /// The options to start the agent `id` again with.
    pub fn of(id: &AgentId, opts: SpawnOptions) -> Self {
        Self {
            id: id.clone(),
            name: opts.name,
            parent: opts.parent,
            policy: std::sync::Mutex::new(shared_policy(opts.policy)),
            restart: opts.restart,
            max_in_flight: opts.max_in_flight.max(1),
        }
    }

    /// The agent's policy now.
    pub fn policy(&self) -> Arc<Policy> {
        self.policy.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Changes the agent's policy, for its server now and for whoever starts it again.
    pub fn set_policy(&self, policy: Arc<Policy>) {
        *self.policy.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = policy;
    }

    /// The spawn options these stand for, with the agent's policy now.
    pub fn options(&self) -> SpawnOptions {
        SpawnOptions {
            id: Some(self.id.clone()),
            name: self.name.clone(),
            policy: Policy::clone(&self.policy()),
            restart: self.restart,
            max_in_flight: self.max_in_flight,
            parent: self.parent.clone(),
        }
    }
}

/// A policy to keep for an agent: the default one is one `Arc` for all the agents that have it.
pub(crate) fn shared_policy(policy: Policy) -> Arc<Policy> {
    static DEFAULT: std::sync::LazyLock<Arc<Policy>> = std::sync::LazyLock::new(|| Arc::new(Policy::default()));
    if policy == **DEFAULT { DEFAULT.clone() } else { Arc::new(policy) }
}

/// How one agent ended, as its server saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Exit {
    /// Still running, or it failed before it could say.
    Unknown,
    /// Stopped from outside: never restarted. (Reasons are boxed text: every server and supervisor record
    /// keeps an `Exit`, and most never get one.)
    Requested(Box<str>),
    /// Stopped itself with a `Stop` effect.
    Normal(Box<str>),
    /// Stopped because its restart policy gave up on its panics.
    GaveUp(Box<str>),
    /// Hibernated: it is not gone, and a signal thaws it.
    Hibernated,
    /// Stopped to be brought back from the journal, which a failed commit left behind it: not gone either.
    RolledBack,
}

impl Exit {
    /// Why the agent ended, in words.
    pub fn reason(&self) -> &str {
        match self {
            Exit::Requested(reason) | Exit::Normal(reason) | Exit::GaveUp(reason) => reason,
            Exit::Unknown => "stopped",
            Exit::Hibernated => "hibernated",
            Exit::RolledBack => "rolled back to what the journal holds",
        }
    }
}

#[cfg(test)]
mod shared_policy_tests {
    use super::shared_policy;
    use crate::policy::Policy;
    use std::sync::Arc;

    #[test]
    fn agents_with_the_default_policy_share_one_and_others_keep_their_own() {
        let (first, second) = (shared_policy(Policy::default()), shared_policy(Policy::default()));
        assert!(Arc::ptr_eq(&first, &second));
        let strict = Policy { allow_private_network: true, ..Policy::default() };
        let own = shared_policy(strict.clone());
        assert!(!Arc::ptr_eq(&first, &own));
        assert_eq!(*own, strict);
    }
}
