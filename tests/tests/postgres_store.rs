//! The journal in PostgreSQL against bad input: a journal a newer agentry wrote is refused, a damaged row is a
//! typed error of the read that meets it (the other agents still come back), and a server that is not there is a
//! typed error, never a panic or a hang.

use agentry::id::AgentId;
use agentry::runtime::{Runtime, SpawnOptions};
use agentry::signal::Signal;
use agentry::store::{PostgresStore, StoreError};
use agentry_tests::cluster::Tally;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

async fn sql(url: &str, statement: &str) {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.expect("connects");
    tokio::spawn(connection);
    client.batch_execute(statement).await.expect("the statement runs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journal_from_a_newer_agentry_is_refused() {
    let Some(postgres) = agentry_tests::postgres::or_skip("postgres_store") else { return };
    drop(PostgresStore::connect(&postgres.url()).expect("a new journal"));
    sql(&postgres.url(), "UPDATE agentry_journal SET version = 99").await;
    match PostgresStore::connect(&postgres.url()) {
        Err(StoreError::NewerSchema { found: 99, .. }) => {}
        other => panic!("expected NewerSchema, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_row_is_a_typed_error_and_the_other_agents_come_back() {
    let Some(postgres) = agentry_tests::postgres::or_skip("postgres_store") else { return };
    let open = || async {
        let store = PostgresStore::connect(&postgres.url()).expect("the journal connects");
        Runtime::builder().agent::<Tally>().expect("registers").store(Arc::new(store)).open().await.expect("opens")
    };
    let (runtime, _) = open().await;
    for name in ["good", "bad"] {
        let opts = SpawnOptions { id: Some(AgentId::new(name).expect("an id")), ..SpawnOptions::default() };
        let agent = runtime.spawn(Tally::default(), opts).await.expect("spawned");
        agent.call(Signal::new("add", json!(3)).expect("a kind"), Duration::from_secs(10)).await.expect("added");
    }
    runtime.shutdown(Duration::from_secs(1)).await;
    drop(runtime);
    sql(&postgres.url(), "UPDATE agentry_snapshots SET snapshot = 'not json at all' WHERE agent = 'bad'").await;

    let store = PostgresStore::connect(&postgres.url()).expect("the journal connects");
    let durable = agentry::store::Store::durable(&store).expect("durable");
    let err = durable.snapshot(&AgentId::new("bad").expect("an id")).expect_err("a damaged snapshot");
    assert!(matches!(err, StoreError::Decode { what: "snapshot", .. }), "{err}");
    drop(store);

    let (runtime, recovery) = open().await;
    assert_eq!(recovery.failed.iter().map(|(a, _)| a.as_str()).collect::<Vec<_>>(), ["bad"], "{recovery:?}");
    let good = runtime.get::<Tally>(&AgentId::new("good").expect("an id")).expect("the good one came back");
    assert_eq!(good.state().await.expect("its state").domain.applied, vec![3]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_is_not_there_is_a_typed_error() {
    // A port nobody listens on (bound, then let go).
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a port").port();
    let started = std::time::Instant::now();
    let err = PostgresStore::connect(&format!("host=127.0.0.1 port={port} user=agentry connect_timeout=5"))
        .expect_err("no server");
    assert!(matches!(err, StoreError::Database(_)), "{err}");
    assert!(started.elapsed() < Duration::from_secs(10), "it did not hang");
    let err = PostgresStore::connect("this is = not a connection string at all").expect_err("refused");
    assert!(matches!(err, StoreError::Database(_)), "{err}");
}
