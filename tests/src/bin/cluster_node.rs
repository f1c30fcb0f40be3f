//! A node process for the cluster tests: a runtime of `Tally` agents in a cluster whose journal is the
//! PostgreSQL database named by `AGENTRY_NODE_POSTGRES`.
//!
//! `cluster_node <name> <lease-ms>` joins the cluster, keeps its leases (a heartbeat every third of the lease)
//! and prints `up <name>`; then it prints `took <agent>` for each agent of a dead node it takes over and `lost
//! <agent>` for each agent whose lease it lost (it stops its copy), `stopped-event <agent> <reason>` for each
//! agent its runtime announces stopped, and takes one command a line on stdin:
//! - `spawn <agent>`: spawns a `Tally` here (claiming its lease); prints `spawned <agent>` or `refused <agent> <why>`.
//! - `add <agent> <n>`: sends `add n` and waits for the reply and for the journal to hold it under this node's
//!   lease; prints `ack <agent> <n>` only then, else `nack <agent> <n> <why>`.
//! - `state <agent>`: prints `state <agent> <json>` (or `nack <agent> state <why>`).
//! - `call <agent> <n> <timeout-ms>`: calls the agent with `add n` wherever it lives; prints `replied <agent> <n>
//!   <reply>` or `nack <agent> <n> <why>`.
//! - `stop <agent>`: ends the agent (it is dropped from the journal); prints `stopped <agent>`, and `ended
//!   <agent>` once the node let its lease go.
//! - `send <agent> <n>`: sends `add n` to the agent wherever it lives; prints `sent <agent> <n> <where>`.
//!
//! Signals pushed into an agent's inbox (by the test, or by another node) reach it on the node that holds it.

use agentry::id::AgentId;
use agentry::runtime::{Runtime, SpawnOptions};
use agentry::signal::Signal;
use agentry_cluster::{Node, NodeOptions};
use agentry_tests::cluster::Tally;
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
    let builder = Runtime::builder().agent::<Tally>().expect("the tally registers");
    let options = NodeOptions { lease, ..NodeOptions::new(name.clone(), url) };
    let (node, _) = Node::start(builder, options).await.expect("the node starts");
    let node = Arc::new(node);
    let (ticks, mut told) = tokio::sync::mpsc::unbounded_channel();
    let _keeper = node.keep(Some(ticks)).await.expect("the node keeps its leases");
    tokio::spawn(async move {
        while let Some(tick) = told.recv().await {
            tick.taken.iter().for_each(|agent| say(&format!("took {agent}")));
            tick.lost.iter().for_each(|agent| say(&format!("lost {agent}")));
            tick.ended.iter().for_each(|agent| say(&format!("ended {agent}")));
        }
    });
    // The runtime's own word on agents stopped (a node that lost an agent's lease says so).
    let mut events = node.runtime().events();
    tokio::spawn(async move {
        loop {
            match events.recv().await {
                Ok(event) => {
                    if let agentry::events::EventKind::AgentStopped { reason } = &event.kind {
                        say(&format!("stopped-event {} {reason}", event.agent));
                    }
                }
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
            ["spawn", agent] => {
                let opts = SpawnOptions { id: Some(AgentId::new(*agent).expect("an id")), ..SpawnOptions::default() };
                match node.spawn(Tally::default(), opts).await {
                    Ok(_) => say(&format!("spawned {agent}")),
                    Err(err) => say(&format!("refused {agent} {err}")),
                }
            }
            ["stop", agent] => match node.runtime().stop(&AgentId::new(*agent).expect("an id")).await {
                Ok(()) => say(&format!("stopped {agent}")),
                Err(err) => say(&format!("nack {agent} stop {err}")),
            },
            ["add", agent, n] => say(&add(&node, agent, n.parse().expect("a number")).await),
            ["call", agent, n, ms] => {
                let id = AgentId::new(*agent).expect("an id");
                let signal = Signal::new("add", json!(n.parse::<u64>().expect("a number"))).expect("a kind");
                let timeout = Duration::from_millis(ms.parse().expect("a timeout in ms"));
                match node.call(&id, signal, timeout).await {
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

/// Sends `add n` and acknowledges it only once the journal holds it under this node's lease.
async fn add(node: &Node, agent: &str, n: u64) -> String {
    let id = AgentId::new(agent).expect("an id");
    let signal = Signal::new("add", json!(n)).expect("a kind");
    if let Err(err) = node.runtime().call(&id, signal, CALL).await {
        return format!("nack {agent} {n} {err}");
    }
    // Everything the agent wrote before its reply is durable once this resolves, unless the journal refused it
    // (the lease is gone): then the fence no longer holds the agent.
    let flushed = node.runtime().store().durable().map(|durable| durable.flushed());
    if let Some(flushed) = flushed
        && flushed.await.is_err()
    {
        return format!("nack {agent} {n} the journal did not commit");
    }
    match node.fence().epoch(&id) {
        Some(_) => format!("ack {agent} {n}"),
        None => format!("nack {agent} {n} this node no longer holds the agent"),
    }
}
