//! Replaying an agent's past, for any agent type the registry knows: folding logged inputs into a snapshot's
//! state (`agentry state --at`), and playing inputs after a point into the simulator with the runs it asks for
//! answered from the record (`agentry fork`). Both are generic over the agent type and are handed to the
//! registry as plain function pointers, one per type.

use agentry::agent::Agent;
use agentry::id::{ActionId, AgentId};
use agentry::policy::Policy;
use agentry::signal::Signal;
use agentry::skill::{AgentState, Catalog, Skill};
use agentry_sim::{Recording, RunRecord, SimBuilder};
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::time::Duration;

/// Folds `inputs` into a snapshot's `state` (serialized `AgentState`) with `catalog` and `policy`, and
/// returns the state after them, serialized.
pub(crate) type Replay = fn(Value, &Catalog, &Policy, &[(u64, Signal)]) -> Result<Value, String>;

/// Plays a fork in the simulator (see [`ForkSetup`]).
pub(crate) type Fork = fn(ForkSetup) -> Result<Forked, String>;

/// [`Replay`] for agents of type `A`.
pub(crate) fn replay<A: Agent>(
    state: Value,
    catalog: &Catalog,
    policy: &Policy,
    inputs: &[(u64, Signal)],
) -> Result<Value, String> {
    let mut state = decode::<A>(state, catalog)?;
    for (_, signal) in inputs {
        agentry::driver::replay_input(&mut state, signal, catalog, policy);
    }
    serde_json::to_value(&state).map_err(|e| e.to_string())
}

/// A serialized `AgentState` of `A`, checked against the catalog (every mounted skill must be in it).
fn decode<A: Agent>(state: Value, catalog: &Catalog) -> Result<AgentState<A>, String> {
    let state: AgentState<A> =
        serde_json::from_value(state).map_err(|e| format!("the snapshot is not a state of `{}`: {e}", A::name()))?;
    if let Some(missing) = state.skills().keys().find(|skill| catalog.get(skill).is_none()) {
        return Err(format!("skill `{missing}` is mounted on the agent and not in this catalog"));
    }
    Ok(state)
}

/// What a fork starts from.
pub(crate) struct ForkSetup {
    /// The agent.
    pub id: AgentId,
    /// Its state at the fork's point (a serialized `AgentState`).
    pub state: Value,
    /// The skills it may have mounted.
    pub catalog: Catalog,
    /// Its policy.
    pub policy: Policy,
    /// How many runs it may have in flight.
    pub max_in_flight: usize,
    /// The inputs to give it, each with how long after the fork's point.
    pub inputs: Vec<(Duration, Signal)>,
    /// The runs it made after the fork's point, to answer its runs from.
    pub recording: Recording,
    /// The calendar time of the fork's point (virtual time 0).
    pub epoch: DateTime<Utc>,
    /// How long to play.
    pub until: Duration,
    /// The simulation's seed.
    pub seed: u64,
}

/// What a fork came to.
pub(crate) struct Forked {
    /// The agent's state at the end (a serialized `AgentState`).
    pub state: Value,
    /// Its runs, in the order they ended.
    pub runs: Vec<RunRecord>,
    /// Recorded runs it never asked for, by action.
    pub unreplayed: Vec<(ActionId, usize)>,
    /// Whether it stopped early: the agent asked for too many runs the live agent never made.
    pub stopped: bool,
}

/// [`Fork`] for agents of type `A`.
pub(crate) fn fork<A: Agent>(setup: ForkSetup) -> Result<Forked, String> {
    let state = decode::<A>(setup.state, &setup.catalog)?;
    let mut builder = SimBuilder::<A>::new(setup.seed).epoch(setup.epoch).replaying(setup.recording).keep_runs(true);
    for skill in setup.catalog.iter() {
        builder = builder.skill(Skill::clone(skill));
    }
    let mut sim = builder.build().map_err(|e| e.to_string())?;
    sim.restore(state, setup.policy, setup.max_in_flight).map_err(|e| e.to_string())?;
    for (after, signal) in setup.inputs {
        sim.send_recorded(&setup.id, signal, after).map_err(|e| e.to_string())?;
    }
    sim.run_until(setup.until);
    let state = sim.state(&setup.id).ok_or_else(|| format!("agent `{}` is gone from the fork", setup.id))?;
    Ok(Forked {
        state: serde_json::to_value(state).map_err(|e| e.to_string())?,
        runs: sim.runs().to_vec(),
        unreplayed: sim.recording().map(Recording::unreplayed).unwrap_or_default(),
        stopped: sim.recording().is_some_and(Recording::exhausted),
    })
}
