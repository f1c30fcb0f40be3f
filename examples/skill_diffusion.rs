//! Skill diffusion as an SIS epidemic, simulated with the same agentry agents one would deploy: learners
//! teach the `gossip` skill to random contacts at rate β and forget it at rate γ. Writes the share of agents
//! that know it over time beside mean-field theory's endemic share `1 − γ/β`, as CSV and as an SVG plot.
//!
//! `cargo run --release -p agentry-examples --example skill_diffusion [agents] [output folder]`
//! (defaults: 100,000 agents, the folder `target/skill_diffusion`).

use agentry_sim::models::sis;
use agentry_sim::plot::{Series, time_series};
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let agents: usize = match args.next() {
        Some(n) => n.replace('_', "").parse().map_err(|e| format!("the agent count `{n}` is not a number: {e}"))?,
        None => 100_000,
    };
    let folder = args.next().map(PathBuf::from).unwrap_or_else(|| PathBuf::from("target/skill_diffusion"));
    std::fs::create_dir_all(&folder)?;
    let gamma = 0.2;
    let mut series = Vec::new();
    for ratio in [1.5, 2.0, 4.0] {
        let began = Instant::now();
        let mut sim = sis::simulation(agents, ratio * gamma, gamma, 0.5, 1, Duration::from_secs(1))?;
        sim.run_until(Duration::from_secs(100));
        let csv = folder.join(format!("sis-ratio-{ratio}.csv"));
        sim.table().write_csv(&csv)?;
        let settled = sim.table().mean_after(sis::KNOWING, 50.0).unwrap_or(f64::NAN);
        let theory = sis::endemic_share(ratio, 1.0);
        println!(
            "β/γ = {ratio}: {agents} agents, 100 time units in {:.1} s ({} signals); settles at {settled:.4}, \
             theory {theory:.4}; table in {}",
            began.elapsed().as_secs_f64(),
            sim.counts().steps,
            csv.display()
        );
        series.push(Series::measured(&format!("simulated, β/γ = {ratio}"), sim.table().series(sis::KNOWING)));
        series.push(Series::theory(&format!("1 − γ/β = {theory:.3}"), vec![(0.0, theory), (100.0, theory)]));
    }
    let plot = folder.join("sis.svg");
    time_series(&plot, "Skill diffusion (SIS): share of agents that know the skill", "time", "share knowing", &series)?;
    println!("plot: {}", plot.display());
    Ok(())
}
