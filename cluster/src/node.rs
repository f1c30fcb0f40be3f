//! A node: one runtime among several that share a journal in PostgreSQL, running the agents whose leases it
//! holds. It writes only under those leases ([`Fence`]: the database refuses a write for an agent this node no
//! longer holds), renews them with a heartbeat, stops its copy of an agent whose lease it lost (it was paused or
//! cut off past its lease, and another node took the agent), and takes over the agents of nodes that died: once
//! their leases ran out, each surviving node claims those that placement gives it and brings them back from the
//! journal, exactly as a restart does (interrupted runs, approvals, schedules and all).

use crate::owners::{Lease, LeaseError, Owners};
use crate::placement;
use agentry::agent::Agent;
use agentry::id::AgentId;
use agentry::runtime::{AgentRef, Recovery, Runtime, RuntimeBuilder, RuntimeError, SpawnOptions};
use agentry::store::{Fence, PostgresOptions, PostgresStore, StoreError};
use std::sync::Arc;
use std::time::Duration;

/// How a node joins the cluster.
#[derive(Debug, Clone)]
pub struct NodeOptions {
    /// Its name, unique among the nodes (the lease table's `node`).
    pub name: String,
    /// The PostgreSQL connection string (from the environment: never from a file).
    pub url: String,
    /// How long its leases last unless renewed. A node that stops (a crash, a pause, a cut network) keeps its
    /// agents this long before another node may take them; it beats every third of it.
    pub lease: Duration,
    /// Keep every input and snapshot in the journal (see [`PostgresOptions::keep_inputs`]).
    pub keep_inputs: bool,
}

/// Why a node could not start or act.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// A lease could not be had or kept.
    #[error(transparent)]
    Lease(#[from] LeaseError),
    /// The journal could not be opened.
    #[error("the journal in PostgreSQL: {0}")]
    Store(#[from] StoreError),
    /// The runtime refused.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
}

/// What one round of a node's upkeep did ([`Node::tick`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tick {
    /// Agents whose leases it lost: it stopped its copies of them.
    pub lost: Vec<AgentId>,
    /// Agents of dead nodes it took over and brought back.
    pub taken: Vec<AgentId>,
}

/// A runtime in a cluster. See the module docs.
pub struct Node {
    owners: Arc<Owners>,
    fence: Fence,
    runtime: Runtime,
    options: NodeOptions,
}

impl Node {
    /// Joins the cluster: says this node is alive, opens the journal fenced by its leases (it holds none yet),
    /// and opens the runtime from `builder` on it (a runtime whose agents this node will claim; nothing is
    /// brought back until it holds leases: see [`Node::tick`]).
    pub async fn start(builder: RuntimeBuilder, options: NodeOptions) -> Result<(Self, Recovery), NodeError> {
        let owners = Owners::connect(&options.url, &options.name, options.lease).await?;
        owners.heartbeat(&[]).await?;
        let fence = Fence::new(options.name.clone());
        let journal = PostgresOptions { keep_inputs: options.keep_inputs, fence: Some(fence.clone()) };
        let store = PostgresStore::connect_with(&options.url, journal)?;
        let (runtime, recovery) = builder.store(Arc::new(store)).open().await?;
        Ok((Self { owners: Arc::new(owners), fence, runtime, options }, recovery))
    }

    /// The runtime running this node's agents.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// The leases this node holds, as its journal writes under them.
    pub fn fence(&self) -> &Fence {
        &self.fence
    }

    /// This node's name.
    pub fn name(&self) -> &str {
        &self.options.name
    }

    /// Spawns an agent on this node: claims its lease first (an id that another node holds is
    /// [`LeaseError::Held`]), then spawns it. `opts.id` names it; without one, a new id is made.
    pub async fn spawn<A: Agent>(&self, domain: A, mut opts: SpawnOptions) -> Result<AgentRef<A>, NodeError> {
        let id = opts.id.get_or_insert_with(AgentId::random).clone();
        let lease = self.owners.claim(&id).await?;
        self.fence.hold(lease.agent.clone(), lease.epoch);
        match self.runtime.spawn(domain, opts).await {
            Ok(spawned) => Ok(spawned),
            Err(err) => {
                self.fence.release(&id);
                let _ = self.owners.release(&lease).await;
                Err(err.into())
            }
        }
    }

    /// One round of upkeep: renews every lease this node holds (stopping its copy of each agent whose lease it
    /// lost), then claims the agents whose leases ran out (their node died or let them go) that placement over
    /// the live nodes gives to this node, and brings them back from the journal.
    pub async fn tick(&self) -> Result<Tick, NodeError> {
        let held: Vec<Lease> = self
            .fence
            .held()
            .into_iter()
            .map(|(agent, epoch)| Lease {
                agent,
                node: self.options.name.clone(),
                epoch,
                expires_at: Default::default(),
            })
            .collect();
        let beat = self.owners.heartbeat(&held).await?;
        let mut tick = Tick::default();
        for lease in beat.lost {
            self.step_down(&lease.agent).await;
            tick.lost.push(lease.agent);
        }
        let nodes = self.owners.live_nodes().await?;
        for agent in self.owners.orphans().await? {
            if placement::place(&agent, &nodes) != Some(self.options.name.as_str()) {
                continue;
            }
            match self.owners.claim(&agent).await {
                Ok(lease) => {
                    self.fence.hold(lease.agent.clone(), lease.epoch);
                    tick.taken.push(agent);
                }
                // Another node was faster: it is that node's now.
                Err(LeaseError::Held { .. }) => {}
                Err(err) => return Err(err.into()),
            }
        }
        if !tick.taken.is_empty() {
            let recovery = self.runtime.recover().await?;
            for (agent, err) in &recovery.failed {
                tracing::error!(%agent, %err, node = %self.options.name, "an agent taken over could not be brought back");
            }
        }
        Ok(tick)
    }

    /// Stops this node's copy of an agent whose lease it lost. What the copy still writes is refused by the
    /// journal, so stopping it changes nothing there: the node that holds the agent now has it.
    pub async fn step_down(&self, agent: &AgentId) {
        self.fence.release(agent);
        tracing::warn!(%agent, node = %self.options.name, "this node lost the agent's lease and stops its copy");
        let _ = self.runtime.stop(agent).await;
    }

    /// Runs the upkeep every third of the lease duration, and steps down from every agent the journal refuses,
    /// until the node is dropped; each round's [`Tick`] (and each agent stepped down from between rounds, as a
    /// tick that lost it) is sent to `ticks` if given.
    pub fn keep(
        self: &Arc<Self>,
        ticks: Option<tokio::sync::mpsc::UnboundedSender<Tick>>,
    ) -> tokio::task::JoinHandle<()> {
        let node = Arc::downgrade(self);
        let mut refused = self.fence.lost();
        let every = self.options.lease / 3;
        tokio::spawn(async move {
            let mut beat = tokio::time::interval(every);
            beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                let tick = tokio::select! {
                    _ = beat.tick() => {
                        let Some(node) = node.upgrade() else { return };
                        match node.tick().await {
                            Ok(tick) => tick,
                            Err(err) => {
                                tracing::error!(%err, node = %node.options.name, "a round of the node's upkeep failed");
                                continue;
                            }
                        }
                    }
                    lost = refused.recv() => {
                        let Some(node) = node.upgrade() else { return };
                        match lost {
                            Ok(agent) => {
                                node.step_down(&agent).await;
                                Tick { lost: vec![agent], taken: Vec::new() }
                            }
                            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                            Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                        }
                    }
                };
                if let Some(ticks) = &ticks
                    && (!tick.lost.is_empty() || !tick.taken.is_empty())
                {
                    let _ = ticks.send(tick);
                }
            }
        })
    }
}
