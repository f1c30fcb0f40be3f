//! Sending on what a node's runtime has for elsewhere (its agents' emits to agents on other nodes, topics'
//! signals, a child's end for a parent elsewhere): in the order its agents made them for each target (an agent,
//! or a topic), and for different targets side by side, in [`LANES`] lanes: each target always takes the same
//! lane, so its signals keep their order, and a target slow to answer holds up only what shares its lane.

use super::Node;
use agentry::runtime::Elsewhere;
use std::hash::{Hash, Hasher};
use std::sync::Weak;
use tokio::sync::{mpsc, oneshot};

/// How many targets' signals are sent on side by side.
pub(super) const LANES: usize = 32;
/// How many signals may wait in one lane; past that, they are dropped with a warning (an emit reaches its target
/// at most once, as on one node).
pub(super) const LANE_QUEUE: usize = 2_048;

/// What waits in a lane, in order.
pub(super) enum Forward {
    /// A signal for elsewhere.
    Signal(Box<Elsewhere>),
    /// Everything before it in the lane was sent on.
    Mark(oneshot::Sender<()>),
}

/// Where the runtime's signals for elsewhere wait, by lane.
#[derive(Clone)]
pub(super) struct Lanes {
    lanes: Vec<mpsc::Sender<Forward>>,
}

impl Lanes {
    /// The lanes, and their ends for [`run`].
    pub(super) fn new() -> (Self, Vec<mpsc::Receiver<Forward>>) {
        let (lanes, ends) = (0..LANES).map(|_| mpsc::channel(LANE_QUEUE)).unzip();
        (Self { lanes }, ends)
    }

    /// Queues a signal in its target's lane (without waiting: called on an agent's server).
    pub(super) fn push(&self, elsewhere: Elsewhere) {
        let lane = &self.lanes[lane_of(&elsewhere)];
        if let Err(err) = lane.try_send(Forward::Signal(Box::new(elsewhere))) {
            tracing::warn!(%err, "a signal for another node was dropped: {LANE_QUEUE} wait in its lane to be sent on");
        }
    }

    /// Resolves once everything queued before the call was sent on, in every lane.
    pub(super) async fn passed(&self) {
        let mut marks = Vec::with_capacity(self.lanes.len());
        for lane in &self.lanes {
            let (done, passed) = oneshot::channel();
            if lane.send(Forward::Mark(done)).await.is_ok() {
                marks.push(passed);
            }
        }
        for passed in marks {
            let _ = passed.await;
        }
    }
}

/// Sends on what comes into each lane, one lane a task, while the node lives.
pub(super) fn run(ends: Vec<mpsc::Receiver<Forward>>, node: Weak<Node>) {
    for mut end in ends {
        let node = node.clone();
        tokio::spawn(async move {
            while let Some(next) = end.recv().await {
                match next {
                    Forward::Signal(elsewhere) => {
                        let Some(node) = node.upgrade() else { return };
                        node.send_on(*elsewhere).await;
                    }
                    Forward::Mark(done) => {
                        let _ = done.send(());
                    }
                }
            }
        });
    }
}

/// The lane of a signal's target: the same for every signal to one agent, or to one topic.
fn lane_of(elsewhere: &Elsewhere) -> usize {
    let mut hasher = std::hash::DefaultHasher::new();
    match elsewhere {
        Elsewhere::Agent { to, .. } => (0u8, to.as_str()).hash(&mut hasher),
        Elsewhere::Topic { topic, .. } => (1u8, topic.as_str()).hash(&mut hasher),
    }
    (hasher.finish() % LANES as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentry::id::AgentId;
    use agentry::signal::Signal;

    fn to(agent: &str, n: u64) -> Elsewhere {
        let signal = Signal::new("add", serde_json::json!(n)).expect("a signal");
        Elsewhere::Agent { to: AgentId::new(agent).expect("an id"), signal, kept_by: None }
    }

    #[test]
    fn a_target_always_takes_one_lane_and_targets_spread_over_them() {
        assert_eq!(lane_of(&to("t1", 1)), lane_of(&to("t1", 2)), "one target, one lane: its order holds");
        let used: std::collections::HashSet<usize> = (0..256).map(|n| lane_of(&to(&format!("t{n}"), 0))).collect();
        assert!(used.len() > LANES / 2, "256 targets took {} lanes of {LANES}", used.len());
    }
}
