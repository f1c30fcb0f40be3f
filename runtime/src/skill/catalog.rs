//! The catalog: every skill a runtime knows, by id.

use super::Skill;
use crate::id::SkillId;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Every skill a runtime knows, by id. Cloning shares the skills.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    skills: BTreeMap<SkillId, Arc<Skill>>,
}

impl Catalog {
    /// An empty catalog.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a skill, replacing any with the same id; returns the one replaced.
    pub fn insert(&mut self, skill: Skill) -> Option<Arc<Skill>> {
        self.skills.insert(skill.id().clone(), Arc::new(skill))
    }

    /// A skill by id.
    pub fn get(&self, id: &SkillId) -> Option<&Arc<Skill>> {
        self.skills.get(id)
    }

    /// Every skill, by id.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Skill>> {
        self.skills.values()
    }

    /// How many skills it holds.
    pub fn len(&self) -> usize {
        self.skills.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.skills.is_empty()
    }
}

impl FromIterator<Skill> for Catalog {
    fn from_iter<I: IntoIterator<Item = Skill>>(iter: I) -> Self {
        let mut catalog = Self::new();
        for skill in iter {
            catalog.insert(skill);
        }
        catalog
    }
}
