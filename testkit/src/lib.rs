//! Property tests of *your* agentry skills and agents, in a few lines. Add it as a dev-dependency.
//!
//! - [`check_mounting`]: the ready model test of mounting for your catalog and policy.
//! - [`check_agent`]: properties of your agent over random signals (deterministic, no panics, serde round
//!   trip, your invariant, delegation to mounted skills).
//! - [`check_action`] and [`ActionHarness`]: one action run directly (temporary drive, your policy), checked
//!   against its own contract with params generated from its schema.
//! - [`AgentHarness`]: drives one agent purely (send signals, end its runs, approve, advance a virtual clock).
//! - [`schema`]: proptest strategies for JSON values a JSON Schema accepts (valid params for any action) and
//!   values it refuses (invalid params that validation must stop before `run`).
//! - [`ops`]: mount operations over a catalog, as a strategy, for properties of your own.
//! - [`signals`]: strategies for signals whose kinds match patterns such as `order.*`.
//! - [`demo`]: two small skills (`Arithmetic`, `Counter`) for examples and tests.
//!
//! Every check returns a [`CheckFailure`] whose report lists the shrunk counterexample one step per line.

mod action;
mod agent;
pub mod demo;
mod failure;
mod harness;
pub mod model;
mod mounting;
pub mod ops;
pub mod schema;
pub mod signals;

pub use action::{ActionCheck, ActionHarness, ActionRun, HarnessError, check_action};
pub use agent::{AgentCheck, check_agent};
pub use failure::CheckFailure;
pub use harness::{AgentHarness, AgentHarnessError, PendingRun, Said};
pub use mounting::{MountingCheck, check_mounting};
