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
