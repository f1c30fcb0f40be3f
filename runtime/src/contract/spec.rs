//! The action contract as data: id, description, schemas and the metadata the gate and runner act on.

use super::retry::RetryPolicy;
use crate::duration_ms;
use crate::id::{ActionId, IdError};
use schemars::{JsonSchema, Schema};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::borrow::Cow;
use std::collections::BTreeSet;
use std::fmt;
use std::time::Duration;

/// How much harm a run can do; the policy asks for approval above a threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum Risk {
    /// Reads or computes; nothing to undo.
    #[default]
    Low,
    /// Changes something that can be undone.
    Medium,
    /// Changes something that cannot easily be undone.
    High,
}

/// How expensive a run is, for planners and budgets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum Cost {
    /// Microseconds of local work.
    Cheap,
    /// Ordinary I/O.
    #[default]
    Normal,
    /// Long, metered or remote work.
    Expensive,
}

/// What kind of work an action does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    /// A computation on its params.
    #[default]
    Pure,
    /// Long-running local work.
    Job,
    /// Work done by another system over the network.
    Remote,
    /// Produces files.
    Artifact,
}

/// A capability an action needs and a policy grants, such as `fs` or `net`. Any lowercase name is allowed;
/// the common ones have constants.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct Capability(Cow<'static, str>);

impl Capability {
    /// Files in the agent's drive.
    pub const FS: Capability = Capability(Cow::Borrowed("fs"));
    /// Network access.
    pub const NET: Capability = Capability(Cow::Borrowed("net"));
    /// A GPU.
    pub const GPU: Capability = Capability(Cow::Borrowed("gpu"));
    /// The agent's long-term memory.
    pub const MEMORY: Capability = Capability(Cow::Borrowed("memory"));
    /// Spawning other agents.
    pub const SPAWN: Capability = Capability(Cow::Borrowed("spawn"));

    /// A capability by name.
    pub fn new(name: impl Into<String>) -> Self {
        Self(Cow::Owned(name.into()))
    }

    /// The capability's name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An action's contract: what it is, what it takes and returns, and how it must be run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ActionSpec {
    /// Globally unique, `skill.verb` style.
    pub id: ActionId,
    /// What the action does, for people and LLMs.
    pub description: String,
    /// JSON Schema of the params.
    pub params_schema: Value,
    /// JSON Schema of the output.
    pub output_schema: Value,
    /// How much harm a run can do.
    pub risk: Risk,
    /// How expensive a run is.
    pub cost: Cost,
    /// Whether a run changes anything outside the agent.
    pub side_effects: bool,
    /// Whether running twice with the same params has the effect of running once.
    pub idempotent: bool,
    /// Capabilities the action needs.
    pub capabilities: BTreeSet<Capability>,
    /// How long one attempt may take.
    #[serde(with = "duration_ms")]
    #[schemars(with = "u64")]
    pub timeout: Duration,
    /// How failures are retried.
    pub retry: RetryPolicy,
    /// What kind of work it does.
    pub category: Category,
}

/// The timeout an action gets when its spec names none.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

impl ActionSpec {
    /// A spec with the given id and description, schemas that accept any JSON, and safe defaults: low risk,
    /// normal cost, no side effects, not idempotent, no capabilities, a 30 s timeout, the default retry policy.
    pub fn new(id: impl TryInto<ActionId, Error = IdError>, description: impl Into<String>) -> Result<Self, IdError> {
        Ok(Self {
            id: id.try_into()?,
            description: description.into(),
            params_schema: Value::Bool(true),
            output_schema: Value::Bool(true),
            risk: Risk::Low,
            cost: Cost::Normal,
            side_effects: false,
            idempotent: false,
            capabilities: BTreeSet::new(),
            timeout: DEFAULT_TIMEOUT,
            retry: RetryPolicy::default(),
            category: Category::Pure,
        })
    }

    /// Sets the params schema from a type ([`params_schema_for`]: a unit struct is an object with no
    /// properties).
    pub fn params<P: JsonSchema>(mut self) -> Self {
        self.params_schema = params_schema_for::<P>();
        self
    }

    /// Sets the output schema from a type.
    pub fn output<O: JsonSchema>(mut self) -> Self {
        self.output_schema = schema_for::<O>();
        self
    }

    /// Sets the params schema from JSON (for actions whose params are only known at run time, such as MCP tools).
    pub fn params_schema(mut self, schema: Value) -> Self {
        self.params_schema = schema;
        self
    }

    /// Sets the output schema from JSON.
    pub fn output_schema(mut self, schema: Value) -> Self {
        self.output_schema = schema;
        self
    }

    /// Sets the risk.
    pub fn risk(mut self, risk: Risk) -> Self {
        self.risk = risk;
        self
    }

    /// Sets the cost.
    pub fn cost(mut self, cost: Cost) -> Self {
        self.cost = cost;
        self
    }

    /// Says whether a run changes anything outside the agent.
    pub fn side_effects(mut self, side_effects: bool) -> Self {
        self.side_effects = side_effects;
        self
    }

    /// Says whether running twice has the effect of running once.
    pub fn idempotent(mut self, idempotent: bool) -> Self {
        self.idempotent = idempotent;
        self
    }

    /// Adds a capability the action needs.
    pub fn capability(mut self, capability: Capability) -> Self {
        self.capabilities.insert(capability);
        self
    }

    /// Sets the timeout of one attempt.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets the retry policy.
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Sets the category.
    pub fn category(mut self, category: Category) -> Self {
        self.category = category;
        self
    }
}

/// The params schema agentry uses for a type: [`schema_for`], except that a params type with no fields written
/// as a unit struct (`struct Ping;`, whose own schema is `{"type": "null"}`) describes itself as an object with
/// no properties, as a braced `struct Ping {}` does and as tools are described to models, so the `{}` a model
/// sends is taken (and read as the unit).
///
/// ```
/// use agentry::action::params_schema_for;
/// use schemars::JsonSchema;
///
/// #[derive(JsonSchema)]
/// struct Ping;
/// assert_eq!(params_schema_for::<Ping>()["type"], "object");
/// ```
pub fn params_schema_for<T: JsonSchema>() -> Value {
    as_params_schema(schema_for::<T>())
}

/// A type's schema as a params schema: a unit's (`{"type": "null"}`) becomes an object with no properties.
pub(crate) fn as_params_schema(schema: Value) -> Value {
    if !is_unit_schema(&schema) {
        return schema;
    }
    let mut object = serde_json::Map::new();
    for key in ["$schema", "title", "description"] {
        if let Some(value) = schema.get(key) {
            object.insert(key.to_owned(), value.clone());
        }
    }
    object.insert("type".to_owned(), Value::from("object"));
    object.insert("properties".to_owned(), Value::Object(serde_json::Map::new()));
    Value::Object(object)
}

/// Whether a type's schema is that of a unit (`{"type": "null"}` and nothing more but its names).
pub(crate) fn is_unit_schema(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("null")
        && schema
            .as_object()
            .is_some_and(|o| o.keys().all(|k| matches!(k.as_str(), "type" | "$schema" | "title" | "description")))
}

/// The JSON Schema agentry uses for a type: draft 2020-12, subschemas inlined where possible (LLM providers
/// handle `$ref` poorly), `$defs` kept only for recursive types.
pub fn schema_for<T: JsonSchema>() -> Value {
    let mut settings = schemars::generate::SchemaSettings::draft2020_12();
    settings.inline_subschemas = true;
    let schema: Schema = settings.into_generator().into_root_schema_for::<T>();
    schema.to_value()
}
