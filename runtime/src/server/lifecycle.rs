//! An agent server's life: entering the directory as it starts, draining for a graceful shutdown, and cleaning
//! up when it stops (runs and jobs cancelled, directory entry removed, parent told).

use super::{RunIds, ServerArgs, ServerState};
use crate::action::ActionContext;
use crate::agent::Agent;
use crate::directory::Entry;
use crate::error::RuntimeError;
use crate::events::EventKind;
use crate::messages::ServerMsg;
use crate::restart::Exit;
use crate::shared::Child;
use ractor::{ActorProcessingErr, ActorRef};
use std::any::TypeId;

/// Puts a starting agent in the directory, under its id and name. Fails (and the actor never starts) when
/// either is taken, so of two spawns racing on one id the loser never runs and never touches the winner's
/// entry, runs or jobs.
pub(super) fn enter_directory<A: Agent>(
    myself: &ActorRef<ServerMsg<A>>,
    args: &ServerArgs<A>,
) -> Result<(), ActorProcessingErr> {
    let entry = Entry::new(
        args.again.name.clone(),
        args.again.parent.clone(),
        TypeId::of::<A>(),
        myself.get_cell(),
        crate::directory::deliver::<A>,
    );
    match args.shared.directory.insert(args.state.id.clone(), entry) {
        Ok(()) => Ok(()),
        Err(taken) => Err(Box::new(RuntimeError::AlreadyExists(taken))),
    }
}

/// Tells the supervisor about a starting agent: how to restart it, and under which policy.
pub(super) fn enter_supervision<A: Agent>(myself: &ActorRef<ServerMsg<A>>, args: &ServerArgs<A>) {
    let child = Child {
        agent: args.state.id.clone(),
        again: args.again.clone(),
        history: args.history.clone(),
        respawn: args.respawn.clone(),
        exit: Exit::Unknown,
    };
    args.shared.children.insert(myself.get_id(), child);
}

/// The policy a live parent has now, if the agent has a parent and it is live.
pub(super) fn parents_policy(
    shared: &crate::shared::Shared,
    parent: Option<&crate::id::AgentId>,
) -> Option<std::sync::Arc<crate::policy::Policy>> {
    let parent = parent?;
    if let Some(entry) = shared.directory.get(parent)
        && let Some(child) = shared.children.get(&entry.cell.get_id())
    {
        return Some(child.again.policy());
    }
    // A parent asleep (or not started yet in a recovery): its policy as its durable record keeps it.
    let record = shared.store.durable()?.agent(parent).ok()??;
    let settings: super::durability::SpawnSettings = serde_json::from_value(record.spawn).ok()?;
    Some(std::sync::Arc::new(settings.policy))
}

impl<A: Agent> ServerState<A> {
    /// Starts draining: queued and unapproved runs and schedules are cancelled, new runs are refused, and
    /// `done` is told once the running ones have ended.
    pub(super) fn drain(&mut self, done: tokio::sync::oneshot::Sender<()>) {
        if !self.draining() {
            let kind = EventKind::AgentDraining { running: self.in_flight() };
            self.shared.events.announce(&self.agent.id, None, None, kind);
        }
        self.work().draining.get_or_insert_with(Vec::new).push(done);
        // Dropping a waiting nested call's reply tells its caller the call was cancelled.
        let unstarted = self.unstarted();
        self.cancel_runs(unstarted, "the runtime is shutting down");
        for (_, armed) in self.work().schedules.drain() {
            armed.task.abort();
        }
        self.tell_drained();
    }

    /// Takes every run that has not started: queued ones and ones waiting for approval.
    fn unstarted(&mut self) -> Vec<ActionContext> {
        let mut runs: Vec<ActionContext> = Vec::new();
        let Some(underway) = self.under() else { return runs };
        for (_, awaiting) in underway.awaiting.drain() {
            if let Some(timer) = awaiting.expiry {
                timer.abort();
            }
            runs.push(awaiting.ticket.run.ctx);
        }
        runs.extend(underway.queue.drain(..).map(|ticket| ticket.run.ctx));
        for (_, (ticket, timer)) in underway.throttled.drain() {
            timer.abort();
            runs.push(ticket.run.ctx);
        }
        runs
    }

    pub(super) fn tell_drained(&mut self) {
        if let Some(underway) = self.under()
            && underway.running.is_empty()
            && let Some(waiting) = underway.draining.as_mut()
        {
            for done in waiting.drain(..) {
                let _ = done.send(());
            }
        }
    }

    /// Journals and announces runs that end without finishing: failed with `Cancelled`.
    fn cancel_runs(&self, runs: Vec<ActionContext>, why: &str) {
        for ctx in runs {
            self.shared.runner.cancelled(&ctx, why);
        }
    }

    /// Stops this agent, remembering how for its supervisor.
    pub(crate) fn stop_self(&mut self, exit: Exit) {
        let reason = exit.reason().to_owned();
        self.exit = exit;
        self.myself.stop(Some(reason));
    }

    /// Everything an agent leaves behind is cleaned up: its runs, schedules and jobs cancelled, its directory
    /// entry removed (only its own: a later agent of the same id keeps its entry), its parent told.
    pub(super) fn shutdown(&mut self) {
        let mut underway = self.underway.take();
        // Runs that ended without being journaled, whose outcomes were not handled yet: journaled as they ended.
        for ended in underway.iter_mut().flat_map(|u| u.ended.iter_mut()) {
            if let Some(unwritten) = ended.unwritten.take() {
                unwritten.write_ended(&*self.shared.store);
            }
        }
        for (_, running) in underway.iter().flat_map(|u| &u.running) {
            running.task.abort();
            let RunIds { run, action, correlation, .. } = &running.ids;
            self.shared.runner.cancelled_run(&self.agent.id, *run, action, *correlation, "the agent stopped");
        }
        self.underway = underway;
        let unstarted = self.unstarted();
        self.cancel_runs(unstarted, "the agent stopped");
        for (_, armed) in self.under().into_iter().flat_map(|u| u.schedules.drain()) {
            armed.task.abort();
        }
        let id = self.agent.id.clone();
        let entry = self.shared.directory.remove_cell(&id, self.myself.get_id());
        let requested = self
            .shared
            .children
            .get(&self.myself.get_id())
            .map(|child| child.exit.clone())
            .filter(|exit| matches!(exit, Exit::Requested(_) | Exit::RolledBack));
        let exit = match requested {
            Some(requested) => requested,
            None if self.exit == Exit::Unknown => Exit::Requested("stopped".into()),
            None => self.exit.clone(),
        };
        // Stopped for good, unless the whole runtime is shutting down (it comes back with the next recovery) or
        // the supervisor will start it again.
        let shutting_down = self.shared.shutting_down.load(std::sync::atomic::Ordering::SeqCst);
        let restarts = match &exit {
            Exit::Requested(_) => false,
            Exit::Normal(_) => self.again.restart.mode == crate::restart::RestartMode::Permanent,
            Exit::GaveUp(_) | Exit::Hibernated | Exit::RolledBack => false,
            Exit::Unknown => self.again.restart.mode != crate::restart::RestartMode::Never,
        };
        // An agent rolled back writes nothing more (the journal would not keep it): it comes back from there.
        let rolled_back = exit == Exit::RolledBack;
        if entry.is_some() && !rolled_back {
            let for_good = !shutting_down && !restarts;
            if for_good {
                // Before `Runtime::stop` returns: an agent spawned under the id next is not subscribed.
                self.shared.directory.leave_topics(&id);
            }
            self.keep_or_forget(for_good);
        }
        if let Some(mut child) = self.shared.children.get_mut(&self.myself.get_id()) {
            child.exit = exit;
        }
        // An entry that is not this server's belongs to another agent of the same id: its jobs are not ours.
        if entry.is_none() {
            return;
        }
        // A runtime shutting down leaves its jobs to the journal, which the next recovery settles; so does an
        // agent rolled back, brought back from there at once.
        if shutting_down || rolled_back {
            self.shared.jobs.abandon_agent(&id);
            return;
        }
        for job in self.shared.jobs.cancel_agent(&id, "the agent stopped") {
            crate::jobs::announce_end(&self.shared.events, &job);
        }
    }
}
