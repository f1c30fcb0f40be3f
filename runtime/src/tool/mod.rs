//! Tool descriptors: how an agent's actions describe themselves to LLMs and MCP clients.
//!
//! OpenAI and Anthropic tool names may not contain dots, so they use [`ActionId::tool_name`]
//! (`arithmetic__add`); MCP keeps the id as it is.

mod strict;

pub use strict::strict_schema;

use crate::action::{ActionSpec, Capability, Risk};
use crate::agent::AgentState;
use crate::id::{ActionId, SkillId};
use crate::skill::Catalog;
use serde_json::{Map, Value, json};
use std::collections::BTreeSet;

/// Which provider's shape to describe tools in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolFormat {
    /// OpenAI function tools.
    OpenAi,
    /// OpenAI function tools in strict mode (structured outputs).
    OpenAiStrict,
    /// Anthropic tools.
    Anthropic,
    /// MCP tool definitions, with annotations.
    Mcp,
}

/// Why the tools of an agent could not be described.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// A mounted skill is not in the catalog.
    #[error("skill `{0}` is mounted but not in the catalog; expected every mounted skill to be registered")]
    UnknownSkill(SkillId),
}

/// The params schema as providers want it: an object schema, without `$schema`.
fn input_schema(spec: &ActionSpec) -> Value {
    match &spec.params_schema {
        Value::Object(map) => {
            let mut map = map.clone();
            map.remove("$schema");
            Value::Object(map)
        }
        // `true` (anything) and other non-object schemas: tools always take an object.
        _ => json!({"type": "object", "properties": {}}),
    }
}

/// An OpenAI function tool.
pub fn openai(spec: &ActionSpec) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": spec.id.tool_name(),
            "description": spec.description,
            "parameters": input_schema(spec),
        }
    })
}

/// An OpenAI function tool in strict mode: every property required (optional ones nullable),
/// `additionalProperties: false` everywhere, no `$schema`.
pub fn openai_strict(spec: &ActionSpec) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": spec.id.tool_name(),
            "description": spec.description,
            "parameters": strict_schema(&input_schema(spec)),
            "strict": true,
        }
    })
}

/// An Anthropic tool.
pub fn anthropic(spec: &ActionSpec) -> Value {
    json!({
        "name": spec.id.tool_name(),
        "description": spec.description,
        "input_schema": input_schema(spec),
    })
}

/// An MCP tool definition. Annotations come from the contract: read-only when the action has no side effects,
/// destructive when it has side effects at high risk, idempotent as declared, open-world when it needs `net`.
pub fn mcp(spec: &ActionSpec) -> Value {
    let mut tool = Map::new();
    tool.insert("name".into(), json!(spec.id.as_str()));
    tool.insert("description".into(), json!(spec.description));
    tool.insert("inputSchema".into(), input_schema(spec));
    // MCP output schemas must describe objects: a schema of something else is wrapped, as its output is, in
    // an object with one property, `result`, and marked so an agentry client can unwrap both. A schema that
    // might allow objects and other values alike (no `type`, `anyOf`) is left out.
    let mut output = spec.output_schema.clone();
    if let Some(map) = output.as_object_mut() {
        map.remove("$schema");
    }
    match output_type(&output) {
        OutputType::Object => {
            tool.insert("outputSchema".into(), output);
        }
        OutputType::Other => {
            // Definitions move to the wrapper's root, where the inner schema's `#/$defs/...` refs resolve.
            let mut wrapped = json!({"type": "object", "required": ["result"], "x-agentry-wrapped": true});
            for key in ["$defs", "definitions"] {
                if let Some(defs) = output.as_object_mut().and_then(|o| o.remove(key)) {
                    wrapped[key] = defs;
                }
            }
            wrapped["properties"] = json!({"result": output});
            tool.insert("outputSchema".into(), wrapped);
        }
        OutputType::Unknown => {}
    }
    tool.insert(
        "annotations".into(),
        json!({
            "readOnlyHint": !spec.side_effects,
            "destructiveHint": spec.side_effects && spec.risk == Risk::High,
            "idempotentHint": spec.idempotent,
            "openWorldHint": spec.capabilities.contains(&Capability::NET),
        }),
    );
    Value::Object(tool)
}

/// What an output schema says about its values' JSON type.
enum OutputType {
    /// Always an object.
    Object,
    /// Never an object.
    Other,
    /// It does not say, or allows both.
    Unknown,
}

fn output_type(schema: &Value) -> OutputType {
    match schema.get("type") {
        Some(Value::String(t)) if t == "object" => OutputType::Object,
        Some(Value::String(_)) => OutputType::Other,
        Some(Value::Array(types)) if !types.is_empty() && !types.iter().any(|t| t == "object") => OutputType::Other,
        _ => OutputType::Unknown,
    }
}

/// Describes one action in a format.
pub fn describe(spec: &ActionSpec, format: ToolFormat) -> Value {
    match format {
        ToolFormat::OpenAi => openai(spec),
        ToolFormat::OpenAiStrict => openai_strict(spec),
        ToolFormat::Anthropic => anthropic(spec),
        ToolFormat::Mcp => mcp(spec),
    }
}

/// The specs of every action mounted on an agent, once each: skills in id order, actions in declaration order.
pub fn mounted_specs<'c, S>(state: &AgentState<S>, catalog: &'c Catalog) -> Result<Vec<&'c ActionSpec>, ToolError> {
    let mut seen: BTreeSet<&ActionId> = BTreeSet::new();
    let mut specs = Vec::new();
    for id in state.skills().keys() {
        let skill = catalog.get(id).ok_or_else(|| ToolError::UnknownSkill(id.clone()))?;
        for action in skill.actions() {
            if seen.insert(&action.spec().id) {
                specs.push(action.spec());
            }
        }
    }
    Ok(specs)
}

/// The tools an agent offers an LLM: every mounted action, once, in the given format.
pub fn tools_for_agent<S>(
    state: &AgentState<S>,
    catalog: &Catalog,
    format: ToolFormat,
) -> Result<Vec<Value>, ToolError> {
    Ok(mounted_specs(state, catalog)?.into_iter().map(|spec| describe(spec, format)).collect())
}
