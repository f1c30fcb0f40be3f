//! Hibernation: an idle agent of a durable runtime is snapshotted and its actor stopped, leaving a few bytes in
//! a map of sleepers; a signal, call or `get` addressed to it thaws it (from its snapshot, as a recovery does),
//! and signals that arrive meanwhile are kept, in order, for it.

use crate::error::RuntimeError;
use crate::events::EventKind;
use crate::id::AgentId;
use crate::shared::Shared;
use crate::signal::Signal;
use std::sync::Arc;

/// Delivers a signal to an agent: to its actor if it is awake, else kept for it and its thaw started. The
/// directory is asked again after the sleepers, since an agent waking in between leaves the sleepers only once
/// it is in the directory.
pub(crate) fn deliver(shared: &Arc<Shared>, to: &AgentId, signal: Signal) -> Result<(), RuntimeError> {
    let mut offered = Some(signal);
    let signal = match (shared.directory.offer(to, &mut offered), offered) {
        (Some(true), _) => return Ok(()),
        (Some(false), _) | (None, None) => return Err(RuntimeError::NoSuchAgent(to.clone())),
        (None, Some(signal)) => signal,
    };
    if let Some(mut sleeper) = shared.sleeping.get_mut(to) {
        if sleeper.kept.len() >= sleeper.kept_limit {
            let limit = sleeper.kept_limit as u64;
            // A thaw that failed is tried again even so: once it succeeds, the kept signals drain.
            if !sleeper.waking {
                sleeper.waking = true;
                drop(sleeper);
                start_waking(shared, to);
            }
            return Err(RuntimeError::LimitReached {
                agent: to.clone(),
                what: "signals kept while it sleeps (its thaw is under way or failed)",
                knob: "kept_signals",
                limit,
            });
        }
        sleeper.kept.push(signal);
        if !sleeper.waking {
            sleeper.waking = true;
            drop(sleeper);
            start_waking(shared, to);
        }
        return Ok(());
    }
    if shared.directory.deliver(to, signal) { Ok(()) } else { Err(RuntimeError::NoSuchAgent(to.clone())) }
}

/// Delivers a signal the runtime made or an agent emitted to an agent: here if it runs here, kept for it
/// (and its thaw started) if it sleeps here, else through [`Shared::elsewhere`](crate::shared::Shared::elsewhere)
/// (when there is one); whether it was taken.
pub(crate) fn deliver_anywhere(shared: &Arc<Shared>, to: &AgentId, signal: Signal) -> bool {
    let mut signal = Some(signal);
    if let Some(taken) = shared.directory.offer(to, &mut signal) {
        return taken;
    }
    let Some(signal) = signal else { return false };
    if shared.sleeping.contains_key(to) {
        return match deliver(shared, to, signal) {
            Ok(()) => true,
            Err(err) => {
                tracing::warn!(agent = %to, %err, "a signal for a sleeping agent was not kept");
                false
            }
        };
    }
    match &shared.elsewhere {
        Some(hook) => {
            hook(crate::elsewhere::Elsewhere::Agent { to: to.clone(), signal, kept_by: None });
            true
        }
        None => false,
    }
}

/// Delivers a topic's signal to its subscribers here: those running, and those asleep (it is kept for each, and
/// its thaw started). Returns how many took it.
pub(crate) fn publish(shared: &Arc<Shared>, topic: &str, signal: &Signal) -> usize {
    let subscribers = shared.directory.subscribers(topic);
    subscribers.iter().filter(|id| deliver(shared, id, signal.clone()).is_ok()).count()
}

/// Whether a signal for `to` would go elsewhere ([`deliver_anywhere`]'s last way): the runtime has a hook for
/// elsewhere, and `to` neither runs nor sleeps here.
pub(crate) fn goes_elsewhere(shared: &Shared, to: &AgentId) -> bool {
    shared.elsewhere.is_some() && !shared.directory.contains(to) && !shared.sleeping.contains_key(to)
}

/// Thaws a hibernating agent at `due`, when a schedule of its comes due (the thaw arms its schedules again,
/// and the due one fires at once). The timer holds the runtime only weakly; if the agent is awake by then
/// (thawed by a signal meanwhile), it does nothing.
pub(crate) fn wake_at(shared: &Arc<Shared>, agent: &AgentId, due: tokio::time::Instant) {
    let (weak, agent) = (Arc::downgrade(shared), agent.clone());
    let Ok(handle) = tokio::runtime::Handle::try_current() else {
        tracing::error!(%agent, "a hibernated agent's schedule cannot be kept outside a tokio runtime");
        return;
    };
    let task = handle.spawn({
        let agent = agent.clone();
        async move {
            tokio::time::sleep_until(due).await;
            let Some(shared) = weak.upgrade() else { return };
            if let Err(err) = wake(&shared, &agent).await {
                tracing::error!(%agent, %err, "a hibernated agent could not be thawed for its schedule");
            }
        }
    });
    // One timer per agent: the last sleep's, if it has not fired, is no longer needed.
    if let Some(previous) = shared.wakers.insert(agent, task.abort_handle())
        && !previous.is_finished()
    {
        previous.abort();
    }
}

/// Thaws an agent in a task of its own (for a caller that cannot wait).
fn start_waking(shared: &Arc<Shared>, agent: &AgentId) {
    let (shared, agent) = (shared.clone(), agent.clone());
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => {
            handle.spawn(async move {
                match wake(&shared, &agent).await {
                    Ok(()) => {}
                    // Let go meanwhile (see `Runtime::release`), its kept signals with it.
                    Err(RuntimeError::NoSuchAgent(_)) => {}
                    Err(err) => {
                        tracing::error!(%agent, %err, "a hibernated agent could not be thawed");
                        // The next signal tries again; meanwhile what is kept stays within its limit.
                        if let Some(mut sleeper) = shared.sleeping.get_mut(&agent) {
                            sleeper.waking = false;
                        }
                    }
                }
            });
        }
        Err(_) => tracing::error!(%agent, "a hibernated agent cannot be thawed outside a tokio runtime"),
    }
}

/// Whether an agent is hibernating (or being thawed).
pub(crate) fn is_asleep(shared: &Shared, agent: &AgentId) -> bool {
    shared.sleeping.contains_key(agent)
}

/// Thaws a hibernated agent and waits until it runs (at once if it is awake). The signals kept for it are its
/// first inputs, in the order they came.
pub(crate) async fn wake(shared: &Arc<Shared>, agent: &AgentId) -> Result<(), RuntimeError> {
    let agent_type = match shared.sleeping.get(agent) {
        Some(sleeper) => sleeper.agent_type.clone(),
        None if shared.directory.get(agent).is_some() => return Ok(()),
        None => return Err(RuntimeError::NoSuchAgent(agent.clone())),
    };
    // Thaws racing for one agent: one spawns it, the others find it in the directory.
    let _one_at_a_time = shared.waking.lock().await;
    if shared.directory.get(agent).is_some() || !shared.sleeping.contains_key(agent) {
        return Ok(());
    }
    let durable = shared.store.durable().ok_or_else(|| RuntimeError::Store {
        agent: agent.clone(),
        message: "a hibernated agent needs a durable store to thaw".to_owned(),
    })?;
    let store_error =
        |e: crate::store::StoreError| RuntimeError::Store { agent: agent.clone(), message: e.to_string() };
    let mut revival = durable
        .revivals(std::slice::from_ref(agent))
        .map_err(store_error)?
        .pop()
        .ok_or_else(|| RuntimeError::NoSuchAgent(agent.clone()))?
        .map_err(store_error)?;
    let record = revival.record.take().ok_or_else(|| RuntimeError::NoSuchAgent(agent.clone()))?;
    let revive = shared
        .revivers
        .get(agent_type.as_ref())
        .map(|r| r.clone())
        .ok_or_else(|| RuntimeError::UnknownAgentType(agent_type.to_string()))?;
    revive(shared.clone(), record, revival).await?;
    shared.events.announce(agent, None, None, EventKind::AgentThawed);
    Ok(())
}

/// Starts, once, the task that asks idle agents to hibernate (when the runtime hibernates idle agents). It ends
/// with the runtime. Every agent server that starts (spawned, restarted, recovered, thawed) makes sure it runs.
pub(crate) fn start_sweeper(shared: &Arc<Shared>) {
    let Some(idle) = shared.hibernate_after else { return };
    if shared.sweeper.set(()).is_err() {
        return;
    }
    let weak = Arc::downgrade(shared);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(idle / 2).await;
            let Some(shared) = weak.upgrade() else { return };
            for id in shared.directory.ids() {
                shared.directory.tell(&id, crate::messages::Untyped::Hibernate(None, Some(idle)));
            }
        }
    });
}
