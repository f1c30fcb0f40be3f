//! agentry: a runtime for agents built on actors.
//!
//! Agents are pure state machines: an [`Agent`] takes a [`Signal`] and its state and returns a new state plus a
//! list of [`Effect`]s. It gains capabilities by mounting [`Skill`](struct@Skill)s — named, versioned bundles of typed
//! [`Action`]s — and mounting is pure too: [`skill::mount`] returns `RegisterAction` effects. The actor layer
//! (the `AgentServer`) interprets those effects.
//!
//! This crate is split into the **pure layer** (`signal`, `kinds`, `pattern`, `action`, `skill`, `effect`,
//! `agent`, `policy`, `tool`, and the action table and gate), which never awaits, reads a clock or touches I/O
//! while deciding, and the actor layer that runs what the pure layer decides: the [`Runtime`] you hold, one
//! agent server per agent (internal), their supervisor, the action runner, [`events`] and the [`store`].

pub mod action;
pub(crate) mod afresh;
pub mod agent;
mod allowance;
pub(crate) mod claim;
mod contract;
mod directory;
pub mod driver;
pub mod effect;
pub(crate) mod elsewhere;
mod error;
pub mod events;
pub mod id;
pub(crate) mod interpret;
pub mod jobs;
pub mod kinds;
mod messages;
pub mod meter;
pub mod pattern;
pub mod policy;
mod recovery;
mod restart;
mod rollback;
mod run_life;
pub(crate) mod runner;
pub mod runtime;
pub(crate) mod server;
mod shared;
pub mod signal;
pub mod skill;
mod sleep;
pub mod store;
mod supervisor;
pub(crate) mod table;
mod target;
mod time_text;
pub mod tool;
mod wall_clock;

mod duration_ms;

/// What the derives' generated code needs, re-exported so users need no extra dependency. Not public API.
#[doc(hidden)]
pub mod __private {
    pub use serde_json;
}
pub mod prelude;

/// Derives [`Action`] for a params struct: `#[action(id = "skill.verb", output = T, ...)]`.
pub use agentry_macros::Action;
/// Derives [`agent::Agent`] for a domain state: `#[agent(name = "...", skills(...), routes(...))]`.
pub use agentry_macros::Agent;
/// Derives [`skill::SkillDefinition`]: `#[skill(id = "...", version = "1.0.0", actions(...), ...)]`.
pub use agentry_macros::Skill;

pub use action::{
    Action, ActionContext, ActionError, ActionSpec, Capability, Category, Cost, DynAction, ErrorClass, Outcome,
    OutcomeStatus, RetryPolicy, Risk, RunReport,
};
pub use agent::{Agent, AgentState, Reaction};
pub use effect::{Effect, EffectKind, EffectMeta, Target};
pub use id::{ActionId, AgentId, IdError, SkillId};
pub use pattern::Pattern;
pub use policy::Policy;
pub use runtime::{AgentRef, RestartMode, RestartPolicy, Runtime, RuntimeBuilder, RuntimeError, SpawnOptions};
pub use signal::{Kind, Signal};
pub use skill::{Catalog, MountError, Skill};
