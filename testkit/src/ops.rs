//! Mount operations over a catalog, as a proptest strategy: what [`crate::check_mounting`] draws, for your own
//! properties over mounting.

use crate::{schema, signals};
use agentry::Signal;
use agentry::agent::{Agent, AgentState, step};
use agentry::effect::Effect;
use agentry::id::SkillId;
use agentry::policy::Policy;
use agentry::skill::{Catalog, Skill, mount, mount_all, unmount};
use proptest::prelude::*;
use serde_json::Value;
use std::fmt;
use std::sync::Arc;

/// One operation on an agent's mounted skills.
#[derive(Debug, Clone, PartialEq)]
pub enum MountOp {
    /// Mount a catalog skill with these options.
    Mount {
        /// The skill.
        skill: SkillId,
        /// Its mount options.
        opts: Value,
    },
    /// Unmount a skill.
    Unmount {
        /// The skill.
        skill: SkillId,
    },
    /// Mount several skills at once, all or nothing.
    MountAll {
        /// The skills, each with its options.
        entries: Vec<(SkillId, Value)>,
    },
    /// Offer a signal to the agent (and, if it ignores it, to its mounted skills).
    Signal {
        /// The signal.
        signal: Signal,
    },
}

impl fmt::Display for MountOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MountOp::Mount { skill, opts } => write!(f, "mount `{skill}` with options {opts}"),
            MountOp::Unmount { skill } => write!(f, "unmount `{skill}`"),
            MountOp::MountAll { entries } => {
                let list: Vec<String> = entries.iter().map(|(s, o)| format!("`{s}` with {o}")).collect();
                write!(f, "mount_all [{}]", list.join(", "))
            }
            MountOp::Signal { signal } => write!(f, "signal `{}` with data {}", signal.kind(), signal.data()),
        }
    }
}

impl MountOp {
    /// Applies the operation to `state` with agentry's pure functions, as the server would; `Err` says why it
    /// failed (the state is then unchanged). A skill the catalog does not have is an error too.
    pub fn apply<A: Agent>(
        &self,
        state: &mut AgentState<A>,
        catalog: &Catalog,
        policy: &Policy,
    ) -> Result<Vec<Effect>, String> {
        let find = |id: &SkillId| catalog.get(id).cloned().ok_or_else(|| format!("skill `{id}` is not in the catalog"));
        match self {
            MountOp::Mount { skill, opts } => {
                mount(state, find(skill)?.as_ref(), opts, policy).map_err(|e| e.to_string())
            }
            MountOp::Unmount { skill } => unmount(state, skill).map_err(|e| e.to_string()),
            MountOp::MountAll { entries } => {
                let skills: Vec<(Arc<Skill>, Value)> =
                    entries.iter().map(|(id, opts)| Ok((find(id)?, opts.clone()))).collect::<Result<_, String>>()?;
                let given: Vec<(&Skill, Value)> = skills.iter().map(|(s, o)| (s.as_ref(), o.clone())).collect();
                mount_all(state, &given, policy).map_err(|e| e.to_string())
            }
            MountOp::Signal { signal } => step(state, signal, catalog).map(|s| s.effects).map_err(|e| e.to_string()),
        }
    }
}

/// Operations over the skills of `catalog`: mounts with options drawn from each skill's state schema (or
/// `null`), unmounts, `mount_all` of one to four skills, and signals whose kinds match `signal_kinds` (patterns
/// such as `order.*`) with arbitrary data. `Err` names a skill whose state schema no options can be drawn for,
/// a bad pattern, or an empty catalog.
///
/// ```
/// use agentry::agent::AgentState;
/// use agentry::id::AgentId;
/// use agentry::policy::Policy;
/// use agentry::skill::{Catalog, Skill};
/// use agentry_testkit::ops::mount_ops;
/// use proptest::prelude::*;
/// use proptest::test_runner::TestRunner;
///
/// let base = Skill::builder("base", "1.0.0").build().unwrap();
/// let extra = Skill::builder("extra", "1.0.0").requires("base").build().unwrap();
/// let catalog: Catalog = [base, extra].into_iter().collect();
/// let sequences = prop::collection::vec(mount_ops(&catalog, &["tick"]).unwrap(), 1..10);
/// TestRunner::default()
///     .run(&sequences, |ops| {
///         let mut state = AgentState::new(AgentId::new("a").unwrap(), ());
///         for op in &ops {
///             let _ = op.apply(&mut state, &catalog, &Policy::default());
///             // Your own property: `extra` is never mounted without `base`.
///             let extra_alone = state.skills().keys().any(|s| s.as_str() == "extra") && state.skills().len() == 1;
///             prop_assert!(!extra_alone, "after {op}");
///         }
///         Ok(())
///     })
///     .unwrap();
/// ```
pub fn mount_ops(catalog: &Catalog, signal_kinds: &[&str]) -> Result<BoxedStrategy<MountOp>, String> {
    let skills: Vec<Arc<Skill>> = catalog.iter().cloned().collect();
    if skills.is_empty() {
        return Err("the catalog is empty; expected at least one skill".to_owned());
    }
    let mut entries = Vec::with_capacity(skills.len());
    for skill in &skills {
        let options = schema::values(skill.state_schema())
            .map_err(|err| format!("no mount options can be drawn for skill `{}`: {err}", skill.id()))?;
        let id = skill.id().clone();
        // Options drawn from the schema, or none at all (`null`), as a user mounting without options would.
        let entry = prop_oneof![1 => Just(Value::Null), 3 => options].prop_map(move |opts| (id.clone(), opts));
        entries.push(entry.boxed());
    }
    let entry = proptest::strategy::Union::new(entries).boxed();
    let data = schema::values(&Value::Bool(true)).map_err(|err| err.to_string())?;
    let signals = signals::signals(signal_kinds, data)?;
    let ids: Vec<SkillId> = skills.iter().map(|s| s.id().clone()).collect();
    Ok(prop_oneof![
        5 => entry.clone().prop_map(|(skill, opts)| MountOp::Mount { skill, opts }),
        3 => proptest::sample::select(ids).prop_map(|skill| MountOp::Unmount { skill }),
        1 => prop::collection::vec(entry, 1..=4).prop_map(|entries| MountOp::MountAll { entries }),
        2 => signals.prop_map(|signal| MountOp::Signal { signal }),
    ]
    .boxed())
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentry::id::AgentId;

    #[test]
    fn an_unknown_skill_or_an_empty_catalog_is_an_error() {
        assert!(mount_ops(&Catalog::new(), &["tick"]).is_err());
        let op = MountOp::Mount { skill: SkillId::new("ghost").expect("a valid id"), opts: Value::Null };
        let mut state = AgentState::new(AgentId::new("a").expect("a valid id"), ());
        let err = op.apply(&mut state, &Catalog::new(), &Policy::default()).expect_err("refused");
        assert!(err.contains("`ghost` is not in the catalog"), "{err}");
        assert_eq!(op.to_string(), "mount `ghost` with options null");
    }
}
