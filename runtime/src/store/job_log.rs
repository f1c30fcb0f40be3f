//! Jobs in a durable journal: one row a job, written when it is submitted and rewritten as it changes, so a
//! recovery finds every job an agent started (see [`crate::store::Durable::job_submitted`]). A job's row
//! keeps its record and plan as JSON, and once the job ended, the signal for its agent until the agent consumed
//! it (`told`).

use super::StoreError;
use super::durable::{JobPlan, KeptJob};
use crate::action::JobRecord;
use crate::id::AgentId;
use crate::signal::Signal;
use chrono::{DateTime, Utc};
use rusqlite::{Connection, params};
use uuid::Uuid;

/// The table this module keeps (part of the journal's schema).
pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS jobs (
    job    TEXT PRIMARY KEY,
    agent  TEXT NOT NULL,
    record TEXT NOT NULL,
    plan   TEXT NOT NULL,
    ended  INTEGER,           -- when it ended (ms), once it did
    signal TEXT,              -- the signal for its agent, once it ended
    told   INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS jobs_agent ON jobs(agent, told);
";

/// A write about a job, as the writer thread applies it.
pub(super) enum JobWrite {
    Submitted(Box<(JobRecord, JobPlan)>),
    Changed(Box<(JobRecord, Option<Signal>)>),
    Told(AgentId, Uuid),
    Purged(DateTime<Utc>),
}

fn json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".to_owned())
}

/// Applies one write.
pub(super) fn apply(db: &Connection, write: &JobWrite) -> rusqlite::Result<()> {
    match write {
        JobWrite::Submitted(submitted) => {
            let (record, plan) = &**submitted;
            db.prepare_cached("INSERT OR REPLACE INTO jobs (job, agent, record, plan) VALUES (?1, ?2, ?3, ?4)")?
                .execute(params![record.id.to_string(), record.agent.as_str(), json(record), json(plan)])?;
        }
        JobWrite::Changed(changed) => {
            let (record, end) = &**changed;
            let ended = record.ended_at.map(|at| at.timestamp_millis());
            let signal = end.as_ref().map(json);
            // A job that ended keeps its end signal; a later write (none is made) could not take it back.
            db.prepare_cached(
                "UPDATE jobs SET record = ?2, ended = coalesce(?3, ended), signal = coalesce(?4, signal) WHERE job = ?1",
            )?
            .execute(params![record.id.to_string(), json(record), ended, signal])?;
        }
        JobWrite::Told(agent, job) => {
            db.prepare_cached("UPDATE jobs SET told = 1 WHERE job = ?1 AND agent = ?2")?
                .execute(params![job.to_string(), agent.as_str()])?;
        }
        JobWrite::Purged(before) => {
            db.prepare_cached("DELETE FROM jobs WHERE told = 1 AND ended <= ?1")?
                .execute([before.timestamp_millis()])?;
        }
    }
    Ok(())
}

/// Drops every job of an agent (it ended, or an agent of its id starts afresh).
pub(super) fn clear(db: &Connection, agent: &AgentId) -> rusqlite::Result<()> {
    db.prepare_cached("DELETE FROM jobs WHERE agent = ?1")?.execute([agent.as_str()])?;
    Ok(())
}

fn decode<T: serde::de::DeserializeOwned>(what: &'static str, text: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Decode { what, message: e.to_string() })
}

/// An agent's jobs, oldest first.
pub(super) fn of_agent(db: &Connection, agent: &AgentId) -> Result<Vec<KeptJob>, StoreError> {
    let database = |err: rusqlite::Error| StoreError::Database(err.to_string());
    let mut statement = db
        .prepare_cached("SELECT record, plan, signal, told FROM jobs WHERE agent = ?1 ORDER BY job")
        .map_err(database)?;
    let rows = statement
        .query_map([agent.as_str()], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, Option<String>>(2)?, r.get::<_, bool>(3)?))
        })
        .map_err(database)?;
    let rows: Vec<_> = rows.collect::<Result<_, _>>().map_err(database)?;
    kept_jobs(rows)
}

/// Jobs from their rows (record, plan, end signal, told), oldest first.
pub(super) fn kept_jobs(
    rows: impl IntoIterator<Item = (String, String, Option<String>, bool)>,
) -> Result<Vec<KeptJob>, StoreError> {
    let mut jobs = Vec::new();
    for (record, plan, signal, told) in rows {
        jobs.push(KeptJob {
            record: decode("job record", &record)?,
            plan: decode("job plan", &plan)?,
            end: signal.map(|s| decode("job signal", &s)).transpose()?,
            told,
        });
    }
    jobs.sort_by_key(|job| (job.record.submitted_at, job.record.id));
    Ok(jobs)
}
