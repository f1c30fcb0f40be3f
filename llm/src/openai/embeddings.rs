//! Embeddings from an OpenAI-compatible server (`/embeddings`), as a [`SemanticScorer`] for tool selection: what
//! was asked and each tool's description are embedded in one request, and each tool scores the cosine
//! similarity of its embedding to the question's.

use super::OpenAiConfig;
use crate::chat::ToolDef;
use crate::error::ModelError;
use crate::http;
use crate::model::key_from_env;
use crate::select::{SemanticScorer, Similarities, cosine};
use serde::Deserialize;
use serde_json::json;

/// An embeddings client scoring tools by meaning.
pub struct Embeddings {
    config: OpenAiConfig,
    model: String,
    key: Option<String>,
    client: reqwest::Client,
}

impl std::fmt::Debug for Embeddings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embeddings").field("config", &self.config).field("model", &self.model).finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct Answer {
    data: Vec<Embedded>,
}

#[derive(Deserialize)]
struct Embedded {
    #[serde(default)]
    index: Option<usize>,
    embedding: Vec<f64>,
}

impl Embeddings {
    /// A client of the server `config` names (its base URL and key), embedding with `model`.
    pub fn new(config: OpenAiConfig, model: impl Into<String>) -> Result<Self, ModelError> {
        let key = config.api_key_env.as_deref().map(key_from_env).transpose()?;
        Ok(Self { config, model: model.into(), key, client: crate::client()? })
    }

    async fn similarities_of(&self, query: &str, tools: &[ToolDef]) -> Result<Vec<f64>, ModelError> {
        let mut input = vec![query.to_owned()];
        input.extend(tools.iter().map(|t| format!("{}: {}", t.name, t.description)));
        let mut post = self
            .client
            .post(http::join(&self.config.base_url, "embeddings"))
            .json(&json!({"model": self.model, "input": input}));
        if let Some(key) = &self.key {
            post = post.bearer_auth(key);
        }
        let response = http::send(post, |_, _| false).await?;
        let bytes = response.bytes().await.map_err(|e| ModelError::Transport(http::error_chain(&e)))?;
        let answer: Answer = serde_json::from_slice(&bytes).map_err(|e| ModelError::Malformed(e.to_string()))?;
        if answer.data.len() != input.len() {
            let got = answer.data.len();
            return Err(ModelError::Malformed(format!("{got} embeddings for {} inputs", input.len())));
        }
        let mut vectors: Vec<(usize, Vec<f64>)> =
            answer.data.into_iter().enumerate().map(|(n, e)| (e.index.unwrap_or(n), e.embedding)).collect();
        vectors.sort_by_key(|(index, _)| *index);
        let (question, tools) = vectors.split_first().ok_or_else(|| ModelError::Malformed("no embeddings".into()))?;
        Ok(tools.iter().map(|(_, v)| cosine(&question.1, v)).collect())
    }
}

impl SemanticScorer for Embeddings {
    fn similarities<'a>(&'a self, query: &'a str, tools: &'a [ToolDef]) -> Similarities<'a> {
        Box::pin(crate::within(self.config.timeout, self.similarities_of(query, tools)))
    }
}
