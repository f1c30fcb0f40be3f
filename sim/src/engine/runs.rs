//! Runs in a simulation: the shared gate, approvals, slots and the queue, attempts played out in virtual time
//! (real code or an action model, retries as the action says), and the outcome signal back to the agent.

use super::*;

/// Who a run is and who asked.
#[derive(Clone)]
pub(super) struct RunIds {
    pub(super) run: Uuid,
    pub(super) action: ActionId,
    pub(super) correlation: Uuid,
    pub(super) causation: Option<Uuid>,
    pub(super) key: String,
    pub(super) requested: u64,
}

/// A run admitted or waiting for a slot.
pub(super) struct Ticket {
    pub(super) ids: RunIds,
    pub(super) params: Value,
    /// Approved already: the gate does not ask again (retries and a queued start included).
    pub(super) approved: bool,
}

/// A run waiting for its approval, and what the approver will say.
pub(super) struct Waiting {
    pub(super) agent: usize,
    pub(super) incarnation: u32,
    pub(super) ticket: Ticket,
    pub(super) granted: bool,
}

/// A run that ends at its event's time.
pub(super) struct Ended {
    pub(super) agent: usize,
    pub(super) incarnation: u32,
    pub(super) ids: RunIds,
    pub(super) started: u64,
    pub(super) outcome: Outcome,
    pub(super) effects: Vec<Effect>,
}

/// One run, as [`Simulation::runs`] reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    /// The agent.
    pub agent: AgentId,
    /// The action.
    pub action: ActionId,
    /// When it was asked for.
    pub requested: Duration,
    /// When it started (after waiting for a slot or approval).
    pub started: Duration,
    /// When it ended.
    pub ended: Duration,
    /// How it ended.
    pub status: OutcomeStatus,
    /// With which error class, if it failed.
    pub error: Option<ErrorClass>,
}

impl<A: Agent> Simulation<A> {
    /// The gate, for a new run and again for a queued or approved one when it starts.
    pub(super) fn through_gate(&mut self, agent: usize, ticket: Ticket) {
        let approved = ticket.approved;
        let slot = &self.agents[agent];
        match gate(&slot.table, &slot.policy, &slot.id, &ticket.ids.action, true) {
            Gate::Refused(error) => {
                let outcome = Outcome::failed(&error, Duration::ZERO, 0);
                self.answer(agent, &ticket.ids, self.now, outcome, Vec::new());
            }
            Gate::NeedsApproval(_, risk) if !approved => {
                let waiting = Outcome::awaiting_approval(format!("waiting for approval (risk {risk:?})"));
                self.tell(agent, &ticket.ids, waiting);
                let (granted, after) = match self.faults.approvals {
                    Approvals::Grant { after } => (true, after),
                    Approvals::Deny { after } => (false, after),
                    Approvals::Random { grant, after } => (self.rng.random::<f64>() < grant, after),
                };
                let incarnation = self.agents[agent].incarnation;
                let at = self.now.saturating_add(nanos(after));
                let run = ticket.ids.run;
                self.fault(agent, Fault::Approval { run, granted });
                self.push(at, Event::Decide(Box::new(Waiting { agent, incarnation, ticket, granted })));
            }
            Gate::NeedsApproval(action, _) | Gate::Pass(action) => {
                if self.agents[agent].in_flight < self.agents[agent].max_in_flight {
                    self.start_run(agent, action, ticket);
                } else {
                    self.agents[agent].queued.push_back(ticket);
                }
            }
        }
    }

    /// Tells the agent how a run went (an outcome signal in its inbox), without ending it.
    pub(super) fn tell(&mut self, agent: usize, ids: &RunIds, outcome: Outcome) {
        let slot = &self.agents[agent];
        let source = slot.source.clone();
        let stamp = (self.fresh_id(), self.time(self.now));
        let run = RunRef { run: ids.run, action: &ids.action, correlation: ids.correlation, causation: ids.causation };
        if let Some(signal) = kinds::action_outcome_at(&source, run, outcome, stamp) {
            self.agents[agent].inbox.push_back(signal);
        }
    }

    /// A run ended: counted, kept if asked, and its outcome told to the agent.
    pub(super) fn answer(&mut self, agent: usize, ids: &RunIds, started: u64, outcome: Outcome, effects: Vec<Effect>) {
        match outcome.status {
            OutcomeStatus::Completed => self.counts.completed += 1,
            OutcomeStatus::Failed => self.counts.failed += 1,
            // (A run waiting for approval has not ended, so it is not answered here; counted as blocked if it were.)
            OutcomeStatus::Blocked | OutcomeStatus::AwaitingApproval => self.counts.blocked += 1,
        }
        if self.keep_runs {
            self.runs.push(RunRecord {
                agent: self.agents[agent].id.clone(),
                action: ids.action.clone(),
                requested: Duration::from_nanos(ids.requested),
                started: Duration::from_nanos(started),
                ended: self.now(),
                status: outcome.status,
                error: outcome.error.as_ref().map(|e| e.class),
            });
        }
        if outcome.status == OutcomeStatus::Completed && !effects.is_empty() {
            self.carry_out_all(agent, effects, Origin::Run);
        }
        self.tell(agent, ids, outcome);
        // Outside an input (a run's end, an approval, a crash are events of their own) the inbox is fed now;
        // during one, after its effects.
        if !self.settling
            && let Some(signal) = self.agents[agent].inbox.pop_front()
        {
            self.consume_settling(agent, signal);
        }
    }

    /// An approval decided: an approved run meets the gate again; a denied one is blocked.
    pub(super) fn decide(&mut self, waiting: Waiting) {
        let Waiting { agent, incarnation, ticket, granted } = waiting;
        let slot = &self.agents[agent];
        if !slot.alive || slot.incarnation != incarnation {
            return;
        }
        if granted {
            self.through_gate(agent, Ticket { approved: true, ..ticket });
        } else {
            let error = ActionError::denied("the run was denied by its approver");
            self.answer(agent, &ticket.ids, self.now, Outcome::failed(&error, Duration::ZERO, 0), Vec::new());
        }
    }

    /// Starts a run the gate let through: every attempt is played out now (its real code, which must finish
    /// without waiting, or its model), with retries as the action's policy says, and the run ends after the
    /// attempts' virtual time.
    pub(super) fn start_run(&mut self, agent: usize, action: DynAction, ticket: Ticket) {
        let Ticket { ids, mut params, .. } = ticket;
        let spec = action.spec().clone();
        let started = self.now;
        self.agents[agent].in_flight += 1;
        self.agents[agent].running.insert(ids.run, ids.clone());
        let mut elapsed = Duration::ZERO;
        let mut attempt = 1;
        let mut effects = Vec::new();
        if action.validate(&params).is_err() {
            params = action.coerce(params);
        }
        let result = match action.validate(&params) {
            Err(err) => Err(err),
            Ok(()) => loop {
                let (took, result, requested) = self.attempt(agent, &action, &params, &ids, attempt);
                elapsed += took;
                match result {
                    Ok(output) => {
                        effects = requested;
                        break Ok(output);
                    }
                    Err(err) if should_retry(&spec, &err, attempt) => {
                        elapsed += spec.retry.backoff(attempt, self.rng.random::<f64>());
                        attempt += 1;
                    }
                    Err(err) => break Err(err),
                }
            },
        };
        let outcome = match result {
            Ok(output) => Outcome::completed(output, elapsed, attempt),
            Err(err) => Outcome::failed(&err, elapsed, attempt),
        };
        let incarnation = self.agents[agent].incarnation;
        let at = self.now.saturating_add(nanos(elapsed));
        let ended = Ended { agent, incarnation, ids, started, outcome, effects };
        self.push(at, Event::RunEnded(Box::new(ended)));
    }

    /// One attempt: how long it took, its result, and the effects it asked for.
    pub(super) fn attempt(
        &mut self,
        agent: usize,
        action: &DynAction,
        params: &Value,
        ids: &RunIds,
        attempt: u32,
    ) -> (Duration, Result<Value, ActionError>, Vec<Effect>) {
        let spec = action.spec();
        let draw =
            if self.faults.action_failure + self.faults.action_timeout > 0.0 { self.rng.random::<f64>() } else { 1.0 };
        if draw < self.faults.action_failure {
            self.fault(agent, Fault::ActionFailed { run: ids.run });
            return (Duration::ZERO, Err(ActionError::transient("an injected fault")), Vec::new());
        }
        if draw < self.faults.action_failure + self.faults.action_timeout {
            self.fault(agent, Fault::ActionTimedOut { run: ids.run });
            return (spec.timeout, Err(ActionError::Timeout { after: spec.timeout }), Vec::new());
        }
        if let Some(model) = self.models.get(&spec.id) {
            let model = model.clone();
            let took = model.took(params, &mut self.rng);
            if took > spec.timeout {
                return (spec.timeout, Err(ActionError::Timeout { after: spec.timeout }), Vec::new());
            }
            let result = match model.failure(&mut self.rng) {
                Some(class) => Err(ActionError::of_class(class, "a modelled failure")),
                None => Ok((model.output)(params, &mut self.rng)),
            };
            return (took, result, Vec::new());
        }
        let slot = &self.agents[agent];
        let skill = slot.table.get(&spec.id).and_then(|r| r.skill.clone());
        let mut ctx = ActionContext::new(slot.id.clone(), spec.id.clone())
            .with_run(ids.run, ids.correlation, ids.causation, &ids.key)
            .with_policy((*slot.policy).clone())
            .with_clock(self.time(self.now));
        ctx.attempt = attempt;
        if let Some(skill) = skill {
            if let Some(state) = slot.state.skill_state(&skill) {
                ctx = ctx.with_skill_state(state.clone());
            }
            ctx = ctx.with_skill(skill);
        }
        let requested = ctx.requested();
        let result = run_inline(action, params.clone(), ctx);
        let result = result.and_then(|output| action.check_output(&output).map(|()| output));
        (Duration::ZERO, result, requested.take())
    }

    /// A run's end: its slot freed, the agent told, the next queued run started.
    pub(super) fn run_ended(&mut self, ended: Ended) {
        let Ended { agent, incarnation, ids, started, outcome, effects } = ended;
        let slot = &mut self.agents[agent];
        if !slot.alive || slot.incarnation != incarnation {
            return;
        }
        slot.in_flight -= 1;
        slot.running.remove(&ids.run);
        self.answer(agent, &ids, started, outcome, effects);
        self.launch_queued(agent);
    }

    pub(super) fn launch_queued(&mut self, agent: usize) {
        while self.agents[agent].alive && self.agents[agent].in_flight < self.agents[agent].max_in_flight {
            let Some(next) = self.agents[agent].queued.pop_front() else { break };
            self.through_gate(agent, next);
        }
    }
}

/// Runs an action's real code to its end without waiting: it is polled once, and an action that would wait
/// (on I/O, a timer, another task) fails `Critical`, since a simulation cannot wait on the world; such an
/// action needs an action model. A panic is `Critical` too, as live.
fn run_inline(action: &DynAction, params: Value, ctx: ActionContext) -> Result<Value, ActionError> {
    let id = action.spec().id.clone();
    let polled = catch_unwind(AssertUnwindSafe(|| {
        let mut future = action.invoke(params, ctx);
        let mut context = Context::from_waker(Waker::noop());
        future.as_mut().poll(&mut context)
    }));
    match polled {
        Ok(Poll::Ready(result)) => result,
        Ok(Poll::Pending) => Err(ActionError::critical(format!(
            "action `{id}` waited on something outside the simulation; give it an action model"
        ))),
        Err(_) => Err(ActionError::critical(format!("action `{id}` panicked"))),
    }
}
