//! Keeping a conversation within a model's context window: which oldest messages go, never splitting a tool
//! call from its result.
//!
//! A conversation is cut into turns: a user message, or an assistant message with the tool results that answer
//! it. Turns go from the front, whole, until what is left fits; the window always starts with a user message
//! (providers expect one first), and always keeps the last turn, even alone over the limit.

use crate::chat::{Message, Part, Role};
use serde::{Deserialize, Serialize};

/// How a conversation over its limit is brought back under it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WindowStrategy {
    /// The oldest turns are dropped.
    #[default]
    DropOldest,
    /// The oldest turns are summarized by the model, and the summary stands in for them.
    Summarize,
}

/// A conversation's limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextWindow {
    /// The most tokens the conversation sent to the model may take (estimated, see [`estimate`]).
    pub max_tokens: u64,
    /// What happens over it.
    #[serde(default)]
    pub strategy: WindowStrategy,
}

/// A message's tokens, estimated at four characters a token plus a few for its framing. Estimates are what a
/// pure agent can know before the call; the model's own count arrives with its answer.
pub fn estimate(message: &Message) -> u64 {
    let chars: usize = message
        .parts
        .iter()
        .map(|part| match part {
            Part::Text { text } => text.len(),
            Part::ToolCall(call) => call.id.len() + call.name.len() + call.arguments.len(),
            Part::ToolResult(result) => result.call_id.len() + result.content.len(),
        })
        .sum();
    (chars as u64).div_ceil(4) + 4
}

/// A whole request's tokens, estimated as [`estimate`] does (the instructions and the tools' descriptions
/// included).
pub fn estimate_request(request: &crate::chat::ChatRequest) -> u64 {
    let system = request.system.as_deref().map_or(0, str::len);
    let tools: usize =
        request.tools.iter().map(|t| t.name.len() + t.description.len() + t.parameters.to_string().len()).sum();
    request.messages.iter().map(estimate).sum::<u64>() + ((system + tools) as u64).div_ceil(4)
}

/// Where each turn starts: a user message, or an assistant message (the tool results after it are its own).
fn turn_starts(messages: &[Message]) -> Vec<usize> {
    let mut starts = Vec::new();
    for (at, message) in messages.iter().enumerate() {
        if message.role != Role::Tool || at == 0 {
            starts.push(at);
        }
    }
    starts
}

/// How many of the oldest messages to leave out so the rest fits in `max_tokens`: whole turns, the rest
/// starting with a user message where one is left, the last turn always kept.
pub fn overflow(messages: &[Message], max_tokens: u64) -> usize {
    let mut total: u64 = messages.iter().map(estimate).sum();
    let starts = turn_starts(messages);
    let mut cut = 0;
    for (n, &start) in starts.iter().enumerate() {
        let last_turn = n + 1 == starts.len();
        let starts_with_user = messages[start].role == Role::User;
        if last_turn || (total <= max_tokens && starts_with_user) {
            return start;
        }
        let end = starts.get(n + 1).copied().unwrap_or(messages.len());
        total -= messages[start..end].iter().map(estimate).sum::<u64>();
        cut = end;
    }
    cut
}

/// Messages as a transcript, for a model to summarize.
pub fn transcript(messages: &[Message]) -> String {
    let mut out = String::new();
    for message in messages {
        for part in &message.parts {
            let line = match (message.role, part) {
                (Role::User, Part::Text { text }) => format!("user: {text}"),
                (_, Part::Text { text }) => format!("assistant: {text}"),
                (_, Part::ToolCall(call)) => format!("assistant called {}({})", call.name, call.arguments),
                (_, Part::ToolResult(result)) => {
                    let error = if result.is_error { " (error)" } else { "" };
                    format!("tool result{error}: {}", result.content)
                }
            };
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::{ToolCall, ToolResult};
    use proptest::prelude::*;

    /// A conversation as a model and its tools make it: user messages, answers that may call tools, and the
    /// results of every call right after it.
    fn conversation() -> impl Strategy<Value = Vec<Message>> {
        let turn = (0u8..3, "[a-z ]{0,60}", 0usize..3);
        proptest::collection::vec(turn, 1..20).prop_map(|turns| {
            let mut messages = Vec::new();
            let mut id = 0;
            for (kind, text, calls) in turns {
                match kind {
                    0 => messages.push(Message::user(text)),
                    1 => messages.push(Message::assistant(text)),
                    _ => {
                        let mut parts = vec![Part::Text { text }];
                        let mut results = Vec::new();
                        for _ in 0..=calls {
                            id += 1;
                            let call_id = format!("c{id}");
                            parts.push(Part::ToolCall(ToolCall {
                                id: call_id.clone(),
                                name: "t".into(),
                                arguments: "{}".into(),
                            }));
                            results.push(ToolResult { call_id, content: "r".repeat(id % 50), is_error: false });
                        }
                        messages.push(Message { role: Role::Assistant, parts });
                        messages.push(Message::tool_results(results));
                    }
                }
            }
            messages
        })
    }

    proptest! {
        #[test]
        fn what_is_kept_fits_and_keeps_calls_with_their_results(messages in conversation(), max in 0u64..400) {
            let cut = overflow(&messages, max);
            let kept = &messages[cut..];
            prop_assert!(!kept.is_empty(), "the last turn stays");
            // Never a result without its call: every result kept answers a call kept.
            let calls: Vec<&str> = kept.iter().flat_map(|m| m.tool_calls().map(|c| c.id.as_str())).collect();
            for message in kept {
                for part in &message.parts {
                    if let Part::ToolResult(result) = part {
                        prop_assert!(calls.contains(&result.call_id.as_str()), "{} kept without its call", result.call_id);
                    }
                }
            }
            // Nor a call without its results.
            prop_assert!(kept.first().is_some_and(|m| m.role != Role::Tool));
            let starts = turn_starts(&messages);
            let last = *starts.last().expect("a turn");
            prop_assert!(cut <= last, "the last turn is never cut");
            // It fits, unless only the last turn is left; and it starts with a user message where one is kept.
            let total: u64 = kept.iter().map(estimate).sum();
            if cut < last {
                prop_assert!(total <= max, "{total} > {max} with more than the last turn kept");
                prop_assert_eq!(kept[0].role, Role::User);
            }
            // As little is dropped as can be: one more turn (starting with a user message) would not fit.
            if let Some(n) = starts.iter().position(|&s| s == cut) && n > 0 {
                let before = starts[..n].iter().rev().find(|&&s| messages[s].role == Role::User);
                if let Some(&more) = before {
                    let bigger: u64 = messages[more..].iter().map(estimate).sum();
                    prop_assert!(bigger > max, "keeping from {more} would fit too ({bigger} <= {max})");
                }
            }
        }
    }

    #[test]
    fn a_conversation_under_its_limit_is_kept_whole() {
        let messages = vec![Message::user("hi"), Message::assistant("hello")];
        assert_eq!(overflow(&messages, 1_000), 0);
    }
}
