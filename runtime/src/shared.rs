//! What every agent server of one runtime shares (the live agents, the children the supervisor watches, the
//! sleepers, the job board, the journal), and how a registered agent type is started by name.

use crate::directory::Directory;
use crate::error::RuntimeError;
use crate::events::EventBus;
use crate::id::AgentId;
use crate::policy::Policy;
use crate::restart::{Exit, Restarts};
use crate::runner::Runner;
use crate::signal::Signal;
use crate::skill::LiveCatalog;
use crate::store::Store;
use serde_json::Value;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::Mutex;

/// What every agent server of one runtime shares.
pub(crate) struct Shared {
    /// When the runtime was built: a schedule due before then was missed while the process was down; one due
    /// since (met late by a thaw, say) was not.
    pub started_at: chrono::DateTime<chrono::Utc>,
    /// The timer that thaws each hibernating agent with schedules when the first comes due (one per agent: a new
    /// sleep replaces the last one's).
    pub wakers: dashmap::DashMap<AgentId, tokio::task::AbortHandle>,
    pub catalog: LiveCatalog,
    pub data_dir: Option<std::path::PathBuf>,
    pub max_call_depth: usize,
    pub jobs: Arc<crate::jobs::JobBoard>,
    pub events: EventBus,
    pub store: Arc<dyn Store>,
    /// The journal as the runtime shows it to whoever holds it: read only.
    pub journal: crate::store::JournalView,
    pub runner: Runner,
    pub directory: Directory,
    pub spawners: dashmap::DashMap<String, Spawner>,
    /// The actor every agent is linked to (see [`crate::supervisor`]), started with the first agent.
    pub supervisor: tokio::sync::OnceCell<ractor::ActorCell>,
    /// What the supervisor knows of each live agent, by its actor.
    pub children: dashmap::DashMap<ractor::ActorId, Child>,
    /// With a durable store: how many inputs an agent logs between two snapshots.
    pub snapshot_every: u64,
    /// Set by [`crate::runtime::Runtime::shutdown`]: agents stopping now come back with the next recovery.
    pub shutting_down: std::sync::atomic::AtomicBool,
    /// How a recovering runtime brings back an agent of each registered type, by type name.
    pub revivers: dashmap::DashMap<String, Reviver>,
    /// The registered agent types' names, by type.
    pub type_names: std::collections::HashMap<std::any::TypeId, Arc<str>>,
    /// Hibernated agents (see [`crate::sleep`]).
    pub sleeping: dashmap::DashMap<AgentId, Sleeper>,
    /// One thaw at a time.
    pub waking: tokio::sync::Mutex<()>,
    /// Agents idle this long hibernate (with a durable store), if set.
    pub hibernate_after: Option<std::time::Duration>,
    /// The task that asks idle agents to hibernate, started with the first agent.
    pub sweeper: std::sync::OnceLock<()>,
    /// The task that brings back from the journal the agents a failed commit left ahead of it, started with the
    /// first agent (see `rollback.rs`).
    pub rollback: std::sync::OnceLock<()>,
    /// Where signals for agents this runtime does not run, and for topics, go besides (a cluster's node).
    pub elsewhere: Option<crate::elsewhere::ElsewhereHook>,
    /// What is asked before a new agent starts (a cluster's node, which takes its lease), if anything.
    pub claim: Option<crate::claim::ClaimHook>,
    /// What is called before an agent is started again afresh (a cluster's node), if anything.
    pub before_restart: Option<crate::afresh::RestartHook>,
}

impl Shared {
    /// Stops an agent from outside (its parent, the runtime): it will not be restarted. Its supervisor's
    /// record keeps the first reason given, which the agent's server reads as it stops (an entry carries no
    /// flag of its own: every live agent has one).
    pub fn stop_agent(&self, entry: &crate::directory::Entry, reason: String) {
        if let Some(mut child) = self.children.get_mut(&entry.cell.get_id())
            && child.exit == crate::restart::Exit::Unknown
        {
            child.exit = crate::restart::Exit::Requested(reason.as_str().into());
        }
        entry.cell.stop(Some(reason));
    }
}

/// Starts an agent again from its spawn arguments.
pub(crate) type Respawn =
    Arc<dyn Fn(Arc<Shared>) -> Pin<Box<dyn Future<Output = Result<(), RuntimeError>> + Send>> + Send + Sync>;

/// What the supervisor knows of one agent: made in its server's `pre_start`, so it exists before anything
/// can happen to the agent.
pub(crate) struct Child {
    pub agent: AgentId,
    /// How it was spawned: its parent and restart policy among the rest.
    pub again: Arc<crate::restart::Again>,
    /// Restarts in the policy's window, kept across restarts.
    pub history: Arc<Mutex<Restarts>>,
    pub respawn: Respawn,
    pub exit: Exit,
}

/// What is left of a hibernated agent in memory: its type's name (shared by every agent of the type), the
/// signals sent to it since it fell asleep, and whether it is being thawed.
#[derive(Debug)]
pub(crate) struct Sleeper {
    pub agent_type: Arc<str>,
    pub kept: Vec<Signal>,
    pub waking: bool,
    /// The most signals kept for it (its policy's `limits.kept_signals`); more are refused.
    pub kept_limit: usize,
}

impl Sleeper {
    /// A sleeper of `agent_type` that keeps at most `kept_limit` signals.
    pub fn new(agent_type: Arc<str>, kept_limit: usize) -> Self {
        Self { agent_type, kept: Vec::new(), waking: false, kept_limit }
    }
}

/// Brings back one agent of a registered type from what a durable store kept of it (read beforehand); returns
/// how many inputs it replayed.
pub(crate) type Reviver = Arc<
    dyn Fn(
            Arc<Shared>,
            crate::store::AgentRecord,
            crate::store::Revival,
        ) -> Pin<Box<dyn Future<Output = Result<u64, RuntimeError>> + Send>>
        + Send
        + Sync,
>;

/// Starts an agent of a registered type from its JSON init state (the `SpawnAgent` effect).
pub(crate) type Spawner = Arc<
    dyn Fn(
            Arc<Shared>,
            AgentId,
            Value,
            Option<AgentId>,
            Policy,
        ) -> Pin<Box<dyn Future<Output = Result<(), RuntimeError>> + Send>>
        + Send
        + Sync,
>;
