//! Hibernation on a real SQLite journal: an idle agent falls asleep (its actor stopped, its state on disk), a
//! signal, call or `get` thaws it transparently, an idle timer puts it to sleep by itself, and a model property
//! checks that signals, hibernations, thaws and whole restarts of the runtime in any order end in the state of an
//! agent that never slept.

use agentry::agent::{Agent, Reaction};
use agentry::effect::Effect;
use agentry::events::EventKind;
use agentry::id::AgentId;
use agentry::runtime::{Runtime, RuntimeError, SpawnOptions};
use agentry::signal::Signal;
use agentry_tests::wait_for;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

/// Adds and doubles; replies with its total to `get`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Tally {
    total: i64,
}

impl Agent for Tally {
    fn name() -> &'static str {
        "tally"
    }

    fn handle_signal(&self, signal: &Signal) -> Reaction<Self> {
        match signal.kind().as_str() {
            "add" => Reaction::Update(Tally { total: self.total + signal.data()["n"].as_i64().unwrap_or(0) }, vec![]),
            "double" => Reaction::Update(Tally { total: self.total * 2 }, vec![]),
            "get" => Reaction::Keep(vec![Effect::reply(signal.id(), json!(self.total))]),
            // Emits `add n` to the agent `to`.
            "tell" => {
                let to = signal.data()["to"].as_str().and_then(|to| AgentId::new(to).ok());
                let add = Signal::new("add", json!({"n": signal.data()["n"]})).ok();
                match (to, add) {
                    (Some(to), Some(add)) => {
                        Reaction::Keep(vec![Effect::emit(add, agentry::effect::Target::Agent(to))])
                    }
                    _ => Reaction::Ignore,
                }
            }
            // Emits `add n` to the topic's subscribers.
            "shout" => match Signal::new("add", json!({"n": signal.data()["n"]})) {
                Ok(add) => {
                    let topic = signal.data()["topic"].as_str().unwrap_or("news").to_owned();
                    Reaction::Keep(vec![Effect::emit(add, agentry::effect::Target::Topic(topic))])
                }
                Err(_) => Reaction::Ignore,
            },
            "arm" => {
                let Ok(later) = Signal::new("add", json!({"n": 1})) else { return Reaction::Keep(vec![]) };
                let after = Duration::from_millis(signal.data()["ms"].as_u64().unwrap_or(3_600_000));
                let schedule = Effect::schedule("later", after, later);
                let schedule = if signal.data()["skip"] == true { schedule.skip_if_missed() } else { schedule };
                Reaction::Keep(vec![schedule])
            }
            _ => Reaction::Ignore,
        }
    }
}

fn signal(kind: &str, data: Value) -> Signal {
    Signal::new(kind, data).expect("a kind")
}

async fn open(dir: &Path, idle: Option<Duration>) -> Runtime {
    let mut builder = Runtime::builder().agent::<Tally>().expect("registered").durable(dir).expect("journal");
    if let Some(idle) = idle {
        builder = builder.hibernate_after(idle);
    }
    builder.open().await.expect("opens").0
}

fn tally() -> AgentId {
    AgentId::new("tally").expect("an id")
}

async fn spawn(runtime: &Runtime) {
    let opts = SpawnOptions { id: Some(tally()), ..SpawnOptions::default() };
    runtime.spawn(Tally::default(), opts).await.expect("spawned");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hibernated_agent_keeps_its_state_and_wakes_for_a_signal_or_a_call() {
    let folder = tempfile::tempdir().expect("a folder");
    let runtime = open(folder.path(), None).await;
    spawn(&runtime).await;
    let mut events = runtime.events();
    runtime.send(&tally(), signal("add", json!({"n": 5}))).expect("sent");
    runtime.hibernate(&tally()).await.expect("it falls asleep");
    wait_for(&mut events, |e| matches!(e.kind, EventKind::AgentHibernated)).await;
    assert!(runtime.is_hibernating(&tally()));

    // A signal while it sleeps is kept and handled once it is thawed; a call thaws it too.
    runtime.send(&tally(), signal("double", Value::Null)).expect("kept for it");
    wait_for(&mut events, |e| matches!(e.kind, EventKind::AgentThawed)).await;
    let handle = runtime.get::<Tally>(&tally()).expect("a handle");
    assert_eq!(handle.call(signal("get", Value::Null), Duration::from_secs(10)).await.expect("reply"), json!(10));

    runtime.hibernate(&tally()).await.expect("asleep again");
    let handle = runtime.get::<Tally>(&tally()).expect("a handle to a sleeping agent");
    assert_eq!(handle.state().await.expect("thawed for it").domain, Tally { total: 10 });
    assert!(!runtime.is_hibernating(&tally()));
}

/// The total once it is `want`, asked until it is (a scheduled signal fires on its own timer).
async fn total_reaches(runtime: &Runtime, want: i64) {
    let reached = async {
        loop {
            let handle = runtime.get::<Tally>(&tally()).expect("a handle");
            if handle.call(signal("get", Value::Null), Duration::from_secs(10)).await.expect("reply") == json!(want) {
                return;
            }
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(Duration::from_secs(60), reached).await.expect("the scheduled signal was handled");
}

/// An armed schedule does not keep an agent awake: it hibernates, and is woken when the schedule comes due,
/// which then fires; after a restart of the runtime too (a sleeping agent is listed with its next due time).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_with_schedules_hibernates_and_wakes_when_one_comes_due() {
    let folder = tempfile::tempdir().expect("a folder");
    let runtime = open(folder.path(), None).await;
    spawn(&runtime).await;
    let handle = runtime.get::<Tally>(&tally()).expect("a handle");
    let mut events = runtime.events();
    handle.send(signal("arm", json!({"ms": 200}))).expect("sent");
    let _ = handle.state().await;
    runtime.hibernate(&tally()).await.expect("a schedule does not keep it awake");
    wait_for(&mut events, |e| matches!(e.kind, EventKind::AgentThawed)).await;
    total_reaches(&runtime, 1).await;

    // One that is skipped when missed is not missed when its thaw meets it a little late: it fires too.
    handle.send(signal("arm", json!({"ms": 200, "skip": true}))).expect("sent");
    let _ = handle.state().await;
    runtime.hibernate(&tally()).await.expect("asleep again");
    wait_for(&mut events, |e| matches!(e.kind, EventKind::AgentThawed)).await;
    total_reaches(&runtime, 2).await;

    // Again, with the runtime stopped and opened again while it sleeps.
    handle.send(signal("arm", json!({"ms": 400}))).expect("sent");
    let _ = handle.state().await;
    runtime.hibernate(&tally()).await.expect("asleep again");
    runtime.shutdown(Duration::from_secs(5)).await;
    drop(runtime);
    let runtime = open(folder.path(), None).await;
    let mut events = runtime.events();
    while runtime.is_hibernating(&tally()) {
        tokio::time::timeout(Duration::from_secs(60), events.recv()).await.expect("woken for its schedule").ok();
    }
    total_reaches(&runtime, 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_disk_nothing_sleeps() {
    let memory = Runtime::builder().agent::<Tally>().expect("registered").build();
    spawn(&memory).await;
    let refused = memory.hibernate(&tally()).await.expect_err("no durable store");
    assert!(matches!(refused, RuntimeError::Store { .. }), "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_agent_hibernates_by_itself() {
    let folder = tempfile::tempdir().expect("a folder");
    let runtime = open(folder.path(), Some(Duration::from_millis(40))).await;
    let mut events = runtime.events();
    spawn(&runtime).await;
    wait_for(&mut events, |e| matches!(e.kind, EventKind::AgentHibernated)).await;
    runtime.send(&tally(), signal("add", json!({"n": 2}))).expect("sent");
    wait_for(&mut events, |e| matches!(e.kind, EventKind::AgentThawed)).await;
    wait_for(&mut events, |e| matches!(e.kind, EventKind::AgentHibernated)).await;
    let handle = runtime.get::<Tally>(&tally()).expect("a handle");
    assert_eq!(handle.state().await.expect("state").domain.total, 2);
}

/// A runtime opened on a journal hibernates the agents it brought back, though it spawned none itself (its idle
/// timer once started only with a spawn).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recovered_agent_hibernates_by_itself_too() {
    let folder = tempfile::tempdir().expect("a folder");
    {
        let runtime = open(folder.path(), None).await;
        spawn(&runtime).await;
        runtime.shutdown(Duration::from_secs(5)).await;
    }
    let runtime = open(folder.path(), Some(Duration::from_millis(40))).await;
    let mut events = runtime.events();
    // Awake (not asleep already): it falls asleep by itself.
    if runtime.get::<Tally>(&tally()).is_ok() {
        wait_for(&mut events, |e| matches!(e.kind, EventKind::AgentHibernated)).await;
    }
    let durable = runtime.store().durable().expect("a journal");
    let listed = durable.alive(None, 10).expect("listed");
    assert!(listed.iter().all(|agent| agent.asleep), "{listed:?}");
}

#[derive(Debug, Clone)]
enum Step {
    Add(i64),
    Double,
    Hibernate,
    Thaw,
    Restart,
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    let step = prop_oneof![
        3 => (-5i64..6).prop_map(Step::Add),
        1 => Just(Step::Double),
        2 => Just(Step::Hibernate),
        1 => Just(Step::Thaw),
        1 => Just(Step::Restart),
    ];
    prop::collection::vec(step, 1..14)
}

#[test]
fn sleeping_waking_and_restarting_in_any_order_end_where_a_sleepless_agent_ends() {
    let cases = std::env::var("AGENTRY_SLEEP_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(16);
    let tokio = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("tokio");
    let mut runner = TestRunner::new(Config { cases, failure_persistence: None, ..Config::default() });
    runner
        .run(&steps(), |steps| {
            tokio.block_on(async {
                let folder = tempfile::tempdir().expect("a folder");
                let mut runtime = open(folder.path(), None).await;
                spawn(&runtime).await;
                let mut model = 0i64;
                for step in &steps {
                    match step {
                        Step::Add(n) => {
                            runtime.send(&tally(), signal("add", json!({"n": n}))).expect("sent");
                            model += n;
                        }
                        Step::Double => {
                            runtime.send(&tally(), signal("double", Value::Null)).expect("sent");
                            model *= 2;
                        }
                        Step::Hibernate => {
                            // Busy (a signal not yet handled) is a fine answer; asleep already is too.
                            let _ = runtime.hibernate(&tally()).await;
                        }
                        Step::Thaw => runtime.thaw(&tally()).await.expect("thawed"),
                        Step::Restart => {
                            runtime.shutdown(Duration::from_secs(5)).await;
                            drop(runtime);
                            runtime = open(folder.path(), None).await;
                        }
                    }
                }
                let handle = runtime.get::<Tally>(&tally()).expect("a handle");
                let got = handle.call(signal("get", Value::Null), Duration::from_secs(10)).await.expect("reply");
                runtime.shutdown(Duration::from_secs(5)).await;
                prop_assert_eq!(got, json!(model), "{:?}", steps);
                Ok(())
            })
        })
        .unwrap_or_else(|failure| panic!("{failure}"));
}

/// A job keeps its agent awake until it ends, and its end reaches the agent: an agent that submits a job and
/// then idles does not fall asleep on it (a job that ended after its agent slept used to be lost).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_keeps_its_agent_awake_until_it_ends() {
    use agentry::skill::SkillDefinition;
    use agentry_tests::Operator;
    let folder = tempfile::tempdir().expect("a folder");
    let gate = std::sync::Arc::new(tokio::sync::Semaphore::new(0));
    let (runtime, _) = Runtime::builder()
        .agent::<Operator>()
        .unwrap()
        .skill(agentry_skills::Jobs::skill().unwrap())
        .skill(agentry_tests::gate_skill(gate.clone()))
        .durable(folder.path())
        .unwrap()
        .open()
        .await
        .unwrap();
    let id = AgentId::new("worker").unwrap();
    let agent = runtime
        .spawn(Operator::default(), SpawnOptions { id: Some(id.clone()), ..SpawnOptions::default() })
        .await
        .unwrap();
    for skill in ["jobs", "gate"] {
        agent.mount(&skill.parse().unwrap(), Value::Null).await.unwrap();
    }
    let mut events = runtime.events();
    let submit = signal("do", json!({"action": "jobs.submit", "params": {"action": "gate.hold"}}));
    let submitted = agent.call(submit, Duration::from_secs(60)).await.unwrap();
    assert_eq!(submitted["kind"], "action.completed", "{submitted:#}");
    let refused = runtime.hibernate(&id).await.expect_err("a job is not ended");
    assert!(matches!(&refused, RuntimeError::Busy { why, .. } if why.contains("jobs")), "{refused}");
    gate.add_permits(1);
    wait_for(&mut events, |e| matches!(e.kind, EventKind::JobEnded { .. })).await;
    // Its end reaches the agent, and then nothing keeps it awake.
    let heard = async {
        loop {
            let state: Operator = serde_json::from_value(
                agent.call(signal("ask", Value::Null), Duration::from_secs(10)).await.expect("reply"),
            )
            .unwrap();
            if !state.job_signals.is_empty() {
                return state;
            }
            tokio::task::yield_now().await;
        }
    };
    let state = tokio::time::timeout(Duration::from_secs(60), heard).await.expect("the job's end reached the agent");
    assert_eq!(state.job_signals[0]["kind"], "job.completed");
    runtime.hibernate(&id).await.expect("nothing keeps it awake now");
}

/// A hibernating agent let go (as a cluster's node hands one over): it leaves the runtime without ending, the
/// signals kept for it while it slept come back to the caller in order, signals for it then find no agent here,
/// and its journal holds it as it slept, for whoever takes it on next (here: the runtime opened again). One that
/// something thawed meanwhile is not let go. (On one thread, so the thaw a kept signal starts waits until the
/// test yields.)
#[tokio::test(flavor = "current_thread")]
async fn a_sleeper_let_go_leaves_with_its_journal_as_it_slept_and_hands_back_what_was_kept() {
    let folder = tempfile::tempdir().expect("a folder");
    let runtime = open(folder.path(), None).await;
    spawn(&runtime).await;
    runtime.send(&tally(), signal("add", json!({"n": 5}))).expect("sent");
    runtime.hibernate(&tally()).await.expect("it falls asleep");
    let (first, second) = (signal("add", json!({"n": 1})), signal("double", Value::Null));
    let ids = [first.id(), second.id()];
    runtime.send(&tally(), first).expect("kept for it");
    runtime.send(&tally(), second).expect("kept for it");

    let kept = runtime.release(&tally()).await.expect("let go").expect("asleep: let go");
    assert_eq!(kept.iter().map(Signal::id).collect::<Vec<_>>(), ids, "what was kept, in order");
    assert!(!runtime.contains(&tally()), "gone from this runtime");
    let sent = runtime.send(&tally(), signal("add", json!({"n": 100})));
    assert!(matches!(sent, Err(RuntimeError::NoSuchAgent(_))), "{sent:?}");
    // The thaw the kept signals started finds nothing to thaw, and nothing comes back.
    tokio::task::yield_now().await;
    assert!(!runtime.contains(&tally()));
    assert!(matches!(runtime.release(&tally()).await, Err(RuntimeError::NoSuchAgent(_))));
    runtime.shutdown(Duration::from_secs(1)).await;
    drop(runtime);

    let runtime = open(folder.path(), None).await;
    let handle = runtime.get::<Tally>(&tally()).expect("the journal kept it");
    assert_eq!(handle.state().await.expect("its state").domain, Tally { total: 5 }, "as it slept");

    // Thawed before it is let go: it stays.
    runtime.hibernate(&tally()).await.expect("asleep again");
    runtime.thaw(&tally()).await.expect("thawed");
    assert_eq!(runtime.release(&tally()).await.expect("asked"), None);
    assert!(runtime.contains(&tally()));
}

/// An agent's emit to an agent asleep in the same runtime is kept for it and thaws it, as a signal sent from
/// outside is: it is not lost because the agent sleeps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_emit_to_a_sleeping_agent_thaws_it_and_is_applied() {
    let folder = tempfile::tempdir().expect("a folder");
    let runtime = open(folder.path(), None).await;
    spawn(&runtime).await;
    let teller = AgentId::new("teller").expect("an id");
    let opts = SpawnOptions { id: Some(teller.clone()), ..SpawnOptions::default() };
    runtime.spawn(Tally::default(), opts).await.expect("spawned");
    let mut events = runtime.events();
    runtime.hibernate(&tally()).await.expect("it falls asleep");

    runtime.send(&teller, signal("tell", json!({"to": "tally", "n": 7}))).expect("sent");
    wait_for(&mut events, |e| matches!(e.kind, EventKind::AgentThawed) && e.agent == tally()).await;
    total_reaches(&runtime, 7).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_stays_subscribed_asleep_and_a_topics_signal_thaws_it() {
    let folder = tempfile::tempdir().expect("a folder");
    let runtime = open(folder.path(), None).await;
    spawn(&runtime).await;
    runtime.subscribe(&tally(), "news");
    let teller = AgentId::new("teller").expect("an id");
    let opts = SpawnOptions { id: Some(teller.clone()), ..SpawnOptions::default() };
    runtime.spawn(Tally::default(), opts).await.expect("spawned");
    let mut events = runtime.events();
    runtime.hibernate(&tally()).await.expect("it falls asleep");

    // Asleep: the topic's signal is kept for it and thaws it.
    runtime.send(&teller, signal("shout", json!({"topic": "news", "n": 5}))).expect("sent");
    wait_for(&mut events, |e| matches!(e.kind, EventKind::AgentThawed) && e.agent == tally()).await;
    total_reaches(&runtime, 5).await;
    // Thawed, it is still subscribed; and once it stopped for good, it is not.
    runtime.send(&teller, signal("shout", json!({"topic": "news", "n": 2}))).expect("sent");
    total_reaches(&runtime, 7).await;
    runtime.stop(&tally()).await.expect("stopped");
    let opts = SpawnOptions { id: Some(tally()), ..SpawnOptions::default() };
    runtime.spawn(Tally::default(), opts).await.expect("a new agent under the id");
    runtime.send(&teller, signal("shout", json!({"topic": "news", "n": 9}))).expect("sent");
    // Answered after the shout was handled (and published): what it published is in the new agent's mailbox by
    // then, ahead of what is sent to it next.
    let teller = runtime.get::<Tally>(&teller).expect("a handle");
    teller.call(signal("get", Value::Null), Duration::from_secs(10)).await.expect("reply");
    let fresh = runtime.get::<Tally>(&tally()).expect("a handle");
    let total = fresh.call(signal("get", Value::Null), Duration::from_secs(10)).await.expect("reply");
    assert_eq!(total, json!(0), "a new agent under the id is not subscribed");
}
