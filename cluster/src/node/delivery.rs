//! Giving a node's agents the signals waiting in their inboxes: each once, in order, one delivery at a time per
//! agent; a call's reply posted back to the node that called; what an actor restarted afresh lost, given again;
//! and the connections pushes go through.

use super::*;

impl Node {
    /// The reply to a call this node made came: given to the caller that waits for it.
    pub(super) async fn replied(&self, call: Uuid) -> Result<(), NodeError> {
        if !self.calls.lock().unwrap_or_else(PoisonError::into_inner).contains_key(&call) {
            return Ok(());
        }
        // The caller keeps waiting until its reply is there (looked for after a reconnect, it may not be yet).
        if let Some(value) = self.inbox.take_reply(call).await? {
            let waiting = self.calls.lock().unwrap_or_else(PoisonError::into_inner).remove(&call);
            if let Some(waiting) = waiting {
                let _ = waiting.send(value);
            }
        }
        Ok(())
    }

    /// Gives an agent this node holds the signals waiting in its inbox, oldest first, each once; for a call, the
    /// agent's reply is posted back to the node that called. Returns how many it gave.
    pub async fn deliver(&self, agent: &AgentId) -> Result<usize, NodeError> {
        Ok(self.deliver_all(agent).await?.0)
    }

    /// [`Node::deliver`], saying too whether every signal waiting in the inbox was given by now (by this
    /// delivery or an earlier one): nothing is left there for a later delivery to give.
    pub(super) async fn deliver_all(&self, agent: &AgentId) -> Result<(usize, bool), NodeError> {
        if !self.holds(agent) {
            return Ok((0, false));
        }
        // One delivery at a time: what is waiting and what was given are read and changed together.
        let _one = self.delivering(agent).lock_owned().await;
        // Handed over, lost, or restarted afresh (what its old actor lost is given again first: `give_again`)
        // while this delivery waited.
        if !self.holds(agent) {
            return Ok((0, false));
        }
        let waiting = self.inbox.waiting(agent, DELIVER_AT_ONCE).await?;
        // A page that is not full shows all that waits.
        let whole = waiting.len() < DELIVER_AT_ONCE as usize;
        // A call is sent to the agent awake (a sleeper keeps plain signals, not calls).
        if waiting.iter().any(|w| w.caller.is_some()) {
            self.runtime.thaw(agent).await?;
        }
        let (delivered, drained, answers) = {
            let mut given = self.given.lock().unwrap_or_else(PoisonError::into_inner);
            // Restarted afresh since it read what waits: nothing is given before what the old actor lost.
            if self.afresh.lock().unwrap_or_else(PoisonError::into_inner).contains_key(agent) {
                return Ok((0, false));
            }
            let mine = given.entry(agent.clone()).or_default();
            // Those given before and no longer waiting were consumed: forgotten (unless the page was full, which
            // may not show them all).
            if whole {
                mine.retain(|id| waiting.iter().any(|w| w.signal.id() == *id));
            }
            let mut delivered = 0;
            let mut drained = whole;
            let mut answers = Vec::new();
            for Waiting { signal, caller, relayed } in waiting {
                let id = signal.id();
                if mine.contains(&id) {
                    continue;
                }
                let given = match (caller, relayed) {
                    (Some(_), _) => self.runtime.ask(agent, signal).map(|answer| answers.push((id, answer))),
                    // Made by another node's runtime: given as it was made (the push checked what it may be).
                    (None, true) => {
                        self.child_end_heard(&signal);
                        match self.runtime.relay(Elsewhere::Agent { to: agent.clone(), signal, kept_by: None }) {
                            0 => Err(RuntimeError::NoSuchAgent(agent.clone())),
                            _ => Ok(()),
                        }
                    }
                    (None, false) => self.runtime.send(agent, signal),
                };
                match given {
                    Ok(()) => {
                        mine.insert(id);
                        delivered += 1;
                    }
                    // Not now (the agent is stopping, or its mailbox is full): the rest wait, in order, for later.
                    Err(err) => {
                        tracing::warn!(%agent, %err, "a waiting signal could not be given to its agent yet");
                        drained = false;
                        break;
                    }
                }
            }
            (delivered, drained, answers)
        };
        // Each reply is posted back as it comes, without holding up the next deliveries.
        for (call, answer) in answers {
            let replies = self.replies.clone();
            let me = self.me.clone();
            tokio::spawn(async move {
                let replied = answer.reply(CALL_REPLY_WAIT).await.map_err(|err| err.to_string());
                // A call that came over the wire is answered there (its failure too); another, through the
                // replies table.
                let waiting = me
                    .get()
                    .and_then(std::sync::Weak::upgrade)
                    .and_then(|node| node.wire_calls.lock().unwrap_or_else(PoisonError::into_inner).remove(&call));
                let replied = match waiting {
                    Some(waiting) => match waiting.send(replied) {
                        Ok(()) => return,
                        Err(replied) => replied,
                    },
                    None => replied,
                };
                match replied {
                    Ok(value) => {
                        if let Err(err) = replies.reply(call, &value).await {
                            tracing::warn!(%call, %err, "a reply could not be posted back to its caller");
                        }
                    }
                    Err(err) => tracing::warn!(%call, %err, "an agent did not reply to a call from another node"),
                }
            });
        }
        Ok((delivered, drained))
    }

    /// Gives again the signals this node gave an agent that then started again afresh (a new actor, its old
    /// mailbox gone; noted before the new one started) and that the old one had not consumed: once its journal
    /// has what the old one wrote, those it consumed are marked so in its inbox, and the rest are given again, in
    /// the inbox's order, before anything newer. Whether it did (not yet: the next round tries again).
    pub(super) async fn give_again(&self, agent: &AgentId) -> Result<bool, NodeError> {
        if !self.afresh.lock().unwrap_or_else(PoisonError::into_inner).contains_key(agent)
            || self.fence.epoch(agent).is_none()
            || !self.runtime.contains(agent)
        {
            return Ok(false);
        }
        // A commit that failed (its connection dropped, say) fails the wait: the next round waits again.
        if let Some(journal) = self.runtime.store().durable()
            && journal.flushed_for(agent).await.is_err()
        {
            return Ok(false);
        }
        {
            // Taken once: of two rounds giving them again at once, one does.
            let _one = self.delivering(agent).lock_owned().await;
            let Some(lost) = self.afresh.lock().unwrap_or_else(PoisonError::into_inner).remove(agent) else {
                return Ok(false);
            };
            if let Some(given) = self.given.lock().unwrap_or_else(PoisonError::into_inner).get_mut(agent) {
                given.retain(|id| !lost.contains(id));
            }
        }
        self.deliver(agent).await?;
        Ok(true)
    }

    /// Gives every agent this node holds the signals waiting in its inbox. One whose delivery fails (it cannot
    /// be thawed, a row of its inbox does not decode) is logged and tried again at the next round; the others
    /// get theirs all the same.
    pub(super) async fn deliver_waiting(&self) -> Result<(), NodeError> {
        let held: Vec<AgentId> = self.fence.held().into_iter().map(|(agent, _)| agent).collect();
        let waiting = self.inbox.with_waiting(&held).await?;
        for agent in waiting {
            if let Err(err) = self.deliver(&agent).await {
                tracing::warn!(%agent, %err, "what waits in an agent's inbox could not be given: the next round tries again");
            }
        }
        Ok(())
    }

    /// What is held while signals are given to the agent from its inbox (one delivery at a time per agent;
    /// several agents' side by side).
    pub(super) fn delivering(&self, agent: &AgentId) -> Arc<tokio::sync::Mutex<()>> {
        let mut delivering = self.delivering.lock().unwrap_or_else(PoisonError::into_inner);
        delivering.entry(agent.clone()).or_default().clone()
    }

    /// Forgets the agent's delivery lock, unless a delivery has it (then it stays, so that no second one runs
    /// beside it; it goes at the next forgetting).
    pub(super) fn forget_delivering(&self, agent: &AgentId) {
        let mut delivering = self.delivering.lock().unwrap_or_else(PoisonError::into_inner);
        if delivering.get(agent).is_some_and(|lock| Arc::strong_count(lock) == 1) {
            delivering.remove(agent);
        }
    }

    /// The connection the agent's pushes from this node go through.
    pub(super) fn pusher(&self, agent: &AgentId) -> &crate::inbox::Pusher {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::hash::DefaultHasher::new();
        agent.as_str().hash(&mut hasher);
        &self.pushers[(hasher.finish() % self.pushers.len() as u64) as usize]
    }
}
