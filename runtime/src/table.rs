//! The live action table and the gate: what an agent can run now, and whether one run may start. Pure data and
//! decisions, shared by every driver of agents: the agent's server (and the simulator) holds the table and asks
//! the gate before every run starts.

use crate::action::{ActionError, ActionSpec, DynAction, Risk};
use crate::id::{ActionId, AgentId, SkillId};
use crate::policy::{Policy, RunDecision};
use crate::skill::{AgentState, Catalog};
use std::collections::HashMap;

/// An action in the live table, with the skill that provides it.
pub struct Registered {
    /// The action's contract and code.
    pub action: DynAction,
    /// The skill it runs from.
    pub skill: Option<SkillId>,
}

/// The actions an agent can run now, by id. Only mounting, unmounting and refreshing skills change it.
#[derive(Default)]
pub struct ActionTable {
    entries: HashMap<ActionId, Registered>,
    /// Counts the changes to the table, so a gate decision can tell whether it still holds.
    epoch: u64,
}

impl ActionTable {
    /// How many times the table changed: a gate decision taken at the same epoch (and policy) still holds.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The registered action of this id.
    pub fn get(&self, action: &ActionId) -> Option<&Registered> {
        self.entries.get(action)
    }

    /// Registers `action` from the first catalog skill that provides it: `skill` if given, else any mounted
    /// skill (in id order). `false` when no such skill provides it (nothing is registered then).
    pub fn register<S>(
        &mut self,
        action: ActionId,
        skill: Option<&SkillId>,
        agent: &AgentState<S>,
        catalog: &Catalog,
    ) -> bool {
        let found = skill
            .into_iter()
            .chain(agent.skills().keys())
            .filter_map(|s| catalog.get(s))
            .find_map(|s| s.actions().iter().find(|a| a.spec().id == action).map(|a| (a.clone(), s.id().clone())));
        match found {
            Some((dyn_action, skill)) => {
                self.entries.insert(action, Registered { action: dyn_action, skill: Some(skill) });
                self.epoch += 1;
                true
            }
            None => false,
        }
    }

    /// Removes an action.
    pub fn deregister(&mut self, action: &ActionId) {
        self.entries.remove(action);
        self.epoch += 1;
    }

    /// Makes the actions `skill` still provides run its build `actions` (a refreshed skill's new code).
    pub fn rebuild(&mut self, skill: &SkillId, actions: &[DynAction]) {
        self.epoch += 1;
        for action in actions {
            if let Some(registered) = self.entries.get_mut(&action.spec().id)
                && registered.skill.as_ref() == Some(skill)
            {
                registered.action = action.clone();
            }
        }
    }

    /// Actions the table runs from `skill` that are not in `provided` (another mounted skill still provides
    /// them, or no `DeregisterAction` would have left them).
    pub fn stale(&self, skill: &SkillId, provided: &[ActionId]) -> Vec<ActionId> {
        self.entries
            .iter()
            .filter(|(action, registered)| registered.skill.as_ref() == Some(skill) && !provided.contains(action))
            .map(|(action, _)| action.clone())
            .collect()
    }

    /// The contracts of every registered action, sorted by id.
    pub fn specs(&self) -> Vec<ActionSpec> {
        let mut specs: Vec<_> = self.entries.values().map(|r| r.action.spec().clone()).collect();
        specs.sort_by(|a, b| a.id.cmp(&b.id));
        specs
    }
}

/// What the gate says about one run.
pub enum Gate {
    /// It may not run, for this reason.
    Refused(ActionError),
    /// It may run once approved (its risk asks for approval).
    NeedsApproval(DynAction, Risk),
    /// It may run now.
    Pass(DynAction),
}

/// The gate: the agent must be taking runs, the action must be registered on it, and the policy must allow it
/// and grant its capabilities; a risky run needs approval.
pub fn gate(table: &ActionTable, policy: &Policy, agent: &AgentId, action: &ActionId, taking_runs: bool) -> Gate {
    if !taking_runs {
        return Gate::Refused(ActionError::cancelled("the runtime is shutting down; no new runs start"));
    }
    let Some(registered) = table.get(action) else {
        return Gate::Refused(ActionError::denied(format!(
            "action `{action}` is not registered on agent `{agent}`; mount a skill that provides it"
        )));
    };
    match policy.may_run(registered.action.spec()) {
        RunDecision::Deny { reason } => Gate::Refused(ActionError::denied(reason)),
        RunDecision::NeedsApproval { risk } => Gate::NeedsApproval(registered.action.clone(), risk),
        RunDecision::Allow => Gate::Pass(registered.action.clone()),
    }
}
