//! The durable inbox: signals for an agent whose owner is unreachable, or that sleeps, kept in PostgreSQL until
//! its owner takes them. Every signal keeps its id, and the inbox holds each id once, so a sender that retries
//! after a reconnect never makes a signal arrive twice. A push wakes whoever listens (`LISTEN`/`NOTIFY`), so the
//! owner need not poll; a take is fenced by the owner's lease (see [`crate::owners::fence`]), so a node that
//! lost the agent cannot take its signals.
//!
//! A node delivers the signals waiting for an agent it holds ([`Inbox::waiting`]) and its journal marks each one
//! consumed in the same commit that logs it as the agent's input: a signal delivered again after a crash before
//! that commit is logged once, and one consumed is never delivered again. A consumed signal's row is kept a while
//! ([`Inbox::purge`]), so a sender's late retry is still a duplicate.
//!
//! Whatever a peer can make the inbox keep has a limit: an agent's inbox holds at most its `limit` signals
//! waiting, and a push past it is refused with [`InboxError::Full`].

mod push;

use crate::db::Db;
use crate::owners::{Lease, LeaseError, fence};
use agentry::id::AgentId;
use agentry::signal::Signal;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use tokio::sync::{Notify, mpsc};
use tokio_postgres::{AsyncMessage, Client, NoTls};

pub use push::Pusher;

/// Whether a node may relay this signal to an agent of another node (over the wire, or through the agent's
/// inbox): its agents' own signals, and a child's end from that child. The runtime's other kinds (a run's
/// outcome, a job's news) never cross nodes.
pub fn relayable(signal: &Signal) -> bool {
    let kind = signal.kind().as_str();
    if kind == agentry::kinds::AGENT_CHILD_EXITED {
        let child = signal.data()["child"].as_str().and_then(|c| AgentId::new(c).ok());
        return child.is_some_and(|child| *agentry::kinds::agent_source(&child) == *signal.source());
    }
    !agentry::kinds::is_reserved(kind)
}

/// The longest agent id an inbox keeps, in bytes (PostgreSQL's index and notifications hold a few kB at most).
pub const AGENT_ID_MOST: usize = 1024;

/// The channel a push notifies, with the agent's id as the payload.
pub const CHANNEL: &str = "agentry_inbox";
/// The channel a reply notifies, with the call's signal id as the payload.
pub const REPLIES: &str = "agentry_replies";

/// A signal waiting in an inbox, and the node that waits for the agent's reply to it, for a call.
#[derive(Debug, Clone, PartialEq)]
pub struct Waiting {
    /// The signal.
    pub signal: Signal,
    /// The node that called, if it is a call.
    pub caller: Option<String>,
    /// Made by another node's runtime (an agent's emit, a child's end), given as it was made.
    pub relayed: bool,
}

/// What a push or a take could not do.
#[derive(Debug, thiserror::Error)]
pub enum InboxError {
    /// A signal of the runtime's own kinds, or claiming to come from the runtime: only the runtime makes those.
    #[error(
        "a signal of kind `{kind}` from `{source_name}` cannot be sent to an agent; expected a kind and a source of the application's own"
    )]
    Forged {
        /// Its kind.
        kind: String,
        /// Its source.
        source_name: String,
    },
    /// The agent's inbox is full.
    #[error("the inbox of agent `{agent}` holds {limit} signals already; expected its owner to take some first")]
    Full {
        /// The agent.
        agent: AgentId,
        /// Its limit.
        limit: u32,
    },
    /// A take under a lease that is no longer the node's.
    #[error(transparent)]
    Fenced(#[from] LeaseError),
    /// A stored signal that does not read as one.
    #[error("the inbox of agent `{agent}` holds a body that is not a signal: {message}")]
    Corrupt {
        /// The agent.
        agent: AgentId,
        /// Why.
        message: String,
    },
    /// The database failed or refused.
    #[error("PostgreSQL: {0}")]
    Database(#[from] tokio_postgres::Error),
    /// An agent id the inbox's table cannot hold (PostgreSQL's text refuses a NUL character, and its index and
    /// its notifications a very long id).
    #[error(
        "agent id `{agent}` cannot be kept in an inbox: {why}; expected at most {AGENT_ID_MOST} bytes without NUL characters"
    )]
    Unkeepable {
        /// The id, cut to its first 64 characters.
        agent: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// The commit of the batch of pushes this one was in failed, or its answer was lost with the connection: a
    /// retry is safe (a push that was kept after all is a duplicate).
    #[error("a batch of inbox pushes may not have been kept: {message}; expected a retry to find out")]
    Batch {
        /// Why.
        message: String,
    },
}

/// What a push did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pushed {
    /// Kept: its owner will take it.
    Kept,
    /// The inbox had this signal already (a retry): nothing changed.
    Duplicate,
}

/// The inbox table, through one connection.
pub struct Inbox {
    db: Db,
    limit: u32,
}

impl Inbox {
    /// Connects to PostgreSQL at `url`, with at most `limit` signals kept for one agent, and makes the table if
    /// it is not there. The connection opens itself again if it drops.
    pub async fn connect(url: &str, limit: u32) -> Result<Self, InboxError> {
        Ok(Self { db: Db::connect(url, "inbox").await?, limit })
    }

    /// Keeps `signal` for `agent`, once: a signal whose id the inbox has for the agent is a duplicate. Wakes the
    /// listeners.
    pub async fn push(&self, agent: &AgentId, signal: &Signal) -> Result<Pushed, InboxError> {
        self.push_from(agent, signal, None, false, true).await
    }

    /// Keeps a signal another node's runtime made for the agent (an agent's emit, a child's end: see
    /// [`relayable`]), for when the agent's node cannot be reached over the wire: given to the agent as it was
    /// made, once.
    pub async fn relay(&self, agent: &AgentId, signal: &Signal) -> Result<Pushed, InboxError> {
        self.push_from(agent, signal, None, true, true).await
    }

    /// [`Inbox::push`] (or [`Inbox::relay`]) by the node that holds the agent and gives it the signal at once
    /// itself: nobody else is woken.
    pub async fn keep_here(&self, agent: &AgentId, signal: &Signal, relayed: bool) -> Result<Pushed, InboxError> {
        self.push_from(agent, signal, None, relayed, false).await
    }

    /// [`Inbox::push`] for a call from node `caller`: the node that holds the agent posts its reply
    /// ([`Inbox::reply`]), which the caller hears on [`REPLIES`].
    pub async fn push_call(&self, agent: &AgentId, signal: &Signal, caller: &str) -> Result<Pushed, InboxError> {
        self.push_from(agent, signal, Some(caller), false, true).await
    }

    async fn push_from(
        &self,
        agent: &AgentId,
        signal: &Signal,
        caller: Option<&str>,
        relayed: bool,
        notify: bool,
    ) -> Result<Pushed, InboxError> {
        let push = push::Push::new(agent, signal, caller, relayed, notify)?;
        let mut client = self.db.alone().await?;
        let mut answers = push::push_all(&mut client, self.limit, std::slice::from_ref(&push)).await?;
        answers.pop().unwrap_or(Err(InboxError::Batch { message: "a push had no answer".to_owned() }))
    }

    /// Takes the agent's waiting signals, oldest first, at most `max`, under the owner's lease: they are marked
    /// consumed when the transaction commits, and only if the lease still holds. (For a consumer that keeps them
    /// itself; a node's agents consume them through [`Inbox::waiting`] and their journal.)
    pub async fn take(&self, held: &Lease, max: u32) -> Result<Vec<Signal>, InboxError> {
        let mut client = self.db.alone().await?;
        let tx = client.transaction().await?;
        fence(&tx, held).await?;
        let rows = tx
            .query(
                "UPDATE agentry_inbox SET consumed = now() WHERE place IN (
                     SELECT place FROM agentry_inbox WHERE agent = $1 AND consumed IS NULL ORDER BY place LIMIT $2
                 ) RETURNING place, body",
                &[&held.agent.as_str(), &i64::from(max)],
            )
            .await?;
        let taken = signals(&held.agent, &rows)?;
        tx.commit().await?;
        Ok(taken)
    }

    /// The agent's waiting signals, oldest first, at most `max`, left waiting: a node gives them to the agent,
    /// and its journal marks each consumed as it logs it.
    pub async fn waiting(&self, agent: &AgentId, max: u32) -> Result<Vec<Waiting>, InboxError> {
        let rows = self
            .db
            .shared()
            .await?
            .query(
                "SELECT place, body, caller, relayed FROM agentry_inbox WHERE agent = $1 AND consumed IS NULL \
                 ORDER BY place LIMIT $2",
                &[&agent.as_str(), &i64::from(max)],
            )
            .await?;
        let callers: Vec<Option<String>> = rows.iter().map(|r| r.try_get("caller")).collect::<Result<_, _>>()?;
        let relayed: Vec<bool> = rows.iter().map(|r| r.try_get("relayed")).collect::<Result<_, _>>()?;
        let signals = signals(agent, &rows)?;
        let waiting = signals.into_iter().zip(callers).zip(relayed);
        Ok(waiting.map(|((signal, caller), relayed)| Waiting { signal, caller, relayed }).collect())
    }

    /// Posts the agent's reply to the call `signal` (once: a second reply to it changes nothing), and wakes the
    /// caller.
    pub async fn reply(&self, signal: uuid::Uuid, reply: &serde_json::Value) -> Result<(), InboxError> {
        self.db
            .shared()
            .await?
            .execute(
                "WITH posted AS (INSERT INTO agentry_replies (signal, body) VALUES ($1, $2) \
                 ON CONFLICT (signal) DO NOTHING RETURNING signal) \
                 SELECT pg_notify($3, signal::text) FROM posted",
                &[&signal, &reply.to_string(), &REPLIES],
            )
            .await?;
        Ok(())
    }

    /// Takes the reply to the call `signal`, if it came.
    pub async fn take_reply(&self, signal: uuid::Uuid) -> Result<Option<serde_json::Value>, InboxError> {
        let row = self
            .db
            .shared()
            .await?
            .query_opt("DELETE FROM agentry_replies WHERE signal = $1 RETURNING body", &[&signal])
            .await?;
        let Some(row) = row else { return Ok(None) };
        let body: String = row.try_get(0)?;
        Ok(Some(serde_json::from_str(&body).unwrap_or(serde_json::Value::String(body))))
    }

    /// Which of `agents` have signals waiting.
    pub async fn with_waiting(&self, agents: &[AgentId]) -> Result<Vec<AgentId>, InboxError> {
        let names: Vec<&str> = agents.iter().map(AgentId::as_str).collect();
        let rows = self
            .db
            .shared()
            .await?
            .query(
                "SELECT DISTINCT agent FROM agentry_inbox WHERE agent = ANY($1) AND consumed IS NULL ORDER BY agent",
                &[&names],
            )
            .await?;
        // The rows name agents of `agents`: those are given back.
        let waiting: std::collections::HashSet<String> = rows.iter().map(|r| r.try_get(0)).collect::<Result<_, _>>()?;
        Ok(agents.iter().filter(|agent| waiting.contains(agent.as_str())).cloned().collect())
    }

    /// Forgets signals consumed more than `kept` ago (a retry of one after that is taken as new); returns how
    /// many.
    pub async fn purge(&self, kept: std::time::Duration) -> Result<u64, InboxError> {
        let ms = i64::try_from(kept.as_millis()).unwrap_or(i64::MAX);
        let purged = self
            .db
            .shared()
            .await?
            .execute("DELETE FROM agentry_inbox WHERE consumed < now() - $1::bigint * interval '1 millisecond'", &[&ms])
            .await?;
        // Replies nobody took (their caller gave up) go with them.
        self.db
            .shared()
            .await?
            .execute("DELETE FROM agentry_replies WHERE made < now() - $1::bigint * interval '1 millisecond'", &[&ms])
            .await?;
        Ok(purged)
    }

    /// How many signals wait in the agent's inbox.
    pub async fn len(&self, agent: &AgentId) -> Result<u64, InboxError> {
        let count: i64 = self
            .db
            .shared()
            .await?
            .query_one("SELECT count(*) FROM agentry_inbox WHERE agent = $1 AND consumed IS NULL", &[&agent.as_str()])
            .await?
            .get(0);
        Ok(u64::try_from(count).unwrap_or(0))
    }
}

/// Signals from their rows (place, body), in order of place.
fn signals(agent: &AgentId, rows: &[tokio_postgres::Row]) -> Result<Vec<Signal>, InboxError> {
    let mut found: Vec<(i64, Signal)> = Vec::with_capacity(rows.len());
    for row in rows {
        let body: String = row.try_get("body")?;
        let signal = serde_json::from_str(&body)
            .map_err(|e| InboxError::Corrupt { agent: agent.clone(), message: e.to_string() })?;
        found.push((row.try_get("place")?, signal));
    }
    found.sort_by_key(|(place, _)| *place);
    Ok(found.into_iter().map(|(_, signal)| signal).collect())
}

/// How many agents named by pushes a [`Listener`] keeps until they are taken; past that, it notes only that it
/// missed some ([`Heard::Missed`]).
pub const PUSHED_AT_MOST: usize = 65_536;

/// Pushes as they happen, on a connection of its own: each names its agent (see [`listen`]).
pub struct Listener {
    /// The session: it listens as long as this lives.
    _client: Client,
    pushed: Arc<Pushes>,
    replied: mpsc::UnboundedReceiver<uuid::Uuid>,
}

/// The agents pushes named and that were not taken yet: each agent once, with how many pushes named it, taking
/// turns (an agent named by several comes once per push, after the others waiting then, as a backlog deeper than
/// a delivery's page needs): what a burst of pushes makes a node keep is bounded by [`PUSHED_AT_MOST`] agents.
#[derive(Default)]
struct Pushes {
    named: Mutex<Named>,
    more: Notify,
}

#[derive(Default)]
struct Named {
    order: VecDeque<AgentId>,
    /// How many pushes named each agent in `order` that were not taken yet.
    kept: HashMap<AgentId, u64>,
    /// Some were not kept (too many waited).
    missed: bool,
    /// The connection ended.
    ended: bool,
}

impl Pushes {
    fn named(&self) -> std::sync::MutexGuard<'_, Named> {
        self.named.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A push for `agent` was heard.
    fn heard(&self, agent: AgentId) {
        {
            let mut named = self.named();
            if let Some(pushes) = named.kept.get_mut(&agent) {
                *pushes = pushes.saturating_add(1);
            } else if named.kept.len() >= PUSHED_AT_MOST {
                named.missed = true;
            } else {
                named.kept.insert(agent.clone(), 1);
                named.order.push_back(agent);
            }
        }
        self.more.notify_one();
    }

    fn end(&self) {
        self.named().ended = true;
        self.more.notify_one();
    }

    /// The next agent named (or, with `missed`, word that some were not kept); `None` once the connection ended
    /// and every one was taken.
    async fn next(&self, missed: bool) -> Option<Heard> {
        loop {
            {
                let mut named = self.named();
                if missed && named.missed {
                    named.missed = false;
                    return Some(Heard::Missed);
                }
                if let Some(agent) = named.order.pop_front() {
                    // Named again meanwhile: its turn comes again, after the others.
                    match named.kept.get_mut(&agent) {
                        Some(pushes) if *pushes > 1 => {
                            *pushes -= 1;
                            named.order.push_back(agent.clone());
                        }
                        _ => {
                            named.kept.remove(&agent);
                        }
                    }
                    return Some(Heard::Pushed(agent));
                }
                if named.ended {
                    return None;
                }
            }
            // (A push heard between the look above and this wait leaves its notice for it.)
            self.more.notified().await;
        }
    }
}

impl Listener {
    /// The agent of the next push (an agent named by several pushes not taken yet comes once per push, taking
    /// turns with the others); `None` once the connection ended. Past [`PUSHED_AT_MOST`] agents waiting to be
    /// taken, a push for another is not kept, without a word here: [`Listener::next`] says so.
    pub async fn recv(&mut self) -> Option<AgentId> {
        match self.pushed.next(false).await {
            Some(Heard::Pushed(agent)) => Some(agent),
            _ => None,
        }
    }

    /// The call whose reply was posted next ([`Inbox::reply`]); `None` once the connection ended.
    pub async fn recv_reply(&mut self) -> Option<uuid::Uuid> {
        self.replied.recv().await
    }

    /// The next push or reply, whichever comes first; `None` once the connection ended.
    pub async fn next(&mut self) -> Option<Heard> {
        tokio::select! {
            pushed = self.pushed.next(true) => pushed,
            replied = self.replied.recv() => replied.map(Heard::Replied),
        }
    }
}

/// What a [`Listener`] heard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Heard {
    /// A push for this agent.
    Pushed(AgentId),
    /// The reply to this call.
    Replied(uuid::Uuid),
    /// Pushes came faster than they were taken, and some of the agents they named were not kept
    /// ([`PUSHED_AT_MOST`]): every agent may have signals waiting.
    Missed,
}

/// Starts listening for pushes and replies. A push or a reply made after this returns is heard.
pub async fn listen(url: &str) -> Result<Listener, InboxError> {
    let (client, mut connection) = tokio_postgres::connect(url, NoTls).await?;
    let pushed = Arc::new(Pushes::default());
    let heard = Arc::downgrade(&pushed);
    let (reply_tx, replied) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                Some(Ok(AsyncMessage::Notification(note))) if note.channel() == CHANNEL => {
                    let Some(pushes) = heard.upgrade() else { break };
                    if let Ok(agent) = AgentId::new(note.payload()) {
                        pushes.heard(agent);
                    }
                }
                Some(Ok(AsyncMessage::Notification(note))) if note.channel() == REPLIES => {
                    // Nobody may listen for replies: pushes go on.
                    if let Ok(call) = note.payload().parse() {
                        let _ = reply_tx.send(call);
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(error)) => {
                    tracing::warn!(%error, "the inbox listener's connection failed");
                    break;
                }
                None => break,
            }
        }
        if let Some(pushes) = heard.upgrade() {
            pushes.end();
        }
    });
    client.batch_execute(&format!("LISTEN {CHANNEL}; LISTEN {REPLIES}")).await?;
    Ok(Listener { _client: client, pushed, replied })
}

#[cfg(test)]
mod pushes_heard {
    use super::{Heard, PUSHED_AT_MOST, Pushes};
    use agentry::id::AgentId;

    fn agent(n: usize) -> AgentId {
        AgentId::new(format!("a{n}")).expect("an id")
    }

    #[tokio::test]
    async fn an_agent_named_again_comes_once_per_push_taking_turns_with_the_others_kept_once() {
        let pushes = Pushes::default();
        for n in [1, 2, 1, 3, 2, 1] {
            pushes.heard(agent(n));
        }
        assert_eq!(pushes.named().order.len(), 3, "each agent kept once");
        for n in [1, 2, 3, 1, 2, 1] {
            assert_eq!(pushes.next(true).await, Some(Heard::Pushed(agent(n))));
        }
        // All taken: named again, it comes again.
        pushes.heard(agent(1));
        pushes.end();
        assert_eq!(pushes.next(true).await, Some(Heard::Pushed(agent(1))));
        assert_eq!(pushes.next(true).await, None, "the connection ended");
    }

    #[tokio::test]
    async fn past_the_bound_a_push_is_noted_as_missed_not_kept() {
        let pushes = Pushes::default();
        for n in 0..=PUSHED_AT_MOST {
            pushes.heard(agent(n));
        }
        assert_eq!(pushes.named().kept.len(), PUSHED_AT_MOST, "no more kept than the bound");
        assert_eq!(pushes.next(true).await, Some(Heard::Missed), "word that some were missed comes first");
        assert_eq!(pushes.next(true).await, Some(Heard::Pushed(agent(0))));
        // `recv` (agents only) does not say it.
        pushes.named().missed = true;
        assert_eq!(pushes.next(false).await, Some(Heard::Pushed(agent(1))));
    }

    #[tokio::test]
    async fn a_wait_wakes_for_a_push_heard_after_it_began() {
        let pushes = std::sync::Arc::new(Pushes::default());
        let waiting = tokio::spawn({
            let pushes = pushes.clone();
            async move { pushes.next(true).await }
        });
        tokio::task::yield_now().await;
        pushes.heard(agent(7));
        assert_eq!(waiting.await.expect("the wait ends"), Some(Heard::Pushed(agent(7))));
    }
}
