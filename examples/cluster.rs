//! Two nodes of one cluster, in two terminals: node `b` holds a calculator agent, and node `a` calls it from the
//! other process. PostgreSQL is the journal both share and the judge of who holds the agent. With a cookie in
//! `AGENTRY_CLUSTER_COOKIE`, the nodes talk over the wire (`ractor_cluster` on loopback) and the call goes straight
//! to `b`; without, it goes through the agent's durable inbox, and the reply comes back the same way.
//!
//! With a PostgreSQL database for the cluster (its connection string in `AGENTRY_POSTGRES`; for a server of its
//! own, `cargo run -p agentry-tests --bin postgres_server` prints one), in one terminal:
//!
//! ```text
//! AGENTRY_POSTGRES='host=… user=… dbname=…' cargo run -p agentry-examples --example cluster -- b
//! ```
//!
//! and once it says it holds the calculator, in another:
//!
//! ```text
//! AGENTRY_POSTGRES='host=… user=… dbname=…' cargo run -p agentry-examples --example cluster -- a
//! ```
//!
//! Stop `b` (Ctrl-C: it leaves the cluster, letting its leases go) and run `a` again: `a` takes the calculator
//! over, brings it back from the journal with its count of calculations, and answers its own calls. (Killed
//! instead, `b` keeps its lease until it runs out, 5 s.)

use agentry::id::AgentId;
use agentry::runtime::{Runtime, SpawnOptions};
use agentry::signal::Signal;
use agentry_cluster::{Node, NodeOptions, WireEvent, WireOptions};
use agentry_examples::calculator::Calculator;
use serde_json::json;
use std::error::Error;
use std::sync::Arc;
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let role = std::env::args().nth(1).unwrap_or_default();
    // The connection string comes from the environment, never from a file.
    let url = std::env::var("AGENTRY_POSTGRES").map_err(|_| "AGENTRY_POSTGRES names no database")?;
    // The cluster's shared secret, from the environment too.
    let wire = std::env::var("AGENTRY_CLUSTER_COOKIE").ok().map(WireOptions::new);
    let options = NodeOptions { lease: Duration::from_secs(5), wire, ..NodeOptions::new(role.clone(), url) };
    let (node, _) = Node::start(Runtime::builder().agent::<Calculator>()?, options).await?;
    let node = Arc::new(node);
    let mut events = node.wire().map(|wire| wire.events());
    let _upkeep = node.keep(None).await?;
    let calculator = AgentId::new("calculator")?;
    match role.as_str() {
        "b" => {
            let journal = node.runtime().store().durable().ok_or("a node's journal is durable")?;
            if journal.agent(&calculator)?.is_some() {
                // Spawned by an earlier run: brought back, as it was, by whichever node takes it over.
                println!("the calculator is in the journal already; a node will take it over (Ctrl-C to stop)");
            } else {
                let opts = SpawnOptions { id: Some(calculator.clone()), ..SpawnOptions::default() };
                node.spawn(Calculator::default(), opts).await?;
                println!("node b holds the calculator; call it from node a (Ctrl-C to stop)");
            }
            tokio::signal::ctrl_c().await?;
            // Its leases let go: node a takes the calculator at its next round.
            node.leave(Duration::from_secs(1)).await?;
            return Ok(());
        }
        "a" => {
            // Node b dials a (of two nodes, the later name dials) at its next round: waited for a moment, so the
            // first call can take the wire.
            if let Some(events) = &mut events {
                match tokio::time::timeout(Duration::from_secs(3), events.recv()).await {
                    Ok(Ok(WireEvent::Up { node })) => println!("on the wire with node {node}"),
                    _ => println!("no peer on the wire yet: the calls go through the inbox"),
                }
            }
            for (op, a, b) in [("add", 2, 3), ("multiply", 6, 7), ("divide", 1, 4)] {
                let question = Signal::new("calculate", json!({"op": op, "a": a, "b": b}))?;
                let answer = node.call(&calculator, question, Duration::from_secs(30)).await?;
                let here = if node.fence().epoch(&calculator).is_some() { "here" } else { "on another node" };
                println!("{op}({a}, {b}) = {answer}   (answered {here})");
            }
        }
        other => return Err(format!("`{other}`: expected `a` or `b`").into()),
    }
    node.runtime().shutdown(Duration::from_secs(1)).await;
    Ok(())
}
