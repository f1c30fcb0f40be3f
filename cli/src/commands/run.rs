//! `agentry run`: the manifest's runtime, its events printed as they happen, approvals asked in the terminal,
//! the control socket served for the operator's tools, until Ctrl-C shuts it down cleanly.

use super::approvals::decisions_dir;
use super::control::{Pending, bind, serve};
use crate::error::CliError;
use crate::manifest::Loaded;
use crate::registry::Registry;
use agentry::events::EventKind;
use agentry::id::{ActionId, AgentId};
use agentry::runtime::Runtime;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;
use uuid::Uuid;

/// How long runs in flight get to end when Ctrl-C stops the runtime.
const GRACE: Duration = Duration::from_secs(10);

/// A question waiting for the operator in the terminal.
struct Question {
    agent: AgentId,
    run: Uuid,
    action: ActionId,
    params: serde_json::Value,
}

/// Runs until Ctrl-C.
pub async fn run(loaded: &Loaded, registry: &Registry, json: bool, prompt: bool) -> Result<ExitCode, CliError> {
    let data = crate::start::data_dir(loaded);
    // Listening for Ctrl-C (and SIGTERM) from the start, once: a listener made for each turn of the loop would
    // miss a signal that came while the loop printed an event.
    use tokio::signal::unix::{SignalKind, signal};
    let listen = |kind| signal(kind).map_err(CliError::io("listening for Ctrl-C"));
    let (mut interrupt, mut terminate) = (listen(SignalKind::interrupt())?, listen(SignalKind::terminate())?);
    crate::start::make_data_dir(&data)?;
    let held = bind(&data).await.map_err(CliError::Start)?;
    let started = crate::start::start(loaded, registry).await?;
    let runtime = started.runtime.clone();
    let mut events = runtime.events();
    let pending = Pending::default();
    let mut progress = crate::render::ProgressShown::default();
    let super::control::Held { lock, listener } = held;
    let server = tokio::spawn(serve(listener, runtime.clone(), pending.clone()));
    say(
        json,
        &serde_json::json!({"event": "ready", "agents": started.agents, "mcp_servers": started.mcp.len(), "recovered": started.recovery.agents.len()}),
        &format!(
            "ready: {} agent(s) ({}), {} MCP server(s), {} came back from the journal; Ctrl-C stops",
            started.agents.len(),
            started.agents.iter().map(AgentId::as_str).collect::<Vec<_>>().join(", "),
            started.mcp.len(),
            started.recovery.agents.len(),
        ),
    );
    apply_decisions(&runtime, &data).await;
    // Runs that came back waiting for approval were announced while the runtime started: the journal lists them.
    let waiting =
        agentry::store::RunQuery { status: Some(agentry::store::RunStatus::AwaitingApproval), ..Default::default() };
    let recovered_waiting = runtime.store().query(&waiting);
    for record in &recovered_waiting {
        pending.seed(&record.agent, record.run, &record.action);
    }
    let (ask_tx, mut ask_rx) = tokio::sync::mpsc::unbounded_channel::<Question>();
    let asker = prompt.then(|| tokio::spawn(ask_in_terminal(runtime.clone(), ask_rx_take(&mut ask_rx))));
    if prompt {
        for record in recovered_waiting {
            let question = Question {
                agent: record.agent,
                run: record.run,
                action: record.action,
                params: serde_json::Value::Null,
            };
            let _ = ask_tx.send(question);
        }
    }
    let code = loop {
        tokio::select! {
            _ = interrupt.recv() => break crate::error::code::INTERRUPTED,
            _ = terminate.recv() => break crate::error::code::INTERRUPTED,
            event = events.recv() => match event {
                Ok(event) => {
                    pending.follow(&event);
                    if !json && !progress.admit(&event) {
                        continue;
                    }
                    if let Some(line) = crate::render::event_line(&event, json) {
                        out(&line);
                    }
                    if let (true, EventKind::ApprovalAsked { action, params, .. }) = (prompt, &event.kind)
                        && let Some(run) = event.run
                    {
                        let _ = ask_tx.send(Question { agent: event.agent.clone(), run, action: action.clone(), params: params.clone() });
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(missed)) => eprintln!("({missed} events were missed: the terminal is slower than the runtime)"),
                Err(tokio::sync::broadcast::error::RecvError::Closed) => break crate::error::code::OK,
            },
        }
    };
    say(json, &serde_json::json!({"event": "stopping"}), "stopping: runs in flight get to end, nothing is lost");
    runtime.shutdown(GRACE).await;
    server.abort();
    if let Some(asker) = asker {
        asker.abort();
    }
    let _ = std::fs::remove_file(super::control::socket_path(&data));
    drop(started);
    drop(lock);
    say(json, &serde_json::json!({"event": "stopped"}), "stopped");
    Ok(ExitCode::from(code))
}

fn ask_rx_take(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<Question>,
) -> tokio::sync::mpsc::UnboundedReceiver<Question> {
    let (_, empty) = tokio::sync::mpsc::unbounded_channel();
    std::mem::replace(rx, empty)
}

fn say(json: bool, value: &serde_json::Value, text: &str) {
    if json { out(&value.to_string()) } else { out(text) }
}

/// One line on stdout, flushed. A reader that went away (`agentry run | head`) does not stop the runtime: what
/// it would have read is dropped.
fn out(line: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{line}").and_then(|()| stdout.flush());
}

/// Asks each waiting run in turn on the terminal: approve, deny, always (this action, for this agent), or show
/// the params first. A run decided elsewhere meanwhile is skipped with a note.
async fn ask_in_terminal(runtime: Runtime, mut questions: tokio::sync::mpsc::UnboundedReceiver<Question>) {
    let mut lines = super::chat::read_lines();
    let mut asked = std::collections::HashSet::new();
    while let Some(q) = questions.recv().await {
        // One question a run, however often it was announced.
        if !asked.insert(q.run) {
            continue;
        }
        loop {
            print!(
                "approve run {} of `{}` by {}? [a]pprove / [d]eny / a[l]ways / [s]how params: ",
                q.run, q.action, q.agent
            );
            let _ = std::io::stdout().flush();
            let Some(answer) = lines.recv().await else { return };
            if matches!(answer.trim(), "s" | "show") {
                out(&crate::render::escape_lines(&serde_json::to_string_pretty(&q.params).unwrap_or_default()));
                continue;
            }
            match super::approvals::answer(&runtime, &q.agent, (q.run, &q.action), answer.trim()).await {
                Some(done) => out(&done),
                None => {
                    out(&format!("`{}`? answer a, d, l or s", crate::render::escape(answer.trim())));
                    continue;
                }
            }
            break;
        }
    }
}

/// Applies the decisions `agentry approvals` kept while no runtime ran.
pub(super) async fn apply_decisions(runtime: &Runtime, data: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(decisions_dir(data)) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(run) = path.file_stem().and_then(|s| s.to_str()).and_then(|s| s.parse::<Uuid>().ok()) else {
            continue;
        };
        let decision =
            std::fs::read_to_string(&path).ok().and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok());
        let record = runtime.store().get(run);
        // Applied only to the run it was made for: the same agent, action and params as the journal has them.
        let bound = |d: &serde_json::Value, r: &agentry::store::RunRecord| {
            d["agent"] == r.agent.as_str()
                && d["action"] == r.action.as_str()
                && d["params_digest"] == r.params_digest.to_string()
        };
        let (Some(decision), Some(record)) = (decision, record) else {
            eprintln!("the decision kept in {} names no run of the journal; it was dropped", path.display());
            let _ = std::fs::remove_file(&path);
            continue;
        };
        let Some(approve) = decision["approve"].as_bool().filter(|_| bound(&decision, &record)) else {
            eprintln!(
                "the decision kept in {} is not for run {run} as the journal has it; it was dropped",
                path.display()
            );
            let _ = std::fs::remove_file(&path);
            continue;
        };
        match runtime.decide(&record.agent, run, approve).await {
            Ok(()) => out(&format!(
                "applied the decision kept for run {run}: {}",
                if approve { "approved" } else { "denied" }
            )),
            Err(err) => eprintln!("the decision kept for run {run} was not applied: {err}"),
        }
        let _ = std::fs::remove_file(&path);
    }
}
