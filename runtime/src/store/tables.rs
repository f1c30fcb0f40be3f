//! What a journal's writer does to its database, a commit at a time, as one interface both durable stores
//! implement: the writer's plan (which runs to coalesce, hold back or batch, which inputs go in one row, what a
//! snapshot or an ended agent clears) is made once, in `writer.rs`, `input_log.rs` and `run_log.rs`, and each
//! store only says how its database takes each row (SQLite in `sqlite/tables.rs`, PostgreSQL in
//! `postgres/tables.rs`).

use super::durable::{AgentRecord, ScheduleRecord, Snapshot};
use super::job_log::JobWrite;
use super::{Refusal, StoreError};
use crate::id::{ActionId, AgentId};
use uuid::Uuid;

/// A run's row in `runs`, written whole (inserted, or replacing the columns that change).
pub(crate) struct RunWrite<'a> {
    /// The order runs were written in (one numbering for `runs` and `run_batches`).
    pub place: i64,
    pub run: Uuid,
    pub agent: &'a AgentId,
    pub action: &'a ActionId,
    /// Its status, as the JSON of [`super::RunStatus`] (`"queued"`, ...).
    pub status: &'a str,
    /// When it was recorded, in milliseconds since the epoch.
    pub recorded: i64,
    pub ended: bool,
    /// Its record's JSON.
    pub record: &'a str,
    /// Its idempotency key and its plan's JSON, when this write has them (an earlier one's are kept otherwise).
    pub key: Option<&'a str>,
    pub plan: Option<&'a str>,
    /// Its outcome signal for the agent, as the journal keeps a signal (`signal_codec.rs`), when this write has
    /// one (an earlier one's is kept otherwise).
    pub outcome: Option<&'a [u8]>,
    /// Whether the agent consumed the outcome. Written when this write has an outcome or says it was consumed.
    pub delivered: bool,
}

/// A row of `run_batches`: ended runs of one agent from one commit (see `run_log.rs` for its columns).
pub(crate) struct RunBatchRow<'a> {
    pub first: i64,
    pub last: i64,
    pub agent: &'a AgentId,
    pub last_seq: i64,
    pub first_run: Uuid,
    pub last_run: Uuid,
    pub since: i64,
    pub until: i64,
    pub statuses: i64,
    pub actions: &'a [ActionId],
    pub body: &'a [u8],
}

/// A journal's tables as its writer sees them inside one commit. Every write of a commit goes through here, in
/// the order the writer makes them; a store may send them as they come or gather them, as long as they are
/// applied in that order and all or none of them last.
pub(crate) trait Tables {
    /// A row of an agent's input log: inputs `numbers.0..=numbers.1`, in the body format of `input_log.rs`; `ids`: the ids
    /// of the signals among them, when the database asked for them ([`Database::wants_input_ids`]).
    fn input_batch(
        &mut self,
        agent: &AgentId,
        numbers: (u64, u64),
        body: &[u8],
        ids: &[Uuid],
    ) -> Result<(), StoreError>;
    /// Drops an agent's input log rows: all of them, or those whose last input is at most `upto`.
    fn clear_inputs(&mut self, agent: &AgentId, upto: Option<u64>) -> Result<(), StoreError>;
    /// A row of ended runs.
    fn run_batch(&mut self, row: &RunBatchRow<'_>) -> Result<(), StoreError>;
    /// A run's row, inserted or updated.
    fn run(&mut self, row: &RunWrite<'_>) -> Result<(), StoreError>;
    /// Changes to a run written earlier whose record did not change: its plan, its outcome, whether its outcome
    /// was consumed (the same rules as [`RunWrite`]).
    fn run_parts(
        &mut self,
        run: Uuid,
        key: Option<&str>,
        plan: Option<&str>,
        outcome: Option<&[u8]>,
        delivered: bool,
    ) -> Result<(), StoreError>;
    /// Marks a run written earlier as delivered, if it keeps an outcome: the agent consumed it.
    fn delivered(&mut self, run: Uuid) -> Result<(), StoreError>;
    /// The outcome kept with a run written earlier (in an earlier commit), if it keeps one.
    fn kept_outcome(&mut self, run: Uuid) -> Result<Option<Vec<u8>>, StoreError>;
    /// Replaces an agent's snapshot; with `in_history`, keeps it in the agent's history of snapshots too.
    fn snapshot(&mut self, snapshot: &Snapshot, in_history: bool) -> Result<(), StoreError>;
    /// Drops an agent's history of snapshots.
    fn clear_history(&mut self, agent: &AgentId) -> Result<(), StoreError>;
    /// Writes an agent's record, with the columns it is listed by.
    fn agent(&mut self, record: &AgentRecord) -> Result<(), StoreError>;
    /// Drops an agent's record, snapshot, history and schedules (not its inputs or jobs).
    fn forget_agent(&mut self, agent: &AgentId) -> Result<(), StoreError>;
    /// Arms (or replaces) a schedule.
    fn schedule(&mut self, schedule: &ScheduleRecord) -> Result<(), StoreError>;
    /// Drops one schedule of an agent's, or all of them.
    fn clear_schedules(&mut self, agent: &AgentId, key: Option<&str>) -> Result<(), StoreError>;
    /// Keeps a refused effect.
    fn refusal(&mut self, refusal: &Refusal) -> Result<(), StoreError>;
    /// Applies a write about a job (see `job_log.rs`).
    fn job(&mut self, write: &JobWrite) -> Result<(), StoreError>;
    /// Drops every job of an agent.
    fn clear_jobs(&mut self, agent: &AgentId) -> Result<(), StoreError>;
    /// Keeps a signal `agent` emitted to `to`, an agent elsewhere (its id `id`, in the format of
    /// `signal_codec.rs`), until it is sent on.
    fn outbox(&mut self, agent: &AgentId, id: Uuid, to: &AgentId, signal: &[u8]) -> Result<(), StoreError>;
    /// Drops a signal kept by [`Tables::outbox`]: it was sent on. (None if it was never kept.)
    fn outbox_sent(&mut self, agent: &AgentId, id: Uuid) -> Result<(), StoreError>;
    /// Drops every signal an agent has waiting to be sent on.
    fn clear_outbox(&mut self, agent: &AgentId) -> Result<(), StoreError>;
    /// Places for the runs this writer writes next, none given to another writer, for a journal several writers
    /// share; `None` (by default) where this writer is the only one and numbers on from the last place.
    fn reserve_places(&mut self) -> Result<Option<std::ops::Range<i64>>, StoreError> {
        Ok(None)
    }
}

/// A journal's database as its writer thread holds it.
pub(crate) trait Database {
    /// Applies `write` in one transaction: every write it makes lasts, or (when it or the commit fails) none.
    fn transaction(
        &mut self,
        write: &mut dyn FnMut(&mut dyn Tables) -> Result<(), StoreError>,
    ) -> Result<(), StoreError>;
    /// Where the numbering of runs goes on (the place after every run's), and which runs have a row in `runs`
    /// that had not ended.
    fn open_runs(&mut self) -> Result<(i64, Vec<Uuid>), StoreError>;
    /// Called after each commit (SQLite counts its log here).
    fn committed(&mut self) {}
    /// Whether ended runs may be gathered into rows of `run_batches`. Not in a journal several writers share:
    /// a writer knows which runs have a row in `runs` only for those it wrote itself, and a run another writer
    /// wrote must be updated where it is.
    fn batches_ended_runs(&self) -> bool {
        true
    }
    /// A commit failed (or could not begin): `agents`' writes in it are lost, and their agents in memory may be
    /// ahead of the journal. Whether the database's owner brings them back from the journal itself (a cluster
    /// node does); if not, the writer holds their writes back until the runtime has (see `behind.rs`).
    fn failed(&mut self, agents: &[AgentId], error: &StoreError) -> bool {
        let _ = (agents, error);
        false
    }
    /// Whether this journal still writes for `agent`: not when it shares the database with other nodes and
    /// refuses the writes of an agent whose lease this node no longer holds.
    fn writes_for(&self, agent: &AgentId) -> bool {
        let _ = agent;
        true
    }
    /// Whether [`Tables::input_batch`] is to be given the ids of the signals logged (a journal that removes
    /// signals it logged from an inbox of its own).
    fn wants_input_ids(&self) -> bool {
        false
    }
}

/// A value as JSON text: the stored types serialize without fail (plain data, string keys).
pub(crate) fn json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_default()
}
