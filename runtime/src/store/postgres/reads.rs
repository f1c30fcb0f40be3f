//! A PostgreSQL journal's reads: a connection of their own, on a thread of their own that takes one read at a
//! time, so a read blocks its caller as a SQLite read does, from any thread (inside a tokio runtime too).

use super::super::durable::{KeyedRun, RunPlan, alive_agent};
use super::super::input_log;
use super::super::job_log;
use super::super::run_log::{self, BatchRead, Placed};
use super::super::signal_codec;
use super::*;
use crate::action::ErrorClass;
use std::sync::{Mutex, mpsc};
use tokio_postgres::Client;
use tokio_postgres::types::ToSql;

/// A read, run on the reads' thread with its connection.
type Read = Box<dyn FnOnce(&mut Connection) + Send>;

/// The reads' thread, fed one read at a time. Dropping it ends the thread.
pub(crate) struct PgReads {
    reads: Mutex<mpsc::Sender<Read>>,
    /// The leases of the node, for a journal several nodes share: it lists only its agents to bring back.
    fence: Option<super::Fence>,
}

impl PgReads {
    pub(super) fn start(mut connection: Connection, fence: Option<super::Fence>) -> Result<Self, StoreError> {
        let (reads, queue) = mpsc::channel::<Read>();
        std::thread::Builder::new()
            .name("agentry-journal-reads".to_owned())
            .spawn(move || {
                for read in queue {
                    read(&mut connection);
                }
            })
            .map_err(|e| StoreError::Database(format!("the journal's reads' thread could not start: {e}")))?;
        Ok(Self { reads: Mutex::new(reads), fence })
    }

    /// Runs `read` on the reads' connection and waits for its answer. A read the database failed runs again,
    /// once, on a new connection: the connection may have dropped (the server restarted, an operator ended the
    /// session), which it finds out only by failing. One that failed on what it read (a row that does not
    /// decode) fails as it is: reading it again would read the same.
    fn read<T: Send + 'static>(
        &self,
        read: impl AsyncFn(&Client) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (answer, answered) = mpsc::sync_channel(1);
        let job: Read = Box::new(move |connection: &mut Connection| {
            let answer_with = |connection: &Connection| connection.runtime.block_on(read(&connection.client));
            let mut read = answer_with(connection);
            if matches!(read, Err(StoreError::Database(_))) {
                match connection.reopen() {
                    Ok(()) => read = answer_with(connection),
                    Err(err) => tracing::error!(%err, "the journal's reads could not connect again"),
                }
            }
            let _ = answer.send(read);
        });
        let sent = self.reads.lock().unwrap_or_else(std::sync::PoisonError::into_inner).send(job);
        let gone = || StoreError::Database("the journal's reads' thread is gone".to_owned());
        sent.map_err(|_| gone())?;
        answered.recv().map_err(|_| gone())?
    }
}

/// Rows of one text column, decoded.
async fn decoded<T: serde::de::DeserializeOwned>(
    client: &Client,
    what: &'static str,
    sql: &str,
    values: &[&(dyn ToSql + Sync)],
) -> Result<Vec<T>, StoreError> {
    let rows = client.query(sql, values).await.map_err(database)?;
    rows.iter().map(|row| decode(what, &row.try_get::<_, String>(0).map_err(database)?)).collect()
}

async fn agent_record(client: &Client, agent: &AgentId) -> Result<Option<AgentRecord>, StoreError> {
    let sql = "SELECT record FROM agentry_agents WHERE agent = $1";
    Ok(decoded(client, "agent record", sql, &[&agent.as_str()]).await?.into_iter().next())
}

async fn snapshot(client: &Client, agent: &AgentId) -> Result<Option<Snapshot>, StoreError> {
    let sql = "SELECT snapshot FROM agentry_snapshots WHERE agent = $1";
    Ok(decoded(client, "snapshot", sql, &[&agent.as_str()]).await?.into_iter().next())
}

async fn inputs_after(client: &Client, agent: &AgentId, after: u64) -> Result<Vec<(u64, Signal)>, StoreError> {
    let rows = client
        .query(
            "SELECT body FROM agentry_input_batches WHERE agent = $1 AND last_seq > $2 ORDER BY place",
            &[&agent.as_str(), &number(after)],
        )
        .await
        .map_err(database)?;
    let mut found = Vec::new();
    for row in rows {
        input_log::read_body(row.try_get(0).map_err(database)?, after, &mut found)?;
    }
    Ok(input_log::in_order(found))
}

async fn schedules(client: &Client, agent: &AgentId) -> Result<Vec<ScheduleRecord>, StoreError> {
    let sql = "SELECT schedule FROM agentry_schedules WHERE agent = $1 ORDER BY key";
    decoded(client, "schedule", sql, &[&agent.as_str()]).await
}

fn number(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Everything that brings `agent` back (see `sqlite/reads.rs`: the same reads).
async fn revival(client: &Client, agent: &AgentId) -> Result<Revival, StoreError> {
    let record = agent_record(client, agent).await?;
    let snapshot = snapshot(client, agent).await?;
    let after = snapshot.as_ref().map_or(0, |s| s.seq);
    let inputs = inputs_after(client, agent, after).await?;
    let schedules = schedules(client, agent).await?;
    let incarnation = snapshot.as_ref().map_or(0, |s| s.incarnation);
    let prefix = crate::action::input_key_prefix(agent, incarnation);
    let runs = revival_runs(client, agent, &prefix, after).await?;
    let rows = client
        .query("SELECT record, plan, signal, told FROM agentry_jobs WHERE agent = $1", &[&agent.as_str()])
        .await
        .map_err(database)?;
    let rows = rows
        .iter()
        .map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?, r.try_get(3)?)))
        .collect::<Result<Vec<_>, tokio_postgres::Error>>()
        .map_err(database)?;
    let jobs = job_log::kept_jobs(rows)?;
    let rows = client
        .query("SELECT target, signal FROM agentry_outbox WHERE agent = $1 ORDER BY place", &[&agent.as_str()])
        .await
        .map_err(database)?;
    let mut unsent = Vec::with_capacity(rows.len());
    for row in rows {
        let target: String = row.try_get(0).map_err(database)?;
        let signal: Vec<u8> = row.try_get(1).map_err(database)?;
        crate::store::outbox::unsent(agent, (&target, &signal), &mut unsent);
    }
    Ok(Revival { record, snapshot, inputs, schedules, runs, jobs, unsent })
}

/// `agent`'s runs a recovery needs, in order (see [`run_log::revival_runs`] for which). Its rows in
/// `agentry_runs` that may be needed are read, and each is then checked as SQLite's query checks it.
async fn revival_runs(client: &Client, agent: &AgentId, prefix: &str, after: u64) -> Result<Vec<KeyedRun>, StoreError> {
    let mut placed: Vec<(i64, KeyedRun)> = Vec::new();
    let rows = client
        .query(
            "SELECT place, record, plan, outcome, delivered, final, key FROM agentry_runs WHERE agent = $1 \
             AND (NOT final OR NOT delivered OR starts_with(key, $2))",
            &[&agent.as_str(), &format!("{prefix}/")],
        )
        .await
        .map_err(database)?;
    for row in rows {
        let text = |i: usize| row.try_get::<_, Option<String>>(i).map_err(database);
        let record: RunRecord = decode("run record", &text(1)?.unwrap_or_default())?;
        let plan: Option<RunPlan> = text(2)?.map(|p| decode("run plan", &p)).transpose()?;
        let outcome: Option<Vec<u8>> = row.try_get(3).map_err(database)?;
        let delivered: bool = row.try_get(4).map_err(database)?;
        let ended: bool = row.try_get(5).map_err(database)?;
        let key = text(6)?;
        let lost = plan.as_ref().is_some_and(|p| p.by_agent) && record.error != Some(ErrorClass::Interrupted);
        let asked_after = key.as_deref().and_then(|k| run_log::key_seq(prefix, k)).is_some_and(|seq| seq > after);
        if !ended || (!delivered && (outcome.is_some() || lost)) || asked_after {
            let outcome = outcome.map(|kept| signal_codec::decode(&kept)).transpose()?;
            placed.push((row.try_get(0).map_err(database)?, KeyedRun { record, plan, outcome, delivered }));
        }
    }
    let batches = client
        .query(
            "SELECT body FROM agentry_run_batches WHERE agent = $1 AND last_seq > $2",
            &[&agent.as_str(), &number(after)],
        )
        .await
        .map_err(database)?;
    for row in batches {
        run_log::revival_batch(row.try_get(0).map_err(database)?, agent, (prefix, after), &mut placed)?;
    }
    placed.sort_by_key(|(place, _)| *place);
    Ok(placed.into_iter().map(|(_, run)| run).collect())
}

/// The runs matching `query` from both tables (see [`run_log::merge`]).
async fn keyed_runs(client: &Client, query: &RunQuery) -> Result<Vec<(RunRecord, Option<String>)>, StoreError> {
    let mut table_sql = String::from("SELECT place, record, key FROM agentry_runs WHERE TRUE");
    let mut batch_sql = String::from("SELECT place, body, agent FROM agentry_run_batches WHERE TRUE");
    let mut table_values: Vec<Box<dyn ToSql + Sync + Send>> = Vec::new();
    let mut batch_values: Vec<Box<dyn ToSql + Sync + Send>> = Vec::new();
    let condition = |sql: &mut String, values: &mut Vec<Box<dyn ToSql + Sync + Send>>, text: &str, value| {
        values.push(value);
        sql.push_str(" AND ");
        sql.push_str(&text.replace('#', &format!("${}", values.len())));
    };
    if let Some(agent) = &query.agent {
        condition(&mut table_sql, &mut table_values, "agent = #", Box::new(agent.as_str().to_owned()));
        condition(&mut batch_sql, &mut batch_values, "agent = #", Box::new(agent.as_str().to_owned()));
    }
    if let Some(action) = &query.action {
        let action = action.as_str().to_owned();
        condition(&mut table_sql, &mut table_values, "action = #", Box::new(action.clone()));
        let listed = "place IN (SELECT batch FROM agentry_run_batch_actions WHERE action = #)";
        condition(&mut batch_sql, &mut batch_values, listed, Box::new(action));
    }
    // Times are kept to the millisecond, rounded down: the exact bounds are checked on each record.
    if let Some(since) = query.since {
        condition(&mut table_sql, &mut table_values, "recorded >= #", Box::new(since.timestamp_millis()));
        condition(&mut batch_sql, &mut batch_values, "until >= #", Box::new(since.timestamp_millis()));
    }
    if let Some(until) = query.until {
        condition(&mut table_sql, &mut table_values, "recorded <= #", Box::new(until.timestamp_millis()));
        condition(&mut batch_sql, &mut batch_values, "since <= #", Box::new(until.timestamp_millis()));
    }
    if let Some(status) = query.status {
        let named = serde_json::to_string(&status).unwrap_or_default();
        condition(&mut table_sql, &mut table_values, "status = #", Box::new(named));
        condition(&mut batch_sql, &mut batch_values, "statuses & # != 0", Box::new(run_log::status_bit(status)));
    }
    table_sql.push_str(" ORDER BY place");
    batch_sql.push_str(" ORDER BY place");
    let table_rows = client.query(&table_sql, &refs(&table_values)).await.map_err(database)?;
    let batch_rows = client.query(&batch_sql, &refs(&batch_values)).await.map_err(database)?;
    let mut table = table_rows.into_iter();
    let next_table = || {
        for row in table.by_ref() {
            let record: RunRecord = decode("run record", &row.try_get::<_, String>(1).map_err(database)?)?;
            if query.matches(&record) {
                let key = row.try_get(2).map_err(database)?;
                return Ok(Some(Placed(row.try_get(0).map_err(database)?, record, key)));
            }
        }
        Ok(None)
    };
    let mut batches = batch_rows.into_iter();
    let next_batch = || {
        let Some(row) = batches.next() else { return Ok(None) };
        let agent = agent_id("run batch", row.try_get(2).map_err(database)?)?;
        Ok(Some(BatchRead { first: row.try_get(0).map_err(database)?, agent, body: row.try_get(1).map_err(database)? }))
    };
    run_log::merge(query, next_table, next_batch)
}

/// Values as a statement takes them.
fn refs(values: &[Box<dyn ToSql + Sync + Send>]) -> Vec<&(dyn ToSql + Sync)> {
    values.iter().map(|v| v.as_ref() as &(dyn ToSql + Sync)).collect()
}

fn agent_id(what: &'static str, text: String) -> Result<AgentId, StoreError> {
    AgentId::new(text).map_err(|e| StoreError::Decode { what, message: format!("its agent: {e}") })
}

impl Reads for PgReads {
    fn run(&self, run: Uuid) -> Result<Option<RunRecord>, StoreError> {
        self.read(async move |client: &Client| {
            let sql = "SELECT record FROM agentry_runs WHERE run = $1";
            if let Some(record) = decoded(client, "run record", sql, &[&run]).await?.into_iter().next() {
                return Ok(Some(record));
            }
            let Some(from) = run_log::rows_from(run) else { return Ok(None) };
            let rows = client
                .query(
                    "SELECT body, agent FROM agentry_run_batches WHERE first_run BETWEEN $1 AND $2 \
                     AND last_run >= $2 ORDER BY place",
                    &[&from, &run],
                )
                .await
                .map_err(database)?;
            for row in rows {
                let agent = agent_id("run batch", row.try_get(1).map_err(database)?)?;
                if let Some((record, _)) = run_log::find_in(row.try_get(0).map_err(database)?, &agent, run)? {
                    return Ok(Some(record));
                }
            }
            Ok(None)
        })
    }

    fn keyed_runs(&self, query: &RunQuery) -> Result<Vec<(RunRecord, Option<String>)>, StoreError> {
        let query = query.clone();
        self.read(async move |client: &Client| keyed_runs(client, &query).await)
    }

    fn refusals(&self, agent: &AgentId) -> Result<Vec<Refusal>, StoreError> {
        let agent = agent.clone();
        self.read(async move |client: &Client| {
            let sql = "SELECT refusal FROM agentry_refusals WHERE agent = $1 ORDER BY place";
            decoded(client, "refusal", sql, &[&agent.as_str()]).await
        })
    }

    fn alive(&self, after: Option<&AgentId>, limit: usize) -> Result<Vec<AliveAgent>, StoreError> {
        let after = after.map_or_else(String::new, |a| a.as_str().to_owned());
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        // A node sharing the journal brings back only the agents it holds (NULL: every agent).
        let held: Option<Vec<String>> =
            self.fence.as_ref().map(|fence| fence.held().into_iter().map(|(a, _)| a.as_str().to_owned()).collect());
        self.read(async move |client: &Client| {
            let rows = client
                .query(
                    "SELECT agent, agent_type, asleep, parent, (SELECT min(schedule::jsonb->>'due') FROM \
                     agentry_schedules s WHERE s.agent = a.agent), EXISTS (SELECT 1 FROM agentry_jobs j WHERE \
                     j.agent = a.agent AND NOT told AND (ended IS NULL OR signal IS NOT NULL)) \
                     FROM agentry_agents a WHERE agent > $1 AND ($3::text[] IS NULL OR agent = ANY($3)) \
                     ORDER BY agent LIMIT $2",
                    &[&after, &limit, &held],
                )
                .await
                .map_err(database)?;
            rows.iter()
                .map(|row| {
                    alive_agent(
                        row.try_get(0).map_err(database)?,
                        row.try_get(1).map_err(database)?,
                        row.try_get(2).map_err(database)?,
                        row.try_get(3).map_err(database)?,
                        row.try_get(4).map_err(database)?,
                        row.try_get(5).map_err(database)?,
                    )
                })
                .collect()
        })
    }

    fn agent(&self, agent: &AgentId) -> Result<Option<AgentRecord>, StoreError> {
        let agent = agent.clone();
        self.read(async move |client: &Client| agent_record(client, &agent).await)
    }

    fn snapshot(&self, agent: &AgentId) -> Result<Option<Snapshot>, StoreError> {
        let agent = agent.clone();
        self.read(async move |client: &Client| snapshot(client, &agent).await)
    }

    fn inputs_after(&self, agent: &AgentId, after: u64) -> Result<Vec<(u64, Signal)>, StoreError> {
        let agent = agent.clone();
        self.read(async move |client: &Client| inputs_after(client, &agent, after).await)
    }

    fn schedules(&self, agent: &AgentId) -> Result<Vec<ScheduleRecord>, StoreError> {
        let agent = agent.clone();
        self.read(async move |client: &Client| schedules(client, &agent).await)
    }

    fn revivals(&self, agents: &[AgentId]) -> Result<Vec<Result<Revival, StoreError>>, StoreError> {
        let agents = agents.to_vec();
        self.read(async move |client: &Client| {
            // One read-only transaction that sees one moment: every agent is read as of the same commit.
            client.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY").await.map_err(database)?;
            let mut found = Vec::with_capacity(agents.len());
            for agent in &agents {
                found.push(revival(client, agent).await);
            }
            client.batch_execute("COMMIT").await.map_err(database)?;
            Ok(found)
        })
    }
}
