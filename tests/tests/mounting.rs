//! Mounting through the public API as a user writes it: a hand-written arithmetic skill and a counter with
//! per-agent state, every rule with its typed error, and `mount_all`'s ordering and cycle reports.

use agentry::action::{Action, ActionContext, ActionError, ActionSpec, DynAction};
use agentry::agent::AgentState;
use agentry::effect::{Effect, EffectKind};
use agentry::id::{ActionId, AgentId, SkillId};
use agentry::policy::Policy;
use agentry::skill::{MountError, Skill, mount, mount_all, unmount};
use proptest::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Adds two numbers.
#[derive(Deserialize, JsonSchema)]
struct Add {
    a: f64,
    b: f64,
}

impl Action for Add {
    type Output = f64;
    fn spec() -> ActionSpec {
        ActionSpec::new("arithmetic.add", "Adds two numbers.").unwrap().idempotent(true)
    }
    async fn run(self, _ctx: ActionContext) -> Result<f64, ActionError> {
        Ok(self.a + self.b)
    }
}

/// Multiplies two numbers.
#[derive(Deserialize, JsonSchema)]
struct Multiply {
    a: f64,
    b: f64,
}

impl Action for Multiply {
    type Output = f64;
    fn spec() -> ActionSpec {
        ActionSpec::new("arithmetic.multiply", "Multiplies two numbers.").unwrap().idempotent(true)
    }
    async fn run(self, _ctx: ActionContext) -> Result<f64, ActionError> {
        Ok(self.a * self.b)
    }
}

fn arithmetic(version: &str) -> Skill {
    Skill::builder("arithmetic", version)
        .description("Basic arithmetic.")
        .action::<Add>()
        .action::<Multiply>()
        .build()
        .unwrap()
}

/// The counter's per-agent state.
#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
struct CounterState {
    /// How much each increment adds.
    #[schemars(range(min = 1))]
    step: u32,
    value: u64,
}

fn counter() -> Skill {
    Skill::builder("counter", "1.0.0").state::<CounterState>().requires("arithmetic").build().unwrap()
}

fn agent() -> AgentState<()> {
    AgentState::new(AgentId::new("calc-1").unwrap(), ())
}

fn id(s: &str) -> SkillId {
    SkillId::new(s).unwrap()
}

fn actions(effects: &[Effect]) -> Vec<(&'static str, String)> {
    effects
        .iter()
        .map(|e| match &e.kind {
            EffectKind::RegisterAction { action } => ("register", action.to_string()),
            EffectKind::DeregisterAction { action } => ("deregister", action.to_string()),
            other => panic!("unexpected {other:?}"),
        })
        .collect()
}

#[test]
fn mounting_registers_each_action_in_order_and_remounting_is_a_no_op() {
    let mut state = agent();
    let effects = mount(&mut state, &arithmetic("1.0.0"), &Value::Null, &Policy::default()).unwrap();
    assert_eq!(actions(&effects), [("register", "arithmetic.add".into()), ("register", "arithmetic.multiply".into())]);
    assert_eq!(effects[0].meta.skill, Some(id("arithmetic")));
    let snapshot = state.clone();
    assert!(mount(&mut state, &arithmetic("1.0.0"), &json!({"ignored": true}), &Policy::default()).unwrap().is_empty());
    assert_eq!(state, snapshot);
}

#[test]
fn another_version_is_a_conflict() {
    let mut state = agent();
    mount(&mut state, &arithmetic("1.0.0"), &Value::Null, &Policy::default()).unwrap();
    let before = state.clone();
    let err = mount(&mut state, &arithmetic("1.1.0"), &Value::Null, &Policy::default()).unwrap_err();
    assert!(matches!(&err, MountError::VersionConflict { skill, .. } if *skill == "arithmetic"), "{err:?}");
    assert!(err.to_string().contains("1.0.0, not 1.1.0"), "{err}");
    assert_eq!(state, before);
}

#[test]
fn requirements_must_be_mounted_first() {
    let mut state = agent();
    let err = mount(&mut state, &counter(), &Value::Null, &Policy::default()).unwrap_err();
    assert_eq!(err, MountError::MissingDependency { skill: id("counter"), missing: vec![id("arithmetic")] });
    assert!(err.to_string().contains("`counter` requires `arithmetic` which is not mounted"), "{err}");
    assert_eq!(state, agent());
}

#[test]
fn the_initial_state_comes_from_the_options_and_must_validate() {
    let mut state = agent();
    mount(&mut state, &arithmetic("1.0.0"), &Value::Null, &Policy::default()).unwrap();
    let before = state.clone();
    let err = mount(&mut state, &counter(), &json!({"step": 0}), &Policy::default()).unwrap_err();
    let MountError::InvalidState { skill, errors } = &err else { panic!("{err:?}") };
    assert_eq!(*skill, "counter");
    assert!(errors.iter().any(|e| e.contains("/step") && e.contains("minimum")), "{errors:?}");
    let err = mount(&mut state, &counter(), &json!({"step": "two"}), &Policy::default()).unwrap_err();
    assert!(err.to_string().contains("do not fit the state type"), "{err}");
    assert_eq!(state, before);

    assert!(mount(&mut state, &counter(), &json!({"step": 5}), &Policy::default()).unwrap().is_empty());
    assert_eq!(state.skill_state(&id("counter")), Some(&json!({"step": 5, "value": 0})));
}

#[test]
fn the_policy_must_allow_the_skill() {
    let mut state = agent();
    let policy = Policy::default().deny_skill(id("arithmetic"));
    let err = mount(&mut state, &arithmetic("1.0.0"), &Value::Null, &policy).unwrap_err();
    assert!(
        matches!(&err, MountError::Denied { skill, reason } if *skill == "arithmetic" && reason.contains("deny list"))
    );
    assert_eq!(state, agent());
}

#[test]
fn a_required_skill_cannot_be_unmounted_and_unmounting_twice_is_a_no_op() {
    let mut state = agent();
    mount(&mut state, &arithmetic("1.0.0"), &Value::Null, &Policy::default()).unwrap();
    mount(&mut state, &counter(), &json!({"step": 1}), &Policy::default()).unwrap();
    let before = state.clone();
    let err = unmount(&mut state, &id("arithmetic")).unwrap_err();
    assert_eq!(err, MountError::RequiredBy { skill: id("arithmetic"), dependents: vec![id("counter")] });
    assert_eq!(state, before);
    unmount(&mut state, &id("counter")).unwrap();
    let effects = unmount(&mut state, &id("arithmetic")).unwrap();
    assert_eq!(
        actions(&effects),
        [("deregister", "arithmetic.add".into()), ("deregister", "arithmetic.multiply".into())]
    );
    assert!(unmount(&mut state, &id("arithmetic")).unwrap().is_empty());
    assert_eq!(state, agent());
}

#[test]
fn shared_actions_are_reference_counted() {
    let add = DynAction::typed::<Add>().unwrap();
    let calculator = Skill::builder("calculator", "1.0.0").dyn_action(add).build().unwrap();
    let mut state = agent();
    mount(&mut state, &arithmetic("1.0.0"), &Value::Null, &Policy::default()).unwrap();
    assert!(mount(&mut state, &calculator, &Value::Null, &Policy::default()).unwrap().is_empty(), "already provided");
    let effects = unmount(&mut state, &id("arithmetic")).unwrap();
    assert_eq!(actions(&effects), [("deregister", "arithmetic.multiply".into())], "add is still provided");
    assert!(state.provides(&ActionId::new("arithmetic.add").unwrap()));
    assert_eq!(actions(&unmount(&mut state, &id("calculator")).unwrap()), [("deregister", "arithmetic.add".into())]);
}

#[test]
fn mount_all_orders_by_dependency_and_is_all_or_nothing() {
    let mut state = agent();
    let arithmetic = arithmetic("1.0.0");
    let counter = counter();
    let effects =
        mount_all(&mut state, &[(&counter, json!({"step": 2})), (&arithmetic, Value::Null)], &Policy::default())
            .unwrap();
    assert_eq!(effects.len(), 2, "arithmetic's two actions");
    assert!(state.is_mounted(&id("counter")) && state.is_mounted(&id("arithmetic")));

    let mut state = agent();
    let err = mount_all(&mut state, &[(&arithmetic, Value::Null), (&counter, json!({"step": 0}))], &Policy::default())
        .unwrap_err();
    assert!(matches!(err, MountError::InvalidState { .. }));
    assert_eq!(state, agent(), "arithmetic was mounted on a copy only");
}

#[test]
fn mount_all_reports_a_cycle() {
    let a = Skill::builder("a", "1.0.0").requires("b").build().unwrap();
    let b = Skill::builder("b", "1.0.0").requires("c").build().unwrap();
    let c = Skill::builder("c", "1.0.0").requires("a").build().unwrap();
    let mut state = agent();
    let err = mount_all(&mut state, &[(&a, Value::Null), (&b, Value::Null), (&c, Value::Null)], &Policy::default())
        .unwrap_err();
    assert_eq!(err, MountError::Cycle { cycle: vec![id("a"), id("b"), id("c"), id("a")] });
    assert!(err.to_string().contains("`a` → `b` → `c` → `a`"), "{err}");
    assert_eq!(state, agent());
}

#[test]
fn building_a_skill_checks_its_definition() {
    let err = Skill::builder("loop", "1.0.0").requires("loop").build().unwrap_err();
    assert!(err.to_string().contains("`loop` requires itself"), "{err}");
    let err = Skill::builder("dup", "1.0.0").action::<Add>().action::<Add>().build().unwrap_err();
    assert!(err.to_string().contains("lists action `arithmetic.add` twice"), "{err}");
    let err = Skill::builder("v", "one").build().unwrap_err();
    assert!(err.to_string().contains("not semver"), "{err}");
    let err = Skill::builder("bad id", "1.0.0").build().unwrap_err();
    assert!(err.to_string().contains("' '"), "{err}");
}

/// Whether the graph (skill i requires each j in `edges[i]`) has a cycle: repeatedly remove nodes with no
/// remaining requirements.
fn has_cycle(edges: &[Vec<usize>]) -> bool {
    let mut left: Vec<usize> = (0..edges.len()).collect();
    loop {
        let before = left.len();
        let snapshot = left.clone();
        left.retain(|i| edges[*i].iter().any(|j| snapshot.contains(j)));
        if left.is_empty() {
            return false;
        }
        if left.len() == before {
            return true;
        }
    }
}

fn graph() -> impl Strategy<Value = Vec<Vec<usize>>> {
    (1usize..7).prop_flat_map(|n| prop::collection::vec(prop::collection::vec(0..n, 0..3), n))
}

proptest! {
    #[test]
    fn mount_all_mounts_requirements_first_or_reports_a_real_cycle(edges in graph()) {
        let skills: Vec<Skill> = edges
            .iter()
            .enumerate()
            .map(|(i, reqs)| {
                let action = ActionSpec::new(format!("own.s{i}").as_str(), "marks mount order").unwrap();
                let mut b = Skill::builder(&format!("s{i}"), "1.0.0")
                    .dyn_action(DynAction::new(action, |_, _| Box::pin(async { Ok(Value::Null) })).unwrap());
                for r in reqs.iter().filter(|r| **r != i) {
                    b = b.requires(&format!("s{r}"));
                }
                b.build().unwrap()
            })
            .collect();
        let edges: Vec<Vec<usize>> = edges.iter().enumerate().map(|(i, r)| r.iter().copied().filter(|j| *j != i).collect()).collect();
        let given: Vec<(&Skill, Value)> = skills.iter().map(|s| (s, Value::Null)).collect();
        let mut state = agent();
        match mount_all(&mut state, &given, &Policy::default()) {
            Ok(effects) => {
                prop_assert!(!has_cycle(&edges));
                let order: Vec<usize> = effects.iter().map(|e| match &e.kind {
                    EffectKind::RegisterAction { action } => action.as_str()["own.s".len()..].parse().unwrap(),
                    other => panic!("{other:?}"),
                }).collect();
                prop_assert_eq!(order.len(), skills.len());
                for (pos, i) in order.iter().enumerate() {
                    for j in &edges[*i] {
                        prop_assert!(order[..pos].contains(j), "s{} mounted before its requirement s{}", i, j);
                    }
                }
            }
            Err(MountError::Cycle { cycle }) => {
                prop_assert!(has_cycle(&edges));
                prop_assert_eq!(cycle.first(), cycle.last());
                for pair in cycle.windows(2) {
                    let from: usize = pair[0].as_str()[1..].parse().unwrap();
                    let to: usize = pair[1].as_str()[1..].parse().unwrap();
                    prop_assert!(edges[from].contains(&to), "{} does not require {}", pair[0], pair[1]);
                }
                prop_assert_eq!(&state, &agent());
            }
            Err(other) => prop_assert!(false, "unexpected {:?}", other),
        }
    }
}
