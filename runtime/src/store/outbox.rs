//! The journal's outbox: signals an agent emitted to agents elsewhere (in a cluster, on other nodes), kept with
//! the input whose handling made them until they are sent on ([`super::Durable::sending`],
//! [`super::Durable::sent_on`]), so an agent brought back sends again what its last copy may not have sent. Both
//! stores keep a row as its target's id and the signal in the format of `signal_codec.rs`; this is how a row
//! reads back.

use super::StoreError;
use crate::id::AgentId;
use crate::signal::Signal;

/// A row of the outbox, read back, added to `unsent`: its target and its signal. A row that does not decode is
/// left where it is, with an error logged: it cannot be sent, and the agent still comes back.
pub(crate) fn unsent(agent: &AgentId, (target, signal): (&str, &[u8]), unsent: &mut Vec<(AgentId, Signal)>) {
    let read = AgentId::new(target)
        .map_err(|e| StoreError::Decode { what: "outbox target", message: e.to_string() })
        .and_then(|to| Ok((to, super::signal_codec::decode(signal)?)));
    match read {
        Ok(row) => unsent.push(row),
        Err(err) => tracing::error!(%agent, %err, "an emit kept for elsewhere does not decode: it is not sent again"),
    }
}
