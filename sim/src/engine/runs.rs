//! Runs in a simulation: the shared gate, approvals, slots and the queue, and each run's life as the runtime's
//! own run machine ([`RunLife`]) says, played out in virtual time (real code or an action model, nested calls
//! through the gate, retries as the action says), journaled as the runtime journals it, and the outcome signal
//! back to the agent.

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
    /// Ended as a recorded run did (see `SimBuilder::replaying`), without running.
    pub(super) replayed: bool,
}

/// A run admitted or waiting for a slot.
pub(super) struct Ticket {
    pub(super) ids: RunIds,
    pub(super) params: Value,
    /// Approved already: the gate does not ask again (retries and a queued start included).
    pub(super) approved: bool,
    /// The meter let it through already: a queued start does not meter it again.
    pub(super) metered: bool,
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
    pub(super) end: End,
    pub(super) effects: Vec<Effect>,
}

/// A nested call an action made while it was polled, waiting for the simulation to play it and answer.
pub(super) struct PendingCall {
    caller: ActionContext,
    action: ActionId,
    params: Value,
    answer: Arc<Mutex<Option<Result<Value, ActionError>>>>,
}

/// The nested calls made during one poll of an action: the simulation's one [`Calls`] pushes them here, and
/// whoever polled the action plays them and polls again.
pub(super) type CallQueue = Arc<Mutex<Vec<PendingCall>>>;

/// The nested-call answerer every context of the simulation shares: a call waits in `queue` for its answer.
pub(super) fn calls(queue: &CallQueue) -> Calls {
    let queue = queue.clone();
    Calls::answering(move |caller, action, params| {
        let answer = Arc::new(Mutex::new(None));
        let call = PendingCall { caller: caller.clone(), action, params, answer: answer.clone() };
        lock(&queue).push(call);
        Box::pin(std::future::poll_fn(move |_| match lock(&answer).take() {
            Some(result) => Poll::Ready(result),
            None => Poll::Pending,
        }))
    })
}

/// The most nested calls one attempt of a real action may make in a simulation (see `Simulation::run_inline`).
const MAX_CALLS_PER_ATTEMPT: usize = 100_000;

/// Locks a mutex only the simulation's own thread uses (a panic while it was held cannot have left it torn).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
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
    /// How many attempts it made.
    pub attempts: u32,
    /// The run that called it, for a nested call.
    pub parent_run: Option<Uuid>,
    /// Whether it ended as a recorded run did, without running (see
    /// [`SimBuilder::replaying`](crate::SimBuilder::replaying)).
    pub replayed: bool,
}

impl<A: Agent> Simulation<A> {
    /// The gate, for a new run and again for a queued or approved one when it starts.
    pub(super) fn through_gate(&mut self, agent: usize, ticket: Ticket) {
        let approved = ticket.approved;
        let now = Duration::from_nanos(self.now);
        let slot = &mut self.agents[agent];
        let meter = slot.meter.as_deref_mut().filter(|_| !ticket.metered);
        let metering = meter.is_some();
        let gated = gate_metered(&slot.table, &slot.policy, meter, now, &slot.id, &ticket.ids.action, true, approved);
        let mut ticket = ticket;
        ticket.metered |= metering && matches!(gated, Gate::Pass(_));
        match gated {
            Gate::Refused(error) => self.refuse(agent, &ticket.ids, error),
            Gate::Wait(wait) => {
                let incarnation = self.agents[agent].incarnation;
                let at = self.now.saturating_add(nanos(wait));
                self.push(at, Event::Release(Box::new(Waiting { agent, incarnation, ticket, granted: true })));
            }
            Gate::NeedsApproval(_, risk) if !approved => {
                self.journal_update(ticket.ids.run, RunLife::asked(), Duration::ZERO);
                let waiting = Outcome::awaiting_approval(format!("waiting for approval (risk {risk:?})"));
                self.tell(agent, &ticket.ids, waiting);
                let (granted, after) = self.approver();
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

    /// What the approver says of the next run that waits for approval, and after how long.
    fn approver(&mut self) -> (bool, Duration) {
        match self.faults.approvals {
            Approvals::Grant { after } => (true, after),
            Approvals::Deny { after } => (false, after),
            Approvals::Random { grant, after } => (self.rng.random::<f64>() < grant, after),
        }
    }

    /// Ends a run that never started (the gate, its approver): journaled as blocked, and its agent told.
    pub(super) fn refuse(&mut self, agent: usize, ids: &RunIds, error: ActionError) {
        let end = End::refused(error);
        self.journal_update(ids.run, end.update(), Duration::ZERO);
        self.answer(agent, ids, self.now, end.outcome, Vec::new());
    }

    /// Tells the agent how a run went (an outcome signal in its inbox), without ending it.
    pub(super) fn tell(&mut self, agent: usize, ids: &RunIds, outcome: Outcome) {
        let slot = &self.agents[agent];
        let source = slot.source.clone();
        let stamp = (self.fresh_id(), self.time(self.now));
        let run = RunRef { run: ids.run, action: &ids.action, correlation: ids.correlation, causation: ids.causation };
        if let Some(signal) = driver::action_outcome_at(&source, run, outcome, stamp) {
            self.agents[agent].inbox.push_back(signal);
        }
    }

    /// A run ended: counted, kept if asked, and its outcome told to the agent.
    pub(super) fn answer(&mut self, agent: usize, ids: &RunIds, started: u64, outcome: Outcome, effects: Vec<Effect>) {
        if let (Some(meter), Some(cost)) = (self.agents[agent].meter.as_deref_mut(), outcome.cost) {
            meter.spend(&ids.action, cost, Duration::from_nanos(self.now));
        }
        self.count(agent, (&ids.action, None, ids.replayed), (ids.requested, started, self.now), &outcome);
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

    /// Counts a run that ended, and keeps it if the simulation keeps runs. `times`: when it was asked for,
    /// started and ended, in virtual nanoseconds.
    fn count(
        &mut self,
        agent: usize,
        (action, parent_run, replayed): (&ActionId, Option<Uuid>, bool),
        (requested, started, ended): (u64, u64, u64),
        outcome: &Outcome,
    ) {
        match outcome.status {
            OutcomeStatus::Completed => self.counts.completed += 1,
            OutcomeStatus::Failed => self.counts.failed += 1,
            // (A run waiting for approval has not ended, so it is not answered here; counted as blocked if it were.)
            OutcomeStatus::Blocked | OutcomeStatus::AwaitingApproval => self.counts.blocked += 1,
        }
        if self.keep_runs {
            self.runs.push(RunRecord {
                agent: self.agents[agent].id.clone(),
                action: action.clone(),
                requested: Duration::from_nanos(requested),
                started: Duration::from_nanos(started),
                ended: Duration::from_nanos(ended),
                status: outcome.status,
                error: outcome.error.as_ref().map(|e| e.class),
                attempts: outcome.attempts,
                parent_run,
                replayed,
            });
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
            self.journal_update(ticket.ids.run, RunLife::approved(), Duration::ZERO);
            self.through_gate(agent, Ticket { approved: true, ..ticket });
        } else {
            self.refuse(agent, &ticket.ids, RunLife::denied());
        }
    }

    /// Starts a run the gate let through: its whole life is played out now (see [`Simulation::play`]), and it
    /// ends after its attempts' virtual time.
    pub(super) fn start_run(&mut self, agent: usize, action: DynAction, ticket: Ticket) {
        let Ticket { ids, params, .. } = ticket;
        let started = self.now;
        self.agents[agent].in_flight += 1;
        self.agents[agent].running.insert(ids.run, ids.clone());
        let time = self.stamp_time(self.now);
        let slot = &self.agents[agent];
        let mut ctx = ContextBuilder::new(slot.id.clone(), ids.action.clone())
            .run(ids.run, ids.correlation, ids.causation, &ids.key)
            .policy(slot.policy.clone())
            .clock(time)
            .calls(&self.calls);
        if let Some(skill) = slot.table.get(&ids.action).and_then(|r| r.skill.clone()) {
            let state = slot.state.skill_state(&skill).cloned().unwrap_or(Value::Null);
            ctx = ctx.skill(skill, state);
        }
        let mut ctx = ctx.build();
        let (end, took) = self.play(agent, &action, params, &mut ctx);
        let effects = match end.outcome.status {
            OutcomeStatus::Completed => driver::requested(&ctx).take(),
            _ => Vec::new(),
        };
        let incarnation = self.agents[agent].incarnation;
        let at = self.now.saturating_add(nanos(took));
        let ended = Ended { agent, incarnation, ids, started, end, effects };
        self.push(at, Event::RunEnded(Box::new(ended)));
    }

    /// Replays a recorded run (see `SimBuilder::replaying`): its agent is told now what it was told before its
    /// end (a wait for approval), and the run ends as it did, as long after it was asked. A run that had not
    /// ended where it was recorded stays in flight.
    pub(super) fn replay_run(&mut self, agent: usize, ids: RunIds, mut told: crate::recording::Told) {
        let slot = &mut self.agents[agent];
        slot.in_flight += 1;
        slot.running.insert(ids.run, ids.clone());
        let end = match told.last() {
            Some((_, outcome)) if outcome.status != OutcomeStatus::AwaitingApproval => told.pop(),
            _ => None,
        };
        for (_, outcome) in told {
            self.tell(agent, &ids, outcome);
        }
        let Some((after, outcome)) = end else { return };
        let end = End { outcome, error: None, refused: false };
        self.journal_update(ids.run, end.update(), after);
        let slot = &self.agents[agent];
        let ended = Ended { agent, incarnation: slot.incarnation, ids, started: self.now, end, effects: Vec::new() };
        self.push(self.now.saturating_add(nanos(after)), Event::RunEnded(Box::new(ended)));
    }

    /// Plays a run's life out from now, as [`RunLife`] says: each attempt (its real code, which must finish
    /// without waiting but for its nested calls, or its model), its retries after their backoffs, each step
    /// journaled. Returns its end and how much virtual time it took.
    fn play(
        &mut self,
        agent: usize,
        action: &DynAction,
        mut params: Value,
        ctx: &mut ActionContext,
    ) -> (End, Duration) {
        let spec = action.spec();
        let (mut life, mut next, _) = RunLife::admit(action, &mut params, true, Duration::ZERO);
        let mut elapsed = Duration::ZERO;
        loop {
            match next {
                Next::End(end) => {
                    self.journal_update(ctx.run_id, end.update(), elapsed);
                    return (end, elapsed);
                }
                Next::Retry { backoff, .. } => {
                    elapsed += backoff;
                    next = life.backoff_over();
                }
                Next::Attempt(_) => {
                    let begin = life.begin(spec, ctx);
                    self.journal_update(ctx.run_id, begin.update, elapsed);
                    let (took, result) = self.attempt(agent, action, &params, ctx);
                    elapsed += took;
                    next = match result {
                        Some(result) => life.on_ready(action, ctx, result, elapsed),
                        None => life.on_timed_out(action, ctx, elapsed),
                    };
                }
            }
        }
    }

    /// One attempt: how long it took, and its result (`None`: it ran past its timeout). Injected faults come
    /// first; then the action's model, if it has one, else its real code.
    fn attempt(
        &mut self,
        agent: usize,
        action: &DynAction,
        params: &Value,
        ctx: &ActionContext,
    ) -> (Duration, Option<Result<Value, ActionError>>) {
        let spec = action.spec();
        let draw =
            if self.faults.action_failure + self.faults.action_timeout > 0.0 { self.rng.random::<f64>() } else { 1.0 };
        if draw < self.faults.action_failure {
            self.fault(agent, Fault::ActionFailed { run: ctx.run_id });
            return (Duration::ZERO, Some(Err(ActionError::transient("an injected fault"))));
        }
        if draw < self.faults.action_failure + self.faults.action_timeout {
            self.fault(agent, Fault::ActionTimedOut { run: ctx.run_id });
            return (spec.timeout, None);
        }
        if let Some(model) = self.models.get(&spec.id) {
            let model = model.clone();
            let took = model.took(params, &mut self.rng);
            if took > spec.timeout {
                return (spec.timeout, None);
            }
            let result = match model.failure(&mut self.rng) {
                Some(class) => Err(ActionError::of_class(class, "a modelled failure")),
                None => Ok((model.output)(params, &mut self.rng)),
            };
            return (took, Some(result));
        }
        match self.run_inline(agent, action, params.clone(), ctx.clone()) {
            Some((took, result)) => (took, Some(result)),
            None => (spec.timeout, None),
        }
    }

    /// Runs an action's real code to its end without waiting on the world: it is polled, its nested calls
    /// are played (each through the gate, as a run of its own) and answered, and it is polled again, until it
    /// ends. An action that waits on anything else (I/O, a timer, another task) fails `Critical`, since a
    /// simulation cannot wait on the world; such an action needs an action model. A panic is `Critical` too,
    /// as live. Returns the virtual time its nested calls took (one after the other) and its result, or `None`
    /// once they took longer than the action's timeout (it is stopped there, as live).
    fn run_inline(
        &mut self,
        agent: usize,
        action: &DynAction,
        params: Value,
        ctx: ActionContext,
    ) -> Option<(Duration, Result<Value, ActionError>)> {
        let id = action.spec().id.clone();
        let timeout = action.spec().timeout;
        let panicked = || ActionError::critical(format!("action `{id}` panicked"));
        let Ok(mut future) = catch_unwind(AssertUnwindSafe(|| action.invoke(params, ctx))) else {
            return Some((Duration::ZERO, Err(panicked())));
        };
        let mut took = Duration::ZERO;
        // An action that makes calls without end, each taking no virtual time, would never let the clock reach
        // its timeout: past this many calls in one attempt it is stopped with a `Critical` error.
        let mut calls_left = MAX_CALLS_PER_ATTEMPT;
        loop {
            if took > timeout {
                return None;
            }
            let polled =
                catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(&mut Context::from_waker(Waker::noop()))));
            match polled {
                Ok(Poll::Ready(result)) => return Some((took, result)),
                Err(_) => return Some((took, Err(panicked()))),
                Ok(Poll::Pending) => {
                    let calls = std::mem::take(&mut *lock(&self.call_queue));
                    if calls.is_empty() {
                        let waited = format!(
                            "action `{id}` waited on something outside the simulation; give it an action model"
                        );
                        return Some((took, Err(ActionError::critical(waited))));
                    }
                    calls_left = calls_left.saturating_sub(calls.len());
                    if calls_left == 0 {
                        let endless = format!(
                            "action `{id}` made {MAX_CALLS_PER_ATTEMPT} nested calls in one attempt without ending; \
                             expected it to end or to wait on something a model gives"
                        );
                        return Some((took, Err(ActionError::critical(endless))));
                    }
                    for call in calls {
                        let (call_took, result) = self.nested_call(agent, &call.caller, call.action, call.params);
                        took += call_took;
                        *lock(&call.answer) = Some(result);
                    }
                }
            }
        }
    }

    /// A nested call of `action` from `caller`'s run, as live: the depth limit, the gate (an approval asked of
    /// the simulation's approver, whose delay the call waits), the called run's whole life, and what it leaves
    /// its caller ([`nested::fold`]). Returns the virtual time it took and what the caller's `ctx.call` gets.
    fn nested_call(
        &mut self,
        agent: usize,
        caller: &ActionContext,
        action: ActionId,
        params: Value,
    ) -> (Duration, Result<Value, ActionError>) {
        if let Some(error) = nested::too_deep(caller, &action, self.max_call_depth) {
            return (Duration::ZERO, Err(error));
        }
        let run = self.fresh_id();
        let requested = self.now;
        self.journal_queued(agent, (run, &action, caller.correlation_id, Some(caller.run_id)), &params);
        let slot = &self.agents[agent];
        let skill = slot.table.get(&action).and_then(|r| r.skill.clone());
        let skill = skill.map(|skill| {
            let state = slot.state.skill_state(&skill).cloned().unwrap_or(Value::Null);
            (skill, state)
        });
        let mut ctx = nested::context(caller, action.clone(), run, skill);
        let mut waited = Duration::ZERO;
        // A nested call is played out inside its caller's run: a rate limit that would hold it refuses it here
        // (the simulator does not suspend a caller mid-play), with the same typed error a `refuse` limit gives.
        let now = Duration::from_nanos(self.now);
        let held = |wait: Duration| ActionError::RateLimited {
            reason: format!(
                "a nested call held by a rate limit for {}ms is refused in the simulator",
                wait.as_millis()
            ),
        };
        let slot = &mut self.agents[agent];
        let gated =
            gate_metered(&slot.table, &slot.policy, slot.meter.as_deref_mut(), now, &slot.id, &action, true, false);
        let admitted = match gated {
            Gate::Wait(wait) => Err(held(wait)),
            Gate::Refused(error) => Err(error),
            Gate::Pass(admitted) => Ok(admitted),
            Gate::NeedsApproval(_, _) => {
                self.journal_update(run, RunLife::asked(), Duration::ZERO);
                let (granted, after) = self.approver();
                self.fault(agent, Fault::Approval { run, granted });
                waited = after;
                if granted {
                    self.journal_update(run, RunLife::approved(), waited);
                    // Approved: the gate and the meter once more, as the server does for an approved run.
                    let slot = &mut self.agents[agent];
                    let meter = slot.meter.as_deref_mut();
                    match gate_metered(&slot.table, &slot.policy, meter, now, &slot.id, &action, true, true) {
                        Gate::Pass(admitted) | Gate::NeedsApproval(admitted, _) => Ok(admitted),
                        Gate::Wait(wait) => Err(held(wait)),
                        Gate::Refused(error) => Err(error),
                    }
                } else {
                    Err(RunLife::denied())
                }
            }
        };
        let (end, took) = match admitted {
            Ok(admitted) => {
                nested::entering(caller, admitted.spec());
                self.play(agent, &admitted, params, &mut ctx)
            }
            Err(error) => {
                let end = End::refused(error);
                self.journal_update(run, end.update(), waited);
                (end, Duration::ZERO)
            }
        };
        let ended = self.now.saturating_add(nanos(waited + took));
        let started = self.now.saturating_add(nanos(waited));
        self.count(agent, (&action, Some(caller.run_id), false), (requested, started, ended), &end.outcome);
        let End { outcome, error, .. } = end;
        (waited + took, nested::fold(caller, &ctx, outcome, error))
    }

    /// A run's end: its slot freed, the agent told, the next queued run started.
    pub(super) fn run_ended(&mut self, ended: Ended) {
        let Ended { agent, incarnation, ids, started, end, effects } = ended;
        let slot = &mut self.agents[agent];
        if !slot.alive || slot.incarnation != incarnation {
            return;
        }
        slot.in_flight -= 1;
        slot.running.remove(&ids.run);
        self.answer(agent, &ids, started, end.outcome, effects);
        self.launch_queued(agent);
    }

    pub(super) fn launch_queued(&mut self, agent: usize) {
        while self.agents[agent].alive && self.agents[agent].in_flight < self.agents[agent].max_in_flight {
            let Some(next) = self.agents[agent].queued.pop_front() else { break };
            self.through_gate(agent, next);
        }
    }

    /// Journals a run asked for now, as queued, if the simulation keeps a journal: `(run, action, correlation,
    /// parent run)`.
    pub(super) fn journal_queued(
        &mut self,
        agent: usize,
        (run, action, correlation, parent_run): (Uuid, &ActionId, Uuid, Option<Uuid>),
        params: &Value,
    ) {
        let at = self.time(self.now);
        let Some(journal) = &mut self.journal else { return };
        let record = agentry::store::RunRecord {
            run,
            agent: self.agents[agent].id.clone(),
            action: action.clone(),
            params_digest: agentry::store::params_digest(params),
            correlation,
            parent_run,
            history: vec![(RunStatus::Queued, at)],
            attempts: 0,
            latency: None,
            cost: None,
            error: None,
        };
        journal.record(record);
    }

    /// Journals a change to a run, `after` its start in virtual time, if the simulation keeps a journal.
    pub(super) fn journal_update(&mut self, run: Uuid, update: RunUpdate, after: Duration) {
        let at = self.time(self.now.saturating_add(nanos(after)));
        if let Some(journal) = &mut self.journal {
            journal.update(run, update, at);
        }
    }
}
