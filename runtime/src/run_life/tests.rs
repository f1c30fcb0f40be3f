//! The run machine against a model of the retry rules: over random contracts and attempt results, a run ends
//! after the attempts, with the status, error class, latency and cost the model says, and every backoff
//! within its policy's bounds.

use super::{Next, RunLife};
use crate::action::{ActionContext, ActionError, ActionSpec, DynAction, ErrorClass, OutcomeStatus, RetryPolicy};
use crate::id::{ActionId, AgentId};
use crate::store::RunStatus;
use proptest::prelude::*;
use serde_json::{Value, json};
use std::time::Duration;

/// What one attempt does: its result, the cost it reports, and whether a call it made had side effects.
#[derive(Debug, Clone)]
struct Attempt {
    result: Result<i64, ErrorClass>,
    cost: Option<f64>,
    called_side_effects: bool,
}

fn attempt() -> impl Strategy<Value = Attempt> {
    let class = prop_oneof![
        Just(ErrorClass::Transient),
        Just(ErrorClass::Timeout),
        Just(ErrorClass::Validation),
        Just(ErrorClass::Critical),
        Just(ErrorClass::Denied),
    ];
    let result = prop_oneof![any::<i64>().prop_map(Ok), class.prop_map(Err)];
    (result, proptest::option::of(0.0f64..10.0), proptest::bool::weighted(0.1))
        .prop_map(|(result, cost, called_side_effects)| Attempt { result, cost, called_side_effects })
}

fn error(class: ErrorClass) -> ActionError {
    match class {
        ErrorClass::Timeout => ActionError::Timeout { after: Duration::from_secs(1) },
        class => ActionError::of_class(class, "a scripted failure"),
    }
}

fn ctx() -> ActionContext {
    ActionContext::new(AgentId::new("a").unwrap(), ActionId::new("t.act").unwrap())
}

proptest! {
    #[test]
    fn a_run_ends_as_the_model_of_the_retry_rules_says(
        max_attempts in 1u32..5,
        idempotent in any::<bool>(),
        side_effects in any::<bool>(),
        script in proptest::collection::vec(attempt(), 5),
        took in 1u64..1000,
    ) {
        let retry = RetryPolicy { max_attempts, ..RetryPolicy::default() };
        let spec = ActionSpec::new("t.act", "test").unwrap().idempotent(idempotent).side_effects(side_effects)
            .retry(retry.clone());
        let action = DynAction::new(spec, |_, _| Box::pin(async { Ok(Value::Null) })).unwrap();
        let mut ctx = ctx();
        let (mut life, mut next, _) = RunLife::admit(&action, &mut json!({}), true, Duration::ZERO);
        let (mut now, mut waited) = (Duration::ZERO, Duration::ZERO);
        let script_copy = script.clone();
        let mut script = script.iter();
        let end = loop {
            match next {
                Next::Attempt(n) => {
                    let begin = life.begin(action.spec(), &mut ctx);
                    prop_assert_eq!((begin.attempt, begin.update.status), (n, Some(RunStatus::Running)));
                    let step = script.next().unwrap();
                    {
                        let mut sink = ctx.sink();
                        if let Some(cost) = step.cost { sink.add_cost(cost); }
                        sink.side_effects |= step.called_side_effects;
                    }
                    now += Duration::from_millis(took);
                    next = life.on_ready(&action, &ctx, step.result.map(|v| json!(v)).map_err(error), now);
                }
                Next::Retry { failed, backoff, .. } => {
                    prop_assert_eq!(failed, life.attempt());
                    prop_assert!(backoff <= retry.max_backoff);
                    prop_assert!(backoff >= retry.backoff(failed, 0.0) && backoff <= retry.backoff(failed, 1.0));
                    now += backoff;
                    waited += backoff;
                    next = life.backoff_over();
                }
                Next::End(end) => break end,
            }
        };
        // The model: attempts go on while they fail retryably, the action may be retried, attempts remain and no
        // call did what must not happen twice; costs add up over the attempts.
        let (mut calls_did, mut cost) = (false, None::<f64>);
        let mut model = None;
        for (n, step) in (1u32..).zip(&script_copy) {
            calls_did |= step.called_side_effects;
            if let Some(c) = step.cost { cost = Some(cost.unwrap_or(0.0) + c); }
            match step.result {
                Ok(v) => { model = Some((n, OutcomeStatus::Completed, None, json!(v))); break; }
                Err(class) => {
                    let again = matches!(class, ErrorClass::Transient | ErrorClass::Timeout)
                        && (idempotent || !side_effects) && n < max_attempts && !calls_did;
                    if !again {
                        let status = if class == ErrorClass::Denied { OutcomeStatus::Blocked } else { OutcomeStatus::Failed };
                        model = Some((n, status, Some(class), Value::Null));
                        break;
                    }
                }
            }
        }
        let (attempts, status, class, output) = model.unwrap();
        prop_assert_eq!(end.outcome.attempts, attempts);
        prop_assert_eq!(end.outcome.status, status);
        prop_assert_eq!(end.outcome.error.as_ref().map(|e| e.class), class);
        prop_assert_eq!(&end.outcome.output, &output);
        prop_assert_eq!(end.outcome.cost.map(|c| (c * 1e6).round()), cost.map(|c| (c * 1e6).round()));
        prop_assert_eq!(end.outcome.latency, Duration::from_millis(took) * attempts + waited);
        prop_assert_eq!(end.update().attempts, Some(attempts));
        prop_assert_eq!(end.update().status, Some(RunStatus::from(status)));
        prop_assert!(!end.refused);
    }
}

#[test]
fn params_refused_by_their_schema_end_the_run_with_no_attempt() {
    let spec = ActionSpec::new("t.act", "test").unwrap().params_schema(json!({"type": "object", "required": ["n"]}));
    let action = DynAction::new(spec, |_, _| Box::pin(async { Ok(Value::Null) })).unwrap();
    let (_, next, _) = RunLife::admit(&action, &mut json!({}), true, Duration::ZERO);
    let Next::End(end) = next else { panic!("refused") };
    assert_eq!((end.outcome.status, end.outcome.attempts), (OutcomeStatus::Failed, 0));
    assert_eq!(end.update().status, Some(RunStatus::Failed));
}
