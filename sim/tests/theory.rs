//! The simulator checked against theory no one here wrote: skill diffusion against the SIS mean-field endemic
//! share, and a queue against M/M/1. Sizes are CI-sized by default; `AGENTRY_SIS_AGENTS`, `AGENTRY_SIS_SEEDS`
//! and `AGENTRY_QUEUE_JOBS` make them larger by hand (the figures use 100,000 agents).

use agentry_sim::models::{queue, sis};
use std::time::Duration;

fn knob(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.replace('_', "").parse().ok()).unwrap_or(default)
}

/// Mean share of knowing agents over the second half of 100 units, averaged over seeds.
fn endemic(agents: usize, ratio: f64, seeds: u64) -> f64 {
    let gamma = 0.2;
    let runs = agentry_sim::sweep(&[ratio], &(1..=seeds).collect::<Vec<_>>(), |ratio, seed| {
        let mut sim = sis::simulation(agents, ratio * gamma, gamma, 0.5, seed, Duration::from_secs(1)).unwrap();
        sim.run_until(Duration::from_secs(100));
        sim.table().mean_after(sis::KNOWING, 50.0).unwrap()
    });
    runs.iter().map(|r| r.result).sum::<f64>() / runs.len() as f64
}

#[test]
fn skill_diffusion_settles_at_the_sis_endemic_share() {
    let agents = knob("AGENTRY_SIS_AGENTS", 20_000);
    let seeds = knob("AGENTRY_SIS_SEEDS", 2) as u64;
    for ratio in [1.5, 2.0, 4.0] {
        let theory = sis::endemic_share(ratio, 1.0);
        let simulated = endemic(agents, ratio, seeds);
        let error = (simulated - theory).abs() / theory;
        println!("β/γ = {ratio}: simulated {simulated:.4}, theory {theory:.4}, relative error {:.2}%", error * 100.0);
        assert!(
            error < 0.01,
            "β/γ = {ratio}: simulated {simulated:.4} against {theory:.4} ({:.2}% off)",
            error * 100.0
        );
    }
}

#[test]
fn below_the_threshold_the_skill_dies_out() {
    let agents = knob("AGENTRY_SIS_AGENTS", 20_000);
    let gamma = 0.2;
    let mut sim = sis::simulation(agents, 0.5 * gamma, gamma, 0.01, 7, Duration::from_secs(10)).unwrap();
    sim.run_until(Duration::from_secs(400));
    let last = sim.table().series(sis::KNOWING).last().copied().unwrap();
    assert_eq!(last.1, 0.0, "β/γ = 0.5: the skill should be forgotten everywhere by t = 400, got {last:?}");
}

#[test]
fn a_desk_serving_poisson_jobs_matches_mm1() {
    let jobs = knob("AGENTRY_QUEUE_JOBS", 400_000) as f64;
    for (lambda, mu) in [(0.5, 1.0), (0.8, 1.0)] {
        let seeds: Vec<u64> = (1..=4).collect();
        let per_seed = jobs / seeds.len() as f64;
        let runs = agentry_sim::sweep(&[(lambda, mu)], &seeds, |&(lambda, mu), seed| {
            let mut sim = queue::simulation(lambda, mu, seed).unwrap();
            sim.run_until(Duration::from_secs_f64(per_seed / lambda));
            // The first tenth is the warm-up: the queue starts empty.
            let runs = sim.runs();
            let kept = &runs[runs.len() / 10..];
            let total: f64 = kept.iter().map(|r| (r.ended - r.requested).as_secs_f64()).sum();
            (total, kept.len() as f64)
        });
        let (total, count) = runs.iter().fold((0.0, 0.0), |(t, c), r| (t + r.result.0, c + r.result.1));
        let simulated = total / count;
        let theory = queue::mean_time_in_system(lambda, mu);
        let error = (simulated - theory).abs() / theory;
        println!("ρ = {lambda}: mean time in system {simulated:.4}, theory {theory:.4}, {:.2}% off", error * 100.0);
        assert!(error < 0.01, "ρ = {lambda}: {simulated:.4} against {theory:.4} ({:.2}% off)", error * 100.0);
    }
}
