//! The journal on disk: a SQLite file (WAL) that keeps every run record, every refused effect, and what brings
//! agents back after a crash (see [`Durable`]).
//!
//! How writes reach the file and how reads see them is the same as for every durable journal (see
//! `journal.rs`); this module opens the file, checks it is a journal, and says how SQLite takes each write
//! (`tables.rs`) and answers each read (`reads.rs`).

use super::checkpoint::Checkpointer;
use super::durable::{AgentRecord, AliveAgent, Revival, ScheduleRecord, Snapshot, alive_agent};
use super::input_log;
use super::job_log;
use super::journal::{Journal, Reads, journal_store};
use super::run_log;
use super::{Refusal, RunQuery, RunRecord, StoreError};
use crate::id::AgentId;
use crate::signal::Signal;
use dashmap::DashMap;
use rusqlite::{Connection, OptionalExtension, params};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use uuid::Uuid;

mod reads;
mod schema;
mod tables;

use reads::*;
use schema::*;
use tables::SqliteDatabase;
#[cfg(test)]
pub(crate) use tables::SqliteTables;

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
    journal: Journal<SqliteReads>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore").field("path", &self.journal.reads().path).finish_non_exhaustive()
    }
}

journal_store!(SqliteStore);

fn database(err: rusqlite::Error) -> StoreError {
    StoreError::Database(err.to_string())
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
        let checkpoint_path = path.clone();
        let reads = SqliteReads { path, reader: Mutex::new(reader) };
        let journal = Journal::start(reads, live, keep_inputs, move || {
            let checkpointer = Checkpointer::start(&db, &checkpoint_path, level);
            SqliteDatabase { db, checkpointer }
        })?;
        Ok(Self { journal })
    }

    /// Where the file is.
    pub fn path(&self) -> &Path {
        &self.journal.reads().path
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
    /// [`Store::query`](super::Store::query) gives the same records without their keys.
    ///
    /// ```
    /// use agentry::store::{RunQuery, SqliteStore};
    /// let folder = tempfile::tempdir()?;
    /// let store = SqliteStore::open(folder.path().join("journal.db"))?;
    /// assert!(store.keyed_runs(&RunQuery::default())?.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn keyed_runs(&self, query: &RunQuery) -> Result<Vec<(RunRecord, Option<String>)>, StoreError> {
        self.journal.keyed_runs(query)
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
        self.journal.settled()?.read(|db| {
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
}

#[cfg(test)]
mod abort_tests;

#[cfg(test)]
mod runs_tests;

#[cfg(test)]
mod tests;
