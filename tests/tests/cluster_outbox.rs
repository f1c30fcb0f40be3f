//! An agent's emits to an agent on another node survive their node: kept in the journal with the input that
//! made them, they are sent again by whichever node brings the agent back, and the target, which takes them
//! through its inbox, applies each once. Nodes are real processes (`cluster_node`) on loopback, over a real
//! PostgreSQL server.

use agentry_tests::cluster::{NodeProcess, WAIT};
use agentry_tests::postgres::Postgres;

const NODE: &str = env!("CARGO_BIN_EXE_cluster_node");
/// Leases of 1.5 s: the killed node's agent moves soon after it dies, and the target's node, frozen for a few
/// milliseconds, keeps its own.
const LEASE_MS: u64 = 1_500;
const COOKIE: &str = "the-cluster-secret";

async fn node(postgres: &Postgres, name: &str) -> NodeProcess {
    NodeProcess::start_with(NODE, postgres, LEASE_MS, name, &[("AGENTRY_NODE_WIRE", COOKIE)]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn emits_their_node_died_before_sending_on_are_sent_by_the_next_holder_and_applied_once() {
    let Some(postgres) = agentry_tests::postgres::or_skip("cluster_outbox") else { return };
    let mut a = node(&postgres, "a").await;
    let mut b = node(&postgres, "b").await;
    let mut c = node(&postgres, "c").await;
    a.ask("spawn x", "spawned x").await;
    b.ask("spawn t", "spawned t").await;
    for (node, peers) in [(&mut a, ["wire-up b", "wire-up c"]), (&mut c, ["wire-up a", "wire-up b"])] {
        for peer in peers {
            node.expect(peer).await;
        }
    }

    // `t`'s node frozen, `x` emits three signals to `t`: kept in the journal with the step, while the first
    // waits on the wire (for up to 2 s) and the others wait behind it in `a`'s memory. Then `a` dies.
    b.signal("STOP");
    a.ask("spray-kept x 3 t", "kept x").await;
    a.signal("KILL");
    let _ = a.child.wait().await;
    b.signal("CONT");
    // A send to `x` meanwhile, its node dead, does not hang: it waits in `x`'s inbox (or, should `x` have moved
    // already, reaches its new node), and is applied once `x` is back.
    let sent = c.ask("send x 7", "sent x 7 ").await;
    assert!(sent.ends_with("(Kept)"), "{sent}");

    // `x` comes back on a survivor, which sends the three on again (the first may have reached `b` before `a`
    // died: it is a duplicate in `t`'s inbox).
    let taker = loop {
        if b.kept.iter().any(|l| l == "took x") {
            break &mut b;
        }
        if c.kept.iter().any(|l| l == "took x") {
            break &mut c;
        }
        tokio::select! {
            line = b.lines.recv() => b.kept.extend(line),
            line = c.lines.recv() => c.kept.extend(line),
            _ = tokio::time::sleep(WAIT) => panic!("`x` was not taken over within {WAIT:?}"),
        }
    };
    taker.ask("settle", "settled").await;
    assert_eq!(taker.state("x").await.applied, [7], "the send made while its node was dead, once");
    // A call to `t` after them, through its inbox too, is applied after them.
    b.ask("call t 8 10000", "replied t 8 ").await;
    assert_eq!(b.state("t").await.applied, [1, 1, 1, 8], "each of x's emits once, then the call");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_wire_an_emit_to_an_agent_on_another_node_goes_through_its_inbox() {
    let Some(postgres) = agentry_tests::postgres::or_skip("cluster_outbox") else { return };
    let mut a = NodeProcess::start(NODE, &postgres, LEASE_MS, "a").await;
    let mut b = NodeProcess::start(NODE, &postgres, LEASE_MS, "b").await;
    a.ask("spawn x", "spawned x").await;
    b.ask("spawn t", "spawned t").await;
    a.ask(r#"signal x tell {"to":"t","n":5}"#, "given x tell").await;
    a.ask("settle", "settled").await;
    b.ask("call t 8 10000", "replied t 8 ").await;
    assert_eq!(b.state("t").await.applied, [5, 8], "the emit, then the call");
}
