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
    durable.snapshot(&AgentId::new("good").expect("an id")).expect("a good snapshot");
    let (test, connection) = tokio_postgres::connect(&postgres.url(), tokio_postgres::NoTls).await.expect("connects");
    tokio::spawn(connection);
    let sessions = "SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()
                    ORDER BY pid";
    let pids = |rows: Vec<tokio_postgres::Row>| rows.iter().map(|row| row.get::<_, i32>(0)).collect::<Vec<_>>();
    let before = pids(test.query(sessions, &[]).await.expect("the sessions"));
    let err = durable.snapshot(&AgentId::new("bad").expect("an id")).expect_err("a damaged snapshot");
    assert!(matches!(err, StoreError::Decode { what: "snapshot", .. }), "{err}");
    let after = pids(test.query(sessions, &[]).await.expect("the sessions"));
    assert_eq!(before, after, "a row that does not decode is no reason to connect again");
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

/// Two runtimes writing one journal at once (as nodes of a cluster do), both running actions: each run keeps its
/// own place (places come from the database, a block per writer), so neither's commits collide with the other's
/// and every run either ran is in the journal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_writers_of_one_journal_keep_every_run() {
    use agentry::events::EventKind;
    use agentry_tests::durable::Worker;
    let Some(postgres) = agentry_tests::postgres::or_skip("postgres_store") else { return };
    let folder = tempfile::tempdir().expect("a folder");
    let mut runtimes = Vec::new();
    for n in 0..2 {
        let store = PostgresStore::connect(&postgres.url()).expect("the journal connects");
        let builder = Runtime::builder().agent::<Worker>().expect("registers").skill(agentry_tests::durable::extra());
        let (runtime, _) =
            builder.data_dir(folder.path().join(n.to_string())).store(Arc::new(store)).open().await.expect("opens");
        runtimes.push(runtime);
    }
    let ticks = 4;
    let mut completed = Vec::new();
    for (n, runtime) in runtimes.iter().enumerate() {
        let mut events = runtime.events();
        let opts = SpawnOptions { id: Some(AgentId::new(format!("w{n}")).expect("an id")), ..SpawnOptions::default() };
        let worker = runtime.spawn(Worker::default(), opts).await.expect("spawned");
        for _ in 0..ticks {
            worker.send(Signal::new("tick", json!({})).expect("a kind")).expect("sent");
        }
        completed.push(tokio::spawn(async move {
            // Three runs a tick (two ledger actions and a pure one), each announced as it completes.
            let mut done = 0;
            while done < 3 * ticks {
                match events.recv().await {
                    Ok(event) if matches!(event.kind, EventKind::ActionCompleted { .. }) => done += 1,
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
                }
            }
            done
        }));
    }
    for done in completed {
        let done = tokio::time::timeout(Duration::from_secs(60), done).await.expect("in time").expect("counted");
        assert!(done >= 3 * ticks, "{done} runs completed");
    }
    for runtime in &runtimes {
        runtime.shutdown(Duration::from_secs(5)).await;
    }
    drop(runtimes);
    let store = PostgresStore::connect(&postgres.url()).expect("connects");
    let runs = store.keyed_runs(&agentry::store::RunQuery::default()).expect("reads");
    for n in 0..2 {
        let mine = runs.iter().filter(|(r, _)| r.agent.as_str() == format!("w{n}")).count();
        assert!(mine >= 3 * ticks as usize, "w{n}: {mine} runs journaled of at least {}", 3 * ticks);
    }
}

/// Node `a` holding `agent` (its lease claimed in the database), and a journal fenced by that hold: node a's
/// leases, the epoch it holds the agent under, its fence and the journal.
async fn journal_of_a_holding(
    url: &str,
    agent: &AgentId,
) -> (agentry_cluster::Owners, u64, agentry::store::Fence, PostgresStore) {
    let a = agentry_cluster::Owners::connect(url, "a", Duration::from_secs(60)).await.expect("node a");
    let lease = a.claim(agent).await.expect("a holds the agent");
    let fence = agentry::store::Fence::new("a");
    fence.hold(agent.clone(), lease.epoch);
    let options = agentry::store::PostgresOptions { fence: Some(fence.clone()), ..Default::default() };
    let store = PostgresStore::connect_with(url, options).expect("the fenced journal connects");
    (a, lease.epoch, fence, store)
}

/// The fence, in one process and without timing: a journal writes under the epoch its node holds; once another
/// node took the agent (a newer epoch), the node's next write for it is refused, the agent is reported lost, and
/// nothing of it reaches the journal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_journal_refuses_the_writes_of_an_agent_another_node_took() {
    use agentry_cluster::Owners;
    let Some(postgres) = agentry_tests::postgres::or_skip("postgres_store") else { return };
    let url = postgres.url();
    let t = AgentId::new("t").expect("an id");
    let (a, epoch, fence, store) = journal_of_a_holding(&url, &t).await;
    let (runtime, _) =
        Runtime::builder().agent::<Tally>().expect("registers").store(Arc::new(store)).open().await.expect("opens");
    let opts = SpawnOptions { id: Some(t.clone()), ..SpawnOptions::default() };
    let agent = runtime.spawn(Tally::default(), opts).await.expect("spawned");
    let add = |n: u64| Signal::new("add", json!(n)).expect("a kind");
    agent.call(add(1), Duration::from_secs(10)).await.expect("added");
    let durable = runtime.store().durable().expect("durable");
    durable.flushed().await.expect("durable");

    // Node b takes t over: a's lease ends, b's starts at the next epoch.
    let mut lost = fence.lost();
    a.expire(&t).await.expect("expired");
    let b = Owners::connect(&url, "b", Duration::from_secs(60)).await.expect("node b");
    assert_eq!(b.claim(&t).await.expect("b holds t").epoch, epoch + 1);
    // a's copy still runs and applies the signal in memory; its write is refused.
    agent.call(add(2), Duration::from_secs(10)).await.expect("applied in memory");
    assert!(durable.flushed_for(&t).await.is_err(), "the refused write was said to be durable");
    durable.flushed().await.expect("the commit ended");
    let told = tokio::time::timeout(Duration::from_secs(10), lost.recv()).await.expect("reported lost in time");
    assert_eq!(told.expect("told"), t, "reported lost");
    assert_eq!(fence.epoch(&t), None, "no longer held");
    runtime.shutdown(Duration::from_secs(1)).await;
    drop(runtime);

    let journal = PostgresStore::connect(&url).expect("connects");
    let durable = agentry::store::Store::durable(&journal).expect("durable");
    let added: Vec<u64> = durable
        .inputs_after(&t, 0)
        .expect("reads")
        .iter()
        .filter(|(_, s)| s.kind().as_str() == "add")
        .filter_map(|(_, s)| s.data().as_u64())
        .collect();
    assert_eq!(added, vec![1], "the write after the takeover never reached the journal");
}

/// An action with side effects starts only once its start is durable: for an agent whose lease this node no
/// longer holds, the journal refuses that start, so the action never runs (a stale node does no side effect its
/// successor cannot know of); with the lease, it runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_action_with_side_effects_of_an_agent_whose_lease_is_gone_never_starts() {
    use agentry::action::{ActionSpec, DynAction};
    use agentry_cluster::Owners;
    use agentry_tests::Operated;
    use std::sync::atomic::{AtomicU32, Ordering};
    let Some(postgres) = agentry_tests::postgres::or_skip("postgres_store") else { return };
    let url = postgres.url();
    let operator = AgentId::new("operator").expect("an id");
    let (a, _, _, store) = journal_of_a_holding(&url, &operator).await;

    let sent = Arc::new(AtomicU32::new(0));
    let counted = sent.clone();
    let spec = ActionSpec::new("mail.send", "Sends a mail.").expect("a valid id").side_effects(true);
    let send = DynAction::new(spec, move |_, _| {
        let counted = counted.clone();
        Box::pin(async move { Ok(json!(counted.fetch_add(1, Ordering::SeqCst) + 1)) })
    })
    .expect("a valid action");
    let skill = agentry::skill::Skill::builder("mail", "1.0.0").dyn_action(send).build().expect("a valid skill");
    let op = Operated::start_with(vec![skill], agentry::policy::Policy::default(), &[], |builder| {
        builder.store(Arc::new(store))
    })
    .await;
    assert_eq!(op.output("mail.send", json!({})).await, json!(1), "held: it runs");

    // Another node takes the operator over.
    a.expire(&operator).await.expect("expired");
    let b = Owners::connect(&url, "b", Duration::from_secs(60)).await.expect("node b");
    b.claim(&operator).await.expect("b holds the operator");
    let (class, message) = op.failure("mail.send", json!({})).await;
    assert_eq!(class, "critical", "{message}");
    assert!(message.contains("it was not started"), "{message}");
    assert_eq!(sent.load(Ordering::SeqCst), 1, "the stale copy sent a mail");
}

/// A runtime alone on PostgreSQL (no cluster): a commit of an agent's input fails (its session is ended while it
/// waits on a lock the test holds) after the agent applied the signal in memory. Whoever waits for the write
/// hears it was not kept, and the agent is rolled back to what the journal holds (`agent_rolled_back`), so it
/// never builds on what the journal lost: it goes on from there, and a restart finds exactly what it showed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_alone_rolls_an_agent_whose_commit_failed_back_to_the_journal() {
    use agentry::events::EventKind;
    let Some(postgres) = agentry_tests::postgres::or_skip("postgres_store_rollback") else { return };
    let url = postgres.url();
    let open = || async {
        let store = PostgresStore::connect(&url).expect("the journal connects");
        Runtime::builder().agent::<Tally>().expect("registers").store(Arc::new(store)).open().await.expect("opens")
    };
    let add = |n: u64| Signal::new("add", json!(n)).expect("a kind");
    let id = AgentId::new("t").expect("an id");
    let (runtime, _) = open().await;
    let mut events = runtime.events();
    let opts = SpawnOptions { id: Some(id.clone()), ..SpawnOptions::default() };
    let t = runtime.spawn(Tally::default(), opts).await.expect("spawned");
    t.call(add(1), Duration::from_secs(10)).await.expect("added");
    let durable = runtime.store().durable().expect("durable");
    durable.flushed_for(&id).await.expect("kept");

    // The next commit of t's inputs waits on the test's lock; its session is ended while it waits.
    let (mut test, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.expect("connects");
    tokio::spawn(connection);
    let lock = test.transaction().await.expect("a transaction");
    lock.batch_execute("LOCK TABLE agentry_input_batches IN ACCESS EXCLUSIVE MODE").await.expect("locked");
    t.send(add(2)).expect("sent");
    let applied = t.state().await.expect("its state").domain.applied;
    assert_eq!(applied, vec![1, 2], "applied in memory before the commit");
    let kept = durable.flushed_for(&id);
    let (watcher, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.expect("connects");
    tokio::spawn(connection);
    let waiting = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                   WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()";
    while watcher.query(waiting, &[]).await.expect("the waiting session").is_empty() {
        tokio::task::yield_now().await;
    }
    lock.rollback().await.expect("unlocked");
    assert!(kept.await.is_err(), "a write whose commit failed was reported kept");

    let event = agentry_tests::wait_for(&mut events, |e| {
        e.agent == id && matches!(e.kind, EventKind::AgentRolledBack { .. } | EventKind::AgentStopped { .. })
    })
    .await;
    assert!(matches!(event.kind, EventKind::AgentRolledBack { .. }), "{event:?}");
    let t = runtime.get::<Tally>(&id).expect("t runs again");
    assert_eq!(t.state().await.expect("its state").domain.applied, vec![1], "the copy ahead of the journal is gone");
    t.call(add(3), Duration::from_secs(10)).await.expect("added");
    assert_eq!(t.state().await.expect("its state").domain.applied, vec![1, 3]);
    durable.flushed_for(&id).await.expect("kept again");

    runtime.shutdown(Duration::from_secs(1)).await;
    drop(runtime);
    let (runtime, recovery) = open().await;
    assert_eq!(recovery.agents, vec![id.clone()], "{recovery:?}");
    let t = runtime.get::<Tally>(&id).expect("t came back");
    assert_eq!(t.state().await.expect("its state").domain.applied, vec![1, 3], "the journal holds what t showed");
}

/// An emit kept for elsewhere is forgotten once sent on, whichever node holds its agent by then: a node that gave
/// the agent up while its emits were still going out forgets them too (else the next holder sends them again
/// each time it brings the agent back, for ever).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_emit_sent_on_is_forgotten_after_its_agent_moved_on() {
    use agentry::runtime::Elsewhere;
    use agentry_cluster::Owners;
    let Some(postgres) = agentry_tests::postgres::or_skip("postgres_store") else { return };
    let url = postgres.url();
    let t = AgentId::new("t").expect("an id");
    let (a, _, _, store) = journal_of_a_holding(&url, &t).await;
    let (tx, mut handed) = tokio::sync::mpsc::unbounded_channel();
    let hook: agentry::runtime::ElsewhereHook = Arc::new(move |elsewhere| {
        let _ = tx.send(elsewhere);
    });
    let builder = Runtime::builder().agent::<Tally>().expect("registers").elsewhere(hook);
    let (runtime, _) = builder.store(Arc::new(store)).open().await.expect("opens");
    let opts = SpawnOptions { id: Some(t.clone()), ..SpawnOptions::default() };
    let agent = runtime.spawn(Tally::default(), opts).await.expect("spawned");
    let tell = Signal::new("tell", json!({"to": "far", "n": 1})).expect("a kind");
    agent.call(tell, Duration::from_secs(10)).await.expect("told");
    let Some(Elsewhere::Agent { signal, kept_by: Some(kept_by), .. }) = handed.recv().await else {
        panic!("expected an emit kept by its agent");
    };
    let durable = runtime.store().durable().expect("durable");
    durable.flushed_for(&t).await.expect("kept under a's lease");
    let unsent = |durable: agentry::store::DurableView<'_>| {
        let revival = durable.revivals(std::slice::from_ref(&t)).expect("reads").pop().expect("one");
        revival.expect("decodes").unsent.len()
    };
    assert_eq!(unsent(durable), 1, "kept until sent on");

    // Node b takes t over; only then does a's node say the emit was sent on.
    a.expire(&t).await.expect("expired");
    let b = Owners::connect(&url, "b", Duration::from_secs(60)).await.expect("node b");
    b.claim(&t).await.expect("b holds t");
    runtime.sent_on(&kept_by, signal.id());
    durable.flushed().await.expect("the commit ended");
    assert_eq!(unsent(durable), 0, "forgotten, though the agent is b's now");
    runtime.shutdown(Duration::from_secs(1)).await;
}
