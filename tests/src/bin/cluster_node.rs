//! A node process for the cluster tests: a runtime of `Tally` agents (and `Worker`s) in a cluster whose journal is the
//! PostgreSQL database named by `AGENTRY_NODE_POSTGRES`.
//!
//! `cluster_node <name> <lease-ms>` joins the cluster, keeps its leases (a heartbeat every third of the lease)
//! and prints `up <name>`; then it prints `took <agent>` for each agent of a dead node it takes over and `lost
//! <agent>` for each agent whose lease it lost (it stops its copy), `stopped-event <agent> <reason>` for each
//! agent its runtime announces stopped, and takes one command a line on stdin:
//! - `spawn <agent>`: spawns a `Tally` here (claiming its lease), allowed to spawn children; prints `spawned
//!   <agent>` or `refused <agent> <why>`.
//! - `spawn-permanent <agent>`: `spawn`, with the restart policy `Permanent` (an agent that stops itself is
//!   started again afresh).
//! - `spawn-raw <agent>`: the same through the runtime itself rather than the node (its claim before a spawn
//!   takes the lease).
//! - `adopt <parent> <child>`: has agent `parent` spawn a `Tally` child; prints `adopted <child>` once it started
//!   here (or `nack adopt <child> <why>`).
//! - `add <agent> <n>`: sends `add n` and waits for the reply and for the journal to hold it under this node's
//!   lease; prints `ack <agent> <n>` only then, else `nack <agent> <n> <why>`.
//! - `state <agent>`: prints `state <agent> <json>` (or `nack <agent> state <why>`).
//! - `call <agent> <n> <timeout-ms>`: calls the agent with `add n` wherever it lives, through a `ClusterRef`; prints `replied <agent> <n>
//!   <reply>` or `nack <agent> <n> <why>`.
//! - `stop <agent>`: ends the agent (it is dropped from the journal); prints `stopped <agent>`, and `ended
//!   <agent>` once the node let its lease go.
//! - `send <agent> <n>`: sends `add n` to the agent wherever it lives; prints `sent <agent> <n> <where>`.
//!
//! - `send-id <agent> <n> <uuid>`: the same, with the signal's id given (a retry is the same id); prints `sent
//!   <agent> <n> <where>`.
//! - `connect <address>`: connects the wire to a peer; prints `connected <address>` or `nack connect <why>`.
//! - `calls <agent> <count>`: calls the agent with `add 1` `count` times in a row, wherever it lives; prints
//!   `called <agent> <count> <micros>` (the bench's round trips).
//! - `pings <node> <count>`: asks node `node` over the wire, `count` times in a row, for an agent it does not
//!   hold (it answers `NotHere` without touching PostgreSQL); prints `pinged <node> <count> <micros>` (the
//!   wire's own round trip, for the bench).
//! - `sends <agent> <count>`: sends the agent `add 1` `count` times in a row, wherever it lives; prints `sent-all
//!   <agent> <count> <micros>`.
//!
//! - `signal <agent> <kind> <json>`: calls the agent with the signal wherever it lives; prints `given <agent>
//!   <kind>` once it replied (or `nack`).
//! - `tell <agent> <kind> <json>`: sends the agent the signal wherever it lives, without waiting for a reply;
//!   prints `told <agent> <kind>` (or `nack`).
//! - `subscribe <agent> <topic>`: subscribes an agent of this node to a topic; prints `subscribed <agent>`.
//! - `spawn-on <node> <agent> [parent]`: spawns a `Tally` on node `node` (a peer on the wire), a child of
//!   `parent` (an agent here) if given; prints `spawned-on <agent>` or `refused <agent> <why>`.
//! - `spawn-stranger-on <node> <agent>`: the same with a type no node registers; prints `refused <agent> <why>`.
//! - `spawn-trusted-on <node> <agent>`: the same asking for `Policy::trusted()` (every capability).
//! - `rebalance <max>`: hands over at most `max` agents that placement now gives to other nodes; prints `handed
//!   <agent>` and `busy <agent>` for each, then `rebalanced <handed>`.
//! - `spray <agent> <times> <target>...`: has agent `agent` (here) emit `add 1` to each target, `times` rounds,
//!   then waits until this node sent them all on; prints `sprayed <agent> <count> <micros>`.
//! - `settle`: waits until every signal this node's agents emitted for other nodes was sent on; prints `settled`.
//! - `spray-kept <agent> <times> <target>...`: as `spray`, but prints `kept <agent>` once the agent's step is
//!   durable, without waiting for its emits to be sent on.
//!
//! It runs the durability tests' `Worker` too (`agentry_tests::durable`), whose `ledger` actions append lines to
//! files in the agents' drives, under the folder named by `AGENTRY_NODE_DATA` (one folder for every node: an
//! agent's drive is the same wherever it runs). It prints `approval-asked <agent> <run>` for each run that asks
//! for approval.
//! - `spawn-worker <agent>`: spawns a `Worker` here; prints `spawned <agent>`.
//! - `flush <agent>`: prints `flushed <agent>` once what the agent wrote so far is durable under this node's lease.
//! - `approve <agent> <run>`: approves the run; prints `approved <run>` (or `nack approve <why>`).
//! - `await-worker <agent> <field> <at-least>`: waits until the worker's counter `field` is at least that; prints
//!   `worker <agent> <json>`.
//!
//! Signals pushed into an agent's inbox (by the test, or by another node) reach it on the node that holds it.
//!
//! With `AGENTRY_NODE_WIRE=<cookie>`, the node speaks on the wire (loopback, a free port) and prints `wire
//! <address>` before `up`; `AGENTRY_NODE_WIRE_TLS=<folder>` adds TLS with `cert.pem` and `key.pem` from that
//! folder (the certificate is also the one trusted, unless the folder has a `trusted.pem`), and
//! `AGENTRY_NODE_WIRE_TLS_NAMES=1` has it check that each peer's certificate names that peer;
//! `AGENTRY_NODE_WIRE_MANUAL=1` connects only where told. It
//! prints `wire-up <node>`, `wire-down <node>` and `wire-refused <peer>` as the wire's connections change.

use agentry::id::AgentId;
use agentry::runtime::{Runtime, SpawnOptions};
use agentry::signal::Signal;
use agentry_cluster::{Node, NodeOptions, WireEvent, WireOptions, WireTls};
use agentry_tests::cluster::Tally;
use agentry_tests::durable::Worker;
use serde_json::json;
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncBufReadExt;

const CALL: Duration = Duration::from_secs(10);

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let name = args[1].clone();
    let lease = Duration::from_millis(args[2].parse().expect("a lease in ms"));
    let url = std::env::var("AGENTRY_NODE_POSTGRES").expect("AGENTRY_NODE_POSTGRES names the database");
    let builder = Runtime::builder()
        .agent::<Tally>()
        .expect("the tally registers")
        .agent::<Worker>()
        .expect("the worker registers")
        .skill(agentry_tests::durable::extra());
    let builder = match std::env::var("AGENTRY_NODE_DATA") {
        Ok(folder) => builder.data_dir(folder),
        Err(_) => builder,
    };
    let options = NodeOptions { lease, wire: wire_options(), ..NodeOptions::new(name.clone(), url) };
    let (node, _) = Node::start(builder, options).await.expect("the node starts");
    if let Some(wire) = node.wire() {
        say(&format!("wire {}", wire.address()));
        let mut events = wire.events();
        tokio::spawn(async move {
            while let Ok(event) = events.recv().await {
                match event {
                    WireEvent::Up { node } => say(&format!("wire-up {node}")),
                    WireEvent::Down { node } => say(&format!("wire-down {node}")),
                    WireEvent::Refused { peer } => say(&format!("wire-refused {peer}")),
                    WireEvent::Slow { node } => say(&format!("wire-slow {node}")),
                }
            }
        });
    }
    let node = Arc::new(node);
    let (ticks, mut told) = tokio::sync::mpsc::unbounded_channel();
    let _keeper = node.keep(Some(ticks)).await.expect("the node keeps its leases");
    tokio::spawn(async move {
        while let Some(tick) = told.recv().await {
            tick.taken.iter().for_each(|agent| say(&format!("took {agent}")));
            tick.lost.iter().for_each(|agent| say(&format!("lost {agent}")));
            tick.ended.iter().for_each(|agent| say(&format!("ended {agent}")));
            tick.children_down.iter().for_each(|agent| say(&format!("child-down {agent}")));
            tick.given_again.iter().for_each(|agent| say(&format!("given-again {agent}")));
        }
    });
    // The runtime's own word on agents stopped (a node that lost an agent's lease says so).
    let mut events = node.runtime().events();
    tokio::spawn(async move {
        loop {
            match events.recv().await {
                Ok(event) => match (&event.kind, event.run) {
                    (agentry::events::EventKind::AgentStopped { reason }, _) => {
                        say(&format!("stopped-event {} {reason}", event.agent));
                    }
                    (agentry::events::EventKind::ApprovalAsked { .. }, Some(run)) => {
                        say(&format!("approval-asked {} {run}", event.agent));
                    }
                    _ => {}
                },
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
            }
        }
    });
    say(&format!("up {name}"));
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["spawn", agent] => match node.spawn(Tally::default(), parent_opts(agent)).await {
                Ok(_) => say(&format!("spawned {agent}")),
                Err(err) => say(&format!("refused {agent} {err}")),
            },
            ["spawn-permanent", agent] => {
                let restart = agentry::runtime::RestartPolicy {
                    mode: agentry::runtime::RestartMode::Permanent,
                    ..agentry::runtime::RestartPolicy::default()
                };
                match node.spawn(Tally::default(), SpawnOptions { restart, ..parent_opts(agent) }).await {
                    Ok(_) => say(&format!("spawned {agent}")),
                    Err(err) => say(&format!("refused {agent} {err}")),
                }
            }
            ["spawn-raw", agent] => match node.runtime().spawn(Tally::default(), parent_opts(agent)).await {
                Ok(_) => say(&format!("spawned {agent}")),
                Err(err) => say(&format!("refused {agent} {err}")),
            },
            ["adopt", parent, child] => say(&adopt(&node, parent, child).await),
            ["stop", agent] => match node.runtime().stop(&AgentId::new(*agent).expect("an id")).await {
                Ok(()) => say(&format!("stopped {agent}")),
                Err(err) => say(&format!("nack {agent} stop {err}")),
            },
            ["add", agent, n] => say(&add(&node, agent, n.parse().expect("a number")).await),
            ["call", agent, n, ms] => {
                let id = AgentId::new(*agent).expect("an id");
                let signal = Signal::new("add", json!(n.parse::<u64>().expect("a number"))).expect("a kind");
                let timeout = Duration::from_millis(ms.parse().expect("a timeout in ms"));
                // Through a typed handle on the agent wherever it lives, as an application holds one.
                match node.agent::<Tally>(id).call(signal, timeout).await {
                    Ok(reply) => say(&format!("replied {agent} {n} {reply}")),
                    Err(err) => say(&format!("nack {agent} {n} {err}")),
                }
            }
            ["send", agent, n] => {
                let id = AgentId::new(*agent).expect("an id");
                let signal = Signal::new("add", json!(n.parse::<u64>().expect("a number"))).expect("a kind");
                match node.send(&id, signal).await {
                    Ok(sent) => say(&format!("sent {agent} {n} {sent:?}")),
                    Err(err) => say(&format!("nack {agent} {n} {err}")),
                }
            }
            ["send-id", agent, n, id] => {
                let agent_id = AgentId::new(*agent).expect("an id");
                let signal = Signal::builder("add")
                    .data(json!(n.parse::<u64>().expect("a number")))
                    .stamped(id.parse().expect("a uuid"), chrono::Utc::now())
                    .build()
                    .expect("a kind");
                match node.send(&agent_id, signal).await {
                    Ok(sent) => say(&format!("sent {agent} {n} {sent:?}")),
                    Err(err) => say(&format!("nack {agent} {n} {err}")),
                }
            }
            ["signal", agent, kind, data] => {
                let id = AgentId::new(*agent).expect("an id");
                let signal = Signal::new(*kind, serde_json::from_str(data).expect("JSON")).expect("a kind");
                match node.call(&id, signal, CALL).await {
                    Ok(_) => say(&format!("given {agent} {kind}")),
                    Err(err) => say(&format!("nack {agent} {kind} {err}")),
                }
            }
            ["tell", agent, kind, data] => {
                let id = AgentId::new(*agent).expect("an id");
                let signal = Signal::new(*kind, serde_json::from_str(data).expect("JSON")).expect("a kind");
                match node.send(&id, signal).await {
                    Ok(_) => say(&format!("told {agent} {kind}")),
                    Err(err) => say(&format!("nack {agent} {kind} {err}")),
                }
            }
            ["subscribe", agent, topic] => {
                node.runtime().subscribe(&AgentId::new(*agent).expect("an id"), topic);
                say(&format!("subscribed {agent}"));
            }
            ["spawn-on", on, agent, parent @ ..] => {
                let parent = parent.first().map(|p| AgentId::new(*p).expect("an id"));
                let opts =
                    SpawnOptions { id: Some(AgentId::new(*agent).expect("an id")), parent, ..SpawnOptions::default() };
                match node.spawn_on(on, Tally::default(), opts).await {
                    Ok(_) => say(&format!("spawned-on {agent}")),
                    Err(err) => say(&format!("refused {agent} {err}")),
                }
            }
            ["spawn-trusted-on", on, agent] => {
                let opts = SpawnOptions {
                    id: Some(AgentId::new(*agent).expect("an id")),
                    policy: agentry::policy::Policy::trusted(),
                    ..SpawnOptions::default()
                };
                match node.spawn_on(on, Tally::default(), opts).await {
                    Ok(_) => say(&format!("spawned-on {agent}")),
                    Err(err) => say(&format!("refused {agent} {err}")),
                }
            }
            ["spawn-stranger-on", on, agent] => {
                let opts = SpawnOptions { id: Some(AgentId::new(*agent).expect("an id")), ..SpawnOptions::default() };
                match node.spawn_on(on, Stranger, opts).await {
                    Ok(_) => say(&format!("spawned-on {agent}")),
                    Err(err) => say(&format!("refused {agent} {err}")),
                }
            }
            ["rebalance", max] => match node.rebalance(max.parse().expect("a count")).await {
                Ok(rebalanced) => {
                    rebalanced.handed.iter().for_each(|agent| say(&format!("handed {agent}")));
                    rebalanced.busy.iter().for_each(|agent| say(&format!("busy {agent}")));
                    say(&format!("rebalanced {}", rebalanced.handed.len()));
                }
                Err(err) => say(&format!("nack rebalance {err}")),
            },
            ["spray", agent, times, targets @ ..] => {
                let id = AgentId::new(*agent).expect("an id");
                let times: u64 = times.parse().expect("a count");
                let spray = Signal::new("spray", json!({"to": targets, "times": times})).expect("a kind");
                let started = std::time::Instant::now();
                match node.runtime().call(&id, spray, CALL).await {
                    Ok(_) => {
                        node.sent_on().await;
                        let count = times * targets.len() as u64;
                        say(&format!("sprayed {agent} {count} {}", started.elapsed().as_micros()));
                    }
                    Err(err) => say(&format!("nack spray {err}")),
                }
            }
            // As `spray`, but answers once the agent's step is durable (what it emitted kept in the journal),
            // without waiting for its emits to be sent on.
            ["spray-kept", agent, times, targets @ ..] => {
                let id = AgentId::new(*agent).expect("an id");
                let times: u64 = times.parse().expect("a count");
                let spray = Signal::new("spray", json!({"to": targets, "times": times})).expect("a kind");
                match node.runtime().call(&id, spray, CALL).await {
                    Ok(_) => match node.runtime().store().durable().expect("durable").flushed_for(&id).await {
                        Ok(()) => say(&format!("kept {agent}")),
                        Err(err) => say(&format!("nack spray-kept {err}")),
                    },
                    Err(err) => say(&format!("nack spray-kept {err}")),
                }
            }
            ["spawn-worker", agent] => {
                let opts = SpawnOptions { id: Some(AgentId::new(*agent).expect("an id")), ..SpawnOptions::default() };
                match node.spawn(Worker::default(), opts).await {
                    Ok(_) => say(&format!("spawned {agent}")),
                    Err(err) => say(&format!("refused {agent} {err}")),
                }
            }
            ["flush", agent] => {
                let id = AgentId::new(*agent).expect("an id");
                match node.runtime().store().durable().expect("durable").flushed_for(&id).await {
                    Ok(()) => say(&format!("flushed {agent}")),
                    Err(err) => say(&format!("nack flush {err}")),
                }
            }
            ["approve", agent, run] => {
                let id = AgentId::new(*agent).expect("an id");
                match node.runtime().decide(&id, run.parse().expect("a run id"), true).await {
                    Ok(()) => say(&format!("approved {run}")),
                    Err(err) => say(&format!("nack approve {err}")),
                }
            }
            ["await-worker", agent, field, least] => {
                let least: u64 = least.parse().expect("a count");
                say(&await_worker(&node, agent, field, least).await);
            }
            ["settle"] => {
                node.sent_on().await;
                say("settled");
            }
            ["connect", address] => match node.wire().map(|wire| wire.connect(address)) {
                Some(connecting) => match connecting.await {
                    Ok(()) => say(&format!("connected {address}")),
                    Err(err) => say(&format!("nack connect {err}")),
                },
                None => say("nack connect this node has no wire"),
            },
            [verb @ ("calls" | "sends"), agent, count] => {
                let id = AgentId::new(*agent).expect("an id");
                let count: u32 = count.parse().expect("a count");
                let started = std::time::Instant::now();
                for _ in 0..count {
                    let signal = Signal::new("add", json!(1)).expect("a kind");
                    let done = match *verb {
                        "calls" => node.call(&id, signal, CALL).await.map(drop),
                        _ => node.send(&id, signal).await.map(drop),
                    };
                    if let Err(err) = done {
                        say(&format!("nack {agent} {verb} {err}"));
                        break;
                    }
                }
                let said = if *verb == "calls" { "called" } else { "sent-all" };
                say(&format!("{said} {agent} {count} {}", started.elapsed().as_micros()));
            }
            ["pings", peer, count] => {
                let count: u32 = count.parse().expect("a count");
                let Some(wire) = node.wire() else {
                    say("nack pings this node has no wire");
                    continue;
                };
                let nobody = AgentId::new("nobody-here").expect("an id");
                let started = std::time::Instant::now();
                for _ in 0..count {
                    let signal = Signal::new("add", json!(1)).expect("a kind");
                    let request = agentry_cluster::wire::WireRequest::Send { agent: nobody.clone(), signal };
                    match wire.ask_node(peer, &request, CALL).await {
                        Ok(agentry_cluster::wire::WireReply::NotHere) => {}
                        other => {
                            say(&format!("nack pings {other:?}"));
                            break;
                        }
                    }
                }
                say(&format!("pinged {peer} {count} {}", started.elapsed().as_micros()));
            }
            ["state", agent] => {
                let id = AgentId::new(*agent).expect("an id");
                let asked = node.runtime().call(&id, Signal::new("ask", json!(null)).expect("a kind"), CALL).await;
                match asked {
                    Ok(state) => say(&format!("state {agent} {state}")),
                    Err(err) => say(&format!("nack {agent} state {err}")),
                }
            }
            _ => say(&format!("unknown command: {line}")),
        }
    }
}

/// An agent type no node registers.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
struct Stranger;

impl agentry::agent::Agent for Stranger {
    fn name() -> &'static str {
        "stranger"
    }

    fn handle_signal(&self, _: &Signal) -> agentry::agent::Reaction<Self> {
        agentry::agent::Reaction::Ignore
    }
}

/// The wire's options from the environment (see the module docs), or none.
fn wire_options() -> Option<WireOptions> {
    let cookie = std::env::var("AGENTRY_NODE_WIRE").ok()?;
    let mut options = WireOptions::new(cookie);
    if let Ok(folder) = std::env::var("AGENTRY_NODE_WIRE_TLS") {
        let read = |file: &str| std::fs::read_to_string(std::path::Path::new(&folder).join(file)).expect("a PEM file");
        let cert = read("cert.pem");
        // The certificates it trusts: `trusted.pem` if there is one, else its own.
        let trusted =
            std::fs::read_to_string(std::path::Path::new(&folder).join("trusted.pem")).unwrap_or(cert.clone());
        let tls = WireTls::from_pem(&cert, &read("key.pem"), &trusted, "localhost").expect("TLS settings");
        // `AGENTRY_NODE_WIRE_TLS_NAMES=1`: each peer's certificate must name the node it says it is.
        options.tls = Some(match std::env::var("AGENTRY_NODE_WIRE_TLS_NAMES") {
            Ok(_) => tls.checking_node_names(),
            Err(_) => tls,
        });
    }
    options.discover = std::env::var("AGENTRY_NODE_WIRE_MANUAL").is_err();
    Some(options)
}

/// The options of a `Tally` spawned here under id `agent`: it may spawn children.
fn parent_opts(agent: &str) -> SpawnOptions {
    SpawnOptions {
        id: Some(AgentId::new(agent).expect("an id")),
        policy: agentry::policy::Policy::default().grant(agentry::action::Capability::SPAWN),
        ..SpawnOptions::default()
    }
}

/// Has `parent` spawn `child`, and waits (within the call's bound) until the child started here, or the parent
/// heard that it could not.
async fn adopt(node: &Node, parent: &str, child: &str) -> String {
    let mut events = node.runtime().events();
    let adopt = Signal::new("adopt", json!(child)).expect("a kind");
    let parent = AgentId::new(parent).expect("an id");
    let failed = node.runtime().call(&parent, adopt, CALL);
    let started = async {
        loop {
            match events.recv().await {
                Ok(event)
                    if event.agent.as_str() == child && event.kind == agentry::events::EventKind::AgentStarted =>
                {
                    return;
                }
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(tokio::sync::broadcast::error::RecvError::Closed) => std::future::pending().await,
            }
        }
    };
    tokio::select! {
        () = started => format!("adopted {child}"),
        failed = failed => match failed {
            Ok(failed) => format!("nack adopt {child} {}", failed["error"]),
            Err(err) => format!("nack adopt {child} {err}"),
        },
    }
}

/// Waits (within the call's bound) until worker `agent`'s counter `field` is at least `least`, looking again at
/// each event of the runtime, and every 20 ms (a signal the agent handles makes no event).
async fn await_worker(node: &Node, agent: &str, field: &str, least: u64) -> String {
    let id = AgentId::new(agent).expect("an id");
    let mut events = node.runtime().events();
    let deadline = tokio::time::Instant::now() + CALL;
    let mut every = tokio::time::interval(Duration::from_millis(20));
    loop {
        let state = match node.runtime().get::<Worker>(&id) {
            Ok(worker) => worker.state().await.map(|state| serde_json::to_value(&state.domain).expect("json")),
            Err(err) => Err(err),
        };
        match state {
            Ok(state) if state[field].as_u64().is_some_and(|n| n >= least) => return format!("worker {agent} {state}"),
            Ok(_) => {}
            Err(err) => return format!("nack await-worker {err}"),
        }
        if tokio::time::Instant::now() >= deadline {
            return format!("nack await-worker {agent}'s {field} did not reach {least} within {CALL:?}");
        }
        tokio::select! {
            _ = events.recv() => {}
            _ = every.tick() => {}
        }
    }
}

/// Sends `add n` and acknowledges it only once the journal holds it under this node's lease.
async fn add(node: &Node, agent: &str, n: u64) -> String {
    let id = AgentId::new(agent).expect("an id");
    let signal = Signal::new("add", json!(n)).expect("a kind");
    if let Err(err) = node.runtime().call(&id, signal, CALL).await {
        return format!("nack {agent} {n} {err}");
    }
    // Everything the agent wrote before its reply is durable once this resolves, and it fails if the journal
    // did not keep it (a failed commit, or a lease this node no longer holds).
    let flushed = node.runtime().store().durable().map(|durable| durable.flushed_for(&id));
    if let Some(flushed) = flushed
        && flushed.await.is_err()
    {
        return format!("nack {agent} {n} the journal did not keep it");
    }
    format!("ack {agent} {n}")
}
