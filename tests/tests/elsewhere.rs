//! Signals for elsewhere: what an agent emits to an agent its runtime does not run, to a topic, and a child's end
//! for a parent that lives elsewhere, all go to the runtime's `elsewhere` hook (a cluster's node); what comes in
//! from a trusted peer goes through `Runtime::relay`, which takes the runtime's own kinds that `send` refuses.

use agentry::agent::{Agent, Reaction};
use agentry::effect::{Effect, Target};
use agentry::id::AgentId;
use agentry::kinds::AGENT_CHILD_EXITED;
use agentry::runtime::{Elsewhere, Runtime, SpawnOptions};
use agentry::signal::Signal;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// Emits `hello` where it is told: `to` an agent id, or `shout` to a topic; keeps what it hears.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Echo {
    heard: Vec<String>,
}

impl Agent for Echo {
    fn name() -> &'static str {
        "echo"
    }

    fn handle_signal(&self, signal: &Signal) -> Reaction<Self> {
        let hello = || Signal::new("hello", json!({})).expect("a kind");
        match signal.kind().as_str() {
            "to" => {
                let to = AgentId::new(signal.data().as_str().unwrap_or("nobody")).expect("an id");
                Reaction::Keep(vec![Effect::emit(hello(), Target::Agent(to))])
            }
            "shout" => {
                let topic = signal.data().as_str().unwrap_or("news").to_owned();
                Reaction::Keep(vec![Effect::emit(hello(), Target::Topic(topic))])
            }
            "heard" => Reaction::Keep(vec![Effect::reply(signal.id(), json!(self.heard))]),
            kind => {
                let mut next = self.clone();
                next.heard.push(kind.to_owned());
                Reaction::Update(next, vec![])
            }
        }
    }
}

fn signal(kind: &str, data: serde_json::Value) -> Signal {
    Signal::new(kind, data).expect("a kind")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_is_not_for_this_runtime_goes_to_its_elsewhere_hook() {
    let (tx, mut handed) = tokio::sync::mpsc::unbounded_channel();
    let hook: agentry::runtime::ElsewhereHook = Arc::new(move |elsewhere| {
        let _ = tx.send(elsewhere);
    });
    let runtime = Runtime::builder().agent::<Echo>().expect("registers").elsewhere(hook).build();
    let id = |s: &str| AgentId::new(s).expect("an id");
    let opts = |s: &str| SpawnOptions { id: Some(id(s)), ..SpawnOptions::default() };
    let a = runtime.spawn(Echo::default(), opts("a")).await.expect("spawned");
    let here = runtime.spawn(Echo::default(), opts("here")).await.expect("spawned");
    runtime.subscribe(here.id(), "news");

    // To an agent this runtime does not run: handed over, with the agent's own source.
    a.send(signal("to", json!("far"))).expect("sent");
    match handed.recv().await.expect("handed") {
        Elsewhere::Agent { to, signal, kept_by } => {
            assert_eq!((to.as_str(), signal.kind().as_str()), ("far", "hello"));
            assert_eq!(signal.source(), "agentry/agent/a");
            assert_eq!(kept_by, None, "a store that keeps nothing keeps no emit to send again");
        }
        other => panic!("an agent's signal: {other:?}"),
    }
    // To an agent it runs: delivered here, nothing handed over.
    a.send(signal("to", json!("here"))).expect("sent");
    // To a topic: its subscribers here get it, and it is handed over for those elsewhere.
    a.send(signal("shout", json!("news"))).expect("sent");
    match handed.recv().await.expect("handed") {
        Elsewhere::Topic { topic, signal } => assert_eq!((topic.as_str(), signal.kind().as_str()), ("news", "hello")),
        other => panic!("the topic's signal (and not the one for `here`): {other:?}"),
    }
    let heard = here.call(signal("heard", json!(null)), Duration::from_secs(10)).await.expect("replies");
    assert_eq!(heard, json!(["hello", "hello"]), "one emitted to it, one through the topic");

    // A child whose parent lives elsewhere: its end is handed over for the parent.
    let child = SpawnOptions { parent: Some(id("far-parent")), ..opts("child") };
    runtime.spawn(Echo::default(), child).await.expect("spawned");
    runtime.stop(&id("child")).await.expect("stopped");
    match handed.recv().await.expect("handed") {
        Elsewhere::Agent { to, signal, .. } => {
            assert_eq!((to.as_str(), signal.kind().as_str()), ("far-parent", AGENT_CHILD_EXITED));
        }
        other => panic!("the child's end: {other:?}"),
    }
    assert!(handed.try_recv().is_err(), "nothing else was handed over");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relayed_signal_of_the_runtimes_own_kinds_is_taken_where_send_refuses_it() {
    let runtime = Runtime::builder().agent::<Echo>().expect("registers").build();
    let parent = AgentId::new("parent").expect("an id");
    let opts = SpawnOptions { id: Some(parent.clone()), ..SpawnOptions::default() };
    let echo = runtime.spawn(Echo::default(), opts).await.expect("spawned");
    runtime.subscribe(&parent, "news");
    let exited = Signal::builder(AGENT_CHILD_EXITED)
        .source("agentry/agent/child")
        .data(json!({"child": "child", "reason": "node `b` is down"}))
        .build()
        .expect("a signal");
    assert!(runtime.send(&parent, exited.clone()).is_err(), "a caller may not send the runtime's own kinds");
    assert_eq!(runtime.relay(Elsewhere::Agent { to: parent.clone(), signal: exited, kept_by: None }), 1);
    let shouted = Signal::builder("hello").source("agentry/agent/far").data(json!({})).build().expect("a signal");
    assert_eq!(runtime.relay(Elsewhere::Topic { topic: "news".into(), signal: shouted }), 1);
    let heard = echo.call(signal("heard", json!(null)), Duration::from_secs(10)).await.expect("replies");
    assert_eq!(heard, json!([AGENT_CHILD_EXITED, "hello"]));
}
