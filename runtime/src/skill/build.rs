//! Building a [`Skill`]: collects its parts and checks them once, so a built skill is always consistent.

use super::{HandlerFn, InitFn, Skill, SkillContext, SkillReaction};
use crate::action::{Action, DynAction, SchemaError};
use crate::id::{IdError, SkillId};
use crate::signal::Signal;
use schemars::JsonSchema;
use semver::Version;
use serde::{Serialize, de::DeserializeOwned};
use serde_json::Value;
use std::sync::Arc;

/// Why a skill could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// The skill id or a required skill's id is malformed.
    #[error("bad id in skill definition: {0}")]
    Id(#[from] IdError),
    /// The version is not semver.
    #[error("skill `{skill}` has version `{vsn}`, which is not semver: {message}; expected e.g. `1.0.0`")]
    Version {
        /// The skill.
        skill: String,
        /// The rejected version text.
        vsn: String,
        /// The parser's message.
        message: String,
    },
    /// An action's params schema does not compile.
    #[error(transparent)]
    ActionSchema(#[from] SchemaError),
    /// The state schema does not compile.
    #[error("the state schema of skill `{skill}` is not a valid JSON Schema: {message}")]
    StateSchema {
        /// The skill.
        skill: String,
        /// The compiler's message.
        message: String,
    },
    /// The same action id is listed twice.
    #[error("skill `{skill}` lists action `{action}` twice; expected each action once")]
    DuplicateAction {
        /// The skill.
        skill: String,
        /// The repeated action.
        action: String,
    },
    /// The skill requires itself.
    #[error("skill `{0}` requires itself; expected requirements on other skills only")]
    RequiresItself(String),
}

/// Builds a [`Skill`]; see [`Skill::builder`].
#[must_use = "a builder does nothing until `build` is called"]
pub struct SkillBuilder {
    id: Result<SkillId, IdError>,
    raw_id: String,
    vsn: String,
    name: Option<String>,
    description: String,
    category: String,
    tags: Vec<String>,
    actions: Vec<Result<DynAction, SchemaError>>,
    instructions: String,
    requires: Vec<Result<SkillId, IdError>>,
    state_schema: Value,
    initial_state: Arc<InitFn>,
    handler: Option<Arc<HandlerFn>>,
}

impl SkillBuilder {
    pub(super) fn new(id: &str, vsn: &str) -> Self {
        Self {
            id: SkillId::new(id),
            raw_id: id.to_owned(),
            vsn: vsn.to_owned(),
            name: None,
            description: String::new(),
            category: "general".to_owned(),
            tags: Vec::new(),
            actions: Vec::new(),
            instructions: String::new(),
            requires: Vec::new(),
            state_schema: Value::Bool(true),
            initial_state: Arc::new(|_| Ok(Value::Null)),
            handler: None,
        }
    }

    /// The human name (default: the id).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// What the skill is for.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    /// The category (default `general`).
    pub fn category(mut self, category: impl Into<String>) -> Self {
        self.category = category.into();
        self
    }

    /// Adds a tag.
    pub fn tag(mut self, tag: impl Into<String>) -> Self {
        self.tags.push(tag.into());
        self
    }

    /// Adds a typed action.
    pub fn action<A: Action>(mut self) -> Self {
        self.actions.push(DynAction::typed::<A>());
        self
    }

    /// Adds an erased action (one defined at run time, or shared with another skill).
    pub fn dyn_action(mut self, action: DynAction) -> Self {
        self.actions.push(Ok(action));
        self
    }

    /// Text for LLMs on how to use the skill.
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = instructions.into();
        self
    }

    /// Adds a skill that must be mounted before this one.
    pub fn requires(mut self, skill: &str) -> Self {
        self.requires.push(SkillId::new(skill));
        self
    }

    /// Types the per-agent state: its schema comes from `S`, and the initial state is `S::default()` when the
    /// mount options are `null`, else the options read as `S`.
    pub fn state<S>(mut self) -> Self
    where
        S: JsonSchema + Serialize + DeserializeOwned + Default,
    {
        self.state_schema = crate::action::schema_for::<S>();
        self.initial_state = Arc::new(|opts: &Value| {
            let state: S = if opts.is_null() {
                S::default()
            } else {
                S::deserialize(opts).map_err(|e| format!("the mount options do not fit the state type: {e}"))?
            };
            serde_json::to_value(state).map_err(|e| format!("the state could not be serialized: {e}"))
        });
        self
    }

    /// Sets the state schema and the function that makes the initial state from the mount options, for skills
    /// whose state is only known at run time.
    pub fn state_schema<F>(mut self, schema: Value, initial_state: F) -> Self
    where
        F: Fn(&Value) -> Result<Value, String> + Send + Sync + 'static,
    {
        self.state_schema = schema;
        self.initial_state = Arc::new(initial_state);
        self
    }

    /// Sets the skill's pure signal handler, over a typed state.
    pub fn on_signal<S, F>(mut self, handler: F) -> Self
    where
        S: Serialize + DeserializeOwned,
        F: Fn(&S, &Signal, &SkillContext<'_>) -> SkillReaction<S> + Send + Sync + 'static,
    {
        self.handler = Some(Arc::new(move |state: &Value, signal: &Signal, ctx: &SkillContext<'_>| {
            let typed = S::deserialize(state).map_err(|e| e.to_string())?;
            match handler(&typed, signal, ctx) {
                SkillReaction::Ignore => Ok(SkillReaction::Ignore),
                SkillReaction::Handled(next, effects) => {
                    let next = serde_json::to_value(next).map_err(|e| e.to_string())?;
                    Ok(SkillReaction::Handled(next, effects))
                }
            }
        }));
        self
    }

    /// Checks everything and builds the skill.
    pub fn build(self) -> Result<Skill, BuildError> {
        let id = self.id?;
        let vsn = Version::parse(&self.vsn).map_err(|e| BuildError::Version {
            skill: self.raw_id.clone(),
            vsn: self.vsn.clone(),
            message: e.to_string(),
        })?;
        let actions = self.actions.into_iter().collect::<Result<Vec<_>, _>>()?;
        for (i, action) in actions.iter().enumerate() {
            if actions[..i].iter().any(|earlier| earlier.spec().id == action.spec().id) {
                return Err(BuildError::DuplicateAction {
                    skill: id.to_string(),
                    action: action.spec().id.to_string(),
                });
            }
        }
        let requires = self.requires.into_iter().collect::<Result<Vec<_>, _>>()?;
        if requires.contains(&id) {
            return Err(BuildError::RequiresItself(id.to_string()));
        }
        let mut unique_requires: Vec<SkillId> = Vec::with_capacity(requires.len());
        for r in requires {
            if !unique_requires.contains(&r) {
                unique_requires.push(r);
            }
        }
        let state_validator = jsonschema::validator_for(&self.state_schema)
            .map_err(|e| BuildError::StateSchema { skill: id.to_string(), message: e.to_string() })?;
        Ok(Skill {
            name: self.name.unwrap_or_else(|| id.to_string()),
            id,
            description: self.description,
            vsn,
            category: self.category,
            tags: self.tags,
            actions,
            instructions: self.instructions,
            requires: unique_requires,
            state_schema: self.state_schema,
            state_validator: Arc::new(state_validator),
            initial_state: self.initial_state,
            handler: self.handler,
        })
    }
}
