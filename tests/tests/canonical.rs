//! The canonical example, built with the derive macros and tested purely, as a user would: the arithmetic
//! skill, the counter skill and the calculator agent.

use agentry::action::{ActionContext, ActionError, DynAction};
use agentry::agent::{AgentState, start, step};
use agentry::effect::{Effect, EffectKind};
use agentry::id::{ActionId, AgentId, SkillId};
use agentry::policy::Policy;
use agentry::signal::Signal;
use agentry::skill::{Catalog, MountError, SkillDefinition, mount, unmount};
use agentry::{Action, Agent, Skill};
use agentry_examples::calculator::Calculator;
use agentry_testkit::demo::{Arithmetic, Counter};
use serde_json::{Value, json};

fn state() -> AgentState<()> {
    AgentState::new(AgentId::new("user").unwrap(), ())
}

fn kinds(effects: &[Effect]) -> Vec<(bool, String)> {
    effects
        .iter()
        .map(|e| match &e.kind {
            EffectKind::RegisterAction { action } => (true, action.to_string()),
            EffectKind::DeregisterAction { action } => (false, action.to_string()),
            other => panic!("{other:?}"),
        })
        .collect()
}

const OPS: [&str; 4] = ["add", "subtract", "multiply", "divide"];

#[test]
fn mounting_arithmetic_registers_its_four_actions_and_unmounting_deregisters_them() {
    let arithmetic = Arithmetic::skill().unwrap();
    let mut state = state();
    let effects = mount(&mut state, &arithmetic, &Value::Null, &Policy::default()).unwrap();
    assert_eq!(kinds(&effects), OPS.map(|op| (true, format!("arithmetic.{op}"))));
    assert!(mount(&mut state, &arithmetic, &Value::Null, &Policy::default()).unwrap().is_empty(), "twice: no-op");
    let effects = unmount(&mut state, arithmetic.id()).unwrap();
    assert_eq!(kinds(&effects), OPS.map(|op| (false, format!("arithmetic.{op}"))));
}

#[test]
fn the_derived_contract_and_schemas() {
    let skill = Arithmetic::skill().unwrap();
    assert_eq!(skill.name(), "Arithmetic");
    assert_eq!(skill.description(), "Basic arithmetic on two numbers.");
    assert_eq!(skill.tags(), ["math"]);
    let divide = &skill.actions()[3];
    let spec = divide.spec();
    assert_eq!(spec.id, "arithmetic.divide");
    assert_eq!(spec.description, "Divides the first number by the second, which must not be zero.");
    assert!(spec.idempotent && !spec.side_effects);
    assert_eq!(spec.params_schema["properties"]["b"]["description"], "The divisor; must not be zero.");
    assert_eq!(spec.output_schema["type"], "number");
}

fn ctx(action: &str) -> ActionContext {
    ActionContext::new(AgentId::new("user").unwrap(), ActionId::new(action).unwrap())
}

#[tokio::test]
async fn the_actions_compute_and_divide_by_zero_is_a_validation_error() {
    let skill = Arithmetic::skill().unwrap();
    let expected = [5.0, -1.0, 6.0, 2.0 / 3.0];
    for (action, want) in skill.actions().iter().zip(expected) {
        let got = action.invoke(json!({"a": 2, "b": 3}), ctx(action.spec().id.as_str())).await.unwrap();
        assert_eq!(got, json!(want), "{}", action.spec().id);
    }
    let divide: &DynAction = &skill.actions()[3];
    let err = divide.invoke(json!({"a": 1, "b": 0}), ctx("arithmetic.divide")).await.unwrap_err();
    assert!(matches!(&err, ActionError::Validation { message } if message.contains("divide by zero")), "{err:?}");
    assert!(divide.validate(&json!({"a": 1})).is_err(), "b is required");
}

#[test]
fn calculator_mounts_arithmetic_at_start() {
    let (state, effects) = start(AgentId::new("calc").unwrap(), Calculator::default(), &Policy::default()).unwrap();
    assert!(state.is_mounted(&SkillId::new("arithmetic").unwrap()));
    assert_eq!(effects.len(), 4);
    assert_eq!(Calculator::name(), "calculator");
}

#[test]
fn calculate_add_yields_one_run_with_the_params_and_unknown_ops_are_ignored() {
    let (mut state, _) = start(AgentId::new("calc").unwrap(), Calculator::default(), &Policy::default()).unwrap();
    let catalog: Catalog = [Arithmetic::skill().unwrap()].into_iter().collect();
    let signal = Signal::new("calculate", json!({"op": "add", "a": 1, "b": 2})).unwrap();
    let next = step(&mut state, &signal, &catalog).unwrap();
    assert_eq!(
        next.effects.iter().map(|e| &e.kind).collect::<Vec<_>>(),
        [&EffectKind::Run { action: ActionId::new("arithmetic.add").unwrap(), params: json!({"a": 1, "b": 2}) }]
    );
    assert_eq!(state.domain.asked, 1);

    let unknown = Signal::new("calculate", json!({"op": "sqrt", "a": 4})).unwrap();
    let next = step(&mut state, &unknown, &catalog).unwrap();
    assert!(!next.handled && next.effects.is_empty());
    assert_eq!(state.domain.asked, 1);
    let other = Signal::new("weather.report", Value::Null).unwrap();
    assert!(!step(&mut state, &other, &catalog).unwrap().handled);
}

/// Needs arithmetic.
#[derive(Skill)]
#[skill(id = "statistics", version = "0.1.0", requires("arithmetic"))]
struct Statistics;

#[test]
fn a_skill_requiring_an_unmounted_skill_fails_with_missing_dependency() {
    let mut state = state();
    let err = mount(&mut state, &Statistics::skill().unwrap(), &Value::Null, &Policy::default()).unwrap_err();
    assert_eq!(
        err,
        MountError::MissingDependency {
            skill: SkillId::new("statistics").unwrap(),
            missing: vec![SkillId::new("arithmetic").unwrap()]
        }
    );
}

#[test]
fn the_counter_starts_from_the_mount_options_and_counts_by_its_step() {
    let counter = Counter::skill().unwrap();
    let catalog: Catalog = [counter.clone()].into_iter().collect();
    let id = SkillId::new("counter").unwrap();
    let mut state = state();
    mount(&mut state, &counter, &json!({"step": 5}), &Policy::default()).unwrap();
    assert_eq!(state.skill_state(&id), Some(&json!({"step": 5, "value": 0})));
    for _ in 0..3 {
        step(&mut state, &Signal::new("counter.increment", Value::Null).unwrap(), &catalog).unwrap();
    }
    let get = Signal::new("counter.get", Value::Null).unwrap();
    let next = step(&mut state, &get, &catalog).unwrap();
    assert_eq!(next.effects[0].kind, EffectKind::Reply { to: get.id(), data: json!(15) });
    assert_eq!(next.effects[0].meta.skill, Some(id.clone()));

    let mut fresh = AgentState::new(AgentId::new("other").unwrap(), ());
    mount(&mut fresh, &counter, &Value::Null, &Policy::default()).unwrap();
    assert_eq!(fresh.skill_state(&id), Some(&json!({"step": 1, "value": 0})), "defaults without options");
    let err = mount(&mut state.clone(), &counter, &json!({"step": 0}), &Policy::default());
    assert!(err.is_ok(), "already mounted at this version: a no-op whatever the options");
    let mut bad = AgentState::new(AgentId::new("bad").unwrap(), ());
    let err = mount(&mut bad, &counter, &json!({"step": 0}), &Policy::default()).unwrap_err();
    assert!(matches!(err, MountError::InvalidState { .. }), "{err:?}");
}

/// A user-defined action through the derive, with every contract key.
#[derive(serde::Deserialize, schemars::JsonSchema, Action)]
#[action(id = "mail.send", output = String, risk = high, cost = expensive, side_effects, capabilities(net),
         timeout = "10s", retry(attempts = 5, backoff = "50ms"), category = remote,
         description = "Sends one email.")]
struct SendMail {
    to: String,
}

impl SendMail {
    async fn run(self, _ctx: ActionContext) -> Result<String, ActionError> {
        Ok(format!("queued for {}", self.to))
    }
}

#[test]
fn every_contract_key_reaches_the_spec() {
    use agentry::action::{Capability, Category, Cost, Risk};
    let spec = <SendMail as Action>::spec();
    assert_eq!(spec.id, "mail.send");
    assert_eq!(spec.description, "Sends one email.");
    assert_eq!((spec.risk, spec.cost, spec.category), (Risk::High, Cost::Expensive, Category::Remote));
    assert!(spec.side_effects && !spec.idempotent);
    assert!(spec.capabilities.contains(&Capability::NET));
    assert_eq!(spec.timeout, std::time::Duration::from_secs(10));
    assert_eq!(spec.retry.max_attempts, 5);
    assert_eq!(spec.retry.initial_backoff, std::time::Duration::from_millis(50));
}
