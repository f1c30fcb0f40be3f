//! The AgentServer: one `ractor` actor per agent. It owns the agent's state and live action table, feeds each
//! signal through the pure `step`, and interprets the effects in order. It never waits on an action: a run is
//! polled once in place, and one that does not end then goes on in its own task and comes back as a message.
//!
//! Every run takes one road ([`runs`]): a request from whoever asked (the agent's `Run` effect, a routine's
//! nested call, an outside caller), the gate, a slot or approval, the runner, and an answer back to the
//! requester by one route. Outcome signals for the agent go to its inbox and are fed before the server takes
//! its next message.

mod durability;
mod effects;
mod hibernation;
mod job_recovery;
mod lifecycle;
mod metering;
mod mounting;
mod runs;
mod services;

use crate::restart::{Restarts, Verdict};
pub(crate) use durability::{Recovered, Replayed, SpawnSettings};
pub(crate) use services::drive_path;

use crate::action::{ActionContext, RunServices};
use crate::agent::{Agent, step};
use crate::error::RuntimeError;
use crate::events::EventKind;
use crate::id::ActionId;
use crate::messages::{Requester, RunRequest, ServerMsg};
use crate::policy::Policy;
use crate::restart::Exit;
use crate::shared::Shared;
use crate::signal::Signal;
use crate::skill::AgentState;
use crate::table::ActionTable;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use tokio::task::JoinHandle;
use uuid::Uuid;

/// How many signals of its own inbox a server feeds in one turn before it lets its mailbox in (so an agent
/// that answers every outcome with another refused run cannot starve a `stop`).
const SETTLE_BUDGET: usize = 256;

/// How the server starts: the agent's state (start skills already mounted) and the effects that mounted them.
pub(crate) struct ServerArgs<A: Agent> {
    pub state: AgentState<A>,
    pub start_effects: Vec<crate::effect::Effect>,
    /// How it was spawned, shared with the supervisor's way to start it again.
    pub again: Arc<crate::restart::Again>,
    pub shared: Arc<Shared>,
    /// Restarts counted in the policy's window, kept across restarts of this agent.
    pub history: Arc<std::sync::Mutex<Restarts>>,
    /// How the supervisor starts this agent again.
    pub respawn: crate::shared::Respawn,
    /// What a recovering agent takes over (with a durable store, after a restart of the process).
    pub recovered: Option<Recovered>,
}

/// A run on its way: its params and context, who asked for it, and whether it was approved. Queued and
/// approved runs keep no action: the gate looks it up again when they start.
pub(crate) struct Ticket {
    /// Its context, params and unwritten record, in one box from its request to its end: a run is handed on
    /// many times (gate, queue, runner), and each hand-over then moves a pointer, not the whole run.
    pub run: Box<crate::runner::RunInHand>,
    pub by: Requester,
    pub approved: bool,
    /// The gate's last yes, while nothing it depends on has changed since: a queued run whose table and policy
    /// are as they were need not be looked up again.
    pub cleared: Option<Clearance>,
    /// The meter let it through already (see [`crate::meter::Meter::admit`]): it is not metered again.
    pub metered: bool,
}

/// A gate decision and what it was taken against: the action table's and the policy's epochs.
pub(crate) struct Clearance {
    pub table: u64,
    pub policy: u64,
    pub action: crate::action::DynAction,
}

/// A schedule's timer, and when it fires (a hibernating agent is woken then).
pub(crate) struct Armed {
    pub task: JoinHandle<()>,
    pub due: tokio::time::Instant,
}

/// A run waiting for approval, with the timer that expires it.
pub(crate) struct Awaiting {
    pub ticket: Ticket,
    pub expiry: Option<JoinHandle<()>>,
    /// The digest of the contract and params the approver was shown.
    pub digest: Uuid,
    /// The risk it was asked at.
    pub risk: crate::action::Risk,
}

/// A run in flight: its task, what its outcome signal says about it, and where it collects the effects it asks
/// for. (Its context went to the task.)
pub(crate) struct Running {
    pub task: JoinHandle<()>,
    pub ids: RunIds,
    /// Its scope, whose sink holds the effects it asks for.
    pub scope: Arc<crate::action::RunScope>,
}

/// A run that ended, waiting for its outcome to be handled: who it is, the effects it asked for, its outcome,
/// and the outside caller to answer, if any.
pub(crate) struct Ended {
    pub ids: RunIds,
    /// The effects it asked for through its context (interpreted if it completed).
    pub effects: Vec<crate::effect::Effect>,
    /// Its outcome, in the box its outcome signal keeps it in.
    pub report: Box<crate::action::RunReport>,
    pub invoker: Option<crate::messages::Invoker>,
    /// Its record, if it ended without ever being journaled: written when its outcome is handled, so its end
    /// and its outcome reach the journal together.
    pub unwritten: Option<Box<crate::store::Unwritten>>,
    /// When it ended, if its execution said (its outcome signal is stamped with it).
    pub at: Option<chrono::DateTime<chrono::Utc>>,
}

/// Who a run is: what its outcome signal and a cancellation need to know about it.
pub(crate) struct RunIds {
    pub run: Uuid,
    pub action: ActionId,
    pub correlation: Uuid,
    pub causation: Option<Uuid>,
}

impl RunIds {
    /// The report of this run's `outcome`.
    pub fn report(&self, outcome: crate::action::Outcome) -> Box<crate::action::RunReport> {
        crate::action::report_box::boxed(crate::action::RunReport {
            run_id: self.run,
            action: self.action.clone(),
            outcome,
        })
    }

    pub fn of(ctx: &ActionContext) -> Self {
        Self {
            run: ctx.run_id,
            action: ctx.action_id.clone(),
            correlation: ctx.correlation_id,
            causation: ctx.causation_id,
        }
    }
}

/// What a server has under way: runs in flight, queued or waiting for approval, calls waiting for a reply,
/// schedules armed, outcome signals not yet fed, and whoever waits for it to drain. An idle server holds none
/// of it: the actor's task keeps the whole [`ServerState`] inline, so these maps and queues, empty, would
/// otherwise cost every idle agent a few hundred bytes. Allocated when something starts
/// ([`ServerState::work`]), freed when the server is idle again ([`ServerState::tidy`]).
#[derive(Default)]
pub(crate) struct Underway {
    pub running: HashMap<Uuid, Running>,
    /// Runs that ended at their first poll, handled after the message that started them.
    pub ended: VecDeque<Ended>,
    pub queue: VecDeque<Ticket>,
    /// Runs a rate limit holds, each with the timer that brings it back to the gate.
    pub throttled: HashMap<Uuid, (Ticket, JoinHandle<()>)>,
    pub awaiting: HashMap<Uuid, Awaiting>,
    pub calls: HashMap<Uuid, RpcReplyPort<Value>>,
    pub schedules: HashMap<String, Armed>,
    /// Outcome signals for the agent, fed before the next message (see [`ServerState::settle`]).
    pub inbox: VecDeque<Inbound>,
    /// Set once the server drains: new runs are refused, and these are told when the last run ends.
    pub draining: Option<Vec<tokio::sync::oneshot::Sender<()>>>,
    /// The drive folders of the skills its runs used, made once rather than for every run.
    pub drives: Vec<(crate::id::SkillId, Arc<std::path::Path>)>,
}

/// An outcome signal waiting in the agent's inbox, with the run whose journaled outcome it is when the store
/// keeps it ([`ServerState::keep_outcome`]): logged as an input, it is then named rather than written again.
pub(crate) struct Inbound {
    pub signal: Signal,
    pub kept: Option<Uuid>,
}

impl Underway {
    /// Whether nothing is under way (a call whose caller gave up does not count).
    fn is_idle(&mut self) -> bool {
        let idle = self.running.is_empty()
            && self.ended.is_empty()
            && self.queue.is_empty()
            && self.throttled.is_empty()
            && self.awaiting.is_empty()
            && self.schedules.is_empty()
            && self.inbox.is_empty()
            && self.draining.is_none();
        if idle {
            self.calls.retain(|_, port| !port.is_closed());
        }
        idle && self.calls.is_empty()
    }
}

/// The actor behaviour; its state is [`ServerState`].
pub(crate) struct AgentServer<A: Agent>(PhantomData<fn() -> A>);

impl<A: Agent> AgentServer<A> {
    pub fn new() -> Self {
        Self(PhantomData)
    }
}

/// Everything an agent server owns.
pub(crate) struct ServerState<A: Agent> {
    pub myself: ActorRef<ServerMsg<A>>,
    pub agent: AgentState<A>,
    pub policy: Arc<Policy>,
    /// Counts policy changes (see [`Clearance`]).
    pub policy_epoch: u64,
    /// What its budgets and rate limits count; made when its policy first has any (see
    /// [`ServerState::meter`]).
    pub meter: Option<Box<crate::meter::Meter>>,
    pub table: ActionTable,
    /// What its runs use (nested calls, jobs, drive folders); made for its first run.
    pub services: Option<Arc<dyn RunServices>>,
    /// What is under way; `None` while nothing is (see [`Underway`]).
    pub underway: Option<Box<Underway>>,
    /// How the server stopped itself, for its supervisor.
    pub exit: Exit,
    pub restarts: Arc<std::sync::Mutex<Restarts>>,
    pub shared: Arc<Shared>,
    /// The catalog its agent's `step` reads, as of the last signal (see [`crate::skill::LiveCatalog::current`]).
    pub catalog: crate::skill::HeldCatalog,
    /// How it was spawned: its name, parent, restart policy and how many runs it may have in flight.
    pub again: Arc<crate::restart::Again>,
    /// The source of the signals this server makes (`agentry/agent/<id>`).
    pub source: std::sync::Arc<str>,
    /// The number of the last input `step` consumed (1, 2, 3, ...), which keys the runs it asks for.
    pub seq: u64,
    /// This start of the agent (see [`crate::action::input_key_prefix`]): a fresh one for a spawn or a
    /// supervised restart, its snapshot's for a recovery.
    pub incarnation: u64,
    /// How many runs the current input asked for so far.
    pub step_runs: u32,
    /// Inputs logged since the last snapshot (with a durable store).
    pub since_snapshot: u64,
    /// Set once the agent fell asleep: its actor only passes messages on until it stops.
    pub asleep: bool,
    /// When it last handled a message (kept only when the runtime hibernates idle agents).
    pub last_active: tokio::time::Instant,
}

impl<A: Agent> Actor for AgentServer<A> {
    type Msg = ServerMsg<A>;
    /// `None` once the server stopped: ractor hands an actor's last state to its supervisor with the news that
    /// it stopped, and a supervisor that is behind (thousands of agents hibernating at once) would otherwise
    /// keep every stopped agent's whole state alive until it catches up.
    type State = Option<ServerState<A>>;
    type Arguments = ServerArgs<A>;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: ServerArgs<A>,
    ) -> Result<Self::State, ActorProcessingErr> {
        lifecycle::enter_directory(&myself, &args)?;
        lifecycle::enter_supervision(&myself, &args);
        let mut state = ServerState {
            source: crate::kinds::agent_source(&args.state.id),
            myself,
            agent: args.state,
            policy: args.again.policy(),
            policy_epoch: 0,
            meter: None,
            table: ActionTable::default(),
            services: None,
            underway: None,
            exit: Exit::Unknown,
            restarts: args.history,
            catalog: args.shared.catalog.held(),
            shared: args.shared,
            seq: 0,
            incarnation: crate::action::new_incarnation(),
            step_runs: 0,
            since_snapshot: 0,
            again: args.again,
            asleep: false,
            last_active: tokio::time::Instant::now(),
        };
        state.meter = state.new_meter();
        // Restarted, recovered or thawed after its parent's policy changed: it starts within that, and so do its
        // live children.
        if let Some(parent) = lifecycle::parents_policy(&state.shared, state.again.parent.as_ref()) {
            state.narrow_policy(&parent);
        }
        state.interpret(args.start_effects, crate::interpret::Origin::Mounting);
        let recovering = args.recovered.is_some();
        if let Some(recovered) = args.recovered {
            state.resolve(recovered);
        }
        state.keep_from_start(recovering);
        // Thawed: the signals kept for it while it slept are its first inputs. One the thaw gives it already from
        // the journal (a job's end or a run's outcome that reached the journal and then the sleeper) is given
        // once.
        if let Some((_, sleeper)) = state.shared.sleeping.remove(&state.agent.id) {
            let given: std::collections::HashSet<Uuid> =
                state.underway.iter().flat_map(|u| u.inbox.iter().map(|inbound| inbound.signal.id())).collect();
            for signal in sleeper.kept {
                if !given.contains(&signal.id()) {
                    state.feed(signal);
                }
            }
        }
        crate::sleep::start_sweeper(&state.shared);
        state.shared.events.announce(&state.agent.id, None, None, EventKind::AgentStarted);
        // Outcomes of runs the start asked for (ended, refused or resolved) are handled at once.
        if state.underway.as_ref().is_some_and(|u| !u.ended.is_empty() || !u.inbox.is_empty()) {
            let _ = state.myself.cast(ServerMsg::Settle);
        }
        Ok(Some(state))
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let Some(state) = state.as_mut() else { return Ok(()) };
        if state.asleep {
            state.while_asleep(msg);
            return Ok(());
        }
        if state.shared.hibernate_after.is_some() && !matches!(msg, ServerMsg::Hibernate(..)) {
            state.last_active = tokio::time::Instant::now();
        }
        match msg {
            ServerMsg::Hibernate(done, idle) => state.on_hibernate(done, idle),
            ServerMsg::Signal(signal) => state.feed(*signal),
            ServerMsg::Call(signal, reply) => state.on_call(*signal, reply),
            ServerMsg::Mount(mount, reply) => state.on_mount(&mount.0, &mount.1, reply),
            ServerMsg::Unmount(skill, reply) => state.on_unmount(&skill, reply),
            ServerMsg::Snapshot(reply) => state.on_snapshot(reply),
            ServerMsg::Decide(run, verdict, reply) => state.on_decide(run, verdict, reply),
            ServerMsg::ApprovalExpired(run) => state.expire_approval(run),
            ServerMsg::Throttled(run) => state.release(run),
            ServerMsg::Fire(key, signal) => state.fire(key, *signal),
            ServerMsg::Finished(report, invoker) => state.on_finished(report, invoker),
            ServerMsg::Drain(done) => state.drain(done),
            ServerMsg::Request(request) => state.request_run(*request),
            ServerMsg::Effects(effects, outside) => {
                let origin = if outside { crate::interpret::Origin::Outside } else { crate::interpret::Origin::Job };
                state.interpret(effects, origin);
            }
            ServerMsg::Refresh(skill, done) => state.on_refresh(&skill, done),
            ServerMsg::Actions(reply) => state.on_actions(reply),
            ServerMsg::Mounted(reply) => {
                let mounted =
                    crate::skill::mounted_skills(&state.agent).map(|(id, version)| (id.clone(), version.clone()));
                let _ = reply.send(mounted.collect());
            }
            ServerMsg::SetPolicy(policy, done) => {
                state.change_policy(crate::restart::shared_policy(*policy));
                let _ = done.send(());
            }
            ServerMsg::AlwaysAllow(action, done) => {
                let approved = state.always_allow(&action);
                let _ = done.send(approved);
            }
            ServerMsg::NarrowPolicy(parent) => state.narrow_policy(&parent),
            ServerMsg::Settle => {}
        }
        state.settle();
        state.tidy();
        Ok(())
    }

    async fn post_stop(&self, _myself: ActorRef<Self::Msg>, state: &mut Self::State) -> Result<(), ActorProcessingErr> {
        if let Some(mut stopped) = state.take() {
            stopped.shutdown();
        }
        Ok(())
    }
}

impl<A: Agent> ServerState<A> {
    /// What is under way, made when the first thing starts.
    pub(super) fn work(&mut self) -> &mut Underway {
        self.underway.get_or_insert_with(Box::default)
    }

    /// What is under way, if anything is.
    pub(super) fn under(&mut self) -> Option<&mut Underway> {
        self.underway.as_deref_mut()
    }

    /// What the agent's runs use, made for the first one.
    /// The agent's services: what its runs and jobs reach the runtime through.
    pub(super) fn agent_services(&self) -> services::AgentServices {
        services::AgentServices {
            cell: self.myself.get_cell(),
            deliver: crate::directory::deliver::<A>,
            shared: self.shared.clone(),
        }
    }

    pub(super) fn services(&mut self) -> Arc<dyn RunServices> {
        match &self.services {
            Some(services) => services.clone(),
            None => {
                let made: Arc<dyn RunServices> = Arc::new(self.agent_services());
                self.services = Some(made.clone());
                made
            }
        }
    }

    /// How many runs are in flight.
    pub(super) fn in_flight(&self) -> usize {
        self.underway.as_ref().map_or(0, |u| u.running.len())
    }

    /// Whether the server drains (refusing new runs).
    pub(super) fn draining(&self) -> bool {
        self.underway.as_ref().is_some_and(|u| u.draining.is_some())
    }

    /// Frees what was under way once nothing is, so an idle server is as small as a fresh one.
    fn tidy(&mut self) {
        if self.underway.as_mut().is_some_and(|u| u.is_idle()) {
            self.underway = None;
        }
    }

    /// Feeds one signal through the pure layer and interprets what it returns. A panicking handler leaves the
    /// state as it was (`step` applies nothing before every handler has returned), so restarting from the last
    /// good state means going on with it, within the restart policy.
    fn feed(&mut self, signal: Signal) {
        self.feed_kept(signal, None);
    }

    /// [`ServerState::feed`] for a signal that may be the journaled outcome of run `kept`.
    fn feed_kept(&mut self, signal: Signal, kept: Option<Uuid>) {
        let span = tracing::info_span!("signal", agent = %self.agent.id, kind = %signal.kind(), id = %signal.id());
        let _entered = span.enter();
        let catalog = self.shared.catalog.current(&mut self.catalog);
        let result = catch_unwind(AssertUnwindSafe(|| step(&mut self.agent, &signal, catalog)));
        // The input is logged after its step (whose effects may have to be kept before it), and before any of
        // its effects is carried out.
        match result {
            Ok(Ok(step)) => self.interpret_input(step.effects, &signal, kept),
            Ok(Err(err)) => {
                self.log_input(&signal, kept);
                tracing::warn!(%err, "the signal could not be handled");
            }
            Err(_panic) => {
                self.log_input(&signal, kept);
                self.survive_panic(Some(signal.correlation_id()), "the agent's handler");
            }
        }
        // A consumed outcome's report box is kept for the next run's report (see `report_box`).
        if let Some(report) = signal.into_report() {
            crate::action::report_box::spare(report);
        }
        self.after_input();
    }

    /// Handles the outcomes of the runs that ended while handling the last message, and feeds the outcome
    /// signals made, at most [`SETTLE_BUDGET`] in one turn (the rest after the mailbox's next message). Each
    /// ended run's outcome is handled and its signal fed before the next run's: a fan-out of many runs that end
    /// at once is settled one run at a time, while each one's outcome is still at hand, instead of every outcome
    /// being made before the first is fed.
    fn settle(&mut self) {
        let mut fed = 0;
        while fed < SETTLE_BUDGET {
            if self.exit != Exit::Unknown {
                return;
            }
            if let Some(Inbound { signal, kept }) = self.under().and_then(|u| u.inbox.pop_front()) {
                self.feed_kept(signal, kept);
                fed += 1;
                continue;
            }
            let Some(ended) = self.under().and_then(|u| u.ended.pop_front()) else { return };
            self.conclude(ended);
        }
        if self.underway.as_ref().is_some_and(|u| !u.inbox.is_empty() || !u.ended.is_empty()) {
            let _ = self.myself.cast(ServerMsg::Settle);
        }
    }

    /// After a panic in the agent's own code (its handler, a skill's state init): go on from the last good
    /// state if the restart policy allows, else stop.
    fn survive_panic(&mut self, correlation: Option<Uuid>, where_: &str) {
        let verdict = self
            .restarts
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .record_panic(tokio::time::Instant::now(), where_);
        match verdict {
            Verdict::Restart(restarts) => {
                let kind = EventKind::AgentRestarted { restarts, afresh: false };
                self.shared.events.announce(&self.agent.id, None, correlation, kind);
            }
            Verdict::Stop(reason) => self.stop_self(Exit::GaveUp(reason.into())),
        }
    }

    fn on_call(&mut self, signal: Signal, reply: RpcReplyPort<Value>) {
        let calls = &mut self.work().calls;
        calls.retain(|_, port| !port.is_closed());
        calls.insert(signal.id(), reply);
        self.feed(signal);
    }

    fn on_snapshot(&mut self, reply: RpcReplyPort<AgentState<A>>) {
        let _ = reply.send(self.agent.clone());
    }

    fn on_decide(
        &mut self,
        run: Uuid,
        verdict: crate::messages::Verdict,
        reply: RpcReplyPort<Result<(), RuntimeError>>,
    ) {
        let _ = reply.send(self.decide(run, verdict));
    }

    fn on_actions(&mut self, reply: tokio::sync::oneshot::Sender<Vec<crate::action::ActionSpec>>) {
        let _ = reply.send(self.table.specs());
    }

    /// Replaces the policy: kept (for a restart, and in the durable record for a recovery), and passed on to
    /// the agent's live children, each narrowed to fit within it. Runs already going keep the policy they
    /// started under; queued runs and runs waiting for approval meet the new one at the gate when they start,
    /// and run under it.
    pub(super) fn change_policy(&mut self, policy: Arc<Policy>) {
        self.policy = policy;
        self.policy_epoch += 1;
        match self.meter.as_deref_mut() {
            Some(meter) => meter.renew(&self.policy),
            None => self.meter = self.new_meter(),
        }
        self.again.set_policy(self.policy.clone());
        self.keep_settings();
        for child in self.shared.directory.children_of(&self.agent.id) {
            self.shared.directory.tell(&child, crate::messages::Untyped::NarrowPolicy(self.policy.clone()));
        }
        // Runs waiting for approval wait as long as the new policy allows, counted from when they were asked
        // for (one already past it expires now); one whose risk under the new policy differs is asked about again
        // (a caller that may approve up to a ceiling must not approve what is now above it).
        let waiting: Vec<Uuid> = self.under().map(|u| u.awaiting.keys().copied().collect()).unwrap_or_default();
        for run in waiting {
            let Some(Awaiting { ticket, expiry, digest, risk }) = self.under().and_then(|u| u.awaiting.remove(&run))
            else {
                continue;
            };
            if let Some(timer) = expiry {
                timer.abort();
            }
            let contract = self.table.get(&ticket.run.ctx.action_id).map(|a| a.action.spec().clone());
            match contract {
                Some(contract) if self.policy.effective_risk(&contract) != risk => self.ask_again(ticket, contract),
                _ => self.park(ticket, risk, digest),
            }
        }
    }

    /// Lets `action` run without approval from now on (its risk is overridden to low in the agent's policy,
    /// kept like any policy change) and approves its runs waiting; returns how many it approved.
    pub(super) fn always_allow(&mut self, action: &crate::id::ActionId) -> usize {
        let Ok(pattern) = crate::pattern::Pattern::new(action.as_str()) else { return 0 };
        let mut policy = (*self.policy).clone();
        policy.risk_overrides.insert(pattern, crate::action::Risk::Low);
        self.change_policy(crate::restart::shared_policy(policy));
        let waiting: Vec<Uuid> = self
            .under()
            .map(|u| {
                u.awaiting.iter().filter(|(_, a)| a.ticket.run.ctx.action_id == *action).map(|(run, _)| *run).collect()
            })
            .unwrap_or_default();
        let approve = crate::messages::Verdict { approve: true, seen: None };
        waiting.into_iter().filter(|run| self.decide(*run, approve).is_ok()).count()
    }

    /// The agent's parent has `parent` as its policy now: the agent's own is narrowed to fit within it (and
    /// passed on to its children), unless it does already.
    pub(super) fn narrow_policy(&mut self, parent: &Policy) {
        let narrowed = self.policy.narrowed_to(parent);
        if narrowed != *self.policy {
            self.change_policy(crate::restart::shared_policy(narrowed));
        }
    }

    /// A run the agent asked for through a `Run` effect of `cause`, keyed by where it was asked for.
    fn run_for_agent(&mut self, action: ActionId, params: Value, cause: Option<&Signal>, key: crate::action::RunKey) {
        let by = Requester::Agent { correlation: cause.map(Signal::correlation_id), cause: cause.map(Signal::id) };
        self.request_run(RunRequest { action, params, by, key });
    }
}

#[cfg(test)]
mod tests {
    use super::Underway;
    use crate::signal::Signal;
    use ractor::RpcReplyPort;
    use serde_json::Value;
    use uuid::Uuid;

    #[test]
    fn only_a_server_with_nothing_under_way_is_idle() {
        let mut underway = Underway::default();
        assert!(underway.is_idle());

        let signal = Signal::new("ping", Value::Null).expect("a signal");
        underway.inbox.push_back(super::Inbound { signal, kept: None });
        assert!(!underway.is_idle(), "an outcome not yet fed keeps the server busy");
        underway.inbox.clear();

        underway.draining = Some(Vec::new());
        assert!(!underway.is_idle(), "a draining server keeps refusing runs");
        underway.draining = None;

        let (sender, receiver) = tokio::sync::oneshot::channel::<Value>();
        underway.calls.insert(Uuid::now_v7(), RpcReplyPort::from(sender));
        assert!(!underway.is_idle(), "a caller still waits for its reply");
        drop(receiver);
        assert!(underway.is_idle(), "a caller that gave up waits for nothing");
        assert!(underway.calls.is_empty(), "its port is let go");

        let task = tokio::runtime::Runtime::new().expect("a runtime").spawn(async {});
        underway.schedules.insert("tick".to_owned(), super::Armed { task, due: tokio::time::Instant::now() });
        assert!(!underway.is_idle(), "an armed schedule keeps the server busy");
    }
}
