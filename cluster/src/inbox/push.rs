//! Pushing signals into agents' inboxes: checked, then kept in one transaction per batch. A [`Pusher`] gathers
//! the pushes that arrive together on its connection and commits them at once (group commit): a push costs its
//! statement and a share of one commit, where it cost a commit of its own, and the commit is most of a push's
//! time. Each push still gets its own answer: kept, a duplicate, or refused because the inbox is full.

use super::{CHANNEL, InboxError, Pushed, relayable};
use crate::db::Db;
use agentry::id::AgentId;
use agentry::signal::Signal;
use tokio::sync::{mpsc, oneshot};
use tokio_postgres::Client;

/// The most pushes one commit takes.
const BATCH: usize = 256;
/// The most pushes waiting for a pusher's connection; a caller past it waits for room.
const QUEUE: usize = 4 * BATCH;

/// One push, checked and serialized.
pub(crate) struct Push {
    agent: AgentId,
    signal: uuid::Uuid,
    body: String,
    caller: Option<String>,
    relayed: bool,
    notify: bool,
}

impl Push {
    /// `signal` for `agent`, from node `caller` if it is a call; `relayed` if another node's runtime made it;
    /// `notify` to wake the listeners. A signal of the runtime's own kinds is refused here, as the runtime
    /// would refuse it at delivery, rather than kept to block the agent's inbox.
    pub(crate) fn new(
        agent: &AgentId,
        signal: &Signal,
        caller: Option<&str>,
        relayed: bool,
        notify: bool,
    ) -> Result<Self, InboxError> {
        let forged = match relayed {
            true => !relayable(signal),
            false => {
                agentry::kinds::is_reserved(signal.kind().as_str())
                    || agentry::kinds::is_runtime_source(signal.source())
            }
        };
        let unkeepable = |why| InboxError::Unkeepable { agent: agent.as_str().chars().take(64).collect(), why };
        if agent.as_str().contains('\0') {
            return Err(unkeepable("it holds a NUL character"));
        }
        if agent.as_str().len() > super::AGENT_ID_MOST {
            return Err(unkeepable("it is too long"));
        }
        if forged {
            return Err(InboxError::Forged {
                kind: signal.kind().to_string(),
                source_name: signal.source().to_owned(),
            });
        }
        let body = serde_json::to_string(signal).map_err(|e| InboxError::Corrupt {
            agent: agent.clone(),
            message: format!("the signal does not serialize: {e}"),
        })?;
        Ok(Self { agent: agent.clone(), signal: signal.id(), body, caller: caller.map(str::to_owned), relayed, notify })
    }
}

/// Keeps `pushes` in one transaction, in their order, each agent's inbox holding at most `limit` waiting: what
/// each came to, in order. An error is the transaction's: then none was kept.
///
/// Pushes for one agent go one transaction at a time, so a count and the insert after it see the same inbox:
/// the transaction first takes a lock per agent, all in one statement and in one order (by the lock's key) for
/// every batch, so two batches never wait on each other in a circle. Each statement is sent without waiting for
/// the one before (pipelined), and each push's statement, run once the locks are held, sees the pushes that held
/// them before it.
pub(crate) async fn push_all(
    client: &mut Client,
    limit: u32,
    pushes: &[Push],
) -> Result<Vec<Result<Pushed, InboxError>>, tokio_postgres::Error> {
    let tx = client.transaction().await?;
    let agents: Vec<&str> = pushes.iter().map(|push| push.agent.as_str()).collect();
    let lock_params: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&agents];
    let lock = tx.execute(
        "SELECT pg_advisory_xact_lock(locks.key)
         FROM (SELECT DISTINCT hashtext(agent) AS key FROM unnest($1::text[]) AS agent ORDER BY key) AS locks",
        &lock_params,
    );
    let most = i64::from(limit);
    type Param<'a> = &'a (dyn tokio_postgres::types::ToSql + Sync);
    let params: Vec<[Param<'_>; 8]> = pushes
        .iter()
        .zip(&agents)
        .map(|(push, agent)| -> [Param<'_>; 8] {
            [agent, &push.signal, &push.body, &push.caller, &push.relayed, &most, &CHANNEL, &push.notify]
        })
        .collect();
    let each = params.iter().map(|params| {
        tx.query_one(
            "WITH held AS (SELECT count(*) AS n FROM agentry_inbox WHERE agent = $1 AND consumed IS NULL),
                  kept AS (
                      INSERT INTO agentry_inbox (agent, signal, body, caller, relayed)
                      SELECT $1, $2, $3, $4, $5 FROM held WHERE held.n < $6
                      ON CONFLICT (agent, signal) DO NOTHING RETURNING place
                  ),
                  told AS (SELECT pg_notify($7, $1) FROM kept WHERE $8)
             SELECT (SELECT count(*) FROM kept) AS kept,
                    (SELECT count(*) FROM agentry_inbox WHERE agent = $1 AND signal = $2) AS present,
                    (SELECT count(*) FROM told) AS told",
            params,
        )
    });
    let (_, rows) = futures_util::try_join!(lock, futures_util::future::try_join_all(each))?;
    let mut answers = Vec::with_capacity(pushes.len());
    for (row, push) in rows.iter().zip(pushes) {
        let (kept, present): (i64, i64) = (row.try_get("kept")?, row.try_get("present")?);
        answers.push(match (kept, present) {
            (0, 0) => Err(InboxError::Full { agent: push.agent.clone(), limit }),
            (0, _) => Ok(Pushed::Duplicate),
            _ => Ok(Pushed::Kept),
        });
    }
    if answers.iter().any(|answer| matches!(answer, Ok(Pushed::Kept))) {
        tx.commit().await?;
    } else {
        tx.rollback().await?;
    }
    Ok(answers)
}

/// A push waiting for its batch, and where its answer goes.
type Queued = (Push, oneshot::Sender<Result<Pushed, InboxError>>);

/// A connection to the inboxes that keeps the pushes arriving together in one commit (group commit), each with
/// its own answer, as [`crate::Inbox`]'s pushes give it: for whatever pushes many signals at once (a node pushes
/// what comes over the wire through four of them). Pushes go in the order they were made. A task of its own
/// keeps them; it ends when the pusher is dropped.
pub struct Pusher {
    queue: mpsc::Sender<Queued>,
}

impl Pusher {
    /// Connects to PostgreSQL at `url`; each agent's inbox holds at most `limit` signals waiting. The connection
    /// opens itself again if it drops.
    pub async fn connect(url: &str, limit: u32) -> Result<Self, InboxError> {
        let db = Db::connect(url, "inbox pushes").await?;
        let (queue, waiting) = mpsc::channel(QUEUE);
        tokio::spawn(keep_pushing(db, limit, waiting));
        Ok(Self { queue })
    }

    /// [`crate::Inbox::keep_here`], in a batch.
    pub async fn keep_here(&self, agent: &AgentId, signal: &Signal, relayed: bool) -> Result<Pushed, InboxError> {
        self.queue_push(Push::new(agent, signal, None, relayed, false)?).await
    }

    /// [`crate::Inbox::relay`], in a batch.
    pub async fn relay(&self, agent: &AgentId, signal: &Signal) -> Result<Pushed, InboxError> {
        self.queue_push(Push::new(agent, signal, None, true, true)?).await
    }

    /// [`crate::Inbox::push`], in a batch.
    pub async fn push(&self, agent: &AgentId, signal: &Signal) -> Result<Pushed, InboxError> {
        self.queue_push(Push::new(agent, signal, None, false, true)?).await
    }

    /// [`crate::Inbox::push_call`], in a batch.
    pub async fn push_call(&self, agent: &AgentId, signal: &Signal, caller: &str) -> Result<Pushed, InboxError> {
        self.queue_push(Push::new(agent, signal, Some(caller), false, true)?).await
    }

    /// Keeps a push, with the others waiting at the time: what it came to.
    async fn queue_push(&self, push: Push) -> Result<Pushed, InboxError> {
        let (told, answer) = oneshot::channel();
        let gone = || InboxError::Batch { message: "the pusher's task ended".to_owned() };
        self.queue.send((push, told)).await.map_err(|_| gone())?;
        answer.await.map_err(|_| gone())?
    }
}

/// The pusher's task: takes what waits, up to a batch, and keeps it in one commit; until the pusher is dropped.
async fn keep_pushing(db: Db, limit: u32, mut waiting: mpsc::Receiver<Queued>) {
    let mut batch: Vec<Queued> = Vec::with_capacity(BATCH);
    while waiting.recv_many(&mut batch, BATCH).await > 0 {
        let (pushes, answers): (Vec<Push>, Vec<_>) = batch.drain(..).unzip();
        let kept = match db.alone().await {
            Ok(mut client) => push_all(&mut client, limit, &pushes).await,
            Err(err) => Err(err),
        };
        match kept {
            Ok(kept) => {
                for (answer, told) in kept.into_iter().zip(answers) {
                    let _ = told.send(answer);
                }
            }
            // The database refused a statement (not the connection dropping): one push may have failed them
            // all, so each goes again on its own, and only what fails alone fails.
            Err(err) if pushes.len() > 1 && err.as_db_error().is_some() => {
                tracing::warn!(%err, pushes = pushes.len(), "a batch of inbox pushes failed: each is tried on its own");
                for (push, told) in pushes.iter().zip(answers) {
                    let alone = match db.alone().await {
                        Ok(mut client) => push_all(&mut client, limit, std::slice::from_ref(push)).await,
                        Err(err) => Err(err),
                    };
                    let answer = match alone {
                        Ok(mut answers) => {
                            answers.pop().unwrap_or(Err(InboxError::Batch { message: "no answer".to_owned() }))
                        }
                        Err(err) => Err(InboxError::Database(err)),
                    };
                    let _ = told.send(answer);
                }
            }
            Err(err) => {
                tracing::warn!(%err, pushes = pushes.len(), "a batch of inbox pushes was not kept");
                for told in answers {
                    let _ = told.send(Err(InboxError::Batch { message: err.to_string() }));
                }
            }
        }
    }
}
