//! The `system` skill through a real runtime, on tokio's paused clock.

use agentry::events::EventKind;
use agentry::policy::Policy;
use agentry::skill::SkillDefinition;
use agentry::store::RunStatus;
use agentry_skills::System;
use agentry_tests::Operated;
use serde_json::json;
use std::time::Duration;
use tokio::time::Instant;

async fn system() -> Operated {
    Operated::start(vec![System::skill().unwrap()], Policy::default(), &[]).await
}

#[tokio::test(start_paused = true)]
async fn wait_sleeps_on_the_timer_and_refuses_more_than_a_day() {
    let op = system().await;
    let began = Instant::now();
    assert_eq!(op.output("system.wait", json!({"ms": 5000})).await, json!(5000));
    assert!(began.elapsed() >= Duration::from_secs(5));
    let (class, message) = op.failure("system.wait", json!({"ms": 90_000_000u64})).await;
    assert_eq!(class, "validation");
    assert!(message.contains("at most 86400000"), "{message}");
    let (class, _) = op.failure("system.wait", json!({"ms": -1})).await;
    assert_eq!(class, "validation", "a negative wait fails the params schema");
}

#[tokio::test(start_paused = true)]
async fn log_takes_a_level_and_fields_and_refuses_unknown_levels() {
    let op = system().await;
    let params = json!({"message": "checked the inbox", "level": "warn", "fields": {"unread": 3}});
    assert_eq!(op.output("system.log", params).await, json!(null));
    let (class, message) = op.failure("system.log", json!({"message": "x", "level": "loud"})).await;
    assert_eq!(class, "validation");
    assert!(message.contains("/level"), "{message}");
}

#[tokio::test(start_paused = true)]
async fn schedule_sends_the_agent_its_signal_later_and_replaces_by_key() {
    let op = system().await;
    let params = json!({"kind": "reminder.due", "after_ms": 2000, "data": {"what": "tea"}});
    let scheduled = op.output("system.schedule", params).await;
    assert_eq!(scheduled["key"], "reminder.due");
    // The same key again replaces the first schedule: only one signal arrives.
    op.output("system.schedule", json!({"kind": "reminder.due", "after_ms": 3000})).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(op.operator().await.others.is_empty(), "not yet");
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(op.operator().await.others, ["reminder.due"]);
    op.output("system.schedule", json!({"kind": "later.on", "after_ms": 1000})).await;
    op.output("system.cancel", json!({"key": "later.on"})).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(op.operator().await.others, ["reminder.due"], "a cancelled schedule never fires");
    let (class, message) = op.failure("system.schedule", json!({"kind": "Not A Kind", "after_ms": 1})).await;
    assert_eq!(class, "validation");
    assert!(message.contains("`kind`"), "{message}");
}

#[tokio::test(start_paused = true)]
async fn stop_ends_the_agent_once_the_run_has_completed() {
    let op = system().await;
    let mut events = op.runtime.events();
    let signal = agentry::signal::Signal::new("do", json!({"action": "system.stop", "params": {"reason": "done"}}));
    op.agent.send(signal.unwrap()).unwrap();
    let mut run = None;
    let stopped_reason = loop {
        let event = events.recv().await.unwrap();
        if let EventKind::ActionCompleted { .. } = event.kind {
            run = event.run;
        }
        if let EventKind::AgentStopped { reason } = event.kind {
            break reason;
        }
    };
    let record = op.runtime.store().get(run.expect("the stop run completed before the agent stopped")).unwrap();
    assert_eq!(stopped_reason, "done", "the reason shows on the event stream");
    assert_eq!(record.status(), RunStatus::Completed);
}
