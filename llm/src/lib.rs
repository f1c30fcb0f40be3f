//! Language models for agentry.
//!
//! - [`chat`]: the conversation as agentry keeps it (messages, tool calls and results, usage, finish reasons,
//!   streamed pieces), the same whatever the provider and stable in the journal.
//! - [`ChatModel`]: the one trait a model implements; [`openai::OpenAi`] speaks OpenAI's Chat Completions
//!   (OpenAI, llama.cpp's server, vLLM, Ollama), [`anthropic::Anthropic`] Anthropic's Messages API.
//! - [`RetryPolicy`] and [`complete`]: a call tried again only when that may help, no sooner than the provider
//!   asked (`Retry-After`), with jitter from a seed.
//!
//! ```no_run
//! # async fn demo() -> Result<(), agentry_llm::ModelError> {
//! use agentry_llm::chat::{ChatRequest, Message};
//! use agentry_llm::openai::{OpenAi, OpenAiConfig};
//! use agentry_llm::{RetryPolicy, complete};
//! let model = OpenAi::new(OpenAiConfig::new("http://127.0.0.1:8080/v1"))?;
//! let request = ChatRequest::new("smollm2", vec![Message::user("Say hello.")]);
//! let answer = complete(&model, &request, &|delta| println!("{delta:?}"), RetryPolicy::default(), 7).await?;
//! println!("{} ({} tokens)", answer.message.text(), answer.usage.total());
//! # Ok(()) }
//! ```

pub mod agent;
pub mod agent_tool;
pub mod anthropic;
mod assembly;
pub mod chat;
mod error;
mod http;
mod model;
pub mod openai;
#[cfg(feature = "otel")]
pub mod otel;
mod retry;
pub mod select;
pub mod skill;
pub mod window;

pub use assembly::{MAX_ANSWER_BYTES, MAX_TOOL_CALLS};
pub use error::ModelError;
pub use model::{ChatModel, DeltaSink, ModelFuture, key_from_env};
pub use retry::RetryPolicy;

use chat::{ChatRequest, ChatResponse};
use std::future::Future;
use std::time::Duration;

/// Asks `model`, trying again as `retry` says; the jitter of its waits is drawn from `seed` (a run's own seed,
/// so a replay waits the same).
pub async fn complete(
    model: &dyn ChatModel,
    request: &ChatRequest,
    on_delta: DeltaSink<'_>,
    retry: RetryPolicy,
    seed: u64,
) -> Result<ChatResponse, ModelError> {
    retry.run(seed, |_attempt| model.complete(request, on_delta)).await
}

/// A model call's failure as the run's error: what may pass is transient, what will not is critical.
pub(crate) fn action_error(error: ModelError) -> agentry::action::ActionError {
    use agentry::action::ActionError;
    match &error {
        ModelError::RateLimited { .. } | ModelError::Unavailable { .. } | ModelError::Transport(_) => {
            ActionError::transient(error.to_string())
        }
        ModelError::Malformed(_) => ActionError::transient(error.to_string()),
        ModelError::QuotaExhausted { .. }
        | ModelError::Unauthorized { .. }
        | ModelError::Rejected { .. }
        | ModelError::MissingKey(_) => ActionError::critical(error.to_string()),
    }
}

/// `call`, or a transport error once `timeout` passed.
pub(crate) async fn within<T>(
    timeout: Duration,
    call: impl Future<Output = Result<T, ModelError>>,
) -> Result<T, ModelError> {
    tokio::time::timeout(timeout, call)
        .await
        .unwrap_or_else(|_| Err(ModelError::Transport(format!("no answer within {} ms", timeout.as_millis()))))
}

/// The HTTP client both providers use: rustls with the `ring` provider, the system's roots.
pub(crate) fn client() -> Result<reqwest::Client, ModelError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().build().map_err(|e| ModelError::Transport(http::error_chain(&e)))
}
