//! Jobs through an agent, beside runs through the same agent in the same run.
//!
//! One agent gets a signal asking for `BATCH` units of work and replies once all have ended:
//! - `jobs/runs_*` (the baseline): `BATCH` runs of a no-op action, each back as `action.completed`;
//! - `jobs/jobs_*`: `BATCH` runs of `bench.submit`, each submitting a job of that no-op action (the job's run
//!   goes through the agent's gate as a nested call), each back as `job.completed`.
//!
//! Each in memory and on a durable SQLite journal, where every job is journaled (submitted, started, ended,
//! its end consumed). `jobs/jobs_sqlite_side_effects` submits jobs of an action with side effects, whose run
//! waits for the journal's write-ahead (the job's start durable before the action begins): its ratio to
//! `jobs/jobs_sqlite` is the cost of a durable job's write-ahead. Criterion reports each in elements (runs or
//! jobs) per second.

use agentry::action::{ActionSpec, DynAction};
use agentry::agent::{Agent, Reaction};
use agentry::effect::Effect;
use agentry::id::{ActionId, SkillId};
use agentry::policy::Policy;
use agentry::runtime::{AgentRef, Runtime, SpawnOptions};
use agentry::signal::Signal;
use agentry::skill::Skill;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use uuid::Uuid;

const BATCH: u64 = 1_000;

/// Asks for `n` runs of `action` (or `n` jobs of it, through `bench.submit`) and replies once all have ended.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Pump {
    waiting: u64,
    jobs: bool,
    caller: Option<Uuid>,
}

impl Pump {
    fn one_ended(&self) -> Reaction<Self> {
        let waiting = self.waiting.saturating_sub(1);
        let effects = match (waiting, self.caller) {
            (0, Some(caller)) => vec![Effect::reply(caller, json!("done"))],
            _ => Vec::new(),
        };
        Reaction::Update(Pump { waiting, jobs: self.jobs, caller: self.caller.filter(|_| waiting > 0) }, effects)
    }
}

impl Agent for Pump {
    fn name() -> &'static str {
        "job-pump"
    }

    fn handle_signal(&self, signal: &Signal) -> Reaction<Self> {
        let data = signal.data();
        match signal.kind().as_str() {
            "go" => {
                let n = data["n"].as_u64().unwrap_or(0);
                let jobs = data["jobs"] == json!(true);
                let action = data["action"].as_str().unwrap_or("noop.run");
                let effects = (0..n)
                    .map(|i| match jobs {
                        true => Effect::run(id("bench.submit"), json!({"action": action, "i": i})),
                        false => Effect::run(id(action), json!({"i": i})),
                    })
                    .collect();
                Reaction::Update(Pump { waiting: n, jobs, caller: Some(signal.id()) }, effects)
            }
            "action.completed" | "action.failed" if !self.jobs => self.one_ended(),
            "job.completed" | "job.failed" | "job.cancelled" if self.jobs => self.one_ended(),
            _ => Reaction::Ignore,
        }
    }
}

fn id(text: &str) -> ActionId {
    ActionId::new(text).expect("a valid id")
}

/// `noop.run` (no side effects), `noop.write` (side effects), and `bench.submit`, which submits a job of the
/// action it names.
fn skill() -> Skill {
    let schema = json!({"type": "object"});
    let spec = ActionSpec::new("noop.run", "Does nothing.").expect("an id").params_schema(schema.clone());
    let run = DynAction::new(spec.clone(), |params, _| Box::pin(async move { Ok(params) })).expect("a schema");
    let spec = ActionSpec { id: id("noop.write"), ..spec }.side_effects(true);
    let write = DynAction::new(spec, |params, _| Box::pin(async move { Ok(params) })).expect("a schema");
    let spec = ActionSpec::new("bench.submit", "Submits a job.").expect("an id").params_schema(schema);
    let submit = DynAction::new(spec, |params, ctx| {
        Box::pin(async move {
            let action = params["action"].as_str().unwrap_or("noop.run").to_owned();
            Ok(json!({"job": ctx.submit_job(action, json!({"i": params["i"]}))?}))
        })
    })
    .expect("a schema");
    Skill::builder("noop", "1.0.0").dyn_action(run).dyn_action(write).dyn_action(submit).build().expect("a skill")
}

async fn pump(durable: Option<&std::path::Path>) -> (Runtime, AgentRef<Pump>) {
    let builder = Runtime::builder().skill(skill()).max_jobs(64);
    let runtime = match durable {
        Some(dir) => builder.durable(dir).expect("the journal opens").build(),
        None => builder.build(),
    };
    let mut policy = Policy::default();
    policy.limits.running_jobs = 64;
    policy.limits.queued_jobs = BATCH as usize;
    let opts = SpawnOptions { max_in_flight: BATCH as usize, policy, ..SpawnOptions::default() };
    let agent = runtime.spawn(Pump::default(), opts).await.expect("the agent starts");
    agent.mount(&SkillId::new("noop").expect("an id"), Value::Null).await.expect("the skill mounts");
    (runtime, agent)
}

fn jobs(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime");
    let mut group = c.benchmark_group("jobs");
    group.throughput(Throughput::Elements(BATCH));
    let batches = |agent: AgentRef<Pump>, action: &'static str, jobs: bool| {
        move |iters: u64| {
            let agent = agent.clone();
            async move {
                let start = Instant::now();
                for _ in 0..iters {
                    let go = Signal::new("go", json!({"n": BATCH, "action": action, "jobs": jobs})).expect("a kind");
                    agent.call(go, Duration::from_secs(120)).await.expect("the batch ends");
                }
                start.elapsed()
            }
        }
    };
    let (memory, agent) = rt.block_on(pump(None));
    let runs = batches(agent.clone(), "noop.run", false);
    group.bench_function("runs_memory", |b| b.iter_custom(|iters| rt.block_on(runs(iters))));
    let jobs = batches(agent, "noop.run", true);
    group.bench_function("jobs_memory", |b| b.iter_custom(|iters| rt.block_on(jobs(iters))));
    rt.block_on(memory.shutdown(Duration::from_secs(1)));

    let folder = tempfile::tempdir().expect("a folder");
    let (durable, agent) = rt.block_on(pump(Some(folder.path())));
    let runs = batches(agent.clone(), "noop.run", false);
    group.bench_function("runs_sqlite", |b| b.iter_custom(|iters| rt.block_on(runs(iters))));
    let jobs = batches(agent.clone(), "noop.run", true);
    group.bench_function("jobs_sqlite", |b| b.iter_custom(|iters| rt.block_on(jobs(iters))));
    let writes = batches(agent, "noop.write", true);
    group.bench_function("jobs_sqlite_side_effects", |b| b.iter_custom(|iters| rt.block_on(writes(iters))));
    rt.block_on(durable.shutdown(Duration::from_secs(1)));
    group.finish();
}

criterion_group!(benches, jobs);
criterion_main!(benches);
