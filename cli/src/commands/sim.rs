//! `agentry sim SCENARIO`: runs the simulation a scenario file describes ([`crate::scenario`]) with a progress
//! bar on standard error, and writes the metrics table as CSV and an SVG plot of it, next to the scenario or in
//! `--out`. It prints a summary: as text, or with `--json` as one JSON object (and no progress bar). A scenario
//! with mistakes exits with code 3, each mistake shown as `agentry check` shows a manifest's.

use crate::error::CliError;
use crate::manifest::diagnostic::{Code, ManifestError};
use crate::registry::Registry;
use crate::scenario::Places;
use crate::simulation::{Finished, Plan, SimFailure};
use agentry_sim::plot::{Series, time_series};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{Map, Value, json};
use std::io::IsTerminal;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// The progress bar's length: thousandths of the virtual duration.
const STEPS: u64 = 1000;

/// Runs the scenario at `path`; writes `<name>.csv` and `<name>.svg` in `out` (default: the scenario's folder).
pub fn sim(path: &Path, out: Option<&Path>, json: bool, registry: &Registry) -> Result<ExitCode, CliError> {
    let (plan, places) = crate::scenario::load(path, registry).map_err(CliError::Scenario)?;
    // `load` refuses a type the registry lacks or cannot simulate; this only says so again.
    let simulate = registry.agents.get(&plan.kind).and_then(|kind| kind.simulate).ok_or_else(|| {
        let message = format!("agents of type `{}` cannot be simulated", plan.kind);
        CliError::Scenario(vec![ManifestError::whole(Code::UnknownAgentType, message)])
    })?;
    let (csv, svg) = outputs(path, out)?;
    let bar = progress_bar(json);
    let ran = simulate(&plan, &mut |now: Duration| advance(&bar, plan.duration, now));
    bar.finish_and_clear();
    let finished = ran.map_err(|failure| failed(&plan, &places, failure))?;
    finished.table.write_csv(&csv)?;
    draw(&plan, &finished, &svg)?;
    report(path, &plan, &finished, (csv.as_path(), svg.as_path()), json);
    Ok(ExitCode::SUCCESS)
}

/// Where the table and the plot go: `<out>/<scenario's name>.csv` and `.svg`, the folder made if missing.
fn outputs(path: &Path, out: Option<&Path>) -> Result<(PathBuf, PathBuf), CliError> {
    let dir = match out {
        Some(dir) => dir.to_owned(),
        None => path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_owned(),
    };
    std::fs::create_dir_all(&dir).map_err(CliError::io(format!("creating {}", dir.display())))?;
    let stem = path.file_stem().map_or_else(|| "simulation".to_owned(), |s| s.to_string_lossy().into_owned());
    let (csv, svg) = (dir.join(format!("{stem}.csv")), dir.join(format!("{stem}.svg")));
    let scenario = std::fs::canonicalize(path).ok();
    let same = |output: &Path| scenario.is_some() && std::fs::canonicalize(output).ok() == scenario;
    if same(&csv) || same(&svg) {
        return Err(CliError::Usage(format!(
            "{} would be overwritten by its own output; name the scenario `.toml`, or pass --out",
            path.display()
        )));
    }
    Ok((csv, svg))
}

/// A bar on standard error when it is a terminal and `--json` is not given; a hidden one otherwise.
fn progress_bar(json: bool) -> ProgressBar {
    if json || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(STEPS), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template("{bar:40} {percent:>3}%  virtual time {msg}  ({elapsed} elapsed)") {
        bar.set_style(style);
    }
    // Redraws the elapsed time while a slice of the run takes long.
    bar.enable_steady_tick(Duration::from_millis(250));
    bar
}

/// The bar at virtual time `now` of `duration`.
fn advance(bar: &ProgressBar, duration: Duration, now: Duration) {
    let done = now.as_nanos().saturating_mul(u128::from(STEPS)) / duration.as_nanos().max(1);
    bar.set_position(u64::try_from(done).unwrap_or(STEPS).min(STEPS));
    bar.set_message(format!("{:.1}s of {:.1}s", now.as_secs_f64(), duration.as_secs_f64()));
}

/// A failure found once the agent type was known: a mistake of the scenario at its place, or the simulator's.
fn failed(plan: &Plan, places: &Places, failure: SimFailure) -> CliError {
    let error = match failure {
        SimFailure::UnknownAction { action, closest } => {
            let message = format!("an action model is given for `{action}`, which no skill of the catalog provides");
            let error =
                mistake(places, place(&places.models, &action), Code::BadValue, message).label("no such action");
            did_you_mean(error, closest)
        }
        SimFailure::UnknownSkill { skill, closest } => {
            let message = format!("unknown skill `{skill}`: no skill of the catalog has this id");
            let error =
                mistake(places, place(&places.skills, &skill), Code::UnknownSkill, message).label("no such skill");
            did_you_mean(error, closest)
        }
        SimFailure::Config { group, message } => {
            let message = format!("group `{group}`: {message}");
            mistake(places, place(&places.groups, &group), Code::BadValue, message).label("in this group")
        }
        SimFailure::StartSkills(message) => {
            return CliError::Start(format!("the start skills of agent type `{}`: {message}", plan.kind));
        }
        SimFailure::Sim(err) => return CliError::Simulation(err),
    };
    CliError::Scenario(vec![error])
}

/// Where `name` is in the file, by the list the plan kept of such names.
fn place(list: &[(String, Range<usize>)], name: &str) -> Option<Range<usize>> {
    list.iter().find(|(known, _)| known == name).map(|(_, span)| span.clone())
}

fn mistake(places: &Places, place: Option<Range<usize>>, code: Code, message: String) -> ManifestError {
    match place {
        Some(span) => ManifestError::at(code, &places.source, span, message),
        None => ManifestError::whole(code, message),
    }
}

fn did_you_mean(error: ManifestError, closest: Option<String>) -> ManifestError {
    match closest {
        Some(best) => error.help(format!("did you mean `{best}`?")),
        None => error,
    }
}

/// The plot: each metric `[plot]` names, over virtual time.
fn draw(plan: &Plan, finished: &Finished, svg: &Path) -> Result<(), CliError> {
    let series: Vec<Series> =
        plan.plot.columns.iter().map(|name| Series::measured(name, finished.table.series(name))).collect();
    time_series(svg, &plan.plot.title, "virtual time (s)", &plan.plot.y_label, &series)?;
    Ok(())
}

/// What ran and where it was written: text, or one JSON object.
fn report(path: &Path, plan: &Plan, finished: &Finished, (csv, svg): (&Path, &Path), json: bool) {
    let table = &finished.table;
    let last: Vec<(String, f64)> = table
        .rows
        .last()
        .map(|row| table.columns.iter().cloned().zip(row.values.iter().copied()).collect())
        .unwrap_or_default();
    if json {
        let counts = &finished.counts;
        let last: Map<String, Value> = last.into_iter().map(|(name, value)| (name, json!(value))).collect();
        let summary = json!({
            "scenario": path.display().to_string(),
            "agent_type": plan.kind,
            "agents": finished.population,
            "seed": plan.seed,
            "duration_secs": plan.duration.as_secs_f64(),
            "samples": table.rows.len(),
            "trace_hash": finished.trace_hash,
            "counts": {
                "steps": counts.steps, "completed": counts.completed, "failed": counts.failed,
                "blocked": counts.blocked, "refused": counts.refused, "faults": counts.faults,
            },
            "last": last,
            "csv": csv.display().to_string(),
            "svg": svg.display().to_string(),
        });
        println!("{summary}");
        return;
    }
    println!(
        "{}: {} agent(s) of type `{}`, {} of virtual time, seed {}: {} sample(s), trace {}",
        path.display(),
        finished.population,
        plan.kind,
        humantime::format_duration(plan.duration),
        plan.seed,
        table.rows.len(),
        finished.trace_hash
    );
    if let Some(row) = table.rows.last() {
        let values: Vec<String> = last.iter().map(|(name, value)| format!("{name} {value}")).collect();
        println!("at {}s: {}", row.time, values.join(", "));
    }
    println!("wrote {} and {}", csv.display(), svg.display());
}
