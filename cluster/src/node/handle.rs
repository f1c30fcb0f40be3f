//! A typed handle on an agent wherever it lives in the cluster, and spawning one on another node.

use super::{Node, NodeError, Sent};
use crate::wire::{WireReply, WireRequest};
use agentry::agent::Agent;
use agentry::id::AgentId;
use agentry::runtime::SpawnOptions;
use agentry::signal::Signal;
use std::marker::PhantomData;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

/// How long a spawn on another node may take before it is given up (the agent may still start there).
const SPAWN_WAIT: Duration = Duration::from_secs(30);

/// A handle on an agent of type `A` wherever it lives: here, on another node, or asleep in the journal until a
/// node takes it. Sends and calls go as [`Node::send`] and [`Node::call`] route them (here, over the wire, or
/// through the agent's durable inbox), so the handle stays good when the agent moves. Cloning gives another
/// handle on the same agent.
pub struct ClusterRef<A: Agent> {
    id: AgentId,
    node: Arc<Node>,
    _agent: PhantomData<fn() -> A>,
}

impl<A: Agent> Clone for ClusterRef<A> {
    fn clone(&self) -> Self {
        Self { id: self.id.clone(), node: self.node.clone(), _agent: PhantomData }
    }
}

impl<A: Agent> std::fmt::Debug for ClusterRef<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterRef").field("id", &self.id).field("agent", &A::name()).finish()
    }
}

impl<A: Agent> ClusterRef<A> {
    /// The agent's id.
    pub fn id(&self) -> &AgentId {
        &self.id
    }

    /// Sends the agent a signal (see [`Node::send`]).
    pub async fn send(&self, signal: Signal) -> Result<Sent, NodeError> {
        self.node.send(&self.id, signal).await
    }

    /// Calls the agent and waits at most `timeout` for its reply (see [`Node::call`]).
    pub async fn call(&self, signal: Signal, timeout: Duration) -> Result<serde_json::Value, NodeError> {
        self.node.call(&self.id, signal, timeout).await
    }
}

impl Node {
    /// A handle on agent `id` of type `A`, wherever it lives (nothing is checked until it is used).
    pub fn agent<A: Agent>(self: &Arc<Self>, id: AgentId) -> ClusterRef<A> {
        ClusterRef { id, node: self.clone(), _agent: PhantomData }
    }

    /// Spawns an agent on the node named `node` (this one, or a peer on the wire), which claims its lease and
    /// starts it from `domain`. The type must be registered there under [`Agent::name`]: if not,
    /// [`NodeError::UnknownType`]. With `opts.parent` set (an agent of this node), the parent is told when the
    /// child ends, and when the child's node goes down (`agent.child_exited`, with the reason). Of `opts`, the
    /// id, parent and policy go with the spawn.
    pub async fn spawn_on<A: Agent>(
        self: &Arc<Self>,
        node: &str,
        domain: A,
        mut opts: SpawnOptions,
    ) -> Result<ClusterRef<A>, NodeError> {
        let id = opts.id.get_or_insert_with(AgentId::random).clone();
        if node == self.name() {
            self.spawn(domain, opts).await?;
            return Ok(self.agent(id));
        }
        let wire = self.wire.as_ref().ok_or_else(|| NodeError::NoWire { node: node.to_owned() })?;
        let init = serde_json::to_value(&domain).map_err(|e| NodeError::Refused {
            agent: id.clone(),
            reason: format!("its state could not be encoded as JSON: {e}"),
        })?;
        let parent = opts.parent.clone();
        let request = WireRequest::Spawn {
            agent_type: A::name().to_owned(),
            agent: id.clone(),
            init,
            parent: parent.clone(),
            policy: Box::new(opts.policy),
        };
        match wire.ask_node(node, &request, SPAWN_WAIT).await? {
            WireReply::Accepted => {}
            WireReply::UnknownType { agent_type } => {
                return Err(NodeError::UnknownType { node: node.to_owned(), agent_type });
            }
            WireReply::Failed { reason } => return Err(NodeError::Refused { agent: id, reason }),
            other => return Err(NodeError::Refused { agent: id, reason: format!("unexpected answer {other:?}") }),
        }
        if let Some(parent) = parent {
            let mut children = self.remote_children.lock().unwrap_or_else(PoisonError::into_inner);
            children.entry(node.to_owned()).or_default().push((id.clone(), parent));
        }
        Ok(self.agent(id))
    }
}
