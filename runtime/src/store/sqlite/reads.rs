//! Reads of what brings agents back: their records, snapshots, inputs, schedules and jobs.

use super::*;

/// Reads rows of one JSON column, decoded.
pub(super) fn decoded<T: serde::de::DeserializeOwned>(
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

pub(super) fn agent_record(db: &Connection, agent: &AgentId) -> Result<Option<AgentRecord>, StoreError> {
    let found = decoded(db, "agent record", "SELECT record FROM agents WHERE agent = ?1", &[&agent.as_str()])?;
    Ok(found.into_iter().next())
}

pub(super) fn snapshot(db: &Connection, agent: &AgentId) -> Result<Option<Snapshot>, StoreError> {
    let found = decoded(db, "snapshot", "SELECT snapshot FROM snapshots WHERE agent = ?1", &[&agent.as_str()])?;
    Ok(found.into_iter().next())
}

pub(super) fn inputs_after(db: &Connection, agent: &AgentId, after: u64) -> Result<Vec<(u64, Signal)>, StoreError> {
    input_log::after(db, agent, after)
}

pub(super) fn schedules(db: &Connection, agent: &AgentId) -> Result<Vec<ScheduleRecord>, StoreError> {
    decoded(db, "schedule", "SELECT schedule FROM schedules WHERE agent = ?1 ORDER BY key", &[&agent.as_str()])
}

/// Everything that brings `agent` back. The runs its inputs after the snapshot asked for are found by their
/// idempotency keys, `<prefix>/{seq}/{index}` (the prefix of the snapshot's incarnation), whose `seq` is after
/// the snapshot's.
pub(super) fn revival(db: &Connection, agent: &AgentId) -> Result<Revival, StoreError> {
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
