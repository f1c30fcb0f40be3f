//! A node outlives its connections to PostgreSQL dropping (the server restarted, the network blinked, an operator
//! ended its sessions): every connection opens itself again and the node goes on, and an agent whose commit
//! failed half way is brought back from the journal, so what the node runs never gets ahead of what is durable.
//! Real node processes (`cluster_node`) on a real PostgreSQL server.

use agentry_tests::cluster::NodeProcess;
use agentry_tests::postgres::Postgres;

const NODE: &str = env!("CARGO_BIN_EXE_cluster_node");
/// Long enough that a node's heartbeat missed during the test's cut does not cost it its leases.
const LEASE_MS: u64 = 3_000;

fn postgres(test: &str) -> Option<Postgres> {
    agentry_tests::postgres::or_skip(test)
}

/// The test's own session, beside the nodes'.
async fn session(postgres: &Postgres) -> tokio_postgres::Client {
    let (client, connection) =
        tokio_postgres::connect(&postgres.url(), tokio_postgres::NoTls).await.expect("the test connects");
    tokio::spawn(connection);
    client
}

/// Every node's connection is ended by the server, as an operator's `pg_terminate_backend` (or a restart) does:
/// the nodes open them again, and signals, calls through the inbox, and the journal all go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_whose_connections_drop_open_them_again_and_go_on() {
    let Some(postgres) = postgres("cluster_reconnect") else { return };
    let mut a = NodeProcess::start(NODE, &postgres, LEASE_MS, "a").await;
    let mut b = NodeProcess::start(NODE, &postgres, LEASE_MS, "b").await;
    a.ask("spawn t", "spawned t").await;
    a.add("t", 1).await;
    assert_eq!(b.ask("call t 2 10000", "replied t 2").await, "replied t 2 2", "through the inbox");

    let test = session(&postgres).await;
    let ended = test
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'",
            &[],
        )
        .await
        .expect("the sessions end");
    // Each node: its leases, two inbox connections, its listener, the journal's writer and reads.
    assert!(ended.len() >= 12, "only {} sessions were ended", ended.len());

    a.add("t", 3).await;
    assert_eq!(b.ask("call t 4 10000", "replied t 4").await, "replied t 4 4", "the inbox and its listeners");
    a.add("t", 5).await;
    assert_eq!(a.state("t").await.applied, vec![1, 2, 3, 4, 5]);

    // What the journal holds, as b brings it back once a is gone.
    a.signal("KILL");
    let _ = a.child.wait().await;
    b.expect("took t").await;
    assert_eq!(b.state("t").await.applied, vec![1, 2, 3, 4, 5], "every acknowledged signal is in the journal");
}

/// The journal's connection is ended in the middle of a commit (held up by a lock the test takes): the commit
/// fails, and the node, which still holds the agent's lease, stops its copy (which had applied the signal)
/// and brings the agent back from the journal, so its state never shows what the journal lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_whose_commit_failed_half_way_comes_back_from_the_journal() {
    let Some(postgres) = postgres("cluster_reconnect_commit") else { return };
    let mut a = NodeProcess::start(NODE, &postgres, LEASE_MS, "a").await;
    a.ask("spawn t", "spawned t").await;
    a.add("t", 1).await;

    // The journal's next commit of t's inputs waits on the test's lock; its session is ended while it waits.
    let mut test = session(&postgres).await;
    let lock = test.transaction().await.expect("a transaction");
    lock.batch_execute("LOCK TABLE agentry_input_batches IN ACCESS EXCLUSIVE MODE").await.expect("locked");
    a.send("add t 2").await;
    let waiting = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                   WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()";
    let watcher = session(&postgres).await;
    while watcher.query(waiting, &[]).await.expect("the waiting session").is_empty() {
        tokio::task::yield_now().await;
    }
    lock.rollback().await.expect("unlocked");
    let answer = a.expect_any(&["ack t 2", "nack t 2"]).await;
    assert!(answer.starts_with("nack t 2"), "a signal whose commit failed was acknowledged: {answer}");
    a.expect("lost t").await;
    a.expect("took t").await;
    assert_eq!(a.state("t").await.applied, vec![1], "the copy that was ahead of the journal is gone");
    a.add("t", 3).await;
    assert_eq!(a.state("t").await.applied, vec![1, 3]);

    a.signal("KILL");
    let _ = a.child.wait().await;
    let mut b = NodeProcess::start(NODE, &postgres, LEASE_MS, "b").await;
    b.expect("took t").await;
    assert_eq!(b.state("t").await.applied, vec![1, 3], "the journal holds what a showed");
}

/// The database refuses the node's connections for a while (its role may not log in): a commit cannot even
/// begin, and the agents it carried, whose copies applied what it lost, are stopped; once the database lets the
/// node in again, the agent comes back from the journal (its lease ran out meanwhile), so it never shows what
/// the journal lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_whose_commit_could_not_begin_comes_back_from_the_journal() {
    let Some(postgres) = postgres("cluster_reconnect_refused") else { return };
    let test = session(&postgres).await;
    test.batch_execute("CREATE ROLE node_a LOGIN SUPERUSER").await.expect("a role for the node");
    let url = postgres.url().replace("user=agentry", "user=node_a");
    let mut a = NodeProcess::start_with(NODE, &postgres, LEASE_MS, "a", &[("AGENTRY_NODE_POSTGRES", &url)]).await;
    a.ask("spawn t", "spawned t").await;
    a.add("t", 1).await;

    test.batch_execute("ALTER ROLE node_a NOLOGIN").await.expect("the node may not log in");
    let ended = test
        .query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'node_a'", &[])
        .await
        .expect("its sessions end");
    assert!(ended.len() >= 6, "only {} sessions were ended", ended.len());
    a.send("add t 2").await;
    let answer = a.expect_any(&["ack t 2", "nack t 2"]).await;
    assert!(answer.starts_with("nack t 2"), "a signal whose commit never began was acknowledged: {answer}");
    a.expect("lost t").await;

    test.batch_execute("ALTER ROLE node_a LOGIN").await.expect("the node may log in again");
    a.expect("took t").await;
    assert_eq!(a.state("t").await.applied, vec![1], "the copy that was ahead of the journal is gone");
    a.add("t", 3).await;
    assert_eq!(a.state("t").await.applied, vec![1, 3]);
}
