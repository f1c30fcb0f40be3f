//! A model of what an agent must hear of its jobs, against a real runtime on a SQLite journal: random
//! sequences of submitting jobs (idempotent or with side effects), letting one complete, cancelling one,
//! hibernating and thawing the agent, and shutting the runtime down and opening it again. Whatever the order,
//! the agent hears of each job's end exactly once, and as the model says: completed, cancelled, or (one with
//! side effects that was running when the runtime stopped) failed as interrupted, while an idempotent one runs
//! again; an agent with a job not ended never hibernates; and the board lists every job as the model has it.
//!
//! `AGENTRY_JOB_MODEL_CASES` sets how many sequences (16 by default).

use agentry::action::{ActionSpec, DynAction};
use agentry::events::{Event, EventKind};
use agentry::id::{AgentId, SkillId};
use agentry::policy::Policy;
use agentry::runtime::{AgentRef, Runtime, RuntimeError, SpawnOptions};
use agentry::signal::Signal;
use agentry::skill::{Skill, SkillDefinition};
use agentry_skills::Jobs;
use agentry_tests::{CALL, Operator, wait_for};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;

/// One gate per job number, shared by every runtime of the process: a job waits at its gate, and a permit
/// given to it stays there across a restart (a job started again finds it).
static GATES: LazyLock<Mutex<BTreeMap<u64, Arc<Semaphore>>>> = LazyLock::new(Mutex::default);

fn gate(n: u64) -> Arc<Semaphore> {
    GATES.lock().expect("not poisoned").entry(n).or_insert_with(|| Arc::new(Semaphore::new(0))).clone()
}

/// `hold.note` (idempotent) and `hold.charge` (side effects, not idempotent) wait at gate `n`.
fn hold() -> Skill {
    let action = |name: &str, idempotent: bool| {
        let spec = ActionSpec::new(name, "waits at its gate").unwrap().side_effects(true).idempotent(idempotent);
        let spec = spec.timeout(Duration::from_secs(3600)).params_schema(json!({"type": "object"}));
        DynAction::new(spec, |params, _| {
            let gate = gate(params["n"].as_u64().unwrap_or_default());
            Box::pin(async move {
                let _held = gate.acquire().await.map_err(|e| agentry::ActionError::critical(e.to_string()))?;
                Ok(json!("done"))
            })
        })
        .unwrap()
    };
    Skill::builder("hold", "1.0.0")
        .dyn_action(action("hold.note", true))
        .dyn_action(action("hold.charge", false))
        .build()
        .unwrap()
}

fn operator_id() -> AgentId {
    AgentId::new("operator").unwrap()
}

async fn open(dir: &Path) -> Runtime {
    let builder = Runtime::builder().agent::<Operator>().unwrap().skill(Jobs::skill().unwrap()).skill(hold());
    builder.max_jobs(16).durable(dir).unwrap().open().await.unwrap().0
}

async fn output(agent: &AgentRef<Operator>, action: &str, params: Value) -> Value {
    let signal = Signal::new("do", json!({"action": action, "params": params})).unwrap();
    let reply = agent.call(signal, CALL).await.unwrap();
    assert_eq!(reply["kind"], "action.completed", "{action}: {reply:#}");
    reply["outcome"]["output"].clone()
}

async fn heard(agent: &AgentRef<Operator>) -> Vec<Value> {
    let state = agent.call(Signal::new("ask", Value::Null).unwrap(), CALL).await.unwrap();
    serde_json::from_value::<Operator>(state).unwrap().job_signals
}

/// Waits until the agent heard of `count` job ends; what it heard.
async fn hears(runtime: &Runtime, events: &mut tokio::sync::broadcast::Receiver<Event>, count: usize) -> Vec<Value> {
    loop {
        let agent = runtime.get::<Operator>(&operator_id()).unwrap();
        let signals = heard(&agent).await;
        if signals.len() >= count {
            return signals;
        }
        wait_for(events, |e| matches!(e.kind, EventKind::JobEnded { .. })).await;
    }
}

#[derive(Debug, Clone)]
enum Step {
    Submit { idempotent: bool },
    Complete(usize),
    Cancel(usize),
    Hibernate,
    Thaw,
    Restart,
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    let step = prop_oneof![
        3 => any::<bool>().prop_map(|idempotent| Step::Submit { idempotent }),
        2 => (0usize..8).prop_map(Step::Complete),
        1 => (0usize..8).prop_map(Step::Cancel),
        2 => Just(Step::Hibernate),
        1 => Just(Step::Thaw),
        2 => Just(Step::Restart),
    ];
    prop::collection::vec(step, 1..16)
}

/// What the model says of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Pending,
    Completed,
    Cancelled,
    Interrupted,
}

impl Fate {
    /// The signal its end reaches the agent as, and the status the board lists.
    fn told(self) -> (&'static str, &'static str) {
        match self {
            Fate::Pending => ("", "running"),
            Fate::Completed => ("job.completed", "completed"),
            Fate::Cancelled => ("job.cancelled", "cancelled"),
            Fate::Interrupted => ("job.failed", "failed"),
        }
    }
}

struct ModelJob {
    id: Value,
    gate: u64,
    idempotent: bool,
    fate: Fate,
}

#[test]
fn what_an_agent_hears_of_its_jobs_across_hibernation_and_restarts_is_what_the_model_says() {
    let cases = std::env::var("AGENTRY_JOB_MODEL_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(16);
    let tokio = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("tokio");
    let mut runner = TestRunner::new(Config { cases, failure_persistence: None, ..Config::default() });
    let next_gate = std::sync::atomic::AtomicU64::new(0);
    runner
        .run(&steps(), |steps| {
            tokio.block_on(async {
                let folder = tempfile::tempdir().expect("a folder");
                let mut runtime = open(folder.path()).await;
                let mut policy = Policy::default();
                policy.limits.running_jobs = 16;
                let opts = SpawnOptions { id: Some(operator_id()), policy, ..SpawnOptions::default() };
                let agent = runtime.spawn(Operator::default(), opts).await.unwrap();
                for skill in ["jobs", "hold"] {
                    agent.mount(&SkillId::new(skill).unwrap(), Value::Null).await.unwrap();
                }
                let mut events = runtime.events();
                let mut jobs: Vec<ModelJob> = Vec::new();
                let ended = |jobs: &[ModelJob]| jobs.iter().filter(|j| j.fate != Fate::Pending).count();
                for step in &steps {
                    match step {
                        Step::Submit { idempotent } => {
                            let gate = next_gate.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            let action = if *idempotent { "hold.note" } else { "hold.charge" };
                            let agent = runtime.get::<Operator>(&operator_id()).unwrap();
                            let id = output(&agent, "jobs.submit", json!({"action": action, "params": {"n": gate}}))
                                .await["job"]
                                .clone();
                            // Until it runs, so what a restart does to it is decided.
                            loop {
                                let status = output(&agent, "jobs.status", json!({"job": id})).await;
                                if status["status"] == "running" {
                                    break;
                                }
                                wait_for(&mut events, |e| matches!(e.kind, EventKind::ActionStarted { .. })).await;
                            }
                            jobs.push(ModelJob { id, gate, idempotent: *idempotent, fate: Fate::Pending });
                        }
                        Step::Complete(i) => {
                            let Some(job) = jobs.get_mut(*i).filter(|j| j.fate == Fate::Pending) else { continue };
                            gate(job.gate).add_permits(1);
                            job.fate = Fate::Completed;
                            hears(&runtime, &mut events, ended(&jobs)).await;
                        }
                        Step::Cancel(i) => {
                            let Some(job) = jobs.get_mut(*i) else { continue };
                            let agent = runtime.get::<Operator>(&operator_id()).unwrap();
                            let answer = output(&agent, "jobs.cancel", json!({"job": job.id})).await;
                            let was_pending = job.fate == Fate::Pending;
                            if was_pending {
                                job.fate = Fate::Cancelled;
                            }
                            prop_assert_eq!(&answer["cancelled"], &json!(was_pending), "{:?}", steps);
                            prop_assert_eq!(&answer["status"], &json!(job.fate.told().1), "{:?}", steps);
                            hears(&runtime, &mut events, ended(&jobs)).await;
                        }
                        Step::Hibernate => {
                            let pending = jobs.iter().any(|j| j.fate == Fate::Pending);
                            match runtime.hibernate(&operator_id()).await {
                                Err(RuntimeError::Busy { why, .. }) => {
                                    prop_assert!(pending && why.contains("jobs"), "busy with {why}: {:?}", steps)
                                }
                                Ok(()) => prop_assert!(!pending, "fell asleep with jobs not ended: {:?}", steps),
                                // Asleep already.
                                Err(RuntimeError::NoSuchAgent(_)) => prop_assert!(!pending, "{:?}", steps),
                                Err(other) => prop_assert!(false, "{other}: {:?}", steps),
                            }
                        }
                        Step::Thaw => runtime.thaw(&operator_id()).await.unwrap(),
                        Step::Restart => {
                            runtime.shutdown(Duration::ZERO).await;
                            drop(runtime);
                            for job in jobs.iter_mut().filter(|j| j.fate == Fate::Pending && !j.idempotent) {
                                job.fate = Fate::Interrupted;
                            }
                            runtime = open(folder.path()).await;
                            events = runtime.events();
                            // The agent is asleep, or has jobs, or had ends to hear: thawed for the check.
                            runtime.thaw(&operator_id()).await.unwrap();
                            hears(&runtime, &mut events, ended(&jobs)).await;
                        }
                    }
                }
                // The rest complete; then the agent heard of every job once, as the model says, and the board
                // lists each so.
                for job in jobs.iter_mut().filter(|j| j.fate == Fate::Pending) {
                    gate(job.gate).add_permits(1);
                    job.fate = Fate::Completed;
                }
                let told = hears(&runtime, &mut events, jobs.len()).await;
                prop_assert_eq!(told.len(), jobs.len(), "each job heard of once: {:#?} {:?}", told, steps);
                let agent = runtime.get::<Operator>(&operator_id()).unwrap();
                let listed = output(&agent, "jobs.list", json!({})).await;
                for job in &jobs {
                    let heard: Vec<&Value> = told.iter().filter(|t| t["job"]["id"] == job.id).collect();
                    prop_assert_eq!(heard.len(), 1, "{:?}: {:#?} {:?}", job.fate, told, steps);
                    let (kind, status) = job.fate.told();
                    prop_assert_eq!(&heard[0]["kind"], &json!(kind), "{:#?} {:?}", heard, steps);
                    if job.fate == Fate::Interrupted {
                        prop_assert_eq!(&heard[0]["job"]["class"], &json!("interrupted"));
                    }
                    let on_board = listed.as_array().unwrap().iter().find(|l| l["id"] == job.id);
                    prop_assert_eq!(on_board.map(|l| l["status"].clone()), Some(json!(status)), "{:?}", steps);
                }
                runtime.shutdown(Duration::from_secs(5)).await;
                Ok(())
            })
        })
        .unwrap_or_else(|failure| panic!("{failure}"));
}
