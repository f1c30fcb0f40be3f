//! Bringing back from the journal the agents a failed commit left ahead of it. A commit can fail (the database
//! went away, the disk filled up) after the agents whose writes it carried went on in memory: their state shows
//! inputs the journal lost, and anything they do next builds on them. The journal's writer holds their later
//! writes back and tells the runtime (see [`crate::store::Durable::fallen_behind`]); this task stops each such
//! agent's actor, without a word to its parent (it is not gone), tells the journal to keep its writes again,
//! and brings it back from what the journal holds, as a recovery after a crash does: its last kept state and
//! inputs, its interrupted runs settled, its schedules armed again. `agent_rolled_back` says so. An agent whose
//! spawn the journal never kept is gone: its parent is told, as of any agent that stopped.
//!
//! A cluster node's journal does not report here: the node takes such agents back itself, under a new lease.

use crate::events::EventKind;
use crate::id::AgentId;
use crate::restart::Exit;
use crate::shared::Shared;
use crate::store::PEN;
use std::sync::Arc;

/// Starts, once, the task that rolls back the agents the journal reports. It ends with the runtime.
pub(crate) fn start(shared: &Arc<Shared>) {
    if shared.rollback.set(()).is_err() {
        return;
    }
    let Some(mut behind) = shared.store.durable().and_then(|durable| durable.fallen_behind(PEN)) else { return };
    let weak = Arc::downgrade(shared);
    let Ok(handle) = tokio::runtime::Handle::try_current() else {
        tracing::error!(
            "agents a failed commit leaves ahead of the journal cannot be rolled back outside a tokio runtime"
        );
        return;
    };
    handle.spawn(async move {
        while let Some(first) = behind.recv().await {
            // Those of one failed commit come together: brought back together.
            let mut agents = vec![first];
            while let Ok(more) = behind.try_recv() {
                agents.push(more);
            }
            let Some(shared) = weak.upgrade() else { return };
            roll_back(&shared, &agents).await;
        }
    });
}

/// How long a rollback waits before it reads again agents the journal could not give back (doubling, up to
/// [`RETRY_MOST`]): the database that failed the commit may still be away.
const RETRY_FIRST: std::time::Duration = std::time::Duration::from_millis(200);
const RETRY_MOST: std::time::Duration = std::time::Duration::from_secs(10);

/// Stops these agents' copies, lets the journal keep their writes again, and brings them back from it.
///
/// From before its copy stops until it is back, each agent has a place held in the sleepers: a spawn of its id
/// is refused, and signals for it are kept and given to it once it is back (as for a sleeper being thawed).
/// No thaw runs meanwhile. An agent whose copy was being stopped for good already is left to end.
async fn roll_back(shared: &Arc<Shared>, agents: &[AgentId]) {
    let Some(durable) = shared.store.durable() else { return };
    let (mut revive, mut parents) = (Vec::with_capacity(agents.len()), std::collections::HashMap::new());
    let mut unregistered = Vec::new();
    let no_thaw = shared.waking.lock().await;
    for agent in agents {
        // A sleeper needs nothing: it thaws from the journal.
        if let Some(entry) = shared.directory.get(agent) {
            let rolled_back = shared.children.get_mut(&entry.cell.get_id()).is_some_and(|mut child| {
                // Not one stopped for good (its end, which ends its rows, is kept).
                let stopping = child.exit != Exit::Unknown;
                if !stopping {
                    child.exit = Exit::RolledBack;
                }
                !stopping
            });
            if rolled_back {
                // Its place among the sleepers, under its type's name (one not registered cannot be brought
                // back: the journal keeps it as it was, for a runtime that registers its type).
                let agent_type = shared.type_names.get(&entry.agent_type).cloned();
                if let Some(agent_type) = &agent_type {
                    let limit = crate::policy::Limits::default().kept_signals;
                    let mut held = crate::shared::Sleeper::new(agent_type.clone(), limit);
                    held.waking = true;
                    shared.sleeping.insert(agent.clone(), held);
                }
                entry.cell.stop(Some(Exit::RolledBack.reason().to_owned()));
                let _ = entry.cell.wait(None).await;
                match agent_type {
                    Some(_) => revive.push(agent.clone()),
                    None => unregistered.push(agent.clone()),
                }
                if let Some(parent) = entry.parent.clone() {
                    parents.insert(agent.clone(), parent);
                }
            }
        }
        // After every write the stopped copy made: those stay held back.
        durable.caught_up(PEN, agent);
    }
    let reason = "a commit of its writes failed: it was brought back from what the journal holds";
    let mut revived = crate::recovery::revive_agents(shared, &revive).await;
    // Thaws of other agents wait no longer (the places held keep these from being thawed by a signal).
    drop(no_thaw);
    let mut wait = RETRY_FIRST;
    let (recovery, absent) = loop {
        match revived {
            Ok(revived) => break revived,
            // A runtime shutting down brings them back from the journal the next time it opens.
            Err(err) if shared.shutting_down.load(std::sync::atomic::Ordering::SeqCst) => {
                tracing::error!(%err, "agents a failed commit left ahead of the journal could not be read back from it before the runtime shut down");
                return;
            }
            Err(err) => {
                tracing::error!(%err, "agents a failed commit left ahead of the journal could not be read back from it; trying again");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(RETRY_MOST);
                revived = crate::recovery::revive_agents(shared, &revive).await;
            }
        }
    };
    for agent in &recovery.agents {
        tracing::warn!(%agent, "{reason}");
        shared.events.announce(agent, None, None, EventKind::AgentRolledBack { reason: reason.to_owned() });
    }
    for (agent, err) in &recovery.failed {
        // Its place stays among the sleepers: the next signal for it thaws it from the journal.
        if let Some(mut held) = shared.sleeping.get_mut(agent) {
            held.waking = false;
        }
        tracing::error!(%agent, %err, "an agent rolled back could not be brought back from the journal yet: the next signal for it tries again");
    }
    for agent in &unregistered {
        let reason = "a commit of its writes failed, and its type is not registered (RuntimeBuilder::agent), so it \
                      could not be brought back: the journal keeps it as it was";
        tracing::error!(%agent, "{reason}");
        shared.directory.leave_topics(agent);
        shared.events.announce(agent, None, None, EventKind::AgentStopped { reason: reason.to_owned() });
    }
    for agent in &absent {
        shared.sleeping.remove(agent);
        shared.directory.leave_topics(agent);
        let reason = "a commit of its writes failed, and the journal never kept its spawn";
        tracing::warn!(%agent, "{reason}");
        if let Some(parent) = parents.get(agent)
            && let Some(signal) = crate::kinds::child_exited(&crate::kinds::agent_source(agent), agent, reason)
        {
            crate::sleep::deliver_anywhere(shared, parent, signal);
        }
        shared.events.announce(agent, None, None, EventKind::AgentStopped { reason: reason.to_owned() });
    }
}
