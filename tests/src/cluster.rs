//! The agent the cluster tests run on their node processes (`cluster_node`): a `Tally` keeps, in order, every
//! number it was given, so a test can tell a signal applied twice, lost, or out of order.

use agentry::agent::{Agent, Reaction};
use agentry::effect::Effect;
use agentry::signal::Signal;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// Every number given to it with `add`, in the order it was applied.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally {
    /// The numbers, in order.
    pub applied: Vec<u64>,
}

impl Agent for Tally {
    fn name() -> &'static str {
        "tally"
    }

    fn handle_signal(&self, signal: &Signal) -> Reaction<Self> {
        match signal.kind().as_str() {
            // `add n`: keeps n, and replies how many it has.
            "add" => {
                let mut next = self.clone();
                next.applied.push(signal.data().as_u64().unwrap_or_default());
                let reply = Effect::reply(signal.id(), json!(next.applied.len()));
                Reaction::Update(next, vec![reply])
            }
            // `ask`: replies its state.
            "ask" => Reaction::Keep(vec![Effect::reply(signal.id(), json!(self))]),
            _ => Reaction::Ignore,
        }
    }
}
