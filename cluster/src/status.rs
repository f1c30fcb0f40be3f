//! What an operator asks of a cluster: which nodes are alive and where they listen, how many leases each holds
//! and how many of those ran out (agents waiting for a node to take them over), and what waits in the inboxes.
//! Read from PostgreSQL, the cluster's source of truth, in one snapshot, so the figures agree with each other;
//! `agentry cluster status` prints it.

use chrono::{DateTime, Utc};
use serde::Serialize;

/// The cluster as PostgreSQL has it at one moment.
///
/// ```no_run
/// # async fn show() -> Result<(), tokio_postgres::Error> {
/// let url = std::env::var("AGENTRY_POSTGRES").expect("the connection string");
/// let status = agentry_cluster::ClusterStatus::read(&url, 5).await?;
/// for node in &status.nodes {
///     println!("{}: {} leases ({} run out)", node.name, node.leases, node.expired);
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClusterStatus {
    /// The database's clock when it was read: every time below is on that clock.
    pub at: DateTime<Utc>,
    /// Every node that said it was alive or that holds a lease, by name.
    pub nodes: Vec<NodeStatus>,
    /// Leases in all, and how many ran out: their agents wait for a node to take them over.
    pub leases: u64,
    /// See [`ClusterStatus::leases`].
    pub expired: u64,
    /// Signals waiting in inboxes, in all, and for how many agents.
    pub waiting: u64,
    /// See [`ClusterStatus::waiting`].
    pub waiting_agents: u64,
    /// The agents with the most signals waiting, most first (as many as asked).
    pub fullest: Vec<Backlog>,
}

/// One node, as the cluster's tables have it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeStatus {
    /// Its name.
    pub name: String,
    /// Whether it said it was alive recently enough: its heartbeat has not run out.
    pub alive: bool,
    /// When its heartbeat runs out (or ran out); `None` for a node that holds leases but never said it was alive.
    pub seen_until: Option<DateTime<Utc>>,
    /// Where it listens for its peers, if it does.
    pub wire: Option<String>,
    /// The leases it holds, and how many of them ran out.
    pub leases: u64,
    /// See [`NodeStatus::leases`].
    pub expired: u64,
}

/// An agent with signals waiting in its inbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Backlog {
    /// The agent.
    pub agent: String,
    /// How many signals wait for it.
    pub signals: u64,
    /// The node whose lease it is under, if any.
    pub node: Option<String>,
}

impl ClusterStatus {
    /// Reads the cluster's status from the database at `url` (a libpq connection string, for example from an
    /// environment variable), with the `fullest` agents' inboxes listed. It only reads (a monitoring role with
    /// `SELECT` on the cluster's tables is enough, and a standby serves it); a database without the cluster's
    /// tables is an empty cluster.
    pub async fn read(url: &str, fullest: u32) -> Result<Self, tokio_postgres::Error> {
        let mut client = crate::db::open(url, "status").await?;
        // One snapshot for every figure.
        let tx = client
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await?;
        let clock = tx
            .query_one(
                "SELECT now(), to_regclass('agentry_owners') IS NOT NULL AND to_regclass('agentry_nodes') IS NOT NULL
                        AND to_regclass('agentry_inbox') IS NOT NULL",
                &[],
            )
            .await?;
        let at: DateTime<Utc> = clock.try_get(0)?;
        if !clock.try_get::<_, bool>(1)? {
            return Ok(Self {
                at,
                nodes: Vec::new(),
                leases: 0,
                expired: 0,
                waiting: 0,
                waiting_agents: 0,
                fullest: Vec::new(),
            });
        }
        let rows = tx
            .query(
                "SELECT coalesce(n.node, o.node) AS name, n.seen_until, n.wire,
                        coalesce(o.leases, 0) AS leases, coalesce(o.expired, 0) AS expired
                 FROM agentry_nodes n
                 FULL JOIN (SELECT node, count(*) AS leases, count(*) FILTER (WHERE expires_at <= now()) AS expired
                            FROM agentry_owners GROUP BY node) o ON o.node = n.node
                 ORDER BY name",
                &[],
            )
            .await?;
        let mut nodes = Vec::with_capacity(rows.len());
        for row in rows {
            let seen_until: Option<DateTime<Utc>> = row.try_get("seen_until")?;
            nodes.push(NodeStatus {
                name: row.try_get("name")?,
                alive: seen_until.is_some_and(|until| until > at),
                seen_until,
                wire: row.try_get("wire")?,
                leases: count(row.try_get("leases")?),
                expired: count(row.try_get("expired")?),
            });
        }
        let waiting = tx
            .query_one(
                "SELECT count(*) AS signals, count(DISTINCT agent) AS agents FROM agentry_inbox WHERE consumed IS NULL",
                &[],
            )
            .await?;
        let fullest = tx
            .query(
                "SELECT i.agent, count(*) AS signals, min(o.node) AS node
                 FROM agentry_inbox i LEFT JOIN agentry_owners o ON o.agent = i.agent
                 WHERE i.consumed IS NULL GROUP BY i.agent ORDER BY signals DESC, i.agent LIMIT $1",
                &[&i64::from(fullest)],
            )
            .await?;
        let fullest = fullest
            .iter()
            .map(|row| {
                Ok(Backlog {
                    agent: row.try_get("agent")?,
                    signals: count(row.try_get("signals")?),
                    node: row.try_get("node")?,
                })
            })
            .collect::<Result<Vec<_>, tokio_postgres::Error>>()?;
        tx.commit().await?;
        Ok(Self {
            at,
            leases: nodes.iter().map(|node| node.leases).sum(),
            expired: nodes.iter().map(|node| node.expired).sum(),
            nodes,
            waiting: count(waiting.try_get("signals")?),
            waiting_agents: count(waiting.try_get("agents")?),
            fullest,
        })
    }
}

/// A count as PostgreSQL gives it (never negative).
fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}
