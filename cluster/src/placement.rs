//! Where an agent goes when nobody says: rendezvous (highest random weight) hashing over the live nodes. Each node
//! scores each agent with a hash of the two names, and the agent goes to the node with the highest score. Every
//! node computes the same answer from the same list, in any order, with no coordination; and when a node joins
//! or leaves, only the agents it wins or held move: the rest stay where they are (rebalancing stays small and
//! explicit). The hash is XXH3 of fixed bytes, so the answer is the same on every machine and version.
//!
//! ```
//! use agentry::id::AgentId;
//! use agentry_cluster::placement::place;
//!
//! let nodes = ["node-a".to_owned(), "node-b".to_owned(), "node-c".to_owned()];
//! let agent = AgentId::new("counter-7")?;
//! let home = place(&agent, &nodes).expect("a node");
//! // Without a node that was not chosen, the agent stays put.
//! let others: Vec<String> = nodes.iter().filter(|n| n.as_str() == home || n.as_str() == "node-a").cloned().collect();
//! assert_eq!(place(&agent, &others), Some(home));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use agentry::id::AgentId;

/// The node of `nodes` that agent `agent` goes to (`None` when there is none). Ties, which need two equal
/// 64-bit hashes, go to the node whose name sorts first.
pub fn place<'a>(agent: &AgentId, nodes: &'a [String]) -> Option<&'a str> {
    nodes
        .iter()
        .map(|node| (score(node, agent), node.as_str()))
        .max_by(|(a, node_a), (b, node_b)| a.cmp(b).then_with(|| node_b.cmp(node_a)))
        .map(|(_, node)| node)
}

/// A node's score for an agent: XXH3 over the node's name, a zero byte (no name holds one), and the agent's id.
fn score(node: &str, agent: &AgentId) -> u64 {
    let mut bytes = Vec::with_capacity(node.len() + 1 + agent.as_str().len());
    bytes.extend_from_slice(node.as_bytes());
    bytes.push(0);
    bytes.extend_from_slice(agent.as_str().as_bytes());
    xxhash_rust::xxh3::xxh3_64(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn nodes() -> impl Strategy<Value = Vec<String>> {
        prop::collection::btree_set("[a-z]{1,6}", 1..8).prop_map(|set| set.into_iter().collect())
    }

    fn agent() -> impl Strategy<Value = AgentId> {
        "[a-z0-9-]{1,12}".prop_filter_map("a valid id", |id| AgentId::new(id).ok())
    }

    proptest! {
        /// The model: the node with the highest score, computed the plain way.
        #[test]
        fn the_agent_goes_to_the_highest_scoring_node_whatever_the_order(
            nodes in nodes(), agent in agent(), seed in any::<u64>()
        ) {
            let best = nodes.iter().max_by_key(|n| (score(n, &agent), std::cmp::Reverse((*n).clone()))).cloned();
            let mut shuffled = nodes.clone();
            let by = |n: &String| xxhash_rust::xxh3::xxh3_64_with_seed(n.as_bytes(), seed);
            shuffled.sort_by_key(by);
            prop_assert_eq!(place(&agent, &nodes).map(str::to_owned), best.clone());
            prop_assert_eq!(place(&agent, &shuffled).map(str::to_owned), best);
        }

        /// A node that leaves moves only its own agents; one that joins takes agents only for itself.
        #[test]
        fn only_the_agents_of_a_node_that_leaves_or_joins_move(nodes in nodes(), agent in agent(), pick in any::<usize>()) {
            let home = place(&agent, &nodes).map(str::to_owned);
            let gone = nodes[pick % nodes.len()].clone();
            let fewer: Vec<String> = nodes.iter().filter(|n| **n != gone).cloned().collect();
            if home.as_deref() != Some(gone.as_str()) {
                prop_assert_eq!(place(&agent, &fewer).map(str::to_owned), home.clone());
            }
            let mut more = nodes.clone();
            more.push("zz-joined".to_owned());
            let after = place(&agent, &more).map(str::to_owned);
            prop_assert!(after == home || after.as_deref() == Some("zz-joined"));
        }
    }

    #[test]
    fn agents_spread_evenly_and_none_go_nowhere_but_with_no_node() {
        let nodes: Vec<String> = (0..5).map(|n| format!("node-{n}")).collect();
        let mut counts = std::collections::HashMap::new();
        for n in 0..10_000 {
            let agent = AgentId::new(format!("agent-{n}")).expect("an id");
            *counts.entry(place(&agent, &nodes).expect("a node")).or_insert(0) += 1;
        }
        assert!(counts.values().all(|c| (1_600..=2_400).contains(c)), "{counts:?}");
        assert_eq!(place(&AgentId::new("a").expect("an id"), &[]), None);
    }
}
