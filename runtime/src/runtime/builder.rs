//! Building a [`Runtime`]: its catalog, agent types, store, limits and hibernation.

use super::*;

/// Builds a [`Runtime`].
#[must_use = "a builder does nothing until `build` is called"]
pub struct RuntimeBuilder {
    catalog: Catalog,
    store: Option<Arc<dyn Store>>,
    spawners: Vec<(String, Spawner)>,
    revivers: Vec<(String, Reviver)>,
    type_names: Vec<(std::any::TypeId, Arc<str>)>,
    data_dir: Option<PathBuf>,
    snapshot_every: u64,
    hibernate_after: Option<Duration>,
    max_call_depth: usize,
    max_jobs: usize,
    job_retention: Duration,
    coerce_params: bool,
    elsewhere: Option<crate::elsewhere::ElsewhereHook>,
    claim: Option<crate::claim::ClaimHook>,
    before_restart: Option<crate::afresh::RestartHook>,
}

impl Default for RuntimeBuilder {
    fn default() -> Self {
        Self {
            catalog: Catalog::default(),
            store: None,
            spawners: Vec::new(),
            revivers: Vec::new(),
            type_names: Vec::new(),
            data_dir: None,
            snapshot_every: DEFAULT_SNAPSHOT_EVERY,
            hibernate_after: None,
            max_call_depth: DEFAULT_MAX_CALL_DEPTH,
            max_jobs: DEFAULT_MAX_JOBS,
            job_retention: crate::jobs::DEFAULT_JOB_RETENTION,
            coerce_params: true,
            elsewhere: None,
            claim: None,
            before_restart: None,
        }
    }
}

impl RuntimeBuilder {
    /// Where this runtime hands the signals its agents emit to agents it does not run, and to topics (for
    /// their subscribers elsewhere): a cluster's node sets this to take them to the other nodes. Without it,
    /// the first reach nobody and the second only this runtime's subscribers.
    ///
    /// With a durable store, an agent's emit to an agent elsewhere is kept in the journal until the hook's owner
    /// says it was sent on ([`Runtime::sent_on`](crate::runtime::Runtime::sent_on), named by the signal's
    /// `kept_by`): a hook that never says so leaves them kept, handed over again each time the agent comes back.
    pub fn elsewhere(mut self, hook: ElsewhereHook) -> Self {
        self.elsewhere = Some(hook);
        self
    }

    /// What this runtime asks before it starts a new agent, however it is spawned (by the runtime, by name, or
    /// by another agent): a cluster's node sets this to take the agent's lease first. A refusal fails the spawn
    /// with [`RuntimeError::NotClaimed`] (for a child, its parent gets `agent.spawn_failed`). Without it, every
    /// spawn may go ahead.
    pub fn claim_before_spawn(mut self, hook: ClaimHook) -> Self {
        self.claim = Some(hook);
        self
    }

    /// What this runtime calls when an agent's supervisor is about to start it again afresh (its old actor
    /// ended, the new one not started yet; what waited in the old one's mailbox is gone): a cluster's node sets
    /// this to give again the signals it gave the old one from the agent's inbox.
    pub fn before_restart(mut self, hook: RestartHook) -> Self {
        self.before_restart = Some(hook);
        self
    }

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
        self.type_names.push((std::any::TypeId::of::<A>(), A::name().into()));
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
            journal: crate::store::JournalView::new(store.clone()),
            store,
            directory: Directory::default(),
            spawners: self.spawners.into_iter().collect(),
            supervisor: tokio::sync::OnceCell::new(),
            children: dashmap::DashMap::new(),
            snapshot_every: self.snapshot_every,
            shutting_down: std::sync::atomic::AtomicBool::new(false),
            revivers: self.revivers.into_iter().collect(),
            type_names: self.type_names.into_iter().collect(),
            sleeping: dashmap::DashMap::new(),
            waking: tokio::sync::Mutex::new(()),
            hibernate_after: self.hibernate_after,
            sweeper: std::sync::OnceLock::new(),
            rollback: std::sync::OnceLock::new(),
            elsewhere: self.elsewhere,
            claim: self.claim,
            before_restart: self.before_restart,
        };
        Runtime { shared: Arc::new(shared) }
    }
}
