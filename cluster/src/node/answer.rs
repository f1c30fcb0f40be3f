//! What a node answers its peers on the wire: a signal or a call for an agent it holds (through the agent's
//! inbox, so a retry is a duplicate), a signal a peer's runtime made for one of its agents or topics, and a spawn
//! of a registered type here.

use super::{Node, NodeError};
use crate::inbox::{Pushed, relayable};
use crate::wire::{WireReply, WireRequest};
use agentry::runtime::{Elsewhere, RuntimeError, SpawnOptions};
use std::sync::PoisonError;
use std::time::Duration;

impl Node {
    /// Answers a request that came over the wire: for an agent this node holds, the signal goes into its inbox
    /// (a duplicate is dropped there) and is given to it at once; a call waits for the agent's reply.
    pub(super) async fn answer(&self, request: WireRequest) -> WireReply {
        let failed = |err: NodeError| WireReply::Failed { reason: err.to_string() };
        let agent = match &request {
            WireRequest::Publish { signal, .. } | WireRequest::Relay { signal, .. } if !relayable(signal) => {
                return WireReply::Failed {
                    reason: format!(
                        "a relayed signal of kind `{}` from `{}` is refused: expected a kind of the agents' own, or a child's end from that child",
                        signal.kind(),
                        signal.source()
                    ),
                };
            }
            WireRequest::Publish { topic, signal } => {
                let topic = Elsewhere::Topic { topic: topic.clone(), signal: signal.clone() };
                self.runtime.relay(topic);
                return WireReply::Accepted;
            }
            WireRequest::Spawn { agent_type, agent, init, parent, policy } => {
                if let Err(broader) = policy.within(&self.options.peer_spawns) {
                    return WireReply::Failed {
                        reason: format!(
                            "the spawn of agent `{agent}` asks for a policy broader than node `{}` allows its peers \
                             (`NodeOptions::peer_spawns`): {broader}; expected one within it",
                            self.options.name
                        ),
                    };
                }
                let opts = SpawnOptions {
                    id: Some(agent.clone()),
                    parent: parent.clone(),
                    policy: (**policy).clone(),
                    ..SpawnOptions::default()
                };
                return match self.spawn_named(agent_type, init.clone(), opts).await {
                    Ok(_) => WireReply::Accepted,
                    Err(NodeError::Runtime(RuntimeError::UnknownAgentType(agent_type))) => {
                        WireReply::UnknownType { agent_type }
                    }
                    Err(err) => failed(err),
                };
            }
            WireRequest::Send { agent, .. } | WireRequest::Call { agent, .. } | WireRequest::Relay { agent, .. } => {
                agent.clone()
            }
        };
        if !self.holds(&agent) {
            return WireReply::NotHere;
        }
        match request {
            WireRequest::Publish { .. } | WireRequest::Spawn { .. } => WireReply::Accepted,
            WireRequest::Relay { signal, .. } => {
                // Through the agent's inbox, as a send: a relay that comes again (the sender gave up on the
                // wire and left it in the inbox, say) is a duplicate. (A child's end is heard as it is given.)
                self.take_in(&agent, &signal, true).await
            }
            WireRequest::Send { signal, .. } => self.take_in(&agent, &signal, false).await,
            WireRequest::Call { signal, timeout_ms, .. } => {
                // The peer says how long its caller waits; this node waits no longer than for any call.
                let timeout = Duration::from_millis(timeout_ms).min(super::CALL_REPLY_WAIT);
                let id = signal.id();
                let (told, reply) = tokio::sync::oneshot::channel();
                {
                    let mut waiting = self.wire_calls.lock().unwrap_or_else(PoisonError::into_inner);
                    if waiting.contains_key(&id) {
                        return WireReply::Failed {
                            reason: format!("a call with signal id {id} is under way already"),
                        };
                    }
                    waiting.insert(id, told);
                }
                let called = async {
                    let pushed = self.pusher(&agent).push_call(&agent, &signal, &self.options.name).await?;
                    // A retry of a call taken before: its reply, if it was posted, is in the replies table.
                    if pushed == Pushed::Duplicate
                        && let Some(value) = self.replies.take_reply(id).await?
                    {
                        return Ok(Ok(value));
                    }
                    // In the inbox, it is given by a later delivery if not by this one (an agent this node is
                    // still bringing back, say), and its reply comes here all the same.
                    if let Err(err) = self.deliver(&agent).await {
                        tracing::debug!(%agent, %err, "a call from the wire waits in the inbox");
                    }
                    reply.await.map_err(|_| NodeError::Runtime(RuntimeError::Stopped(agent.clone())))
                };
                let answered = tokio::time::timeout(timeout, called).await;
                self.wire_calls.lock().unwrap_or_else(PoisonError::into_inner).remove(&id);
                match answered {
                    Ok(Ok(Ok(value))) => WireReply::Answer { value },
                    Ok(Ok(Err(reason))) => WireReply::Failed { reason },
                    Ok(Err(err)) => failed(err),
                    Err(_) => failed(RuntimeError::Timeout { agent, timeout }.into()),
                }
            }
        }
    }

    /// Puts a signal from the wire in the agent's inbox (a duplicate is dropped there), then gives it at once.
    async fn take_in(
        &self,
        agent: &agentry::id::AgentId,
        signal: &agentry::signal::Signal,
        relayed: bool,
    ) -> WireReply {
        let pushed = self.pusher(agent).keep_here(agent, signal, relayed).await;
        match pushed {
            Ok(Pushed::Duplicate) => return WireReply::Duplicate,
            Ok(Pushed::Kept) => {}
            Err(err) => return WireReply::Failed { reason: err.to_string() },
        }
        if let Err(err) = self.deliver(agent).await {
            // Taken, in the inbox: given at the next round.
            tracing::warn!(%agent, %err, "a signal from the wire waits in the inbox for the next round");
        }
        WireReply::Accepted
    }
}

#[cfg(test)]
mod tests {
    use crate::inbox::relayable;
    use agentry::signal::Signal;
    use serde_json::json;

    fn made(kind: &str, source: &str, data: serde_json::Value) -> Signal {
        Signal::builder(kind).source(source).data(data).build().expect("a signal")
    }

    /// The attack: a peer with the cookie relays a run's outcome, or a child's end in another agent's name.
    #[test]
    fn a_peer_relays_only_its_agents_own_signals_and_a_childs_end_from_that_child() {
        assert!(relayable(&made("add", "agentry/agent/t1", json!(1))), "an agent's own signal");
        let end = json!({"child": "c1", "reason": "done"});
        assert!(relayable(&made(agentry::kinds::AGENT_CHILD_EXITED, "agentry/agent/c1", end.clone())));
        assert!(!relayable(&made(agentry::kinds::AGENT_CHILD_EXITED, "agentry/agent/other", end)), "in another's name");
        assert!(!relayable(&made("action.completed", "agentry/agent/t1", json!({}))), "a run's outcome");
        assert!(!relayable(&made("job.ended", "agentry", json!({}))), "a job's news");
    }
}
