//! Idempotency keys are unique per agent and per incarnation, and unambiguous: an agent restarted by its
//! supervisor never hands a server a key it used before (the input numbers start again, the incarnation does
//! not), and agents whose ids contain `/` never share a key (`x/5` and `x`). A recovery still makes the same
//! key for the same run (`durability.rs`).

use agentry::action::{ActionSpec, DynAction};
use agentry::agent::{Agent, Reaction};
use agentry::effect::Effect;
use agentry::events::EventKind;
use agentry::id::{ActionId, AgentId};
use agentry::runtime::{RestartMode, RestartPolicy, Runtime, SpawnOptions};
use agentry::signal::Signal;
use agentry::skill::Skill;
use agentry_tests::wait_for;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};

/// A skill whose `keys.note` keeps the idempotency key it ran under.
fn keys(seen: Arc<Mutex<Vec<String>>>) -> Skill {
    let note = ActionSpec::new("keys.note", "Notes its key.").unwrap().side_effects(true);
    let action = DynAction::new(note, move |_, ctx| {
        let seen = seen.clone();
        Box::pin(async move {
            seen.lock().unwrap().push(ctx.idempotency_key());
            Ok(Value::Null)
        })
    })
    .unwrap();
    Skill::builder("keys", "1.0.0").dyn_action(action).build().unwrap()
}

/// Runs `keys.note` on `go`, stops itself on `quit`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Noter;

impl Agent for Noter {
    fn name() -> &'static str {
        "noter"
    }

    fn handle_signal(&self, signal: &Signal) -> Reaction<Self> {
        match signal.kind().as_str() {
            "go" => Reaction::Keep(vec![Effect::run(ActionId::new("keys.note").unwrap(), json!({}))]),
            "quit" => Reaction::Keep(vec![Effect::stop("asked to quit")]),
            _ => Reaction::Ignore,
        }
    }
}

async fn noted(events: &mut tokio::sync::broadcast::Receiver<agentry::events::Event>, agent: &AgentId) {
    wait_for(events, |e| &e.agent == agent && matches!(e.kind, EventKind::ActionCompleted { .. })).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_agent_never_reuses_a_key_and_ids_with_slashes_never_collide() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let runtime = Runtime::builder().skill(keys(seen.clone())).build();
    let mut events = runtime.events();
    let restart = RestartPolicy { mode: RestartMode::Permanent, ..RestartPolicy::default() };
    let mut ids = Vec::new();
    for id in ["x", "x/1"] {
        let id = AgentId::new(id).unwrap();
        let opts = SpawnOptions { id: Some(id.clone()), restart, ..SpawnOptions::default() };
        let agent = runtime.spawn(Noter, opts).await.unwrap();
        agent.mount(&"keys".parse().unwrap(), Value::Null).await.unwrap();
        ids.push(id);
    }
    let (x, x1) = (&ids[0], &ids[1]);
    // `x`'s first input asks for a run; `x/1`'s first input too.
    runtime.send(x, Signal::new("go", Value::Null).unwrap()).unwrap();
    noted(&mut events, x).await;
    runtime.send(x1, Signal::new("go", Value::Null).unwrap()).unwrap();
    noted(&mut events, x1).await;
    // `x` stops itself and is restarted (its inputs numbered from 1 again), and asks again.
    runtime.send(x, Signal::new("quit", Value::Null).unwrap()).unwrap();
    wait_for(&mut events, |e| &e.agent == x && matches!(e.kind, EventKind::AgentRestarted { .. })).await;
    runtime.get::<Noter>(x).unwrap().mount(&"keys".parse().unwrap(), Value::Null).await.unwrap();
    runtime.send(x, Signal::new("go", Value::Null).unwrap()).unwrap();
    noted(&mut events, x).await;

    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 3, "{seen:?}");
    let mut unique = seen.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 3, "a key was used twice: {seen:?}");
}
