//! The in-memory journal.

use super::{RunQuery, RunRecord, RunUpdate, Store, StoreError};
use chrono::{DateTime, Utc};
use dashmap::DashMap;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use uuid::Uuid;

/// How many ended runs a [`MemoryStore`] made with [`MemoryStore::new`] keeps.
pub const DEFAULT_KEEP: usize = 100_000;

/// A journaled run, with its place in the order runs were recorded.
#[derive(Debug)]
struct Entry {
    place: u64,
    record: RunRecord,
}

/// A journal kept in memory, in the order runs were recorded. It keeps every run still going and the most
/// recently ended ones, up to a limit; older ended runs are forgotten, so a long-lived process does not grow
/// without end. For a journal that keeps everything, use a store on disk. Runs are sharded by id, so an
/// agent's server recording a run and the tasks of other runs updating theirs rarely wait for each other.
#[derive(Debug)]
pub struct MemoryStore {
    runs: DashMap<Uuid, Entry>,
    next: AtomicU64,
    /// Ended runs, in the order they ended.
    ended: Mutex<VecDeque<Uuid>>,
    keep: usize,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore {
    /// An empty journal that keeps the [`DEFAULT_KEEP`] most recently ended runs.
    pub fn new() -> Self {
        Self::keeping(DEFAULT_KEEP)
    }

    /// An empty journal that keeps the `keep` most recently ended runs (and every run still going).
    pub fn keeping(keep: usize) -> Self {
        Self { runs: DashMap::new(), next: AtomicU64::new(0), ended: Mutex::default(), keep }
    }

    fn ended(&self) -> MutexGuard<'_, VecDeque<Uuid>> {
        // The queue is only pushed to and popped from, so a panic elsewhere cannot leave it half-changed.
        self.ended.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Remembers that a run ended, and forgets the oldest ended run past the limit (each run ends once, so at
    /// most one is over it).
    fn retire(&self, run: Uuid) {
        let forgotten = {
            let mut ended = self.ended();
            ended.push_back(run);
            if ended.len() > self.keep { ended.pop_front() } else { None }
        };
        // No shard is locked here, so removing cannot deadlock with an update in progress.
        if let Some(run) = forgotten {
            self.runs.remove(&run);
        }
    }
}

impl Store for MemoryStore {
    fn record(&self, record: RunRecord) -> Result<(), StoreError> {
        let run = record.run;
        match self.runs.entry(run) {
            dashmap::Entry::Occupied(_) => Err(StoreError::Duplicate(run)),
            dashmap::Entry::Vacant(slot) => {
                let place = self.next.fetch_add(1, Ordering::Relaxed);
                slot.insert(Entry { place, record });
                Ok(())
            }
        }
    }

    fn update(&self, run: Uuid, update: RunUpdate, at: DateTime<Utc>) -> Result<(), StoreError> {
        let ended = {
            let mut entry = self.runs.get_mut(&run).ok_or(StoreError::UnknownRun(run))?;
            let record = &mut entry.record;
            if record.status().is_final() {
                return Err(StoreError::Ended(run));
            }
            if let Some(status) = update.status {
                record.history.push((status, at));
            }
            if let Some(attempts) = update.attempts {
                record.attempts = attempts;
            }
            if update.latency.is_some() {
                record.latency = update.latency;
            }
            if update.cost.is_some() {
                record.cost = update.cost;
            }
            if update.error.is_some() {
                record.error = update.error;
            }
            record.status().is_final()
        };
        if ended {
            self.retire(run);
        }
        Ok(())
    }

    fn get(&self, run: Uuid) -> Option<RunRecord> {
        self.runs.get(&run).map(|entry| entry.record.clone())
    }

    fn query(&self, query: &RunQuery) -> Vec<RunRecord> {
        let mut found: Vec<(u64, RunRecord)> = self
            .runs
            .iter()
            .filter(|e| query.agent.as_ref().is_none_or(|a| *a == e.record.agent))
            .filter(|e| query.action.as_ref().is_none_or(|a| *a == e.record.action))
            .filter(|e| query.status.is_none_or(|s| s == e.record.status()))
            .map(|e| (e.place, e.record.clone()))
            .collect();
        found.sort_unstable_by_key(|(place, _)| *place);
        found.into_iter().map(|(_, record)| record).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::ErrorClass;
    use crate::id::{ActionId, AgentId};
    use crate::store::RunStatus;
    use serde_json::json;
    use std::time::Duration;

    fn record(agent: &str, action: &str) -> RunRecord {
        RunRecord::queued(
            Uuid::now_v7(),
            AgentId::new(agent).unwrap(),
            ActionId::new(action).unwrap(),
            &json!({"a": 1}),
            Uuid::nil(),
        )
    }

    #[test]
    fn runs_move_through_statuses_and_end_for_good() {
        let store = MemoryStore::new();
        let r = record("a1", "math.add");
        let id = r.run;
        store.record(r.clone()).unwrap();
        assert_eq!(store.record(r), Err(StoreError::Duplicate(id)));
        let running = RunUpdate { status: Some(RunStatus::Running), attempts: Some(1), ..RunUpdate::default() };
        store.update(id, running, Utc::now()).unwrap();
        let failed = RunUpdate {
            status: Some(RunStatus::Failed),
            latency: Some(Duration::from_millis(7)),
            error: Some(ErrorClass::Timeout),
            ..RunUpdate::default()
        };
        store.update(id, failed, Utc::now()).unwrap();
        let got = store.get(id).unwrap();
        let statuses: Vec<RunStatus> = got.history.iter().map(|(s, _)| *s).collect();
        assert_eq!(statuses, [RunStatus::Queued, RunStatus::Running, RunStatus::Failed]);
        assert_eq!(
            (got.attempts, got.latency, got.error),
            (1, Some(Duration::from_millis(7)), Some(ErrorClass::Timeout))
        );
        let again = store.update(id, RunUpdate::default(), Utc::now()).unwrap_err();
        assert!(again.to_string().contains("already ended"), "{again}");
        let unknown = store.update(Uuid::nil(), RunUpdate::default(), Utc::now()).unwrap_err();
        assert_eq!(unknown, StoreError::UnknownRun(Uuid::nil()));
    }

    #[test]
    fn queries_filter_by_agent_action_and_status() {
        let store = MemoryStore::new();
        let runs = [record("a1", "math.add"), record("a1", "math.div"), record("a2", "math.add")];
        for r in &runs {
            store.record(r.clone()).unwrap();
        }
        let done = RunUpdate { status: Some(RunStatus::Completed), ..RunUpdate::default() };
        store.update(runs[1].run, done, Utc::now()).unwrap();
        let ids = |q: RunQuery| store.query(&q).into_iter().map(|r| r.run).collect::<Vec<_>>();
        assert_eq!(ids(RunQuery::default()), runs.iter().map(|r| r.run).collect::<Vec<_>>());
        assert_eq!(
            ids(RunQuery { agent: Some(AgentId::new("a1").unwrap()), ..RunQuery::default() }),
            [runs[0].run, runs[1].run]
        );
        assert_eq!(
            ids(RunQuery { action: Some(ActionId::new("math.add").unwrap()), ..RunQuery::default() }),
            [runs[0].run, runs[2].run]
        );
        assert_eq!(ids(RunQuery { status: Some(RunStatus::Completed), ..RunQuery::default() }), [runs[1].run]);
        assert_eq!(runs[0].params_digest, crate::store::params_digest(&json!({"a": 1})));
    }

    #[test]
    fn only_the_most_recently_ended_runs_are_kept_and_runs_going_on_never_go() {
        let store = MemoryStore::keeping(2);
        let runs: Vec<RunRecord> = (0..5).map(|_| record("a1", "math.add")).collect();
        for r in &runs {
            store.record(r.clone()).unwrap();
        }
        let done = || RunUpdate { status: Some(RunStatus::Completed), ..RunUpdate::default() };
        // Runs 1, 3, 0 end in this order; 2 and 4 go on.
        for i in [1, 3, 0] {
            store.update(runs[i].run, done(), Utc::now()).unwrap();
        }
        let kept: Vec<Uuid> = store.query(&RunQuery::default()).into_iter().map(|r| r.run).collect();
        assert_eq!(kept, [runs[0].run, runs[2].run, runs[3].run, runs[4].run], "run 1 ended first and went");
        assert_eq!(store.get(runs[1].run), None);
        assert_eq!(store.update(runs[1].run, done(), Utc::now()), Err(StoreError::UnknownRun(runs[1].run)));
        store.update(runs[2].run, done(), Utc::now()).unwrap();
        let kept: Vec<Uuid> = store.query(&RunQuery::default()).into_iter().map(|r| r.run).collect();
        assert_eq!(kept, [runs[0].run, runs[2].run, runs[4].run]);
    }
}
