//! The chat types agentry owns: what is said to a model and what it answers, the same for every provider.
//!
//! They are kept in the journal (a model call's params and output), so their serialized form is stable: a
//! journal written today replays after a provider's client is upgraded. Providers' wire formats are mapped to
//! and from them in [`crate::openai`] and [`crate::anthropic`].

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who said a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The user (or whoever drives the agent).
    User,
    /// The model.
    Assistant,
    /// Results of tool calls, given back to the model.
    Tool,
}

/// One message of a conversation: who said it, and its parts in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Message {
    /// Who said it.
    pub role: Role,
    /// What it says: text, the model's tool calls, or tool results.
    pub parts: Vec<Part>,
}

impl Message {
    /// A user message of plain text.
    pub fn user(text: impl Into<String>) -> Self {
        Self { role: Role::User, parts: vec![Part::Text { text: text.into() }] }
    }

    /// An assistant message of plain text.
    pub fn assistant(text: impl Into<String>) -> Self {
        Self { role: Role::Assistant, parts: vec![Part::Text { text: text.into() }] }
    }

    /// A message of tool results.
    pub fn tool_results(results: Vec<ToolResult>) -> Self {
        Self { role: Role::Tool, parts: results.into_iter().map(Part::ToolResult).collect() }
    }

    /// The message's text parts, joined.
    pub fn text(&self) -> String {
        let texts = self.parts.iter().filter_map(|part| match part {
            Part::Text { text } => Some(text.as_str()),
            _ => None,
        });
        texts.collect()
    }

    /// The tool calls the message makes, in order.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.parts.iter().filter_map(|part| match part {
            Part::ToolCall(call) => Some(call),
            _ => None,
        })
    }
}

/// A part of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Part {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// A call the model makes to a tool.
    ToolCall(ToolCall),
    /// The result of a tool call, given back to the model.
    ToolResult(ToolResult),
}

/// A tool call as the model made it. Its arguments are kept as the text the model wrote, which may not be JSON
/// at all: they are read (and refused if malformed) where the call is acted on, never where it is received.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ToolCall {
    /// The provider's id of the call; its result names it.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments, as the JSON text the model wrote.
    pub arguments: String,
}

impl ToolCall {
    /// The arguments as a JSON object, or what is wrong with them. No arguments at all count as `{}`.
    pub fn parsed_arguments(&self) -> Result<Value, String> {
        if self.arguments.trim().is_empty() {
            return Ok(Value::Object(serde_json::Map::new()));
        }
        match serde_json::from_str::<Value>(&self.arguments) {
            Ok(value @ Value::Object(_)) => Ok(value),
            Ok(other) => Err(format!("the arguments must be a JSON object, got {}", kind_of(&other))),
            Err(err) => Err(format!("the arguments are not valid JSON ({err}); expected a JSON object")),
        }
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The result of a tool call, as the model reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ToolResult {
    /// The call it answers.
    pub call_id: String,
    /// The result (or the error), as text.
    pub content: String,
    /// Whether the call failed; the model can act on it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolDef {
    /// Its name (letters, digits, `_` and `-`: providers refuse dots).
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// The JSON schema of its arguments (an object schema).
    pub parameters: Value,
}

/// Whether (and which) tool the model must call.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// The model must not call tools.
    None,
    /// The model must call some tool.
    Required,
    /// The model must call this tool.
    Tool(String),
}

/// What is asked of a model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ChatRequest {
    /// The model's name at the provider.
    pub model: String,
    /// Instructions that stand before the conversation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// The conversation so far.
    pub messages: Vec<Message>,
    /// The tools offered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolDef>,
    /// Whether a tool must be called.
    #[serde(default)]
    pub tool_choice: ToolChoice,
    /// The most tokens the answer may take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Sampling temperature, where the provider takes one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
}

impl ChatRequest {
    /// A request to `model` with this conversation, no tools, defaults otherwise.
    pub fn new(model: impl Into<String>, messages: Vec<Message>) -> Self {
        Self {
            model: model.into(),
            system: None,
            messages,
            tools: Vec::new(),
            tool_choice: ToolChoice::Auto,
            max_tokens: None,
            temperature: None,
        }
    }
}

/// Tokens a model call used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct Usage {
    /// Tokens read (the prompt).
    pub input_tokens: u64,
    /// Tokens written (the answer).
    pub output_tokens: u64,
    /// Whether the provider reported none and these were estimated from the text (four characters a token), as
    /// for a server that does not report usage when it streams.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub estimated: bool,
}

impl Usage {
    /// Tokens reported by the provider.
    pub fn new(input_tokens: u64, output_tokens: u64) -> Self {
        Self { input_tokens, output_tokens, estimated: false }
    }

    /// Both, added.
    pub fn total(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }
}

/// Both usages, added (estimated if either was).
impl std::ops::Add for Usage {
    type Output = Usage;

    fn add(self, other: Usage) -> Usage {
        Usage {
            input_tokens: self.input_tokens.saturating_add(other.input_tokens),
            output_tokens: self.output_tokens.saturating_add(other.output_tokens),
            estimated: self.estimated || other.estimated,
        }
    }
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// It finished its answer.
    Stop,
    /// It reached the token limit.
    Length,
    /// It called tools and waits for their results.
    ToolCalls,
    /// The provider's filter stopped it.
    ContentFilter,
    /// Another reason, as the provider named it.
    Other(String),
}

/// What a model answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ChatResponse {
    /// The answer: an assistant message of text and tool calls.
    pub message: Message,
    /// Tokens used.
    pub usage: Usage,
    /// Why it stopped.
    pub finish: FinishReason,
    /// The model that answered, as the provider named it.
    #[serde(default)]
    pub model: String,
}

/// A piece of an answer as it streams in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Delta {
    /// More text.
    Text {
        /// The text added.
        text: String,
    },
    /// A tool call began (its arguments follow in fragments, assembled before anything runs).
    ToolCall {
        /// Its place among the answer's calls.
        index: usize,
        /// Its name.
        name: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn arguments_are_read_where_they_are_acted_on() {
        let call = |arguments: &str| ToolCall { id: "c".into(), name: "t".into(), arguments: arguments.into() };
        assert_eq!(call(r#"{"a": 1}"#).parsed_arguments(), Ok(json!({"a": 1})));
        assert_eq!(call("  ").parsed_arguments(), Ok(json!({})));
        let broken = call(r#"{"a": 1"#).parsed_arguments().expect_err("not JSON");
        assert!(broken.contains("not valid JSON") && broken.contains("expected a JSON object"), "{broken}");
        let array = call("[1]").parsed_arguments().expect_err("not an object");
        assert!(array.contains("got an array"), "{array}");
    }

    #[test]
    fn the_journal_form_is_stable() {
        let message = Message {
            role: Role::Assistant,
            parts: vec![
                Part::Text { text: "Looking.".into() },
                Part::ToolCall(ToolCall { id: "call_1".into(), name: "fs__read".into(), arguments: "{}".into() }),
            ],
        };
        let written = json!({"role": "assistant", "parts": [
            {"type": "text", "text": "Looking."},
            {"type": "tool_call", "id": "call_1", "name": "fs__read", "arguments": "{}"},
        ]});
        assert_eq!(serde_json::to_value(&message).expect("serializes"), written);
        assert_eq!(serde_json::from_value::<Message>(written).expect("reads back"), message);
        let result =
            Message::tool_results(vec![ToolResult { call_id: "call_1".into(), content: "x".into(), is_error: true }]);
        assert_eq!(
            serde_json::to_value(&result).expect("serializes"),
            json!({"role": "tool", "parts": [{"type": "tool_result", "call_id": "call_1", "content": "x", "is_error": true}]})
        );
    }
}
