//! `agentry journal` and `agentry inspect`: what ran, and what an agent is now, from the journal in the data
//! folder (read-only: opening it to read never writes it), whether a runtime runs on it or not.

use super::control::{Request, ask};
use crate::args::JournalArgs;
use crate::error::CliError;
use crate::manifest::Loaded;
use agentry::id::{ActionId, AgentId};
use agentry::store::{Durable, RunQuery, RunStatus, SqliteStore, Store};
use serde_json::json;
use std::path::Path;
use std::process::ExitCode;

/// The journal of a data folder, if it has one.
pub fn open_journal(data: &Path) -> Result<Option<SqliteStore>, CliError> {
    let path = data.join(agentry::runtime::JOURNAL);
    if !path.exists() {
        return Ok(None);
    }
    SqliteStore::open(&path)
        .map(Some)
        .map_err(|e| CliError::Start(format!("the journal {} cannot be read: {e}", path.display())))
}

fn status_of(text: &str) -> Result<RunStatus, CliError> {
    serde_json::from_value(json!(text)).map_err(|_| {
        CliError::Usage(format!("`{text}` is not a run status; expected queued, awaiting_approval, approved, running, completed, failed or blocked"))
    })
}

/// Lists journaled runs, oldest first.
pub fn journal(loaded: &Loaded, args: JournalArgs) -> Result<ExitCode, CliError> {
    let data = crate::start::data_dir(loaded);
    let Some(journal) = open_journal(&data)? else {
        eprintln!("no journal in {} yet", data.display());
        return Ok(ExitCode::SUCCESS);
    };
    let query = RunQuery {
        agent: args.agent.as_deref().map(AgentId::new).transpose().map_err(|e| CliError::Usage(e.to_string()))?,
        action: args.action.as_deref().map(ActionId::new).transpose().map_err(|e| CliError::Usage(e.to_string()))?,
        status: args.status.as_deref().map(status_of).transpose()?,
        ..RunQuery::default()
    };
    let mut runs = journal.query(&query);
    if let Some(limit) = args.limit {
        runs = runs.split_off(runs.len().saturating_sub(limit));
    }
    for run in runs {
        if args.json {
            println!("{}", serde_json::to_string(&run).unwrap_or_default());
            continue;
        }
        let at = run.history.first().map(|(_, at)| at.format("%Y-%m-%d %H:%M:%S").to_string()).unwrap_or_default();
        let status =
            serde_json::to_value(run.status()).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
        let cost = run.cost.map(|c| format!("  cost {c}")).unwrap_or_default();
        println!("{at}  {:<12} {:<28} {status:<18} {}{cost}", run.agent.as_str(), run.action.as_str(), run.run);
    }
    Ok(ExitCode::SUCCESS)
}

/// Shows an agent: live (through the control socket) when a runtime runs, else as the journal keeps it.
pub async fn inspect(loaded: &Loaded, agent: &str) -> Result<ExitCode, CliError> {
    let data = crate::start::data_dir(loaded);
    let id = AgentId::new(agent).map_err(|e| CliError::Usage(e.to_string()))?;
    let live = match ask(&data, &Request::Inspect { agent: agent.to_owned() }).await {
        Some(Ok(live)) => Some(live),
        Some(Err((error, code))) => return Err(super::control::failure(error, &code)),
        None => None,
    };
    let journal = open_journal(&data)?;
    let record =
        journal.as_ref().map(|j| j.agent(&id)).transpose().map_err(|e| CliError::Start(e.to_string()))?.flatten();
    let snapshot =
        journal.as_ref().map(|j| j.snapshot(&id)).transpose().map_err(|e| CliError::Start(e.to_string()))?.flatten();
    if live.is_none() && record.is_none() {
        return Err(CliError::NotFound(format!("no agent `{agent}` in {}", data.display())));
    }
    let schedules = journal
        .as_ref()
        .map(|j| j.schedules(&id))
        .transpose()
        .map_err(|e| CliError::Start(e.to_string()))?
        .unwrap_or_default();
    let pending: Vec<_> = journal
        .as_ref()
        .map(|j| j.query(&RunQuery { agent: Some(id.clone()), ..RunQuery::default() }))
        .unwrap_or_default()
        .into_iter()
        .filter(|r| !r.status().is_final())
        .map(|r| json!({"run": r.run, "action": r.action, "status": r.status()}))
        .collect();
    let out = json!({
        "agent": agent,
        "live": live,
        "type": snapshot.as_ref().map(|s| s.agent_type.clone()),
        "state": snapshot.as_ref().map(|s| s.state.clone()),
        "snapshot_seq": snapshot.as_ref().map(|s| s.seq),
        "schedules": schedules.iter().map(|s| json!({"key": s.key, "due": s.due})).collect::<Vec<_>>(),
        "pending_runs": pending,
    });
    println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
    Ok(ExitCode::SUCCESS)
}
