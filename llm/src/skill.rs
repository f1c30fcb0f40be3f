//! A model call as an action: the skill `llm.<name>` with the action `llm.<name>.chat`, which asks a
//! [`ChatModel`] and answers with what it said. Being an action, a model call is journaled, timed out, retried
//! and costed like any run; its answer reaches the agent as the run's outcome, so a replay reads the answer
//! from the journal instead of asking the model again.

use crate::chat::{ChatRequest, ChatResponse, Message, ToolChoice, ToolDef};
use crate::model::ChatModel;
use crate::retry::RetryPolicy;
use agentry::action::{ActionError, ActionSpec, DynAction, LogLevel};
use agentry::id::ActionId;
use agentry::pattern::Pattern;
use agentry::skill::{BuildError, Skill};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

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
    tools: Vec<ActionSpec>,
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
            retry: RetryPolicy::default(),
            timeout: Duration::from_secs(300),
        }
    }

    /// The actions of these skills may be offered to the model as tools (each call still goes through the
    /// agent's gate: offering a tool grants nothing).
    pub fn tools(mut self, skills: &[&Skill]) -> Self {
        for skill in skills {
            self.tools.extend(skill.actions().iter().map(|action| action.spec().clone()));
        }
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
        let ModelSkill { name, model, tools, retry, timeout } = self;
        let spec = ActionSpec::new(
            Self::action_id(&name)?.as_str(),
            format!("Asks the language model `{name}` ({}) what comes next in a conversation.", model.provider()),
        )?
        .params::<ModelCall>()
        .timeout(timeout)
        // A model call changes nothing outside: asking again after a crash is safe (and costs tokens).
        .side_effects(false)
        .retry(agentry::action::RetryPolicy::never());
        let tools: Arc<[ActionSpec]> = tools.into();
        let action = DynAction::new(spec, move |params, ctx| {
            let model = model.clone();
            let tools = tools.clone();
            Box::pin(async move {
                let call: ModelCall = serde_json::from_value(params).map_err(|e| {
                    ActionError::validation(format!("the model call's params: {e}; expected a conversation"))
                })?;
                let offered = offer(&tools, &call.offer)?;
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
                let answer = crate::complete(&*model, &request, &on_delta, retry, ctx.seed())
                    .await
                    .map_err(crate::action_error)?;
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

/// The tools offered: the known actions whose ids match one of the patterns, described for a model.
fn offer(tools: &[ActionSpec], patterns: &[String]) -> Result<Vec<ToolDef>, ActionError> {
    let patterns: Vec<Pattern> = patterns
        .iter()
        .map(|p| Pattern::new(p).map_err(|e| ActionError::validation(format!("tool pattern `{p}`: {e}"))))
        .collect::<Result<_, _>>()?;
    let mut offered: Vec<ToolDef> = Vec::new();
    for spec in tools {
        if !patterns.iter().any(|p| p.matches(spec.id.as_str()))
            || offered.iter().any(|t| t.name == spec.id.tool_name())
        {
            continue;
        }
        let described = agentry::tool::openai(spec);
        let function = &described["function"];
        offered.push(ToolDef {
            name: spec.id.tool_name(),
            description: spec.description.clone(),
            parameters: function.get("parameters").cloned().unwrap_or_else(|| json!({"type": "object"})),
        });
    }
    Ok(offered)
}
