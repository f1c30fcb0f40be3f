//! What durability costs and how fast it comes back, each figure beside a baseline measured in the same run.
//!
//! One-shot measurements (memory and wall times of whole phases are not what criterion times), each in a
//! fresh data folder:
//!
//! 1. **Replay speed**: one agent handles `AGENTRY_REPLAY_INPUTS` (default 100,000) signals with no snapshot
//!    after its first, the process "crashes" (its tokio runtime is dropped, so nothing is snapshotted on the way
//!    out), and a new runtime recovers it: inputs per second through `step`, from the journal. Baseline: the
//!    same signals folded through the pure `step` in memory.
//! 2. **Recovery**: `AGENTRY_RECOVER_AGENTS` (default 100,000) agents, each with a snapshot and a few inputs
//!    logged after it, crash and are recovered. Baseline: spawning as many fresh agents on an in-memory runtime.
//! 3. **Registered and live**: `AGENTRY_REGISTERED` (default 1,000,000) agents are spawned and put to sleep, the
//!    runtime is reopened (they stay asleep: only their entries are loaded), and `AGENTRY_LIVE` (default
//!    10,000) of them are thawed one at a time. Reports the heap and RSS each sleeper costs, the thaw latency
//!    (p50/p99; baseline: spawning a new agent on the same durable runtime), and the process's memory with
//!    everything registered and the live ones awake.
//!
//! Heap bytes come from a counting allocator wrapped around the system one (exact live bytes); RSS from
//! `/proc/self/status`. For the figure run
//! `AGENTRY_REGISTERED=10000000 AGENTRY_LIVE=100000 cargo bench -p agentry --bench durable_agents`.
//!
//! A phase whose count is 0 is skipped. `AGENTRY_REGISTERED_DIR` keeps the registered agents in that folder:
//! a later run finds them there and only reopens and thaws (registering 10,000,000 takes most of an hour).

// The one `unsafe` here: a global allocator that counts bytes (nothing else counts heap bytes exactly), in
// `support/memory.rs`.
#![allow(unsafe_code)]

use agentry::action::{ActionSpec, DynAction};
use agentry::agent::{Agent, AgentState, Reaction, step};
use agentry::id::AgentId;
use agentry::runtime::{Runtime, RuntimeBuilder, SpawnOptions};
use agentry::signal::Signal;
use agentry::skill::{BuildError, Skill};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

#[path = "support/memory.rs"]
mod memory;
use memory::{heap, rss};

fn knob(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|n| n.replace('_', "").parse().ok()).unwrap_or(default)
}

fn echo() -> Skill {
    static SKILL: OnceLock<Skill> = OnceLock::new();
    SKILL
        .get_or_init(|| {
            let spec = ActionSpec::new("echo.say", "Says its params back.").expect("a valid id");
            let action = DynAction::new(spec.params_schema(json!({"type": "object"})), |params, _| {
                Box::pin(async move { Ok(params) })
            })
            .expect("a valid schema");
            Skill::builder("echo", "1.0.0").dyn_action(action).build().expect("a valid skill")
        })
        .clone()
}

/// Counts the ticks it is sent; holds one mounted skill, as the idle-agent bench's agent does.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
struct Ticker {
    ticks: u64,
}

impl Agent for Ticker {
    fn name() -> &'static str {
        "ticker"
    }

    fn start_skills() -> Result<Vec<(Skill, Value)>, BuildError> {
        Ok(vec![(echo(), Value::Null)])
    }

    fn handle_signal(&self, signal: &Signal) -> Reaction<Self> {
        match signal.kind().as_str() {
            "tick" => Reaction::Update(Ticker { ticks: self.ticks + 1 }, Vec::new()),
            _ => Reaction::Ignore,
        }
    }
}

fn builder() -> RuntimeBuilder {
    Runtime::builder().skill(echo()).agent::<Ticker>().expect("the agent type registers")
}

fn durable(dir: &Path, snapshot_every: u64) -> RuntimeBuilder {
    builder().durable(dir).expect("the journal opens").snapshot_every(snapshot_every)
}

fn tokio_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime")
}

fn id(n: u64) -> AgentId {
    AgentId::new(format!("agent-{n}")).expect("a valid id")
}

fn spawn_options(n: u64) -> SpawnOptions {
    SpawnOptions { id: Some(id(n)), ..Default::default() }
}

fn tick() -> Signal {
    Signal::new("tick", Value::Null).expect("a valid signal")
}

/// Waits until everything the runtime queued for its journal is on disk, then "crashes": the tokio runtime is
/// dropped, so no agent gets to snapshot itself on the way out.
fn crash(rt: tokio::runtime::Runtime, runtime: Runtime) {
    rt.block_on(async {
        if let Some(durable) = runtime.store().durable() {
            durable.flushed().await.expect("the journal flushes");
        }
    });
    drop(runtime);
    rt.shutdown_timeout(Duration::from_secs(5));
}

fn replay_speed(folder: &Path, inputs: u64) {
    let rt = tokio_rt();
    let (runtime, baseline) = rt.block_on(async {
        let runtime = durable(folder, u64::MAX).build();
        let agent = runtime.spawn(Ticker::default(), spawn_options(0)).await.expect("the agent starts");
        let mut start = agent.state().await.expect("its state");
        for _ in 0..inputs {
            agent.send(tick()).expect("the agent is there");
        }
        assert_eq!(agent.state().await.expect("its state").domain.ticks, inputs);
        // The baseline: the same signals folded through the pure `step`, in memory.
        let catalog = runtime.catalog();
        let signals: Vec<Signal> = (0..inputs).map(|_| tick()).collect();
        let began = Instant::now();
        for signal in &signals {
            step(&mut start, signal, &catalog).expect("a step");
        }
        let baseline = began.elapsed();
        assert_eq!(start.domain.ticks, inputs);
        (runtime, baseline)
    });
    crash(rt, runtime);
    let rt = tokio_rt();
    let began = Instant::now();
    let (runtime, recovery) = rt.block_on(durable(folder, u64::MAX).open()).expect("the runtime recovers");
    let took = began.elapsed();
    let state: AgentState<Ticker> =
        rt.block_on(async { runtime.get::<Ticker>(&id(0)).expect("it is back").state().await.expect("its state") });
    assert_eq!(state.domain.ticks, inputs, "the replay gave back every tick");
    println!(
        "replay: {} inputs recovered in {:.2} s = {:.0} inputs/s (journal read, decode, step); pure step in memory: \
         {:.0} inputs/s; ratio {:.2}",
        recovery.replayed,
        took.as_secs_f64(),
        recovery.replayed as f64 / took.as_secs_f64(),
        inputs as f64 / baseline.as_secs_f64(),
        (recovery.replayed as f64 / took.as_secs_f64()) / (inputs as f64 / baseline.as_secs_f64()),
    );
    rt.block_on(runtime.shutdown(Duration::from_secs(5)));
}

fn recovery_time(folder: &Path, agents: u64) {
    const TICKS: u64 = 3;
    let rt = tokio_rt();
    let (runtime, fresh) = rt.block_on(async {
        // The baseline: as many fresh agents spawned on an in-memory runtime.
        let memory = builder().build();
        let began = Instant::now();
        for n in 0..agents {
            memory.spawn(Ticker::default(), spawn_options(n)).await.expect("the agent starts");
        }
        let fresh = began.elapsed();
        memory.shutdown(Duration::from_secs(30)).await;
        let runtime = durable(folder, 100).build();
        for n in 0..agents {
            let agent = runtime.spawn(Ticker::default(), spawn_options(n)).await.expect("the agent starts");
            for _ in 0..TICKS {
                agent.send(tick()).expect("the agent is there");
            }
        }
        (runtime, fresh)
    });
    crash(rt, runtime);
    let rt = tokio_rt();
    let began = Instant::now();
    let (runtime, recovery) = rt.block_on(durable(folder, 100).open()).expect("the runtime recovers");
    let took = began.elapsed();
    assert_eq!(recovery.agents.len() as u64, agents, "every agent came back: {:?}", recovery.failed.first());
    println!(
        "recovery: {agents} agents (snapshot + {TICKS} inputs each, {} replayed) back in {:.2} s = {:.1} µs each; \
         spawning as many fresh in memory: {:.2} s; ratio {:.1}x",
        recovery.replayed,
        took.as_secs_f64(),
        took.as_secs_f64() * 1e6 / agents as f64,
        fresh.as_secs_f64(),
        took.as_secs_f64() / fresh.as_secs_f64(),
    );
    rt.block_on(runtime.shutdown(Duration::from_secs(60)));
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(at).copied().unwrap_or_default()
}

fn registered_and_live(folder: &Path, registered: u64, live: u64) {
    if folder.join(agentry::runtime::JOURNAL).exists() {
        println!("registered: reusing the agents asleep in {}", folder.display());
    } else {
        register(folder, registered);
    }
    reopen_and_thaw(folder, registered, live);
}

/// Spawns `registered` agents and puts them to sleep, in rounds.
fn register(folder: &Path, registered: u64) {
    let workers = knob("AGENTRY_REGISTER_WORKERS", 64);
    let round = knob("AGENTRY_REGISTER_ROUND", 250_000).max(1);
    let rt = tokio_rt();
    let began = Instant::now();
    let (heap_start, rss_start) = (heap(), rss());
    rt.block_on(async {
        let runtime = durable(folder, 100).build();
        // In rounds: right after a burst of hibernations the runtime still holds what the stopped actors held
        // (~5 KB each, released within a few seconds), which at 10,000,000 agents would not fit in memory.
        let mut peak = 0.0f64;
        for first in (0..registered).step_by(round as usize) {
            let last = (first + round).min(registered);
            let tasks: Vec<_> = (0..workers)
                .map(|w| {
                    let runtime = runtime.clone();
                    tokio::spawn(async move {
                        for n in (first + w..last).step_by(workers as usize) {
                            runtime.spawn(Ticker::default(), spawn_options(n)).await.expect("the agent starts");
                            runtime.hibernate(&id(n)).await.expect("the agent sleeps");
                        }
                    })
                })
                .collect();
            for task in tasks {
                task.await.expect("the worker finished");
            }
            let held = |heap_now: i64| (heap_now - heap_start) as f64 / last as f64;
            peak = peak.max(held(heap()));
            let settling = Instant::now();
            while held(heap()) > 1024.0 && settling.elapsed() < Duration::from_secs(30) {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        println!(
            "registering: {registered} asleep in the runtime that spawned them: heap {:.0} bytes each (right after \
             a round of {round}: up to {peak:.0}), RSS {:.0} bytes each",
            (heap() - heap_start) as f64 / registered as f64,
            (rss() - rss_start) as f64 / registered as f64,
        );
        runtime.shutdown(Duration::from_secs(60)).await;
    });
    drop(rt);
    println!(
        "registered: {registered} agents spawned and put to sleep in {:.1} s; left behind once that runtime is \
         gone: heap {:.0} bytes each",
        began.elapsed().as_secs_f64(),
        (heap() - heap_start) as f64 / registered as f64,
    );
}

/// Reopens a runtime with `registered` agents asleep and thaws `live` of them, one at a time.
fn reopen_and_thaw(folder: &Path, registered: u64, live: u64) {
    let rt = tokio_rt();
    let (heap_before, rss_before) = (heap(), rss());
    let began = Instant::now();
    let (runtime, recovery) = rt.block_on(durable(folder, 100).open()).expect("the runtime reopens");
    let reopened = began.elapsed();
    assert_eq!(
        recovery.asleep.len() as u64,
        registered,
        "{} awake, {} failed",
        recovery.agents.len(),
        recovery.failed.len()
    );
    drop(recovery);
    let (heap_asleep, rss_asleep) = (heap(), rss());
    println!(
        "asleep: {registered} hibernated agents reopened in {:.2} s; heap {:.0} bytes each, RSS {:.0} bytes each",
        reopened.as_secs_f64(),
        (heap_asleep - heap_before) as f64 / registered as f64,
        (rss_asleep - rss_before) as f64 / registered as f64,
    );

    let (mut thaws, mut spawns) = (Vec::with_capacity(live as usize), Vec::with_capacity(live as usize));
    rt.block_on(async {
        for n in 0..live {
            let began = Instant::now();
            runtime.thaw(&id(n)).await.expect("the agent thaws");
            thaws.push(began.elapsed());
        }
        // The baseline: a new agent spawned on the same durable runtime (its start snapshot included).
        for n in 0..live.min(10_000) {
            let began = Instant::now();
            runtime.spawn(Ticker::default(), spawn_options(registered + n)).await.expect("the agent starts");
            spawns.push(began.elapsed());
        }
        let agent = runtime.get::<Ticker>(&id(live - 1)).expect("it is awake");
        // (A kept folder's agent may have been ticked by an earlier run.)
        let before = agent.state().await.expect("its state").domain.ticks;
        agent.send(tick()).expect("the agent is there");
        assert_eq!(agent.state().await.expect("its state").domain.ticks, before + 1);
    });
    thaws.sort();
    spawns.sort();
    let (heap_live, rss_live) = (heap(), rss());
    println!(
        "thaw: {live} agents one at a time: p50 {:?}, p99 {:?}; spawning a new durable agent: p50 {:?}, p99 {:?}",
        percentile(&thaws, 0.5),
        percentile(&thaws, 0.99),
        percentile(&spawns, 0.5),
        percentile(&spawns, 0.99),
    );
    println!(
        "live: {registered} registered with {live} awake: heap {:.1} MiB, RSS {:.1} MiB in all; the awake ones \
         add {:.0} bytes of heap each",
        (heap_live - heap_before) as f64 / (1024.0 * 1024.0),
        rss_live as f64 / (1024.0 * 1024.0),
        (heap_live - heap_asleep) as f64 / (live + spawns.len() as u64) as f64,
    );
    // Left as found, so a kept folder can be reopened again: the thawed asleep, the new ones gone.
    rt.block_on(async {
        for n in 0..live {
            runtime.hibernate(&id(n)).await.expect("the agent sleeps again");
        }
        for n in 0..spawns.len() as u64 {
            runtime.stop(&id(registered + n)).await.expect("the new agent stops");
        }
        runtime.shutdown(Duration::from_secs(120)).await;
    });
}

fn main() {
    // `cargo bench` passes `--bench`; this bench takes no other arguments.
    let root = std::env::var_os("AGENTRY_BENCH_DATA").map(std::path::PathBuf::from);
    let folder = |name: &str| match &root {
        Some(root) => tempfile::Builder::new().prefix(name).tempdir_in(root).expect("a data folder"),
        None => tempfile::Builder::new().prefix(name).tempdir().expect("a data folder"),
    };
    let inputs = knob("AGENTRY_REPLAY_INPUTS", 100_000);
    if inputs > 0 {
        replay_speed(folder("replay").path(), inputs);
    }
    let agents = knob("AGENTRY_RECOVER_AGENTS", 100_000);
    if agents > 0 {
        recovery_time(folder("recovery").path(), agents);
    }
    let (registered, live) = (knob("AGENTRY_REGISTERED", 1_000_000), knob("AGENTRY_LIVE", 10_000).max(1));
    // A folder of its own keeps the registered agents for the next run, which then only reopens and thaws.
    match std::env::var_os("AGENTRY_REGISTERED_DIR") {
        _ if registered == 0 => {}
        Some(kept) => registered_and_live(Path::new(&kept), registered, live),
        None => registered_and_live(folder("registered").path(), registered, live),
    }
}
