//! MCP tools in agentry's terms, both ways: a server's tool definition becomes an action contract, a tool's
//! result becomes an action's output or error, and an agent's action contract becomes a tool definition. Pure:
//! the types here are plain data, so the rest of the crate never sees the SDK's types.

use agentry::action::{ActionError, ActionSpec, Capability, Category, ErrorClass, Risk};
use agentry::id::{ActionId, SkillId};
use serde_json::{Map, Value, json};
use std::time::Duration;

/// A tool as an MCP server describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDef {
    /// The tool's name on its server.
    pub name: String,
    /// A human title, if any.
    pub title: Option<String>,
    /// What the tool does.
    pub description: Option<String>,
    /// The JSON Schema of its arguments (an object schema).
    pub input_schema: Value,
    /// The JSON Schema of its structured result, if it declares one.
    pub output_schema: Option<Value>,
    /// What the server says about its behaviour.
    pub hints: ToolHints,
}

/// A tool's annotations: hints from its server, which may be wrong or lie. `None` is "not said", and MCP says
/// to assume the worst: not read-only, destructive, not idempotent, open world.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ToolHints {
    /// It changes nothing.
    pub read_only: Option<bool>,
    /// Its changes may destroy something (meaningful when not read-only).
    pub destructive: Option<bool>,
    /// Calling it twice with the same arguments does no more than calling it once.
    pub idempotent: Option<bool>,
    /// It reaches outside the server (the web, other systems).
    pub open_world: Option<bool>,
}

/// What a `tools/call` returned.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    /// The content blocks, as MCP JSON (`{"type": "text", "text": ...}`, `{"type": "image", ...}`, ...).
    pub content: Vec<Value>,
    /// The structured result, if any.
    pub structured: Option<Value>,
    /// Whether the tool reports a failure.
    pub is_error: bool,
    /// The class of the failure, when the server said (an agentry server does, in the result's `_meta` under
    /// [`ERROR_CLASS_META`]).
    pub error_class: Option<ErrorClass>,
    /// Whether `structured` is `{"result": output}` around an output that is not an object (MCP's structured
    /// content must be an object); an agentry server says so in `_meta` under [`WRAPPED_META`].
    pub wrapped: bool,
}

/// The `_meta` key under which an agentry server says the structured content wraps an output that is not an
/// object, as `{"result": output}`; an agentry client unwraps it.
pub const WRAPPED_META: &str = "io.agentry/wrapped";

/// The schema keyword an agentry server puts on an output schema it wrapped the same way.
pub const WRAPPED_SCHEMA: &str = "x-agentry-wrapped";

/// The `_meta` key under which an agentry server tells the class of a failed call (`"validation"`, ...), so an
/// agentry client gets `validation` back as `validation` rather than `critical`.
pub const ERROR_CLASS_META: &str = "io.agentry/errorClass";

impl ToolResult {
    /// The text blocks, joined by newlines.
    pub fn text(&self) -> String {
        let texts: Vec<&str> = self
            .content
            .iter()
            .filter(|block| block["type"] == "text")
            .filter_map(|block| block["text"].as_str())
            .collect();
        texts.join("\n")
    }
}

/// The action id of a server's tool: `mcp.<server>.<tool>`, or why the tool's name cannot be one (ids allow
/// ASCII letters, digits, `_` and `-` between dots; MCP tool names may hold more). One tool is one segment: the
/// dots of its name become `-` (`repo.delete` is `mcp.gh.repo-delete`), so a pattern such as `mcp.gh.*` covers
/// every tool of the server, whatever its name holds. (Two tools whose names differ only there get one id: the
/// skill keeps the first and skips the other.)
pub fn action_id(server: &str, tool: &str) -> Result<ActionId, String> {
    ActionId::new(format!("mcp.{server}.{}", tool.replace('.', "-"))).map_err(|e| e.to_string())
}

/// The id of the skill that holds a server's tools: `mcp.<server>`.
pub fn skill_id(server: &str) -> Result<SkillId, agentry::id::IdError> {
    SkillId::new(format!("mcp.{server}"))
}

/// How far a server's word about its tools is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Trust {
    /// The default: the server may lie. Its hints can lower a tool's risk from the pessimistic `high` no
    /// further than `medium` (so a tool that claims to be harmless still runs only under a policy that accepts
    /// medium risk), and every tool has side effects, is never retried as idempotent, and needs `net`,
    /// whatever it claims.
    #[default]
    Untrusted,
    /// The server's hints are taken as they are (a server one runs oneself).
    Trusted,
}

/// The action contract of a server's tool. From a [`Trust::Trusted`] server the hints set the contract:
/// - read-only: low risk, no side effects, idempotent;
/// - otherwise side effects, high risk when destructive (the default) and medium when not, idempotent only
///   when the hint says so;
/// - open world (the default): needs the `net` capability.
///
/// From an [`Trust::Untrusted`] one (the default) risk is at least medium (high when the tool says destructive
/// or says nothing), with side effects, not idempotent, and `net` always. An agent's policy can still override
/// either (`risk_overrides`, `deny_actions`).
///
/// Every tool is a `Remote` action with the given timeout per attempt.
pub fn action_spec(server: &str, tool: &ToolDef, timeout: Duration, trust: Trust) -> Result<ActionSpec, String> {
    let id = action_id(server, &tool.name)?;
    let description = tool.description.clone().or_else(|| tool.title.clone()).unwrap_or_default();
    let hints = tool.hints;
    let (risk, _) = risk_of(hints, trust);
    let (side_effects, idempotent, open_world) = match (trust, hints.read_only.unwrap_or(false)) {
        (Trust::Trusted, true) => (false, true, hints.open_world.unwrap_or(true)),
        (Trust::Trusted, false) => (true, hints.idempotent.unwrap_or(false), hints.open_world.unwrap_or(true)),
        (Trust::Untrusted, _) => (true, false, true),
    };
    let mut spec = ActionSpec::new(id.as_str(), description)
        .map_err(|e| e.to_string())?
        .params_schema(tool.input_schema.clone())
        .output_schema(output_schema(tool.output_schema.as_ref()))
        .risk(risk)
        .side_effects(side_effects)
        .idempotent(idempotent)
        .category(Category::Remote)
        .timeout(timeout);
    if open_world {
        spec = spec.capability(Capability::NET);
    }
    Ok(spec)
}

/// The risk a tool gets from its hints and its server's trust (as [`action_spec`] gives it), and why, in words
/// for an operator (`agentry mcp inspect`).
pub fn risk_of(hints: ToolHints, trust: Trust) -> (Risk, &'static str) {
    let (risk, why) = match (hints.read_only, hints.destructive) {
        (Some(true), _) => (Risk::Low, "readOnlyHint"),
        (_, Some(false)) => (Risk::Medium, "destructiveHint false"),
        (_, Some(true)) => (Risk::High, "destructiveHint"),
        (_, None) => (Risk::High, "no destructiveHint: assumed destructive"),
    };
    match trust {
        Trust::Trusted => (risk, why),
        // Contradicting hints (read-only yet destructive) count as the stricter one.
        Trust::Untrusted if hints.destructive == Some(true) => (Risk::High, "destructiveHint"),
        Trust::Untrusted if risk < Risk::Medium => {
            (Risk::Medium, "untrusted server: its hints lower the risk no further than medium")
        }
        Trust::Untrusted => (risk, why),
    }
}

/// A tool's output schema as the action's: an agentry server's wrapped schema (see [`WRAPPED_SCHEMA`]) is the
/// wrapped value's; none accepts anything.
fn output_schema(schema: Option<&Value>) -> Value {
    match schema {
        Some(schema) if schema.get(WRAPPED_SCHEMA) == Some(&Value::Bool(true)) => {
            schema.pointer("/properties/result").cloned().unwrap_or(Value::Bool(true))
        }
        Some(schema) => schema.clone(),
        None => Value::Bool(true),
    }
}

/// A tool's result as an action's output: the structured result when there is one; else the text, when every
/// block is text; else the content blocks as MCP JSON (images, audio, resources). A result the tool marks as an
/// error fails with the server's text, `reported` (the tool's own failure, an ordinary result a model can read
/// and act on, which a retry with the same arguments would not mend) unless the server named the class:
/// `validation` and `transient` are kept, a remote `timeout` is `transient` here, and every other class (those
/// only a local runtime can decide, `denied`, `cancelled`, `interrupted`, and a remote `critical`) is
/// `reported`. Any server can name a class; from an untrusted one it changes no retries, since its tools are
/// never idempotent.
pub fn output(tool: &str, result: ToolResult) -> Result<Value, ActionError> {
    if result.is_error {
        let text = result.text();
        let detail = if text.is_empty() {
            result.structured.as_ref().map(Value::to_string).unwrap_or_else(|| "no message".to_owned())
        } else {
            text
        };
        let message = format!("MCP tool `{tool}` reported an error: {detail}");
        return Err(match result.error_class {
            Some(ErrorClass::Validation) => ActionError::validation(message),
            // A timeout over there is not this run's own timeout: for this run it is a transient failure.
            Some(ErrorClass::Transient | ErrorClass::Timeout) => ActionError::transient(message),
            _ => ActionError::reported(message),
        });
    }
    if let Some(structured) = result.structured {
        return Ok(match (result.wrapped, structured) {
            (true, Value::Object(mut wrapper)) => wrapper.remove("result").unwrap_or(Value::Null),
            (_, structured) => structured,
        });
    }
    if result.content.iter().all(|block| block["type"] == "text") {
        return Ok(Value::String(result.text()));
    }
    Ok(Value::Array(result.content))
}

/// The MCP tool definition of an agent's action: the dotted action id is the tool's name, and the hints come
/// from the contract (see [`agentry::tool::mcp`]).
pub fn tool_def(spec: &ActionSpec) -> ToolDef {
    let described = agentry::tool::mcp(spec);
    let hint = |name: &str| described["annotations"][name].as_bool();
    ToolDef {
        name: spec.id.to_string(),
        title: None,
        description: Some(spec.description.clone()),
        input_schema: described["inputSchema"].clone(),
        output_schema: described.get("outputSchema").cloned(),
        hints: ToolHints {
            read_only: hint("readOnlyHint"),
            destructive: hint("destructiveHint"),
            idempotent: hint("idempotentHint"),
            open_world: hint("openWorldHint"),
        },
    }
}

/// A text content block.
pub fn text_block(text: impl Into<String>) -> Value {
    json!({"type": "text", "text": text.into()})
}

/// An image content block: base64 `data` of the given MIME type (`image/png`).
pub fn image_block(data: impl Into<String>, mime_type: impl Into<String>) -> Value {
    json!({"type": "image", "data": data.into(), "mimeType": mime_type.into()})
}

/// An audio content block: base64 `data` of the given MIME type (`audio/wav`).
pub fn audio_block(data: impl Into<String>, mime_type: impl Into<String>) -> Value {
    json!({"type": "audio", "data": data.into(), "mimeType": mime_type.into()})
}

/// An embedded text resource block: the resource at `uri`, of the given MIME type, inline.
pub fn resource_block(uri: impl Into<String>, mime_type: impl Into<String>, text: impl Into<String>) -> Value {
    json!({"type": "resource", "resource": {"uri": uri.into(), "mimeType": mime_type.into(), "text": text.into()}})
}

/// An embedded binary resource block: the resource at `uri`, base64 `blob` of the given MIME type.
pub fn blob_resource_block(uri: impl Into<String>, mime_type: impl Into<String>, blob: impl Into<String>) -> Value {
    json!({"type": "resource", "resource": {"uri": uri.into(), "mimeType": mime_type.into(), "blob": blob.into()}})
}

/// A link to a resource the client can read itself.
pub fn resource_link_block(uri: impl Into<String>, name: impl Into<String>) -> Value {
    json!({"type": "resource_link", "uri": uri.into(), "name": name.into()})
}

/// The content blocks an action's output stands for, when it is an array of MCP content blocks (what the
/// `*_block` functions make, and what [`output`] gives back for a result that is not all text): a non-empty
/// array whose every element is an object of a known `type` with that type's fields. Anything else is an
/// ordinary output.
pub fn content_blocks(output: &Value) -> Option<&[Value]> {
    let blocks = output.as_array().filter(|blocks| !blocks.is_empty())?;
    let text = |block: &Value, field: &str| block.get(field).is_some_and(Value::is_string);
    let block = |block: &Value| match block.get("type").and_then(Value::as_str) {
        Some("text") => text(block, "text"),
        Some("image" | "audio") => text(block, "data") && text(block, "mimeType"),
        Some("resource") => {
            let resource = &block["resource"];
            text(resource, "uri") && (text(resource, "text") || text(resource, "blob"))
        }
        Some("resource_link") => text(block, "uri") && text(block, "name"),
        _ => false,
    };
    blocks.iter().all(block).then_some(blocks.as_slice())
}

/// The answer an approved elicitation gives: each field of the form (`schema`, a JSON Schema object) that has
/// a `default`, with it (as SEP-1034 says a client applies defaults). An approval cannot type anything in, so
/// a required field without a default is an error naming it.
pub fn form_defaults(schema: &Value) -> Result<Value, String> {
    let properties = schema.get("properties").and_then(Value::as_object).cloned().unwrap_or_default();
    let required: Vec<&str> =
        schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    let mut answer = Map::new();
    for (name, field) in &properties {
        if let Some(default) = field.get("default") {
            answer.insert(name.clone(), default.clone());
        }
    }
    if let Some(missing) = required.iter().find(|name| !answer.contains_key(**name)) {
        return Err(format!(
            "the server asks for `{missing}`, which has no default; an approval can only accept defaults"
        ));
    }
    Ok(Value::Object(answer))
}

/// Arguments as the JSON object MCP sends: `null` is no arguments; anything but an object is refused.
pub fn arguments(params: Value) -> Result<Map<String, Value>, ActionError> {
    match params {
        Value::Object(map) => Ok(map),
        Value::Null => Ok(Map::new()),
        other => Err(ActionError::validation(format!(
            "MCP tool arguments must be a JSON object; got {}",
            match other {
                Value::Bool(_) => "a boolean",
                Value::Number(_) => "a number",
                Value::String(_) => "a string",
                _ => "an array",
            }
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, hints: ToolHints) -> ToolDef {
        ToolDef {
            name: name.to_owned(),
            title: None,
            description: Some("does it".to_owned()),
            input_schema: json!({"type": "object"}),
            output_schema: None,
            hints,
        }
    }

    #[test]
    fn content_blocks_are_only_well_formed_blocks() {
        let blocks = json!([
            text_block("hi"),
            image_block("AAAA", "image/png"),
            audio_block("AAAA", "audio/wav"),
            resource_block("test://r", "text/plain", "text"),
            blob_resource_block("test://b", "image/png", "AAAA"),
            resource_link_block("test://l", "l"),
        ]);
        assert_eq!(content_blocks(&blocks).map(<[Value]>::len), Some(6));
        // An output that only looks like content stays an ordinary output.
        for ordinary in [
            json!([]),
            json!(["text"]),
            json!([{"type": "text"}]),
            json!([{"type": "text", "text": 1}]),
            json!([{"type": "image", "data": "AAAA"}]),
            json!([{"type": "resource", "resource": {"uri": "test://r"}}]),
            json!([{"type": "video", "data": "AAAA", "mimeType": "video/mp4"}]),
            json!([text_block("fine"), {"type": "row", "text": "not a block"}]),
            json!({"type": "text", "text": "an object, not a list"}),
        ] {
            assert_eq!(content_blocks(&ordinary), None, "{ordinary}");
        }
        // What the client makes of a result that is not all text is served as that content again.
        let result = ToolResult {
            content: blocks.as_array().unwrap().clone(),
            structured: None,
            is_error: false,
            error_class: None,
            wrapped: false,
        };
        let output = output("t", result).unwrap();
        assert_eq!(content_blocks(&output).map(<[Value]>::len), Some(6));
    }

    #[test]
    fn hints_become_the_contract_and_missing_hints_assume_the_worst() {
        let timeout = Duration::from_secs(7);
        let read_only = ToolHints { read_only: Some(true), open_world: Some(false), ..ToolHints::default() };
        let spec = action_spec("srv", &tool("look", read_only), timeout, Trust::Trusted).unwrap();
        assert_eq!(spec.id.as_str(), "mcp.srv.look");
        assert_eq!((spec.risk, spec.side_effects, spec.idempotent), (Risk::Low, false, true));
        assert!(spec.capabilities.is_empty());
        assert_eq!(spec.timeout, timeout);
        assert_eq!(spec.category, Category::Remote);

        let silent = action_spec("srv", &tool("act", ToolHints::default()), timeout, Trust::Trusted).unwrap();
        assert_eq!((silent.risk, silent.side_effects, silent.idempotent), (Risk::High, true, false));
        assert!(silent.capabilities.contains(&Capability::NET));

        let gentle = ToolHints { destructive: Some(false), idempotent: Some(true), ..ToolHints::default() };
        let spec = action_spec("srv", &tool("put", gentle), timeout, Trust::Trusted).unwrap();
        assert_eq!((spec.risk, spec.side_effects, spec.idempotent), (Risk::Medium, true, true));
    }

    #[test]
    fn an_untrusted_servers_hints_only_make_things_stricter() {
        let timeout = Duration::from_secs(7);
        // The lie: "read-only, closed world, idempotent" on a tool that may do anything.
        let lying = ToolHints {
            read_only: Some(true),
            destructive: Some(false),
            idempotent: Some(true),
            open_world: Some(false),
        };
        let spec = action_spec("srv", &tool("look", lying), timeout, Trust::Untrusted).unwrap();
        assert_eq!((spec.risk, spec.side_effects, spec.idempotent), (Risk::Medium, true, false));
        assert!(spec.capabilities.contains(&Capability::NET));
        // A hint that raises the risk is taken.
        let destructive = ToolHints { destructive: Some(true), ..ToolHints::default() };
        let spec = action_spec("srv", &tool("wipe", destructive), timeout, Trust::Untrusted).unwrap();
        assert_eq!(spec.risk, Risk::High);
        let contradicting = ToolHints { read_only: Some(true), destructive: Some(true), ..ToolHints::default() };
        let spec = action_spec("srv", &tool("both", contradicting), timeout, Trust::Untrusted).unwrap();
        assert_eq!(spec.risk, Risk::High, "read-only yet destructive counts as destructive");
        let silent = action_spec("srv", &tool("act", ToolHints::default()), timeout, Trust::Untrusted).unwrap();
        assert_eq!((silent.risk, silent.side_effects, silent.idempotent), (Risk::High, true, false));
        assert_eq!(Trust::default(), Trust::Untrusted);
    }

    #[test]
    fn tool_names_that_cannot_be_ids_are_refused_with_the_reason() {
        assert_eq!(action_id("srv", "get-sum").unwrap().as_str(), "mcp.srv.get-sum");
        // One tool, one segment: a pattern for the server's tools covers a dotted name too.
        let dotted = action_id("srv", "repo.delete").unwrap();
        assert_eq!(dotted.as_str(), "mcp.srv.repo-delete");
        assert!(agentry::pattern::Pattern::new("mcp.srv.*").unwrap().matches(dotted.as_str()));
        assert!(action_id("srv", ".hidden").is_ok_and(|id| id.as_str() == "mcp.srv.-hidden"));
        let err = action_id("srv", "what/ever").unwrap_err();
        assert!(err.contains("'/'"), "{err}");
        assert!(action_id("srv", "x__y").is_err());
    }

    #[test]
    fn results_become_outputs_or_errors() {
        let text = ToolResult {
            content: vec![text_block("a"), text_block("b")],
            structured: None,
            is_error: false,
            error_class: None,
            wrapped: false,
        };
        assert_eq!(output("t", text), Ok(json!("a\nb")));
        let structured = ToolResult {
            content: vec![text_block("{}")],
            structured: Some(json!({"x": 1})),
            is_error: false,
            error_class: None,
            wrapped: false,
        };
        assert_eq!(output("t", structured.clone()), Ok(json!({"x": 1})));
        // An agentry server's wrapped output is unwrapped; another server's `result` field is left alone.
        let wrapped = ToolResult { structured: Some(json!({"result": [1, 2]})), wrapped: true, ..structured.clone() };
        assert_eq!(output("t", wrapped.clone()), Ok(json!([1, 2])));
        assert_eq!(output("t", ToolResult { wrapped: false, ..wrapped }), Ok(json!({"result": [1, 2]})));
        let schema = json!({"type": "object", "properties": {"result": {"type": "number"}}, WRAPPED_SCHEMA: true});
        assert_eq!(output_schema(Some(&schema)), json!({"type": "number"}));
        assert_eq!(output_schema(None), json!(true));
        let image = json!({"type": "image", "data": "AA==", "mimeType": "image/png"});
        let mixed = ToolResult {
            content: vec![text_block("see"), image.clone()],
            structured: None,
            is_error: false,
            error_class: None,
            wrapped: false,
        };
        assert_eq!(output("t", mixed), Ok(json!([{"type": "text", "text": "see"}, image])));
        let failed = ToolResult {
            content: vec![text_block("no such file")],
            structured: None,
            is_error: true,
            error_class: None,
            wrapped: false,
        };
        let err = output("t", failed).unwrap_err();
        assert_eq!(err.class(), agentry::action::ErrorClass::Reported, "the tool's own failure, not a critical one");
        assert!(err.to_string().contains("no such file"), "{err}");
        // The class an agentry server names is kept, but not the classes only a local runtime decides.
        let named = |class| ToolResult {
            content: vec![text_block("bad")],
            structured: None,
            is_error: true,
            error_class: Some(class),
            wrapped: false,
        };
        for (said, kept) in [
            (ErrorClass::Validation, ErrorClass::Validation),
            (ErrorClass::Transient, ErrorClass::Transient),
            (ErrorClass::Timeout, ErrorClass::Transient),
            (ErrorClass::Denied, ErrorClass::Reported),
            (ErrorClass::Cancelled, ErrorClass::Reported),
            (ErrorClass::Interrupted, ErrorClass::Reported),
            (ErrorClass::Critical, ErrorClass::Reported),
        ] {
            let err = output("t", named(said)).unwrap_err();
            assert_eq!(err.class(), kept, "{said:?}");
            assert!(err.to_string().contains("reported an error: bad"), "{err}");
        }
    }

    #[test]
    fn an_action_contract_becomes_a_tool_with_its_hints() {
        let spec = ActionSpec::new("fs.delete", "Deletes a file.")
            .unwrap()
            .params_schema(json!({"type": "object", "properties": {"path": {"type": "string"}}}))
            .side_effects(true)
            .risk(Risk::High);
        let tool = tool_def(&spec);
        assert_eq!(tool.name, "fs.delete");
        assert_eq!(tool.input_schema["properties"]["path"]["type"], "string");
        assert_eq!(tool.hints.read_only, Some(false));
        assert_eq!(tool.hints.destructive, Some(true));
        // And back: a served tool mounted by another agentry keeps the contract.
        let back = action_spec("peer", &tool, Duration::from_secs(1), Trust::Trusted).unwrap();
        assert_eq!((back.risk, back.side_effects), (Risk::High, true));
        assert!(!back.capabilities.contains(&Capability::NET));
    }

    #[test]
    fn arguments_must_be_an_object() {
        assert_eq!(arguments(Value::Null).unwrap(), Map::new());
        assert!(arguments(json!([1])).unwrap_err().to_string().contains("an array"));
    }
}
