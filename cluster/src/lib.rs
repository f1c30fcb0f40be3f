//! Agents across machines. PostgreSQL is the store of record and the single source of truth about who owns an
//! agent; the wire between nodes is only ever the fast path.
//!
//! This first part is ownership: [`owners`], leases with fencing epochs, so that a node that was paused or cut
//! off can never write over the node that took its agents; the nodes that are alive; [`placement`], where an
//! agent goes when nobody says; the durable [`inbox`], where signals for an agent wait for its owner, each
//! once; and the [`node`], a runtime that shares its journal in PostgreSQL with the other nodes, writes only
//! under its leases, and takes over the agents of nodes that died.

mod db;
pub mod inbox;
pub mod node;
pub mod owners;
pub mod placement;
mod status;
pub mod wire;

pub use inbox::{Heard, Inbox, InboxError, Listener, Pushed, Pusher, Waiting, listen};
pub use node::{ClusterRef, Node, NodeError, NodeOptions, Rebalanced, Sent, Tick};
pub use owners::{Heartbeat, Lease, LeaseError, Owners, fence};
pub use status::{Backlog, ClusterStatus, NodeStatus};
pub use wire::{Wire, WireError, WireEvent, WireOptions, WireTls};
