//! Fencing a journal that several nodes share: each agent has at most one owner node, holding a lease with an
//! epoch in `agentry_owners` (kept by the cluster, `agentry-cluster`), and a node's journal writes for an agent
//! only while the database says that node holds the agent's lease at the epoch the node believes it holds, and
//! the lease has not run out. Every commit checks the leases of the agents it writes for, in its own
//! transaction, with a share lock on their rows until it commits: a takeover (which updates the row) waits for
//! a commit that passed the check, and a commit after the takeover fails it. The writes of an agent that fails
//! it are dropped from the commit (the other agents' are written), and the agent is reported lost, so the node
//! stops its copy of it.

use crate::id::AgentId;
use dashmap::DashMap;
use std::sync::Arc;

/// The tables of leases, live nodes and inboxes, made by the cluster and by the journal, whichever comes first:
/// a node's journal checks the leases and takes the signals it logs out of the inboxes.
#[doc(hidden)]
pub const CLUSTER_TABLES: &str = "
CREATE TABLE IF NOT EXISTS agentry_owners (
    agent      TEXT PRIMARY KEY,
    node       TEXT NOT NULL,
    epoch      BIGINT NOT NULL CHECK (epoch > 0),
    expires_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX IF NOT EXISTS agentry_owners_node ON agentry_owners (node);
CREATE TABLE IF NOT EXISTS agentry_nodes (
    node       TEXT PRIMARY KEY,
    seen_until TIMESTAMPTZ NOT NULL
);
ALTER TABLE agentry_nodes ADD COLUMN IF NOT EXISTS wire TEXT; -- where the node listens for its peers, if it does
CREATE TABLE IF NOT EXISTS agentry_inbox (
    place    BIGSERIAL PRIMARY KEY,
    agent    TEXT NOT NULL,
    signal   UUID NOT NULL,
    body     TEXT NOT NULL,
    consumed TIMESTAMPTZ, -- when its agent consumed it (kept a while, so a late retry is a duplicate)
    caller   TEXT,        -- the node waiting for the agent's reply, for a call
    UNIQUE (agent, signal)
);
CREATE TABLE IF NOT EXISTS agentry_replies (
    signal UUID PRIMARY KEY, -- the call's signal
    body   TEXT NOT NULL,    -- the reply, as JSON
    made   TIMESTAMPTZ NOT NULL DEFAULT now()
);
-- a signal another node's runtime made (an agent's emit, a child's end), given as it was made
ALTER TABLE agentry_inbox ADD COLUMN IF NOT EXISTS relayed BOOLEAN NOT NULL DEFAULT false;
CREATE INDEX IF NOT EXISTS agentry_inbox_waiting ON agentry_inbox (agent, place) WHERE consumed IS NULL;
";

/// How many lost agents a listener that lags behind may miss before it is told it missed some.
const LOST_KEPT: usize = 1024;

/// The leases a node holds, as it believes: which agents its journal may write for, at which epoch. The node
/// (see `agentry-cluster`) adds an agent once it claimed its lease, and removes it once it released or lost it;
/// the journal reports each agent whose writes the database refused ([`Fence::lost`]). Cloning gives another
/// handle on the same leases.
///
/// ```
/// use agentry::id::AgentId;
/// use agentry::store::Fence;
/// let fence = Fence::new("node-a");
/// let agent = AgentId::new("counter")?;
/// fence.hold(agent.clone(), 3);
/// assert_eq!(fence.epoch(&agent), Some(3));
/// fence.release(&agent);
/// assert_eq!(fence.epoch(&agent), None);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct Fence {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    node: String,
    held: DashMap<AgentId, u64>,
    lost: tokio::sync::broadcast::Sender<AgentId>,
}

impl Fence {
    /// The leases of node `node`, none held yet.
    pub fn new(node: impl Into<String>) -> Self {
        let (lost, _) = tokio::sync::broadcast::channel(LOST_KEPT);
        Self { inner: Arc::new(Inner { node: node.into(), held: DashMap::new(), lost }) }
    }

    /// The node's name, as the lease table has it.
    pub fn node(&self) -> &str {
        &self.inner.node
    }

    /// The node holds `agent`'s lease at `epoch` (it claimed or renewed it).
    pub fn hold(&self, agent: AgentId, epoch: u64) {
        self.inner.held.insert(agent, epoch);
    }

    /// The node no longer holds `agent`'s lease (it released it, or learned it lost it).
    pub fn release(&self, agent: &AgentId) {
        self.inner.held.remove(agent);
    }

    /// The epoch at which the node holds `agent`'s lease, if it does.
    pub fn epoch(&self, agent: &AgentId) -> Option<u64> {
        self.inner.held.get(agent).map(|epoch| *epoch)
    }

    /// Every lease the node holds, sorted by agent.
    pub fn held(&self) -> Vec<(AgentId, u64)> {
        let mut held: Vec<(AgentId, u64)> = self.inner.held.iter().map(|e| (e.key().clone(), *e.value())).collect();
        held.sort();
        held
    }

    /// The agents whose writes the database refused from now on (their lease is another node's now, or ran
    /// out), or whose commit failed (the connection dropped during it, say, so the agent may have gone past
    /// what the journal holds): the node must stop its copies of them, and may bring back from the journal
    /// those whose leases are still its own. Each is released before it is reported.
    pub fn lost(&self) -> tokio::sync::broadcast::Receiver<AgentId> {
        self.inner.lost.subscribe()
    }

    /// A commit with `agent`'s writes failed: its copy may be ahead of the journal.
    pub(crate) fn unsure(&self, agent: &AgentId, error: &super::super::StoreError) {
        if self.inner.held.remove(agent).is_some() {
            tracing::warn!(node = %self.inner.node, %agent, %error, "a commit of the agent's writes failed: its copy here may be ahead of the journal");
            let _ = self.inner.lost.send(agent.clone());
        }
    }

    /// The database refused `agent`'s writes.
    pub(crate) fn refused(&self, agent: &AgentId) {
        if self.inner.held.remove(agent).is_some() {
            tracing::warn!(node = %self.inner.node, %agent, "the journal refused this node's writes for an agent it no longer holds");
            let _ = self.inner.lost.send(agent.clone());
        }
    }
}
