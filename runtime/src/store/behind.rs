//! The agents a failed commit left ahead of the journal. A commit that fails (the database went away, the disk
//! is full) loses its writes, but the agents that made them went on in memory: their state there now shows
//! what the journal does not hold. Their later writes would leave a hole in their input logs, so the writer
//! holds them back, and the runtime is told: it stops each such agent and brings it back from the journal
//! (see the runtime's `rollback` module), then says so with [`Op::Caught`], and the writer writes for the
//! agent again.
//!
//! A journal whose database brings such agents back itself (a cluster node's, which takes them back under a
//! new lease) is not held back here: see [`super::tables::Database::failed`].

use super::FastHash;
use super::writer::{Op, Waiter};
use crate::id::AgentId;
use std::collections::{HashMap, HashSet};
use uuid::Uuid;

/// The writer's record of the agents it holds the writes of, and where it tells the runtime of them.
pub(crate) struct Behind {
    agents: HashSet<AgentId, FastHash>,
    /// The runs whose records were held back, and their agents: their plans are held back too.
    runs: HashMap<Uuid, AgentId, FastHash>,
    tell: tokio::sync::mpsc::UnboundedSender<AgentId>,
}

impl Behind {
    /// Reports the agents that fall behind to `tell`.
    pub(crate) fn new(tell: tokio::sync::mpsc::UnboundedSender<AgentId>) -> Self {
        Self { agents: HashSet::default(), runs: HashMap::default(), tell }
    }

    /// A commit with these agents' writes failed: their later writes are held back until each is caught up,
    /// and the runtime is told of each that was not behind already.
    pub(crate) fn fell(&mut self, agents: impl IntoIterator<Item = AgentId>) {
        for agent in agents {
            if self.agents.insert(agent.clone()) {
                // The runtime is gone (the receiver dropped): nobody is left to bring the agent back.
                let _ = self.tell.send(agent);
            }
        }
    }

    /// Takes out of `batch`, in order, the writes of agents that are behind, and the flushes that wait on
    /// one of their writes (dropped: their waiters hear the writes were not kept); an [`Op::Caught`] ends an
    /// agent's hold from there on.
    pub(crate) fn hold_back(&mut self, batch: &mut Vec<Op>) {
        if self.agents.is_empty() && !batch.iter().any(|op| matches!(op, Op::Caught(_))) {
            return;
        }
        let mut kept = Vec::with_capacity(batch.len());
        for op in batch.drain(..) {
            match &op {
                Op::Caught(agent) => {
                    self.agents.remove(agent);
                    self.runs.retain(|_, of| of != agent);
                    continue;
                }
                Op::Flush(Waiter::Agent(agent, _)) if self.agents.contains(agent) => continue,
                // An agent's end (or a new agent under its id) replaces all its rows: it leaves no hole, and an
                // agent stopped for good stays ended.
                Op::Ended(_) | Op::Spawned(..) => {}
                Op::Run(row) if self.agents.contains(row.draft.agent()) => {
                    let (agent, run) = row.draft.ids();
                    self.runs.insert(run, agent.clone());
                    continue;
                }
                Op::Plan(run, _) if self.runs.contains_key(run) => continue,
                op => {
                    if op.agent().is_some_and(|agent| self.agents.contains(agent)) {
                        continue;
                    }
                }
            }
            kept.push(op);
        }
        *batch = kept;
    }

    /// Whether `agent`'s writes are held back.
    #[cfg(test)]
    pub(crate) fn holds(&self, agent: &AgentId) -> bool {
        self.agents.contains(agent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::id::ActionId;
    use crate::store::draft::{DraftIds, RecordDraft};
    use crate::store::writer::RunRow;

    fn agent(name: &str) -> AgentId {
        AgentId::new(name).expect("an id")
    }

    fn input(of: &str) -> Op {
        Op::Input(agent(of), 1, b"{}".to_vec(), None, Uuid::now_v7())
    }

    fn run(of: &str, run: Uuid) -> Op {
        let ids = DraftIds {
            run,
            agent: agent(of),
            action: ActionId::new("math.add").expect("an id"),
            correlation: Uuid::now_v7(),
            parent_run: None,
        };
        let draft = RecordDraft::queued(ids, &serde_json::json!({}), None, chrono::Utc::now());
        Op::Run(RunRow { draft, plan: None, outcome: None })
    }

    fn flush_for(of: &str) -> (Op, tokio::sync::oneshot::Receiver<()>) {
        let (done, told) = tokio::sync::oneshot::channel();
        (Op::Flush(Waiter::Agent(agent(of), done)), told)
    }

    /// What each kept op is, in order: its kind and agent (or run).
    fn described(batch: &[Op]) -> Vec<String> {
        batch
            .iter()
            .map(|op| match op {
                Op::Input(agent, ..) => format!("input {agent}"),
                Op::Run(row) => format!("run {}", row.draft.agent()),
                Op::Outcome(..) => "outcome".to_owned(),
                Op::Flush(Waiter::Agent(agent, _)) => format!("flush {agent}"),
                Op::Flush(_) => "flush".to_owned(),
                _ => "other".to_owned(),
            })
            .collect()
    }

    #[test]
    fn an_agent_behind_has_its_writes_held_back_until_it_is_caught_up() {
        let (tell, mut told) = tokio::sync::mpsc::unbounded_channel();
        let mut behind = Behind::new(tell);
        let mut quiet = vec![input("a"), input("b")];
        behind.hold_back(&mut quiet);
        assert_eq!(described(&quiet), ["input a", "input b"], "nobody is behind: all kept");

        behind.fell([agent("a"), agent("a")]);
        behind.fell([agent("a")]);
        assert_eq!(told.try_recv().ok(), Some(agent("a")));
        assert!(told.try_recv().is_err(), "an agent behind already is told of once");

        let (earlier, later) = (Uuid::now_v7(), Uuid::now_v7());
        let (flush_a, a_told) = flush_for("a");
        let (flush_b, _b_told) = flush_for("b");
        let mut batch = vec![
            input("a"),
            input("b"),
            run("a", later),
            Op::Outcome(later, b"{}".to_vec(), false, agent("a")),
            // Even a run whose record was written before the failure: held back too, or its outcome would wait
            // for an agent brought back without it (which settles that run again).
            Op::Outcome(earlier, b"{}".to_vec(), false, agent("a")),
            flush_a,
            flush_b,
            Op::Caught(agent("a")),
            input("a"),
        ];
        behind.hold_back(&mut batch);
        assert_eq!(described(&batch), ["input b", "flush b", "input a"]);
        assert!(!behind.holds(&agent("a")));
        drop(batch);
        assert!(a_told.blocking_recv().is_err(), "a flush for a's held-back writes hears they were not kept");

        // Caught up: a falls behind again only when told so.
        let mut again = vec![input("a"), Op::Outcome(later, b"{}".to_vec(), false, agent("a"))];
        behind.hold_back(&mut again);
        assert_eq!(described(&again), ["input a", "outcome"]);
    }
}
