//! Agents as pure state machines: their own handler first, then mounted skills' handlers, with every effect
//! traced to its cause.

use agentry::agent::{Agent, AgentState, Reaction, StepError, step};
use agentry::effect::{Effect, EffectKind};
use agentry::id::{ActionId, AgentId, SkillId};
use agentry::pattern::Pattern;
use agentry::policy::Policy;
use agentry::signal::Signal;
use agentry::skill::{Catalog, Skill, SkillReaction, mount};
use proptest::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// A calculator that turns `calculate` signals into runs and counts them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Calculator {
    asked: u32,
}

impl Agent for Calculator {
    fn handle_signal(&self, signal: &Signal) -> Reaction<Self> {
        if !signal.is(&Pattern::new("calculate").unwrap()) {
            return Reaction::Ignore;
        }
        let Some(op) = signal.data()["op"].as_str() else { return Reaction::Keep(vec![]) };
        let Ok(action) = ActionId::new(format!("arithmetic.{op}")) else { return Reaction::Keep(vec![]) };
        let run = Effect::run(action, json!({"a": signal.data()["a"], "b": signal.data()["b"]}));
        Reaction::Update(Calculator { asked: self.asked + 1 }, vec![run])
    }
}

/// The tally skill's per-agent state.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
struct Tally {
    seen: u32,
}

/// Counts `tick.*` signals and says so every third.
fn tally() -> Skill {
    Skill::builder("tally", "1.0.0")
        .state::<Tally>()
        .on_signal(|state: &Tally, signal: &Signal, ctx| {
            if !signal.is(&Pattern::new("tick.*").unwrap()) {
                return SkillReaction::Ignore;
            }
            let seen = state.seen + 1;
            let mut effects = Vec::new();
            if seen.is_multiple_of(3) {
                let note =
                    signal.follow("tally.reached").data(json!({"agent": ctx.agent_id, "seen": seen})).build().unwrap();
                effects.push(Effect::emit(note, agentry::effect::Target::Parent));
            }
            SkillReaction::Handled(Tally { seen }, effects)
        })
        .build()
        .unwrap()
}

fn agent() -> (AgentState<Calculator>, Catalog) {
    let mut state = AgentState::new(AgentId::new("calc").unwrap(), Calculator { asked: 0 });
    mount(&mut state, &tally(), &Value::Null, &Policy::default()).unwrap();
    (state, [tally()].into_iter().collect())
}

#[test]
fn the_agent_handles_what_it_routes_and_effects_carry_their_cause() {
    let (mut state, catalog) = agent();
    let signal = Signal::new("calculate", json!({"op": "add", "a": 1, "b": 2})).unwrap();
    let step = step(&mut state, &signal, &catalog).unwrap();
    assert!(step.handled);
    assert_eq!(state.domain, Calculator { asked: 1 });
    assert_eq!(step.effects.len(), 1);
    assert_eq!(
        step.effects[0].kind,
        EffectKind::Run { action: ActionId::new("arithmetic.add").unwrap(), params: json!({"a": 1, "b": 2}) }
    );
    assert_eq!(step.effects[0].meta.cause, Some(signal.id()));
    assert_eq!(step.effects[0].meta.skill, None);
}

#[test]
fn ignored_signals_go_to_mounted_skills_with_their_state() {
    let (mut state, catalog) = agent();
    let tick = Signal::new("tick.second", Value::Null).unwrap();
    let mut emitted = Vec::new();
    for _ in 0..6 {
        let step = step(&mut state, &tick, &catalog).unwrap();
        assert!(step.handled);
        emitted.extend(step.effects);
    }
    let tally_id = SkillId::new("tally").unwrap();
    assert_eq!(state.skill_state(&tally_id), Some(&json!({"seen": 6})));
    assert_eq!(state.domain, Calculator { asked: 0 }, "the domain state is the agent's alone");
    assert_eq!(emitted.len(), 2, "every third tick");
    assert!(emitted.iter().all(|e| e.meta.skill.as_ref() == Some(&tally_id) && e.meta.cause == Some(tick.id())));
    let EffectKind::Emit { signal, .. } = &emitted[1].kind else { panic!("{:?}", emitted[1]) };
    assert_eq!(signal.data()["seen"], 6);
    assert_eq!(signal.causation_id(), Some(tick.id()));
}

#[test]
fn nobody_handles_unknown_signals_and_nothing_changes() {
    let (mut state, catalog) = agent();
    let before = state.clone();
    let step = step(&mut state, &Signal::new("weather.rain", Value::Null).unwrap(), &catalog).unwrap();
    assert!(!step.handled && step.effects.is_empty());
    assert_eq!(state, before);
}

#[test]
fn a_mounted_skill_missing_from_the_catalog_is_an_error() {
    let (mut state, _) = agent();
    let before = state.clone();
    let err = step(&mut state, &Signal::new("tick.x", Value::Null).unwrap(), &Catalog::new()).unwrap_err();
    assert_eq!(err, StepError::UnknownSkill(SkillId::new("tally").unwrap()));
    assert_eq!(state, before, "a failed step changes nothing");
}

proptest! {
    /// Purity: the same state and signal always give the same step, follow-up ids included.
    #[test]
    fn stepping_is_deterministic(ticks in 0usize..10, op in "add|subtract|x y") {
        let (mut state, catalog) = agent();
        let tick = Signal::new("tick.second", Value::Null).unwrap();
        for _ in 0..ticks {
            step(&mut state, &tick, &catalog).unwrap();
        }
        let signal = Signal::new("calculate", json!({"op": op, "a": 1, "b": 2})).unwrap();
        for s in [&signal, &tick] {
            let (mut a, mut b) = (state.clone(), state.clone());
            prop_assert_eq!(step(&mut a, s, &catalog).unwrap(), step(&mut b, s, &catalog).unwrap());
            prop_assert_eq!(a, b);
        }
    }
}
