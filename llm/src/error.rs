//! Why a model call failed, sorted by what to do about it: wait and try again, or stop.

use std::time::Duration;

/// Why a model call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// The provider limits how fast we may call; it may say when to try again.
    #[error("the provider's rate limit was hit ({message}); retry after {}", after(*retry_after))]
    RateLimited {
        /// What the provider said.
        message: String,
        /// When it said to try again (`Retry-After`), if it did.
        retry_after: Option<Duration>,
    },
    /// The account's quota or credit is used up: trying again does not help until someone pays or waits for
    /// the next period.
    #[error("the provider's quota is exhausted ({message}); expected an account with quota left")]
    QuotaExhausted {
        /// What the provider said.
        message: String,
    },
    /// The provider is overloaded or failed on its side (5xx): it may work a little later.
    #[error("the provider failed with status {status} ({message}); retry after {}", after(*retry_after))]
    Unavailable {
        /// The HTTP status.
        status: u16,
        /// What the provider said.
        message: String,
        /// When it said to try again, if it did.
        retry_after: Option<Duration>,
    },
    /// The key was missing, wrong or not allowed (401, 403).
    #[error("the provider refused the credentials with status {status} ({message}); expected a valid API key")]
    Unauthorized {
        /// The HTTP status.
        status: u16,
        /// What the provider said.
        message: String,
    },
    /// The request itself was wrong (another 4xx): sending it again gives the same answer.
    #[error("the provider refused the request with status {status} ({message})")]
    Rejected {
        /// The HTTP status.
        status: u16,
        /// What the provider said.
        message: String,
    },
    /// The provider could not be reached, or the connection broke.
    #[error("the provider could not be reached: {0}")]
    Transport(String),
    /// The provider answered something that is not its documented format.
    #[error("the provider's answer could not be read: {0}")]
    Malformed(String),
    /// The configuration names an environment variable for the key, and it is not set.
    #[error("environment variable `{0}` holds no API key; expected it to be set to the provider's key")]
    MissingKey(String),
}

fn after(retry_after: Option<Duration>) -> String {
    retry_after.map_or_else(|| "a backoff".to_owned(), |d| format!("{} ms", d.as_millis()))
}

impl ModelError {
    /// Whether trying the same call again may work: rate limits, a provider's own failures and broken
    /// connections. Never an exhausted quota, bad credentials or a request the provider refused.
    pub fn retryable(&self) -> bool {
        matches!(self, Self::RateLimited { .. } | Self::Unavailable { .. } | Self::Transport(_))
    }

    /// The error's kind, in a word (`rate_limited`, `quota_exhausted`, ...): a span's `error.type`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::RateLimited { .. } => "rate_limited",
            Self::QuotaExhausted { .. } => "quota_exhausted",
            Self::Unavailable { .. } => "unavailable",
            Self::Unauthorized { .. } => "unauthorized",
            Self::Rejected { .. } => "rejected",
            Self::Transport(_) => "transport",
            Self::Malformed(_) => "malformed",
            Self::MissingKey(_) => "missing_key",
        }
    }

    /// When the provider said to try again, if it did.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::RateLimited { retry_after, .. } | Self::Unavailable { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}
