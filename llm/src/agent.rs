//! The tool-calling loop as a pure agent: [`LlmAgent`], whose state is the conversation.
//!
//! A message asked of it (a signal of kind [`ASK`], `{"text": ...}`, usually sent with `AgentRef::call`) starts
//! an exchange: the agent asks for a run of its model action (`llm.<name>.chat`, see [`crate::skill`]); the
//! model's tool calls become runs of the actions they name, each through the agent's gate, policy and approval
//! like any run; their outcomes become tool results; the model is asked again, until it answers without calling
//! a tool. The answer is the reply to the message. Nothing here does I/O: the agent returns effects, and its
//! state after every signal is plain data, snapshotted and replayed like any agent's.
//!
//! What never crashes the loop: a tool the model was not offered, arguments that are not a JSON object, params
//! the action refuses, a tool that fails or is denied. Each goes back to the model as a tool result marked as
//! an error, for it to act on. An exchange ends early, with a reply that says why, when the model was asked
//! `max_turns` times or the exchange used its token budget.
//!
//! Parallel tool calls run at once, each as its own run; calls to the same action run one after the other
//! (an outcome names its action, so one run of an action at a time lets each outcome find its call).

use crate::chat::{Message, ToolCall, ToolChoice, ToolResult, Usage};
use crate::skill::{ModelAnswer, ModelCall};
use crate::window::{ContextWindow, WindowStrategy, overflow, transcript};
use agentry::action::{OutcomeStatus, RunReport};
use agentry::agent::{Agent, Reaction};
use agentry::effect::Effect;
use agentry::id::{ActionId, SkillId};
use agentry::signal::Signal;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::VecDeque;
use uuid::Uuid;

/// The kind of a message asked of an LLM agent: `{"text": "..."}`.
pub const ASK: &str = "llm.ask";

/// What the model is asked when it summarizes the oldest messages.
pub const SUMMARY_ASK: &str = "Summarize the conversation below in a few sentences, keeping every fact, \
                               decision and result a later answer may need.";

/// What the summary stands under in the conversation.
pub const SUMMARY_PREFIX: &str = "Summary of the earlier conversation:";

/// How an LLM agent talks to its model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmConfig {
    /// The model skill to mount (`llm.<name>`): its action `llm.<name>.chat` is asked each turn.
    pub model_skill: SkillId,
    /// The model's name at the provider.
    pub model: String,
    /// Instructions that stand before the conversation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// Other skills to mount, with their mount options (the tools' skills).
    #[serde(default)]
    pub skills: Vec<(SkillId, Value)>,
    /// Patterns of the action ids offered to the model as tools (`fs.*`, `memory.get`).
    #[serde(default)]
    pub tools: Vec<String>,
    /// The most model calls in one exchange.
    #[serde(default = "default_max_turns")]
    pub max_turns: u32,
    /// The most messages kept waiting while an exchange goes on; more are refused with a reply.
    #[serde(default = "default_max_waiting")]
    pub max_waiting: usize,
    /// The most tokens (in and out, every model call of the exchange) one exchange may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_budget: Option<u64>,
    /// The most tokens one answer may take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// The most tools offered each turn, the best for it by the skill matcher; none: every tool `tools` allows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tools: Option<usize>,
    /// Whether (and which) tool the first model call of each exchange must call; later calls of the exchange
    /// leave it to the model (a small model may need the first call forced).
    #[serde(default)]
    pub first_tool_choice: ToolChoice,
    /// Whether the later model calls of an exchange may call tools (`auto` by default; `none` makes the model
    /// answer with what the tools gave it).
    #[serde(default)]
    pub later_tool_choice: ToolChoice,
    /// The conversation's limit, and what happens over it (none: it grows without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<ContextWindow>,
}

fn default_max_turns() -> u32 {
    10
}

fn default_max_waiting() -> usize {
    16
}

impl LlmConfig {
    /// A configuration asking `model` through the skill `model_skill`, with no tools, 10 turns at most.
    pub fn new(model_skill: SkillId, model: impl Into<String>) -> Self {
        Self {
            model_skill,
            model: model.into(),
            instructions: None,
            skills: Vec::new(),
            tools: Vec::new(),
            max_turns: default_max_turns(),
            max_waiting: default_max_waiting(),
            token_budget: None,
            max_tokens: None,
            max_tools: None,
            first_tool_choice: ToolChoice::Auto,
            later_tool_choice: ToolChoice::Auto,
            window: None,
        }
    }

    /// The model action: `<model_skill>.chat`.
    pub fn model_action(&self) -> Option<ActionId> {
        ActionId::new(format!("{}.chat", self.model_skill)).ok()
    }
}

/// An agent driven by a language model. Its state is the conversation and the exchange going on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmAgent {
    /// How it talks to its model.
    pub config: LlmConfig,
    /// Every message so far, oldest first.
    #[serde(default)]
    pub conversation: Vec<Message>,
    /// The exchange going on, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exchange: Option<Exchange>,
    /// Messages asked while an exchange went on, in order; each starts an exchange when the one before ends.
    #[serde(default, skip_serializing_if = "VecDeque::is_empty")]
    pub waiting: VecDeque<Asked>,
    /// Tokens used by every exchange so far.
    #[serde(default)]
    pub used: Usage,
    /// Whether it mounted its model and tools' skills.
    #[serde(default)]
    pub mounted: bool,
}

/// A message asked of the agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Asked {
    /// The signal that asked it: the reply answers it.
    pub signal: Uuid,
    /// What was asked.
    pub text: String,
}

/// One exchange: a message asked, and the model calls and tool calls it takes to answer it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Exchange {
    /// The signal to reply to.
    pub asked: Uuid,
    /// Model calls so far.
    pub model_calls: u32,
    /// Tokens used so far.
    pub used: Usage,
    /// The tool calls of the model's last answer, while they run; `None` while the model is asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Slot>>,
    /// While the model summarizes the oldest messages: how many it summarizes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summarizing: Option<usize>,
}

/// A tool call of the model's answer, and where it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Slot {
    /// The call as the model made it.
    pub call: ToolCall,
    /// Where it is.
    pub state: SlotState,
}

/// Where a tool call is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum SlotState {
    /// Waiting for the run of the same action before it.
    Queued {
        /// The action.
        action: ActionId,
        /// Its params.
        params: Value,
    },
    /// Its run was asked for.
    Running {
        /// The action.
        action: ActionId,
    },
    /// Answered.
    Done {
        /// What the model reads.
        result: ToolResult,
    },
}

impl LlmAgent {
    /// A new agent with an empty conversation.
    pub fn new(config: LlmConfig) -> Self {
        Self {
            config,
            conversation: Vec::new(),
            exchange: None,
            waiting: VecDeque::new(),
            used: Usage::default(),
            mounted: false,
        }
    }
}

impl Agent for LlmAgent {
    fn name() -> &'static str {
        "llm"
    }

    fn description() -> &'static str {
        "An agent driven by a language model: tool calls run through its gate."
    }

    fn routes() -> &'static [&'static str] {
        &[ASK]
    }

    fn handle_signal(&self, signal: &Signal) -> Reaction<Self> {
        let mut effects = Vec::new();
        if signal.kind().as_str() == ASK {
            let Some(text) = signal.data()["text"].as_str().map(str::to_owned) else {
                return refuse(
                    signal,
                    format!("an `{ASK}` signal carries `{{\"text\": string}}`, got {}", signal.data()),
                );
            };
            if self.waiting.len() >= self.config.max_waiting {
                let why = format!(
                    "{} messages already wait for the exchange going on, the most this agent keeps (`max_waiting`); \
                     ask again once it answers",
                    self.waiting.len()
                );
                return refuse(signal, why);
            }
            let mut next = self.clone();
            next.waiting.push_back(Asked { signal: signal.id(), text });
            if next.exchange.is_none() {
                next.start_next(&mut effects);
            }
            return Reaction::Update(next, effects);
        }
        // Only an outcome of this exchange's runs changes anything: the state is copied for those alone.
        let Some(report) = signal.outcome() else { return Reaction::Ignore };
        let Some(exchange) = self.exchange.as_ref() else { return Reaction::Ignore };
        if report.awaiting_approval() {
            return Reaction::Ignore;
        }
        let for_model = exchange.tools.is_none() && Some(&report.action) == self.config.model_action().as_ref();
        let mut next = self.clone();
        if for_model {
            next.on_model(report, &mut effects);
        } else if !next.on_tool(report, &mut effects) {
            return Reaction::Ignore;
        }
        Reaction::Update(next, effects)
    }
}

/// A message refused at once, with a reply that says why.
fn refuse(signal: &Signal, why: String) -> Reaction<LlmAgent> {
    Reaction::Keep(vec![Effect::reply(signal.id(), json!({"status": "refused", "error": why}))])
}

impl LlmAgent {
    /// Starts the exchange of the oldest waiting message, if any.
    fn start_next(&mut self, effects: &mut Vec<Effect>) {
        let Some(asked) = self.waiting.pop_front() else { return };
        if !self.mounted {
            self.mounted = true;
            effects.push(Effect::mount_skill(self.config.model_skill.clone(), Value::Null));
            for (skill, opts) in &self.config.skills {
                effects.push(Effect::mount_skill(skill.clone(), opts.clone()));
            }
        }
        self.conversation.push(Message::user(asked.text));
        self.exchange = Some(Exchange {
            asked: asked.signal,
            model_calls: 0,
            used: Usage::default(),
            tools: None,
            summarizing: None,
        });
        self.ask_model(effects);
    }

    /// Asks the model what comes next, unless the exchange reached a limit (then it ends, saying so). A
    /// conversation over its window is first brought under it: its oldest turns dropped, or summarized by the
    /// model (once per call: a summary that does not bring it under is followed by dropping).
    fn ask_model(&mut self, effects: &mut Vec<Effect>) {
        self.ask_model_with(effects, true);
    }

    fn ask_model_with(&mut self, effects: &mut Vec<Effect>, may_summarize: bool) {
        if let Some(window) = self.config.window {
            let cut = overflow(&self.conversation, window.max_tokens);
            if cut > 0 {
                if window.strategy == WindowStrategy::Summarize && may_summarize {
                    return self.summarize(cut, effects);
                }
                self.conversation.drain(..cut);
            }
        }
        let Some(exchange) = self.exchange.as_mut() else { return };
        if exchange.model_calls >= self.config.max_turns {
            let why = format!("the model was asked {} times, the most one exchange may take", exchange.model_calls);
            return self.finish(Err(why), effects);
        }
        if let Some(budget) = self.config.token_budget
            && exchange.used.total() >= budget
        {
            let why = format!("the exchange used {} tokens of its budget of {budget}", exchange.used.total());
            return self.finish(Err(why), effects);
        }
        let tool_choice = if exchange.model_calls == 0 {
            self.config.first_tool_choice.clone()
        } else {
            self.config.later_tool_choice.clone()
        };
        let call = ModelCall {
            model: self.config.model.clone(),
            system: self.config.instructions.clone(),
            messages: self.conversation.clone(),
            offer: self.config.tools.clone(),
            tool_choice,
            max_tokens: self.config.max_tokens,
            max_tools: self.config.max_tools,
        };
        match (self.model_run(call), self.exchange.as_mut()) {
            (Ok(run), Some(exchange)) => {
                exchange.model_calls += 1;
                exchange.tools = None;
                effects.push(run);
            }
            (Ok(_), None) => {}
            (Err(why), _) => self.finish(Err(why), effects),
        }
    }

    /// The run of the model action with these params, or why there can be none.
    fn model_run(&self, call: ModelCall) -> Result<Effect, String> {
        let action =
            self.config.model_action().ok_or_else(|| format!("`{}` names no model action", self.config.model_skill))?;
        let params = serde_json::to_value(call).map_err(|err| format!("the model call could not be written: {err}"))?;
        Ok(Effect::run(action, params))
    }

    /// Counts a model call's tokens, for the agent and for the exchange going on.
    fn count(&mut self, usage: Usage) {
        self.used = self.used + usage;
        if let Some(exchange) = self.exchange.as_mut() {
            exchange.used = exchange.used + usage;
        }
    }

    /// Asks the model to summarize the `cut` oldest messages (a model call of the exchange like any).
    fn summarize(&mut self, cut: usize, effects: &mut Vec<Effect>) {
        if self.exchange.as_ref().is_none_or(|e| e.model_calls >= self.config.max_turns) {
            return self.ask_model_with(effects, false);
        }
        let ask = format!("{SUMMARY_ASK}\n\n{}", transcript(&self.conversation[..cut]));
        let call = ModelCall {
            model: self.config.model.clone(),
            system: None,
            messages: vec![Message::user(ask)],
            offer: Vec::new(),
            tool_choice: Default::default(),
            max_tokens: self.config.max_tokens,
            max_tools: None,
        };
        match (self.model_run(call), self.exchange.as_mut()) {
            (Ok(run), Some(exchange)) => {
                exchange.model_calls += 1;
                exchange.summarizing = Some(cut);
                effects.push(run);
            }
            _ => self.ask_model_with(effects, false),
        }
    }

    /// The model summarized the oldest messages: the summary stands in for them.
    fn on_summary(&mut self, cut: usize, report: &RunReport, effects: &mut Vec<Effect>) {
        let answer =
            report.completed().then(|| serde_json::from_value::<ModelAnswer>(report.outcome.output.clone()).ok());
        let summary = answer.flatten().map(|answer| {
            self.count(answer.response.usage);
            answer.response.message.text()
        });
        match summary.filter(|text| !text.trim().is_empty()) {
            Some(text) if cut <= self.conversation.len() => {
                let kept = self.conversation.split_off(cut);
                self.conversation = vec![Message::user(format!("{SUMMARY_PREFIX} {text}"))];
                self.conversation.extend(kept);
            }
            // No summary: the oldest turns are dropped instead.
            _ => {}
        }
        self.ask_model_with(effects, false);
    }

    /// The model answered (or its run failed).
    fn on_model(&mut self, report: &RunReport, effects: &mut Vec<Effect>) {
        if let Some(cut) = self.exchange.as_mut().and_then(|e| e.summarizing.take()) {
            return self.on_summary(cut, report, effects);
        }
        if !report.completed() {
            let error = report.outcome.error.as_ref().map_or_else(|| "no answer".to_owned(), |e| e.message.clone());
            return self.finish(Err(format!("the model call failed: {error}")), effects);
        }
        let answer: ModelAnswer = match serde_json::from_value(report.outcome.output.clone()) {
            Ok(answer) => answer,
            Err(err) => return self.finish(Err(format!("the model's answer could not be read: {err}")), effects),
        };
        self.count(answer.response.usage);
        let message = answer.response.message;
        let calls: Vec<ToolCall> = message.tool_calls().cloned().collect();
        let text = message.text();
        self.conversation.push(message);
        if calls.is_empty() {
            return self.finish(Ok(text), effects);
        }
        let Some(exchange) = self.exchange.as_mut() else { return };
        let model_action = self.config.model_action();
        let slots = calls.into_iter().map(|call| {
            let state = match read_call(&call, &answer.offered, model_action.as_ref()) {
                Ok((action, params)) => SlotState::Queued { action, params },
                Err(why) => SlotState::Done { result: error_result(&call, why) },
            };
            Slot { call, state }
        });
        exchange.tools = Some(slots.collect());
        self.run_ready(effects);
    }

    /// A tool's run ended: its call is answered. Returns whether the outcome was one of this exchange's.
    fn on_tool(&mut self, report: &RunReport, effects: &mut Vec<Effect>) -> bool {
        let Some(slots) = self.exchange.as_mut().and_then(|e| e.tools.as_mut()) else { return false };
        let running = slots
            .iter_mut()
            .find(|slot| matches!(&slot.state, SlotState::Running { action } if *action == report.action));
        let Some(slot) = running else { return false };
        let result = match report.outcome.status {
            OutcomeStatus::Completed => ToolResult {
                call_id: slot.call.id.clone(),
                content: match &report.outcome.output {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                },
                is_error: false,
            },
            _ => {
                let why = report.outcome.error.as_ref().map_or_else(
                    || "the tool ended without a result".to_owned(),
                    |e| format!("{} ({})", e.message, serde_json::to_value(e.class).unwrap_or(Value::Null)),
                );
                error_result(&slot.call, why)
            }
        };
        slot.state = SlotState::Done { result };
        self.run_ready(effects);
        true
    }

    /// Asks for the run of every queued call whose action has no run going; once every call is answered, gives
    /// the results to the model.
    fn run_ready(&mut self, effects: &mut Vec<Effect>) {
        let Some(slots) = self.exchange.as_mut().and_then(|e| e.tools.as_mut()) else { return };
        let mut busy: Vec<ActionId> = slots
            .iter()
            .filter_map(|slot| match &slot.state {
                SlotState::Running { action } => Some(action.clone()),
                _ => None,
            })
            .collect();
        for slot in slots.iter_mut() {
            if let SlotState::Queued { action, params } = &slot.state
                && !busy.contains(action)
            {
                let action = action.clone();
                effects.push(Effect::run(action.clone(), params.clone()));
                busy.push(action.clone());
                slot.state = SlotState::Running { action };
            }
        }
        let results: Option<Vec<ToolResult>> = slots
            .iter()
            .map(|slot| match &slot.state {
                SlotState::Done { result } => Some(result.clone()),
                _ => None,
            })
            .collect();
        if let Some(results) = results {
            self.conversation.push(Message::tool_results(results));
            self.ask_model(effects);
        }
    }

    /// Ends the exchange with the answer (or why there is none), replies, and starts the next one.
    fn finish(&mut self, answer: Result<String, String>, effects: &mut Vec<Effect>) {
        let Some(exchange) = self.exchange.take() else { return };
        let usage = json!({"input_tokens": exchange.used.input_tokens, "output_tokens": exchange.used.output_tokens});
        let reply = match answer {
            Ok(text) => {
                json!({"status": "answered", "text": text, "model_calls": exchange.model_calls, "usage": usage})
            }
            Err(why) => json!({"status": "stopped", "error": why, "model_calls": exchange.model_calls, "usage": usage}),
        };
        effects.push(Effect::reply(exchange.asked, reply));
        self.start_next(effects);
    }
}

/// The action and params a tool call names, or why it cannot run (said to the model).
fn read_call(call: &ToolCall, offered: &[String], model: Option<&ActionId>) -> Result<(ActionId, Value), String> {
    let unknown = || format!("there is no tool `{}`; the tools offered are: {}", call.name, offered.join(", "));
    if !offered.contains(&call.name) {
        return Err(unknown());
    }
    let action = ActionId::from_tool_name(&call.name).map_err(|_| unknown())?;
    if Some(&action) == model {
        return Err(unknown());
    }
    let params = call.parsed_arguments()?;
    Ok((action, params))
}

fn error_result(call: &ToolCall, why: String) -> ToolResult {
    ToolResult { call_id: call.id.clone(), content: why, is_error: true }
}
