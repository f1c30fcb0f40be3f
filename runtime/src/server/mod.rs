//! The AgentServer: one `ractor` actor per agent. It owns the agent's state and live action table, feeds each
//! signal through the pure `step`, and interprets the effects in order. It never waits on an action: runs go
//! to their own tasks and come back as messages.

mod effects;
mod restart;
mod services;

pub use restart::{RestartMode, RestartPolicy};
pub use services::Admit;
pub(crate) use services::drive_path;

use crate::action::{ActionContext, ActionError, DynAction, Outcome, OutcomeStatus, RunServices};
use crate::agent::{Agent, AgentState, step};
use crate::directory::Directory;
use crate::events::{EventBus, EventKind};
use crate::id::{ActionId, AgentId, SkillId};
use crate::policy::Policy;
use crate::runner::Runner;
use crate::runtime::RuntimeError;
use crate::signal::Signal;
use crate::skill::LiveCatalog;
use crate::store::Store;
use chrono::Utc;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde_json::{Value, json};
use std::collections::{HashMap, VecDeque};
use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use tokio::task::JoinHandle;
use uuid::Uuid;

/// What every agent server of one runtime shares.
pub(crate) struct Shared {
    pub catalog: LiveCatalog,
    pub data_dir: Option<std::path::PathBuf>,
    pub max_call_depth: usize,
    pub jobs: Arc<crate::jobs::JobBoard>,
    pub events: EventBus,
    pub store: Arc<dyn Store>,
    pub runner: Runner,
    pub directory: Directory,
    pub spawners: dashmap::DashMap<String, crate::runtime::Spawner>,
}

/// The messages an agent server takes. Built by [`crate::runtime::AgentRef`]; not constructed by users.
pub enum ServerMsg<A: Agent> {
    /// A signal to handle.
    Signal(Signal),
    /// A signal whose handling should answer through a `Reply` effect.
    Call(Signal, RpcReplyPort<Value>),
    /// Mount a skill from the catalog with options.
    Mount(SkillId, Value, RpcReplyPort<Result<(), RuntimeError>>),
    /// Unmount a skill.
    Unmount(SkillId, RpcReplyPort<Result<(), RuntimeError>>),
    /// A copy of the agent's state.
    Snapshot(RpcReplyPort<AgentState<A>>),
    /// Approve (`true`) or deny a run that waits for approval.
    Decide(Uuid, bool, RpcReplyPort<Result<(), RuntimeError>>),
    /// A run ended (sent by the run's own task), with the outside caller waiting for it, if any.
    Finished(Uuid, Box<Outcome>, Option<Invoker>),
    /// Stop taking runs and let the running ones finish; the sender is told once none is left.
    Drain(tokio::sync::oneshot::Sender<()>),
    /// A nested call an action makes through its context, for the gate.
    Admit(Box<Admit>),
    /// Effects a job's run asked for.
    Effects(Vec<crate::effect::Effect>),
    /// A run asked for from outside the agent.
    Invoke(Box<Invoke>),
    /// The catalog holds a new build of this skill: bring it up to date if it is mounted.
    Refresh(SkillId, tokio::sync::oneshot::Sender<Result<(), RuntimeError>>),
    /// The contracts of the actions in the live table, sorted by id.
    Actions(tokio::sync::oneshot::Sender<Vec<crate::action::ActionSpec>>),
}

/// A run asked for from outside the agent, such as an MCP client's `tools/call`. Made by
/// [`crate::runtime::Runtime::invoke`]; not constructed by users.
pub struct Invoke {
    pub(crate) action: ActionId,
    pub(crate) params: Value,
    pub(crate) reply: Invoker,
}

/// How the server starts: the agent's state (start skills already mounted) and the effects that mounted them.
pub(crate) struct ServerArgs<A: Agent> {
    pub state: AgentState<A>,
    pub start_effects: Vec<crate::effect::Effect>,
    pub policy: Policy,
    pub restart: RestartPolicy,
    pub max_in_flight: usize,
    pub parent: Option<AgentId>,
    pub shared: Arc<Shared>,
}

/// A run the gate accepted, waiting for a slot or for approval.
pub(crate) struct Pending {
    pub action: DynAction,
    pub params: Value,
    pub ctx: ActionContext,
    /// Where a nested call waits to be let through; `None` for a run the agent asked for.
    pub caller: Option<tokio::sync::oneshot::Sender<Result<services::Admitted, ActionError>>>,
    /// Who waits for the outcome of a run asked for from outside the agent ([`crate::runtime::Runtime::invoke`]);
    /// the agent gets no outcome signal for such a run.
    pub invoker: Option<Invoker>,
}

/// Where the outcome of a run asked for from outside the agent goes.
pub(crate) type Invoker = tokio::sync::oneshot::Sender<Result<Outcome, RuntimeError>>;

/// An action in the live table, with the skill that provides it.
pub(crate) struct Registered {
    pub action: DynAction,
    pub skill: Option<SkillId>,
}

/// A run in flight: its task, what its outcome signal says about it, and where it collects the effects it asks
/// for. (Its context went to the task.)
pub(crate) struct Running {
    pub task: JoinHandle<()>,
    pub ids: RunIds,
    pub sink: Arc<std::sync::Mutex<crate::action::RunSink>>,
}

/// Who a run is: what its outcome signal and a cancellation need to know about it.
pub(crate) struct RunIds {
    pub run: Uuid,
    pub action: ActionId,
    pub correlation: Uuid,
    pub causation: Option<Uuid>,
}

impl RunIds {
    pub fn of(ctx: &ActionContext) -> Self {
        Self {
            run: ctx.run_id,
            action: ctx.action_id.clone(),
            correlation: ctx.correlation_id,
            causation: ctx.causation_id,
        }
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
    pub table: HashMap<ActionId, Registered>,
    pub services: Arc<dyn RunServices>,
    pub running: HashMap<Uuid, Running>,
    pub queue: VecDeque<Pending>,
    pub awaiting: HashMap<Uuid, Pending>,
    pub calls: HashMap<Uuid, RpcReplyPort<Value>>,
    pub schedules: HashMap<String, JoinHandle<()>>,
    /// Why the server stopped itself, for the `agent_stopped` event.
    pub stop_reason: Option<String>,
    /// Set once the server drains: new runs are refused, and these are told when the last run ends.
    pub draining: Option<Vec<tokio::sync::oneshot::Sender<()>>>,
    pub restarts: restart::Restarts,
    pub max_in_flight: usize,
    pub parent: Option<AgentId>,
    pub shared: Arc<Shared>,
    /// The source of the signals this server makes (`agentry/agent/<id>`).
    pub source: String,
}

impl<A: Agent> Actor for AgentServer<A> {
    type Msg = ServerMsg<A>;
    type State = ServerState<A>;
    type Arguments = ServerArgs<A>;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: ServerArgs<A>,
    ) -> Result<Self::State, ActorProcessingErr> {
        let mailbox = myself.clone();
        let services = services::AgentServices {
            mailbox: Arc::new(move |message: crate::directory::Untyped| mailbox.cast(message.into()).is_ok()),
            shared: args.shared.clone(),
        };
        let source = format!("agentry/agent/{}", args.state.id);
        let mut state = ServerState {
            source,
            myself,
            agent: args.state,
            policy: Arc::new(args.policy),
            table: HashMap::new(),
            services: Arc::new(services),
            running: HashMap::new(),
            queue: VecDeque::new(),
            awaiting: HashMap::new(),
            calls: HashMap::new(),
            schedules: HashMap::new(),
            stop_reason: None,
            draining: None,
            restarts: restart::Restarts::new(args.restart),
            max_in_flight: args.max_in_flight.max(1),
            parent: args.parent,
            shared: args.shared,
        };
        state.interpret(args.start_effects, None);
        state.shared.events.announce(&state.agent.id, None, None, EventKind::AgentStarted);
        Ok(state)
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            ServerMsg::Signal(signal) => state.feed(signal),
            ServerMsg::Call(signal, reply) => {
                state.calls.retain(|_, port| !port.is_closed());
                state.calls.insert(signal.id(), reply);
                state.feed(signal);
            }
            ServerMsg::Mount(skill, opts, reply) => {
                let _ = reply.send(state.mount(&skill, &opts));
            }
            ServerMsg::Unmount(skill, reply) => {
                let _ = reply.send(state.unmount(&skill));
            }
            ServerMsg::Snapshot(reply) => {
                let _ = reply.send(state.agent.clone());
            }
            ServerMsg::Decide(run, approve, reply) => {
                let _ = reply.send(state.decide(run, approve));
            }
            ServerMsg::Finished(run, outcome, invoker) => {
                // What the run asked for is interpreted first; then its outcome is handled at once, in the
                // same turn of the mailbox.
                if let Some(done) = state.running.remove(&run) {
                    if outcome.status == OutcomeStatus::Completed {
                        let effects = std::mem::take(&mut crate::action::RunSink::lock(&done.sink).effects);
                        state.interpret(effects, None);
                    }
                    match invoker {
                        Some(invoker) => {
                            let _ = invoker.send(Ok(*outcome));
                        }
                        None => {
                            if let Some(signal) = state.outcome_signal(&done.ids, *outcome) {
                                state.feed(signal);
                            }
                        }
                    }
                }
                state.launch_queued();
                state.tell_drained();
            }
            ServerMsg::Drain(done) => state.drain(done),
            ServerMsg::Admit(admit) => state.admit(*admit),
            ServerMsg::Effects(effects) => state.interpret(effects, None),
            ServerMsg::Invoke(invoke) => state.invoke(*invoke),
            ServerMsg::Refresh(skill, done) => {
                let _ = done.send(state.refresh(&skill));
            }
            ServerMsg::Actions(reply) => {
                let mut specs: Vec<_> = state.table.values().map(|r| r.action.spec().clone()).collect();
                specs.sort_by(|a, b| a.id.cmp(&b.id));
                let _ = reply.send(specs);
            }
        }
        Ok(())
    }

    async fn post_stop(&self, _myself: ActorRef<Self::Msg>, state: &mut Self::State) -> Result<(), ActorProcessingErr> {
        state.shutdown();
        Ok(())
    }
}

impl<A: Agent> ServerState<A> {
    /// Feeds one signal through the pure layer and interprets what it returns. A panicking handler leaves the
    /// state as it was (`step` applies nothing before every handler has returned), so restarting from the last
    /// good state means going on with it, within the restart policy.
    fn feed(&mut self, signal: Signal) {
        let span = tracing::info_span!("signal", agent = %self.agent.id, kind = %signal.kind(), id = %signal.id());
        let _entered = span.enter();
        let catalog = self.shared.catalog.snapshot();
        let result = catch_unwind(AssertUnwindSafe(|| step(&mut self.agent, &signal, &catalog)));
        match result {
            Ok(Ok(step)) => self.interpret(step.effects, Some(&signal)),
            Ok(Err(err)) => tracing::warn!(%err, "the signal could not be handled"),
            Err(_panic) => {
                let verdict = self.restarts.record_panic(tokio::time::Instant::now());
                match verdict {
                    restart::Verdict::Restart(restarts) => {
                        self.shared.events.announce(
                            &self.agent.id,
                            None,
                            Some(signal.correlation_id()),
                            EventKind::AgentRestarted { restarts },
                        );
                    }
                    restart::Verdict::Stop(reason) => self.stop_self(reason),
                }
            }
        }
    }

    /// A skill as the catalog holds it now.
    fn catalog_skill(&self, skill: &SkillId) -> Result<Arc<crate::skill::Skill>, RuntimeError> {
        self.shared.catalog.snapshot().get(skill).cloned().ok_or_else(|| RuntimeError::UnknownSkill(skill.clone()))
    }

    fn mount(&mut self, skill: &SkillId, opts: &Value) -> Result<(), RuntimeError> {
        let found = self.catalog_skill(skill)?;
        let was_mounted = self.agent.is_mounted(skill);
        let effects = crate::skill::mount(&mut self.agent, &found, opts, &self.policy)?;
        self.interpret(effects, None);
        // Mounting a skill already mounted at this version is a no-op, and is not announced.
        if !was_mounted {
            self.shared.events.announce(&self.agent.id, None, None, EventKind::SkillMounted { skill: skill.clone() });
        }
        Ok(())
    }

    fn unmount(&mut self, skill: &SkillId) -> Result<(), RuntimeError> {
        let was_mounted = self.agent.is_mounted(skill);
        let effects = crate::skill::unmount(&mut self.agent, skill)?;
        self.interpret(effects, None);
        self.repoint(skill);
        if was_mounted {
            self.shared.events.announce(&self.agent.id, None, None, EventKind::SkillUnmounted { skill: skill.clone() });
        }
        Ok(())
    }

    /// Brings a mounted skill up to date with the catalog's build of it: the table loses the actions it dropped,
    /// gains the new ones, and the ones it kept run the new build's code and contract.
    fn refresh(&mut self, skill: &SkillId) -> Result<(), RuntimeError> {
        if !self.agent.is_mounted(skill) {
            return Ok(());
        }
        let found = self.catalog_skill(skill)?;
        let before: Vec<ActionId> = self.agent.skills().get(skill).map(|m| m.actions.clone()).unwrap_or_default();
        let effects = crate::skill::refresh(&mut self.agent, &found)?;
        for action in found.actions() {
            if let Some(registered) = self.table.get_mut(&action.spec().id)
                && registered.skill.as_ref() == Some(skill)
            {
                registered.action = action.clone();
            }
        }
        let after: Vec<ActionId> = found.actions().iter().map(|a| a.spec().id.clone()).collect();
        self.interpret(effects, None);
        self.repoint(skill);
        let added = after.iter().filter(|a| !before.contains(a)).cloned().collect();
        let removed = before.into_iter().filter(|a| !after.contains(a)).collect();
        let kind = EventKind::SkillRefreshed { skill: skill.clone(), added, removed };
        self.shared.events.announce(&self.agent.id, None, None, kind);
        Ok(())
    }

    /// Actions the table runs from `skill` that `skill` no longer provides, but another mounted skill does (so
    /// no `DeregisterAction` removed them), now run from that other skill.
    fn repoint(&mut self, skill: &SkillId) {
        let provided = self.agent.skills().get(skill).map(|m| m.actions.clone()).unwrap_or_default();
        let stale: Vec<ActionId> = self
            .table
            .iter()
            .filter(|(action, registered)| registered.skill.as_ref() == Some(skill) && !provided.contains(action))
            .map(|(action, _)| action.clone())
            .collect();
        for action in stale {
            self.register(action, None);
        }
    }

    /// Tells the agent a run's outcome through its own mailbox (used while effects are being interpreted, so
    /// the outcome is handled after them).
    fn deliver_outcome_for(&self, ctx: &ActionContext, outcome: &Outcome) {
        if let Some(signal) = self.outcome_signal(&RunIds::of(ctx), outcome.clone()) {
            let _ = self.myself.cast(ServerMsg::Signal(signal));
        }
    }

    /// A run's outcome as the `action.completed`, `action.failed` or `action.blocked` signal the agent gets,
    /// caused by the signal that asked for the run.
    fn outcome_signal(&self, ids: &RunIds, outcome: Outcome) -> Option<Signal> {
        let kind = match outcome.status {
            OutcomeStatus::Completed => "action.completed",
            OutcomeStatus::Failed => "action.failed",
            OutcomeStatus::Blocked => "action.blocked",
        };
        let mut data = serde_json::Map::with_capacity(3);
        data.insert("run_id".to_owned(), json!(ids.run));
        data.insert("action".to_owned(), Value::String(ids.action.as_str().to_owned()));
        data.insert("outcome".to_owned(), outcome.into_json());
        let now = Utc::now();
        let mut builder = Signal::builder(kind).source(self.source.clone()).data(Value::Object(data));
        builder = match ids.causation {
            Some(cause) => builder.caused_by(ids.correlation, cause, now),
            None => builder,
        };
        // The server is not pure: the signal gets a fresh id rather than one derived from its cause and data.
        builder = builder.stamped(Uuid::now_v7(), now);
        builder.build().map_err(|err| tracing::error!(%err, "an outcome signal kind is invalid")).ok()
    }

    /// Starts draining: queued and unapproved runs and schedules are cancelled, new runs are refused, and
    /// `done` is told once the running ones have ended.
    fn drain(&mut self, done: tokio::sync::oneshot::Sender<()>) {
        if self.draining.is_none() {
            let kind = EventKind::AgentDraining { running: self.running.len() };
            self.shared.events.announce(&self.agent.id, None, None, kind);
        }
        self.draining.get_or_insert_with(Vec::new).push(done);
        // Dropping a waiting nested call's reply tells its caller the call was cancelled.
        let unstarted: Vec<ActionContext> =
            self.awaiting.drain().map(|(_, p)| p.ctx).chain(self.queue.drain(..).map(|p| p.ctx)).collect();
        self.cancel_runs(unstarted, "the runtime is shutting down");
        for (_, task) in self.schedules.drain() {
            task.abort();
        }
        self.tell_drained();
    }

    fn tell_drained(&mut self) {
        if self.running.is_empty()
            && let Some(waiting) = self.draining.as_mut()
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

    /// Stops this agent, remembering why for the event stream.
    pub(crate) fn stop_self(&mut self, reason: String) {
        self.stop_reason = Some(reason.clone());
        self.myself.stop(Some(reason));
    }

    fn shutdown(&mut self) {
        for (_, running) in self.running.drain() {
            running.task.abort();
            let RunIds { run, action, correlation, .. } = &running.ids;
            self.shared.runner.cancelled_run(&self.agent.id, *run, action, *correlation, "the agent stopped");
        }
        let mut cancelled: Vec<ActionContext> = self.awaiting.drain().map(|(_, pending)| pending.ctx).collect();
        cancelled.extend(self.queue.drain(..).map(|pending| pending.ctx));
        self.cancel_runs(cancelled, "the agent stopped");
        for (_, task) in self.schedules.drain() {
            task.abort();
        }
        let id = self.agent.id.clone();
        for job in self.shared.jobs.cancel_agent(&id, "the agent stopped") {
            let ended = EventKind::JobEnded { job: job.id, status: job.status };
            self.shared.events.announce(&id, None, None, ended);
        }
        let reason = self.stop_reason.take().unwrap_or_else(|| "stopped".to_owned());
        self.shared.directory.remove(&id);
        self.shared.events.announce(&id, None, None, EventKind::AgentStopped { reason });
        if let Some(parent) = &self.parent
            && let Ok(signal) = Signal::builder("agent.child_exited").data(json!({"child": id})).build()
        {
            self.shared.directory.deliver(parent, signal);
        }
    }
}
