//! Rebalancing, explicit and conservative: a node hands over, when asked, the idle agents that placement over
//! the live nodes now gives to another node.

use super::*;

/// What [`Node::rebalance`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rebalanced {
    /// Agents handed over: their leases let go, for the nodes placement names.
    pub handed: Vec<AgentId>,
    /// Agents placement gives to another node that stayed, having something going on.
    pub busy: Vec<AgentId>,
}

impl Node {
    /// Hands over to other nodes at most `max` of the agents this node holds that placement over the live nodes
    /// now gives to another node (one joined, say): nothing moves unless asked, and only agents with nothing
    /// going on. Each is put to sleep here (its state snapshotted, durable), stopped, and its lease let go, so the
    /// node placement names takes it at its next round and brings it back from the journal, asleep until
    /// something comes for it. Meanwhile what comes for it through this node ([`Node::send`], [`Node::call`],
    /// the wire) waits in its inbox for the new holder, and so do the emits of this node's agents to it, including
    /// those that reached it asleep before it was let go. An agent with runs in flight, approvals pending or
    /// schedules armed stays
    /// ([`Rebalanced::busy`]): ask again later. Needs a durable journal (a node's always is).
    pub async fn rebalance(&self, max: usize) -> Result<Rebalanced, NodeError> {
        let nodes = self.owners.live_nodes().await?;
        let mut rebalanced = Rebalanced::default();
        for (agent, _) in self.fence.held() {
            if rebalanced.handed.len() >= max {
                break;
            }
            if placement::place(&agent, &nodes).is_none_or(|node| node == self.options.name) {
                continue;
            }
            // Being started, brought back or restarted: not now.
            let here = self.runtime.contains(&agent) || self.runtime.is_hibernating(&agent);
            if self.holdings.is_spawning(&agent) || !here {
                rebalanced.busy.push(agent);
                continue;
            }
            match self.hand_over(&agent).await {
                Ok(true) => rebalanced.handed.push(agent),
                Ok(false) => rebalanced.busy.push(agent),
                Err(err) => {
                    tracing::warn!(%agent, %err, "an agent could not be handed over; it stays");
                    rebalanced.busy.push(agent);
                }
            }
        }
        Ok(rebalanced)
    }

    /// Hands one agent over (see [`Node::rebalance`]): whether it did (not when it is busy).
    pub(super) async fn hand_over(&self, agent: &AgentId) -> Result<bool, NodeError> {
        self.handing.lock().unwrap_or_else(PoisonError::into_inner).insert(agent.clone());
        let handed = self.put_down(agent).await;
        self.handing.lock().unwrap_or_else(PoisonError::into_inner).remove(agent);
        handed
    }

    pub(super) async fn put_down(&self, agent: &AgentId) -> Result<bool, NodeError> {
        // No delivery from its inbox meanwhile (one that waited finds it handed over).
        let _one = self.delivering(agent).lock_owned().await;
        if !self.runtime.is_hibernating(agent) {
            match self.runtime.hibernate(agent).await {
                Ok(()) => {}
                Err(RuntimeError::Busy { .. }) => return Ok(false),
                Err(err) => return Err(err.into()),
            }
        }
        // Its snapshot is in the journal before anyone else may take it.
        if let Some(journal) = self.runtime.store().durable()
            && journal.flushed_for(agent).await.is_err()
        {
            return Ok(false);
        }
        // The epoch it holds now (it may have been taken back at a newer one meanwhile).
        let Some(epoch) = self.fence.epoch(agent) else { return Ok(false) };
        // Out of the runtime, its journal as it slept: from now on, what this node's agents emit to it goes the
        // way of signals for agents held elsewhere (its inbox, as this node no longer holds it). What was kept
        // for it since it fell asleep goes to its inbox first, for the node that takes it.
        let kept = match self.runtime.release(agent).await? {
            Some(kept) => kept,
            // Something thawed it meanwhile: it stays.
            None => return Ok(false),
        };
        if let Err(err) = self.keep_in_inbox(agent, kept).await {
            tracing::warn!(%agent, %err, "an agent's kept signals could not wait in its inbox: it stays, and is given them here");
            return Ok(false);
        }
        self.holdings.let_be(agent);
        drop(_one);
        self.forget_agent(agent);
        self.owners.let_go(&self.lease_of(agent.clone(), epoch)).await?;
        Ok(true)
    }

    /// Puts in an agent's inbox, in order, the signals the runtime kept for it while it slept, as it made them
    /// (their ids kept, so none is given twice). When one cannot wait there, the agent is brought back here from
    /// the journal and given those not put there yet, as the runtime would have.
    async fn keep_in_inbox(&self, agent: &AgentId, kept: Vec<agentry::signal::Signal>) -> Result<(), NodeError> {
        let mut kept = kept.into_iter();
        while let Some(signal) = kept.next() {
            if let Err(err) = self.pusher(agent).relay(agent, &signal).await {
                self.bring_back("an agent whose kept signals could not wait in its inbox").await?;
                for signal in std::iter::once(signal).chain(kept) {
                    self.runtime.relay(Elsewhere::Agent { to: agent.clone(), signal, kept_by: None });
                }
                return Err(err.into());
            }
        }
        Ok(())
    }
}
