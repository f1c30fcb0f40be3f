//! Model test of mounting: random catalogs and random sequences of mount, unmount and mount_all, checked
//! against a reference model after every step, with the design's invariants.

use agentry::agent::AgentState;
use agentry::effect::EffectKind;
use agentry::id::{ActionId, AgentId, SkillId};
use agentry::policy::Policy;
use agentry::skill::{MountError, Skill, mount, mount_all, unmount};
use agentry_tests::{SkillDef, action_id, build_skill, catalog, skill_id};
use proptest::prelude::*;
use proptest::test_runner::Config;
use proptest_state_machine::{ReferenceStateMachine, StateMachineTest, prop_state_machine};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone)]
enum Op {
    Mount { skill: usize, v2: bool },
    Unmount { skill: usize },
    MountAll { entries: Vec<(usize, bool)> },
}

/// What the model expects an operation to return.
#[derive(Debug, Clone, PartialEq)]
enum Expected {
    /// Success, with (is it a register, action id) per effect in order.
    Ok(Vec<(bool, String)>),
    VersionConflict {
        skill: String,
    },
    Missing {
        skill: String,
        missing: Vec<String>,
    },
    InvalidState {
        skill: String,
    },
    Denied {
        skill: String,
    },
    RequiredBy {
        skill: String,
        dependents: Vec<String>,
    },
}

#[derive(Debug, Clone)]
struct Model {
    defs: Vec<SkillDef>,
    /// Mounted skill index → mounted at version 2.
    mounted: BTreeMap<usize, bool>,
    last: Option<Expected>,
}

impl Model {
    fn provided(&self, action: usize) -> bool {
        self.mounted.keys().any(|m| self.defs[*m].actions.contains(&action))
    }

    /// The design's mount rules, read directly.
    fn mount(&mut self, skill: usize, v2: bool) -> Expected {
        let def = self.defs[skill].clone();
        if let Some(&mounted_v2) = self.mounted.get(&skill) {
            return if mounted_v2 == v2 {
                Expected::Ok(vec![])
            } else {
                Expected::VersionConflict { skill: skill_id(skill) }
            };
        }
        let missing: Vec<String> =
            def.requires.iter().filter(|r| !self.mounted.contains_key(r)).map(|r| skill_id(*r)).collect();
        if !missing.is_empty() {
            return Expected::Missing { skill: skill_id(skill), missing };
        }
        if def.invalid_state {
            return Expected::InvalidState { skill: skill_id(skill) };
        }
        if def.denied {
            return Expected::Denied { skill: skill_id(skill) };
        }
        let effects = def.actions.iter().filter(|a| !self.provided(**a)).map(|a| (true, action_id(*a))).collect();
        self.mounted.insert(skill, v2);
        Expected::Ok(effects)
    }

    fn unmount(&mut self, skill: usize) -> Expected {
        if !self.mounted.contains_key(&skill) {
            return Expected::Ok(vec![]);
        }
        let dependents: Vec<String> =
            self.mounted.keys().filter(|m| self.defs[**m].requires.contains(&skill)).map(|m| skill_id(*m)).collect();
        if !dependents.is_empty() {
            return Expected::RequiredBy { skill: skill_id(skill), dependents };
        }
        self.mounted.remove(&skill);
        let effects =
            self.defs[skill].actions.iter().filter(|a| !self.provided(**a)).map(|a| (false, action_id(*a))).collect();
        Expected::Ok(effects)
    }

    /// Dependency order as documented: depth first over the given entries, requirements before the skill.
    fn order(&self, entries: &[(usize, bool)]) -> Vec<usize> {
        fn visit(model: &Model, entries: &[(usize, bool)], i: usize, done: &mut Vec<bool>, out: &mut Vec<usize>) {
            if done[i] {
                return;
            }
            done[i] = true;
            for r in &model.defs[entries[i].0].requires {
                if let Some(j) = entries.iter().position(|(s, _)| s == r) {
                    visit(model, entries, j, done, out);
                }
            }
            out.push(i);
        }
        let mut done = vec![false; entries.len()];
        let mut out = Vec::new();
        for i in 0..entries.len() {
            visit(self, entries, i, &mut done, &mut out);
        }
        out
    }

    fn mount_all(&mut self, entries: &[(usize, bool)]) -> Expected {
        let mut trial = self.clone();
        let mut effects = Vec::new();
        for i in self.order(entries) {
            match trial.mount(entries[i].0, entries[i].1) {
                Expected::Ok(more) => effects.extend(more),
                err => return err,
            }
        }
        *self = trial;
        Expected::Ok(effects)
    }
}

struct MountMachine;

impl ReferenceStateMachine for MountMachine {
    type State = Model;
    type Transition = Op;

    fn init_state() -> BoxedStrategy<Model> {
        catalog().prop_map(|defs| Model { defs, mounted: BTreeMap::new(), last: None }).boxed()
    }

    fn transitions(state: &Model) -> BoxedStrategy<Op> {
        let n = state.defs.len();
        let v2 = prop::bool::weighted(0.15);
        prop_oneof![
            5 => (0..n, v2).prop_map(|(skill, v2)| Op::Mount { skill, v2 }),
            3 => (0..n).prop_map(|skill| Op::Unmount { skill }),
            1 => prop::collection::vec((0..n, v2), 1..=4).prop_map(|entries| Op::MountAll { entries }),
        ]
        .boxed()
    }

    fn apply(mut state: Model, op: &Op) -> Model {
        let expected = match op {
            Op::Mount { skill, v2 } => state.mount(*skill, *v2),
            Op::Unmount { skill } => state.unmount(*skill),
            Op::MountAll { entries } => state.mount_all(entries),
        };
        state.last = Some(expected);
        state
    }
}

struct Sut {
    v1: Vec<Skill>,
    v2: Vec<Skill>,
    policy: Policy,
    state: AgentState<()>,
    /// The live action table, built only by folding emitted effects.
    table: BTreeSet<ActionId>,
}

impl Sut {
    fn skill(&self, index: usize, v2: bool) -> &Skill {
        if v2 { &self.v2[index] } else { &self.v1[index] }
    }
}

fn observed(result: &Result<Vec<agentry::Effect>, MountError>) -> Expected {
    match result {
        Ok(effects) => Expected::Ok(
            effects
                .iter()
                .map(|e| match &e.kind {
                    EffectKind::RegisterAction { action } => (true, action.to_string()),
                    EffectKind::DeregisterAction { action } => (false, action.to_string()),
                    other => panic!("mounting emitted {other:?}"),
                })
                .collect(),
        ),
        Err(MountError::VersionConflict { skill, .. }) => Expected::VersionConflict { skill: skill.to_string() },
        Err(MountError::MissingDependency { skill, missing }) => {
            Expected::Missing { skill: skill.to_string(), missing: missing.iter().map(ToString::to_string).collect() }
        }
        Err(MountError::InvalidState { skill, errors }) => {
            assert!(!errors.is_empty(), "InvalidState must carry the validator's messages");
            Expected::InvalidState { skill: skill.to_string() }
        }
        Err(MountError::Denied { skill, .. }) => Expected::Denied { skill: skill.to_string() },
        Err(MountError::RequiredBy { skill, dependents }) => Expected::RequiredBy {
            skill: skill.to_string(),
            dependents: dependents.iter().map(ToString::to_string).collect(),
        },
        Err(MountError::Cycle { cycle }) => panic!("generated requirements are acyclic, got a cycle {cycle:?}"),
    }
}

impl StateMachineTest for Sut {
    type SystemUnderTest = Sut;
    type Reference = MountMachine;

    fn init_test(model: &Model) -> Sut {
        let denied = model.defs.iter().filter(|d| d.denied).map(|d| SkillId::new(skill_id(d.index)).unwrap());
        let policy = denied.fold(Policy::default(), Policy::deny_skill);
        Sut {
            v1: model.defs.iter().map(|d| build_skill(d, false)).collect(),
            v2: model.defs.iter().map(|d| build_skill(d, true)).collect(),
            policy,
            state: AgentState::new(AgentId::new("agent").unwrap(), ()),
            table: BTreeSet::new(),
        }
    }

    fn apply(mut sut: Sut, model: &Model, op: Op) -> Sut {
        let before = sut.state.clone();
        let result = match &op {
            Op::Mount { skill, v2 } => {
                let skill = sut.skill(*skill, *v2).clone();
                mount(&mut sut.state, &skill, &Value::Null, &sut.policy)
            }
            Op::Unmount { skill } => unmount(&mut sut.state, &SkillId::new(skill_id(*skill)).unwrap()),
            Op::MountAll { entries } => {
                let skills: Vec<(&Skill, Value)> =
                    entries.iter().map(|(s, v2)| (sut.skill(*s, *v2), Value::Null)).collect();
                let mut state = sut.state.clone();
                let result = mount_all(&mut state, &skills, &sut.policy);
                sut.state = state;
                result
            }
        };
        assert_eq!(Some(&observed(&result)), model.last.as_ref(), "implementation and model disagree on {op:?}");
        match result {
            Err(_) => assert_eq!(sut.state, before, "a failed {op:?} changed the state"),
            Ok(effects) => {
                for effect in effects {
                    match effect.kind {
                        EffectKind::RegisterAction { action } => {
                            assert!(sut.table.insert(action.clone()), "{action} registered twice");
                        }
                        EffectKind::DeregisterAction { action } => {
                            assert!(sut.table.remove(&action), "{action} deregistered but not registered");
                        }
                        _ => unreachable!("checked by `observed`"),
                    }
                }
                if let Op::Mount { skill, .. } = op
                    && !before.is_mounted(&SkillId::new(skill_id(skill)).unwrap())
                {
                    let mut probe = sut.state.clone();
                    unmount(&mut probe, &SkillId::new(skill_id(skill)).unwrap()).expect("a fresh mount unmounts");
                    assert_eq!(probe, before, "mount then unmount must restore the state");
                }
            }
        }
        sut
    }

    fn check_invariants(sut: &Sut, model: &Model) {
        let mounted_actions: BTreeSet<ActionId> = sut.state.actions().into_iter().cloned().collect();
        assert_eq!(sut.table, mounted_actions, "effects folded from empty must equal the mounted skills' actions");
        for (id, mounted) in sut.state.skills() {
            for required in &mounted.requires {
                assert!(sut.state.is_mounted(required), "{id} is mounted but its requirement {required} is not");
            }
        }
        let ids: Vec<String> = sut.state.skills().keys().map(ToString::to_string).collect();
        let expected: Vec<String> = model.mounted.keys().map(|i| skill_id(*i)).collect();
        assert_eq!(ids, expected);
        for (i, v2) in &model.mounted {
            let version = &sut.state.skills()[&SkillId::new(skill_id(*i)).unwrap()].version;
            assert_eq!(version.major, if *v2 { 2 } else { 1 });
        }
    }
}

fn cases() -> u32 {
    std::env::var("AGENTRY_MODEL_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(256)
}

prop_state_machine! {
    #![proptest_config(Config { cases: cases(), ..Config::default() })]
    #[test]
    fn mounting_agrees_with_the_model(sequential 1..=40 => Sut);
}
