//! The journal on disk: a SQLite file (WAL) that keeps every run record, every refused effect, and what brings
//! agents back after a crash (see [`Durable`]).
//!
//! Writes never touch the disk on the caller's thread. They go, in order, to one writer thread, which applies
//! everything waiting in one transaction (group commit) and then tells whoever waits for durability. The queue
//! to the writer is bounded: a burst of writes faster than the disk makes the writing threads wait (for a
//! batch to commit) rather than fill the memory. Reads use
//! a second connection of their own, so a read does not wait behind a batch of writes: the store counts the
//! writes sent and the writes committed, and a read that finds some not committed yet waits for them first,
//! so it still sees every write made before it. One exception to "in order": an ended run whose outcome the
//! agent has not consumed yet may be written a few commits later, when that is safe (see `Runs` in `writer.rs`). The
//! records of runs going on are also kept in memory: an update applies to the record there, and `get` answers
//! for them without reading the file. An ended run is only in the file (keeping ended runs in memory as well
//! cost a tenth of a durable run's time), so an update to it, or a `get` of it, reads the file.

use super::checkpoint::Checkpointer;
use super::draft::ShortText;
use super::durable::{
    AgentRecord, AliveAgent, Durable, Flushed, PlanParts, Revival, RunPlan, ScheduleRecord, Snapshot,
};
use super::input_log::{self, InputBatches};
use super::job_log::{self, JobWrite};
use super::plan_codec;
use super::run_log::{self, RunBatches, Settled};
use super::signal_codec;
use super::{
    EndedDraft, FastHash, JournalPen, PlanDraft, RecordDraft, Refusal, RunQuery, RunRecord, RunUpdate, Store,
    StoreError, Unwritten,
};
use crate::id::AgentId;
use crate::signal::Signal;
use chrono::{DateTime, Utc};
use dashmap::DashMap;
use rusqlite::{Connection, OptionalExtension, params};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::Instant;
use uuid::Uuid;

mod reads;
mod schema;
mod writer;

use reads::*;
use schema::*;
use writer::*;

/// How hard each commit presses data to the disk (SQLite's `synchronous` in WAL mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Synchronous {
    /// Each commit is durable against the process dying (`kill -9`, a panic), not against the machine losing
    /// power (SQLite's `NORMAL`).
    #[default]
    Process,
    /// Each commit is on the disk before it counts (an `fsync` per batch; SQLite's `FULL`).
    Power,
}

/// How a [`SqliteStore`] keeps its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SqliteOptions {
    /// How hard each commit presses to the disk.
    pub synchronous: Synchronous,
    /// Keep every logged input, even those a snapshot already folded in (by default they are dropped): the whole
    /// history of each agent can then be replayed from its first state, for debugging or an audit.
    pub keep_inputs: bool,
    /// Read the whole file on open to check every page (SQLite's `quick_check`), refusing a damaged one before
    /// anything is brought back. Off by default, since it reads the whole file (minutes for millions of agents):
    /// an open always checks the header, the schema and that the file is not shorter than its header says,
    /// and a damaged page met later is a typed error of the read that met it.
    pub verify: bool,
}

/// A journal in a SQLite file. See the module docs for how writes reach the disk.
///
/// ```
/// use agentry::store::{SqliteStore, Store, RunQuery};
/// let folder = tempfile::tempdir()?;
/// let store = SqliteStore::open(folder.path().join("journal.db"))?;
/// assert!(store.query(&RunQuery::default()).is_empty());
/// assert!(store.durable().is_some(), "it keeps what brings agents back");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct SqliteStore {
    /// The records of runs going on, by id: updates apply here, and the updated record is written on.
    live: DashMap<Uuid, RunRecord, FastHash>,
    /// Buffers for the rows sent to the writer, shared with it.
    texts: Arc<Texts>,
    writes: mpsc::SyncSender<Op>,
    writer: Option<JoinHandle<()>>,
    path: PathBuf,
    /// The connection reads use (queries only).
    reader: Mutex<Connection>,
    /// How many writes were sent to the writer, and how many it has committed (in the order sent). A read
    /// that finds the second behind the first waits for a flush.
    sent: AtomicU64,
    committed: Arc<AtomicU64>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore").field("path", &self.path).finish_non_exhaustive()
    }
}

fn database(err: rusqlite::Error) -> StoreError {
    StoreError::Database(err.to_string())
}

fn json<T: serde::Serialize>(value: &T) -> String {
    // The stored types serialize to JSON without fail: plain data, string keys.
    serde_json::to_string(value).unwrap_or_default()
}

fn decode<T: serde::de::DeserializeOwned>(what: &'static str, text: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Decode { what, message: e.to_string() })
}

/// An agent's past up to an input: the latest snapshot at or before it, and the inputs logged after that
/// snapshot up to the input, in order (see [`SqliteStore::history_at`]).
pub type Past = (Snapshot, Vec<(u64, Signal)>);

impl SqliteStore {
    /// Opens the journal at `path`, creating it if needed, committing each batch durably against the process
    /// dying ([`Synchronous::Process`]).
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_with(path, SqliteOptions::default())
    }

    /// [`SqliteStore::open`] with options.
    pub fn open_with(path: impl AsRef<Path>, options: SqliteOptions) -> Result<Self, StoreError> {
        let SqliteOptions { synchronous, keep_inputs, verify } = options;
        let path = path.as_ref().to_path_buf();
        let shown = path.display().to_string();
        let corrupt = |err: rusqlite::Error| StoreError::Corrupt { path: shown.clone(), message: err.to_string() };
        if let Some(folder) = path.parent().filter(|f| !f.as_os_str().is_empty()) {
            std::fs::create_dir_all(folder).map_err(|e| StoreError::Corrupt {
                path: shown.clone(),
                message: format!("its folder cannot be created: {e}"),
            })?;
        }
        let db = Connection::open(&path).map_err(corrupt)?;
        // The first read of the header tells a garbage or truncated file from a database.
        let application: i64 = db.query_row("PRAGMA application_id", [], |r| r.get(0)).map_err(corrupt)?;
        let tables: Vec<String> = {
            let mut statement =
                db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' LIMIT 8").map_err(corrupt)?;
            let names = statement.query_map([], |r| r.get(0)).map_err(corrupt)?;
            names.collect::<Result<_, _>>().map_err(corrupt)?
        };
        if application != APPLICATION_ID && !tables.is_empty() {
            return Err(StoreError::Foreign { path: shown, found: application, tables });
        }
        let version: i64 = db.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(corrupt)?;
        if version > VERSION {
            return Err(StoreError::NewerSchema { path: shown, found: version, supported: VERSION });
        }
        whole(&db, &path).map_err(|message| StoreError::Corrupt { path: shown.clone(), message })?;
        if verify {
            let check: String = db.query_row("PRAGMA quick_check", [], |r| r.get(0)).map_err(corrupt)?;
            if check != "ok" {
                return Err(StoreError::Corrupt { path: shown, message: check });
            }
        }
        // A new file gets pages of 16 KiB (SQLite's default is 4 KiB): a run's row is about 1 KiB, and bigger pages
        // mean fewer page splits, log frames and checksums per row. ~15-20% more runs per second in the
        // throughput bench. (A file keeps the page size it was made with.)
        if tables.is_empty() {
            db.pragma_update(None, "page_size", PAGE_SIZE).map_err(corrupt)?;
        }
        db.pragma_update(None, "journal_mode", "WAL").map_err(corrupt)?;
        let level = match synchronous {
            Synchronous::Process => "NORMAL",
            Synchronous::Power => "FULL",
        };
        db.pragma_update(None, "synchronous", level).map_err(corrupt)?;
        // A page cache of up to 32 MiB (SQLite's default is 2 MiB), and (see `checkpoint.rs`) a checkpoint every
        // 32 MiB of log (SQLite's default is every 1,000 pages): the `runs` indexes' pages stay in memory and are
        // copied back to the database once per checkpoint rather than several times. ~10-15% more runs per
        // second in the throughput bench.
        db.pragma_update(None, "cache_size", -32768).map_err(corrupt)?;
        db.execute_batch(SCHEMA).map_err(corrupt)?;
        db.execute_batch(run_log::SCHEMA).map_err(corrupt)?;
        db.execute_batch(job_log::SCHEMA).map_err(corrupt)?;
        list_agents_from_columns(&db).map_err(corrupt)?;
        db.pragma_update(None, "application_id", APPLICATION_ID).map_err(corrupt)?;
        db.pragma_update(None, "user_version", VERSION).map_err(corrupt)?;

        // Runs that had not ended are kept in memory too, so the recovery can end them.
        let live = DashMap::default();
        {
            let mut statement =
                db.prepare("SELECT record FROM runs WHERE final = 0 ORDER BY place").map_err(corrupt)?;
            let records = statement.query_map([], |r| r.get::<_, String>(0)).map_err(corrupt)?;
            for text in records {
                let record: RunRecord = decode("run record", &text.map_err(corrupt)?)?;
                live.insert(record.run, record);
            }
        }
        let reader = Connection::open_with_flags(
            &path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(corrupt)?;
        // A reader waits out the rare moments the writer holds the whole file (restarting its log).
        reader.busy_timeout(std::time::Duration::from_secs(10)).map_err(corrupt)?;
        let committed = Arc::new(AtomicU64::new(0));
        let (writes, queue) = mpsc::sync_channel(QUEUE);
        let counted = committed.clone();
        let texts = Arc::new(Texts::default());
        let spare = texts.clone();
        let checkpoint_path = path.clone();
        let writer = std::thread::Builder::new()
            .name("agentry-journal".to_owned())
            .spawn(move || {
                let checkpointer = Checkpointer::start(&db, &checkpoint_path, level);
                write_loop(db, queue, (keep_inputs, &checkpointer), &counted, &spare);
            })
            .map_err(|e| StoreError::Database(format!("the journal's writer thread could not start: {e}")))?;
        Ok(Self {
            live,
            texts,
            writes,
            writer: Some(writer),
            path,
            reader: Mutex::new(reader),
            sent: AtomicU64::new(0),
            committed,
        })
    }

    /// Where the file is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Copies the journal at `from` to a new file `to`, as one consistent moment of it even while a runtime
    /// writes it, without writing to it (SQLite's `VACUUM INTO` on a read-only connection): for reading a live
    /// journal's past without touching it (`agentry fork`). `to` must not exist yet.
    ///
    /// ```
    /// use agentry::store::SqliteStore;
    /// let folder = tempfile::tempdir()?;
    /// let live = folder.path().join("journal.db");
    /// drop(SqliteStore::open(&live)?);
    /// let before = std::fs::read(&live)?;
    /// SqliteStore::copy(&live, &folder.path().join("copy.db"))?;
    /// assert_eq!(std::fs::read(&live)?, before, "the journal is only read");
    /// assert!(SqliteStore::open(folder.path().join("copy.db"))?.history_at(&agentry::id::AgentId::new("a")?, 1)?.is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn copy(from: &Path, to: &Path) -> Result<(), StoreError> {
        if to.exists() {
            return Err(StoreError::Database(format!("{} exists already; expected a new file", to.display())));
        }
        let shown = from.display().to_string();
        let corrupt = |err: rusqlite::Error| StoreError::Corrupt { path: shown.clone(), message: err.to_string() };
        let db = Connection::open_with_flags(
            from,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(corrupt)?;
        db.busy_timeout(std::time::Duration::from_secs(10)).map_err(corrupt)?;
        let application: i64 = db.query_row("PRAGMA application_id", [], |r| r.get(0)).map_err(corrupt)?;
        if application != APPLICATION_ID {
            return Err(StoreError::Foreign { path: shown, found: application, tables: Vec::new() });
        }
        let target = to.to_str().ok_or_else(|| StoreError::Database(format!("{} is not UTF-8", to.display())))?;
        db.execute("VACUUM INTO ?1", [target])
            .map_err(|e| StoreError::Database(format!("copying {shown} to {target}: {e}")))?;
        Ok(())
    }

    /// The runs matching `query`, in the order they were written, each with its idempotency key (`None` for a
    /// run journaled without a plan): for an audit of side effects against the keys they were sent with.
    /// [`Store::query`] gives the same records without their keys.
    ///
    /// ```
    /// use agentry::store::{RunQuery, SqliteStore};
    /// let folder = tempfile::tempdir()?;
    /// let store = SqliteStore::open(folder.path().join("journal.db"))?;
    /// assert!(store.keyed_runs(&RunQuery::default())?.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn keyed_runs(&self, query: &RunQuery) -> Result<Vec<(RunRecord, Option<String>)>, StoreError> {
        self.read(|db| run_log::query(db, query))
    }

    /// The agent's state as it was at input `seq`: the latest snapshot taken at or before it, and the inputs
    /// logged after that snapshot up to `seq`, to fold in order. Only a journal that keeps every input
    /// ([`SqliteOptions::keep_inputs`]) keeps the snapshots for this; otherwise `None`, as for an agent it
    /// does not know.
    ///
    /// ```
    /// use agentry::store::{SqliteOptions, SqliteStore};
    /// let folder = tempfile::tempdir()?;
    /// let options = SqliteOptions { keep_inputs: true, ..SqliteOptions::default() };
    /// let store = SqliteStore::open_with(folder.path().join("journal.db"), options)?;
    /// assert!(store.history_at(&agentry::id::AgentId::new("nobody")?, 7)?.is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn history_at(&self, agent: &AgentId, seq: u64) -> Result<Option<Past>, StoreError> {
        self.read(|db| {
            let text = "SELECT snapshot FROM snapshot_history WHERE agent = ?1 AND seq <= ?2 ORDER BY seq DESC LIMIT 1";
            let upto = i64::try_from(seq).unwrap_or(i64::MAX);
            let found: Vec<Snapshot> = reads::decoded(db, "snapshot", text, &[&agent.as_str(), &upto])?;
            let Some(snapshot) = found.into_iter().next() else { return Ok(None) };
            let mut inputs = input_log::after(db, agent, snapshot.seq)?;
            inputs.retain(|(n, _)| *n <= seq);
            // Only a whole stretch of inputs folds into the state then: a journal that stopped keeping every
            // input (or never did) has gaps, and a gap would give a state the agent never had.
            let whole = inputs.iter().zip(snapshot.seq + 1..).all(|((n, _), expected)| *n == expected);
            Ok(whole.then_some((snapshot, inputs)))
        })
    }

    /// Queues a write; waits while the queue is full.
    fn send(&self, op: Op) {
        // Counted before it is queued: a write the writer has received was counted.
        if !matches!(op, Op::Flush(_)) {
            self.sent.fetch_add(1, Ordering::SeqCst);
        }
        // The writer lives as long as this store; a send fails only if it panicked, which it logs.
        let _ = self.writes.send(op);
    }

    /// Runs `read` on the reader's connection once every write sent before it is committed (at once, when
    /// none is pending), and returns its answer.
    /// One run's record as the file has it (after every write sent before).
    fn stored(&self, run: Uuid) -> Option<RunRecord> {
        let found = self.read(|db| {
            let text: Option<String> = db
                .query_row("SELECT record FROM runs WHERE run = ?1", [run.to_string()], |r| r.get(0))
                .optional()
                .map_err(database)?;
            match text {
                Some(text) => decode::<RunRecord>("run record", &text).map(Some),
                None => Ok(run_log::find(db, run)?.map(|(record, _)| record)),
            }
        });
        found.unwrap_or_else(|err| {
            tracing::warn!(%err, %run, "a run could not be read from the journal");
            None
        })
    }

    fn read<T>(&self, read: impl FnOnce(&Connection) -> Result<T, StoreError>) -> Result<T, StoreError> {
        // Every write sent before this load was queued before any write counted after it, so once the writer
        // has committed as many writes as were sent by now, it has committed those.
        if self.committed.load(Ordering::SeqCst) < self.sent.load(Ordering::SeqCst) {
            let (done, flushed) = mpsc::sync_channel(1);
            self.send(Op::Flush(Waiter::Thread(done)));
            flushed.recv().map_err(|_| {
                StoreError::Database("the journal could not commit the writes this read must see".to_owned())
            })?;
        }
        // A panic in another read leaves the connection as it was: statements hold no state between reads.
        let db = self.reader.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        read(&db)
    }
}

impl Drop for SqliteStore {
    /// Lets the writer apply what is queued, then waits for it.
    fn drop(&mut self) {
        let (closed, _) = mpsc::sync_channel(0);
        drop(std::mem::replace(&mut self.writes, closed));
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

impl Store for SqliteStore {
    /// Journals a new run. A run going on with the same id is refused as a duplicate; ended runs are not looked
    /// up (that would read the file for every run), so a record reusing an ended run's id is the caller's error.
    fn record(&self, _: &JournalPen, record: RunRecord) -> Result<(), StoreError> {
        match self.live.entry(record.run) {
            dashmap::Entry::Occupied(_) => return Err(StoreError::Duplicate(record.run)),
            // The shard stays locked until the write is queued, so an update cannot be queued before it.
            dashmap::Entry::Vacant(slot) if !record.status().is_final() => {
                self.send(Op::Run(RunRow::of(slot.insert(record).clone())));
            }
            dashmap::Entry::Vacant(_) => self.send(Op::Run(RunRow::of(record))),
        }
        Ok(())
    }

    /// Applies an update to a run going on. For a run that is not going on, the file says which error it is:
    /// [`StoreError::Ended`] if the run is there, [`StoreError::UnknownRun`] if not.
    fn update(&self, _: &JournalPen, run: Uuid, update: RunUpdate, at: DateTime<Utc>) -> Result<(), StoreError> {
        let mut found = false;
        let ended = self.live.remove_if_mut(&run, |_, record| {
            found = true;
            record.apply(update, at);
            let ended = record.status().is_final();
            if !ended {
                self.send(Op::Run(RunRow::of(record.clone())));
            }
            ended
        });
        match ended {
            // An ended run leaves the map, and its record crosses to the writer whole, without a copy.
            Some((_, record)) => self.send(Op::Run(RunRow::of(record))),
            None if found => {}
            None if self.stored(run).is_some() => return Err(StoreError::Ended(run)),
            None => return Err(StoreError::UnknownRun(run)),
        }
        Ok(())
    }

    fn get(&self, run: Uuid) -> Option<RunRecord> {
        if let Some(record) = self.live.get(&run) {
            return Some(record.clone());
        }
        self.stored(run)
    }

    fn query(&self, query: &RunQuery) -> Vec<RunRecord> {
        self.keyed_runs(query).map(|runs| runs.into_iter().map(|(record, _)| record).collect()).unwrap_or_else(|err| {
            tracing::warn!(%err, "the journal could not be queried");
            Vec::new()
        })
    }

    fn refused(&self, _: &JournalPen, refusal: Refusal) {
        self.send(Op::Refusal(Box::new(refusal)));
    }

    fn refusals(&self, agent: &AgentId) -> Vec<Refusal> {
        self.read(|db| {
            decoded(db, "refusal", "SELECT refusal FROM refusals WHERE agent = ?1 ORDER BY place", &[&agent.as_str()])
        })
        .unwrap_or_else(|err| {
            tracing::warn!(%err, "refusals could not be read from the journal");
            Vec::new()
        })
    }

    fn durable(&self) -> Option<&dyn Durable> {
        Some(self)
    }

    /// A run that ended crosses to the writer as the server drafted it, with its plan, in one write (see
    /// [`RunRow`]). It was never recorded, so it cannot be a duplicate of a run going on.
    fn take_ended<'a>(&self, ended: EndedDraft<'a>) -> Option<EndedDraft<'a>> {
        let EndedDraft(Unwritten { draft, plan }, outcome) = ended;
        let plan = match plan {
            Some(plan) if plan.params_text.is_none() && draft.text_in_place().is_some() => Some(PlanRow::Parts(plan)),
            Some(plan) => {
                let made = plan.with_parts(draft.ids(), draft.params_text(), |parts| self.texts.plan_parts(parts));
                made.map(PlanRow::Made)
            }
            None => None,
        };
        let outcome = outcome.map(|kept| (self.texts.signal(kept.signal), kept.safe_again));
        // A long text was copied into the plan's: freed here.
        self.send(Op::Run(RunRow { draft: draft.handed_over(false), plan, outcome }));
        None
    }
}

impl Durable for SqliteStore {
    fn flushed(&self) -> Flushed {
        let (done, flushed) = tokio::sync::oneshot::channel();
        self.send(Op::Flush(Waiter::Task(done)));
        flushed
    }

    fn append_input(&self, _: &JournalPen, agent: &AgentId, seq: u64, signal: &Signal) {
        let given = signal.outcome().filter(|r| !r.awaiting_approval()).map(|r| r.run_id);
        self.send(Op::Input(agent.clone(), seq, self.texts.signal(signal), given));
    }

    fn save_snapshot(&self, _: &JournalPen, snapshot: Snapshot) {
        self.send(Op::Snapshot(Box::new(snapshot)));
    }

    fn agent_spawned(&self, _: &JournalPen, record: AgentRecord, initial: Snapshot) {
        self.send(Op::Spawned(Box::new(record), Box::new(initial)));
    }

    fn agent_alive(&self, _: &JournalPen, record: AgentRecord) {
        self.send(Op::Alive(Box::new(record)));
    }

    fn agent_ended(&self, _: &JournalPen, agent: &AgentId) {
        self.send(Op::Ended(agent.clone()));
    }

    fn schedule_armed(&self, _: &JournalPen, schedule: ScheduleRecord) {
        self.send(Op::Armed(Box::new(schedule)));
    }

    fn schedule_cleared(&self, _: &JournalPen, agent: &AgentId, key: &str) {
        self.send(Op::Cleared(agent.clone(), key.to_owned()));
    }

    fn run_planned(&self, _: &JournalPen, run: Uuid, plan: &RunPlan) {
        self.send(Op::Plan(run, self.texts.plan(plan)));
    }

    fn run_planned_parts(&self, _: &JournalPen, run: Uuid, parts: PlanParts<'_>) {
        self.send(Op::Plan(run, self.texts.plan_parts(parts)));
    }

    fn run_outcome(&self, _: &JournalPen, run: Uuid, outcome: &Signal, safe_again: bool) {
        self.send(Op::Outcome(run, self.texts.signal(outcome), safe_again));
    }

    fn append_kept_outcome(&self, _: &JournalPen, agent: &AgentId, seq: u64, run: Uuid, _signal: &Signal) {
        self.send(Op::KeptInput(agent.clone(), seq, run));
    }

    fn job_submitted(&self, _: &JournalPen, record: &crate::action::JobRecord, plan: &super::JobPlan) {
        self.send(Op::Job(JobWrite::Submitted(Box::new((record.clone(), plan.clone())))));
    }

    fn job_changed(&self, _: &JournalPen, record: &crate::action::JobRecord, end: Option<&Signal>) {
        self.send(Op::Job(JobWrite::Changed(Box::new((record.clone(), end.cloned())))));
    }

    fn job_told(&self, _: &JournalPen, agent: &AgentId, job: Uuid) {
        self.send(Op::Job(JobWrite::Told(agent.clone(), job)));
    }

    fn jobs_purged(&self, _: &JournalPen, before: DateTime<Utc>) {
        self.send(Op::Job(JobWrite::Purged(before)));
    }

    fn alive(&self, after: Option<&AgentId>, limit: usize) -> Result<Vec<AliveAgent>, StoreError> {
        self.read(|db| {
            let mut statement = db
                .prepare_cached(
                    "SELECT agent, agent_type, asleep, parent, (SELECT min(json_extract(schedule, '$.due')) FROM \
                     schedules WHERE schedules.agent = agents.agent), EXISTS (SELECT 1 FROM jobs WHERE jobs.agent = \
                     agents.agent AND told = 0 AND (ended IS NULL OR signal IS NOT NULL)) FROM agents WHERE agent > ?1 ORDER BY agent LIMIT ?2",
                )
                .map_err(database)?;
            let after = after.map_or("", AgentId::as_str);
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            let id = |text: String| {
                AgentId::new(text).map_err(|e| StoreError::Decode { what: "agent id", message: e.to_string() })
            };
            let mut rows = statement.query(params![after, limit]).map_err(database)?;
            let mut page = Vec::new();
            while let Some(row) = rows.next().map_err(database)? {
                let agent: String = row.get(0).map_err(database)?;
                let agent_type: String = row.get(1).map_err(database)?;
                let asleep: bool = row.get(2).map_err(database)?;
                let parent: Option<String> = row.get(3).map_err(database)?;
                let due: Option<String> = row.get(4).map_err(database)?;
                let jobs_pending: bool = row.get(5).map_err(database)?;
                // A parent only orders the recovery: one that does not read as an id orders nothing.
                let parent = parent.and_then(|p| AgentId::new(p).ok());
                // A due time that does not read wakes the agent at once, which arms its schedules itself.
                let next_due = due
                    .map(|d| DateTime::parse_from_rfc3339(&d).map_or_else(|_| Utc::now(), |d| d.with_timezone(&Utc)));
                page.push(AliveAgent { agent: id(agent)?, agent_type, asleep, parent, next_due, jobs_pending });
            }
            Ok(page)
        })
    }

    fn agent(&self, agent: &AgentId) -> Result<Option<AgentRecord>, StoreError> {
        self.read(|db| agent_record(db, agent))
    }

    fn snapshot(&self, agent: &AgentId) -> Result<Option<Snapshot>, StoreError> {
        self.read(|db| snapshot(db, agent))
    }

    fn inputs_after(&self, agent: &AgentId, after: u64) -> Result<Vec<(u64, Signal)>, StoreError> {
        self.read(|db| inputs_after(db, agent, after))
    }

    fn schedules(&self, agent: &AgentId) -> Result<Vec<ScheduleRecord>, StoreError> {
        self.read(|db| schedules(db, agent))
    }

    fn revivals(&self, agents: &[AgentId]) -> Result<Vec<Result<Revival, StoreError>>, StoreError> {
        self.read(|db| {
            // One read transaction: every agent is read as of the same commit.
            let tx = db.unchecked_transaction().map_err(database)?;
            let found = agents.iter().map(|agent| revival(&tx, agent)).collect();
            tx.finish().map_err(database)?;
            Ok(found)
        })
    }
}

#[cfg(test)]
mod abort_tests;

#[cfg(test)]
mod runs_tests;

#[cfg(test)]
mod tests;
