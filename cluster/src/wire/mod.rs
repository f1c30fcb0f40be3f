//! The wire between nodes: `ractor_cluster`, the fast path for signals and calls to agents held on other nodes.
//! Correctness never rests on it: a node that takes a signal from the wire puts it in the agent's durable inbox
//! first (a retry after a reconnect is a duplicate there and is dropped), and a sender that cannot get an answer
//! from the wire within a bounded time leaves the signal in the inbox instead.
//!
//! Peers authenticate with a shared cookie (a node with another cookie is refused, and said so in the events);
//! TLS (rustls) is on by configuration; a frame from a peer is bounded in size before it is read, and one that
//! is too big or malformed closes that connection (or fails that request) with an error, never the node.

pub mod codec;
mod gate;
mod listener;
mod tls;

pub use codec::{Malformed, WireReply, WireRequest};
pub use gate::Handler;
use gate::{Gate, GateMsg};
pub use listener::{HANDSHAKE_WAIT, MAX_HANDSHAKES};
use ractor::{Actor, ActorRef};
use ractor_cluster::{IncomingEncryptionMode, NodeEventSubscription, NodeServer, NodeServerMessage};
use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
pub use tls::TlsError;
use tokio::sync::broadcast;

/// The largest frame a node takes from a peer by default: a signal or a reply is far smaller.
pub const DEFAULT_MAX_FRAME: u64 = 1024 * 1024;

/// How a node speaks on the wire.
#[derive(Clone)]
pub struct WireOptions {
    /// The address it listens on (loopback by default).
    pub listen: IpAddr,
    /// The port it listens on; 0 picks a free one.
    pub port: u16,
    /// The secret every node of the cluster shares; a peer with another is refused.
    pub cookie: String,
    /// TLS between nodes, when set.
    pub tls: Option<WireTls>,
    /// The largest frame taken from a peer, in bytes; a bigger one closes that connection.
    pub max_frame: u64,
    /// How long a signal waits for the node that holds its agent to take it before it goes to the inbox
    /// instead: a send never hangs on a peer that is paused or cut off.
    pub wait: Duration,
    /// The address peers dial to reach this node (`host:port`), when it is not the listening address (which must
    /// then be a specific one, not `0.0.0.0`).
    pub advertise: Option<String>,
    /// Whether the node connects by itself to every live node that listens on the wire (their addresses are in
    /// the database); without, it connects only where told ([`Wire::connect`]).
    pub discover: bool,
}

impl WireOptions {
    /// Loopback, a free port, the cookie given, no TLS, frames up to [`DEFAULT_MAX_FRAME`], and 2 s to wait.
    pub fn new(cookie: impl Into<String>) -> Self {
        Self {
            listen: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 0,
            cookie: cookie.into(),
            tls: None,
            max_frame: DEFAULT_MAX_FRAME,
            wait: Duration::from_secs(2),
            advertise: None,
            discover: true,
        }
    }
}

impl std::fmt::Debug for WireOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The cookie is a secret: never printed.
        f.debug_struct("WireOptions")
            .field("listen", &self.listen)
            .field("port", &self.port)
            .field("tls", &self.tls.is_some())
            .field("max_frame", &self.max_frame)
            .field("wait", &self.wait)
            .finish_non_exhaustive()
    }
}

/// TLS between nodes: how this node accepts connections, and how it connects to others (with the name their
/// certificates must carry).
#[derive(Clone)]
pub struct WireTls {
    /// Accepts peers' connections.
    pub acceptor: tokio_rustls::TlsAcceptor,
    /// Connects to peers.
    pub connector: tokio_rustls::TlsConnector,
    /// The name peers' certificates are checked against.
    pub server_name: tokio_rustls::rustls::pki_types::ServerName<'static>,
    /// Whether each peer's certificate must name the node it says it is (see [`WireTls::checking_node_names`]).
    pub node_names: bool,
}

/// The certificates peers showed, by their connection's label, until their sessions say which node they are.
pub(crate) type Certified = Arc<Mutex<HashMap<String, tokio_rustls::rustls::pki_types::CertificateDer<'static>>>>;

/// What happens to the wire's connections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireEvent {
    /// A peer node connected and authenticated.
    Up {
        /// Its name.
        node: String,
    },
    /// A peer node's connection ended (it stopped, died, or was cut off).
    Down {
        /// Its name.
        node: String,
    },
    /// A peer did not answer a request in time (frozen, overloaded, or cut off without its connection ending
    /// yet): for a while (five times the wire's wait), requests for it go elsewhere (the inbox) at once instead of
    /// waiting on it again.
    Slow {
        /// Its name.
        node: String,
    },
    /// A connection ended before it authenticated: a wrong cookie, a failed TLS handshake, or a malformed or
    /// oversized frame.
    Refused {
        /// The peer's address.
        peer: String,
    },
}

/// Why the wire could not start, connect or ask.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The node server could not start (its port is taken, say).
    #[error("the wire could not start on {address}: {reason}")]
    Start {
        /// Where it was to listen.
        address: String,
        /// Why it could not.
        reason: String,
    },
    /// A peer could not be reached.
    #[error("the wire could not connect to {address}: {reason}")]
    Connect {
        /// The peer's address.
        address: String,
        /// Why.
        reason: String,
    },
    /// No peer that holds the agent answered in time (none is connected, or each was too slow or gone).
    #[error("no node on the wire took the request for agent `{agent}` within {waited:?} ({tried} asked)")]
    NoRoute {
        /// The agent.
        agent: String,
        /// How long it waited in all.
        waited: Duration,
        /// How many peers it asked (0: none said it holds the agent).
        tried: usize,
    },
    /// No node of that name is connected on the wire.
    #[error("no node named `{node}` is connected on the wire")]
    NoNode {
        /// The node.
        node: String,
    },
    /// A peer answered with something that could not be decoded.
    #[error(transparent)]
    Malformed(#[from] Malformed),
}

/// A node's end of the wire. See the module docs.
pub struct Wire {
    server: ActorRef<NodeServerMessage>,
    gate: ActorRef<GateMsg>,
    address: SocketAddr,
    advertised: String,
    /// This node's listener's task.
    accepting: tokio::task::JoinHandle<()>,
    tls: Option<WireTls>,
    wait: Duration,
    events: broadcast::Sender<WireEvent>,
    peers: Peers,
    /// Peers' names by their session's node id (as remote actors carry it).
    names: Names,
    /// Peers that did not answer in time, by node id, and since when.
    slow: Arc<Mutex<HashMap<u64, tokio::time::Instant>>>,
    /// The certificates of peers whose sessions have not said which node they are yet.
    certified: Certified,
}

/// Says on the wire which agents a node holds: its gate, in each one's process group.
#[derive(Clone)]
pub(crate) struct Presence(ractor::ActorCell);

impl Presence {
    /// Says this node holds `agent`.
    pub(crate) fn hold(&self, agent: &agentry::id::AgentId) {
        ractor::pg::join(group(agent), vec![self.0.clone()]);
    }

    /// Says this node no longer holds `agent`.
    pub(crate) fn release(&self, agent: &agentry::id::AgentId) {
        ractor::pg::leave(group(agent), vec![self.0.clone()]);
    }
}

/// Peers' names by the node id of their session.
type Names = Arc<Mutex<HashMap<u64, String>>>;

/// The peers connected now, by name, with how many of their sessions are ready (two nodes that connect to each
/// other at once have two until one is closed).
type Peers = Arc<Mutex<HashMap<String, usize>>>;

impl Wire {
    /// Starts the wire of node `name`: its node server, listening, and its gate, which answers requests with
    /// `handler`.
    pub async fn start(name: &str, options: WireOptions, handler: Handler) -> Result<Self, WireError> {
        let (events, _) = broadcast::channel(1024);
        let peers = Peers::default();
        if options.listen.is_unspecified() && options.advertise.is_none() {
            return Err(WireError::Start {
                address: options.listen.to_string(),
                reason: "a node listening on every address must say which one its peers dial (`advertise`)".into(),
            });
        }
        let bound = tokio::net::TcpListener::bind((options.listen, options.port)).await;
        let start_failed = |e: std::io::Error| WireError::Start {
            address: SocketAddr::new(options.listen, options.port).to_string(),
            reason: e.to_string(),
        };
        let bound = bound.map_err(start_failed)?;
        let address = bound.local_addr().map_err(start_failed)?;
        let server = node_server(name, &options).await?;
        let advertised = options.advertise.clone().unwrap_or_else(|| address.to_string());
        let names = Names::default();
        let certified = Certified::default();
        // Kept only where they are checked.
        let checked = options.tls.as_ref().filter(|tls| tls.node_names).map(|_| certified.clone());
        let watcher = Watcher {
            events: events.clone(),
            peers: peers.clone(),
            names: names.clone(),
            ready: Arc::default(),
            pending: Arc::default(),
            certified: checked.clone(),
            rejected: Arc::default(),
        };
        let _ = server
            .cast(NodeServerMessage::SubscribeToEvents { id: "agentry".to_owned(), subscription: Box::new(watcher) });
        let (gate, _) = Actor::spawn(None, Gate, handler)
            .await
            .map_err(|e| WireError::Start { address: address.to_string(), reason: e.to_string() })?;
        ractor::pg::join(NODES.to_owned(), vec![gate.get_cell()]);
        ractor::pg::join(node_group(name), vec![gate.get_cell()]);
        let acceptor = options.tls.as_ref().map(|tls| tls.acceptor.clone());
        let handshakes = Arc::new(tokio::sync::Semaphore::new(listener::MAX_HANDSHAKES));
        let accepting = listener::serve(bound, server.clone(), (acceptor, checked), events.clone(), handshakes);
        let (tls, wait) = (options.tls, options.wait);
        let slow = Arc::default();
        Ok(Self { server, gate, address, advertised, accepting, tls, wait, events, peers, names, slow, certified })
    }

    /// Where this node listens: what peers connect to.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Where peers dial this node: the advertised address, or the listening one.
    pub fn advertised(&self) -> &str {
        &self.advertised
    }

    /// What happens to the wire's connections, from now on.
    pub fn events(&self) -> broadcast::Receiver<WireEvent> {
        self.events.subscribe()
    }

    /// The peers connected now, by name.
    pub fn peers(&self) -> Vec<String> {
        let mut peers: Vec<String> =
            self.peers.lock().unwrap_or_else(PoisonError::into_inner).keys().cloned().collect();
        peers.sort();
        peers
    }

    /// Connects to the node listening at `address` (with TLS when configured), giving up after [`DIAL_WAIT`].
    /// Whether it is let in is told by the events: [`WireEvent::Up`], or [`WireEvent::Refused`].
    pub async fn connect(&self, address: &str) -> Result<(), WireError> {
        self.dialer().dial(address).await
    }

    /// What connects to peers, apart from the wire (for a task of its own).
    pub fn dialer(&self) -> Dialer {
        Dialer { server: self.server.clone(), tls: self.tls.clone(), certified: self.certified.clone() }
    }

    /// Says on the wire that this node holds `agent`: its gate joins the agent's process group.
    pub fn hold(&self, agent: &agentry::id::AgentId) {
        self.presence().hold(agent);
    }

    /// Says on the wire that this node no longer holds `agent`.
    pub fn release(&self, agent: &agentry::id::AgentId) {
        self.presence().release(agent);
    }

    /// What says on the wire which agents this node holds, apart from the wire.
    pub(crate) fn presence(&self) -> Presence {
        Presence(self.gate.get_cell())
    }

    /// Asks the node that holds the request's agent, over the wire: each peer whose gate says it holds the
    /// agent, in turn, until one answers with something other than [`WireReply::NotHere`]. A send waits at
    /// most the configured time in all, however many peers it asks; a call, its own timeout.
    pub async fn ask(&self, request: &WireRequest) -> Result<WireReply, WireError> {
        let Some(agent) = request.agent() else {
            return Err(WireError::NoRoute { agent: String::new(), waited: Duration::ZERO, tried: 0 });
        };
        let wait = self.wait_for(request);
        let bytes = codec::encode(request);
        let started = tokio::time::Instant::now();
        // One bound for the whole request, whatever the number of peers that say they hold the agent.
        let deadline = started + wait;
        let mut tried = 0;
        for member in ractor::pg::get_members(&group(agent)) {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if member.get_id().is_local() || left.is_zero() {
                continue;
            }
            tried += 1;
            let node = member.get_id().node();
            if self.is_slow(node) {
                continue;
            }
            let gate: ActorRef<GateMsg> = member.into();
            let asked = gate.call(|reply| GateMsg::Ask(bytes.clone(), reply), Some(left)).await;
            match asked {
                Ok(ractor::rpc::CallResult::Success(reply)) => match codec::decode_reply(&reply) {
                    Ok(WireReply::NotHere) => continue,
                    Ok(answer) => return Ok(answer),
                    Err(malformed) => tracing::warn!(%malformed, "a peer answered with a malformed reply"),
                },
                Ok(ractor::rpc::CallResult::Timeout) => self.was_slow(node),
                // Gone: the next one, or the inbox.
                Ok(_) | Err(_) => continue,
            }
        }
        Err(WireError::NoRoute { agent: agent.to_string(), waited: started.elapsed(), tried })
    }

    /// Asks the node named `node` (its gate), waiting at most `wait`: for what only that node can do, such as a
    /// spawn there.
    pub async fn ask_node(&self, node: &str, request: &WireRequest, wait: Duration) -> Result<WireReply, WireError> {
        let bytes = codec::encode(request);
        let gate = ractor::pg::get_members(&node_group(node)).into_iter().find(|m| !m.get_id().is_local());
        let Some(gate) = gate else {
            return Err(WireError::NoNode { node: node.to_owned() });
        };
        let id = gate.get_id().node();
        let no_route = || WireError::NoRoute {
            agent: request.agent().map(ToString::to_string).unwrap_or_default(),
            waited: Duration::ZERO,
            tried: 1,
        };
        if self.is_slow(id) {
            return Err(no_route());
        }
        let gate: ActorRef<GateMsg> = gate.into();
        match gate.call(|reply| GateMsg::Ask(bytes, reply), Some(wait)).await {
            Ok(ractor::rpc::CallResult::Success(reply)) => Ok(codec::decode_reply(&reply)?),
            Ok(ractor::rpc::CallResult::Timeout) => {
                self.was_slow(id);
                Err(no_route())
            }
            _ => Err(WireError::NoRoute {
                agent: request.agent().map(ToString::to_string).unwrap_or_default(),
                waited: wait,
                tried: 1,
            }),
        }
    }

    /// How long a request waits for its answer: a call, its own timeout; anything else, the wire's wait.
    pub fn wait_for(&self, request: &WireRequest) -> Duration {
        match request {
            WireRequest::Call { timeout_ms, .. } => Duration::from_millis(*timeout_ms),
            _ => self.wait,
        }
    }

    /// Tells every connected peer at once (each node's gate is in one process group of all nodes), and waits
    /// for their answers, each at most the configured time: for a topic's signal, which each peer gives its own
    /// subscribers. Returns how many peers took it.
    pub async fn tell_all(&self, request: &WireRequest) -> usize {
        let bytes = codec::encode(request);
        let mut asked = tokio::task::JoinSet::new();
        for member in ractor::pg::get_members(&NODES.to_owned()) {
            if member.get_id().is_local() || self.is_slow(member.get_id().node()) {
                continue;
            }
            let gate: ActorRef<GateMsg> = member.into();
            let (bytes, wait) = (bytes.clone(), self.wait);
            asked.spawn(async move {
                let asked = gate.call(|reply| GateMsg::Ask(bytes, reply), Some(wait)).await;
                matches!(asked, Ok(ractor::rpc::CallResult::Success(reply))
                    if codec::decode_reply(&reply).is_ok_and(|r| r == WireReply::Accepted))
            });
        }
        asked.join_all().await.into_iter().filter(|took| *took).count()
    }

    /// Whether the peer of this node id did not answer in time a short while ago.
    fn is_slow(&self, node: u64) -> bool {
        let mut slow = self.slow.lock().unwrap_or_else(PoisonError::into_inner);
        match slow.get(&node) {
            Some(since) if since.elapsed() < self.wait * SLOW_WAITS => true,
            Some(_) => {
                slow.remove(&node);
                false
            }
            None => false,
        }
    }

    /// Notes that the peer of this node id did not answer in time, and says so in the events.
    fn was_slow(&self, node: u64) {
        self.slow.lock().unwrap_or_else(PoisonError::into_inner).insert(node, tokio::time::Instant::now());
        let name = self.names.lock().unwrap_or_else(PoisonError::into_inner).get(&node).cloned();
        let _ = self.events.send(WireEvent::Slow { node: name.unwrap_or_else(|| format!("#{node}")) });
    }

    /// Stops the wire: its connections close, and its peers see this node go down.
    pub fn stop(&self) {
        self.accepting.abort();
        self.gate.stop(None);
        self.server.stop(None);
    }
}

impl Drop for Wire {
    fn drop(&mut self) {
        self.stop();
    }
}

/// How many of the wire's waits a peer that did not answer in time is passed over.
const SLOW_WAITS: u32 = 5;

/// The longest a connection to a peer may take, TLS handshake included.
pub const DIAL_WAIT: Duration = Duration::from_secs(5);

/// Connects a node's wire to its peers.
#[derive(Clone)]
pub struct Dialer {
    server: ActorRef<NodeServerMessage>,
    tls: Option<WireTls>,
    certified: Certified,
}

impl Dialer {
    /// See [`Wire::connect`].
    pub async fn dial(&self, address: &str) -> Result<(), WireError> {
        let failed = |reason: String| WireError::Connect { address: address.to_owned(), reason };
        let dialing = async {
            let Some(tls) = &self.tls else {
                return ractor_cluster::client_connect(&self.server, address).await.map_err(|e| e.to_string());
            };
            // The TLS handshake made here rather than by ractor_cluster, to keep the certificate the peer showed.
            let tcp = tokio::net::TcpStream::connect(address).await.map_err(|e| e.to_string())?;
            let _ = tcp.set_nodelay(true);
            let label = match (tcp.peer_addr(), tcp.local_addr()) {
                (Ok(peer), Ok(local)) => format!("{peer} (from {local})"),
                _ => address.to_owned(),
            };
            let stream = tls.connector.connect(tls.server_name.clone(), tcp).await.map_err(|e| e.to_string())?;
            if tls.node_names
                && let Some(cert) = stream.get_ref().1.peer_certificates().and_then(|certs| certs.first())
            {
                self.certified.lock().unwrap_or_else(PoisonError::into_inner).insert(label.clone(), cert.clone());
            }
            let handed = Box::new(listener::Handed { stream, peer: label.clone() });
            let opened = ractor_cluster::client_connect_external(&self.server, handed).await;
            if opened.is_err() {
                self.certified.lock().unwrap_or_else(PoisonError::into_inner).remove(&label);
            }
            opened.map_err(|e| e.to_string())
        };
        match tokio::time::timeout(DIAL_WAIT, dialing).await {
            Ok(dialed) => dialed.map_err(failed),
            Err(_) => Err(failed(format!("no connection within {DIAL_WAIT:?}"))),
        }
    }
}

/// The process group of every node's gate.
const NODES: &str = "agentry.nodes";

/// The process group of one node's gate.
fn node_group(node: &str) -> String {
    format!("agentry.node.{node}")
}

/// The process group of an agent's holder.
fn group(agent: &agentry::id::AgentId) -> String {
    format!("agentry.agent.{agent}")
}

/// Starts the node server, whose own listener only takes loopback connections on a port of its own (this node's
/// listener, [`listener::serve`], hands it the peers' connections once through their TLS handshakes).
async fn node_server(name: &str, options: &WireOptions) -> Result<ActorRef<NodeServerMessage>, WireError> {
    let encryption = match &options.tls {
        Some(tls) => IncomingEncryptionMode::Tls(tls.acceptor.clone()),
        None => IncomingEncryptionMode::Raw,
    };
    let server =
        NodeServer::new(0, options.cookie.clone(), name.to_owned(), options.listen.to_string(), Some(encryption), None)
            .with_listen_addr(IpAddr::V4(Ipv4Addr::LOCALHOST))
            .with_max_inbound_frame_size(options.max_frame);
    let (server, _) = Actor::spawn(None, server, ())
        .await
        .map_err(|e| WireError::Start { address: "127.0.0.1:0".into(), reason: e.to_string() })?;
    Ok(server)
}

/// Hears the node server's sessions and tells the wire's events.
struct Watcher {
    events: broadcast::Sender<WireEvent>,
    peers: Peers,
    names: Names,
    /// The sessions that are ready, by the node server's session id.
    ready: Arc<Mutex<HashSet<u64>>>,
    /// The sessions opened and not ready yet.
    pending: Arc<Mutex<HashSet<u64>>>,
    /// With TLS that checks node names: the certificates peers showed, by their connection's label.
    certified: Option<Certified>,
    /// Sessions closed for a certificate that does not name their node (never reported up, even if they got
    /// ready before they closed).
    rejected: Arc<Mutex<HashSet<u64>>>,
}

/// A peer's node name, from the name it gives in the handshake (`name@host`).
fn node_name(session: &ractor_cluster::node::NodeServerSessionInformation) -> Option<String> {
    let full = &session.peer_name.as_ref()?.name;
    Some(full.rsplit_once('@').map_or(full.as_str(), |(name, _)| name).to_owned())
}

impl NodeEventSubscription for Watcher {
    /// A session must be ready within [`listener::HANDSHAKE_WAIT`], and at most [`listener::MAX_HANDSHAKES`] may
    /// be on their way at once: a peer that connects and says nothing is closed.
    fn node_session_opened(&self, session: ractor_cluster::node::NodeServerSessionInformation) {
        let id = session.node_id;
        {
            let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
            if pending.len() >= listener::MAX_HANDSHAKES {
                tracing::warn!(peer = %session.peer_addr, "a session was closed: too many are on their way in");
                session.actor.stop(Some("too many sessions on their way in".into()));
                return;
            }
            pending.insert(id);
        }
        let (ready, pending) = (self.ready.clone(), self.pending.clone());
        tokio::spawn(async move {
            tokio::time::sleep(listener::HANDSHAKE_WAIT).await;
            pending.lock().unwrap_or_else(PoisonError::into_inner).remove(&id);
            if !ready.lock().unwrap_or_else(PoisonError::into_inner).contains(&id) {
                session.actor.stop(Some(format!("not ready within {:?}", listener::HANDSHAKE_WAIT)));
            }
        });
    }

    /// With TLS that checks node names, a peer whose certificate does not name the node it says it is (it has a
    /// certificate the cluster trusts, issued to another node) is closed before its session is ready.
    fn node_session_authenticated(&self, session: ractor_cluster::node::NodeServerSessionInformation) {
        let Some(certified) = &self.certified else { return };
        let cert = certified.lock().unwrap_or_else(PoisonError::into_inner).remove(&session.peer_addr);
        let named = match (&cert, node_name(&session)) {
            (Some(cert), Some(node)) => tls::names(cert, &node).map_err(|why| format!("node `{node}`: {why}")),
            (None, _) => Err("no certificate was kept for its connection".to_owned()),
            (_, None) => Err("it gave no node name".to_owned()),
        };
        if let Err(why) = named {
            tracing::warn!(peer = %session.peer_addr, %why, "a peer's certificate does not name the node it says it is");
            self.rejected.lock().unwrap_or_else(PoisonError::into_inner).insert(session.node_id);
            session.actor.stop(Some(format!("its certificate does not name it: {why}")));
        }
    }

    fn node_session_ready(&self, session: ractor_cluster::node::NodeServerSessionInformation) {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner).remove(&session.node_id);
        if self.rejected.lock().unwrap_or_else(PoisonError::into_inner).contains(&session.node_id) {
            return;
        }
        self.ready.lock().unwrap_or_else(PoisonError::into_inner).insert(session.node_id);
        if let Some(node) = node_name(&session) {
            self.names.lock().unwrap_or_else(PoisonError::into_inner).insert(session.node_id, node.clone());
            let mut peers = self.peers.lock().unwrap_or_else(PoisonError::into_inner);
            let sessions = peers.entry(node.clone()).or_default();
            *sessions += 1;
            if *sessions == 1 {
                let _ = self.events.send(WireEvent::Up { node });
            }
        }
    }

    fn node_session_disconnected(&self, session: ractor_cluster::node::NodeServerSessionInformation) {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner).remove(&session.node_id);
        if let Some(certified) = &self.certified {
            certified.lock().unwrap_or_else(PoisonError::into_inner).remove(&session.peer_addr);
        }
        self.rejected.lock().unwrap_or_else(PoisonError::into_inner).remove(&session.node_id);
        self.names.lock().unwrap_or_else(PoisonError::into_inner).remove(&session.node_id);
        let was_ready = self.ready.lock().unwrap_or_else(PoisonError::into_inner).remove(&session.node_id);
        match (was_ready, node_name(&session)) {
            (true, Some(node)) => {
                let mut peers = self.peers.lock().unwrap_or_else(PoisonError::into_inner);
                let sessions = peers.get(&node).copied().unwrap_or_default().saturating_sub(1);
                if sessions == 0 {
                    peers.remove(&node);
                    let _ = self.events.send(WireEvent::Down { node });
                } else {
                    peers.insert(node, sessions);
                }
            }
            _ => {
                let _ = self.events.send(WireEvent::Refused { peer: session.peer_addr.clone() });
            }
        }
    }
}
