//! The mounting rules of the design, as pure functions over an agent's state.
//!
//! Each function checks everything before it changes anything, so an `Err` leaves the state as it was.

use super::{AgentState, MountedSkill};
use super::{MountError, Skill};
use crate::effect::Effect;
use crate::id::SkillId;
use crate::policy::Policy;
use serde_json::Value;
use std::collections::HashMap;

/// Mounts a skill with options: the rules, in order, are (1) the same version already mounted is a no-op and
/// another version is `VersionConflict`; (2) every required skill must be mounted; (3) the initial state must
/// validate; (4) the policy must allow the skill. Returns one `RegisterAction` per action that no other mounted
/// skill already provides, in declaration order.
pub fn mount<S>(
    state: &mut AgentState<S>,
    skill: &Skill,
    opts: &Value,
    policy: &Policy,
) -> Result<Vec<Effect>, MountError> {
    let id = skill.id();
    if let Some(mounted) = state.skills.get(id) {
        if mounted.version == *skill.version() {
            return Ok(Vec::new());
        }
        return Err(version_conflict(&mounted.version, skill));
    }
    requirements_mounted(state, skill)?;
    let skill_state =
        skill.initial_state(opts).map_err(|errors| MountError::InvalidState { skill: id.clone(), errors })?;
    policy.may_mount(id).map_err(|reason| MountError::Denied { skill: id.clone(), reason })?;

    let actions: Vec<_> = skill.actions().iter().map(|a| a.spec().id.clone()).collect();
    let effects = actions
        .iter()
        .filter(|action| !state.provides(action))
        .map(|action| Effect::register(action.clone()).from_skill(id.clone()))
        .collect();
    let requires = skill.requires().to_vec();
    let mounted = MountedSkill { version: skill.version().clone(), state: skill_state, actions, requires };
    state.skills.insert(id.clone(), std::sync::Arc::new(mounted));
    Ok(effects)
}

/// `MissingDependency` unless every skill `skill` requires is mounted.
fn requirements_mounted<S>(state: &AgentState<S>, skill: &Skill) -> Result<(), MountError> {
    let missing: Vec<SkillId> = skill.requires().iter().filter(|r| !state.skills.contains_key(r)).cloned().collect();
    if missing.is_empty() { Ok(()) } else { Err(MountError::MissingDependency { skill: skill.id().clone(), missing }) }
}

/// The error for asking for `skill` at its version while `mounted` is mounted.
pub(crate) fn version_conflict(mounted: &semver::Version, skill: &Skill) -> MountError {
    MountError::VersionConflict {
        skill: skill.id().clone(),
        mounted: mounted.clone(),
        requested: skill.version().clone(),
    }
}

/// Unmounts a skill. Not mounted: a no-op. Required by another mounted skill: `RequiredBy`. Otherwise returns
/// one `DeregisterAction` per action of the skill that no remaining skill provides, in declaration order.
pub fn unmount<S>(state: &mut AgentState<S>, skill: &SkillId) -> Result<Vec<Effect>, MountError> {
    if !state.skills.contains_key(skill) {
        return Ok(Vec::new());
    }
    let dependents: Vec<SkillId> =
        state.skills.iter().filter(|(_, m)| m.requires.contains(skill)).map(|(id, _)| id.clone()).collect();
    if !dependents.is_empty() {
        return Err(MountError::RequiredBy { skill: skill.clone(), dependents });
    }
    let Some(removed) = state.skills.remove(skill) else { return Ok(Vec::new()) };
    Ok(removed
        .actions
        .iter()
        .filter(|action| !state.provides(action))
        .map(|action| Effect::deregister(action.clone()).from_skill(skill.clone()))
        .collect())
}

/// Brings a mounted skill up to date with a new build of itself at the same version: a skill whose actions
/// are only known at run time (an MCP server's tools) changes its action set while mounted. The skill's state
/// and the agent's other skills are kept. Returns one `DeregisterAction` per action the skill no longer has
/// and no other skill provides, then one `RegisterAction` per new action no other skill already provides, each
/// in declaration order. Not mounted: a no-op. Another version is `VersionConflict`; requirements that the new
/// build adds must be mounted (`MissingDependency`); on an error the state is unchanged.
pub fn refresh<S>(state: &mut AgentState<S>, skill: &Skill) -> Result<Vec<Effect>, MountError> {
    let id = skill.id();
    let Some(mounted) = state.skills.get(id) else { return Ok(Vec::new()) };
    if mounted.version != *skill.version() {
        return Err(version_conflict(&mounted.version, skill));
    }
    requirements_mounted(state, skill)?;
    let old = mounted.actions.clone();
    let new: Vec<_> = skill.actions().iter().map(|a| a.spec().id.clone()).collect();
    let others = |state: &AgentState<S>, action: &crate::id::ActionId| {
        state.skills.iter().any(|(other, m)| other != id && m.actions.contains(action))
    };
    let mut effects: Vec<Effect> = old
        .iter()
        .filter(|action| !new.contains(action) && !others(state, action))
        .map(|action| Effect::deregister(action.clone()).from_skill(id.clone()))
        .collect();
    effects.extend(
        new.iter()
            .filter(|action| !old.contains(action) && !others(state, action))
            .map(|action| Effect::register(action.clone()).from_skill(id.clone())),
    );
    if let Some(mounted) = state.skills.get_mut(id) {
        let mounted = std::sync::Arc::make_mut(mounted);
        mounted.actions = new;
        mounted.requires = skill.requires().to_vec();
    }
    Ok(effects)
}

/// Mounts several skills, each with its options, in dependency order: a skill is mounted after the skills it
/// requires among those given, and otherwise in the order given. Requirements outside the set must already be
/// mounted. All or nothing: on any error (a cycle among the given skills included) the state is unchanged.
pub fn mount_all<S: Clone>(
    state: &mut AgentState<S>,
    skills: &[(&Skill, Value)],
    policy: &Policy,
) -> Result<Vec<Effect>, MountError> {
    let order = dependency_order(skills)?;
    let mut next = state.clone();
    let mut effects = Vec::new();
    for index in order {
        let (skill, opts) = &skills[index];
        effects.extend(mount(&mut next, skill, opts, policy)?);
    }
    *state = next;
    Ok(effects)
}

/// Indices of `skills` with every skill after the ones it requires (depth-first, stable in the given order),
/// or the first cycle found.
fn dependency_order(skills: &[(&Skill, Value)]) -> Result<Vec<usize>, MountError> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Visiting,
        Done,
    }
    let mut first_index: HashMap<&SkillId, usize> = HashMap::new();
    for (i, (skill, _)) in skills.iter().enumerate() {
        first_index.entry(skill.id()).or_insert(i);
    }
    let mut marks = vec![Mark::New; skills.len()];
    let mut order = Vec::with_capacity(skills.len());
    // An explicit stack of (skill index, next requirement to look at), so deep chains cannot overflow.
    for root in 0..skills.len() {
        if marks[root] != Mark::New {
            continue;
        }
        let mut stack = vec![(root, 0usize)];
        marks[root] = Mark::Visiting;
        while let Some((node, next_req)) = stack.last_mut() {
            let node = *node;
            let requires = skills[node].0.requires();
            if let Some(req) = requires.get(*next_req) {
                *next_req += 1;
                let Some(&child) = first_index.get(req) else { continue };
                match marks[child] {
                    Mark::Done => {}
                    Mark::New => {
                        marks[child] = Mark::Visiting;
                        stack.push((child, 0));
                    }
                    Mark::Visiting => {
                        let start = stack.iter().position(|(n, _)| *n == child).unwrap_or(0);
                        let mut cycle: Vec<SkillId> =
                            stack[start..].iter().map(|(n, _)| skills[*n].0.id().clone()).collect();
                        cycle.push(skills[child].0.id().clone());
                        return Err(MountError::Cycle { cycle });
                    }
                }
            } else {
                marks[node] = Mark::Done;
                order.push(node);
                stack.pop();
            }
        }
    }
    Ok(order)
}
