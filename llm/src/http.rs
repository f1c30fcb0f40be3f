//! What both providers' clients share: sending a request, and sorting an HTTP failure into a [`ModelError`].

use crate::error::ModelError;
use crate::retry::parse_retry_after;
use serde_json::Value;

/// The most of an error body read (a provider's error is a short JSON object).
const MAX_ERROR_BODY: usize = 64 * 1024;

/// How a provider marks an exhausted quota in an error body (it is not told apart by status alone).
pub(crate) type QuotaMark = fn(status: u16, error: &Value) -> bool;

/// Sends `request`; a non-success status becomes the error it means.
pub(crate) async fn send(request: reqwest::RequestBuilder, quota: QuotaMark) -> Result<reqwest::Response, ModelError> {
    let response = request.send().await.map_err(|e| ModelError::Transport(error_chain(&e)))?;
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let retry_after = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| parse_retry_after(v, chrono::Utc::now()));
    let mut body = response.bytes().await.unwrap_or_default().to_vec();
    body.truncate(MAX_ERROR_BODY);
    let error: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let message = error_message(&error).unwrap_or_else(|| String::from_utf8_lossy(&body).chars().take(500).collect());
    Err(status_error(status.as_u16(), retry_after, message, quota(status.as_u16(), &error)))
}

/// The provider's message in an error body (`{"error": {"message": ...}}`, as both providers write it).
pub(crate) fn error_message(error: &Value) -> Option<String> {
    let inner = error.get("error").unwrap_or(error);
    inner.get("message").and_then(Value::as_str).or_else(|| inner.as_str()).map(str::to_owned)
}

/// The error an HTTP status means.
pub(crate) fn status_error(
    status: u16,
    retry_after: Option<std::time::Duration>,
    message: String,
    quota: bool,
) -> ModelError {
    match status {
        _ if quota => ModelError::QuotaExhausted { message },
        402 => ModelError::QuotaExhausted { message },
        401 | 403 => ModelError::Unauthorized { status, message },
        429 => ModelError::RateLimited { message, retry_after },
        408 | 500..=599 => ModelError::Unavailable { status, message, retry_after },
        _ => ModelError::Rejected { status, message },
    }
}

/// An error with its sources, on one line.
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// A base URL joined with a path, with one slash between them.
pub(crate) fn join(base: &str, path: &str) -> String {
    format!("{}/{}", base.trim_end_matches('/'), path.trim_start_matches('/'))
}
