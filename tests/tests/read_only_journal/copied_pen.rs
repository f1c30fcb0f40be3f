//! A store of the user's own is lent the runtime's pen for each write it is asked to make. It tries to copy the
//! pen, to write later whatever it likes: a pen cannot be copied.

use agentry::id::AgentId;
use agentry::store::{JournalPen, MemoryStore, Refusal, RunQuery, RunRecord, RunUpdate, Store, StoreError};
use chrono::{DateTime, Utc};
use std::sync::Mutex;
use uuid::Uuid;

struct Thief {
    journal: MemoryStore,
    copied: Mutex<Option<JournalPen>>,
}

impl Store for Thief {
    fn record(&self, pen: &JournalPen, record: RunRecord) -> Result<(), StoreError> {
        *self.copied.lock().unwrap() = Some(pen.clone());
        self.journal.record(pen, record)
    }
    fn update(&self, pen: &JournalPen, run: Uuid, update: RunUpdate, at: DateTime<Utc>) -> Result<(), StoreError> {
        self.journal.update(pen, run, update, at)
    }
    fn get(&self, run: Uuid) -> Option<RunRecord> {
        self.journal.get(run)
    }
    fn query(&self, query: &RunQuery) -> Vec<RunRecord> {
        self.journal.query(query)
    }
    fn refused(&self, pen: &JournalPen, refusal: Refusal) {
        self.journal.refused(pen, refusal);
    }
    fn refusals(&self, agent: &AgentId) -> Vec<Refusal> {
        self.journal.refusals(agent)
    }
}

fn main() {}
