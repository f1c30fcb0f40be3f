//! Time travel: `agentry history AGENT` lists the inputs the journal logged for an agent, and `agentry state
//! AGENT --at SEQ` folds them into the state the agent had right after input `SEQ`: the latest snapshot at or
//! before it, then the inputs after it, through the agent's own pure code (recorded outcomes are inputs, so
//! nothing is run or asked again). The journal is only read.

use super::journal::open_journal;
use crate::error::CliError;
use crate::manifest::Loaded;
use crate::registry::AgentType;
use crate::registry::Registry;
use agentry::id::AgentId;
use agentry::skill::Catalog;
use agentry::store::{AgentRecord, Durable, SqliteStore};
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use std::process::ExitCode;

/// Lists the agent's logged inputs, oldest first.
pub fn history(loaded: &Loaded, agent: &str, after: u64, json: bool) -> Result<ExitCode, CliError> {
    let data = crate::start::data_dir(loaded);
    let id = AgentId::new(agent).map_err(|e| CliError::Usage(e.to_string()))?;
    let journal =
        open_journal(&data)?.ok_or_else(|| CliError::NotFound(format!("no journal in {}", data.display())))?;
    if journal.agent(&id).map_err(|e| CliError::Start(e.to_string()))?.is_none() {
        return Err(CliError::NotFound(format!("no agent `{agent}` in {}", data.display())));
    }
    let inputs = journal.inputs_after(&id, after).map_err(|e| CliError::Start(e.to_string()))?;
    if !loaded.merged.runtime.keep_history && !json {
        eprintln!(
            "(the journal keeps inputs only since the last snapshot: set `keep_history = true` under [runtime] to keep them all)"
        );
    }
    for (seq, signal) in inputs {
        if json {
            println!("{}", json!({"seq": seq, "signal": signal}));
        } else {
            println!(
                "{seq:>8}  {}  {:<24} {}",
                signal.time().format("%Y-%m-%d %H:%M:%S%.3f"),
                signal.kind().as_str(),
                signal.source()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints the agent's state right after input `seq`.
pub async fn state(loaded: &Loaded, registry: &Registry, agent: &str, seq: u64) -> Result<ExitCode, CliError> {
    let data = crate::start::data_dir(loaded);
    let id = AgentId::new(agent).map_err(|e| CliError::Usage(e.to_string()))?;
    let journal =
        open_journal(&data)?.ok_or_else(|| CliError::NotFound(format!("no journal in {}", data.display())))?;
    let folded = fold(loaded, registry, &journal, &id, seq).await?;
    println!(
        "{}",
        serde_json::to_string_pretty(&json!({"agent": agent, "at": seq, "state": folded.state})).unwrap_or_default()
    );
    Ok(ExitCode::SUCCESS)
}

/// An agent's past folded up to an input.
pub(super) struct Folded {
    /// Its type.
    pub kind: AgentType,
    /// How it was spawned.
    pub record: AgentRecord,
    /// Its state right after the input (a serialized `AgentState`).
    pub state: Value,
    /// The skills the fold used (the registry's, and the MCP servers' if it needed them).
    pub catalog: Catalog,
    /// When the input was made.
    pub at_time: DateTime<Utc>,
}

/// Folds the agent's logged inputs into the state it had right after input `seq`: the latest snapshot at or
/// before it, then the inputs after that, through the agent's own pure code.
pub(super) async fn fold(
    loaded: &Loaded,
    registry: &Registry,
    journal: &SqliteStore,
    id: &AgentId,
    seq: u64,
) -> Result<Folded, CliError> {
    let data = crate::start::data_dir(loaded);
    let record = journal
        .agent(id)
        .map_err(|e| CliError::Start(e.to_string()))?
        .ok_or_else(|| CliError::NotFound(format!("no agent `{id}` in {}", data.display())))?;
    let (snapshot, inputs) = journal.history_at(id, seq).map_err(|e| CliError::Start(e.to_string()))?.ok_or_else(|| {
        CliError::NotFound(format!("the journal keeps no history of `{id}` back to input {seq}; set `keep_history = true` under [runtime] (it applies to agents from then on)"))
    })?;
    let last = inputs.last().map_or(snapshot.seq, |(n, _)| *n);
    if last < seq {
        return Err(CliError::NotFound(format!("agent `{id}` has no input {seq} (its last is {last})")));
    }
    let at_time = inputs.last().map_or(snapshot.at, |(_, signal)| signal.time());
    let kind = registry.agents.get(&snapshot.agent_type).cloned().ok_or_else(|| {
        CliError::Start(format!(
            "agent `{id}` is of type `{}`, which this binary does not register",
            snapshot.agent_type
        ))
    })?;
    let policy = record.policy().unwrap_or_default();
    // The registry's skills first: nothing starts. Only an agent with an MCP server's or a model's skill mounted
    // needs those, which means connecting to its servers.
    let local: Catalog = registry.skills.values().cloned().collect();
    let (state, catalog) = match (kind.replay)(snapshot.state.clone(), &local, &policy, &inputs) {
        Ok(state) => (state, local),
        Err(_) => {
            let (skills, _mcp) = crate::start::catalog(&loaded.merged, registry).await?;
            let catalog: Catalog = skills.into_iter().collect();
            let state = (kind.replay)(snapshot.state, &catalog, &policy, &inputs).map_err(CliError::Start)?;
            (state, catalog)
        }
    };
    Ok(Folded { kind, record, state, catalog, at_time })
}
