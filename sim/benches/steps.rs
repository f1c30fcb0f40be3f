//! Simulated signals per second for a pure model, beside a bare loop that calls the same `step` on the same
//! agents with the same signals (what a hand-written model loop costs): their ratio is the simulator's
//! overhead (its clock, the shared effect interpretation, the trace hash, the Poisson process).

use agentry::agent::{Agent, AgentState, Reaction, step};
use agentry::id::AgentId;
use agentry::signal::Signal;
use agentry::skill::Catalog;
use agentry_sim::{Process, SimBuilder};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::{Duration, Instant};

const AGENTS: usize = 1_000;
/// Pings per agent per second; the run lasts long enough for about `STEPS` of them.
const RATE: f64 = 10.0;
const STEPS: u64 = 100_000;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Counter {
    pings: u64,
}

impl Agent for Counter {
    fn handle_signal(&self, signal: &Signal) -> Reaction<Self> {
        match signal.kind().as_str() {
            "ping" => Reaction::Update(Counter { pings: self.pings + 1 }, vec![]),
            _ => Reaction::Ignore,
        }
    }
}

fn id(n: usize) -> AgentId {
    AgentId::new(format!("counter-{n}")).expect("a valid id")
}

/// The simulator: `AGENTS` counters pinged by a Poisson process for as long as `STEPS` pings take.
fn simulated(seed: u64) -> u64 {
    let process = Process::new("ping", RATE).expect("a valid process");
    let mut sim = SimBuilder::<Counter>::new(seed).process(process).build().expect("a valid setup");
    for n in 0..AGENTS {
        sim.add(id(n), Counter::default()).expect("a new agent");
    }
    sim.run_until(Duration::from_secs_f64(STEPS as f64 / (RATE * AGENTS as f64)));
    sim.counts().steps
}

/// The bare loop: the same agents, a random one each time, each given a stamped `ping` through `step`.
fn bare(seed: u64, steps: u64) -> u64 {
    let catalog = Catalog::new();
    let mut agents: Vec<AgentState<Counter>> =
        (0..AGENTS).map(|n| AgentState::new(id(n), Counter::default())).collect();
    let mut rng = agentry_sim::SimRng::seed_from_u64(seed);
    let epoch = chrono::DateTime::from_timestamp(1_767_225_600, 0).unwrap_or_default();
    for i in 0..steps {
        let agent = &mut agents[rng.random_range(0..AGENTS)];
        let stamp = uuid::Uuid::from_u64_pair(rng.random(), i);
        let signal = Signal::builder("ping").data(Value::Null).stamped(stamp, epoch).build().expect("a valid kind");
        step(agent, &signal, &catalog).expect("a step");
    }
    agents.iter().map(|a| a.domain.pings).sum()
}

fn steps(c: &mut Criterion) {
    let mut group = c.benchmark_group("sim_steps");
    let expected = simulated(1);
    group.throughput(Throughput::Elements(expected));
    group.bench_function("simulator", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for i in 0..iters {
                std::hint::black_box(simulated(i));
            }
            start.elapsed()
        })
    });
    group.bench_function("bare_step_loop", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for i in 0..iters {
                std::hint::black_box(bare(i, expected));
            }
            start.elapsed()
        })
    });
    group.finish();
}

criterion_group!(benches, steps);
criterion_main!(benches);
