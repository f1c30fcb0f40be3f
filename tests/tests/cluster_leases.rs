//! Ownership with fencing on a real PostgreSQL server (a cluster of its own, on loopback): one owner per agent,
//! epochs that grow with each change of hands, a takeover that waits for a write that passed its fence, and a
//! node that lost its lease unable to write over its successor.

use agentry::id::AgentId;
use agentry_cluster::{LeaseError, Owners, fence};
use std::time::Duration;

const TTL: Duration = Duration::from_secs(30);

fn agent(name: &str) -> AgentId {
    AgentId::new(name).expect("an id")
}

/// Writes `value` for `agent` under the lease, fenced; the table is the test's own stand-in for a journal.
async fn write(node: &mut Owners, lease: &agentry_cluster::Lease, value: &str) -> Result<(), LeaseError> {
    let mut client = node.client_mut().await?;
    client.batch_execute("CREATE TABLE IF NOT EXISTS journal (agent TEXT, value TEXT, epoch BIGINT)").await?;
    let tx = client.transaction().await?;
    fence(&tx, lease).await?;
    let epoch = i64::try_from(lease.epoch).expect("an epoch");
    tx.execute("INSERT INTO journal VALUES ($1, $2, $3)", &[&lease.agent.as_str(), &value, &epoch]).await?;
    tx.commit().await?;
    Ok(())
}

async fn written(node: &mut Owners, agent: &AgentId) -> Vec<(String, i64)> {
    let rows = node
        .client()
        .await
        .expect("the connection")
        .query("SELECT value, epoch FROM journal WHERE agent = $1 ORDER BY value", &[&agent.as_str()])
        .await
        .expect("read");
    rows.iter().map(|r| (r.get(0), r.get(1))).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_lost_its_lease_cannot_write_over_its_successor() {
    let Some(postgres) = agentry_tests::postgres::or_skip("cluster_leases") else { return };
    let mut a = Owners::connect(&postgres.url(), "node-a", TTL).await.expect("node a");
    let mut b = Owners::connect(&postgres.url(), "node-b", TTL).await.expect("node b");
    let id = agent("counter");

    let held = a.claim(&id).await.expect("a claims");
    assert_eq!((held.node.as_str(), held.epoch), ("node-a", 1));
    let Err(LeaseError::Held { node, epoch: 1, .. }) = b.claim(&id).await else { panic!("b must not take it") };
    assert_eq!(node, "node-a");
    write(&mut a, &held, "1 by a").await.expect("the owner writes");
    let held = a.renew(&held).await.expect("a renews");

    // Node a is paused past its lease (here, an operator's failover ends it): b takes the agent, epoch 2.
    b.expire(&id).await.expect("expired");
    let successor = b.claim(&id).await.expect("b claims");
    assert_eq!((successor.node.as_str(), successor.epoch), ("node-b", 2));
    write(&mut b, &successor, "2 by b").await.expect("the successor writes");

    // Node a comes back: its write is refused by epoch and changes nothing; it cannot renew either.
    let refused = write(&mut a, &held, "3 by a, stale").await;
    assert!(matches!(refused, Err(LeaseError::Lost { epoch: 1, .. })), "{refused:?}");
    assert!(matches!(a.renew(&held).await, Err(LeaseError::Lost { .. })));
    assert_eq!(
        written(&mut b, &id).await,
        vec![("1 by a".to_owned(), 1), ("2 by b".to_owned(), 2)],
        "nothing of the stale node after the takeover"
    );
    // A lease that ran out with nobody taking the agent: a write is refused until it is renewed.
    b.expire(&id).await.expect("expired");
    assert!(matches!(write(&mut b, &successor, "x").await, Err(LeaseError::Expired { epoch: 2, .. })));
    let successor = b.renew(&successor).await.expect("renewed, still epoch 2");
    assert_eq!(successor.epoch, 2);
    write(&mut b, &successor, "4 by b").await.expect("writes again");
    b.release(&successor).await.expect("released");
    assert_eq!(a.claim(&id).await.expect("free again").epoch, 1, "a released agent starts over");

    // A node that restarts under the same name: its earlier incarnation's lease is refused by epoch alone.
    let other = agent("restarted");
    let before = a.claim(&other).await.expect("a claims");
    a.expire(&other).await.expect("expired");
    let mut again = Owners::connect(&postgres.url(), "node-a", TTL).await.expect("node a again");
    let after = again.claim(&other).await.expect("claimed again");
    assert_eq!((after.node.as_str(), after.epoch), ("node-a", 2));
    let refused = write(&mut a, &before, "stale, same name").await;
    assert!(matches!(refused, Err(LeaseError::Lost { epoch: 1, .. })), "{refused:?}");
    write(&mut again, &after, "fresh").await.expect("the new incarnation writes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_many_nodes_claiming_one_agent_at_once_exactly_one_wins() {
    let Some(postgres) = agentry_tests::postgres::or_skip("cluster_leases") else { return };
    let id = agent("contested");
    let mut nodes = Vec::new();
    for n in 0..12 {
        nodes.push(Owners::connect(&postgres.url(), &format!("node-{n}"), TTL).await.expect("a node"));
    }
    let claims = futures_util::future::join_all(nodes.iter().map(|node| node.claim(&id))).await;
    let won: Vec<_> = claims.iter().filter_map(|c| c.as_ref().ok()).collect();
    assert_eq!(won.len(), 1, "{claims:?}");
    assert!(claims.iter().filter(|c| c.is_err()).all(|c| matches!(c, Err(LeaseError::Held { .. }))), "{claims:?}");
    let owner = nodes[0].owner(&id).await.expect("read").expect("owned");
    assert_eq!(&owner, won[0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_waits_for_a_write_that_passed_its_fence() {
    let Some(postgres) = agentry_tests::postgres::or_skip("cluster_leases") else { return };
    // Node a's lease is short: it runs out while a's write is under way.
    let a = Owners::connect(&postgres.url(), "node-a", Duration::from_millis(300)).await.expect("node a");
    let b = Owners::connect(&postgres.url(), "node-b", TTL).await.expect("node b");
    let watcher = Owners::connect(&postgres.url(), "watcher", TTL).await.expect("a watcher");
    let id = agent("slow-writer");
    let held = a.claim(&id).await.expect("a claims");
    a.client()
        .await
        .expect("the connection")
        .batch_execute("CREATE TABLE IF NOT EXISTS journal (agent TEXT, value TEXT, epoch BIGINT)")
        .await
        .expect("table");

    let mut alone = a.client_mut().await.expect("the connection");
    let tx = alone.transaction().await.expect("a transaction");
    fence(&tx, &held).await.expect("a passes its fence");
    // The lease runs out (on the database's clock) while the write is open; then b claims, and its claim
    // waits on a's share lock.
    let expired = "SELECT now() > expires_at FROM agentry_owners WHERE agent = $1";
    while !watcher
        .client()
        .await
        .expect("the connection")
        .query_one(expired, &[&id.as_str()])
        .await
        .expect("read")
        .get::<_, bool>(0)
    {
        tokio::task::yield_now().await;
    }
    let claim = tokio::spawn(async move { b.claim(&agent("slow-writer")).await });
    let blocked = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'";
    while watcher.client().await.expect("the connection").query_one(blocked, &[]).await.expect("read").get::<_, i64>(0)
        == 0
        && !claim.is_finished()
    {
        tokio::task::yield_now().await;
    }
    assert!(!claim.is_finished(), "the takeover did not wait for the fenced write: {:?}", claim.await);
    tx.execute("INSERT INTO journal VALUES ($1, 'before the takeover', 1)", &[&id.as_str()]).await.expect("write");
    tx.commit().await.expect("committed");
    let successor = claim.await.expect("joined").expect("b claims after a's write");
    assert_eq!(successor.epoch, 2);
    let rows = watcher
        .client()
        .await
        .expect("the connection")
        .query("SELECT value FROM journal WHERE agent = $1", &[&id.as_str()])
        .await
        .expect("read");
    assert_eq!(rows.len(), 1, "a's write, made before the takeover, is there");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeat_renews_what_a_node_still_holds_and_reports_what_it_lost() {
    let Some(postgres) = agentry_tests::postgres::or_skip("cluster_leases") else { return };
    let a = Owners::connect(&postgres.url(), "node-a", TTL).await.expect("node a");
    let b = Owners::connect(&postgres.url(), "node-b", TTL).await.expect("node b");
    // A node whose heartbeat lasts a millisecond: it stops being live at once.
    let brief = Owners::connect(&postgres.url(), "node-brief", Duration::from_millis(1)).await.expect("brief");
    let mut held = Vec::new();
    for n in 0..50 {
        held.push(a.claim(&agent(&format!("agent-{n}"))).await.expect("claimed"));
    }
    b.expire(&agent("agent-7")).await.expect("expired");
    let taken = b.claim(&agent("agent-7")).await.expect("taken");
    let beat = a.heartbeat(&held).await.expect("a heartbeat");
    assert_eq!(beat.kept.len(), 49);
    assert_eq!(beat.lost.iter().map(|l| l.agent.as_str()).collect::<Vec<_>>(), ["agent-7"]);
    assert!(beat.kept.iter().all(|k| k.expires_at >= held[0].expires_at), "renewed from now");
    assert_eq!(b.heartbeat(&[taken]).await.expect("b's heartbeat").kept.len(), 1);
    brief.heartbeat(&[]).await.expect("brief's heartbeat");
    // Once its heartbeat ran out on the database's clock, a node is not live.
    let out = "SELECT seen_until < now() FROM agentry_nodes WHERE node = 'node-brief'";
    while !a.client().await.expect("the connection").query_one(out, &[]).await.expect("read").get::<_, bool>(0) {
        tokio::task::yield_now().await;
    }
    assert_eq!(a.live_nodes().await.expect("live"), ["node-a", "node-b"]);
}
