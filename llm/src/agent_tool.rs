//! Another agent offered to a model as a tool: the skill `agent.<name>` with the action `agent.<name>.ask`,
//! whose run sends the other agent a message and waits for its reply. The call is a run of the asking agent like
//! any, so its gate, policy and approval decide it (a policy that denies `agent.**` keeps a model from
//! delegating).

use crate::agent::ASK;
use agentry::action::{ActionError, ActionSpec, DynAction, Risk};
use agentry::id::AgentId;
use agentry::runtime::Runtime;
use agentry::signal::Signal;
use agentry::skill::{BuildError, Skill};
use serde_json::{Value, json};
use std::time::Duration;

/// Builds the skill that offers one agent as a tool.
#[derive(Debug, Clone)]
pub struct AgentTool {
    name: String,
    agent: AgentId,
    description: String,
    kind: String,
    timeout: Duration,
}

impl AgentTool {
    /// The tool `agent.<name>.ask`, asking `agent`; `description` tells the model what it is good for.
    pub fn new(name: impl Into<String>, agent: AgentId, description: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            agent,
            description: description.into(),
            kind: ASK.to_owned(),
            timeout: Duration::from_secs(300),
        }
    }

    /// The kind of the signal the agent is sent (default [`ASK`], what an LLM agent answers).
    pub fn kind(mut self, kind: impl Into<String>) -> Self {
        self.kind = kind.into();
        self
    }

    /// How long to wait for the agent's reply (default 5 minutes).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The skill, asking through `runtime`.
    pub fn build(self, runtime: Runtime) -> Result<Skill, BuildError> {
        let AgentTool { name, agent, description, kind, timeout } = self;
        let schema = json!({
            "type": "object",
            "properties": {"text": {"type": "string", "description": "What to ask the agent."}},
            "required": ["text"],
        });
        let spec = ActionSpec::new(format!("agent.{name}.ask").as_str(), description)?
            .params_schema(schema)
            // The other agent may do anything its own policy lets it.
            .side_effects(true)
            .risk(Risk::Medium)
            .timeout(timeout + Duration::from_secs(1));
        let action = DynAction::new(spec, move |params, _ctx| {
            let (runtime, agent, kind) = (runtime.clone(), agent.clone(), kind.clone());
            Box::pin(async move {
                let signal = Signal::new(kind.as_str(), json!({"text": params["text"]}))
                    .map_err(|e| ActionError::critical(format!("the signal kind `{kind}`: {e}")))?;
                let reply = runtime.call(&agent, signal, timeout).await.map_err(|e| match e {
                    agentry::runtime::RuntimeError::Timeout { .. } => ActionError::transient(e.to_string()),
                    other => ActionError::reported(other.to_string()),
                })?;
                answer(reply)
            })
        })?;
        Skill::builder(format!("agent.{name}").as_str(), "1.0.0")
            .description("Another agent, asked as a tool.")
            .dyn_action(action)
            .build()
    }
}

/// An LLM agent's reply as the tool's result: its text, or, when it stopped, why (a failure the model reads).
/// Any other agent's reply is the result as it is.
fn answer(reply: Value) -> Result<Value, ActionError> {
    match reply["status"].as_str() {
        Some("answered") => Ok(reply["text"].clone()),
        Some("stopped") => Err(ActionError::reported(
            reply["error"].as_str().unwrap_or("the agent stopped without an answer").to_owned(),
        )),
        _ => Ok(reply),
    }
}
