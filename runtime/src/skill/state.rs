//! The state the runtime keeps for each agent: its domain state and its mounted skills. It lives below the
//! mounting rules, the only code that changes the mounted skills.

use super::SkillMap;
use crate::id::{ActionId, AgentId, SkillId};
use schemars::JsonSchema;
use semver::Version;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// A skill as mounted on one agent: its version, its per-agent state and what it provides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MountedSkill {
    /// The version that was mounted. (Journals written before the field had this name call it `vsn`.)
    #[serde(alias = "vsn")]
    pub version: Version,
    /// The skill's per-agent state.
    pub state: Value,
    /// The actions it provides, in declaration order.
    pub actions: Vec<ActionId>,
    /// The skills it requires.
    pub requires: Vec<SkillId>,
}

/// An agent's whole state: id, the user's domain state, and the mounted skills with their state. Only
/// [`crate::skill::mount`] and [`crate::skill::unmount`] change the mounted skills, so their rules always hold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AgentState<S> {
    /// The agent's id.
    pub id: AgentId,
    /// The user's domain state.
    pub domain: S,
    // Shared so a snapshot or restart copy of the state is cheap; a sorted vector so an agent with a few skills
    // stays small (see [`SkillMap`]).
    #[schemars(with = "BTreeMap<SkillId, MountedSkill>")]
    pub(crate) skills: SkillMap,
}

impl<S> AgentState<S> {
    /// A fresh state with no skills mounted.
    pub fn new(id: AgentId, domain: S) -> Self {
        Self { id, domain, skills: SkillMap::default() }
    }

    /// The mounted skills, by id, in id order.
    pub fn skills(&self) -> &SkillMap {
        &self.skills
    }

    /// Whether a skill is mounted.
    pub fn is_mounted(&self, skill: &SkillId) -> bool {
        self.skills.contains_key(skill)
    }

    /// A mounted skill's per-agent state.
    pub fn skill_state(&self, skill: &SkillId) -> Option<&Value> {
        self.skills.get(skill).map(|m| &m.state)
    }

    /// Whether any mounted skill provides this action.
    pub fn provides(&self, action: &ActionId) -> bool {
        self.skills.values().any(|m| m.actions.contains(action))
    }

    /// Every action the mounted skills provide, once each, sorted by id: what the live action table holds.
    pub fn actions(&self) -> std::collections::BTreeSet<&ActionId> {
        self.skills.values().flat_map(|m| &m.actions).collect()
    }
}

/// Why a signal could not be handled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StepError {
    /// A mounted skill is not in the catalog, so its handler cannot be found.
    #[error("skill `{0}` is mounted but not in the catalog; expected every mounted skill to be registered")]
    UnknownSkill(SkillId),
    /// A skill's stored state no longer fits its handler's type.
    #[error("the state of skill `{skill}` does not fit its handler: {message}")]
    SkillState {
        /// The skill.
        skill: SkillId,
        /// What did not fit.
        message: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    #[test]
    fn a_state_answers_what_is_mounted_and_what_it_provides() {
        let mut state = AgentState::new(AgentId::new("a").unwrap(), ());
        let (one, two, three) =
            (SkillId::new("one").unwrap(), SkillId::new("two").unwrap(), SkillId::new("three").unwrap());
        let [x, y, z, w] = ["one.x", "one.y", "two.z", "two.w"].map(|a| ActionId::new(a).unwrap());
        assert!(state.skills().is_empty() && state.actions().is_empty() && !state.provides(&x));
        let mounted = |state: Value, actions: Vec<ActionId>| {
            Arc::new(MountedSkill { version: Version::new(1, 0, 0), state, actions, requires: Vec::new() })
        };
        state.skills.insert(one.clone(), mounted(json!({"n": 1}), vec![y.clone(), x.clone()]));
        state.skills.insert(two.clone(), mounted(Value::Null, vec![x.clone(), z.clone()]));
        assert!(state.is_mounted(&one) && state.is_mounted(&two) && !state.is_mounted(&three));
        assert_eq!(state.skill_state(&one), Some(&json!({"n": 1})));
        assert_eq!(state.skill_state(&two), Some(&Value::Null));
        assert_eq!(state.skill_state(&three), None);
        assert!(state.provides(&x) && state.provides(&z) && !state.provides(&w));
        assert_eq!(state.actions().into_iter().collect::<Vec<_>>(), [&x, &y, &z], "once each, sorted");
        assert_eq!(state.skills().keys().collect::<Vec<_>>(), [&one, &two]);
    }
}
