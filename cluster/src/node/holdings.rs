//! What a node holds: the leases of its agents (claimed in the database, kept by its fence, said on the wire),
//! the agents it runs, and those it is starting. Shared by the node and its runtime's claim before a spawn
//! ([`Holdings::claim_hook`]), so that every agent the node runs holds a lease, however it was spawned: by
//! [`super::Node::spawn`], by the runtime directly, or by another agent.

use super::NodeError;
use crate::owners::{Lease, Owners};
use crate::wire::Presence;
use agentry::id::AgentId;
use agentry::runtime::{Claim, ClaimHook};
use agentry::store::{Fence, PostgresStore, Store};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

/// See the module docs.
pub(crate) struct Holdings {
    pub(crate) owners: Arc<Owners>,
    pub(crate) fence: Fence,
    /// Says on the wire which agents this node holds, if it has a wire.
    presence: Option<Presence>,
    /// The journal, to tell a new id from one it keeps already.
    journal: Arc<PostgresStore>,
    /// Agents being started here, with how many starts are under way: their leases are claimed before the
    /// journal has them, so the upkeep must not take them for ended.
    spawning: Mutex<HashMap<AgentId, usize>>,
    /// Every agent this node spawned or took over (so that, should it miss word of a lost lease, it can find
    /// the copies it runs of agents it no longer holds).
    ran: Mutex<HashSet<AgentId>>,
}

/// A start under way: the agent counts as being spawned until this is dropped.
pub(crate) struct Spawning {
    holdings: Arc<Holdings>,
    agent: AgentId,
    /// The lease claimed for it, if this start claimed one (not when the node held it already).
    pub(crate) claimed: Option<Lease>,
}

impl Drop for Spawning {
    fn drop(&mut self) {
        let mut spawning = self.holdings.spawning.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = spawning.get_mut(&self.agent) {
            *count -= 1;
            if *count == 0 {
                spawning.remove(&self.agent);
            }
        }
    }
}

impl Holdings {
    pub(crate) fn new(
        owners: Arc<Owners>,
        fence: Fence,
        presence: Option<Presence>,
        journal: Arc<PostgresStore>,
    ) -> Self {
        Self { owners, fence, presence, journal, spawning: Mutex::new(HashMap::new()), ran: Mutex::new(HashSet::new()) }
    }

    /// Gets ready to start a new agent here: refuses an id the journal keeps already ([`NodeError::Exists`]:
    /// starting it afresh would drop what the journal has; it is brought back instead), claims its lease unless
    /// this node holds it already (an id another node holds is [`crate::LeaseError::Held`]), and counts it as
    /// being spawned until the returned [`Spawning`] is dropped.
    pub(crate) async fn claim_new(self: &Arc<Self>, agent: &AgentId) -> Result<Spawning, NodeError> {
        // Counted first: the upkeep never sees the lease held without the start that holds it.
        *self.spawning.lock().unwrap_or_else(PoisonError::into_inner).entry(agent.clone()).or_default() += 1;
        let mut spawning = Spawning { holdings: self.clone(), agent: agent.clone(), claimed: None };
        if let Some(journal) = self.journal.durable()
            && journal.agent(agent)?.is_some()
        {
            return Err(NodeError::Exists(agent.clone()));
        }
        if self.fence.epoch(agent).is_none() {
            let lease = self.owners.claim(agent).await?;
            self.hold(&lease);
            spawning.claimed = Some(lease);
        }
        self.ran(agent);
        Ok(spawning)
    }

    /// The runtime's claim before a spawn: a start this node made itself (with [`Holdings::claim_new`]) goes
    /// ahead; any other (a child an agent spawns, a spawn on the runtime directly) claims the lease first.
    pub(crate) fn claim_hook(self: &Arc<Self>) -> ClaimHook {
        let holdings = Arc::downgrade(self);
        Arc::new(move |agent: AgentId| {
            let holdings = holdings.upgrade();
            Box::pin(async move {
                let Some(holdings) = holdings else { return Err("the node is gone".to_owned()) };
                if holdings.is_spawning(&agent) {
                    return Ok(Box::new(()) as Claim);
                }
                match holdings.claim_new(&agent).await {
                    Ok(spawning) => Ok(Box::new(spawning) as Claim),
                    Err(err) => Err(err.to_string()),
                }
            })
        })
    }

    /// Whether the agent is being started here.
    pub(crate) fn is_spawning(&self, agent: &AgentId) -> bool {
        self.spawning.lock().unwrap_or_else(PoisonError::into_inner).contains_key(agent)
    }

    /// Holds an agent's lease: its journal writes for it, and the wire says this node has it.
    pub(crate) fn hold(&self, lease: &Lease) {
        self.fence.hold(lease.agent.clone(), lease.epoch);
        if let Some(presence) = &self.presence {
            presence.hold(&lease.agent);
        }
    }

    /// No longer holds an agent's lease (let go, lost, or never had).
    pub(crate) fn let_be(&self, agent: &AgentId) {
        self.fence.release(agent);
        if let Some(presence) = &self.presence {
            presence.release(agent);
        }
    }

    /// Notes an agent this node runs.
    pub(crate) fn ran(&self, agent: &AgentId) {
        self.ran.lock().unwrap_or_else(PoisonError::into_inner).insert(agent.clone());
    }

    /// Forgets an agent this node no longer runs.
    pub(crate) fn forget(&self, agent: &AgentId) {
        self.ran.lock().unwrap_or_else(PoisonError::into_inner).remove(agent);
    }

    /// The agents this node ran that it no longer holds but that `runs` says it still runs copies of.
    pub(crate) fn not_held(&self, runs: impl Fn(&AgentId) -> bool) -> Vec<AgentId> {
        let ran = self.ran.lock().unwrap_or_else(PoisonError::into_inner);
        ran.iter().filter(|a| self.fence.epoch(a).is_none() && runs(a)).cloned().collect()
    }
}
