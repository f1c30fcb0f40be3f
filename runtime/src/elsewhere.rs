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
