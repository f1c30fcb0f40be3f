//! What a user's skill or agent file needs, in one import: `use agentry::prelude::*;`.

pub use crate::action::{Action, ActionContext, ActionError, ActionSpec, Capability, Category, Cost, Risk};
pub use crate::agent::{Agent, AgentState, Reaction};
pub use crate::effect::{Effect, Target};
pub use crate::id::{ActionId, AgentId, SkillId};
pub use crate::pattern::Pattern;
pub use crate::policy::Policy;
pub use crate::signal::Signal;
pub use crate::skill::{SkillContext, SkillDefinition, SkillReaction};
pub use agentry_macros::{Action, Agent, Skill};
