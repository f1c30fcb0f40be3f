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

/// Stops these agents' copies, lets the journal keep their writes again, and brings them back from it.
async fn roll_back(shared: &Arc<Shared>, agents: &[AgentId]) {
    let Some(durable) = shared.store.durable() else { return };
    let (mut revive, mut parents) = (Vec::with_capacity(agents.len()), Vec::with_capacity(agents.len()));
    for agent in agents {
        // A thaw under way finishes first: then the agent is running, and stopped as a running agent is. A
        // sleeper needs nothing: it thaws from the journal.
        let no_thaw = shared.waking.lock().await;
        let entry = shared.directory.get(agent);
        let asleep = entry.is_none() && shared.sleeping.contains_key(agent);
        drop(no_thaw);
        if asleep {
            durable.caught_up(PEN, agent);
            continue;
        }
        let mut parent = None;
        if let Some(entry) = entry {
            if let Some(mut child) = shared.children.get_mut(&entry.cell.get_id()) {
                child.exit = Exit::RolledBack;
                parent = child.again.parent.clone();
            }
            entry.cell.stop(Some(Exit::RolledBack.reason().to_owned()));
            let _ = entry.cell.wait(None).await;
        }
        revive.push(agent.clone());
        parents.push(parent);
        // After every write the stopped copy made: those stay held back.
        durable.caught_up(PEN, agent);
    }
    let reason = "a commit of its writes failed: it was brought back from what the journal holds";
    let (recovery, absent) = match crate::recovery::revive_agents(shared, &revive).await {
        Ok(revived) => revived,
        Err(err) => {
            tracing::error!(%err, "agents a failed commit left ahead of the journal could not be read back from it");
            return;
        }
    };
    for agent in &recovery.agents {
        tracing::warn!(%agent, "{reason}");
        shared.events.announce(agent, None, None, EventKind::AgentRolledBack { reason: reason.to_owned() });
    }
    for (agent, err) in &recovery.failed {
        let reason = format!("a commit of its writes failed, and it could not be brought back from the journal: {err}");
        shared.events.announce(agent, None, None, EventKind::AgentStopped { reason });
    }
    for agent in &absent {
        let reason = "a commit of its writes failed, and the journal never kept its spawn";
        tracing::warn!(%agent, "{reason}");
        let parent = revive.iter().position(|a| a == agent).and_then(|at| parents[at].as_ref());
        if let Some(parent) = parent
            && let Some(signal) = crate::kinds::child_exited(&crate::kinds::agent_source(agent), agent, reason)
        {
            shared.deliver_anywhere(parent, signal);
        }
        shared.events.announce(agent, None, None, EventKind::AgentStopped { reason: reason.to_owned() });
    }
}
