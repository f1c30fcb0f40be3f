//! `counter`: a per-agent counter that signals drive. `counter.increment` adds the configured step;
//! `counter.get` replies with the value. Pure: the state lives in the agent, no action runs.

use agentry::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The counter's per-agent state; the mount options set `step` (and may set a starting `value`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct CounterState {
    /// How much each `counter.increment` adds; at least 1.
    #[schemars(range(min = 1))]
    pub step: u64,
    /// The current value.
    pub value: u64,
}

impl Default for CounterState {
    fn default() -> Self {
        Self { step: 1, value: 0 }
    }
}

/// Counts `counter.increment` signals by a configured step and answers `counter.get`.
#[derive(Skill)]
#[skill(id = "counter", version = "1.0.0", category = "state", state = CounterState, handle_signal = handle)]
pub struct Counter;

fn handle(state: &CounterState, signal: &Signal, _ctx: &SkillContext<'_>) -> SkillReaction<CounterState> {
    match signal.kind().as_str() {
        "counter.increment" => {
            let value = state.value.saturating_add(state.step);
            SkillReaction::Handled(CounterState { value, ..state.clone() }, vec![])
        }
        "counter.get" => SkillReaction::Handled(state.clone(), vec![Effect::reply(signal.id(), state.value.into())]),
        _ => SkillReaction::Ignore,
    }
}
