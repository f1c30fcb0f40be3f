//! Contracts enforced, not only declared: an action's output must match its output schema, or the run fails
//! `critical` with the validator's messages (the same holds for MCP tools, whose `outputSchema` becomes the
//! action's output schema and whose `structuredContent` its output).

use agentry::action::{ActionSpec, DynAction};
use agentry::policy::Policy;
use agentry::skill::Skill;
use agentry_tests::Operated;
use serde_json::{Value, json};

fn reporter() -> Skill {
    let spec = ActionSpec::new("report.give", "returns params.give as its output")
        .unwrap()
        .params_schema(json!({"type": "object"}))
        .output_schema(json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}));
    let give = DynAction::new(spec, |params: Value, _| Box::pin(async move { Ok(params["give"].clone()) })).unwrap();
    Skill::builder("report", "1.0.0").dyn_action(give).build().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_output_that_breaks_its_schema_fails_critical() {
    let op = Operated::start(vec![reporter()], Policy::default(), &[]).await;
    assert_eq!(op.output("report.give", json!({"give": {"n": 1}})).await, json!({"n": 1}));
    let (class, message) = op.failure("report.give", json!({"give": {"n": "one"}})).await;
    assert_eq!(class, "critical");
    assert!(message.contains("does not match its output schema") && message.contains("at `/n`"), "{message}");
    let (class, message) = op.failure("report.give", json!({"give": "text"})).await;
    assert_eq!(class, "critical", "{message}");
    let reply = op.run("report.give", json!({"give": []})).await;
    assert_eq!(reply["outcome"]["attempts"], 1, "a broken contract is never retried");
}

/// Divides `a` by `b`, promising a finite quotient: its precondition refuses `b = 0` before it runs, its
/// postcondition refuses an infinite result (which `run` gives for huge operands).
#[derive(Debug, serde::Deserialize, serde::Serialize, schemars::JsonSchema, agentry::Action)]
#[action(id = "careful.divide", output = f64, pre = nonzero_divisor, post = finite)]
struct Divide {
    a: f64,
    b: f64,
}

static RUNS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

fn nonzero_divisor(params: &Divide, _ctx: &agentry::ActionContext) -> Result<(), String> {
    if params.b == 0.0 { Err("`b` is 0; expected a divisor other than zero".into()) } else { Ok(()) }
}

fn finite(output: &f64) -> Result<(), String> {
    if output.is_finite() { Ok(()) } else { Err(format!("the quotient is {output}; expected a finite number")) }
}

impl Divide {
    async fn run(self, _ctx: agentry::ActionContext) -> Result<f64, agentry::ActionError> {
        RUNS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(self.a / self.b)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preconditions_refuse_before_the_run_and_postconditions_after() {
    let careful = Skill::builder("careful", "1.0.0").action::<Divide>().build().unwrap();
    let op = Operated::start(vec![careful], Policy::default(), &[]).await;
    assert_eq!(op.output("careful.divide", json!({"a": 6, "b": 3})).await, json!(2.0));
    let before = RUNS.load(std::sync::atomic::Ordering::SeqCst);
    let (class, message) = op.failure("careful.divide", json!({"a": 1, "b": 0})).await;
    assert_eq!(class, "validation");
    assert!(message.contains("precondition of `careful.divide` failed: `b` is 0"), "{message}");
    assert_eq!(RUNS.load(std::sync::atomic::Ordering::SeqCst), before, "the action never ran");
    let (class, message) = op.failure("careful.divide", json!({"a": 1e308, "b": 1e-308})).await;
    assert_eq!(class, "critical");
    assert!(message.contains("postcondition of `careful.divide` failed"), "{message}");
}

/// `notes.open` opens the sub-drive `params.name` with `params.if_exists` and writes a file in it.
fn notes() -> Skill {
    let spec = ActionSpec::new("notes.open", "opens a sub-drive").unwrap().params_schema(json!({"type": "object"}));
    let open = DynAction::new(spec, |params: Value, ctx: agentry::ActionContext| {
        Box::pin(async move {
            let mode: agentry::action::IfDriveExists = serde_json::from_value(params["if_exists"].clone())
                .map_err(|e| agentry::ActionError::validation(e.to_string()))?;
            let dir = ctx.sub_drive(params["name"].as_str().unwrap_or_default(), mode)?;
            std::fs::write(dir.join("note.txt"), "hi").map_err(|e| agentry::ActionError::transient(e.to_string()))?;
            let relative = dir.strip_prefix(ctx.drive()?).unwrap().to_string_lossy().into_owned();
            Ok(json!(relative))
        })
    })
    .unwrap();
    Skill::builder("notes", "1.0.0").dyn_action(open).build().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skill_opens_named_sub_drives_with_an_if_exists_policy() {
    let op = Operated::start(vec![notes()], Policy::default(), &[]).await;
    let open = |name: &str, mode: &str| json!({"name": name, "if_exists": mode});
    assert_eq!(op.output("notes.open", open("task", "fail")).await, "task");
    let (class, message) = op.failure("notes.open", open("task", "fail")).await;
    assert_eq!(class, "validation");
    assert!(message.contains("exists already"), "{message}");
    assert_eq!(op.output("notes.open", open("task", "reuse")).await, "task");
    assert_eq!(op.output("notes.open", open("task", "rename")).await, "task (1)");
    assert_eq!(op.output("notes.open", open("task", "rename")).await, "task (2)");
    for bad in ["", ".", "..", "../out", "a/b", "a\\b"] {
        let (class, _) = op.failure("notes.open", open(bad, "reuse")).await;
        assert_eq!(class, "validation", "{bad:?} is refused");
    }
    let drive = op.runtime.drive(op.agent.id(), &agentry::id::SkillId::new("notes").unwrap()).unwrap();
    assert!(drive.join("task (2)").join("note.txt").is_file());
    assert!(!drive.parent().unwrap().join("out").exists(), "nothing escaped the drive");
}
