//! The one road every run takes: a request, the gate, a slot or an approval, the runner, and the answer back to
//! whoever asked. The gate is asked again whenever a run that waited (in the queue, or for approval) starts, so a
//! run never starts after its action was unmounted or the policy stopped allowing it.

use super::{Awaiting, Clearance, Ended, RunIds, Running, ServerState, Ticket};
use crate::action::{
    ActionContext, ActionError, ApprovalAsk, CallerRequest, DynAction, Link, Outcome, OutcomeStatus, Risk, RunReport,
    RunScope, Stack,
};
use crate::agent::Agent;
use crate::error::RuntimeError;
use crate::events::EventKind;
use crate::interpret::Origin;
use crate::messages::{Admitted, Invoker, Requester, RunRequest, ServerMsg};
use crate::run_life::RunLife;
use crate::runner::{RunInHand, Start};
use crate::store::PEN;
use crate::store::{DraftIds, RecordDraft, RunUpdate, Unwritten};
use crate::table::{Gate, gate_metered};
use chrono::{DateTime, Utc};
use futures_util::FutureExt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;
use uuid::Uuid;

impl<A: Agent> ServerState<A> {
    /// The entrance for every run, whoever asked: journaled and announced as queued, then through the gate.
    pub(crate) fn request_run(&mut self, request: RunRequest) {
        let RunRequest { action, params, by, key } = request;
        // The run's id and the time it is queued, from one reading of the clock.
        let (run, queued) = crate::wall_clock::stamp();
        let ctx = self.run_context(action, &by, key, run);
        let parent_run = match &by {
            Requester::Routine { caller, .. } => Some(caller.run_id),
            _ => None,
        };
        let ids = DraftIds {
            run: ctx.run_id,
            agent: self.agent.id.clone(),
            action: ctx.action_id.clone(),
            correlation: ctx.correlation_id,
            parent_run,
        };
        // The params' text makes their digest, and a retry's params (see `RunInHand::params_text`).
        let draft = RecordDraft::queued_with_text(ids, &params, queued);
        let plan = self.plan_run(&ctx, (&params, draft.params_text().is_some()), &by);
        let unwritten = Unwritten { draft, plan };
        let mut run = Box::new(RunInHand { ctx, params, params_text: None, unwritten: Some(unwritten) });
        self.announce_queued(&mut run, parent_run);
        self.through_gate(Ticket { run, by, approved: false, cleared: None, metered: false });
    }

    /// Journals a run's record if it is not written yet: when it is parked, refused, handed to a routine, or
    /// cancelled before it starts. (A run that starts has its record written by the runner.)
    pub(super) fn write_record(&self, run: &mut RunInHand) {
        run.write_record(&*self.shared.store);
    }

    /// The gate, for a new run and again for a queued or approved one when it starts: refused, parked for
    /// approval (unless it was approved), or admitted. A run the gate cleared before, with the action table and
    /// the policy unchanged since, is admitted on that decision.
    pub(super) fn through_gate(&mut self, mut ticket: Ticket) {
        if ticket.run.ctx.scope.from_outside
            && let Err(reason) = self.policy.may_run_from_outside(ticket.run.ctx.action_id.as_str())
        {
            return self.refuse(ticket, ActionError::denied(reason));
        }
        let taking_runs = !self.draining();
        if let Some(cleared) = ticket.cleared.take()
            && taking_runs
            && cleared.table == self.table.epoch()
            && cleared.policy == self.policy_epoch
        {
            return self.admit(cleared.action, ticket);
        }
        let now = super::metering::since_epoch(crate::wall_clock::now());
        // A run the meter let through once (its permit taken, its budget checked) is not metered again when it
        // meets the gate again after waiting in the queue.
        let meter = self.meter.as_deref_mut().filter(|_| !ticket.metered);
        let metering = meter.is_some();
        let (agent, action) = (&self.agent.id, &ticket.run.ctx.action_id);
        let gated = gate_metered(&self.table, &self.policy, meter, now, agent, action, taking_runs, ticket.approved);
        if metering && matches!(gated, Gate::Pass(_)) {
            ticket.metered = true;
        }
        match gated {
            Gate::Refused(error) => self.refuse(ticket, error),
            Gate::Wait(wait) => {
                if let Err((ticket, error)) = self.hold(ticket, wait) {
                    self.refuse(ticket, error);
                }
            }
            Gate::NeedsApproval(_, risk) if !ticket.approved => self.await_approval(ticket, risk),
            Gate::NeedsApproval(action, _) | Gate::Pass(action) => self.admit(action, ticket),
        }
    }

    /// A run the gate let through: a routine's call is told it may run (in the caller's task); any other run
    /// starts if a slot is free, else waits in the queue.
    fn admit(&mut self, action: DynAction, mut ticket: Ticket) {
        // A run that waited runs under the policy of now, not the one it was asked for under.
        if !std::sync::Arc::ptr_eq(&ticket.run.ctx.scope.policy, &self.policy) {
            match std::sync::Arc::get_mut(&mut ticket.run.ctx.scope) {
                Some(scope) => scope.policy = self.policy.clone(),
                None => {
                    let error = ActionError::critical("the run's context is shared, so its policy cannot be renewed");
                    return self.refuse(ticket, error);
                }
            }
        }
        match ticket.by {
            Requester::Routine { reply, .. } => {
                // It starts in its caller's task, which needs it journaled.
                self.write_record(&mut ticket.run);
                let ctx = ticket.run.ctx;
                if let Err(Ok(refused)) = reply.send(Ok(Admitted { action, ctx })) {
                    self.shared
                        .runner
                        .cancelled(&refused.ctx, "the caller gave up before the nested call was admitted");
                }
            }
            by => {
                if self.in_flight() < self.again.max_in_flight {
                    self.launch(action, Ticket { by, ..ticket });
                } else if let limit = self.policy.limits.queued_runs
                    && self.under().is_some_and(|u| u.queue.len() >= limit)
                {
                    let error = ActionError::denied(format!(
                        "the agent has {limit} runs waiting for a slot already, as many as its policy allows \
                         (`limits.queued_runs`); this one was not queued, ask again once some have run"
                    ));
                    self.refuse(Ticket { by, ..ticket }, error);
                } else {
                    let cleared = Clearance { table: self.table.epoch(), policy: self.policy_epoch, action };
                    self.write_record(&mut ticket.run);
                    // A run that waits keeps its params once, not their text as well (a retry then copies them).
                    ticket.run.params_text = None;
                    self.work().queue.push_back(Ticket { by, cleared: Some(cleared), ..ticket });
                }
            }
        }
    }

    /// Ends a run before it started: journaled as blocked and announced, and its requester told.
    fn refuse(&mut self, mut ticket: Ticket, error: ActionError) {
        self.write_record(&mut ticket.run);
        let outcome = self.block(&ticket.run.ctx, &error);
        let ids = RunIds::of(&ticket.run.ctx);
        let report = ids.report(outcome);
        self.answer(ticket.by, &ids, (report, None), Some(error), false);
    }

    /// Parks a run until it is approved, denied or its approval expires. A run an outside caller asked for (or a
    /// call such a run makes) is approved by whom the caller's [`Approver`](crate::action::Approver) names: the
    /// caller's user is asked ([`CallerRequest::Approve`]) only where that says so and the risk is within its
    /// ceiling; otherwise the run waits for the runtime's own approvers and the caller is told so
    /// ([`CallerRequest::AwaitingOperator`]). An outside run with no caller to tell (plain
    /// [`Runtime::invoke`](crate::runtime::Runtime::invoke)), or whose caller is gone, is refused with
    /// [`RuntimeError::NeedsApproval`].
    fn await_approval(&mut self, mut ticket: Ticket, risk: Risk) {
        let limit = self.policy.limits.awaiting_approval;
        if self.under().is_some_and(|u| u.awaiting.len() >= limit) {
            let error = ActionError::denied(format!(
                "the agent has {limit} runs waiting for approval already, as many as its policy allows \
                 (`limits.awaiting_approval`); this one was refused, ask again once some are decided"
            ));
            return self.refuse(ticket, error);
        }
        self.write_record(&mut ticket.run);
        let run = ticket.run.ctx.run_id;
        let Some(contract) = self.table.get(&ticket.run.ctx.action_id).map(|a| a.action.spec().clone()) else {
            let error =
                ActionError::denied(format!("action `{}` is not registered any more", ticket.run.ctx.action_id));
            return self.refuse(ticket, error);
        };
        let digest = crate::action::approval_digest(&contract, risk, &ticket.run.params);
        // Told only if the caller is still there to hear it: a gone caller's run is refused, not parked.
        let told = self.tell_caller(&ticket, risk, &contract, digest);
        if !told && let Requester::Outside(reply, _) = ticket.by {
            let error = ActionError::denied(format!(
                "action `{}` needs approval at risk {risk:?}, and a run asked for from outside the agent without a \
                 caller to tell cannot wait for one; expected the agent to run it itself, a caller \
                 (`Runtime::invoke_with`), or a policy that does not ask",
                ticket.run.ctx.action_id
            ));
            self.block(&ticket.run.ctx, &error);
            let action = ticket.run.ctx.action_id.clone();
            let _ = reply.send(Err(RuntimeError::NeedsApproval { agent: self.agent.id.clone(), action, risk, run }));
            return;
        }
        self.journal(run, RunLife::asked());
        self.announce_asked(&ticket, risk, contract, digest);
        if let Requester::Agent { .. } = ticket.by {
            let waiting = Outcome::awaiting_approval(format!("waiting for approval (risk {risk:?})"));
            let ids = RunIds::of(&ticket.run.ctx);
            let report = ids.report(waiting);
            self.tell_outcome(&ids, report, None, (false, None));
        }
        self.park(ticket, risk, digest);
    }

    /// Tells a run's outside caller (if it has one, and it is still there) that the run waits for approval: asks
    /// it to approve, where its [`Approver`](crate::action::Approver) lets it at this risk, or says the run waits
    /// for the operator. `false` when there is nobody to tell.
    fn tell_caller(&self, ticket: &Ticket, risk: Risk, contract: &crate::action::ActionSpec, digest: Uuid) -> bool {
        let Some(caller) = ticket.run.ctx.caller() else { return false };
        let ask = Box::new(ApprovalAsk {
            agent: self.agent.id.clone(),
            run: ticket.run.ctx.run_id,
            spec: contract.clone(),
            risk,
            params: ticket.run.params.clone(),
            digest,
        });
        if caller.approver().lets_caller_approve(caller.can(), risk) {
            caller.send(CallerRequest::Approve(ask))
        } else {
            caller.send(CallerRequest::AwaitingOperator(ask))
        }
    }

    /// Asks about a parked run again, as it is now (its contract, and its risk under the policy of now):
    /// announced, its caller told, and parked with its expiry still counted from the request.
    pub(super) fn ask_again(&mut self, ticket: Ticket, contract: crate::action::ActionSpec) {
        let risk = self.policy.effective_risk(&contract);
        let digest = crate::action::approval_digest(&contract, risk, &ticket.run.params);
        self.announce_asked(&ticket, risk, contract.clone(), digest);
        self.tell_caller(&ticket, risk, &contract, digest);
        self.park(ticket, risk, digest);
    }

    /// Announces that a run waits for approval, with all an approver needs to judge it.
    pub(super) fn announce_asked(
        &self,
        ticket: &Ticket,
        risk: Risk,
        contract: crate::action::ActionSpec,
        digest: Uuid,
    ) {
        let ctx = &ticket.run.ctx;
        let kind = EventKind::ApprovalAsked {
            action: ctx.action_id.clone(),
            risk,
            contract: Box::new(contract),
            params: ticket.run.params.clone(),
            digest,
        };
        self.shared.events.announce(&self.agent.id, Some(ctx.run_id), Some(ctx.correlation_id), kind);
    }

    /// Puts a run among those waiting for approval, with its expiry armed for what is left of its policy's
    /// `approval_timeout` counted from when the run was asked for (its id's time), not from now: a run that
    /// waits again after a restart, or is asked about again, never gets its time afresh.
    pub(super) fn park(&mut self, ticket: Ticket, risk: Risk, digest: Uuid) {
        let run = ticket.run.ctx.run_id;
        let left =
            self.policy.approval_timeout.map(|timeout| approval_time_left(run, timeout, crate::wall_clock::now()));
        let expiry = left.filter(|left| !left.is_zero()).map(|left| {
            let me = self.myself.clone();
            tokio::spawn(async move {
                tokio::time::sleep(left).await;
                let _ = me.cast(ServerMsg::ApprovalExpired(run));
            })
        });
        self.work().awaiting.insert(run, Awaiting { ticket, expiry, digest, risk });
        // Its time ran out already (while the process was down, say): it expires now.
        if left.is_some_and(|left| left.is_zero()) {
            self.expire_approval(run);
        }
    }

    /// Approves or denies a run waiting for approval. An approval holds for what the approver was shown: a run
    /// whose action's contract changed since it was asked about is asked about again (and the approval refused
    /// as stale), and an approval bound to a digest that is not the run's is refused with the run still
    /// waiting. An approved run meets the gate again (the action may have been unmounted, or the policy
    /// changed, while it waited) and is never asked about again, retries included; a denied one is blocked
    /// with a `Denied` error.
    pub(super) fn decide(&mut self, run: Uuid, verdict: crate::messages::Verdict) -> Result<(), RuntimeError> {
        let waiting =
            self.under().and_then(|u| u.awaiting.remove(&run)).ok_or(RuntimeError::NotAwaitingApproval(run))?;
        if verdict.approve {
            if let Some(seen) = verdict.seen
                && seen != waiting.digest
            {
                self.work().awaiting.insert(run, waiting);
                let why = "the digest given is not the one of the contract and params it was asked about".to_owned();
                return Err(RuntimeError::ApprovalStale { run, why });
            }
            let now = self.table.get(&waiting.ticket.run.ctx.action_id).map(|a| a.action.spec().clone());
            if let Some(contract) = now
                && crate::action::approval_digest(
                    &contract,
                    self.policy.effective_risk(&contract),
                    &waiting.ticket.run.params,
                ) != waiting.digest
            {
                let Awaiting { ticket, expiry, .. } = waiting;
                if let Some(timer) = expiry {
                    timer.abort();
                }
                self.ask_again(ticket, contract);
                let why = "its action's contract changed since it was asked about; it is asked about again".to_owned();
                return Err(RuntimeError::ApprovalStale { run, why });
            }
        }
        let Awaiting { ticket, expiry, .. } = waiting;
        if let Some(timer) = expiry {
            timer.abort();
        }
        let approve = verdict.approve;
        let kind = EventKind::ApprovalGiven { action: ticket.run.ctx.action_id.clone(), approved: approve };
        self.shared.events.announce(&self.agent.id, Some(run), Some(ticket.run.ctx.correlation_id), kind);
        if approve {
            self.journal(run, RunLife::approved());
            self.through_gate(Ticket { approved: true, ..ticket });
        } else {
            self.refuse(ticket, RunLife::denied());
        }
        Ok(())
    }

    /// A run waited for approval longer than its policy allows: it is refused with a `Denied` error.
    pub(super) fn expire_approval(&mut self, run: Uuid) {
        let Some(Awaiting { ticket, .. }) = self.under().and_then(|u| u.awaiting.remove(&run)) else { return };
        let waited = self.policy.approval_timeout.unwrap_or_default();
        let kind = EventKind::ApprovalExpired { action: ticket.run.ctx.action_id.clone() };
        self.shared.events.announce(&self.agent.id, Some(run), Some(ticket.run.ctx.correlation_id), kind);
        let error = ActionError::denied(format!(
            "the run waited for approval longer than its policy allows ({}ms); ask for it again",
            waited.as_millis()
        ));
        self.refuse(ticket, error);
    }

    /// Starts the queued runs that fit in the free slots, each through the gate again.
    pub(super) fn launch_queued(&mut self) {
        while self.in_flight() < self.again.max_in_flight {
            let Some(next) = self.under().and_then(|u| u.queue.pop_front()) else { break };
            self.through_gate(next);
        }
    }

    /// Starts a run, driven right here as far as it goes without waiting (see [`crate::runner::Runner::start`]): a
    /// run that ends without waiting on anything (a pure computation, a cache hit) ends at once and costs no
    /// future and no task; its outcome is handled after the message that started it, as a task's would be. A run
    /// still pending goes on in its own task, and its outcome comes back as a `Finished` message. A run whose outside caller gave up is cancelled instead, before it starts
    /// or while it runs. A panic anywhere in the run becomes a `Critical` outcome, so its slot is always freed
    /// and its requester always answered.
    fn launch(&mut self, action: DynAction, ticket: Ticket) {
        let Ticket { mut run, by, .. } = ticket;
        let mut invoker: Option<Invoker> = match by {
            Requester::Outside(reply, _) => Some(reply),
            _ => None,
        };
        if invoker.as_ref().is_some_and(|reply| reply.is_closed()) {
            self.write_record(&mut run);
            self.shared.runner.cancelled(&run.ctx, "the caller gave up before the run started");
            return;
        }
        let ids = RunIds::of(&run.ctx);
        let scope = run.ctx.scope.clone();
        let execution = match catch_unwind(AssertUnwindSafe(|| self.shared.runner.start(action, run))) {
            Ok(Start::Waiting(execution)) => execution,
            started => {
                let (report, unwritten, at) = match started {
                    Ok(Start::Ended(ending)) => (ending.report, ending.unwritten, Some(ending.at)),
                    _panic => (ids.report(task_panicked()), None, None),
                };
                // What it asked for is taken now, so its sink is freed with the run rather than kept until its
                // outcome is handled.
                let effects = std::mem::take(&mut crate::action::RunSink::lock(&scope.sink).effects);
                self.work().ended.push_back(Ended { ids, effects, report, invoker, unwritten, at });
                return;
            }
        };
        let execution = AssertUnwindSafe(execution).catch_unwind().map(|ended| ended.map(|e| (e.report, e.unwritten)));
        let me = self.myself.clone();
        let (run, action) = (ids.run, ids.action.clone());
        let store = self.shared.store.clone();
        let task = tokio::spawn(async move {
            let report = |outcome| Box::new(RunReport { run_id: run, action: action.clone(), outcome });
            let ended = match invoker.as_mut() {
                None => execution.await,
                Some(reply) => tokio::select! {
                    ended = execution => ended,
                    // Dropping the execution cancels the run and journals it so.
                    () = reply.closed() => {
                        let cancelled = ActionError::cancelled("the caller gave up");
                        Ok((report(Outcome::from_error(&cancelled, Duration::ZERO, 0)), None))
                    }
                },
            };
            let (report, unwritten) = ended.unwrap_or_else(|_panic| (report(task_panicked()), None));
            if let Some(unwritten) = unwritten {
                unwritten.write_ended(&*store);
            }
            let _ = me.cast(ServerMsg::Finished(report, invoker));
        });
        self.work().running.insert(run, Running { task, ids, scope });
    }

    /// A run's task ended: its outcome is handled, and the next queued runs start.
    pub(super) fn on_finished(&mut self, report: Box<RunReport>, invoker: Option<Invoker>) {
        if let Some(done) = self.under().and_then(|u| u.running.remove(&report.run_id)) {
            let effects = std::mem::take(&mut crate::action::RunSink::lock(&done.scope.sink).effects);
            self.conclude(Ended { ids: done.ids, effects, report, invoker, unwritten: None, at: None });
        }
        self.launch_queued();
        self.tell_drained();
    }

    /// A run ended: what it asked for is interpreted (if it completed), and its requester gets the outcome.
    pub(super) fn conclude(&mut self, ended: Ended) {
        let Ended { ids, effects, report, invoker, unwritten, at } = ended;
        self.spend(&ids.action, report.outcome.cost);
        let completed = report.outcome.status == OutcomeStatus::Completed;
        // A run whose effects were interpreted is never started again behind the agent's back: its end is
        // journaled with the next commit, not held back until its outcome is consumed.
        let quiet = !completed || effects.is_empty();
        // A run that ended without being journaled is journaled now: before anything it asked for is done, or,
        // when it asked for nothing and its outcome goes to the agent, with that outcome, in one write.
        let (unwritten, with_outcome) = match unwritten {
            Some(unwritten) if quiet && invoker.is_none() => (None, Some(unwritten)),
            unwritten => (unwritten, None),
        };
        if let Some(unwritten) = unwritten {
            unwritten.write_ended(&*self.shared.store);
        }
        if completed {
            self.interpret(effects, if invoker.is_some() { Origin::Outside } else { Origin::Run });
        }
        match invoker {
            Some(reply) => self.answer(Requester::Outside(reply, None), &ids, (report, at), None, quiet),
            None => self.tell_outcome(&ids, report, at, (quiet, with_outcome)),
        }
    }

    /// The one route back to a requester: the agent gets an outcome signal in its inbox (fed before the next
    /// message), a routine's call gets the error that refused it, an outside caller the outcome.
    /// `ended`: the run's report, with when the run ended if that was read already (else the signal is stamped
    /// now).
    /// `may_wait`: whether the run's end may be journaled late (see [`ServerState::keep_outcome`]).
    fn answer(
        &mut self,
        by: Requester,
        ids: &RunIds,
        ended: (Box<RunReport>, Option<DateTime<Utc>>),
        refusal: Option<ActionError>,
        may_wait: bool,
    ) {
        let (report, at) = ended;
        match by {
            Requester::Agent { .. } => self.tell_outcome(ids, report, at, (may_wait, None)),
            Requester::Routine { reply, .. } => {
                let error = refusal.unwrap_or_else(|| ActionError::critical(report.outcome.into_output_text()));
                let _ = reply.send(Err(error));
            }
            Requester::Outside(reply, _) => {
                let _ = reply.send(Ok(report.outcome));
            }
        }
    }

    /// Puts the outcome signal of one of the agent's runs in its inbox (`may_wait`: see
    /// [`ServerState::keep_outcome`]), journaling the run's record with it if that is not written yet.
    pub(super) fn tell_outcome(
        &mut self,
        ids: &RunIds,
        report: Box<RunReport>,
        at: Option<DateTime<Utc>>,
        (may_wait, unwritten): (bool, Option<Box<Unwritten>>),
    ) {
        let stamp = at.map_or_else(crate::wall_clock::stamp, |at| (crate::wall_clock::id_at(at), at));
        let chain = (ids.correlation, ids.causation);
        match crate::kinds::report_signal(&self.source, chain, report, stamp) {
            Some(signal) => {
                let kept = self.keep_outcome(ids.run, &ids.action, &signal, (may_wait, unwritten)).then_some(ids.run);
                self.work().inbox.push_back(super::Inbound { signal, kept });
            }
            None => {
                if let Some(unwritten) = unwritten {
                    unwritten.write_ended(&*self.shared.store);
                }
            }
        }
    }

    /// `skill`'s folder in the agent's drive, if the runtime has a data folder.
    fn drive(&mut self, skill: &crate::id::SkillId) -> Option<std::sync::Arc<std::path::Path>> {
        // Without a data folder there are no drives (and nothing to clone).
        self.shared.data_dir.as_ref()?;
        let shared = self.shared.clone();
        let dir = shared.data_dir.as_deref()?;
        if let Some((_, drive)) = self.work().drives.iter().find(|(known, _)| known == skill) {
            return Some(drive.clone());
        }
        let drive: std::sync::Arc<std::path::Path> = super::drive_path(dir, &self.agent.id, skill).into();
        super::services::adopt_legacy_drive(dir, &self.agent.id, skill, &drive);
        self.work().drives.push((skill.clone(), drive.clone()));
        Some(drive)
    }

    /// The context of run `run`: its skill's drive folder and state, the policy, the call stack with a frame
    /// of its own, and the way back to this server.
    pub(super) fn run_context(
        &mut self,
        action: crate::id::ActionId,
        by: &Requester,
        key: crate::action::RunKey,
        run: Uuid,
    ) -> ActionContext {
        let (correlation, causation, caller) = match by {
            Requester::Agent { correlation, cause } => (correlation.unwrap_or(run), *cause, None),
            Requester::Routine { caller, .. } => (caller.correlation_id, None, Some(&**caller)),
            Requester::Outside(..) => (run, None, None),
        };
        // Whoever asked from outside hears from the run and from the calls it makes.
        let outside = match by {
            Requester::Outside(_, outside) => outside.clone(),
            Requester::Routine { caller, .. } => caller.caller().cloned(),
            Requester::Agent { .. } => None,
        };
        let skill = self.table.get(&action).and_then(|r| r.skill.clone());
        let drive = skill.as_ref().and_then(|skill| self.drive(skill));
        let skill_state =
            skill.as_ref().and_then(|s| self.agent.skill_state(s)).cloned().unwrap_or(serde_json::Value::Null);
        let callers = caller.map_or(&[][..], |c| c.stack());
        let stack = Stack::of(callers, action.clone(), run);
        let job = caller.and_then(|c| c.scope.link.as_ref()).and_then(|l| l.job);
        let services = self.services();
        // A call or job of a run an outside caller asked for is the outside caller's doing too.
        let from_outside = match by {
            Requester::Outside(..) => true,
            Requester::Routine { caller, .. } => caller.scope.from_outside,
            Requester::Agent { .. } => false,
        };
        let scope = RunScope {
            skill,
            drive,
            skill_state,
            policy: self.policy.clone(),
            stack,
            sink: std::sync::Mutex::default(),
            link: Some(Link { services, job }),
            key,
            clock: caller.map_or(crate::action::Clock::Wall, |c| c.scope.clock),
            seed: caller.and_then(|c| c.scope.seed),
            caller: outside,
            from_outside,
        };
        ActionContext {
            agent_id: self.agent.id.clone(),
            action_id: action,
            run_id: run,
            attempt: 0,
            correlation_id: correlation,
            causation_id: causation,
            scope: std::sync::Arc::new(scope),
            frames: None,
        }
    }

    /// Every run is journaled and announced as queued, even one the gate then refuses. Its record is written
    /// late (see [`Unwritten`]), by whoever takes the run on; but while anyone listens to events it is written
    /// at once, since an event about a run is published only once the run is in the journal.
    fn announce_queued(&self, run: &mut RunInHand, parent_run: Option<Uuid>) {
        if !self.shared.events.is_listened() {
            return;
        }
        let at = run.unwritten.as_ref().map_or_else(chrono::Utc::now, |unwritten| unwritten.draft.queued_at());
        run.write_record(&*self.shared.store);
        let ctx = &run.ctx;
        let kind = EventKind::ActionQueued { action: ctx.action_id.clone(), parent_run, depth: ctx.depth() };
        let (agent, run, correlation) = (self.agent.id.clone(), Some(ctx.run_id), Some(ctx.correlation_id));
        self.shared.events.publish(crate::events::Event { at, agent, run, correlation, kind });
    }

    fn journal(&self, run: Uuid, update: RunUpdate) {
        if let Err(err) = self.shared.store.update(PEN, run, update, Utc::now()) {
            tracing::warn!(%run, %err, "the journal refused an update");
        }
    }

    /// Ends a run that never started: journaled as blocked and announced; returns its outcome.
    fn block(&self, ctx: &ActionContext, error: &ActionError) -> Outcome {
        let end = crate::run_life::End::refused(error.clone());
        self.journal(ctx.run_id, end.update());
        let kind = end.event(&ctx.action_id);
        self.shared.events.announce(&self.agent.id, Some(ctx.run_id), Some(ctx.correlation_id), kind);
        end.outcome
    }
}

/// What is left of `timeout` for a run that waits for approval, counted from when it was asked for: the time
/// its (version 7) id carries. Zero once that has passed; the whole `timeout` for an id without a time.
pub(crate) fn approval_time_left(run: Uuid, timeout: Duration, now: DateTime<Utc>) -> Duration {
    let Some((seconds, nanos)) = run.get_timestamp().map(|t| t.to_unix()) else { return timeout };
    let asked = DateTime::<Utc>::from_timestamp(i64::try_from(seconds).unwrap_or(i64::MAX), nanos);
    let waited = asked.and_then(|asked| (now - asked).to_std().ok()).unwrap_or_default();
    timeout.saturating_sub(waited)
}

/// The outcome of a run whose execution panicked outside the action (the action's own panics are caught by the
/// runner).
fn task_panicked() -> Outcome {
    Outcome::from_error(&ActionError::critical("the run's task panicked outside the action"), Duration::ZERO, 0)
}
