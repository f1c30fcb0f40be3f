//! The wire between nodes, measured on node processes (`cluster_node`) on loopback sharing a real PostgreSQL
//! server: a `call`'s round trip from one node to an agent held on another (over `ractor_cluster`), beside the
//! same call on the node that holds the agent, the same across nodes without a wire (through the durable inbox
//! and `LISTEN`/`NOTIFY`), and a raw TCP echo of a message of the same size (the floor); then signals per second
//! sent across the wire, beside the same sends on the node that holds the agent. `AGENTRY_WIRE_BENCH_CALLS`
//! (500 by default) calls or signals each.
//!
//! Also the wire's own round trip: a request the peer answers `NotHere` at once (no PostgreSQL on its path), and
//! inbox pushes from sixteen tasks at once, a commit each beside those waiting together in one commit.
//!
//! `cargo bench -p agentry-tests --bench wire`

use agentry_tests::cluster::NodeProcess;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const NODE: &str = env!("CARGO_BIN_EXE_cluster_node");
const LEASE_MS: u64 = 10_000;

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Runs `command` (`calls`, `sends` on agent `t1`, or `pings` to node `b`) on `node` and returns the time per
/// operation.
async fn per_op(node: &mut NodeProcess, command: &str, answer: &str, count: u64) -> Duration {
    let target = if command == "pings" { "b" } else { "t1" };
    let line = node.ask(&format!("{command} {target} {count}"), &format!("{answer} {target} {count} ")).await;
    let micros: u64 = line.rsplit(' ').next().and_then(|m| m.parse().ok()).expect("the micros");
    Duration::from_micros(micros) / u32::try_from(count).expect("a count")
}

/// One signal kept in an agent's durable inbox, as the holding node keeps each signal that comes over the wire
/// before it gives it (a transaction: the lock, the insert, the commit): the time per push, `count` in a row.
async fn inbox_push(url: &str, count: u64) -> Duration {
    let inbox = agentry_cluster::Inbox::connect(url, u32::MAX).await.expect("the inbox");
    let agent = agentry::id::AgentId::new("bench-inbox").expect("an id");
    let started = Instant::now();
    for n in 0..count {
        let signal = agentry::signal::Signal::new("add", serde_json::json!(n)).expect("a signal");
        inbox.keep_here(&agent, &signal, false).await.expect("kept");
    }
    started.elapsed() / u32::try_from(count).expect("a count")
}

/// Sixteen tasks pushing into sixteen agents' inboxes at once through one connection, `count` pushes in all:
/// pushes per second through an [`agentry_cluster::Inbox`] (a commit each, one at a time) and through an
/// [`agentry_cluster::Pusher`] (those that wait together in one commit).
async fn pushes_together(url: &str, count: u64) -> (f64, f64) {
    use std::sync::Arc;
    let inbox = Arc::new(agentry_cluster::Inbox::connect(url, u32::MAX).await.expect("the inbox"));
    let one_by_one = pushes_per_second(count, move |agent, signal| {
        let inbox = inbox.clone();
        async move { inbox.keep_here(&agent, &signal, false).await.expect("kept") }
    })
    .await;
    let pusher = Arc::new(agentry_cluster::Pusher::connect(url, u32::MAX).await.expect("the pusher"));
    let together = pushes_per_second(count, move |agent, signal| {
        let pusher = pusher.clone();
        async move { pusher.keep_here(&agent, &signal, false).await.expect("kept") }
    })
    .await;
    (one_by_one, together)
}

/// Sixteen tasks, each pushing its share of `count` signals into an agent's inbox of its own with `push`, one
/// after another: the pushes per second of all of them.
async fn pushes_per_second<F, Pushed>(count: u64, push: F) -> f64
where
    F: Fn(agentry::id::AgentId, agentry::signal::Signal) -> Pushed + Clone + Send + 'static,
    Pushed: std::future::Future<Output = agentry_cluster::Pushed> + Send,
{
    let tasks = 16;
    let each = (count / tasks).max(1);
    let started = Instant::now();
    let pushing: Vec<_> = (0..tasks)
        .map(|task| {
            let push = push.clone();
            tokio::spawn(async move {
                let agent = agentry::id::AgentId::new(format!("bench-together-{task}")).expect("an id");
                for n in 0..each {
                    push(agent.clone(), agentry::signal::Signal::new("add", serde_json::json!(n)).expect("a signal"))
                        .await;
                }
            })
        })
        .collect();
    for task in pushing {
        task.await.expect("pushed");
    }
    (tasks * each) as f64 / started.elapsed().as_secs_f64()
}

/// A raw TCP echo on loopback: the time per round trip of a message of `size` bytes.
async fn tcp_echo(count: u64, size: usize) -> Duration {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let address = listener.local_addr().expect("an address");
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.expect("a client");
        socket.set_nodelay(true).expect("nodelay");
        let mut buffer = vec![0; size];
        while socket.read_exact(&mut buffer).await.is_ok() {
            if socket.write_all(&buffer).await.is_err() {
                break;
            }
        }
    });
    let mut client = tokio::net::TcpStream::connect(address).await.expect("connected");
    client.set_nodelay(true).expect("nodelay");
    let message = vec![7u8; size];
    let mut back = vec![0; size];
    let started = Instant::now();
    for _ in 0..count {
        client.write_all(&message).await.expect("sent");
        client.read_exact(&mut back).await.expect("echoed");
    }
    started.elapsed() / u32::try_from(count).expect("a count")
}

fn main() {
    if std::env::args().any(|a| a == "--test") {
        return;
    }
    let count = env_number("AGENTRY_WIRE_BENCH_CALLS", 500);
    let Some(postgres) = agentry_tests::postgres::or_skip("the wire bench") else { return };
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a runtime");
    rt.block_on(async {
        let wire = [("AGENTRY_NODE_WIRE", "bench"), ("AGENTRY_NODE_WIRE_MANUAL", "1")];
        let mut a = NodeProcess::start_with(NODE, &postgres, LEASE_MS, "a", &wire).await;
        let mut b = NodeProcess::start_with(NODE, &postgres, LEASE_MS, "b", &wire).await;
        let mut c = NodeProcess::start(NODE, &postgres, LEASE_MS, "c").await;
        b.ask("spawn t1", "spawned t1").await;
        let address = b.wire_address().await;
        a.ask(&format!("connect {address}"), "connected").await;
        a.expect("wire-up b").await;
        // Warm up each path.
        per_op(&mut a, "calls", "called", 20).await;
        per_op(&mut b, "calls", "called", 20).await;
        per_op(&mut c, "calls", "called", 20).await;

        per_op(&mut a, "pings", "pinged", 20).await;

        let across = per_op(&mut a, "calls", "called", count).await;
        let pings = per_op(&mut a, "pings", "pinged", count).await;
        let here = per_op(&mut b, "calls", "called", count).await;
        let inbox = per_op(&mut c, "calls", "called", count).await;
        // A call's request on the wire is about 300 bytes of JSON in a protobuf frame.
        let echo = tcp_echo(count, 300).await;
        let push = inbox_push(&postgres.url(), count).await;
        let (one_by_one, together) = pushes_together(&postgres.url(), count).await;
        println!("call round trip, {count} calls in a row:");
        println!("  across the wire (node a to an agent on node b): {across:?}");
        println!(
            "  the wire's own round trip (answered NotHere):    {pings:?} ({:.0}% of the call across)",
            100.0 * ratio(pings, across)
        );
        println!("  on the node that holds the agent:                {here:?} (wire/here {:.1}x)", ratio(across, here));
        println!(
            "  across without a wire (inbox, LISTEN/NOTIFY):    {inbox:?} (wire/inbox {:.2}x)",
            ratio(across, inbox)
        );
        println!("  raw TCP echo of 300 bytes on loopback:           {echo:?} (wire/echo {:.0}x)", ratio(across, echo));
        println!(
            "  one durable inbox push (what the holder does first): {push:?} ({:.0}% of the call across)",
            100.0 * ratio(push, across)
        );
        println!("inbox pushes from sixteen tasks at once through one connection, {count} in all:");
        println!("  a commit each (Inbox):             {one_by_one:.0}/s");
        println!("  together in one commit (Pusher):   {together:.0}/s ({:.1}x)", together / one_by_one.max(1e-9));

        // An agent's emits to agents on another node, sent on by its node: to one target, and to sixteen.
        a.ask("spawn sprayer", "spawned sprayer").await;
        let targets: Vec<String> = (0..16).map(|n| format!("s{n}")).collect();
        for target in &targets {
            b.ask(&format!("spawn {target}"), &format!("spawned {target}")).await;
        }
        let mut spray = async |to: &[String], times: u64| {
            let line = a.ask(&format!("spray sprayer {times} {}", to.join(" ")), "sprayed sprayer ").await;
            let micros: f64 = line.rsplit(' ').next().and_then(|m| m.parse().ok()).expect("the micros");
            (times as f64 * to.len() as f64) / (micros / 1e6)
        };
        spray(&targets[..1], 20).await;
        let to_one = spray(&targets[..1], count).await;
        let to_sixteen = spray(&targets, (count / 16).max(1)).await;
        println!("an agent's emits to agents on another node, {count} in a row:");
        println!("  to one agent:      {to_one:.0}/s");
        println!("  to sixteen agents: {to_sixteen:.0}/s ({:.1}x)", to_sixteen / to_one.max(1e-9));

        let sends_across = per_op(&mut a, "sends", "sent-all", count).await;
        let sends_here = per_op(&mut b, "sends", "sent-all", count).await;
        println!("signals sent in a row, {count}:");
        println!("  across the wire: {:.0}/s ({sends_across:?} each)", per_second(sends_across));
        println!("  on the node that holds the agent: {:.0}/s ({sends_here:?} each)", per_second(sends_here));
    });
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64().max(1e-9)
}

fn per_second(each: Duration) -> f64 {
    1.0 / each.as_secs_f64().max(1e-9)
}
