//! The control socket: a process that holds a runtime (`agentry run`, or `agentry call` on its own) listens on
//! `<data>/control.sock`, so the operator's tools in another terminal reach the live runtime (pending
//! approvals with their params, decisions, calls, an agent's live state). The socket file is made readable and
//! writable by its owner only: whoever may use it is whoever may read the data folder. One JSON request per
//! connection, one JSON answer back.

use agentry::events::{Event, EventKind};
use agentry::id::AgentId;
use agentry::runtime::Runtime;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use uuid::Uuid;

/// The most bytes one request may have.
const MAX_REQUEST: u64 = 1 << 20;

/// The longest a message to an LLM agent may take to be answered through the socket (its exchange: model
/// calls, tool runs, approvals): a peer of the socket cannot make the runtime wait on it for longer.
const ASK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3600);

/// Where the control socket of a data folder is.
pub fn socket_path(data: &Path) -> PathBuf {
    data.join("control.sock")
}

/// What the operator's tools ask of the live runtime.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// The runs waiting for approval.
    Approvals,
    /// Approve or deny one.
    Decide {
        /// The run.
        run: Uuid,
        /// Approve (else deny).
        approve: bool,
    },
    /// Run an action on an agent, through its gate, and answer with the outcome.
    Call {
        /// The agent.
        agent: String,
        /// The action.
        action: String,
        /// The params.
        params: Value,
    },
    /// Send a signal to an agent.
    Send {
        /// The agent.
        agent: String,
        /// The signal's kind.
        kind: String,
        /// Its data.
        data: Value,
    },
    /// A message for an LLM agent (`agentry chat`): answered with its reply.
    Ask {
        /// The agent.
        agent: String,
        /// The message.
        text: String,
        /// How long the answer may take, in milliseconds (at most [`ASK_TIMEOUT`]).
        timeout_ms: u64,
    },
    /// An agent's live state and actions.
    Inspect {
        /// The agent.
        agent: String,
    },
}

/// The runs waiting for approval, as the event stream announced them (with params and contract).
#[derive(Clone, Default)]
pub struct Pending(Arc<Mutex<BTreeMap<Uuid, Value>>>);

impl Pending {
    /// Follows one event.
    pub fn follow(&self, event: &Event) {
        let Some(run) = event.run else { return };
        let mut pending = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match &event.kind {
            EventKind::ApprovalAsked { action, risk, contract, params, digest } => {
                let entry = json!({"agent": event.agent, "run": run, "action": action, "risk": risk, "params": params, "digest": digest, "contract": contract});
                pending.insert(run, entry);
            }
            EventKind::ApprovalGiven { .. }
            | EventKind::ApprovalExpired { .. }
            | EventKind::ActionStarted { .. }
            | EventKind::ActionCompleted { .. }
            | EventKind::ActionFailed { .. }
            | EventKind::ActionBlocked { .. } => {
                pending.remove(&run);
            }
            _ => {}
        }
    }

    /// Adds a run the journal says waits (after a restart: its params are known only to the runtime's
    /// announcement, which may have come before anyone listened).
    pub fn seed(&self, agent: &AgentId, run: Uuid, action: &agentry::id::ActionId) {
        let mut pending = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        pending.entry(run).or_insert_with(|| json!({"agent": agent, "run": run, "action": action, "params": null}));
    }

    /// Every waiting run.
    pub fn list(&self) -> Vec<Value> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).values().cloned().collect()
    }

    /// The agent a waiting run belongs to.
    pub fn agent_of(&self, run: Uuid) -> Option<AgentId> {
        let pending = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        pending.get(&run).and_then(|e| e["agent"].as_str()).and_then(|a| AgentId::new(a).ok())
    }
}

/// The data folder, held by this process: an exclusive lock on `<data>/lock` for as long as this lives, so two
/// processes never run one journal (two `agentry call` started together, say).
pub struct Held {
    /// The lock; the folder is this process's while it is open.
    pub lock: std::fs::File,
    /// The socket the holder serves.
    pub listener: UnixListener,
}

/// Takes the data folder (its lock, then its socket); `Err` when another live process holds it.
pub async fn bind(data: &Path) -> Result<Held, String> {
    let path = socket_path(data);
    let lock_path = data.join("lock");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| format!("cannot open {}: {e}", lock_path.display()))?;
    if lock.try_lock().is_err() {
        return Err(format!(
            "another agentry process runs on {} already (it holds {})",
            data.display(),
            lock_path.display()
        ));
    }
    // Holding the lock, a socket there is one a process that died left: nobody answers it.
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path).map_err(|e| format!("cannot listen on {}: {e}", path.display()))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| format!("cannot restrict {}: {e}", path.display()))?;
    Ok(Held { lock, listener })
}

/// A failure the live runtime answered, as the command's error (so its exit code is the one the command gives
/// when it meets the failure itself).
pub fn failure(error: String, code: &str) -> crate::error::CliError {
    use crate::error::CliError;
    match code {
        "not_found" => CliError::NotFound(error),
        "usage" => CliError::Usage(error),
        "not_completed" => CliError::NotCompleted(error),
        _ => CliError::Start(error),
    }
}

/// Answers requests until the listener is dropped.
pub async fn serve(listener: UnixListener, runtime: Runtime, pending: Pending) {
    while let Ok((stream, _)) = listener.accept().await {
        let (runtime, pending) = (runtime.clone(), pending.clone());
        tokio::spawn(async move {
            let (read, mut write) = stream.into_split();
            let mut line = String::new();
            let mut reader = BufReader::new(tokio::io::AsyncReadExt::take(read, MAX_REQUEST));
            if reader.read_line(&mut line).await.is_err() {
                return;
            }
            let answer = match serde_json::from_str::<Request>(&line) {
                Ok(request) => answer(&runtime, &pending, request).await,
                Err(err) => json!({"error": format!("not a request: {err}"), "code": "usage"}),
            };
            let _ = write.write_all(format!("{answer}\n").as_bytes()).await;
        });
    }
}

async fn answer(runtime: &Runtime, pending: &Pending, request: Request) -> Value {
    match request {
        Request::Approvals => json!({"ok": pending.list()}),
        Request::Decide { run, approve } => {
            let Some(agent) = pending.agent_of(run) else {
                return json!({"error": format!("no run {run} waits for approval"), "code": "not_found"});
            };
            match runtime.decide(&agent, run, approve).await {
                Ok(()) => json!({"ok": {"run": run, "approved": approve}}),
                Err(err) => json!({"error": err.to_string(), "code": "failure"}),
            }
        }
        Request::Call { agent, action, params } => {
            let Ok(id) = AgentId::new(agent.as_str()) else {
                return json!({"error": format!("`{agent}` is not an agent id"), "code": "usage"});
            };
            let (caller, _heard) = agentry::action::Caller::new(agentry::action::CallerCan::default());
            match runtime.invoke_with(&id, &action, params, caller).await {
                Ok(outcome) => json!({"ok": outcome}),
                Err(agentry::runtime::RuntimeError::NoSuchAgent(_)) => {
                    json!({"error": format!("no agent `{agent}`"), "code": "not_found"})
                }
                Err(err) => json!({"error": err.to_string(), "code": "failure"}),
            }
        }
        Request::Send { agent, kind, data } => {
            let (Ok(id), Ok(signal)) =
                (AgentId::new(agent.as_str()), agentry::signal::Signal::new(kind.as_str(), data))
            else {
                return json!({"error": format!("`{agent}` is not an agent id, or `{kind}` not a signal kind"), "code": "usage"});
            };
            match runtime.send(&id, signal) {
                Ok(()) => json!({"ok": {"sent": kind, "to": agent}}),
                Err(agentry::runtime::RuntimeError::NoSuchAgent(_)) => {
                    json!({"error": format!("no agent `{agent}`"), "code": "not_found"})
                }
                Err(err) => json!({"error": err.to_string(), "code": "failure"}),
            }
        }
        Request::Ask { agent, text, timeout_ms } => {
            let (Ok(id), Ok(signal)) = (
                AgentId::new(agent.as_str()),
                agentry::signal::Signal::new(agentry_llm::agent::ASK, json!({ "text": text })),
            ) else {
                return json!({"error": format!("`{agent}` is not an agent id"), "code": "usage"});
            };
            match runtime.call(&id, signal, std::time::Duration::from_millis(timeout_ms).min(ASK_TIMEOUT)).await {
                Ok(reply) => json!({ "ok": reply }),
                Err(agentry::runtime::RuntimeError::NoSuchAgent(_)) => {
                    json!({"error": format!("no agent `{agent}`"), "code": "not_found"})
                }
                Err(err) => json!({"error": err.to_string(), "code": "failure"}),
            }
        }
        Request::Inspect { agent } => {
            let Ok(id) = AgentId::new(agent.as_str()) else {
                return json!({"error": format!("`{agent}` is not an agent id"), "code": "usage"});
            };
            let actions = match runtime.actions(&id).await {
                Ok(actions) => actions,
                Err(err) => return json!({"error": err.to_string(), "code": "not_found"}),
            };
            let skills: Vec<String> =
                runtime.mounted(&id).await.unwrap_or_default().iter().map(|s| s.id().to_string()).collect();
            let waiting: Vec<Value> = pending.list().into_iter().filter(|p| p["agent"] == agent).collect();
            json!({"ok": {"agent": agent, "live": true, "skills": skills, "actions": actions.iter().map(|a| &a.id).collect::<Vec<_>>(), "awaiting_approval": waiting}})
        }
    }
}

/// Asks the live runtime of a data folder; `None` when no process listens there.
pub async fn ask(data: &Path, request: &Request) -> Option<Result<Value, (String, String)>> {
    let stream = UnixStream::connect(socket_path(data)).await.ok()?;
    // Connected: from here on a runtime runs there, and a failure is its answer, never "nobody is there".
    let lost = || Err(("the runtime on this data folder stopped before it answered".to_owned(), "failure".to_owned()));
    let (read, mut write) = stream.into_split();
    let text = serde_json::to_string(request).unwrap_or_default();
    if write.write_all(format!("{text}\n").as_bytes()).await.is_err() {
        return Some(lost());
    }
    let mut line = String::new();
    if BufReader::new(read).read_line(&mut line).await.is_err() {
        return Some(lost());
    }
    let Ok(answer) = serde_json::from_str::<Value>(&line) else { return Some(lost()) };
    Some(match answer.get("ok") {
        Some(ok) => Ok(ok.clone()),
        None => Err((
            answer["error"].as_str().unwrap_or("no answer").to_owned(),
            answer["code"].as_str().unwrap_or("failure").to_owned(),
        )),
    })
}
