//! OpenAI's Chat Completions format, as far as agentry uses it, mapped to and from [`crate::chat`]. Read
//! leniently (servers that speak it, such as llama.cpp's, vLLM and Ollama, leave out fields OpenAI sends).

use crate::chat::{ChatRequest, ChatResponse, FinishReason, Message, Part, Role, ToolCall, ToolChoice, Usage};
use serde::Deserialize;
use serde_json::{Map, Value, json};

/// The request body.
pub(crate) fn request_body(request: &ChatRequest, stream: bool) -> Value {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if let Some(system) = &request.system {
        messages.push(json!({"role": "system", "content": system}));
    }
    for message in &request.messages {
        push_message(&mut messages, message);
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    body.insert("messages".into(), Value::Array(messages));
    if !request.tools.is_empty() {
        let tools = request.tools.iter().map(|tool| {
            json!({"type": "function", "function": {
                "name": tool.name, "description": tool.description, "parameters": tool.parameters,
            }})
        });
        body.insert("tools".into(), Value::Array(tools.collect()));
        let choice = match &request.tool_choice {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::None => json!("none"),
            ToolChoice::Required => json!("required"),
            ToolChoice::Tool(name) => json!({"type": "function", "function": {"name": name}}),
        };
        body.insert("tool_choice".into(), choice);
    }
    if let Some(max) = request.max_tokens {
        body.insert("max_tokens".into(), json!(max));
    }
    if let Some(temperature) = request.temperature {
        body.insert("temperature".into(), json!(temperature));
    }
    if stream {
        body.insert("stream".into(), json!(true));
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    Value::Object(body)
}

/// One of agentry's messages as OpenAI's: tool results become one `tool` message each.
fn push_message(out: &mut Vec<Value>, message: &Message) {
    match message.role {
        Role::User => out.push(json!({"role": "user", "content": message.text()})),
        Role::Assistant => {
            let calls: Vec<Value> = message
                .tool_calls()
                .map(|call| {
                    json!({"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}})
                })
                .collect();
            // Text, even empty beside tool calls: OpenAI takes `null` there, llama.cpp's server only a string.
            let mut entry = json!({"role": "assistant", "content": message.text()});
            if !calls.is_empty() {
                entry["tool_calls"] = Value::Array(calls);
            }
            out.push(entry);
        }
        Role::Tool => {
            for part in &message.parts {
                if let Part::ToolResult(result) = part {
                    // OpenAI has no error flag on a tool message: the model reads it in the content.
                    let content =
                        if result.is_error { format!("error: {}", result.content) } else { result.content.clone() };
                    out.push(json!({"role": "tool", "tool_call_id": result.call_id, "content": content}));
                }
            }
        }
    }
}

/// A whole (not streamed) answer.
#[derive(Debug, Deserialize)]
pub(crate) struct Completion {
    #[serde(default)]
    model: String,
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Debug, Deserialize)]
struct Choice {
    message: WireMessage,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct WireMessage {
    #[serde(default)]
    content: Option<String>,
    /// Servers send `null` as often as they leave it out.
    #[serde(default)]
    tool_calls: Option<Vec<WireCall>>,
}

#[derive(Debug, Deserialize)]
struct WireCall {
    #[serde(default)]
    id: Option<String>,
    function: WireFunction,
}

#[derive(Debug, Deserialize)]
struct WireFunction {
    #[serde(default)]
    name: String,
    #[serde(default)]
    arguments: Option<Value>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
pub(crate) struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

impl From<WireUsage> for Usage {
    fn from(usage: WireUsage) -> Self {
        Usage::new(usage.prompt_tokens, usage.completion_tokens)
    }
}

/// Arguments as text: OpenAI sends a JSON string; some servers send the object itself.
fn arguments_text(arguments: Option<Value>) -> String {
    match arguments {
        Some(Value::String(text)) => text,
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// The finish reason a provider named.
pub(crate) fn finish_reason(reason: Option<&str>, has_calls: bool) -> FinishReason {
    match reason {
        Some("stop") | None if has_calls => FinishReason::ToolCalls,
        Some("stop") | None => FinishReason::Stop,
        Some("length") => FinishReason::Length,
        Some("tool_calls" | "function_call") => FinishReason::ToolCalls,
        Some("content_filter") => FinishReason::ContentFilter,
        Some(other) => FinishReason::Other(other.to_owned()),
    }
}

impl Completion {
    /// The answer in agentry's terms; a completion with no choice is malformed.
    pub(crate) fn into_response(self) -> Result<ChatResponse, String> {
        let choice = self.choices.into_iter().next().ok_or("the completion has no choices")?;
        let mut parts = Vec::new();
        if let Some(text) = choice.message.content.filter(|t| !t.is_empty()) {
            parts.push(Part::Text { text });
        }
        for (n, call) in choice.message.tool_calls.unwrap_or_default().into_iter().enumerate() {
            let id = call.id.filter(|id| !id.is_empty()).unwrap_or_else(|| format!("call_{n}"));
            let arguments = arguments_text(call.function.arguments);
            parts.push(Part::ToolCall(ToolCall { id, name: call.function.name, arguments }));
        }
        let has_calls = parts.iter().any(|p| matches!(p, Part::ToolCall(_)));
        Ok(ChatResponse {
            finish: finish_reason(choice.finish_reason.as_deref(), has_calls),
            message: Message { role: Role::Assistant, parts },
            usage: self.usage.map(Usage::from).unwrap_or_default(),
            model: self.model,
        })
    }
}

/// One streamed chunk.
#[derive(Debug, Deserialize)]
pub(crate) struct Chunk {
    #[serde(default)]
    pub(crate) model: Option<String>,
    #[serde(default)]
    pub(crate) choices: Vec<ChunkChoice>,
    #[serde(default)]
    pub(crate) usage: Option<WireUsage>,
    #[serde(default)]
    pub(crate) error: Option<Value>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ChunkChoice {
    #[serde(default)]
    pub(crate) delta: ChunkDelta,
    #[serde(default)]
    pub(crate) finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct ChunkDelta {
    #[serde(default)]
    pub(crate) content: Option<String>,
    #[serde(default)]
    pub(crate) tool_calls: Option<Vec<ChunkCall>>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ChunkCall {
    #[serde(default)]
    pub(crate) index: Option<usize>,
    #[serde(default)]
    pub(crate) id: Option<String>,
    #[serde(default)]
    pub(crate) function: Option<ChunkFunction>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ChunkFunction {
    #[serde(default)]
    pub(crate) name: Option<String>,
    #[serde(default)]
    pub(crate) arguments: Option<Value>,
}

impl ChunkFunction {
    pub(crate) fn arguments_text(&mut self) -> String {
        arguments_text(self.arguments.take())
    }
}
