//! OpenAI-compatible Chat Completions: OpenAI itself, and the servers that speak its format (llama.cpp's
//! server, vLLM, Ollama), chosen by base URL.
//!
//! Written on the tree's one HTTP client (`reqwest`) with serde types of our own ([`wire`]), rather than on a
//! provider SDK: the SDKs follow OpenAI's full and changing surface, while agentry needs one endpoint and must
//! read the variants other servers send (arguments as objects, missing ids and usage) leniently.

mod embeddings;
mod wire;

pub use embeddings::Embeddings;

use crate::assembly::Assembly;
use crate::chat::{ChatRequest, ChatResponse};
use crate::error::ModelError;
use crate::http;
use crate::model::{ChatModel, DeltaSink, ModelFuture, key_from_env};
use futures_util::StreamExt;
use serde_json::Value;
use std::time::Duration;

/// How to reach an OpenAI-compatible server.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenAiConfig {
    /// The API's base URL, up to `/v1` (`https://api.openai.com/v1`, `http://127.0.0.1:8080/v1`).
    pub base_url: String,
    /// The environment variable that holds the API key; `None` for a local server that takes none.
    pub api_key_env: Option<String>,
    /// Whether to stream answers (text reaches the event stream as it is written).
    pub stream: bool,
    /// The longest a call may take, streaming included.
    pub timeout: Duration,
}

impl OpenAiConfig {
    /// A server at `base_url`, streaming, with no key.
    pub fn new(base_url: impl Into<String>) -> Self {
        Self { base_url: base_url.into(), api_key_env: None, stream: true, timeout: Duration::from_secs(300) }
    }
}

/// A client of an OpenAI-compatible server.
pub struct OpenAi {
    config: OpenAiConfig,
    key: Option<String>,
    client: reqwest::Client,
}

impl std::fmt::Debug for OpenAi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAi").field("config", &self.config).finish_non_exhaustive()
    }
}

impl OpenAi {
    /// A client; reads its key from the environment now, so a missing key is found at start, not at the first
    /// call.
    pub fn new(config: OpenAiConfig) -> Result<Self, ModelError> {
        let key = config.api_key_env.as_deref().map(key_from_env).transpose()?;
        let client = crate::client()?;
        Ok(Self { config, key, client })
    }

    async fn attempt(&self, request: &ChatRequest, on_delta: DeltaSink<'_>) -> Result<ChatResponse, ModelError> {
        let body = wire::request_body(request, self.config.stream);
        let mut post = self.client.post(http::join(&self.config.base_url, "chat/completions")).json(&body);
        if let Some(key) = &self.key {
            post = post.bearer_auth(key);
        }
        let response = http::send(post, quota_exhausted).await?;
        if !self.config.stream {
            let bytes = response.bytes().await.map_err(|e| ModelError::Transport(http::error_chain(&e)))?;
            let completion: wire::Completion =
                serde_json::from_slice(&bytes).map_err(|e| ModelError::Malformed(e.to_string()))?;
            return completion.into_response().map_err(ModelError::Malformed);
        }
        read_stream(response, on_delta, crate::window::estimate_request(request)).await
    }
}

/// OpenAI says an exhausted quota with a 429 whose code is `insufficient_quota`.
fn quota_exhausted(_status: u16, error: &Value) -> bool {
    let inner = error.get("error").unwrap_or(error);
    [inner.get("code"), inner.get("type")].into_iter().flatten().any(|v| v == "insufficient_quota")
}

/// Reads a streamed answer: chunks of text and tool-call fragments, a finish reason, usage, `[DONE]`.
async fn read_stream(
    response: reqwest::Response,
    on_delta: DeltaSink<'_>,
    asked_tokens: u64,
) -> Result<ChatResponse, ModelError> {
    let mut events = sse_stream::SseStream::from_bytes_stream(response.bytes_stream());
    let mut answer = Assembly::new(on_delta, asked_tokens);
    let mut finish: Option<String> = None;
    let mut done = false;
    while let Some(event) = events.next().await {
        let event = event.map_err(|e| ModelError::Transport(http::error_chain(&e)))?;
        let Some(data) = event.data else { continue };
        if data.trim() == "[DONE]" {
            done = true;
            break;
        }
        let chunk: wire::Chunk =
            serde_json::from_str(&data).map_err(|e| ModelError::Malformed(format!("a streamed chunk: {e}")))?;
        if let Some(error) = chunk.error {
            let message = http::error_message(&error).unwrap_or_else(|| error.to_string());
            return Err(ModelError::Unavailable { status: 200, message, retry_after: None });
        }
        if let Some(model) = chunk.model {
            answer.model = model;
        }
        if let Some(usage) = chunk.usage {
            answer.usage = Some(usage.into());
        }
        for choice in chunk.choices {
            if let Some(text) = &choice.delta.content {
                answer.text(text)?;
            }
            for (position, mut call) in choice.delta.tool_calls.unwrap_or_default().into_iter().enumerate() {
                let fragment = call.function.as_mut().map(wire::ChunkFunction::arguments_text).unwrap_or_default();
                let name = call.function.as_ref().and_then(|f| f.name.as_deref());
                answer.call(call.index.unwrap_or(position), call.id.as_deref(), name, &fragment)?;
            }
            if choice.finish_reason.is_some() {
                finish = choice.finish_reason;
            }
        }
    }
    if !done && finish.is_none() {
        return Err(ModelError::Transport("the stream ended before the answer did".to_owned()));
    }
    Ok(answer.finish(|has_calls| wire::finish_reason(finish.as_deref(), has_calls)))
}

impl ChatModel for OpenAi {
    fn provider(&self) -> &str {
        "openai"
    }

    fn complete<'a>(&'a self, request: &'a ChatRequest, on_delta: DeltaSink<'a>) -> ModelFuture<'a> {
        Box::pin(crate::within(self.config.timeout, self.attempt(request, on_delta)))
    }
}
