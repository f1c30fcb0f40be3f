//! Nodes as real processes (`cluster_node`) sharing a journal in a real PostgreSQL server: a node killed with
//! SIGKILL has its agents taken over by the survivors, each brought back exactly as it was, its runs going on
//! settled there as a restart settles them (none with side effects repeated); a node frozen with
//! SIGSTOP until its leases ran out, then continued, has its writes refused by epoch and steps down.

use agentry_tests::cluster::{NodeProcess, Tally, WAIT};
use agentry_tests::postgres::Postgres;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

const NODE: &str = env!("CARGO_BIN_EXE_cluster_node");
/// How long a node's leases last: a dead node's agents move after about this long.
const LEASE_MS: u64 = 1_000;

fn postgres(test: &str) -> Option<Postgres> {
    agentry_tests::postgres::or_skip(test)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_nodes_agents_come_back_on_the_survivors_as_they_were() {
    let Some(postgres) = postgres("cluster_failover") else { return };
    let mut a = NodeProcess::start(NODE, &postgres, LEASE_MS, "a").await;
    let mut b = NodeProcess::start(NODE, &postgres, LEASE_MS, "b").await;
    let mut c = NodeProcess::start(NODE, &postgres, LEASE_MS, "c").await;
    let agents: Vec<String> = (0..6).map(|n| format!("t{n}")).collect();
    for agent in &agents {
        a.ask(&format!("spawn {agent}"), &format!("spawned {agent}")).await;
        for n in 1..=5 {
            a.add(agent, n).await;
        }
    }
    // One on b, which stays where it is.
    b.ask("spawn home", "spawned home").await;
    b.add("home", 7).await;
    // One spawned just before the kill: a spawn the node acknowledged is in the journal, and comes back.
    a.ask("spawn fresh", "spawned fresh").await;
    let agents: Vec<String> = agents.into_iter().chain(["fresh".to_owned()]).collect();

    a.signal("KILL");
    let killed = Instant::now();
    let _ = a.child.wait().await;
    // Each agent is taken by exactly one survivor.
    let mut owner: BTreeMap<String, char> = BTreeMap::new();
    while owner.len() < agents.len() {
        let mut progressed = false;
        for (node, name) in [(&mut b, 'b'), (&mut c, 'c')] {
            let Some(at) = node.kept.iter().position(|l| l.starts_with("took ")) else { continue };
            let agent = node.kept.remove(at).trim_start_matches("took ").to_owned();
            assert!(owner.insert(agent.clone(), name).is_none(), "{agent} was taken twice");
            progressed = true;
        }
        if !progressed {
            // Wait for the next line of either survivor.
            tokio::select! {
                line = b.lines.recv() => b.kept.extend(line),
                line = c.lines.recv() => c.kept.extend(line),
                _ = tokio::time::sleep(WAIT) => panic!("not every agent was taken over within {WAIT:?}: {owner:?}"),
            }
        }
    }
    let failover = killed.elapsed();
    eprintln!("failover: every agent of the killed node taken over {failover:?} after SIGKILL (lease {LEASE_MS} ms)");
    assert_eq!(owner.keys().cloned().collect::<BTreeSet<_>>(), agents.iter().cloned().collect(), "{owner:?}");
    for agent in &agents {
        let node = if owner[agent] == 'b' { &mut b } else { &mut c };
        let before = if agent == "fresh" { vec![] } else { vec![1, 2, 3, 4, 5] };
        assert_eq!(node.state(agent).await.applied, before, "{agent}: as it was before the kill");
        node.add(agent, 6).await;
        let after: Vec<u64> = before.into_iter().chain([6]).collect();
        assert_eq!(node.state(agent).await.applied, after, "{agent}: it goes on");
    }
    assert_eq!(b.state("home").await.applied, vec![7], "the survivor's own agent stayed");
}

/// The lines of agent `agent`'s ledger (see `agentry_tests::durable`) under the nodes' data folder, once it has
/// at least `least` of them (the file is looked at every 10 ms, up to [`WAIT`]).
async fn ledger(data: &std::path::Path, agent: &str, least: usize) -> Vec<(String, String)> {
    let path = data.join("agents").join(agent).join("ledger").join(agentry_tests::durable::LINES);
    let deadline = Instant::now() + WAIT;
    loop {
        let lines = agentry_tests::durable::lines(&path);
        if lines.len() >= least {
            return lines;
        }
        assert!(Instant::now() < deadline, "{agent}'s ledger did not reach {least} lines within {WAIT:?}: {lines:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A worker's runs going on when its node is killed are settled on the survivor that takes it over, as a restart
/// settles them: the one with side effects that is not idempotent reaches the agent as interrupted and is not run
/// again; the idempotent one runs again under the same key; the one waiting for approval waits again, under the
/// same run id, and runs once when approved there; its schedule is armed again and fires once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_nodes_runs_are_settled_on_the_survivor_and_no_side_effect_is_repeated() {
    let Some(postgres) = postgres("cluster_failover") else { return };
    let data = tempfile::tempdir().expect("a folder");
    let env = [("AGENTRY_NODE_DATA", data.path().to_str().expect("a path"))];
    let mut a = NodeProcess::start_with(NODE, &postgres, LEASE_MS, "a", &env).await;
    let mut b = NodeProcess::start_with(NODE, &postgres, LEASE_MS, "b", &env).await;
    a.ask("spawn-worker w0", "spawned w0").await;
    for action in ["ledger.charge", "ledger.note"] {
        let asked = format!(r#"tell w0 do {{"action":"{action}","params":{{"hang":true}}}}"#);
        a.ask(&asked, "told w0 do").await;
    }
    a.ask(r#"tell w0 do {"action":"ledger.risky","params":{}}"#, "told w0 do").await;
    let asked = a.expect("approval-asked w0 ").await;
    let run = asked.trim_start_matches("approval-asked w0 ").to_owned();
    // Due well after the kill (which follows at once) and the take-over (a lease and a round later).
    a.ask(r#"tell w0 arm {"after_ms":3000}"#, "told w0 arm").await;
    // Both hanging runs wrote their first line (each started durably before it did anything).
    let before = ledger(data.path(), "w0", 2).await;
    // Its state, asked behind `arm` in its mailbox: `arm` was handled; then what it wrote is made durable.
    let worker = a.ask("await-worker w0 fired 0", "worker w0 ").await;
    assert!(worker.contains(r#""fired":0"#), "not fired yet: {worker}");
    a.ask("flush w0", "flushed w0").await;

    a.signal("KILL");
    let _ = a.child.wait().await;
    b.expect("took w0").await;
    assert_eq!(b.expect("approval-asked w0 ").await, asked, "the approval is asked again, for the same run");
    b.ask(&format!("approve w0 {run}"), &format!("approved {run}")).await;
    let worker = b.ask("await-worker w0 interrupted 1", "worker w0 ").await;
    assert!(worker.contains(r#""interrupted":1"#), "{worker}");
    b.ask("await-worker w0 completed 1", "worker w0 ").await;
    let worker = b.ask("await-worker w0 fired 1", "worker w0 ").await;
    assert!(worker.contains(r#""fired":1"#), "the schedule fired once, on the survivor: {worker}");

    let after = ledger(data.path(), "w0", before.len() + 2).await;
    let count = |what: &str| after.iter().filter(|(_, w)| w == what).count();
    assert_eq!(count("charge-start"), 1, "the interrupted charge did not run again: {after:?}");
    assert_eq!(count("risky"), 1, "the approved run ran once: {after:?}");
    let notes: Vec<&String> = after.iter().filter(|(_, w)| w == "note-start").map(|(key, _)| key).collect();
    // (It hangs again there, and is tried again after its timeout: under the same key each time.)
    assert!(notes.len() >= 2, "the idempotent run started again: {after:?}");
    assert!(notes.iter().all(|key| *key == notes[0]), "under the same key: {after:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_node_that_lost_its_leases_cannot_write_and_steps_down() {
    let Some(postgres) = postgres("cluster_fencing") else { return };
    let mut a = NodeProcess::start(NODE, &postgres, LEASE_MS, "a").await;
    let mut b = NodeProcess::start(NODE, &postgres, LEASE_MS, "b").await;
    a.ask("spawn t", "spawned t").await;
    a.add("t", 1).await;
    a.add("t", 2).await;

    // Frozen past its lease: b takes the agent over and goes on with it.
    a.signal("STOP");
    b.expect("took t").await;
    b.add("t", 3).await;

    // Continued, a still runs its copy until it learns otherwise: its write is refused by epoch.
    a.signal("CONT");
    a.send("add t 4").await;
    let answer = a.expect_any(&["ack t 4", "nack t 4"]).await;
    assert!(answer.starts_with("nack t 4"), "a stale node's write was acknowledged: {answer}");
    a.expect("lost t").await;
    let said = a.expect("stopped-event t").await;
    assert!(said.contains("node `a` lost the agent's lease"), "its events say why it stopped its copy: {said}");

    assert_eq!(b.state("t").await.applied, vec![1, 2, 3], "nothing of the stale node's reached the journal");
    // What the journal holds, read afresh by a third node that takes the agent once a and b are gone.
    for node in [&mut a, &mut b] {
        node.signal("KILL");
        let _ = node.child.wait().await;
    }
    let mut c = NodeProcess::start(NODE, &postgres, LEASE_MS, "c").await;
    c.expect("took t").await;
    assert_eq!(c.state("t").await.applied, vec![1, 2, 3], "the journal holds b's history, none of a's after it");
}

/// SplitMix64, for the seeded moments of the history check.
struct Seeded(u64);

impl Seeded {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % n
    }
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The history check: two clients send numbered signals to eight agents spread over three nodes on the wire, one
/// pushing into their inboxes, the other sending through a fourth node (over the wire to the holder, else into
/// the inbox), while the three are killed (SIGKILL) and started again at seeded moments. Every signal acknowledged
/// is applied exactly once, in each client's order, by the agent, whichever nodes held it meanwhile.
/// `AGENTRY_HISTORY_KILLS` (3 by default) and `AGENTRY_HISTORY_SEED` for longer or other runs by hand.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acknowledged_signal_is_applied_once_and_in_order_through_kills() {
    use agentry::id::AgentId;
    use agentry::signal::Signal;
    use agentry_cluster::{Inbox, Pushed};
    let Some(postgres) = postgres("cluster_history") else { return };
    let kills = env_number("AGENTRY_HISTORY_KILLS", 3);
    let mut seeded = Seeded(env_number("AGENTRY_HISTORY_SEED", 11));
    // Three nodes on the wire, killed at the seeded moments; a fourth, `d`, is the second client's way in.
    let wire = [("AGENTRY_NODE_WIRE", "the-history-secret")];
    let names = ["a", "b", "c"];
    let mut nodes = Vec::new();
    for name in names {
        nodes.push(NodeProcess::start_with(NODE, &postgres, LEASE_MS, name, &wire).await);
    }
    let mut door = NodeProcess::start_with(NODE, &postgres, LEASE_MS, "d", &wire).await;
    let agents: Vec<String> = (0..8).map(|n| format!("h{n}")).collect();
    for (n, agent) in agents.iter().enumerate() {
        nodes[n % 3].ask(&format!("spawn {agent}"), &format!("spawned {agent}")).await;
    }
    // Two clients, each with numbered signals of its own, one agent after another, each acknowledged, until told
    // to stop (after the last kill); each returns the last number every agent was sent. The first pushes into
    // the inboxes; the second sends through node `d` (over the wire to the node that holds the agent, else into
    // its inbox), numbering from `SECOND`.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (url, client_agents, stopped) = (postgres.url(), agents.clone(), stop.clone());
    let first = tokio::spawn(async move {
        let inbox = Inbox::connect(&url, 10_000).await.expect("the client connects");
        let mut k = 0;
        while !stopped.load(std::sync::atomic::Ordering::SeqCst) {
            k += 1;
            for agent in &client_agents {
                let id = AgentId::new(agent.as_str()).expect("an id");
                let signal = Signal::new("add", serde_json::json!(k)).expect("a kind");
                assert_eq!(inbox.push(&id, &signal).await.expect("pushed"), Pushed::Kept);
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        k
    });
    let (client_agents, stopped) = (agents.clone(), stop.clone());
    let second = tokio::spawn(async move {
        let mut k = 0;
        while !stopped.load(std::sync::atomic::Ordering::SeqCst) {
            k += 1;
            for agent in &client_agents {
                let n = SECOND + k;
                let sent = door.ask(&format!("send {agent} {n}"), &format!("sent {agent} {n} ")).await;
                // (A duplicate: the wire's holder had it, and its answer was lost with it; the inbox has it.)
                let acknowledged = ["(Kept)", "(Duplicate)", "Here"].iter().any(|end| sent.ends_with(end));
                assert!(acknowledged, "acknowledged: {sent}");
            }
        }
        (k, door)
    });
    // Kills at seeded moments while the clients send, each node started again at once under its name.
    for _ in 0..kills {
        tokio::time::sleep(Duration::from_millis(200 + seeded.below(600))).await;
        let victim = seeded.below(3) as usize;
        nodes[victim].signal("KILL");
        let _ = nodes[victim].child.wait().await;
        nodes[victim] = NodeProcess::start_with(NODE, &postgres, LEASE_MS, names[victim], &wire).await;
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let firsts: u64 = first.await.expect("the first client pushed everything");
    let (seconds, door) = second.await.expect("the second client sent everything");
    nodes.push(door);
    // A last call to each agent (0), through its inbox from node a: answered once every signal pushed before it
    // was applied, by whichever node holds the agent (an agent of a node killed last once its lease ran out).
    for agent in &agents {
        let answer = nodes[0].ask(&format!("call {agent} 0 30000"), &format!("replied {agent} 0")).await;
        let count = firsts + seconds + 1;
        assert_eq!(answer, format!("replied {agent} 0 {count}"), "{agent}: every signal before the call");
        let mut found = None;
        for node in nodes.iter_mut() {
            node.send(&format!("state {agent}")).await;
            let line = node.expect_any(&[&format!("state {agent} "), &format!("nack {agent} state")]).await;
            if let Ok(tally) = serde_json::from_str::<Tally>(line.trim_start_matches(&format!("state {agent} "))) {
                found = Some(tally);
            }
        }
        let applied = found.unwrap_or_else(|| panic!("no node holds {agent}")).applied;
        // Each client's signals once each, in the order it sent them (the two clients' interleave as they came).
        let of_first: Vec<u64> = applied.iter().copied().filter(|n| (1..SECOND).contains(n)).collect();
        let of_second: Vec<u64> = applied.iter().filter(|n| **n > SECOND).map(|n| n - SECOND).collect();
        assert_eq!(of_first, (1..=firsts).collect::<Vec<_>>(), "{agent}: the first client's, once, in order");
        assert_eq!(of_second, (1..=seconds).collect::<Vec<_>>(), "{agent}: the second client's, once, in order");
        assert_eq!(applied.last(), Some(&0), "{agent}: the call last");
    }
    eprintln!(
        "history: {kills} kills, {firsts} + {seconds} signals from two clients to each of {} agents, each applied \
         once, in order",
        agents.len()
    );
}

/// Where the second client of the history check numbers its signals from.
const SECOND: u64 = 1_000_000;

/// A call from one node reaches an agent on another and its reply comes back; signals sent from afar keep their
/// order with the calls; a call to an agent whose node is dead fails within its timeout, and is applied once a
/// survivor holds the agent (the inbox keeps it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_from_one_node_is_answered_by_an_agent_on_another() {
    let Some(postgres) = postgres("cluster_calls") else { return };
    let mut a = NodeProcess::start(NODE, &postgres, LEASE_MS, "a").await;
    let mut b = NodeProcess::start(NODE, &postgres, LEASE_MS, "b").await;
    b.ask("spawn far", "spawned far").await;
    assert_eq!(a.ask("call far 5 10000", "replied far 5").await, "replied far 5 1", "b's agent answered a");
    assert_eq!(a.ask("call far 6 10000", "replied far 6").await, "replied far 6 2");
    assert_eq!(a.ask("send far 7", "sent far 7").await, "sent far 7 Inbox(Kept)", "through the inbox");
    assert_eq!(a.ask("call far 8 10000", "replied far 8").await, "replied far 8 4", "after the signal sent before");
    assert_eq!(b.state("far").await.applied, vec![5, 6, 7, 8], "in the order a sent them");

    b.signal("KILL");
    let _ = b.child.wait().await;
    let started = Instant::now();
    let answer = a.ask("call far 9 300", "").await;
    let answer = if answer.starts_with("took") { a.expect("nack far 9").await } else { answer };
    assert!(answer.starts_with("nack far 9") && answer.contains("300ms"), "{answer}");
    assert!(started.elapsed() < Duration::from_secs(5), "the call failed within its timeout");
    a.expect("took far").await;
    // The call waited in the inbox and reached the agent once a held it, once, before what a sends it now.
    assert_eq!(a.ask("call far 10 10000", "replied far 10").await, "replied far 10 6");
    assert_eq!(a.state("far").await.applied, vec![5, 6, 7, 8, 9, 10]);
}

/// An agent that ended on a node lets its lease go: another node may spawn an agent under its id at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_ended_lets_its_lease_go() {
    let Some(postgres) = postgres("cluster_ended") else { return };
    let mut a = NodeProcess::start(NODE, &postgres, LEASE_MS, "a").await;
    let mut b = NodeProcess::start(NODE, &postgres, LEASE_MS, "b").await;
    a.ask("spawn once", "spawned once").await;
    let refused = b.ask("spawn once", "").await;
    assert!(refused.starts_with("refused once"), "held by a: {refused}");
    a.ask("stop once", "stopped once").await;
    a.expect("ended once").await;
    assert_eq!(b.ask("spawn once", "").await, "spawned once", "free once it ended");
}

/// Every agent a node runs holds a lease, however it was spawned: a child an agent spawned, and an agent spawned
/// on the runtime itself rather than through the node, write under theirs (their signals are acknowledged as
/// durable under this node's lease) and come back on a survivor after a SIGKILL as they were; an id another
/// node holds is refused to both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_started_by_agents_or_by_the_runtime_hold_leases_and_survive_their_node() {
    let Some(postgres) = postgres("cluster_children") else { return };
    let mut a = NodeProcess::start(NODE, &postgres, LEASE_MS, "a").await;
    let mut b = NodeProcess::start(NODE, &postgres, LEASE_MS, "b").await;
    a.ask("spawn mother", "spawned mother").await;
    a.ask("adopt mother kid", "adopted kid").await;
    a.ask("spawn-raw plain", "spawned plain").await;
    for n in 1..=3 {
        a.add("kid", n).await;
        a.add("plain", n * 10).await;
    }

    // An id b holds: neither the runtime nor an agent of a starts a copy of it.
    b.ask("spawn theirs", "spawned theirs").await;
    // (Refused by its lease, or, once b's journal has it, as an agent the journal keeps.)
    let held = |said: &str| said.contains("owned by node `b`") || said.contains("`theirs` is in the journal already");
    let refused = a.ask("spawn-raw theirs", "refused theirs").await;
    assert!(held(&refused), "{refused}");
    a.send("adopt mother theirs").await;
    let adopted = a.expect_any(&["nack adopt theirs", "adopted theirs"]).await;
    assert!(adopted.starts_with("nack adopt theirs"), "a copy of b's agent started on a: {adopted}");
    assert!(held(&adopted), "its parent was told why: {adopted}");

    a.signal("KILL");
    let _ = a.child.wait().await;
    let mut taken = BTreeSet::new();
    while taken.len() < 3 {
        let took = b.expect("took ").await;
        taken.insert(took.trim_start_matches("took ").to_owned());
    }
    assert_eq!(taken, ["kid", "mother", "plain"].map(String::from).into_iter().collect(), "b took them all");
    assert_eq!(b.state("kid").await.applied, vec![1, 2, 3], "the child's history was written, under its lease");
    assert_eq!(b.state("plain").await.applied, vec![10, 20, 30]);
    assert_eq!(b.state("theirs").await.applied, Vec::<u64>::new(), "b's own agent was never touched");
}

/// Signals a node gave from an agent's inbox and that were still in its mailbox when it stopped itself and was
/// started again afresh (a new actor: its old mailbox is gone) are given again to the new one, in order, once
/// each: nothing waits in the inbox until the node restarts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signals_lost_with_a_restarted_agents_mailbox_are_given_again() {
    let Some(postgres) = postgres("cluster_regive") else { return };
    let mut a = NodeProcess::start(NODE, &postgres, 3_000, "a").await;
    let mut b = NodeProcess::start(NODE, &postgres, 3_000, "b").await;
    a.ask("spawn-permanent t", "spawned t").await;

    // Both wait in the inbox before a hears of either, so a gives them to the agent together: `quit` stops it,
    // and `add 5` is left in the mailbox of the actor that stopped.
    let inbox = agentry_cluster::Inbox::connect(&postgres.url(), 100).await.expect("the inbox");
    let t = agentry::id::AgentId::new("t").expect("an id");
    a.signal("STOP");
    for (kind, data) in [("quit", serde_json::json!(null)), ("add", serde_json::json!(5))] {
        let signal = agentry::signal::Signal::new(kind, data).expect("a signal");
        inbox.push(&t, &signal).await.expect("pushed");
    }
    a.signal("CONT");
    a.expect("given-again t").await;
    // A call through the inbox comes after them: the new actor got `add 5` first.
    assert_eq!(b.ask("call t 6 10000", "replied t 6").await, "replied t 6 2", "add 5 was given again, first");
    assert_eq!(a.state("t").await.applied, vec![5, 6]);
}

/// Rebalancing is explicit and conservative: a node that joined takes nothing by itself; asked, the node that
/// holds the agents hands over exactly those that placement over the live nodes now gives to another node, each
/// put to sleep and its lease let go; the node placement names takes each, as it was, and what is sent for it
/// afterwards through the old node reaches it there, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rebalancing_hands_over_exactly_what_placement_gives_to_other_nodes() {
    let Some(postgres) = postgres("cluster_rebalance") else { return };
    let mut a = NodeProcess::start(NODE, &postgres, LEASE_MS, "a").await;
    let agents: Vec<String> = (0..8).map(|n| format!("r{n}")).collect();
    for agent in &agents {
        a.ask(&format!("spawn {agent}"), &format!("spawned {agent}")).await;
        a.add(agent, 1).await;
    }
    let mut b = NodeProcess::start(NODE, &postgres, LEASE_MS, "b").await;
    let mut c = NodeProcess::start(NODE, &postgres, LEASE_MS, "c").await;
    let nodes = ["a", "b", "c"].map(String::from);
    let elsewhere: BTreeMap<String, &str> = agents
        .iter()
        .filter_map(|agent| {
            let id = agentry::id::AgentId::new(agent.as_str()).expect("an id");
            let home = agentry_cluster::placement::place(&id, &nodes).expect("a node");
            (home != "a").then(|| (agent.clone(), if home == "b" { "b" } else { "c" }))
        })
        .collect();
    assert!(!elsewhere.is_empty(), "placement gives every agent to a: the test needs other names");

    a.send("rebalance 100").await;
    let said = a.expect("rebalanced").await;
    let handed: BTreeSet<String> = a.kept.iter().filter_map(|l| l.strip_prefix("handed ")).map(str::to_owned).collect();
    assert_eq!(said, format!("rebalanced {}", elsewhere.len()), "{:?}", a.kept);
    assert_eq!(handed, elsewhere.keys().cloned().collect(), "exactly what placement gives elsewhere");
    for (agent, home) in &elsewhere {
        let node = if *home == "b" { &mut b } else { &mut c };
        node.expect(&format!("took {agent}")).await;
        assert_eq!(node.state(agent).await.applied, vec![1], "{agent} as it was");
        // Sent through a, which no longer holds it: it reaches the new holder, before a later call.
        a.ask(&format!("send {agent} 2"), &format!("sent {agent} 2")).await;
        let reply = a.ask(&format!("call {agent} 3 10000"), &format!("replied {agent} 3")).await;
        assert_eq!(reply, format!("replied {agent} 3 3"));
    }
    for agent in agents.iter().filter(|a| !elsewhere.contains_key(*a)) {
        assert_eq!(a.state(agent).await.applied, vec![1], "{agent} stayed on a");
    }
}

/// A topic spans the nodes on the wire; a member on a node that dies leaves it: publishing goes on without
/// waiting for that node, and the member, brought back on a survivor, is not subscribed there (a subscription is
/// its runtime's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topic_members_on_a_dead_node_leave_the_topic() {
    let Some(postgres) = postgres("cluster_topics") else { return };
    let wire = [("AGENTRY_NODE_WIRE", "the-topic-secret")];
    let mut a = NodeProcess::start_with(NODE, &postgres, LEASE_MS, "a", &wire).await;
    let mut b = NodeProcess::start_with(NODE, &postgres, LEASE_MS, "b", &wire).await;
    let mut c = NodeProcess::start_with(NODE, &postgres, LEASE_MS, "c", &wire).await;
    for peer in ["wire-up a", "wire-up b"] {
        c.expect(peer).await;
    }
    a.ask("spawn s1", "spawned s1").await;
    b.ask("spawn s2", "spawned s2").await;
    c.ask("spawn p", "spawned p").await;
    a.ask("subscribe s1 news", "subscribed s1").await;
    b.ask("subscribe s2 news", "subscribed s2").await;
    let shout = async |c: &mut NodeProcess, n: u64| {
        c.ask(&format!(r#"signal p shout {{"topic":"news","n":{n}}}"#), "given p shout").await;
        c.ask("settle", "settled").await;
    };
    shout(&mut c, 1).await;
    assert_eq!(a.state("s1").await.applied, [1], "a member on a");
    assert_eq!(b.state("s2").await.applied, [1], "a member on b");
    // A topic's signal reaches a member at most once, straight to it (no inbox): it is durable once its input
    // was committed, which its reply to `state` does not wait for.
    a.ask("flush s1", "flushed s1").await;

    a.signal("KILL");
    let _ = a.child.wait().await;
    shout(&mut c, 2).await;
    assert_eq!(b.state("s2").await.applied, [1, 2], "the member still alive");
    let taker = loop {
        if b.kept.iter().any(|l| l == "took s1") {
            break &mut b;
        }
        if c.kept.iter().any(|l| l == "took s1") {
            break &mut c;
        }
        tokio::select! {
            line = b.lines.recv() => b.kept.extend(line),
            line = c.lines.recv() => c.kept.extend(line),
            _ = tokio::time::sleep(WAIT) => panic!("`s1` was not taken over within {WAIT:?}: b printed {:?}, c {:?}", b.kept, c.kept),
        }
    };
    assert_eq!(taker.state("s1").await.applied, [1], "back as it was");
    shout(&mut c, 3).await;
    assert_eq!(c.state("p").await.applied, Vec::<u64>::new(), "the publisher is no member");
    assert_eq!(b.state("s2").await.applied, [1, 2, 3]);
    let taker = if b.kept.iter().any(|l| l == "took s1") { &mut b } else { &mut c };
    assert_eq!(taker.state("s1").await.applied, [1], "it left the topic with its node");
}
