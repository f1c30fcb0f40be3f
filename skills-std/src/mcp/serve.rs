//! An agent served over MCP: its actions as tools (`tools/list` is the agent's live action table, `tools/call`
//! runs through the agent's gate like any run, [`Runtime::invoke_with`]), its mounted skills' prompts and
//! resources (a resource is read by running its action, through the same gate), and the list-changed and
//! resource-updated notifications that follow the agent's mounting and its runs.

use super::McpError;
use super::adapter::{self, Change, Identity, Refusal, ToolHost};
use super::contract::{ToolDef, ToolResult, content_blocks, text_block, tool_def};
use super::offers;
use agentry::action::{Approver, Caller, ErrorClass, OutcomeStatus};
use agentry::events::EventKind;
use agentry::id::AgentId;
use agentry::runtime::{Runtime, RuntimeError};
use agentry::skill::Skill;
use futures_util::future::BoxFuture;
use serde_json::{Map, Value, json};
use std::future::Future;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The agent's tools, as the adapter serves them.
struct AgentTools {
    runtime: Runtime,
    agent: AgentId,
    /// Who approves a served call that needs approval.
    approver: Approver,
}

impl ToolHost for AgentTools {
    fn list(&self) -> BoxFuture<'static, Result<Vec<ToolDef>, Refusal>> {
        let runtime = self.runtime.clone();
        let agent = self.agent.clone();
        Box::pin(async move {
            let specs = runtime.actions(&agent).await.map_err(|e| Refusal::Internal { message: e.to_string() })?;
            Ok(specs.iter().map(tool_def).collect())
        })
    }

    fn call(
        &self,
        tool: String,
        arguments: Map<String, Value>,
        caller: Caller,
    ) -> BoxFuture<'static, Result<ToolResult, Refusal>> {
        let runtime = self.runtime.clone();
        let agent = self.agent.clone();
        let caller = caller.approved_by(self.approver);
        Box::pin(async move { call(&runtime, &agent, &tool, arguments, caller).await })
    }

    fn decide(
        &self,
        agent: AgentId,
        run: uuid::Uuid,
        approve: bool,
        seen: Option<uuid::Uuid>,
    ) -> BoxFuture<'static, ()> {
        let runtime = self.runtime.clone();
        Box::pin(async move {
            let decided = match (approve, seen) {
                (true, Some(digest)) => runtime.approve_seen(&agent, run, digest).await,
                _ => runtime.decide(&agent, run, approve).await,
            };
            // The run may have been decided already (its approval expired, an operator answered), or changed
            // since the client's user saw it (it was asked about again): nothing more to do here.
            if let Err(err) = decided {
                tracing::debug!(%err, %run, "an approval the MCP client answered did not take");
            }
        })
    }

    fn skills(&self) -> BoxFuture<'static, Result<Vec<Arc<Skill>>, Refusal>> {
        let runtime = self.runtime.clone();
        let agent = self.agent.clone();
        Box::pin(async move { runtime.mounted(&agent).await.map_err(|e| Refusal::Internal { message: e.to_string() }) })
    }

    fn read(&self, uri: String) -> BoxFuture<'static, Result<Vec<Value>, Refusal>> {
        let runtime = self.runtime.clone();
        let agent = self.agent.clone();
        Box::pin(async move { read(&runtime, &agent, &uri).await })
    }
}

/// Reads a resource of the agent's mounted skills by running its read action, through the gate like any run.
async fn read(runtime: &Runtime, agent: &AgentId, uri: &str) -> Result<Vec<Value>, Refusal> {
    let skills = runtime.mounted(agent).await.map_err(|e| Refusal::Internal { message: e.to_string() })?;
    let found = offers::resources(&skills).into_iter().find_map(|r| r.read_params(uri).map(|params| (r, params)));
    let Some((resource, params)) = found else {
        return Err(Refusal::NotFound {
            message: format!(
                "no resource `{uri}`; expected a URI that resources/list or resources/templates/list offers"
            ),
            data: json!({"uri": uri}),
        });
    };
    let outcome = match runtime.invoke(agent, resource.action.as_str(), Value::Object(params)).await {
        Ok(outcome) => outcome,
        Err(RuntimeError::NeedsApproval { action, risk, run, .. }) => {
            return Err(Refusal::Refused {
                message: format!(
                    "reading `{uri}` runs `{action}`, which needs approval (risk {risk:?}); it was not run"
                ),
                data: json!({"reason": "approval_required", "uri": uri, "run_id": run}),
            });
        }
        Err(other) => return Err(Refusal::Internal { message: other.to_string() }),
    };
    match (outcome.status, outcome.error.clone()) {
        (OutcomeStatus::Completed, _) => Ok(offers::resource_contents(&resource, uri, &outcome.output)),
        (_, Some(error)) if error.class == ErrorClass::Denied && outcome.attempts == 0 => Err(Refusal::Refused {
            message: format!("reading `{uri}` was refused: {}", error.message),
            data: json!({"reason": "denied", "uri": uri}),
        }),
        (_, Some(error)) if error.class == ErrorClass::Validation => Err(Refusal::InvalidParams {
            message: format!("`{uri}` cannot be read: {}", error.message),
            data: json!({"reason": "invalid", "uri": uri}),
        }),
        (_, error) => Err(Refusal::Internal {
            message: format!(
                "reading `{uri}` failed: {}",
                error.map_or_else(|| outcome.output_text().into_owned(), |e| e.message)
            ),
        }),
    }
}

/// Runs one tool call as a run of the agent. Refusals at the gate (an unknown tool, the policy, an approval
/// nobody can give) are MCP errors; whatever happens once the run started (bad arguments, a failure) is a
/// result with `isError`, which a model can read and correct.
async fn call(
    runtime: &Runtime,
    agent: &AgentId,
    tool: &str,
    arguments: Map<String, Value>,
    caller: Caller,
) -> Result<ToolResult, Refusal> {
    let outcome = match runtime.invoke_with(agent, tool, Value::Object(arguments), caller).await {
        Ok(outcome) => outcome,
        Err(RuntimeError::BadAction(e)) => {
            return Err(Refusal::InvalidParams {
                message: format!("unknown tool `{tool}`: {e}"),
                data: json!({"reason": "unknown_tool", "tool": tool}),
            });
        }
        Err(RuntimeError::NeedsApproval { action, risk, run, .. }) => {
            return Err(Refusal::Refused {
                message: format!(
                    "tool `{action}` needs approval (risk {risk:?}) and was not run; a client cannot wait for an \
                     approval, so ask the agent's operator to run it or to change the agent's policy"
                ),
                data: json!({"reason": "approval_required", "tool": action, "run_id": run}),
            });
        }
        Err(other) => return Err(Refusal::Internal { message: other.to_string() }),
    };
    match outcome.status {
        OutcomeStatus::Completed => {
            // An output made of content blocks (images, audio, resources) is served as that content, and as
            // wrapped structured content too (a tool with an output schema must send structured content).
            if content_blocks(&outcome.output).is_some()
                && let Value::Array(content) = &outcome.output
            {
                return Ok(ToolResult {
                    content: content.clone(),
                    structured: Some(json!({ "result": outcome.output })),
                    is_error: false,
                    error_class: None,
                    wrapped: true,
                });
            }
            // Structured content must be an object: any other output goes in one, as `result`, and says so.
            let wrapped = !outcome.output.is_object();
            let text = outcome.output_text().into_owned();
            let structured = if wrapped { json!({ "result": outcome.output }) } else { outcome.output };
            Ok(ToolResult {
                content: vec![text_block(text)],
                structured: Some(structured),
                is_error: false,
                error_class: None,
                wrapped,
            })
        }
        OutcomeStatus::Blocked | OutcomeStatus::Failed | OutcomeStatus::AwaitingApproval => {
            let error = match outcome.error.clone() {
                Some(error) => error,
                None => agentry::action::OutcomeError {
                    class: ErrorClass::Critical,
                    message: outcome.output_text().into_owned(),
                },
            };
            // A refusal at the gate ran no attempt; a run that started and then was denied something (a nested
            // call, a path) is a failure like any other.
            if error.class == ErrorClass::Denied && outcome.attempts == 0 {
                let registered =
                    runtime.actions(agent).await.is_ok_and(|specs| specs.iter().any(|s| s.id.as_str() == tool));
                let (reason, message) = if registered {
                    ("denied", format!("tool `{tool}` was refused: {}", error.message))
                } else {
                    ("unknown_tool", format!("unknown tool `{tool}`: {}", error.message))
                };
                let data = json!({"reason": reason, "tool": tool});
                return Err(if registered {
                    Refusal::Refused { message, data }
                } else {
                    Refusal::InvalidParams { message, data }
                });
            }
            Ok(ToolResult {
                content: vec![text_block(error.message.clone())],
                structured: None,
                is_error: true,
                error_class: Some(error.class),
                wrapped: false,
            })
        }
    }
}

/// Who the served agent says it is.
fn identity(agent: &AgentId) -> Identity {
    Identity {
        name: format!("agentry-{agent}"),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        instructions: format!(
            "The actions of agentry agent `{agent}`. Each tool is one action; its name is the action id."
        ),
    }
}

/// What changes on the agent, for the clients, until `stop` is cancelled or the agent stops: its skills
/// (mounted, unmounted, refreshed: the tools, prompts and resources may have changed) and the resources its runs
/// say they changed.
fn changes(runtime: &Runtime, agent: &AgentId, stop: CancellationToken) -> mpsc::UnboundedReceiver<Change> {
    let (tell, changes) = mpsc::unbounded_channel();
    let mut events = runtime.events();
    let agent = agent.clone();
    tokio::spawn(async move {
        loop {
            let event = tokio::select! {
                event = events.recv() => event,
                () = stop.cancelled() => break,
            };
            let change = match event {
                Ok(event) if event.agent == agent => match event.kind {
                    EventKind::SkillMounted { .. }
                    | EventKind::SkillUnmounted { .. }
                    | EventKind::SkillRefreshed { .. } => Some(Change::Skills),
                    EventKind::ResourceChanged { uri } => Some(Change::Resource(uri)),
                    EventKind::AgentStopped { .. } => break,
                    _ => None,
                },
                Ok(_) => None,
                // Missed events may have held a change: say the lists changed, to be safe.
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => Some(Change::Skills),
                Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
            };
            if let Some(change) = change
                && tell.send(change).is_err()
            {
                break;
            }
        }
    });
    changes
}

/// An agent served over MCP, and how: who approves the served calls that need approval. Build it with
/// [`Served::new`], then serve it over a byte stream, stdio or streamable HTTP.
///
/// By default a call that needs approval waits for the runtime's own approvers ([`Runtime::decide`], or whoever
/// approves through the event stream) and the client is told it awaits an operator (a `notice` log line, and
/// the call's progress message): the client's user is never asked, so a client that accepts whatever it is
/// asked cannot approve its own calls. [`Served::approver`] with [`Approver::Caller`] lets the client's user
/// approve, through elicitation, the runs up to a risk the operator chooses.
///
/// ```no_run
/// use agentry::action::{Approver, Risk};
/// use agentry::runtime::Runtime;
/// use agentry_skills::mcp::Served;
/// # async fn serve(runtime: Runtime, agent: agentry::id::AgentId) -> Result<(), agentry_skills::mcp::McpError> {
/// // The client's user approves runs up to `Medium`; riskier ones wait for the operator.
/// Served::new(&runtime, &agent).approver(Approver::Caller { ceiling: Risk::Medium }).stdio().await
/// # }
/// ```
#[derive(Clone)]
pub struct Served {
    runtime: Runtime,
    agent: AgentId,
    approver: Approver,
}

impl Served {
    /// `agent` of `runtime`, served with the runtime's own approvers approving its calls.
    pub fn new(runtime: &Runtime, agent: &AgentId) -> Self {
        Self { runtime: runtime.clone(), agent: agent.clone(), approver: Approver::Operator }
    }

    /// Who approves a served call that needs approval (by default [`Approver::Operator`]).
    #[must_use]
    pub fn approver(mut self, approver: Approver) -> Self {
        self.approver = approver;
        self
    }

    fn host(&self) -> Arc<dyn ToolHost> {
        Arc::new(AgentTools { runtime: self.runtime.clone(), agent: self.agent.clone(), approver: self.approver })
    }

    /// Serves over a byte stream (a pipe, a socket) until the client disconnects.
    pub async fn io<R, W>(&self, reader: R, writer: W) -> Result<(), McpError>
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let stop = CancellationToken::new();
        let changes = changes(&self.runtime, &self.agent, stop.clone());
        let served = adapter::serve_io(self.host(), identity(&self.agent), changes, reader, writer).await;
        stop.cancel();
        served
    }

    /// Serves on this process's stdin and stdout until the client disconnects: the way an MCP client that
    /// starts servers as child processes talks to an agent. Log to stderr, never stdout.
    pub async fn stdio(&self) -> Result<(), McpError> {
        self.io(tokio::io::stdin(), tokio::io::stdout()).await
    }

    /// A streamable HTTP MCP endpoint at `/mcp`, for an axum router of the application's own. It stops serving
    /// when `stop` is cancelled.
    pub fn router(&self, stop: CancellationToken) -> axum::Router {
        let changes = changes(&self.runtime, &self.agent, stop.clone());
        adapter::http_router(self.host(), identity(&self.agent), changes, stop)
    }

    /// Serves over streamable HTTP at `http://<listener>/mcp` until `shutdown` resolves.
    pub async fn http(
        &self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), McpError> {
        let stop = CancellationToken::new();
        let router = self.router(stop.clone());
        let stopping = stop.clone();
        let served = axum::serve(listener, router)
            .with_graceful_shutdown(async move {
                shutdown.await;
                stopping.cancel();
            })
            .await;
        stop.cancel();
        served.map_err(|e| McpError::Serve(e.to_string()))
    }
}

/// Serves an agent's actions over a byte stream (a pipe, a socket) until the client disconnects; calls that
/// need approval wait for the operator (see [`Served`] to choose otherwise).
pub async fn serve_io<R, W>(runtime: &Runtime, agent: &AgentId, reader: R, writer: W) -> Result<(), McpError>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    Served::new(runtime, agent).io(reader, writer).await
}

/// Serves an agent's actions on this process's stdin and stdout until the client disconnects: the way an MCP
/// client that starts servers as child processes talks to an agent. Log to stderr, never stdout. Calls that
/// need approval wait for the operator (see [`Served`] to choose otherwise).
pub async fn serve_stdio(runtime: &Runtime, agent: &AgentId) -> Result<(), McpError> {
    Served::new(runtime, agent).stdio().await
}

/// An agent's actions as a streamable HTTP MCP endpoint at `/mcp`, for an axum router of the application's
/// own. It stops serving when `stop` is cancelled. Calls that need approval wait for the operator (see
/// [`Served`] to choose otherwise).
pub fn http_router(runtime: &Runtime, agent: &AgentId, stop: CancellationToken) -> axum::Router {
    Served::new(runtime, agent).router(stop)
}

/// Serves an agent's actions over streamable HTTP at `http://<listener>/mcp` until `shutdown` resolves. Calls
/// that need approval wait for the operator (see [`Served`] to choose otherwise).
pub async fn serve_http(
    runtime: &Runtime,
    agent: &AgentId,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), McpError> {
    Served::new(runtime, agent).http(listener, shutdown).await
}
