//! The in-memory journal.

use super::{RunQuery, RunRecord, RunUpdate, Store, StoreError};
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use uuid::Uuid;

#[derive(Debug, Default)]
struct Journal {
    /// Records in the order they were journaled.
    runs: Vec<RunRecord>,
    /// Run id → position in `runs`.
    index: HashMap<Uuid, usize>,
}

/// A journal kept in memory, in the order runs were recorded. It keeps every run for the life of the process.
#[derive(Debug, Default)]
pub struct MemoryStore {
    journal: Mutex<Journal>,
}

impl MemoryStore {
    /// An empty journal.
    pub fn new() -> Self {
        Self::default()
    }

    fn journal(&self) -> MutexGuard<'_, Journal> {
        // Every write below is a single push, insert or field assignment made after all checks, so a panic
        // elsewhere while the lock was held cannot have left a record half-written: a poisoned lock is usable.
        self.journal.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Store for MemoryStore {
    fn record(&self, record: RunRecord) -> Result<(), StoreError> {
        let mut journal = self.journal();
        if journal.index.contains_key(&record.run) {
            return Err(StoreError::Duplicate(record.run));
        }
        let position = journal.runs.len();
        journal.index.insert(record.run, position);
        journal.runs.push(record);
        Ok(())
    }

    fn update(&self, run: Uuid, update: RunUpdate, at: DateTime<Utc>) -> Result<(), StoreError> {
        let mut journal = self.journal();
        let position = *journal.index.get(&run).ok_or(StoreError::UnknownRun(run))?;
        let record = &mut journal.runs[position];
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
        Ok(())
    }

    fn get(&self, run: Uuid) -> Option<RunRecord> {
        let journal = self.journal();
        journal.index.get(&run).map(|&i| journal.runs[i].clone())
    }

    fn query(&self, query: &RunQuery) -> Vec<RunRecord> {
        self.journal()
            .runs
            .iter()
            .filter(|r| query.agent.as_ref().is_none_or(|a| *a == r.agent))
            .filter(|r| query.action.as_ref().is_none_or(|a| *a == r.action))
            .filter(|r| query.status.is_none_or(|s| s == r.status()))
            .cloned()
            .collect()
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
}
