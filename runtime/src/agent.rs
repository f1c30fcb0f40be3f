//! Agents: the user's pure state machines, and the state the runtime keeps for each of them.

use crate::effect::Effect;
use crate::id::{AgentId, SkillId};
use crate::policy::Policy;
use crate::signal::Signal;
use crate::skill::{BuildError, Catalog, MountError, Skill, SkillContext, SkillReaction, mount_all};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::Value;
use std::sync::Arc;

pub use crate::skill::{AgentState, MountedSkill, StepError};

/// What an agent does with a signal.
#[derive(Debug, Clone, PartialEq)]
pub enum Reaction<S> {
    /// Not for this agent: the signal is offered to its mounted skills.
    Ignore,
    /// Handled without changing the domain state.
    Keep(Vec<Effect>),
    /// Handled: here is the new domain state.
    Update(S, Vec<Effect>),
}

/// A route method may return bare effects: the signal is handled and the domain state is kept.
impl<S> From<Vec<Effect>> for Reaction<S> {
    fn from(effects: Vec<Effect>) -> Self {
        Reaction::Keep(effects)
    }
}

/// A user's agent: the domain state type, with a pure signal handler. It never does I/O; it returns effects.
/// `#[derive(Agent)]` writes this from a few attributes.
pub trait Agent: Clone + Serialize + DeserializeOwned + Send + Sync + 'static {
    /// The agent type's name, as the runtime registers it (default: the Rust type's name).
    fn name() -> &'static str {
        std::any::type_name::<Self>()
    }

    /// What the agent is for.
    fn description() -> &'static str {
        ""
    }

    /// The version of the agent's state layout (default 1). A durable store keeps it with each snapshot; raise
    /// it when the state changes shape, so a snapshot written by an older build is recognised: it is still read
    /// if it deserializes (fields added with `#[serde(default)]`), and refused with a typed error naming both
    /// versions if it does not. A snapshot from a newer version is always refused.
    fn version() -> u32 {
        1
    }

    /// The skills the agent mounts when it starts, each with its mount options.
    fn start_skills() -> Result<Vec<(Skill, Value)>, BuildError> {
        Ok(Vec::new())
    }

    /// The kind patterns the agent routes to its own handlers (`#[derive(Agent)]` lists its `routes`; a
    /// hand-written agent may list its own). Informational: test kits draw signals of these kinds.
    fn routes() -> &'static [&'static str] {
        &[]
    }

    /// Reacts to a signal. Must be pure: the same state and signal always give the same reaction.
    fn handle_signal(&self, signal: &Signal) -> Reaction<Self>;
}

/// An agent with no domain state or behaviour of its own: every signal goes to its mounted skills.
impl Agent for () {
    fn name() -> &'static str {
        "skills-only"
    }

    fn handle_signal(&self, _signal: &Signal) -> Reaction<Self> {
        Reaction::Ignore
    }
}

/// Why an agent could not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StartError {
    /// One of its start skills is malformed.
    #[error("a start skill of the agent could not be built: {0}")]
    Build(#[from] BuildError),
    /// Its start skills could not be mounted.
    #[error("the agent's start skills could not be mounted: {0}")]
    Mount(#[from] MountError),
}

/// A new agent's state with its start skills mounted (in dependency order), and the effects that registered
/// their actions. Pure.
pub fn start<A: Agent>(id: AgentId, domain: A, policy: &Policy) -> Result<(AgentState<A>, Vec<Effect>), StartError> {
    let skills = A::start_skills()?;
    let mut state = AgentState::new(id, domain);
    let given: Vec<(&Skill, Value)> = skills.iter().map(|(skill, opts)| (skill, opts.clone())).collect();
    let effects = mount_all(&mut state, &given, policy)?;
    Ok((state, effects))
}

/// What handling one signal produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The effects to interpret, in order; each carries the signal's id as its cause.
    pub effects: Vec<Effect>,
    /// Whether the agent or any skill handled the signal.
    pub handled: bool,
}

/// Feeds one signal through an agent: its own handler first; a signal it ignores is offered to every mounted
/// skill with a handler, in id order. Every reaction is computed before any is applied, so on an error (or a
/// panic in a handler) the state is exactly as it was; no part of the state is copied. Deterministic.
pub fn step<A: Agent>(state: &mut AgentState<A>, signal: &Signal, catalog: &Catalog) -> Result<Step, StepError> {
    let cause = signal.id();
    // Marked where they are: an effect is a few hundred bytes, and a fan-out has thousands.
    let mark = |mut effects: Vec<Effect>, skill: Option<&SkillId>| -> Vec<Effect> {
        for e in &mut effects {
            e.meta.cause.get_or_insert(cause);
            if let Some(skill) = skill {
                e.meta.skill.get_or_insert_with(|| skill.clone());
            }
        }
        effects
    };
    match state.domain.handle_signal(signal) {
        Reaction::Keep(effects) => return Ok(Step { effects: mark(effects, None), handled: true }),
        Reaction::Update(domain, effects) => {
            state.domain = domain;
            return Ok(Step { effects: mark(effects, None), handled: true });
        }
        Reaction::Ignore => {}
    }
    let mut updates: Vec<(SkillId, Value)> = Vec::new();
    let mut effects = Vec::new();
    for (id, mounted) in &state.skills {
        let skill = catalog.get(id).ok_or_else(|| StepError::UnknownSkill(id.clone()))?;
        let ctx = SkillContext { agent_id: &state.id, skill_id: id };
        if let SkillReaction::Handled(skill_state, produced) = skill.handle_signal(&mounted.state, signal, &ctx)? {
            effects.extend(mark(produced, Some(id)));
            updates.push((id.clone(), skill_state));
        }
    }
    let handled = !updates.is_empty();
    for (id, skill_state) in updates {
        if let Some(mounted) = state.skills.get_mut(&id) {
            Arc::make_mut(mounted).state = skill_state;
        }
    }
    Ok(Step { effects, handled })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hand-written agent that takes every default of the trait.
    #[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
    struct Plain;

    impl Agent for Plain {
        fn handle_signal(&self, _signal: &Signal) -> Reaction<Self> {
            Reaction::Ignore
        }
    }

    #[test]
    fn the_trait_defaults_are_what_the_docs_say() {
        assert_eq!(Plain::name(), std::any::type_name::<Plain>());
        assert_eq!(Plain::description(), "");
        assert_eq!(Plain::version(), 1, "a durable store records version 1 for an agent that names none");
        assert!(Plain::start_skills().expect("no start skills to build").is_empty());
        assert!(Plain::routes().is_empty());
        assert_eq!(<() as Agent>::name(), "skills-only");
    }

    #[test]
    fn a_signal_is_handled_when_a_mounted_skill_handles_it_and_only_then() {
        use crate::skill::{Catalog, SkillReaction};
        let skill = Skill::builder("pong", "1.0.0")
            .on_signal(|_: &(), signal: &Signal, _ctx| match signal.kind().as_str() {
                "ping" => SkillReaction::Handled((), Vec::new()),
                _ => SkillReaction::Ignore,
            })
            .build()
            .expect("a valid skill");
        let mut catalog = Catalog::new();
        catalog.insert(skill.clone());
        let mut state = AgentState::new(crate::id::AgentId::new("a").expect("an id"), ());
        crate::skill::mount(&mut state, &skill, &serde_json::json!(0), &crate::policy::Policy::default())
            .expect("mounts");
        let ping = Signal::new("ping", Value::Null).expect("a signal");
        let other = Signal::new("other", Value::Null).expect("a signal");
        assert!(step(&mut state, &ping, &catalog).expect("a step").handled, "the skill handled it");
        assert!(!step(&mut state, &other, &catalog).expect("a step").handled, "nobody handled it");
    }
}
