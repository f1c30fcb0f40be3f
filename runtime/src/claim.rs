//! Claims before a spawn: what a runtime asks before it starts a new agent, whichever way it is spawned (by
//! [`crate::runtime::Runtime::spawn`], by name, or by another agent's `SpawnAgent` effect). A runtime alone asks
//! nobody; a runtime in a cluster asks its node ([`crate::runtime::RuntimeBuilder::claim_before_spawn`]), which
//! takes the new agent's lease, so that every agent it runs writes under one, children included.

use crate::id::AgentId;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// What a claim hands back when it allows a spawn: held while the spawn is under way, dropped once it ended
/// (the agent started, or failed to).
pub type Claim = Box<dyn Send>;

/// What a runtime asks before it starts a new agent (not a restart, a recovery or a thaw: those keep what the
/// agent had). `Err` says why it may not, and the spawn fails with
/// [`crate::error::RuntimeError::NotClaimed`].
pub type ClaimHook = Arc<dyn Fn(AgentId) -> Pin<Box<dyn Future<Output = Result<Claim, String>> + Send>> + Send + Sync>;
