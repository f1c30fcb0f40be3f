//! Two small skills for examples and tests, written with the derive macros as a user writes theirs: they are
//! not part of the standard library (`agentry-skills`), which holds skills an application mounts in earnest.
//!
//! - [`Arithmetic`]: add, subtract, multiply and divide two numbers (actions with contracts, errors and costs).
//! - [`Counter`]: a per-agent counter that signals drive (a skill with state and a signal handler, no action).

pub mod arithmetic;
pub mod counter;

pub use arithmetic::Arithmetic;
pub use counter::Counter;
