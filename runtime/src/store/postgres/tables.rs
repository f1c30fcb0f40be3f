//! How a PostgreSQL journal takes what the writer writes. The writer's thread drives its own connection on a
//! runtime of its own; a commit's writes are gathered as they come and sent together, pipelined (one round
//! trip for the whole commit, not one per write), in the order the writer made them, inside one transaction.

use super::super::durable::{AgentRecord, ScheduleRecord, Snapshot};
use super::super::job_log::JobWrite;
use super::super::tables::{Database, RunBatchRow, RunWrite, Tables, json};
use super::super::{Refusal, StoreError};
use super::fence::Fence;
use super::{Connection, database};
use crate::id::AgentId;
use std::collections::{BTreeSet, HashMap};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Statement};
use uuid::Uuid;

/// A value of a write, owned until the commit sends it.
type Value = Box<dyn ToSql + Sync + Send>;

fn number(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn owned(text: Option<&str>) -> Value {
    Box::new(text.map(str::to_owned))
}

/// The writer's connection, its prepared statements by their text, and the leases it writes under, if several
/// nodes share the journal.
pub(crate) struct PgDatabase {
    pub(super) connection: Connection,
    pub(super) statements: HashMap<&'static str, Statement>,
    pub(super) fence: Option<Fence>,
}

impl PgDatabase {
    pub(super) fn new(connection: Connection, fence: Option<Fence>) -> Self {
        Self { connection, statements: HashMap::new(), fence }
    }
}

/// Whose rows a write touches: what the fence checks it against.
enum Owner {
    Agent(AgentId),
    /// A run's, whose agent the journal knows.
    Run(Uuid),
    /// Nobody's in particular (purging jobs that ended and were told; forgetting an emit sent on).
    Nobody,
}

/// One write, gathered.
struct Write {
    owner: Owner,
    sql: &'static str,
    values: Vec<Value>,
}

/// One commit's writes, gathered.
struct PgTables<'a> {
    database: &'a mut PgDatabase,
    writes: Vec<Write>,
}

impl PgTables<'_> {
    fn write(&mut self, owner: Owner, sql: &'static str, values: Vec<Value>) -> Result<(), StoreError> {
        self.writes.push(Write { owner, sql, values });
        Ok(())
    }

    /// Sends the writes gathered, in order, pipelined, and waits for them.
    fn send(&mut self) -> Result<(), StoreError> {
        if self.writes.is_empty() {
            return Ok(());
        }
        let mut writes = std::mem::take(&mut self.writes);
        let PgDatabase { connection, statements, fence } = &mut *self.database;
        let Connection { runtime, client, .. } = connection;
        runtime.block_on(async {
            if let Some(fence) = fence {
                let lost = fenced(client, fence, &mut writes).await?;
                if !lost.is_empty() {
                    writes.retain(|write| !matches!(&write.owner, Owner::Agent(agent) if lost.contains(agent)));
                    lost.iter().for_each(|agent| fence.refused(agent));
                }
            }
            for write in &writes {
                if !statements.contains_key(write.sql) {
                    let prepared = client.prepare(write.sql).await.map_err(database)?;
                    statements.insert(write.sql, prepared);
                }
            }
            let sent = writes.iter().map(|write| {
                let statement = &statements[write.sql];
                client.execute_raw(statement, write.values.iter().map(|v| v.as_ref() as &(dyn ToSql + Sync)))
            });
            futures_util::future::try_join_all(sent).await.map_err(database)?;
            Ok(())
        })
    }
}

/// The agents the writes touch whose leases the database does not give this node at the epochs its fence holds
/// (or that ran out), after locking, for share until the commit, the lease rows of those it does. A write owned
/// by a run is first owned by the run's agent.
async fn fenced(client: &Client, fence: &Fence, writes: &mut [Write]) -> Result<BTreeSet<AgentId>, StoreError> {
    let runs: Vec<Uuid> =
        writes.iter().filter_map(|w| if let Owner::Run(run) = w.owner { Some(run) } else { None }).collect();
    if !runs.is_empty() {
        let rows = client
            .query("SELECT run, agent FROM agentry_runs WHERE run = ANY($1)", &[&runs])
            .await
            .map_err(database)?;
        let mut agents: HashMap<Uuid, AgentId> = HashMap::new();
        for row in rows {
            let agent: String = row.try_get(1).map_err(database)?;
            // A row whose agent is not an id belongs to no node's agent: the write changes nothing of anyone's.
            if let Ok(agent) = AgentId::new(agent) {
                agents.insert(row.try_get(0).map_err(database)?, agent);
            }
        }
        for write in writes.iter_mut() {
            if let Owner::Run(run) = write.owner
                && let Some(agent) = agents.get(&run)
            {
                write.owner = Owner::Agent(agent.clone());
            }
        }
    }
    let touched: BTreeSet<&AgentId> =
        writes.iter().filter_map(|w| if let Owner::Agent(agent) = &w.owner { Some(agent) } else { None }).collect();
    let mut lost = BTreeSet::new();
    let (mut names, mut epochs): (Vec<&str>, Vec<i64>) = (Vec::new(), Vec::new());
    for agent in touched {
        match fence.epoch(agent).and_then(|epoch| i64::try_from(epoch).ok()) {
            Some(epoch) => {
                names.push(agent.as_str());
                epochs.push(epoch);
            }
            None => {
                lost.insert(agent.clone());
            }
        }
    }
    if names.is_empty() {
        return Ok(lost);
    }
    let rows = client
        .query(
            "SELECT o.agent FROM agentry_owners o JOIN unnest($1::text[], $2::bigint[]) AS h(agent, epoch)              ON o.agent = h.agent WHERE o.node = $3 AND o.epoch = h.epoch AND o.expires_at > now()              ORDER BY o.agent FOR SHARE OF o",
            &[&names, &epochs, &fence.node()],
        )
        .await
        .map_err(database)?;
    let held: BTreeSet<String> = rows.iter().map(|row| row.try_get(0)).collect::<Result<_, _>>().map_err(database)?;
    for name in names {
        if !held.contains(name) {
            lost.extend(AgentId::new(name).ok());
        }
    }
    Ok(lost)
}

impl Tables for PgTables<'_> {
    fn input_batch(
        &mut self,
        agent: &AgentId,
        (first, last): (u64, u64),
        body: &[u8],
        ids: &[Uuid],
    ) -> Result<(), StoreError> {
        // A signal the agent consumed is marked so in its inbox in the same commit that logs it: one delivered
        // again after a crash before this commit is logged once, and one consumed is never delivered again.
        if !ids.is_empty() {
            self.write(
                Owner::Agent(agent.clone()),
                "UPDATE agentry_inbox SET consumed = now() WHERE agent = $1 AND signal = ANY($2) AND consumed IS NULL",
                vec![Box::new(agent.as_str().to_owned()), Box::new(ids.to_vec())],
            )?;
        }
        self.write(
            Owner::Agent(agent.clone()),
            "INSERT INTO agentry_input_batches (agent, first_seq, last_seq, body) VALUES ($1, $2, $3, $4)",
            vec![
                Box::new(agent.as_str().to_owned()),
                Box::new(number(first)),
                Box::new(number(last)),
                Box::new(body.to_vec()),
            ],
        )
    }

    fn clear_inputs(&mut self, agent: &AgentId, upto: Option<u64>) -> Result<(), StoreError> {
        self.write(
            Owner::Agent(agent.clone()),
            "DELETE FROM agentry_input_batches WHERE agent = $1 AND last_seq <= $2",
            vec![Box::new(agent.as_str().to_owned()), Box::new(upto.map_or(i64::MAX, number))],
        )
    }

    fn run_batch(&mut self, row: &RunBatchRow<'_>) -> Result<(), StoreError> {
        let RunBatchRow { first, last, agent, last_seq, first_run, last_run, since, until, statuses, actions, body } =
            *row;
        self.write(
            Owner::Agent(agent.clone()),
            "INSERT INTO agentry_run_batches (place, last, agent, last_seq, first_run, last_run, since, until, \
             statuses, body) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
            vec![
                Box::new(first),
                Box::new(last),
                Box::new(agent.as_str().to_owned()),
                Box::new(last_seq),
                Box::new(first_run),
                Box::new(last_run),
                Box::new(since),
                Box::new(until),
                Box::new(statuses),
                Box::new(body.to_vec()),
            ],
        )?;
        for action in actions {
            self.write(
                Owner::Agent(agent.clone()),
                "INSERT INTO agentry_run_batch_actions (action, batch) VALUES ($1, $2)",
                vec![Box::new(action.as_str().to_owned()), Box::new(first)],
            )?;
        }
        Ok(())
    }

    fn run(&mut self, row: &RunWrite<'_>) -> Result<(), StoreError> {
        self.write(
            Owner::Agent(row.agent.clone()),
            "INSERT INTO agentry_runs AS r (run, agent, action, status, recorded, final, record, key, plan, outcome, \
             delivered, place) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) \
             ON CONFLICT (run) DO UPDATE \
             SET status = excluded.status, final = excluded.final, record = excluded.record, \
             key = COALESCE(excluded.key, r.key), plan = COALESCE(excluded.plan, r.plan), \
             outcome = COALESCE(excluded.outcome, r.outcome), delivered = CASE WHEN excluded.outcome \
             IS NOT NULL OR excluded.delivered THEN excluded.delivered ELSE r.delivered END",
            vec![
                Box::new(row.run),
                Box::new(row.agent.as_str().to_owned()),
                Box::new(row.action.as_str().to_owned()),
                Box::new(row.status.to_owned()),
                Box::new(row.recorded),
                Box::new(row.ended),
                Box::new(row.record.to_owned()),
                owned(row.key),
                owned(row.plan),
                Box::new(row.outcome.map(<[u8]>::to_vec)),
                Box::new(row.delivered),
                Box::new(row.place),
            ],
        )
    }

    fn run_parts(
        &mut self,
        run: Uuid,
        key: Option<&str>,
        plan: Option<&str>,
        outcome: Option<&[u8]>,
        delivered: bool,
    ) -> Result<(), StoreError> {
        self.write(
            Owner::Run(run),
            "UPDATE agentry_runs SET key = COALESCE($2, key), plan = COALESCE($3, plan), \
             outcome = COALESCE($4, outcome), \
             delivered = CASE WHEN $4::bytea IS NOT NULL OR $5 THEN $5 ELSE delivered END WHERE run = $1",
            vec![Box::new(run), owned(key), owned(plan), Box::new(outcome.map(<[u8]>::to_vec)), Box::new(delivered)],
        )
    }

    fn delivered(&mut self, run: Uuid) -> Result<(), StoreError> {
        self.write(
            Owner::Run(run),
            "UPDATE agentry_runs SET delivered = TRUE WHERE run = $1 AND outcome IS NOT NULL",
            vec![Box::new(run)],
        )
    }

    fn kept_outcome(&mut self, run: Uuid) -> Result<Option<Vec<u8>>, StoreError> {
        // Read after the writes gathered so far, inside the commit's transaction.
        self.send()?;
        let Connection { runtime, client, .. } = &self.database.connection;
        let row = runtime
            .block_on(
                client.query_opt("SELECT outcome FROM agentry_runs WHERE run = $1 AND outcome IS NOT NULL", &[&run]),
            )
            .map_err(database)?;
        row.map(|row| row.try_get::<_, Vec<u8>>(0)).transpose().map_err(database)
    }

    fn snapshot(&mut self, snapshot: &Snapshot, in_history: bool) -> Result<(), StoreError> {
        let text = json(snapshot);
        let agent = snapshot.agent.as_str();
        if in_history {
            self.write(
                Owner::Agent(snapshot.agent.clone()),
                "INSERT INTO agentry_snapshot_history (agent, seq, snapshot) VALUES ($1, $2, $3) \
                 ON CONFLICT (agent, seq) DO UPDATE SET snapshot = excluded.snapshot",
                vec![Box::new(agent.to_owned()), Box::new(number(snapshot.seq)), Box::new(text.clone())],
            )?;
        }
        self.write(
            Owner::Agent(snapshot.agent.clone()),
            "INSERT INTO agentry_snapshots (agent, snapshot) VALUES ($1, $2) \
             ON CONFLICT (agent) DO UPDATE SET snapshot = excluded.snapshot",
            vec![Box::new(agent.to_owned()), Box::new(text)],
        )
    }

    fn clear_history(&mut self, agent: &AgentId) -> Result<(), StoreError> {
        self.write(
            Owner::Agent(agent.clone()),
            "DELETE FROM agentry_snapshot_history WHERE agent = $1",
            vec![Box::new(agent.as_str().to_owned())],
        )
    }

    fn agent(&mut self, record: &AgentRecord) -> Result<(), StoreError> {
        let parent = record.parent().map(|p| p.as_str().to_owned());
        self.write(
            Owner::Agent(record.agent.clone()),
            "INSERT INTO agentry_agents (agent, record, agent_type, asleep, parent) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (agent) DO UPDATE SET record = excluded.record, agent_type = excluded.agent_type, \
             asleep = excluded.asleep, parent = excluded.parent",
            vec![
                Box::new(record.agent.as_str().to_owned()),
                Box::new(json(record)),
                Box::new(record.agent_type.clone()),
                Box::new(record.asleep),
                Box::new(parent),
            ],
        )
    }

    fn forget_agent(&mut self, agent: &AgentId) -> Result<(), StoreError> {
        for sql in [
            "DELETE FROM agentry_agents WHERE agent = $1",
            "DELETE FROM agentry_snapshots WHERE agent = $1",
            "DELETE FROM agentry_schedules WHERE agent = $1",
            "DELETE FROM agentry_snapshot_history WHERE agent = $1",
        ] {
            self.write(Owner::Agent(agent.clone()), sql, vec![Box::new(agent.as_str().to_owned())])?;
        }
        Ok(())
    }

    fn schedule(&mut self, schedule: &ScheduleRecord) -> Result<(), StoreError> {
        self.write(
            Owner::Agent(schedule.agent.clone()),
            "INSERT INTO agentry_schedules (agent, key, schedule) VALUES ($1, $2, $3) \
             ON CONFLICT (agent, key) DO UPDATE SET schedule = excluded.schedule",
            vec![
                Box::new(schedule.agent.as_str().to_owned()),
                Box::new(schedule.key.clone()),
                Box::new(json(schedule)),
            ],
        )
    }

    fn clear_schedules(&mut self, agent: &AgentId, key: Option<&str>) -> Result<(), StoreError> {
        let (agent, id): (&AgentId, Value) = (agent, Box::new(agent.as_str().to_owned()));
        match key {
            Some(key) => self.write(
                Owner::Agent(agent.clone()),
                "DELETE FROM agentry_schedules WHERE agent = $1 AND key = $2",
                vec![id, Box::new(key.to_owned())],
            ),
            None => self.write(Owner::Agent(agent.clone()), "DELETE FROM agentry_schedules WHERE agent = $1", vec![id]),
        }
    }

    fn outbox(&mut self, agent: &AgentId, id: Uuid, to: &AgentId, signal: &[u8]) -> Result<(), StoreError> {
        self.write(
            Owner::Agent(agent.clone()),
            "INSERT INTO agentry_outbox (agent, id, target, signal) VALUES ($1, $2, $3, $4)",
            vec![
                Box::new(agent.as_str().to_owned()),
                Box::new(id),
                Box::new(to.as_str().to_owned()),
                Box::new(signal.to_vec()),
            ],
        )
    }

    fn outbox_sent(&mut self, agent: &AgentId, id: Uuid) -> Result<(), StoreError> {
        // Whoever holds the agent now: the emit reached its target (a node that gave the agent up while its emits
        // were still going out forgets them too, or the next holder would send them again, for ever).
        self.write(
            Owner::Nobody,
            "DELETE FROM agentry_outbox WHERE agent = $1 AND id = $2",
            vec![Box::new(agent.as_str().to_owned()), Box::new(id)],
        )
    }

    fn clear_outbox(&mut self, agent: &AgentId) -> Result<(), StoreError> {
        let id: Value = Box::new(agent.as_str().to_owned());
        self.write(Owner::Agent(agent.clone()), "DELETE FROM agentry_outbox WHERE agent = $1", vec![id])
    }

    fn refusal(&mut self, refusal: &Refusal) -> Result<(), StoreError> {
        self.write(
            Owner::Agent(refusal.agent.clone()),
            "INSERT INTO agentry_refusals (agent, refusal) VALUES ($1, $2)",
            vec![Box::new(refusal.agent.as_str().to_owned()), Box::new(json(refusal))],
        )
    }

    fn job(&mut self, write: &JobWrite) -> Result<(), StoreError> {
        match write {
            JobWrite::Submitted(submitted) => {
                let (record, plan) = &**submitted;
                self.write(
                    Owner::Agent(record.agent.clone()),
                    "INSERT INTO agentry_jobs (job, agent, record, plan) VALUES ($1, $2, $3, $4) \
                     ON CONFLICT (job) DO UPDATE SET agent = excluded.agent, record = excluded.record, \
                     plan = excluded.plan, ended = NULL, signal = NULL, told = FALSE",
                    vec![
                        Box::new(record.id),
                        Box::new(record.agent.as_str().to_owned()),
                        Box::new(json(record)),
                        Box::new(json(plan)),
                    ],
                )
            }
            JobWrite::Changed(changed) => {
                let (record, end) = &**changed;
                let ended = record.ended_at.map(|at| at.timestamp_millis());
                // A job that ended keeps its end signal; a later write (none is made) could not take it back.
                self.write(
                    Owner::Agent(record.agent.clone()),
                    "UPDATE agentry_jobs SET record = $2, ended = COALESCE($3, ended), \
                     signal = COALESCE($4, signal) WHERE job = $1",
                    vec![
                        Box::new(record.id),
                        Box::new(json(record)),
                        Box::new(ended),
                        Box::new(end.as_ref().map(json)),
                    ],
                )
            }
            JobWrite::Told(agent, job) => self.write(
                Owner::Agent(agent.clone()),
                "UPDATE agentry_jobs SET told = TRUE WHERE job = $1 AND agent = $2",
                vec![Box::new(*job), Box::new(agent.as_str().to_owned())],
            ),
            JobWrite::Purged(before) => self.write(
                Owner::Nobody,
                "DELETE FROM agentry_jobs WHERE told AND ended <= $1",
                vec![Box::new(before.timestamp_millis())],
            ),
        }
    }

    /// Places from a sequence, a block at a time: nodes sharing the journal never give the same place.
    fn reserve_places(&mut self) -> Result<Option<std::ops::Range<i64>>, StoreError> {
        self.send()?;
        let Connection { runtime, client, .. } = &self.database.connection;
        let start: i64 = runtime
            .block_on(client.query_one("SELECT nextval('agentry_places')", &[]))
            .and_then(|row| row.try_get(0))
            .map_err(database)?;
        Ok(Some(start..start + super::schema::PLACES_AT_ONCE))
    }

    fn clear_jobs(&mut self, agent: &AgentId) -> Result<(), StoreError> {
        self.write(
            Owner::Agent(agent.clone()),
            "DELETE FROM agentry_jobs WHERE agent = $1",
            vec![Box::new(agent.as_str().to_owned())],
        )
    }
}

impl PgDatabase {
    /// Opens the connection again if it dropped (its prepared statements go with it); whether it did.
    fn reopen_if_dropped(&mut self) -> Result<bool, StoreError> {
        let reopened = self.connection.reopen_if_dropped()?;
        if reopened {
            self.statements.clear();
        }
        Ok(reopened)
    }

    /// Opens the connection again (its prepared statements go with it).
    fn reopen(&mut self) -> Result<(), StoreError> {
        self.connection.reopen()?;
        self.statements.clear();
        Ok(())
    }

    /// Begins a transaction. The writer's connection is driven only while it writes, so one that dropped since
    /// the last commit is found out here, by failing to begin: opened again, and the transaction begun on the
    /// new one (nothing was sent yet).
    fn begin(&mut self) -> Result<(), StoreError> {
        self.reopen_if_dropped()?;
        let Connection { runtime, client, .. } = &self.connection;
        if runtime.block_on(client.batch_execute("BEGIN")).is_ok() {
            return Ok(());
        }
        self.reopen()?;
        let Connection { runtime, client, .. } = &self.connection;
        runtime.block_on(client.batch_execute("BEGIN")).map_err(database)
    }
}

impl Database for PgDatabase {
    fn transaction(
        &mut self,
        write: &mut dyn FnMut(&mut dyn Tables) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.begin()?;
        let mut tables = PgTables { database: self, writes: Vec::new() };
        let written = write(&mut tables).and_then(|()| tables.send());
        let Connection { runtime, client, .. } = &self.connection;
        let end = if written.is_ok() { "COMMIT" } else { "ROLLBACK" };
        let ended = runtime.block_on(client.batch_execute(end)).map_err(database);
        written.and(ended)
    }

    fn open_runs(&mut self) -> Result<(i64, Vec<Uuid>), StoreError> {
        self.reopen_if_dropped()?;
        let Connection { runtime, client, .. } = &self.connection;
        runtime.block_on(super::open_runs(client))
    }

    /// The agents of a commit that failed (the connection dropped during it, or it could not begin) may have
    /// gone past what the journal holds: a node's journal (fenced) reports them, and the node brings them back
    /// from it.
    fn failed(&mut self, agents: &[AgentId], error: &StoreError) -> bool {
        let Some(fence) = &self.fence else { return false };
        agents.iter().for_each(|agent| fence.unsure(agent, error));
        true
    }

    /// A node's journal (fenced) writes for the agents whose leases the node holds.
    fn writes_for(&self, agent: &AgentId) -> bool {
        self.fence.as_ref().is_none_or(|fence| fence.epoch(agent).is_some())
    }

    /// A node's journal (fenced) takes the signals it logs out of their agents' inboxes.
    fn wants_input_ids(&self) -> bool {
        self.fence.is_some()
    }

    /// A node's journal (fenced) is shared: every run keeps its row.
    fn batches_ended_runs(&self) -> bool {
        self.fence.is_none()
    }
}
