//! A node: one runtime among several that share a journal in PostgreSQL, running the agents whose leases it
//! holds. It writes only under those leases ([`Fence`]: the database refuses a write for an agent this node no
//! longer holds), renews them with a heartbeat, stops its copy of an agent whose lease it lost (it was paused or
//! cut off past its lease, and another node took the agent), and takes over the agents of nodes that died: once
//! their leases ran out, each surviving node claims those that placement gives it and brings them back from the
//! journal, exactly as a restart does (interrupted runs, approvals, schedules and all).
//!
//! A signal for an agent this node does not hold goes into the agent's durable inbox ([`Node::send`]); the node
//! that holds the agent gives it the signals waiting there, in order, as soon as it hears of them (`LISTEN`), at
//! every round of upkeep, and when it takes the agent over. Its journal marks each one consumed in the same
//! commit that logs it as the agent's input, so each is applied once, whatever crashes.
//!
//! With a [`Wire`] (`NodeOptions::wire`), a signal or a call for an agent held elsewhere goes first over the wire
//! to the node that holds it, which puts it in the inbox and gives it to the agent at once (and sends a call's
//! reply straight back); the inbox still decides that it is applied once. When no node takes it over the wire
//! in time, it is left in the inbox as without a wire.

mod answer;
mod delivery;
mod forward;
mod handle;
mod holdings;
mod rebalance;
mod upkeep;

pub use handle::ClusterRef;
pub use rebalance::Rebalanced;

use crate::inbox::{Heard, Inbox, InboxError, Pushed, Waiting};
use crate::owners::{Lease, LeaseError, Owners};
use crate::placement;
use crate::wire::{Wire, WireError, WireEvent, WireOptions, WireReply, WireRequest};
use agentry::agent::Agent;
use agentry::events::EventKind;
use agentry::id::AgentId;
use agentry::runtime::{AgentRef, Elsewhere, Recovery, Runtime, RuntimeBuilder, RuntimeError, SpawnOptions};
use agentry::signal::Signal;
use agentry::store::{Fence, PostgresOptions, PostgresStore, StoreError};
use holdings::Holdings;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use uuid::Uuid;

/// How many connections a node pushes into inboxes through (side by side, each agent's through one; each
/// commits the pushes that arrive together at once).
const PUSH_CONNECTIONS: usize = 4;
/// How many waiting signals a node gives an agent at a time.
const DELIVER_AT_ONCE: u32 = 256;
/// How long a node waits for its agent's reply to a call from another node before giving up on posting it (and
/// the longest a call over the wire may ask it to wait).
pub(crate) const CALL_REPLY_WAIT: Duration = Duration::from_secs(300);
/// How long a consumed signal stays in its inbox, so that a sender's retry of it is a duplicate.
const RETRIES_KEPT: Duration = Duration::from_secs(24 * 3600);
/// A deadline for a call whose timeout is too long to add to the clock: thirty years.
const FOREVER: Duration = Duration::from_secs(30 * 365 * 24 * 3600);

/// How a node joins the cluster.
#[derive(Clone)]
pub struct NodeOptions {
    /// Its name, unique among the nodes (the lease table's `node`).
    pub name: String,
    /// The PostgreSQL connection string (from the environment: never from a file).
    pub url: String,
    /// How long its leases last unless renewed. A node that stops (a crash, a pause, a cut network) keeps its
    /// agents this long before another node may take them; it beats every third of it.
    pub lease: Duration,
    /// Keep every input and snapshot in the journal (see [`PostgresOptions::keep_inputs`]).
    pub keep_inputs: bool,
    /// The most signals that may wait in one agent's inbox.
    pub inbox_limit: u32,
    /// The wire to the other nodes, the fast path for signals and calls (none: the inbox only).
    pub wire: Option<WireOptions>,
    /// The broadest policy a peer may ask for an agent it spawns here ([`Node::spawn_on`] from another node): a
    /// spawn whose policy is not within it ([`agentry::policy::Policy::within`]) is refused, so a peer cannot
    /// start an agent with more than this node allows. The default policy by default (no capability granted).
    pub peer_spawns: agentry::policy::Policy,
}

impl std::fmt::Debug for NodeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The connection string may hold a password: never printed.
        f.debug_struct("NodeOptions")
            .field("name", &self.name)
            .field("lease", &self.lease)
            .field("keep_inputs", &self.keep_inputs)
            .field("inbox_limit", &self.inbox_limit)
            .field("wire", &self.wire)
            .field("peer_spawns", &self.peer_spawns)
            .finish_non_exhaustive()
    }
}

impl NodeOptions {
    /// A node named `name` on the database at `url`, with leases of 10 s and inboxes of 10,000 signals.
    pub fn new(name: impl Into<String>, url: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            url: url.into(),
            lease: Duration::from_secs(10),
            keep_inputs: false,
            inbox_limit: 10_000,
            wire: None,
            peer_spawns: agentry::policy::Policy::default(),
        }
    }
}

/// Where [`Node::send`] put a signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    /// To the agent, on this node.
    Here,
    /// Into the agent's inbox, for the node that holds it (or will).
    Inbox(Pushed),
    /// Over the wire to the node that holds the agent, which took it (new, or a duplicate it dropped).
    Wire(Pushed),
}

/// Why a node could not start or act.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// A lease could not be had or kept.
    #[error(transparent)]
    Lease(#[from] LeaseError),
    /// The journal could not be opened.
    #[error("the journal in PostgreSQL: {0}")]
    Store(#[from] StoreError),
    /// The runtime refused.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// An inbox refused or failed.
    #[error(transparent)]
    Inbox(#[from] InboxError),
    /// The wire could not start.
    #[error(transparent)]
    Wire(#[from] WireError),
    /// The node that holds the agent refused or failed a request over the wire.
    #[error("the node holding agent `{agent}` refused over the wire: {reason}")]
    Refused {
        /// The agent.
        agent: AgentId,
        /// What that node said.
        reason: String,
    },
    /// A spawn on another node, from a node without a wire.
    #[error("node `{node}` can be reached only over the wire, and this node has none")]
    NoWire {
        /// The node.
        node: String,
    },
    /// The agent type is not registered on the node asked to spawn it.
    #[error("agent type `{agent_type}` is not registered on node `{node}`; expected a type that node registers")]
    UnknownType {
        /// The node.
        node: String,
        /// The type's name.
        agent_type: String,
    },
    /// A spawn under an id the journal keeps already.
    #[error(
        "agent `{0}` is in the journal already (another node's, or one whose node died); expected a new id, or the node that takes it over to bring it back"
    )]
    Exists(AgentId),
    /// A spawn the journal did not keep (its commit failed, or this node lost the lease first): the agent is
    /// gone.
    #[error(
        "the journal did not keep the spawn of agent `{0}` (its commit failed, or this node lost its lease); the agent is gone: spawn it again"
    )]
    NotKept(AgentId),
}

/// What one round of a node's upkeep did ([`Node::tick`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tick {
    /// Agents whose leases it lost: it stopped its copies of them.
    pub lost: Vec<AgentId>,
    /// Agents of dead nodes it took over and brought back.
    pub taken: Vec<AgentId>,
    /// Agents that ended here: their leases let go.
    pub ended: Vec<AgentId>,
    /// Children that agents of this node spawned on a node that went down: their parents were told
    /// (`agent.child_exited`, the reason naming the node).
    pub children_down: Vec<AgentId>,
    /// Agents started again afresh (a new actor) that were given again the signals from their inboxes that went
    /// with their old mailboxes.
    pub given_again: Vec<AgentId>,
}

/// A runtime in a cluster. See the module docs.
pub struct Node {
    owners: Arc<Owners>,
    /// The inbox's connection for reads (several at once share it).
    inbox: Inbox,
    /// The inbox's connections for pushes, each agent's always through the same one (so its pushes from this
    /// node keep their order), several agents' side by side.
    pushers: Vec<crate::inbox::Pusher>,
    /// Per agent, the waiting signals this process gave it that its journal has not marked consumed yet (so they
    /// are not given twice while that commit is on its way).
    given: Given,
    /// Agents started again afresh (a new actor, the old one's mailbox gone), with what this node had given the
    /// old one from their inboxes: nothing more is given them until those are given again ([`Node::give_again`]).
    afresh: Given,
    /// Agents being handed over to other nodes ([`Node::rebalance`]): what comes for them waits in their inboxes.
    handing: Mutex<HashSet<AgentId>>,
    /// The agents the last round found ended (a lease is let go when two rounds in a row do).
    ending: Mutex<HashSet<AgentId>>,
    /// Agents taken over whose inboxes were not given yet: a send to one from here goes into its inbox, behind
    /// what waits there (a sender whose earlier signals waited there for it keeps its order).
    taking: Mutex<HashSet<AgentId>>,
    /// A bringing back ([`Node::bring_back`]) failed or left an agent out for a reason other than its type: the
    /// next round of upkeep brings back again what the journal holds under this node's leases.
    recover_again: std::sync::atomic::AtomicBool,
    /// Held while signals are given from an inbox.
    delivering: Mutex<HashMap<AgentId, Arc<tokio::sync::Mutex<()>>>>,
    /// Its leases, and the agents it runs and is starting.
    holdings: Arc<Holdings>,
    /// The inbox's connection that posts replies to calls from other nodes.
    replies: Arc<Inbox>,
    /// The calls this node made to agents held elsewhere, waiting for their replies, by signal id.
    calls: Mutex<HashMap<Uuid, tokio::sync::oneshot::Sender<serde_json::Value>>>,
    /// The calls that came over the wire to agents held here, waiting for their agents' replies, by signal id.
    wire_calls: Mutex<HashMap<Uuid, tokio::sync::oneshot::Sender<Result<serde_json::Value, String>>>>,
    /// The wire to the other nodes, if any.
    wire: Option<Wire>,
    /// This node, for the wire's requests (set by [`Node::keep`]: until then the wire answers `NotHere`).
    me: Arc<std::sync::OnceLock<std::sync::Weak<Node>>>,
    /// When this node last tried to connect to each peer it found in the database (one try per lease, so a
    /// handshake under way is not doubled by the next round).
    dialed: Mutex<HashMap<String, tokio::time::Instant>>,
    /// Peers whose connection on the wire ended: those the database no longer has alive went down.
    suspects: Mutex<HashSet<String>>,
    /// The children that agents of this node spawned on other nodes, by node: (child, parent).
    remote_children: Mutex<HashMap<String, Vec<(AgentId, AgentId)>>>,
    /// The lanes of the signals its runtime has for elsewhere, until [`Node::keep`] starts sending them on.
    forward: Mutex<Option<Vec<tokio::sync::mpsc::Receiver<forward::Forward>>>>,
    /// Where they are queued (and marks, for [`Node::sent_on`]).
    forwarding: forward::Lanes,
    fence: Fence,
    runtime: Runtime,
    options: NodeOptions,
}

impl Node {
    /// Joins the cluster: says this node is alive, opens the journal fenced by its leases (it holds none yet),
    /// and opens the runtime from `builder` on it (a runtime whose agents this node will claim; nothing is
    /// brought back until it holds leases: see [`Node::tick`]).
    pub async fn start(builder: RuntimeBuilder, options: NodeOptions) -> Result<(Self, Recovery), NodeError> {
        let mut owners = Owners::connect(&options.url, &options.name, options.lease).await?;
        let me: Arc<std::sync::OnceLock<std::sync::Weak<Node>>> = Arc::default();
        let wire = match &options.wire {
            Some(wire) => {
                let wire = Wire::start(&options.name, wire.clone(), answerer(me.clone())).await?;
                owners.advertise(wire.advertised().to_owned());
                Some(wire)
            }
            None => None,
        };
        owners.heartbeat(&[]).await?;
        let (forwarding, forward) = forward::Lanes::new();
        let lanes = forwarding.clone();
        let builder = builder.elsewhere(Arc::new(move |elsewhere| lanes.push(elsewhere)));
        let inbox = Inbox::connect(&options.url, options.inbox_limit).await?;
        let mut pushers = Vec::with_capacity(PUSH_CONNECTIONS);
        for _ in 0..PUSH_CONNECTIONS {
            pushers.push(crate::inbox::Pusher::connect(&options.url, options.inbox_limit).await?);
        }
        let replies = Arc::new(Inbox::connect(&options.url, options.inbox_limit).await?);
        let (given, afresh) = (Given::default(), Given::default());
        // An agent about to start again afresh: what was given to its old actor is noted before the new one can
        // be given anything.
        let (noted, noting) = (given.clone(), afresh.clone());
        let builder = builder.before_restart(Arc::new(move |agent: &AgentId| {
            // Under `given`'s lock, which a delivery holds while it gives: none gives the new actor anything first.
            let given = noted.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(lost) = given.get(agent).filter(|lost| !lost.is_empty()) {
                noting.lock().unwrap_or_else(PoisonError::into_inner).insert(agent.clone(), lost.clone());
            }
        }));
        let fence = Fence::new(options.name.clone());
        let journal = PostgresOptions { keep_inputs: options.keep_inputs, fence: Some(fence.clone()) };
        let store = Arc::new(PostgresStore::connect_with(&options.url, journal)?);
        let owners = Arc::new(owners);
        let holdings =
            Arc::new(Holdings::new(owners.clone(), fence.clone(), wire.as_ref().map(Wire::presence), store.clone()));
        // Every agent the runtime starts, however it is spawned, holds a lease.
        let builder = builder.claim_before_spawn(holdings.claim_hook());
        let (runtime, recovery) = builder.store(store).open().await?;
        let node = Self {
            owners,
            holdings,
            inbox,
            pushers,
            given,
            afresh,
            ending: Mutex::new(HashSet::new()),
            taking: Mutex::new(HashSet::new()),
            recover_again: std::sync::atomic::AtomicBool::new(false),
            handing: Mutex::new(HashSet::new()),
            delivering: Mutex::new(HashMap::new()),
            replies,
            calls: Mutex::new(HashMap::new()),
            wire_calls: Mutex::new(HashMap::new()),
            wire,
            me,
            forward: Mutex::new(Some(forward)),
            remote_children: Mutex::new(HashMap::new()),
            suspects: Mutex::new(HashSet::new()),
            dialed: Mutex::new(HashMap::new()),
            forwarding,
            fence,
            runtime,
            options,
        };
        Ok((node, recovery))
    }

    /// The runtime running this node's agents.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// The leases this node holds, as its journal writes under them.
    pub fn fence(&self) -> &Fence {
        &self.fence
    }

    /// This node's name.
    pub fn name(&self) -> &str {
        &self.options.name
    }

    /// Spawns an agent on this node: claims its lease first (an id that another node holds is
    /// [`LeaseError::Held`]), then spawns it, and returns once its journal holds it: an agent whose spawn was
    /// acknowledged comes back on a survivor if this node dies next. `opts.id` names it; without one, a new id
    /// is made.
    pub async fn spawn<A: Agent>(&self, domain: A, mut opts: SpawnOptions) -> Result<AgentRef<A>, NodeError> {
        let id = opts.id.get_or_insert_with(AgentId::random).clone();
        self.spawn_leased(&id, self.runtime.spawn(domain, opts)).await
    }

    /// Spawns an agent of a type registered here by its name, from its initial state as JSON (see
    /// [`Runtime::spawn_named`]), under its lease as [`Node::spawn`] does.
    pub async fn spawn_named(
        &self,
        agent_type: &str,
        init: serde_json::Value,
        mut opts: SpawnOptions,
    ) -> Result<AgentId, NodeError> {
        let id = opts.id.get_or_insert_with(AgentId::random).clone();
        self.spawn_leased(&id, self.runtime.spawn_named(agent_type, init, opts)).await
    }

    /// Claims the lease of `id` (unless this node holds it), then spawns it with `spawn` and waits until the
    /// journal holds the spawn; lets a lease it claimed go if the spawn fails.
    async fn spawn_leased<T>(
        &self,
        id: &AgentId,
        spawn: impl std::future::Future<Output = Result<T, RuntimeError>>,
    ) -> Result<T, NodeError> {
        let spawning = self.holdings.claim_new(id).await?;
        let spawned = spawn.await;
        match (spawned, &spawning.claimed) {
            (Ok(spawned), _) => {
                // Not acknowledged before it is durable: a node that died right after would lose the agent
                // (and nobody would take it over), though its caller was told it runs.
                if let Some(journal) = self.runtime.store().durable()
                    && journal.flushed_for(id).await.is_err()
                {
                    // A commit failed since the spawn: the agent is kept if the journal has it under this node's
                    // lease (its spawn went in an earlier commit, or in one whose end was lost but that went
                    // through); if not, it is gone, its copy here stopped as any whose commit failed.
                    let kept = self.fence.epoch(id).is_some() && matches!(journal.agent(id), Ok(Some(_)));
                    if !kept {
                        return Err(NodeError::NotKept(id.clone()));
                    }
                }
                Ok(spawned)
            }
            (Err(err), Some(lease)) if !self.runtime.contains(id) => {
                self.holdings.let_be(id);
                let _ = self.owners.release(lease).await;
                Err(err.into())
            }
            (Err(err), _) => Err(err.into()),
        }
    }

    /// Sends a signal to an agent wherever it lives: to it here if this node holds it, else into its durable
    /// inbox (once: a retry of the same signal is [`Pushed::Duplicate`]), where the node that holds it finds it.
    /// An agent this node is taking over gets it through its inbox too, until what waited there was given: a
    /// sender whose signals waited there while the agent moved keeps its order.
    pub async fn send(&self, agent: &AgentId, signal: Signal) -> Result<Sent, NodeError> {
        if self.holds(agent) {
            if self.taking(agent) {
                return Ok(Sent::Inbox(self.pusher(agent).push(agent, &signal).await?));
            }
            self.runtime.send(agent, signal)?;
            return Ok(Sent::Here);
        }
        if let Some(wire) = &self.wire {
            let request = WireRequest::Send { agent: agent.clone(), signal: signal.clone() };
            match self.ask_holder(wire, &request).await {
                Ok(WireReply::Accepted) => return Ok(Sent::Wire(Pushed::Kept)),
                Ok(WireReply::Duplicate) => return Ok(Sent::Wire(Pushed::Duplicate)),
                Ok(WireReply::Failed { reason }) => return Err(NodeError::Refused { agent: agent.clone(), reason }),
                // No node took it over the wire: the inbox keeps it for the node that holds the agent.
                Ok(_) | Err(_) => {}
            }
        }
        Ok(Sent::Inbox(self.pusher(agent).push(agent, &signal).await?))
    }

    /// Calls an agent wherever it lives and waits at most `timeout` for its reply: here if this node holds it,
    /// else through its inbox (the node that holds it gives it the signal in order with the others, and posts
    /// the reply back). Needs [`Node::keep`], which hears the replies.
    pub async fn call(
        &self,
        agent: &AgentId,
        signal: Signal,
        timeout: Duration,
    ) -> Result<serde_json::Value, NodeError> {
        // The whole call (here; or over the wire and then through the inbox) within its timeout. (One too long to
        // add to the clock waits as good as forever.)
        let now = tokio::time::Instant::now();
        let deadline = now.checked_add(timeout).unwrap_or_else(|| now + FOREVER);
        let timed_out = || NodeError::from(RuntimeError::Timeout { agent: agent.clone(), timeout });
        // One being taken over goes through its inbox like one held elsewhere (its node is this one).
        if self.holds(agent) && !self.taking(agent) {
            // After the signals waiting for it: a call keeps its order with what was sent before it from afar
            // (which may wait for another delivery to it, or for the database: within the timeout too).
            tokio::time::timeout_at(deadline, self.deliver(agent)).await.map_err(|_| timed_out())??;
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            return match self.runtime.call(agent, signal, left).await {
                Err(RuntimeError::Timeout { .. }) => Err(timed_out()),
                answered => Ok(answered?),
            };
        }
        if let Some(wire) = &self.wire {
            let timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
            let request = WireRequest::Call { agent: agent.clone(), signal: signal.clone(), timeout_ms };
            match tokio::time::timeout_at(deadline, self.ask_holder(wire, &request)).await {
                Ok(Ok(WireReply::Answer { value })) => return Ok(value),
                Ok(Ok(WireReply::Failed { reason })) => {
                    return Err(NodeError::Refused { agent: agent.clone(), reason });
                }
                // No node took it over the wire in time: the inbox, for what is left of the timeout.
                Ok(_) => {}
                Err(_) => return Err(timed_out()),
            }
        }
        let id = signal.id();
        let (told, reply) = tokio::sync::oneshot::channel();
        self.calls.lock().unwrap_or_else(PoisonError::into_inner).insert(id, told);
        let called = async {
            self.pusher(agent).push_call(agent, &signal, &self.options.name).await?;
            // A reply posted before this node listened for it (a retry of an answered call) is already there.
            if let Some(value) = self.inbox.take_reply(id).await? {
                return Ok(value);
            }
            reply.await.map_err(|_| NodeError::Runtime(RuntimeError::Stopped(agent.clone())))
        };
        let answered = tokio::time::timeout_at(deadline, called).await;
        self.calls.lock().unwrap_or_else(PoisonError::into_inner).remove(&id);
        answered.unwrap_or_else(|_| Err(timed_out()))
    }

    /// Whether this node is taking the agent over: what waited in its inbox was not all given yet.
    fn taking(&self, agent: &AgentId) -> bool {
        self.taking.lock().unwrap_or_else(PoisonError::into_inner).contains(agent)
    }

    /// Whether this node holds the agent and takes what comes for it now: not while it hands it over, nor while
    /// the signals its old actor lost (restarted afresh) wait to be given again; meanwhile what comes for it waits
    /// in its inbox.
    pub(super) fn holds(&self, agent: &AgentId) -> bool {
        self.fence.epoch(agent).is_some()
            && !self.handing.lock().unwrap_or_else(PoisonError::into_inner).contains(agent)
            && !self.afresh.lock().unwrap_or_else(PoisonError::into_inner).contains_key(agent)
    }

    /// Leaves the cluster: shuts the runtime down gracefully within `grace` (its agents stay in the journal, to
    /// be brought back) and lets every lease go, so the other nodes take its agents at their next round rather
    /// than once the leases run out.
    pub async fn leave(&self, grace: Duration) -> Result<(), NodeError> {
        self.runtime.shutdown(grace).await;
        for (agent, epoch) in self.fence.held() {
            self.holdings.let_be(&agent);
            let lease = self.lease_of(agent, epoch);
            self.owners.let_go(&lease).await?;
        }
        Ok(())
    }

    /// The wire to the other nodes, if this node has one.
    pub fn wire(&self) -> Option<&Wire> {
        self.wire.as_ref()
    }

    /// Sends on a signal this node's runtime has for elsewhere: to the node that holds the agent, or to every
    /// node for a topic. One that reaches nobody (its agent is held nowhere the wire reaches) is dropped, as an
    /// emit to nobody is on one node.
    pub(super) async fn send_on(&self, elsewhere: Elsewhere) {
        match elsewhere {
            Elsewhere::Agent { to, signal, kept_by } => {
                let sent = self.relay_on(&to, &signal).await;
                // The journal that keeps it can forget it: a recovery of its maker need not send it again.
                if sent && let Some(kept_by) = kept_by {
                    self.runtime.sent_on(&kept_by, signal.id());
                }
            }
            // A topic's members on other nodes are reached over the wire only.
            Elsewhere::Topic { topic, signal } => {
                if let Some(wire) = &self.wire {
                    wire.tell_all(&WireRequest::Publish { topic, signal }).await;
                }
            }
        }
    }

    /// Sends on a signal for agent `to`, held elsewhere: over the wire (if this node has one) to the node that
    /// holds it, which takes it through its inbox; when no node took it that way, into its inbox directly, if the
    /// cluster has the agent (held, or waiting for a node to take it). Whether it was sent on: taken, left in the
    /// inbox, refused for good (a full inbox) or found to reach nobody; not when the inbox could not be written
    /// (the database is down), when it may still be sent again.
    async fn relay_on(&self, to: &AgentId, signal: &Signal) -> bool {
        let kind = signal.kind();
        let asked = match &self.wire {
            Some(wire) => {
                let relay = WireRequest::Relay { agent: to.clone(), signal: signal.clone() };
                Some(self.ask_holder(wire, &relay).await)
            }
            None => None,
        };
        if let Some(Ok(WireReply::Accepted | WireReply::Duplicate)) = asked {
            return true;
        }
        // A relay that reached the holder after all is a duplicate in the inbox.
        match self.owners.owner(to).await {
            Ok(Some(_)) => match self.pusher(to).relay(to, signal).await {
                Ok(_) => true,
                Err(err @ (InboxError::Database(_) | InboxError::Batch { .. })) => {
                    tracing::warn!(agent = %to, %kind, %err, "a signal for an agent elsewhere could not wait in its inbox");
                    false
                }
                Err(err) => {
                    tracing::warn!(agent = %to, %kind, %err, "a signal for an agent elsewhere was refused by its inbox");
                    true
                }
            },
            Ok(None) => {
                tracing::debug!(agent = %to, %kind, ?asked, "a signal for an agent elsewhere reached nobody");
                true
            }
            Err(err) => {
                tracing::warn!(agent = %to, %kind, %err, "who holds an agent could not be read: its signal waits");
                false
            }
        }
    }

    /// Asks the node that holds the request's agent over the wire: found by the agent's process group (the fast
    /// way, which the wire syncs between nodes a little after the fact), else by its lease in the database, the
    /// one that decides.
    async fn ask_holder(&self, wire: &Wire, request: &WireRequest) -> Result<WireReply, WireError> {
        match wire.ask(request).await {
            // Nobody said it holds the agent, or the one that did no longer does: the database says who does.
            // (One that did not answer in time is not asked again.)
            Ok(WireReply::NotHere) | Err(WireError::NoRoute { tried: 0, .. }) => {}
            answered => return answered,
        }
        let Some(agent) = request.agent() else { return wire.ask(request).await };
        let holder = self.owners.owner(agent).await.ok().flatten().map(|lease| lease.node);
        match holder {
            Some(node) if node != self.options.name => wire.ask_node(&node, request, wire.wait_for(request)).await,
            _ => Err(WireError::NoRoute { agent: agent.to_string(), waited: Duration::ZERO, tried: 0 }),
        }
    }

    /// Resolves once every signal this node's runtime had for elsewhere before the call was sent on (taken by
    /// the node that holds its agent, or found to reach nobody). Needs [`Node::keep`], which sends them on.
    pub async fn sent_on(&self) {
        self.forwarding.passed().await;
    }

    /// Tells the parents here of the children they spawned on node `down`, which went down, and forgets them:
    /// returns those children.
    fn children_down(&self, down: &str) -> Vec<AgentId> {
        let children = self.remote_children.lock().unwrap_or_else(PoisonError::into_inner).remove(down);
        let mut told = Vec::new();
        for (child, parent) in children.unwrap_or_default() {
            let reason = format!(
                "node `{down}` went down (the child comes back on another node once its lease runs out, unless it ended)"
            );
            let stamp = (Uuid::now_v7(), chrono::Utc::now());
            let source = agentry::kinds::agent_source(&child);
            if let Some(signal) = agentry::driver::child_exited_at(&source, &child, &reason, stamp) {
                self.runtime.relay(Elsewhere::Agent { to: parent, signal, kept_by: None });
                told.push(child);
            }
        }
        told
    }

    /// A signal relayed to one of this node's agents, as it is given: if it tells of the end of a child spawned
    /// on another node, that child is forgotten (its node going down later is no news to its parent).
    fn child_end_heard(&self, signal: &Signal) {
        if signal.kind().as_str() == agentry::kinds::AGENT_CHILD_EXITED
            && let Some(child) = signal.data()["child"].as_str().and_then(|c| AgentId::new(c).ok())
        {
            let mut children = self.remote_children.lock().unwrap_or_else(PoisonError::into_inner);
            children.values_mut().for_each(|on_node| on_node.retain(|(c, _)| *c != child));
        }
    }

    /// This node's lease on `agent` at `epoch`, as its fence holds it (the expiry is the database's business).
    fn lease_of(&self, agent: AgentId, epoch: u64) -> Lease {
        Lease { agent, node: self.options.name.clone(), epoch, expires_at: Default::default() }
    }

    /// Stops this node's copy of an agent whose lease it lost. What the copy still writes is refused by the
    /// journal, so stopping it changes nothing there: the node that holds the agent now has it.
    pub async fn step_down(&self, agent: &AgentId) {
        self.holdings.let_be(agent);
        tracing::warn!(%agent, node = %self.options.name, "this node lost the agent's lease and stops its copy");
        let reason = format!("node `{}` lost the agent's lease: another node holds it now", self.options.name);
        let _ = self.runtime.stop_because(agent, &reason).await;
        self.forget_agent(agent);
    }

    /// Forgets what this node keeps for an agent it no longer runs: that it ran it, what it gave it from its
    /// inbox, what an old actor of it lost, and its delivery lock.
    fn forget_agent(&self, agent: &AgentId) {
        self.holdings.forget(agent);
        self.taking.lock().unwrap_or_else(PoisonError::into_inner).remove(agent);
        self.given.lock().unwrap_or_else(PoisonError::into_inner).remove(agent);
        self.afresh.lock().unwrap_or_else(PoisonError::into_inner).remove(agent);
        self.forget_delivering(agent);
    }

    /// Stops this node's copy of an agent whose writes the journal refused or lost, and, when its lease is still
    /// this node's (a commit failed, rather than another node taking it), takes it back from the journal; notes
    /// both in `tick`.
    async fn step_down_or_take_back(&self, agent: AgentId, tick: &mut Tick) {
        self.step_down(&agent).await;
        match self.take_back(&agent).await {
            Ok(true) => tick.taken.push(agent.clone()),
            Ok(false) => {}
            Err(err) => {
                tracing::warn!(%agent, %err, "an agent could not be taken back; its lease runs out, and a round of upkeep takes it")
            }
        }
        tick.lost.push(agent);
    }

    /// Brings an agent whose copy this node stopped back from the journal, under a new epoch, if its lease is
    /// still this node's (a commit of its writes failed, rather than another node taking it): whether it did.
    async fn take_back(&self, agent: &AgentId) -> Result<bool, NodeError> {
        // What the stopped copy still wrote reaches the journal (refused by the fence) before it is held again.
        if let Some(journal) = self.runtime.store().durable() {
            let _ = journal.flushed().await;
        }
        let Some(lease) = self.owners.take_back(agent).await? else { return Ok(false) };
        self.holdings.ran(agent);
        self.holdings.hold(&lease);
        self.bring_back("an agent taken back").await?;
        Ok(true)
    }

    /// Brings back what the journal holds under this node's leases and its runtime does not run (`what` names
    /// them in the log). When that fails, or leaves out an agent for a reason other than its type (which the
    /// next try may not meet: the database away, say), the next round of upkeep tries again.
    pub(super) async fn bring_back(&self, what: &str) -> Result<(), NodeError> {
        let recovery = match self.runtime.recover().await {
            Ok(recovery) => recovery,
            Err(err) => {
                self.recover_again.store(true, std::sync::atomic::Ordering::SeqCst);
                return Err(err.into());
            }
        };
        for (agent, err) in &recovery.failed {
            tracing::error!(%agent, %err, node = %self.options.name, "{what} could not be brought back");
            if !matches!(err, RuntimeError::UnknownAgentType(_)) {
                self.recover_again.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        }
        Ok(())
    }
}

/// The next event of the wire, if there is one (never, without).
async fn next_event(
    events: &mut Option<tokio::sync::broadcast::Receiver<WireEvent>>,
) -> Result<WireEvent, tokio::sync::broadcast::error::RecvError> {
    match events {
        Some(events) => events.recv().await,
        None => std::future::pending().await,
    }
}

/// Per agent, signals ids (given, or lost with a restarted actor), shared with the runtime's restart hook.
type Given = Arc<Mutex<HashMap<AgentId, HashSet<Uuid>>>>;

/// The wire's handler: requests go to the node once it keeps itself, and are `NotHere` before (or after).
fn answerer(me: Arc<std::sync::OnceLock<std::sync::Weak<Node>>>) -> crate::wire::Handler {
    Arc::new(move |request| {
        let node = me.get().and_then(std::sync::Weak::upgrade);
        Box::pin(async move {
            match node {
                Some(node) => node.answer(request).await,
                None => WireReply::NotHere,
            }
        })
    })
}
