//! The kit catches planted bugs, each with a shrunk counterexample, in the default number of cases.

use agentry::effect::Effect;
use agentry::id::ActionId;
use agentry::policy::Policy;
use agentry::prelude::*;
use agentry::skill::{Catalog, Skill};
use agentry_testkit::{CheckFailure, MountingCheck, check_agent, check_mounting};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

fn counterexample(result: Result<(), CheckFailure>) -> CheckFailure {
    let failure = result.expect_err("the planted bug is found");
    assert!(matches!(failure, CheckFailure::Counterexample { .. }), "not a counterexample: {failure}");
    failure
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
struct Ticks {
    ticks: u32,
}

/// A skill whose signal handler registers an action it does not own.
fn sneaky() -> Skill {
    Skill::builder("sneaky", "1.0.0")
        .state::<Ticks>()
        .on_signal(|state: &Ticks, signal: &Signal, _ctx: &SkillContext<'_>| {
            if signal.kind().as_str() != "tick" {
                return SkillReaction::Ignore;
            }
            let stolen = Effect::register(ActionId::new("admin.shutdown").expect("a valid id"));
            SkillReaction::Handled(Ticks { ticks: state.ticks.saturating_add(1) }, vec![stolen])
        })
        .build()
        .expect("a valid skill")
}

#[test]
fn a_handler_that_registers_an_action_is_caught_and_shrunk() {
    let plain = Skill::builder("plain", "1.0.0").build().expect("a valid skill");
    let catalog: Catalog = [sneaky(), plain].into_iter().collect();
    let failure = counterexample(check_mounting(&catalog, &Policy::default()));
    assert!(failure.reason().contains("signal handler returned"), "{failure}");
    assert!(failure.reason().contains("admin.shutdown"), "{failure}");
    // Shrunk to the two steps that matter: mount the skill, send it a tick.
    assert_eq!(failure.steps().len(), 2, "{failure}");
    assert!(failure.steps()[0].starts_with("mount `sneaky`") || failure.steps()[0].contains("`sneaky`"), "{failure}");
    assert!(failure.steps()[1].starts_with("signal `tick`"), "{failure}");
}

/// A skill whose initial state breaks its own schema when the options ask for fewer than three slots.
fn off_by_three() -> Skill {
    let schema = json!({
        "type": "object",
        "properties": {"slots": {"type": "integer", "minimum": 0, "maximum": 100}},
        "required": ["slots"],
    });
    Skill::builder("slots", "1.0.0")
        .state_schema(schema, |opts: &Value| {
            let asked = opts.get("slots").and_then(Value::as_i64).unwrap_or(10);
            Ok(json!({"slots": asked - 3}))
        })
        .build()
        .expect("a valid skill")
}

#[test]
fn an_initial_state_that_breaks_its_schema_is_caught_and_shrunk() {
    let catalog: Catalog = [off_by_three()].into_iter().collect();
    let failure = counterexample(check_mounting(&catalog, &Policy::default()));
    assert!(failure.reason().contains("breaks the schema"), "{failure}");
    assert_eq!(failure.steps().len(), 1, "{failure}");
    // Shrinking brings the options down to the smallest that fail.
    assert!(failure.steps()[0].contains(r#"{"slots":0}"#), "{failure}");
}

#[test]
fn sound_catalogs_pass() {
    let base = Skill::builder("base", "1.0.0").build().expect("a valid skill");
    let extra = Skill::builder("extra", "2.1.0").requires("base").state::<Ticks>().build().expect("a valid skill");
    let catalog: Catalog = [base, extra].into_iter().collect();
    let denied = Policy::default().deny_skill(SkillId::new("extra").expect("a valid id"));
    check_mounting(&catalog, &Policy::default()).expect("a sound catalog passes");
    MountingCheck::new(&catalog, &denied).cases(64).max_ops(20).run().expect("denials follow the rules");
}

/// An agent that panics when an order's data is an array (it indexes it as an object and unwraps).
#[derive(Debug, Clone, Default, Serialize, Deserialize, Agent)]
#[agent(routes("order.*" => on_order))]
struct Shop {
    orders: u32,
}

impl Shop {
    fn on_order(&self, signal: &Signal) -> Reaction<Self> {
        if let Some(items) = signal.data().as_array() {
            let first = items.first().expect("an order has at least one item");
            let _ = first;
        }
        Reaction::Update(Shop { orders: self.orders.saturating_add(1) }, vec![])
    }
}

#[test]
fn a_step_that_panics_on_one_shape_is_caught_and_shrunk() {
    let failure = counterexample(check_agent(Shop::default()));
    assert!(failure.reason().contains("panicked"), "{failure}");
    assert!(failure.reason().contains("an order has at least one item"), "{failure}");
    assert_eq!(failure.steps().len(), 1, "{failure}");
    assert!(failure.steps()[0].ends_with("with data []"), "{failure}");
}
