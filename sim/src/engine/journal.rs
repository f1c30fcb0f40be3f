//! The simulation's journal ([`SimBuilder::keep_journal`](super::SimBuilder::keep_journal)): every run's record,
//! step by step, as the runtime's journal keeps the same runs.

use agentry::id::AgentId;
use agentry::store::{RunRecord, RunUpdate};
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use uuid::Uuid;

/// Runs' records in the order they were journaled, with an index by run id.
#[derive(Debug, Default)]
pub(super) struct Journal {
    records: Vec<RunRecord>,
    by_run: HashMap<Uuid, usize>,
}

impl Journal {
    /// Journals a new run. A run id journaled before is a bug of the simulator's: the first record stays.
    pub(super) fn record(&mut self, record: RunRecord) {
        let place = self.records.len();
        let fresh = self.by_run.insert(record.run, place).is_none();
        debug_assert!(fresh, "run {} journaled twice", record.run);
        if fresh {
            self.records.push(record);
        }
    }

    /// Applies a change to a journaled run; `at` stamps a new status. Every run is journaled before it changes.
    pub(super) fn update(&mut self, run: Uuid, update: RunUpdate, at: DateTime<Utc>) {
        let record = self.by_run.get(&run).and_then(|place| self.records.get_mut(*place));
        debug_assert!(record.is_some(), "run {run} changed before it was journaled");
        if let Some(record) = record {
            record.apply(update, at);
        }
    }

    /// One agent's runs, oldest first.
    pub(super) fn of(&self, agent: &AgentId) -> Vec<RunRecord> {
        self.records.iter().filter(|record| &record.agent == agent).cloned().collect()
    }
}
