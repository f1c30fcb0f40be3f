//! Which ended runs the journal may write late. A run's end may wait for the agent to consume its outcome only
//! if a crash before it is durable can safely start the run again: its action has no side effects (or
//! idempotent ones) and nothing the run asked for was done yet. A run whose effects were interpreted must be
//! journaled ended with the next commit, or a crash would run it, and its effects, a second time.
//!
//! A run that ends at its first poll reaches the journal once, its end beside its outcome, so the journal can
//! write the two together.
//!
//! The store here is the real SQLite journal, wrapped to note what the server tells it.

use agentry::action::{ActionSpec, DynAction};
use agentry::agent::{Agent, Reaction};
use agentry::effect::{Effect, Target};
use agentry::id::{ActionId, AgentId, SkillId};
use agentry::runtime::{AgentRef, DEFAULT_SNAPSHOT_EVERY, Runtime, SpawnOptions};
use agentry::signal::Signal;
use agentry::skill::Skill;
use agentry::store::{
    AgentRecord, AliveAgent, Durable, Flushed, JournalPen, Refusal, Revival, RunPlan, RunQuery, RunRecord, RunUpdate,
    ScheduleRecord, Snapshot, SqliteStore, Store, StoreError,
};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use uuid::Uuid;

/// The SQLite journal, noting for each kept outcome its action and whether its run may be journaled late, and
/// every write about a run, in order.
struct Noting {
    journal: SqliteStore,
    kept: Mutex<Vec<(ActionId, bool)>>,
    writes: Mutex<Vec<(&'static str, Uuid)>>,
    /// The input number of each snapshot saved.
    snapshots: Mutex<Vec<u64>>,
    /// In order: each input logged (`input`, its id) and each emit kept for elsewhere (`sending`, its cause).
    order: Mutex<Vec<(&'static str, Uuid)>>,
}

impl Noting {
    fn new(journal: SqliteStore) -> Self {
        Self {
            journal,
            kept: Mutex::default(),
            writes: Mutex::default(),
            snapshots: Mutex::default(),
            order: Mutex::default(),
        }
    }

    fn note(&self, write: &'static str, run: Uuid) {
        self.writes.lock().expect("not poisoned").push((write, run));
    }
}

impl Store for Noting {
    fn record(&self, pen: &JournalPen, record: RunRecord) -> Result<(), StoreError> {
        self.note(if record.status().is_final() { "ended" } else { "record" }, record.run);
        self.journal.record(pen, record)
    }
    fn update(&self, pen: &JournalPen, run: Uuid, update: RunUpdate, at: DateTime<Utc>) -> Result<(), StoreError> {
        self.note("update", run);
        self.journal.update(pen, run, update, at)
    }
    fn get(&self, run: Uuid) -> Option<RunRecord> {
        self.journal.get(run)
    }
    fn query(&self, query: &RunQuery) -> Vec<RunRecord> {
        self.journal.query(query)
    }
    fn refused(&self, pen: &JournalPen, refusal: Refusal) {
        self.journal.refused(pen, refusal);
    }
    fn refusals(&self, agent: &AgentId) -> Vec<Refusal> {
        self.journal.refusals(agent)
    }
    fn durable(&self) -> Option<&dyn Durable> {
        Some(self)
    }
}

impl Durable for Noting {
    fn flushed(&self) -> Flushed {
        self.journal.flushed()
    }
    fn flushed_for(&self, agent: &AgentId) -> Flushed {
        self.journal.flushed_for(agent)
    }
    fn fallen_behind(&self, pen: &JournalPen) -> Option<tokio::sync::mpsc::UnboundedReceiver<AgentId>> {
        self.journal.fallen_behind(pen)
    }
    fn caught_up(&self, pen: &JournalPen, agent: &AgentId) {
        self.journal.caught_up(pen, agent);
    }
    fn append_input(&self, pen: &JournalPen, agent: &AgentId, seq: u64, signal: &Signal) {
        self.order.lock().expect("not poisoned").push(("input", signal.id()));
        self.journal.append_input(pen, agent, seq, signal);
    }
    fn append_kept_outcome(&self, pen: &JournalPen, agent: &AgentId, seq: u64, run: Uuid, signal: &Signal) {
        self.journal.append_kept_outcome(pen, agent, seq, run, signal);
    }
    fn save_snapshot(&self, pen: &JournalPen, snapshot: Snapshot) {
        self.snapshots.lock().expect("not poisoned").push(snapshot.seq);
        self.journal.save_snapshot(pen, snapshot);
    }
    fn agent_spawned(&self, pen: &JournalPen, record: AgentRecord, initial: Snapshot) {
        self.journal.agent_spawned(pen, record, initial);
    }
    fn agent_alive(&self, pen: &JournalPen, record: AgentRecord) {
        self.journal.agent_alive(pen, record);
    }
    fn agent_ended(&self, pen: &JournalPen, agent: &AgentId) {
        self.journal.agent_ended(pen, agent);
    }
    fn schedule_armed(&self, pen: &JournalPen, schedule: ScheduleRecord) {
        self.journal.schedule_armed(pen, schedule);
    }
    fn schedule_cleared(&self, pen: &JournalPen, agent: &AgentId, key: &str) {
        self.journal.schedule_cleared(pen, agent, key);
    }
    fn run_planned(&self, pen: &JournalPen, run: Uuid, plan: &RunPlan) {
        self.note("plan", run);
        self.journal.run_planned(pen, run, plan);
    }
    fn run_outcome(&self, pen: &JournalPen, agent: &AgentId, run: Uuid, outcome: &Signal, safe_again: bool) {
        if let Some(report) = outcome.outcome() {
            self.kept.lock().expect("not poisoned").push((report.action.clone(), safe_again));
        }
        self.note("outcome", run);
        self.journal.run_outcome(pen, agent, run, outcome, safe_again);
    }
    fn job_submitted(&self, pen: &JournalPen, record: &agentry::action::JobRecord, plan: &agentry::store::JobPlan) {
        self.journal.job_submitted(pen, record, plan);
    }
    fn job_changed(&self, pen: &JournalPen, record: &agentry::action::JobRecord, end: Option<&Signal>) {
        self.journal.job_changed(pen, record, end);
    }
    fn job_told(&self, pen: &JournalPen, agent: &AgentId, job: Uuid) {
        self.journal.job_told(pen, agent, job);
    }
    fn jobs_purged(&self, pen: &JournalPen, before: chrono::DateTime<chrono::Utc>) {
        self.journal.jobs_purged(pen, before);
    }
    fn sending(&self, pen: &JournalPen, agent: &AgentId, to: &AgentId, signal: &Signal) {
        self.order.lock().expect("not poisoned").push(("sending", signal.causation_id().unwrap_or_default()));
        self.journal.sending(pen, agent, to, signal);
    }
    fn sent_on(&self, pen: &JournalPen, agent: &AgentId, signal: Uuid) {
        self.journal.sent_on(pen, agent, signal);
    }
    fn alive(&self, after: Option<&AgentId>, limit: usize) -> Result<Vec<AliveAgent>, StoreError> {
        self.journal.alive(after, limit)
    }
    fn agent(&self, agent: &AgentId) -> Result<Option<AgentRecord>, StoreError> {
        self.journal.agent(agent)
    }
    fn snapshot(&self, agent: &AgentId) -> Result<Option<Snapshot>, StoreError> {
        self.journal.snapshot(agent)
    }
    fn inputs_after(&self, agent: &AgentId, after: u64) -> Result<Vec<(u64, Signal)>, StoreError> {
        self.journal.inputs_after(agent, after)
    }
    fn schedules(&self, agent: &AgentId) -> Result<Vec<ScheduleRecord>, StoreError> {
        self.journal.schedules(agent)
    }
    fn revivals(&self, agents: &[AgentId]) -> Result<Vec<Result<Revival, StoreError>>, StoreError> {
        self.journal.revivals(agents)
    }
}

/// Asks for one run of each action named in `go`, and answers the call once every outcome and echo came back.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Asker {
    waiting: u64,
    caller: Option<Uuid>,
}

impl Agent for Asker {
    fn name() -> &'static str {
        "asker"
    }

    fn handle_signal(&self, signal: &Signal) -> Reaction<Self> {
        let (waiting, effects) = match signal.kind().as_str() {
            "go" => {
                let actions = signal.data().as_array().cloned().unwrap_or_default();
                let runs: Vec<Effect> = actions
                    .iter()
                    .filter_map(|a| a.as_str().and_then(|a| ActionId::new(a).ok()))
                    .map(|action| Effect::run(action, json!({})))
                    .collect();
                // Each run's outcome, and the echo the emitting one asks for.
                (runs.len() as u64 + 1, runs)
            }
            "action.completed" | "action.failed" | "echo" => (self.waiting.saturating_sub(1), Vec::new()),
            "tell" => {
                let to = AgentId::new(signal.data().as_str().unwrap_or("nobody")).expect("an id");
                let told = Signal::new("told", Value::Null).expect("a kind");
                return Reaction::Keep(vec![Effect::emit(told, Target::Agent(to))]);
            }
            _ => return Reaction::Ignore,
        };
        let caller = if signal.kind().as_str() == "go" { Some(signal.id()) } else { self.caller };
        let mut effects = effects;
        if waiting == 0
            && let Some(caller) = caller
        {
            effects.push(Effect::reply(caller, json!("done")));
        }
        Reaction::Update(Asker { waiting, caller: caller.filter(|_| waiting > 0) }, effects)
    }
}

fn skill() -> Skill {
    let spec = |id: &str| ActionSpec::new(id, "For the test.").expect("a valid id");
    let quiet = DynAction::new(spec("fx.quiet"), |_, _| Box::pin(async { Ok(Value::Null) })).expect("an action");
    let emits = DynAction::new(spec("fx.emits"), |_, ctx| {
        let echo = Signal::new("echo", Value::Null).expect("a kind");
        let asked = ctx.effect(Effect::emit(echo, Target::Agent(ctx.agent_id.clone())));
        Box::pin(async move { asked.map(|()| Value::Null) })
    })
    .expect("an action");
    Skill::builder("fx", "1.0.0").dyn_action(quiet).dyn_action(emits).build().expect("a skill")
}

/// An `Asker` with the `fx` skill mounted, on a runtime over the noted SQLite journal in a new folder (kept
/// alive by the first value returned), snapshotting every `snapshot_every` inputs.
async fn asker(snapshot_every: u64) -> (tempfile::TempDir, Arc<Noting>, Runtime, AgentRef<Asker>) {
    let folder = tempfile::tempdir().expect("a folder");
    let journal = SqliteStore::open(folder.path().join("journal.db")).expect("the journal opens");
    let noting = Arc::new(Noting::new(journal));
    let runtime = Runtime::builder()
        .skill(skill())
        .agent::<Asker>()
        .expect("registered")
        .store(noting.clone())
        .snapshot_every(snapshot_every)
        .build();
    let agent = runtime.spawn(Asker::default(), SpawnOptions::default()).await.expect("it starts");
    agent.mount(&SkillId::new("fx").expect("an id"), Value::Null).await.expect("mounted");
    (folder, noting, runtime, agent)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_effects_were_done_is_journaled_ended_at_once_and_a_quiet_one_may_wait() {
    let (_folder, noting, runtime, agent) = asker(DEFAULT_SNAPSHOT_EVERY).await;
    let go = Signal::new("go", json!(["fx.quiet", "fx.emits"])).expect("a kind");
    agent.call(go, Duration::from_secs(30)).await.expect("both runs came back, and the echo");
    let mut kept = noting.kept.lock().expect("not poisoned").clone();
    kept.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
    let expected =
        [(ActionId::new("fx.emits").expect("an id"), false), (ActionId::new("fx.quiet").expect("an id"), true)];
    assert_eq!(kept, expected, "only the run with nothing done may be journaled late");
    runtime.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_that_end_at_their_first_poll_reach_the_journal_each_once_beside_its_outcome() {
    let (_folder, noting, runtime, agent) = asker(DEFAULT_SNAPSHOT_EVERY).await;
    // Four runs asked for at once, and the echo so the call is answered.
    let go = Signal::new("go", json!(["fx.quiet", "fx.quiet", "fx.quiet", "fx.emits"])).expect("a kind");
    agent.call(go, Duration::from_secs(30)).await.expect("every run came back, and the echo");
    let writes = noting.writes.lock().expect("not poisoned").clone();
    assert_eq!(writes.len(), 12, "each run: its record once, ended, its plan and its outcome: {writes:?}");
    for run in writes.chunks(3) {
        let (kinds, ids): (Vec<&str>, Vec<Uuid>) = run.iter().copied().unzip();
        assert_eq!(kinds, ["ended", "plan", "outcome"], "one run's writes, together: {writes:?}");
        assert!(ids.iter().all(|id| *id == ids[0]), "of one run: {writes:?}");
    }
    // And the journal has every run, ended, with its key.
    let runs = noting.journal.keyed_runs(&RunQuery::default()).expect("the journal reads");
    assert_eq!(runs.len(), 4);
    assert!(runs.iter().all(|(record, key)| record.status().is_final() && key.is_some()), "{runs:?}");
    runtime.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_due_while_outcomes_wait_for_the_agent_waits_for_them() {
    let (_folder, noting, runtime, agent) = asker(5).await;
    // Twenty outcomes wait in the agent's inbox at once; with the go and the echo, 22 inputs.
    let mut asked = vec![json!("fx.quiet"); 19];
    asked.push(json!("fx.emits"));
    agent.call(Signal::new("go", json!(asked)).expect("a kind"), Duration::from_secs(30)).await.expect("done");
    let seqs = noting.snapshots.lock().expect("not poisoned").clone();
    // Seq 0 is the snapshot a mount takes, before any input.
    let during: Vec<u64> = seqs.iter().copied().filter(|seq| *seq > 0).collect();
    assert!(!during.is_empty() && during.iter().all(|seq| *seq > 20), "none while outcomes waited: {seqs:?}");
    // It waits ten times its interval at most: 70 outcomes waiting (inputs 24 to 93) do not hold it back for ever.
    let mut asked = vec![json!("fx.quiet"); 69];
    asked.push(json!("fx.emits"));
    agent.call(Signal::new("go", json!(asked)).expect("a kind"), Duration::from_secs(30)).await.expect("done");
    let seqs = noting.snapshots.lock().expect("not poisoned").clone();
    assert!(seqs.iter().any(|seq| (24..93).contains(seq)), "one while outcomes still waited: {seqs:?}");
    assert!(seqs.windows(2).all(|pair| pair[1] - pair[0] <= 50), "at most ten intervals apart: {seqs:?}");
    runtime.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_emit_to_an_agent_elsewhere_is_kept_before_the_input_that_made_it() {
    let folder = tempfile::tempdir().expect("a folder");
    let journal = SqliteStore::open(folder.path().join("journal.db")).expect("the journal opens");
    let noting = Arc::new(Noting::new(journal));
    let (tx, mut handed) = tokio::sync::mpsc::unbounded_channel();
    let hook: agentry::runtime::ElsewhereHook = Arc::new(move |elsewhere| {
        let _ = tx.send(elsewhere);
    });
    let runtime =
        Runtime::builder().agent::<Asker>().expect("registered").store(noting.clone()).elsewhere(hook).build();
    let agent = runtime.spawn(Asker::default(), SpawnOptions::default()).await.expect("it starts");
    let tell = Signal::new("tell", json!("far")).expect("a kind");
    let input = tell.id();
    agent.send(tell).expect("sent");
    handed.recv().await.expect("the emit was handed over");
    // Written in this order, so no commit keeps the input without its emit.
    let order = noting.order.lock().expect("not poisoned").clone();
    let at = |write: &str| order.iter().position(|(w, id)| *w == write && *id == input);
    assert!(at("sending").is_some() && at("sending") < at("input"), "the emit first: {order:?}");
    runtime.shutdown(Duration::from_secs(5)).await;
}
