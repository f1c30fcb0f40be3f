//! The agent and skill the durability tests run in a child process they kill: a `Worker` whose `tick` asks for
//! one idempotent and one non-idempotent run of the `ledger` skill, whose actions append a line with their
//! idempotency key to a file in the agent's drive, and one run of its pure `tally` (no side effects: it ends at
//! its first poll, and the journal writes such runs a batch at a time). Every few ticks it also submits a
//! ledger action as a job, mounts or unmounts the `extra` skill, and (when the tick says so) asks for a run
//! that needs approval. Shared by the `durable_worker` binary and the tests that check what it left.

use agentry::action::{ActionContext, ActionError, ActionSpec, DynAction, ErrorClass, Risk};
use agentry::agent::{Agent, Reaction};
use agentry::effect::Effect;
use agentry::id::ActionId;
use agentry::signal::Signal;
use agentry::skill::{Skill, SkillDefinition};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::io::Write;
use std::time::Duration;

/// The file each ledger action appends to, in the agent's `ledger` drive folder.
pub const LINES: &str = "lines.txt";

/// A worker's counters: what it was told and what came back.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Worker {
    /// `tick` signals handled.
    pub ticks: u64,
    /// `action.completed` signals.
    pub completed: u64,
    /// `action.failed` signals.
    pub failed: u64,
    /// Of those, the ones with class `interrupted`.
    pub interrupted: u64,
    /// `alarm` signals (a schedule fired).
    pub fired: u64,
    /// The jobs `jobs.submit` said it submitted, in order.
    #[serde(default)]
    pub jobs_submitted: Vec<uuid::Uuid>,
    /// The jobs whose end it was told (`job.completed`, `job.failed`, `job.cancelled`), in order.
    #[serde(default)]
    pub jobs_ended: Vec<uuid::Uuid>,
    /// Of those, the ones that failed with class `interrupted`.
    #[serde(default)]
    pub jobs_interrupted: u64,
    /// Whether it last asked to mount `extra` (rather than to unmount it).
    #[serde(default)]
    pub extra: bool,
}

/// How many ticks between jobs.
pub const JOB_EVERY: u64 = 4;
/// How many ticks between mounts or unmounts of `extra`.
pub const MOUNT_EVERY: u64 = 5;
/// How many ticks between runs that need approval (when the tick asks for them).
pub const RISKY_EVERY: u64 = 10;

fn id(text: &str) -> ActionId {
    ActionId::new(text).expect("a valid action id")
}

impl Agent for Worker {
    fn name() -> &'static str {
        "durable-worker"
    }

    fn start_skills() -> Result<Vec<(Skill, Value)>, agentry::skill::BuildError> {
        Ok(vec![(ledger(), Value::Null), (agentry_skills::Jobs::skill()?, Value::Null)])
    }

    fn handle_signal(&self, signal: &Signal) -> Reaction<Self> {
        let mut next = self.clone();
        match signal.kind().as_str() {
            "tick" => {
                next.ticks += 1;
                let mut runs = vec![
                    Effect::run(id("ledger.note"), json!({})),
                    Effect::run(id("ledger.charge"), json!({})),
                    Effect::run(id("ledger.tally"), json!({})),
                ];
                if next.ticks.is_multiple_of(JOB_EVERY) {
                    let action = if next.ticks.is_multiple_of(2 * JOB_EVERY) { "ledger.charge" } else { "ledger.note" };
                    runs.push(Effect::run(id("jobs.submit"), json!({"action": action, "params": {"ms": 3}})));
                }
                if next.ticks.is_multiple_of(MOUNT_EVERY) {
                    next.extra = !next.extra;
                    let skill = agentry::id::SkillId::new("extra").expect("an id");
                    runs.push(if next.extra {
                        Effect::mount_skill(skill, Value::Null)
                    } else {
                        Effect::unmount_skill(skill)
                    });
                }
                if signal.data()["risky"] == json!(true) && next.ticks.is_multiple_of(RISKY_EVERY) {
                    runs.push(Effect::run(id("ledger.risky"), json!({})));
                }
                Reaction::Update(next, runs)
            }
            "do" => {
                let action = signal.data()["action"].as_str().unwrap_or("ledger.note");
                let Ok(action) = ActionId::new(action) else { return Reaction::Keep(Vec::new()) };
                Reaction::Keep(vec![Effect::run(action, signal.data()["params"].clone())])
            }
            "arm" => {
                let after = Duration::from_millis(signal.data()["after_ms"].as_u64().unwrap_or(100));
                let Ok(alarm) = Signal::new("alarm", Value::Null) else { return Reaction::Keep(Vec::new()) };
                let mut effect = Effect::schedule("alarm", after, alarm);
                if signal.data()["skip_if_missed"] == json!(true) {
                    effect = effect.skip_if_missed();
                }
                Reaction::Keep(vec![effect])
            }
            "alarm" => {
                next.fired += 1;
                Reaction::Update(next, Vec::new())
            }
            "action.completed" => {
                next.completed += 1;
                if let Some(report) = signal.outcome().filter(|r| r.action.as_str() == "jobs.submit")
                    && let Some(job) =
                        report.outcome.output.get("job").and_then(|j| j.as_str()).and_then(|j| j.parse().ok())
                {
                    next.jobs_submitted.push(job);
                }
                Reaction::Update(next, Vec::new())
            }
            "job.completed" | "job.failed" | "job.cancelled" => {
                let job = &signal.data()["job"];
                if let Some(id) = job["id"].as_str().and_then(|j| j.parse().ok()) {
                    next.jobs_ended.push(id);
                }
                if job["class"] == json!("interrupted") {
                    next.jobs_interrupted += 1;
                }
                Reaction::Update(next, Vec::new())
            }
            "action.failed" => {
                next.failed += 1;
                if signal
                    .outcome()
                    .and_then(|r| r.outcome.error.as_ref())
                    .is_some_and(|e| e.class == ErrorClass::Interrupted)
                {
                    next.interrupted += 1;
                }
                Reaction::Update(next, Vec::new())
            }
            _ => Reaction::Keep(Vec::new()),
        }
    }
}

/// Appends `<key> <what>` to the ledger file of the run's agent.
fn append(ctx: &ActionContext, what: &str) -> Result<(), ActionError> {
    let path = ctx.drive()?.join(LINES);
    if let Some(folder) = path.parent() {
        std::fs::create_dir_all(folder).map_err(|e| ActionError::critical(e.to_string()))?;
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| ActionError::critical(e.to_string()))?;
    // One write for the whole line, so a kill cannot tear it.
    let line = format!("{} {what}\n", ctx.idempotency_key());
    file.write_all(line.as_bytes()).map_err(|e| ActionError::critical(e.to_string()))
}

/// A ledger action: optionally waits `ms` first; with `hang`, writes `<what>-start` and never ends.
fn ledger_action(spec: ActionSpec, what: &'static str) -> DynAction {
    let action = DynAction::new(spec.params_schema(json!({"type": "object"})), move |params, ctx| {
        Box::pin(async move {
            if params["hang"] == json!(true) {
                append(&ctx, &format!("{what}-start"))?;
                std::future::pending::<()>().await;
            }
            let ms = params["ms"].as_u64().unwrap_or(1);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            append(&ctx, what)?;
            Ok(json!({"wrote": what}))
        })
    });
    action.expect("a valid action")
}

/// The `ledger` skill: `note` (idempotent), `charge` (not idempotent), `risky` (not idempotent, asks for
/// approval), each with side effects, and `tally` ([`PURE`]), which has none (it writes nothing).
pub fn ledger() -> Skill {
    let spec = |name: &str| ActionSpec::new(name, "appends a line with its idempotency key").expect("an id");
    let note = ledger_action(spec("ledger.note").side_effects(true).idempotent(true), "note");
    let charge = ledger_action(spec("ledger.charge").side_effects(true).idempotent(false), "charge");
    let risky = ledger_action(spec("ledger.risky").side_effects(true).risk(Risk::High), "risky");
    let tally = DynAction::new(spec(PURE).params_schema(json!({"type": "object"})), |_, _| {
        Box::pin(async { Ok(json!({"tallied": true})) })
    })
    .expect("a valid action");
    Skill::builder("ledger", "1.0.0")
        .dyn_action(tally)
        .dyn_action(note)
        .dyn_action(charge)
        .dyn_action(risky)
        .build()
        .expect("a valid skill")
}

/// The `extra` skill the worker mounts and unmounts as it goes: one pure action.
pub fn extra() -> Skill {
    let spec = ActionSpec::new("extra.ping", "answers").expect("an id").params_schema(json!({"type": "object"}));
    let ping = DynAction::new(spec, |_, _| Box::pin(async { Ok(json!("pong")) })).expect("a valid action");
    Skill::builder("extra", "1.0.0").dyn_action(ping).build().expect("a valid skill")
}

/// Every skill the worker mounts, as a catalog.
pub fn catalog() -> agentry::skill::Catalog {
    let jobs = agentry_skills::Jobs::skill().expect("the jobs skill");
    [ledger(), jobs, extra()].into_iter().collect()
}

/// The ledger action without side effects: it writes no line.
pub const PURE: &str = "ledger.tally";

/// The lines a ledger file holds: (key, what).
pub fn lines(path: &std::path::Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines().filter_map(|line| line.split_once(' ').map(|(k, w)| (k.to_owned(), w.to_owned()))).collect()
}
