//! What a runtime brings back from journals a crash leaves between two of the journal's commits. Such states
//! cannot be made by killing a process at will, so these tests write them with the runtime's own pen, here,
//! where it lives: outside the crate nothing can write a journal.

use super::{Runtime, SpawnOptions};
use crate::action::{ActionSpec, DynAction, ErrorClass, JobRecord, JobStatus, RunKey};
use crate::agent::{Agent, Reaction};
use crate::effect::Effect;
use crate::id::{ActionId, AgentId};
use crate::signal::Signal;
use crate::skill::{BuildError, Skill};
use crate::store::{Durable, JobPlan, PEN, RunPlan, RunRecord, RunStatus, RunUpdate, SqliteStore, Store};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

/// The pure action the teller asks for.
const COUNT: &str = "tally.count";

/// An agent that asks for a run of [`COUNT`] when told `do`, and counts what it hears back.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Teller {
    completed: u64,
    interrupted: u64,
    /// The jobs whose end it was told, in order.
    jobs_ended: Vec<uuid::Uuid>,
}

impl Agent for Teller {
    fn name() -> &'static str {
        "teller"
    }

    fn start_skills() -> Result<Vec<(Skill, Value)>, BuildError> {
        let spec = ActionSpec::new(COUNT, "counts, with no side effects")?.params_schema(json!({"type": "object"}));
        let count = DynAction::new(spec, |_, _| Box::pin(async { Ok(json!({"counted": true})) }))?;
        Ok(vec![(Skill::builder("tally", "1.0.0").dyn_action(count).build()?, Value::Null)])
    }

    fn handle_signal(&self, signal: &Signal) -> Reaction<Self> {
        let mut next = self.clone();
        match signal.kind().as_str() {
            "do" => Reaction::Keep(vec![Effect::run(id(COUNT), json!({}))]),
            "action.completed" => {
                next.completed += 1;
                Reaction::Update(next, Vec::new())
            }
            "action.failed" => {
                let class = signal.outcome().and_then(|r| r.outcome.error.as_ref()).map(|e| e.class);
                next.interrupted += u64::from(class == Some(ErrorClass::Interrupted));
                Reaction::Update(next, Vec::new())
            }
            "job.completed" => {
                next.jobs_ended.extend(signal.data()["job"]["id"].as_str().and_then(|j| j.parse::<uuid::Uuid>().ok()));
                Reaction::Update(next, Vec::new())
            }
            _ => Reaction::Keep(Vec::new()),
        }
    }
}

fn id(text: &str) -> ActionId {
    ActionId::new(text).expect("a valid action id")
}

fn teller_id() -> AgentId {
    AgentId::new("w0").expect("a valid agent id")
}

async fn open(dir: &Path) -> (Runtime, crate::recovery::Recovery) {
    let builder = Runtime::builder().agent::<Teller>().expect("the teller registers");
    builder.durable(dir).expect("the journal opens").open().await.expect("the runtime opens")
}

/// A journal with the teller spawned and nothing else going on.
async fn spawned(dir: &Path) {
    let (runtime, _) = open(dir).await;
    let options = SpawnOptions { id: Some(teller_id()), ..SpawnOptions::default() };
    runtime.spawn(Teller::default(), options).await.expect("the teller starts");
    runtime.shutdown(Duration::from_secs(5)).await;
}

async fn teller(runtime: &Runtime) -> Teller {
    let agent = runtime.get::<Teller>(&teller_id()).expect("the teller is back");
    agent.state().await.expect("its state").domain
}

/// A run whose end reached the journal but whose outcome did not (the process died between the two commits):
/// the agent is told it was interrupted, once, and decides.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_ended_without_its_outcome_kept_reaches_the_agent_as_interrupted_once() {
    let folder = tempfile::tempdir().expect("a folder");
    let dir = folder.path();
    spawned(dir).await;
    // The input that asked for the run, and the run journaled ended, its outcome not kept.
    let w0 = teller_id();
    {
        let store = SqliteStore::open(dir.join("journal.db")).expect("the journal opens");
        let snapshot = store.snapshot(&w0).expect("it reads").expect("the teller's snapshot");
        let inputs = store.inputs_after(&w0, snapshot.seq).expect("it reads");
        let seq = inputs.last().map_or(snapshot.seq, |(seq, _)| *seq) + 1;
        let ask = Signal::new("do", json!({})).expect("a kind");
        store.append_input(PEN, &w0, seq, &ask);
        let run = uuid::Uuid::now_v7();
        store.record(PEN, RunRecord::queued(run, w0.clone(), id(COUNT), &json!({}), ask.id())).expect("recorded");
        // The key the replayed input asks for its run with, so the recovery finds this run.
        let mut key = String::new();
        RunKey::Input { incarnation: snapshot.incarnation, seq, index: 0 }.write_to(&w0, run, &mut key);
        let plan = RunPlan { key, params: json!({}), by_agent: true, cause: Some(ask.id()), correlation: ask.id() };
        store.run_planned(PEN, run, &plan);
        let done = RunUpdate { status: Some(RunStatus::Completed), ..RunUpdate::default() };
        store.update(PEN, run, done, chrono::Utc::now()).expect("ended");
    }
    for round in 0..2 {
        let (runtime, _) = open(dir).await;
        let state = teller(&runtime).await;
        runtime.shutdown(Duration::from_secs(5)).await;
        assert_eq!(state.interrupted, 1, "round {round}: told once, and not again after another restart: {state:?}");
        assert_eq!(state.completed, 0, "round {round}: the run is not made up: {state:?}");
    }
}

/// A job's end kept for its agent but not given to it, the agent asleep (the process died right after the end
/// was kept): the recovery wakes the agent, and it is given the end once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_end_the_agent_was_not_given_is_given_once_even_to_a_sleeper() {
    let folder = tempfile::tempdir().expect("a folder");
    let dir = folder.path();
    spawned(dir).await;
    let job = uuid::Uuid::now_v7();
    {
        let store = SqliteStore::open(dir.join("journal.db")).expect("the journal opens");
        let mut record = store.agent(&teller_id()).expect("it reads").expect("the teller's record");
        record.asleep = true;
        store.agent_alive(PEN, record);
        let now = chrono::Utc::now();
        let job_record = JobRecord {
            id: job,
            agent: teller_id(),
            action: id(COUNT),
            status: JobStatus::Completed,
            progress: 1.0,
            message: None,
            output: Some(json!("done")),
            error: None,
            class: None,
            submitted_at: now,
            ended_at: Some(now),
        };
        let plan =
            JobPlan { key: "k".into(), params: json!({}), stack: Vec::new(), correlation: job, from_outside: false };
        store.job_submitted(PEN, &job_record, &plan);
        let end = Signal::new("job.completed", json!({"job": job_record})).expect("a kind");
        store.job_changed(PEN, &job_record, Some(&end));
        let _ = store.flushed().await;
    }
    for round in 0..2 {
        let (runtime, recovery) = open(dir).await;
        assert!(recovery.asleep.is_empty(), "round {round}: a sleeper with a job's end to be given wakes");
        let state = teller(&runtime).await;
        runtime.shutdown(Duration::from_secs(5)).await;
        assert_eq!(state.jobs_ended, vec![job], "round {round}: given once, and not again after another restart");
    }
}
