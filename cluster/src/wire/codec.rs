//! What nodes ask each other over the wire, and what they answer: plain data, encoded as JSON. What comes from a
//! peer is decoded with limits: its size is bounded by the wire's frame limit before it is read at all, its
//! nesting by the JSON decoder's depth limit, and anything malformed is a typed error, never a panic.

use agentry::id::AgentId;
use agentry::signal::Signal;
use serde::{Deserialize, Serialize};

/// A request from one node to the node that holds an agent.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "ask", rename_all = "snake_case")]
pub enum WireRequest {
    /// Give the agent this signal (once: a signal already given is a duplicate).
    Send {
        /// The agent.
        agent: AgentId,
        /// The signal, with its id.
        signal: Signal,
    },
    /// Give the agent this signal as a call, and answer with its reply within `timeout_ms`.
    Call {
        /// The agent.
        agent: AgentId,
        /// The signal, with its id.
        signal: Signal,
        /// How long the caller waits for the reply, in milliseconds.
        timeout_ms: u64,
    },
    /// A signal the peer's runtime made for the agent (an agent's emit, a child's end for its parent), given
    /// as it is: a peer that has the cluster's cookie is trusted as one of its runtimes.
    Relay {
        /// The agent.
        agent: AgentId,
        /// The signal, as the peer's runtime made it.
        signal: Signal,
    },
    /// Spawn an agent of a type registered on this node, here, from its initial state as JSON.
    Spawn {
        /// The agent type's name.
        agent_type: String,
        /// The new agent's id.
        agent: AgentId,
        /// Its initial domain state.
        init: serde_json::Value,
        /// Its parent (on the asking node), told of its end.
        parent: Option<AgentId>,
        /// Its policy.
        policy: Box<agentry::policy::Policy>,
    },
    /// A signal an agent of the peer emitted to a topic, for this node's subscribers.
    Publish {
        /// The topic.
        topic: String,
        /// The signal, as the peer's runtime made it.
        signal: Signal,
    },
}

impl WireRequest {
    /// The agent the request is for (none for a topic's signal).
    pub fn agent(&self) -> Option<&AgentId> {
        match self {
            Self::Send { agent, .. }
            | Self::Call { agent, .. }
            | Self::Relay { agent, .. }
            | Self::Spawn { agent, .. } => Some(agent),
            Self::Publish { .. } => None,
        }
    }
}

/// What the node asked answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case")]
pub enum WireReply {
    /// The signal was taken: it is in the agent's inbox and on its way to the agent.
    Accepted,
    /// The signal was given before (a retry): nothing was done again.
    Duplicate,
    /// The agent's reply to a call.
    Answer {
        /// The reply.
        value: serde_json::Value,
    },
    /// This node does not hold the agent (any more): ask elsewhere, or leave it in the inbox.
    NotHere,
    /// The agent type is not registered on this node.
    UnknownType {
        /// The type's name.
        agent_type: String,
    },
    /// The request was refused or failed there, and why.
    Failed {
        /// What went wrong, as the node asked says it.
        reason: String,
    },
}

/// A frame that could not be decoded.
#[derive(Debug, thiserror::Error)]
#[error("a malformed wire {what} ({len} bytes): {reason}; expected the JSON of a {what}")]
pub struct Malformed {
    what: &'static str,
    len: usize,
    reason: String,
}

/// Encodes a request or a reply.
pub(crate) fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    // Plain data with string keys: serializing it cannot fail.
    serde_json::to_vec(value).unwrap_or_default()
}

/// Decodes a request from a peer.
pub fn decode_request(bytes: &[u8]) -> Result<WireRequest, Malformed> {
    decode(bytes, "request")
}

/// Decodes a reply from a peer.
pub fn decode_reply(bytes: &[u8]) -> Result<WireReply, Malformed> {
    decode(bytes, "reply")
}

fn decode<T: serde::de::DeserializeOwned>(bytes: &[u8], what: &'static str) -> Result<T, Malformed> {
    serde_json::from_slice(bytes).map_err(|e| Malformed { what, len: bytes.len(), reason: e.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_request_survives_the_wire() {
        let signal = Signal::new("add", serde_json::json!({"n": 2})).expect("a kind");
        let request =
            WireRequest::Call { agent: AgentId::new("a").expect("an id"), signal: signal.clone(), timeout_ms: 5 };
        let back = decode_request(&encode(&request)).expect("it decodes");
        let WireRequest::Call { agent, signal: got, timeout_ms } = back else { panic!("a call: {back:?}") };
        assert_eq!((agent.as_str(), got.id(), got.kind(), timeout_ms), ("a", signal.id(), signal.kind(), 5));
    }

    #[test]
    fn deep_nesting_is_refused_not_followed() {
        let nested = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        let deep = format!(r#"{{"ask":"send","agent":"a","signal":{{"kind":"add","data":{nested}}}}}"#);
        let err = decode_request(deep.as_bytes()).expect_err("too deep");
        assert!(err.to_string().contains("recursion limit"), "{err}");
    }

    #[test]
    fn a_bad_agent_id_is_malformed() {
        let signal = serde_json::to_string(&Signal::new("add", serde_json::json!(1)).expect("a kind")).expect("JSON");
        let good = format!(r#"{{"ask":"send","agent":"a","signal":{signal}}}"#);
        assert!(decode_request(good.as_bytes()).is_ok(), "{good}");
        let bad = format!(r#"{{"ask":"send","agent":"","signal":{signal}}}"#);
        assert!(decode_request(bad.as_bytes()).is_err(), "an empty id is refused");
    }

    proptest! {
        /// Whatever bytes a peer sends, decoding gives a request or a typed error, never a panic.
        #[test]
        fn any_bytes_decode_or_fail_typed(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = decode_request(&bytes);
            let _ = decode_reply(&bytes);
        }
    }
}
