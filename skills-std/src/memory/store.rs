//! The memory's database: facts in SQLite (WAL) with a full-text index (FTS5), never deleted.

use super::{Fact, FactKind};
use agentry::ActionError;
use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, Row, params};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS facts (
    id          INTEGER PRIMARY KEY,
    subject     TEXT    NOT NULL,
    predicate   TEXT    NOT NULL,
    object      TEXT    NOT NULL,
    confidence  REAL    NOT NULL,
    source      TEXT,
    kind        TEXT    NOT NULL,
    valid_from  INTEGER NOT NULL,
    valid_until INTEGER,
    recorded_at INTEGER NOT NULL,
    archived    INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS facts_subject_predicate ON facts(subject, predicate);
CREATE VIRTUAL TABLE IF NOT EXISTS facts_text USING fts5(
    subject, predicate, object, content = 'facts', content_rowid = 'id'
);
CREATE TRIGGER IF NOT EXISTS facts_indexed AFTER INSERT ON facts BEGIN
    INSERT INTO facts_text(rowid, subject, predicate, object) VALUES (new.id, new.subject, new.predicate, new.object);
END;
";

/// The columns a [`Fact`] is read from, in order.
const COLUMNS: &str = "f.id, f.subject, f.predicate, f.object, f.confidence, f.source, f.kind, f.valid_from, f.valid_until, \
     f.recorded_at, f.archived";

/// A database failure as an action error: a busy database is transient, anything else critical.
pub fn db_error(err: rusqlite::Error) -> ActionError {
    match err.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
            ActionError::transient(format!("the memory database is busy: {err}"))
        }
        _ => ActionError::critical(format!("the memory database failed: {err}")),
    }
}

/// Opens (creating if needed) the database at `path`.
pub fn open(path: &Path) -> Result<Connection, ActionError> {
    if let Some(folder) = path.parent() {
        std::fs::create_dir_all(folder)
            .map_err(|e| ActionError::critical(format!("cannot create the memory folder {}: {e}", folder.display())))?;
    }
    let db = Connection::open(path).map_err(db_error)?;
    db.busy_timeout(Duration::from_secs(5)).map_err(db_error)?;
    // Switching to WAL and creating the schema are done once per file and process, one opener at a time:
    // SQLite answers a concurrent journal-mode switch with `busy` at once rather than waiting.
    static READY: OnceLock<Mutex<HashSet<PathBuf>>> = OnceLock::new();
    let mut ready = READY.get_or_init(Mutex::default).lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if !ready.contains(path) {
        db.pragma_update(None, "journal_mode", "WAL").map_err(db_error)?;
        db.execute_batch(SCHEMA).map_err(db_error)?;
        ready.insert(path.to_path_buf());
    }
    Ok(db)
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
        archived: row.get::<_, i64>(10)? != 0,
        score: None,
    })
}

/// One fact by id.
pub fn get(db: &Connection, id: i64) -> Result<Option<Fact>, ActionError> {
    db.query_row(&format!("SELECT {COLUMNS} FROM facts f WHERE f.id = ?1"), [id], fact).optional().map_err(db_error)
}

/// The facts about `subject` and `predicate` that are still true (not closed, not archived).
pub fn open_facts(db: &Connection, subject: &str, predicate: &str) -> Result<Vec<Fact>, ActionError> {
    let sql = format!(
        "SELECT {COLUMNS} FROM facts f WHERE f.subject = ?1 AND f.predicate = ?2 AND f.valid_until IS NULL \
         AND f.archived = 0 ORDER BY f.id"
    );
    let mut statement = db.prepare(&sql).map_err(db_error)?;
    let rows = statement.query_map([subject, predicate], fact).map_err(db_error)?;
    rows.collect::<Result<_, _>>().map_err(db_error)
}

/// Every fact about `subject` and `predicate` that is not archived, open or closed, in the order they became
/// true.
pub fn history(db: &Connection, subject: &str, predicate: &str) -> Result<Vec<Fact>, ActionError> {
    let sql = format!(
        "SELECT {COLUMNS} FROM facts f WHERE f.subject = ?1 AND f.predicate = ?2 AND f.archived = 0 \
         ORDER BY f.valid_from, f.id"
    );
    let mut statement = db.prepare(&sql).map_err(db_error)?;
    let rows = statement.query_map([subject, predicate], fact).map_err(db_error)?;
    rows.collect::<Result<_, _>>().map_err(db_error)
}

/// Adds a fact and returns its id.
pub fn insert(db: &Connection, new: &Fact) -> Result<i64, ActionError> {
    db.execute(
        "INSERT INTO facts (subject, predicate, object, confidence, source, kind, valid_from, valid_until, \
         recorded_at, archived) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        params![
            new.subject,
            new.predicate,
            new.object,
            new.confidence,
            new.source,
            new.kind.as_str(),
            millis(new.valid_from),
            new.valid_until.map(millis),
            millis(new.recorded_at),
            i64::from(new.archived),
        ],
    )
    .map_err(db_error)?;
    Ok(db.last_insert_rowid())
}

/// Closes a fact: it stops being true at `at`.
pub fn close(db: &Connection, id: i64, at: DateTime<Utc>) -> Result<(), ActionError> {
    db.execute("UPDATE facts SET valid_until = ?2 WHERE id = ?1 AND valid_until IS NULL", params![id, millis(at)])
        .map_err(db_error)?;
    Ok(())
}

/// Ends a fact at `at`, open or not: it stops being true then (a closed fact that ran past `at` is cut short).
pub fn end(db: &Connection, id: i64, at: DateTime<Utc>) -> Result<(), ActionError> {
    db.execute("UPDATE facts SET valid_until = ?2 WHERE id = ?1", params![id, millis(at)]).map_err(db_error)?;
    Ok(())
}

/// Marks facts as archived (folded into a summary).
pub fn archive(db: &Connection, ids: &[i64]) -> Result<(), ActionError> {
    let mut statement = db.prepare("UPDATE facts SET archived = 1 WHERE id = ?1").map_err(db_error)?;
    for id in ids {
        statement.execute([id]).map_err(db_error)?;
    }
    Ok(())
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
    pub true_at: Option<DateTime<Utc>>,
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
    if let Some(since) = search.since {
        bind("f.valid_from >= ?", millis(since).into());
    }
    if !search.include_archived {
        conditions.push("f.archived = 0".to_owned());
    }
    let (rank, order) = match (&search.text, oldest_first) {
        (Some(_), _) => ("bm25(facts_text)", "rank ASC, f.confidence DESC, f.id ASC"),
        (None, true) => ("0.0", "f.valid_from ASC, f.id ASC"),
        (None, false) => ("0.0", "f.valid_from DESC, f.id DESC"),
    };
    let filter = if conditions.is_empty() { String::new() } else { format!("WHERE {}", conditions.join(" AND ")) };
    let sql = format!("SELECT {COLUMNS}, {rank} AS rank FROM {from} {filter} ORDER BY {order} LIMIT {}", search.cap);
    let ranked = search.text.is_some();
    let mut statement = db.prepare(&sql).map_err(db_error)?;
    let rows = statement
        .query_map(rusqlite::params_from_iter(values), |row| {
            let mut found = fact(row)?;
            // bm25 is lower for better matches; report a score where higher is better.
            found.score = if ranked { Some(-row.get::<_, f64>(11)?) } else { None };
            Ok(found)
        })
        .map_err(db_error)?;
    rows.collect::<Result<_, _>>().map_err(db_error)
}
