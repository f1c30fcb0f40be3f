//! The `jobs` skill through a real runtime on tokio's paused clock: submit returns at once, jobs move through
//! their statuses with progress, run through the gate, respect the concurrency limit, can be cancelled, and
//! the agent is told when each ends.

use agentry::action::{ActionSpec, DynAction, ErrorClass, JobStatus};
use agentry::events::{Event, EventKind};
use agentry::policy::Policy;
use agentry::skill::{Skill, SkillDefinition};
use agentry::store::RunStatus;
use agentry_skills::Jobs;
use agentry_tests::Operated;
use serde_json::{Value, json};
use std::time::Duration;
use tokio::sync::broadcast::Receiver;

/// `work.slow` reports half-way progress, then sleeps `secs`; `work.broken` fails.
fn work() -> Skill {
    let slow = ActionSpec::new("work.slow", "sleeps").unwrap().timeout(Duration::from_secs(3600));
    let slow = DynAction::new(slow.params_schema(json!({"type": "object"})), |params, ctx| {
        Box::pin(async move {
            ctx.progress(0.5, Some("half way".into()));
            tokio::time::sleep(Duration::from_secs(params["secs"].as_u64().unwrap_or(1))).await;
            Ok(json!({"slept": params["secs"]}))
        })
    })
    .unwrap();
    let broken = ActionSpec::new("work.broken", "fails").unwrap().params_schema(json!({"type": "object"}));
    let broken = DynAction::new(broken, |_, _| Box::pin(async { Err(agentry::ActionError::validation("no input")) }));
    Skill::builder("work", "1.0.0").dyn_action(slow).dyn_action(broken.unwrap()).build().unwrap()
}

async fn jobs(max_jobs: usize) -> Operated {
    let skills = vec![Jobs::skill().unwrap(), work()];
    Operated::start_with(skills, Policy::default(), &[], |b| b.max_jobs(max_jobs)).await
}

async fn submit(op: &Operated, action: &str, params: Value) -> Value {
    op.output("jobs.submit", json!({"action": action, "params": params})).await["job"].clone()
}

async fn ended(events: &mut Receiver<Event>, job: &Value) -> JobStatus {
    loop {
        if let EventKind::JobEnded { job: id, status } = events.recv().await.unwrap().kind
            && json!(id) == *job
        {
            return status;
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_job_runs_in_the_background_reports_progress_and_tells_the_agent_when_done() {
    let op = jobs(4).await;
    let mut events = op.runtime.events();
    let job = submit(&op, "work.slow", json!({"secs": 10})).await;
    let early = op.output("jobs.wait", json!({"job": job, "timeout_ms": 1000})).await;
    assert_eq!(early["status"], "running", "submit returned while the job still runs: {early:#}");
    assert_eq!((early["progress"].clone(), early["message"].clone()), (json!(0.5), json!("half way")));

    let done = op.output("jobs.wait", json!({"job": job, "timeout_ms": 60_000})).await;
    assert_eq!(done["status"], "completed");
    assert_eq!((done["progress"].clone(), done["output"].clone()), (json!(1.0), json!({"slept": 10})));
    assert_eq!(ended(&mut events, &job).await, JobStatus::Completed);
    let told = op.operator().await.job_signals;
    assert_eq!(told.len(), 1);
    assert_eq!((told[0]["kind"].clone(), told[0]["job"]["id"].clone()), (json!("job.completed"), job.clone()));
    let listed = op.output("jobs.list", json!({"status": "completed"})).await;
    assert_eq!(listed.as_array().unwrap().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn failing_and_ungated_jobs_fail_and_say_why() {
    let op = jobs(4).await;
    let mut events = op.runtime.events();
    let job = submit(&op, "work.broken", json!({})).await;
    let done = op.output("jobs.wait", json!({"job": job, "timeout_ms": 60_000})).await;
    assert_eq!(done["status"], "failed");
    assert!(done["error"].as_str().unwrap().contains("no input"), "{done:#}");
    assert_eq!(ended(&mut events, &job).await, JobStatus::Failed);

    let job = submit(&op, "nowhere.to_run", json!({})).await;
    let done = op.output("jobs.wait", json!({"job": job, "timeout_ms": 60_000})).await;
    assert_eq!(done["status"], "failed");
    assert!(done["error"].as_str().unwrap().contains("not registered"), "jobs pass the gate: {done:#}");
    let kinds: Vec<Value> = {
        ended(&mut events, &job).await;
        op.operator().await.job_signals.iter().map(|s| s["kind"].clone()).collect()
    };
    assert_eq!(kinds, [json!("job.failed"), json!("job.failed")]);
}

#[tokio::test(start_paused = true)]
async fn cancelling_a_job_cancels_its_run() {
    let op = jobs(4).await;
    let mut events = op.runtime.events();
    let job = submit(&op, "work.slow", json!({"secs": 1000})).await;
    let run = loop {
        let event = events.recv().await.unwrap();
        if matches!(&event.kind, EventKind::ActionStarted { action, .. } if action.as_str() == "work.slow") {
            break event.run.unwrap();
        }
    };
    let cancelled = op.output("jobs.cancel", json!({"job": job})).await;
    assert_eq!(cancelled, json!({"cancelled": true, "status": "cancelled"}));
    assert_eq!(ended(&mut events, &job).await, JobStatus::Cancelled);
    let failed = loop {
        let event = events.recv().await.unwrap();
        if event.run == Some(run) && matches!(event.kind, EventKind::ActionFailed { .. }) {
            break event;
        }
    };
    assert!(matches!(failed.kind, EventKind::ActionFailed { class: ErrorClass::Cancelled, .. }));
    let record = op.runtime.store().get(run).unwrap();
    assert_eq!((record.status(), record.error), (RunStatus::Failed, Some(ErrorClass::Cancelled)));
    assert_eq!(op.output("jobs.cancel", json!({"job": job})).await["cancelled"], false, "already ended");
    assert_eq!(op.operator().await.job_signals[0]["kind"], "job.cancelled");
}

#[tokio::test(start_paused = true)]
async fn jobs_beyond_the_limit_wait_queued() {
    let op = jobs(1).await;
    let first = submit(&op, "work.slow", json!({"secs": 5})).await;
    let second = submit(&op, "work.slow", json!({"secs": 5})).await;
    let waiting = op.output("jobs.wait", json!({"job": second, "timeout_ms": 1000})).await;
    assert_eq!(waiting["status"], "queued", "one job at a time: {waiting:#}");
    assert_eq!(op.output("jobs.status", json!({"job": first})).await["status"], "running");
    let done = op.output("jobs.wait", json!({"job": second, "timeout_ms": 60_000})).await;
    assert_eq!(done["status"], "completed");
    assert_eq!(op.output("jobs.status", json!({"job": first})).await["status"], "completed");
}

#[tokio::test(start_paused = true)]
async fn bad_job_requests_are_refused() {
    let op = jobs(1).await;
    let unknown = uuid::Uuid::now_v7();
    for action in ["jobs.status", "jobs.cancel"] {
        let (class, message) = op.failure(action, json!({"job": unknown})).await;
        assert_eq!(class, "validation");
        assert!(message.contains("no job"), "{message}");
    }
    let (class, _) = op.failure("jobs.wait", json!({"job": unknown, "timeout_ms": 100_000_000u64})).await;
    assert_eq!(class, "validation");
    let (class, _) = op.failure("jobs.status", json!({"job": "not-a-uuid"})).await;
    assert_eq!(class, "validation");
    let (class, _) = op.failure("jobs.submit", json!({"action": "Not An Id"})).await;
    assert_eq!(class, "validation");
}

#[tokio::test(start_paused = true)]
async fn a_job_records_the_action_it_runs_and_stopping_the_agent_cancels_its_jobs() {
    let op =
        Operated::start_with(vec![Jobs::skill().unwrap(), work()], Policy::default(), &[], |b| b.max_call_depth(2))
            .await;
    let mut events = op.runtime.events();
    let job = submit(&op, "work.slow", json!({"secs": 1000})).await;
    let status = op.output("jobs.wait", json!({"job": job, "timeout_ms": 1000})).await;
    assert_eq!(status["action"], "work.slow");
    assert_eq!(status["status"], "running", "a job's run is one level below the run that submitted it");
    op.agent.stop().await;
    assert_eq!(ended(&mut events, &job).await, JobStatus::Cancelled);
    let record = op.runtime.jobs().get(serde_json::from_value(job).unwrap()).unwrap();
    assert_eq!(record.status, JobStatus::Cancelled);
}
