//! Action throughput through the actor layer, beside a raw-tokio baseline in the same run.
//!
//! `actions/agentry`: one agent gets a signal asking for `BATCH` runs of a no-op action; each run goes through
//! the gate, the journal and the event stream into its own supervised task, and comes back to the agent as an
//! `action.completed` signal; the agent replies to the caller once all have come back.
//! `actions/raw_tokio`: the same shape with nothing but tokio — jobs sent over an mpsc channel to a task that
//! spawns a task per job, each sending its result back over another channel.
//! Criterion reports both in elements (actions) per second; their ratio is the runtime's overhead.

use agentry::action::{ActionSpec, DynAction};
use agentry::agent::{Agent, Reaction};
use agentry::effect::Effect;
use agentry::id::{ActionId, SkillId};
use agentry::runtime::{AgentRef, Runtime, SpawnOptions};
use agentry::signal::Signal;
use agentry::skill::Skill;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use uuid::Uuid;

const BATCH: u64 = 1_000;

/// Asks for `n` runs of `noop.run` and replies to the asking call once all have completed.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Pump {
    waiting: u64,
    caller: Option<Uuid>,
}

impl Agent for Pump {
    fn name() -> &'static str {
        "pump"
    }

    fn handle_signal(&self, signal: &Signal) -> Reaction<Self> {
        match signal.kind().as_str() {
            "go" => {
                let n = signal.data()["n"].as_u64().unwrap_or(0);
                let action = ActionId::new("noop.run").expect("a valid id");
                let effects = (0..n).map(|i| Effect::run(action.clone(), json!({"i": i}))).collect();
                Reaction::Update(Pump { waiting: n, caller: Some(signal.id()) }, effects)
            }
            "action.completed" | "action.failed" => {
                let waiting = self.waiting.saturating_sub(1);
                let effects = match (waiting, self.caller) {
                    (0, Some(caller)) => vec![Effect::reply_to(caller, json!("done"))],
                    _ => Vec::new(),
                };
                Reaction::Update(Pump { waiting, caller: self.caller.filter(|_| waiting > 0) }, effects)
            }
            _ => Reaction::Ignore,
        }
    }
}

fn noop_skill() -> Skill {
    let spec = ActionSpec::new("noop.run", "Does nothing.")
        .expect("a valid id")
        .params_schema(json!({"type": "object", "properties": {"i": {"type": "integer"}}}));
    let action = DynAction::new(spec, |params, _| Box::pin(async move { Ok(params) })).expect("a valid schema");
    Skill::builder("noop", "1.0.0").dyn_action(action).build().expect("a valid skill")
}

async fn pump() -> (Runtime, AgentRef<Pump>) {
    let runtime = Runtime::builder().skill(noop_skill()).build();
    let opts = SpawnOptions { max_in_flight: BATCH as usize, ..SpawnOptions::default() };
    let agent = runtime.spawn(Pump::default(), opts).await.expect("the agent starts");
    agent.mount(&SkillId::new("noop").expect("a valid id"), Value::Null).await.expect("the skill mounts");
    (runtime, agent)
}

async fn raw_tokio_batch(n: u64) {
    let (jobs, mut incoming) = mpsc::unbounded_channel::<Value>();
    let (results, mut done) = mpsc::unbounded_channel::<Value>();
    let dispatcher = tokio::spawn(async move {
        while let Some(job) = incoming.recv().await {
            let results = results.clone();
            tokio::spawn(async move {
                let _ = results.send(job);
            });
        }
    });
    for i in 0..n {
        let _ = jobs.send(json!({"i": i}));
    }
    for _ in 0..n {
        done.recv().await;
    }
    drop(jobs);
    let _ = dispatcher.await;
}

fn actions(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime");
    let (runtime, agent) = rt.block_on(pump());
    let mut group = c.benchmark_group("actions");
    group.throughput(Throughput::Elements(BATCH));
    group.bench_function("agentry", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    let go = Signal::new("go", json!({"n": BATCH})).expect("a valid kind");
                    agent.call(go, Duration::from_secs(60)).await.expect("the batch completes");
                }
                start.elapsed()
            })
        });
    });
    group.bench_function("raw_tokio", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    raw_tokio_batch(BATCH).await;
                }
                start.elapsed()
            })
        });
    });
    group.finish();
    rt.block_on(runtime.shutdown(Duration::from_secs(1)));
}

criterion_group!(benches, actions);
criterion_main!(benches);
