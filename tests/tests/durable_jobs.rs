//! Jobs on a durable runtime (a real SQLite journal, and each test again on a real PostgreSQL server), across a stop and a recovery: an unstarted job starts, an
//! interrupted idempotent one runs again with the same key, an interrupted one with side effects reaches its
//! agent as `job.failed` with class `Interrupted`, the board lists them again with their progress, a cancel
//! after the restart answers for what really happened, and a job's end the agent was not given yet is given
//! once, waking it from hibernation.
//!
//! The runtime stops with `shutdown`, which leaves jobs as the journal has them (as a crash does); the
//! `durability` tests kill a real process with SIGKILL.

use agentry::action::{ActionContext, ActionError, ActionSpec, DynAction};
use agentry::events::{Event, EventKind};
use agentry::id::AgentId;
use agentry::policy::Policy;
use agentry::runtime::{AgentRef, Runtime, SpawnOptions};
use agentry::signal::Signal;
use agentry::skill::Skill;
use agentry::skill::SkillDefinition;
use agentry_skills::Jobs;
use agentry_tests::{CALL, Operator, wait_for};
use serde_json::{Value, json};
use std::io::Write;
use std::path::Path;
use std::time::Duration;

/// Appends `<key> <what>` to the work file in the run's drive, and returns how many lines of that key and what
/// it then holds.
fn append(ctx: &ActionContext, what: &str) -> Result<usize, ActionError> {
    let path = ctx.drive()?.join("lines.txt");
    let critical = |e: std::io::Error| ActionError::critical(e.to_string());
    std::fs::create_dir_all(path.parent().expect("a folder")).map_err(critical)?;
    let line = format!("{} {what}\n", ctx.idempotency_key());
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(line.as_bytes()))
        .map_err(critical)?;
    Ok(std::fs::read_to_string(&path).map_err(critical)?.lines().filter(|l| *l == line.trim_end()).count())
}

/// The lines of the operator's work file.
fn lines(dir: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(dir.join("agents/operator/work/lines.txt")).unwrap_or_default();
    text.lines().map(str::to_owned).collect()
}

/// One gate per tag a test gives `work.charge` or `work.note`: it gets a permit once the action reported its
/// progress and wrote its line, so a test stops the runtime only after that.
static CHARGED: std::sync::LazyLock<
    std::sync::Mutex<std::collections::HashMap<String, std::sync::Arc<tokio::sync::Semaphore>>>,
> = std::sync::LazyLock::new(Default::default);

fn charged(tag: &str) -> std::sync::Arc<tokio::sync::Semaphore> {
    CHARGED
        .lock()
        .unwrap()
        .entry(tag.to_owned())
        .or_insert_with(|| std::sync::Arc::new(tokio::sync::Semaphore::new(0)))
        .clone()
}

/// `work.charge` (side effects, not idempotent) reports half-way progress, writes `charge`, tells the gate of its
/// `tag` (see [`charged`]), and never ends;
/// `work.note` (idempotent) writes `note`, tells the gate of its `tag`, and ends once started `starts` times with
/// the same key (1 unless said), waiting for ever before that.
fn work() -> Skill {
    let charge = ActionSpec::new("work.charge", "charges").unwrap().side_effects(true).idempotent(false);
    let charge = DynAction::new(charge.params_schema(json!({"type": "object"})), |params, ctx| {
        Box::pin(async move {
            ctx.progress(0.5, Some("half way".into()));
            append(&ctx, "charge")?;
            if let Some(tag) = params["tag"].as_str() {
                charged(tag).add_permits(1);
            }
            std::future::pending::<()>().await;
            Ok(Value::Null)
        })
    })
    .unwrap();
    let note = ActionSpec::new("work.note", "notes").unwrap().side_effects(true).idempotent(true);
    let note = DynAction::new(note.params_schema(json!({"type": "object"})), |params, ctx| {
        Box::pin(async move {
            let starts = append(&ctx, "note")?;
            if let Some(tag) = params["tag"].as_str() {
                charged(tag).add_permits(1);
            }
            if starts < params["starts"].as_u64().unwrap_or(1) as usize {
                std::future::pending::<()>().await;
            }
            Ok(json!({"starts": starts}))
        })
    })
    .unwrap();
    Skill::builder("work", "1.0.0").dyn_action(charge).dyn_action(note).build().unwrap()
}

fn operator_id() -> AgentId {
    AgentId::new("operator").unwrap()
}

/// Where a test keeps its journal: a SQLite file in its folder, or the PostgreSQL database at `postgres` (the
/// agents' drives stay in the folder).
#[derive(Clone, Copy)]
struct Journal<'a> {
    dir: &'a Path,
    postgres: Option<&'a str>,
}

impl Journal<'_> {
    /// A tag of this run's own for the gates of `work` (see [`charged`]): a test runs on both stores at once.
    fn tag(&self, base: &str) -> String {
        format!("{base}-{}", if self.postgres.is_some() { "postgres" } else { "sqlite" })
    }
}

/// A durable runtime on `journal` with the operator type, the `jobs` skill and `work`; what its recovery brought
/// back.
async fn open(journal: Journal<'_>) -> (Runtime, agentry::runtime::Recovery) {
    let builder = Runtime::builder().agent::<Operator>().unwrap().skill(Jobs::skill().unwrap()).skill(work());
    let builder = match journal.postgres {
        Some(url) => {
            let store = agentry::store::PostgresStore::connect(url).unwrap();
            builder.data_dir(journal.dir).store(std::sync::Arc::new(store))
        }
        None => builder.durable(journal.dir).unwrap(),
    };
    builder.open().await.unwrap()
}

/// Runs a test on a SQLite journal in a new folder, and again on a PostgreSQL server of its own.
macro_rules! on_both_stores {
    ($test:ident, $on_postgres:ident, $body:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $test() {
            let folder = tempfile::tempdir().unwrap();
            $body(Journal { dir: folder.path(), postgres: None }).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $on_postgres() {
            let Some(postgres) = agentry_tests::postgres::or_skip("durable_jobs") else { return };
            let folder = tempfile::tempdir().unwrap();
            $body(Journal { dir: folder.path(), postgres: Some(&postgres.url()) }).await;
        }
    };
}

/// Spawns the operator with `jobs` and `work` mounted.
async fn spawn(runtime: &Runtime, policy: Policy) -> AgentRef<Operator> {
    let opts = SpawnOptions { id: Some(operator_id()), policy, ..SpawnOptions::default() };
    let agent = runtime.spawn(Operator::default(), opts).await.unwrap();
    for skill in ["jobs", "work"] {
        agent.mount(&agentry::id::SkillId::new(skill).unwrap(), Value::Null).await.unwrap();
    }
    agent
}

/// Runs an action through the operator; its output, which must be there.
async fn output(agent: &AgentRef<Operator>, action: &str, params: Value) -> Value {
    let signal = Signal::new("do", json!({"action": action, "params": params})).unwrap();
    let reply = agent.call(signal, CALL).await.unwrap();
    assert_eq!(reply["kind"], "action.completed", "{action}: {reply:#}");
    reply["outcome"]["output"].clone()
}

async fn operator(agent: &AgentRef<Operator>) -> Operator {
    serde_json::from_value(agent.call(Signal::new("ask", Value::Null).unwrap(), CALL).await.unwrap()).unwrap()
}

async fn submit(agent: &AgentRef<Operator>, action: &str, params: Value) -> Value {
    output(agent, "jobs.submit", json!({"action": action, "params": params})).await["job"].clone()
}

/// Waits for the job's run of `action` to start.
async fn started(events: &mut tokio::sync::broadcast::Receiver<Event>, action: &str) {
    wait_for(events, |e| matches!(&e.kind, EventKind::ActionStarted { action: a, .. } if a.as_str() == action)).await;
}

/// Waits until the operator was told of `count` job ends, and returns them.
async fn told(
    agent: &AgentRef<Operator>,
    events: &mut tokio::sync::broadcast::Receiver<Event>,
    count: usize,
) -> Vec<Value> {
    loop {
        let signals = operator(agent).await.job_signals;
        if signals.len() >= count {
            return signals;
        }
        // The operator gets a job's end before it is announced: asked after that, it has it.
        wait_for(events, |e| matches!(e.kind, EventKind::JobEnded { .. })).await;
    }
}

on_both_stores!(
    after_a_stop_an_unstarted_job_starts_and_one_with_side_effects_that_was_running_is_interrupted,
    unstarted_and_interrupted_jobs_on_postgres,
    unstarted_and_interrupted
);

async fn unstarted_and_interrupted(journal: Journal<'_>) {
    let dir = journal.dir;
    let (charge, note) = {
        let (runtime, _) = open(journal).await;
        let mut policy = Policy::default();
        policy.limits.running_jobs = 1;
        let agent = spawn(&runtime, policy).await;
        let mut events = runtime.events();
        let charge = submit(&agent, "work.charge", json!({"tag": journal.tag("after_a_stop")})).await;
        started(&mut events, "work.charge").await;
        // Its progress reported: what the stop leaves is what the test checks.
        charged(&journal.tag("after_a_stop")).acquire().await.unwrap().forget();
        // One job at a time: this one waits for a slot.
        let note = submit(&agent, "work.note", json!({})).await;
        let listed = output(&agent, "jobs.list", json!({})).await;
        assert_eq!(listed[1]["status"], "queued", "{listed:#}");
        assert_eq!((listed[0]["id"].clone(), listed[1]["id"].clone()), (charge.clone(), note.clone()));
        runtime.shutdown(Duration::ZERO).await;
        (charge, note)
    };
    let (runtime, recovery) = open(journal).await;
    assert_eq!(recovery.agents, vec![operator_id()]);
    let agent = runtime.get::<Operator>(&operator_id()).unwrap();
    let mut events = runtime.events();
    let signals = told(&agent, &mut events, 2).await;
    let kinds: Vec<(Value, Value)> = signals.iter().map(|s| (s["kind"].clone(), s["job"]["id"].clone())).collect();
    assert!(kinds.contains(&(json!("job.failed"), charge.clone())), "{signals:#?}");
    assert!(kinds.contains(&(json!("job.completed"), note.clone())), "{signals:#?}");
    assert_eq!(signals.len(), 2, "each job ended once: {signals:#?}");

    // Listed again, with what the interrupted one reported before the stop.
    let status = output(&agent, "jobs.status", json!({"job": charge})).await;
    assert_eq!(
        (status["status"].clone(), status["class"].clone()),
        (json!("failed"), json!("interrupted")),
        "{status:#}"
    );
    assert_eq!((status["progress"].clone(), status["message"].clone()), (json!(0.5), json!("half way")));
    // A cancel now says the truth: it had already ended, as failed.
    let cancelled = output(&agent, "jobs.cancel", json!({"job": charge})).await;
    assert_eq!(cancelled, json!({"cancelled": false, "status": "failed"}));
    assert_eq!(output(&agent, "jobs.list", json!({})).await.as_array().unwrap().len(), 2);
    // The side effect happened once, never again.
    assert_eq!(lines(dir).iter().filter(|l| l.ends_with(" charge")).count(), 1, "{:?}", lines(dir));
    runtime.shutdown(Duration::from_secs(5)).await;
}

on_both_stores!(
    an_interrupted_idempotent_job_runs_again_with_the_same_key_and_can_be_cancelled_truthfully,
    an_interrupted_idempotent_job_on_postgres,
    idempotent_again
);

async fn idempotent_again(journal: Journal<'_>) {
    let dir = journal.dir;
    let (note, again) = {
        let (runtime, _) = open(journal).await;
        let agent = spawn(&runtime, Policy::default()).await;
        let mut events = runtime.events();
        let note = submit(&agent, "work.note", json!({"starts": 2, "tag": journal.tag("idempotent")})).await;
        let again = submit(&agent, "work.charge", json!({})).await;
        started(&mut events, "work.note").await;
        started(&mut events, "work.charge").await;
        // Its first start wrote its line before the stop.
        charged(&journal.tag("idempotent")).acquire().await.unwrap().forget();
        // A second submission by the same run would be the same job; another run's is another.
        assert_ne!(note, again);
        runtime.shutdown(Duration::ZERO).await;
        (note, again)
    };
    let (runtime, _) = open(journal).await;
    let agent = runtime.get::<Operator>(&operator_id()).unwrap();
    let mut events = runtime.events();
    let signals = told(&agent, &mut events, 2).await;
    let completed = signals.iter().find(|s| s["job"]["id"] == note).expect("the note job ended");
    assert_eq!(completed["kind"], "job.completed", "{signals:#?}");
    assert_eq!(completed["job"]["output"], json!({"starts": 2}), "started again with the same key");
    let written = lines(dir);
    let notes: Vec<&String> = written.iter().filter(|l| l.ends_with(" note")).collect();
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert_eq!(notes[0], notes[1], "one key for both starts");
    let failed = signals.iter().find(|s| s["job"]["id"] == again).expect("the charge job ended");
    assert_eq!((failed["kind"].clone(), failed["job"]["class"].clone()), (json!("job.failed"), json!("interrupted")));
    runtime.shutdown(Duration::from_secs(5)).await;
}

on_both_stores!(
    a_job_started_again_after_a_stop_is_cancelled_for_real,
    a_job_started_again_on_postgres,
    cancelled_for_real
);

async fn cancelled_for_real(journal: Journal<'_>) {
    let note = {
        let (runtime, _) = open(journal).await;
        let agent = spawn(&runtime, Policy::default()).await;
        let mut events = runtime.events();
        // Ends only on its third start: it is still going after the restart.
        let note = submit(&agent, "work.note", json!({"starts": 3})).await;
        started(&mut events, "work.note").await;
        runtime.shutdown(Duration::ZERO).await;
        note
    };
    let (runtime, _) = open(journal).await;
    let agent = runtime.get::<Operator>(&operator_id()).unwrap();
    let mut events = runtime.events();
    let status = output(&agent, "jobs.status", json!({"job": note})).await;
    assert!(matches!(status["status"].as_str(), Some("queued" | "running")), "going again: {status:#}");
    let cancelled = output(&agent, "jobs.cancel", json!({"job": note})).await;
    assert_eq!(cancelled, json!({"cancelled": true, "status": "cancelled"}));
    let signals = told(&agent, &mut events, 1).await;
    assert_eq!((signals[0]["kind"].clone(), signals[0]["job"]["id"].clone()), (json!("job.cancelled"), note.clone()));
    runtime.shutdown(Duration::from_secs(5)).await;
    // Cancelled, it stays so: the next recovery does not start it again.
    let (runtime, _) = open(journal).await;
    let agent = runtime.get::<Operator>(&operator_id()).unwrap();
    let status = output(&agent, "jobs.status", json!({"job": note})).await;
    assert_eq!(status["status"], "cancelled");
    assert_eq!(operator(&agent).await.job_signals.len(), 1, "told once");
    runtime.shutdown(Duration::from_secs(5)).await;
}
