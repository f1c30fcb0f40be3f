//! Property test of `skill::refresh`: random catalogs, some skills mounted, then random new builds of random
//! skills (same version, other actions), checked against a model after every refresh.

use agentry::agent::AgentState;
use agentry::effect::EffectKind;
use agentry::id::{AgentId, SkillId};
use agentry::policy::Policy;
use agentry::skill::{MountError, mount, refresh};
use agentry_tests::{POOL, SkillDef, action_id, build_skill, catalog, skill_id};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

/// The live table the server would hold after interpreting `effects` in order.
fn fold(table: &mut BTreeSet<String>, effects: &[agentry::Effect]) {
    for effect in effects {
        match &effect.kind {
            EffectKind::RegisterAction { action } => {
                table.insert(action.to_string());
            }
            EffectKind::DeregisterAction { action } => {
                table.remove(action.as_str());
            }
            other => panic!("mounting and refreshing only register and deregister: {other:?}"),
        }
    }
}

/// What the model says the table holds: every action of every mounted skill, as its current build has it.
fn expected_table(defs: &[SkillDef], mounted: &BTreeSet<usize>) -> BTreeSet<String> {
    mounted.iter().flat_map(|m| defs[*m].actions.iter().map(|a| action_id(*a))).collect()
}

/// A new action list for a skill: distinct pool indices, in a random order.
fn new_actions() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(0..POOL, 0..=5).prop_map(|mut actions| {
        let mut seen = BTreeSet::new();
        actions.retain(|a| seen.insert(*a));
        actions
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn refresh_keeps_the_table_equal_to_the_mounted_skills_actions(
        defs in catalog(),
        picks in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
        refreshes in prop::collection::vec((any::<prop::sample::Index>(), new_actions(), any::<bool>()), 1..10),
    ) {
        let mut defs = defs;
        let policy = Policy::default();
        let mut state = AgentState::new(AgentId::new("a").expect("a valid id"), ());
        let mut table = BTreeSet::new();
        let mut mounted = BTreeSet::new();
        // Mount what can be mounted among the picks, in the order picked (requirements permitting).
        for pick in &picks {
            let index = pick.index(defs.len());
            let def = defs[index].clone();
            if def.denied || def.invalid_state || mounted.contains(&index) {
                continue;
            }
            if def.requires.iter().all(|r| mounted.contains(r)) {
                let effects = mount(&mut state, &build_skill(&def, false), &serde_json::Value::Null, &policy)
                    .expect("the model says this mount succeeds");
                fold(&mut table, &effects);
                mounted.insert(index);
            }
        }
        prop_assert_eq!(&table, &expected_table(&defs, &mounted));

        for (pick, actions, other_version) in refreshes {
            let index = pick.index(defs.len());
            let mut def = defs[index].clone();
            def.actions = actions;
            let before = state.clone();
            let result = refresh(&mut state, &build_skill(&def, other_version));
            let id = SkillId::new(skill_id(index)).expect("a valid id");
            if !mounted.contains(&index) {
                // Not mounted: nothing happens, whatever the build.
                prop_assert_eq!(result, Ok(vec![]));
                prop_assert_eq!(&state, &before);
                defs[index] = def;
                continue;
            }
            if other_version {
                let is_conflict = matches!(result, Err(MountError::VersionConflict { .. }));
                prop_assert!(is_conflict, "{:?}", result);
                prop_assert_eq!(&state, &before, "a failed refresh changes nothing");
                continue;
            }
            let effects = result.expect("a refresh at the same version of a mounted skill succeeds");
            // Effects only touch the difference: a deregister for a dropped action, a register for a new one.
            let old: BTreeSet<String> = defs[index].actions.iter().map(|a| action_id(*a)).collect();
            let new: BTreeSet<String> = def.actions.iter().map(|a| action_id(*a)).collect();
            for effect in &effects {
                match &effect.kind {
                    EffectKind::RegisterAction { action } => {
                        prop_assert!(new.contains(action.as_str()) && !old.contains(action.as_str()));
                    }
                    EffectKind::DeregisterAction { action } => {
                        prop_assert!(old.contains(action.as_str()) && !new.contains(action.as_str()));
                    }
                    _ => unreachable!("checked by fold"),
                }
                prop_assert_eq!(effect.meta.skill.as_ref(), Some(&id));
            }
            fold(&mut table, &effects);
            defs[index] = def;
            prop_assert_eq!(&table, &expected_table(&defs, &mounted));
            // The skill's state, version and the other skills are kept.
            let kept: BTreeMap<_, _> = before.skills().iter().filter(|(s, _)| **s != id).collect();
            let now: BTreeMap<_, _> = state.skills().iter().filter(|(s, _)| **s != id).collect();
            prop_assert_eq!(kept, now);
            prop_assert_eq!(&state.skills()[&id].state, &before.skills()[&id].state);
            prop_assert_eq!(&state.skills()[&id].version, &before.skills()[&id].version);
        }
    }
}
