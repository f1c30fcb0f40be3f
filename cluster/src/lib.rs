//! Agents across machines. PostgreSQL is the store of record and the single source of truth about who owns an
//! agent; the wire between nodes is only ever the fast path.
//!
//! This first part is ownership: [`owners`], leases with fencing epochs, so that a node that was paused or cut
//! off can never write over the node that took its agents; the nodes that are alive; and [`placement`], where an
//! agent goes when nobody says.

pub mod owners;
pub mod placement;

pub use owners::{Heartbeat, Lease, LeaseError, Owners, fence};
