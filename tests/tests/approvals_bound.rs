//! An approval is bound to what runs: the approver is shown the action's contract and params (and their
//! digest); an approval bound to another digest is refused with the run still waiting; a contract that
//! changed while the run waited (a refreshed skill, as an MCP server's new tool list brings) is asked about
//! again. (That the approval timeout counts from the request across a crash is in `durability.rs`.)

use agentry::action::{ActionSpec, DynAction, Risk, approval_digest};
use agentry::events::{Event, EventKind};
use agentry::id::AgentId;
use agentry::runtime::{Runtime, RuntimeError, SpawnOptions};
use agentry::signal::Signal;
use agentry::skill::Skill;
use agentry_tests::{CALL, Operator, wait_for};
use serde_json::{Value, json};

/// `desk.shred` with this description (a new build of the skill changes only that).
fn desk(description: &str) -> Skill {
    let shred = ActionSpec::new("desk.shred", description).unwrap().risk(Risk::High).side_effects(true);
    Skill::builder("desk", "1.0.0")
        .dyn_action(
            DynAction::new(shred, |params, _| Box::pin(async move { Ok(json!({"shredded": params})) })).unwrap(),
        )
        .build()
        .unwrap()
}

fn asked(event: &Event) -> bool {
    matches!(event.kind, EventKind::ApprovalAsked { .. })
}

fn seen(event: &Event) -> (uuid::Uuid, uuid::Uuid, Box<ActionSpec>, Value) {
    let EventKind::ApprovalAsked { digest, contract, params, risk, .. } = &event.kind else { panic!("{event:?}") };
    assert_eq!(*digest, approval_digest(contract, *risk, params));
    (event.run.unwrap(), *digest, contract.clone(), params.clone())
}

/// The operator agent with `desk` mounted, asking for `desk.shred` with `params`; the run waits for approval.
async fn asking(runtime: &Runtime, params: Value) -> (AgentId, Event) {
    let id = AgentId::new("operator").unwrap();
    let agent = runtime
        .spawn(Operator::default(), SpawnOptions { id: Some(id.clone()), ..SpawnOptions::default() })
        .await
        .unwrap();
    agent.mount(&"desk".parse().unwrap(), Value::Null).await.unwrap();
    let mut events = runtime.events();
    let reply =
        agent.call(Signal::new("do", json!({"action": "desk.shred", "params": params})).unwrap(), CALL).await.unwrap();
    assert_eq!(reply["outcome"]["status"], "awaiting_approval", "{reply:#}");
    let event = wait_for(&mut events, asked).await;
    (id, event)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_is_bound_to_the_contract_and_params_the_approver_saw() {
    let runtime = Runtime::builder().skill(desk("Shreds papers.")).build();
    let (agent, event) = asking(&runtime, json!({"box": 7})).await;
    let (run, digest, contract, params) = seen(&event);
    // The approver sees everything: the contract and the params, and the digest of both.
    assert_eq!((contract.description.as_str(), params.clone()), ("Shreds papers.", json!({"box": 7})));

    // An approval bound to what it did not see is refused, and the run goes on waiting.
    let other = approval_digest(&contract, Risk::High, &json!({"box": 8}));
    let refused = runtime.approve_seen(&agent, run, other).await.unwrap_err();
    assert!(matches!(refused, RuntimeError::ApprovalStale { .. }), "{refused}");
    let mut events = runtime.events();
    runtime.approve_seen(&agent, run, digest).await.expect("the run still waits, and this is what it runs");
    let ran = wait_for(&mut events, |e| matches!(e.kind, EventKind::ActionCompleted { .. })).await;
    assert_eq!(ran.run, Some(run));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contract_that_changed_while_the_run_waited_is_asked_about_again() {
    let runtime = Runtime::builder().skill(desk("Shreds papers.")).build();
    let (agent, event) = asking(&runtime, json!({"box": 7})).await;
    let (run, first, _, _) = seen(&event);
    // The skill's new build says something else of the same action.
    let mut events = runtime.events();
    assert!(runtime.refresh_skill(desk("Shreds papers, and the desk.")).await.unwrap().is_empty());
    let stale = runtime.decide(&agent, run, true).await.unwrap_err();
    assert!(matches!(stale, RuntimeError::ApprovalStale { .. }), "{stale}");
    let again = wait_for(&mut events, asked).await;
    let (again_run, second, contract, _) = seen(&again);
    assert_eq!(again_run, run);
    assert_ne!(second, first);
    assert_eq!(contract.description, "Shreds papers, and the desk.");
    // Approved once the approver has seen the new contract, it runs.
    runtime.decide(&agent, run, true).await.expect("approved as it is now");
    let ran = wait_for(&mut events, |e| matches!(e.kind, EventKind::ActionCompleted { .. })).await;
    assert_eq!(ran.run, Some(run));
}

/// A caller that approves (a client's user, where serving lets it) is asked again when the contract changed
/// while the run waited: its first approval is stale, and the second one, of the new contract, runs it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_that_approves_is_asked_again_when_the_contract_changed() {
    use agentry::action::{Approver, Caller, CallerCan, CallerRequest};
    let runtime = Runtime::builder().skill(desk("Shreds papers.")).build();
    let agent = runtime.spawn((), SpawnOptions::default()).await.unwrap();
    agent.mount(&"desk".parse().unwrap(), Value::Null).await.unwrap();
    let (caller, mut heard) = Caller::new(CallerCan { sample: false, elicit: true });
    let caller = caller.approved_by(Approver::Caller { ceiling: Risk::High });
    let (id, asking) = (agent.id().clone(), runtime.clone());
    let call = tokio::spawn(async move { asking.invoke_with(&id, "desk.shred", json!({"box": 1}), caller).await });
    let asked = |request: Option<CallerRequest>| match request {
        Some(CallerRequest::Approve(ask)) => ask,
        other => panic!("expected an approval ask, got {other:?}"),
    };
    let first = asked(heard.recv().await);
    assert!(runtime.refresh_skill(desk("Shreds papers, and the desk.")).await.unwrap().is_empty());
    let stale = runtime.approve_seen(agent.id(), first.run, first.digest).await.unwrap_err();
    assert!(matches!(stale, RuntimeError::ApprovalStale { .. }), "{stale}");
    let second = asked(heard.recv().await);
    assert_eq!((second.run, second.spec.description.as_str()), (first.run, "Shreds papers, and the desk."));
    // A new policy that changes its risk asks again too: the approval of the old risk no longer holds.
    let mut policy = agentry::policy::Policy::default().approval_at(Some(Risk::Low));
    policy.risk_overrides.insert(agentry::pattern::Pattern::new("desk.*").unwrap(), Risk::Medium);
    runtime.set_policy(agent.id(), policy).await.unwrap();
    let third = asked(heard.recv().await);
    assert_eq!(third.risk, Risk::Medium);
    let stale = runtime.approve_seen(agent.id(), second.run, second.digest).await.unwrap_err();
    assert!(matches!(stale, RuntimeError::ApprovalStale { .. }), "{stale}");
    runtime.approve_seen(agent.id(), third.run, third.digest).await.expect("approved as it is now");
    let outcome = call.await.unwrap().unwrap();
    assert_eq!(outcome.output, json!({"shredded": {"box": 1}}), "{outcome:?}");
}
