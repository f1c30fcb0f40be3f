//! `agentry cluster status`, the operator's view of a cluster, on a real PostgreSQL server with real node
//! processes (`cluster_node`): which nodes are alive and where they listen, the leases each holds and how many
//! ran out, and what waits in the inboxes. Run as the command a user runs, its connection string read from the
//! environment.

use agentry::id::AgentId;
use agentry::signal::Signal;
use agentry_cluster::{Inbox, Owners};
use agentry_tests::cluster::NodeProcess;
use serde_json::{Value, json};
use std::time::Duration;

const NODE: &str = env!("CARGO_BIN_EXE_cluster_node");
const AGENTRY: &str = env!("CARGO_BIN_EXE_agentry_librarian");
const LEASE_MS: u64 = 3_000;

/// `agentry cluster status` with `args`, the connection string in `AGENTRY_POSTGRES` (or not, with `None`):
/// its exit code, stdout and stderr.
fn agentry_status(url: Option<&str>, args: &[&str]) -> (i32, String, String) {
    let mut command = std::process::Command::new(AGENTRY);
    command.args(["cluster", "status"]).args(args).env("AGENTRY_USER_CONFIG", "").env_remove("AGENTRY_POSTGRES");
    if let Some(url) = url {
        command.env("AGENTRY_POSTGRES", url);
    }
    let output = command.output().expect("the command runs");
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    (output.status.code().unwrap_or(-1), text(&output.stdout), text(&output.stderr))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_the_nodes_their_leases_and_what_waits_in_the_inboxes() {
    let Some(postgres) = agentry_tests::postgres::or_skip("cluster_status") else { return };
    let url = postgres.url();
    let wire = [("AGENTRY_NODE_WIRE", "status")];
    let mut a = NodeProcess::start_with(NODE, &postgres, LEASE_MS, "a", &wire).await;
    let mut b = NodeProcess::start(NODE, &postgres, LEASE_MS, "b").await;
    a.ask("spawn t1", "spawned t1").await;
    a.ask("spawn t2", "spawned t2").await;
    b.ask("spawn t3", "spawned t3").await;
    let address = a.wire_address().await;

    // A node that took a lease, never said it was alive, and whose lease ran out; and two signals waiting for
    // its agent, one for an agent nobody holds.
    let ghost = AgentId::new("ghost-agent").expect("an id");
    let c = Owners::connect(&url, "c", Duration::from_secs(30)).await.expect("node c");
    c.claim(&ghost).await.expect("c holds it");
    c.expire(&ghost).await.expect("run out");
    let inbox = Inbox::connect(&url, 100).await.expect("the inbox");
    for n in 0..2 {
        inbox.push(&ghost, &Signal::new("add", json!(n)).expect("a signal")).await.expect("pushed");
    }
    let nobody = AgentId::new("nobody").expect("an id");
    inbox.push(&nobody, &Signal::new("add", json!(1)).expect("a signal")).await.expect("pushed");

    let (code, out, err) = agentry_status(Some(&url), &["--json"]);
    assert_eq!(code, 0, "{err}");
    let status: Value = serde_json::from_str(&out).expect("JSON");
    let nodes = status["nodes"].as_array().expect("nodes");
    let names: Vec<&str> = nodes.iter().filter_map(|n| n["name"].as_str()).collect();
    assert_eq!(names, ["a", "b", "c"], "{status}");
    assert_eq!((nodes[0]["alive"].clone(), nodes[0]["leases"].clone()), (json!(true), json!(2)), "{status}");
    assert_eq!(nodes[0]["wire"], json!(address), "{status}");
    assert_eq!((nodes[1]["alive"].clone(), nodes[1]["leases"].clone()), (json!(true), json!(1)), "{status}");
    assert_eq!(nodes[1]["wire"], Value::Null, "{status}");
    assert_eq!(nodes[2]["alive"], json!(false), "never said it was alive: {status}");
    assert_eq!(nodes[2]["seen_until"], Value::Null, "{status}");
    assert_eq!((nodes[2]["leases"].clone(), nodes[2]["expired"].clone()), (json!(1), json!(1)), "{status}");
    assert_eq!((status["leases"].clone(), status["expired"].clone()), (json!(4), json!(1)), "{status}");
    assert_eq!((status["waiting"].clone(), status["waiting_agents"].clone()), (json!(3), json!(2)), "{status}");
    let fullest = &status["fullest"];
    assert_eq!(fullest[0], json!({"agent": "ghost-agent", "signals": 2, "node": "c"}), "{status}");
    assert_eq!(fullest[1], json!({"agent": "nobody", "signals": 1, "node": null}), "{status}");

    // The same, as a person reads it.
    let (code, out, err) = agentry_status(Some(&url), &["--fullest", "1"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("nodes: 3 (2 alive)\n"), "{out}");
    assert!(out.contains("  a: alive, heartbeat good for "), "{out}");
    assert!(out.contains(&format!(", listens at {address}; 2 leases\n")), "{out}");
    assert!(out.contains("  c: never said it was alive; 1 leases (1 ran out, waiting for a node to take them over)"));
    assert!(
        out.contains(
            "leases: 4 (1 ran out)\ninboxes: 3 signals waiting for 2 agents\n  ghost-agent: 2 waiting (lease of c)\n"
        ),
        "{out}"
    );
    assert!(!out.contains("nobody"), "one listed: {out}");

    // A node killed: gone once its heartbeat runs out, which the survivor sees as it takes b's agent over.
    b.signal("KILL");
    let _ = b.child.wait().await;
    drop(a.expect("took t3").await);
    let (_, out, _) = agentry_status(Some(&url), &["--json"]);
    let status: Value = serde_json::from_str(&out).expect("JSON");
    let b = &status["nodes"][1];
    assert_eq!((b["name"].clone(), b["alive"].clone(), b["leases"].clone()), (json!("b"), json!(false), json!(0)));
    assert_eq!(status["nodes"][0]["leases"], json!(3), "{status}");
}

/// Without the connection string in the environment, the command says which variable it read and what it
/// expected, and fails with the usage code; a database that is not there is a failure that says so.
#[test]
fn status_without_a_database_says_what_it_expected() {
    let (code, _, err) = agentry_status(None, &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("`AGENTRY_POSTGRES` is not set; expected PostgreSQL's connection string"), "{err}");
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a port").port();
    let (code, _, err) =
        agentry_status(Some(&format!("host=127.0.0.1 port={port} user=agentry connect_timeout=5")), &[]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("the cluster's database"), "{err}");
}

/// The command only reads: on a database the cluster never used, it shows an empty cluster and makes nothing
/// (a monitoring role that may only read can run it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_of_an_unused_database_is_an_empty_cluster_and_makes_nothing() {
    let Some(postgres) = agentry_tests::postgres::or_skip("cluster_status_empty") else { return };
    let url = postgres.url();
    let (code, out, err) = agentry_status(Some(&url), &[]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("nodes: 0 (0 alive)\n"), "{out}");
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.expect("connects");
    tokio::spawn(connection);
    let made = client.query_one("SELECT to_regclass('agentry_owners') IS NOT NULL", &[]).await.expect("asked");
    assert!(!made.get::<_, bool>(0), "the status made the cluster's tables");
}
