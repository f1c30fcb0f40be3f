//! Bringing agents back from a durable store after the process stopped (a crash, `kill -9`, or a shutdown):
//! each agent that was alive is spawned again from its latest snapshot, with the inputs logged after it
//! replayed through the pure `step`. Replay re-produces effects, and none of them is executed again: the runs
//! they asked for are matched, by idempotency key, to the journal (see the server's `durability` module for
//! what happens to each run).

use crate::agent::{Agent, AgentState, step};
use crate::effect::EffectKind;
use crate::error::RuntimeError;
use crate::id::AgentId;
use crate::server::{AgentServer, Recovered, Replayed, ServerArgs, SpawnSettings};
use crate::shared::Shared;
use crate::store::{AgentRecord, AliveAgent, Revival};
use ractor::Actor;
use std::collections::{HashMap, HashSet};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

/// What [`crate::runtime::Runtime::recover`] brought back.
#[derive(Debug, Default)]
pub struct Recovery {
    /// The agents running again.
    pub agents: Vec<AgentId>,
    /// The agents that were hibernating: they stay asleep until something is sent to them.
    pub asleep: Vec<AgentId>,
    /// The agents that could not be brought back, and why (they stay in the store, untouched).
    pub failed: Vec<(AgentId, RuntimeError)>,
    /// How many logged inputs were replayed through `step`, in all.
    pub replayed: u64,
}

fn store_error(agent: &AgentId, err: impl std::fmt::Display) -> RuntimeError {
    RuntimeError::Store { agent: agent.clone(), message: err.to_string() }
}

/// The state in a snapshot, read by this build of the agent type, or a typed error naming both versions.
fn decode_state<A: Agent>(
    agent: &AgentId,
    stored: u32,
    state: serde_json::Value,
) -> Result<AgentState<A>, RuntimeError> {
    let mismatch = |message: String| RuntimeError::SnapshotVersion {
        agent: agent.clone(),
        agent_type: A::name().to_owned(),
        stored,
        current: A::version(),
        message,
    };
    if stored > A::version() {
        return Err(mismatch("it is newer than this build".to_owned()));
    }
    serde_json::from_value(state).map_err(|e| mismatch(e.to_string()))
}

/// Folds one logged input into an agent's state as a recovery does, and as the live server did: `step`, then
/// the skills the agent mounted or unmounted itself (the same pure functions; one that failed live fails again
/// and changes nothing). A handler that fails or panics changes nothing and asks for nothing. Returns the runs
/// the input asked for, in order (they are matched to the journal, never run again). For replaying an agent's
/// past: time travel, forks, audits.
pub fn replay_input<A: Agent>(
    state: &mut AgentState<A>,
    signal: &crate::signal::Signal,
    catalog: &crate::skill::Catalog,
    policy: &crate::policy::Policy,
) -> Vec<(crate::id::ActionId, serde_json::Value)> {
    let Ok(Ok(stepped)) = catch_unwind(AssertUnwindSafe(|| step(state, signal, catalog))) else { return Vec::new() };
    let mut runs = Vec::new();
    for effect in stepped.effects {
        match effect.kind {
            EffectKind::Run { action, params } => runs.push((action, params)),
            EffectKind::MountSkill { skill, opts } => {
                if let Some(skill) = catalog.get(&skill) {
                    let _ = catch_unwind(AssertUnwindSafe(|| crate::skill::mount(state, skill, &opts, policy)));
                }
            }
            EffectKind::UnmountSkill { skill } => {
                let _ = crate::skill::unmount(state, &skill);
            }
            _ => {}
        }
    }
    runs
}

/// The `RegisterAction` effects that make an agent's action table what its mounted skills provide, as when they
/// were mounted: for an agent brought back in a state it had (a recovery, a replay into the simulator), whose
/// skills are not mounted again.
pub fn table_effects<A: Agent>(state: &AgentState<A>) -> Vec<crate::effect::Effect> {
    let mut effects = Vec::new();
    for (skill, mounted) in state.skills() {
        for action in &mounted.actions {
            let mut effect = crate::effect::Effect::register(action.clone());
            effect.meta.skill = Some(skill.clone());
            effects.push(effect);
        }
    }
    effects
}

/// How the supervisor is to start an agent of type `A` again (the runtime's spawn path, handed down, so the
/// recovery sits below the runtime).
pub(crate) type Respawner<A> =
    fn(&Arc<crate::restart::Again>, A, Arc<std::sync::Mutex<crate::restart::Restarts>>) -> crate::shared::Respawn;

/// Hands the runtime's hook for elsewhere what agent `id` emitted to agents elsewhere and its journal kept as
/// not sent on yet, in the order it made them, before the agent handles anything (so before what it emits from
/// now on): its last copy may have gone before sending them. The same ids: a target that had one already drops
/// it. Without a hook (a journal a cluster wrote, opened by a runtime alone), they stay kept.
fn send_again(shared: &Shared, id: &AgentId, unsent: Vec<(AgentId, crate::signal::Signal)>) {
    let Some(hook) = &shared.elsewhere else {
        if !unsent.is_empty() {
            tracing::warn!(agent = %id, kept = unsent.len(), "emits kept for agents elsewhere wait: this runtime has no way there");
        }
        return;
    };
    for (to, signal) in unsent {
        hook(crate::elsewhere::Elsewhere::Agent { to, signal, kept_by: Some(id.clone()) });
    }
}

/// How many agents a recovery reads from the store at a time.
const REVIVE_AT_ONCE: usize = 256;

/// Brings back one agent of type `A` from what the store kept of it (`revival`, read beforehand): snapshot,
/// replay, then the server, which settles the runs. Returns how many inputs were replayed.
pub(crate) async fn revive<A: Agent>(
    shared: Arc<Shared>,
    record: AgentRecord,
    revival: Revival,
    respawner: Respawner<A>,
) -> Result<u64, RuntimeError> {
    let id = record.agent.clone();
    let settings: SpawnSettings = serde_json::from_value(record.spawn.clone())
        .map_err(|e| store_error(&id, format!("its spawn settings do not decode: {e}")))?;
    let Revival { snapshot, inputs, schedules, runs, jobs, unsent, .. } = revival;
    let snapshot = snapshot.ok_or_else(|| store_error(&id, "it has no snapshot"))?;
    let mut state: AgentState<A> = decode_state(&id, snapshot.version, snapshot.state)?;
    if state.id != id {
        return Err(store_error(&id, format!("its snapshot is of agent `{}`", state.id)));
    }
    let catalog = shared.catalog.snapshot();
    for skill in state.skills().keys() {
        if catalog.get(skill).is_none() {
            return Err(RuntimeError::UnknownSkill(skill.clone()));
        }
    }
    let mut recovered = Recovered { seq: snapshot.seq, incarnation: snapshot.incarnation, ..Recovered::default() };
    let replayed = inputs.len() as u64;
    for (seq, signal) in inputs {
        recovered.seq = seq;
        recovered.inputs.insert(signal.id());
        let runs = replay_input(&mut state, &signal, &catalog, &settings.policy);
        for (index, (action, params)) in runs.into_iter().enumerate() {
            recovered.replayed.push(Replayed {
                key: {
                    let index = u32::try_from(index).unwrap_or(u32::MAX);
                    let key = crate::action::RunKey::Input { incarnation: snapshot.incarnation, seq, index };
                    let mut text = String::new();
                    key.write_to(&id, uuid::Uuid::nil(), &mut text);
                    text
                },
                action,
                params,
                correlation: signal.correlation_id(),
                cause: signal.id(),
            });
        }
    }
    recovered.runs = runs;
    recovered.schedules = schedules;
    recovered.jobs = jobs;

    let start_effects = table_effects(&state);
    let history = Arc::new(std::sync::Mutex::new(crate::restart::Restarts::new(settings.restart)));
    let opts = crate::restart::SpawnOptions {
        id: Some(id.clone()),
        name: settings.name,
        policy: settings.policy,
        restart: settings.restart,
        max_in_flight: settings.max_in_flight,
        parent: settings.parent,
    };
    let again = Arc::new(crate::restart::Again::of(&id, opts));
    let respawn = respawner(&again, state.domain.clone(), history.clone());
    let args = ServerArgs {
        state,
        start_effects,
        again,
        shared: shared.clone(),
        history,
        respawn,
        recovered: Some(recovered),
    };
    send_again(&shared, &id, unsent);
    let supervisor = crate::supervisor::supervisor(&shared, &id).await?;
    Actor::spawn_linked(None, AgentServer::<A>::new(), args, supervisor)
        .await
        .map_err(|e| crate::error::spawn_error(&id, e))?;
    Ok(replayed)
}

/// How many agents a recovery lists from the store at a time (sleepers go straight to the map of sleepers).
const LIST_AT_ONCE: usize = 10_000;

/// Brings back every agent the store says was alive, parents before children; see [`Recovery`]. The store
/// lists agents a page at a time and only the awake ones are read whole, so reopening millions of sleepers holds
/// one page of them beside the sleepers themselves.
pub(crate) async fn recover(shared: &Arc<Shared>) -> Result<Recovery, RuntimeError> {
    let system = AgentId::new("runtime").map_err(|e| store_error(&AgentId::random(), e))?;
    let Some(durable) = shared.store.durable() else { return Ok(Recovery::default()) };
    let mut recovery = Recovery::default();
    let mut awake: Vec<AliveAgent> = Vec::new();
    // Sleepers of one type share its name.
    let mut types: HashMap<String, Arc<str>> = HashMap::new();
    let mut after: Option<AgentId> = None;
    loop {
        let page = durable.alive(after.as_ref(), LIST_AT_ONCE).map_err(|e| store_error(&system, e))?;
        let Some(last) = page.last() else { break };
        after = Some(last.agent.clone());
        let full = page.len() == LIST_AT_ONCE;
        for listed in page {
            let id = &listed.agent;
            if shared.directory.get(id).is_some() || shared.sleeping.contains_key(id) {
                continue;
            }
            // A sleeper with jobs to settle wakes: one not ended is started again or ends, and one whose end
            // it was not given is given it.
            if listed.asleep && !listed.jobs_pending {
                let agent_type = types.entry(listed.agent_type).or_insert_with_key(|name| name.as_str().into()).clone();
                // Its policy is read when it thaws; until then the default limit holds.
                let kept_limit = crate::policy::Limits::default().kept_signals;
                let sleeper = crate::shared::Sleeper::new(agent_type, kept_limit);
                shared.sleeping.insert(listed.agent.clone(), sleeper);
                if let Some(due) = listed.next_due {
                    let after = (due - chrono::Utc::now()).to_std().unwrap_or_default();
                    crate::sleep::wake_at(shared, &listed.agent, tokio::time::Instant::now() + after);
                }
                recovery.asleep.push(listed.agent);
            } else {
                awake.push(listed);
            }
        }
        if !full {
            break;
        }
    }
    // Parents first: a child's `agent.child_exited` finds its parent.
    let parents: HashSet<AgentId> = awake.iter().filter_map(|a| a.parent.clone()).collect();
    awake.sort_by_key(|a| !parents.contains(&a.agent));
    // Read a few hundred agents at once (one trip to the store), then bring them back one by one.
    for chunk in awake.chunks(REVIVE_AT_ONCE) {
        let ids: Vec<AgentId> = chunk.iter().map(|a| a.agent.clone()).collect();
        let revivals = durable.revivals(&ids).map_err(|e| store_error(&system, e))?;
        for (id, revival) in ids.into_iter().zip(revivals) {
            // One ended since it was listed: nothing to bring back.
            let _ended = revive_read(shared, id, revival, &mut recovery).await;
        }
    }
    Ok(recovery)
}

/// Brings back these agents, which are not running, from what the journal holds of them, as a recovery does
/// (awake, whether or not they were hibernating): returns what it brought back, and the agents the journal does
/// not hold (never spawned in it, or ended).
pub(crate) async fn revive_agents(
    shared: &Arc<Shared>,
    agents: &[AgentId],
) -> Result<(Recovery, Vec<AgentId>), RuntimeError> {
    let (mut recovery, mut absent) = (Recovery::default(), Vec::new());
    let Some(durable) = shared.store.durable() else { return Ok((recovery, agents.to_vec())) };
    for chunk in agents.chunks(REVIVE_AT_ONCE) {
        let revivals = durable.revivals(chunk).map_err(|e| store_error(&chunk[0], e))?;
        for (id, revival) in chunk.iter().zip(revivals) {
            if !revive_read(shared, id.clone(), revival, &mut recovery).await {
                absent.push(id.clone());
            }
        }
    }
    Ok((recovery, absent))
}

/// Brings back one agent from what was read of it, noting it in `recovery`: false if the journal does not hold
/// it (nothing to bring back).
async fn revive_read(
    shared: &Arc<Shared>,
    id: AgentId,
    revival: Result<Revival, crate::store::StoreError>,
    recovery: &mut Recovery,
) -> bool {
    let revived = match revival {
        Err(err) => Err(store_error(&id, err)),
        Ok(mut revival) => match revival.record.take() {
            Some(record) => match shared.revivers.get(&record.agent_type).map(|r| r.clone()) {
                Some(revive) => revive(shared.clone(), record, revival).await,
                None => Err(RuntimeError::UnknownAgentType(record.agent_type)),
            },
            None => return false,
        },
    };
    match revived {
        Ok(replayed) => {
            recovery.replayed += replayed;
            recovery.agents.push(id);
        }
        Err(err) => {
            tracing::error!(agent = %id, %err, "an agent could not be brought back");
            recovery.failed.push((id, err));
        }
    }
    true
}
