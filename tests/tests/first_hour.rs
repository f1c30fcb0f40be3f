//! The traps a newcomer met in their first hour, each kept as a test that failed before its fix:
//! - a run waiting for approval has an outcome status of its own, so it is never read as a success;
//! - a params type with no fields written as a unit struct describes itself as an object and takes `{}` (and
//!   `null`), as the tool descriptors tell models;
//! - a mount of a skill the catalog lacks reaches the agent as `agent.mount_failed`, naming the skill and the fix,
//!   live and in the simulator.

use agentry::events::EventKind;
use agentry::kinds::AGENT_MOUNT_FAILED;
use agentry::prelude::*;
use agentry::tool::{ToolFormat, describe};
use agentry_sim::SimBuilder;
use agentry_testkit::{ActionHarness, check_action};
use agentry_tests::wait_for;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Answers with "pong"; it needs no params, and is written as a unit struct.
#[derive(Debug, Deserialize, JsonSchema, Action)]
#[action(id = "probe.ping", output = String, risk = high)]
struct Ping;

impl Ping {
    async fn run(self, _ctx: ActionContext) -> Result<String, ActionError> {
        Ok("pong".to_owned())
    }
}

fn probe() -> Skill {
    Skill::builder("probe", "1.0.0").action::<Ping>().build().expect("a valid skill")
}

/// Notes the status of every outcome it gets, and what it was told of skills it asked for.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Notes {
    statuses: Vec<OutcomeStatus>,
    mount_failures: Vec<Value>,
}

impl Agent for Notes {
    fn name() -> &'static str {
        "notes"
    }

    fn handle_signal(&self, signal: &Signal) -> Reaction<Self> {
        let mut next = self.clone();
        match signal.kind().as_str() {
            "ping" => return Reaction::Keep(vec![Effect::run(ActionId::new("probe.ping").expect("an id"), json!({}))]),
            "learn" => {
                let skill = SkillId::new(signal.data()["skill"].as_str().unwrap_or("probe")).expect("an id");
                return Reaction::Keep(vec![Effect::mount_skill(skill, Value::Null)]);
            }
            AGENT_MOUNT_FAILED => next.mount_failures.push(signal.data().clone()),
            _ => match signal.outcome() {
                Some(report) => next.statuses.push(report.outcome.status),
                None => return Reaction::Ignore,
            },
        }
        Reaction::Update(next, vec![])
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_waiting_for_approval_is_not_an_end() {
    let runtime = Runtime::builder().skill(probe()).build();
    let notes = runtime.spawn(Notes::default(), SpawnOptions::default()).await.expect("spawned");
    notes.mount(&SkillId::new("probe").expect("an id"), Value::Null).await.expect("mounted");
    let mut events = runtime.events();
    notes.send(Signal::new("ping", Value::Null).expect("a signal")).expect("sent");
    let asked = wait_for(&mut events, |e| matches!(e.kind, EventKind::ApprovalAsked { .. })).await;
    // The agent's inbox is fed before its next message: `state` sees what the waiting run told it.
    assert_eq!(notes.state().await.expect("a state").domain.statuses, [OutcomeStatus::AwaitingApproval]);
    notes.approve(asked.run.expect("a run")).await.expect("approved");
    wait_for(&mut events, |e| matches!(e.kind, EventKind::ActionCompleted { .. })).await;
    let statuses = notes.state().await.expect("a state").domain.statuses;
    assert_eq!(statuses, [OutcomeStatus::AwaitingApproval, OutcomeStatus::Completed]);
}

#[test]
fn a_unit_struct_params_type_is_an_object_and_takes_no_params() {
    let ping = DynAction::typed::<Ping>().expect("a valid action");
    let schema = &ping.spec().params_schema;
    assert_eq!(schema["type"], "object", "{schema}");
    // What models are told is what is checked.
    assert_eq!(describe(ping.spec(), ToolFormat::Anthropic)["input_schema"]["type"], "object");
    ping.validate(&json!({})).expect("a model's `{}` is taken");

    // Run purely: `{}` and `null` (no arguments at all) both read as the unit.
    let harness = ActionHarness::new(&ping).expect("a harness");
    for params in [json!({}), Value::Null] {
        assert_eq!(harness.run(params.clone()).result.expect("ran"), json!("pong"), "{params}");
    }
    check_action(&ping).expect("the check passes, trying `{}` and `null`");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unit_struct_params_type_takes_no_params_live() {
    let runtime = Runtime::builder().skill(probe()).build();
    let opts = SpawnOptions { policy: Policy::trusted(), ..SpawnOptions::default() };
    let notes = runtime.spawn(Notes::default(), opts).await.expect("spawned");
    notes.mount(&SkillId::new("probe").expect("an id"), Value::Null).await.expect("mounted");
    for params in [json!({}), Value::Null] {
        let outcome = runtime.invoke(notes.id(), "probe.ping", params.clone()).await.expect("invoked");
        assert_eq!((outcome.status, outcome.output), (OutcomeStatus::Completed, json!("pong")), "{params}");
    }
}

/// An action whose schema takes `{}` but whose code cannot read it (a unit struct behind an object schema, as
/// before the fix): the check must find it at `{}`, drawn or not.
#[test]
fn check_action_tries_no_params() {
    let spec = ActionSpec::new("probe.unread", "Takes nothing, reads only null.")
        .expect("an id")
        .params_schema(json!({"type": "object", "properties": {}}));
    let unread = DynAction::new(spec, |params, _ctx| {
        Box::pin(async move {
            let () = serde_json::from_value(params)
                .map_err(|e| ActionError::validation(format!("params do not fit the action's type: {e}")))?;
            Ok(Value::Null)
        })
    })
    .expect("a valid action");
    let failure = check_action(&unread).expect_err("the check finds that `{}` is refused").to_string();
    assert!(failure.contains("no params") && failure.contains("{}"), "{failure}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mount_of_a_skill_missing_from_the_catalog_reaches_the_agent() {
    let runtime = Runtime::builder().build();
    let notes = runtime.spawn(Notes::default(), SpawnOptions::default()).await.expect("spawned");
    let mut events = runtime.events();
    notes.send(Signal::new("learn", json!({"skill": "probe"})).expect("a signal")).expect("sent");
    // Refused, journaled and announced, as before ...
    let refused = wait_for(&mut events, |e| matches!(e.kind, EventKind::EffectRefused { .. })).await;
    assert!(format!("{:?}", refused.kind).contains("probe"), "{refused:?}");
    // ... and now the agent sees it, in the step after the one that asked.
    let failures = notes.state().await.expect("a state").domain.mount_failures;
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!((&failures[0]["skill"], &failures[0]["effect"]), (&json!("probe"), &json!("mount_skill")));
    let error = failures[0]["error"].as_str().unwrap_or_default();
    assert!(error.contains("`probe`") && error.contains("add it with `RuntimeBuilder::skill`"), "{error}");
}

#[test]
fn a_mount_of_a_skill_missing_from_the_catalog_reaches_the_agent_in_the_simulator() {
    let mut sim = SimBuilder::<Notes>::new(7).build().expect("a simulation");
    let id = AgentId::new("notes-1").expect("an id");
    sim.add(id.clone(), Notes::default()).expect("added");
    sim.send(&id, Signal::new("learn", json!({"skill": "probe"})).expect("a signal")).expect("sent");
    sim.run_until(std::time::Duration::from_secs(1));
    let failures = &sim.state(&id).expect("the agent").domain.mount_failures;
    assert_eq!(failures.len(), 1, "{failures:?}");
    let error = failures[0]["error"].as_str().unwrap_or_default();
    assert!(error.contains("`probe`") && error.contains("SimBuilder::skill"), "{error}");
}
