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

/// The catalog a running runtime reads: a snapshot readers take cheaply, replaced whole when a skill is added or
/// refreshed at run time, so a reader never sees half an update.
#[derive(Debug, Default)]
pub(crate) struct LiveCatalog {
    current: std::sync::RwLock<Arc<Catalog>>,
}

impl LiveCatalog {
    pub(crate) fn new(catalog: Catalog) -> Self {
        Self { current: std::sync::RwLock::new(Arc::new(catalog)) }
    }

    /// The catalog as it is now.
    pub(crate) fn snapshot(&self) -> Arc<Catalog> {
        // A writer never panics while holding the lock (it only swaps an `Arc`), so a poisoned lock still
        // holds a whole catalog.
        self.current.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Changes the catalog through `change`, which sees the current one and may refuse with an error.
    pub(crate) fn update<T, E>(&self, change: impl FnOnce(&mut Catalog) -> Result<T, E>) -> Result<T, E> {
        let mut current = self.current.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut next = Catalog::clone(&current);
        let result = change(&mut next)?;
        *current = Arc::new(next);
        Ok(result)
    }
}
