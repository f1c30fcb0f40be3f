//! Who owns an agent, decided by PostgreSQL: each agent id has at most one owner node at a time, held as a lease
//! with an **epoch** that grows by one each time the agent changes hands. Time is the database's (`now()`), never
//! a node's clock, so a node whose clock drifts or that was paused cannot think it still holds a lease the
//! database gave away.
//!
//! **Fencing.** Every write an owner makes for an agent starts with [`fence`] in the write's own transaction: it
//! reads the agent's lease with a share lock and refuses unless it is still this node's, at this epoch, and not
//! expired. The lock makes the write and a takeover ([`Owners::claim`] by another node) one before the other: a
//! takeover waits for a write that passed its fence to commit, and a write that starts after the takeover fails
//! its fence. So a node that was paused or cut off and comes back can never write over its successor: its first
//! write fails with [`LeaseError::Lost`] (or [`LeaseError::Expired`], when nobody took the agent meanwhile and a
//! [`Owners::renew`] gets it back), and it must stop its copy of the agent.

use crate::db::Db;
use agentry::id::AgentId;
use chrono::{DateTime, Utc};
use std::time::Duration;
use tokio_postgres::{Client, GenericClient, Row};

/// What a heartbeat kept and lost of the leases a node believed it held.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Heartbeat {
    /// Renewed: still this node's, at the same epoch.
    pub kept: Vec<Lease>,
    /// Gone (taken at a newer epoch, or released): the node must stop its copies of these agents.
    pub lost: Vec<Lease>,
}

/// A node's hold on one agent, as the database gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The agent.
    pub agent: AgentId,
    /// The node holding it.
    pub node: String,
    /// Its epoch: one more than the lease before it on this agent.
    pub epoch: u64,
    /// When it ends unless renewed (the database's time).
    pub expires_at: DateTime<Utc>,
}

/// Why a lease could not be had, kept, or written under.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// Another node holds the agent's lease.
    #[error("agent `{agent}` is owned by node `{node}` (epoch {epoch}) until {until}; expected it free or expired")]
    Held {
        /// The agent.
        agent: AgentId,
        /// Its owner.
        node: String,
        /// The owner's epoch.
        epoch: u64,
        /// When the owner's lease ends unless renewed.
        until: DateTime<Utc>,
    },
    /// The lease is gone: another node took the agent (a newer epoch), or it was released.
    #[error("node `{node}` no longer owns agent `{agent}` at epoch {epoch}: {now}; it must stop its copy of the agent")]
    Lost {
        /// The agent.
        agent: AgentId,
        /// The node that held the lease.
        node: String,
        /// The epoch it held.
        epoch: u64,
        /// What the database says now.
        now: String,
    },
    /// The lease ran out before this write (nobody has taken the agent yet: a renewal may get it back).
    #[error("node `{node}`'s lease on agent `{agent}` (epoch {epoch}) expired at {at}; renew it before writing")]
    Expired {
        /// The agent.
        agent: AgentId,
        /// The node.
        node: String,
        /// The epoch.
        epoch: u64,
        /// When it expired.
        at: DateTime<Utc>,
    },
    /// A lease's duration that the database cannot hold.
    #[error("a lease of {0:?} cannot be given; expected between 1 ms and 24 h")]
    BadDuration(Duration),
    /// The database failed or refused.
    #[error("PostgreSQL: {0}")]
    Database(#[from] tokio_postgres::Error),
    /// A row that does not read as a lease.
    #[error("the lease table holds a row that is not a lease: {0}")]
    Corrupt(String),
}

/// One node's view of the lease table: claims, renewals and releases in its name.
pub struct Owners {
    db: Db,
    node: String,
    ttl_ms: i64,
    /// Where this node listens for its peers on the wire, said with every heartbeat.
    wire: Option<String>,
}

impl Owners {
    /// Connects to PostgreSQL at `url` (a libpq connection string) as node `node`, whose leases last `ttl`
    /// unless renewed, and makes the lease table if it is not there.
    pub async fn connect(url: &str, node: &str, ttl: Duration) -> Result<Self, LeaseError> {
        let ttl_ms = i64::try_from(ttl.as_millis())
            .ok()
            .filter(|ms| (1..=86_400_000).contains(ms))
            .ok_or(LeaseError::BadDuration(ttl))?;
        let db = Db::connect(url, "leases").await?;
        Ok(Self { db, node: node.to_owned(), ttl_ms, wire: None })
    }

    /// Says, from the next heartbeat on, where this node listens for its peers on the wire.
    pub fn advertise(&mut self, wire: String) {
        self.wire = Some(wire);
    }

    /// The live nodes other than this one that listen on the wire, with their addresses.
    pub async fn live_wires(&self) -> Result<Vec<(String, String)>, LeaseError> {
        let rows = self
            .db
            .shared()
            .await?
            .query(
                "SELECT node, wire FROM agentry_nodes WHERE seen_until > now() AND wire IS NOT NULL AND node <> $1 ORDER BY node",
                &[&self.node],
            )
            .await?;
        rows.iter().map(|r| Ok((r.try_get(0)?, r.try_get(1)?))).collect()
    }

    /// This node's name.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The connection, for the node's own reads (opened again first if it dropped).
    pub async fn client(&self) -> Result<impl std::ops::Deref<Target = Client> + '_, LeaseError> {
        Ok(self.db.shared().await?)
    }

    /// The connection to itself, for the node's own fenced writes (see [`fence`]: a transaction needs it
    /// mutable).
    pub async fn client_mut(&self) -> Result<impl std::ops::DerefMut<Target = Client> + '_, LeaseError> {
        Ok(self.db.alone().await?)
    }

    /// Takes the agent's lease for this node: when nobody holds it, or its holder's lease expired (the epoch
    /// grows by one). A holder whose lease is still running keeps it: [`LeaseError::Held`].
    pub async fn claim(&self, agent: &AgentId) -> Result<Lease, LeaseError> {
        let claimed = self
            .db
            .shared()
            .await?
            .query_opt(
                "INSERT INTO agentry_owners (agent, node, epoch, expires_at)
                 VALUES ($1, $2, 1, now() + $3::bigint * interval '1 millisecond')
                 ON CONFLICT (agent) DO UPDATE
                   SET node = EXCLUDED.node, epoch = agentry_owners.epoch + 1, expires_at = EXCLUDED.expires_at
                   WHERE agentry_owners.expires_at <= now()
                 RETURNING agent, node, epoch, expires_at",
                &[&agent.as_str(), &self.node, &self.ttl_ms],
            )
            .await?;
        match claimed {
            Some(row) => lease(&row),
            None => match self.owner(agent).await? {
                Some(held) => Err(LeaseError::Held {
                    agent: agent.clone(),
                    node: held.node,
                    epoch: held.epoch,
                    until: held.expires_at,
                }),
                // Released between the two statements: try again once more.
                None => Box::pin(self.claim(agent)).await,
            },
        }
    }

    /// Extends this node's lease by its duration from now, if it still holds it at that epoch (even expired, as
    /// long as nobody took the agent meanwhile).
    pub async fn renew(&self, held: &Lease) -> Result<Lease, LeaseError> {
        let renewed = self
            .db
            .shared()
            .await?
            .query_opt(
                "UPDATE agentry_owners SET expires_at = now() + $4::bigint * interval '1 millisecond'
                 WHERE agent = $1 AND node = $2 AND epoch = $3
                 RETURNING agent, node, epoch, expires_at",
                &[&held.agent.as_str(), &held.node, &epoch_of(held)?, &self.ttl_ms],
            )
            .await?;
        match renewed {
            Some(row) => lease(&row),
            None => Err(lost(held, self.owner(&held.agent).await?)),
        }
    }

    /// Takes back, at the next epoch, a lease the database still gives this node (even expired, as long as
    /// nobody took the agent meanwhile): for a node that stopped its copy of the agent and brings it back from
    /// the journal. The new epoch fences off what other nodes may still have under the old one; within this
    /// node, its fence is keyed by agent, so the node lets what its stopped copy wrote reach the journal first.
    /// `None` when the lease is another node's, or nobody's.
    pub async fn take_back(&self, agent: &AgentId) -> Result<Option<Lease>, LeaseError> {
        let row = self
            .db
            .shared()
            .await?
            .query_opt(
                "UPDATE agentry_owners
                 SET epoch = epoch + 1, expires_at = now() + $3::bigint * interval '1 millisecond'
                 WHERE agent = $1 AND node = $2
                 RETURNING agent, node, epoch, expires_at",
                &[&agent.as_str(), &self.node, &self.ttl_ms],
            )
            .await?;
        row.as_ref().map(lease).transpose()
    }

    /// Says this node is alive for one more lease duration, and renews every lease of `held` that is still
    /// this node's at its epoch, in one statement: what a node does every fraction of its lease duration.
    pub async fn heartbeat(&self, held: &[Lease]) -> Result<Heartbeat, LeaseError> {
        self.db
            .shared()
            .await?
            .execute(
                "INSERT INTO agentry_nodes (node, seen_until, wire) VALUES ($1, now() + $2::bigint * interval '1 millisecond', $3)
                 ON CONFLICT (node) DO UPDATE SET seen_until = EXCLUDED.seen_until, wire = EXCLUDED.wire",
                &[&self.node, &self.ttl_ms, &self.wire],
            )
            .await?;
        let agents: Vec<&str> = held.iter().map(|l| l.agent.as_str()).collect();
        let epochs: Vec<i64> = held.iter().map(epoch_of).collect::<Result<_, _>>()?;
        let rows = self
            .db
            .shared()
            .await?
            .query(
                // The rows are locked in the order of their agents, as a node's journal locks them for its fence:
                // a heartbeat and a commit never wait for each other in a circle.
                "WITH locked AS (
                     SELECT agent FROM agentry_owners WHERE agent = ANY($3) AND node = $1 ORDER BY agent FOR UPDATE
                 )
                 UPDATE agentry_owners AS o SET expires_at = now() + $2::bigint * interval '1 millisecond'
                 FROM unnest($3::text[], $4::bigint[]) AS h(agent, epoch), locked AS l
                 WHERE o.agent = h.agent AND o.agent = l.agent AND o.epoch = h.epoch AND o.node = $1
                 RETURNING o.agent, o.node, o.epoch, o.expires_at",
                &[&self.node, &self.ttl_ms, &agents, &epochs],
            )
            .await?;
        let kept: Vec<Lease> = rows.iter().map(lease).collect::<Result<_, _>>()?;
        let renewed: std::collections::HashSet<&AgentId> = kept.iter().map(|k| &k.agent).collect();
        let lost = held.iter().filter(|l| !renewed.contains(&l.agent)).cloned().collect();
        Ok(Heartbeat { kept, lost })
    }

    /// The nodes whose last heartbeat has not run out (on the database's clock), sorted by name: where
    /// [`crate::placement::place`] may put agents.
    pub async fn live_nodes(&self) -> Result<Vec<String>, LeaseError> {
        let rows = self
            .db
            .shared()
            .await?
            .query("SELECT node FROM agentry_nodes WHERE seen_until > now() ORDER BY node", &[])
            .await?;
        rows.iter().map(|r| r.try_get(0).map_err(LeaseError::from)).collect()
    }

    /// Gives the lease up (the agent is free for any node at once); a lease already lost is left as it is.
    pub async fn release(&self, held: &Lease) -> Result<(), LeaseError> {
        self.db
            .shared()
            .await?
            .execute(
                "DELETE FROM agentry_owners WHERE agent = $1 AND node = $2 AND epoch = $3",
                &[&held.agent.as_str(), &held.node, &epoch_of(held)?],
            )
            .await?;
        Ok(())
    }

    /// Ends this node's lease now, if it still holds it at that epoch, keeping the epoch: any node may claim the
    /// agent at once, at the next epoch (unlike [`Owners::release`], after which a claim starts at epoch 1 again).
    /// For a node that leaves the cluster.
    pub async fn let_go(&self, held: &Lease) -> Result<(), LeaseError> {
        self.db
            .shared()
            .await?
            .execute(
                "UPDATE agentry_owners SET expires_at = now() WHERE agent = $1 AND node = $2 AND epoch = $3",
                &[&held.agent.as_str(), &held.node, &epoch_of(held)?],
            )
            .await?;
        Ok(())
    }

    /// Ends whoever's lease on the agent now, keeping its epoch: the next claim takes the agent with the
    /// next epoch. For an operator's explicit failover (a node known dead before its leases run out).
    pub async fn expire(&self, agent: &AgentId) -> Result<(), LeaseError> {
        self.db
            .shared()
            .await?
            .execute(
                "UPDATE agentry_owners SET expires_at = now() WHERE agent = $1 AND expires_at > now()",
                &[&agent.as_str()],
            )
            .await?;
        Ok(())
    }

    /// The agents a shared journal keeps (awake or asleep) that nobody holds or whose lease ran out: those of a
    /// node that died or let them go, for a live node to claim (see [`crate::Node::tick`]). Needs the journal's
    /// tables (a node's journal makes them).
    pub async fn orphans(&self) -> Result<Vec<AgentId>, LeaseError> {
        let rows = self
            .db
            .shared()
            .await?
            .query(
                "SELECT a.agent FROM agentry_agents a LEFT JOIN agentry_owners o ON o.agent = a.agent
                 WHERE o.agent IS NULL OR o.expires_at <= now() ORDER BY a.agent",
                &[],
            )
            .await?;
        agent_ids(&rows)
    }

    /// Which of `agents` the shared journal no longer keeps (they ended), in order.
    pub async fn ended(&self, agents: &[AgentId]) -> Result<Vec<AgentId>, LeaseError> {
        let names: Vec<&str> = agents.iter().map(AgentId::as_str).collect();
        let rows = self
            .db
            .shared()
            .await?
            .query(
                "SELECT h.agent FROM unnest($1::text[]) AS h(agent)
                 WHERE NOT EXISTS (SELECT 1 FROM agentry_agents a WHERE a.agent = h.agent) ORDER BY h.agent",
                &[&names],
            )
            .await?;
        agent_ids(&rows)
    }

    /// The agent's lease as the database has it now (expired or not), if anyone ever held it and did not
    /// release it.
    pub async fn owner(&self, agent: &AgentId) -> Result<Option<Lease>, LeaseError> {
        let row = self
            .db
            .shared()
            .await?
            .query_opt("SELECT agent, node, epoch, expires_at FROM agentry_owners WHERE agent = $1", &[&agent.as_str()])
            .await?;
        row.as_ref().map(lease).transpose()
    }
}

/// The fence: the first statement of every write made under `held`, in the write's own transaction. It locks the
/// agent's lease row for share until the transaction ends (a takeover waits for it) and refuses unless the lease
/// is still `held`'s node's, at its epoch, and not expired. The rest of the transaction writes only if this
/// passes; a refusal leaves the transaction to be rolled back.
pub async fn fence(tx: &impl GenericClient, held: &Lease) -> Result<(), LeaseError> {
    let row = tx
        .query_opt(
            "SELECT agent, node, epoch, expires_at, expires_at <= now() AS expired
             FROM agentry_owners WHERE agent = $1 FOR SHARE",
            &[&held.agent.as_str()],
        )
        .await?;
    let Some(row) = row else { return Err(lost(held, None)) };
    let now = lease(&row)?;
    if now.node != held.node || now.epoch != held.epoch {
        return Err(lost(held, Some(now)));
    }
    let expired: bool = row.try_get("expired")?;
    if expired {
        return Err(LeaseError::Expired {
            agent: held.agent.clone(),
            node: held.node.clone(),
            epoch: held.epoch,
            at: now.expires_at,
        });
    }
    Ok(())
}

fn lease(row: &Row) -> Result<Lease, LeaseError> {
    let agent: String = row.try_get("agent")?;
    let epoch: i64 = row.try_get("epoch")?;
    Ok(Lease {
        agent: agent_id(&agent)?,
        node: row.try_get("node")?,
        epoch: u64::try_from(epoch).map_err(|_| LeaseError::Corrupt(format!("epoch {epoch}")))?,
        expires_at: row.try_get("expires_at")?,
    })
}

/// An agent id as the lease table or the journal keeps it: one that is not an id is a corrupt row.
fn agent_id(text: &str) -> Result<AgentId, LeaseError> {
    AgentId::new(text).map_err(|e| LeaseError::Corrupt(format!("agent `{text}`: {e}")))
}

/// The agent ids in the first column of `rows`.
fn agent_ids(rows: &[Row]) -> Result<Vec<AgentId>, LeaseError> {
    rows.iter().map(|row| agent_id(&row.try_get::<_, String>(0)?)).collect()
}

fn epoch_of(held: &Lease) -> Result<i64, LeaseError> {
    i64::try_from(held.epoch).map_err(|_| LeaseError::Corrupt(format!("epoch {}", held.epoch)))
}

fn lost(held: &Lease, now: Option<Lease>) -> LeaseError {
    let now = match now {
        Some(now) => format!("node `{}` holds it at epoch {}", now.node, now.epoch),
        None => "nobody holds it".to_owned(),
    };
    LeaseError::Lost { agent: held.agent.clone(), node: held.node.clone(), epoch: held.epoch, now }
}
