//! Building a [`Skill`]: collects its parts and checks them once, so a built skill is always consistent.

use super::{HandlerFn, InitFn, Prompt, Resource, ResourceError, Skill, SkillContext, SkillReaction};
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
    #[error("skill `{skill}` has version `{version}`, which is not semver: {message}; expected e.g. `1.0.0`")]
    Version {
        /// The skill.
        skill: String,
        /// The rejected version text.
        version: String,
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
    /// A prompt is declared wrong (an empty or repeated name, a repeated argument).
    #[error("skill `{skill}` declares prompt `{prompt}` wrongly: {message}")]
    Prompt {
        /// The skill.
        skill: String,
        /// The prompt.
        prompt: String,
        /// What is wrong, and what was expected.
        message: String,
    },
    /// A resource is declared wrong (a malformed URI template, an action that is not the skill's or has side
    /// effects, variables that do not fit the action's params).
    #[error("skill `{skill}` declares resource `{uri}` wrongly: {message}")]
    Resource {
        /// The skill.
        skill: String,
        /// The resource's URI or template.
        uri: String,
        /// What is wrong, and what was expected.
        message: String,
    },
}

/// Builds a [`Skill`]; see [`Skill::builder`].
#[must_use = "a builder does nothing until `build` is called"]
pub struct SkillBuilder {
    id: Result<SkillId, IdError>,
    raw_id: String,
    version: String,
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
    prompts: Vec<Prompt>,
    resources: Vec<Result<Resource, ResourceError>>,
}

impl SkillBuilder {
    pub(super) fn new(id: &str, version: &str) -> Self {
        Self {
            id: SkillId::new(id),
            raw_id: id.to_owned(),
            version: version.to_owned(),
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
            prompts: Vec::new(),
            resources: Vec::new(),
        }
    }

    /// Passes the builder through `f`: how `#[skill(offers = f)]` adds prompts and resources to a derived skill.
    pub fn with(self, f: impl FnOnce(Self) -> Self) -> Self {
        f(self)
    }

    /// Offers a prompt (see [`Prompt`]); an agent with the skill mounted serves it to MCP clients.
    pub fn prompt(mut self, prompt: Prompt) -> Self {
        self.prompts.push(prompt);
        self
    }

    /// Offers a resource (see [`Resource`]), read by one of this skill's actions that has no side effects; an
    /// agent with the skill mounted serves it to MCP clients. A declaration that does not parse is reported by
    /// [`SkillBuilder::build`].
    pub fn resource(mut self, resource: Result<Resource, ResourceError>) -> Self {
        self.resources.push(resource);
        self
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
        let version = Version::parse(&self.version).map_err(|e| BuildError::Version {
            skill: self.raw_id.clone(),
            version: self.version.clone(),
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
        check_prompts(&id, &self.prompts)?;
        let resources = check_resources(&id, self.resources, &actions)?;
        let state_validator = jsonschema::validator_for(&self.state_schema)
            .map_err(|e| BuildError::StateSchema { skill: id.to_string(), message: e.to_string() })?;
        Ok(Skill {
            name: self.name.unwrap_or_else(|| id.to_string()),
            id,
            description: self.description,
            version,
            category: self.category,
            tags: self.tags,
            actions,
            instructions: self.instructions,
            requires: unique_requires,
            state_schema: self.state_schema,
            state_validator: Arc::new(state_validator),
            initial_state: self.initial_state,
            handler: self.handler,
            prompts: self.prompts,
            resources,
        })
    }
}

fn check_prompts(skill: &SkillId, prompts: &[Prompt]) -> Result<(), BuildError> {
    for (i, prompt) in prompts.iter().enumerate() {
        let wrong =
            |message: String| BuildError::Prompt { skill: skill.to_string(), prompt: prompt.name.clone(), message };
        if prompt.name.trim().is_empty() {
            return Err(wrong("its name is empty; expected a name such as `<skill>.<prompt>`".to_owned()));
        }
        if prompts[..i].iter().any(|p| p.name == prompt.name) {
            return Err(wrong("the name is declared twice; expected each prompt once".to_owned()));
        }
        for (j, arg) in prompt.arguments.iter().enumerate() {
            if prompt.arguments[..j].iter().any(|a| a.name == arg.name) {
                return Err(wrong(format!("argument `{}` is declared twice; expected each once", arg.name)));
            }
        }
    }
    Ok(())
}

fn check_resources(
    skill: &SkillId,
    declared: Vec<Result<Resource, ResourceError>>,
    actions: &[DynAction],
) -> Result<Vec<Resource>, BuildError> {
    let mut resources: Vec<Resource> = Vec::with_capacity(declared.len());
    for resource in declared {
        let resource = resource.map_err(|e| {
            let uri = match &e {
                ResourceError::Template(t) => t.template.clone(),
                ResourceError::Action { uri, .. } => uri.clone(),
            };
            BuildError::Resource { skill: skill.to_string(), uri, message: e.to_string() }
        })?;
        let wrong =
            |message: String| BuildError::Resource { skill: skill.to_string(), uri: resource.uri.clone(), message };
        if resources.iter().any(|r| r.uri == resource.uri) {
            return Err(wrong("the URI is declared twice; expected each resource once".to_owned()));
        }
        let Some(action) = actions.iter().find(|a| a.spec().id == resource.action) else {
            return Err(wrong(format!(
                "its action `{}` is not one of the skill's; expected an action of this skill, so the resource \
                 is readable exactly while the skill is mounted",
                resource.action
            )));
        };
        let spec = action.spec();
        if spec.side_effects {
            return Err(wrong(format!(
                "its action `{}` has side effects; expected one without, since reading must change nothing",
                spec.id
            )));
        }
        let properties = spec.params_schema.get("properties").and_then(Value::as_object);
        for variable in resource.variables() {
            if properties.is_some_and(|p| !p.contains_key(variable)) {
                return Err(wrong(format!("variable `{variable}` is not a param of `{}`", spec.id)));
            }
        }
        let required = spec.params_schema.get("required").and_then(Value::as_array);
        for param in required.into_iter().flatten().filter_map(Value::as_str) {
            if !resource.variables().any(|v| v == param) {
                return Err(wrong(format!(
                    "`{}` requires param `{param}`, which is not a variable of the URI; expected a variable for \
                     each required param",
                    spec.id
                )));
            }
        }
        resources.push(resource);
    }
    Ok(resources)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::ActionSpec;
    use serde_json::json;

    fn action(id: &str, side_effects: bool, params: Value) -> DynAction {
        let spec = ActionSpec::new(id, "An action.").unwrap().side_effects(side_effects).params_schema(params);
        DynAction::new(spec, |_, _| Box::pin(async { Ok(Value::Null) })).unwrap()
    }

    fn by_id() -> Value {
        json!({"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]})
    }

    fn refused(resource: Result<Resource, ResourceError>) -> String {
        let built = Skill::builder("s", "1.0.0")
            .dyn_action(action("s.read", false, by_id()))
            .dyn_action(action("s.write", true, by_id()))
            .resource(Resource::new("s://fine/{id}", "fine", "s.read"))
            .resource(resource)
            .build();
        match built {
            Err(BuildError::Resource { message, .. }) => message,
            other => panic!("expected a resource error, got {other:?}"),
        }
    }

    #[test]
    fn a_built_skill_gives_back_what_it_was_built_with() {
        let schema = json!({"type": "object", "properties": {"n": {"type": "integer", "maximum": 5}}});
        let skill = Skill::builder("s", "1.0.0")
            .name("Ess")
            .description("Does s.")
            .category("testing")
            .tag("one")
            .tag("two")
            .instructions("Use s.read.")
            .dyn_action(action("s.read", false, by_id()))
            .dyn_action(action("s.write", true, by_id()))
            .prompt(Prompt::new("hello", "Says hello.").argument("who", "Whom to greet.", true))
            .resource(Resource::new("s://fine/{id}", "fine", "s.read"))
            .requires("base")
            .requires("base")
            .state_schema(schema.clone(), |opts: &Value| match opts {
                Value::Null => Ok(json!({"n": 1})),
                Value::String(why) => Err(why.clone()),
                other => Ok(other.clone()),
            })
            .on_signal(|state: &Value, _: &Signal, _: &SkillContext<'_>| {
                SkillReaction::Handled(state.clone(), Vec::new())
            })
            .build()
            .unwrap();
        assert_eq!(
            (skill.name(), skill.description(), skill.category(), skill.instructions()),
            ("Ess", "Does s.", "testing", "Use s.read.")
        );
        assert_eq!(skill.tags(), ["one", "two"]);
        let actions: Vec<&str> = skill.actions().iter().map(|a| a.spec().id.as_str()).collect();
        assert_eq!(actions, ["s.read", "s.write"]);
        assert_eq!(skill.prompts().iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["hello"]);
        assert_eq!(skill.resources().len(), 1);
        assert_eq!(
            skill.requires(),
            [crate::id::SkillId::new("base").unwrap()],
            "a requirement named twice counts once"
        );
        assert_eq!(skill.state_schema(), &schema);
        assert!(skill.handles_signals());
        assert_eq!(skill.initial_state(&Value::Null), Ok(json!({"n": 1})));
        assert_eq!(skill.make_state(&json!("no")), Err("no".to_owned()));
        assert_eq!(skill.make_state(&json!({"n": 9})), Ok(json!({"n": 9})), "made, not yet checked");
        let errors = skill.initial_state(&json!({"n": 9})).unwrap_err();
        assert_eq!(errors, skill.state_errors(&json!({"n": 9})));
        assert!(errors.len() == 1 && errors[0].contains('5'), "{errors:?}");
        assert!(skill.state_errors(&json!({"n": 2})).is_empty());

        let plain = Skill::builder("base", "2.0.0").build().unwrap();
        assert!(!plain.handles_signals());
        let mut agent = crate::skill::AgentState::new(crate::id::AgentId::new("a").unwrap(), ());
        let base = crate::id::SkillId::new("base").unwrap();
        assert!(!crate::skill::is_mounted(&agent, &base));
        crate::skill::mount(&mut agent, &plain, &Value::Null, &crate::policy::Policy::default()).unwrap();
        assert!(crate::skill::is_mounted(&agent, &base));
        assert!(!crate::skill::is_mounted(&agent, skill.id()));
        let mounted: Vec<String> =
            crate::skill::mounted_skills(&agent).map(|(id, version)| format!("{id}@{version}")).collect();
        assert_eq!(mounted, ["base@2.0.0"]);
    }

    #[test]
    fn a_skill_shows_its_id_version_actions_and_requirements() {
        let skill =
            Skill::builder("s", "1.2.0").dyn_action(action("s.read", false, by_id())).requires("base").build().unwrap();
        let shown = format!("{skill:?}");
        for part in ["Skill", "\"s\"", "minor: 2", "s.read", "base"] {
            assert!(shown.contains(part), "{part} is missing from {shown}");
        }
    }

    #[test]
    fn a_resource_must_be_read_by_the_skills_own_action_without_side_effects() {
        assert!(refused(Resource::new("s://a/{id}", "a", "other.read")).contains("not one of the skill's"));
        assert!(refused(Resource::new("s://a/{id}", "a", "s.write")).contains("has side effects"));
        assert!(refused(Resource::new("s://a/{id}/{x}", "a", "s.read")).contains("`x` is not a param"));
        assert!(refused(Resource::new("s://a", "a", "s.read")).contains("requires param `id`"));
        assert!(refused(Resource::new("s://fine/{id}", "again", "s.read")).contains("declared twice"));
        assert!(refused(Resource::new("s://a/{id", "a", "s.read")).contains("never closed"));
    }

    #[test]
    fn prompts_need_a_name_once_and_each_argument_once() {
        let build = |prompts: Vec<Prompt>| {
            prompts.into_iter().fold(Skill::builder("s", "1.0.0"), SkillBuilder::prompt).build().map(|_| ())
        };
        assert!(build(vec![Prompt::new("s.a", "A"), Prompt::new("s.b", "B")]).is_ok());
        let twice = build(vec![Prompt::new("s.a", "A"), Prompt::new("s.a", "B")]).unwrap_err();
        assert!(twice.to_string().contains("declared twice"), "{twice}");
        let empty = build(vec![Prompt::new(" ", "A")]).unwrap_err();
        assert!(empty.to_string().contains("name is empty"), "{empty}");
        let args = build(vec![Prompt::new("s.a", "A").argument("x", "", true).argument("x", "", false)]).unwrap_err();
        assert!(args.to_string().contains("argument `x` is declared twice"), "{args}");
    }
}
