//! Skills: named, versioned bundles of actions with per-agent state, and the pure rules for mounting them.

mod build;
mod catalog;
mod error;
mod map;
mod mount;
mod prompt;
mod resource;
mod state;

pub use build::{BuildError, SkillBuilder};
pub use catalog::Catalog;
pub(crate) use catalog::{HeldCatalog, LiveCatalog};
pub use error::MountError;
pub use map::{Iter as SkillIter, SkillMap};
pub(crate) use map::{SCAN, find_sorted};
pub(crate) use mount::version_conflict;
pub use mount::{mount, mount_all, refresh, unmount};
pub use prompt::{Prompt, PromptArgument, PromptContent, PromptError, PromptMessage};
pub use resource::{Resource, ResourceError, TemplateError};
pub use state::{AgentState, MountedSkill, StepError};

use crate::action::DynAction;
use crate::effect::Effect;
use crate::id::{AgentId, SkillId};
use crate::signal::Signal;
use semver::Version;
use serde_json::Value;
use std::fmt;
use std::sync::Arc;

/// A type that defines a skill; `#[derive(Skill)]` writes it. Lets agents name their start skills by type.
pub trait SkillDefinition {
    /// The skill. Built once and shared: later calls return a clone of the first build.
    fn skill() -> Result<Skill, BuildError>;
}

/// What a skill's signal handler does with a signal.
#[derive(Debug, Clone, PartialEq)]
pub enum SkillReaction<S> {
    /// Not for this skill.
    Ignore,
    /// Handled: the skill's new state and the effects.
    Handled(S, Vec<Effect>),
}

/// What a skill's signal handler knows besides its state and the signal.
#[derive(Debug, Clone, Copy)]
pub struct SkillContext<'a> {
    /// The agent the skill is mounted on.
    pub agent_id: &'a AgentId,
    /// The skill's own id.
    pub skill_id: &'a SkillId,
}

type InitFn = dyn Fn(&Value) -> Result<Value, String> + Send + Sync;
type HandlerFn = dyn Fn(&Value, &Signal, &SkillContext<'_>) -> Result<SkillReaction<Value>, String> + Send + Sync;

/// A skill: data plus pure functions. Build one with [`Skill::builder`]; mount it with [`mount`].
#[derive(Clone)]
pub struct Skill {
    id: SkillId,
    name: String,
    description: String,
    version: Version,
    category: String,
    tags: Vec<String>,
    actions: Vec<DynAction>,
    instructions: String,
    requires: Vec<SkillId>,
    state_schema: Value,
    state_validator: Arc<jsonschema::Validator>,
    initial_state: Arc<InitFn>,
    handler: Option<Arc<HandlerFn>>,
    prompts: Vec<Prompt>,
    resources: Vec<Resource>,
}

impl fmt::Debug for Skill {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Skill")
            .field("id", &self.id)
            .field("version", &self.version)
            .field("actions", &self.actions.iter().map(|a| a.spec().id.as_str()).collect::<Vec<_>>())
            .field("requires", &self.requires)
            .finish_non_exhaustive()
    }
}

impl Skill {
    /// Starts building a skill with an id (`arithmetic`) and a semver version (`1.0.0`).
    pub fn builder(id: &str, version: &str) -> SkillBuilder {
        SkillBuilder::new(id, version)
    }

    /// The skill's id.
    pub fn id(&self) -> &SkillId {
        &self.id
    }

    /// Its human name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What it is for.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// Its version.
    pub fn version(&self) -> &Version {
        &self.version
    }

    /// Its category.
    pub fn category(&self) -> &str {
        &self.category
    }

    /// Its tags.
    pub fn tags(&self) -> &[String] {
        &self.tags
    }

    /// Its actions, in declaration order.
    pub fn actions(&self) -> &[DynAction] {
        &self.actions
    }

    /// Text for LLMs on how to use the skill.
    pub fn instructions(&self) -> &str {
        &self.instructions
    }

    /// The prompts it offers.
    pub fn prompts(&self) -> &[Prompt] {
        &self.prompts
    }

    /// The resources it offers.
    pub fn resources(&self) -> &[Resource] {
        &self.resources
    }

    /// The skills that must be mounted before this one.
    pub fn requires(&self) -> &[SkillId] {
        &self.requires
    }

    /// The JSON Schema of its per-agent state.
    pub fn state_schema(&self) -> &Value {
        &self.state_schema
    }

    /// Whether it has a signal handler.
    pub fn handles_signals(&self) -> bool {
        self.handler.is_some()
    }

    /// The per-agent state for these mount options, checked against the state schema. `Err` lists every
    /// problem.
    pub fn initial_state(&self, opts: &Value) -> Result<Value, Vec<String>> {
        let state = self.make_state(opts).map_err(|e| vec![e])?;
        let errors = self.state_errors(&state);
        if errors.is_empty() { Ok(state) } else { Err(errors) }
    }

    /// What the skill's own initial-state function makes of these options, before the state schema is
    /// checked (see [`crate::driver::make_state`]).
    pub(crate) fn make_state(&self, opts: &Value) -> Result<Value, String> {
        (self.initial_state)(opts)
    }

    /// What is wrong with a per-agent state under the skill's state schema (empty when it fits).
    pub fn state_errors(&self, state: &Value) -> Vec<String> {
        crate::action::schema_errors(&self.state_validator, state, "the state")
    }

    /// Offers a signal to the skill's handler. Pure.
    pub fn handle_signal(
        &self,
        state: &Value,
        signal: &Signal,
        ctx: &SkillContext<'_>,
    ) -> Result<SkillReaction<Value>, StepError> {
        match &self.handler {
            None => Ok(SkillReaction::Ignore),
            Some(handler) => {
                handler(state, signal, ctx).map_err(|message| StepError::SkillState { skill: self.id.clone(), message })
            }
        }
    }
}

/// The skills mounted on an agent, with their versions.
pub fn mounted_skills<S>(state: &AgentState<S>) -> impl Iterator<Item = (&SkillId, &Version)> {
    state.skills().iter().map(|(id, m): (&SkillId, &Arc<MountedSkill>)| (id, &m.version))
}

/// Whether a skill is mounted on an agent.
pub fn is_mounted<S>(state: &AgentState<S>, skill: &SkillId) -> bool {
    state.is_mounted(skill)
}
