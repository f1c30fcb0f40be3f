//! Agents that learn and forget skills themselves (`MountSkill` / `UnmountSkill` effects): the skill's actions
//! come and go with it, the agent's policy decides what it may learn (tried as an attacker: a skill the policy
//! denies, one that does not exist), and a skill learned after the last snapshot comes back after a crash,
//! since replaying the agent's inputs learns it again.

use agentry::action::{ActionSpec, DynAction};
use agentry::agent::{Agent, Reaction};
use agentry::effect::{Effect, EffectRefusal};
use agentry::events::EventKind;
use agentry::id::{AgentId, SkillId};
use agentry::policy::Policy;
use agentry::runtime::{Runtime, RuntimeBuilder, SpawnOptions};
use agentry::signal::Signal;
use agentry::skill::Skill;
use agentry_tests::wait_for;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::time::Duration;

/// Learns the skill named in a `learn` signal and forgets the one in `forget`; answers `can` calls with whether
/// its action ran.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Student;

impl Agent for Student {
    fn name() -> &'static str {
        "student"
    }

    fn handle_signal(&self, signal: &Signal) -> Reaction<Self> {
        let skill = || SkillId::new(signal.data()["skill"].as_str().unwrap_or("none")).expect("a test skill id");
        match signal.kind().as_str() {
            "learn" => Reaction::Keep(vec![Effect::mount_skill(skill(), Value::Null)]),
            "forget" => Reaction::Keep(vec![Effect::unmount_skill(skill())]),
            _ => Reaction::Ignore,
        }
    }
}

fn skill(name: &str) -> Skill {
    let spec = ActionSpec::new(format!("{name}.do"), "Does the skill's thing.").expect("an id");
    let action = DynAction::new(spec, |_, _| Box::pin(async { Ok(json!("done")) })).expect("an action");
    Skill::builder(name, "1.0.0").dyn_action(action).build().expect("a skill")
}

fn builder() -> RuntimeBuilder {
    Runtime::builder().skill(skill("juggling")).skill(skill("lockpicking")).agent::<Student>().expect("registers")
}

fn signal(kind: &str, skill: &str) -> Signal {
    Signal::new(kind, json!({"skill": skill})).expect("a kind")
}

fn id() -> AgentId {
    AgentId::new("student").expect("an id")
}

async fn actions(runtime: &Runtime) -> Vec<String> {
    runtime.actions(&id()).await.expect("the agent is there").into_iter().map(|s| s.id.to_string()).collect()
}

#[tokio::test]
async fn a_learned_skill_s_actions_come_and_go_with_it() {
    let runtime = builder().build();
    let student = runtime.spawn(Student, SpawnOptions { id: Some(id()), ..Default::default() }).await.unwrap();
    let mut events = runtime.events();
    student.send(signal("learn", "juggling")).unwrap();
    wait_for(&mut events, |e| matches!(&e.kind, EventKind::SkillMounted { skill } if skill.as_str() == "juggling"))
        .await;
    assert_eq!(actions(&runtime).await, ["juggling.do"]);
    let ran = runtime.invoke(&id(), "juggling.do", Value::Null).await.unwrap();
    assert_eq!(ran.output, json!("done"));

    student.send(signal("forget", "juggling")).unwrap();
    wait_for(&mut events, |e| matches!(&e.kind, EventKind::SkillUnmounted { .. })).await;
    assert!(actions(&runtime).await.is_empty(), "forgetting the skill took its action away");
    assert!(student.state().await.unwrap().skills().is_empty());
}

#[tokio::test]
async fn an_agent_cannot_learn_what_its_policy_denies_or_what_does_not_exist() {
    let runtime = builder().build();
    let policy = Policy::default().deny_skill(SkillId::new("lockpicking").unwrap());
    let opts = SpawnOptions { id: Some(id()), policy, ..Default::default() };
    let student = runtime.spawn(Student, opts).await.unwrap();
    let mut events = runtime.events();
    for attempt in ["lockpicking", "nonexistent"] {
        student.send(signal("learn", attempt)).unwrap();
        let refused = wait_for(&mut events, |e| matches!(e.kind, EventKind::EffectRefused { .. })).await;
        let EventKind::EffectRefused { refusal: EffectRefusal::Mount { effect, skill, reason, .. } } = refused.kind
        else {
            panic!("a mount refusal, got {refused:?}")
        };
        assert_eq!((effect.as_str(), skill.as_str()), ("mount_skill", attempt));
        assert!(!reason.is_empty());
    }
    assert!(actions(&runtime).await.is_empty(), "nothing was learned");
    let journal = runtime.store().refusals(&id());
    assert_eq!(journal.len(), 2, "both attempts are journaled: {journal:?}");
    assert!(journal.iter().all(|r| r.cause.is_some()), "each names the signal that asked");
}

#[test]
fn a_skill_learned_after_the_last_snapshot_comes_back_after_a_crash() {
    let folder = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let runtime = rt.block_on(async {
        // No snapshot after the start one: the learned skill exists only in the input log.
        let runtime = builder().durable(folder.path()).unwrap().snapshot_every(1_000_000).build();
        let student = runtime.spawn(Student, SpawnOptions { id: Some(id()), ..Default::default() }).await.unwrap();
        student.send(signal("learn", "juggling")).unwrap();
        student.send(signal("learn", "lockpicking")).unwrap();
        student.send(signal("forget", "lockpicking")).unwrap();
        assert_eq!(student.state().await.unwrap().skills().len(), 1);
        runtime.store().durable().expect("durable").flushed().await.unwrap();
        runtime
    });
    // The crash: the tokio runtime goes away under the agent, which never gets to snapshot itself.
    drop(runtime);
    rt.shutdown_timeout(Duration::from_secs(5));

    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let (runtime, recovery) = builder().durable(folder.path()).unwrap().open().await.unwrap();
        assert_eq!(recovery.replayed, 3, "the three inputs were replayed");
        assert_eq!(actions(&runtime).await, ["juggling.do"]);
        let skills: Vec<String> = runtime
            .get::<Student>(&id())
            .unwrap()
            .state()
            .await
            .unwrap()
            .skills()
            .keys()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(skills, ["juggling"]);
        runtime.shutdown(Duration::from_secs(5)).await;
    });
}

/// A run (or a job) may not mount or unmount a skill: the skills mounted are the agent's state, which only its
/// own handling of an input changes, so that a recovery replaying the inputs ends where the agent was. A run
/// that asks is refused (journaled and announced), and nothing changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_cannot_mount_or_unmount_a_skill() {
    let teach = ActionSpec::new("teacher.teach", "Asks for a skill to be mounted.").expect("an id");
    let action = DynAction::new(teach, |_, ctx| {
        Box::pin(async move {
            ctx.effect(Effect::mount_skill(SkillId::new("lockpicking").expect("an id"), Value::Null))?;
            ctx.effect(Effect::unmount_skill(SkillId::new("juggling").expect("an id")))?;
            Ok(json!("asked"))
        })
    })
    .expect("an action");
    let teacher = Skill::builder("teacher", "1.0.0").dyn_action(action).build().expect("a skill");
    let runtime = builder().skill(teacher).build();
    let opts = SpawnOptions { id: Some(id()), ..SpawnOptions::default() };
    let student = runtime.spawn(Student, opts).await.expect("spawned");
    for skill in ["teacher", "juggling"] {
        student.mount(&skill.parse().unwrap(), Value::Null).await.expect("mounted");
    }
    let mut events = runtime.events();
    let outcome = runtime.invoke(&id(), "teacher.teach", Value::Null).await.expect("answered");
    assert_eq!(outcome.output, json!("asked"), "{outcome:?}");
    for _ in 0..2 {
        let refused = wait_for(&mut events, |e| matches!(e.kind, EventKind::EffectRefused { .. })).await;
        let EventKind::EffectRefused { refusal } = refused.kind else { unreachable!() };
        assert!(matches!(refusal, EffectRefusal::MountOutsideStep { .. }), "{refusal:?}");
    }
    let mut mounted: Vec<String> =
        runtime.mounted(&id()).await.expect("there").iter().map(|s| s.id().to_string()).collect();
    mounted.sort();
    assert_eq!(mounted, ["juggling", "teacher"], "a run changed the mounted skills");
}
