//! Parameter sweeps: one simulation per (parameters, seed), run in parallel across cores, each still
//! deterministic, the results in the order of the inputs whatever thread ran them.

use rayon::prelude::*;

/// One run of a sweep.
#[derive(Debug, Clone)]
pub struct Run<P, R> {
    /// Its parameters.
    pub params: P,
    /// Its seed.
    pub seed: u64,
    /// What it gave.
    pub result: R,
}

/// Runs `simulate` for every parameter set × seed, in parallel, and returns the results in input order
/// (parameters first, then seeds).
///
/// ```
/// let runs = agentry_sim::sweep(&[1.0, 2.0], &[7, 8], |rate, seed| rate * seed as f64);
/// assert_eq!(runs.iter().map(|r| r.result).collect::<Vec<_>>(), [7.0, 8.0, 14.0, 16.0]);
/// ```
pub fn sweep<P, R>(params: &[P], seeds: &[u64], simulate: impl Fn(&P, u64) -> R + Sync) -> Vec<Run<P, R>>
where
    P: Clone + Sync + Send,
    R: Send,
{
    let jobs: Vec<(usize, u64)> = (0..params.len()).flat_map(|p| seeds.iter().map(move |&s| (p, s))).collect();
    jobs.into_par_iter()
        .map(|(p, seed)| Run { params: params[p].clone(), seed, result: simulate(&params[p], seed) })
        .collect()
}
