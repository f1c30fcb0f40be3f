//! The journal's outbox: signals an agent emitted to agents elsewhere (in a cluster, on other nodes), kept with
//! the input whose handling made them until they are sent on ([`super::Durable::sending`],
//! [`super::Durable::sent_on`]), so an agent brought back sends again what its last copy may not have sent. Both
//! stores keep a row as its target's id and the signal in the format of `signal_codec.rs`; this is how a row
//! reads back.

use super::StoreError;
use crate::id::AgentId;
use crate::signal::Signal;

/// A row of the outbox, read back: its target and its signal.
pub(crate) fn unsent(target: &str, signal: &[u8]) -> Result<(AgentId, Signal), StoreError> {
    let to = AgentId::new(target).map_err(|e| StoreError::Decode { what: "outbox target", message: e.to_string() })?;
    Ok((to, super::signal_codec::decode(signal)?))
}
