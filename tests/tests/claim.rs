//! A runtime's claim before a spawn (`RuntimeBuilder::claim_before_spawn`, what a cluster's node uses to take a
//! new agent's lease): asked for every new agent, however it is spawned (by the runtime, by name, or by another
//! agent), never for a restart; a refusal fails the spawn with its reason, and a refused child never runs.

use agentry::action::Capability;
use agentry::agent::{Agent, Reaction};
use agentry::effect::Effect;
use agentry::events::{Event, EventKind};
use agentry::id::AgentId;
use agentry::kinds::AGENT_SPAWN_FAILED;
use agentry::policy::Policy;
use agentry::runtime::{Claim, ClaimHook, RestartMode, RestartPolicy, Runtime, RuntimeError, SpawnOptions};
use agentry::signal::Signal;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const CALL: Duration = Duration::from_secs(30);

/// `adopt <child>` spawns a child and answers the call once the spawn failed (a child that starts is seen in
/// the runtime's events); `stop` stops it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Parent {
    /// The `adopt` call waiting for word of a failed spawn.
    waiting: Option<uuid::Uuid>,
}

impl Agent for Parent {
    fn name() -> &'static str {
        "parent"
    }

    fn handle_signal(&self, signal: &Signal) -> Reaction<Self> {
        match signal.kind().as_str() {
            "adopt" => {
                let child = AgentId::new(signal.data().as_str().unwrap_or_default()).expect("a test id");
                let spawn = Effect::spawn_agent(child, "parent", json!(Parent::default()));
                Reaction::Update(Parent { waiting: Some(signal.id()) }, vec![spawn])
            }
            AGENT_SPAWN_FAILED => match self.waiting {
                Some(call) => Reaction::Update(Parent::default(), vec![Effect::reply(call, signal.data().clone())]),
                None => Reaction::Ignore,
            },
            "stop" => Reaction::Keep(vec![Effect::stop("asked to")]),
            _ => Reaction::Ignore,
        }
    }
}

/// A claim that notes every id it is asked about and refuses those starting with `taken`.
fn claims() -> (ClaimHook, Arc<Mutex<Vec<String>>>) {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let noted = asked.clone();
    let hook: ClaimHook = Arc::new(move |agent: AgentId| {
        noted.lock().expect("not poisoned").push(agent.to_string());
        Box::pin(async move {
            match agent.as_str().starts_with("taken") {
                true => Err(format!("node `b` holds `{agent}`")),
                false => Ok(Box::new(()) as Claim),
            }
        })
    });
    (hook, asked)
}

fn runtime(hook: ClaimHook) -> Runtime {
    Runtime::builder().agent::<Parent>().expect("registers").claim_before_spawn(hook).build()
}

fn opts(id: &str) -> SpawnOptions {
    SpawnOptions {
        id: Some(AgentId::new(id).expect("a test id")),
        policy: Policy::default().grant(Capability::SPAWN),
        ..SpawnOptions::default()
    }
}

async fn started(events: &mut tokio::sync::broadcast::Receiver<Event>, agent: &str) {
    loop {
        let event = events.recv().await.expect("the runtime's events");
        if event.agent.as_str() == agent && event.kind == EventKind::AgentStarted {
            return;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_new_agent_is_claimed_however_it_is_spawned_and_a_restart_is_not() {
    let (hook, asked) = claims();
    let rt = runtime(hook);
    let mut events = rt.events();
    // Started again by its supervisor whenever it stops.
    let restart = RestartPolicy { mode: RestartMode::Permanent, ..RestartPolicy::default() };
    let parent = rt.spawn(Parent::default(), SpawnOptions { restart, ..opts("p") }).await.expect("spawns");
    rt.spawn_named("parent", json!({}), opts("named")).await.expect("spawns by name");
    parent.send(Signal::new("adopt", json!("kid")).expect("a kind")).expect("sent");
    started(&mut events, "kid").await;
    assert_eq!(*asked.lock().expect("not poisoned"), ["p", "named", "kid"], "each new agent was claimed once");

    parent.send(Signal::new("stop", Value::Null).expect("a kind")).expect("sent");
    loop {
        let event = events.recv().await.expect("the runtime's events");
        if event.agent.as_str() == "p" && matches!(event.kind, EventKind::AgentRestarted { .. }) {
            break;
        }
    }
    assert_eq!(asked.lock().expect("not poisoned").len(), 3, "a restart keeps what the agent had: not claimed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_claim_fails_the_spawn_with_its_reason_and_the_child_never_runs() {
    let (hook, _) = claims();
    let rt = runtime(hook);
    match rt.spawn(Parent::default(), opts("taken-1")).await {
        Err(RuntimeError::NotClaimed { agent, reason }) => {
            assert_eq!((agent.as_str(), reason.as_str()), ("taken-1", "node `b` holds `taken-1`"));
        }
        other => panic!("expected NotClaimed, got {:?}", other.map(|r| r.id().clone())),
    }
    assert!(matches!(rt.spawn_named("parent", json!({}), opts("taken-2")).await, Err(RuntimeError::NotClaimed { .. })));

    let parent = rt.spawn(Parent::default(), opts("p")).await.expect("spawns");
    let failed = parent.call(Signal::new("adopt", json!("taken-3")).expect("a kind"), CALL).await.expect("answered");
    assert_eq!(failed["child"], "taken-3", "{failed}");
    let error = failed["error"].as_str().unwrap_or_default();
    assert!(error.contains("node `b` holds `taken-3`"), "the parent is told why: {failed}");
    for id in ["taken-1", "taken-2", "taken-3"] {
        assert!(!rt.contains(&AgentId::new(id).expect("an id")), "{id} runs");
    }
}
