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

/// Every `agentry::agent` event this process logs: its level and its fields (the message included), as text.
static LOGGED: std::sync::Mutex<Vec<Logged>> = std::sync::Mutex::new(Vec::new());

/// One logged event: its level, and its fields as (name, text).
type Logged = (tracing::Level, Vec<(String, String)>);

/// A `tracing` subscriber that keeps the events of target `agentry::agent` in [`LOGGED`].
struct Recorder;

struct Fields(Vec<(String, String)>);

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push((field.name().to_owned(), format!("{value:?}")));
    }

    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.push((field.name().to_owned(), value.to_owned()));
    }
}

impl tracing::Subscriber for Recorder {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        metadata.target() == "agentry::agent"
    }
    fn new_span(&self, _span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _span: &tracing::span::Id, _values: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _span: &tracing::span::Id, _follows: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut fields = Fields(Vec::new());
        event.record(&mut fields);
        LOGGED.lock().unwrap().push((*event.metadata().level(), fields.0));
    }
    fn enter(&self, _span: &tracing::span::Id) {}
    fn exit(&self, _span: &tracing::span::Id) {}
}

#[tokio::test(start_paused = true)]
async fn log_takes_a_level_and_fields_and_refuses_unknown_levels() {
    let _ = tracing::subscriber::set_global_default(Recorder);
    let op = system().await;
    let params = json!({"message": "checked the inbox", "level": "warn", "fields": {"unread": 3}});
    assert_eq!(op.output("system.log", params).await, json!(null));
    let logged = LOGGED.lock().unwrap().clone();
    let line = logged
        .iter()
        .find(|(_, fields)| fields.iter().any(|(k, v)| k == "message" && v == "checked the inbox"))
        .unwrap_or_else(|| panic!("the line was logged: {logged:?}"));
    assert_eq!(line.0, tracing::Level::WARN);
    let field = |name: &str| line.1.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    assert_eq!(field("agent").as_deref(), Some("operator"));
    assert_eq!(field("fields").as_deref(), Some(r#"{"unread":3}"#));
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
