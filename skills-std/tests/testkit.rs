//! The standard skills under agentry-testkit: their catalog mounts by the rules, and every action keeps its
//! contract on params drawn from its schema (confined: a temporary drive, the default policy, so no network).

use agentry::policy::Policy;
use agentry::prelude::SkillDefinition;
use agentry::skill::{Catalog, Skill};
use agentry_skills::{Files, Http, Jobs, Memory, System};
use agentry_testkit::demo::{Arithmetic, Counter};
use agentry_testkit::{ActionCheck, MountingCheck, check_action};
use serde_json::Value;

fn standard() -> Vec<Skill> {
    [
        Arithmetic::skill(),
        Counter::skill(),
        Files::skill(),
        Http::skill(),
        Jobs::skill(),
        Memory::skill(),
        System::skill(),
    ]
    .into_iter()
    .map(|skill| skill.expect("a standard skill builds"))
    .collect()
}

#[test]
fn the_standard_catalog_mounts_by_the_rules() {
    let catalog: Catalog = standard().into_iter().collect();
    MountingCheck::new(&catalog, &Policy::default())
        .signal_kinds(["counter.*", "tick"])
        .run()
        .expect("the standard skills follow the mounting rules");
}

/// Pure actions refuse nothing their schema accepts, except what no schema of the operands can say: a zero
/// divisor and a result too large for a float. (The kit found that such a result used to come back as `null`,
/// against the output schema.)
#[test]
fn pure_actions_keep_their_contract() {
    let arithmetic = Arithmetic::skill().expect("a standard skill builds");
    for action in arithmetic.actions() {
        let id = action.spec().id.clone();
        let overflows = move |params: &Value| {
            let (a, b) = (params["a"].as_f64().unwrap_or(0.0), params["b"].as_f64().unwrap_or(0.0));
            let result = match id.as_str() {
                "arithmetic.add" => a + b,
                "arithmetic.subtract" => a - b,
                "arithmetic.multiply" => a * b,
                _ => a / b,
            };
            !result.is_finite() || (id.as_str() == "arithmetic.divide" && b == 0.0)
        };
        ActionCheck::new(action)
            .refuses_when(overflows)
            .run()
            .unwrap_or_else(|failure| panic!("{}: {failure}", action.spec().id));
    }
    for action in Counter::skill().expect("a standard skill builds").actions() {
        check_action(action).unwrap_or_else(|failure| panic!("{}: {failure}", action.spec().id));
    }
}

/// Actions that touch the world (files in a temporary drive, hosts the default policy does not allow, a memory
/// database, jobs with no runtime) may refuse what the world refuses, but never panic, never break their
/// output schema, and never run on params their schema refuses.
#[test]
fn io_actions_never_panic_on_params_from_their_schema() {
    for skill in [Files::skill(), Http::skill(), Jobs::skill(), Memory::skill(), System::skill()] {
        let skill = skill.expect("a standard skill builds");
        let state = skill.initial_state(&serde_json::Value::Null).expect("the default state fits");
        for action in skill.actions() {
            ActionCheck::new(action)
                .skill_state(state.clone())
                .refusals_allowed()
                .cases(32)
                .run()
                .unwrap_or_else(|failure| panic!("{}: {failure}", action.spec().id));
        }
    }
}

/// A zero divisor is refused with a Validation error that says so, and a finite quotient comes back.
#[test]
fn a_zero_divisor_is_refused() {
    let arithmetic = Arithmetic::skill().expect("a standard skill builds");
    let divide = arithmetic.actions().iter().find(|a| a.spec().id.as_str() == "arithmetic.divide").expect("divide");
    let harness = agentry_testkit::ActionHarness::new(divide).expect("a harness");
    for zero in [serde_json::json!(0), serde_json::json!(0.0), serde_json::json!(-0.0)] {
        let err = harness.run(serde_json::json!({"a": 1, "b": zero})).result.expect_err("refused");
        assert_eq!(err.class(), agentry::action::ErrorClass::Validation);
        assert!(err.to_string().contains("divide by zero"), "{err}");
    }
    assert_eq!(harness.run(serde_json::json!({"a": 1, "b": 4})).result.expect("runs"), serde_json::json!(0.25));
}
