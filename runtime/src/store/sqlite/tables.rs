//! How a SQLite journal takes what the writer writes: its [`Tables`] inside a transaction, and its
//! [`Database`] (the writer's connection, with its checkpointer).

use super::super::checkpoint::Checkpointer;
use super::super::durable::{AgentRecord, ScheduleRecord, Snapshot};
use super::super::input_log;
use super::super::job_log::{self, JobWrite};
use super::super::run_log;
use super::super::tables::{Database, RunBatchRow, RunWrite, Tables, json};
use super::super::{Refusal, StoreError};
use crate::id::AgentId;
use rusqlite::{Connection, OptionalExtension, params};
use uuid::Uuid;

fn database(err: rusqlite::Error) -> StoreError {
    StoreError::Database(err.to_string())
}

/// A SQLite journal's tables, on a connection (inside the writer's transaction, or a test's).
pub(crate) struct SqliteTables<'a> {
    db: &'a Connection,
    /// The statement that writes a run's row, kept for the commit's runs.
    upsert: Option<rusqlite::CachedStatement<'a>>,
}

impl<'a> SqliteTables<'a> {
    pub(crate) fn new(db: &'a Connection) -> Self {
        Self { db, upsert: None }
    }

    fn execute(&self, sql: &str, values: impl rusqlite::Params) -> Result<(), StoreError> {
        self.db.prepare_cached(sql).and_then(|mut s| s.execute(values)).map(drop).map_err(database)
    }
}

impl Tables for SqliteTables<'_> {
    fn input_batch(
        &mut self,
        agent: &AgentId,
        (first, last): (u64, u64),
        body: &[u8],
        _ids: &[Uuid],
    ) -> Result<(), StoreError> {
        self.execute(
            "INSERT INTO input_batches (agent, first_seq, last_seq, body) VALUES (?1, ?2, ?3, ?4)",
            params![agent.as_str(), input_log::number(first), input_log::number(last), body],
        )
    }

    fn clear_inputs(&mut self, agent: &AgentId, upto: Option<u64>) -> Result<(), StoreError> {
        input_log::clear(self.db, agent, upto).map_err(database)
    }

    fn run_batch(&mut self, row: &RunBatchRow<'_>) -> Result<(), StoreError> {
        let RunBatchRow { first, last, agent, last_seq, first_run, last_run, since, until, statuses, actions, body } =
            *row;
        self.execute(
            "INSERT INTO run_batches (place, last, agent, last_seq, first_run, last_run, since, until, statuses, \
             body) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            params![
                first,
                last,
                agent.as_str(),
                last_seq,
                &first_run.as_bytes()[..],
                &last_run.as_bytes()[..],
                since,
                until,
                statuses,
                body
            ],
        )?;
        let mut listed = self
            .db
            .prepare_cached("INSERT INTO run_batch_actions (action, batch) VALUES (?1, ?2)")
            .map_err(database)?;
        for action in actions {
            listed.execute(params![action.as_str(), first]).map_err(database)?;
        }
        Ok(())
    }

    fn run(&mut self, row: &RunWrite<'_>) -> Result<(), StoreError> {
        let statement = match &mut self.upsert {
            Some(statement) => statement,
            None => self.upsert.insert(
                self.db
                    .prepare_cached(
                        "INSERT INTO runs (run, agent, action, status, recorded, final, record, key, plan, outcome, \
                         delivered, place) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) \
                         ON CONFLICT(run) DO UPDATE \
                         SET status = excluded.status, final = excluded.final, record = excluded.record, \
                         key = COALESCE(excluded.key, runs.key), plan = COALESCE(excluded.plan, runs.plan), \
                         outcome = COALESCE(excluded.outcome, runs.outcome), delivered = CASE WHEN excluded.outcome \
                         IS NOT NULL OR excluded.delivered THEN excluded.delivered ELSE runs.delivered END",
                    )
                    .map_err(database)?,
            ),
        };
        statement
            .execute(params![
                row.run.to_string(),
                row.agent.as_str(),
                row.action.as_str(),
                row.status,
                row.recorded,
                row.ended,
                row.record,
                row.key,
                row.plan,
                row.outcome.map(kept_signal),
                row.delivered,
                row.place,
            ])
            .map(drop)
            .map_err(database)
    }

    fn run_parts(
        &mut self,
        run: Uuid,
        key: Option<&str>,
        plan: Option<&str>,
        outcome: Option<&[u8]>,
        delivered: bool,
    ) -> Result<(), StoreError> {
        self.execute(
            "UPDATE runs SET key = COALESCE(?2, key), plan = COALESCE(?3, plan), \
             outcome = COALESCE(?4, outcome), \
             delivered = CASE WHEN ?4 IS NOT NULL OR ?5 THEN ?5 ELSE delivered END WHERE run = ?1",
            params![run.to_string(), key, plan, outcome.map(kept_signal), delivered],
        )
    }

    fn delivered(&mut self, run: Uuid) -> Result<(), StoreError> {
        self.execute("UPDATE runs SET delivered = 1 WHERE run = ?1 AND outcome IS NOT NULL", [run.to_string()])
    }

    fn kept_outcome(&mut self, run: Uuid) -> Result<Option<Vec<u8>>, StoreError> {
        self.db
            .prepare_cached("SELECT outcome FROM runs WHERE run = ?1 AND outcome IS NOT NULL")
            .and_then(|mut s| s.query_row([run.to_string()], |r| kept_bytes(r, 0)).optional())
            .map_err(database)
    }

    fn snapshot(&mut self, snapshot: &Snapshot, in_history: bool) -> Result<(), StoreError> {
        let text = json(snapshot);
        let agent = snapshot.agent.as_str();
        self.execute("INSERT OR REPLACE INTO snapshots (agent, snapshot) VALUES (?1, ?2)", params![agent, text])?;
        if in_history {
            self.execute(
                "INSERT OR REPLACE INTO snapshot_history (agent, seq, snapshot) VALUES (?1, ?2, ?3)",
                params![agent, input_log::number(snapshot.seq), text],
            )?;
        }
        Ok(())
    }

    fn clear_history(&mut self, agent: &AgentId) -> Result<(), StoreError> {
        self.execute("DELETE FROM snapshot_history WHERE agent = ?1", [agent.as_str()])
    }

    fn agent(&mut self, record: &AgentRecord) -> Result<(), StoreError> {
        let parent = record.parent();
        self.execute(
            "INSERT OR REPLACE INTO agents (agent, record, agent_type, asleep, parent) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![
                record.agent.as_str(),
                json(record),
                record.agent_type,
                record.asleep,
                parent.as_ref().map(AgentId::as_str)
            ],
        )
    }

    fn forget_agent(&mut self, agent: &AgentId) -> Result<(), StoreError> {
        for table in ["agents", "snapshots", "schedules", "snapshot_history"] {
            self.execute(&format!("DELETE FROM {table} WHERE agent = ?1"), [agent.as_str()])?;
        }
        Ok(())
    }

    fn schedule(&mut self, schedule: &ScheduleRecord) -> Result<(), StoreError> {
        self.execute(
            "INSERT OR REPLACE INTO schedules (agent, key, schedule) VALUES (?1, ?2, ?3)",
            params![schedule.agent.as_str(), schedule.key, json(schedule)],
        )
    }

    fn clear_schedules(&mut self, agent: &AgentId, key: Option<&str>) -> Result<(), StoreError> {
        match key {
            Some(key) => {
                self.execute("DELETE FROM schedules WHERE agent = ?1 AND key = ?2", params![agent.as_str(), key])
            }
            None => self.execute("DELETE FROM schedules WHERE agent = ?1", [agent.as_str()]),
        }
    }

    fn refusal(&mut self, refusal: &Refusal) -> Result<(), StoreError> {
        self.execute(
            "INSERT INTO refusals (agent, refusal) VALUES (?1, ?2)",
            params![refusal.agent.as_str(), json(refusal)],
        )
    }

    fn job(&mut self, write: &JobWrite) -> Result<(), StoreError> {
        job_log::apply(self.db, write).map_err(database)
    }

    fn clear_jobs(&mut self, agent: &AgentId) -> Result<(), StoreError> {
        job_log::clear(self.db, agent).map_err(database)
    }

    fn outbox(&mut self, agent: &AgentId, id: Uuid, to: &AgentId, signal: &[u8]) -> Result<(), StoreError> {
        self.execute(
            "INSERT INTO outbox (agent, id, target, signal) VALUES (?1, ?2, ?3, ?4)",
            params![agent.as_str(), id.to_string(), to.as_str(), signal],
        )
    }

    fn outbox_sent(&mut self, agent: &AgentId, id: Uuid) -> Result<(), StoreError> {
        self.execute("DELETE FROM outbox WHERE agent = ?1 AND id = ?2", params![agent.as_str(), id.to_string()])
    }

    fn clear_outbox(&mut self, agent: &AgentId) -> Result<(), StoreError> {
        self.execute("DELETE FROM outbox WHERE agent = ?1", [agent.as_str()])
    }
}

/// The writer's connection to a SQLite journal, and the checkpointer that copies its log back.
pub(crate) struct SqliteDatabase {
    // Closed before the checkpointer's thread is waited for (fields drop in order).
    pub(crate) db: Connection,
    pub(crate) checkpointer: Checkpointer,
}

impl Database for SqliteDatabase {
    fn transaction(
        &mut self,
        write: &mut dyn FnMut(&mut dyn Tables) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let tx = self.db.transaction().map_err(database)?;
        {
            let mut tables = SqliteTables::new(&tx);
            write(&mut tables)?;
        }
        tx.commit().map_err(database)
    }

    fn open_runs(&mut self) -> Result<(i64, Vec<Uuid>), StoreError> {
        open_runs(&self.db)
    }

    fn committed(&mut self) {
        self.checkpointer.committed(&self.db);
    }
}

/// Where the numbering of runs goes on, and the runs with a row that had not ended.
pub(crate) fn open_runs(db: &Connection) -> Result<(i64, Vec<Uuid>), StoreError> {
    let next = run_log::next_place(db).map_err(database)?;
    let mut statement = db.prepare("SELECT run FROM runs WHERE final = 0").map_err(database)?;
    let open = statement.query_map([], |r| r.get::<_, String>(0)).map_err(database)?;
    let mut runs = Vec::new();
    for run in open {
        if let Ok(run) = Uuid::parse_str(&run.map_err(database)?) {
            runs.push(run);
        }
    }
    Ok((next, runs))
}

/// A kept signal's bytes from its column, text (JSON) or blob (the compact form).
pub(crate) fn kept_bytes(row: &rusqlite::Row<'_>, column: usize) -> rusqlite::Result<Vec<u8>> {
    let value = row.get_ref(column)?;
    let bytes = value
        .as_bytes()
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(column, value.data_type(), Box::new(e)))?;
    Ok(bytes.to_vec())
}

/// A kept signal as a value of its column: its JSON as text, the compact form of an outcome as a blob.
pub(crate) fn kept_signal(bytes: &[u8]) -> rusqlite::types::ToSqlOutput<'_> {
    use rusqlite::types::{ToSqlOutput, ValueRef};
    match std::str::from_utf8(bytes) {
        Ok(json) if bytes.first() == Some(&b'{') => ToSqlOutput::Borrowed(ValueRef::Text(json.as_bytes())),
        _ => ToSqlOutput::Borrowed(ValueRef::Blob(bytes)),
    }
}
