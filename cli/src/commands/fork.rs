//! `agentry fork AGENT --at SEQ`: the agent's past replayed into the simulator from input `SEQ`, with the inputs
//! after it as the journal has them, some dropped, or replaced by a file, without touching the live agent.
//!
//! The journal is copied first (consistently, even while a runtime writes it) and only the copy is read. The
//! agent starts from its state right after input `SEQ` (as `agentry state --at` folds it). Each input after
//! that is given to it at the time it came, except what the agent made itself after the point (its runs'
//! outcomes, its own timers and signals, told apart by their causation): the fork makes those again. A run the
//! forked agent asks for with the same action and params as one the live agent made ends as that one did,
//! without running; a run the live agent never made is refused, since a fork runs nothing.

use super::history::{Folded, fold};
use super::journal::open_journal;
use crate::error::CliError;
use crate::manifest::Loaded;
use crate::registry::Registry;
use crate::replay::{ForkSetup, Forked};
use agentry::action::OutcomeStatus;
use agentry::id::AgentId;
use agentry::signal::Signal;
use agentry::store::{Durable, RunQuery, RunRecord, SqliteStore, Store};
use agentry_sim::Recording;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;
use uuid::Uuid;

/// What `agentry fork` was asked.
pub struct ForkAsk<'a> {
    pub agent: &'a str,
    pub at: u64,
    /// A file of inputs (JSON lines, as `agentry history --json` prints them) to give instead of the recorded
    /// ones.
    pub inputs: Option<&'a Path>,
    /// Recorded inputs (by sequence number) to leave out.
    pub drop: &'a [u64],
    /// How long to play, in virtual time (default: up to the last input, and an hour after).
    pub play_for: Option<Duration>,
    pub seed: u64,
    pub json: bool,
}

/// How long a fork plays after its last input, unless told.
const AFTER_LAST_INPUT: Duration = Duration::from_secs(3600);

/// Runs `agentry fork`.
pub async fn fork(loaded: &Loaded, registry: &Registry, ask: ForkAsk<'_>) -> Result<ExitCode, CliError> {
    let data = crate::start::data_dir(loaded);
    let id = AgentId::new(ask.agent).map_err(|e| CliError::Usage(e.to_string()))?;
    let live = data.join(agentry::runtime::JOURNAL);
    if !live.exists() {
        return Err(CliError::NotFound(format!("no journal in {}", data.display())));
    }
    let copy = tempfile::tempdir().map_err(CliError::io("making a folder for the journal's copy"))?;
    let copied = copy.path().join(agentry::runtime::JOURNAL);
    SqliteStore::copy(&live, &copied).map_err(|e| CliError::Start(format!("the journal cannot be copied: {e}")))?;
    let journal = open_journal(copy.path())?
        .ok_or_else(|| CliError::Start(format!("the journal's copy is missing from {}", copied.display())))?;
    let Folded { kind, record, state, catalog, at_time } = fold(loaded, registry, &journal, &id, ask.at).await?;
    let recorded = journal.inputs_after(&id, ask.at).map_err(|e| CliError::Start(e.to_string()))?;
    let given = match ask.inputs {
        Some(path) => read_inputs(path, ask.at)?,
        None => kept(&recorded, ask.drop)?,
    };
    let runs: HashMap<Uuid, RunRecord> = journal
        .query(&RunQuery { agent: Some(id.clone()), ..RunQuery::default() })
        .into_iter()
        .map(|r| (r.run, r))
        .collect();
    let Split { inputs, recording, made_again } = split(given, &recorded, &runs, at_time)?;
    let given = inputs.len();
    let until = ask.play_for.unwrap_or_else(|| inputs.last().map_or(Duration::ZERO, |(t, _)| *t) + AFTER_LAST_INPUT);
    let setup = ForkSetup {
        id: id.clone(),
        state,
        catalog,
        policy: record.policy().unwrap_or_default(),
        max_in_flight: record
            .spawn
            .get("max_in_flight")
            .and_then(Value::as_u64)
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(64),
        inputs,
        recording,
        epoch: at_time,
        until,
        seed: ask.seed,
    };
    let forked = (kind.fork)(setup).map_err(CliError::Start)?;
    print(&ask, given, made_again, &forked);
    Ok(ExitCode::SUCCESS)
}

/// The recorded inputs without those `drop` names (each must be one of them).
fn kept(recorded: &[(u64, Signal)], drop: &[u64]) -> Result<Vec<Signal>, CliError> {
    if let Some(missing) = drop.iter().find(|seq| !recorded.iter().any(|(n, _)| n == *seq)) {
        let range = match (recorded.first(), recorded.last()) {
            (Some((first, _)), Some((last, _))) => format!("{first} to {last}"),
            _ => "none".to_owned(),
        };
        return Err(CliError::Usage(format!(
            "--drop {missing}: there is no such input after the fork's point (the inputs after it: {range})"
        )));
    }
    Ok(recorded.iter().filter(|(n, _)| !drop.contains(n)).map(|(_, s)| s.clone()).collect())
}

/// Reads a file of inputs: JSON lines, each `{"seq": N, "signal": {...}}` (as `agentry history --json` prints
/// them) or a signal by itself; blank lines are skipped.
fn read_inputs(path: &Path, at: u64) -> Result<Vec<Signal>, CliError> {
    let text = std::fs::read_to_string(path).map_err(CliError::io(format!("reading {}", path.display())))?;
    let mut signals = Vec::new();
    for (number, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let bad = |e: serde_json::Error| {
            CliError::Usage(format!(
                "{}:{}: not an input ({e}); expected a JSON signal, or {{\"seq\": N, \"signal\": {{...}}}} as `agentry history --json` prints",
                path.display(),
                number + 1
            ))
        };
        let value: Value = serde_json::from_str(line).map_err(bad)?;
        if let Some(seq) = value.get("seq").and_then(Value::as_u64).filter(|seq| *seq <= at) {
            return Err(CliError::Usage(format!(
                "{}:{}: input {seq} is at or before the fork's point ({at}), whose state already holds it; expected only the inputs after it (`agentry history AGENT --after {at} --json`)",
                path.display(),
                number + 1
            )));
        }
        let signal = match value {
            Value::Object(mut line) if line.contains_key("signal") => line.remove("signal").unwrap_or_default(),
            signal => signal,
        };
        signals.push(serde_json::from_value(signal).map_err(bad)?);
    }
    Ok(signals)
}

/// The inputs after the point, split: those given to the forked agent, each with how long after the point
/// (never earlier than the one before), and what the agent made itself (caused by an input after the point),
/// which the fork makes again.
struct Split {
    /// What the forked agent is given.
    inputs: Vec<(Duration, Signal)>,
    /// The runs the live agent asked for after the point, with what each told it, for the fork's runs.
    recording: Recording,
    /// How many signals of its own (not its runs' outcomes) the fork makes again instead of giving them.
    made_again: usize,
}

/// Splits `given` (the recorded inputs after the point, edited, or a file's). A run asked for after the point
/// is recorded with what `given` has of it; one `recorded` has and `given` leaves out stays in flight in the
/// fork. A run told two ends, or an end that is not the last of what it told, is a mistake of the file.
fn split(
    given: Vec<Signal>,
    recorded: &[(u64, Signal)],
    runs: &HashMap<Uuid, RunRecord>,
    at_time: DateTime<Utc>,
) -> Result<Split, CliError> {
    let after: HashSet<Uuid> = recorded.iter().map(|(_, s)| s.id()).chain(given.iter().map(Signal::id)).collect();
    let made_by_the_agent = |signal: &Signal| signal.causation_id().is_some_and(|cause| after.contains(&cause));
    let since = |from: DateTime<Utc>, to: DateTime<Utc>| (to - from).to_std().unwrap_or(Duration::ZERO);
    let mut inputs = Vec::new();
    let mut told: Vec<(Uuid, Vec<(Duration, agentry::action::Outcome)>)> = Vec::new();
    let mut made_again = 0;
    let mut last = Duration::ZERO;
    for signal in given {
        if !made_by_the_agent(&signal) {
            last = last.max(since(at_time, signal.time()));
            inputs.push((last, signal));
            continue;
        }
        let Some(report) = signal.outcome() else {
            made_again += 1;
            continue;
        };
        let asked = runs.get(&report.run_id).and_then(|r| r.history.first()).map_or(at_time, |(_, at)| *at);
        let entry = (since(asked, signal.time()), report.outcome.clone());
        match told.iter_mut().find(|(run, _)| *run == report.run_id) {
            Some((run, list)) if list.last().is_some_and(|(_, o)| o.status != OutcomeStatus::AwaitingApproval) => {
                return Err(CliError::Usage(format!(
                    "run {run} is told its end twice; expected one end for each run, after its waits for approval"
                )));
            }
            Some((_, list)) => list.push(entry),
            None => told.push((report.run_id, vec![entry])),
        }
    }
    // Runs the live agent asked for after the point whose end the inputs leave out: in flight in the fork.
    for (_, signal) in recorded.iter().filter(|(_, s)| made_by_the_agent(s)) {
        if let Some(report) = signal.outcome()
            && !told.iter().any(|(run, _)| *run == report.run_id)
        {
            told.push((report.run_id, Vec::new()));
        }
    }
    // Runs of the same action and params replay in the order they were asked for.
    let asked = |run: &Uuid| runs.get(run).and_then(|r| r.history.first()).map(|(_, at)| *at);
    told.sort_by_key(|(run, _)| asked(run));
    let mut recording = Recording::default();
    for (run, list) in told {
        match runs.get(&run) {
            Some(record) => recording.record(record.action.clone(), record.params_digest, list),
            None => eprintln!("(an outcome of run {run}, which the journal does not have, was left out)"),
        }
    }
    Ok(Split { inputs, recording, made_again })
}

/// Prints what the fork came to.
fn print(ask: &ForkAsk<'_>, inputs: usize, made_again: usize, forked: &Forked) {
    let runs: Vec<Value> = forked
        .runs
        .iter()
        .map(|r| {
            json!({
                "action": r.action,
                "status": r.status,
                "error": r.error,
                "replayed": r.replayed,
                "asked_after_ms": u64::try_from(r.requested.as_millis()).unwrap_or(u64::MAX),
            })
        })
        .collect();
    let unreplayed: Vec<Value> =
        forked.unreplayed.iter().map(|(action, n)| json!({"action": action, "runs": n})).collect();
    if ask.json {
        let out = json!({"agent": ask.agent, "at": ask.at, "inputs": inputs, "made_again": made_again,
            "runs": runs, "unreplayed": unreplayed, "stopped": forked.stopped, "state": forked.state});
        println!("{out}");
        return;
    }
    println!("fork of `{}` from input {}: {inputs} inputs given", ask.agent, ask.at);
    for run in &forked.runs {
        let how = if run.replayed { "as recorded" } else { "not recorded: not run" };
        let status = serde_json::to_value(run.status).ok().and_then(|v| v.as_str().map(str::to_owned));
        println!(
            "  +{:>9.3}s  {:<28} {:<10} {how}",
            run.requested.as_secs_f64(),
            crate::render::escape(run.action.as_str()),
            status.unwrap_or_default()
        );
    }
    for (action, n) in &forked.unreplayed {
        println!("  recorded, never asked for by the fork: {n} run(s) of {}", crate::render::escape(action.as_str()));
    }
    if forked.stopped {
        println!(
            "stopped: the agent asked for more than {} runs the live agent never made",
            agentry_sim::MAX_UNRECORDED
        );
    }
    let state = serde_json::to_string_pretty(&forked.state).unwrap_or_default();
    println!("state at the end:\n{}", crate::render::escape_lines(&state));
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentry::action::Outcome;
    use agentry::driver::{RunRef, action_outcome_at};
    use agentry::id::ActionId;

    fn outcome(run: Uuid, action: &ActionId, cause: &Signal, at: DateTime<Utc>) -> Signal {
        let reference = RunRef { run, action, correlation: cause.correlation_id(), causation: Some(cause.id()) };
        let done = Outcome::completed(json!("done"), Duration::ZERO, 1);
        action_outcome_at(&std::sync::Arc::from("agentry"), reference, done, (Uuid::now_v7(), at)).expect("a signal")
    }

    #[test]
    fn what_the_agent_made_after_the_point_is_made_again_and_the_rest_is_given() {
        let now = Utc::now();
        let action = ActionId::new("fs.read").expect("an id");
        let point = Signal::new("learn", Value::Null).expect("a signal");
        let message = Signal::new("ask", Value::Null).expect("a signal");
        let own = message.follow("note").build().expect("a signal");
        let (before, after, dropped) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
        let runs: HashMap<Uuid, RunRecord> = [before, after, dropped]
            .into_iter()
            .map(|run| {
                (run, RunRecord::queued(run, AgentId::new("a").expect("an id"), action.clone(), &json!({}), run))
            })
            .collect();
        let recorded: Vec<(u64, Signal)> = vec![
            (2, outcome(before, &action, &point, now)),
            (3, message.clone()),
            (4, own.clone()),
            (5, outcome(after, &action, &message, now)),
            (6, outcome(dropped, &action, &message, now)),
        ];
        let given: Vec<Signal> = recorded.iter().filter(|(n, _)| *n != 6).map(|(_, s)| s.clone()).collect();
        let parts = split(given.clone(), &recorded, &runs, now).expect("split");
        let kinds: Vec<String> = parts.inputs.iter().map(|(_, s)| s.kind().to_string()).collect();
        assert_eq!(kinds, ["action.completed", "ask"], "the end of a run asked at the point, and the message");
        assert_eq!(parts.made_again, 1, "the agent's own note");
        assert_eq!(parts.recording.left(), 2, "the run asked after the point, and the one whose end was dropped");

        let mut twice = given;
        twice.push(outcome(after, &action, &message, now));
        let Err(CliError::Usage(why)) = split(twice, &recorded, &runs, now) else { panic!("refused") };
        assert!(why.contains("told its end twice"), "{why}");
    }
}
