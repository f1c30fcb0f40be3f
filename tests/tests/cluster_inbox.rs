//! The durable inbox on a real PostgreSQL server: a signal kept once however often it is pushed, a listener woken
//! by each push (no polling), signals taken in order under the owner's lease and never by a node that lost it,
//! and a full inbox refusing with a typed error.

use agentry::id::AgentId;
use agentry::signal::Signal;
use agentry_cluster::{Inbox, InboxError, LeaseError, Owners, Pushed, listen};
use serde_json::json;
use std::time::Duration;

const TTL: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signals_wait_for_their_owner_once_each_in_order_and_wake_it() {
    let Some(postgres) = agentry_tests::postgres::or_skip("cluster_inbox") else { return };
    let url = postgres.url();
    let inbox = Inbox::connect(&url, 100).await.expect("the inbox");
    let mut listener = listen(&url).await.expect("listening");
    let a = Owners::connect(&url, "node-a", TTL).await.expect("node a");
    let b = Owners::connect(&url, "node-b", TTL).await.expect("node b");
    let id = AgentId::new("sleeper").expect("an id");

    let first = Signal::new("ping", json!({"n": 1})).expect("a signal");
    assert_eq!(inbox.push(&id, &first).await.expect("pushed"), Pushed::Kept);
    assert_eq!(listener.recv().await, Some(id.clone()), "the push wakes the listener");
    assert_eq!(inbox.push(&id, &first).await.expect("pushed again"), Pushed::Duplicate, "a retry");
    let second = Signal::new("ping", json!({"n": 2})).expect("a signal");
    inbox.push(&id, &second).await.expect("pushed");
    assert_eq!(inbox.len(&id).await.expect("counted"), 2);

    // A node that lost the agent takes nothing, and nothing leaves the inbox.
    let stale = a.claim(&id).await.expect("a claims");
    a.expire(&id).await.expect("expired");
    let owner = b.claim(&id).await.expect("b claims");
    let refused = inbox.take(&stale, 10).await;
    assert!(matches!(refused, Err(InboxError::Fenced(LeaseError::Lost { .. }))), "{refused:?}");
    assert_eq!(inbox.len(&id).await.expect("counted"), 2);

    let taken = inbox.take(&owner, 10).await.expect("taken by the owner");
    let ids: Vec<_> = taken.iter().map(Signal::id).collect();
    assert_eq!(ids, [first.id(), second.id()], "in the order pushed, with their ids");
    assert_eq!(taken[1].data()["n"], 2);
    assert_eq!(inbox.len(&id).await.expect("counted"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_inbox_refuses_with_a_typed_error_and_keeps_what_it_had() {
    let Some(postgres) = agentry_tests::postgres::or_skip("cluster_inbox") else { return };
    let inbox = Inbox::connect(&postgres.url(), 3).await.expect("the inbox");
    let id = AgentId::new("flooded").expect("an id");
    let mut kept = Vec::new();
    for n in 0..3 {
        let signal = Signal::new("ping", json!({"n": n})).expect("a signal");
        inbox.push(&id, &signal).await.expect("kept");
        kept.push(signal);
    }
    let over = Signal::new("ping", json!({"n": 3})).expect("a signal");
    let refused = inbox.push(&id, &over).await;
    assert!(matches!(refused, Err(InboxError::Full { limit: 3, .. })), "{refused:?}");
    assert_eq!(inbox.push(&id, &kept[0]).await.expect("a retry"), Pushed::Duplicate, "a retry is not refused");
    assert_eq!(inbox.len(&id).await.expect("counted"), 3);
}

/// The attack: a peer pushes a signal of the runtime's own kinds (a forged outcome), or one claiming to come from
/// the runtime, into an agent's inbox. Refused at the push with a typed error, never kept to be refused at
/// delivery (where it would block the signals behind it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_signal_is_refused_at_the_push() {
    let Some(postgres) = agentry_tests::postgres::or_skip("cluster_inbox") else { return };
    let inbox = Inbox::connect(&postgres.url(), 100).await.expect("the inbox");
    let id = AgentId::new("victim").expect("an id");
    let forged = Signal::new("action.completed", json!({"run": uuid::Uuid::now_v7()})).expect("a signal");
    let err = inbox.push(&id, &forged).await.expect_err("refused");
    assert!(matches!(err, InboxError::Forged { .. }), "{err}");
    let claimed = Signal::builder("ping").source("agentry/agent/someone").data(json!({})).build().expect("a signal");
    let err = inbox.push(&id, &claimed).await.expect_err("refused");
    assert!(matches!(err, InboxError::Forged { .. }), "{err}");
    assert_eq!(inbox.len(&id).await.expect("counted"), 0, "nothing kept");
}

/// Pushes racing for the last places of one inbox, from eight connections at once: the limit holds exactly (each
/// push counts what waits only once it holds the agent's lock, in a statement that starts after it got it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_pushes_never_go_past_the_limit() {
    let Some(postgres) = agentry_tests::postgres::or_skip("cluster_inbox") else { return };
    let id = AgentId::new("crowded").expect("an id");
    let mut pushers = Vec::new();
    for _ in 0..8 {
        let inbox = Inbox::connect(&postgres.url(), 20).await.expect("the inbox");
        let id = id.clone();
        pushers.push(tokio::spawn(async move {
            let mut kept = 0;
            for n in 0..10 {
                let signal = Signal::new("ping", json!({"n": n})).expect("a signal");
                match inbox.push(&id, &signal).await {
                    Ok(Pushed::Kept) => kept += 1,
                    Err(InboxError::Full { .. }) => {}
                    other => panic!("{other:?}"),
                }
            }
            kept
        }));
    }
    let mut kept = 0;
    for pusher in pushers {
        kept += pusher.await.expect("the pusher ends");
    }
    assert_eq!(kept, 20, "exactly the limit kept");
    let inbox = Inbox::connect(&postgres.url(), 20).await.expect("the inbox");
    assert_eq!(inbox.len(&id).await.expect("counted"), 20);
}

/// A `Pusher` keeps the pushes that arrive together in one commit, and each still gets its own answer, in the
/// order pushed: kept, a duplicate (of one kept earlier in the same commit too), or refused because the agent's
/// inbox is full. Its first commit is held up by a lock the test takes, so the others all wait and go in the
/// next; the rows' transaction ids (`xmin`) show how many commits kept them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pusher_keeps_pushes_that_arrive_together_in_one_commit_each_with_its_own_answer() {
    use agentry_cluster::Pusher;
    let Some(postgres) = agentry_tests::postgres::or_skip("cluster_inbox_batches") else { return };
    let url = postgres.url();
    let pusher = std::sync::Arc::new(Pusher::connect(&url, 3).await.expect("the pusher"));
    let (a, b) = (AgentId::new("a").expect("an id"), AgentId::new("b").expect("an id"));
    let ping = |n: u32| Signal::new("ping", json!({ "n": n })).expect("a signal");
    let (s1, s2, s3, s4, s5, t1, t2) = (ping(1), ping(2), ping(3), ping(4), ping(5), ping(6), ping(7));
    let pushes = [
        (a.clone(), s1.clone()),
        (a.clone(), s2),
        (a.clone(), s1),
        (b.clone(), t1),
        (a.clone(), s3),
        (a.clone(), s4),
        (b.clone(), t2),
        (a.clone(), s5),
    ];

    let (mut test, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.expect("connects");
    tokio::spawn(connection);
    let lock = test.transaction().await.expect("a transaction");
    lock.batch_execute("LOCK TABLE agentry_inbox IN ACCESS EXCLUSIVE MODE").await.expect("locked");
    let pushing = tokio::spawn({
        let pusher = pusher.clone();
        async move {
            let each = pushes.iter().map(|(agent, signal)| pusher.push(agent, signal));
            futures_util::future::join_all(each).await
        }
    });
    let (watcher, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.expect("connects");
    tokio::spawn(connection);
    let waiting = "SELECT pid FROM pg_stat_activity
                   WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()";
    while watcher.query(waiting, &[]).await.expect("the waiting session").is_empty() {
        tokio::task::yield_now().await;
    }
    lock.rollback().await.expect("unlocked");
    let answers: Vec<String> = pushing
        .await
        .expect("pushed")
        .into_iter()
        .map(|answer| match answer {
            Ok(Pushed::Kept) => "kept".to_owned(),
            Ok(Pushed::Duplicate) => "duplicate".to_owned(),
            Err(InboxError::Full { agent, limit: 3 }) => format!("{agent} full"),
            Err(other) => panic!("{other}"),
        })
        .collect();
    assert_eq!(answers, ["kept", "kept", "duplicate", "kept", "kept", "a full", "kept", "a full"]);

    let commits = watcher
        .query_one("SELECT count(DISTINCT xmin::text) FROM agentry_inbox", &[])
        .await
        .expect("counted")
        .get::<_, i64>(0);
    assert!(commits <= 2, "5 pushes kept in {commits} commits: those that waited went in one");
    let inbox = Inbox::connect(&url, 3).await.expect("the inbox");
    assert_eq!(inbox.len(&a).await.expect("counted"), 3);
    assert_eq!(inbox.len(&b).await.expect("counted"), 2);

    // An id the table cannot hold (PostgreSQL's text refuses NUL; its index and notifications, kilobytes) is
    // refused on its own, and takes nothing down with it.
    let nul = AgentId::new("x\0y").expect("any text is an id");
    let long = AgentId::new("x".repeat(5000)).expect("any text is an id");
    let c = AgentId::new("c").expect("an id");
    let (first, second, third) = (ping(8), ping(9), ping(10));
    let answers = futures_util::future::join_all([
        pusher.push(&nul, &first),
        pusher.push(&c, &second),
        pusher.push(&long, &third),
    ])
    .await;
    assert!(matches!(answers[0], Err(InboxError::Unkeepable { .. })), "{answers:?}");
    assert!(matches!(answers[1], Ok(Pushed::Kept)), "{answers:?}");
    assert!(matches!(answers[2], Err(InboxError::Unkeepable { .. })), "{answers:?}");
}
