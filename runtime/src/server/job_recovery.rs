//! Settling an agent's jobs after the process stopped, from what the journal kept of them (see
//! [`crate::jobs`]): every job is listed again; one that had not started starts; one that was running starts
//! again with the same key when its action is pure or idempotent, and otherwise ends as failed with class
//! `Interrupted`, which the agent is told; and the end of a job the agent was not given yet is given to it.

use super::{Inbound, ServerState};
use crate::action::{ActionError, ErrorClass, JobStatus, RunKey, Stack};
use crate::agent::Agent;
use crate::jobs::NewJob;
use crate::messages::Requester;
use crate::store::KeptJob;
use crate::store::PEN;
use std::collections::HashSet;
use uuid::Uuid;

impl<A: Agent> ServerState<A> {
    /// Settles the jobs the journal kept; `consumed`: the ids of the inputs replayed (a job's end among them was
    /// given to the agent, though the journal did not note it yet).
    pub(super) fn resolve_jobs(&mut self, jobs: Vec<KeptJob>, consumed: &HashSet<Uuid>) {
        for KeptJob { record, plan, end, told } in jobs {
            if record.status.is_final() {
                self.shared.jobs.restore(record.clone(), &plan.key);
                // Told already, or cancelled as its agent stopped (nobody to tell).
                let Some(signal) = end.filter(|_| !told) else { continue };
                if consumed.contains(&signal.id()) {
                    if let Some(durable) = self.shared.store.durable() {
                        durable.job_told(PEN, &self.agent.id, record.id);
                    }
                } else {
                    self.work().inbox.push_back(Inbound { signal, kept: None });
                }
                continue;
            }
            let started = record.status == JobStatus::Running;
            if started && !self.safe_again(&record.action) {
                self.shared.jobs.restore(record.clone(), &plan.key);
                let why = "it was running when the process stopped, and its action has side effects";
                let error = ActionError::interrupted(why);
                let ended = self.shared.jobs.finish(record.id, |r| {
                    r.status = JobStatus::Failed;
                    r.class = Some(ErrorClass::Interrupted);
                    r.error = Some(error.to_string());
                });
                if let Some((record, signal)) = ended {
                    if let Some(signal) = signal {
                        self.work().inbox.push_back(Inbound { signal, kept: None });
                    }
                    crate::jobs::announce_end(&self.shared.events, &record);
                }
                continue;
            }
            // Not started yet, or safe to run again: from the start, under the same id and key, called from a
            // run made like the one that submitted it (its stack, its chain).
            let (action, run) =
                plan.stack.last().map_or((record.action.clone(), record.id), |f| (f.action.clone(), f.run_id));
            let by = Requester::Agent { correlation: Some(plan.correlation), cause: None };
            let mut parent = self.run_context(action, &by, RunKey::Run, run);
            parent.correlation_id = plan.correlation;
            if let Some(stack) = Stack::from_frames(&plan.stack) {
                parent.scope_mut().stack = stack;
            }
            parent.scope_mut().from_outside = plan.from_outside;
            let limits = self.policy.limits;
            let job = NewJob { agent: self.agent.id.clone(), action: record.action.clone(), plan, again: Some(record) };
            if let Err(full) = self.agent_services().start_job(parent, job, &limits) {
                tracing::error!(agent = %self.agent.id, %full, "a job could not be started again after a restart");
            }
        }
    }
}
