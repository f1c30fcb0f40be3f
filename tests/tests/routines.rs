//! Routines: actions calling actions through their context. Every nested call passes the agent's gate, gets a
//! frame of its own on the stack, and the depth is limited.

use agentry::action::{ActionContext, ActionSpec, DynAction, Risk};
use agentry::events::EventKind;
use agentry::policy::Policy;
use agentry::skill::Skill;
use agentry_tests::Operated;
use serde_json::{Value, json};

fn action(spec: ActionSpec, f: fn(Value, ActionContext) -> agentry::action::ActionFuture) -> DynAction {
    DynAction::new(spec.params_schema(json!({"type": "object"})), f).unwrap()
}

/// `loop.forever` calls itself; `loop.stack` reports the stack it sees, calling `loop.leaf` below it;
/// `loop.risky` is high risk; `loop.call` calls whatever `params.action` names.
fn routines() -> Skill {
    Skill::builder("loop", "1.0.0")
        .dyn_action(action(ActionSpec::new("loop.forever", "calls itself").unwrap(), |_, ctx| {
            Box::pin(async move { ctx.call("loop.forever", json!({})).await })
        }))
        .dyn_action(action(ActionSpec::new("loop.stack", "frames").unwrap(), |_, mut ctx| {
            Box::pin(async move {
                ctx.frame_mut().state = json!("mine");
                let below = ctx.call("loop.leaf", json!({})).await?;
                Ok(json!({"depth": ctx.depth(), "below": below, "after": ctx.depth()}))
            })
        }))
        .dyn_action(action(ActionSpec::new("loop.leaf", "reports its stack").unwrap(), |_, ctx| {
            Box::pin(async move {
                let frames: Vec<Value> =
                    ctx.stack().iter().map(|f| json!({"action": f.action, "state": f.state})).collect();
                Ok(json!({"depth": ctx.depth(), "frames": frames}))
            })
        }))
        .dyn_action(action(ActionSpec::new("loop.risky", "high risk").unwrap().risk(Risk::High), |_, _| {
            Box::pin(async { Ok(json!("risky done")) })
        }))
        .dyn_action(action(ActionSpec::new("loop.call", "calls params.action").unwrap(), |params, ctx| {
            Box::pin(async move { ctx.call(params["action"].as_str().unwrap_or_default(), json!({})).await })
        }))
        .dyn_action(action(ActionSpec::new("loop.stop_then_fail", "asks to stop, then fails").unwrap(), |_, ctx| {
            Box::pin(async move {
                ctx.effect(agentry::effect::Effect::stop("asked by a failed call"))?;
                Err(agentry::ActionError::validation("failed after asking"))
            })
        }))
        .dyn_action(action(ActionSpec::new("loop.try", "calls params.action, keeps going").unwrap(), |params, ctx| {
            Box::pin(async move {
                match ctx.call(params["action"].as_str().unwrap_or_default(), json!({})).await {
                    Ok(output) => Ok(json!({"ok": output})),
                    Err(error) => Ok(json!({"error": error.to_string()})),
                }
            })
        }))
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_routine_that_calls_itself_forever_fails_clearly_at_the_depth_limit() {
    let op = Operated::start_with(vec![routines()], Policy::default(), &[], |b| b.max_call_depth(5)).await;
    let (class, message) = op.failure("loop.forever", json!({})).await;
    assert_eq!(class, "critical");
    assert!(message.contains("call depth limit of 5"), "{message}");
    assert!(message.contains("loop.forever → loop.forever → loop.forever → loop.forever → loop.forever"), "{message}");
    let runs = op.runtime.store().query(&agentry::store::RunQuery::default());
    assert_eq!(runs.len(), 5, "one top-level run and four nested ones, each journaled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_call_has_its_own_frame_and_pops_it_when_done() {
    let op = Operated::start(vec![routines()], Policy::default(), &[]).await;
    let output = op.output("loop.stack", json!({})).await;
    assert_eq!(output["depth"], 1);
    assert_eq!(output["after"], 1, "the callee's frame is gone once it returned");
    assert_eq!(output["below"]["depth"], 2);
    assert_eq!(
        output["below"]["frames"],
        json!([{"action": "loop.stack", "state": "mine"}, {"action": "loop.leaf", "state": null}]),
        "the callee sees its caller's frame with the caller's state, then its own"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_calls_pass_the_gate_unmounted_denied_and_approval() {
    let op = Operated::start(vec![routines()], Policy::default(), &[]).await;
    let (class, message) = op.failure("loop.call", json!({"action": "nowhere.at_all"})).await;
    assert_eq!(class, "denied");
    assert!(message.contains("not registered"), "{message}");

    // A risky nested call waits for approval, and the routine goes on once it is given.
    let mut events = op.runtime.events();
    let signal = agentry::signal::Signal::new("do", json!({"action": "loop.call", "params": {"action": "loop.risky"}}));
    let agent = op.agent.clone();
    let pending = tokio::spawn(async move { agent.call(signal.unwrap(), agentry_tests::CALL).await });
    let asked = loop {
        let event = events.recv().await.unwrap();
        if matches!(event.kind, EventKind::ApprovalAsked { .. }) {
            break event;
        }
    };
    op.agent.approve(asked.run.unwrap()).await.unwrap();
    let reply = pending.await.unwrap().unwrap();
    assert_eq!(reply["outcome"]["output"], "risky done", "{reply:#}");

    // Denied: the routine fails with the nested call's Denied error.
    let signal = agentry::signal::Signal::new("do", json!({"action": "loop.call", "params": {"action": "loop.risky"}}));
    let agent = op.agent.clone();
    let pending = tokio::spawn(async move { agent.call(signal.unwrap(), agentry_tests::CALL).await });
    let asked = loop {
        let event = events.recv().await.unwrap();
        if matches!(event.kind, EventKind::ApprovalAsked { .. }) {
            break event;
        }
    };
    op.agent.deny(asked.run.unwrap()).await.unwrap();
    let reply = pending.await.unwrap().unwrap();
    assert_eq!(reply["outcome"]["error"]["class"], "denied", "{reply:#}");
}

#[tokio::test]
async fn a_context_outside_a_runtime_cannot_call() {
    let ctx = ActionContext::new(agentry::id::AgentId::new("a").unwrap(), "loop.call".parse().unwrap());
    let err = ctx.call("loop.leaf", json!({})).await.unwrap_err();
    assert!(err.to_string().contains("outside an agent's server"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_nested_call_leaves_no_effects_behind() {
    let op = Operated::start(vec![routines()], Policy::default(), &[]).await;
    let output = op.output("loop.try", json!({"action": "loop.stop_then_fail"})).await;
    assert!(output["error"].as_str().unwrap().contains("failed after asking"), "{output}");
    assert_eq!(op.output("loop.leaf", json!({})).await["depth"], 1, "the agent did not stop");
}
