//! The journal's tables in PostgreSQL: the same tables as a SQLite journal's (see `sqlite/schema.rs`, and
//! `input_log.rs` and `run_log.rs` for the bodies of batch rows), named `agentry_*` so they can share a database
//! with the cluster's leases and inbox, and a table that marks the schema's version.

/// The schema's version. A journal written by a newer agentry is refused.
pub(super) const VERSION: i32 = 1;

/// How many places a writer takes from `agentry_places` at a time.
pub(super) const PLACES_AT_ONCE: i64 = 4096;

/// The tables, made when missing. Agent ids sort bytewise (`COLLATE "C"`), as in SQLite, so a listing pages the
/// same way whatever the database's locale.
pub(super) const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS agentry_journal (
    version INTEGER NOT NULL
);
-- Places of runs, a block of 4,096 per writer at a time (PLACES_AT_ONCE).
CREATE SEQUENCE IF NOT EXISTS agentry_places INCREMENT BY 4096 START WITH 1;
CREATE TABLE IF NOT EXISTS agentry_runs (
    place     BIGINT PRIMARY KEY,
    run       UUID NOT NULL UNIQUE,
    agent     TEXT NOT NULL,
    action    TEXT NOT NULL,
    status    TEXT NOT NULL,
    recorded  BIGINT NOT NULL,
    final     BOOLEAN NOT NULL,
    record    TEXT NOT NULL,
    key       TEXT,
    plan      TEXT,
    outcome   BYTEA,
    delivered BOOLEAN NOT NULL DEFAULT FALSE
);
CREATE INDEX IF NOT EXISTS agentry_runs_agent ON agentry_runs (agent, final);
CREATE INDEX IF NOT EXISTS agentry_runs_action ON agentry_runs (action);
CREATE INDEX IF NOT EXISTS agentry_runs_recorded ON agentry_runs (recorded);
CREATE INDEX IF NOT EXISTS agentry_runs_open ON agentry_runs (place) WHERE NOT final;
CREATE TABLE IF NOT EXISTS agentry_run_batches (
    place     BIGINT PRIMARY KEY,
    last      BIGINT NOT NULL,
    agent     TEXT NOT NULL,
    last_seq  BIGINT NOT NULL,
    first_run UUID NOT NULL,
    last_run  UUID NOT NULL,
    since     BIGINT NOT NULL,
    until     BIGINT NOT NULL,
    statuses  BIGINT NOT NULL,
    body      BYTEA NOT NULL
);
CREATE INDEX IF NOT EXISTS agentry_run_batches_agent ON agentry_run_batches (agent, last_seq);
CREATE INDEX IF NOT EXISTS agentry_run_batches_run ON agentry_run_batches (first_run);
CREATE INDEX IF NOT EXISTS agentry_run_batches_until ON agentry_run_batches (until);
CREATE TABLE IF NOT EXISTS agentry_run_batch_actions (
    action TEXT NOT NULL,
    batch  BIGINT NOT NULL,
    PRIMARY KEY (action, batch)
);
CREATE TABLE IF NOT EXISTS agentry_refusals (
    place   BIGSERIAL PRIMARY KEY,
    agent   TEXT NOT NULL,
    refusal TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS agentry_refusals_agent ON agentry_refusals (agent);
CREATE TABLE IF NOT EXISTS agentry_input_batches (
    place     BIGSERIAL PRIMARY KEY,
    agent     TEXT NOT NULL,
    first_seq BIGINT NOT NULL,
    last_seq  BIGINT NOT NULL,
    body      BYTEA NOT NULL
);
CREATE INDEX IF NOT EXISTS agentry_input_batches_agent ON agentry_input_batches (agent, last_seq);
CREATE TABLE IF NOT EXISTS agentry_snapshots (
    agent    TEXT PRIMARY KEY,
    snapshot TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS agentry_snapshot_history (
    agent    TEXT NOT NULL,
    seq      BIGINT NOT NULL,
    snapshot TEXT NOT NULL,
    PRIMARY KEY (agent, seq)
);
CREATE TABLE IF NOT EXISTS agentry_agents (
    agent      TEXT COLLATE "C" PRIMARY KEY,
    record     TEXT NOT NULL,
    agent_type TEXT NOT NULL,
    asleep     BOOLEAN NOT NULL,
    parent     TEXT
);
CREATE TABLE IF NOT EXISTS agentry_schedules (
    agent    TEXT NOT NULL,
    key      TEXT COLLATE "C" NOT NULL,
    schedule TEXT NOT NULL,
    PRIMARY KEY (agent, key)
);
CREATE TABLE IF NOT EXISTS agentry_jobs (
    job    UUID PRIMARY KEY,
    agent  TEXT NOT NULL,
    record TEXT NOT NULL,
    plan   TEXT NOT NULL,
    ended  BIGINT,
    signal TEXT,
    told   BOOLEAN NOT NULL DEFAULT FALSE
);
CREATE INDEX IF NOT EXISTS agentry_jobs_agent ON agentry_jobs (agent, told);
-- Signals an agent emitted to agents elsewhere (kept with the input that made them), until they are sent on.
CREATE TABLE IF NOT EXISTS agentry_outbox (
    place  BIGSERIAL PRIMARY KEY,
    agent  TEXT NOT NULL,
    id     UUID NOT NULL,
    target TEXT NOT NULL,
    signal BYTEA NOT NULL
);
CREATE INDEX IF NOT EXISTS agentry_outbox_agent ON agentry_outbox (agent, id);
"#;
