//! Everything an outside caller (or a runaway agent) can make the runtime keep is bounded, with a typed
//! refusal: the agent's own plumbing is closed to outside callers and a schedule keeps its true origin;
//! schedules, jobs, queued runs, approval waits and the signals kept for a sleeping agent whose thaw fails
//! each stop at their policy limit. Each attack runs through real actors (and a real SQLite file).

use agentry::action::{ErrorClass, OutcomeStatus};
use agentry::agent::{Agent, Reaction};
use agentry::effect::EffectRefusal;
use agentry::events::EventKind;
use agentry::id::AgentId;
use agentry::policy::Policy;
use agentry::runtime::{Runtime, RuntimeError, SpawnOptions};
use agentry::signal::Signal;
use agentry::skill::{Skill, SkillDefinition};
use agentry_skills::{Jobs, System};
use agentry_tests::{CALL, Operated, wait_for};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::Arc;

/// An agent that keeps the kind and source of every signal it gets and answers `ask` with them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Listener {
    heard: Vec<(String, String)>,
}

impl Agent for Listener {
    fn name() -> &'static str {
        "listener"
    }

    fn start_skills() -> Result<Vec<(Skill, Value)>, agentry::skill::BuildError> {
        Ok(vec![(System::skill()?, Value::Null)])
    }

    fn handle_signal(&self, signal: &Signal) -> Reaction<Self> {
        if signal.kind().as_str() == "ask" {
            return Reaction::Keep(vec![agentry::effect::Effect::reply(signal.id(), json!(self.heard))]);
        }
        let mut next = self.clone();
        next.heard.push((signal.kind().to_string(), signal.source().to_owned()));
        Reaction::Update(next, vec![])
    }
}

fn refused_class(outcome: &agentry::action::Outcome) -> Option<ErrorClass> {
    (outcome.status == OutcomeStatus::Blocked).then(|| outcome.error.as_ref().map(|e| e.class)).flatten()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outside_callers_cannot_stop_an_agent_or_plant_signals_in_it() {
    let runtime = Runtime::builder().skill(System::skill().unwrap()).build();
    let agent = runtime.spawn(Listener::default(), SpawnOptions::default()).await.unwrap();
    for (action, params) in [
        ("system.stop", json!({"reason": "a caller wants it gone"})),
        ("system.schedule", json!({"kind": "payment.approved", "after_ms": 0})),
        ("system.cancel", json!({"key": "anything"})),
    ] {
        let outcome = runtime.invoke(agent.id(), action, params).await.unwrap();
        assert_eq!(refused_class(&outcome), Some(ErrorClass::Denied), "{action}: {outcome:?}");
        assert!(outcome.error.unwrap().message.contains("deny_outside"), "{action}");
    }
    // Still there, and nothing was planted.
    let heard: Vec<(String, String)> =
        serde_json::from_value(agent.call(Signal::new("ask", Value::Null).unwrap(), CALL).await.unwrap()).unwrap();
    assert!(heard.is_empty(), "{heard:?}");

    // An operator may open `system.schedule` to outside callers: what they schedule then says where it came
    // from, never that it is the agent's own.
    let open = Policy { deny_outside: vec![], ..Policy::default() };
    let agent =
        runtime.spawn(Listener::default(), SpawnOptions { policy: open, ..SpawnOptions::default() }).await.unwrap();
    let scheduled = runtime
        .invoke(agent.id(), "system.schedule", json!({"kind": "payment.approved", "after_ms": 0}))
        .await
        .unwrap();
    assert_eq!(scheduled.status, OutcomeStatus::Completed, "{scheduled:?}");
    // The schedule fires on its own timer: ask until the agent has heard it.
    let heard = async {
        loop {
            let heard: Vec<(String, String)> =
                serde_json::from_value(agent.call(Signal::new("ask", Value::Null).unwrap(), CALL).await.unwrap())
                    .unwrap();
            if !heard.is_empty() {
                return heard;
            }
            tokio::task::yield_now().await;
        }
    };
    let heard = tokio::time::timeout(CALL, heard).await.expect("the scheduled signal fired");
    assert_eq!(heard, [("payment.approved".to_owned(), agentry::kinds::OUTSIDE_SOURCE.to_owned())]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_holds_no_more_schedules_than_its_limit() {
    let mut policy = Policy::default();
    policy.limits.schedules = 2;
    let op = Operated::start(vec![System::skill().unwrap()], policy, &[]).await;
    let mut events = op.runtime.events();
    for key in ["a", "b", "a"] {
        op.output("system.schedule", json!({"kind": "later", "after_ms": 3_600_000, "key": key})).await;
    }
    // A third key is one too many; replacing one it holds is not.
    op.output("system.schedule", json!({"kind": "later", "after_ms": 3_600_000, "key": "c"})).await;
    let refused = wait_for(&mut events, |e| matches!(e.kind, EventKind::EffectRefused { .. })).await;
    let EventKind::EffectRefused { refusal } = refused.kind else { unreachable!() };
    assert!(matches!(&refusal, EffectRefusal::LimitReached { limit: 2, .. }), "{refusal:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_holds_no_more_jobs_than_its_limit_and_leaves_slots_for_others() {
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let mut policy = Policy::default();
    policy.limits.running_jobs = 1;
    policy.limits.queued_jobs = 1;
    let skills = vec![Jobs::skill().unwrap(), agentry_tests::gate_skill(gate.clone())];
    let op = Operated::start_with(skills.clone(), policy, &[], |b| b.max_jobs(2)).await;
    for _ in 0..2 {
        op.output("jobs.submit", json!({"action": "gate.hold"})).await;
    }
    let (class, message) = op.failure("jobs.submit", json!({"action": "gate.hold"})).await;
    assert_eq!(class, "denied", "{message}");
    assert!(message.contains("limits.running_jobs"), "{message}");

    // The runtime has two slots: the first agent holds one, so another agent's job runs.
    let other = op.runtime.spawn(agentry_tests::Operator::default(), SpawnOptions::default()).await.unwrap();
    for skill in ["jobs", "gate"] {
        other.mount(&skill.parse().unwrap(), Value::Null).await.unwrap();
    }
    let submitted = op.runtime.invoke(other.id(), "jobs.submit", json!({"action": "gate.hold"})).await.unwrap();
    let job: uuid::Uuid = serde_json::from_value(submitted.output["job"].clone()).unwrap();
    let started = async {
        loop {
            if op.runtime.jobs().get(job).is_some_and(|j| j.status == agentry::action::JobStatus::Running) {
                break;
            }
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(CALL, started).await.expect("the other agent's job got a slot");
    gate.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_waiting_for_a_slot_or_for_approval_stop_at_their_limits() {
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let mut policy = Policy::default();
    policy.limits.queued_runs = 2;
    let runtime = Runtime::builder().skill(agentry_tests::gate_skill(gate.clone())).build();
    let opts = SpawnOptions { policy, max_in_flight: 1, ..SpawnOptions::default() };
    let agent = runtime.spawn((), opts).await.unwrap();
    agent.mount(&"gate".parse().unwrap(), Value::Null).await.unwrap();
    let mut events = runtime.events();
    // One runs, two wait; the fourth is refused at once.
    let mut calls = Vec::new();
    for _ in 0..3 {
        let (runtime, id) = (runtime.clone(), agent.id().clone());
        calls.push(tokio::spawn(async move { runtime.invoke(&id, "gate.hold", Value::Null).await }));
        wait_for(&mut events, |e| matches!(e.kind, EventKind::ActionQueued { .. })).await;
    }
    let refused = runtime.invoke(agent.id(), "gate.hold", Value::Null).await.unwrap();
    assert_eq!(refused_class(&refused), Some(ErrorClass::Denied), "{refused:?}");
    assert!(refused.error.unwrap().message.contains("limits.queued_runs"));
    gate.add_permits(3);
    for call in calls {
        assert_eq!(call.await.unwrap().unwrap().status, OutcomeStatus::Completed);
    }

    // Approval waits: at most one here.
    let mut policy = Policy::default().approval_at(Some(agentry::action::Risk::Low));
    policy.limits.awaiting_approval = 1;
    let op = Operated::start(vec![System::skill().unwrap()], policy, &[]).await;
    let first = op.run("system.log", json!({"message": "one"})).await;
    assert_eq!(first["outcome"]["status"], "awaiting_approval", "{first:#}");
    let (class, message) = op.failure("system.log", json!({"message": "two"})).await;
    assert_eq!(class, "denied", "{message}");
    assert!(message.contains("limits.awaiting_approval"), "{message}");
}

/// A hibernated agent whose thaw fails (its snapshot was damaged on disk) does not make `send` keep signals for
/// it for ever: past its limit, `send` refuses with a typed error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signals_for_an_agent_that_cannot_thaw_stop_at_their_limit() {
    let folder = tempfile::tempdir().unwrap();
    let runtime =
        Runtime::builder().agent::<Listener>().unwrap().durable(folder.path()).unwrap().open().await.unwrap().0;
    let mut policy = Policy::default();
    policy.limits.kept_signals = 3;
    let id = AgentId::new("sleeper").unwrap();
    runtime
        .spawn(Listener::default(), SpawnOptions { id: Some(id.clone()), policy, ..SpawnOptions::default() })
        .await
        .unwrap();
    runtime.hibernate(&id).await.unwrap();
    // Its last snapshot is on disk before it is damaged (else the journal's writer writes it over the damage).
    let _ = runtime.store().durable().expect("a durable journal").flushed().await;
    let journal = rusqlite::Connection::open(folder.path().join("journal.db")).unwrap();
    journal.execute("UPDATE snapshots SET snapshot = 'damaged' WHERE agent = 'sleeper'", []).unwrap();
    for n in 0..3 {
        runtime.send(&id, Signal::new("note", json!(n)).unwrap()).expect("kept, within the limit");
    }
    let refused = runtime.send(&id, Signal::new("note", json!(3)).unwrap()).unwrap_err();
    assert!(matches!(refused, RuntimeError::LimitReached { limit: 3, .. }), "{refused}");
}

/// A skill's refresh (what a server's `tools/list_changed` storm brings about) costs the agents that do not
/// mount it no write: only the one that mounts it keeps a new snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_storm_writes_nothing_for_agents_that_do_not_mount_the_skill() {
    let folder = tempfile::tempdir().unwrap();
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let (runtime, _) = Runtime::builder()
        .agent::<Listener>()
        .unwrap()
        .skill(agentry_tests::gate_skill(gate.clone()))
        .durable(folder.path())
        .unwrap()
        .open()
        .await
        .unwrap();
    let mut agents = Vec::new();
    for n in 0..3 {
        let id = AgentId::new(format!("a{n}")).unwrap();
        agents.push(
            runtime.spawn(Listener::default(), SpawnOptions { id: Some(id), ..SpawnOptions::default() }).await.unwrap(),
        );
    }
    agents[0].mount(&"gate".parse().unwrap(), Value::Null).await.unwrap();
    let journal = rusqlite::Connection::open(folder.path().join("journal.db")).unwrap();
    let snapshots = || -> Vec<String> {
        let mut query = journal.prepare("SELECT snapshot FROM snapshots ORDER BY agent").unwrap();
        query.query_map([], |row| row.get(0)).unwrap().map(Result::unwrap).collect()
    };
    let before = snapshots();
    for _ in 0..5 {
        let failed = runtime.refresh_skill(agentry_tests::gate_skill(gate.clone())).await.unwrap();
        assert!(failed.is_empty(), "{failed:?}");
    }
    let after = snapshots();
    assert_ne!(before[0], after[0], "the agent that mounts it keeps its refreshed skill");
    assert_eq!(before[1..], after[1..], "an agent that does not mount it wrote a snapshot");
}

/// What outside callers may not run, they may not run through a job or a call of a run they asked for either:
/// `jobs.submit` of `system.stop` from outside fails its job, and the agent lives on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plumbing_stays_closed_to_outside_callers_through_jobs() {
    let op = Operated::start(vec![System::skill().unwrap(), Jobs::skill().unwrap()], Policy::default(), &[]).await;
    let mut events = op.runtime.events();
    let submitted = op
        .runtime
        .invoke(op.agent.id(), "jobs.submit", json!({"action": "system.stop", "params": {"reason": "gone"}}))
        .await
        .unwrap();
    assert_eq!(submitted.status, OutcomeStatus::Completed, "{submitted:?}");
    let ended = wait_for(&mut events, |e| matches!(e.kind, EventKind::JobEnded { .. })).await;
    let EventKind::JobEnded { status, .. } = ended.kind else { unreachable!() };
    assert_eq!(status, agentry::action::JobStatus::Failed, "the job ran `system.stop`");
    // Still there.
    op.output("system.log", json!({"message": "alive"})).await;
}
