//! The catalog: every skill a runtime knows, by id.

use super::Skill;
use crate::id::SkillId;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

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

    /// A skill by id. A small catalog is scanned with `==`, which compares pointers first: the ids agents
    /// hold are clones of the catalog's own, so the lookup never reads their text.
    pub fn get(&self, id: &SkillId) -> Option<&Arc<Skill>> {
        if self.skills.len() <= super::SCAN {
            return self.skills.iter().find(|(known, _)| *known == id).map(|(_, skill)| skill);
        }
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
    /// Counts the catalog's replacements, so that a reader holding a snapshot knows it is still the catalog.
    version: AtomicU64,
}

/// A snapshot of a [`LiveCatalog`] a reader keeps, with the version it was taken at (see
/// [`LiveCatalog::current`]).
#[derive(Debug, Clone)]
pub(crate) struct HeldCatalog {
    version: u64,
    catalog: Arc<Catalog>,
}

impl LiveCatalog {
    pub(crate) fn new(catalog: Catalog) -> Self {
        Self { current: std::sync::RwLock::new(Arc::new(catalog)), version: AtomicU64::new(0) }
    }

    /// A snapshot to keep and read through [`LiveCatalog::current`].
    pub(crate) fn held(&self) -> HeldCatalog {
        let version = self.version.load(Ordering::Acquire);
        HeldCatalog { version, catalog: self.snapshot() }
    }

    /// The catalog as it is now, read through the snapshot `held`, which is taken again only if the catalog
    /// was replaced since: an agent's server reads the catalog for every signal, and a snapshot takes the lock
    /// and shares the catalog anew (four atomic writes to memory every agent's server touches), where this
    /// reads one number.
    pub(crate) fn current<'a>(&self, held: &'a mut HeldCatalog) -> &'a Arc<Catalog> {
        if self.version.load(Ordering::Acquire) != held.version {
            // The version is read before the catalog, so a replacement in between is seen next time.
            *held = self.held();
        }
        &held.catalog
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
        // Counted under the lock, before the change is reported done: whoever hears of it sees the new version.
        self.version.fetch_add(1, Ordering::AcqRel);
        Ok(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skill(id: &str, version: &str) -> Skill {
        Skill::builder(id, version).build().unwrap()
    }

    #[test]
    fn a_catalog_holds_one_skill_per_id_in_id_order() {
        let mut catalog = Catalog::new();
        assert!(catalog.is_empty());
        assert!(catalog.insert(skill("web", "1.0.0")).is_none());
        assert!(catalog.insert(skill("math", "1.0.0")).is_none());
        let replaced = catalog.insert(skill("web", "2.0.0")).expect("the first web skill is replaced");
        assert_eq!(replaced.version().to_string(), "1.0.0");
        assert!(!catalog.is_empty());
        assert_eq!(catalog.len(), 2);
        let web = SkillId::new("web").unwrap();
        assert_eq!(catalog.get(&web).map(|s| s.version().to_string()).as_deref(), Some("2.0.0"));
        assert!(catalog.get(&SkillId::new("shell").unwrap()).is_none());
        let ids: Vec<String> = catalog.iter().map(|s| s.id().to_string()).collect();
        assert_eq!(ids, ["math", "web"]);
        let collected: Catalog = [skill("b", "1.0.0"), skill("a", "1.0.0"), skill("b", "1.1.0")].into_iter().collect();
        let ids: Vec<String> = collected.iter().map(|s| format!("{}@{}", s.id(), s.version())).collect();
        assert_eq!(ids, ["a@1.0.0", "b@1.1.0"], "collected in order, the last of an id wins");
    }

    /// A held snapshot is read as it is while the catalog is unchanged, and taken again once it changed (a
    /// refused change changes nothing).
    #[test]
    fn a_held_catalog_is_taken_again_only_once_the_catalog_changed() {
        let live = LiveCatalog::new([skill("web", "1.0.0")].into_iter().collect());
        let mut held = live.held();
        let first = Arc::as_ptr(live.current(&mut held));
        assert_eq!(Arc::as_ptr(live.current(&mut held)), first, "unchanged: the same snapshot");
        let refused: Result<(), &str> = live.update(|_| Err("no"));
        assert!(refused.is_err());
        assert_eq!(Arc::as_ptr(live.current(&mut held)), first, "a refused change is no change");
        live.update(|catalog| catalog.insert(skill("math", "1.0.0")).map_or(Ok::<_, ()>(()), |_| Err(()))).unwrap();
        let now = live.current(&mut held);
        assert_eq!(now.len(), 2, "the changed catalog");
        assert!(Arc::ptr_eq(now, &live.snapshot()));
    }

    #[test]
    fn a_live_catalog_changes_whole_or_not_at_all() {
        let live = LiveCatalog::new([skill("web", "1.0.0")].into_iter().collect());
        let before = live.snapshot();
        assert_eq!(before.len(), 1);
        let refused: Result<(), String> = live.update(|catalog| {
            catalog.insert(skill("math", "1.0.0"));
            Err("no".to_owned())
        });
        assert_eq!(refused, Err("no".to_owned()));
        assert_eq!(live.snapshot().len(), 1, "a refused change leaves nothing behind");
        live.update(|catalog| catalog.insert(skill("math", "1.0.0")).map_or(Ok::<_, ()>(()), |_| Err(()))).unwrap();
        assert_eq!(live.snapshot().len(), 2);
        assert_eq!(before.len(), 1, "a snapshot taken before keeps what it saw");
    }
}
