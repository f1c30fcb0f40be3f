//! The mounted skills of one agent, by id. A sorted vector rather than a B-tree: an agent mounts a few skills,
//! and a B-tree's first node holds room for eleven entries (280 bytes for one skill, in every idle agent). It
//! reads like a map, serializes as one (the same JSON as a `BTreeMap`), and only the mounting rules change it.

use super::MountedSkill;
use crate::id::SkillId;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Up to how many entries a lookup scans instead of searching (see [`find_sorted`]).
pub(crate) const SCAN: usize = 8;

/// Where `key` is in `entries` (sorted by key, no key twice), or where it would go. A few entries are scanned
/// with `==`, which for ids that share their text (an id cloned from the catalog's, as mounting does) compares
/// pointers and never reads the text: in a simulation of many agents, that text is a cache miss per lookup.
pub(crate) fn find_sorted<K: Ord, V>(entries: &[(K, V)], key: &K) -> Result<usize, usize> {
    if entries.len() <= SCAN {
        return match entries.iter().position(|(other, _)| other == key) {
            Some(at) => Ok(at),
            None => Err(entries.partition_point(|(other, _)| other < key)),
        };
    }
    entries.binary_search_by(|(other, _)| other.cmp(key))
}

/// An agent's mounted skills, sorted by id (see [`crate::skill::AgentState::skills`]).
///
/// ```
/// use agentry::id::{AgentId, SkillId};
/// use agentry::policy::Policy;
/// use agentry::skill::{AgentState, Skill, mount};
/// use serde_json::Value;
///
/// let mut state = AgentState::new(AgentId::new("a1").unwrap(), ());
/// let notes = Skill::builder("notes", "1.0.0").build().unwrap();
/// mount(&mut state, &notes, &Value::Null, &Policy::default()).unwrap();
/// let id = SkillId::new("notes").unwrap();
/// assert_eq!(state.skills().len(), 1);
/// assert_eq!(state.skills()[&id].version.to_string(), "1.0.0");
/// assert_eq!(state.skills().keys().collect::<Vec<_>>(), [&id]);
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SkillMap {
    /// Sorted by id, no id twice; its capacity is its length, so an idle agent keeps no spare room.
    entries: Vec<(SkillId, Arc<MountedSkill>)>,
}

/// The mounted skills in id order, as `(id, skill)` pairs.
pub struct Iter<'a>(std::slice::Iter<'a, (SkillId, Arc<MountedSkill>)>);

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a SkillId, &'a Arc<MountedSkill>);

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next().map(|(id, mounted)| (id, mounted))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.0.next_back().map(|(id, mounted)| (id, mounted))
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl SkillMap {
    /// How many skills are mounted.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no skill is mounted.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// A mounted skill.
    pub fn get(&self, id: &SkillId) -> Option<&Arc<MountedSkill>> {
        self.find(id).ok().map(|at| &self.entries[at].1)
    }

    /// Whether a skill is mounted.
    pub fn contains_key(&self, id: &SkillId) -> bool {
        self.find(id).is_ok()
    }

    /// The mounted skills in id order.
    pub fn iter(&self) -> Iter<'_> {
        Iter(self.entries.iter())
    }

    /// The ids of the mounted skills, in order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &SkillId> + ExactSizeIterator {
        self.entries.iter().map(|(id, _)| id)
    }

    /// The mounted skills, in id order.
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &Arc<MountedSkill>> + ExactSizeIterator {
        self.entries.iter().map(|(_, mounted)| mounted)
    }

    fn find(&self, id: &SkillId) -> Result<usize, usize> {
        find_sorted(&self.entries, id)
    }

    pub(crate) fn get_mut(&mut self, id: &SkillId) -> Option<&mut Arc<MountedSkill>> {
        self.find(id).ok().map(|at| &mut self.entries[at].1)
    }

    /// Mounts (or replaces) one skill; returns the one it replaced.
    pub(crate) fn insert(&mut self, id: SkillId, mounted: Arc<MountedSkill>) -> Option<Arc<MountedSkill>> {
        match self.find(&id) {
            Ok(at) => Some(std::mem::replace(&mut self.entries[at].1, mounted)),
            Err(at) => {
                self.entries.reserve_exact(1);
                self.entries.insert(at, (id, mounted));
                None
            }
        }
    }

    /// Unmounts one skill; returns it if it was mounted.
    pub(crate) fn remove(&mut self, id: &SkillId) -> Option<Arc<MountedSkill>> {
        let at = self.find(id).ok()?;
        let (_, mounted) = self.entries.remove(at);
        self.entries.shrink_to_fit();
        Some(mounted)
    }
}

impl std::ops::Index<&SkillId> for SkillMap {
    type Output = Arc<MountedSkill>;

    /// The mounted skill `id`; panics if it is not mounted (as a map's index does).
    fn index(&self, id: &SkillId) -> &Self::Output {
        match self.get(id) {
            Some(mounted) => mounted,
            None => panic!("skill `{id}` is not mounted"),
        }
    }
}

impl<'a> IntoIterator for &'a SkillMap {
    type Item = (&'a SkillId, &'a Arc<MountedSkill>);
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl FromIterator<(SkillId, Arc<MountedSkill>)> for SkillMap {
    /// Later entries win over earlier ones with the same id, as in a map.
    fn from_iter<I: IntoIterator<Item = (SkillId, Arc<MountedSkill>)>>(pairs: I) -> Self {
        let sorted: BTreeMap<SkillId, Arc<MountedSkill>> = pairs.into_iter().collect();
        Self { entries: sorted.into_iter().collect() }
    }
}

impl Serialize for SkillMap {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

impl<'de> Deserialize<'de> for SkillMap {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let sorted = BTreeMap::<SkillId, Arc<MountedSkill>>::deserialize(deserializer)?;
        Ok(Self { entries: sorted.into_iter().collect() })
    }
}

#[cfg(test)]
mod tests {
    use super::SkillMap;
    use crate::id::SkillId;
    use crate::skill::MountedSkill;
    use proptest::prelude::*;
    use serde_json::Value;
    use std::collections::BTreeMap;
    use std::sync::Arc;

    fn mounted(n: u64) -> Arc<MountedSkill> {
        Arc::new(MountedSkill {
            version: semver::Version::new(n, 0, 0),
            state: Value::Null,
            actions: Vec::new(),
            requires: Vec::new(),
        })
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u8, u64),
        Remove(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![(0u8..12, 0u64..5).prop_map(|(k, v)| Op::Insert(k, v)), (0u8..12).prop_map(Op::Remove)]
    }

    proptest! {
        /// The map behaves as a `BTreeMap` under any sequence of inserts and removes: the same answers, the
        /// same order, the same JSON both ways, and no spare room kept.
        #[test]
        fn it_is_a_btree_map_that_keeps_no_spare_room(ops in prop::collection::vec(op(), 0..40)) {
            let id = |k: u8| SkillId::new(format!("s{k}")).expect("a valid id");
            let (mut map, mut model) = (SkillMap::default(), BTreeMap::new());
            for op in ops {
                match op {
                    Op::Insert(k, v) => prop_assert_eq!(map.insert(id(k), mounted(v)), model.insert(id(k), mounted(v))),
                    Op::Remove(k) => prop_assert_eq!(map.remove(&id(k)), model.remove(&id(k))),
                }
                prop_assert_eq!(map.entries.capacity(), map.len());
            }
            prop_assert_eq!(map.len(), model.len());
            prop_assert!(map.iter().eq(model.iter()));
            prop_assert!(map.iter().rev().eq(model.iter().rev()));
            for k in 0..12 {
                prop_assert_eq!(map.get(&id(k)), model.get(&id(k)));
                prop_assert_eq!(map.contains_key(&id(k)), model.contains_key(&id(k)));
            }
            let json = serde_json::to_string(&map).expect("serializes");
            prop_assert_eq!(&json, &serde_json::to_string(&model).expect("serializes"));
            let back: SkillMap = serde_json::from_str(&json).expect("deserializes");
            prop_assert_eq!(&back, &map);
            prop_assert_eq!(back.entries.capacity(), back.len());
            let collected: SkillMap = model.clone().into_iter().rev().collect();
            prop_assert_eq!(collected, map);
        }
    }

    #[test]
    fn a_map_with_an_id_twice_keeps_the_last_as_a_btree_map_does() {
        let back: SkillMap = serde_json::from_str(
            // The first is written as journals before the field's rename have it.
            r#"{"a": {"vsn": "1.0.0", "state": null, "actions": [], "requires": []},
                "a": {"version": "2.0.0", "state": null, "actions": [], "requires": []}}"#,
        )
        .expect("deserializes");
        assert_eq!(back.len(), 1);
        assert_eq!(back[&SkillId::new("a").expect("an id")].version.major, 2);
        let old: SkillMap =
            serde_json::from_str(r#"{"b": {"vsn": "3.1.0", "state": null, "actions": [], "requires": []}}"#)
                .expect("a journal written before `vsn` became `version` reads");
        assert_eq!(old[&SkillId::new("b").expect("an id")].version, semver::Version::new(3, 1, 0));
    }
}
