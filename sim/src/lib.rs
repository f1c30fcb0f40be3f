//! Deterministic multi-agent simulations of agentry agents: the same agents, skills, mounting and policy you
//! deploy, on virtual time with one seeded generator.
//!
//! - **Semantics shared with the runtime.** Agents consume signals through the same pure `step`; effects mean
//!   what [`agentry::driver::interpret`] says (as the AgentServer carries them out); runs pass the same
//!   gate ([`agentry::driver::gate`]) and come back as the same `action.*` signals.
//! - **Actions** run their real code when it finishes without waiting, or follow an [`ActionModel`]
//!   (latency, failures by class, output). Timers and `system.wait`-style waits advance virtual time only.
//! - **Faults** ([`Faults`]): action failures and timeouts, lost, late or doubled messages, crashes, approvals
//!   granted or denied at random; each is seeded and written to the trace.
//! - **Contacts** ([`Process`], [`Contacts`], [`Network`]): Poisson processes of signals, well-mixed or over a
//!   random, small-world or scale-free network.
//! - **Data** ([`Metrics`], [`Table`], [`plot`], [`sweep()`]): metrics into a table, CSV and JSON, SVG plots,
//!   sweeps over parameters × seeds in parallel.
//! - **Trace** ([`Trace`]): every input, refusal and fault, hashed; the same seed gives the same hash, and a kept
//!   trace replays any agent's history step by step.
//!
//! ```
//! use agentry::prelude::*;
//! use agentry_sim::{Process, SimBuilder};
//! use std::time::Duration;
//!
//! /// Counts the pings it gets.
//! #[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
//! struct Counter { pings: u64 }
//!
//! impl Agent for Counter {
//!     fn handle_signal(&self, signal: &Signal) -> Reaction<Self> {
//!         match signal.kind().as_str() {
//!             "ping" => Reaction::Update(Counter { pings: self.pings + 1 }, vec![]),
//!             _ => Reaction::Ignore,
//!         }
//!     }
//! }
//!
//! let mut sim = SimBuilder::<Counter>::new(42).process(Process::new("ping", 2.0)?).build()?;
//! for n in 0..10 {
//!     sim.add(AgentId::new(format!("counter-{n}"))?, Counter::default())?;
//! }
//! sim.run_until(Duration::from_secs(100));
//! let pings: u64 = sim.states().map(|s| s.domain.pings).sum();
//! assert!((1_800..2_200).contains(&pings), "about 2 per agent per second: {pings}");
//! let again = {
//!     let mut sim = SimBuilder::<Counter>::new(42).process(Process::new("ping", 2.0)?).build()?;
//!     for n in 0..10 { sim.add(AgentId::new(format!("counter-{n}"))?, Counter::default())?; }
//!     sim.run_until(Duration::from_secs(100));
//!     sim.trace().hash()
//! };
//! assert_eq!(sim.trace().hash(), again, "the same seed, the same run");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod clock;
mod engine;
mod error;
mod faults;
mod metrics;
mod model;
pub mod models;
mod network;
pub mod plot;
mod process;
mod recording;
mod sweep;
mod trace;

pub use engine::{RunRecord, SimBuilder, Simulation};
pub use error::SimError;
pub use faults::{Approvals, Fault, Faults};
pub use metrics::{Census, Counts, Metrics, Row, Table};
pub use model::{ActionModel, Latency, OutputFn};
pub use network::Network;
pub use process::{Contacts, Process, Who};
pub use recording::{MAX_UNRECORDED, Recording, Told};
pub use sweep::{Run, sweep};
pub use trace::{Entry, Moment, Trace, What};

/// The simulation's random generator: PCG (64-bit state, multiplicative), whose output for a seed is fixed by
/// its specification, so a seed means the same run on every machine and version.
pub type SimRng = rand_pcg::Pcg64Mcg;
