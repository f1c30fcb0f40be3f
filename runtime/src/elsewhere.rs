//! Signals for elsewhere: what an agent emits to an agent this runtime does not run, and what it emits to a
//! topic (whose subscribers may live on other runtimes), including the word a child's end sends its parent. A
//! runtime alone drops the first and serves the second to its own subscribers only; a runtime in a cluster hands
//! both to its node ([`crate::runtime::RuntimeBuilder::elsewhere`]), which takes them to the other nodes, where
//! they come in through [`crate::runtime::Runtime::relay`].

use crate::id::AgentId;
use crate::signal::Signal;
use std::sync::Arc;

/// A signal for elsewhere.
#[derive(Debug, Clone)]
pub enum Elsewhere {
    /// For an agent this runtime does not run.
    Agent {
        /// The agent.
        to: AgentId,
        /// The signal, as its maker made it.
        signal: Signal,
        /// The agent whose journal keeps the signal until it is sent on, when there is one: an agent's emit, kept
        /// with the input that made it. Once it was sent on (taken by the runtime that runs `to`, left where
        /// that runtime will find it, or found to reach nobody), say so with
        /// [`Runtime::sent_on`](crate::runtime::Runtime::sent_on); until then, bringing that agent back (after a
        /// crash, or on another node) hands it to the hook again, with the same id, so its target must take
        /// signals in a way that drops one it had already (a cluster's inbox does). `None` for what the runtime
        /// made itself (a child's end for its parent), sent from memory at most once.
        kept_by: Option<AgentId>,
    },
    /// For a topic's subscribers on other runtimes (this runtime's own have it already).
    Topic {
        /// The topic.
        topic: String,
        /// The signal, as its maker made it.
        signal: Signal,
    },
}

/// Where a runtime hands its signals for elsewhere. Called on the agent's server: it must not block (a node
/// sends them on from a task of its own).
pub type ElsewhereHook = Arc<dyn Fn(Elsewhere) + Send + Sync>;
