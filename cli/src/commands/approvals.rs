//! `agentry approvals`: the runs waiting for approval, approved or denied from any terminal. With a live
//! runtime on the data folder, through its control socket (with the params and contract the approver judges);
//! without one, from the journal, and a decision is kept in the data folder for the runtime to apply when it
//! starts.

use super::control::{Request, ask};
use super::journal::open_journal;
use crate::args::{ApprovalAction, ApprovalsArgs};
use crate::error::CliError;
use crate::manifest::Loaded;
use agentry::store::{RunQuery, RunStatus};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use uuid::Uuid;

/// The folder where decisions made while no runtime runs wait for it.
pub fn decisions_dir(data: &Path) -> PathBuf {
    data.join("decisions")
}

/// Runs `agentry approvals`.
pub async fn approvals(loaded: &Loaded, args: ApprovalsArgs) -> Result<ExitCode, CliError> {
    let data = crate::start::data_dir(loaded);
    match args.action.unwrap_or(ApprovalAction::List) {
        ApprovalAction::List => {
            let waiting = match ask(&data, &Request::Approvals).await {
                Some(Ok(Value::Array(list))) => list,
                Some(Ok(_)) => Vec::new(),
                Some(Err((error, code))) => return Err(super::control::failure(error, &code)),
                None => offline_pending(&data)?,
            };
            for entry in &waiting {
                if args.json {
                    println!("{entry}");
                } else {
                    let params = entry.get("params").map_or("(the live runtime has them)".to_owned(), Value::to_string);
                    println!(
                        "{}  {}  {}  risk {}  params {}",
                        entry["run"].as_str().unwrap_or_default(),
                        entry["agent"].as_str().unwrap_or_default(),
                        entry["action"].as_str().unwrap_or_default(),
                        entry["risk"].as_str().unwrap_or("?"),
                        params
                    );
                }
            }
            if waiting.is_empty() && !args.json {
                println!("no run waits for approval");
            }
            Ok(ExitCode::SUCCESS)
        }
        ApprovalAction::Approve { run } => decide(&data, &run, true).await,
        ApprovalAction::Deny { run } => decide(&data, &run, false).await,
    }
}

async fn decide(data: &Path, run: &str, approve: bool) -> Result<ExitCode, CliError> {
    let run: Uuid = run.parse().map_err(|_| {
        CliError::Usage(format!("`{run}` is not a run id; expected a UUID as `agentry approvals` lists them"))
    })?;
    let word = if approve { "approved" } else { "denied" };
    match ask(data, &Request::Decide { run, approve }).await {
        Some(Ok(_)) => {
            println!("{word} run {run}");
            Ok(ExitCode::SUCCESS)
        }
        Some(Err((error, code))) => Err(super::control::failure(error, &code)),
        None => {
            // No live runtime: the decision waits in the data folder for the next start.
            let waiting = offline_pending(data)?;
            let Some(entry) = waiting.into_iter().find(|w| w["run"] == json!(run)) else {
                return Err(CliError::NotFound(format!("no run {run} waits for approval in the journal")));
            };
            let dir = decisions_dir(data);
            std::fs::create_dir_all(&dir).map_err(CliError::io(format!("creating {}", dir.display())))?;
            let file = dir.join(format!("{run}.json"));
            // Bound to the run as the journal has it: applied only to that agent's run of that action with
            // those params.
            let decision = json!({"approve": approve, "agent": entry["agent"], "action": entry["action"], "params_digest": entry["params_digest"]});
            std::fs::write(&file, decision.to_string()).map_err(CliError::io(format!("writing {}", file.display())))?;
            println!("{word} run {run}; no runtime runs now, so it is applied when `agentry run` starts");
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The runs the journal says wait for approval.
fn offline_pending(data: &Path) -> Result<Vec<Value>, CliError> {
    let Some(journal) = open_journal(data)? else { return Ok(Vec::new()) };
    let query = RunQuery { status: Some(RunStatus::AwaitingApproval), ..RunQuery::default() };
    Ok(agentry::store::Store::query(&journal, &query)
        .into_iter()
        .map(|r| json!({"agent": r.agent, "run": r.run, "action": r.action, "params_digest": r.params_digest}))
        .collect())
}

/// An answer typed in a terminal to a run waiting for approval, applied: `a`/`approve`/`y`/`yes`,
/// `d`/`deny`/`n`/`no`, or `l`/`always` (this action for this agent, from now on). Returns what was done, to
/// show, or `None` when the text is not one of these answers.
pub(super) async fn answer(
    runtime: &agentry::runtime::Runtime,
    agent: &agentry::id::AgentId,
    (run, action): (Uuid, &agentry::id::ActionId),
    text: &str,
) -> Option<String> {
    let decided = match text {
        "a" | "approve" | "y" | "yes" => runtime.decide(agent, run, true).await.map(|()| "approved"),
        "d" | "deny" | "n" | "no" => runtime.decide(agent, run, false).await.map(|()| "denied"),
        "l" | "always" => runtime.always_allow(agent, action).await.map(|_| "approved, and always allowed from now"),
        _ => return None,
    };
    Some(match decided {
        Ok(done) => done.to_owned(),
        Err(error) => format!("not decided here: {error}"),
    })
}
