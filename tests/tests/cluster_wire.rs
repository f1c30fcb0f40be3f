//! The wire between nodes (`ractor_cluster`), with nodes as real processes (`cluster_node`) on loopback and a real
//! PostgreSQL server: signals and calls cross it to the node that holds the agent, a retry is dropped as a
//! duplicate (also after a forced reconnect), a node with the wrong cookie or without TLS is refused, a send to a
//! frozen node falls back to the inbox instead of hanging, and an oversized or malformed frame closes only that
//! connection.

use agentry_tests::cluster::{NodeProcess, WAIT};
use agentry_tests::postgres::Postgres;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const NODE: &str = env!("CARGO_BIN_EXE_cluster_node");
/// Leases of 6 s: the nodes beat (and look for peers to connect to) every 2 s, and a node the tests freeze for a
/// wire's bound or two (2 s each) keeps its leases.
const LEASE_MS: u64 = 6_000;
const COOKIE: &str = "the-cluster-secret";

fn postgres(test: &str) -> Option<Postgres> {
    agentry_tests::postgres::or_skip(test)
}

async fn node(postgres: &Postgres, name: &str, env: &[(&str, &str)]) -> NodeProcess {
    NodeProcess::start_with(NODE, postgres, LEASE_MS, name, env).await
}

/// The tally of `agent` as its node has it.
async fn applied(node: &mut NodeProcess, agent: &str) -> Vec<u64> {
    node.state(agent).await.applied
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signals_and_calls_cross_the_wire_and_a_wrong_cookie_or_a_frozen_node_falls_back_to_the_inbox() {
    let Some(postgres) = postgres("cluster_wire") else { return };
    let wire = [("AGENTRY_NODE_WIRE", COOKIE)];
    let mut a = node(&postgres, "a", &wire).await;
    let mut b = node(&postgres, "b", &wire).await;
    b.ask("spawn t1", "spawned t1").await;
    // The nodes find each other through the database.
    a.expect("wire-up b").await;

    let sent = a.ask("send t1 3", "sent t1 3 ").await;
    assert!(sent.ends_with("Wire(Kept)"), "over the wire: {sent}");
    let replied = a.ask("call t1 4 10000", "replied t1 4 ").await;
    assert_eq!(replied, "replied t1 4 2", "the call's reply came back");
    // A retry (the same signal id) is dropped by the node that holds the agent.
    let id = uuid::Uuid::now_v7();
    let first = a.ask(&format!("send-id t1 9 {id}"), "sent t1 9 ").await;
    assert!(first.ends_with("Wire(Kept)"), "{first}");
    let again = a.ask(&format!("send-id t1 9 {id}"), "sent t1 9 ").await;
    assert!(again.ends_with("Wire(Duplicate)"), "{again}");
    assert_eq!(applied(&mut b, "t1").await, [3, 4, 9], "each once, in order");

    // A node with another cookie is refused: it never comes up on the wire, and its signal waits in the inbox.
    let address = b.wire_address().await;
    let wrong = [("AGENTRY_NODE_WIRE", "not-the-secret"), ("AGENTRY_NODE_WIRE_MANUAL", "1")];
    let mut c = node(&postgres, "c", &wrong).await;
    c.send(&format!("connect {address}")).await;
    c.expect("wire-refused").await;
    let sent = c.ask("send t1 5", "sent t1 5 ").await;
    assert!(sent.ends_with("Inbox(Kept)"), "no route over the wire: {sent}");
    assert!(!c.kept.iter().any(|l| l.starts_with("wire-up")), "{:?}", c.kept);
    // The node that holds the agent gives it what waited (a call there comes after the signals waiting).
    assert_eq!(b.ask("call t1 6 10000", "replied t1 6 ").await, "replied t1 6 5");

    // A frozen node never makes a send hang: the signal goes to the inbox once the wire waited its bound.
    b.signal("STOP");
    let sent = a.ask("send t1 7", "sent t1 7 ").await;
    assert!(sent.ends_with("Inbox(Kept)"), "{sent}");
    // The node that did not answer is passed over for a while: what follows goes to the inbox at once.
    a.expect("wire-slow b").await;
    // And a call to it honours its timeout (it may still be applied once the node goes on: at most once).
    let late = a.ask("call t1 70 500", "nack t1 70 ").await;
    assert!(late.contains("did not reply within 500ms"), "{late}");
    b.signal("CONT");
    b.ask("call t1 8 10000", "replied t1 8 ").await;
    let applied = applied(&mut b, "t1").await;
    let without: Vec<u64> = applied.iter().copied().filter(|n| *n != 70).collect();
    assert_eq!(without, [3, 4, 9, 5, 6, 7, 8], "{applied:?}");
    assert!(applied.iter().filter(|n| **n == 70).count() <= 1, "{applied:?}");
}

/// A TCP proxy on loopback to `target` whose connections the test can cut (a forced reconnect).
struct Proxy {
    address: String,
    cut: tokio::sync::watch::Sender<u32>,
}

impl Proxy {
    async fn start(target: String) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a free port");
        let address = listener.local_addr().expect("an address").to_string();
        let (cut, cuts) = tokio::sync::watch::channel(0);
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let Ok(mut outbound) = tokio::net::TcpStream::connect(&target).await else { continue };
                let mut cuts = cuts.clone();
                cuts.mark_unchanged();
                tokio::spawn(async move {
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = cuts.changed() => {}
                    }
                });
            }
        });
        Self { address, cut }
    }

    /// Drops every connection through the proxy.
    fn cut(&self) {
        self.cut.send_modify(|n| *n += 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_a_forced_reconnect_is_dropped_as_a_duplicate() {
    let Some(postgres) = postgres("cluster_wire") else { return };
    let manual = [("AGENTRY_NODE_WIRE", COOKIE), ("AGENTRY_NODE_WIRE_MANUAL", "1")];
    let mut a = node(&postgres, "a", &manual).await;
    let mut b = node(&postgres, "b", &manual).await;
    b.ask("spawn t1", "spawned t1").await;
    let proxy = Proxy::start(b.wire_address().await).await;
    a.ask(&format!("connect {}", proxy.address), "connected").await;
    a.expect("wire-up b").await;
    let id = uuid::Uuid::now_v7();
    let first = a.ask(&format!("send-id t1 5 {id}"), "sent t1 5 ").await;
    assert!(first.ends_with("Wire(Kept)"), "{first}");

    proxy.cut();
    a.expect("wire-down b").await;
    a.ask(&format!("connect {}", proxy.address), "connected").await;
    a.expect("wire-up b").await;
    let retry = a.ask(&format!("send-id t1 5 {id}"), "sent t1 5 ").await;
    assert!(retry.ends_with("Wire(Duplicate)"), "the retry is known: {retry}");
    assert_eq!(applied(&mut b, "t1").await, [5], "applied once");
}

/// Writes `frame` to the wire at `address` and waits for the node to close the connection.
async fn closed_after(address: &str, frame: &[u8]) {
    let mut stream = tokio::net::TcpStream::connect(address).await.expect("the wire listens");
    stream.write_all(frame).await.expect("written");
    let mut rest = Vec::new();
    let read = tokio::time::timeout(WAIT, stream.read_to_end(&mut rest)).await.expect("the node closes it");
    // Closed (or reset): either way, over.
    if let Ok(n) = read {
        assert_eq!(n, 0, "nothing answered: {rest:?}");
    }
}

/// The attack: a peer (not even authenticated) announces a frame far larger than the node takes, or sends one
/// that is not the protocol. The node closes that connection, reads nothing more, and goes on serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_or_malformed_frame_closes_that_connection_only() {
    let Some(postgres) = postgres("cluster_wire") else { return };
    let manual = [("AGENTRY_NODE_WIRE", COOKIE), ("AGENTRY_NODE_WIRE_MANUAL", "1")];
    let mut a = node(&postgres, "a", &manual).await;
    let mut b = node(&postgres, "b", &manual).await;
    b.ask("spawn t1", "spawned t1").await;
    let address = b.wire_address().await;

    // A terabyte announced: refused before any of it is read or allocated.
    closed_after(&address, &(1u64 << 40).to_be_bytes()).await;
    b.expect("wire-refused").await;
    // 2 MiB, over the 1 MiB limit.
    closed_after(&address, &(2u64 << 20).to_be_bytes()).await;
    b.expect("wire-refused").await;
    // A frame of the right size holding garbage.
    let mut garbage = 16u64.to_be_bytes().to_vec();
    garbage.extend([0xff; 16]);
    closed_after(&address, &garbage).await;
    b.expect("wire-refused").await;

    // The node is still there for its peers.
    a.ask(&format!("connect {address}"), "connected").await;
    a.expect("wire-up b").await;
    let sent = a.ask("send t1 1", "sent t1 1 ").await;
    assert!(sent.ends_with("Wire(Kept)"), "{sent}");
    assert_eq!(applied(&mut b, "t1").await, [1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_tls_nodes_talk_and_a_node_without_it_is_refused() {
    let Some(postgres) = postgres("cluster_wire") else { return };
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("a certificate");
    let folder = tempfile::tempdir().expect("a folder");
    std::fs::write(folder.path().join("cert.pem"), certified.cert.pem()).expect("written");
    std::fs::write(folder.path().join("key.pem"), certified.signing_key.serialize_pem()).expect("written");
    let tls_folder = folder.path().to_string_lossy().into_owned();
    let tls =
        [("AGENTRY_NODE_WIRE", COOKIE), ("AGENTRY_NODE_WIRE_MANUAL", "1"), ("AGENTRY_NODE_WIRE_TLS", &tls_folder)];
    let mut a = node(&postgres, "a", &tls).await;
    let mut b = node(&postgres, "b", &tls).await;
    b.ask("spawn t1", "spawned t1").await;
    let address = b.wire_address().await;
    // The attack first: connections that open and say nothing (ractor_cluster's own listener waited for such a
    // TLS handshake in its accept loop, keeping every other peer out).
    let mut idle = Vec::new();
    for _ in 0..3 {
        idle.push(tokio::net::TcpStream::connect(&address).await.expect("the wire listens"));
    }
    a.ask(&format!("connect {address}"), "connected").await;
    a.expect("wire-up b").await;
    assert_eq!(a.ask("call t1 2 10000", "replied t1 2 ").await, "replied t1 2 1", "a call over TLS");
    drop(idle);

    // The right cookie, but no TLS: refused in the TLS handshake, before a session is even opened there.
    let plain = [("AGENTRY_NODE_WIRE", COOKIE), ("AGENTRY_NODE_WIRE_MANUAL", "1")];
    let mut c = node(&postgres, "c", &plain).await;
    c.send(&format!("connect {address}")).await;
    c.expect("wire-refused").await;
    let sent = c.ask("send t1 3", "sent t1 3 ").await;
    assert!(sent.ends_with("Inbox(Kept)"), "{sent}");
    assert!(!c.kept.iter().any(|l| l.starts_with("wire-up")), "{:?}", c.kept);

    // TLS, the right cookie, a node that trusts the cluster's certificate but shows one the cluster does not
    // trust: refused in the handshake by the node it dials (which checks its peers' certificates too).
    let stranger = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("a certificate");
    let other = tempfile::tempdir().expect("a folder");
    std::fs::write(other.path().join("cert.pem"), stranger.cert.pem()).expect("written");
    std::fs::write(other.path().join("key.pem"), stranger.signing_key.serialize_pem()).expect("written");
    std::fs::write(other.path().join("trusted.pem"), certified.cert.pem()).expect("written");
    let other_folder = other.path().to_string_lossy().into_owned();
    let untrusted =
        [("AGENTRY_NODE_WIRE", COOKIE), ("AGENTRY_NODE_WIRE_MANUAL", "1"), ("AGENTRY_NODE_WIRE_TLS", &other_folder)];
    let mut d = node(&postgres, "d", &untrusted).await;
    d.send(&format!("connect {address}")).await;
    d.expect_any(&["nack connect", "wire-refused"]).await;
    let sent = d.ask("send t1 4", "sent t1 4 ").await;
    assert!(sent.ends_with("Inbox(Kept)"), "{sent}");
    assert!(!d.kept.iter().any(|l| l.starts_with("wire-up")), "{:?}", d.kept);
}

/// An agent's emits reach an agent held on another node, and a topic's subscribers on every node; the parent of a
/// child on another node hears of its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn emits_reach_agents_and_topic_members_on_other_nodes() {
    let Some(postgres) = postgres("cluster_wire") else { return };
    let wire = [("AGENTRY_NODE_WIRE", COOKIE)];
    let mut a = node(&postgres, "a", &wire).await;
    let mut b = node(&postgres, "b", &wire).await;
    a.ask("spawn t1", "spawned t1").await;
    b.ask("spawn t2", "spawned t2").await;
    b.ask("spawn t3", "spawned t3").await;
    a.expect("wire-up b").await;
    b.expect("wire-up a").await;
    a.ask("subscribe t1 news", "subscribed t1").await;
    b.ask("subscribe t3 news", "subscribed t3").await;

    a.ask(r#"signal t1 tell {"to":"t2","n":5}"#, "given t1 tell").await;
    a.ask("settle", "settled").await;
    assert_eq!(applied(&mut b, "t2").await, [5], "the emit crossed to the node that holds t2");

    a.ask(r#"signal t1 shout {"topic":"news","n":7}"#, "given t1 shout").await;
    a.ask("settle", "settled").await;
    assert_eq!(applied(&mut b, "t3").await, [7], "a topic member on the other node");
    assert_eq!(applied(&mut a, "t1").await, [7], "and the one on this node");
    assert_eq!(applied(&mut b, "t2").await, [5], "not a member: nothing");

    // The target's node frozen: the emit waits in the target's inbox (not lost), and is applied once when the
    // node goes on (the request the wire gave up on, read late, is a duplicate there).
    b.signal("STOP");
    a.ask(r#"signal t1 tell {"to":"t2","n":6}"#, "given t1 tell").await;
    a.ask("settle", "settled").await;
    b.signal("CONT");
    b.ask("call t2 8 10000", "replied t2 8 ").await;
    assert_eq!(applied(&mut b, "t2").await, [5, 6, 8]);
}

/// Spawning on another node: the agent starts there (its lease that node's), answers calls from anywhere, and
/// its parent here hears of its end; a type the other node does not register is a typed refusal; and when the
/// child's node dies, the parent is told its node went down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_spawned_on_another_node_runs_there_and_its_parent_hears_of_its_end() {
    let Some(postgres) = postgres("cluster_wire") else { return };
    let wire = [("AGENTRY_NODE_WIRE", COOKIE)];
    let mut a = node(&postgres, "a", &wire).await;
    let mut b = node(&postgres, "b", &wire).await;
    a.expect("wire-up b").await;
    a.ask("spawn p1", "spawned p1").await;

    a.ask("spawn-on b c1 p1", "spawned-on c1").await;
    assert_eq!(a.ask("call c1 3 10000", "replied c1 3 ").await, "replied c1 3 1", "called across");
    assert_eq!(applied(&mut b, "c1").await, [3], "it lives on b");
    let refused = a.ask("spawn-stranger-on b x1", "refused x1").await;
    assert!(refused.contains("`stranger` is not registered on node `b`"), "{refused}");
    // The attack: a peer asks for an agent with every capability; b allows its peers no more than its default.
    let refused = a.ask("spawn-trusted-on b x2", "refused x2").await;
    assert!(refused.contains("broader than node `b` allows its peers"), "{refused}");
    b.send("state x2").await;
    let state = b.expect_any(&["state x2", "nack x2"]).await;
    assert!(state.starts_with("nack x2"), "the broad agent runs on b: {state}");

    // Its end, on b, reaches its parent on a (b's runtime says it stopped once it sent the word on its way).
    b.ask("stop c1", "stopped c1").await;
    b.expect("stopped-event c1").await;
    b.ask("settle", "settled").await;
    let exits = a.state("p1").await.exits;
    assert_eq!(exits.len(), 1, "{exits:?}");
    assert_eq!(exits[0].0, "c1");

    // An end that comes through the parent's inbox (its node frozen, the wire gave up on it) is heard too: that
    // child is not reported again when its node goes down.
    a.ask("spawn-on b c3 p1", "spawned-on c3").await;
    a.signal("STOP");
    b.ask("stop c3", "stopped c3").await;
    b.expect("stopped-event c3").await;
    b.ask("settle", "settled").await;
    a.signal("CONT");
    // A call here is given after what waits in the inbox.
    a.ask("call p1 9 10000", "replied p1 9 ").await;
    let exits = a.state("p1").await.exits;
    assert_eq!(exits.iter().map(|(child, _)| child.as_str()).collect::<Vec<_>>(), ["c1", "c3"], "{exits:?}");

    // Its node dies: the parent is told, naming the node, of the child still there only.
    a.ask("spawn-on b c2 p1", "spawned-on c2").await;
    b.signal("KILL");
    a.expect("wire-down b").await;
    a.expect("child-down c2").await;
    let exits = a.state("p1").await.exits;
    assert_eq!(exits.len(), 3, "{exits:?}");
    assert_eq!(exits[2].0, "c2");
    assert!(exits[2].1.contains("node `b` went down"), "{exits:?}");
}

/// The cluster's certificate authority: it issues each node a certificate naming `localhost` (the cluster's name,
/// which every node's TLS checks) and the node.
struct Authority {
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    pem: String,
}

impl Authority {
    fn new() -> Self {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let key = rcgen::KeyPair::generate().expect("a CA key");
        let pem = params.self_signed(&key).expect("the CA's certificate").pem();
        Self { issuer: rcgen::Issuer::new(params, key), pem }
    }

    /// A folder with a certificate for `names`, its key, and the authority as the one trusted.
    fn issue(&self, names: &[&str]) -> tempfile::TempDir {
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let key = rcgen::KeyPair::generate().expect("a key");
        let params = rcgen::CertificateParams::new(names).expect("parameters");
        let cert = params.signed_by(&key, &self.issuer).expect("issued");
        let folder = tempfile::tempdir().expect("a folder");
        std::fs::write(folder.path().join("cert.pem"), cert.pem()).expect("written");
        std::fs::write(folder.path().join("key.pem"), key.serialize_pem()).expect("written");
        std::fs::write(folder.path().join("trusted.pem"), &self.pem).expect("written");
        folder
    }
}

/// With node names checked, a peer must show a certificate that names the node it says it is: one holding a
/// certificate the cluster trusts but issued to another node cannot pass for a third, whether it dials or is
/// dialed; nodes with their own certificates talk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_node_names_checked_a_certificate_issued_to_another_node_is_refused() {
    let Some(postgres) = postgres("cluster_wire") else { return };
    let authority = Authority::new();
    // A node named `name` showing the certificate in `folder`.
    let named = async |name: &str, folder: &tempfile::TempDir| {
        let folder = folder.path().to_string_lossy().into_owned();
        let env = [
            ("AGENTRY_NODE_WIRE", COOKIE),
            ("AGENTRY_NODE_WIRE_MANUAL", "1"),
            ("AGENTRY_NODE_WIRE_TLS", folder.as_str()),
            ("AGENTRY_NODE_WIRE_TLS_NAMES", "1"),
        ];
        node(&postgres, name, &env).await
    };
    let (for_a, for_b) = (authority.issue(&["localhost", "a"]), authority.issue(&["localhost", "b"]));
    let mut a = named("a", &for_a).await;
    let mut b = named("b", &for_b).await;
    b.ask("spawn t1", "spawned t1").await;
    let b_address = b.wire_address().await;
    a.ask(&format!("connect {b_address}"), "connected").await;
    a.expect("wire-up b").await;
    assert_eq!(a.ask("call t1 1 10000", "replied t1 1 ").await, "replied t1 1 1", "a call between named nodes");

    // The attack: node `x` holds a certificate the cluster issued to node `c`.
    let for_c = authority.issue(&["localhost", "c"]);
    let mut x = named("x", &for_c).await;
    // It dials b: b refuses it once it says its name (x may see its session get ready before b closes it).
    x.send(&format!("connect {b_address}")).await;
    b.expect("wire-refused").await;
    x.expect_any(&["nack connect", "wire-refused", "wire-down b"]).await;
    let sent = x.ask("send t1 2", "sent t1 2 ").await;
    assert!(sent.ends_with("Inbox(Kept)"), "x reached t1 over the wire: {sent}");
    // a dials it: a refuses it.
    let x_address = x.wire_address().await;
    a.send(&format!("connect {x_address}")).await;
    a.expect_any(&["nack connect", "wire-refused"]).await;
    for (node, lines) in [("a", &a.kept), ("b", &b.kept)] {
        assert!(!lines.iter().any(|l| l == "wire-up x"), "{node} let x in: {lines:?}");
    }
}
