//! The Runtime: the handle an application holds — skill catalog, agent directory, event stream, journal — and
//! typed [`AgentRef`]s to talk to agents.

pub use crate::error::RuntimeError;
pub(crate) use crate::restart::Again;
pub use crate::restart::{RestartMode, RestartPolicy, SpawnOptions};

use crate::agent::{Agent, AgentState, StartError, start};
use crate::directory::Directory;
use crate::events::{Event, EventBus};
use crate::id::{AgentId, SkillId};
use crate::jobs::JobBoard;
use crate::messages::{Requester, RunRequest, ServerMsg, Untyped};
use crate::policy::Policy;
pub use crate::recovery::Recovery;
use crate::runner::Runner;
use crate::server::{AgentServer, ServerArgs};

use crate::shared::{Reviver, Shared, Spawner};
use crate::signal::Signal;
use crate::skill::{Catalog, LiveCatalog, Skill};
use crate::store::{MemoryStore, SqliteStore, Store};
use ractor::rpc::CallResult;
use ractor::{Actor, ActorRef, RpcReplyPort};
use serde_json::Value;
use std::any::TypeId;
use std::future::Future;
use std::marker::PhantomData;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

/// How long [`Runtime::shutdown`] waits for one stopped actor's cleanup before killing it.
const STOP_WAIT: Duration = Duration::from_secs(5);

/// How deep routines may nest calls unless [`RuntimeBuilder::max_call_depth`] says otherwise.
pub const DEFAULT_MAX_CALL_DEPTH: usize = 8;

/// How many jobs run at once unless [`RuntimeBuilder::max_jobs`] says otherwise.
pub const DEFAULT_MAX_JOBS: usize = 8;

/// How many inputs an agent handles between two snapshots unless [`RuntimeBuilder::snapshot_every`] says
/// otherwise.
pub const DEFAULT_SNAPSHOT_EVERY: u64 = 100;

/// The journal's file name in a durable runtime's data folder.
pub const JOURNAL: &str = "journal.db";

/// Builds a [`Runtime`].
#[must_use = "a builder does nothing until `build` is called"]
pub struct RuntimeBuilder {
    catalog: Catalog,
    store: Option<Arc<dyn Store>>,
    spawners: Vec<(String, Spawner)>,
    revivers: Vec<(String, Reviver)>,
    data_dir: Option<PathBuf>,
    snapshot_every: u64,
    hibernate_after: Option<Duration>,
    max_call_depth: usize,
    max_jobs: usize,
    job_retention: Duration,
    coerce_params: bool,
}

impl Default for RuntimeBuilder {
    fn default() -> Self {
        Self {
            catalog: Catalog::default(),
            store: None,
            spawners: Vec::new(),
            revivers: Vec::new(),
            data_dir: None,
            snapshot_every: DEFAULT_SNAPSHOT_EVERY,
            hibernate_after: None,
            max_call_depth: DEFAULT_MAX_CALL_DEPTH,
            max_jobs: DEFAULT_MAX_JOBS,
            job_retention: crate::jobs::DEFAULT_JOB_RETENTION,
            coerce_params: true,
        }
    }
}

impl RuntimeBuilder {
    /// Adds a skill to the catalog.
    pub fn skill(mut self, skill: Skill) -> Self {
        self.catalog.insert(skill);
        self
    }

    /// Registers an agent type, so `SpawnAgent` effects can start it by name, and adds its start skills to the
    /// catalog.
    pub fn agent<A: Agent>(mut self) -> Result<Self, RuntimeError> {
        for (skill, _) in A::start_skills().map_err(StartError::from)? {
            self.catalog.insert(skill);
        }
        let spawner: Spawner = Arc::new(|shared, id, init, parent, policy| {
            Box::pin(async move {
                let domain: A = serde_json::from_value(init).map_err(|e| RuntimeError::Spawn {
                    agent: id.clone(),
                    message: format!("the init state does not fit the agent type: {e}"),
                })?;
                let opts = SpawnOptions { id: Some(id), parent, policy, ..SpawnOptions::default() };
                spawn_agent::<A>(&shared, domain, opts).await.map(|_| ())
            })
        });
        self.spawners.push((A::name().to_owned(), spawner));
        let reviver: Reviver = Arc::new(|shared, record, revival| {
            Box::pin(crate::recovery::revive::<A>(shared, record, revival, respawner::<A>))
        });
        self.revivers.push((A::name().to_owned(), reviver));
        Ok(self)
    }

    /// Makes the runtime durable: its data folder is `dir`, and its journal a [`SqliteStore`] in
    /// `dir/journal.db`, which keeps each agent's inputs and snapshots so [`RuntimeBuilder::open`] (or
    /// [`Runtime::recover`]) brings the agents back after the process stops, even by `kill -9`.
    pub fn durable(self, dir: impl Into<PathBuf>) -> Result<Self, RuntimeError> {
        self.durable_with(dir, crate::store::SqliteOptions::default())
    }

    /// [`RuntimeBuilder::durable`] with the journal's options.
    pub fn durable_with(
        self,
        dir: impl Into<PathBuf>,
        options: crate::store::SqliteOptions,
    ) -> Result<Self, RuntimeError> {
        let dir = dir.into();
        let store = SqliteStore::open_with(dir.join(JOURNAL), options).map_err(|e| RuntimeError::Store {
            agent: AgentId::new("runtime").unwrap_or_else(|_| AgentId::random()),
            message: e.to_string(),
        })?;
        Ok(self.data_dir(dir).store(Arc::new(store)))
    }

    /// With a durable store: how many inputs an agent handles between two snapshots of its state (at least 1;
    /// default [`DEFAULT_SNAPSHOT_EVERY`]). Fewer means a faster recovery and more writes. A snapshot due while
    /// outcomes wait in the agent's inbox waits for them to be consumed, up to ten times as many inputs (a
    /// snapshot makes the journal write each waiting outcome twice: with it, and once consumed).
    pub fn snapshot_every(mut self, inputs: u64) -> Self {
        self.snapshot_every = inputs.max(1);
        self
    }

    /// With a durable store: an agent idle this long (no message handled, nothing in flight) hibernates (see
    /// [`Runtime::hibernate`]). Idle agents are looked for every half of it.
    pub fn hibernate_after(mut self, idle: Duration) -> Self {
        self.hibernate_after = Some(idle.max(Duration::from_millis(1)));
        self
    }

    /// Builds the runtime and brings back every agent its durable store says was alive (see
    /// [`Runtime::recover`]).
    ///
    /// ```
    /// use agentry::prelude::*;
    /// use agentry::runtime::{Runtime, SpawnOptions};
    ///
    /// #[derive(Clone, Default, serde::Serialize, serde::Deserialize)]
    /// struct Counter { n: u64 }
    /// impl Agent for Counter {
    ///     fn handle_signal(&self, _signal: &Signal) -> Reaction<Self> {
    ///         Reaction::Update(Counter { n: self.n + 1 }, vec![])
    ///     }
    /// }
    ///
    /// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let folder = tempfile::tempdir()?;
    /// let id = AgentId::new("counter")?;
    /// {
    ///     let (runtime, _) = Runtime::builder().agent::<Counter>()?.durable(folder.path())?.open().await?;
    ///     let counter = runtime.spawn(Counter::default(), SpawnOptions { id: Some(id.clone()), ..Default::default() }).await?;
    ///     counter.send(Signal::new("tick", serde_json::Value::Null)?)?;
    ///     counter.send(Signal::new("tick", serde_json::Value::Null)?)?;
    ///     assert_eq!(counter.state().await?.domain.n, 2);
    ///     runtime.shutdown(std::time::Duration::from_secs(1)).await;
    /// }
    /// let (runtime, recovery) = Runtime::builder().agent::<Counter>()?.durable(folder.path())?.open().await?;
    /// assert_eq!(recovery.agents, [id.clone()]);
    /// assert_eq!(runtime.get::<Counter>(&id)?.state().await?.domain.n, 2, "back with its state");
    /// # Ok(()) }
    /// ```
    pub async fn open(self) -> Result<(Runtime, Recovery), RuntimeError> {
        let runtime = self.build();
        let recovery = runtime.recover().await?;
        Ok((runtime, recovery))
    }

    /// The runtime's data folder: every agent gets a drive under it (`agents/<agent>/`), and every skill a
    /// folder of its own in that drive. Without one, actions that need a drive are denied.
    pub fn data_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.data_dir = Some(dir.into());
        self
    }

    /// How deep actions may nest calls through their context (at least 1; default
    /// [`DEFAULT_MAX_CALL_DEPTH`]). A call past it fails with a `Critical` error.
    pub fn max_call_depth(mut self, depth: usize) -> Self {
        self.max_call_depth = depth.max(1);
        self
    }

    /// How many jobs may run at once across the runtime (default [`DEFAULT_MAX_JOBS`]); more wait queued.
    pub fn max_jobs(mut self, jobs: usize) -> Self {
        self.max_jobs = jobs.max(1);
        self
    }

    /// How long an ended job stays visible on the job board (default
    /// [`crate::jobs::DEFAULT_JOB_RETENTION`]); older ended jobs are dropped.
    pub fn job_retention(mut self, retention: Duration) -> Self {
        self.job_retention = retention;
        self
    }

    /// Whether params that do not match an action's schema are first coerced where that is safe (default
    /// `true`): `"5"` for an integer, `"true"` for a boolean, one value for an array, `null` for an optional
    /// field (its default applies, as OpenAI's strict mode means it). See [`crate::action::coerce`].
    pub fn coerce_params(mut self, coerce: bool) -> Self {
        self.coerce_params = coerce;
        self
    }

    /// Uses this journal instead of an in-memory one.
    pub fn store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// Builds the runtime. Needs a tokio runtime to be running when agents are spawned.
    pub fn build(self) -> Runtime {
        let events = EventBus::new();
        let store = self.store.unwrap_or_else(|| Arc::new(MemoryStore::new()));
        let shared = Shared {
            started_at: chrono::Utc::now(),
            wakers: dashmap::DashMap::new(),
            catalog: LiveCatalog::new(self.catalog),
            data_dir: self.data_dir,
            max_call_depth: self.max_call_depth,
            jobs: Arc::new(JobBoard::with_retention(self.max_jobs, self.job_retention).journaled(store.clone())),
            runner: Runner::new(events.clone(), store.clone()).coercing(self.coerce_params),
            events,
            store,
            directory: Directory::default(),
            spawners: self.spawners.into_iter().collect(),
            supervisor: tokio::sync::OnceCell::new(),
            children: dashmap::DashMap::new(),
            snapshot_every: self.snapshot_every,
            shutting_down: std::sync::atomic::AtomicBool::new(false),
            revivers: self.revivers.into_iter().collect(),
            sleeping: dashmap::DashMap::new(),
            waking: tokio::sync::Mutex::new(()),
            hibernate_after: self.hibernate_after,
            sweeper: std::sync::OnceLock::new(),
        };
        Runtime { shared: Arc::new(shared) }
    }
}

/// The handle an application holds. Cheap to clone.
#[derive(Clone)]
pub struct Runtime {
    shared: Arc<Shared>,
}

impl Runtime {
    /// Starts building a runtime.
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder::default()
    }

    /// The skill catalog as it is now (skills can be added and refreshed while the runtime runs).
    pub fn catalog(&self) -> Arc<Catalog> {
        self.shared.catalog.snapshot()
    }

    /// The execution journal.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.shared.store
    }

    /// A skill's folder in an agent's drive, when the runtime has a data folder (it may not exist yet).
    pub fn drive(&self, agent: &AgentId, skill: &SkillId) -> Option<PathBuf> {
        self.shared.data_dir.as_deref().map(|dir| crate::server::drive_path(dir, agent, skill))
    }

    /// The runtime's jobs.
    pub fn jobs(&self) -> &JobBoard {
        &self.shared.jobs
    }

    /// A receiver of every event from now on.
    pub fn events(&self) -> tokio::sync::broadcast::Receiver<Event> {
        self.shared.events.subscribe()
    }

    /// Spawns an agent: its start skills are mounted (purely) before its actor starts.
    pub async fn spawn<A: Agent>(&self, domain: A, opts: SpawnOptions) -> Result<AgentRef<A>, RuntimeError> {
        spawn_agent(&self.shared, domain, opts).await
    }

    /// A typed handle to a running agent.
    pub fn get<A: Agent>(&self, id: &AgentId) -> Result<AgentRef<A>, RuntimeError> {
        let Some(entry) = self.shared.directory.get(id) else {
            // A hibernating agent: the handle thaws it when it is used.
            return match self.shared.sleeping.get(id) {
                Some(sleeper) if sleeper.agent_type.as_ref() == A::name() => {
                    Ok(AgentRef { id: id.clone(), actor: None, shared: self.shared.clone(), _agent: PhantomData })
                }
                Some(_) => Err(RuntimeError::WrongType(id.clone())),
                None => Err(RuntimeError::NoSuchAgent(id.clone())),
            };
        };
        if entry.agent_type != TypeId::of::<A>() {
            return Err(RuntimeError::WrongType(id.clone()));
        }
        Ok(AgentRef {
            id: id.clone(),
            actor: Some(ActorRef::from(entry.cell)),
            shared: self.shared.clone(),
            _agent: PhantomData,
        })
    }

    /// Puts an idle agent to sleep (needs a durable store): its state is snapshotted, its actor stopped, and
    /// only a few bytes stay in memory. A signal, a call or a `get` addressed to it later thaws it, without the
    /// caller seeing a difference but the time it takes; [`Runtime::thaw`] does so at once. Announced as
    /// `agent_hibernated`. An agent with anything going on (runs in flight or queued, approvals pending,
    /// schedules armed) stays awake: [`RuntimeError::Busy`] says why.
    pub async fn hibernate(&self, id: &AgentId) -> Result<(), RuntimeError> {
        let entry = self.shared.directory.get(id).ok_or_else(|| RuntimeError::NoSuchAgent(id.clone()))?;
        let (done, answer) = tokio::sync::oneshot::channel();
        if !self.shared.directory.tell(id, Untyped::Hibernate(Some(done), None)) {
            return Err(RuntimeError::Stopped(id.clone()));
        }
        answer.await.map_err(|_| RuntimeError::Stopped(id.clone()))??;
        let _ = entry.cell.wait(Some(STOP_WAIT)).await;
        Ok(())
    }

    /// Thaws a hibernated agent now (nothing happens to one that is awake); announced as `agent_thawed`.
    pub async fn thaw(&self, id: &AgentId) -> Result<(), RuntimeError> {
        crate::sleep::wake(&self.shared, id).await
    }

    /// Whether an agent is hibernating.
    pub fn is_hibernating(&self, id: &AgentId) -> bool {
        crate::sleep::is_asleep(&self.shared, id)
    }

    /// The id of the agent with this name.
    pub fn find(&self, name: &str) -> Option<AgentId> {
        self.shared.directory.id_of(name)
    }

    /// Delivers a signal to an agent whatever its type. A signal of one of the runtime's own kinds (see
    /// [`crate::kinds`]), or one that claims to come from the runtime, is refused with
    /// [`RuntimeError::Forged`].
    pub fn send(&self, to: &AgentId, signal: Signal) -> Result<(), RuntimeError> {
        check_from_outside(&signal)?;
        crate::sleep::deliver(&self.shared, to, signal)
    }

    /// Replaces an agent's policy, for good: a supervised restart starts it under the new one, a durable
    /// runtime keeps it for recovery, a hibernated agent is thawed to take it, and the agent's children are
    /// narrowed to fit within it ([`Policy::narrowed_to`]; one asleep or restarting is narrowed when it starts).
    /// Runs already going keep the policy they started under; queued runs and runs waiting for approval meet the
    /// new one at the gate when they start, and run under it (`ctx.policy()`). A skill the new policy does not
    /// allow stays mounted, but none of its actions runs.
    pub async fn set_policy(&self, agent: &AgentId, policy: Policy) -> Result<(), RuntimeError> {
        crate::sleep::wake(&self.shared, agent).await?;
        let (done, changed) = tokio::sync::oneshot::channel();
        if !self.shared.directory.tell(agent, Untyped::SetPolicy(Box::new(policy), done)) {
            return Err(RuntimeError::NoSuchAgent(agent.clone()));
        }
        changed.await.map_err(|_| RuntimeError::Stopped(agent.clone()))
    }

    /// Adds a skill to the catalog while the runtime runs, so agents can mount it (a skill made from an MCP
    /// server after connecting to it, say).
    pub fn add_skill(&self, skill: Skill) -> Result<(), RuntimeError> {
        self.shared.catalog.update(|catalog| {
            if catalog.get(skill.id()).is_some() {
                return Err(RuntimeError::SkillExists(skill.id().clone()));
            }
            catalog.insert(skill);
            Ok(())
        })
    }

    /// Replaces a catalog skill with a new build of itself at the same version, and brings every agent that has
    /// it mounted up to date (see [`crate::skill::refresh`]): each gets the Register/Deregister effects for the
    /// difference and announces `SkillRefreshed`. Returns once every such agent has done so, with the agents it
    /// could not refresh (a new requirement missing there, say) and why. A build at another version is refused
    /// with `VersionConflict` and changes nothing: upgrading is an unmount and a mount.
    pub async fn refresh_skill(&self, skill: Skill) -> Result<Vec<(AgentId, RuntimeError)>, RuntimeError> {
        let id = skill.id().clone();
        self.shared.catalog.update(|catalog| {
            let current = catalog.get(&id).ok_or_else(|| RuntimeError::UnknownSkill(id.clone()))?;
            if current.vsn() != skill.vsn() {
                return Err(RuntimeError::Mount(crate::skill::version_conflict(current.vsn(), &skill)));
            }
            catalog.insert(skill);
            Ok(())
        })?;
        let mut waiting = Vec::new();
        for agent in self.shared.directory.ids() {
            let (done, refreshed) = tokio::sync::oneshot::channel();
            if self.shared.directory.tell(&agent, Untyped::Refresh(id.clone(), done)) {
                waiting.push((agent, refreshed));
            }
        }
        let mut failed = Vec::new();
        for (agent, refreshed) in waiting {
            // A closed channel means the agent stopped meanwhile: nothing to bring up to date.
            if let Ok(Err(error)) = refreshed.await {
                failed.push((agent, error));
            }
        }
        Ok(failed)
    }

    /// Runs one of an agent's actions for a caller outside the agent (an MCP client, a command line) and waits
    /// for its outcome. The run passes the agent's gate like any other: an action that is not registered, not
    /// allowed or lacks a capability comes back as a `Blocked` outcome with a `Denied` error; one that needs
    /// approval is refused with [`RuntimeError::NeedsApproval`], since nobody could tell the caller it waits (see
    /// [`Runtime::invoke_with`] for a caller who waits for the operator's approval). It counts against the agent's in-flight cap, is
    /// journaled and announced like any run, and the effects it asks for are interpreted when it completes; the
    /// agent gets no outcome signal for it. Dropping the returned future (a caller that gives up) cancels the run,
    /// journaled as cancelled.
    pub async fn invoke(
        &self,
        agent: &AgentId,
        action: &str,
        params: Value,
    ) -> Result<crate::action::Outcome, RuntimeError> {
        self.invoke_for(agent, action, params, None).await
    }

    /// [`Runtime::invoke`] for a caller the run can reach: the run's log lines and progress go to it, its
    /// [`ActionContext::sample`](crate::action::ActionContext::sample) and
    /// [`elicit`](crate::action::ActionContext::elicit) ask it, and the calls the run makes reach it too. When
    /// the gate asks for approval, the run waits for it like an agent's own run, approved by whom the caller's
    /// [`Approver`](crate::action::Approver) names: by default the runtime's own approvers
    /// ([`Runtime::decide`], [`AgentRef::approve`] or [`AgentRef::deny`], whoever watches the event stream), and
    /// the caller hears [`CallerRequest::AwaitingOperator`](crate::action::CallerRequest::AwaitingOperator); with
    /// [`Approver::Caller`](crate::action::Approver::Caller) a caller who can elicit gets a
    /// [`CallerRequest::Approve`](crate::action::CallerRequest::Approve) instead, for risks up to its ceiling.
    ///
    /// ```
    /// use agentry::action::{ActionSpec, Caller, CallerCan, CallerRequest, DynAction, LogLevel};
    /// use agentry::runtime::{Runtime, SpawnOptions};
    /// use agentry::skill::Skill;
    /// use serde_json::{Value, json};
    /// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let greet = DynAction::new(ActionSpec::new("hello.greet", "Greets.")?, |_, ctx| {
    ///     Box::pin(async move {
    ///         ctx.log(LogLevel::Info, "greeting");
    ///         Ok(json!("hi"))
    ///     })
    /// })?;
    /// let runtime = Runtime::builder().skill(Skill::builder("hello", "1.0.0").dyn_action(greet).build()?).build();
    /// let agent = runtime.spawn((), SpawnOptions::default()).await?;
    /// agent.mount(&"hello".parse()?, Value::Null).await?;
    ///
    /// let (caller, mut heard) = Caller::new(CallerCan::default());
    /// let outcome = runtime.invoke_with(agent.id(), "hello.greet", json!({}), caller).await?;
    /// assert_eq!(outcome.output, "hi");
    /// assert!(matches!(heard.try_recv()?, CallerRequest::Log { message, .. } if message == "greeting"));
    /// # Ok(()) }
    /// ```
    pub async fn invoke_with(
        &self,
        agent: &AgentId,
        action: &str,
        params: Value,
        caller: crate::action::Caller,
    ) -> Result<crate::action::Outcome, RuntimeError> {
        self.invoke_for(agent, action, params, Some(caller)).await
    }

    async fn invoke_for(
        &self,
        agent: &AgentId,
        action: &str,
        params: Value,
        caller: Option<crate::action::Caller>,
    ) -> Result<crate::action::Outcome, RuntimeError> {
        let action: crate::id::ActionId = action.parse()?;
        // Dropping this future drops the receiver, which tells the run's task its caller gave up.
        let (reply, outcome) = tokio::sync::oneshot::channel();
        let by = Requester::Outside(reply, caller);
        let request = RunRequest { action, params, by, key: crate::action::RunKey::Run };
        if !self.shared.directory.tell(agent, Untyped::Request(Box::new(request))) {
            return Err(RuntimeError::NoSuchAgent(agent.clone()));
        }
        outcome.await.map_err(|_| RuntimeError::Stopped(agent.clone()))?
    }

    /// The contracts of the actions an agent can run now (its live action table), sorted by id.
    pub async fn actions(&self, agent: &AgentId) -> Result<Vec<crate::action::ActionSpec>, RuntimeError> {
        let (reply, specs) = tokio::sync::oneshot::channel();
        if !self.shared.directory.tell(agent, Untyped::Actions(reply)) {
            return Err(RuntimeError::NoSuchAgent(agent.clone()));
        }
        specs.await.map_err(|_| RuntimeError::Stopped(agent.clone()))
    }

    /// Approves (`true`) or denies a run of an agent that waits for approval, without the agent's type (as
    /// [`AgentRef::approve`] and [`AgentRef::deny`] do with it). An approval holds for the contract and params
    /// the run was asked about: if its action's contract changed since (a refreshed skill, an MCP server's new
    /// tool list), the run is asked about again (a new `approval_asked`) and this returns
    /// [`RuntimeError::ApprovalStale`].
    pub async fn decide(&self, agent: &AgentId, run: uuid::Uuid, approve: bool) -> Result<(), RuntimeError> {
        self.tell_verdict(agent, run, crate::messages::Verdict { approve, seen: None }).await
    }

    /// Approves a run only if what it would run now is what the approver saw: `digest` is the one its
    /// `approval_asked` event (or [`ApprovalAsk`](crate::action::ApprovalAsk)) carried. Otherwise refused with
    /// [`RuntimeError::ApprovalStale`], and the run goes on waiting.
    pub async fn approve_seen(&self, agent: &AgentId, run: uuid::Uuid, digest: uuid::Uuid) -> Result<(), RuntimeError> {
        self.tell_verdict(agent, run, crate::messages::Verdict { approve: true, seen: Some(digest) }).await
    }

    async fn tell_verdict(
        &self,
        agent: &AgentId,
        run: uuid::Uuid,
        verdict: crate::messages::Verdict,
    ) -> Result<(), RuntimeError> {
        let (reply, decided) = tokio::sync::oneshot::channel();
        if !self.shared.directory.tell(agent, Untyped::Decide(run, verdict, reply)) {
            return Err(RuntimeError::NoSuchAgent(agent.clone()));
        }
        decided.await.map_err(|_| RuntimeError::Stopped(agent.clone()))?
    }

    /// The skills mounted on an agent now, as the catalog defines them, sorted by id. A mounted skill the
    /// catalog no longer holds is left out.
    pub async fn mounted(&self, agent: &AgentId) -> Result<Vec<Arc<Skill>>, RuntimeError> {
        let (reply, mounted) = tokio::sync::oneshot::channel();
        if !self.shared.directory.tell(agent, Untyped::Mounted(reply)) {
            return Err(RuntimeError::NoSuchAgent(agent.clone()));
        }
        let mounted = mounted.await.map_err(|_| RuntimeError::Stopped(agent.clone()))?;
        let catalog = self.catalog();
        Ok(mounted.iter().filter_map(|(id, _)| catalog.get(id).cloned()).collect())
    }

    /// Subscribes an agent to a topic that `Emit { to: Topic }` delivers to.
    pub fn subscribe(&self, agent: &AgentId, topic: &str) {
        self.shared.directory.subscribe(topic, agent.clone());
    }

    /// Brings back every agent the durable store says was alive when the process last stopped (nothing with
    /// the in-memory store): each from its latest snapshot, with the inputs logged after it replayed through the
    /// pure `step`. Effects replay produces are not executed again: ended runs keep their journaled outcomes (an
    /// outcome the agent had not consumed yet is given to it), runs waiting for approval wait again (the same
    /// run id can be approved), runs that had not started are started, and a run that started but did not end
    /// is started again with the same idempotency key if its action is idempotent or has no side effects, and
    /// otherwise reaches the agent as `action.failed` with class `Interrupted`. Schedules are armed again; one
    /// whose time passed fires at once, or is skipped if it was made with `skip_if_missed`. Agents of a type not
    /// registered with [`RuntimeBuilder::agent`] stay in the store and are listed in [`Recovery::failed`].
    pub async fn recover(&self) -> Result<Recovery, RuntimeError> {
        crate::recovery::recover(&self.shared).await
    }

    /// Stops an agent and waits until it has stopped; its running actions are cancelled.
    pub async fn stop(&self, id: &AgentId) -> Result<(), RuntimeError> {
        // A hibernating agent is ended where it sleeps.
        if self.shared.directory.get(id).is_none() && self.shared.sleeping.remove(id).is_some() {
            if let Some(durable) = self.shared.store.durable() {
                durable.agent_ended(id);
            }
            return Ok(());
        }
        let entry = self.shared.directory.get(id).ok_or_else(|| RuntimeError::NoSuchAgent(id.clone()))?;
        self.shared.stop_agent(&entry, "stopped by the runtime".into());
        let _ = entry.cell.wait(None).await;
        Ok(())
    }

    /// Shuts every agent down gracefully: each stops taking new runs (they fail `Cancelled`), drops its queued
    /// and unapproved runs and its schedules, and lets the runs already going finish; after `grace` (one
    /// deadline for the whole runtime) every agent stops, and whatever still runs is cancelled and journaled.
    pub async fn shutdown(&self, grace: Duration) {
        // Signals kept for hibernating agents are handled first: a thaw under way finishes.
        let waking: Vec<AgentId> =
            self.shared.sleeping.iter().filter(|s| s.waking || !s.kept.is_empty()).map(|s| s.key().clone()).collect();
        for id in waking {
            if let Err(err) = crate::sleep::wake(&self.shared, &id).await {
                tracing::error!(agent = %id, %err, "a hibernated agent could not be thawed for its kept signals");
            }
        }
        self.shared.shutting_down.store(true, std::sync::atomic::Ordering::SeqCst);
        let deadline = tokio::time::Instant::now() + grace;
        let ids = self.shared.directory.ids();
        let mut drained = Vec::with_capacity(ids.len());
        for id in &ids {
            let (done, finished) = tokio::sync::oneshot::channel();
            if self.shared.directory.tell(id, Untyped::Drain(done)) {
                drained.push(finished);
            }
        }
        for finished in drained {
            // An error means the agent stopped on its own meanwhile, which is as good as drained.
            let _ = tokio::time::timeout_at(deadline, finished).await;
        }
        let cells: Vec<_> = ids.iter().filter_map(|id| self.shared.directory.get(id)).map(|e| e.cell).collect();
        for entry in ids.iter().filter_map(|id| self.shared.directory.get(id)) {
            self.shared.stop_agent(&entry, "runtime shutdown".into());
        }
        for cell in cells {
            if cell.wait(Some(STOP_WAIT)).await.is_err() {
                cell.kill();
            }
        }
        // Whatever the agents wrote on their way out is on disk when this returns, so a runtime opened next on
        // the same folder finds it (even while this one's journal is still being dropped).
        if let Some(durable) = self.shared.store.durable()
            && durable.flushed().await.is_err()
        {
            tracing::error!("the journal could not make the last writes before shutdown durable");
        }
    }
}

/// Starts an agent: its start skills are mounted (purely), then its actor starts, linked to the runtime's
/// supervisor, and enters the directory (see the server's `enter_directory`: of two spawns racing on one id,
/// the loser never runs).
pub(crate) async fn spawn_agent<A: Agent>(
    shared: &Arc<Shared>,
    domain: A,
    opts: SpawnOptions,
) -> Result<AgentRef<A>, RuntimeError> {
    let history = Arc::new(std::sync::Mutex::new(crate::restart::Restarts::new(opts.restart)));
    spawn_supervised(shared, domain, opts, history, false).await
}

/// [`spawn_agent`] with the restarts counted so far (a restart keeps counting in the same window).
/// `restart`: the agent is started again under the policy it has now, which may have stopped allowing one of
/// its start skills since it was spawned: those are part of the agent, so they are mounted all the same and the
/// gate refuses their actions (as it does for a skill mounted before the policy changed).
fn spawn_supervised<A: Agent>(
    shared: &Arc<Shared>,
    domain: A,
    opts: SpawnOptions,
    history: Arc<std::sync::Mutex<crate::restart::Restarts>>,
    restart: bool,
) -> Pin<Box<dyn Future<Output = Result<AgentRef<A>, RuntimeError>> + Send + '_>> {
    Box::pin(async move {
        let id = opts.id.clone().unwrap_or_else(AgentId::random);
        if shared.directory.get(&id).is_some() || shared.sleeping.contains_key(&id) {
            return Err(RuntimeError::AlreadyExists(id.to_string()));
        }
        if let Some(name) = &opts.name
            && shared.directory.id_of(name).is_some()
        {
            return Err(RuntimeError::AlreadyExists(name.clone()));
        }
        let started = if restart {
            let mounts_any = Policy { allow_skills: None, deny_skills: Default::default(), ..opts.policy.clone() };
            start(id.clone(), domain.clone(), &mounts_any)
        } else {
            start(id.clone(), domain.clone(), &opts.policy)
        };
        let (state, start_effects) = started?;
        let catalog = shared.catalog.snapshot();
        for skill in state.skills().keys() {
            if catalog.get(skill).is_none() {
                return Err(RuntimeError::UnknownSkill(skill.clone()));
            }
        }
        let again = Arc::new(Again::of(&id, opts));
        let respawn = respawner(&again, domain, history.clone());
        let args =
            ServerArgs { state, start_effects, again, shared: shared.clone(), history, respawn, recovered: None };
        let supervisor = crate::supervisor::supervisor(shared, &id).await?;
        let (actor, _join) = Actor::spawn_linked(None, AgentServer::<A>::new(), args, supervisor)
            .await
            .map_err(|e| crate::error::spawn_error(&id, e))?;
        Ok(AgentRef { id, actor: Some(actor), shared: shared.clone(), _agent: PhantomData })
    })
}

/// How the supervisor starts the agent again from `domain`, counting restarts in `history`.
pub(crate) fn respawner<A: Agent>(
    again: &Arc<Again>,
    domain: A,
    history: Arc<std::sync::Mutex<crate::restart::Restarts>>,
) -> crate::shared::Respawn {
    let again = again.clone();
    Arc::new(move |shared: Arc<Shared>| {
        let (domain, opts, history) = (domain.clone(), again.options(), history.clone());
        Box::pin(async move { spawn_supervised(&shared, domain, opts, history, true).await.map(|_| ()) })
    })
}

/// Refuses a signal from outside the runtime that forges one of the runtime's own (its kind or its source).
fn check_from_outside(signal: &Signal) -> Result<(), RuntimeError> {
    if crate::kinds::is_reserved(signal.kind().as_str()) || crate::kinds::is_runtime_source(signal.source()) {
        return Err(RuntimeError::Forged { kind: signal.kind().to_string(), claimed: signal.source().to_owned() });
    }
    Ok(())
}

/// A typed handle to one agent.
pub struct AgentRef<A: Agent> {
    id: AgentId,
    /// The actor this handle was made for (`None` for a handle to a hibernating agent).
    actor: Option<ActorRef<ServerMsg<A>>>,
    shared: Arc<Shared>,
    _agent: PhantomData<fn() -> A>,
}

impl<A: Agent> Clone for AgentRef<A> {
    fn clone(&self) -> Self {
        Self { id: self.id.clone(), actor: self.actor.clone(), shared: self.shared.clone(), _agent: PhantomData }
    }
}

impl<A: Agent> AgentRef<A> {
    /// The agent's id.
    pub fn id(&self) -> &AgentId {
        &self.id
    }

    /// The agent's actor now: the one this handle was made for while it runs, else the one its supervisor
    /// restarted (or a thaw brought back) under the same id and type, if any.
    fn actor(&self) -> Option<ActorRef<ServerMsg<A>>> {
        use ractor::ActorStatus;
        if let Some(actor) = &self.actor
            && matches!(actor.get_status(), ActorStatus::Running | ActorStatus::Starting | ActorStatus::Upgrading)
        {
            return Some(actor.clone());
        }
        match self.shared.directory.get(&self.id) {
            Some(entry) if entry.agent_type == TypeId::of::<A>() => Some(ActorRef::from(entry.cell)),
            _ => self.actor.clone(),
        }
    }

    /// The agent's actor, thawing the agent first if it hibernates.
    async fn awake(&self) -> Result<ActorRef<ServerMsg<A>>, RuntimeError> {
        if crate::sleep::is_asleep(&self.shared, &self.id) {
            crate::sleep::wake(&self.shared, &self.id).await?;
        }
        self.actor().ok_or_else(|| RuntimeError::Stopped(self.id.clone()))
    }

    /// Asks the actor, thawing the agent if it hibernates; a request dropped because the agent fell asleep
    /// meanwhile is asked again of the thawed agent, once.
    async fn ask<T: Send + 'static>(
        &self,
        message: impl Fn(RpcReplyPort<T>) -> ServerMsg<A>,
        timeout: Option<Duration>,
    ) -> Result<T, RuntimeError> {
        let mut again = true;
        loop {
            let result = self.awake().await?.call(&message, timeout).await;
            match self.answer(result, timeout.unwrap_or_default()) {
                Err(RuntimeError::Stopped(_)) if again && crate::sleep::is_asleep(&self.shared, &self.id) => {
                    again = false;
                }
                answer => return answer,
            }
        }
    }

    /// Sends a signal without waiting (cast); to a hibernating agent, it is kept for it and the agent thawed. A
    /// forged runtime signal is refused (see [`Runtime::send`]).
    pub fn send(&self, signal: Signal) -> Result<(), RuntimeError> {
        check_from_outside(&signal)?;
        let Some(actor) = self.actor() else { return crate::sleep::deliver(&self.shared, &self.id, signal) };
        match actor.cast(ServerMsg::Signal(Box::new(signal))) {
            Ok(()) => Ok(()),
            Err(ractor::MessagingErr::SendErr(ServerMsg::Signal(signal))) => {
                crate::sleep::deliver(&self.shared, &self.id, *signal)
            }
            Err(_) => Err(RuntimeError::Stopped(self.id.clone())),
        }
    }

    /// Sends a signal and waits for the agent's `Reply` to it, at most `timeout`.
    pub async fn call(&self, signal: Signal, timeout: Duration) -> Result<Value, RuntimeError> {
        check_from_outside(&signal)?;
        self.ask(|port| ServerMsg::Call(Box::new(signal.clone()), port), Some(timeout)).await
    }

    fn answer<T>(
        &self,
        result: Result<CallResult<T>, impl std::fmt::Debug>,
        timeout: Duration,
    ) -> Result<T, RuntimeError> {
        match result {
            Ok(CallResult::Success(value)) => Ok(value),
            Ok(CallResult::Timeout) => Err(RuntimeError::Timeout { agent: self.id.clone(), timeout }),
            Ok(CallResult::SenderError) | Err(_) => Err(RuntimeError::Stopped(self.id.clone())),
        }
    }

    /// A snapshot of the agent's state.
    pub async fn state(&self) -> Result<AgentState<A>, RuntimeError> {
        self.ask(ServerMsg::Snapshot, None).await
    }

    /// Mounts a catalog skill with options.
    pub async fn mount(&self, skill: &SkillId, opts: Value) -> Result<(), RuntimeError> {
        self.ask(|port| ServerMsg::Mount(Box::new((skill.clone(), opts.clone())), port), None).await?
    }

    /// Unmounts a skill.
    pub async fn unmount(&self, skill: &SkillId) -> Result<(), RuntimeError> {
        self.ask(|port| ServerMsg::Unmount(skill.clone(), port), None).await?
    }

    /// Approves a run that waits for approval.
    pub async fn approve(&self, run: Uuid) -> Result<(), RuntimeError> {
        let verdict = crate::messages::Verdict { approve: true, seen: None };
        self.ask(|port| ServerMsg::Decide(run, verdict, port), None).await?
    }

    /// Denies a run that waits for approval.
    pub async fn deny(&self, run: Uuid) -> Result<(), RuntimeError> {
        let verdict = crate::messages::Verdict { approve: false, seen: None };
        self.ask(|port| ServerMsg::Decide(run, verdict, port), None).await?
    }

    /// Stops the agent and waits until it has stopped (a hibernating agent is ended where it sleeps).
    pub async fn stop(&self) {
        let reason = "stopped through its AgentRef".to_owned();
        let Some(actor) = self.actor().filter(|_| !crate::sleep::is_asleep(&self.shared, &self.id)) else {
            let _ = Runtime { shared: self.shared.clone() }.stop(&self.id).await;
            return;
        };
        if let Some(entry) = self.shared.directory.get(&self.id).filter(|e| e.cell.get_id() == actor.get_id()) {
            self.shared.stop_agent(&entry, reason);
            let _ = actor.wait(None).await;
        } else {
            let _ = actor.stop_and_wait(Some(reason), None).await;
        }
    }
}
