//! A node's upkeep: the round that renews its leases, takes over the agents of dead nodes, lets go the leases
//! of agents that ended, gives what waits in inboxes and connects the wire to new peers ([`Node::tick`]); and
//! the tasks that run it, hear pushes and replies, step down from agents the journal refuses, and watch the
//! wire and the runtime ([`Node::keep`]).

use super::*;
use std::sync::atomic::Ordering;

impl Node {
    /// One round of upkeep: renews every lease this node holds (stopping its copy of each agent whose lease it
    /// lost), then claims the agents whose leases ran out (their node died or let them go) that placement over
    /// the live nodes gives to this node, and brings them back from the journal.
    pub async fn tick(&self) -> Result<Tick, NodeError> {
        let held: Vec<Lease> =
            self.fence.held().into_iter().map(|(agent, epoch)| self.lease_of(agent, epoch)).collect();
        let beat = self.owners.heartbeat(&held).await?;
        let mut tick = Tick::default();
        for lease in beat.lost {
            self.step_down(&lease.agent).await;
            tick.lost.push(lease.agent);
        }
        let nodes = self.owners.live_nodes().await?;
        let gone: Vec<String> = {
            let mut suspects = self.suspects.lock().unwrap_or_else(PoisonError::into_inner);
            let gone = suspects.iter().filter(|s| !nodes.contains(s)).cloned().collect();
            suspects.retain(|s| nodes.contains(s));
            gone
        };
        for node in gone {
            tick.children_down.extend(self.children_down(&node));
        }
        // A claim that fails ends the claiming (logged; the next round claims again), not before those claimed
        // so far are brought back.
        for agent in self.owners.orphans().await? {
            if placement::place(&agent, &nodes) != Some(self.options.name.as_str()) {
                continue;
            }
            // A copy this node still runs of it (its writes were refused before it was stopped) may have gone past
            // the journal: stopped first, and the agent brought back from the journal.
            if self.runtime.contains(&agent) {
                self.step_down(&agent).await;
                tick.lost.push(agent.clone());
            }
            match self.owners.claim(&agent).await {
                Ok(lease) => {
                    // Before it is held: from then on, what is sent to it here waits behind its inbox.
                    self.taking.lock().unwrap_or_else(PoisonError::into_inner).insert(agent.clone());
                    self.holdings.ran(&agent);
                    self.holdings.hold(&lease);
                    tick.taken.push(agent);
                }
                // Another node was faster: it is that node's now.
                Err(LeaseError::Held { .. }) => {}
                Err(err) => {
                    tracing::warn!(%agent, %err, node = %self.options.name, "an agent's lease could not be claimed; the next round tries again");
                    break;
                }
            }
        }
        // (An earlier bringing back that did not bring back all it could is tried again.)
        if self.recover_again.swap(false, Ordering::SeqCst) || !tick.taken.is_empty() {
            // Those claimed are held, whatever happens: one not brought back now is at the next round.
            if let Err(err) = self.bring_back("an agent taken over").await {
                tracing::error!(%err, node = %self.options.name, "the agents taken over could not be brought back yet; the next round tries again");
            }
        }
        // What waited in the inboxes of the agents taken over (this round, or an earlier one that did not give it
        // all) is given first; once all of it was, sends from here reach them directly.
        let taking: Vec<AgentId> = self.taking.lock().unwrap_or_else(PoisonError::into_inner).iter().cloned().collect();
        for agent in taking {
            // Until nothing waits there that was not given (a full page, or a mailbox that took only some, waits
            // for the next round).
            match self.deliver_all(&agent).await {
                Ok((_, true)) => {
                    self.taking.lock().unwrap_or_else(PoisonError::into_inner).remove(&agent);
                }
                Ok((_, false)) => {}
                // (One that could not be brought back, say: the next round tries again.)
                Err(err) => tracing::warn!(%agent, %err, "what waits for an agent taken over could not be given yet"),
            }
        }
        let held: Vec<AgentId> = self.fence.held().into_iter().map(|(agent, _)| agent).collect();
        // An agent that ended here (the journal dropped it, the runtime has it no more, at two rounds in a row:
        // one being started again by its supervisor is neither for a moment) lets its lease go.
        let ended: HashSet<AgentId> = self
            .owners
            .ended(&held)
            .await?
            .into_iter()
            .filter(|agent| !self.holdings.is_spawning(agent) && !self.runtime.contains(agent))
            .collect();
        let confirmed: Vec<AgentId> = {
            let mut ending = self.ending.lock().unwrap_or_else(PoisonError::into_inner);
            let confirmed = ended.intersection(&ending).cloned().collect();
            *ending = ended;
            confirmed
        };
        for agent in confirmed {
            if self.holdings.is_spawning(&agent) || self.runtime.contains(&agent) {
                continue;
            }
            if let Some(epoch) = self.fence.epoch(&agent) {
                self.holdings.let_be(&agent);
                let lease = self.lease_of(agent.clone(), epoch);
                self.owners.let_go(&lease).await?;
                self.forget_agent(&agent);
                tick.ended.push(agent);
            }
        }
        // Restarted afresh while this node missed the word: their lost signals are given again now.
        let afresh: Vec<AgentId> = self.afresh.lock().unwrap_or_else(PoisonError::into_inner).keys().cloned().collect();
        for agent in afresh {
            match self.give_again(&agent).await {
                Ok(true) => tick.given_again.push(agent),
                Ok(false) => {}
                Err(err) => tracing::warn!(%agent, %err, "lost signals could not be given again; the next round tries"),
            }
        }
        self.deliver_waiting().await?;
        self.inbox.purge(RETRIES_KEPT).await?;
        self.connect_peers().await?;
        Ok(tick)
    }

    /// Runs the upkeep every third of the lease duration, and steps down from every agent the journal refuses,
    /// until the node is dropped; each round's [`Tick`] (and each agent stepped down from between rounds, as a
    /// tick that lost it) is sent to `ticks` if given.
    pub async fn keep(
        self: &Arc<Self>,
        ticks: Option<tokio::sync::mpsc::UnboundedSender<Tick>>,
    ) -> Result<tokio::task::JoinHandle<()>, NodeError> {
        let node = Arc::downgrade(self);
        let _ = self.me.set(node.clone());
        // The runtime's signals for elsewhere, sent on in the order its agents emitted them, per target.
        if let Some(ends) = self.forward.lock().unwrap_or_else(PoisonError::into_inner).take() {
            forward::run(ends, node.clone());
        }
        let mut refused = self.fence.lost();
        let every = self.options.lease / 3;
        // Pushes heard as they happen: the agent's signals are given at once (a push not heard, the connection
        // gone, waits for the next round).
        let mut pushed = crate::inbox::listen(&self.options.url).await?;
        let listening = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                while let Some(heard) = pushed.next().await {
                    let Some(node) = listening.upgrade() else { return };
                    match heard {
                        Heard::Pushed(agent) => {
                            if let Err(err) = node.deliver(&agent).await {
                                tracing::warn!(%agent, %err, "waiting signals could not be given at once; the next round will");
                            }
                        }
                        Heard::Replied(call) => {
                            if let Err(err) = node.replied(call).await {
                                tracing::warn!(%call, %err, "a reply to a call of this node could not be read");
                            }
                        }
                        Heard::Missed => {
                            if let Err(err) = node.deliver_waiting().await {
                                tracing::warn!(%err, "waiting signals could not be given; the next round will");
                            }
                        }
                    }
                }
                // The connection dropped: listened again (once a round, until the database answers), and what
                // was pushed meanwhile is given at once.
                loop {
                    let Some(node) = listening.upgrade() else { return };
                    match crate::inbox::listen(&node.options.url).await {
                        Ok(listener) => {
                            pushed = listener;
                            if let Err(err) = node.deliver_waiting().await {
                                tracing::warn!(%err, "waiting signals could not be given; the next round will");
                            }
                            // Replies posted meanwhile to this node's calls were not heard: looked for.
                            let calls: Vec<Uuid> =
                                node.calls.lock().unwrap_or_else(PoisonError::into_inner).keys().copied().collect();
                            for call in calls {
                                if let Err(err) = node.replied(call).await {
                                    tracing::warn!(%call, %err, "a reply to a call of this node could not be read");
                                }
                            }
                            break;
                        }
                        Err(err) => {
                            tracing::warn!(%err, "the node could not listen for pushes again; it tries at the next round");
                            drop(node);
                            tokio::time::sleep(every).await;
                        }
                    }
                }
            }
        });
        // An agent started again afresh lost the signals in its old mailbox: those given from its inbox are given
        // again.
        let mut restarts = self.runtime.events();
        let restarting = Arc::downgrade(self);
        let told = ticks.clone();
        tokio::spawn(async move {
            loop {
                let agent = match restarts.recv().await {
                    Ok(event) if matches!(event.kind, EventKind::AgentRestarted { afresh: true, .. }) => event.agent,
                    Ok(_) => continue,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(missed)) => {
                        tracing::warn!(missed, "the node missed some of its runtime's events");
                        continue;
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                };
                let Some(node) = restarting.upgrade() else { return };
                let told = told.clone();
                tokio::spawn(async move {
                    match node.give_again(&agent).await {
                        Ok(true) => {
                            if let Some(told) = told {
                                let _ = told.send(Tick { given_again: vec![agent], ..Tick::default() });
                            }
                        }
                        Ok(false) => {}
                        Err(err) => {
                            tracing::warn!(%agent, %err, "signals lost with a restarted agent's mailbox wait for the next round")
                        }
                    }
                });
            }
        });
        let mut wire_events = self.wire.as_ref().map(Wire::events);
        Ok(tokio::spawn(async move {
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
                    event = next_event(&mut wire_events) => {
                        let Some(node) = node.upgrade() else { return };
                        // A connection that ended is not a node that died: its children's parents are told once
                        // the database says the node is gone too (its heartbeat ran out), at a round of upkeep.
                        match event {
                            Ok(WireEvent::Down { node: down }) => {
                                node.suspects.lock().unwrap_or_else(PoisonError::into_inner).insert(down);
                                continue;
                            }
                            Ok(WireEvent::Up { node: up }) => {
                                node.suspects.lock().unwrap_or_else(PoisonError::into_inner).remove(&up);
                                continue;
                            }
                            // Missed some: every node with children of this node's agents is looked at.
                            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                                let with_children: Vec<String> = node.remote_children.lock().unwrap_or_else(PoisonError::into_inner).keys().cloned().collect();
                                node.suspects.lock().unwrap_or_else(PoisonError::into_inner).extend(with_children);
                                continue;
                            }
                            Ok(WireEvent::Refused { .. } | WireEvent::Slow { .. }) => continue,
                            Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                                wire_events = None;
                                continue;
                            }
                        }
                    }
                    lost = refused.recv() => {
                        let Some(node) = node.upgrade() else { return };
                        match lost {
                            // Unless the node holds the agent again (it took it back, stopping that copy first).
                            Ok(agent) if node.fence.epoch(&agent).is_none() => {
                                let mut tick = Tick::default();
                                node.step_down_or_take_back(agent, &mut tick).await;
                                tick
                            }
                            Ok(_) => continue,
                            // Missed: every copy this node runs of an agent it no longer holds stops.
                            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                                let lost = node.holdings.not_held(|agent| node.runtime.contains(agent));
                                let mut tick = Tick::default();
                                for agent in lost {
                                    node.step_down_or_take_back(agent, &mut tick).await;
                                }
                                tick
                            }
                            Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                        }
                    }
                };
                if let Some(ticks) = &ticks
                    && tick != Tick::default()
                {
                    let _ = ticks.send(tick);
                }
            }
        }))
    }

    /// Connects the wire to every live node that listens on it and is not connected yet.
    pub(super) async fn connect_peers(&self) -> Result<(), NodeError> {
        let Some(wire) = self.wire.as_ref().filter(|_| self.options.wire.as_ref().is_some_and(|w| w.discover)) else {
            return Ok(());
        };
        let connected = wire.peers();
        let live = self.owners.live_wires().await?;
        self.dialed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|node, _| live.iter().any(|(n, _)| n == node));
        // Of two nodes, the one whose name sorts later dials: two dialing each other at once make two sessions,
        // and ractor_cluster's election between them was seen to leave one side never ready.
        for (node, address) in live {
            if connected.contains(&node) || node.as_str() > self.options.name.as_str() {
                continue;
            }
            let now = tokio::time::Instant::now();
            {
                let mut dialed = self.dialed.lock().unwrap_or_else(PoisonError::into_inner);
                if dialed.get(&node).is_some_and(|at| now.duration_since(*at) < self.options.lease) {
                    continue;
                }
                dialed.insert(node.clone(), now);
            }
            // Dialed apart from the upkeep: a peer slow to answer never holds up a heartbeat.
            let dialer = wire.dialer();
            tokio::spawn(async move {
                if let Err(err) = dialer.dial(&address).await {
                    tracing::debug!(%node, %err, "a peer could not be reached on the wire; a later round tries again");
                }
            });
        }
        Ok(())
    }
}
