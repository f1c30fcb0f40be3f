//! The simulator: the runtime's semantics on virtual time with one seeded generator. Agents consume signals
//! through the same pure `step`; their effects mean what [`agentry::interpret`] says, the same module the
//! AgentServer carries out; runs pass the same gate ([`agentry::table`]) and come back as the same outcome
//! signals. Only the I/O differs: time is virtual, actions run their real code when it finishes without
//! waiting (or follow an action model), and faults are injected from the seed.

use crate::SimRng;
use crate::clock::Agenda;
use crate::error::SimError;
use crate::faults::{Approvals, Fault, Faults};
use crate::metrics::{Metrics, Table};
use crate::model::ActionModel;
use crate::process::{Contacts, Process, Who};
use crate::trace::{Trace, What};
use agentry::action::{ActionContext, ActionError, DynAction, ErrorClass, Outcome, OutcomeStatus, should_retry};
use agentry::agent::{Agent, AgentState, start, step};
use agentry::effect::{Effect, EffectKind, Target};
use agentry::id::{ActionId, AgentId, SkillId};
use agentry::interpret::{Command, KeyFrom, Origin, interpret};
use agentry::kinds::{self, RunRef};
use agentry::policy::Policy;
use agentry::signal::Signal;
use agentry::skill::{Catalog, Skill};
use agentry::table::{ActionTable, Gate, gate};
use chrono::{DateTime, Utc};
use rand::{Rng, RngExt, SeedableRng};
use serde_json::{Value, json};
use std::collections::{HashMap, VecDeque};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use uuid::Uuid;

/// Applies the skills an agent learned or forgot in one step's effects to its state (the pure half of
/// `MountSkill` / `UnmountSkill`), as the simulation, a replay and a recovery all do.
pub(crate) fn learn<A: Agent>(state: &mut AgentState<A>, effects: &[Effect], catalog: &Catalog, policy: &Policy) {
    for effect in effects {
        match &effect.kind {
            EffectKind::MountSkill { skill, opts } => {
                if let Some(found) = catalog.get(skill) {
                    let _ = catch_unwind(AssertUnwindSafe(|| agentry::skill::mount(state, found, opts, policy)));
                }
            }
            EffectKind::UnmountSkill { skill } => {
                let _ = agentry::skill::unmount(state, skill);
            }
            _ => {}
        }
    }
}

/// Builds a simulation: the catalog of skills, action models, faults, processes and metrics, checked before
/// anything runs.
pub struct SimBuilder<A: Agent> {
    seed: u64,
    catalog: Catalog,
    models: HashMap<ActionId, ActionModel>,
    faults: Faults,
    processes: Vec<Process>,
    metrics: Metrics<A>,
    keep_trace: bool,
    keep_runs: bool,
    epoch: DateTime<Utc>,
}

impl<A: Agent> SimBuilder<A> {
    /// A simulation seeded with `seed`: the same seed and setup always give the same run.
    pub fn new(seed: u64) -> Self {
        Self {
            seed,
            catalog: Catalog::new(),
            models: HashMap::new(),
            faults: Faults::default(),
            processes: Vec::new(),
            metrics: Metrics::new(),
            keep_trace: false,
            keep_runs: false,
            epoch: DateTime::from_timestamp(1_767_225_600, 0).unwrap_or_default(),
        }
    }

    /// Adds a skill to the catalog agents mount from.
    pub fn skill(mut self, skill: Skill) -> Self {
        self.catalog.insert(skill);
        self
    }

    /// Runs `action` by this model instead of its code.
    pub fn model(mut self, action: &str, model: ActionModel) -> Result<Self, SimError> {
        let id: ActionId = action
            .parse()
            .map_err(|e: agentry::IdError| SimError::BadKind { kind: action.to_owned(), reason: e.to_string() })?;
        model.check(action)?;
        self.models.insert(id, model);
        Ok(self)
    }

    /// Injects these faults.
    pub fn faults(mut self, faults: Faults) -> Self {
        self.faults = faults;
        self
    }

    /// Adds a Poisson process of signals.
    pub fn process(mut self, process: Process) -> Self {
        self.processes.push(process);
        self
    }

    /// Collects these metrics.
    pub fn metrics(mut self, metrics: Metrics<A>) -> Self {
        self.metrics = metrics;
        self
    }

    /// Keeps the whole trace (every input, refusal and fault), so histories can be replayed; otherwise only its
    /// hash is kept.
    pub fn keep_trace(mut self, keep: bool) -> Self {
        self.keep_trace = keep;
        self
    }

    /// Keeps a record of every run that ended (for queueing measures); off by default.
    pub fn keep_runs(mut self, keep: bool) -> Self {
        self.keep_runs = keep;
        self
    }

    /// Builds the simulation, or says what is wrong with its setup.
    pub fn build(self) -> Result<Simulation<A>, SimError> {
        self.faults.check()?;
        for action in self.models.keys() {
            let provided = self.catalog.iter().any(|s| s.actions().iter().any(|a| &a.spec().id == action));
            if !provided {
                return Err(SimError::UnknownAction(action.clone()));
            }
        }
        let mut queue = Agenda::new();
        for (index, process) in self.processes.iter().enumerate() {
            if process.rate > 0.0 {
                queue.push(0, Event::Tick(index));
            }
        }
        if self.metrics.every.is_some() {
            queue.push(0, Event::Sample);
        }
        if self.faults.crash_rate > 0.0 {
            queue.push(0, Event::ArmCrash);
        }
        let columns = self.metrics.clone_names();
        Ok(Simulation {
            catalog: Arc::new(self.catalog),
            models: self.models,
            faults: self.faults,
            processes: self.processes,
            metrics: self.metrics,
            table: Table::with_columns(columns),
            trace: Trace::new(self.keep_trace),
            keep_runs: self.keep_runs,
            runs: Vec::new(),
            replies: Vec::new(),
            agents: Vec::new(),
            index: HashMap::new(),
            queue,
            now: 0,
            rng: SimRng::seed_from_u64(self.seed),
            epoch: self.epoch,
            counts: Counts::default(),
            run_index: 0,
        })
    }
}

/// An event on the virtual clock.
enum Event {
    /// A signal reaches an agent.
    Deliver(usize, Signal),
    /// A run ends.
    RunEnded(Box<Ended>),
    /// A timer fires, if it is still the timer of its key.
    Fire(Box<Timer>),
    /// A process's next signal.
    Tick(usize),
    /// An approval is decided.
    Decide(Box<Waiting>),
    /// The metrics are sampled.
    Sample,
    /// The first crash is drawn (once there are agents to crash).
    ArmCrash,
    /// Some agent crashes.
    Crash,
}

/// A timer on its way: it fires only if it is still the timer of its key (the generation it was armed with).
struct Timer {
    agent: usize,
    key: String,
    generation: u64,
    signal: Signal,
}

/// Who a run is and who asked.
#[derive(Clone)]
struct RunIds {
    run: Uuid,
    action: ActionId,
    correlation: Uuid,
    causation: Option<Uuid>,
    key: String,
    requested: u64,
}

/// A run admitted or waiting for a slot.
struct Ticket {
    ids: RunIds,
    params: Value,
}

/// A run waiting for its approval, and what the approver will say.
struct Waiting {
    agent: usize,
    incarnation: u32,
    ticket: Ticket,
    granted: bool,
}

/// A run that ends at its event's time.
struct Ended {
    agent: usize,
    incarnation: u32,
    ids: RunIds,
    started: u64,
    outcome: Outcome,
    effects: Vec<Effect>,
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

/// One agent in the simulation.
struct Slot<A: Agent> {
    id: AgentId,
    source: Arc<str>,
    state: AgentState<A>,
    table: ActionTable,
    policy: Arc<Policy>,
    parent: Option<usize>,
    alive: bool,
    /// Inputs consumed.
    seq: u64,
    in_flight: usize,
    max_in_flight: usize,
    queued: VecDeque<Ticket>,
    timers: HashMap<String, u64>,
    /// Counts crashes: a run's end from before a crash is not delivered.
    incarnation: u32,
    /// The runs in flight now: their ids, for a crash to report them lost.
    running: HashMap<Uuid, RunIds>,
    subscriptions: Vec<String>,
    /// Outcome signals, fed before the next event (as the server feeds its inbox before its next message).
    inbox: VecDeque<Signal>,
}

/// Counts kept as the simulation runs, for metrics.
#[derive(Debug, Default, Clone)]
pub struct Counts {
    /// Signals consumed through `step`, in all.
    pub steps: u64,
    /// Runs that ended, by status: completed, failed, blocked.
    pub completed: u64,
    /// Runs that failed.
    pub failed: u64,
    /// Runs refused or denied.
    pub blocked: u64,
    /// Effects refused.
    pub refused: u64,
    /// Faults injected.
    pub faults: u64,
}

/// A running simulation of agents of type `A` (use an enum, or `()` with skills, for several kinds of agents).
pub struct Simulation<A: Agent> {
    catalog: Arc<Catalog>,
    models: HashMap<ActionId, ActionModel>,
    faults: Faults,
    processes: Vec<Process>,
    metrics: Metrics<A>,
    table: Table,
    trace: Trace,
    keep_runs: bool,
    runs: Vec<RunRecord>,
    replies: Vec<(Uuid, Value)>,
    agents: Vec<Slot<A>>,
    index: HashMap<AgentId, usize>,
    queue: Agenda<Event>,
    now: u64,
    rng: SimRng,
    epoch: DateTime<Utc>,
    counts: Counts,
    /// How many runs the input being handled has asked for so far (a run's idempotency key counts them).
    run_index: u32,
}

/// How many inbox signals an agent consumes at one event before the rest wait for their turn (the server's
/// own budget).
const SETTLE_BUDGET: usize = 256;

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl<A: Agent> Simulation<A> {
    /// Adds an agent, with its start skills mounted, under the default policy and at most 64 runs in flight.
    pub fn add(&mut self, id: AgentId, domain: A) -> Result<(), SimError> {
        self.add_with(id, domain, Policy::default(), 64)
    }

    /// Adds an agent under `policy`, with at most `max_in_flight` runs at once (more wait in a queue).
    pub fn add_with(&mut self, id: AgentId, domain: A, policy: Policy, max_in_flight: usize) -> Result<(), SimError> {
        self.spawn(id, domain, policy, max_in_flight, None).map(|_| ())
    }

    fn spawn(
        &mut self,
        id: AgentId,
        domain: A,
        policy: Policy,
        max_in_flight: usize,
        parent: Option<usize>,
    ) -> Result<usize, SimError> {
        if self.index.contains_key(&id) {
            return Err(SimError::DuplicateAgent(id));
        }
        let (state, effects) =
            start(id.clone(), domain, &policy).map_err(|error| SimError::Start { agent: id.clone(), error })?;
        self.trace.started(&state, &policy);
        let number = self.agents.len();
        self.agents.push(Slot {
            source: kinds::agent_source(&id).into(),
            id: id.clone(),
            state,
            table: ActionTable::default(),
            policy: Arc::new(policy),
            parent,
            alive: true,
            seq: 0,
            in_flight: 0,
            max_in_flight: max_in_flight.max(1),
            queued: VecDeque::new(),
            timers: HashMap::new(),
            incarnation: 0,
            running: HashMap::new(),
            subscriptions: Vec::new(),
            inbox: VecDeque::new(),
        });
        self.index.insert(id, number);
        self.carry_out_all(number, effects, Origin::Mounting);
        Ok(number)
    }

    /// Subscribes an agent to a topic (what `Target::Topic` emits reach).
    pub fn subscribe(&mut self, agent: &AgentId, topic: &str) -> Result<(), SimError> {
        let number = self.number(agent)?;
        self.agents[number].subscriptions.push(topic.to_owned());
        Ok(())
    }

    /// Mounts a skill of the catalog on an agent from outside (as `AgentRef::mount` does).
    pub fn mount(&mut self, agent: &AgentId, skill: &SkillId, opts: Value) -> Result<(), SimError> {
        let number = self.number(agent)?;
        self.carry_out(number, Command::Mount { skill: skill.clone(), opts }, Origin::Mounting);
        Ok(())
    }

    /// Sends a signal to an agent now (it is stamped from the simulation's generator and clock).
    pub fn send(&mut self, agent: &AgentId, signal: Signal) -> Result<(), SimError> {
        self.send_after(agent, signal, Duration::ZERO)
    }

    /// Sends a signal to an agent after `delay` of virtual time.
    pub fn send_after(&mut self, agent: &AgentId, signal: Signal, delay: Duration) -> Result<(), SimError> {
        let number = self.number(agent)?;
        let at = self.now.saturating_add(nanos(delay));
        let signal = self.stamp_at(signal, at);
        self.push(at, Event::Deliver(number, signal));
        Ok(())
    }

    fn number(&self, agent: &AgentId) -> Result<usize, SimError> {
        self.index.get(agent).copied().ok_or_else(|| SimError::NoSuchAgent(agent.clone()))
    }

    /// Runs until nothing is left to happen or the clock reaches `until`, whichever comes first.
    pub fn run_until(&mut self, until: Duration) {
        let until = nanos(until);
        while self.queue.next_at().is_some_and(|at| at <= until) {
            let Some((at, event)) = self.queue.pop() else { break };
            self.now = at;
            self.handle(event);
        }
        if until != u64::MAX {
            self.now = self.now.max(until);
        }
    }

    /// Runs until nothing is left to happen (beware of processes: they never run out).
    pub fn run(&mut self) {
        self.run_until(Duration::MAX);
    }

    /// The virtual time now.
    pub fn now(&self) -> Duration {
        Duration::from_nanos(self.now)
    }

    /// An agent's state.
    pub fn state(&self, agent: &AgentId) -> Option<&AgentState<A>> {
        self.index.get(agent).map(|&n| &self.agents[n].state)
    }

    /// Every agent's state, in the order they were added.
    pub fn states(&self) -> impl Iterator<Item = &AgentState<A>> {
        self.agents.iter().filter(|s| s.alive).map(|s| &s.state)
    }

    /// How many agents are alive.
    pub fn population(&self) -> usize {
        self.agents.iter().filter(|s| s.alive).count()
    }

    /// The ids of the actions an agent can run now.
    pub fn actions(&self, agent: &AgentId) -> Vec<ActionId> {
        self.index
            .get(agent)
            .map(|&n| self.agents[n].table.specs().into_iter().map(|s| s.id).collect())
            .unwrap_or_default()
    }

    /// What agents replied (to signal ids), in order.
    pub fn replies(&self) -> &[(Uuid, Value)] {
        &self.replies
    }

    /// Every run that ended, if the simulation keeps them ([`SimBuilder::keep_runs`]).
    pub fn runs(&self) -> &[RunRecord] {
        &self.runs
    }

    /// The counts so far.
    pub fn counts(&self) -> &Counts {
        &self.counts
    }

    /// The trace so far.
    pub fn trace(&self) -> &Trace {
        &self.trace
    }

    /// The metrics table so far.
    pub fn table(&self) -> &Table {
        &self.table
    }

    /// The catalog the agents mount from.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// Schedules an event; returns its place in the order of scheduling.
    fn push(&mut self, at: u64, event: Event) -> u64 {
        self.queue.push(at, event)
    }

    fn time(&self, at: u64) -> DateTime<Utc> {
        self.epoch + chrono::Duration::nanoseconds(i64::try_from(at).unwrap_or(i64::MAX))
    }

    fn fresh_id(&mut self) -> Uuid {
        let millis = u64::try_from(self.time(self.now).timestamp_millis()).unwrap_or(0);
        let mut random = [0u8; 10];
        self.rng.fill_bytes(&mut random);
        uuid::Builder::from_unix_timestamp_millis(millis, &random).into_uuid()
    }

    /// A signal stamped with an id from the generator and the virtual time `at`.
    fn stamp_at(&mut self, signal: Signal, at: u64) -> Signal {
        let id = self.fresh_id();
        signal.restamped(id, self.time(at))
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::Deliver(to, signal) => self.consume_settling(to, signal),
            Event::RunEnded(ended) => self.run_ended(*ended),
            Event::Fire(timer) => {
                let Timer { agent, key, generation, signal } = *timer;
                let slot = &mut self.agents[agent];
                if slot.alive && slot.timers.get(&key) == Some(&generation) {
                    slot.timers.remove(&key);
                    self.consume_settling(agent, signal);
                }
            }
            Event::Tick(process) => self.tick(process),
            Event::Decide(waiting) => self.decide(*waiting),
            Event::Sample => {
                let row = self.metrics.sample(
                    self.now(),
                    self.agents.iter().filter(|s| s.alive).map(|s| &s.state),
                    &self.counts,
                );
                self.table.push(row);
                if let Some(every) = self.metrics.every {
                    let at = self.now.saturating_add(nanos(every));
                    self.push(at, Event::Sample);
                }
            }
            Event::ArmCrash => self.arm_crash(),
            Event::Crash => {
                self.crash();
                self.arm_crash();
            }
        }
    }

    /// One input through an agent's `step`, and its effects carried out in order.
    fn consume(&mut self, to: usize, signal: Signal) {
        if !self.agents[to].alive {
            return;
        }
        self.counts.steps += 1;
        let at = self.now();
        let slot = &mut self.agents[to];
        slot.seq += 1;
        self.trace.input(at, &slot.id, &signal);
        let catalog = &self.catalog;
        let stepped = catch_unwind(AssertUnwindSafe(|| step(&mut slot.state, &signal, catalog)));
        let effects = match stepped {
            Ok(Ok(stepped)) => stepped.effects,
            // As live: a handler that fails or panics changes nothing and asks for nothing.
            _ => Vec::new(),
        };
        self.run_index = 0;
        self.carry_out_all(to, effects, Origin::Step(&signal));
    }

    /// An input, then the agent's inbox (the outcome signals its effects produced), in order; past a budget
    /// the rest wait for their turn on the clock, so an agent answering every refusal with another cannot
    /// hold the simulation.
    fn consume_settling(&mut self, to: usize, signal: Signal) {
        self.consume(to, signal);
        let mut budget = SETTLE_BUDGET;
        while let Some(next) = self.agents[to].inbox.pop_front() {
            if budget == 0 {
                self.push(self.now, Event::Deliver(to, next));
                continue;
            }
            budget -= 1;
            self.consume(to, next);
        }
    }

    fn carry_out_all(&mut self, agent: usize, effects: Vec<Effect>, origin: Origin<'_>) {
        for effect in effects {
            let slot = &self.agents[agent];
            let command = interpret(effect, origin, &slot.policy, &slot.source);
            self.carry_out(agent, command, origin);
            if !self.agents[agent].alive {
                break;
            }
        }
    }

    /// Does what one effect means, as the AgentServer does, on virtual time.
    fn carry_out(&mut self, agent: usize, command: Command, origin: Origin<'_>) {
        let cause = origin.cause();
        match command {
            Command::Register { action, skill } => {
                let slot = &mut self.agents[agent];
                slot.table.register(action, skill.as_ref(), &slot.state, &self.catalog);
            }
            Command::Deregister { action } => self.agents[agent].table.deregister(&action),
            Command::Run { action, params, key } => {
                let run = self.fresh_id();
                let slot = &self.agents[agent];
                let key = match key {
                    KeyFrom::Input => {
                        let index = self.run_index;
                        self.run_index += 1;
                        format!("{}/{}/{index}", slot.id, slot.seq)
                    }
                    KeyFrom::Run => format!("{}/run/{run}", slot.id),
                };
                let ids = RunIds {
                    run,
                    action,
                    correlation: cause.map_or(run, Signal::correlation_id),
                    causation: cause.map(Signal::id),
                    key,
                    requested: self.now,
                };
                self.through_gate(agent, Ticket { ids, params }, false);
            }
            Command::Emit { signal, to } => {
                let signal = self.stamp_at(signal, self.now);
                let targets: Vec<usize> = match to {
                    Target::Agent(id) => self.index.get(&id).copied().into_iter().collect(),
                    Target::Parent => self.agents[agent].parent.into_iter().collect(),
                    Target::Topic(topic) => (0..self.agents.len())
                        .filter(|&n| self.agents[n].alive && self.agents[n].subscriptions.contains(&topic))
                        .collect(),
                };
                for target in targets {
                    self.deliver(target, signal.clone());
                }
            }
            Command::Reply { to, data } => self.replies.push((to, data)),
            Command::Schedule { key, after, signal, .. } => {
                let at = self.now.saturating_add(nanos(after));
                let signal = self.stamp_at(signal, at);
                // The timer's generation is the event's own place in the order: unique, so a timer re-armed
                // under the same key leaves the earlier event firing for nothing.
                let generation = self.queue.next_order();
                self.agents[agent].timers.insert(key.clone(), generation);
                self.push(at, Event::Fire(Box::new(Timer { agent, key, generation, signal })));
            }
            Command::Cancel { key } => {
                self.agents[agent].timers.remove(&key);
            }
            Command::Spawn { id, agent: agent_type, init, policy } => {
                let made = if agent_type != A::name() {
                    Err(format!("this simulation runs agents of type `{}`, not `{agent_type}`", A::name()))
                } else {
                    serde_json::from_value::<A>(init)
                        .map_err(|e| format!("its initial state does not decode: {e}"))
                        .and_then(|domain| {
                            let max = self.agents[agent].max_in_flight;
                            self.spawn(id.clone(), domain, policy, max, Some(agent)).map_err(|e| e.to_string())
                        })
                };
                if let Err(error) = made {
                    let source = self.agents[agent].source.clone();
                    let stamp = (self.fresh_id(), self.time(self.now));
                    if let Some(signal) = kinds::spawn_failed_at(&source, &id, &error, stamp) {
                        self.push(self.now, Event::Deliver(agent, signal));
                    }
                }
            }
            Command::StopChild { id } => {
                if let Some(&child) = self.index.get(&id)
                    && self.agents[child].parent == Some(agent)
                {
                    let reason = format!("stopped by its parent `{}`", self.agents[agent].id);
                    self.stop(child, &reason);
                }
            }
            Command::Stop { reason } => self.stop(agent, &reason),
            Command::Mount { skill, opts } => {
                let found = self.catalog.get(&skill).cloned();
                let slot = &mut self.agents[agent];
                let mounted = match found {
                    None => Err(format!("skill `{skill}` is not in the catalog")),
                    Some(found) => {
                        let policy = slot.policy.clone();
                        match catch_unwind(AssertUnwindSafe(|| {
                            agentry::skill::mount(&mut slot.state, &found, &opts, &policy)
                        })) {
                            Ok(result) => result.map_err(|e| e.to_string()),
                            Err(_) => Err(format!("the state init of skill `{skill}` panicked")),
                        }
                    }
                };
                match mounted {
                    Ok(effects) => self.carry_out_all(agent, effects, Origin::Mounting),
                    Err(reason) => self.refused(agent, Command::mount_failed(true, skill, origin, reason)),
                }
            }
            Command::Unmount { skill } => match agentry::skill::unmount(&mut self.agents[agent].state, &skill) {
                Ok(effects) => self.carry_out_all(agent, effects, Origin::Mounting),
                Err(e) => self.refused(agent, Command::mount_failed(false, skill, origin, e.to_string())),
            },
            Command::Refused(refusal) => self.refused(agent, refusal),
        }
    }

    fn refused(&mut self, agent: usize, refusal: agentry::effect::EffectRefusal) {
        self.counts.refused += 1;
        let id = self.agents[agent].id.clone();
        self.trace.record(self.now(), &id, What::Refused { refusal });
    }

    fn fault(&mut self, agent: usize, fault: Fault) {
        self.counts.faults += 1;
        let id = self.agents[agent].id.clone();
        self.trace.record(self.now(), &id, What::Fault { fault });
    }

    /// A signal from one agent to another, through the message faults.
    fn deliver(&mut self, to: usize, signal: Signal) {
        if self.faults.message_drop > 0.0 && self.rng.random::<f64>() < self.faults.message_drop {
            return self.fault(to, Fault::MessageDropped { signal: signal.id() });
        }
        let copies = if self.faults.message_duplicate > 0.0 && self.rng.random::<f64>() < self.faults.message_duplicate
        {
            self.fault(to, Fault::MessageDuplicated { signal: signal.id() });
            2
        } else {
            1
        };
        for _ in 0..copies {
            let delay = match &self.faults.message_delay {
                Some(latency) => nanos(latency.sample(&mut self.rng)),
                None => 0,
            };
            self.push(self.now.saturating_add(delay), Event::Deliver(to, signal.clone()));
        }
    }

    /// The gate, for a new run and again for a queued or approved one when it starts.
    fn through_gate(&mut self, agent: usize, ticket: Ticket, approved: bool) {
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
    fn tell(&mut self, agent: usize, ids: &RunIds, outcome: Outcome) {
        let slot = &self.agents[agent];
        let source = slot.source.clone();
        let stamp = (self.fresh_id(), self.time(self.now));
        let run = RunRef { run: ids.run, action: &ids.action, correlation: ids.correlation, causation: ids.causation };
        if let Some(signal) = kinds::action_outcome_at(&source, run, outcome, stamp) {
            self.agents[agent].inbox.push_back(signal);
        }
    }

    /// A run ended: counted, kept if asked, and its outcome told to the agent.
    fn answer(&mut self, agent: usize, ids: &RunIds, started: u64, outcome: Outcome, effects: Vec<Effect>) {
        match outcome.status {
            OutcomeStatus::Completed => self.counts.completed += 1,
            OutcomeStatus::Failed => self.counts.failed += 1,
            OutcomeStatus::Blocked => self.counts.blocked += 1,
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
        if self.agents[agent].inbox.len() == 1 {
            // Nothing is consuming the inbox right now (a run's end is an event of its own): feed it.
            if let Some(signal) = self.agents[agent].inbox.pop_front() {
                self.consume_settling(agent, signal);
            }
        }
    }

    /// An approval decided: an approved run meets the gate again; a denied one is blocked.
    fn decide(&mut self, waiting: Waiting) {
        let Waiting { agent, incarnation, ticket, granted } = waiting;
        let slot = &self.agents[agent];
        if !slot.alive || slot.incarnation != incarnation {
            return;
        }
        if granted {
            self.through_gate(agent, ticket, true);
        } else {
            let error = ActionError::denied("the run was denied by its approver");
            self.answer(agent, &ticket.ids, self.now, Outcome::failed(&error, Duration::ZERO, 0), Vec::new());
        }
    }

    /// Starts a run the gate let through: every attempt is played out now (its real code, which must finish
    /// without waiting, or its model), with retries as the action's policy says, and the run ends after the
    /// attempts' virtual time.
    fn start_run(&mut self, agent: usize, action: DynAction, ticket: Ticket) {
        let Ticket { ids, mut params } = ticket;
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
    fn attempt(
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
            let took = model.latency.sample(&mut self.rng);
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
            .with_policy((*slot.policy).clone());
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
    fn run_ended(&mut self, ended: Ended) {
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

    fn launch_queued(&mut self, agent: usize) {
        while self.agents[agent].alive && self.agents[agent].in_flight < self.agents[agent].max_in_flight {
            let Some(next) = self.agents[agent].queued.pop_front() else { break };
            self.through_gate(agent, next, true);
        }
    }

    /// A process's signal to one agent, then its next tick.
    fn tick(&mut self, index: usize) {
        let candidates = match &self.processes[index].who {
            Who::Agents(ids) => ids.len(),
            _ => self.agents.len(),
        };
        if candidates > 0 {
            let pick = self.rng.random_range(0..candidates);
            let process = &self.processes[index];
            let target = match &process.who {
                Who::Agents(ids) => self.index.get(&ids[pick]).copied(),
                Who::All => Some(pick),
                Who::WithSkill(skill) => Some(pick).filter(|&n| self.agents[n].state.is_mounted(skill)),
            };
            if let Some(target) = target.filter(|&n| self.agents[n].alive) {
                let contact = match &process.contacts {
                    Contacts::None => Some(None),
                    Contacts::WellMixed if self.agents.len() > 1 => {
                        let mut peer = self.rng.random_range(0..self.agents.len() - 1);
                        if peer >= target {
                            peer += 1;
                        }
                        Some(Some(peer))
                    }
                    Contacts::WellMixed => None,
                    Contacts::Network(network) => {
                        let neighbours = network.neighbours(target);
                        if neighbours.is_empty() {
                            None
                        } else {
                            Some(Some(neighbours[self.rng.random_range(0..neighbours.len())] as usize))
                        }
                    }
                };
                if let Some(peer) = contact {
                    let data = match peer.and_then(|p| self.agents.get(p)) {
                        Some(peer) => json!({"peer": peer.id.as_str()}),
                        None => Value::Null,
                    };
                    let signal = self.processes[index].template.clone().with_data(data);
                    let signal = self.stamp_at(signal, self.now);
                    self.consume_settling(target, signal);
                }
            }
        }
        let rate = self.processes[index].rate * candidates.max(1) as f64;
        let wait = rand_distr::Distribution::sample(
            &rand_distr::Exp::new(rate).unwrap_or(rand_distr::Exp::new(1.0).unwrap_or_else(|_| unreachable!())),
            &mut self.rng,
        );
        let at = self.now.saturating_add(nanos(Duration::from_secs_f64(wait.min(1e12))));
        self.push(at, Event::Tick(index));
    }

    fn arm_crash(&mut self) {
        let rate = self.faults.crash_rate * self.agents.len().max(1) as f64;
        let wait = -self.rng.random::<f64>().max(f64::MIN_POSITIVE).ln() / rate;
        let at = self.now.saturating_add(nanos(Duration::from_secs_f64(wait.min(1e12))));
        self.push(at, Event::Crash);
    }

    /// A random agent crashes: its runs in flight are lost (it gets each back as `Interrupted`), its queued
    /// runs and timers stay, and it goes on from its last good state.
    fn crash(&mut self) {
        if self.agents.is_empty() {
            return;
        }
        let victim = self.rng.random_range(0..self.agents.len());
        if !self.agents[victim].alive {
            return;
        }
        let slot = &mut self.agents[victim];
        slot.incarnation += 1;
        slot.in_flight = 0;
        let mut lost: Vec<RunIds> = slot.running.drain().map(|(_, ids)| ids).collect();
        lost.sort_by_key(|ids| ids.run);
        self.fault(victim, Fault::Crashed { runs_lost: lost.len() });
        for ids in lost {
            let error = ActionError::interrupted("the agent crashed while the run was in flight");
            self.answer(victim, &ids, self.now, Outcome::failed(&error, Duration::ZERO, 1), Vec::new());
        }
        self.launch_queued(victim);
    }

    /// Stops an agent: its runs and timers are dropped, its parent told.
    fn stop(&mut self, agent: usize, reason: &str) {
        let slot = &mut self.agents[agent];
        if !slot.alive {
            return;
        }
        slot.alive = false;
        slot.timers.clear();
        slot.queued.clear();
        slot.running.clear();
        let (id, parent) = (slot.id.clone(), slot.parent);
        self.trace.record(self.now(), &id, What::Stopped { reason: reason.to_owned() });
        if let Some(parent) = parent.filter(|&p| self.agents[p].alive) {
            let source = self.agents[parent].source.clone();
            let stamp = (self.fresh_id(), self.time(self.now));
            if let Some(signal) = kinds::child_exited_at(&source, &id, reason, stamp) {
                self.push(self.now, Event::Deliver(parent, signal));
            }
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
