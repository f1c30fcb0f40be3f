//! Simulated signals per second for a pure model, beside a bare loop that calls the same `step` on the same
//! agents with the same signals (what a hand-written model loop costs): their ratio is the simulator's
//! overhead (its clock, the shared effect interpretation, the trace hash, the Poisson process).
//!
//! `sim_runs` does the same for agents whose every ping asks for a run of a pure action: the simulator drives
//! each run through the gate and the runtime's run machine (`RunLife`) and feeds its outcome back; the bare
//! loop steps the agent, invokes the action's future once, and steps the outcome signal back in.

use agentry::action::{ActionSpec, DynAction, Outcome};
use agentry::agent::{Agent, AgentState, Reaction, step};
use agentry::effect::{Effect, EffectKind};
use agentry::id::{ActionId, AgentId};
use agentry::signal::Signal;
use agentry::skill::{Catalog, Skill};
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

/// Asks for a run of `bench.next` at every ping, and counts the outcomes.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Runner {
    done: u64,
}

impl Agent for Runner {
    fn start_skills() -> Result<Vec<(Skill, Value)>, agentry::skill::BuildError> {
        Ok(vec![(bench_skill(), Value::Null)])
    }

    fn handle_signal(&self, signal: &Signal) -> Reaction<Self> {
        match (signal.kind().as_str(), signal.outcome()) {
            ("ping", _) => {
                let action = ActionId::new("bench.next").expect("a valid id");
                Reaction::Keep(vec![Effect::run(action, serde_json::json!({"n": self.done}))])
            }
            (_, Some(report)) if report.completed() => Reaction::Update(Runner { done: self.done + 1 }, vec![]),
            _ => Reaction::Ignore,
        }
    }
}

/// One pure action: `n + 1`.
fn bench_skill() -> Skill {
    let spec = ActionSpec::new("bench.next", "n + 1").expect("a valid spec").idempotent(true);
    let next = DynAction::new(spec, |params: Value, _| {
        Box::pin(async move { Ok(serde_json::json!(params["n"].as_u64().unwrap_or(0) + 1)) })
    })
    .expect("a valid action");
    Skill::builder("bench", "1.0.0").dyn_action(next).build().expect("a valid skill")
}

/// The simulator: `AGENTS` runners pinged by a Poisson process; returns the runs that completed.
fn simulated_runs(seed: u64) -> u64 {
    let process = Process::new("ping", RATE).expect("a valid process");
    let mut sim = SimBuilder::<Runner>::new(seed).skill(bench_skill()).process(process).build().expect("a valid setup");
    for n in 0..AGENTS {
        sim.add(id(n), Runner::default()).expect("a new agent");
    }
    sim.run_until(Duration::from_secs_f64(STEPS as f64 / (RATE * AGENTS as f64)));
    sim.counts().completed
}

/// The bare loop: a random runner is pinged, the run it asks for is invoked at once (its future polled once),
/// and its outcome signal is stepped back in.
fn bare_runs(seed: u64, runs: u64) -> u64 {
    let catalog: Catalog = [bench_skill()].into_iter().collect();
    let action = bench_skill().actions()[0].clone();
    let mut agents: Vec<AgentState<Runner>> = (0..AGENTS)
        .map(|n| {
            let (state, _) =
                agentry::agent::start(id(n), Runner::default(), &Default::default()).expect("a started agent");
            state
        })
        .collect();
    let mut rng = agentry_sim::SimRng::seed_from_u64(seed);
    let epoch = chrono::DateTime::from_timestamp(1_767_225_600, 0).unwrap_or_default();
    let source: std::sync::Arc<str> = "bench".into();
    let waker = std::task::Waker::noop();
    for i in 0..runs {
        let agent = &mut agents[rng.random_range(0..AGENTS)];
        let stamp = uuid::Uuid::from_u64_pair(rng.random(), i);
        let ping = Signal::builder("ping").data(Value::Null).stamped(stamp, epoch).build().expect("a valid kind");
        let effects = step(agent, &ping, &catalog).expect("a step").effects;
        for effect in effects {
            let EffectKind::Run { action: id, params, .. } = effect.kind else { continue };
            let ctx = agentry::action::ActionContext::new(agent.id.clone(), id.clone());
            let mut future = action.invoke(params, ctx);
            let std::task::Poll::Ready(Ok(output)) = future.as_mut().poll(&mut std::task::Context::from_waker(waker))
            else {
                continue;
            };
            let run = agentry::driver::RunRef { run: stamp, action: &id, correlation: stamp, causation: Some(stamp) };
            let outcome = Outcome::completed(output, Duration::ZERO, 1);
            let told = agentry::driver::action_outcome_at(&source, run, outcome, (stamp, epoch)).expect("a signal");
            step(agent, &told, &catalog).expect("a step");
        }
    }
    agents.iter().map(|a| a.domain.done).sum()
}

fn runs(c: &mut Criterion) {
    let mut group = c.benchmark_group("sim_runs");
    let expected = simulated_runs(1);
    group.throughput(Throughput::Elements(expected));
    group.bench_function("simulator", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for i in 0..iters {
                std::hint::black_box(simulated_runs(i));
            }
            start.elapsed()
        })
    });
    group.bench_function("bare_step_and_invoke_loop", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for i in 0..iters {
                std::hint::black_box(bare_runs(i, expected));
            }
            start.elapsed()
        })
    });
    group.finish();
}

criterion_group!(benches, steps, runs);
criterion_main!(benches);
