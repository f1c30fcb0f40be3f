//! Failover time: from a SIGKILL of the node that holds an agent to the first signal the survivor answers for
//! it, over `AGENTRY_FAILOVER_SAMPLES` kills (20 by default), with leases of `AGENTRY_FAILOVER_LEASE_MS` (1,000 by
//! default), on node processes (`cluster_node`) sharing a real PostgreSQL server. Reports p50, p99 and the
//! slowest, beside the lease (the floor: the survivor may take the agent only once the lease ran out).
//!
//! `cargo bench -p agentry-tests --bench failover`

use agentry_tests::cluster::NodeProcess;
use std::time::{Duration, Instant};

const NODE: &str = env!("CARGO_BIN_EXE_cluster_node");

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    // Only `cargo bench` runs it (`cargo test --benches` passes `--test`... and is not a measurement).
    if std::env::args().any(|a| a == "--test") {
        return;
    }
    let samples = env_number("AGENTRY_FAILOVER_SAMPLES", 20);
    let lease_ms = env_number("AGENTRY_FAILOVER_LEASE_MS", 1_000);
    let Some(postgres) = agentry_tests::postgres::or_skip("the failover bench") else { return };
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a runtime");
    let mut times: Vec<Duration> = rt.block_on(async {
        let mut survivor = NodeProcess::start(NODE, &postgres, lease_ms, "survivor").await;
        let mut times = Vec::new();
        for n in 0..samples {
            let mut doomed = NodeProcess::start(NODE, &postgres, lease_ms, &format!("doomed-{n}")).await;
            let agent = format!("f{n}");
            doomed.ask(&format!("spawn {agent}"), &format!("spawned {agent}")).await;
            doomed.add(&agent, 1).await;
            doomed.signal("KILL");
            let killed = Instant::now();
            let _ = doomed.child.wait().await;
            survivor.expect(&format!("took {agent}")).await;
            survivor.add(&agent, 2).await;
            times.push(killed.elapsed());
        }
        times
    });
    times.sort();
    let at = |q: f64| times[((times.len() as f64 - 1.0) * q).round() as usize];
    println!(
        "failover (SIGKILL to the first signal answered by the survivor), {} kills, lease {lease_ms} ms: p50 {:?}, \
         p99 {:?}, slowest {:?}",
        times.len(),
        at(0.5),
        at(0.99),
        times[times.len() - 1]
    );
}
