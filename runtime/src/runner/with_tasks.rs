//! The action runner with real tokio tasks on a paused clock: outcomes, timeouts that really drop the task,
//! panics, the retry rules, and the journal and events of a run.

use crate::action::{ActionContext, ActionError, ActionSpec, DynAction, ErrorClass, OutcomeStatus, RetryPolicy};
use crate::events::{EventBus, EventKind};
use crate::id::{ActionId, AgentId};
use crate::runner::Runner;
use crate::store::PEN;
use crate::store::{MemoryStore, RunQuery, RunRecord, RunStatus, Store};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tokio::sync::oneshot;

struct Harness {
    runner: Runner,
    store: Arc<MemoryStore>,
    events: EventBus,
}

fn harness() -> Harness {
    let store = Arc::new(MemoryStore::new());
    let events = EventBus::new();
    Harness { runner: Runner::new(events.clone(), store.clone()), store, events }
}

fn spec(id: &str) -> ActionSpec {
    ActionSpec::new(id, "test action").unwrap().params_schema(json!({"type": "object"}))
}

fn action<F, Fut>(spec: ActionSpec, f: F) -> DynAction
where
    F: Fn(Value, ActionContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value, ActionError>> + Send + 'static,
{
    DynAction::new(spec, move |params, ctx| Box::pin(f(params, ctx))).unwrap()
}

/// Journals the run as queued, as the server does on accepting it, and returns its context.
fn queued(h: &Harness, action: &DynAction, params: &Value) -> ActionContext {
    let ctx = ActionContext::new(AgentId::new("agent-1").unwrap(), action.spec().id.clone());
    h.store
        .record(
            PEN,
            RunRecord::queued(ctx.run_id, ctx.agent_id.clone(), ctx.action_id.clone(), params, ctx.correlation_id),
        )
        .unwrap();
    ctx
}

#[tokio::test(start_paused = true)]
async fn a_completed_run_is_journaled_and_announced_in_order() {
    let h = harness();
    let mut events = h.events.subscribe();
    let add = action(spec("math.add"), |p: Value, _| async move { Ok(json!(p["a"].as_i64().unwrap_or(0) + 1)) });
    let params = json!({"a": 41});
    let ctx = queued(&h, &add, &params);
    let outcome = h.runner.execute(&add, params, ctx.clone()).await;
    assert_eq!((outcome.status, &outcome.output, outcome.attempts), (OutcomeStatus::Completed, &json!(42), 1));
    assert_eq!(outcome.output_text(), "42");

    let record = h.store.get(ctx.run_id).unwrap();
    let statuses: Vec<RunStatus> = record.history.iter().map(|(s, _)| *s).collect();
    assert_eq!(statuses, [RunStatus::Queued, RunStatus::Running, RunStatus::Completed]);
    assert_eq!(record.attempts, 1);
    let first = events.recv().await.unwrap();
    assert_eq!(first.kind, EventKind::ActionStarted { action: ActionId::new("math.add").unwrap(), attempt: 1 });
    assert_eq!((first.run, first.correlation), (Some(ctx.run_id), Some(ctx.correlation_id)));
    let second = events.recv().await.unwrap();
    assert_eq!(second.kind, EventKind::ActionCompleted { action: ActionId::new("math.add").unwrap(), attempts: 1 });
}

#[tokio::test(start_paused = true)]
async fn a_panicking_action_fails_critical_and_the_next_run_succeeds() {
    let h = harness();
    let boom = action(spec("t.boom"), |_, _| async { panic!("kaboom") });
    let ctx = queued(&h, &boom, &json!({}));
    let outcome = h.runner.execute(&boom, json!({}), ctx).await;
    let error = outcome.error.unwrap();
    assert_eq!((outcome.status, error.class), (OutcomeStatus::Failed, ErrorClass::Critical));
    assert!(error.message.contains("kaboom"), "{}", error.message);
    assert_eq!(outcome.attempts, 1, "critical errors are never retried");

    let fine = action(spec("t.fine"), |_, _| async { Ok(json!("ok")) });
    let ctx = queued(&h, &fine, &json!({}));
    assert_eq!(h.runner.execute(&fine, json!({}), ctx).await.status, OutcomeStatus::Completed);
}

/// Tells a oneshot when the action's future is dropped.
struct DropSignal(Option<oneshot::Sender<()>>);

impl Drop for DropSignal {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_slow_action_times_out_and_its_task_is_dropped() {
    let h = harness();
    let (dropped_tx, dropped_rx) = oneshot::channel();
    let dropped_tx = Arc::new(std::sync::Mutex::new(Some(dropped_tx)));
    let slow_spec = spec("t.slow").timeout(Duration::from_secs(2)).retry(RetryPolicy::never());
    let slow = action(slow_spec, move |_, _| {
        let guard = DropSignal(dropped_tx.lock().unwrap().take());
        async move {
            let _guard = guard;
            std::future::pending::<()>().await;
            Ok(Value::Null)
        }
    });
    let ctx = queued(&h, &slow, &json!({}));
    let outcome = h.runner.execute(&slow, json!({}), ctx.clone()).await;
    assert_eq!(outcome.error.unwrap().class, ErrorClass::Timeout);
    assert_eq!(outcome.latency, Duration::from_secs(2), "the paused clock advanced exactly to the timeout");
    tokio::time::timeout(Duration::from_secs(60), dropped_rx)
        .await
        .expect("the attempt's future was dropped, not left running")
        .unwrap();
    let record = h.store.get(ctx.run_id).unwrap();
    assert_eq!(record.error, Some(ErrorClass::Timeout));
    // The end is stamped as the start plus the latency (the paused clock's two seconds), not read again.
    let (running, ended) = (record.history[1], record.history[2]);
    assert_eq!((running.0, ended.0), (RunStatus::Running, RunStatus::Failed));
    assert_eq!((ended.1 - running.1).to_std().unwrap(), Duration::from_secs(2), "{:?}", record.history);
}

#[tokio::test(start_paused = true)]
async fn idempotent_transient_failures_are_retried_with_backoff_until_success() {
    let h = harness();
    let calls = Arc::new(AtomicU32::new(0));
    let counter = calls.clone();
    let flaky_spec = spec("t.flaky").idempotent(true).side_effects(true).retry(RetryPolicy::attempts(4));
    let flaky = action(flaky_spec, move |_, ctx: ActionContext| {
        let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
        async move {
            assert_eq!(ctx.attempt, n, "the context says which attempt this is");
            if n < 3 { Err(ActionError::transient("busy")) } else { Ok(json!(n)) }
        }
    });
    let mut events = h.events.subscribe();
    let ctx = queued(&h, &flaky, &json!({}));
    let outcome = h.runner.execute(&flaky, json!({}), ctx.clone()).await;
    assert_eq!((outcome.status, outcome.attempts), (OutcomeStatus::Completed, 3));
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    let mut retries = Vec::new();
    while let Ok(event) = events.try_recv() {
        if let EventKind::ActionRetried { attempt, class, backoff, .. } = event.kind {
            retries.push((attempt, class, backoff));
        }
    }
    assert_eq!(retries.len(), 2);
    let policy = RetryPolicy::attempts(4);
    for (attempt, class, backoff) in retries {
        assert_eq!(class, ErrorClass::Transient);
        assert!(policy.backoff(attempt, 0.0) <= backoff && backoff <= policy.backoff(attempt, 1.0), "{backoff:?}");
    }
    assert_eq!(h.store.get(ctx.run_id).unwrap().attempts, 3);
}

#[tokio::test(start_paused = true)]
async fn a_side_effecting_non_idempotent_action_runs_exactly_once() {
    let h = harness();
    let calls = Arc::new(AtomicU32::new(0));
    let counter = calls.clone();
    let charge_spec = spec("t.charge").side_effects(true).idempotent(false).retry(RetryPolicy::attempts(5));
    let charge = action(charge_spec, move |_, _| {
        counter.fetch_add(1, Ordering::SeqCst);
        async { Err(ActionError::transient("gateway busy")) }
    });
    let ctx = queued(&h, &charge, &json!({}));
    let outcome = h.runner.execute(&charge, json!({}), ctx).await;
    assert_eq!((outcome.status, outcome.attempts), (OutcomeStatus::Failed, 1));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn validation_errors_are_never_retried() {
    let h = harness();
    let calls = Arc::new(AtomicU32::new(0));
    let counter = calls.clone();
    let strict_spec = ActionSpec::new("t.strict", "needs n")
        .unwrap()
        .idempotent(true)
        .params_schema(json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}));
    let strict = action(strict_spec, move |_, _| {
        counter.fetch_add(1, Ordering::SeqCst);
        async { Err(ActionError::validation("n must be even")) }
    });
    let ctx = queued(&h, &strict, &json!({}));
    let outcome = h.runner.execute(&strict, json!({"n": "one"}), ctx).await;
    assert_eq!((outcome.error.unwrap().class, outcome.attempts), (ErrorClass::Validation, 0));
    assert_eq!(calls.load(Ordering::SeqCst), 0, "bad params never reach the action");

    let ctx = queued(&h, &strict, &json!({"n": 1}));
    let outcome = h.runner.execute(&strict, json!({"n": 1}), ctx).await;
    assert_eq!((outcome.error.unwrap().class, outcome.attempts), (ErrorClass::Validation, 1));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let failed = h.store.query(&RunQuery { status: Some(RunStatus::Failed), ..RunQuery::default() });
    assert_eq!(failed.len(), 2, "the journal holds both runs");
}

#[tokio::test(start_paused = true)]
async fn dropping_a_run_cancels_its_attempt() {
    let h = harness();
    let (dropped_tx, dropped_rx) = oneshot::channel();
    let (started_tx, started_rx) = oneshot::channel();
    let slots = Arc::new(std::sync::Mutex::new(Some((dropped_tx, started_tx))));
    let long = action(spec("t.long").timeout(Duration::from_secs(3600)), move |_, _| {
        let (dropped, started) = slots.lock().unwrap().take().unwrap();
        let guard = DropSignal(Some(dropped));
        async move {
            let _guard = guard;
            let _ = started.send(());
            std::future::pending::<()>().await;
            Ok(Value::Null)
        }
    });
    let ctx = queued(&h, &long, &json!({}));
    let runner = h.runner.clone();
    let run = tokio::spawn(async move { runner.execute(&long, json!({}), ctx).await });
    started_rx.await.unwrap();
    run.abort();
    tokio::time::timeout(Duration::from_secs(60), dropped_rx)
        .await
        .expect("stopping the run drops the action's future")
        .unwrap();
}
