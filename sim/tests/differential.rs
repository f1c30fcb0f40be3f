//! The same scenario on the live runtime (tokio's paused clock, a real SQLite journal for the input logs) and
//! in the simulator: a few agents, real pure actions, a failing one, emits between agents, a schedule; one
//! outside signal a second, so that what each causes is settled before the next on both sides (within one
//! instant, live actors race as threads do, and a simulation picks one of the orders they could take). The
//! agents' input logs and final states must be equal: the simulator and the AgentServer share the pure
//! interpretation of effects and the gate, and this checks they have not drifted elsewhere.

use agentry::action::{ActionError, ActionSpec, DynAction};
use agentry::agent::{Agent, Reaction};
use agentry::effect::{Effect, Target};
use agentry::id::{ActionId, AgentId};
use agentry::runtime::{Runtime, SpawnOptions};
use agentry::signal::Signal;
use agentry::skill::Skill;
use agentry_sim::SimBuilder;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::time::Duration;

/// Keeps a tally of what it saw; runs, tells and schedules as its signals ask.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Clerk {
    seen: Vec<String>,
    total: i64,
}

impl Agent for Clerk {
    fn name() -> &'static str {
        "clerk"
    }

    fn start_skills() -> Result<Vec<(Skill, Value)>, agentry::skill::BuildError> {
        Ok(vec![(desk(), Value::Null)])
    }

    fn handle_signal(&self, signal: &Signal) -> Reaction<Self> {
        let data = signal.data();
        let mut next = self.clone();
        next.seen.push(signal.kind().to_string());
        let effects = match signal.kind().as_str() {
            "add" => vec![Effect::run(ActionId::new("desk.add").unwrap(), json!({"a": data["a"], "b": data["b"]}))],
            "break" => vec![Effect::run(ActionId::new("desk.break").unwrap(), json!({}))],
            // A run the gate refuses (no skill provides it), then a signal to itself: the refusal's outcome
            // comes first.
            "bogus" => vec![
                Effect::run(ActionId::new("desk.missing").unwrap(), json!({})),
                Effect::emit(signal.follow("after").build().unwrap(), Target::Agent(clerk(0))),
            ],
            "pass" => {
                let to = AgentId::new(data["to"].as_str().unwrap()).unwrap();
                vec![Effect::emit(
                    signal.follow("passed").data(json!({"n": data["n"]})).build().unwrap(),
                    Target::Agent(to),
                )]
            }
            "remind" => {
                vec![Effect::schedule("reminder", Duration::from_secs(5), signal.follow("reminded").build().unwrap())]
            }
            "passed" => {
                next.total += data["n"].as_i64().unwrap_or(0);
                vec![]
            }
            "action.completed" => {
                next.total += signal.outcome().and_then(|r| r.outcome.output.as_i64()).unwrap_or(0);
                vec![]
            }
            _ => vec![],
        };
        Reaction::Update(next, effects)
    }
}

fn desk() -> Skill {
    let add = ActionSpec::new("desk.add", "Adds.").unwrap().idempotent(true);
    let add = DynAction::new(add, |params, _| {
        Box::pin(async move { Ok(json!(params["a"].as_i64().unwrap_or(0) + params["b"].as_i64().unwrap_or(0))) })
    })
    .unwrap();
    let broken = ActionSpec::new("desk.break", "Always fails.").unwrap();
    let broken =
        DynAction::new(broken, |_, _| Box::pin(async { Err(ActionError::validation("this desk is broken")) })).unwrap();
    Skill::builder("desk", "1.0.0").dyn_action(add).dyn_action(broken).build().unwrap()
}

fn clerk(n: usize) -> AgentId {
    AgentId::new(format!("clerk-{n}")).unwrap()
}

/// What the scenario sends, to whom.
fn scenario() -> Vec<(usize, Signal)> {
    let s = |kind: &str, data: Value| Signal::new(kind, data).unwrap();
    vec![
        (0, s("add", json!({"a": 2, "b": 3}))),
        (0, s("pass", json!({"to": "clerk-1", "n": 10}))),
        (1, s("remind", Value::Null)),
        (0, s("break", Value::Null)),
        (0, s("bogus", Value::Null)),
        (1, s("add", json!({"a": 40, "b": 2}))),
        (2, s("pass", json!({"to": "clerk-0", "n": 7}))),
        (1, s("pass", json!({"to": "clerk-2", "n": 1}))),
    ]
}

/// What of an input both sides must agree on: its kind and data, with a run's own ids and timings left out.
fn essence(signal: &Signal) -> Value {
    match signal.outcome() {
        Some(report) => json!({
            "kind": signal.kind().as_str(),
            "action": report.action.as_str(),
            "status": report.outcome.status,
            "output": report.outcome.output,
            "error": report.outcome.error.as_ref().map(|e| e.class),
        }),
        None => json!({"kind": signal.kind().as_str(), "data": signal.data()}),
    }
}

#[tokio::test(start_paused = true)]
async fn the_simulator_and_the_live_runtime_agree() {
    // Live, on a durable runtime whose journal keeps every input.
    let folder = tempfile::tempdir().unwrap();
    let runtime = Runtime::builder().skill(desk()).agent::<Clerk>().unwrap().durable(folder.path()).unwrap().build();
    let mut agents = Vec::new();
    for n in 0..3 {
        agents.push(
            runtime.spawn(Clerk::default(), SpawnOptions { id: Some(clerk(n)), ..Default::default() }).await.unwrap(),
        );
    }
    // One signal a second (tokio's paused clock moves on only once everything is idle, so each one's
    // consequences are all in before the next), then past the schedule.
    for (to, signal) in scenario() {
        agents[to].send(signal).unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    tokio::time::sleep(Duration::from_secs(10)).await;
    let mut live_states = Vec::new();
    for agent in &agents {
        live_states.push(agent.state().await.unwrap().domain);
    }
    let durable = runtime.store().durable().unwrap();
    durable.flushed().await.unwrap();
    let live_logs: Vec<Vec<Value>> =
        (0..3).map(|n| durable.inputs_after(&clerk(n), 0).unwrap().iter().map(|(_, s)| essence(s)).collect()).collect();
    runtime.shutdown(Duration::from_secs(1)).await;

    // Simulated.
    let mut sim = SimBuilder::<Clerk>::new(1).skill(desk()).keep_trace(true).build().unwrap();
    for n in 0..3 {
        sim.add(clerk(n), Clerk::default()).unwrap();
    }
    for (second, (to, signal)) in scenario().into_iter().enumerate() {
        sim.send_after(&clerk(to), signal, Duration::from_secs(second as u64)).unwrap();
    }
    sim.run_until(Duration::from_secs(20));
    let sim_states: Vec<Clerk> = (0..3).map(|n| sim.state(&clerk(n)).unwrap().domain.clone()).collect();
    let sim_logs: Vec<Vec<Value>> =
        (0..3).map(|n| sim.trace().inputs(&clerk(n)).map(|(_, s)| essence(s)).collect()).collect();

    for n in 0..3 {
        assert_eq!(sim_logs[n], live_logs[n], "clerk-{n}'s input log");
    }
    assert_eq!(sim_states, live_states);
    assert_eq!(live_states[0].total, 5 + 7, "the scenario did something");
    assert!(live_states[1].seen.contains(&"reminded".to_owned()), "the schedule fired");
    assert!(live_logs[0].iter().any(|i| i["kind"] == "action.failed"), "the broken action failed");
    assert!(live_logs[0].iter().any(|i| i["kind"] == "action.blocked"), "the missing action was refused");
}
