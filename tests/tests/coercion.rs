//! Argument coercion, the way models call tools: `"5"` for an integer, `"true"` for a boolean, one value for an
//! array, and `null` for a field they mean to leave out (OpenAI's strict mode sends `null` for every optional
//! field). Through a real runtime, and as a property over every standard action: whatever a strict-mode schema
//! accepts, the action accepts.

use agentry::action::{ActionContext, ActionError, DynAction};
use agentry::id::{ActionId, AgentId};
use agentry::policy::Policy;
use agentry::skill::{Skill, SkillDefinition};
use agentry_tests::Operated;
use proptest::prelude::*;
use proptest::strategy::{BoxedStrategy, Union};
use proptest::test_runner::{Config, TestRunner};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Counts things, the way a typical typed action takes its params.
#[derive(Debug, Deserialize, Serialize, JsonSchema, agentry::Action)]
#[action(id = "tally.count", output = Value)]
struct Count {
    /// How many (default 3).
    #[serde(default = "three")]
    count: u64,
    /// Whether to shout.
    #[serde(default)]
    loud: bool,
    /// Labels.
    #[serde(default)]
    labels: Vec<String>,
    /// A ratio, if any.
    ratio: Option<f64>,
}

fn three() -> u64 {
    3
}

impl Count {
    async fn run(self, _ctx: ActionContext) -> Result<Value, ActionError> {
        Ok(json!({"count": self.count, "loud": self.loud, "labels": self.labels, "ratio": self.ratio}))
    }
}

fn tally() -> Skill {
    Skill::builder("tally", "1.0.0").action::<Count>().build().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_models_send_is_coerced_and_the_rest_is_reported_with_where_it_is() {
    let op = Operated::start(vec![tally()], Policy::default(), &[]).await;
    // OpenAI strict mode: every field present, `null` for the ones left out.
    let strict = op.output("tally.count", json!({"count": null, "loud": null, "labels": null, "ratio": null})).await;
    assert_eq!(strict, json!({"count": 3, "loud": false, "labels": [], "ratio": null}));
    let loose = op.output("tally.count", json!({"count": "5", "loud": "true", "labels": "one", "ratio": "0.5"})).await;
    assert_eq!(loose, json!({"count": 5, "loud": true, "labels": ["one"], "ratio": 0.5}));

    let (class, message) = op.failure("tally.count", json!({"count": "five", "loud": "yes"})).await;
    assert_eq!(class, "validation");
    assert!(message.contains("at `/count`") && message.contains("at `/loud`"), "{message}");
    assert!(message.contains("\"five\"") && message.contains("integer"), "{message}");

    // Outside callers (the MCP server) get the same.
    let outcome = op.runtime.invoke(op.agent.id(), "tally.count", json!({"count": "7", "labels": null})).await.unwrap();
    assert_eq!(outcome.output["count"], 7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coercion_can_be_turned_off() {
    let op = Operated::start_with(vec![tally()], Policy::default(), &[], |b| b.coerce_params(false)).await;
    let (class, message) = op.failure("tally.count", json!({"count": "5"})).await;
    assert_eq!(class, "validation", "{message}");
}

/// A value the (strict-mode) schema describes: objects with every property, strings honouring the formats
/// typed params decode (uuid, date-time), numbers within their bounds.
fn value_for(root: &Value, schema: &Value, depth: usize) -> BoxedStrategy<Value> {
    if depth > 6 {
        return Just(Value::Null).boxed();
    }
    if let Some(Value::String(reference)) = schema.get("$ref")
        && let Some(target) = reference.strip_prefix('#').and_then(|p| root.pointer(p))
    {
        return value_for(root, target, depth + 1);
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = schema.get(key) {
            return Union::new(branches.iter().map(|b| value_for(root, b, depth + 1))).boxed();
        }
    }
    if let Some(Value::Array(values)) = schema.get("enum") {
        return prop::sample::select(values.clone()).boxed();
    }
    if let Some(value) = schema.get("const") {
        return Just(value.clone()).boxed();
    }
    let types: Vec<String> = match schema.get("type") {
        Some(Value::String(one)) => vec![one.clone()],
        Some(Value::Array(many)) => many.iter().filter_map(|t| t.as_str().map(str::to_owned)).collect(),
        _ => vec!["null".to_owned(), "string".to_owned()],
    };
    let number = |key: &str| schema.get(key).and_then(Value::as_f64);
    let strategies = types.into_iter().map(|kind| match kind.as_str() {
        "null" => Just(Value::Null).boxed(),
        "boolean" => any::<bool>().prop_map(Value::Bool).boxed(),
        "integer" => {
            let low = number("minimum").unwrap_or(-50.0) as i64;
            let high = number("maximum").map_or(low + 100, |h| h as i64);
            (low..=high.max(low)).prop_map(|n| json!(n)).boxed()
        }
        "number" => {
            let low = number("minimum").unwrap_or(-50.0);
            (0.0..100.0f64).prop_map(move |n| json!(low + n)).boxed()
        }
        "string" => match schema.get("format").and_then(Value::as_str) {
            Some("uuid") => any::<u128>().prop_map(|n| json!(uuid::Uuid::from_u128(n))).boxed(),
            Some("date-time") => Just(json!("2026-01-02T03:04:05Z")).boxed(),
            _ => "[a-z0-9 ./_-]{0,10}".prop_map(Value::String).boxed(),
        },
        "array" => {
            let item = schema.get("items").cloned().unwrap_or(json!({}));
            prop::collection::vec(value_for(root, &item, depth + 1), 0..3).prop_map(Value::Array).boxed()
        }
        "object" => {
            let properties: Vec<(String, Value)> = schema
                .get("properties")
                .and_then(Value::as_object)
                .map(|p| p.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
                .unwrap_or_default();
            let fields: Vec<BoxedStrategy<(String, Value)>> = properties
                .into_iter()
                .map(|(key, property)| {
                    value_for(root, &property, depth + 1).prop_map(move |v| (key.clone(), v)).boxed()
                })
                .collect();
            fields.prop_map(|fields| Value::Object(fields.into_iter().collect())).boxed()
        }
        _ => Just(Value::Null).boxed(),
    });
    Union::new(strategies.collect::<Vec<_>>()).boxed()
}

#[test]
fn whatever_a_strict_schema_accepts_every_standard_action_accepts() {
    let skills = [
        agentry_testkit::demo::Arithmetic::skill(),
        agentry_skills::Files::skill(),
        agentry_skills::Memory::skill(),
        agentry_skills::Jobs::skill(),
        agentry_skills::System::skill(),
        agentry_skills::Http::skill(),
        Ok(tally()),
    ];
    let actions: Vec<DynAction> = skills.into_iter().flat_map(|s| s.unwrap().actions().to_vec()).collect();
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().expect("a runtime");
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(64);
    for action in &actions {
        let strict = agentry::tool::strict_schema(&action.spec().params_schema);
        let validator = jsonschema::validator_for(&strict).expect("a strict schema compiles");
        let mut runner = TestRunner::new(Config { cases, failure_persistence: None, ..Config::default() });
        let result = runner.run(&value_for(&strict, &strict, 0), |params| {
            prop_assume!(validator.is_valid(&params));
            let coerced = action.coerce(params.clone());
            prop_assert!(
                action.validate(&coerced).is_ok(),
                "{}: {params} became {coerced}: {:?}",
                action.spec().id,
                action.validate(&coerced)
            );
            let ctx =
                ActionContext::new(AgentId::new("strict").unwrap(), ActionId::new(action.spec().id.as_str()).unwrap());
            let ran = runtime.block_on(async { action.invoke(coerced, ctx).await });
            if let Err(error) = ran {
                prop_assert!(
                    !error.to_string().contains("do not fit the action's type"),
                    "{}: {params}: {error}",
                    action.spec().id
                );
            }
            Ok(())
        });
        if let Err(failure) = result {
            panic!("`{}` refused what its strict schema accepts: {failure}", action.spec().id);
        }
    }
}
