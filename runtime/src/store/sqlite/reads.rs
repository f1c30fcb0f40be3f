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
    let unsent = unsent(db, agent)?;
    Ok(Revival { record, snapshot, inputs, schedules, runs, jobs, unsent })
}

/// The signals `agent` emitted elsewhere that were not sent on yet, in order, each with its target.
fn unsent(db: &Connection, agent: &AgentId) -> Result<Vec<(AgentId, Signal)>, StoreError> {
    let mut statement =
        db.prepare_cached("SELECT target, signal FROM outbox WHERE agent = ?1 ORDER BY place").map_err(database)?;
    let mut rows = statement.query([agent.as_str()]).map_err(database)?;
    let mut found = Vec::new();
    while let Some(row) = rows.next().map_err(database)? {
        let target: String = row.get(0).map_err(database)?;
        let signal: Vec<u8> = row.get(1).map_err(database)?;
        crate::store::outbox::unsent(agent, (&target, &signal), &mut found);
    }
    Ok(found)
}

/// A SQLite journal's reads, on a read-only connection of their own.
pub(super) struct SqliteReads {
    pub(super) path: PathBuf,
    /// The connection reads use (queries only).
    pub(super) reader: Mutex<Connection>,
}

impl SqliteReads {
    /// Runs `read` on the reader's connection.
    pub(super) fn read<T>(&self, read: impl FnOnce(&Connection) -> Result<T, StoreError>) -> Result<T, StoreError> {
        // A panic in another read leaves the connection as it was: statements hold no state between reads.
        let db = self.reader.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        read(&db)
    }
}

impl Reads for SqliteReads {
    fn run(&self, run: Uuid) -> Result<Option<RunRecord>, StoreError> {
        self.read(|db| {
            let text: Option<String> = db
                .query_row("SELECT record FROM runs WHERE run = ?1", [run.to_string()], |r| r.get(0))
                .optional()
                .map_err(database)?;
            match text {
                Some(text) => decode::<RunRecord>("run record", &text).map(Some),
                None => Ok(run_log::find(db, run)?.map(|(record, _)| record)),
            }
        })
    }

    fn keyed_runs(&self, query: &RunQuery) -> Result<Vec<(RunRecord, Option<String>)>, StoreError> {
        self.read(|db| run_log::query(db, query))
    }

    fn refusals(&self, agent: &AgentId) -> Result<Vec<Refusal>, StoreError> {
        self.read(|db| {
            decoded(db, "refusal", "SELECT refusal FROM refusals WHERE agent = ?1 ORDER BY place", &[&agent.as_str()])
        })
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
            let mut rows = statement.query(params![after, limit]).map_err(database)?;
            let mut page = Vec::new();
            while let Some(row) = rows.next().map_err(database)? {
                let agent: String = row.get(0).map_err(database)?;
                let agent_type: String = row.get(1).map_err(database)?;
                let asleep: bool = row.get(2).map_err(database)?;
                let parent: Option<String> = row.get(3).map_err(database)?;
                let due: Option<String> = row.get(4).map_err(database)?;
                let jobs_pending: bool = row.get(5).map_err(database)?;
                page.push(alive_agent(agent, agent_type, asleep, parent, due, jobs_pending)?);
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
