//! The kit for driving agents and runs outside the runtime: what the simulator (`agentry-sim`) and the testing
//! kit (`agentry-testkit`) are built on. **Unstable by name**: it may change in any release, and an
//! application needs none of it (it spawns agents on a [`Runtime`](crate::runtime::Runtime)).
//!
//! A driver holds an agent's [`ActionTable`] and asks the [`gate`] before every run; it carries out each
//! effect as [`interpret`](crate::interpret::interpret) says ([`Command`], from an [`Origin`]); it lets a run
//! live as the [`RunLife`] machine says, on its own clock, with [`nested`] calls by the same rules; and it tells
//! the agent how things went with the same signals the runtime makes ([`action_outcome_at`] and the other
//! `*_at` constructors, stamped with the driver's own ids and time).

pub use crate::interpret::{Command, KeyFrom, Origin};
pub use crate::kinds::{RunRef, action_outcome_at, child_exited_at, mount_failed_at, spawn_failed_at};
pub use crate::run_life::{Begin, End, Next, Params, RunLife, nested};
pub use crate::table::{ActionTable, Gate, Registered, gate};
