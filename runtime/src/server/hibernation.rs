//! An agent server falling asleep: when it is idle, its state is snapshotted, it leaves the directory for the
//! runtime's sleepers, and its actor drains and stops. What reaches the actor meanwhile is passed on: signals
//! are kept for the thawed agent, in order, and requests that wait for an answer are dropped, which tells their
//! callers to ask the thawed agent again (an [`crate::runtime::AgentRef`] does so by itself).

use super::ServerState;
use crate::agent::Agent;
use crate::error::RuntimeError;
use crate::events::EventKind;
use crate::messages::ServerMsg;
use crate::restart::Exit;
use crate::shared::Sleeper;
use std::sync::Arc;
use std::time::Duration;

impl<A: Agent> ServerState<A> {
    /// What keeps the agent awake, if anything. Its jobs do: a job's run goes through its agent's gate, and its
    /// end and the effects it asked for go to the agent, so the agent stays awake until its jobs end.
    fn busy(&self) -> Option<String> {
        let jobs = self.shared.jobs.unended_of(&self.agent.id);
        let Some(underway) = self.underway.as_deref() else {
            return (jobs > 0).then(|| format!("{jobs} jobs not ended"));
        };
        if underway.draining.is_some() {
            return Some("the runtime is shutting down".to_owned());
        }
        // Armed schedules do not keep it awake: it is woken when the first comes due (see `fall_asleep`).
        let counts = [
            (underway.running.len(), "runs in flight"),
            (underway.queue.len(), "runs queued"),
            (underway.throttled.len(), "runs held by a rate limit"),
            (underway.awaiting.len(), "runs waiting for approval"),
            (underway.inbox.len(), "outcome signals not yet handled"),
            (underway.calls.values().filter(|port| !port.is_closed()).count(), "calls waiting for a reply"),
            (jobs, "jobs not ended"),
        ];
        let going: Vec<String> = counts.iter().filter(|(n, _)| *n > 0).map(|(n, what)| format!("{n} {what}")).collect();
        (!going.is_empty()).then(|| going.join(", "))
    }

    /// Falls asleep if idle (and idle for at least `idle_for`, when given); tells `done` either way.
    pub(super) fn on_hibernate(
        &mut self,
        done: Option<tokio::sync::oneshot::Sender<Result<(), RuntimeError>>>,
        idle_for: Option<Duration>,
    ) {
        let result = self.fall_asleep(idle_for);
        if let Some(done) = done {
            let _ = done.send(result);
        }
    }

    fn fall_asleep(&mut self, idle_for: Option<Duration>) -> Result<(), RuntimeError> {
        let agent = self.agent.id.clone();
        if self.shared.store.durable().is_none() {
            return Err(RuntimeError::Store {
                agent,
                message: "hibernation needs a durable store (RuntimeBuilder::durable)".to_owned(),
            });
        }
        if let Some(idle) = idle_for
            && self.last_active.elapsed() < idle
        {
            return Err(RuntimeError::Busy { agent, why: "it handled a message recently".to_owned() });
        }
        if let Some(why) = self.busy() {
            return Err(RuntimeError::Busy { agent, why });
        }
        self.keep_asleep(true);
        self.save_snapshot();
        // Its schedules are in the journal: a thaw arms them again. Until then one timer of the runtime's wakes
        // it when the first comes due (one whose timer fired already, its signal still on the way, is due now).
        let next_due = self.under().and_then(|u| {
            let now = tokio::time::Instant::now();
            let due = u.schedules.values().map(|armed| if armed.task.is_finished() { now } else { armed.due }).min();
            for (_, armed) in u.schedules.drain() {
                armed.task.abort();
            }
            due
        });
        // The sleeper first, then out of the directory: a sender that misses one finds the other.
        let agent_type: Arc<str> = A::name().into();
        self.shared.sleeping.insert(agent.clone(), Sleeper::new(agent_type, self.policy.limits.kept_signals));
        self.shared.directory.remove_cell(&agent, self.myself.get_id());
        // Only now, asleep: a timer already due must find it so.
        if let Some(due) = next_due {
            crate::sleep::wake_at(&self.shared, &agent, due);
        }
        self.asleep = true;
        self.exit = Exit::Hibernated;
        self.shared.events.announce(&agent, None, None, EventKind::AgentHibernated);
        // What is already in the mailbox is passed on (see `while_asleep`), then the actor stops.
        if self.myself.drain().is_err() {
            self.myself.stop(Some("hibernated".to_owned()));
        }
        Ok(())
    }

    /// A message that reached the actor after it fell asleep.
    pub(super) fn while_asleep(&mut self, message: ServerMsg<A>) {
        match message {
            ServerMsg::Signal(signal) => {
                if let Err(err) = crate::sleep::deliver(&self.shared, &self.agent.id, *signal) {
                    tracing::warn!(agent = %self.agent.id, %err, "a signal to a hibernating agent was lost");
                }
            }
            // Nothing changed since the snapshot: the state is still the agent's.
            ServerMsg::Snapshot(reply) => {
                let _ = reply.send(self.agent.clone());
            }
            // Dropped: its caller is told the actor stopped, and asks the thawed agent.
            _ => {}
        }
    }
}
