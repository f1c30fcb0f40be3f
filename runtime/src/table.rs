//! The live action table and the gate: what an agent can run now, and whether one run may start. Pure data and
//! decisions, shared by every driver of agents: the agent's server (and the simulator) holds the table and asks
//! the gate before every run starts.

use crate::action::{ActionError, ActionSpec, DynAction, Risk};
use crate::id::{ActionId, AgentId, SkillId};
use crate::meter::{Meter, Metered};
use crate::policy::{Policy, RunDecision};
use crate::skill::{AgentState, Catalog};
use std::time::Duration;

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
    /// Sorted by id, no id twice, no spare room: every idle agent keeps one table, and a hash map's smallest
    /// allocation for one action is four times the size of the entry.
    entries: Vec<(ActionId, Registered)>,
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
        self.find(action).ok().map(|at| &self.entries[at].1)
    }

    fn find(&self, action: &ActionId) -> Result<usize, usize> {
        crate::skill::find_sorted(&self.entries, action)
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
                let registered = Registered { action: dyn_action, skill: Some(skill) };
                match self.find(&action) {
                    Ok(at) => self.entries[at].1 = registered,
                    Err(at) => {
                        self.entries.reserve_exact(1);
                        self.entries.insert(at, (action, registered));
                    }
                }
                self.epoch += 1;
                true
            }
            None => false,
        }
    }

    /// Removes an action.
    pub fn deregister(&mut self, action: &ActionId) {
        if let Ok(at) = self.find(action) {
            self.entries.remove(at);
            self.entries.shrink_to_fit();
        }
        self.epoch += 1;
    }

    /// Makes the actions `skill` still provides run its build `actions` (a refreshed skill's new code).
    pub fn rebuild(&mut self, skill: &SkillId, actions: &[DynAction]) {
        self.epoch += 1;
        for action in actions {
            if let Ok(at) = self.find(&action.spec().id)
                && self.entries[at].1.skill.as_ref() == Some(skill)
            {
                self.entries[at].1.action = action.clone();
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
        self.entries.iter().map(|(_, r)| r.action.spec().clone()).collect()
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
    /// It may run once a rate limit lets it through, after this long: it is held, then meets the gate again.
    Wait(Duration),
}

/// The gate: the agent must be taking runs, the action must be registered on it, the policy must allow its
/// skill (still: it may have changed since the skill was mounted) and the action, and grant its capabilities; a
/// risky run needs approval.
pub fn gate(table: &ActionTable, policy: &Policy, agent: &AgentId, action: &ActionId, taking_runs: bool) -> Gate {
    if !taking_runs {
        return Gate::Refused(ActionError::cancelled("the runtime is shutting down; no new runs start"));
    }
    let Some(registered) = table.get(action) else {
        return Gate::Refused(ActionError::denied(format!(
            "action `{action}` is not registered on agent `{agent}`; mount a skill that provides it"
        )));
    };
    // A skill the policy stopped allowing after it was mounted: none of its actions runs.
    if let Some(skill) = &registered.skill
        && let Err(reason) = policy.may_mount(skill)
    {
        return Gate::Refused(ActionError::denied(format!(
            "action `{action}` belongs to skill `{skill}`, which the policy does not allow: {reason}"
        )));
    }
    match policy.may_run(registered.action.spec()) {
        RunDecision::Deny { reason } => Gate::Refused(ActionError::denied(reason)),
        RunDecision::NeedsApproval { risk } => Gate::NeedsApproval(registered.action.clone(), risk),
        RunDecision::Allow => Gate::Pass(registered.action.clone()),
    }
}

/// The gate, then the meter: a run the policy lets through (or that was approved) meets the agent's budgets and
/// rate limits at `now` (see [`Meter::admit`]), which may refuse it, ask for approval, or hold it. Without a
/// meter (no budgets or rate limits) this is [`gate`].
#[allow(clippy::too_many_arguments)]
pub fn gate_metered(
    table: &ActionTable,
    policy: &Policy,
    meter: Option<&mut Meter>,
    now: Duration,
    agent: &AgentId,
    action: &ActionId,
    taking_runs: bool,
    approved: bool,
) -> Gate {
    let passed = match gate(table, policy, agent, action, taking_runs) {
        Gate::NeedsApproval(action, risk) if !approved => return Gate::NeedsApproval(action, risk),
        Gate::NeedsApproval(action, _) | Gate::Pass(action) => action,
        other => return other,
    };
    let Some(meter) = meter else { return Gate::Pass(passed) };
    match meter.admit(policy, action.as_str(), now, approved) {
        Metered::Pass => Gate::Pass(passed),
        Metered::Ask(_) => {
            let risk = policy.effective_risk(passed.spec());
            Gate::NeedsApproval(passed, risk)
        }
        Metered::Refuse(error) => Gate::Refused(error),
        Metered::Wait(wait) => Gate::Wait(wait),
    }
}

#[cfg(test)]
mod tests {
    use super::ActionTable;
    use crate::action::{ActionSpec, DynAction};
    use crate::id::{ActionId, AgentId, SkillId};
    use crate::skill::{AgentState, Catalog, Skill};
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn catalog() -> Catalog {
        let mut builder = Skill::builder("s", "1.0.0");
        for n in 0..12 {
            let spec = ActionSpec::new(format!("s.a{n}"), "an action").expect("a valid id");
            let action = DynAction::new(spec, |p, _| Box::pin(async move { Ok(p) })).expect("a valid action");
            builder = builder.dyn_action(action);
        }
        let mut catalog = Catalog::new();
        catalog.insert(builder.build().expect("a valid skill"));
        catalog
    }

    proptest! {
        /// Under any registrations and removals the table holds what a set of ids would, finds each, lists
        /// their contracts in id order, and keeps no spare room.
        #[test]
        fn the_table_is_a_sorted_set_of_actions(ops in prop::collection::vec((any::<bool>(), 0u8..12), 0..40)) {
            let (catalog, skill) = (catalog(), SkillId::new("s").expect("a valid id"));
            let agent = AgentState::new(AgentId::new("a").expect("a valid id"), ());
            let (mut table, mut model) = (ActionTable::default(), BTreeSet::new());
            for (register, n) in ops {
                let id = ActionId::new(format!("s.a{n}")).expect("a valid id");
                if register {
                    prop_assert!(table.register(id.clone(), Some(&skill), &agent, &catalog));
                    model.insert(id);
                } else {
                    table.deregister(&id);
                    model.remove(&id);
                }
                prop_assert_eq!(table.entries.capacity(), table.entries.len());
            }
            for n in 0..12 {
                let id = ActionId::new(format!("s.a{n}")).expect("a valid id");
                prop_assert_eq!(table.get(&id).is_some(), model.contains(&id));
            }
            let listed: Vec<ActionId> = table.specs().into_iter().map(|s| s.id).collect();
            prop_assert_eq!(listed, model.into_iter().collect::<Vec<_>>());
        }
    }
}
