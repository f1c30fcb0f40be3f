//! Ended runs in a durable journal, a batch at a time, and every read of run records in a SQLite journal (from
//! both places runs are kept).
//!
//! A run that ends is usually written once: ended, its outcome already consumed by its agent (see `Runs` in
//! `sqlite/writer.rs`). Nothing changes it after that, so the writer puts such runs of one agent from one commit into
//! one row of `run_batches` rather than a row each in `runs`: a commit of a thousand runs writes one row and a
//! few index entries instead of a thousand rows with five index entries each. Every other run (one written
//! while it was going on, one whose outcome waits for its agent, one whose id is not time-ordered) keeps its
//! row in `runs`, where later writes update it.
//!
//! Runs in both tables share one order, their `place`: the writer numbers every run it writes, and a query
//! merges the two tables by that number. A batch row is found
//! - by agent (and by the largest input number among its runs' keys, which a recovery needs),
//! - by action, through `run_batch_actions` (one entry per action in the row),
//! - by time, through the earliest and latest time its runs were recorded,
//! - by run id: run ids are time-ordered (UUID v7), and a row holds only runs whose ids lie within
//!   [`SPAN_MS`] of each other, so the rows that may hold a run are those whose first id lies within that span
//!   before it.
//!
//! Its status filter is a bit per status present. Each row's runs are then read and checked one by one.
//!
//! A row's body is its runs one after another, each as its place (8 bytes, little-endian), its id (16 bytes),
//! its idempotency key, its plan's JSON and its record (in the compact form of `run_codec.rs`; rows written
//! before it have the record's JSON), each of the last three as a length (4 bytes, little-endian; `u32::MAX`
//! for none) and the bytes.

use super::agent_rows::{AgentRows, Row};
use super::durable::KeyedRun;
use super::run_codec;
use super::tables::{RunBatchRow, Tables};
use super::{RunQuery, RunRecord, RunStatus, StoreError};
use crate::id::{ActionId, AgentId};
use rusqlite::{Connection, params};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use uuid::Uuid;

/// The most time, in milliseconds, between the ids of the first and the last run of one row.
pub(super) const SPAN_MS: u64 = 1_000;
/// The most bytes one row's body holds, well under SQLite's limit on a value (1 GB).
const BODY_MOST: usize = 64 * 1024 * 1024;
/// A length that stands for "none".
const NONE: u32 = u32::MAX;

/// The tables and indexes this module keeps (part of the journal's schema).
pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS run_batches (
    place     INTEGER PRIMARY KEY, -- the place of its first run
    last      INTEGER NOT NULL,    -- the place of its last
    agent     TEXT NOT NULL,
    last_seq  INTEGER NOT NULL,    -- the largest input number in its runs' keys (-1: none)
    first_run BLOB NOT NULL,       -- its smallest and largest run ids
    last_run  BLOB NOT NULL,
    since     INTEGER NOT NULL,    -- the earliest and latest time its runs were recorded (ms)
    until     INTEGER NOT NULL,
    statuses  INTEGER NOT NULL,    -- a bit per status present
    body      BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS run_batches_agent ON run_batches(agent, last_seq);
CREATE INDEX IF NOT EXISTS run_batches_run ON run_batches(first_run);
CREATE INDEX IF NOT EXISTS run_batches_until ON run_batches(until);
CREATE TABLE IF NOT EXISTS run_batch_actions (
    action TEXT NOT NULL,
    batch  INTEGER NOT NULL,
    PRIMARY KEY (action, batch)
) WITHOUT ROWID;
";

fn database(err: rusqlite::Error) -> StoreError {
    StoreError::Database(err.to_string())
}

fn decode<T: serde::de::DeserializeOwned>(what: &'static str, json: &[u8]) -> Result<T, StoreError> {
    let text = std::str::from_utf8(json).map_err(|e| StoreError::Decode { what, message: e.to_string() })?;
    serde_json::from_str(text).map_err(|e| StoreError::Decode { what, message: e.to_string() })
}

/// The bit that stands for `status` in a row's `statuses`.
pub(super) fn status_bit(status: RunStatus) -> i64 {
    1 << run_codec::status_number(status)
}

/// The input number in `key`, if it is the key of a run asked for in the handling of that input in the
/// incarnation whose keys start with `prefix` (`<prefix>/<input>/<n>`, see
/// [`crate::action::input_key_prefix`]): what a recovery compares with its snapshot's number. The same rule
/// as the one the recovery's query applies to `runs` (the digits after `<prefix>/`).
pub(super) fn key_seq(prefix: &str, key: &str) -> Option<u64> {
    let rest = key.strip_prefix(prefix)?.strip_prefix('/')?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    rest[..digits].parse().ok()
}

/// The input number in a key of `agent`'s, whatever its incarnation: what a batch row keeps as its last, so a
/// recovery reads the rows that may hold runs of inputs after its snapshot (and then keeps only its own
/// incarnation's, with [`key_seq`]).
fn any_key_seq(agent: &str, key: &str) -> Option<u64> {
    let after_prefix = |prefix: &str| key_seq(prefix, key);
    // A key of an incarnation: `<escaped agent>~<incarnation>/<input>/<n>`, the prefix free of `/`.
    let incarnated = key.split_once('/').and_then(|(prefix, _)| {
        let (escaped, incarnation) = prefix.rsplit_once('~')?;
        let unescaped = escaped.replace("%2F", "/").replace("%7E", "~").replace("%25", "%");
        (unescaped == agent && incarnation.bytes().all(|b| b.is_ascii_digit())).then(|| after_prefix(prefix))?
    });
    incarnated.or_else(|| after_prefix(agent))
}

/// A number as SQLite keeps it.
fn number(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The milliseconds a time-ordered (v7) id was made at; `None` for any other id.
fn id_ms(run: Uuid) -> Option<u64> {
    let b = run.as_bytes();
    (run.get_version_num() == 7).then(|| u64::from_be_bytes([0, 0, b[0], b[1], b[2], b[3], b[4], b[5]]))
}

/// The smallest v7 id made at `ms`.
fn first_id_at(ms: u64) -> Uuid {
    let mut bytes = [0u8; 16];
    bytes[..6].copy_from_slice(&ms.to_be_bytes()[2..]);
    Uuid::from_bytes(bytes)
}

/// A run ready to join a batch: ended, its outcome consumed, with nothing more to be written about it.
pub(super) struct Settled<'a> {
    pub place: i64,
    /// When it was recorded, in milliseconds since the epoch.
    pub recorded: i64,
    pub record: &'a RunRecord,
    pub key: Option<&'a str>,
    /// Its plan, as JSON or in the compact form (`plan_codec.rs`).
    pub plan: Option<&'a [u8]>,
}

/// The ended runs the writer is gathering in the current commit, an agent at a time.
#[derive(Default)]
pub(super) struct RunBatches {
    rows: AgentRows<Summary>,
}

/// What a row's columns say about its runs.
struct Summary {
    first: i64,
    last: i64,
    last_seq: i64,
    first_run: Uuid,
    last_run: Uuid,
    /// The milliseconds of its earliest and latest run id.
    ids_from: u64,
    ids_to: u64,
    since: i64,
    until: i64,
    statuses: i64,
    actions: Vec<ActionId>,
}

impl RunBatches {
    /// Adds a settled run to its agent's row, or returns `false` if it cannot join one (its id is not
    /// time-ordered): it is then written alone. A run whose id would take its row past [`SPAN_MS`], or whose
    /// entry would take it past [`BODY_MOST`], starts a new row (the one gathered so far is written first).
    pub(super) fn add(&mut self, db: &mut dyn Tables, run: &Settled<'_>) -> Result<bool, StoreError> {
        let (agent, action) = (&run.record.agent, &run.record.action);
        let Some(ms) = id_ms(run.record.run) else { return Ok(false) };
        let key_len = run.key.map_or(Ok(NONE), length)?;
        let plan_len = run.plan.map_or(Ok(NONE), |plan| length_of(plan.len()))?;
        // A row is full once its body reaches BODY_MOST (an entry's size is known only once it is written).
        let ends_row = |row: &Row<Summary>| {
            row.summary.ids_to.max(ms) - row.summary.ids_from.min(ms) > SPAN_MS || row.body.len() >= BODY_MOST
        };
        if self.rows.get(agent).is_some_and(ends_row) {
            self.rows.write_agent(agent, |agent, summary, body| write_row(db, agent, summary, body))?;
        }
        let Row { summary: row, body } = self.rows.or_start(agent, || Summary {
            first: run.place,
            last: run.place,
            last_seq: -1,
            first_run: run.record.run,
            last_run: run.record.run,
            ids_from: ms,
            ids_to: ms,
            since: run.recorded,
            until: run.recorded,
            statuses: 0,
            actions: Vec::new(),
        });
        row.last = run.place;
        if let Some(seq) = run.key.and_then(|key| any_key_seq(agent.as_str(), key)) {
            row.last_seq = row.last_seq.max(number(seq));
        }
        row.first_run = row.first_run.min(run.record.run);
        row.last_run = row.last_run.max(run.record.run);
        row.ids_from = row.ids_from.min(ms);
        row.ids_to = row.ids_to.max(ms);
        row.since = row.since.min(run.recorded);
        row.until = row.until.max(run.recorded);
        row.statuses |= status_bit(run.record.status());
        if !row.actions.contains(action) {
            row.actions.push(action.clone());
        }
        body.extend_from_slice(&run.place.to_le_bytes());
        body.extend_from_slice(run.record.run.as_bytes());
        for (len, text) in [(key_len, run.key.map(str::as_bytes)), (plan_len, run.plan)] {
            body.extend_from_slice(&len.to_le_bytes());
            body.extend_from_slice(text.unwrap_or_default());
        }
        // The record is written in place, its length once it is known.
        let at = body.len();
        body.extend_from_slice(&[0; 4]);
        run_codec::encode(run.record, body);
        let written = length_of(body.len() - at - 4);
        match written {
            Ok(len) => {
                body[at..at + 4].copy_from_slice(&len.to_le_bytes());
                Ok(true)
            }
            Err(err) => {
                body.truncate(at);
                Err(err)
            }
        }
    }

    /// Writes everything gathered.
    pub(super) fn write_all(&mut self, db: &mut dyn Tables) -> Result<(), StoreError> {
        self.rows.write_all(|agent, summary, body| write_row(db, agent, summary, body))
    }

    /// Drops what is gathered (its commit failed).
    pub(super) fn forget(&mut self) {
        self.rows.forget();
    }
}

fn write_row(db: &mut dyn Tables, agent: &AgentId, summary: Summary, body: &[u8]) -> Result<(), StoreError> {
    let Summary { first, last, last_seq, first_run, last_run, since, until, statuses, actions, .. } = summary;
    db.run_batch(&RunBatchRow {
        first,
        last,
        agent,
        last_seq,
        first_run,
        last_run,
        since,
        until,
        statuses,
        actions: &actions,
        body,
    })
}

/// A text's length as an entry gives it (4 bytes; SQLite refuses a value over 1 GB anyway).
fn length(text: &str) -> Result<u32, StoreError> {
    length_of(text.len())
}

fn length_of(len: usize) -> Result<u32, StoreError> {
    u32::try_from(len)
        .ok()
        .filter(|len| *len != NONE)
        .ok_or_else(|| StoreError::Database(format!("a run's text of {len} bytes; expected less than 4 GiB")))
}

/// One run of a row's body.
pub(super) struct Entry<'a> {
    pub place: i64,
    pub run: Uuid,
    pub key: Option<&'a str>,
    pub plan: Option<&'a [u8]>,
    pub record: &'a [u8],
}

/// The runs in a row's body, in order.
pub(super) fn entries(mut body: &[u8]) -> impl Iterator<Item = Result<Entry<'_>, StoreError>> {
    let cut = |what: &str| StoreError::Decode {
        what: "run batch",
        message: format!("the batch ends in the middle of a run's {what}; expected place, id, key, plan and record"),
    };
    std::iter::from_fn(move || {
        if body.is_empty() {
            return None;
        }
        let entry = (|| {
            let (place, rest) = body.split_first_chunk::<8>().ok_or_else(|| cut("place"))?;
            let (run, mut rest) = rest.split_first_chunk::<16>().ok_or_else(|| cut("id"))?;
            let key = text(&mut rest).ok_or_else(|| cut("key"))?;
            let plan = text(&mut rest).ok_or_else(|| cut("plan"))?;
            let record = text(&mut rest).flatten().ok_or_else(|| cut("record"))?;
            let key = key
                .map(|k| std::str::from_utf8(k))
                .transpose()
                .map_err(|e| StoreError::Decode { what: "run batch", message: format!("a key: {e}") })?;
            let entry = Entry { place: i64::from_le_bytes(*place), run: Uuid::from_bytes(*run), key, plan, record };
            Ok((entry, rest))
        })();
        Some(match entry {
            Ok((entry, rest)) => {
                body = rest;
                Ok(entry)
            }
            Err(err) => {
                // Nothing more is read from a damaged body.
                body = &[];
                Err(err)
            }
        })
    })
}

/// The next text of an entry: `None` if the body is cut short, `Some(None)` for a text that is not there.
fn text<'a>(rest: &mut &'a [u8]) -> Option<Option<&'a [u8]>> {
    let (len, after) = rest.split_first_chunk::<4>()?;
    let len = u32::from_le_bytes(*len);
    if len == NONE {
        *rest = after;
        return Some(None);
    }
    let bytes = after.get(..len as usize)?;
    *rest = &after[len as usize..];
    Some(Some(bytes))
}

/// A batch row's agent.
fn agent_of(row: &rusqlite::Row<'_>, column: usize) -> Result<AgentId, StoreError> {
    let text: String = row.get(column).map_err(database)?;
    AgentId::new(text).map_err(|e| StoreError::Decode { what: "run batch", message: format!("its agent: {e}") })
}

fn blob<'a>(row: &'a rusqlite::Row<'_>, column: usize) -> Result<&'a [u8], StoreError> {
    row.get_ref(column).map_err(database)?.as_blob().map_err(|e| StoreError::Decode {
        what: "run batch",
        message: format!("{e}; expected the batch's runs as a blob"),
    })
}

/// The batched run `run`, if one is: its record and idempotency key.
pub(super) fn find(db: &Connection, run: Uuid) -> Result<Option<(RunRecord, Option<String>)>, StoreError> {
    let Some(from) = rows_from(run) else { return Ok(None) };
    let mut statement = db
        .prepare_cached(
            "SELECT body, agent FROM run_batches WHERE first_run BETWEEN ?1 AND ?2 AND last_run >= ?2 ORDER BY place",
        )
        .map_err(database)?;
    let mut rows = statement.query(params![&from.as_bytes()[..], &run.as_bytes()[..]]).map_err(database)?;
    while let Some(row) = rows.next().map_err(database)? {
        if let Some(found) = find_in(blob(row, 0)?, &agent_of(row, 1)?, run)? {
            return Ok(Some(found));
        }
    }
    Ok(None)
}

/// The first id of the rows of `run_batches` that may hold `run` (those whose first run is between it and
/// `run`, and whose last is at or after `run`); `None` for a run that no row holds (its id is not
/// time-ordered).
pub(super) fn rows_from(run: Uuid) -> Option<Uuid> {
    id_ms(run).map(|ms| first_id_at(ms.saturating_sub(SPAN_MS)))
}

/// `run`'s record and key, if the body of a row of `agent`'s holds it.
pub(super) fn find_in(
    body: &[u8],
    agent: &AgentId,
    run: Uuid,
) -> Result<Option<(RunRecord, Option<String>)>, StoreError> {
    for entry in entries(body) {
        let entry = entry?;
        if entry.run == run {
            let record = run_codec::decode(run, agent, entry.record)?;
            return Ok(Some((record, entry.key.map(str::to_owned))));
        }
    }
    Ok(None)
}

/// A run read back, ordered by its place alone.
pub(super) struct Placed(pub i64, pub RunRecord, pub Option<String>);

/// A row of `run_batches` read back for a query: its first run's place, its agent and its body.
pub(super) struct BatchRead {
    pub first: i64,
    pub agent: AgentId,
    pub body: Vec<u8>,
}

impl PartialEq for Placed {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}
impl Eq for Placed {}
impl PartialOrd for Placed {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Placed {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.cmp(&other.0)
    }
}

/// The runs matching `query`, in the order they were written (by place), each with its idempotency key, from
/// `runs` and `run_batches` both. Rows are read only as far as the page needs.
pub(super) fn query(db: &Connection, query: &RunQuery) -> Result<Vec<(RunRecord, Option<String>)>, StoreError> {
    let mut table_sql = String::from("SELECT place, record, key FROM runs WHERE 1 = 1");
    let mut batch_sql = String::from("SELECT place, body, agent FROM run_batches WHERE 1 = 1");
    let mut values: Vec<rusqlite::types::Value> = Vec::new();
    // Each condition names its own value (`#`), so each statement binds only the values it names.
    let mut both = |table: &str, batch: &str, value: rusqlite::types::Value| {
        condition(&mut table_sql, &mut values, table, value.clone());
        condition(&mut batch_sql, &mut values, batch, value);
    };
    if let Some(agent) = &query.agent {
        both("agent = #", "agent = #", agent.as_str().to_owned().into());
    }
    if let Some(action) = &query.action {
        let action = action.as_str().to_owned();
        both("action = #", "place IN (SELECT batch FROM run_batch_actions WHERE action = #)", action.into());
    }
    // Times are kept to the millisecond, rounded down: the exact bounds are checked on each record.
    if let Some(since) = query.since {
        both("recorded >= #", "until >= #", since.timestamp_millis().into());
    }
    if let Some(until) = query.until {
        both("recorded <= #", "since <= #", until.timestamp_millis().into());
    }
    if let Some(status) = query.status {
        let named = serde_json::to_string(&status).unwrap_or_default();
        condition(&mut table_sql, &mut values, "status = #", named.into());
        condition(&mut batch_sql, &mut values, "statuses & # != 0", status_bit(status).into());
    }
    table_sql.push_str(" ORDER BY place");
    batch_sql.push_str(" ORDER BY place");
    let mut table = db.prepare(&table_sql).map_err(database)?;
    let mut batches = db.prepare(&batch_sql).map_err(database)?;
    // Each statement binds only the values it names; the rest are left unbound (NULL) and unused.
    let mut table_rows = bind_named(&mut table, &values)?;
    let mut batch_rows = bind_named(&mut batches, &values)?;
    let next_batch = || {
        let Some(row) = batch_rows.next().map_err(database)? else { return Ok(None) };
        let first = row.get::<_, i64>(0).map_err(database)?;
        Ok(Some(BatchRead { first, agent: agent_of(row, 2)?, body: blob(row, 1)?.to_vec() }))
    };
    merge(query, || next_table_run(&mut table_rows, query), next_batch)
}

/// The runs matching `query` from the runs of `runs` (each from `next_table`, in order of place, matching the
/// query) and from the rows of `run_batches` that may hold some (each from `next_batch`, in order of their
/// first place), merged in order of place and paged. A row is read only once a run placed after its first
/// is due.
pub(super) fn merge(
    query: &RunQuery,
    mut next_table: impl FnMut() -> Result<Option<Placed>, StoreError>,
    mut next_batch: impl FnMut() -> Result<Option<BatchRead>, StoreError>,
) -> Result<Vec<(RunRecord, Option<String>)>, StoreError> {
    let wanted = query.limit.unwrap_or(usize::MAX);
    let mut found = Vec::new();
    let mut skipped = 0;
    // The next run from `runs`, the runs read from batch rows and not yet taken, and the next batch row's
    // first place: a run is taken only once no row still unread can hold one placed before it.
    let mut table = next_table()?;
    let mut heap: BinaryHeap<Reverse<Placed>> = BinaryHeap::new();
    let mut batch = next_batch()?;
    while found.len() < wanted {
        let smallest = [table.as_ref().map(|p| p.0), heap.peek().map(|p| p.0.0)].into_iter().flatten().min();
        if let Some(row) = &batch
            && smallest.is_none_or(|place| row.first <= place)
        {
            for entry in entries(&row.body) {
                let entry = entry?;
                let record = run_codec::decode(entry.run, &row.agent, entry.record)?;
                if query.matches(&record) {
                    heap.push(Reverse(Placed(entry.place, record, entry.key.map(str::to_owned))));
                }
            }
            batch = next_batch()?;
            continue;
        }
        let from_table = match (&table, heap.peek()) {
            (Some(t), Some(h)) => t.0 < h.0.0,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        let taken = if from_table {
            let taken = table.take();
            table = next_table()?;
            taken
        } else {
            heap.pop().map(|Reverse(p)| p)
        };
        if let Some(Placed(_, record, key)) = taken {
            if skipped < query.offset {
                skipped += 1;
            } else {
                found.push((record, key));
            }
        }
    }
    Ok(found)
}

/// Adds `condition` to `sql`, its `#` standing for `value`'s number in `values`.
fn condition(
    sql: &mut String,
    values: &mut Vec<rusqlite::types::Value>,
    condition: &str,
    value: rusqlite::types::Value,
) {
    values.push(value);
    sql.push_str(" AND ");
    sql.push_str(&condition.replace('#', &format!("?{}", values.len())));
}

/// Binds the values a statement names (`?n`) and starts it.
fn bind_named<'s>(
    statement: &'s mut rusqlite::Statement<'_>,
    values: &[rusqlite::types::Value],
) -> Result<rusqlite::Rows<'s>, StoreError> {
    for (i, value) in values.iter().enumerate() {
        let name = format!("?{}", i + 1);
        if let Some(index) = statement.parameter_index(&name).map_err(database)? {
            statement.raw_bind_parameter(index, value).map_err(database)?;
        }
    }
    Ok(statement.raw_query())
}

/// The next run from `runs` that matches `query` exactly.
fn next_table_run(rows: &mut rusqlite::Rows<'_>, query: &RunQuery) -> Result<Option<Placed>, StoreError> {
    while let Some(row) = rows.next().map_err(database)? {
        let place: i64 = row.get(0).map_err(database)?;
        let text: String = row.get(1).map_err(database)?;
        let record: RunRecord = decode("run record", text.as_bytes())?;
        if query.matches(&record) {
            return Ok(Some(Placed(place, record, row.get(2).map_err(database)?)));
        }
    }
    Ok(None)
}

/// `agent`'s runs a recovery needs, in order: from `runs`, those that had not ended, whose outcome the agent
/// has not consumed (kept, or lost: the agent asked for the run, and neither its outcome was kept nor did the
/// recovery end it as interrupted), or that inputs after `after` asked for; from `run_batches` (all ended and consumed), those
/// that inputs after `after` asked for (a replay of those inputs asks for them again, and must find them).
/// `prefix`: the start of the keys of the incarnation the snapshot belongs to (see
/// [`crate::action::input_key_prefix`]); runs of other incarnations are not this recovery's.
pub(super) fn revival_runs(
    db: &Connection,
    agent: &AgentId,
    prefix: &str,
    after: u64,
) -> Result<Vec<KeyedRun>, StoreError> {
    let mut placed: Vec<(i64, KeyedRun)> = Vec::new();
    // One statement for both tables: a recovery reads thousands of agents, most with no runs at all.
    let mut statement = db
        .prepare_cached(
            "SELECT place, record, plan, outcome, delivered, NULL FROM runs WHERE agent = ?1 AND (final = 0 \
             OR (delivered = 0 AND (outcome IS NOT NULL OR (json_extract(plan, '$.by_agent') \
             AND json_extract(record, '$.error') IS NOT 'interrupted'))) OR (key IS NOT NULL \
             AND substr(key, 1, length(?3) + 1) = ?3 || '/' AND CAST(substr(key, length(?3) + 2) AS INTEGER) > ?2)) \
             UNION ALL SELECT place, NULL, NULL, NULL, NULL, body FROM run_batches WHERE agent = ?1 AND last_seq > ?2",
        )
        .map_err(database)?;
    let mut rows = statement.query(params![agent.as_str(), number(after), prefix]).map_err(database)?;
    while let Some(row) = rows.next().map_err(database)? {
        if row.get_ref(5).map_err(database)?.data_type() == rusqlite::types::Type::Blob {
            revival_batch(blob(row, 5)?, agent, (prefix, after), &mut placed)?;
            continue;
        }
        let text = |i: usize| row.get::<_, Option<String>>(i).map_err(database);
        let record = text(1)?.unwrap_or_default();
        let run = KeyedRun {
            record: decode("run record", record.as_bytes())?,
            plan: text(2)?.map(|p| decode("run plan", p.as_bytes())).transpose()?,
            outcome: match row.get_ref(3).map_err(database)? {
                rusqlite::types::ValueRef::Null => None,
                kept => Some(super::signal_codec::decode(kept.as_bytes().map_err(|e| StoreError::Decode {
                    what: "outcome signal",
                    message: format!("{e}; expected its JSON or its compact form"),
                })?)?),
            },
            delivered: row.get(4).map_err(database)?,
        };
        placed.push((row.get(0).map_err(database)?, run));
    }
    if !placed.is_sorted_by_key(|(place, _)| *place) {
        placed.sort_by_key(|(place, _)| *place);
    }
    Ok(placed.into_iter().map(|(_, run)| run).collect())
}

/// Adds the runs of a batch row's body that inputs after `after` asked for (all ended and consumed) to
/// `placed`, with their places: what a recovery needs of a batch row (see [`revival_runs`]).
pub(super) fn revival_batch(
    body: &[u8],
    agent: &AgentId,
    (prefix, after): (&str, u64),
    placed: &mut Vec<(i64, KeyedRun)>,
) -> Result<(), StoreError> {
    for entry in entries(body) {
        let entry = entry?;
        if entry.key.and_then(|key| key_seq(prefix, key)).is_some_and(|seq| seq > after) {
            let record = run_codec::decode(entry.run, agent, entry.record)?;
            let plan = entry.plan.map(|p| super::plan_codec::decode(p, entry.key, record.correlation));
            let run = KeyedRun { record, plan: plan.transpose()?, outcome: None, delivered: true };
            placed.push((entry.place, run));
        }
    }
    Ok(())
}

/// The place after every run's, in both tables: where the writer numbers on from.
pub(super) fn next_place(db: &Connection) -> rusqlite::Result<i64> {
    db.query_row(
        "SELECT max(coalesce((SELECT max(place) FROM runs), 0), coalesce((SELECT max(last) FROM run_batches), 0)) + 1",
        [],
        |r| r.get(0),
    )
}
