//! What nearly every program imports, in one line: `use agentry::prelude::*;`.
//!
//! - defining actions, skills and agents: [`Action`], [`ActionContext`], [`ActionError`], [`ActionSpec`] and
//!   its contract ([`Capability`], [`Category`], [`Cost`], [`Risk`], [`RetryPolicy`]), [`Agent`],
//!   [`AgentState`], [`Reaction`], [`Effect`], [`Target`], [`Signal`], [`Pattern`], the ids, the skill
//!   handler's [`SkillContext`] and [`SkillReaction`], and the three derives;
//! - reading what a run did: [`Outcome`], [`OutcomeStatus`], [`RunReport`], [`ErrorClass`];
//! - running them: [`Runtime`], [`RuntimeBuilder`], [`SpawnOptions`], [`AgentRef`], [`RuntimeError`],
//!   [`RestartPolicy`], [`Policy`], and the journal's [`RunQuery`] and [`RunStatus`];
//! - skills as values: [`Skill`](struct@Skill), [`SkillDefinition`], [`Catalog`], [`DynAction`].
//!
//! ```
//! use agentry::prelude::*;
//!
//! let options = SpawnOptions { policy: Policy::trusted(), ..SpawnOptions::default() };
//! assert_eq!(options.max_in_flight, 64);
//! let failed = RunQuery { status: Some(RunStatus::Failed), ..RunQuery::default() };
//! assert!(failed.agent.is_none());
//! ```

pub use crate::action::{
    Action, ActionContext, ActionError, ActionSpec, Capability, Category, Cost, DynAction, ErrorClass, Outcome,
    OutcomeStatus, RetryPolicy, Risk, RunReport,
};
pub use crate::agent::{Agent, AgentState, Reaction};
pub use crate::effect::{Effect, Target};
pub use crate::id::{ActionId, AgentId, SkillId};
pub use crate::pattern::Pattern;
pub use crate::policy::Policy;
pub use crate::runtime::{AgentRef, RestartPolicy, Runtime, RuntimeBuilder, RuntimeError, SpawnOptions};
pub use crate::signal::Signal;
pub use crate::skill::{Catalog, Skill, SkillContext, SkillDefinition, SkillReaction};
pub use crate::store::{RunQuery, RunStatus};
pub use agentry_macros::{Action, Agent, Skill};
