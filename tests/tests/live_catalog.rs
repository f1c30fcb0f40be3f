//! Skills that change while the runtime runs, and runs asked for from outside an agent: `Runtime::add_skill`,
//! `Runtime::refresh_skill`, `Runtime::invoke` and `Runtime::actions`, with real actors.

use agentry::action::{ActionSpec, DynAction, OutcomeStatus, Risk};
use agentry::effect::Effect;
use agentry::events::EventKind;
use agentry::id::{AgentId, SkillId};
use agentry::policy::Policy;
use agentry::runtime::RuntimeError;
use agentry::skill::Skill;
use agentry::store::RunStatus;
use agentry_tests::Operated;
use serde_json::{Value, json};

fn answering(id: &str, answer: &'static str) -> DynAction {
    let spec = ActionSpec::new(id, "answers").unwrap().params_schema(json!({"type": "object"}));
    DynAction::new(spec, move |_, _| Box::pin(async move { Ok(json!(answer)) })).unwrap()
}

/// A remote-like skill at version 1.0.0 with the given actions (id, answer).
fn remote(actions: &[(&str, &'static str)]) -> Skill {
    let mut builder = Skill::builder("remote", "1.0.0");
    for (id, answer) in actions {
        builder = builder.dyn_action(answering(id, answer));
    }
    builder.build().unwrap()
}

/// Another skill that shares `remote.shared`, so refreshes must respect what it provides.
fn neighbour() -> Skill {
    Skill::builder("neighbour", "1.0.0").dyn_action(answering("remote.shared", "neighbour")).build().unwrap()
}

fn ids(specs: &[ActionSpec]) -> Vec<&str> {
    specs.iter().map(|s| s.id.as_str()).collect()
}

#[tokio::test]
async fn a_refreshed_skill_changes_the_table_of_every_agent_that_has_it() {
    let op = Operated::start(vec![neighbour()], Policy::default(), &[]).await;
    let agent = AgentId::new("operator").unwrap();
    op.runtime.add_skill(remote(&[("remote.old", "old"), ("remote.kept", "v1"), ("remote.shared", "remote")])).unwrap();
    let again = op.runtime.add_skill(remote(&[])).unwrap_err();
    assert_eq!(again, RuntimeError::SkillExists(SkillId::new("remote").unwrap()));
    op.agent.mount(&SkillId::new("remote").unwrap(), Value::Null).await.unwrap();
    assert_eq!(op.output("remote.kept", json!({})).await, json!("v1"));

    let mut events = op.runtime.events();
    let new = remote(&[("remote.kept", "v2"), ("remote.new", "new")]);
    let failed = op.runtime.refresh_skill(new).await.unwrap();
    assert!(failed.is_empty(), "{failed:?}");
    let event = events.recv().await.unwrap();
    assert_eq!(
        event.kind,
        EventKind::SkillRefreshed {
            skill: SkillId::new("remote").unwrap(),
            added: vec!["remote.new".parse().unwrap()],
            removed: vec!["remote.old".parse().unwrap(), "remote.shared".parse().unwrap()],
        }
    );
    // The kept action runs the new build's code; the new one runs; the dropped one is gone; the shared one
    // stays, since the neighbour still provides it.
    assert_eq!(op.output("remote.kept", json!({})).await, json!("v2"));
    assert_eq!(op.output("remote.new", json!({})).await, json!("new"));
    assert_eq!(op.failure("remote.old", json!({})).await.0, "denied");
    assert_eq!(
        ids(&op.runtime.actions(&agent).await.unwrap()),
        ["remote.kept", "remote.new", "remote.shared"],
        "the live table, sorted"
    );
    let state = op.agent.state().await.unwrap();
    assert_eq!(state.skills()[&SkillId::new("remote").unwrap()].actions.len(), 2);

    let other_version = Skill::builder("remote", "2.0.0").build().unwrap();
    let refused = op.runtime.refresh_skill(other_version).await.unwrap_err();
    assert!(matches!(refused, RuntimeError::Mount(agentry::MountError::VersionConflict { .. })), "{refused}");
    let remote_id = SkillId::new("remote").unwrap();
    assert_eq!(
        op.runtime.catalog().get(&remote_id).unwrap().version().to_string(),
        "1.0.0",
        "the catalog is unchanged"
    );
    assert_eq!(op.output("remote.kept", json!({})).await, json!("v2"));

    // A new requirement the agent lacks: the catalog takes the build, but this agent keeps its table.
    let needy = Skill::builder("remote", "1.0.0")
        .dyn_action(answering("remote.kept", "v3"))
        .requires("absent")
        .build()
        .unwrap();
    let failed = op.runtime.refresh_skill(needy).await.unwrap();
    assert!(
        matches!(&failed[..], [(id, RuntimeError::Mount(agentry::MountError::MissingDependency { .. }))] if *id == agent),
        "{failed:?}"
    );
    let unknown = op.runtime.refresh_skill(Skill::builder("ghost", "1.0.0").build().unwrap()).await.unwrap_err();
    assert_eq!(unknown, RuntimeError::UnknownSkill(SkillId::new("ghost").unwrap()));
}

/// A skill that answers a `ping` call with `answer`, from its signal handler.
fn pinged(answer: &'static str) -> Skill {
    Skill::builder("pinged", "1.0.0")
        .on_signal(move |_: &Value, signal: &agentry::signal::Signal, _ctx| {
            if signal.kind().as_str() != "ping" {
                return agentry::skill::SkillReaction::Ignore;
            }
            agentry::skill::SkillReaction::Handled(Value::Null, vec![Effect::reply(signal.id(), json!(answer))])
        })
        .build()
        .unwrap()
}

/// An agent that leaves every signal to its skills.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
struct Quiet;

impl agentry::agent::Agent for Quiet {
    fn name() -> &'static str {
        "quiet"
    }

    fn handle_signal(&self, _: &agentry::signal::Signal) -> agentry::agent::Reaction<Self> {
        agentry::agent::Reaction::Ignore
    }
}

/// An agent's server keeps the catalog its `step` reads from one signal to the next: a skill refreshed in
/// between is the one the next signal meets.
#[tokio::test]
async fn a_refreshed_skill_handles_the_next_signal_of_an_agent_that_read_the_old_one() {
    let runtime = agentry::runtime::Runtime::builder().skill(pinged("v1")).build();
    let agent = runtime.spawn(Quiet, agentry::runtime::SpawnOptions::default()).await.unwrap();
    agent.mount(&SkillId::new("pinged").unwrap(), Value::Null).await.unwrap();
    let ping = || agentry::signal::Signal::new("ping", json!({})).unwrap();
    assert_eq!(agent.call(ping(), agentry_tests::CALL).await.unwrap(), json!("v1"));
    assert_eq!(agent.call(ping(), agentry_tests::CALL).await.unwrap(), json!("v1"), "the kept catalog, read again");
    let failed = runtime.refresh_skill(pinged("v2")).await.unwrap();
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(agent.call(ping(), agentry_tests::CALL).await.unwrap(), json!("v2"));
}

#[tokio::test]
async fn an_invoked_run_passes_the_gate_and_its_outcome_goes_to_the_caller() {
    let risky = ActionSpec::new("desk.shred", "shreds").unwrap().risk(Risk::High);
    let stopper = ActionSpec::new("desk.leave", "stops the agent").unwrap();
    let desk = Skill::builder("desk", "1.0.0")
        .dyn_action(answering("desk.echo", "echoed"))
        .dyn_action(DynAction::new(risky, |_, _| Box::pin(async { Ok(Value::Null) })).unwrap())
        .dyn_action(
            DynAction::new(stopper, |_, ctx| {
                Box::pin(async move {
                    ctx.effect(Effect::stop("asked from outside"))?;
                    Ok(Value::Null)
                })
            })
            .unwrap(),
        )
        .build()
        .unwrap();
    let op = Operated::start(vec![desk], Policy::default(), &[]).await;
    let agent = AgentId::new("operator").unwrap();

    let outcome = op.runtime.invoke(&agent, "desk.echo", json!({})).await.unwrap();
    assert_eq!((outcome.status, outcome.output), (OutcomeStatus::Completed, json!("echoed")));
    let blocked = op.runtime.invoke(&agent, "desk.missing", json!({})).await.unwrap();
    assert_eq!(blocked.status, OutcomeStatus::Blocked);
    assert!(blocked.output_text().contains("not registered"), "{}", blocked.output_text());
    let refused = op.runtime.invoke(&agent, "desk.shred", json!({})).await.unwrap_err();
    let RuntimeError::NeedsApproval { run, risk, .. } = refused else { panic!("{refused:?}") };
    assert_eq!(risk, Risk::High);
    assert_eq!(op.runtime.store().get(run).unwrap().status(), RunStatus::Blocked);
    // Nobody can approve it later: it was refused, not parked.
    assert_eq!(op.agent.approve(run).await, Err(RuntimeError::NotAwaitingApproval(run)));
    assert!(matches!(op.runtime.invoke(&agent, "Not An Id", json!({})).await, Err(RuntimeError::BadAction(_))));

    // The agent heard of none of these runs: they were not its own.
    assert!(op.operator().await.others.is_empty(), "{:?}", op.operator().await.others);

    // What an invoked run asks for is interpreted when it completes.
    let mut events = op.runtime.events();
    let left = op.runtime.invoke(&agent, "desk.leave", json!({})).await.unwrap();
    assert_eq!(left.status, OutcomeStatus::Completed);
    loop {
        let event = events.recv().await.unwrap();
        if let EventKind::AgentStopped { reason } = event.kind {
            assert_eq!(reason, "asked from outside");
            break;
        }
    }
    let gone = op.runtime.invoke(&agent, "desk.echo", json!({})).await.unwrap_err();
    assert_eq!(gone, RuntimeError::NoSuchAgent(agent));
}

#[tokio::test]
async fn an_action_two_skills_provide_runs_from_the_one_left_after_an_unmount() {
    let op = Operated::start(vec![], Policy::default(), &[]).await;
    op.runtime.add_skill(remote(&[("remote.shared", "remote")])).unwrap();
    op.runtime.add_skill(neighbour()).unwrap();
    op.agent.mount(&SkillId::new("remote").unwrap(), Value::Null).await.unwrap();
    op.agent.mount(&SkillId::new("neighbour").unwrap(), Value::Null).await.unwrap();
    assert_eq!(op.output("remote.shared", json!({})).await, json!("remote"), "the first provider registered it");
    op.agent.unmount(&SkillId::new("remote").unwrap()).await.unwrap();
    assert_eq!(op.output("remote.shared", json!({})).await, json!("neighbour"), "the one left runs it now");
}

#[tokio::test]
async fn a_run_whose_outside_caller_gives_up_is_cancelled() {
    let forever = ActionSpec::new("desk.wait", "never ends").unwrap().timeout(std::time::Duration::from_secs(3600));
    let desk = Skill::builder("desk", "1.0.0")
        .dyn_action(
            DynAction::new(forever, |_, _| {
                Box::pin(async {
                    std::future::pending::<()>().await;
                    Ok(Value::Null)
                })
            })
            .unwrap(),
        )
        .build()
        .unwrap();
    let op = Operated::start(vec![desk], Policy::default(), &[]).await;
    let agent = AgentId::new("operator").unwrap();
    let mut events = op.runtime.events();
    let invoke = op.runtime.invoke(&agent, "desk.wait", json!({}));
    let run = tokio::select! {
        _ = invoke => panic!("the run never ends"),
        run = async {
            loop {
                let event = events.recv().await.unwrap();
                if matches!(event.kind, EventKind::ActionStarted { .. }) {
                    return event.run.unwrap();
                }
            }
        } => run,
    };
    // The invoking future was dropped by the select: the run is cancelled and journaled so.
    loop {
        let event = events.recv().await.unwrap();
        if let EventKind::ActionFailed { class, .. } = event.kind {
            assert_eq!((event.run, class), (Some(run), agentry::action::ErrorClass::Cancelled));
            break;
        }
    }
    assert_eq!(op.runtime.store().get(run).unwrap().status(), RunStatus::Failed);
}

/// A skill at version 1.0.0 whose action holds `token` (as a skill made from an MCP server holds its client).
fn holding(token: std::sync::Arc<()>) -> Skill {
    let spec = ActionSpec::new("held.run", "holds a token").unwrap();
    let action = DynAction::new(spec, move |_, _| {
        let _held = &token;
        Box::pin(async { Ok(Value::Null) })
    })
    .unwrap();
    Skill::builder("held", "1.0.0").dyn_action(action).build().unwrap()
}

/// Once `refresh_skill` returns, no agent still keeps the build it replaced, whether it has the skill mounted or
/// not, and however long it stays idle: what the old build holds (a client, a connection) is let go then.
#[tokio::test]
async fn a_replaced_build_is_let_go_once_its_refresh_returns() {
    let token = std::sync::Arc::new(());
    let old = std::sync::Arc::downgrade(&token);
    let runtime = agentry::runtime::Runtime::builder().skill(holding(token)).build();
    let user = runtime.spawn(Quiet, agentry::runtime::SpawnOptions::default()).await.unwrap();
    user.mount(&SkillId::new("held").unwrap(), Value::Null).await.unwrap();
    // An agent keeps the catalog it started with (the old build in it) until something makes it look again.
    let named = agentry::runtime::SpawnOptions { name: Some("bystander".into()), ..Default::default() };
    let _bystander = runtime.spawn(Quiet, named).await.unwrap();
    assert_eq!(runtime.invoke(user.id(), "held.run", json!({})).await.unwrap().status, OutcomeStatus::Completed);
    assert!(old.upgrade().is_some(), "the old build is in use");

    let failed = runtime.refresh_skill(holding(std::sync::Arc::new(()))).await.unwrap();
    assert!(failed.is_empty(), "{failed:?}");
    assert!(old.upgrade().is_none(), "an idle agent still keeps the replaced build");
    assert_eq!(runtime.invoke(user.id(), "held.run", json!({})).await.unwrap().status, OutcomeStatus::Completed);
}
