//! Restarts afresh: when an agent's supervisor starts it again as a new actor (its restart policy restarts it
//! after it ended), what waited in its old actor's mailbox is gone with it. A runtime alone says so in its
//! events (`agent_restarted` with `afresh: true`); a runtime in a cluster also tells its node at once, before the
//! new actor starts ([`crate::runtime::RuntimeBuilder::before_restart`]), so that the node knows exactly which
//! of the signals it gave from the agent's inbox went to the old actor, and gives them again.

use crate::id::AgentId;
use std::sync::Arc;

/// What a runtime calls when an agent's supervisor is about to start it again afresh: after its old actor
/// ended, before the new one starts. Called on the supervisor: it must not block.
pub type RestartHook = Arc<dyn Fn(&AgentId) + Send + Sync>;
