//! The journal's outbox: an agent's emit to an agent elsewhere (handed to the runtime's `elsewhere` hook, as a
//! cluster's node takes it) is kept in its journal until the hook's owner says it was sent on
//! (`Runtime::sent_on`); the next opening of the journal hands what was not sent on to the hook again, in order
//! and under the same ids, before the agent handles anything new.

use agentry::agent::{Agent, Reaction};
use agentry::effect::{Effect, Target};
use agentry::id::AgentId;
use agentry::runtime::{Elsewhere, ElsewhereHook, Runtime, SpawnOptions};
use agentry::signal::Signal;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::{UnboundedReceiver, error::TryRecvError};

/// On `to`, emits `hello` (numbered by the signal's data `n`) to the agent named in `to`; `stop` stops it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Teller;

impl Agent for Teller {
    fn name() -> &'static str {
        "teller"
    }

    fn handle_signal(&self, signal: &Signal) -> Reaction<Self> {
        match signal.kind().as_str() {
            "to" => {
                let to = AgentId::new(signal.data()["to"].as_str().unwrap_or("nobody")).expect("an id");
                let hello = Signal::new("hello", json!({"n": signal.data()["n"]})).expect("a kind");
                Reaction::Keep(vec![Effect::emit(hello, Target::Agent(to))])
            }
            "stop" => Reaction::Keep(vec![Effect::stop("asked to")]),
            _ => Reaction::Ignore,
        }
    }
}

fn id(s: &str) -> AgentId {
    AgentId::new(s).expect("an id")
}

/// Where the journal is kept.
#[derive(Clone, Copy)]
enum Journal<'a> {
    Sqlite(&'a Path),
    Postgres(&'a str),
}

/// A durable runtime over `journal` whose hook for elsewhere hands what it gets to the receiver.
async fn open(journal: Journal<'_>) -> (Runtime, UnboundedReceiver<Elsewhere>) {
    let (tx, handed) = tokio::sync::mpsc::unbounded_channel();
    let hook: ElsewhereHook = Arc::new(move |elsewhere| {
        let _ = tx.send(elsewhere);
    });
    let builder = Runtime::builder().agent::<Teller>().expect("registers").elsewhere(hook);
    let builder = match journal {
        Journal::Sqlite(folder) => builder.durable(folder).expect("the journal opens"),
        Journal::Postgres(url) => {
            builder.store(Arc::new(agentry::store::PostgresStore::connect(url).expect("the journal connects")))
        }
    };
    let (runtime, _) = builder.open().await.expect("opens");
    (runtime, handed)
}

/// What the hook got next: an agent's signal, its target, its number, its id and who keeps it.
async fn next(handed: &mut UnboundedReceiver<Elsewhere>) -> (String, u64, uuid::Uuid, Option<AgentId>) {
    match tokio::time::timeout(Duration::from_secs(10), handed.recv()).await {
        Ok(Some(Elsewhere::Agent { to, signal, kept_by })) => {
            (to.to_string(), signal.data()["n"].as_u64().expect("numbered"), signal.id(), kept_by)
        }
        other => panic!("expected an agent's signal for elsewhere, got {other:?}"),
    }
}

fn to(agent: &str, n: u64) -> Signal {
    Signal::new("to", json!({"to": agent, "n": n})).expect("a kind")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_emit_elsewhere_is_kept_until_sent_on_and_the_next_opening_hands_it_over_again() {
    let folder = tempfile::tempdir().expect("a folder");
    kept_until_sent_on(Journal::Sqlite(folder.path())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn so_it_is_in_postgresql() {
    let Some(postgres) = agentry_tests::postgres::or_skip("outbox") else { return };
    kept_until_sent_on(Journal::Postgres(&postgres.url())).await;
}

async fn kept_until_sent_on(journal: Journal<'_>) {
    let teller = id("teller");
    let (runtime, mut handed) = open(journal).await;
    let opts = SpawnOptions { id: Some(teller.clone()), ..SpawnOptions::default() };
    let agent = runtime.spawn(Teller, opts).await.expect("spawned");
    runtime.spawn(Teller, SpawnOptions { id: Some(id("here")), ..SpawnOptions::default() }).await.expect("spawned");
    for (target, n) in [("far", 1), ("here", 2), ("away", 3), ("far", 4)] {
        agent.send(to(target, n)).expect("sent");
    }
    // The emit to an agent of this runtime's is delivered here; the others are handed over, kept by `teller`.
    let (first, away, last) = (next(&mut handed).await, next(&mut handed).await, next(&mut handed).await);
    assert_eq!((first.0.as_str(), first.1, first.3.as_ref()), ("far", 1, Some(&teller)));
    assert_eq!((away.0.as_str(), away.1, away.3.as_ref()), ("away", 3, Some(&teller)));
    assert_eq!((last.0.as_str(), last.1), ("far", 4));
    // Only the one to `away` was sent on before the process went.
    runtime.sent_on(&teller, away.2);
    runtime.shutdown(Duration::from_secs(5)).await;

    // The next opening hands over again the two not sent on, in order, under the same ids, kept by `teller`.
    let (runtime, mut handed) = open(journal).await;
    let again = (next(&mut handed).await, next(&mut handed).await);
    assert_eq!(again, (first.clone(), last.clone()), "the same signals, in the order made");
    assert!(matches!(handed.try_recv(), Err(TryRecvError::Empty)), "the one sent on is not handed over again");
    // What `teller` emits from now on comes after them.
    runtime.get::<Teller>(&teller).expect("it came back").send(to("far", 5)).expect("sent");
    let made = next(&mut handed).await;
    assert_eq!((made.0.as_str(), made.1), ("far", 5));
    for (_, _, signal, _) in [&first, &last, &made] {
        runtime.sent_on(&teller, *signal);
    }
    runtime.shutdown(Duration::from_secs(5)).await;

    // Once each was sent on, an opening hands over nothing.
    let (runtime, mut handed) = open(journal).await;
    assert!(runtime.get::<Teller>(&teller).is_ok(), "it came back");
    assert!(matches!(handed.try_recv(), Err(TryRecvError::Empty)), "all were sent on");
    runtime.shutdown(Duration::from_secs(5)).await;
}
