//! The runtime's supervisor: one `ractor` actor that every agent's server is linked to. It hears how each agent
//! ended and applies the agent's restart policy:
//!
//! - stopped from outside (its parent, [`crate::runtime::Runtime::stop`], a shutdown): final;
//! - stopped itself with a `Stop` effect (a normal exit): restarted if `Permanent`, final otherwise;
//! - failed (a panic that escaped the server, say in a skill's code): restarted if `Permanent` or `Transient`,
//!   within the policy's limit, final for `Never`;
//! - stopped because its handler panicked more often than the policy allows: final.
//!
//! A restarted agent starts again from its spawn arguments (its initial domain state and start skills), as an
//! OTP child does; a panic inside its signal handler is survived in place, with its last good state. When an
//! exit is final, the parent gets `agent.child_exited` and the stream `agent_stopped`. A failed agent's server
//! could not clean up after itself, so the supervisor does: its directory entry and its jobs.

use crate::error::RuntimeError;
use crate::events::EventKind;
use crate::id::AgentId;
use crate::restart::{Exit, RestartMode, Verdict};
use crate::shared::Child;
use crate::shared::Shared;
use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};
use std::sync::{Arc, Weak};

/// The supervisor actor.
pub(crate) struct Supervisor;

/// The supervisor takes no messages: it only hears how the agents linked to it ended.
pub(crate) enum SupervisorMsg {}

// With ractor's `cluster` feature (on once the cluster crate is in the build), every message type says it is one.
#[cfg(feature = "cluster")]
impl ractor::Message for SupervisorMsg {}

impl Actor for Supervisor {
    type Msg = SupervisorMsg;
    type State = Weak<Shared>;
    type Arguments = Weak<Shared>;

    async fn pre_start(
        &self,
        _myself: ActorRef<SupervisorMsg>,
        shared: Weak<Shared>,
    ) -> Result<Weak<Shared>, ActorProcessingErr> {
        Ok(shared)
    }

    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<SupervisorMsg>,
        event: SupervisionEvent,
        shared: &mut Weak<Shared>,
    ) -> Result<(), ActorProcessingErr> {
        let Some(shared) = shared.upgrade() else { return Ok(()) };
        match event {
            SupervisionEvent::ActorTerminated(cell, _, _) => {
                if let Some((_, child)) = shared.children.remove(&cell.get_id()) {
                    // An actor killed (not stopped) never ran its cleanup either.
                    if child.exit == Exit::Unknown {
                        clean_up(&shared, &child, cell.get_id(), "the agent was killed");
                    }
                    ended(&shared, child, None).await;
                }
            }
            SupervisionEvent::ActorFailed(cell, error) => {
                if let Some((_, child)) = shared.children.remove(&cell.get_id()) {
                    clean_up(&shared, &child, cell.get_id(), "the agent failed");
                    ended(&shared, child, Some(error.to_string())).await;
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// What a server that could not clean up after itself leaves behind: its directory entry (only its own) and
/// its jobs.
fn clean_up(shared: &Shared, child: &Child, cell: ractor::ActorId, why: &str) {
    shared.directory.remove_cell(&child.agent, cell);
    for job in shared.jobs.cancel_agent(&child.agent, why) {
        crate::jobs::announce_end(&shared.events, &job);
    }
}

/// Restarts an agent whose exit its policy restarts, else tells its parent and the event stream it stopped.
async fn ended(shared: &Arc<Shared>, child: Child, failure: Option<String>) {
    // Not gone: a sleeper thaws when a signal comes, and an agent rolled back is brought back from the journal
    // (by the runtime's `rollback`, which stopped it; a failure meanwhile changes nothing).
    if (child.exit == Exit::Hibernated && failure.is_none()) || child.exit == Exit::RolledBack {
        return;
    }
    let restart = matches!(
        (&child.exit, &failure, child.again.restart.mode),
        (_, Some(_), RestartMode::Permanent | RestartMode::Transient) | (Exit::Normal(_), None, RestartMode::Permanent)
    );
    let reason = match &failure {
        Some(error) => format!("the agent failed: {error}"),
        None => child.exit.reason().to_owned(),
    };
    if restart {
        let verdict = child
            .history
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .record_panic(tokio::time::Instant::now(), "the agent");
        match verdict {
            Verdict::Restart(restarts) => {
                // Told before the new actor starts: what waited in the old one's mailbox is gone.
                if let Some(hook) = &shared.before_restart {
                    hook(&child.agent);
                }
                match (child.respawn)(shared.clone()).await {
                    Ok(()) => {
                        let restarted = EventKind::AgentRestarted { restarts, afresh: true };
                        shared.events.announce(&child.agent, None, None, restarted);
                        return;
                    }
                    Err(error) => {
                        return final_exit(shared, &child, format!("{reason}; it could not restart: {error}"));
                    }
                }
            }
            Verdict::Stop(gave_up) => return final_exit(shared, &child, format!("{reason}; {gave_up}")),
        }
    }
    final_exit(shared, &child, reason);
}

/// Tells the parent (`agent.child_exited`) and then the event stream (`agent_stopped`) that an agent is gone;
/// it leaves its topics (its server did already, when it stopped for good; not one that failed), unless another
/// agent runs or sleeps under its id by now.
fn final_exit(shared: &Arc<Shared>, child: &Child, reason: String) {
    if !shared.directory.contains(&child.agent) && !shared.sleeping.contains_key(&child.agent) {
        shared.directory.leave_topics(&child.agent);
    }
    if let Some(parent) = &child.again.parent
        && let Some(signal) =
            crate::kinds::child_exited(&crate::kinds::agent_source(&child.agent), &child.agent, &reason)
    {
        crate::sleep::deliver_anywhere(shared, parent, signal);
    }
    shared.events.announce(&child.agent, None, None, EventKind::AgentStopped { reason });
}

/// The runtime's supervisor, started on first use (by the spawn of `agent`).
pub(crate) async fn supervisor(shared: &Arc<Shared>, agent: &AgentId) -> Result<ractor::ActorCell, RuntimeError> {
    let cell = shared
        .supervisor
        .get_or_try_init(|| async {
            let (actor, _) = Actor::spawn(None, Supervisor, Arc::downgrade(shared)).await.map_err(|e| {
                RuntimeError::Spawn { agent: agent.clone(), message: format!("the supervisor did not start: {e}") }
            })?;
            Ok::<_, RuntimeError>(actor.get_cell())
        })
        .await?;
    Ok(cell.clone())
}
