//! Anthropic's Messages API, natively: content blocks (text, `tool_use`, `tool_result` with `is_error`), and
//! its streaming events (`message_start`, `content_block_*`, `message_delta`, `error`).

use crate::assembly::Assembly;
use crate::chat::{ChatRequest, ChatResponse, FinishReason, Message, Part, Role, ToolCall, ToolChoice, Usage};
use crate::error::ModelError;
use crate::http;
use crate::model::{ChatModel, DeltaSink, ModelFuture, key_from_env};
use futures_util::StreamExt;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::time::Duration;

/// The API version agentry speaks (`anthropic-version`).
pub const API_VERSION: &str = "2023-06-01";

/// How to reach Anthropic.
#[derive(Debug, Clone, PartialEq)]
pub struct AnthropicConfig {
    /// The API's base URL (`https://api.anthropic.com`).
    pub base_url: String,
    /// The environment variable that holds the API key.
    pub api_key_env: String,
    /// Whether to stream answers.
    pub stream: bool,
    /// The longest a call may take, streaming included.
    pub timeout: Duration,
    /// The answer's token limit when a request sets none (the API requires one).
    pub default_max_tokens: u32,
}

impl Default for AnthropicConfig {
    fn default() -> Self {
        Self {
            base_url: "https://api.anthropic.com".to_owned(),
            api_key_env: "ANTHROPIC_API_KEY".to_owned(),
            stream: true,
            timeout: Duration::from_secs(300),
            default_max_tokens: 4_096,
        }
    }
}

/// A client of Anthropic's Messages API.
pub struct Anthropic {
    config: AnthropicConfig,
    key: String,
    client: reqwest::Client,
}

impl std::fmt::Debug for Anthropic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Anthropic").field("config", &self.config).finish_non_exhaustive()
    }
}

impl Anthropic {
    /// A client; reads its key from the environment now.
    pub fn new(config: AnthropicConfig) -> Result<Self, ModelError> {
        let key = key_from_env(&config.api_key_env)?;
        Ok(Self { config, key, client: crate::client()? })
    }

    async fn attempt(&self, request: &ChatRequest, on_delta: DeltaSink<'_>) -> Result<ChatResponse, ModelError> {
        let body = request_body(request, self.config.stream, self.config.default_max_tokens);
        let post = self
            .client
            .post(http::join(&self.config.base_url, "v1/messages"))
            .header("x-api-key", &self.key)
            .header("anthropic-version", API_VERSION)
            .json(&body);
        let response = http::send(post, quota_exhausted).await?;
        if !self.config.stream {
            let bytes = response.bytes().await.map_err(|e| ModelError::Transport(http::error_chain(&e)))?;
            let answer: WireMessage =
                serde_json::from_slice(&bytes).map_err(|e| ModelError::Malformed(e.to_string()))?;
            return Ok(answer.into_response());
        }
        read_stream(response, on_delta, crate::window::estimate_request(request)).await
    }
}

impl ChatModel for Anthropic {
    fn provider(&self) -> &str {
        "anthropic"
    }

    fn complete<'a>(&'a self, request: &'a ChatRequest, on_delta: DeltaSink<'a>) -> ModelFuture<'a> {
        Box::pin(crate::within(self.config.timeout, self.attempt(request, on_delta)))
    }
}

/// Anthropic says a billing problem with `billing_error` (or status 402).
fn quota_exhausted(status: u16, error: &Value) -> bool {
    let kind = error.get("error").and_then(|e| e.get("type")).and_then(Value::as_str);
    status == 402 || kind == Some("billing_error")
}

/// The request body.
pub(crate) fn request_body(request: &ChatRequest, stream: bool, default_max_tokens: u32) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    body.insert("max_tokens".into(), json!(request.max_tokens.unwrap_or(default_max_tokens)));
    if let Some(system) = &request.system {
        body.insert("system".into(), json!(system));
    }
    let messages = request.messages.iter().map(message).collect();
    body.insert("messages".into(), Value::Array(messages));
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|tool| json!({"name": tool.name, "description": tool.description, "input_schema": tool.parameters}));
        body.insert("tools".into(), Value::Array(tools.collect()));
        let choice = match &request.tool_choice {
            ToolChoice::Auto => json!({"type": "auto"}),
            ToolChoice::None => json!({"type": "none"}),
            ToolChoice::Required => json!({"type": "any"}),
            ToolChoice::Tool(name) => json!({"type": "tool", "name": name}),
        };
        body.insert("tool_choice".into(), choice);
    }
    if let Some(temperature) = request.temperature {
        body.insert("temperature".into(), json!(temperature));
    }
    if stream {
        body.insert("stream".into(), json!(true));
    }
    Value::Object(body)
}

/// One of agentry's messages as Anthropic's: tool results are a user message of `tool_result` blocks.
fn message(message: &Message) -> Value {
    let role = match message.role {
        Role::Assistant => "assistant",
        Role::User | Role::Tool => "user",
    };
    let blocks = message.parts.iter().map(|part| match part {
        Part::Text { text } => json!({"type": "text", "text": text}),
        Part::ToolCall(call) => {
            // A call whose arguments were not an object was answered with an error; it is shown as empty.
            let input = call.parsed_arguments().unwrap_or_else(|_| json!({}));
            json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input})
        }
        Part::ToolResult(result) => json!({
            "type": "tool_result", "tool_use_id": result.call_id, "content": result.content, "is_error": result.is_error,
        }),
    });
    json!({"role": role, "content": blocks.collect::<Vec<_>>()})
}

/// A whole answer (and, in `message_start`, the start of a streamed one).
#[derive(Debug, Deserialize)]
struct WireMessage {
    #[serde(default)]
    model: String,
    #[serde(default)]
    content: Vec<Block>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: WireUsage,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block {
    Text {
        #[serde(default)]
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Option<Value>,
    },
    #[serde(other)]
    Other,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
}

fn finish_reason(reason: Option<&str>, has_calls: bool) -> FinishReason {
    match reason {
        Some("end_turn" | "stop_sequence") | None if has_calls => FinishReason::ToolCalls,
        Some("end_turn" | "stop_sequence") | None => FinishReason::Stop,
        Some("max_tokens") => FinishReason::Length,
        Some("tool_use") => FinishReason::ToolCalls,
        Some("refusal") => FinishReason::ContentFilter,
        Some(other) => FinishReason::Other(other.to_owned()),
    }
}

impl WireMessage {
    fn into_response(self) -> ChatResponse {
        let mut parts = Vec::new();
        for block in self.content {
            match block {
                Block::Text { text } if !text.is_empty() => parts.push(Part::Text { text }),
                Block::ToolUse { id, name, input } => {
                    let arguments = input.map_or_else(|| "{}".to_owned(), |input| input.to_string());
                    parts.push(Part::ToolCall(ToolCall { id, name, arguments }));
                }
                Block::Text { .. } | Block::Other => {}
            }
        }
        let has_calls = parts.iter().any(|p| matches!(p, Part::ToolCall(_)));
        ChatResponse {
            finish: finish_reason(self.stop_reason.as_deref(), has_calls),
            message: Message { role: Role::Assistant, parts },
            usage: Usage::new(self.usage.input_tokens.unwrap_or(0), self.usage.output_tokens.unwrap_or(0)),
            model: self.model,
        }
    }
}

/// One streamed event.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Event {
    MessageStart {
        message: WireMessage,
    },
    ContentBlockStart {
        index: usize,
        content_block: Block,
    },
    ContentBlockDelta {
        index: usize,
        delta: BlockDelta,
    },
    MessageDelta {
        #[serde(default)]
        delta: MessageDelta,
        #[serde(default)]
        usage: WireUsage,
    },
    MessageStop,
    Error {
        error: Value,
    },
    #[serde(other)]
    Other,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum BlockDelta {
    TextDelta {
        text: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    #[serde(other)]
    Other,
}

#[derive(Debug, Default, Deserialize)]
struct MessageDelta {
    #[serde(default)]
    stop_reason: Option<String>,
}

/// Reads a streamed answer.
async fn read_stream(
    response: reqwest::Response,
    on_delta: DeltaSink<'_>,
    asked_tokens: u64,
) -> Result<ChatResponse, ModelError> {
    let mut events = sse_stream::SseStream::from_bytes_stream(response.bytes_stream());
    let mut answer = Assembly::new(on_delta, asked_tokens);
    let mut stop: Option<String> = None;
    let mut stopped = false;
    while let Some(event) = events.next().await {
        let event = event.map_err(|e| ModelError::Transport(http::error_chain(&e)))?;
        let Some(data) = event.data else { continue };
        let event: Event =
            serde_json::from_str(&data).map_err(|e| ModelError::Malformed(format!("a streamed event: {e}")))?;
        match event {
            Event::MessageStart { message } => {
                answer.model = message.model;
                let usage = message.usage;
                answer.usage = Some(Usage::new(usage.input_tokens.unwrap_or(0), usage.output_tokens.unwrap_or(0)));
            }
            Event::ContentBlockStart { index, content_block } => match content_block {
                Block::Text { text } => answer.text(&text)?,
                // The input comes in `input_json_delta` fragments; a start with a whole input is taken too.
                Block::ToolUse { id, name, input } => {
                    let whole = input.filter(|i| i.as_object().is_some_and(|o| !o.is_empty()));
                    answer.call(index, Some(&id), Some(&name), &whole.map(|i| i.to_string()).unwrap_or_default())?;
                }
                Block::Other => {}
            },
            Event::ContentBlockDelta { index, delta } => match delta {
                BlockDelta::TextDelta { text } => answer.text(&text)?,
                BlockDelta::InputJsonDelta { partial_json } => answer.call(index, None, None, &partial_json)?,
                BlockDelta::Other => {}
            },
            Event::MessageDelta { delta, usage } => {
                stop = delta.stop_reason.or(stop);
                let known = answer.usage.get_or_insert_with(Usage::default);
                if let Some(output) = usage.output_tokens {
                    known.output_tokens = output;
                }
                if let Some(input) = usage.input_tokens {
                    known.input_tokens = input;
                }
            }
            Event::MessageStop => {
                stopped = true;
                break;
            }
            Event::Error { error } => return Err(stream_error(&error)),
            Event::Other => {}
        }
    }
    if !stopped {
        return Err(ModelError::Transport("the stream ended before the answer did".to_owned()));
    }
    Ok(answer.finish(|has_calls| finish_reason(stop.as_deref(), has_calls)))
}

/// An error event in the middle of a stream (`overloaded_error`, `rate_limit_error`, ...).
fn stream_error(error: &Value) -> ModelError {
    let message = http::error_message(&json!({"error": error})).unwrap_or_else(|| error.to_string());
    match error.get("type").and_then(Value::as_str) {
        Some("rate_limit_error") => ModelError::RateLimited { message, retry_after: None },
        Some("overloaded_error") => ModelError::Unavailable { status: 529, message, retry_after: None },
        Some("api_error") => ModelError::Unavailable { status: 500, message, retry_after: None },
        Some("billing_error") => ModelError::QuotaExhausted { message },
        Some("authentication_error" | "permission_error") => ModelError::Unauthorized { status: 401, message },
        _ => ModelError::Rejected { status: 400, message },
    }
}
