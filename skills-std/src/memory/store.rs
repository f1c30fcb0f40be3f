//! The memory's database: facts in SQLite (WAL) with a full-text index (FTS5). Rows are never changed except
//! to mark when they stopped being believed: a change to a fact (ending it, archiving it) writes a new version
//! of it, so both clocks can be queried, the time a fact was true and the time the agent held it.

use super::{Fact, FactKind};
use agentry::ActionError;
use chrono::{DateTime, TimeDelta, Utc};
use rusqlite::{Connection, OptionalExtension, Row, params};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// The schema's version (`PRAGMA user_version`): 2 keeps every version of a fact; 0 is the first schema, one row
/// per fact changed in place, which [`migrate`] upgrades.
const VERSION: i64 = 2;

/// One row per version of a fact: `fact` is the fact's id, shared by its versions; `recorded_at` is when the
/// version was written and `superseded_at` when a newer one replaced it (`NULL`: it is what the agent believes).
const TABLE: &str = "
CREATE TABLE IF NOT EXISTS facts (
    id            INTEGER PRIMARY KEY,
    subject       TEXT    NOT NULL,
    predicate     TEXT    NOT NULL,
    object        TEXT    NOT NULL,
    confidence    REAL    NOT NULL,
    source        TEXT,
    kind          TEXT    NOT NULL,
    valid_from    INTEGER NOT NULL,
    valid_until   INTEGER,
    recorded_at   INTEGER NOT NULL,
    archived      INTEGER NOT NULL DEFAULT 0,
    fact          INTEGER,
    superseded_at INTEGER
);
";

const INDEXES: &str = "
CREATE INDEX IF NOT EXISTS facts_subject_predicate ON facts(subject, predicate);
CREATE INDEX IF NOT EXISTS facts_fact ON facts(fact, superseded_at);
CREATE INDEX IF NOT EXISTS facts_recorded ON facts(recorded_at);
CREATE VIRTUAL TABLE IF NOT EXISTS facts_text USING fts5(
    subject, predicate, object, content = 'facts', content_rowid = 'id'
);
CREATE TRIGGER IF NOT EXISTS facts_indexed AFTER INSERT ON facts BEGIN
    INSERT INTO facts_text(rowid, subject, predicate, object) VALUES (new.id, new.subject, new.predicate, new.object);
END;
";

/// The columns a [`Fact`] is read from, in order.
const COLUMNS: &str = "f.fact, f.subject, f.predicate, f.object, f.confidence, f.source, f.kind, f.valid_from, \
     f.valid_until, f.recorded_at, f.superseded_at, f.archived";

/// A database failure as an action error: a busy database is transient, anything else critical.
pub fn db_error(err: rusqlite::Error) -> ActionError {
    match err.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
            ActionError::transient(format!("the memory database is busy: {err}"))
        }
        _ => ActionError::critical(format!("the memory database failed: {err}")),
    }
}

/// Opens (creating or upgrading if needed) the database at `path`.
pub fn open(path: &Path) -> Result<Connection, ActionError> {
    if let Some(folder) = path.parent() {
        std::fs::create_dir_all(folder)
            .map_err(|e| ActionError::critical(format!("cannot create the memory folder {}: {e}", folder.display())))?;
    }
    let mut db = Connection::open(path).map_err(db_error)?;
    db.busy_timeout(Duration::from_secs(5)).map_err(db_error)?;
    // Switching to WAL and creating the schema are done once per file and process, one opener at a time:
    // SQLite answers a concurrent journal-mode switch with `busy` at once rather than waiting.
    static READY: OnceLock<Mutex<HashSet<PathBuf>>> = OnceLock::new();
    let mut ready = READY.get_or_init(Mutex::default).lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if !ready.contains(path) {
        db.pragma_update(None, "journal_mode", "WAL").map_err(db_error)?;
        migrate(&mut db)?;
        ready.insert(path.to_path_buf());
    }
    Ok(db)
}

/// Brings the schema to [`VERSION`] in one transaction. A first-schema database keeps its rows: each becomes
/// the one version of its fact, as it was last believed (that schema kept no history to recover).
fn migrate(db: &mut Connection) -> Result<(), ActionError> {
    let tx = write(db)?;
    let version: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(db_error)?;
    if version > VERSION {
        return Err(ActionError::critical(format!(
            "the memory database has schema version {version}; this agentry reads up to version {VERSION}"
        )));
    }
    tx.execute_batch(TABLE).map_err(db_error)?;
    let columns: Vec<String> = {
        let mut statement = tx.prepare("SELECT name FROM pragma_table_info('facts')").map_err(db_error)?;
        let names = statement.query_map([], |r| r.get(0)).map_err(db_error)?;
        names.collect::<Result<_, _>>().map_err(db_error)?
    };
    if !columns.iter().any(|c| c == "fact") {
        tx.execute_batch(
            "ALTER TABLE facts ADD COLUMN fact INTEGER; ALTER TABLE facts ADD COLUMN superseded_at INTEGER;",
        )
        .map_err(db_error)?;
    }
    tx.execute("UPDATE facts SET fact = id WHERE fact IS NULL", []).map_err(db_error)?;
    tx.execute_batch(INDEXES).map_err(db_error)?;
    tx.pragma_update(None, "user_version", VERSION).map_err(db_error)?;
    tx.commit().map_err(db_error)
}

/// Starts a write transaction that takes the write lock at once (waiting for it up to the busy timeout), so two
/// writers never both read first and then fail to upgrade.
pub fn write(db: &mut Connection) -> Result<rusqlite::Transaction<'_>, ActionError> {
    db.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).map_err(db_error)
}

pub fn millis(time: DateTime<Utc>) -> i64 {
    time.timestamp_millis()
}

fn time(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or_default()
}

/// The transaction time of a write: `now` (the run's [`agentry::action::ActionContext::now`], so a simulation
/// records its own time), or a millisecond after the last write if the clock has not moved on (or went back),
/// so every write has a time of its own and `as_recorded` at it sees exactly what it left.
pub fn transaction_time(db: &Connection, now: DateTime<Utc>) -> Result<DateTime<Utc>, ActionError> {
    let last: Option<i64> = db.query_row("SELECT MAX(recorded_at) FROM facts", [], |r| r.get(0)).map_err(db_error)?;
    Ok(match last.map(time) {
        Some(last) if last >= now => last + TimeDelta::milliseconds(1),
        _ => time(millis(now)),
    })
}

fn fact(row: &Row<'_>) -> rusqlite::Result<Fact> {
    let kind: String = row.get(6)?;
    Ok(Fact {
        id: row.get(0)?,
        subject: row.get(1)?,
        predicate: row.get(2)?,
        object: row.get(3)?,
        confidence: row.get(4)?,
        source: row.get(5)?,
        kind: FactKind::parse(&kind),
        valid_from: time(row.get(7)?),
        valid_until: row.get::<_, Option<i64>>(8)?.map(time),
        recorded_at: time(row.get(9)?),
        recorded_until: row.get::<_, Option<i64>>(10)?.map(time),
        archived: row.get::<_, i64>(11)? != 0,
        score: None,
    })
}

/// What the agent believes now of fact `id`.
pub fn get(db: &Connection, id: i64) -> Result<Option<Fact>, ActionError> {
    db.query_row(&format!("SELECT {COLUMNS} FROM facts f WHERE f.fact = ?1 AND f.superseded_at IS NULL"), [id], fact)
        .optional()
        .map_err(db_error)
}

/// Every fact about `subject` and `predicate` the agent believes now and that is not archived, open or closed,
/// in the order they became true.
pub fn believed(db: &Connection, subject: &str, predicate: &str) -> Result<Vec<Fact>, ActionError> {
    let sql = format!(
        "SELECT {COLUMNS} FROM facts f WHERE f.subject = ?1 AND f.predicate = ?2 AND f.archived = 0 \
         AND f.superseded_at IS NULL ORDER BY f.valid_from, f.fact"
    );
    let mut statement = db.prepare(&sql).map_err(db_error)?;
    let rows = statement.query_map([subject, predicate], fact).map_err(db_error)?;
    rows.collect::<Result<_, _>>().map_err(db_error)
}

fn insert_version(db: &Connection, version: &Fact) -> Result<(), ActionError> {
    db.execute(
        "INSERT INTO facts (fact, subject, predicate, object, confidence, source, kind, valid_from, valid_until, \
         recorded_at, archived) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        params![
            version.id,
            version.subject,
            version.predicate,
            version.object,
            version.confidence,
            version.source,
            version.kind.as_str(),
            millis(version.valid_from),
            version.valid_until.map(millis),
            millis(version.recorded_at),
            i64::from(version.archived),
        ],
    )
    .map_err(db_error)?;
    Ok(())
}

/// Adds a new fact (its first version) and returns its id, the next after the highest fact id.
pub fn insert(db: &Connection, new: &Fact) -> Result<i64, ActionError> {
    let id: i64 = db.query_row("SELECT COALESCE(MAX(fact), 0) + 1 FROM facts", [], |r| r.get(0)).map_err(db_error)?;
    insert_version(db, &Fact { id, ..new.clone() })?;
    Ok(id)
}

/// Writes a new version of a believed fact, changed by `change`, recorded at `at`; the version it replaces
/// stays, marked as held until `at`. Returns the new version.
pub fn revise(
    db: &Connection,
    current: &Fact,
    at: DateTime<Utc>,
    change: impl FnOnce(&mut Fact),
) -> Result<Fact, ActionError> {
    db.execute(
        "UPDATE facts SET superseded_at = ?2 WHERE fact = ?1 AND superseded_at IS NULL",
        params![current.id, millis(at)],
    )
    .map_err(db_error)?;
    let mut next = Fact { recorded_at: at, recorded_until: None, score: None, ..current.clone() };
    change(&mut next);
    insert_version(db, &next)?;
    Ok(next)
}

/// Turns free text into an FTS5 query that matches any of its words (quoted, so no word is read as syntax);
/// `None` when it has no words.
pub fn match_any(text: &str) -> Option<String> {
    let words: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| format!("\"{}\"", w.to_lowercase()))
        .collect();
    (!words.is_empty()).then(|| words.join(" OR "))
}

/// What a search filters on.
pub struct Search<'a> {
    pub text: Option<String>,
    pub subject: Option<&'a str>,
    pub predicate: Option<&'a str>,
    pub kind: Option<FactKind>,
    /// Valid time: only facts true then.
    pub true_at: Option<DateTime<Utc>>,
    /// Transaction time: the versions the agent held then (`None`: the ones it holds now).
    pub believed_at: Option<DateTime<Utc>>,
    pub since: Option<DateTime<Utc>>,
    pub include_archived: bool,
    pub cap: usize,
}

/// Facts matching a search: by full-text rank (best first, then confidence) when there is text, else by
/// when they became true (newest first, or oldest first when `oldest_first`).
pub fn search(db: &Connection, search: &Search<'_>, oldest_first: bool) -> Result<Vec<Fact>, ActionError> {
    let mut conditions: Vec<String> = Vec::new();
    let mut values: Vec<rusqlite::types::Value> = Vec::new();
    let mut bind = |condition: &str, value: rusqlite::types::Value| {
        values.push(value);
        conditions.push(condition.replace('?', &format!("?{}", values.len())));
    };
    let from = match &search.text {
        Some(text) => {
            bind("facts_text MATCH ?", text.clone().into());
            "facts_text JOIN facts f ON f.id = facts_text.rowid"
        }
        None => "facts f",
    };
    if let Some(subject) = search.subject {
        bind("f.subject = ?", subject.to_owned().into());
    }
    if let Some(predicate) = search.predicate {
        bind("f.predicate = ?", predicate.to_owned().into());
    }
    if let Some(kind) = search.kind {
        bind("f.kind = ?", kind.as_str().to_owned().into());
    }
    if let Some(at) = search.true_at {
        bind("f.valid_from <= ?", millis(at).into());
        bind("(f.valid_until IS NULL OR f.valid_until > ?)", millis(at).into());
    }
    if let Some(at) = search.believed_at {
        bind("f.recorded_at <= ?", millis(at).into());
        bind("(f.superseded_at IS NULL OR f.superseded_at > ?)", millis(at).into());
    }
    if let Some(since) = search.since {
        bind("f.valid_from >= ?", millis(since).into());
    }
    if search.believed_at.is_none() {
        conditions.push("f.superseded_at IS NULL".to_owned());
    }
    if !search.include_archived {
        conditions.push("f.archived = 0".to_owned());
    }
    let (rank, order) = match (&search.text, oldest_first) {
        (Some(_), _) => ("bm25(facts_text)", "rank ASC, f.confidence DESC, f.fact ASC"),
        (None, true) => ("0.0", "f.valid_from ASC, f.fact ASC"),
        (None, false) => ("0.0", "f.valid_from DESC, f.fact DESC"),
    };
    let filter = format!("WHERE {}", conditions.join(" AND "));
    let sql = format!("SELECT {COLUMNS}, {rank} AS rank FROM {from} {filter} ORDER BY {order} LIMIT {}", search.cap);
    let ranked = search.text.is_some();
    let mut statement = db.prepare(&sql).map_err(db_error)?;
    let rows = statement
        .query_map(rusqlite::params_from_iter(values), |row| {
            let mut found = fact(row)?;
            // bm25 is lower for better matches; report a score where higher is better.
            found.score = if ranked { Some(-row.get::<_, f64>(12)?) } else { None };
            Ok(found)
        })
        .map_err(db_error)?;
    rows.collect::<Result<_, _>>().map_err(db_error)
}
