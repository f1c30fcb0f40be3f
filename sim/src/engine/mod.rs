//! The simulator: the runtime's semantics on virtual time with one seeded generator. Agents consume signals
//! through the same pure `step`; their effects mean what [`agentry::driver::interpret`] says, the same
//! function the AgentServer carries out; runs pass the same gate ([`agentry::driver::gate`]) and come back as the same outcome
//! signals. Only the I/O differs: time is virtual, actions run their real code when it finishes without
//! waiting (or follow an action model), and faults are injected from the seed.

use crate::SimRng;
use crate::clock::Agenda;
use crate::error::SimError;
use crate::faults::{Approvals, Fault, Faults};
use crate::metrics::{Counts, Metrics, Table};
use crate::model::ActionModel;
use crate::process::{Contacts, Process, Who};
use crate::recording::Recording;
use crate::trace::{Trace, What};
use agentry::action::{ActionContext, ActionError, DynAction, ErrorClass, Outcome, OutcomeStatus};
use agentry::agent::{Agent, AgentState, start, step};
use agentry::driver::{
    self, ActionTable, Calls, Command, ContextBuilder, End, Gate, KeyFrom, Next, Origin, RunLife, RunRef, gate_metered,
    interpret, nested,
};
use agentry::effect::{Effect, Target};
use agentry::id::{ActionId, AgentId, SkillId};
use agentry::kinds;
use agentry::policy::Policy;
use agentry::signal::Signal;
use agentry::skill::{Catalog, Skill};
use agentry::store::{RunStatus, RunUpdate};
use chrono::{DateTime, Utc};
use rand::{Rng, RngExt, SeedableRng};
use serde_json::{Value, json};
use std::collections::{HashMap, VecDeque};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use uuid::Uuid;

mod builder;
mod journal;
mod runs;
mod world;

pub use builder::SimBuilder;
pub use runs::RunRecord;
use runs::{CallQueue, Ended, RunIds, Ticket, Waiting};

/// An event on the virtual clock. Events wait in the agenda's slab and are moved out once; boxing the
/// signal of the common `Deliver` would cost an allocation per delivery (measured ~10% slower in `sim_steps`).
#[allow(clippy::large_enum_variant)]
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
    /// A run a rate limit held meets the gate again (`granted` unused).
    Release(Box<Waiting>),
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

/// One agent in the simulation.
struct Slot<A: Agent> {
    id: AgentId,
    source: Arc<str>,
    state: AgentState<A>,
    table: ActionTable,
    policy: Arc<Policy>,
    /// What its budgets and rate limits count, if its policy has any.
    meter: Option<Box<agentry::meter::Meter>>,
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

/// A running simulation of agents of type `A` (use an enum, or `()` with skills, for several kinds of agents).
pub struct Simulation<A: Agent> {
    catalog: Arc<Catalog>,
    models: HashMap<ActionId, ActionModel>,
    faults: Faults,
    processes: Vec<Process>,
    /// For each process that reaches the agents with a skill, which entry of `members` tracks that skill.
    knowing: Vec<Option<usize>>,
    /// Who has each skill a process looks for, kept as skills are mounted and unmounted: a process's pick is
    /// checked against a bit instead of the picked agent's state (a cache miss per tick at scale).
    members: Vec<Members>,
    metrics: Metrics<A>,
    table: Table,
    trace: Trace,
    keep_runs: bool,
    runs: Vec<RunRecord>,
    /// Every run's record as the runtime journals it, if the simulation keeps a journal.
    journal: Option<journal::Journal>,
    /// The nested calls of the action being polled, waiting to be played.
    call_queue: CallQueue,
    /// What every run's context answers its nested calls with: they wait in `call_queue`.
    calls: Calls,
    /// How deep nested calls may go.
    max_call_depth: usize,
    replies: Vec<(Uuid, Value)>,
    agents: Vec<Slot<A>>,
    index: HashMap<AgentId, usize>,
    queue: Agenda<Event>,
    now: u64,
    rng: SimRng,
    epoch: DateTime<Utc>,
    /// The last virtual time turned into calendar time, and what it gave (see [`Simulation::stamp_time`]).
    last_time: (u64, DateTime<Utc>),
    counts: Counts,
    /// How many runs the input being handled has asked for so far (a run's idempotency key counts them).
    run_index: u32,
    /// Whether an agent's input and inbox are being consumed now: an outcome told meanwhile waits in the
    /// inbox for its turn, after the current input's effects, as in the live server.
    settling: bool,
    /// The runs to replay instead of running, when replaying a past (see [`SimBuilder::replaying`]).
    recording: Option<Recording>,
}

/// The live agents that have one skill mounted, as bits by agent number, and how many they are (so a metric
/// that counts them need not visit every agent's state).
struct Members {
    skill: SkillId,
    bits: Vec<u64>,
    count: usize,
}

impl Members {
    fn set(&mut self, agent: usize, mounted: bool) {
        let (word, bit) = (agent / 64, agent % 64);
        if self.bits.len() <= word {
            self.bits.resize(word + 1, 0);
        }
        let mask = 1 << bit;
        if (self.bits[word] & mask != 0) == mounted {
            return;
        }
        self.bits[word] ^= mask;
        if mounted {
            self.count += 1;
        } else {
            self.count -= 1;
        }
    }

    fn has(&self, agent: usize) -> bool {
        self.bits.get(agent / 64).is_some_and(|word| word & (1 << (agent % 64)) != 0)
    }
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

    /// Adds an agent in a state it had elsewhere (a snapshot, or a live agent's state after some input),
    /// without starting it again: its action table is what its mounted skills provide, as a recovery makes it
    /// live. Every mounted skill must be in the catalog. For replaying a past (a fork: see
    /// [`SimBuilder::replaying`]).
    pub fn restore(&mut self, state: AgentState<A>, policy: Policy, max_in_flight: usize) -> Result<(), SimError> {
        if self.index.contains_key(&state.id) {
            return Err(SimError::DuplicateAgent(state.id));
        }
        if let Some(skill) = state.skills().keys().find(|skill| self.catalog.get(skill).is_none()) {
            return Err(SimError::UnknownSkill(skill.clone()));
        }
        let effects = driver::table_effects(&state);
        self.trace.started(&state, &policy);
        self.insert(state, policy, max_in_flight, None, effects);
        Ok(())
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
        Ok(self.insert(state, policy, max_in_flight, parent, effects))
    }

    /// Puts an agent in the simulation and carries out its start's effects; returns its number.
    fn insert(
        &mut self,
        state: AgentState<A>,
        policy: Policy,
        max_in_flight: usize,
        parent: Option<usize>,
        effects: Vec<Effect>,
    ) -> usize {
        let id = state.id.clone();
        let number = self.agents.len();
        self.agents.push(Slot {
            source: kinds::agent_source(&id),
            id: id.clone(),
            state,
            table: ActionTable::default(),
            meter: (!policy.budgets.is_empty() || !policy.rate_limits.is_empty())
                .then(|| Box::new(agentry::meter::Meter::new(&policy))),
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
        self.note_skills(number);
        self.carry_out_all(number, effects, Origin::Mounting);
        number
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

    /// Gives an agent a signal as it is, keeping its id and time, after `delay` of virtual time: a recorded
    /// input replayed (the runs and signals it causes follow from its id, as they did where it was recorded).
    pub fn send_recorded(&mut self, agent: &AgentId, signal: Signal, delay: Duration) -> Result<(), SimError> {
        let number = self.number(agent)?;
        let at = self.now.saturating_add(nanos(delay));
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
            if self.recording.as_ref().is_some_and(Recording::exhausted) {
                return;
            }
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

    /// The journal of an agent's runs, oldest first, if the simulation keeps one ([`SimBuilder::keep_journal`]):
    /// the same records, step by step, as the runtime's journal keeps of the same runs, stamped with virtual
    /// time. Empty when it keeps none.
    pub fn journal(&self, agent: &AgentId) -> Vec<agentry::store::RunRecord> {
        self.journal.as_ref().map(|journal| journal.of(agent)).unwrap_or_default()
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

    /// The recording runs are replayed from, with what is left of it (see [`SimBuilder::replaying`]).
    pub fn recording(&self) -> Option<&Recording> {
        self.recording.as_ref()
    }

    /// Schedules an event; returns its place in the order of scheduling.
    fn push(&mut self, at: u64, event: Event) -> u64 {
        self.queue.push(at, event)
    }

    /// The calendar time of the virtual time `at`.
    fn time(&self, at: u64) -> DateTime<Utc> {
        self.epoch + chrono::Duration::nanoseconds(i64::try_from(at).unwrap_or(i64::MAX))
    }

    /// [`Simulation::time`], kept for the last time asked: most stamps in a row are for the same moment, and
    /// calendar arithmetic is not free.
    fn stamp_time(&mut self, at: u64) -> DateTime<Utc> {
        let (last, time) = self.last_time;
        if last == at {
            return time;
        }
        let time = self.time(at);
        self.last_time = (at, time);
        time
    }

    fn fresh_id(&mut self) -> Uuid {
        let millis = u64::try_from(self.stamp_time(self.now).timestamp_millis()).unwrap_or(0);
        let mut random = [0u8; 10];
        self.rng.fill_bytes(&mut random);
        uuid::Builder::from_unix_timestamp_millis(millis, &random).into_uuid()
    }

    /// A signal stamped with an id from the generator and the virtual time `at`.
    fn stamp_at(&mut self, signal: Signal, at: u64) -> Signal {
        let id = self.fresh_id();
        signal.restamped(id, self.stamp_time(at))
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
            Event::Release(held) => {
                let Waiting { agent, incarnation, ticket, .. } = *held;
                if self.agents[agent].alive && self.agents[agent].incarnation == incarnation {
                    self.through_gate(agent, ticket);
                }
            }
            Event::Sample => {
                let tracked: Vec<(&SkillId, usize)> = self.members.iter().map(|m| (&m.skill, m.count)).collect();
                let row = self.metrics.sample(
                    self.now(),
                    self.agents.iter().filter(|s| s.alive).map(|s| &s.state),
                    &self.counts,
                    &tracked,
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
        self.trace.input(at, (to, &slot.id), &signal);
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
        let outer = std::mem::replace(&mut self.settling, true);
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
        self.settling = outer;
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
                    replayed: false,
                };
                self.journal_queued(agent, (run, &ids.action, ids.correlation, None), &params);
                match self.recording.as_mut().map(|r| r.take(&ids.action, &params)) {
                    None => self.through_gate(agent, Ticket { ids, params, approved: false, metered: false }),
                    Some(Some(told)) => self.replay_run(agent, RunIds { replayed: true, ..ids }, told),
                    Some(None) => {
                        let unrecorded = format!(
                            "no recorded run of `{}` with these params: a replay runs nothing that did not run where it was recorded",
                            ids.action
                        );
                        self.refuse(agent, &ids, ActionError::critical(unrecorded));
                    }
                }
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
                // The last target gets the signal itself, moved: most emits have one target.
                if let Some((&last, others)) = targets.split_last() {
                    for &target in others {
                        self.deliver(target, signal.clone());
                    }
                    self.deliver(last, signal);
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
                            self.spawn(id.clone(), domain, *policy, max, Some(agent)).map_err(|e| e.to_string())
                        })
                };
                if let Err(error) = made {
                    let source = self.agents[agent].source.clone();
                    let stamp = (self.fresh_id(), self.time(self.now));
                    if let Some(signal) = driver::spawn_failed_at(&source, &id, &error, stamp) {
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
                let found = self.catalog.get(&skill);
                let slot = &mut self.agents[agent];
                let mounted = match found {
                    None => Err(format!(
                        "skill `{skill}` is not in the simulation's catalog; add it with `SimBuilder::skill`"
                    )),
                    Some(found) => {
                        match catch_unwind(AssertUnwindSafe(|| {
                            agentry::skill::mount(&mut slot.state, found, &opts, &slot.policy)
                        })) {
                            Ok(result) => result.map_err(|e| e.to_string()),
                            Err(_) => Err(format!("the state init of skill `{skill}` panicked")),
                        }
                    }
                };
                match mounted {
                    Ok(effects) => {
                        self.note_skills(agent);
                        self.carry_out_all(agent, effects, Origin::Mounting);
                    }
                    Err(reason) => self.mount_refused(agent, (skill, true), origin, reason),
                }
            }
            Command::Unmount { skill } => match agentry::skill::unmount(&mut self.agents[agent].state, &skill) {
                Ok(effects) => {
                    self.note_skills(agent);
                    self.carry_out_all(agent, effects, Origin::Mounting);
                }
                Err(e) => self.mount_refused(agent, (skill, false), origin, e.to_string()),
            },
            Command::Refused(refusal) => self.refused(agent, refusal),
        }
    }

    /// Brings the skill bits of one agent up to date with its state.
    fn note_skills(&mut self, agent: usize) {
        let state = &self.agents[agent].state;
        for members in &mut self.members {
            members.set(agent, state.is_mounted(&members.skill));
        }
    }

    /// A mount or unmount the agent asked for that failed: refused, and told to the agent as `agent.mount_failed`
    /// in its inbox, as live.
    fn mount_refused(&mut self, agent: usize, (skill, mounting): (SkillId, bool), origin: Origin<'_>, reason: String) {
        let source = self.agents[agent].source.clone();
        let stamp = (self.fresh_id(), self.time(self.now));
        if let Some(signal) = driver::mount_failed_at(&source, (&skill, mounting), &reason, origin.cause(), stamp) {
            self.agents[agent].inbox.push_back(signal);
        }
        self.refused(agent, Command::mount_failed(mounting, skill, origin, reason));
    }

    fn refused(&mut self, agent: usize, refusal: agentry::effect::EffectRefusal) {
        self.counts.refused += 1;
        let at = self.now();
        self.trace.record(at, (agent, &self.agents[agent].id), What::Refused { refusal });
    }

    fn fault(&mut self, agent: usize, fault: Fault) {
        self.counts.faults += 1;
        let at = self.now();
        self.trace.record(at, (agent, &self.agents[agent].id), What::Fault { fault });
    }
}
