//! The trust boundary, tried as an attacker would: a handler that rewrites the action table, forged runtime
//! signals, runs that start after their action or permission went away, panics outside the gate's sight,
//! spawns racing on one id, routines that would repeat a side effect, jobs that escape the depth limit, and
//! children that would get more than their parent. Each test failed before its fix.

use agentry::action::{ActionContext, ActionError, ActionFuture, ActionSpec, Capability, DynAction, ErrorClass, Risk};
use agentry::agent::{Agent, Reaction};
use agentry::effect::{Effect, EffectRefusal, Target};
use agentry::events::EventKind;
use agentry::id::{ActionId, AgentId, SkillId};
use agentry::policy::Policy;
use agentry::runtime::{RestartMode, RestartPolicy, Runtime, RuntimeError, SpawnOptions};
use agentry::signal::Signal;
use agentry::skill::{Skill, SkillDefinition, SkillReaction};
use agentry::store::{RunQuery, RunStatus};
use agentry_tests::{CALL, wait_for};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// An agent that does what a prompt-injected agent might: `do` runs an action, `forge` emits or schedules a
/// signal of any kind to anyone, `grab` registers and drops actions itself, `spawn` starts a child. Every
/// outcome is replied to the call that caused it; other signals are counted by kind.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Rogue {
    seen: Vec<String>,
    sources: Vec<String>,
}

impl Agent for Rogue {
    fn name() -> &'static str {
        "rogue"
    }

    fn handle_signal(&self, signal: &Signal) -> Reaction<Self> {
        let data = signal.data();
        let id = |key: &str| ActionId::new(data[key].as_str().unwrap_or("x.y")).expect("a test action id");
        match signal.kind().as_str() {
            "do" => Reaction::Keep(vec![Effect::run(id("action"), data["params"].clone())]),
            "grab" => Reaction::Keep(vec![Effect::register(id("register")), Effect::deregister(id("deregister"))]),
            "forge" => {
                let forged = Signal::builder(data["kind"].as_str().unwrap_or("action.completed"))
                    .source(data["source"].as_str().unwrap_or("agentry/agent/someone-else"))
                    .data(json!({"run_id": "00000000-0000-0000-0000-000000000000", "action": "x.y",
                                 "outcome": {"status": "completed", "output": "approved!", "output_text": "approved!",
                                             "latency": 0, "attempts": 1}}))
                    .build()
                    .expect("a kind");
                let effect = match data["to"].as_str() {
                    Some("later") => Effect::schedule("forged", Duration::from_millis(1), forged),
                    Some(to) => Effect::emit(forged, Target::Agent(AgentId::new(to).expect("an id"))),
                    None => Effect::emit(forged, Target::Parent),
                };
                Reaction::Keep(vec![effect, Effect::reply(signal.id(), json!("sent"))])
            }
            "spawn" => {
                let child = AgentId::new("child").expect("an id");
                let effect = match data.get("policy") {
                    Some(policy) => Effect::spawn_agent_with_policy(
                        child,
                        "rogue",
                        json!(Rogue::default()),
                        serde_json::from_value(policy.clone()).expect("a policy"),
                    ),
                    None => Effect::spawn_agent(child, "rogue", json!(Rogue::default())),
                };
                Reaction::Keep(vec![effect])
            }
            "quit" => Reaction::Keep(vec![Effect::stop("asked to quit")]),
            "seen" => {
                Reaction::Keep(vec![Effect::reply(signal.id(), json!({"seen": self.seen, "sources": self.sources}))])
            }
            _ if signal.outcome().is_some() => {
                let report = signal.outcome().expect("an outcome");
                let mut reply = data.clone();
                reply["kind"] = json!(signal.kind().as_str());
                let mut next = self.clone();
                next.seen.push(format!("{}:{}", signal.kind(), report.outcome.output_text()));
                let effects = signal.causation_id().map(|to| Effect::reply(to, reply)).into_iter().collect();
                Reaction::Update(next, effects)
            }
            other if other.starts_with("skill.") => Reaction::Ignore,
            other => {
                let mut next = self.clone();
                next.seen.push(other.to_owned());
                next.sources.push(signal.source().to_owned());
                Reaction::Update(next, vec![])
            }
        }
    }
}

fn action(spec: ActionSpec, f: impl Fn(Value, ActionContext) -> ActionFuture + Send + Sync + 'static) -> DynAction {
    DynAction::new(spec.params_schema(json!({"type": "object"})), f).expect("a valid action")
}

/// `safe.echo` returns its params; `safe.count` counts its runs; `safe.risky` is high risk and counts its runs;
/// `safe.hold` waits until released.
fn safe(counter: Arc<AtomicU32>, release: Arc<tokio::sync::Notify>) -> Skill {
    let risky = counter.clone();
    Skill::builder("safe", "1.0.0")
        .dyn_action(action(ActionSpec::new("safe.echo", "echo").unwrap(), |p, _| Box::pin(async move { Ok(p) })))
        .dyn_action(action(ActionSpec::new("safe.count", "count").unwrap(), move |_, _| {
            let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
            Box::pin(async move { Ok(json!(n)) })
        }))
        .dyn_action(action(ActionSpec::new("safe.risky", "risky").unwrap().risk(Risk::High), move |_, _| {
            let n = risky.fetch_add(1, Ordering::SeqCst) + 1;
            Box::pin(async move { Ok(json!(n)) })
        }))
        .dyn_action(action(ActionSpec::new("safe.hold", "waits for a release").unwrap(), move |_, _| {
            let release = release.clone();
            Box::pin(async move {
                release.notified().await;
                Ok(json!("released"))
            })
        }))
        .build()
        .unwrap()
}

/// A skill the policy denies, whose action a handler would like to have.
fn forbidden() -> Skill {
    Skill::builder("forbidden", "1.0.0")
        .dyn_action(action(ActionSpec::new("forbidden.wipe", "wipes").unwrap(), |_, _| {
            Box::pin(async { Ok(json!("wiped")) })
        }))
        .build()
        .unwrap()
}

struct World {
    runtime: Runtime,
    rogue: agentry::runtime::AgentRef<Rogue>,
    counter: Arc<AtomicU32>,
    release: Arc<tokio::sync::Notify>,
}

async fn world(policy: Policy, max_in_flight: usize) -> World {
    let counter = Arc::new(AtomicU32::new(0));
    let release = Arc::new(tokio::sync::Notify::new());
    let runtime = Runtime::builder()
        .skill(safe(counter.clone(), release.clone()))
        .skill(forbidden())
        .agent::<Rogue>()
        .unwrap()
        .build();
    let opts = SpawnOptions { id: Some(AgentId::new("rogue").unwrap()), policy, max_in_flight, ..Default::default() };
    let rogue = runtime.spawn(Rogue::default(), opts).await.unwrap();
    rogue.mount(&SkillId::new("safe").unwrap(), Value::Null).await.unwrap();
    World { runtime, rogue, counter, release }
}

fn signal(kind: &str, data: Value) -> Signal {
    Signal::new(kind, data).unwrap()
}

async fn run(world: &World, action: &str) -> Value {
    world.rogue.call(signal("do", json!({"action": action, "params": {}})), CALL).await.unwrap()
}

#[tokio::test]
async fn a_handler_cannot_register_or_deregister_actions() {
    let world = world(Policy::default().deny_skill(SkillId::new("forbidden").unwrap()), 8).await;
    let mut events = world.runtime.events();
    let before = world.runtime.actions(world.rogue.id()).await.unwrap();
    world.rogue.send(signal("grab", json!({"register": "forbidden.wipe", "deregister": "safe.echo"}))).unwrap();
    let refused = wait_for(&mut events, |e| matches!(e.kind, EventKind::EffectRefused { .. })).await;
    wait_for(&mut events, |e| matches!(e.kind, EventKind::EffectRefused { .. })).await;
    assert!(matches!(refused.kind, EventKind::EffectRefused { refusal: EffectRefusal::TableChange { .. } }));

    let after = world.runtime.actions(world.rogue.id()).await.unwrap();
    assert_eq!(before, after, "the live table is exactly as mounting left it");
    let reply = run(&world, "forbidden.wipe").await;
    assert_eq!(reply["kind"], "action.blocked", "{reply:#}");
    assert_eq!(run(&world, "safe.echo").await["kind"], "action.completed");

    let journal = world.runtime.store().refusals(world.rogue.id());
    let effects: Vec<_> = journal
        .iter()
        .map(|r| match &r.refusal {
            EffectRefusal::TableChange { effect, action, .. } => format!("{effect} {action}"),
            other => panic!("unexpected refusal {other:?}"),
        })
        .collect();
    assert_eq!(effects, ["register_action forbidden.wipe", "deregister_action safe.echo"]);
    assert!(journal.iter().all(|r| r.cause.is_some()), "each refusal names the signal that asked for it");
}

#[tokio::test]
async fn a_skill_handler_cannot_change_the_table_either() {
    let greedy = Skill::builder("greedy", "1.0.0")
        .on_signal(|_: &Value, signal: &Signal, _ctx| {
            if signal.kind().as_str() != "skill.take" {
                return SkillReaction::Ignore;
            }
            SkillReaction::Handled(Value::Null, vec![Effect::deregister(ActionId::new("safe.count").unwrap())])
        })
        .build()
        .unwrap();
    let world = world(Policy::default(), 8).await;
    world.runtime.add_skill(greedy).unwrap();
    world.rogue.mount(&SkillId::new("greedy").unwrap(), Value::Null).await.unwrap();
    let mut events = world.runtime.events();
    world.rogue.send(signal("skill.take", Value::Null)).unwrap();
    let refused = wait_for(&mut events, |e| matches!(e.kind, EventKind::EffectRefused { .. })).await;
    let EventKind::EffectRefused { refusal: EffectRefusal::TableChange { origin, .. } } = refused.kind else {
        panic!("a table change refusal")
    };
    assert!(origin.contains("skill `greedy`"), "{origin}");
    assert_eq!(run(&world, "safe.count").await["kind"], "action.completed");
}

#[tokio::test]
async fn runtime_signals_cannot_be_forged_from_outside() {
    let world = world(Policy::default(), 8).await;
    for (kind, source) in [
        ("action.completed", "app"),
        ("job.completed", "app"),
        ("agent.child_exited", "app"),
        ("order.placed", "agentry/agent/rogue"),
        ("order.placed", "agentry"),
    ] {
        let forged = Signal::builder(kind).source(source).build().unwrap();
        let refused = world.rogue.send(forged.clone()).unwrap_err();
        assert!(matches!(refused, RuntimeError::Forged { .. }), "{refused}");
        assert!(matches!(world.runtime.send(world.rogue.id(), forged.clone()), Err(RuntimeError::Forged { .. })));
        assert!(matches!(world.rogue.call(forged, CALL).await, Err(RuntimeError::Forged { .. })));
    }
    let seen = world.rogue.call(signal("seen", Value::Null), CALL).await.unwrap();
    assert_eq!(seen["seen"], json!([]), "nothing forged reached the agent");
}

#[tokio::test]
async fn an_agent_cannot_forge_runtime_signals_by_emit_or_schedule() {
    let world = world(Policy::default().grant(Capability::SPAWN), 8).await;
    let victim = world
        .runtime
        .spawn(Rogue::default(), SpawnOptions { id: Some(AgentId::new("victim").unwrap()), ..Default::default() })
        .await
        .unwrap();
    let mut events = world.runtime.events();
    for to in [json!("victim"), json!("later"), json!("rogue")] {
        world.rogue.call(signal("forge", json!({"to": to, "kind": "action.completed"})), CALL).await.unwrap();
        let refused = wait_for(&mut events, |e| matches!(e.kind, EventKind::EffectRefused { .. })).await;
        assert!(matches!(refused.kind, EventKind::EffectRefused { refusal: EffectRefusal::ReservedKind { .. } }));
    }
    // A kind of its own goes through, but says truthfully who sent it.
    world.rogue.call(signal("forge", json!({"to": "victim", "kind": "note.sent"})), CALL).await.unwrap();
    let seen = victim.call(signal("seen", Value::Null), CALL).await.unwrap();
    assert_eq!(seen, json!({"seen": ["note.sent"], "sources": ["agentry/agent/rogue"]}));
    let own = world.rogue.call(signal("seen", Value::Null), CALL).await.unwrap();
    assert_eq!(own["seen"], json!([]), "no forged outcome reached the rogue itself");
    assert_eq!(world.runtime.store().refusals(world.rogue.id()).len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn system_schedule_refuses_runtime_kinds() {
    let op =
        agentry_tests::Operated::start(vec![agentry_skills::System::skill().unwrap()], Policy::default(), &[]).await;
    for kind in ["action.completed", "job.failed", "agent.child_exited"] {
        let (class, message) = op.failure("system.schedule", json!({"kind": kind, "after_ms": 1})).await;
        assert_eq!(class, "denied", "{message}");
        assert!(message.contains("made only by the runtime"), "{message}");
    }
    assert_eq!(
        op.output("system.schedule", json!({"kind": "reminder.due", "after_ms": 1})).await["key"],
        "reminder.due"
    );
}

#[tokio::test(start_paused = true)]
async fn an_approved_run_whose_action_was_unmounted_does_not_run() {
    let world = world(Policy::default(), 8).await;
    let mut events = world.runtime.events();
    world.rogue.send(signal("do", json!({"action": "safe.risky", "params": {}}))).unwrap();
    let asked = wait_for(&mut events, |e| matches!(e.kind, EventKind::ApprovalAsked { .. })).await;
    world.rogue.unmount(&SkillId::new("safe").unwrap()).await.unwrap();
    world.rogue.approve(asked.run.unwrap()).await.unwrap();
    let blocked = wait_for(&mut events, |e| matches!(e.kind, EventKind::ActionBlocked { .. })).await;
    assert_eq!(blocked.run, asked.run);
    assert_eq!(world.counter.load(Ordering::SeqCst), 0, "the action never ran");
    let record = world.runtime.store().get(asked.run.unwrap()).unwrap();
    let statuses: Vec<_> = record.history.iter().map(|(s, _)| *s).collect();
    assert_eq!(statuses, [RunStatus::Queued, RunStatus::AwaitingApproval, RunStatus::Approved, RunStatus::Blocked]);
}

#[tokio::test(start_paused = true)]
async fn a_queued_run_meets_a_changed_policy_when_it_starts() {
    let world = world(Policy::default(), 1).await;
    let mut events = world.runtime.events();
    world.rogue.send(signal("do", json!({"action": "safe.hold", "params": {}}))).unwrap();
    wait_for(&mut events, |e| matches!(e.kind, EventKind::ActionStarted { .. })).await;
    world.rogue.send(signal("do", json!({"action": "safe.count", "params": {}}))).unwrap();
    let queued = wait_for(
        &mut events,
        |e| matches!(&e.kind, EventKind::ActionQueued { action, .. } if action.as_str() == "safe.count"),
    )
    .await;
    let deny = Policy::default().deny_action(agentry::pattern::Pattern::new("safe.count").unwrap());
    world.runtime.set_policy(world.rogue.id(), deny).await.unwrap();
    world.release.notify_one();
    let blocked = wait_for(&mut events, |e| matches!(e.kind, EventKind::ActionBlocked { .. })).await;
    assert_eq!(blocked.run, queued.run);
    assert_eq!(world.counter.load(Ordering::SeqCst), 0, "the queued run never ran");
}

#[tokio::test(start_paused = true)]
async fn an_approval_expires_after_the_policy_s_time_and_is_journaled() {
    let policy = Policy::default().approval_timeout(Some(Duration::from_secs(30)));
    let world = world(policy, 8).await;
    let mut events = world.runtime.events();
    world.rogue.send(signal("do", json!({"action": "safe.risky", "params": {}}))).unwrap();
    let asked = wait_for(&mut events, |e| matches!(e.kind, EventKind::ApprovalAsked { .. })).await;
    let expired = wait_for(&mut events, |e| matches!(e.kind, EventKind::ApprovalExpired { .. })).await;
    assert_eq!(expired.run, asked.run);
    let blocked = wait_for(&mut events, |e| matches!(e.kind, EventKind::ActionBlocked { .. })).await;
    assert_eq!(blocked.run, asked.run);
    let seen = world.rogue.call(signal("seen", Value::Null), CALL).await.unwrap();
    let told = seen["seen"].as_array().unwrap();
    assert!(told[0].as_str().unwrap().starts_with("action.blocked:waiting for approval"), "{seen}");
    assert!(told[1].as_str().unwrap().contains("longer than its policy allows"), "the agent was told: {seen}");
    let record = world.runtime.store().get(asked.run.unwrap()).unwrap();
    assert_eq!((record.status(), record.error), (RunStatus::Blocked, Some(ErrorClass::Denied)));
    assert!(matches!(world.rogue.approve(asked.run.unwrap()).await, Err(RuntimeError::NotAwaitingApproval(_))));
    assert_eq!(world.counter.load(Ordering::SeqCst), 0);
}

/// An action that panics while it builds its future, before any await.
fn sync_panic() -> Skill {
    fn boom(_: Value, _: ActionContext) -> ActionFuture {
        panic!("boom before the future")
    }
    Skill::builder("panicky", "1.0.0")
        .dyn_action(action(ActionSpec::new("panicky.now", "panics").unwrap(), boom))
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_synchronous_panic_in_an_action_is_critical_and_frees_its_slot() {
    let world = world(Policy::default(), 1).await;
    world.runtime.add_skill(sync_panic()).unwrap();
    world.rogue.mount(&SkillId::new("panicky").unwrap(), Value::Null).await.unwrap();
    let reply = run(&world, "panicky.now").await;
    assert_eq!(
        (reply["kind"].as_str(), reply["outcome"]["error"]["class"].as_str()),
        (Some("action.failed"), Some("critical"))
    );
    assert!(reply["outcome"]["error"]["message"].as_str().unwrap().contains("boom before the future"));
    // The one slot is free again, and an outside caller gets its answer too.
    assert_eq!(run(&world, "safe.echo").await["kind"], "action.completed");
    let outcome = world.runtime.invoke(world.rogue.id(), "panicky.now", json!({})).await.unwrap();
    assert_eq!(outcome.error.unwrap().class, ErrorClass::Critical);
}

/// A skill whose state init panics.
fn bad_init() -> Skill {
    Skill::builder("bad_init", "1.0.0").state_schema(json!({}), |_| panic!("init blew up")).build().unwrap()
}

#[tokio::test]
async fn a_panic_while_mounting_is_survived_or_stops_the_agent_cleanly() {
    let counter = Arc::new(AtomicU32::new(0));
    let release = Arc::new(tokio::sync::Notify::new());
    let runtime = Runtime::builder().skill(bad_init()).skill(safe(counter, release)).agent::<Rogue>().unwrap().build();
    let mut events = runtime.events();
    let parent = runtime
        .spawn(Rogue::default(), SpawnOptions { id: Some(AgentId::new("parent").unwrap()), ..Default::default() })
        .await
        .unwrap();
    let opts = |mode| SpawnOptions {
        id: Some(AgentId::new("child").unwrap()),
        parent: Some(parent.id().clone()),
        restart: RestartPolicy { mode, ..RestartPolicy::default() },
        ..Default::default()
    };
    let bad = SkillId::new("bad_init").unwrap();

    // Permanent: the mount fails with a typed error, the agent goes on with its state as it was.
    let child = runtime.spawn(Rogue::default(), opts(RestartMode::Permanent)).await.unwrap();
    let error = child.mount(&bad, Value::Null).await.unwrap_err();
    assert!(matches!(error, RuntimeError::Panicked { .. }), "{error}");
    wait_for(&mut events, |e| matches!(e.kind, EventKind::AgentRestarted { .. })).await;
    assert!(!child.state().await.unwrap().is_mounted(&bad));
    child.stop().await;
    wait_for(&mut events, |e| e.agent.as_str() == "child" && matches!(e.kind, EventKind::AgentStopped { .. })).await;

    // Never: the agent stops, leaves the directory, and its parent hears of it.
    let child = runtime.spawn(Rogue::default(), opts(RestartMode::Never)).await.unwrap();
    child.mount(&SkillId::new("safe").unwrap(), Value::Null).await.unwrap();
    assert!(child.mount(&bad, Value::Null).await.is_err());
    let stopped =
        wait_for(&mut events, |e| e.agent.as_str() == "child" && matches!(e.kind, EventKind::AgentStopped { .. }))
            .await;
    let EventKind::AgentStopped { reason } = stopped.kind else { unreachable!() };
    assert!(reason.contains("state init of skill `bad_init`"), "{reason}");
    assert!(runtime.get::<Rogue>(&AgentId::new("child").unwrap()).is_err(), "the directory entry is gone");
    let seen = parent.call(signal("seen", Value::Null), CALL).await.unwrap();
    assert_eq!(seen["seen"], json!(["agent.child_exited", "agent.child_exited"]));
    assert_eq!(seen["sources"], json!(["agentry/agent/child", "agentry/agent/child"]));
}

#[tokio::test]
async fn transient_and_permanent_differ_on_a_normal_exit() {
    let runtime = Runtime::builder().agent::<Rogue>().unwrap().build();
    let mut events = runtime.events();
    for (name, mode, restarted) in [("perm", RestartMode::Permanent, true), ("trans", RestartMode::Transient, false)] {
        let opts = SpawnOptions {
            id: Some(AgentId::new(name).unwrap()),
            restart: RestartPolicy { mode, ..RestartPolicy::default() },
            ..Default::default()
        };
        let agent = runtime.spawn(Rogue::default(), opts).await.unwrap();
        agent.send(signal("note", Value::Null)).unwrap();
        agent.send(signal("quit", Value::Null)).unwrap();
        let next = wait_for(&mut events, |e| {
            e.agent.as_str() == name
                && matches!(e.kind, EventKind::AgentRestarted { .. } | EventKind::AgentStopped { .. })
        })
        .await;
        assert_eq!(matches!(next.kind, EventKind::AgentRestarted { .. }), restarted, "{name}: {next:?}");
        match restarted {
            true => {
                // The same handle reaches the restarted agent, which starts again from its initial state.
                let seen = agent.call(signal("seen", Value::Null), CALL).await.unwrap();
                assert_eq!(seen["seen"], json!([]));
                agent.stop().await;
                wait_for(&mut events, |e| e.agent.as_str() == name && matches!(e.kind, EventKind::AgentStopped { .. }))
                    .await;
            }
            false => assert!(runtime.get::<Rogue>(agent.id()).is_err()),
        }
        assert!(runtime.get::<Rogue>(agent.id()).is_err(), "{name}: a stop from outside is final");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_spawns_racing_on_one_id_leave_the_winner_alone() {
    for round in 0..20 {
        let runtime = Runtime::builder().agent::<Rogue>().unwrap().build();
        let mut events = runtime.events();
        let id = AgentId::new(format!("twin-{round}")).unwrap();
        let opts = || SpawnOptions { id: Some(id.clone()), ..Default::default() };
        let (a, b) = tokio::join!(runtime.spawn(Rogue::default(), opts()), runtime.spawn(Rogue::default(), opts()));
        let winner = match (a, b) {
            (Ok(winner), Err(RuntimeError::AlreadyExists(_))) | (Err(RuntimeError::AlreadyExists(_)), Ok(winner)) => {
                winner
            }
            (a, b) => panic!("expected one winner: {:?} {:?}", a.is_ok(), b.is_ok()),
        };
        winner.send(signal("note", Value::Null)).unwrap();
        let seen = winner.call(signal("seen", Value::Null), CALL).await.unwrap();
        assert_eq!(seen["seen"], json!(["note"]));
        assert!(runtime.get::<Rogue>(&id).is_ok(), "round {round}: the winner is still in the directory");
        // Exactly one agent started under the id, and none stopped.
        let mut started = 0;
        while let Ok(event) = events.try_recv() {
            assert!(!matches!(event.kind, EventKind::AgentStopped { .. }), "round {round}: {event:?}");
            started += usize::from(event.kind == EventKind::AgentStarted);
        }
        assert_eq!(started, 1, "round {round}");
    }
}

#[tokio::test]
async fn a_child_gets_its_parent_s_policy_or_a_narrower_one_and_spawning_needs_the_capability() {
    // Without `spawn`, nothing starts.
    let world = world(Policy::default(), 8).await;
    let mut events = world.runtime.events();
    world.rogue.send(signal("spawn", Value::Null)).unwrap();
    let refused = wait_for(&mut events, |e| matches!(e.kind, EventKind::EffectRefused { .. })).await;
    assert!(matches!(refused.kind, EventKind::EffectRefused { refusal: EffectRefusal::SpawnNotGranted { .. } }));

    // With it, the child inherits the parent's policy: it cannot run what the parent may not.
    let parent_policy =
        Policy::default().grant(Capability::SPAWN).deny_action(agentry::pattern::Pattern::new("safe.count").unwrap());
    let world = world_named(parent_policy.clone()).await;
    let mut events = world.runtime.events();
    world.rogue.send(signal("spawn", Value::Null)).unwrap();
    wait_for(&mut events, |e| e.agent.as_str() == "child" && e.kind == EventKind::AgentStarted).await;
    let child: agentry::runtime::AgentRef<Rogue> = world.runtime.get(&AgentId::new("child").unwrap()).unwrap();
    child.mount(&SkillId::new("safe").unwrap(), Value::Null).await.unwrap();
    let reply = child.call(signal("do", json!({"action": "safe.count", "params": {}})), CALL).await.unwrap();
    assert_eq!(reply["kind"], "action.blocked", "the child is under its parent's deny list: {reply:#}");
    child.stop().await;

    // A broader policy for the child is refused.
    world.rogue.send(signal("spawn", json!({"policy": Policy::trusted()}))).unwrap();
    let refused = wait_for(&mut events, |e| matches!(e.kind, EventKind::EffectRefused { .. })).await;
    assert!(
        matches!(refused.kind, EventKind::EffectRefused { refusal: EffectRefusal::PolicyBroader { .. } }),
        "{refused:?}"
    );
}

async fn world_named(policy: Policy) -> World {
    world(policy, 8).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_routine_that_wrote_a_file_is_not_retried() {
    let writes_then_fails = DynAction::new(
        ActionSpec::new("flaky.save", "writes a file, then fails transiently")
            .unwrap()
            .idempotent(true)
            .retry(agentry::action::RetryPolicy { max_attempts: 3, ..Default::default() })
            .params_schema(json!({"type": "object"})),
        |_, ctx| {
            Box::pin(async move {
                ctx.call("fs.append", json!({"path": "log.txt", "content": "line\n"})).await?;
                Err(ActionError::transient("the network blinked"))
            })
        },
    )
    .unwrap();
    let flaky = Skill::builder("flaky", "1.0.0").dyn_action(writes_then_fails).requires("fs").build().unwrap();
    let fs = agentry_skills::Files::skill().unwrap();
    let op = agentry_tests::Operated::start(vec![fs, flaky], Policy::default().grant(Capability::FS), &[]).await;
    let (class, _) = op.failure("flaky.save", json!({})).await;
    assert_eq!(class, "transient");
    let text =
        std::fs::read_to_string(op.runtime.drive(op.agent.id(), &SkillId::new("fs").unwrap()).unwrap().join("log.txt"))
            .unwrap();
    assert_eq!(text, "line\n", "the file was written once");
    let runs = op
        .runtime
        .store()
        .query(&RunQuery { action: Some(ActionId::new("flaky.save").unwrap()), ..Default::default() });
    assert_eq!(runs[0].attempts, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_action_that_submits_itself_as_a_job_stops_at_the_depth_limit() {
    let again = DynAction::new(
        ActionSpec::new("again.go", "submits itself as a job").unwrap().params_schema(json!({"type": "object"})),
        |_, ctx| Box::pin(async move { ctx.submit_job("again.go", json!({})).map(|job| json!(job)) }),
    )
    .unwrap();
    let skill = Skill::builder("again", "1.0.0").dyn_action(again).build().unwrap();
    let op = agentry_tests::Operated::start_with(vec![skill], Policy::default(), &[], |b| b.max_call_depth(4)).await;
    let mut events = op.runtime.events();
    op.output("again.go", json!({})).await;
    let failed = wait_for(
        &mut events,
        |e| matches!(&e.kind, EventKind::JobEnded { status, .. } if *status == agentry::action::JobStatus::Failed),
    )
    .await;
    let record = op
        .runtime
        .jobs()
        .get(match failed.kind {
            EventKind::JobEnded { job, .. } => job,
            _ => unreachable!(),
        })
        .unwrap();
    assert!(record.error.as_deref().unwrap_or_default().contains("call depth limit of 4"), "{record:?}");
    assert!(op.runtime.jobs().len() <= 4, "the chain stopped: {} jobs", op.runtime.jobs().len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ended_jobs_are_dropped_after_their_retention() {
    let jobs = agentry_skills::Jobs::skill().unwrap();
    let system = agentry_skills::System::skill().unwrap();
    let op = agentry_tests::Operated::start_with(vec![system, jobs], Policy::default(), &[], |b| {
        b.job_retention(Duration::ZERO)
    })
    .await;
    for _ in 0..50 {
        let job = op.output("jobs.submit", json!({"action": "system.wait", "params": {"ms": 0}})).await;
        op.output("jobs.wait", json!({"job": job["job"], "timeout_ms": 60_000})).await;
    }
    assert!(op.runtime.jobs().len() <= 2, "the board holds {} jobs after 50 ended", op.runtime.jobs().len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_action_s_cost_reaches_the_outcome_and_the_journal() {
    let priced = DynAction::new(
        ActionSpec::new("priced.ask", "costs 2.5, and its callee 1").unwrap().params_schema(json!({"type": "object"})),
        |_, ctx| {
            Box::pin(async move {
                ctx.cost(2.5);
                ctx.call("priced.leaf", json!({})).await?;
                Ok(json!("answered"))
            })
        },
    )
    .unwrap();
    let leaf = DynAction::new(
        ActionSpec::new("priced.leaf", "costs 1").unwrap().params_schema(json!({"type": "object"})),
        |_, ctx| {
            Box::pin(async move {
                ctx.cost(1.0);
                ctx.cost(f64::NAN);
                Ok(json!(null))
            })
        },
    )
    .unwrap();
    let skill = Skill::builder("priced", "1.0.0").dyn_action(priced).dyn_action(leaf).build().unwrap();
    let op = agentry_tests::Operated::start(vec![skill], Policy::default(), &[]).await;
    let reply = op.run("priced.ask", json!({})).await;
    assert_eq!(reply["outcome"]["cost"], 3.5, "{reply:#}");
    let runs = op
        .runtime
        .store()
        .query(&RunQuery { action: Some(ActionId::new("priced.ask").unwrap()), ..Default::default() });
    assert_eq!(runs[0].cost, Some(3.5));
    let leaves = op
        .runtime
        .store()
        .query(&RunQuery { action: Some(ActionId::new("priced.leaf").unwrap()), ..Default::default() });
    assert_eq!(leaves[0].cost, Some(1.0));
}

/// An agent whose state panics when copied once armed: a bug in user code that escapes the agent's server (it
/// is not in the signal handler, where panics are survived in place).
#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
struct Fragile {
    armed: bool,
}

impl Clone for Fragile {
    fn clone(&self) -> Self {
        assert!(!self.armed, "an armed Fragile cannot be copied");
        Fragile { armed: self.armed }
    }
}

impl Agent for Fragile {
    fn name() -> &'static str {
        "fragile"
    }

    fn handle_signal(&self, signal: &Signal) -> Reaction<Self> {
        match signal.kind().as_str() {
            "arm" => Reaction::Update(Fragile { armed: true }, vec![]),
            _ => Reaction::Ignore,
        }
    }
}

#[tokio::test]
async fn an_agent_whose_server_fails_is_cleaned_up_and_restarted_by_its_supervisor() {
    let runtime = Runtime::builder().agent::<Rogue>().unwrap().build();
    let mut events = runtime.events();
    let parent = runtime
        .spawn(Rogue::default(), SpawnOptions { id: Some(AgentId::new("parent").unwrap()), ..Default::default() })
        .await
        .unwrap();
    let opts = |id: &str, mode| SpawnOptions {
        id: Some(AgentId::new(id).unwrap()),
        parent: Some(parent.id().clone()),
        restart: RestartPolicy { mode, ..RestartPolicy::default() },
        ..Default::default()
    };

    // Transient (the default): a failure is restarted, from the agent's spawn arguments, under the same id.
    let fragile = runtime.spawn(Fragile::default(), opts("fragile", RestartMode::Transient)).await.unwrap();
    fragile.send(signal("arm", Value::Null)).unwrap();
    assert!(matches!(fragile.state().await, Err(RuntimeError::Stopped(_))), "copying the armed state panicked");
    wait_for(&mut events, |e| e.agent.as_str() == "fragile" && matches!(e.kind, EventKind::AgentRestarted { .. }))
        .await;
    assert_eq!(fragile.state().await.unwrap().domain, Fragile { armed: false }, "the same handle reaches it");

    // Never: the failure is final; the supervisor removes it from the directory and tells its parent.
    let doomed = runtime.spawn(Fragile::default(), opts("doomed", RestartMode::Never)).await.unwrap();
    doomed.send(signal("arm", Value::Null)).unwrap();
    assert!(doomed.state().await.is_err());
    let stopped =
        wait_for(&mut events, |e| e.agent.as_str() == "doomed" && matches!(e.kind, EventKind::AgentStopped { .. }))
            .await;
    let EventKind::AgentStopped { reason } = stopped.kind else { unreachable!() };
    assert!(reason.contains("cannot be copied"), "{reason}");
    assert!(runtime.get::<Fragile>(&AgentId::new("doomed").unwrap()).is_err());
    let seen = parent.call(signal("seen", Value::Null), CALL).await.unwrap();
    assert_eq!(seen["seen"], json!(["agent.child_exited"]), "only the final exit is told: {seen}");
}
