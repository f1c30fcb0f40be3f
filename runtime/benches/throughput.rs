//! Action throughput through the actor layer, beside a raw-tokio baseline in the same run.
//!
//! `actions/agentry`: one agent gets a signal asking for `BATCH` runs of a no-op action; each run goes through
//! the gate, the journal and the event stream into its own supervised task, and comes back to the agent as an
//! `action.completed` signal; the agent replies to the caller once all have come back.
//! `actions/raw_tokio`: the same shape with nothing but tokio — jobs sent over an mpsc channel to a task that
//! spawns a task per job, each sending its result back over another channel.
//! `actions/bare_ractor`: the same shape on a bare `ractor` actor — it spawns a task per job, each casting its
//! result back to the actor — which is the floor for anything built on one ractor actor per agent.
//! Criterion reports each in elements (actions) per second; their ratios are the runtime's overhead.
//! `actions/agentry_sqlite*`: the same agent on a durable SQLite journal. `actions/agentry_postgres*`: the same on
//! the journal in PostgreSQL, beside SQLite in the same run, when the bench is built with the `postgres` feature
//! and `AGENTRY_BENCH_POSTGRES` names an empty database (a server for it: `cargo run -p agentry-tests --bin
//! postgres_server`, which prints its connection string); otherwise it says loudly that it skips them.
//!
//! `per_run/*`: single-threaded costs of pieces of work every run needs and the baselines do not: its params'
//! schema check, and its outcome as the JSON signal the agent gets. (Its journal record was measured here too
//! until the journal's writers were sealed: only the runtime can write a journal, and a bench is outside it.)

use agentry::action::{ActionSpec, DynAction, Outcome};
use agentry::agent::{Agent, Reaction};
use agentry::effect::Effect;
use agentry::id::{ActionId, SkillId};
use agentry::runtime::{AgentRef, Runtime, SpawnOptions};
use agentry::signal::Signal;
use agentry::skill::Skill;
use chrono::Utc;
use criterion::{Criterion, Throughput, criterion_group};
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
                let action = ActionId::new(signal.data()["action"].as_str().unwrap_or("noop.run")).expect("an id");
                let effects = (0..n).map(|i| Effect::run(action.clone(), json!({"i": i}))).collect();
                Reaction::Update(Pump { waiting: n, caller: Some(signal.id()) }, effects)
            }
            "action.completed" | "action.failed" => {
                let waiting = self.waiting.saturating_sub(1);
                let effects = match (waiting, self.caller) {
                    (0, Some(caller)) => vec![Effect::reply(caller, json!("done"))],
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
    let action = DynAction::new(spec.clone(), |params, _| Box::pin(async move { Ok(params) })).expect("a schema");
    // The same, declared with side effects: with a durable store its run waits for write-ahead.
    let spec = ActionSpec { id: ActionId::new("noop.write").expect("a valid id"), ..spec }.side_effects(true);
    let write = DynAction::new(spec, |params, _| Box::pin(async move { Ok(params) })).expect("a valid schema");
    Skill::builder("noop", "1.0.0").dyn_action(action).dyn_action(write).build().expect("a valid skill")
}

async fn pump() -> (Runtime, AgentRef<Pump>) {
    pump_on(Runtime::builder().skill(noop_skill()).build()).await
}

async fn pump_on(runtime: Runtime) -> (Runtime, AgentRef<Pump>) {
    let opts = SpawnOptions { max_in_flight: BATCH as usize, ..SpawnOptions::default() };
    let agent = runtime.spawn(Pump::default(), opts).await.expect("the agent starts");
    agent.mount(&SkillId::new("noop").expect("a valid id"), Value::Null).await.expect("the skill mounts");
    (runtime, agent)
}

/// Asks the pump for one batch of `BATCH` runs of `action` and waits until all have come back.
async fn one_batch(agent: &AgentRef<Pump>, action: &str) {
    let go = Signal::new("go", json!({"n": BATCH, "action": action})).expect("a valid kind");
    agent.call(go, Duration::from_secs(60)).await.expect("the batch completes");
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

/// What the bare ractor actor takes: a batch to start, with where to say it is done, and one job's result.
enum BareMsg {
    Go(u64, ractor::RpcReplyPort<()>),
    Done(#[allow(dead_code)] Value),
}

#[cfg(feature = "cluster")]
impl ractor::Message for BareMsg {}

/// A ractor actor that spawns a task per job and counts the results coming back.
struct BareActor;

impl ractor::Actor for BareActor {
    type Msg = BareMsg;
    type State = (u64, Option<ractor::RpcReplyPort<()>>);
    type Arguments = ();

    async fn pre_start(&self, _: ractor::ActorRef<BareMsg>, _: ()) -> Result<Self::State, ractor::ActorProcessingErr> {
        Ok((0, None))
    }

    async fn handle(
        &self,
        myself: ractor::ActorRef<BareMsg>,
        msg: BareMsg,
        state: &mut Self::State,
    ) -> Result<(), ractor::ActorProcessingErr> {
        match msg {
            BareMsg::Go(n, reply) => {
                *state = (n, Some(reply));
                for i in 0..n {
                    let me = myself.clone();
                    let job = json!({"i": i});
                    tokio::spawn(async move {
                        let _ = me.cast(BareMsg::Done(job));
                    });
                }
            }
            BareMsg::Done(_) => {
                state.0 = state.0.saturating_sub(1);
                if state.0 == 0
                    && let Some(reply) = state.1.take()
                {
                    let _ = reply.send(());
                }
            }
        }
        Ok(())
    }
}

/// The same agent on the journal in PostgreSQL, if the bench can have one.
#[cfg(feature = "postgres")]
fn postgres<F, Fut>(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    rt: &tokio::runtime::Runtime,
    batches: impl Fn(AgentRef<Pump>, &'static str) -> F,
) where
    F: Fn(u64) -> Fut,
    Fut: std::future::Future<Output = Duration>,
{
    let Ok(url) = std::env::var("AGENTRY_BENCH_POSTGRES") else {
        eprintln!("SKIPPED actions/agentry_postgres*: AGENTRY_BENCH_POSTGRES names no database");
        return;
    };
    let store = agentry::store::PostgresStore::connect(&url).expect("the journal in PostgreSQL connects");
    let folder = tempfile::tempdir().expect("a folder");
    let runtime =
        Runtime::builder().skill(noop_skill()).data_dir(folder.path()).store(std::sync::Arc::new(store)).build();
    let (runtime, agent) = rt.block_on(pump_on(runtime));
    let pure = batches(agent.clone(), "noop.run");
    group.bench_function("agentry_postgres", |b| b.iter_custom(|iters| rt.block_on(pure(iters))));
    let writes = batches(agent, "noop.write");
    group.bench_function("agentry_postgres_side_effects", |b| b.iter_custom(|iters| rt.block_on(writes(iters))));
    rt.block_on(runtime.shutdown(Duration::from_secs(1)));
}

#[cfg(not(feature = "postgres"))]
fn postgres<T, U, V>(_: T, _: U, _: V) {
    eprintln!("SKIPPED actions/agentry_postgres*: built without the `postgres` feature");
}

fn actions(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime");
    let (runtime, agent) = rt.block_on(pump());
    let mut group = c.benchmark_group("actions");
    group.throughput(Throughput::Elements(BATCH));
    let batches = |agent: AgentRef<Pump>, action: &'static str| {
        move |iters: u64| {
            let agent = agent.clone();
            async move {
                let start = Instant::now();
                for _ in 0..iters {
                    one_batch(&agent, action).await;
                }
                start.elapsed()
            }
        }
    };
    let in_memory = batches(agent.clone(), "noop.run");
    group.bench_function("agentry", |b| b.iter_custom(|iters| rt.block_on(in_memory(iters))));
    // The same agent on a durable SQLite journal: every input logged, snapshots, run records on disk.
    let folder = tempfile::tempdir().expect("a folder");
    let durable = Runtime::builder().skill(noop_skill()).durable(folder.path()).expect("the journal opens").build();
    let (durable, on_disk) = rt.block_on(pump_on(durable));
    let pure = batches(on_disk.clone(), "noop.run");
    group.bench_function("agentry_sqlite", |b| b.iter_custom(|iters| rt.block_on(pure(iters))));
    let writes = batches(on_disk, "noop.write");
    group.bench_function("agentry_sqlite_side_effects", |b| b.iter_custom(|iters| rt.block_on(writes(iters))));
    rt.block_on(durable.shutdown(Duration::from_secs(1)));
    postgres(&mut group, &rt, batches);
    let (bare, _) = rt.block_on(ractor::Actor::spawn(None, BareActor, ())).expect("the actor starts");
    group.bench_function("bare_ractor", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    bare.call(|reply| BareMsg::Go(BATCH, reply), None).await.expect("the batch completes");
                }
                start.elapsed()
            })
        });
    });
    bare.stop(None);
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

/// Pieces of every run's work, one at a time on one thread, to set against the per-action budget above.
fn per_run(c: &mut Criterion) {
    let mut group = c.benchmark_group("per_run");
    let action = ActionId::new("noop.run").expect("a valid id");
    let params = json!({"i": 7});
    let noop = noop_skill().actions()[0].clone();
    group.bench_function("validate_params", |b| b.iter(|| noop.validate(&params).expect("valid params")));
    group.bench_function("outcome_signal", |b| {
        b.iter(|| {
            let outcome = Outcome::completed(params.clone(), Duration::from_micros(3), 1);
            let run = Uuid::now_v7();
            let mut data = serde_json::Map::new();
            data.insert("run_id".to_owned(), json!(run));
            data.insert("action".to_owned(), Value::String(action.to_string()));
            data.insert("outcome".to_owned(), outcome.into_json());
            let now = Utc::now();
            Signal::builder("action.completed")
                .source("agentry/agent/pump")
                .data(Value::Object(data))
                .caused_by(run, run, now)
                .stamped(Uuid::now_v7(), now)
                .build()
                .expect("a valid kind")
        });
    });
    group.finish();
}

criterion_group!(benches, actions, per_run);

/// A fixed amount of work, to measure what it costs in all rather than how fast it goes: with `AGENTRY_FIXED`
/// set to `agentry`, `agentry_sqlite` or `raw_tokio`, the binary runs `AGENTRY_FIXED_BATCHES` (default 100)
/// batches of 1,000 actions of that kind, prints how long they took, and exits. Under
/// `perf stat -e task-clock` (or `instructions:u`, where the machine counts them) that gives the CPU time of
/// every thread per action: what a run costs the machine, which on two cores bounds the rate as much as the
/// agent's own thread does. `AGENTRY_FIXED_BATCHES=0` measures the start-up alone. With `AGENTRY_FIXED_KEEP` set
/// to a folder, the durable journal is written there and kept, to be read afterwards.
fn fixed_work(kind: &str, batches: u64) {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime");
    let folder = tempfile::tempdir().expect("a folder");
    let kept = std::env::var_os("AGENTRY_FIXED_KEEP").map(std::path::PathBuf::from);
    let (runtime, agent) = match kind {
        "agentry" => rt.block_on(pump()),
        "agentry_sqlite" => {
            let durable = Runtime::builder()
                .skill(noop_skill())
                .durable(kept.as_deref().unwrap_or(folder.path()))
                .expect("the journal opens")
                .build();
            rt.block_on(pump_on(durable))
        }
        "raw_tokio" => {
            let start = Instant::now();
            rt.block_on(async {
                for _ in 0..batches {
                    raw_tokio_batch(BATCH).await;
                }
            });
            eprintln!("{kind}: {} actions in {:?}", batches * BATCH, start.elapsed());
            return;
        }
        other => {
            eprintln!("AGENTRY_FIXED={other}: expected agentry, agentry_sqlite or raw_tokio");
            std::process::exit(2);
        }
    };
    let start = Instant::now();
    rt.block_on(async {
        for _ in 0..batches {
            one_batch(&agent, "noop.run").await;
        }
    });
    eprintln!("{kind}: {} actions in {:?}", batches * BATCH, start.elapsed());
    rt.block_on(runtime.shutdown(Duration::from_secs(5)));
}

fn main() {
    if let Ok(kind) = std::env::var("AGENTRY_FIXED") {
        let batches = match std::env::var("AGENTRY_FIXED_BATCHES") {
            Err(_) => 100,
            Ok(n) => n.parse().unwrap_or_else(|_| {
                eprintln!("AGENTRY_FIXED_BATCHES={n}: expected a number of batches");
                std::process::exit(2);
            }),
        };
        return fixed_work(&kind, batches);
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
