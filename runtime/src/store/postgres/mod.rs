//! The journal in PostgreSQL: the same journal as a SQLite file (the same front, writer and plan, the same
//! tables and row formats; see `journal.rs` and `writer.rs`), kept in a database that several machines share.
//!
//! Each connection (the writer's, the reads') is driven by a runtime of its own on a thread of its own, so the
//! store's methods block as a SQLite store's do, from any thread, inside a tokio runtime or not.

use super::durable::{AgentRecord, AliveAgent, Revival, ScheduleRecord, Snapshot};
use super::journal::{Journal, Reads, journal_store};
use super::{FastHash, Refusal, RunQuery, RunRecord, StoreError};
use crate::id::AgentId;
use crate::signal::Signal;
use dashmap::DashMap;
use uuid::Uuid;

mod fence;
mod reads;
mod schema;
mod tables;

pub use fence::{CLUSTER_TABLES, Fence};
use reads::PgReads;
use tables::PgDatabase;

fn database(err: tokio_postgres::Error) -> StoreError {
    // The server's own message says what was wrong (a missing table, a refused password...).
    let message = match err.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => err.to_string(),
    };
    StoreError::Database(format!("PostgreSQL: {message}"))
}

/// How a [`PostgresStore`] keeps its journal.
#[derive(Debug, Clone, Default)]
pub struct PostgresOptions {
    /// Keep every logged input and every snapshot (see [`super::SqliteOptions::keep_inputs`]).
    pub keep_inputs: bool,
    /// Write only for the agents whose leases this node holds (see [`Fence`]), and list only those to bring
    /// back: for a journal that several nodes share. Without it, the journal is this runtime's alone.
    pub fence: Option<Fence>,
}

/// A connection and the runtime that drives it, on the thread that owns both.
pub(crate) struct Connection {
    pub(crate) runtime: tokio::runtime::Runtime,
    pub(crate) client: tokio_postgres::Client,
    /// Where it connected, to connect again.
    url: String,
}

impl Connection {
    /// Connects to `url` (a `postgres://` URL or a `key=value` string), on the calling thread, which must not
    /// be inside a runtime.
    fn open(url: &str) -> Result<Self, StoreError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| StoreError::Database(format!("a runtime for the journal's connection: {e}")))?;
        let (client, connection) = runtime
            .block_on(tokio_postgres::connect(url, tokio_postgres::NoTls))
            .map_err(|e| StoreError::Database(format!("PostgreSQL at the given address: {e}")))?;
        runtime.spawn(async move {
            if let Err(err) = connection.await {
                tracing::error!(%err, "the journal's PostgreSQL connection ended");
            }
        });
        Ok(Self { runtime, client, url: url.to_owned() })
    }

    /// Opens the connection again if it dropped (the server restarted, an operator ended the session): what
    /// failed on it failed, and what comes next runs on a new one. Whether it did; on the thread that owns it.
    pub(crate) fn reopen_if_dropped(&mut self) -> Result<bool, StoreError> {
        if !self.client.is_closed() {
            return Ok(false);
        }
        tracing::warn!("the journal's connection to PostgreSQL dropped: opening it again");
        self.reopen()?;
        Ok(true)
    }

    /// Opens the connection again, dropped or not: for a statement that failed where nothing was changed yet,
    /// tried again on a new connection (a connection ended by the server fails its next statement before it
    /// knows it is closed).
    pub(crate) fn reopen(&mut self) -> Result<(), StoreError> {
        *self = Self::open(&self.url)?;
        Ok(())
    }
}

/// A journal in PostgreSQL, for runtimes on several machines that share one database (see the cluster guide),
/// or for a single runtime whose journal lives in a database server. It keeps everything a [`SqliteStore`]
/// keeps, written and read the same way.
///
/// [`SqliteStore`]: super::SqliteStore
///
/// ```no_run
/// use agentry::store::{PostgresStore, RunQuery, Store};
/// // The connection string comes from the environment, never from a file.
/// let url = std::env::var("AGENTRY_POSTGRES")?;
/// let store = PostgresStore::connect(&url)?;
/// assert!(store.durable().is_some(), "it keeps what brings agents back");
/// println!("{} runs", store.query(&RunQuery::default()).len());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct PostgresStore {
    journal: Journal<PgReads>,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore").finish_non_exhaustive()
    }
}

journal_store!(PostgresStore);

impl PostgresStore {
    /// Connects to the journal in the database at `url`, making its tables if they are missing.
    pub fn connect(url: &str) -> Result<Self, StoreError> {
        Self::connect_with(url, PostgresOptions::default())
    }

    /// [`PostgresStore::connect`] with options.
    pub fn connect_with(url: &str, options: PostgresOptions) -> Result<Self, StoreError> {
        // On a thread of its own, where blocking on the connections' runtimes is allowed (and where they are
        // dropped should one fail), whatever thread connects.
        let url = url.to_owned();
        let PostgresOptions { keep_inputs, fence } = options;
        let reading_fence = fence.clone();
        let opened = std::thread::spawn(move || {
            let writer = Connection::open(&url)?;
            // A node's journal (fenced) is shared: the runs going on of the agents it takes over are read as
            // they are then, not as they were when it connected.
            let live = writer.runtime.block_on(prepare(&writer.client, reading_fence.is_none()))?;
            let reads = PgReads::start(Connection::open(&url)?, reading_fence)?;
            Ok::<_, StoreError>((writer, live, reads))
        });
        let (writer, live, reads) =
            opened.join().map_err(|_| StoreError::Database("connecting to PostgreSQL panicked".to_owned()))??;
        let journal = Journal::start(reads, live, keep_inputs, move || PgDatabase::new(writer, fence))?;
        Ok(Self { journal })
    }

    /// The runs matching `query`, in the order they were written, each with its idempotency key (see
    /// [`super::SqliteStore::keyed_runs`]).
    pub fn keyed_runs(&self, query: &RunQuery) -> Result<Vec<(RunRecord, Option<String>)>, StoreError> {
        self.journal.keyed_runs(query)
    }
}

/// The advisory lock taken while the tables are made ("AGTY").
const SCHEMA_LOCK: i64 = 0x4147_5459;

/// Makes the tables if they are missing, refuses a journal a newer agentry wrote, and reads the runs that had not
/// ended.
async fn prepare(
    client: &tokio_postgres::Client,
    load_live: bool,
) -> Result<DashMap<Uuid, RunRecord, FastHash>, StoreError> {
    // Two connections making the tables at once would collide on PostgreSQL's catalog: one at a time.
    client.execute("SELECT pg_advisory_lock($1)", &[&SCHEMA_LOCK]).await.map_err(database)?;
    let made = async {
        client.batch_execute(schema::SCHEMA).await.map_err(database)?;
        client.batch_execute(CLUSTER_TABLES).await.map_err(database)?;
        let version: Option<i32> = client
            .query_opt("SELECT max(version) FROM agentry_journal", &[])
            .await
            .map_err(database)?
            .and_then(|row| row.get(0));
        match version {
            Some(found) if found > schema::VERSION => Err(StoreError::NewerSchema {
                path: "PostgreSQL".to_owned(),
                found: found.into(),
                supported: schema::VERSION.into(),
            }),
            Some(_) => Ok(()),
            None => client
                .execute("INSERT INTO agentry_journal (version) VALUES ($1)", &[&schema::VERSION])
                .await
                .map(drop)
                .map_err(database),
        }
    }
    .await;
    client.execute("SELECT pg_advisory_unlock($1)", &[&SCHEMA_LOCK]).await.map_err(database)?;
    made?;
    let live = DashMap::default();
    if !load_live {
        return Ok(live);
    }
    for row in
        client.query("SELECT record FROM agentry_runs WHERE NOT final ORDER BY place", &[]).await.map_err(database)?
    {
        let text: String = row.try_get(0).map_err(database)?;
        let record: RunRecord = decode("run record", &text)?;
        live.insert(record.run, record);
    }
    Ok(live)
}

/// Where the numbering of runs goes on, and the runs with a row that had not ended.
async fn open_runs(client: &tokio_postgres::Client) -> Result<(i64, Vec<Uuid>), StoreError> {
    let next: i64 = client
        .query_one(
            "SELECT GREATEST(COALESCE((SELECT max(place) FROM agentry_runs), 0), \
             COALESCE((SELECT max(last) FROM agentry_run_batches), 0)) + 1",
            &[],
        )
        .await
        .and_then(|row| row.try_get(0))
        .map_err(database)?;
    let open = client.query("SELECT run FROM agentry_runs WHERE NOT final", &[]).await.map_err(database)?;
    let open = open.iter().map(|row| row.try_get(0)).collect::<Result<_, _>>().map_err(database)?;
    Ok((next, open))
}

fn decode<T: serde::de::DeserializeOwned>(what: &'static str, text: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Decode { what, message: e.to_string() })
}
