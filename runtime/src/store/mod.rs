//! The execution journal: a record of every action run, queryable by agent, action and status.

mod agent_rows;
mod behind;
mod checkpoint;
mod compact;
mod draft;
mod durable;
mod input_log;
mod job_log;
mod journal;
mod memory;
mod outbox;
mod pen;
mod plan_codec;
#[cfg(feature = "postgres")]
mod postgres;
mod run_codec;
mod run_log;
mod signal_codec;
mod sqlite;
mod tables;
mod view;
mod writer;

#[doc(hidden)]
pub use draft::EndedDraft;
pub(crate) use draft::{DraftIds, PlanDraft, RecordDraft, Unwritten};
pub use durable::{
    AgentRecord, AliveAgent, Durable, Flushed, JobPlan, KeptJob, KeyedRun, PlanParts, Revival, RunPlan, ScheduleRecord,
    Snapshot,
};
pub use memory::{DEFAULT_KEEP, MemoryStore};
pub use pen::JournalPen;
pub(crate) use pen::PEN;
#[cfg(feature = "postgres")]
pub use postgres::{CLUSTER_TABLES, Fence, PostgresOptions, PostgresStore};
pub use sqlite::{Past, SqliteOptions, SqliteStore, Synchronous};
pub use view::{DurableView, JournalView};

use crate::action::{ErrorClass, OutcomeStatus};
use crate::effect::EffectRefusal;
use crate::id::{ActionId, AgentId};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;
use uuid::Uuid;

/// The hasher of the journal's maps keyed by run or agent id, hashed several times per run, where the standard
/// SipHash was a few percent of the writer's time. It is seeded at random per process like SipHash; it resists
/// chosen keys less, which suits these maps: run ids are the runtime's own, and an agent's id reaches them
/// only once that agent runs.
pub(crate) type FastHash = foldhash::fast::RandomState;

/// Where a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Accepted, waiting for a slot.
    Queued,
    /// Waiting for approval.
    AwaitingApproval,
    /// Approved; it meets the gate again, then waits for a slot or starts.
    Approved,
    /// An attempt is running.
    Running,
    /// Completed.
    Completed,
    /// Failed for good.
    Failed,
    /// Refused by the gate or denied approval.
    Blocked,
}

impl RunStatus {
    /// Whether the run has ended.
    pub fn is_final(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Blocked)
    }
}

impl From<OutcomeStatus> for RunStatus {
    fn from(status: OutcomeStatus) -> Self {
        match status {
            OutcomeStatus::Completed => Self::Completed,
            OutcomeStatus::Failed => Self::Failed,
            OutcomeStatus::Blocked => Self::Blocked,
            OutcomeStatus::AwaitingApproval => Self::AwaitingApproval,
        }
    }
}

/// The journal's record of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The run's id.
    pub run: Uuid,
    /// The agent it ran for.
    pub agent: AgentId,
    /// The action.
    pub action: ActionId,
    /// A stable digest of the params (a name-based UUID of their JSON), so runs can be compared without
    /// keeping the params.
    pub params_digest: Uuid,
    /// The signal chain that caused it.
    pub correlation: Uuid,
    /// The run that called this one through its context, for a nested run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_run: Option<Uuid>,
    /// Every status the run has had, with when, oldest first.
    #[serde(serialize_with = "crate::time_text::serialize_stamped")]
    pub history: Vec<(RunStatus, DateTime<Utc>)>,
    /// Attempts so far.
    pub attempts: u32,
    /// Wall time of the whole run, once it ended.
    #[serde(default, with = "crate::duration_ms::option")]
    pub latency: Option<Duration>,
    /// What it cost, if the action reported it.
    pub cost: Option<f64>,
    /// The class of the error it ended with, if it failed or was blocked.
    pub error: Option<ErrorClass>,
}

impl RunRecord {
    /// A new record in status `Queued`.
    pub fn queued(run: Uuid, agent: AgentId, action: ActionId, params: &Value, correlation: Uuid) -> Self {
        Self::queued_at(run, agent, action, params_digest(params), correlation, crate::wall_clock::now())
    }

    /// [`RunRecord::queued`] with the params' digest made and the time read already.
    pub(crate) fn queued_at(
        run: Uuid,
        agent: AgentId,
        action: ActionId,
        params_digest: Uuid,
        correlation: Uuid,
        at: DateTime<Utc>,
    ) -> Self {
        Self {
            run,
            agent,
            action,
            params_digest,
            correlation,
            parent_run: None,
            history: history_from(RunStatus::Queued, at),
            attempts: 0,
            latency: None,
            cost: None,
            error: None,
        }
    }

    /// The current status.
    pub fn status(&self) -> RunStatus {
        self.history.last().map_or(RunStatus::Queued, |(s, _)| *s)
    }

    /// Applies an update to this copy of a run's record, as the journal applies it to its own; `at` stamps a
    /// new status. (A driver that keeps a journal of its own, as the simulator does, keeps it this way.)
    pub fn apply(&mut self, update: RunUpdate, at: DateTime<Utc>) {
        if let Some(status) = update.apply_to(&mut self.attempts, &mut self.latency, &mut self.cost, &mut self.error) {
            self.history.push((status, at));
        }
    }
}

/// A run's history starting with one status; room for the usual queued → running → ended without growing.
fn history_from(status: RunStatus, at: DateTime<Utc>) -> Vec<(RunStatus, DateTime<Utc>)> {
    let mut history = Vec::with_capacity(4);
    history.push((status, at));
    history
}

/// A stable digest of params: a name-based (v5) UUID of their compact JSON text, the same as
/// `Uuid::new_v5(&Uuid::NAMESPACE_OID, params.to_string().as_bytes())`. The JSON is streamed into the hash
/// rather than built as a string first, since every run is digested.
pub fn params_digest(params: &Value) -> Uuid {
    // Serializing a `Value` into a writer that never fails cannot fail.
    v5_digest(|hash| drop(serde_json::to_writer(hash, params)))
}

/// [`params_digest`] of params whose compact JSON text is at hand.
pub(crate) fn text_digest(text: &[u8]) -> Uuid {
    v5_digest(|hash| sha1::Digest::update(&mut hash.0, text))
}

/// The v5 UUID (in the OID namespace) of the name `feed` writes.
fn v5_digest(feed: impl FnOnce(&mut HashWriter)) -> Uuid {
    use sha1::Digest;
    let mut hash = HashWriter(sha1::Sha1::new());
    hash.0.update(Uuid::NAMESPACE_OID.as_bytes());
    feed(&mut hash);
    let digest = hash.0.finalize();
    let mut bytes = [0; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_sha1_bytes(bytes).into_uuid()
}

/// Feeds everything written into a SHA-1 hash.
struct HashWriter(sha1::Sha1);

impl std::io::Write for HashWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        sha1::Digest::update(&mut self.0, buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A change to a run's record.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunUpdate {
    /// The new status, appended to the history.
    pub status: Option<RunStatus>,
    /// Attempts so far.
    pub attempts: Option<u32>,
    /// Wall time of the whole run.
    pub latency: Option<Duration>,
    /// What it cost.
    pub cost: Option<f64>,
    /// The error class it ended with.
    pub error: Option<ErrorClass>,
}

impl RunUpdate {
    /// Applies the update's attempts, latency, cost and error to a record's fields, and returns its new status,
    /// if it has one: a record and a draft of one keep their histories apart, and share the rest.
    pub(crate) fn apply_to(
        self,
        attempts: &mut u32,
        latency: &mut Option<Duration>,
        cost: &mut Option<f64>,
        error: &mut Option<ErrorClass>,
    ) -> Option<RunStatus> {
        if let Some(n) = self.attempts {
            *attempts = n;
        }
        if self.latency.is_some() {
            *latency = self.latency;
        }
        if self.cost.is_some() {
            *cost = self.cost;
        }
        if self.error.is_some() {
            *error = self.error;
        }
        self.status
    }
}

/// Which runs to list, oldest first; every `Some` field must match. `offset` and `limit` page through the
/// matches.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunQuery {
    /// Runs of this agent.
    pub agent: Option<AgentId>,
    /// Runs of this action.
    pub action: Option<ActionId>,
    /// Runs currently in this status.
    pub status: Option<RunStatus>,
    /// Runs recorded at or after this time.
    pub since: Option<DateTime<Utc>>,
    /// Runs recorded before this time.
    pub until: Option<DateTime<Utc>>,
    /// How many matches to skip.
    pub offset: usize,
    /// How many to return at most (default: all).
    pub limit: Option<usize>,
}

impl RunQuery {
    /// Whether a record matches the filters (not the page).
    pub fn matches(&self, record: &RunRecord) -> bool {
        let recorded = record.history.first().map(|(_, at)| *at);
        self.agent.as_ref().is_none_or(|a| *a == record.agent)
            && self.action.as_ref().is_none_or(|a| *a == record.action)
            && self.status.is_none_or(|s| s == record.status())
            && self.since.is_none_or(|since| recorded.is_some_and(|at| at >= since))
            && self.until.is_none_or(|until| recorded.is_some_and(|at| at < until))
    }
}

/// Why the journal refused a write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// A run with this id is already journaled.
    #[error("run {0} is already in the journal; expected a new run id")]
    Duplicate(Uuid),
    /// No run with this id is journaled.
    #[error("run {0} is not in the journal; expected a run recorded with `record` first")]
    UnknownRun(Uuid),
    /// The run already ended; an ended run's record does not change.
    #[error("run {0} has already ended; expected updates only while it runs")]
    Ended(Uuid),
    /// The database file could not be opened or read: it is truncated, garbage, or not a database.
    #[error("the journal at {path} cannot be read: {message}; expected an agentry journal (SQLite)")]
    Corrupt {
        /// The file.
        path: String,
        /// What SQLite said.
        message: String,
    },
    /// The file is a SQLite database, but another program's.
    #[error(
        "the database at {path} is not an agentry journal (application id {found:#x}, tables {tables:?}); expected a new file or one agentry wrote"
    )]
    Foreign {
        /// The file.
        path: String,
        /// Its application id.
        found: i64,
        /// Some of its tables.
        tables: Vec<String>,
    },
    /// The journal was written by a newer agentry.
    #[error("the journal at {path} has schema version {found}; this agentry reads up to version {supported}")]
    NewerSchema {
        /// The file.
        path: String,
        /// Its schema version.
        found: i64,
        /// The newest this build reads.
        supported: i64,
    },
    /// A database operation failed.
    #[error("the journal failed: {0}")]
    Database(String),
    /// A stored value does not decode.
    #[error("a stored {what} does not decode: {message}")]
    Decode {
        /// What it was (a run record, a snapshot...).
        what: &'static str,
        /// Why.
        message: String,
    },
}

/// An effect the agent's server refused to apply (see [`EffectRefusal`]), as the journal keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Refusal {
    /// The agent whose effect it was.
    pub agent: AgentId,
    /// When it was refused.
    pub at: DateTime<Utc>,
    /// The signal whose handling asked for it, if a signal did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<Uuid>,
    /// What was refused, and why.
    pub refusal: EffectRefusal,
}

/// Where run records (and refused effects) are kept: in memory ([`MemoryStore`], for tests and for programs that
/// want no disk) or in a SQLite file ([`SqliteStore`], which also keeps what brings agents back after a crash:
/// see [`Durable`]). Its writers take the [`JournalPen`] the runtime lends for each write: only the runtime
/// writes a journal, and everyone else reads it.
pub trait Store: Send + Sync + 'static {
    /// Journals a new run.
    fn record(&self, pen: &JournalPen, record: RunRecord) -> Result<(), StoreError>;
    /// Applies a change to a run's record; `at` stamps a new status.
    fn update(&self, pen: &JournalPen, run: Uuid, update: RunUpdate, at: DateTime<Utc>) -> Result<(), StoreError>;
    /// One run's record.
    fn get(&self, run: Uuid) -> Option<RunRecord>;
    /// Every run that matches, oldest first.
    fn query(&self, query: &RunQuery) -> Vec<RunRecord>;
    /// Journals an effect the server refused.
    fn refused(&self, pen: &JournalPen, refusal: Refusal);
    /// The refusals journaled for one agent, oldest first.
    fn refusals(&self, agent: &AgentId) -> Vec<Refusal>;
    /// The part that outlives the process, for a store that has one.
    fn durable(&self) -> Option<&dyn Durable> {
        None
    }
    /// Takes a run that ended as the server drafted it (with its outcome signal for the agent, if it keeps
    /// one), to journal its own way, or hands it back, to be journaled through [`Store::record`] (and
    /// [`Durable::run_planned_parts`], [`Durable::run_outcome`]), as by default. The runtime's own
    /// stores take it and make its record on their own threads, beside the agents.
    #[doc(hidden)]
    fn take_ended<'a>(&self, ended: EndedDraft<'a>) -> Option<EndedDraft<'a>> {
        Some(ended)
    }
}

#[cfg(test)]
pub(crate) mod digest_tests {
    use super::params_digest;
    use proptest::prelude::*;
    use serde_json::{Value, json};
    use uuid::Uuid;

    /// JSON values a few levels deep, with any finite float, any integer and any text: what params look like.
    pub(crate) fn params() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
            ".{0,80}".prop_map(Value::from),
            // Longer than a hash block, in one write.
            "[a-z]{100,600}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 40, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
                prop::collection::vec((".{0,12}", inner), 0..6)
                    .prop_map(|fields| Value::Object(fields.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// The digest is the v5 UUID of the params' compact JSON: the same as runs journaled before the hash
        /// implementation changed.
        #[test]
        fn the_digest_is_the_v5_uuid_of_the_compact_json(params in params()) {
            let expected = Uuid::new_v5(&Uuid::NAMESPACE_OID, params.to_string().as_bytes());
            prop_assert_eq!(params_digest(&params), expected);
            prop_assert_eq!(super::text_digest(params.to_string().as_bytes()), expected);
        }
    }

    #[test]
    fn a_known_digest_is_the_v5_uuid_of_its_text() {
        let text = r#"{"a":1,"text":"café \"quoted\""}"#;
        let expected = Uuid::new_v5(&Uuid::NAMESPACE_OID, text.as_bytes());
        assert_eq!(params_digest(&json!({"a": 1, "text": "café \"quoted\""})), expected);
    }
}
