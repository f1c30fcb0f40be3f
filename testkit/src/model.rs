//! A scripted language model: answers from a script, turn by turn, and keeps every request it was sent. It
//! drives an LLM agent deterministically in tests and in the simulator, with no server and no tokens spent.
//!
//! ```
//! use agentry_llm::ChatModel;
//! use agentry_llm::chat::{ChatRequest, Message};
//! use agentry_testkit::model::{ScriptedModel, Turn};
//! use serde_json::json;
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let model = ScriptedModel::new([Turn::call("memory__get", json!({"key": "city"})), Turn::text("Paris.")]);
//! let request = ChatRequest::new("scripted", vec![Message::user("Where do I live?")]);
//! let first = model.complete(&request, &|_| {}).await.unwrap();
//! assert_eq!(first.message.tool_calls().next().unwrap().name, "memory__get");
//! let second = model.complete(&request, &|_| {}).await.unwrap();
//! assert_eq!(second.message.text(), "Paris.");
//! assert_eq!(model.requests().len(), 2);
//! # });
//! ```

use agentry_llm::chat::{ChatRequest, ChatResponse, Delta, FinishReason, Message, Part, Role, ToolCall, Usage};
use agentry_llm::window::{estimate, estimate_request};
use agentry_llm::{ChatModel, DeltaSink, ModelError, ModelFuture};
use serde_json::Value;
use std::collections::VecDeque;
use std::sync::Mutex;

/// One scripted answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Turn {
    /// Answer with this message (text and tool calls) and usage.
    Answer {
        /// The answer.
        message: Message,
        /// The tokens it reports; `None`: estimated from the text as the context window estimates them.
        usage: Option<Usage>,
    },
    /// Fail the call.
    Fail(ModelError),
}

impl Turn {
    /// An answer of plain text.
    pub fn text(text: impl Into<String>) -> Self {
        Turn::Answer { message: Message::assistant(text), usage: None }
    }

    /// One tool call with these arguments.
    pub fn call(tool: &str, arguments: Value) -> Self {
        Self::calls([(tool, arguments)])
    }

    /// Several tool calls at once (parallel calls), with ids `call_0`, `call_1`, ...
    pub fn calls<'a>(calls: impl IntoIterator<Item = (&'a str, Value)>) -> Self {
        let parts = calls
            .into_iter()
            .enumerate()
            .map(|(n, (tool, arguments))| {
                Part::ToolCall(ToolCall {
                    id: format!("call_{n}"),
                    name: tool.to_owned(),
                    arguments: arguments.to_string(),
                })
            })
            .collect();
        Turn::Answer { message: Message { role: Role::Assistant, parts }, usage: None }
    }

    /// One tool call whose arguments are this text as the model wrote it (malformed JSON, say).
    pub fn raw_call(tool: &str, arguments: &str) -> Self {
        let call = ToolCall { id: "call_0".to_owned(), name: tool.to_owned(), arguments: arguments.to_owned() };
        Turn::Answer { message: Message { role: Role::Assistant, parts: vec![Part::ToolCall(call)] }, usage: None }
    }

    /// This answer, reporting `usage` instead of the counted one.
    pub fn with_usage(self, usage: Usage) -> Self {
        match self {
            Turn::Answer { message, .. } => Turn::Answer { message, usage: Some(usage) },
            fail => fail,
        }
    }
}

/// A model that answers from a script (see the module docs).
#[derive(Debug)]
pub struct ScriptedModel {
    turns: Mutex<VecDeque<Turn>>,
    requests: Mutex<Vec<ChatRequest>>,
}

impl ScriptedModel {
    /// A model that answers with these turns, in order; past the last, every call fails (`Rejected`).
    pub fn new(turns: impl IntoIterator<Item = Turn>) -> Self {
        Self { turns: Mutex::new(turns.into_iter().collect()), requests: Mutex::default() }
    }

    /// Every request it was sent, in order.
    pub fn requests(&self) -> Vec<ChatRequest> {
        self.requests.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// How many turns of the script are left.
    pub fn left(&self) -> usize {
        self.turns.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    fn answer(&self, request: &ChatRequest, on_delta: DeltaSink<'_>) -> Result<ChatResponse, ModelError> {
        self.requests.lock().unwrap_or_else(|p| p.into_inner()).push(request.clone());
        let turn = self.turns.lock().unwrap_or_else(|p| p.into_inner()).pop_front();
        let (message, usage) = match turn {
            Some(Turn::Answer { message, usage }) => (message, usage),
            Some(Turn::Fail(error)) => return Err(error),
            None => {
                let message = "the scripted model has no answer left".to_owned();
                return Err(ModelError::Rejected { status: 400, message });
            }
        };
        let text = message.text();
        if !text.is_empty() {
            on_delta(Delta::Text { text: text.clone() });
        }
        for (index, call) in message.tool_calls().enumerate() {
            on_delta(Delta::ToolCall { index, name: call.name.clone() });
        }
        let usage = usage.unwrap_or_else(|| Usage::new(estimate_request(request), estimate(&message)));
        let finish = if message.tool_calls().next().is_some() { FinishReason::ToolCalls } else { FinishReason::Stop };
        Ok(ChatResponse { message, usage, finish, model: request.model.clone() })
    }
}

impl ChatModel for ScriptedModel {
    fn provider(&self) -> &str {
        "scripted"
    }

    fn complete<'a>(&'a self, request: &'a ChatRequest, on_delta: DeltaSink<'a>) -> ModelFuture<'a> {
        let answer = self.answer(request, on_delta);
        Box::pin(std::future::ready(answer))
    }
}
