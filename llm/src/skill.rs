//! A model call as an action: the skill `llm.<name>` with the action `llm.<name>.chat`, which asks a
//! [`ChatModel`] and answers with what it said. Being an action, a model call is journaled, timed out, retried
//! and costed like any run; its answer reaches the agent as the run's outcome, so a replay reads the answer
//! from the journal instead of asking the model again.

use crate::chat::{ChatRequest, ChatResponse, Message, ToolChoice, ToolDef};
use crate::model::ChatModel;
use crate::retry::RetryPolicy;
use crate::select::{self, Candidate, SemanticScorer};
use agentry::action::{ActionError, ActionSpec, DynAction, LogLevel};
use agentry::id::ActionId;
use agentry::pattern::Pattern;
use agentry::skill::{BuildError, Skill};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tracing::Instrument;

/// What the agent asks the model action (its params).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ModelCall {
    /// The model's name at the provider.
    pub model: String,
    /// Instructions that stand before the conversation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// The conversation so far.
    pub messages: Vec<Message>,
    /// Patterns of the action ids the model may be offered as tools (`fs.*`); none: no tools.
    #[serde(default)]
    pub offer: Vec<String>,
    /// Whether a tool must be called.
    #[serde(default)]
    pub tool_choice: ToolChoice,
    /// The most tokens the answer may take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// The most tools offered for the turn: the best by the skill matcher ([`crate::select`]); none: every tool
    /// the patterns allow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tools: Option<usize>,
}

/// What the model action answers (its output): the model's answer, and the tools it was offered, by name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelAnswer {
    /// The answer.
    #[serde(flatten)]
    pub response: ChatResponse,
    /// The names of the tools it was offered.
    pub offered: Vec<String>,
}

/// Builds the skill of one model: `ModelSkill::new("local", model).tools(&[&fs_skill]).build()`.
pub struct ModelSkill {
    name: String,
    model: Arc<dyn ChatModel>,
    tools: Vec<(ActionSpec, Vec<String>)>,
    semantic: Option<Arc<dyn SemanticScorer>>,
    retry: RetryPolicy,
    timeout: Duration,
}

impl ModelSkill {
    /// The skill `llm.<name>` asking `model`.
    pub fn new(name: impl Into<String>, model: Arc<dyn ChatModel>) -> Self {
        Self {
            name: name.into(),
            model,
            tools: Vec::new(),
            semantic: None,
            retry: RetryPolicy::default(),
            timeout: Duration::from_secs(300),
        }
    }

    /// The actions of these skills may be offered to the model as tools (each call still goes through the
    /// agent's gate: offering a tool grants nothing).
    pub fn tools(mut self, skills: &[&Skill]) -> Self {
        for skill in skills {
            let tags = skill.tags().to_vec();
            self.tools.extend(skill.actions().iter().map(|action| (action.spec().clone(), tags.clone())));
        }
        self
    }

    /// Adds a semantic score to the skill matcher's (the similarity of what was asked to each tool, from
    /// embeddings), for turns that offer the model only its best tools (`max_tools`).
    pub fn semantic(mut self, scorer: Arc<dyn SemanticScorer>) -> Self {
        self.semantic = Some(scorer);
        self
    }

    /// How a failed model call is tried again inside one run (default [`RetryPolicy::default`]).
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// How long one model call may take, retries included (default 5 minutes).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The action id of the model call: `llm.<name>.chat`.
    pub fn action_id(name: &str) -> Result<ActionId, agentry::id::IdError> {
        ActionId::new(format!("llm.{name}.chat"))
    }

    /// The skill.
    pub fn build(self) -> Result<Skill, BuildError> {
        let ModelSkill { name, model, tools, semantic, retry, timeout } = self;
        let spec = ActionSpec::new(
            Self::action_id(&name)?.as_str(),
            format!("Asks the language model `{name}` ({}) what comes next in a conversation.", model.provider()),
        )?
        .params::<ModelCall>()
        .timeout(timeout)
        // A model call changes nothing outside: asking again after a crash is safe (and costs tokens).
        .side_effects(false)
        .retry(agentry::action::RetryPolicy::never());
        let tools: Arc<[(ActionSpec, Vec<String>)]> = tools.into();
        let action = DynAction::new(spec, move |params, ctx| {
            let model = model.clone();
            let tools = tools.clone();
            let semantic = semantic.clone();
            Box::pin(async move {
                let call: ModelCall = serde_json::from_value(params).map_err(|e| {
                    ActionError::validation(format!("the model call's params: {e}; expected a conversation"))
                })?;
                let mut offered = offer(&tools, &call.offer)?;
                if let Some(max) = call.max_tools.filter(|max| *max < offered.len()) {
                    offered = choose(offered, max, &call.messages, semantic.as_deref(), &ctx).await;
                }
                let offered: Vec<ToolDef> = offered.into_iter().map(|c| c.tool).collect();
                let request = ChatRequest {
                    model: call.model,
                    system: call.system,
                    messages: call.messages,
                    tools: offered.clone(),
                    tool_choice: if offered.is_empty() { ToolChoice::Auto } else { call.tool_choice },
                    max_tokens: call.max_tokens,
                    temperature: None,
                };
                // Text reaches the event stream as it is written; a tool call is named as it begins (its
                // arguments are assembled before anything runs).
                let on_delta = |delta: crate::chat::Delta| match delta {
                    crate::chat::Delta::Text { text } => ctx.output(text),
                    crate::chat::Delta::ToolCall { name, .. } => {
                        ctx.log(LogLevel::Debug, format!("the model calls `{name}`"));
                    }
                };
                // A span per model call, with the OpenTelemetry GenAI conventions' attribute names.
                let span = tracing::info_span!(
                    "chat",
                    "gen_ai.operation.name" = "chat",
                    "gen_ai.provider.name" = model.provider(),
                    "gen_ai.request.model" = request.model.as_str(),
                    "gen_ai.response.model" = tracing::field::Empty,
                    "gen_ai.usage.input_tokens" = tracing::field::Empty,
                    "gen_ai.usage.output_tokens" = tracing::field::Empty,
                    "gen_ai.response.finish_reasons" = tracing::field::Empty,
                    "error.type" = tracing::field::Empty,
                );
                let answer =
                    crate::complete(&*model, &request, &on_delta, retry, ctx.seed()).instrument(span.clone()).await;
                let answer = match answer {
                    Ok(answer) => answer,
                    Err(error) => {
                        span.record("error.type", error.kind());
                        return Err(crate::action_error(error));
                    }
                };
                span.record("gen_ai.response.model", answer.model.as_str());
                // As signed integers: exporters take u64 past i64's range as text.
                span.record("gen_ai.usage.input_tokens", i64::try_from(answer.usage.input_tokens).unwrap_or(i64::MAX));
                span.record(
                    "gen_ai.usage.output_tokens",
                    i64::try_from(answer.usage.output_tokens).unwrap_or(i64::MAX),
                );
                span.record("gen_ai.response.finish_reasons", finish_name(&answer.finish));
                ctx.cost(answer.usage.total() as f64);
                let offered = offered.into_iter().map(|tool| tool.name).collect();
                serde_json::to_value(ModelAnswer { response: answer, offered })
                    .map_err(|e| ActionError::critical(format!("the answer could not be written: {e}")))
            })
        })?;
        Skill::builder(format!("llm.{name}").as_str(), "1.0.0")
            .description("A language model, asked through the gate like any action.")
            .dyn_action(action)
            .build()
    }
}

/// The tools offered: the known actions whose ids match one of the patterns, described for a model, with their
/// skills' tags.
fn offer(tools: &[(ActionSpec, Vec<String>)], patterns: &[String]) -> Result<Vec<Candidate>, ActionError> {
    let patterns: Vec<Pattern> = patterns
        .iter()
        .map(|p| Pattern::new(p).map_err(|e| ActionError::validation(format!("tool pattern `{p}`: {e}"))))
        .collect::<Result<_, _>>()?;
    let mut offered: Vec<Candidate> = Vec::new();
    for (spec, tags) in tools {
        let name = spec.id.tool_name();
        if !patterns.iter().any(|p| p.matches(spec.id.as_str())) || offered.iter().any(|c| c.tool.name == name) {
            continue;
        }
        let described = agentry::tool::openai(spec);
        let parameters = described["function"].get("parameters").cloned().unwrap_or_else(|| json!({"type": "object"}));
        let tool = ToolDef { name, description: spec.description.clone(), parameters };
        offered.push(Candidate { tool, tags: tags.clone() });
    }
    Ok(offered)
}

/// The best `max` tools for the turn (what the user last asked, and since), with the scores noted on the event
/// stream (`tools_offered`). A semantic scorer that fails leaves the other scores to decide.
async fn choose(
    candidates: Vec<Candidate>,
    max: usize,
    messages: &[Message],
    semantic: Option<&dyn SemanticScorer>,
    ctx: &agentry::action::ActionContext,
) -> Vec<Candidate> {
    let asked = messages.iter().rposition(|m| m.role == crate::chat::Role::User).unwrap_or(0);
    let query: String = messages[asked..].iter().map(|m| m.text()).collect::<Vec<_>>().join(" ");
    let mut scores = select::score(&query, &candidates);
    if let Some(scorer) = semantic {
        let tools: Vec<ToolDef> = candidates.iter().map(|c| c.tool.clone()).collect();
        match scorer.similarities(&query, &tools).await {
            Ok(similarities) => select::add_semantic(&mut scores, &similarities),
            Err(error) => ctx.log(LogLevel::Warning, format!("the semantic scorer failed, keywords decide: {error}")),
        }
    }
    let chosen = select::best(&scores, max);
    ctx.note("tools_offered", json!({"offered": chosen, "scores": scores}));
    let mut candidates = candidates;
    candidates.retain(|c| chosen.contains(&c.tool.name));
    candidates.sort_by_key(|c| chosen.iter().position(|name| *name == c.tool.name));
    candidates
}

/// A finish reason as the GenAI conventions name it.
fn finish_name(finish: &crate::chat::FinishReason) -> &str {
    use crate::chat::FinishReason;
    match finish {
        FinishReason::Stop => "stop",
        FinishReason::Length => "length",
        FinishReason::ToolCalls => "tool_calls",
        FinishReason::ContentFilter => "content_filter",
        FinishReason::Other(other) => other.as_str(),
    }
}
