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

/// No false alarms: an agent whose state holds a `HashMap` (key order depends on a hash seed) and floats.
#[derive(Debug, Clone, Default, Serialize, Deserialize, Agent)]
#[agent(routes("count.*" => count))]
struct Census {
    seen: std::collections::HashMap<String, f64>,
}

impl Census {
    fn count(&self, signal: &Signal) -> Reaction<Self> {
        let mut next = self.clone();
        *next.seen.entry(signal.kind().to_string()).or_insert(0.1) *= 1.1;
        Reaction::Update(next, vec![])
    }
}

#[test]
fn maps_and_floats_in_the_state_are_no_false_alarm() {
    check_agent(Census::default()).expect("a sound agent passes");
}

/// No false alarms: a skill whose state is its mount options (so `null` options are refused as InvalidState).
#[test]
fn a_skill_whose_state_is_its_options_passes() {
    let schema = json!({"type": "object", "properties": {"limit": {"type": "integer", "minimum": 1}}});
    let skill = Skill::builder("limits", "1.0.0").state_schema(schema, |opts: &Value| Ok(opts.clone())).build();
    let catalog: Catalog = [skill.expect("a valid skill")].into_iter().collect();
    check_mounting(&catalog, &Policy::default()).expect("state = options is sound");
}

/// A skill whose handler cannot read its own state: live, the signal would be dropped for the whole agent.
#[test]
fn a_handler_that_cannot_read_its_state_is_caught() {
    let schema = json!({"type": "object"});
    let skill = Skill::builder("reader", "1.0.0")
        .state_schema(schema, |_opts: &Value| Ok(json!({"note": "a string where the handler wants a number"})))
        .on_signal(|_state: &Ticks, _signal: &Signal, _ctx: &SkillContext<'_>| SkillReaction::Ignore)
        .build()
        .expect("a valid skill");
    let catalog: Catalog = [skill].into_iter().collect();
    let failure = counterexample(check_mounting(&catalog, &Policy::default()));
    assert!(failure.reason().contains("no skill would get it"), "{failure}");
    assert_eq!(failure.steps().len(), 2, "{failure}");
}
