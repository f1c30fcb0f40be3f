//! What an idle agent costs: resident memory and spawn time, beside a raw-tokio baseline in the same run.
//!
//! First a one-shot measurement (memory is not a timing, so criterion cannot report it): spawn
//! `AGENTRY_IDLE_AGENTS` (default 100,000) agents, each with one skill mounted, and report RSS growth per agent
//! and wall time per spawn, beside the same number of raw tokio tasks each waiting on its own mpsc channel (the
//! least an addressable idle "agent" can be), and bare ractor actors (ractor's own floor). Then criterion times
//! one spawn of an agent and of a raw task.

// The one `unsafe` here: the counting allocator in `support/memory.rs`, for exact heap bytes.
#![allow(unsafe_code)]

#[path = "support/memory.rs"]
mod memory;

use agentry::action::{ActionSpec, DynAction};
use agentry::agent::{Agent, Reaction};
use agentry::id::AgentId;
use agentry::runtime::{Runtime, SpawnOptions};
use agentry::signal::Signal;
use agentry::skill::{BuildError, Skill};
use criterion::Criterion;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// An agent that does nothing but hold one mounted skill.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Idle;

impl Agent for Idle {
    fn name() -> &'static str {
        "idle"
    }

    fn start_skills() -> Result<Vec<(Skill, Value)>, BuildError> {
        static SKILL: OnceLock<Skill> = OnceLock::new();
        let skill = SKILL.get_or_init(|| {
            let spec = ActionSpec::new("echo.say", "Says its params back.").expect("a valid id");
            let action = DynAction::new(spec.params_schema(json!({"type": "object"})), |params, _| {
                Box::pin(async move { Ok(params) })
            })
            .expect("a valid schema");
            Skill::builder("echo", "1.0.0").dyn_action(action).build().expect("a valid skill")
        });
        Ok(vec![(skill.clone(), Value::Null)])
    }

    fn handle_signal(&self, _signal: &Signal) -> Reaction<Self> {
        Reaction::Ignore
    }
}

/// A ractor actor that does nothing: what any actor costs before agentry adds its own state.
struct Bare;

/// The bare actor takes no messages.
enum Nothing {}

#[cfg(feature = "cluster")]
impl ractor::Message for Nothing {}

impl ractor::Actor for Bare {
    type Msg = Nothing;
    type State = ();
    type Arguments = ();

    async fn pre_start(&self, _: ractor::ActorRef<Nothing>, _: ()) -> Result<(), ractor::ActorProcessingErr> {
        Ok(())
    }
}

/// The process's resident set in bytes (Linux only: `None` elsewhere).
fn rss_bytes() -> Option<u64> {
    u64::try_from(memory::rss()).ok().filter(|&bytes| bytes > 0)
}

fn runtime() -> Runtime {
    Runtime::builder().agent::<Idle>().expect("the idle agent registers").build()
}

async fn spawn_idle(runtime: &Runtime, n: u64) {
    let opts = SpawnOptions { id: Some(AgentId::new(format!("idle-{n}")).expect("a valid id")), ..Default::default() };
    runtime.spawn(Idle, opts).await.expect("the agent starts");
}

struct Footprint {
    bytes_per_item: f64,
    spawn_micros: f64,
}

/// Where a measurement starts: the resident set and the live heap.
fn mark() -> (Option<u64>, i64) {
    (rss_bytes(), memory::heap())
}

fn report(what: &str, count: u64, before: (Option<u64>, i64), elapsed: Duration) -> Option<Footprint> {
    let heap = (memory::heap() - before.1) as f64 / count as f64;
    let (before, after) = (before.0?, rss_bytes()?);
    let footprint = Footprint {
        bytes_per_item: after.saturating_sub(before) as f64 / count as f64,
        spawn_micros: elapsed.as_secs_f64() * 1e6 / count as f64,
    };
    println!(
        "{what}: {count} spawned, RSS +{:.1} MiB = {:.0} bytes each (live heap {heap:.0} bytes each); {:.2} µs per \
         spawn",
        after.saturating_sub(before) as f64 / (1024.0 * 1024.0),
        footprint.bytes_per_item,
        footprint.spawn_micros
    );
    Some(footprint)
}

fn footprints(rt: &tokio::runtime::Runtime, count: u64) {
    // Everything stays alive until all three are measured, so no run reuses memory another one freed.
    let (tasks, mailboxes) = rt.block_on(async {
        let before = mark();
        let start = Instant::now();
        let mut mailboxes = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let (tx, mut rx) = mpsc::unbounded_channel::<Value>();
            tokio::spawn(async move { while rx.recv().await.is_some() {} });
            mailboxes.push(tx);
        }
        let elapsed = start.elapsed();
        (report("raw tokio tasks with an mpsc mailbox", count, before, elapsed), mailboxes)
    });
    let (actors, cells) = rt.block_on(async {
        let before = mark();
        let start = Instant::now();
        let mut cells = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let (actor, _) = ractor::Actor::spawn(None, Bare, ()).await.expect("the actor starts");
            cells.push(actor);
        }
        let elapsed = start.elapsed();
        (report("bare ractor actors (ractor's floor)", count, before, elapsed), cells)
    });
    let (agents, runtime) = rt.block_on(async {
        let runtime = runtime();
        let before = mark();
        let start = Instant::now();
        for n in 0..count {
            spawn_idle(&runtime, n).await;
        }
        let elapsed = start.elapsed();
        (report("agentry agents (one skill mounted)", count, before, elapsed), runtime)
    });
    rt.block_on(runtime.shutdown(Duration::from_secs(5)));
    for cell in &cells {
        cell.stop(None);
    }
    drop((mailboxes, cells));
    if let (Some(agents), Some(tasks), Some(actors)) = (agents, tasks, actors) {
        println!(
            "ratio agentry / raw tokio: memory {:.1}x, spawn time {:.1}x; agentry over bare ractor: {:.0} bytes",
            agents.bytes_per_item / tasks.bytes_per_item,
            agents.spawn_micros / tasks.spawn_micros,
            agents.bytes_per_item - actors.bytes_per_item
        );
    } else {
        println!("RSS is read from /proc/self/status; this platform has none, so memory was not measured");
    }
}

fn spawn_times(c: &mut Criterion, rt: &tokio::runtime::Runtime) {
    let mut group = c.benchmark_group("spawn");
    group.bench_function("agentry_agent", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let runtime = runtime();
                let start = Instant::now();
                for n in 0..iters {
                    spawn_idle(&runtime, n).await;
                }
                let elapsed = start.elapsed();
                runtime.shutdown(Duration::from_secs(5)).await;
                elapsed
            })
        });
    });
    group.bench_function("raw_tokio_task", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut mailboxes = Vec::with_capacity(iters as usize);
                let start = Instant::now();
                for _ in 0..iters {
                    let (tx, mut rx) = mpsc::unbounded_channel::<Value>();
                    tokio::spawn(async move { while rx.recv().await.is_some() {} });
                    mailboxes.push(tx);
                }
                start.elapsed()
            })
        });
    });
    group.finish();
}

fn main() {
    let count = std::env::var("AGENTRY_IDLE_AGENTS").ok().and_then(|n| n.parse().ok()).unwrap_or(100_000);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime");
    footprints(&rt, count);
    let mut criterion = Criterion::default().configure_from_args();
    spawn_times(&mut criterion, &rt);
    criterion.final_summary();
}
