//! Contact networks: who an agent may meet. Agents are the network's nodes in the order they were added to
//! the simulation. Random graphs come from `rustworkx-core` (petgraph graphs); a graph of the user's own can be
//! given as a petgraph graph too.

use crate::SimRng;
use crate::error::SimError;
use rand::{RngExt, SeedableRng};
use rustworkx_core::generators::{barabasi_albert_graph, gnm_random_graph};
use rustworkx_core::petgraph::EdgeType;
use rustworkx_core::petgraph::graph::{Graph, UnGraph};
use rustworkx_core::petgraph::visit::EdgeRef;

/// An undirected contact network, as each agent's neighbours.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Network {
    neighbours: Vec<Vec<u32>>,
}

impl Network {
    /// The network of a petgraph graph: node `i` is the `i`th agent; edges are contacts both ways.
    pub fn from_graph<N, E, Ty: EdgeType>(graph: &Graph<N, E, Ty>) -> Self {
        let mut neighbours = vec![Vec::new(); graph.node_count()];
        for edge in graph.edge_references() {
            let (a, b) = (edge.source().index(), edge.target().index());
            if a != b {
                neighbours[a].push(b as u32);
                neighbours[b].push(a as u32);
            }
        }
        for list in &mut neighbours {
            list.sort_unstable();
            list.dedup();
        }
        Self { neighbours }
    }

    /// An Erdős–Rényi random network of `nodes` with `mean_degree` contacts on average (G(n, m)).
    pub fn random(nodes: usize, mean_degree: f64, seed: u64) -> Result<Self, SimError> {
        crate::error::check("the mean degree", mean_degree, false)?;
        let edges = (nodes as f64 * mean_degree / 2.0).round() as usize;
        let graph: UnGraph<(), ()> = gnm_random_graph(nodes, edges, Some(seed), || (), || ())
            .map_err(|_| SimError::Network(format!("no random graph of {nodes} nodes and {edges} edges")))?;
        Ok(Self::from_graph(&graph))
    }

    /// A scale-free network by preferential attachment (Barabási–Albert): each new node links to `links`
    /// existing ones, so degrees follow a power law.
    pub fn scale_free(nodes: usize, links: usize, seed: u64) -> Result<Self, SimError> {
        let graph: UnGraph<(), ()> = barabasi_albert_graph(nodes, links, Some(seed), None, || (), || ())
            .map_err(|_| SimError::Network(format!("expected 1 <= links ({links}) < nodes ({nodes})")))?;
        Ok(Self::from_graph(&graph))
    }

    /// A small-world network (Watts–Strogatz): a ring where each node links to its `degree` nearest
    /// neighbours (`degree` even), then each link rewired to a random node with probability `rewire`.
    pub fn small_world(nodes: usize, degree: usize, rewire: f64, seed: u64) -> Result<Self, SimError> {
        crate::error::check("the rewiring probability", rewire, true)?;
        if degree % 2 == 1 || degree >= nodes {
            return Err(SimError::Network(format!(
                "expected an even degree ({degree}) below the node count ({nodes})"
            )));
        }
        let mut rng = SimRng::seed_from_u64(seed);
        let mut graph: UnGraph<(), ()> = UnGraph::with_capacity(nodes, nodes * degree / 2);
        let ids: Vec<_> = (0..nodes).map(|_| graph.add_node(())).collect();
        for i in 0..nodes {
            for step in 1..=degree / 2 {
                let mut j = (i + step) % nodes;
                if rng.random::<f64>() < rewire {
                    // A new end, neither the node itself nor one it already links to.
                    for _ in 0..nodes {
                        let candidate = rng.random_range(0..nodes);
                        if candidate != i && graph.find_edge(ids[i], ids[candidate]).is_none() {
                            j = candidate;
                            break;
                        }
                    }
                }
                if graph.find_edge(ids[i], ids[j]).is_none() {
                    graph.add_edge(ids[i], ids[j], ());
                }
            }
        }
        Ok(Self::from_graph(&graph))
    }

    /// How many nodes it has.
    pub fn len(&self) -> usize {
        self.neighbours.len()
    }

    /// Whether it has no nodes.
    pub fn is_empty(&self) -> bool {
        self.neighbours.is_empty()
    }

    /// The neighbours of node `node`.
    pub fn neighbours(&self, node: usize) -> &[u32] {
        self.neighbours.get(node).map(Vec::as_slice).unwrap_or(&[])
    }

    /// The mean number of neighbours.
    pub fn mean_degree(&self) -> f64 {
        let total: usize = self.neighbours.iter().map(Vec::len).sum();
        total as f64 / self.neighbours.len().max(1) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generators_give_the_degrees_they_promise() {
        let random = Network::random(2_000, 6.0, 1).unwrap();
        assert!((random.mean_degree() - 6.0).abs() < 0.01, "{}", random.mean_degree());
        let ring = Network::small_world(1_000, 4, 0.0, 1).unwrap();
        assert!(ring.neighbours.iter().all(|n| n.len() == 4), "an unrewired ring is regular");
        assert_eq!(ring.neighbours(0), [1, 2, 998, 999]);
        let rewired = Network::small_world(1_000, 4, 0.2, 1).unwrap();
        assert!((rewired.mean_degree() - 4.0).abs() < 0.05);
        assert_ne!(rewired, ring);
        let scale_free = Network::scale_free(5_000, 2, 1).unwrap();
        let hub = scale_free.neighbours.iter().map(Vec::len).max().unwrap();
        assert!(hub > 50, "preferential attachment makes hubs (largest degree {hub})");
        assert!(matches!(Network::small_world(10, 3, 0.1, 1), Err(SimError::Network(_))));
        assert!(matches!(Network::random(10, -1.0, 1), Err(SimError::BadNumber { .. })));
    }
}
