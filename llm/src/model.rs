//! The one trait a language model implements for agentry.

use crate::chat::{ChatRequest, ChatResponse, Delta};
use crate::error::ModelError;
use std::future::Future;
use std::pin::Pin;

/// Where the pieces of a streamed answer go as they arrive (text as it is written, tool calls as they begin).
pub type DeltaSink<'a> = &'a (dyn Fn(Delta) + Send + Sync);

/// What a model call returns.
pub type ModelFuture<'a> = Pin<Box<dyn Future<Output = Result<ChatResponse, ModelError>> + Send + 'a>>;

/// A chat model: takes a conversation and the tools offered, answers with text and tool calls. Everything
/// crosses it as agentry's own types ([`crate::chat`]); a provider's wire format stays inside its client.
///
/// A streaming client hands each piece to `on_delta` as it arrives and returns the whole answer at the end,
/// with every tool call's argument fragments assembled; a client that does not stream never calls it.
pub trait ChatModel: Send + Sync {
    /// The provider, for logs and spans (`openai`, `anthropic`, ...).
    fn provider(&self) -> &str;

    /// Asks the model.
    fn complete<'a>(&'a self, request: &'a ChatRequest, on_delta: DeltaSink<'a>) -> ModelFuture<'a>;
}

/// Reads the API key from the environment variable `var` (keys are never written in files).
pub fn key_from_env(var: &str) -> Result<String, ModelError> {
    match std::env::var(var) {
        Ok(key) if !key.trim().is_empty() => Ok(key.trim().to_owned()),
        _ => Err(ModelError::MissingKey(var.to_owned())),
    }
}
