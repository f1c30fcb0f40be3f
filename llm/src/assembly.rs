//! A streamed answer put together: text as it comes, tool calls from their fragments. Nothing of a call is
//! acted on before the answer ends, and a peer that streams without end is cut off at a limit.

use crate::chat::{ChatResponse, Delta, FinishReason, Message, Part, Role, ToolCall, Usage};
use crate::error::ModelError;
use crate::model::DeltaSink;
use std::collections::BTreeMap;

/// The most bytes of text and arguments one answer may stream.
pub const MAX_ANSWER_BYTES: usize = 8 * 1024 * 1024;
/// The most tool calls one answer may make.
pub const MAX_TOOL_CALLS: usize = 128;

/// An answer being streamed.
pub(crate) struct Assembly<'a> {
    sink: DeltaSink<'a>,
    text: String,
    calls: BTreeMap<usize, Pending>,
    bytes: usize,
    /// The usage the provider reported, if it did.
    pub(crate) usage: Option<Usage>,
    /// The request's tokens, estimated, for a provider that reports no usage.
    asked_tokens: u64,
    pub(crate) model: String,
}

#[derive(Default)]
struct Pending {
    id: String,
    name: String,
    arguments: String,
    announced: bool,
}

impl<'a> Assembly<'a> {
    /// An answer to a request estimated at `asked_tokens`.
    pub(crate) fn new(sink: DeltaSink<'a>, asked_tokens: u64) -> Self {
        Self {
            sink,
            text: String::new(),
            calls: BTreeMap::new(),
            bytes: 0,
            usage: None,
            asked_tokens,
            model: String::new(),
        }
    }

    fn count(&mut self, bytes: usize) -> Result<(), ModelError> {
        self.bytes = self.bytes.saturating_add(bytes);
        if self.bytes > MAX_ANSWER_BYTES {
            return Err(ModelError::Malformed(format!("the answer streamed more than {MAX_ANSWER_BYTES} bytes")));
        }
        Ok(())
    }

    /// More text, passed on at once.
    pub(crate) fn text(&mut self, text: &str) -> Result<(), ModelError> {
        if text.is_empty() {
            return Ok(());
        }
        self.count(text.len())?;
        self.text.push_str(text);
        (self.sink)(Delta::Text { text: text.to_owned() });
        Ok(())
    }

    /// A piece of tool call number `index`: its id and name when they come, a fragment of its arguments.
    pub(crate) fn call(
        &mut self,
        index: usize,
        id: Option<&str>,
        name: Option<&str>,
        fragment: &str,
    ) -> Result<(), ModelError> {
        if !self.calls.contains_key(&index) && self.calls.len() >= MAX_TOOL_CALLS {
            return Err(ModelError::Malformed(format!("the answer makes more than {MAX_TOOL_CALLS} tool calls")));
        }
        self.count(fragment.len() + id.map_or(0, str::len) + name.map_or(0, str::len))?;
        let call = self.calls.entry(index).or_default();
        // Some servers (llama.cpp's) repeat the id and the whole name in every fragment: taken as they come.
        if let Some(id) = id.filter(|id| !id.is_empty()) {
            id.clone_into(&mut call.id);
        }
        if let Some(name) = name.filter(|name| !name.is_empty()) {
            name.clone_into(&mut call.name);
        }
        call.arguments.push_str(fragment);
        if !call.announced && !call.name.is_empty() {
            call.announced = true;
            (self.sink)(Delta::ToolCall { index, name: call.name.clone() });
        }
        Ok(())
    }

    /// The whole answer, once the stream ended. Without usage from the provider, it is estimated (and says so).
    pub(crate) fn finish(self, finish: impl FnOnce(bool) -> FinishReason) -> ChatResponse {
        let usage = self.usage.unwrap_or_else(|| Usage {
            input_tokens: self.asked_tokens,
            output_tokens: (self.bytes as u64).div_ceil(4),
            estimated: true,
        });
        let mut parts = Vec::with_capacity(self.calls.len() + 1);
        if !self.text.is_empty() {
            parts.push(Part::Text { text: self.text });
        }
        for (index, call) in self.calls {
            let id = if call.id.is_empty() { format!("call_{index}") } else { call.id };
            parts.push(Part::ToolCall(ToolCall { id, name: call.name, arguments: call.arguments }));
        }
        let has_calls = parts.iter().any(|p| matches!(p, Part::ToolCall(_)));
        ChatResponse {
            message: Message { role: Role::Assistant, parts },
            usage,
            finish: finish(has_calls),
            model: self.model,
        }
    }
}
