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
//! agent has not consumed yet may be written a few commits later, when that is safe (see `Runs` below). The
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
    EndedDraft, FastHash, PlanDraft, RecordDraft, Refusal, RunQuery, RunRecord, RunUpdate, Store, StoreError, Unwritten,
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

/// Marks a SQLite file as an agentry journal (`PRAGMA application_id`): "AGTY".
const APPLICATION_ID: i64 = 0x4147_5459;
/// The schema's version (`PRAGMA user_version`). Version 2 lists agents from columns of their own (type, asleep,
/// parent) instead of their records; a version 1 file is brought up to it on open. Version 3 logs inputs a
/// commit at a time (`input_batches`); a version 2 file's inputs, one a row, are still read and cleared.
/// Version 4 writes ended runs an agent and a commit at a time (`run_batches`, see `run_log.rs`); a version 3
/// file's runs stay where they are and are read beside them. Version 5 keeps a batched run's record and an
/// outcome signal the runtime made in a compact form (`run_codec.rs`, `signal_codec.rs`); a version 4 file's
/// JSON is read beside it. Version 6 keeps a batched run's plan in a compact form too (`plan_codec.rs`); a
/// version 5 file's JSON plans are read beside it. Version 7 keeps jobs (`jobs`, see `job_log.rs`); a version 6
/// file gets the table, empty.
const VERSION: i64 = 7;
/// The most writes waiting for the writer. A thread that writes faster than the disk takes them waits when
/// this many are queued (backpressure), so memory stays bounded however long the burst.
const QUEUE: usize = 4 * BATCH;
/// The most writes applied in one transaction.
const BATCH: usize = 4096;
/// A batch smaller than this that nobody waits on waits [`GATHER_FOR`] for more writes before it commits.
const GATHER_BELOW: usize = 256;
const GATHER_FOR: std::time::Duration = std::time::Duration::from_micros(500);
/// While it gathers, the writer sleeps this long at a time and then takes what came.
const GATHER_SLICE: std::time::Duration = std::time::Duration::from_micros(100);
/// How long an ended run whose outcome the agent has not consumed yet may wait to be written, and how many may
/// wait at once (see [`Runs`]).
const HOLD_FOR: std::time::Duration = std::time::Duration::from_millis(10);
const HELD_MOST: usize = BATCH;
/// The page size of a new file, in bytes.
const PAGE_SIZE: i64 = 16 * 1024;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS runs (
    place     INTEGER PRIMARY KEY,
    run       TEXT NOT NULL UNIQUE,
    agent     TEXT NOT NULL,
    action    TEXT NOT NULL,
    status    TEXT NOT NULL,
    recorded  INTEGER NOT NULL,
    final     INTEGER NOT NULL,
    record    TEXT NOT NULL,
    key       TEXT,
    plan      TEXT,
    outcome   TEXT,
    delivered INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS runs_agent ON runs(agent, final);
CREATE INDEX IF NOT EXISTS runs_action ON runs(action);
CREATE INDEX IF NOT EXISTS runs_recorded ON runs(recorded);
-- The runs that had not ended, read on every open: a run that starts and ends in one batch never enters it.
CREATE INDEX IF NOT EXISTS runs_open ON runs(place) WHERE final = 0;
-- Runs are found by key only among one agent's runs (runs_agent): an index of keys would cost every write.
DROP INDEX IF EXISTS runs_key;
CREATE TABLE IF NOT EXISTS refusals (
    place   INTEGER PRIMARY KEY,
    agent   TEXT NOT NULL,
    refusal TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS refusals_agent ON refusals(agent);
-- Inputs one a row: what journals before version 3 wrote. They are still read and cleared.
CREATE TABLE IF NOT EXISTS inputs (
    agent  TEXT NOT NULL,
    seq    INTEGER NOT NULL,
    signal TEXT NOT NULL,
    PRIMARY KEY (agent, seq)
) WITHOUT ROWID;
-- An agent's inputs from one commit, numbered first_seq..=last_seq (see input_log.rs for the body).
CREATE TABLE IF NOT EXISTS input_batches (
    place     INTEGER PRIMARY KEY,
    agent     TEXT NOT NULL,
    first_seq INTEGER NOT NULL,
    last_seq  INTEGER NOT NULL,
    body      BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS input_batches_agent ON input_batches(agent, last_seq);
CREATE TABLE IF NOT EXISTS snapshots (
    agent    TEXT PRIMARY KEY,
    snapshot TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS agents (
    agent      TEXT PRIMARY KEY,
    record     TEXT NOT NULL,
    agent_type TEXT NOT NULL DEFAULT '',
    asleep     INTEGER NOT NULL DEFAULT 0,
    parent     TEXT
);
CREATE TABLE IF NOT EXISTS schedules (
    agent    TEXT NOT NULL,
    key      TEXT NOT NULL,
    schedule TEXT NOT NULL,
    PRIMARY KEY (agent, key)
) WITHOUT ROWID;
";

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

/// What the writer thread is asked to do.
// A run's row is by far the largest, and carried inline on purpose (see `Op::Run`).
#[allow(clippy::large_enum_variant)]
enum Op {
    /// Carried inline, like every write of the run path: a box made by the sending thread and freed by the
    /// writer costs both threads the allocator's slow path.
    Run(RunRow),
    /// A run's plan: its idempotency key and the plan's JSON.
    Plan(Uuid, PlanText),
    /// An ended run's outcome signal, as the journal keeps it (`signal_codec.rs`), and whether the run is safe
    /// to start again (then its end may be held back a little: see [`Runs`]).
    Outcome(Uuid, Vec<u8>, bool),
    /// An input, as the journal keeps a signal (`signal_codec.rs`), and the run whose outcome it is, if it is one
    /// the agent was given.
    Input(AgentId, u64, Vec<u8>, Option<Uuid>),
    /// An input that is the outcome kept for a run (by [`Op::Outcome`]): logged from that.
    KeptInput(AgentId, u64, Uuid),
    Snapshot(Box<Snapshot>),
    Alive(Box<AgentRecord>),
    Spawned(Box<AgentRecord>, Box<Snapshot>),
    Ended(AgentId),
    Armed(Box<ScheduleRecord>),
    Cleared(AgentId, String),
    Refusal(Box<Refusal>),
    Job(JobWrite),
    /// Answered once every write sent before it is committed.
    Flush(Waiter),
}

/// A run's record on its way to the writer, which makes and serializes it: a run written more than once in one
/// commit (queued, started, ended) is serialized once, and the agent's thread, the busier of the two, does none
/// of it. A run that ended crosses as the server drafted it, with its plan in its parts (see [`PlanRow`]).
///
/// It crosses as a draft, with nothing on the heap: memory allocated on one thread and freed on another makes
/// glibc's allocator lock the first thread's arena from the second, and with a vector per run crossing, the
/// agent's thread spent more time asleep on that lock than the writer spent writing. Its statuses cross in place,
/// and its params as their digest or their short text; the writer makes the record (its digest, its history's
/// vector) on its own thread.
struct RunRow {
    draft: RecordDraft,
    plan: Option<PlanRow>,
    /// Its outcome signal for the agent, as [`Op::Outcome`] carries one.
    outcome: Option<(Vec<u8>, bool)>,
}

/// A run's plan on its way to the writer with its record.
enum PlanRow {
    /// Its parts, the params' text being the draft's, in place: the writer makes its text.
    Parts(PlanDraft),
    /// Its text, made by the sending thread (the params' text was too long to cross in place).
    Made(PlanText),
}

impl RunRow {
    fn of(record: RunRecord) -> Self {
        Self { draft: RecordDraft::of_record(record), plan: None, outcome: None }
    }
}

/// A run's record as the writer keeps it until it is written.
struct Recorded {
    record: RunRecord,
    /// When it was recorded, in milliseconds since the epoch.
    recorded: i64,
    ended: bool,
}

/// The buffers that carry serialized plans, outcomes and inputs to the writer, which hands them back once they
/// are written, so the same buffers go round: nothing is allocated by one thread to be freed by another
/// (which glibc makes both threads pay for, with a lock). (Run records cross as drafts, usually with their plans
/// in their parts, and the writer makes and serializes both: see [`RunRow`].)
#[derive(Debug, Default)]
struct Texts(Mutex<Vec<Vec<u8>>>);

/// How many spare buffers the pool keeps, and the largest it keeps (a rare huge row is not kept for ever). As
/// many as the queue holds writes: when the writer falls behind, that many buffers are on their way to it, and
/// each one the pool could not keep would be freed by the writer and allocated again by an agent's thread. At
/// most 16 MiB, usually far less (a plan is ~200 bytes, an outcome signal ~500).
const TEXTS_KEPT: usize = QUEUE;
const TEXT_KEPT_BYTES: usize = 1024;
/// How many buffers the writer moves into the pool per hold of its lock, so an agent's thread taking one never
/// waits for a whole commit's.
const TEXTS_GIVEN_AT_ONCE: usize = 256;
/// The room a new buffer starts with: an outcome signal is 400-500 bytes of JSON.
const TEXT_STARTS_AT: usize = 512;

impl Texts {
    /// An empty buffer from the pool, or a new one big enough for a usual row (rather than one that grows to it
    /// a doubling at a time).
    fn buffer(&self) -> Vec<u8> {
        let spare = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).pop();
        let mut bytes = spare.unwrap_or_else(|| Vec::with_capacity(TEXT_STARTS_AT));
        bytes.clear();
        bytes
    }

    /// `signal` as the journal keeps it (see `signal_codec.rs`), in a buffer from the pool.
    fn signal(&self, signal: &Signal) -> Vec<u8> {
        let mut bytes = self.buffer();
        signal_codec::encode(signal, &mut bytes);
        bytes
    }

    /// A run's key and its plan as JSON, in a buffer from the pool.
    fn plan(&self, plan: &RunPlan) -> PlanText {
        let mut bytes = self.buffer();
        bytes.extend_from_slice(plan.key.as_bytes());
        // A plan serializes to JSON without fail (plain data, string keys), and JSON is UTF-8.
        let _ = serde_json::to_writer(&mut bytes, plan);
        PlanText { text: String::from_utf8(bytes).unwrap_or_default(), key_len: plan.key.len() }
    }

    /// A run's key and its plan as JSON, made of its parts, in a buffer from the pool: the same text as
    /// [`Texts::plan`] makes of the same plan, with the params' text copied rather than made again.
    fn plan_parts(&self, parts: PlanParts<'_>) -> PlanText {
        let mut bytes = self.buffer();
        bytes.extend_from_slice(parts.key.as_bytes());
        bytes.extend_from_slice(b"{\"key\":");
        // A string serializes to JSON without fail.
        let _ = serde_json::to_writer(&mut bytes, parts.key);
        bytes.extend_from_slice(b",\"params\":");
        bytes.extend_from_slice(parts.params_json);
        bytes.extend_from_slice(if parts.by_agent { b",\"by_agent\":true" } else { b",\"by_agent\":false" });
        bytes.extend_from_slice(b",\"cause\":");
        let mut uuid = uuid::Uuid::encode_buffer();
        match parts.cause {
            Some(cause) => {
                bytes.push(b'"');
                bytes.extend_from_slice(cause.hyphenated().encode_lower(&mut uuid).as_bytes());
                bytes.push(b'"');
            }
            None => bytes.extend_from_slice(b"null"),
        }
        bytes.extend_from_slice(b",\"correlation\":\"");
        bytes.extend_from_slice(parts.correlation.hyphenated().encode_lower(&mut uuid).as_bytes());
        bytes.extend_from_slice(b"\"}");
        // The key is UTF-8 and so is JSON; params text that is not (a store's caller's bug) leaves the plan empty.
        PlanText { text: String::from_utf8(bytes).unwrap_or_default(), key_len: parts.key.len() }
    }

    /// Takes written buffers back.
    fn give_back(&self, spent: &mut Vec<Vec<u8>>) {
        // The lock is held only to move the buffers in: the agents' threads take one from the pool for each row
        // they send, and a commit gives back thousands. Those not kept are dropped after it is released.
        spent.retain(|text| text.capacity() <= TEXT_KEPT_BYTES);
        while !spent.is_empty() {
            let mut pool = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let room = TEXTS_KEPT.saturating_sub(pool.len()).min(spent.len()).min(TEXTS_GIVEN_AT_ONCE);
            if room == 0 {
                break;
            }
            let from = spent.len() - room;
            pool.extend(spent.drain(from..));
        }
        spent.clear();
    }
}

/// A run's idempotency key and its plan's JSON, in one buffer from the pool (one buffer a run rather than two).
struct PlanText {
    text: String,
    key_len: usize,
}

impl PlanText {
    fn key(&self) -> &str {
        self.text.get(..self.key_len).unwrap_or_default()
    }

    fn plan(&self) -> &str {
        self.text.get(self.key_len..).unwrap_or_default()
    }

    fn into_bytes(self) -> Vec<u8> {
        self.text.into_bytes()
    }
}

/// Who waits for a flush: a task, a thread that blocks (a read), or nobody (the writer itself, writing what it
/// held back).
enum Waiter {
    Task(tokio::sync::oneshot::Sender<()>),
    Thread(mpsc::SyncSender<()>),
    Nobody,
}

impl Waiter {
    fn tell(self) {
        match self {
            Waiter::Task(done) => {
                let _ = done.send(());
            }
            Waiter::Thread(done) => {
                let _ = done.send(());
            }
            Waiter::Nobody => {}
        }
    }
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

/// Whether the file is as long as its header says (a file cut short is refused on open without reading it
/// all). Only a file whose write-ahead log is empty can be measured so: pages in the log may lie past its end.
fn whole(db: &Connection, path: &Path) -> Result<(), String> {
    let mut log = path.as_os_str().to_owned();
    log.push("-wal");
    if std::fs::metadata(&log).is_ok_and(|m| m.len() > 0) {
        return Ok(());
    }
    let pages: u64 = db.query_row("PRAGMA page_count", [], |r| r.get(0)).map_err(|e| e.to_string())?;
    let page_size: u64 = db.query_row("PRAGMA page_size", [], |r| r.get(0)).map_err(|e| e.to_string())?;
    let length = std::fs::metadata(path).map_err(|e| format!("it cannot be measured: {e}"))?.len();
    if length < pages * page_size {
        return Err(format!(
            "it is {length} bytes long, and its header says {pages} pages of {page_size} bytes: it was cut short"
        ));
    }
    Ok(())
}

/// Brings a version 1 file's `agents` table up to version 2: the columns a recovery lists agents by, filled
/// from each record, and their index (which covers the listing, so it never reads the records).
fn list_agents_from_columns(db: &Connection) -> rusqlite::Result<()> {
    let has_columns = db.prepare("SELECT 1 FROM pragma_table_info('agents') WHERE name = 'asleep'")?.exists([])?;
    if !has_columns {
        db.execute_batch(
            "BEGIN;
             ALTER TABLE agents ADD COLUMN agent_type TEXT NOT NULL DEFAULT '';
             ALTER TABLE agents ADD COLUMN asleep INTEGER NOT NULL DEFAULT 0;
             ALTER TABLE agents ADD COLUMN parent TEXT;
             UPDATE agents SET agent_type = coalesce(json_extract(record, '$.agent_type'), ''),
                 asleep = coalesce(json_extract(record, '$.asleep'), 0),
                 parent = json_extract(record, '$.spawn.parent')
                 WHERE json_valid(record);
             COMMIT;",
        )?;
    }
    db.execute_batch("CREATE INDEX IF NOT EXISTS agents_listing ON agents(agent, agent_type, asleep, parent);")
}

/// The writer thread: everything waiting goes into one transaction; then the flushes are answered.
fn write_loop(
    mut db: Connection,
    queue: mpsc::Receiver<Op>,
    (keep_inputs, checkpointer): (bool, &Checkpointer),
    committed: &AtomicU64,
    texts: &Texts,
) {
    // Kept from batch to batch, so a batch does not grow a new vector each time.
    let mut batch: Vec<Op> = Vec::with_capacity(BATCH);
    let mut spent: Vec<Vec<u8>> = Vec::with_capacity(BATCH);
    let mut runs = Runs::default();
    if let Err(err) = runs.load(&db) {
        tracing::error!(%err, "the journal's writer could not read where its runs stand");
    }
    let mut inputs = InputBatches::default();
    loop {
        // With ended runs held back, the writer wakes to write them once they have waited their time.
        let first = match runs.held_until() {
            None => queue.recv().map(Some).map_err(|_| ()),
            Some(until) => match queue.recv_timeout(until.saturating_duration_since(Instant::now())) {
                Ok(op) => Ok(Some(op)),
                // Time to write those whose time is up: a batch of no writes does that.
                Err(mpsc::RecvTimeoutError::Timeout) => Ok(None),
                Err(mpsc::RecvTimeoutError::Disconnected) => Err(()),
            },
        };
        let Ok(first) = first else { break };
        batch.extend(first);
        let gather = |batch: &mut Vec<Op>| {
            while batch.len() < BATCH
                && let Ok(op) = queue.try_recv()
            {
                batch.push(op);
            }
        };
        gather(&mut batch);
        // A small batch that nobody waits on is given a moment to grow: fewer, larger transactions. The writer
        // sleeps meanwhile instead of waiting on the queue, since a thread waiting on a queue is woken by every
        // write sent to it, and each wake costs the sender a system call. A batch someone waits on commits
        // at once, or one slice after the one waiting arrives.
        let awaited = |op: &Op| matches!(op, Op::Flush(_));
        if batch.len() < GATHER_BELOW && !batch.iter().any(awaited) {
            let until = Instant::now() + GATHER_FOR;
            loop {
                std::thread::sleep(GATHER_SLICE);
                let before = batch.len();
                gather(&mut batch);
                let waited_on = batch[before..].iter().any(awaited);
                if waited_on || batch.len() >= GATHER_BELOW || Instant::now() >= until {
                    break;
                }
            }
        }
        commit(&mut db, &mut batch, (&mut runs, &mut inputs), (&mut spent, texts), keep_inputs, committed);
        checkpointer.committed(&db);
        texts.give_back(&mut spent);
    }
    // The last writes: nothing is held back any more.
    batch.push(Op::Flush(Waiter::Nobody));
    commit(&mut db, &mut batch, (&mut runs, &mut inputs), (&mut spent, texts), keep_inputs, committed);
}

/// Applies `batch` in one transaction, then answers its flushes. A flush anywhere in it writes every run held
/// back; without one, ended runs whose outcome the agent has not consumed yet may be held back for the next.
fn commit(
    db: &mut Connection,
    batch: &mut Vec<Op>,
    (runs, inputs): (&mut Runs, &mut InputBatches),
    (spent, texts): (&mut Vec<Vec<u8>>, &Texts),
    keep_inputs: bool,
    committed: &AtomicU64,
) {
    let mut flushed = Vec::new();
    let writes = batch.iter().filter(|op| !matches!(op, Op::Flush(_))).count() as u64;
    let held_before = runs.held_writes();
    let outcome = (|| -> rusqlite::Result<()> {
        let tx = db.transaction()?;
        for op in batch.drain(..) {
            match op {
                Op::Flush(done) => flushed.push(done),
                Op::Run(row) => runs.record(row, texts, spent),
                Op::Plan(run, plan) => {
                    let pending = runs.entry(run);
                    spent.extend(pending.plan.replace(plan).map(PlanText::into_bytes));
                    pending.parts = None;
                    pending.writes += 1;
                }
                Op::Outcome(run, outcome, safe_again) => {
                    let pending = runs.entry(run);
                    pending.keep_outcome(outcome, safe_again, spent);
                    pending.writes += 1;
                }
                Op::Input(agent, number, signal, given) => {
                    // An outcome signal consumed: the agent was given it.
                    if let Some(run) = given {
                        runs.delivered(&tx, run, spent)?;
                    }
                    inputs.add(&tx, &agent, number, &signal)?;
                    spent.push(signal);
                }
                Op::KeptInput(agent, number, run) => match runs.consumed(run) {
                    // Kept in this batch or held back: logged from there, and never written with the run.
                    Some(signal) => {
                        inputs.add(&tx, &agent, number, &signal)?;
                        spent.push(signal);
                    }
                    None => {
                        let kept: Option<Vec<u8>> = tx
                            .prepare_cached("SELECT outcome FROM runs WHERE run = ?1 AND outcome IS NOT NULL")?
                            .query_row([run.to_string()], |r| kept_bytes(r, 0))
                            .optional()?;
                        match kept {
                            Some(signal) => inputs.add(&tx, &agent, number, &signal)?,
                            // Only when the batch that kept the outcome failed, which was logged then.
                            None => tracing::error!(
                                agent = %agent, seq = number, %run,
                                "a consumed outcome is not in the journal; the input is not logged"
                            ),
                        }
                        mark_delivered(&tx, run)?;
                    }
                },
                Op::Snapshot(snapshot) => {
                    // The snapshot folds in the inputs that asked for the agent's ended runs whose outcomes it
                    // has not consumed yet: a recovery from it finds those outcomes only with their runs, so
                    // the runs are written with it.
                    runs.release(&snapshot.agent);
                    apply(&tx, Op::Snapshot(snapshot), inputs, keep_inputs)?;
                }
                write => apply(&tx, write, inputs, keep_inputs)?,
            }
        }
        inputs.write_all(&tx)?;
        runs.write(&tx, (spent, texts), !flushed.is_empty())?;
        tx.commit()
    })();
    // A batch that failed leaves what it did not get to in `batch`: dropped with it, like the runs it held.
    batch.clear();
    if outcome.is_err() {
        runs.forget(spent);
        inputs.forget();
        // The runs it wrote as going on may not be in the file: read again which are.
        if let Err(err) = runs.load(db) {
            tracing::error!(%err, "the journal's writer could not read where its runs stand");
        }
    }
    // Counted either way: a batch that failed is not retried, and reads must not wait for it for ever. Writes
    // held back count once they are written.
    committed.fetch_add(writes + held_before - runs.held_writes(), Ordering::SeqCst);
    match outcome {
        // Dropping the senders tells the waiters the batch is not durable.
        Err(err) => tracing::error!(%err, "the journal could not commit a batch of writes"),
        Ok(()) => flushed.into_iter().for_each(Waiter::tell),
    }
}

/// What the `runs` table is to get, per run, coalesced: a run queued, started and ended within one batch (the
/// usual case under load) is one row write instead of five. An ended run whose outcome the agent has not
/// consumed yet is held back for up to [`HOLD_FOR`]: the agent usually consumes it within a few batches, and
/// the run is then written once, marked delivered and without the outcome (which its input log entry holds),
/// instead of written and then updated. Holding a run back breaks the rule that a commit includes every write
/// sent before it, so it is done only where nothing committed later depends on the run: never for a run that is
/// not safe to start again, and never past a flush (someone waits for everything sent) or a snapshot of its
/// agent (which folds in the input that asked for the run, so a recovery from it could no longer ask again).
#[derive(Default)]
struct Runs {
    /// The runs in the order they first appeared, so rows keep the order runs were recorded in. Between
    /// batches, the runs held back. (A run pending is a few hundred bytes: kept in order, it is read and
    /// written where the runs before it were, where a map would scatter thousands of them over memory no
    /// cache holds.)
    pending: Vec<(Uuid, PendingRun)>,
    /// Where each pending run is in `pending`.
    index: std::collections::HashMap<Uuid, usize, FastHash>,
    /// When the first run held back must be written, and how many writes the runs held back stand for.
    held_until: Option<Instant>,
    held_writes: u64,
    /// The pending runs with a record, by agent, so a snapshot finds its agent's runs without a scan of all.
    /// (It may name runs written since; those are no longer pending and are passed over.)
    by_agent: std::collections::HashMap<AgentId, Vec<Uuid>, FastHash>,
    /// The runs with a row in `runs` that had not ended: their end must update that row, so they never join
    /// a batch of ended runs.
    open: std::collections::HashSet<Uuid, FastHash>,
    /// The place the next run written takes (one order for `runs` and `run_batches`).
    next_place: i64,
    /// The ended runs of this commit gathered into rows of `run_batches`.
    batches: RunBatches,
    /// Where a run's record is serialized for its row in `runs`.
    scratch: Vec<u8>,
    /// Where a batched run's key and plan are made from their parts.
    key: String,
    plan: Vec<u8>,
}

#[derive(Default)]
struct PendingRun {
    record: Option<Recorded>,
    /// The plan's key and JSON.
    plan: Option<PlanText>,
    /// Or the plan in its parts, with its params' text: made into the form it is written in only then (compact
    /// in a batch of ended runs, JSON in `runs`).
    parts: Option<(PlanDraft, ShortText)>,
    /// The outcome signal's JSON.
    outcome: Option<Vec<u8>>,
    delivered: bool,
    /// Whether its end may be held back (the run is safe to start again), and until when it is.
    holdable: bool,
    hold_until: Option<Instant>,
    /// How many writes it stands for (counted committed once it is written).
    writes: u64,
}

impl PendingRun {
    /// Its outcome signal for the agent (the one before, if any, is spent).
    fn keep_outcome(&mut self, outcome: Vec<u8>, safe_again: bool, spent: &mut Vec<Vec<u8>>) {
        spent.extend(self.outcome.replace(outcome));
        self.holdable = safe_again;
        self.delivered = false;
    }

    /// An ended run, safe to start again, whose outcome the agent has not consumed yet, that may still wait.
    fn may_wait(&self, now: Instant) -> bool {
        self.holdable
            && self.record.as_ref().is_some_and(|r| r.ended)
            && self.outcome.is_some()
            && !self.delivered
            && self.hold_until.is_none_or(|until| until > now)
    }
}

impl Runs {
    /// Reads from the file which runs have a row that had not ended, and where the numbering goes on.
    fn load(&mut self, db: &Connection) -> rusqlite::Result<()> {
        self.next_place = self.next_place.max(run_log::next_place(db)?);
        let mut statement = db.prepare("SELECT run FROM runs WHERE final = 0")?;
        let open = statement.query_map([], |r| r.get::<_, String>(0))?;
        self.open.clear();
        for run in open {
            if let Ok(run) = Uuid::parse_str(&run?) {
                self.open.insert(run);
            }
        }
        Ok(())
    }

    fn entry(&mut self, run: Uuid) -> &mut PendingRun {
        let at = *self.index.entry(run).or_insert_with(|| {
            self.pending.push((run, PendingRun::default()));
            self.pending.len() - 1
        });
        &mut self.pending[at].1
    }

    fn get_mut(&mut self, run: &Uuid) -> Option<&mut PendingRun> {
        let at = *self.index.get(run)?;
        self.pending.get_mut(at).map(|(_, pending)| pending)
    }

    /// `agent`'s ended runs held back, or pending in this batch, are written with it, outcome and all.
    fn release(&mut self, agent: &AgentId) {
        for run in self.by_agent.get(agent).into_iter().flatten() {
            if let Some(at) = self.index.get(run)
                && let Some((_, pending)) = self.pending.get_mut(*at)
            {
                pending.holdable = false;
            }
        }
    }

    /// A run's record, as it is now, with its plan if it came with one.
    fn record(&mut self, row: RunRow, texts: &Texts, spent: &mut Vec<Vec<u8>>) {
        let RunRow { draft, plan, outcome } = row;
        let (plan, parts) = match plan {
            Some(PlanRow::Made(text)) => (Some(text), None),
            Some(PlanRow::Parts(parts)) => match draft.text_in_place().and_then(ShortText::of) {
                Some(params) => (None, Some((parts, params))),
                // Never, as the store sends them: a plan in its parts comes with its params' text in place.
                None => (parts.with_parts(draft.ids(), draft.params_text(), |p| texts.plan_parts(p)), None),
            },
            None => (None, None),
        };
        let (recorded, ended) = (draft.recorded_ms(), draft.status().is_final());
        let (record, _) = draft.into_record();
        let (run, agent) = (record.run, record.agent.clone());
        let pending = self.entry(run);
        let first = pending.record.is_none();
        pending.record = Some(Recorded { record, recorded, ended });
        // A run has one plan, in one form or the other.
        if let Some(plan) = plan {
            spent.extend(pending.plan.replace(plan).map(PlanText::into_bytes));
            pending.parts = None;
        }
        if let Some(parts) = parts {
            spent.extend(pending.plan.take().map(PlanText::into_bytes));
            pending.parts = Some(parts);
        }
        if let Some((outcome, safe_again)) = outcome {
            pending.keep_outcome(outcome, safe_again, spent);
        }
        pending.writes += 1;
        if first {
            self.by_agent.entry(agent).or_default().push(run);
        }
    }

    /// When the runs held back must be written, if any are.
    fn held_until(&self) -> Option<Instant> {
        self.held_until
    }

    /// How many writes the runs held back stand for.
    fn held_writes(&self) -> u64 {
        self.held_writes
    }

    /// The agent consumed the outcome of `run`: marked with its pending outcome, or in the file.
    fn delivered(&mut self, db: &Connection, run: Uuid, spent: &mut Vec<Vec<u8>>) -> rusqlite::Result<()> {
        match self.consumed(run) {
            // Consumed while still pending here: it need not be written at all.
            Some(outcome) => spent.push(outcome),
            None => mark_delivered(db, run)?,
        }
        Ok(())
    }

    /// The agent consumed the outcome of `run`: its JSON, if it is still pending here (then the run is marked
    /// delivered and written without it).
    fn consumed(&mut self, run: Uuid) -> Option<Vec<u8>> {
        let pending = self.get_mut(&run)?;
        let outcome = pending.outcome.take()?;
        pending.delivered = true;
        Some(outcome)
    }

    /// Writes what is pending, in order, and forgets it; unless `all`, ended runs not yet delivered may be held
    /// back, each for [`HOLD_FOR`] at most, [`HELD_MOST`] at a time.
    fn write(
        &mut self,
        db: &Connection,
        (spent, texts): (&mut Vec<Vec<u8>>, &Texts),
        all: bool,
    ) -> rusqlite::Result<()> {
        let now = Instant::now();
        self.held_writes = 0;
        self.held_until = None;
        // Only the runs held back stay pending: they make the new order and the new index by agent.
        self.by_agent.clear();
        let mut statement = None;
        self.index.clear();
        for (run, mut pending) in std::mem::take(&mut self.pending) {
            if !all && self.pending.len() < HELD_MOST && pending.may_wait(now) {
                let until = *pending.hold_until.get_or_insert(now + HOLD_FOR);
                self.held_until = Some(self.held_until.map_or(until, |first| first.min(until)));
                self.held_writes += pending.writes;
                if let Some(row) = &pending.record {
                    self.by_agent.entry(row.record.agent.clone()).or_default().push(run);
                }
                self.index.insert(run, self.pending.len());
                self.pending.push((run, pending));
                continue;
            }
            let place = self.next_place;
            self.next_place += 1;
            if self.settled(run, &pending)
                && let Some(row) = &pending.record
            {
                let (key, plan) = match (&pending.plan, &pending.parts) {
                    (Some(text), _) => (Some(text.key()), Some(text.plan().as_bytes())),
                    (None, Some(parts)) => {
                        let (draft, params) = parts;
                        let (key, plan) = (&mut self.key, &mut self.plan);
                        key.clear();
                        draft.key.write_to(&row.record.agent, run, key);
                        plan.clear();
                        let parts = draft.parts(key, params.as_bytes());
                        plan_codec::encode(&parts, row.record.correlation, plan);
                        (Some(key.as_str()), Some(&plan[..]))
                    }
                    (None, None) => (None, None),
                };
                let settled = Settled { place, recorded: row.recorded, record: &row.record, key, plan };
                if self.batches.add(db, &settled)? {
                    spent.extend(pending.plan.map(PlanText::into_bytes));
                    continue;
                }
            }
            // Written in `runs`: a plan still in its parts is made into its JSON.
            let mut pending = pending;
            if let (Some(parts), Some(row)) = (pending.parts.take(), &pending.record) {
                let (draft, params) = parts;
                let ids = (&row.record.agent, run);
                pending.plan = draft.with_parts(ids, Some(params.as_bytes()), |p| texts.plan_parts(p));
            }
            if let Some(row) = &pending.record {
                if row.ended {
                    self.open.remove(&run);
                } else {
                    self.open.insert(run);
                }
            }
            write_run(db, (&mut statement, &mut self.scratch), place, run, pending, spent)?;
        }
        self.batches.write_all(db)
    }

    /// Whether `run` has nothing more to be written about it and no row to update, so it may join a batch: it
    /// ended, the agent consumed its outcome here, and it never had a row in `runs`.
    fn settled(&self, run: Uuid, pending: &PendingRun) -> bool {
        pending.delivered
            && pending.outcome.is_none()
            && pending.record.as_ref().is_some_and(|row| row.ended)
            && !self.open.contains(&run)
    }

    /// Drops everything pending (its batch failed), handing its texts back.
    fn forget(&mut self, spent: &mut Vec<Vec<u8>>) {
        for (_, pending) in self.pending.drain(..) {
            spent.extend(pending.plan.map(PlanText::into_bytes).into_iter().chain(pending.outcome));
        }
        self.index.clear();
        self.by_agent.clear();
        self.batches.forget();
        self.held_until = None;
        self.held_writes = 0;
    }
}

/// Marks a run written earlier as delivered: the agent consumed its outcome.
fn mark_delivered(db: &Connection, run: Uuid) -> rusqlite::Result<()> {
    db.prepare_cached("UPDATE runs SET delivered = 1 WHERE run = ?1 AND outcome IS NOT NULL")?
        .execute([run.to_string()])?;
    Ok(())
}

/// Writes one run's pending changes: its row, or the columns that changed when only they did.
fn write_run<'db>(
    db: &'db Connection,
    (upsert, scratch): (&mut Option<rusqlite::CachedStatement<'db>>, &mut Vec<u8>),
    place: i64,
    run: Uuid,
    pending: PendingRun,
    spent: &mut Vec<Vec<u8>>,
) -> rusqlite::Result<()> {
    let (key, plan) = (pending.plan.as_ref().map(PlanText::key), pending.plan.as_ref().map(PlanText::plan));
    let outcome = pending.outcome;
    match pending.record {
        Some(row) => {
            let statement = match upsert {
                Some(statement) => statement,
                None => upsert.insert(db.prepare_cached(
                    "INSERT INTO runs (run, agent, action, status, recorded, final, record, key, plan, outcome, \
                     delivered, place) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) \
                     ON CONFLICT(run) DO UPDATE \
                     SET status = excluded.status, final = excluded.final, record = excluded.record, \
                     key = COALESCE(excluded.key, runs.key), plan = COALESCE(excluded.plan, runs.plan), \
                     outcome = COALESCE(excluded.outcome, runs.outcome), delivered = CASE WHEN excluded.outcome \
                     IS NOT NULL OR excluded.delivered THEN excluded.delivered ELSE runs.delivered END",
                )?),
            };
            scratch.clear();
            serde_json::to_writer(&mut *scratch, &row.record)
                .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
            let record = std::str::from_utf8(scratch).map_err(rusqlite::Error::Utf8Error)?;
            statement.execute(params![
                run.to_string(),
                row.record.agent.as_str(),
                row.record.action.as_str(),
                json(&row.record.status()),
                row.recorded,
                row.ended,
                record,
                key,
                plan,
                outcome.as_deref().map(kept_signal),
                pending.delivered,
                place,
            ])?;
        }
        None => {
            db.prepare_cached(
                "UPDATE runs SET key = COALESCE(?2, key), plan = COALESCE(?3, plan), \
                 outcome = COALESCE(?4, outcome), \
                 delivered = CASE WHEN ?4 IS NOT NULL OR ?5 THEN ?5 ELSE delivered END WHERE run = ?1",
            )?
            .execute(params![
                run.to_string(),
                key,
                plan,
                outcome.as_deref().map(kept_signal),
                pending.delivered
            ])?;
        }
    }
    spent.extend(pending.plan.map(PlanText::into_bytes).into_iter().chain(outcome));
    Ok(())
}

/// A kept signal's bytes from its column, text (JSON) or blob (the compact form).
pub(super) fn kept_bytes(row: &rusqlite::Row<'_>, column: usize) -> rusqlite::Result<Vec<u8>> {
    let value = row.get_ref(column)?;
    let bytes = value
        .as_bytes()
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(column, value.data_type(), Box::new(e)))?;
    Ok(bytes.to_vec())
}

/// A kept signal as a value of its column: its JSON as text, the compact form of an outcome as a blob.
fn kept_signal(bytes: &[u8]) -> rusqlite::types::ToSqlOutput<'_> {
    use rusqlite::types::{ToSqlOutput, ValueRef};
    match std::str::from_utf8(bytes) {
        Ok(json) if bytes.first() == Some(&b'{') => ToSqlOutput::Borrowed(ValueRef::Text(json.as_bytes())),
        _ => ToSqlOutput::Borrowed(ValueRef::Blob(bytes)),
    }
}

/// Applies a write that is not part of a run. One that clears an agent's inputs first writes those gathered
/// in this commit, so it clears them too.
fn apply(db: &Connection, op: Op, inputs: &mut InputBatches, keep_inputs: bool) -> rusqlite::Result<()> {
    match op {
        Op::Spawned(record, initial) => {
            inputs.write_agent(db, &record.agent)?;
            input_log::clear(db, &record.agent, None)?;
            db.prepare_cached("DELETE FROM schedules WHERE agent = ?1")?.execute([record.agent.as_str()])?;
            job_log::clear(db, &record.agent)?;
            db.prepare_cached("INSERT OR REPLACE INTO snapshots (agent, snapshot) VALUES (?1, ?2)")?
                .execute(params![initial.agent.as_str(), json(&initial)])?;
            keep_agent(db, &record)?;
        }
        Op::Snapshot(snapshot) => {
            db.prepare_cached("INSERT OR REPLACE INTO snapshots (agent, snapshot) VALUES (?1, ?2)")?
                .execute(params![snapshot.agent.as_str(), json(&snapshot)])?;
            // The inputs folded into it are no longer needed to bring the agent back.
            if !keep_inputs {
                inputs.write_agent(db, &snapshot.agent)?;
                input_log::clear(db, &snapshot.agent, Some(snapshot.seq))?;
            }
        }
        Op::Alive(record) => keep_agent(db, &record)?,
        Op::Ended(agent) => {
            inputs.write_agent(db, &agent)?;
            input_log::clear(db, &agent, None)?;
            for table in ["agents", "snapshots", "schedules"] {
                db.prepare_cached(&format!("DELETE FROM {table} WHERE agent = ?1"))?.execute([agent.as_str()])?;
            }
            job_log::clear(db, &agent)?;
        }
        Op::Armed(schedule) => {
            db.prepare_cached("INSERT OR REPLACE INTO schedules (agent, key, schedule) VALUES (?1, ?2, ?3)")?
                .execute(params![schedule.agent.as_str(), schedule.key, json(&schedule)])?;
        }
        Op::Cleared(agent, key) => {
            db.prepare_cached("DELETE FROM schedules WHERE agent = ?1 AND key = ?2")?
                .execute(params![agent.as_str(), key])?;
        }
        Op::Refusal(refusal) => {
            db.prepare_cached("INSERT INTO refusals (agent, refusal) VALUES (?1, ?2)")?
                .execute(params![refusal.agent.as_str(), json(&refusal)])?;
        }
        Op::Job(write) => job_log::apply(db, write)?,
        // The writer handles these itself.
        Op::Flush(_) | Op::Run(_) | Op::Plan(..) | Op::Outcome(..) | Op::Input(..) | Op::KeptInput(..) => {}
    }
    Ok(())
}

/// Writes an agent's record, with the columns it is listed by.
fn keep_agent(db: &Connection, record: &AgentRecord) -> rusqlite::Result<()> {
    let parent = record.parent();
    db.prepare_cached(
        "INSERT OR REPLACE INTO agents (agent, record, agent_type, asleep, parent) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![
        record.agent.as_str(),
        json(record),
        record.agent_type,
        record.asleep,
        parent.as_ref().map(AgentId::as_str)
    ])?;
    Ok(())
}

/// Reads rows of one JSON column, decoded.
fn decoded<T: serde::de::DeserializeOwned>(
    db: &Connection,
    what: &'static str,
    sql: &str,
    values: &[&dyn rusqlite::ToSql],
) -> Result<Vec<T>, StoreError> {
    let mut statement = db.prepare_cached(sql).map_err(database)?;
    let rows = statement.query_map(values, |r| r.get::<_, String>(0)).map_err(database)?;
    let mut found = Vec::new();
    for text in rows {
        found.push(decode(what, &text.map_err(database)?)?);
    }
    Ok(found)
}

impl Store for SqliteStore {
    /// Journals a new run. A run going on with the same id is refused as a duplicate; ended runs are not looked
    /// up (that would read the file for every run), so a record reusing an ended run's id is the caller's error.
    fn record(&self, record: RunRecord) -> Result<(), StoreError> {
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
    fn update(&self, run: Uuid, update: RunUpdate, at: DateTime<Utc>) -> Result<(), StoreError> {
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

    fn refused(&self, refusal: Refusal) {
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

    fn append_input(&self, agent: &AgentId, seq: u64, signal: &Signal) {
        let given = signal.outcome().filter(|r| !r.awaiting_approval()).map(|r| r.run_id);
        self.send(Op::Input(agent.clone(), seq, self.texts.signal(signal), given));
    }

    fn save_snapshot(&self, snapshot: Snapshot) {
        self.send(Op::Snapshot(Box::new(snapshot)));
    }

    fn agent_spawned(&self, record: AgentRecord, initial: Snapshot) {
        self.send(Op::Spawned(Box::new(record), Box::new(initial)));
    }

    fn agent_alive(&self, record: AgentRecord) {
        self.send(Op::Alive(Box::new(record)));
    }

    fn agent_ended(&self, agent: &AgentId) {
        self.send(Op::Ended(agent.clone()));
    }

    fn schedule_armed(&self, schedule: ScheduleRecord) {
        self.send(Op::Armed(Box::new(schedule)));
    }

    fn schedule_cleared(&self, agent: &AgentId, key: &str) {
        self.send(Op::Cleared(agent.clone(), key.to_owned()));
    }

    fn run_planned(&self, run: Uuid, plan: &RunPlan) {
        self.send(Op::Plan(run, self.texts.plan(plan)));
    }

    fn run_planned_parts(&self, run: Uuid, parts: PlanParts<'_>) {
        self.send(Op::Plan(run, self.texts.plan_parts(parts)));
    }

    fn run_outcome(&self, run: Uuid, outcome: &Signal, safe_again: bool) {
        self.send(Op::Outcome(run, self.texts.signal(outcome), safe_again));
    }

    fn append_kept_outcome(&self, agent: &AgentId, seq: u64, run: Uuid, _signal: &Signal) {
        self.send(Op::KeptInput(agent.clone(), seq, run));
    }

    fn job_submitted(&self, record: &crate::action::JobRecord, plan: &super::JobPlan) {
        self.send(Op::Job(JobWrite::Submitted(Box::new((record.clone(), plan.clone())))));
    }

    fn job_changed(&self, record: &crate::action::JobRecord, end: Option<&Signal>) {
        self.send(Op::Job(JobWrite::Changed(Box::new((record.clone(), end.cloned())))));
    }

    fn job_told(&self, agent: &AgentId, job: Uuid) {
        self.send(Op::Job(JobWrite::Told(agent.clone(), job)));
    }

    fn jobs_purged(&self, before: DateTime<Utc>) {
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

fn agent_record(db: &Connection, agent: &AgentId) -> Result<Option<AgentRecord>, StoreError> {
    let found = decoded(db, "agent record", "SELECT record FROM agents WHERE agent = ?1", &[&agent.as_str()])?;
    Ok(found.into_iter().next())
}

fn snapshot(db: &Connection, agent: &AgentId) -> Result<Option<Snapshot>, StoreError> {
    let found = decoded(db, "snapshot", "SELECT snapshot FROM snapshots WHERE agent = ?1", &[&agent.as_str()])?;
    Ok(found.into_iter().next())
}

fn inputs_after(db: &Connection, agent: &AgentId, after: u64) -> Result<Vec<(u64, Signal)>, StoreError> {
    input_log::after(db, agent, after)
}

fn schedules(db: &Connection, agent: &AgentId) -> Result<Vec<ScheduleRecord>, StoreError> {
    decoded(db, "schedule", "SELECT schedule FROM schedules WHERE agent = ?1 ORDER BY key", &[&agent.as_str()])
}

/// Everything that brings `agent` back. The runs its inputs after the snapshot asked for are found by their
/// idempotency keys, `<prefix>/{seq}/{index}` (the prefix of the snapshot's incarnation), whose `seq` is after
/// the snapshot's.
fn revival(db: &Connection, agent: &AgentId) -> Result<Revival, StoreError> {
    let record = agent_record(db, agent)?;
    let snapshot = snapshot(db, agent)?;
    let after = snapshot.as_ref().map_or(0, |s| s.seq);
    let inputs = inputs_after(db, agent, after)?;
    let schedules = schedules(db, agent)?;
    let incarnation = snapshot.as_ref().map_or(0, |s| s.incarnation);
    let prefix = crate::action::input_key_prefix(agent, incarnation);
    let runs = run_log::revival_runs(db, agent, &prefix, after)?;
    let jobs = job_log::of_agent(db, agent)?;
    Ok(Revival { record, snapshot, inputs, schedules, runs, jobs })
}

#[cfg(test)]
#[path = "sqlite_runs_tests.rs"]
mod runs_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::RunKey;
    use crate::id::ActionId;
    use crate::store::{KeyedRun, RunStatus};
    use proptest::prelude::*;
    use serde_json::Value;
    use serde_json::json;

    fn agent(name: &str) -> AgentId {
        AgentId::new(name).unwrap()
    }

    proptest! {
        /// A plan made of its parts (the params as the text the server made of them) is the very text the plan
        /// itself serializes to, so both read back the same.
        #[test]
        fn a_plan_made_of_its_parts_is_the_plans_own_text(
            key in ".{0,40}",
            params in crate::store::digest_tests::params(),
            by_agent in any::<bool>(),
            cause in proptest::option::of(any::<u128>()),
            correlation in any::<u128>(),
        ) {
            let plan = RunPlan {
                key,
                params,
                by_agent,
                cause: cause.map(Uuid::from_u128),
                correlation: Uuid::from_u128(correlation),
            };
            let params_json = serde_json::to_vec(&plan.params).unwrap();
            let parts = PlanParts {
                key: &plan.key,
                params_json: &params_json,
                by_agent,
                cause: plan.cause,
                correlation: plan.correlation,
            };
            let texts = Texts::default();
            let (whole, made) = (texts.plan(&plan), texts.plan_parts(parts));
            prop_assert_eq!((made.key(), made.plan()), (whole.key(), whole.plan()));
            prop_assert_eq!(serde_json::from_str::<RunPlan>(made.plan()).unwrap(), plan);
        }
    }

    #[test]
    fn runs_going_on_are_updated_in_memory_and_ended_ones_are_read_from_the_file() {
        let folder = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(folder.path().join("journal.db")).unwrap();
        let (me, action) = (agent("me"), ActionId::new("x.y").unwrap());
        let queued = |run| RunRecord::queued(run, me.clone(), action.clone(), &json!({}), run);
        let status = |status| RunUpdate { status: Some(status), ..RunUpdate::default() };
        let (going, ended_whole, unknown) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());

        store.record(queued(going)).unwrap();
        assert_eq!(
            store.record(queued(going)),
            Err(StoreError::Duplicate(going)),
            "a run going on is not recorded twice"
        );
        store.update(going, status(RunStatus::Running), Utc::now()).unwrap();
        assert_eq!(store.get(going).map(|r| r.status()), Some(RunStatus::Running));
        store.update(going, status(RunStatus::Completed), Utc::now()).unwrap();
        assert!(store.live.is_empty(), "an ended run leaves the memory");
        let read = store.get(going).expect("an ended run is read from the file");
        assert_eq!(
            read.history.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
            [RunStatus::Queued, RunStatus::Running, RunStatus::Completed]
        );
        assert_eq!(store.update(going, status(RunStatus::Failed), Utc::now()), Err(StoreError::Ended(going)));
        assert_eq!(store.get(going), Some(read), "an update to an ended run changes nothing");

        // A run recorded once it already ended (as one that ends at its first poll is) goes straight to the file.
        let mut whole = queued(ended_whole);
        whole.apply(status(RunStatus::Completed), Utc::now());
        store.record(whole.clone()).unwrap();
        assert!(store.live.is_empty());
        assert_eq!(store.get(ended_whole), Some(whole));
        assert_eq!(
            store.update(ended_whole, status(RunStatus::Failed), Utc::now()),
            Err(StoreError::Ended(ended_whole))
        );

        assert_eq!(store.update(unknown, status(RunStatus::Running), Utc::now()), Err(StoreError::UnknownRun(unknown)));
        assert_eq!(store.get(unknown), None);
    }

    #[test]
    fn row_buffers_go_round_and_only_small_ones_are_kept() {
        let texts = Texts::default();
        let order = Signal::new("order.placed", json!({"a": [1, 2, 3]})).unwrap();
        let first = texts.signal(&order);
        assert_eq!(first, serde_json::to_vec(&order).unwrap(), "a signal that is not an outcome is kept as JSON");
        let (address, capacity) = (first.as_ptr(), first.capacity());
        texts.give_back(&mut vec![first]);
        let again = texts.signal(&Signal::new("b", json!(null)).unwrap());
        assert!(again.starts_with(b"{"), "a buffer from the pool holds only the new text");
        assert_eq!((again.as_ptr(), again.capacity()), (address, capacity), "the same buffer came back");
        let huge = vec![b'x'; TEXT_KEPT_BYTES + 1];
        texts.give_back(&mut vec![again, huge]);
        assert_eq!(texts.0.lock().unwrap().len(), 1, "a buffer larger than the limit is let go");
        let mut many: Vec<Vec<u8>> = (0..TEXTS_KEPT + 10).map(|_| Vec::with_capacity(8)).collect();
        texts.give_back(&mut many);
        assert_eq!(texts.0.lock().unwrap().len(), TEXTS_KEPT, "the pool keeps at most its limit");
        assert!(many.is_empty(), "every buffer handed back was taken");
        // A key and its plan share one buffer.
        let plan = RunPlan {
            key: "me/1/0".into(),
            params: json!({"i": 1}),
            by_agent: true,
            cause: None,
            correlation: Uuid::nil(),
        };
        let text = texts.plan(&plan);
        assert_eq!(text.key(), "me/1/0");
        assert_eq!(serde_json::from_str::<RunPlan>(text.plan()).unwrap(), plan);
    }

    fn snapshot_at(agent: &AgentId, seq: u64) -> Snapshot {
        Snapshot {
            agent: agent.clone(),
            seq,
            agent_type: "test".to_owned(),
            version: 1,
            state: json!({"seq": seq}),
            at: Utc::now(),
            incarnation: 0,
        }
    }

    #[test]
    fn a_read_sees_every_write_sent_before_it_while_others_keep_writing() {
        let folder = tempfile::tempdir().unwrap();
        let store = Arc::new(SqliteStore::open(folder.path().join("journal.db")).unwrap());
        let (reader, busy) = (agent("reader"), agent("busy"));
        // Another writer, in bursts, so the writer has work queued when the reads come.
        let noise = {
            let (store, busy) = (store.clone(), busy.clone());
            std::thread::spawn(move || {
                for seq in 1..=20_000 {
                    store.append_input(&busy, seq, &Signal::new("noise", json!(seq)).unwrap());
                    if seq % 100 == 0 {
                        std::thread::yield_now();
                    }
                }
            })
        };
        for seq in 1..=500 {
            store.append_input(&reader, seq, &Signal::new("tick", json!(seq)).unwrap());
            let inputs = store.inputs_after(&reader, seq - 1).unwrap();
            assert_eq!(inputs.len(), 1, "input {seq} was written before the read");
            // A snapshot drops the inputs it folded in.
            store.save_snapshot(snapshot_at(&reader, seq));
            assert_eq!(store.snapshot(&reader).unwrap().map(|s| s.seq), Some(seq));
        }
        noise.join().unwrap();
        assert_eq!(store.inputs_after(&busy, 0).unwrap().len(), 20_000);
    }

    #[test]
    fn a_revival_has_the_runs_to_settle_and_those_the_inputs_after_the_snapshot_asked_for() {
        let folder = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(folder.path().join("journal.db")).unwrap();
        let (me, other) = (agent("me"), agent("other"));
        let record = AgentRecord { agent: me.clone(), agent_type: "test".to_owned(), spawn: json!({}), asleep: false };
        store.agent_spawned(record.clone(), snapshot_at(&me, 0));
        for seq in 1..=4 {
            store.append_input(&me, seq, &Signal::new("tick", json!(seq)).unwrap());
        }
        store.save_snapshot(snapshot_at(&me, 2));
        let action = ActionId::new("x.y").unwrap();
        // (key, ended): only the run going on and the one asked for by input 3 are for the recovery.
        let runs = [("me/1/0", true), ("me/1/1", false), ("me/3/0", true), ("me/run/7", true), ("other/3/0", true)];
        let mut ids = Vec::new();
        for (key, ended) in runs {
            let run = Uuid::now_v7();
            let whose = if key.starts_with("other") { &other } else { &me };
            store.record(RunRecord::queued(run, whose.clone(), action.clone(), &json!({}), run)).unwrap();
            // The ended ones were asked for from outside (no outcome for the agent, so none of it was lost).
            let by_agent = !ended;
            let plan = RunPlan { key: key.to_owned(), params: json!({}), by_agent, cause: None, correlation: run };
            store.run_planned(run, &plan);
            if ended {
                let done = RunUpdate { status: Some(RunStatus::Completed), ..RunUpdate::default() };
                store.update(run, done, Utc::now()).unwrap();
            }
            ids.push(run);
        }
        let revivals = store.revivals(&[me.clone(), agent("nobody")]).unwrap();
        let [Ok(mine), Ok(nobody)] = &revivals[..] else { panic!("two revivals: {revivals:?}") };
        assert_eq!(mine.record.as_ref(), Some(&record));
        assert_eq!(mine.snapshot.as_ref().map(|s| s.seq), Some(2));
        assert_eq!(mine.inputs.iter().map(|(seq, _)| *seq).collect::<Vec<_>>(), [3, 4]);
        let keys: Vec<&str> = mine.runs.iter().filter_map(|r| r.plan.as_ref()).map(|p| p.key.as_str()).collect();
        assert_eq!(keys, ["me/1/1", "me/3/0"]);
        assert_eq!(mine.runs.iter().map(|r| r.record.run).collect::<Vec<_>>(), [ids[1], ids[2]]);
        assert_eq!(nobody, &Revival::default(), "an agent the store does not know has nothing to bring back");
    }

    /// A run of `me`'s that ended at its first poll, as the server drafts it with its plan, twice (for two
    /// stores); and what the journal must bring back of it (its record, its plan with the params as asked for,
    /// no outcome).
    fn drafted_run(me: &AgentId, key: RunKey, params: &Value, coerced: bool) -> ([Unwritten; 2], KeyedRun) {
        let run = Uuid::now_v7();
        let (action, cause, queued) = (ActionId::new("x.y").unwrap(), Uuid::now_v7(), Utc::now());
        let running = RunUpdate { status: Some(RunStatus::Running), attempts: Some(1), ..RunUpdate::default() };
        let done = RunUpdate { status: Some(RunStatus::Completed), ..RunUpdate::default() };
        let updates = [(running, Utc::now()), (done, Utc::now())];
        let drafted = || {
            let ids = crate::store::DraftIds {
                run,
                agent: me.clone(),
                action: action.clone(),
                correlation: run,
                parent_run: None,
            };
            let text = serde_json::to_vec(params).unwrap();
            let draft = RecordDraft::queued(ids, params, Some(text), queued);
            let plan =
                PlanDraft { key: key.clone(), by_agent: true, cause: Some(cause), correlation: run, params_text: None };
            let mut unwritten = Unwritten { draft, plan: Some(plan) };
            if coerced {
                unwritten.forget_text();
            }
            for (update, at) in &updates {
                unwritten.draft.apply(update.clone(), *at);
            }
            unwritten.ended()
        };
        let mut model =
            RunRecord::queued_at(run, me.clone(), action.clone(), crate::store::params_digest(params), run, queued);
        for (update, at) in &updates {
            model.apply(update.clone(), *at);
        }
        let mut key_text = String::new();
        key.write_to(me, run, &mut key_text);
        let plan =
            RunPlan { key: key_text, params: params.clone(), by_agent: true, cause: Some(cause), correlation: run };
        ([drafted(), drafted()], KeyedRun { record: model, plan: Some(plan), outcome: None, delivered: false })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        /// Model: a run's record and plan as the server drafted them. A run that ended reaches the journal as
        /// drafted (its plan made by the writer from its parts, or by the sending thread when its params are
        /// long or were coerced since), with its outcome for the agent or not, and the recovery reads back the
        /// same record, plan and outcome as when the same run is journaled through `record`,
        /// `run_planned_parts` and `run_outcome`.
        #[test]
        fn an_ended_run_taken_as_drafted_reads_back_as_one_written_through_record_and_plan(
            runs in proptest::collection::vec(
                (any::<bool>(), any::<bool>(), any::<bool>(), 0u32..4, proptest::option::of(any::<bool>())),
                1..6,
            ),
        ) {
            let me = agent("me");
            let folder = tempfile::tempdir().unwrap();
            let drafted = SqliteStore::open(folder.path().join("drafted.db")).unwrap();
            let general = SqliteStore::open(folder.path().join("general.db")).unwrap();
            let (source, action): (Arc<str>, _) = ("agentry/agent/me".into(), ActionId::new("x.y").unwrap());
            let mut expected = Vec::new();
            for (i, (long, given, coerced, index, outcome)) in runs.into_iter().enumerate() {
                let text = if long { "a text long enough not to be kept in place by a draft" } else { "short" };
                let params = json!({"i": i, "text": text});
                let seq = i as u64 + 1;
                let key = if given { RunKey::Given(format!("me/{seq}/{index}").into()) } else { RunKey::Input { incarnation: 0, seq, index } };
                let ([taken, written], mut model) = drafted_run(&me, key, &params, coerced);
                let run = model.record.run;
                match outcome {
                    Some(safe_again) => {
                        let made = crate::action::Outcome::completed(params.clone(), std::time::Duration::ZERO, 1);
                        let refs = crate::kinds::RunRef { run, action: &action, correlation: run, causation: None };
                        let signal = crate::kinds::action_outcome_at(&source, refs, made, (Uuid::now_v7(), Utc::now())).unwrap();
                        taken.write_ended_with_outcome(&drafted, &signal, safe_again);
                        // The same run, through the general road.
                        drop(written.write(&general));
                        general.run_outcome(run, &signal, safe_again);
                        model.outcome = Some(signal);
                    }
                    None => {
                        taken.write_ended(&drafted);
                        drop(written.write(&general));
                    }
                }
                expected.push(model);
            }
            // A run whose end may wait for its outcome to be consumed is written when that wait ends, and takes its
            // place then: the runs are compared in the order of their ids.
            expected.sort_by_key(|run| run.record.run);
            for store in [&drafted, &general] {
                let revivals = store.revivals(std::slice::from_ref(&me)).unwrap();
                let [Ok(revival)] = &revivals[..] else { panic!("one revival: {revivals:?}") };
                let mut runs = revival.runs.clone();
                runs.sort_by_key(|run| run.record.run);
                prop_assert_eq!(runs, expected.clone());
            }
        }
    }

    fn record_of(agent: &AgentId, parent: Option<&AgentId>, asleep: bool) -> AgentRecord {
        let agent_type = if agent.as_str().ends_with('0') { "zero" } else { "other" };
        AgentRecord {
            agent: agent.clone(),
            agent_type: agent_type.to_owned(),
            spawn: json!({"parent": parent}),
            asleep,
        }
    }

    /// Every page of [`Durable::alive`], from the first.
    fn listed(store: &SqliteStore, limit: usize) -> Vec<AliveAgent> {
        let (mut all, mut after) = (Vec::new(), None::<AgentId>);
        loop {
            let page = store.alive(after.as_ref(), limit).unwrap();
            assert!(page.len() <= limit, "a page holds at most {limit}");
            assert!(
                page.iter().all(|a| after.as_ref().is_none_or(|after| a.agent > *after)),
                "only ids after the last"
            );
            let Some(last) = page.last() else { return all };
            after = Some(last.agent.clone());
            all.extend(page);
        }
    }

    #[test]
    fn agents_are_listed_a_page_at_a_time_in_order_of_id_without_their_records() {
        let folder = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(folder.path().join("journal.db")).unwrap();
        let mut model = std::collections::BTreeMap::new();
        for n in (0..23).rev() {
            let id = agent(&format!("a{n:02}"));
            let parent = (n % 3 == 1).then(|| agent("a00"));
            let record = record_of(&id, parent.as_ref(), false);
            store.agent_spawned(record.clone(), snapshot_at(&id, 0));
            model.insert(id, record);
        }
        // Some fall asleep, one ends.
        for n in [4, 7, 20] {
            let record = model.get_mut(&agent(&format!("a{n:02}"))).unwrap();
            record.asleep = true;
            store.agent_alive(record.clone());
        }
        store.agent_ended(&agent("a05"));
        model.remove(&agent("a05"));
        let expected: Vec<AliveAgent> = model.values().map(AliveAgent::of).collect();
        for limit in [1, 4, 22, 100] {
            assert_eq!(listed(&store, limit), expected, "pages of {limit}");
        }
        assert_eq!(expected.iter().filter(|a| a.asleep).count(), 3);
        assert_eq!(expected[1].parent, Some(agent("a00")));
    }

    #[test]
    fn a_version_1_journal_is_brought_up_to_date_and_lists_its_agents() {
        let folder = tempfile::tempdir().unwrap();
        let path = folder.path().join("journal.db");
        let (parent, child) = (agent("p0"), agent("c1"));
        let records = [record_of(&parent, None, false), record_of(&child, Some(&parent), true)];
        {
            // The version 1 schema of `agents`: a record and nothing else.
            let db = Connection::open(&path).unwrap();
            db.execute_batch("CREATE TABLE agents (agent TEXT PRIMARY KEY, record TEXT NOT NULL);").unwrap();
            for record in &records {
                db.execute("INSERT INTO agents VALUES (?1, ?2)", params![record.agent.as_str(), json(record)]).unwrap();
            }
            // A record that is not JSON: listed with what can be known (awake, no type), which fails that
            // agent's revival alone rather than the whole open.
            db.execute("INSERT INTO agents VALUES ('x9', 'not json')", []).unwrap();
            db.pragma_update(None, "application_id", APPLICATION_ID).unwrap();
            db.pragma_update(None, "user_version", 1).unwrap();
        }
        let store = SqliteStore::open(&path).unwrap();
        let mut expected: Vec<AliveAgent> = records.iter().map(AliveAgent::of).collect();
        expected.push(AliveAgent {
            agent: agent("x9"),
            agent_type: String::new(),
            asleep: false,
            parent: None,
            next_due: None,
            jobs_pending: false,
        });
        expected.sort_by(|a, b| a.agent.cmp(&b.agent));
        assert_eq!(listed(&store, 10), expected);
        assert_eq!(store.agent(&child).unwrap().as_ref(), Some(&records[1]), "the record itself is kept");
        drop(store);
        let version: i64 = Connection::open(&path).unwrap().query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
        assert_eq!(version, VERSION);
    }

    #[test]
    fn a_new_journal_has_big_pages_and_an_old_one_keeps_its_own() {
        let folder = tempfile::tempdir().unwrap();
        let page_size = |path: &Path| -> i64 {
            Connection::open(path).unwrap().query_row("PRAGMA page_size", [], |r| r.get(0)).unwrap()
        };
        let fresh = folder.path().join("fresh.db");
        drop(SqliteStore::open(&fresh).unwrap());
        assert_eq!(page_size(&fresh), PAGE_SIZE);

        let old = folder.path().join("old.db");
        {
            let db = Connection::open(&old).unwrap();
            db.pragma_update(None, "page_size", 4096).unwrap();
            db.execute_batch("CREATE TABLE agents (agent TEXT PRIMARY KEY, record TEXT NOT NULL);").unwrap();
            db.pragma_update(None, "application_id", APPLICATION_ID).unwrap();
            db.pragma_update(None, "user_version", 1).unwrap();
        }
        let store = SqliteStore::open(&old).unwrap();
        let id = agent("kept");
        store.agent_spawned(record_of(&id, None, false), snapshot_at(&id, 0));
        assert_eq!(listed(&store, 10).len(), 1, "the old file takes writes");
        drop(store);
        assert_eq!(page_size(&old), 4096, "a file keeps the page size it was made with");
    }

    #[test]
    fn a_damaged_page_is_refused_on_open_when_asked_to_verify_and_never_panics() {
        let folder = tempfile::tempdir().unwrap();
        let path = folder.path().join("journal.db");
        {
            let store = SqliteStore::open(&path).unwrap();
            for n in 0..2000 {
                let id = agent(&format!("a{n:04}"));
                store.agent_spawned(record_of(&id, None, n % 2 == 0), snapshot_at(&id, 0));
            }
        }
        // Everything into the main file, then garbage over a page in its middle: the file is as long as before.
        Connection::open(&path).unwrap().query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())).unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        let page = usize::try_from(PAGE_SIZE).unwrap();
        let middle = bytes.len() / 2 / page * page;
        bytes[middle..middle + page].fill(0x5a);
        std::fs::write(&path, &bytes).unwrap();

        let verified = SqliteStore::open_with(&path, SqliteOptions { verify: true, ..SqliteOptions::default() });
        assert!(matches!(verified, Err(StoreError::Corrupt { .. })), "{verified:?}");
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "refusing it changed nothing");
        // Without the check it may open; reading the damaged page is then an error of the read, not a panic.
        if let Ok(store) = SqliteStore::open(&path) {
            let mut after = None::<AgentId>;
            loop {
                match store.alive(after.as_ref(), 100) {
                    Ok(page) if page.is_empty() => break,
                    Ok(page) => after = page.last().map(|a| a.agent.clone()),
                    Err(_) => break,
                }
            }
            let _ = store.revivals(&[agent("a1000")]);
        }
    }

    /// A journal file with the schema, and what the writer keeps between batches.
    pub(super) struct Writer {
        _folder: tempfile::TempDir,
        pub(super) db: Connection,
        runs: Runs,
        committed: AtomicU64,
    }

    impl Writer {
        pub(super) fn new() -> Self {
            let folder = tempfile::tempdir().unwrap();
            let db = Connection::open(folder.path().join("journal.db")).unwrap();
            db.execute_batch(SCHEMA).unwrap();
            db.execute_batch(run_log::SCHEMA).unwrap();
            let mut runs = Runs::default();
            runs.load(&db).unwrap();
            Self { _folder: folder, db, runs, committed: AtomicU64::new(0) }
        }

        pub(super) fn commit(&mut self, ops: Vec<Op>) {
            let (mut batch, mut spent, texts) = (ops, Vec::new(), Texts::default());
            let mut inputs = InputBatches::default();
            let (runs, inputs) = (&mut self.runs, &mut inputs);
            commit(&mut self.db, &mut batch, (runs, inputs), (&mut spent, &texts), false, &self.committed);
        }

        fn committed(&self) -> u64 {
            self.committed.load(Ordering::SeqCst)
        }

        /// The run's row, if written: whether it ended, its outcome and whether it was delivered. A run in a
        /// batch of ended runs ended, and its outcome was delivered.
        fn row(&self, run: Uuid) -> Option<(bool, Option<String>, bool)> {
            let row = self
                .db
                .query_row("SELECT final, outcome, delivered FROM runs WHERE run = ?1", [run.to_string()], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })
                .optional()
                .unwrap();
            row.or_else(|| run_log::find(&self.db, run).unwrap().map(|_| (true, None, true)))
        }

        fn input(&self, agent: &AgentId, seq: u64) -> Option<Signal> {
            inputs_after(&self.db, agent, seq - 1).unwrap().into_iter().find(|(s, _)| *s == seq).map(|(_, x)| x)
        }
    }

    /// An outcome signal's JSON, told apart by its run.
    fn outcome_of(run: Uuid) -> String {
        json(&Signal::new("action.completed", json!({ "run": run })).unwrap())
    }

    /// The writes of a run of `me` that ended at once, with its outcome (`safe_again` or not).
    fn ended_run(me: &AgentId, safe_again: bool) -> (Uuid, String, Vec<Op>) {
        let run = Uuid::now_v7();
        let mut record = RunRecord::queued(run, me.clone(), ActionId::new("x.y").unwrap(), &json!({}), run);
        record.apply(RunUpdate { status: Some(RunStatus::Completed), ..RunUpdate::default() }, Utc::now());
        let row = RunRow::of(record);
        let outcome = outcome_of(run);
        let key = format!("{me}/1/0");
        let plan = PlanText { key_len: key.len(), text: key + "{}" };
        let ops = vec![Op::Run(row), Op::Plan(run, plan), Op::Outcome(run, outcome.clone().into_bytes(), safe_again)];
        (run, outcome, ops)
    }

    /// A run that ended as drafted, its outcome consumed in the same commit, joins a batch: its plan is kept in
    /// the compact form (a few bytes beside its params, against ~180 as JSON), and a recovery reads it whole.
    #[test]
    fn a_batched_run_keeps_its_plan_compact_and_a_recovery_reads_it_whole() {
        let me = agent("me");
        let mut writer = Writer::new();
        let ([drafted, _], model) =
            drafted_run(&me, RunKey::Input { incarnation: 0, seq: 1, index: 0 }, &json!({"i": 7}), false);
        let Unwritten { draft, plan } = drafted;
        let run = model.record.run;
        writer.commit(vec![
            // The record with its plan and its outcome, in one write, as the store sends a run that ended.
            Op::Run(RunRow {
                draft: draft.handed_over(false),
                plan: plan.map(PlanRow::Parts),
                outcome: Some((outcome_of(run).into_bytes(), true)),
            }),
            Op::KeptInput(me.clone(), 1, run),
        ]);
        let body: Vec<u8> = writer.db.query_row("SELECT body FROM run_batches", [], |r| r.get(0)).unwrap();
        let entry = run_log::entries(&body).next().unwrap().unwrap();
        assert_eq!(entry.key, Some("me/1/0"));
        let plan = entry.plan.expect("a plan");
        assert!(plan.len() < 40 && plan.first() != Some(&b'{'), "compact: {:?}", String::from_utf8_lossy(plan));
        let runs = run_log::revival_runs(&writer.db, &me, me.as_str(), 0).unwrap();
        assert_eq!(runs, vec![KeyedRun { delivered: true, ..model }]);
    }

    #[test]
    fn outcome_signals_the_runtime_made_are_kept_compact_and_read_back_equal() {
        let folder = tempfile::tempdir().unwrap();
        let path = folder.path().join("journal.db");
        let store = SqliteStore::open(&path).unwrap();
        let me = agent("me");
        let record = AgentRecord { agent: me.clone(), agent_type: "test".to_owned(), spawn: json!({}), asleep: false };
        store.agent_spawned(record, snapshot_at(&me, 0));
        let action = ActionId::new("x.y").unwrap();
        let source: Arc<str> = "agentry/agent/me".into();
        let mut outcomes = Vec::new();
        for (n, safe_again) in [(1u64, false), (2, true)] {
            let run = Uuid::now_v7();
            let mut record = RunRecord::queued(run, me.clone(), action.clone(), &json!({}), run);
            record.apply(RunUpdate { status: Some(RunStatus::Completed), ..RunUpdate::default() }, Utc::now());
            store.record(record).unwrap();
            let key = format!("me/{n}/0");
            store.run_planned(run, &RunPlan { key, params: json!({}), by_agent: true, cause: None, correlation: run });
            let made = crate::action::Outcome::completed(
                json!({ "n": n, "text": "é\"" }),
                std::time::Duration::from_millis(7),
                1,
            );
            let refs = crate::kinds::RunRef { run, action: &action, correlation: run, causation: Some(run) };
            let signal = crate::kinds::action_outcome_at(&source, refs, made, (Uuid::now_v7(), Utc::now())).unwrap();
            store.run_outcome(run, &signal, safe_again);
            outcomes.push((run, signal));
        }
        // The second is consumed as input 1: logged in the agent's input log.
        let (consumed, logged) = &outcomes[1];
        store.append_kept_outcome(&me, 1, *consumed, logged);
        let revivals = store.revivals(std::slice::from_ref(&me)).unwrap();
        let [Ok(revival)] = &revivals[..] else { panic!("one revival: {revivals:?}") };
        assert_eq!(revival.inputs, vec![(1, logged.clone())], "the logged outcome reads back equal");
        assert!(revival.inputs[0].1.outcome().is_some());
        let (waiting, kept) = &outcomes[0];
        let run = revival.runs.iter().find(|r| r.record.run == *waiting).expect("the run whose outcome waits");
        assert_eq!(run.outcome.as_ref(), Some(kept), "the outcome kept with its run reads back equal");
        drop(store);
        let db = Connection::open(&path).unwrap();
        let kind: String = db
            .query_row("SELECT typeof(outcome) FROM runs WHERE run = ?1", [waiting.to_string()], |r| r.get(0))
            .unwrap();
        assert_eq!(kind, "blob", "kept in the compact form");
    }

    #[test]
    fn an_ended_run_waits_for_its_outcome_to_be_consumed_and_is_then_written_once_without_it() {
        let mut writer = Writer::new();
        let me = agent("me");
        let (run, outcome, mut ops) = ended_run(&me, true);
        ops.push(Op::Input(agent("other"), 1, b"{}".to_vec(), None));
        writer.commit(ops);
        assert_eq!(writer.row(run), None, "held back while the agent has not consumed the outcome");
        assert_eq!(writer.committed(), 1, "what is held back does not count as committed");

        writer.commit(vec![Op::KeptInput(me.clone(), 1, run)]);
        assert_eq!(writer.row(run), Some((true, None, true)), "written once, delivered, its outcome in the log");
        assert_eq!(writer.input(&me, 1), Some(decode("input", &outcome).unwrap()));
        assert_eq!(writer.committed(), 5, "every write counted once written");
    }

    #[test]
    fn a_run_not_safe_to_start_again_is_written_at_once_and_its_outcome_copied_to_the_log_when_consumed() {
        let mut writer = Writer::new();
        let me = agent("me");
        let (run, outcome, ops) = ended_run(&me, false);
        writer.commit(ops);
        assert_eq!(writer.row(run), Some((true, Some(outcome.clone()), false)));
        assert_eq!(writer.committed(), 3);

        writer.commit(vec![Op::KeptInput(me.clone(), 1, run)]);
        let input = writer.input(&me, 1);
        assert_eq!(input, Some(decode("input", &outcome).unwrap()), "the input is the outcome as it was kept");
        assert_eq!(writer.row(run), Some((true, Some(outcome), true)), "and the run is marked delivered");
    }

    #[test]
    fn a_flush_or_the_end_of_the_wait_writes_what_was_held_back() {
        let mut writer = Writer::new();
        let me = agent("me");
        let (flushed, outcome, ops) = ended_run(&me, true);
        writer.commit(ops);
        assert_eq!(writer.row(flushed), None);
        writer.commit(vec![Op::Flush(Waiter::Nobody)]);
        assert_eq!(writer.row(flushed), Some((true, Some(outcome), false)), "someone waits: written, to be delivered");
        assert_eq!(writer.committed(), 3);

        let (late, _, ops) = ended_run(&me, true);
        writer.commit(ops);
        assert!(writer.runs.held_until().is_some_and(|until| until <= Instant::now() + HOLD_FOR));
        writer.commit(Vec::new());
        assert_eq!(writer.row(late), None, "a batch of nothing before its time writes nothing");
        for (_, pending) in &mut writer.runs.pending {
            pending.hold_until = Some(Instant::now());
        }
        writer.commit(Vec::new());
        assert!(writer.row(late).is_some_and(|(_, outcome, _)| outcome.is_some()), "its time is up: written");
        assert_eq!((writer.runs.held_until(), writer.committed()), (None, 6));
    }

    #[test]
    fn a_snapshot_of_its_agent_writes_an_ended_run_held_back_with_its_outcome() {
        let mut writer = Writer::new();
        let (me, other) = (agent("me"), agent("other"));
        let (held, outcome, ops) = ended_run(&me, true);
        writer.commit(ops);
        writer.commit(vec![Op::Snapshot(Box::new(snapshot_at(&other, 5)))]);
        assert_eq!(writer.row(held), None, "another agent's snapshot does not need it");
        writer.commit(vec![Op::Snapshot(Box::new(snapshot_at(&me, 1)))]);
        assert_eq!(writer.row(held), Some((true, Some(outcome), false)), "committed with the snapshot");

        // The same when the run and the snapshot are in one batch; a run that ends after it may still wait.
        let (before, outcome, mut ops) = ended_run(&me, true);
        ops.push(Op::Snapshot(Box::new(snapshot_at(&me, 2))));
        let (after, _, later) = ended_run(&me, true);
        ops.extend(later);
        writer.commit(ops);
        assert_eq!(writer.row(before), Some((true, Some(outcome), false)));
        assert_eq!(writer.row(after), None);
    }

    #[test]
    fn the_writer_writes_what_it_held_back_when_its_time_is_up_and_when_the_store_closes() {
        let folder = tempfile::tempdir().unwrap();
        let path = folder.path().join("journal.db");
        let me = agent("me");
        let written = |run: Uuid| -> bool {
            let raw = Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
            raw.query_row("SELECT count(*) FROM runs WHERE run = ?1", [run.to_string()], |r| r.get::<_, i64>(0))
                .unwrap()
                == 1
        };
        let ended = |store: &SqliteStore| {
            let run = Uuid::now_v7();
            store.record(RunRecord::queued(run, me.clone(), ActionId::new("x.y").unwrap(), &json!({}), run)).unwrap();
            let done = RunUpdate { status: Some(RunStatus::Completed), ..RunUpdate::default() };
            store.update(run, done, Utc::now()).unwrap();
            store.run_outcome(run, &Signal::new("action.completed", json!({})).unwrap(), true);
            run
        };
        let store = SqliteStore::open(&path).unwrap();
        let first = ended(&store);
        // Nothing else is written: the writer wakes by itself. (Watching the file; it gives up after 10 s.)
        let start = Instant::now();
        while !written(first) {
            assert!(start.elapsed() < std::time::Duration::from_secs(10), "the held run was never written");
            std::thread::yield_now();
        }
        let last = ended(&store);
        drop(store);
        assert!(written(last), "closing the store writes what it held back");
    }

    #[test]
    fn a_version_3_journal_opens_and_its_runs_are_read_in_order_beside_those_written_in_batches() {
        let folder = tempfile::tempdir().unwrap();
        let path = folder.path().join("journal.db");
        let me = agent("me");
        let ended = |run: Uuid| {
            let mut record = RunRecord::queued(run, me.clone(), ActionId::new("x.y").unwrap(), &json!({}), run);
            record.apply(RunUpdate { status: Some(RunStatus::Completed), ..RunUpdate::default() }, Utc::now());
            record
        };
        let old = ended(Uuid::now_v7());
        drop(SqliteStore::open(&path).unwrap());
        {
            // What version 3 wrote: every run a row of `runs`, and no batches.
            let db = Connection::open(&path).unwrap();
            db.execute_batch("DROP TABLE run_batches; DROP TABLE run_batch_actions; PRAGMA user_version = 3;").unwrap();
            db.execute(
                "INSERT INTO runs (run, agent, action, status, recorded, final, record, key, delivered) \
                 VALUES (?1, 'me', 'x.y', '\"completed\"', 0, 1, ?2, 'me/1/0', 1)",
                params![old.run.to_string(), json(&old)],
            )
            .unwrap();
        }
        let store = SqliteStore::open(&path).unwrap();
        let new: Vec<RunRecord> = (0..3).map(|_| ended(Uuid::now_v7())).collect();
        for (n, record) in new.iter().enumerate() {
            let seq = n as u64 + 2;
            store.record(record.clone()).unwrap();
            let plan = RunPlan {
                key: format!("me/{seq}/0"),
                params: json!({}),
                by_agent: true,
                cause: None,
                correlation: record.run,
            };
            store.run_planned(record.run, &plan);
            let outcome = Signal::new("action.completed", json!({ "run": record.run })).unwrap();
            store.run_outcome(record.run, &outcome, true);
            store.append_kept_outcome(&me, seq, record.run, &outcome);
        }
        let keyed = store.keyed_runs(&RunQuery::default()).unwrap();
        let expected: Vec<(RunRecord, Option<String>)> = std::iter::once((old.clone(), Some("me/1/0".to_owned())))
            .chain(new.iter().enumerate().map(|(n, r)| (r.clone(), Some(format!("me/{}/0", n + 2)))))
            .collect();
        assert_eq!(keyed, expected, "the old row first, then the new ones, each with its key");
        drop(store);
        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(store.get(old.run), Some(old), "an old run is found by its id");
        assert_eq!(store.get(new[1].run).as_ref(), Some(&new[1]), "so is a new one, read from the file");
        drop(store);
        let version: i64 = Connection::open(&path).unwrap().query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
        assert_eq!(version, VERSION);
    }

    #[test]
    fn a_version_4_journal_with_records_and_signals_as_json_opens_and_reads() {
        let folder = tempfile::tempdir().unwrap();
        let path = folder.path().join("journal.db");
        let me = agent("me");
        let store = SqliteStore::open(&path).unwrap();
        let record = AgentRecord { agent: me.clone(), agent_type: "test".to_owned(), spawn: json!({}), asleep: false };
        store.agent_spawned(record, snapshot_at(&me, 0));
        drop(store);
        let ended = |run: Uuid| {
            let mut record = RunRecord::queued(run, me.clone(), ActionId::new("x.y").unwrap(), &json!({}), run);
            record.apply(RunUpdate { status: Some(RunStatus::Completed), ..RunUpdate::default() }, Utc::now());
            record
        };
        let (batched, waiting) = (ended(Uuid::now_v7()), ended(Uuid::now_v7()));
        let plan = |key: &str, run: Uuid| RunPlan {
            key: key.into(),
            params: json!({}),
            by_agent: true,
            cause: None,
            correlation: run,
        };
        let input = Signal::new("tick", json!(1)).unwrap();
        let outcome = Signal::new("action.completed", json!({ "run_id": waiting.run })).unwrap();
        {
            // What version 4 wrote: a batch row whose run's record is JSON, a run whose outcome waits (JSON, as
            // text), and an input logged as JSON.
            let db = Connection::open(&path).unwrap();
            let mut body = Vec::new();
            body.extend_from_slice(&1i64.to_le_bytes());
            body.extend_from_slice(batched.run.as_bytes());
            for text in
                [b"me/1/0".to_vec(), json(&plan("me/1/0", batched.run)).into_bytes(), json(&batched).into_bytes()]
            {
                body.extend_from_slice(&(text.len() as u32).to_le_bytes());
                body.extend_from_slice(&text);
            }
            db.execute(
                "INSERT INTO run_batches VALUES (1, 1, 'me', 1, ?1, ?1, 0, ?2, ?3, ?4)",
                params![&batched.run.as_bytes()[..], i64::MAX / 2, run_log::status_bit(RunStatus::Completed), body],
            )
            .unwrap();
            db.execute("INSERT INTO run_batch_actions VALUES ('x.y', 1)", []).unwrap();
            db.execute(
                "INSERT INTO runs (run, agent, action, status, recorded, final, record, key, plan, outcome, delivered, place) \
                 VALUES (?1, 'me', 'x.y', '\"completed\"', 0, 1, ?2, 'me/2/0', ?3, ?4, 0, 2)",
                params![waiting.run.to_string(), json(&waiting), json(&plan("me/2/0", waiting.run)), json(&outcome)],
            )
            .unwrap();
            let mut inputs = Vec::new();
            inputs.extend_from_slice(&1u64.to_le_bytes());
            let text = json(&input);
            inputs.extend_from_slice(&(text.len() as u32).to_le_bytes());
            inputs.extend_from_slice(text.as_bytes());
            db.execute(
                "INSERT INTO input_batches (agent, first_seq, last_seq, body) VALUES ('me', 1, 1, ?1)",
                [inputs],
            )
            .unwrap();
            db.execute_batch("PRAGMA user_version = 4;").unwrap();
        }
        let store = SqliteStore::open(&path).unwrap();
        let keyed = store.keyed_runs(&RunQuery::default()).unwrap();
        let expected = vec![(batched.clone(), Some("me/1/0".to_owned())), (waiting.clone(), Some("me/2/0".to_owned()))];
        assert_eq!(keyed, expected, "the batched run's JSON record reads, in its place");
        assert_eq!(store.get(batched.run), Some(batched.clone()));
        let revivals = store.revivals(std::slice::from_ref(&me)).unwrap();
        let [Ok(revival)] = &revivals[..] else { panic!("one revival: {revivals:?}") };
        assert_eq!(revival.inputs, vec![(1, input)], "an input logged as JSON reads");
        let kept = revival.runs.iter().find(|r| r.record.run == waiting.run).expect("the run whose outcome waits");
        assert_eq!(kept.outcome.as_ref(), Some(&outcome), "an outcome kept as JSON reads");
        let asked =
            revival.runs.iter().find(|r| r.record.run == batched.run).expect("the batched run input 1 asked for");
        assert_eq!(asked.plan, Some(plan("me/1/0", batched.run)), "a batched run's plan kept as JSON reads");
        drop(store);
        let version: i64 = Connection::open(&path).unwrap().query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
        assert_eq!(version, VERSION);
    }

    /// A journal from before jobs were journaled (version 6, no `jobs` table) opens, lists its agents, and keeps
    /// jobs from then on.
    #[test]
    fn a_version_6_journal_opens_and_keeps_jobs_from_then_on() {
        use crate::action::{JobRecord, JobStatus};
        let folder = tempfile::tempdir().unwrap();
        let path = folder.path().join("journal.db");
        let me = agent("me");
        let record = AgentRecord { agent: me.clone(), agent_type: "t".into(), spawn: Value::Null, asleep: true };
        {
            let store = SqliteStore::open(&path).unwrap();
            let initial = Snapshot {
                agent: me.clone(),
                seq: 0,
                agent_type: "t".into(),
                version: 1,
                state: Value::Null,
                at: Utc::now(),
                incarnation: 1,
            };
            store.agent_spawned(record.clone(), initial);
            drop(store);
            let db = Connection::open(&path).unwrap();
            db.execute_batch("DROP TABLE jobs; PRAGMA user_version = 6;").unwrap();
        }
        let store = SqliteStore::open(&path).unwrap();
        let listed = store.alive(None, 10).unwrap();
        assert_eq!(listed, vec![AliveAgent::of(&record)], "listed as before, with no job pending");
        let job = JobRecord {
            id: Uuid::now_v7(),
            agent: me.clone(),
            action: ActionId::new("x.y").unwrap(),
            status: JobStatus::Queued,
            progress: 0.0,
            message: None,
            output: None,
            error: None,
            class: None,
            submitted_at: Utc::now(),
            ended_at: None,
        };
        let plan = super::super::JobPlan {
            key: "me~1/1/0/1".into(),
            params: json!({"n": 1}),
            stack: Vec::new(),
            correlation: Uuid::nil(),
            from_outside: false,
        };
        store.job_submitted(&job, &plan);
        let listed = store.alive(None, 10).unwrap();
        assert!(listed[0].jobs_pending, "a sleeper with a job not ended is to be woken");
        let revivals = store.revivals(std::slice::from_ref(&me)).unwrap();
        let [Ok(revival)] = &revivals[..] else { panic!("one revival: {revivals:?}") };
        assert_eq!(revival.jobs.len(), 1);
        assert_eq!((&revival.jobs[0].record, &revival.jobs[0].plan), (&job, &plan));
        drop(store);
        let version: i64 = Connection::open(&path).unwrap().query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
        assert_eq!(version, VERSION);
    }

    #[test]
    fn a_version_2_journal_opens_and_its_inputs_are_read_with_those_logged_after() {
        let folder = tempfile::tempdir().unwrap();
        let path = folder.path().join("journal.db");
        let me = agent("me");
        let logged: Vec<(u64, Signal)> = (1..=3).map(|seq| (seq, Signal::new("tick", json!(seq)).unwrap())).collect();
        drop(SqliteStore::open(&path).unwrap());
        {
            let db = Connection::open(&path).unwrap();
            db.execute_batch("DROP TABLE input_batches; PRAGMA user_version = 2;").unwrap();
            for (seq, signal) in &logged[..2] {
                db.execute("INSERT INTO inputs VALUES ('me', ?1, ?2)", params![*seq as i64, json(signal)]).unwrap();
            }
        }
        let store = SqliteStore::open(&path).unwrap();
        store.append_input(&me, 3, &logged[2].1);
        assert_eq!(store.inputs_after(&me, 0).unwrap(), logged, "the old rows and the new batch, in order");
        store.save_snapshot(snapshot_at(&me, 3));
        assert!(store.inputs_after(&me, 0).unwrap().is_empty(), "a snapshot clears both");
        drop(store);
        let version: i64 = Connection::open(&path).unwrap().query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
        assert_eq!(version, VERSION);
    }
}
