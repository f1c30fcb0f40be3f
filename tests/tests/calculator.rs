//! The calculator example agent in a real runtime: `call`s answered through real arithmetic runs, and runs the
//! gate refuses or holds for approval answered with their error or, once approved, their result.

use agentry::action::{ErrorClass, Risk};
use agentry::events::EventKind;
use agentry::id::AgentId;
use agentry::pattern::Pattern;
use agentry::policy::Policy;
use agentry::runtime::{AgentRef, Runtime, SpawnOptions};
use agentry::signal::Signal;
use agentry::store::{RunQuery, RunStatus};
use agentry_examples::calculator::Calculator;
use agentry_tests::{CALL, wait_for};
use serde_json::{Value, json};
use std::time::Duration;

async fn calculator(policy: Policy) -> (Runtime, AgentRef<Calculator>) {
    let runtime = Runtime::builder().agent::<Calculator>().unwrap().build();
    let opts = SpawnOptions { id: Some(AgentId::new("calc").unwrap()), policy, ..SpawnOptions::default() };
    let calc = runtime.spawn(Calculator::default(), opts).await.unwrap();
    (runtime, calc)
}

fn question(op: &str, a: f64, b: f64) -> Signal {
    Signal::new("calculate", json!({"op": op, "a": a, "b": b})).unwrap()
}

#[tokio::test(start_paused = true)]
async fn calls_are_answered_through_real_arithmetic_runs() {
    let (runtime, calc) = calculator(Policy::default()).await;
    let cases = [
        ("add", 2.0, 3.0, json!({"result": 5.0})),
        ("subtract", 2.0, 3.0, json!({"result": -1.0})),
        ("multiply", 6.0, 7.0, json!({"result": 42.0})),
        ("divide", 1.0, 4.0, json!({"result": 0.25})),
        (
            "divide",
            1.0,
            0.0,
            json!({"error": "invalid params: cannot divide by zero; expected a non-zero divisor `b`"}),
        ),
    ];
    for (op, a, b, expected) in cases {
        assert_eq!(calc.call(question(op, a, b), CALL).await.unwrap(), expected, "{op}({a}, {b})");
    }
    assert_eq!(calc.state().await.unwrap().domain.asked, 5);
    let journal = runtime.store().query(&RunQuery { agent: Some(calc.id().clone()), ..RunQuery::default() });
    let runs: Vec<(String, RunStatus)> = journal.iter().map(|r| (r.action.to_string(), r.status())).collect();
    assert_eq!(
        runs,
        [
            ("arithmetic.add".to_owned(), RunStatus::Completed),
            ("arithmetic.subtract".to_owned(), RunStatus::Completed),
            ("arithmetic.multiply".to_owned(), RunStatus::Completed),
            ("arithmetic.divide".to_owned(), RunStatus::Completed),
            ("arithmetic.divide".to_owned(), RunStatus::Failed),
        ]
    );
    assert_eq!(journal[4].error, Some(ErrorClass::Validation));
}

#[tokio::test(start_paused = true)]
async fn a_refused_run_is_answered_with_its_error_at_once() {
    let policy = Policy::default().deny_action(Pattern::new("arithmetic.**").unwrap());
    let (runtime, calc) = calculator(policy).await;
    let began = tokio::time::Instant::now();
    let answer = calc.call(question("add", 2.0, 3.0), CALL).await.expect("the calculator answers");
    assert!(began.elapsed() < Duration::from_secs(1), "answered at once, not at the timeout: {:?}", began.elapsed());
    let error = answer["error"].as_str().unwrap_or_default();
    assert!(error.starts_with("denied: ") && error.contains("arithmetic.add"), "{answer}");
    let journal = runtime.store().query(&RunQuery::default());
    assert_eq!((journal[0].status(), journal[0].error), (RunStatus::Blocked, Some(ErrorClass::Denied)));
}

#[tokio::test(start_paused = true)]
async fn a_run_waiting_for_approval_is_answered_once_approved_or_denied() {
    let (runtime, calc) = calculator(Policy::default().approval_at(Some(Risk::Low))).await;
    for (approve, expected) in
        [(true, json!({"result": 5.0})), (false, json!({"error": "denied: the run was denied by its approver"}))]
    {
        let mut events = runtime.events();
        let call = tokio::spawn({
            let calc = calc.clone();
            async move { calc.call(question("add", 2.0, 3.0), CALL).await }
        });
        let asked = wait_for(&mut events, |e| matches!(e.kind, EventKind::ApprovalAsked { .. })).await;
        let asked = asked.run.expect("an approval belongs to a run");
        match approve {
            true => calc.approve(asked).await.unwrap(),
            false => calc.deny(asked).await.unwrap(),
        }
        let answer: Value = call.await.unwrap().expect("the calculator answers once the run is decided");
        assert_eq!(answer, expected, "approved: {approve}");
    }
}
