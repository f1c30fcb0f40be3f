//! The journal file's schema: its tables, its marks (application id, version) and bringing an older file up
//! to date.

use super::*;

/// Marks a SQLite file as an agentry journal (`PRAGMA application_id`): "AGTY".
pub(super) const APPLICATION_ID: i64 = 0x4147_5459;
/// The schema's version (`PRAGMA user_version`). Version 2 lists agents from columns of their own (type, asleep,
/// parent) instead of their records; a version 1 file is brought up to it on open. Version 3 logs inputs a
/// commit at a time (`input_batches`); a version 2 file's inputs, one a row, are still read and cleared.
/// Version 4 writes ended runs an agent and a commit at a time (`run_batches`, see `run_log.rs`); a version 3
/// file's runs stay where they are and are read beside them. Version 5 keeps a batched run's record and an
/// outcome signal the runtime made in a compact form (`run_codec.rs`, `signal_codec.rs`); a version 4 file's
/// JSON is read beside it. Version 6 keeps a batched run's plan in a compact form too (`plan_codec.rs`); a
/// version 5 file's JSON plans are read beside it. Version 7 keeps jobs (`jobs`, see `job_log.rs`); a version 6
/// file gets the table, empty. Version 8 keeps the signals agents emit to agents elsewhere until they are sent
/// on (`outbox`); a version 7 file gets the table, empty.
pub(super) const VERSION: i64 = 8;

/// The page size of a new file, in bytes.
pub(super) const PAGE_SIZE: i64 = 16 * 1024;

pub(super) const SCHEMA: &str = "
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
CREATE TABLE IF NOT EXISTS snapshot_history (
    agent    TEXT NOT NULL,
    seq      INTEGER NOT NULL,
    snapshot TEXT NOT NULL,
    PRIMARY KEY (agent, seq)
) WITHOUT ROWID;
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
-- Signals an agent emitted to agents elsewhere (kept with the input that made them), until they are sent on.
CREATE TABLE IF NOT EXISTS outbox (
    place  INTEGER PRIMARY KEY,
    agent  TEXT NOT NULL,
    id     TEXT NOT NULL,
    target TEXT NOT NULL,
    signal BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS outbox_agent ON outbox(agent, id);
";

/// Whether the file is as long as its header says (a file cut short is refused on open without reading it
/// all). Only a file whose write-ahead log is empty can be measured so: pages in the log may lie past its end.
pub(super) fn whole(db: &Connection, path: &Path) -> Result<(), String> {
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
pub(super) fn list_agents_from_columns(db: &Connection) -> rusqlite::Result<()> {
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
