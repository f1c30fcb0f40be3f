//! The one file that speaks the MCP SDK (`rmcp`, pinned in the workspace): connecting to a server and calling
//! its tools, and serving a set of tools to clients. Everything crosses this boundary as the plain data of
//! [`super::contract`], so a change in the SDK's API touches this file only.

use super::McpError;
use super::contract::{ERROR_CLASS_META, ToolDef, ToolHints, ToolResult};
use futures_util::future::BoxFuture;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ClientConfig, ErrorCode,
    Implementation, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{NotificationContext, RequestContext, RunningServiceCancellationToken};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpClientTransport, StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ClientHandler, ErrorData, Peer, RoleClient, RoleServer, ServerHandler, ServiceError, ServiceExt};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, watch};

// ---------------------------------------------------------------------------------------------------------------
// Client

/// How to reach a server, as the adapter needs it.
pub(crate) enum Endpoint<'a> {
    /// A child process speaking MCP on its stdin and stdout.
    Stdio { command: &'a str, args: &'a [String], env: &'a [(String, String)], cwd: Option<&'a std::path::Path> },
    /// A streamable HTTP endpoint (`http://host:port/mcp`).
    Http { url: &'a str },
}

/// Why a request to a connected server failed.
#[derive(Debug)]
pub(crate) enum CallError {
    /// The connection is gone (the process died, the socket dropped).
    Closed(String),
    /// The server answered with a JSON-RPC error.
    Protocol { code: i32, message: String },
    /// Anything else on the way.
    Other(String),
}

impl CallError {
    /// Whether the server said the arguments were wrong.
    pub(crate) fn is_invalid_params(&self) -> bool {
        matches!(self, Self::Protocol { code, .. } if *code == ErrorCode::INVALID_PARAMS.0)
    }
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Closed(why) => write!(f, "the connection closed: {why}"),
            Self::Protocol { code, message } => write!(f, "the server answered with error {code}: {message}"),
            Self::Other(why) => f.write_str(why),
        }
    }
}

fn call_error(error: ServiceError) -> CallError {
    match error {
        ServiceError::McpError(data) => CallError::Protocol { code: data.code.0, message: data.message.to_string() },
        ServiceError::TransportClosed => CallError::Closed("the transport closed".to_owned()),
        ServiceError::TransportSend(e) => CallError::Closed(format!("sending failed: {e}")),
        other => CallError::Other(other.to_string()),
    }
}

/// Tells the client when the server's tool list changed.
struct Listener {
    list_changed: mpsc::UnboundedSender<()>,
    name: String,
}

impl ClientHandler for Listener {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.list_changed.send(());
    }

    fn get_info(&self) -> ClientConfig {
        // The handshake asks for the newest version that still has `initialize` (2025-11-25); rmcp's default,
        // its newest known version, is one servers of the initialize era refuse as a mismatch.
        ClientConfig::new(ClientCapabilities::default(), Implementation::new(&self.name, env!("CARGO_PKG_VERSION")))
            .with_protocol_version(rmcp::model::ProtocolVersion::LATEST_WITH_INITIALIZE)
    }
}

/// What the server said about itself in the handshake.
#[derive(Debug, Clone, Default)]
pub(crate) struct ServerIdentity {
    pub name: Option<String>,
    pub version: Option<String>,
    pub instructions: Option<String>,
}

/// A live connection to a server.
pub(crate) struct Connection {
    peer: Peer<RoleClient>,
    cancel: Mutex<Option<RunningServiceCancellationToken>>,
    closed: watch::Receiver<bool>,
    pid: Option<u32>,
    identity: ServerIdentity,
}

/// Connects and does the initialize handshake. `list_changed` hears of every `tools/list_changed`.
pub(crate) async fn connect(
    server: &str,
    endpoint: Endpoint<'_>,
    list_changed: mpsc::UnboundedSender<()>,
) -> Result<Connection, McpError> {
    let listener = Listener { list_changed, name: format!("agentry/{server}") };
    let handshake = |message: String| McpError::Handshake { server: server.to_owned(), message };
    let (running, pid) = match endpoint {
        Endpoint::Stdio { command, args, env, cwd } => {
            let mut cmd = tokio::process::Command::new(command);
            cmd.args(args).kill_on_drop(true);
            for (key, value) in env {
                cmd.env(key, value);
            }
            if let Some(cwd) = cwd {
                cmd.current_dir(cwd);
            }
            let spawn_error = |e: std::io::Error| McpError::Spawn {
                server: server.to_owned(),
                command: command.to_owned(),
                message: e.to_string(),
            };
            let (transport, stderr) = rmcp::transport::TokioChildProcess::builder(cmd)
                .stderr(std::process::Stdio::piped())
                .spawn()
                .map_err(spawn_error)?;
            if let Some(stderr) = stderr {
                forward_stderr(server.to_owned(), stderr);
            }
            let pid = transport.id();
            (listener.serve(transport).await.map_err(|e| handshake(e.to_string()))?, pid)
        }
        Endpoint::Http { url } => {
            crate::tls::install_provider();
            let transport = StreamableHttpClientTransport::from_uri(url.to_owned());
            (listener.serve(transport).await.map_err(|e| handshake(e.to_string()))?, None)
        }
    };
    let identity = running
        .peer_info()
        .map(|info| ServerIdentity {
            name: info.server_info.as_ref().map(|i| i.name.clone()),
            version: info.server_info.as_ref().map(|i| i.version.clone()),
            instructions: info.instructions.clone(),
        })
        .unwrap_or_default();
    let peer = running.peer().clone();
    let cancel = running.cancellation_token();
    let (closed_tx, closed) = watch::channel(false);
    tokio::spawn(async move {
        let reason = running.waiting().await;
        tracing::debug!(?reason, "an MCP connection ended");
        let _ = closed_tx.send(true);
    });
    Ok(Connection { peer, cancel: Mutex::new(Some(cancel)), closed, pid, identity })
}

/// The server's stderr goes to the log, line by line, so a child's complaints are not lost.
fn forward_stderr(server: String, stderr: tokio::process::ChildStderr) {
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            tracing::debug!(server = %server, "{line}");
        }
    });
}

impl Connection {
    /// Every tool, following pagination. A tool whose definition does not read is skipped with a warning.
    pub(crate) async fn list_tools(&self) -> Result<Vec<ToolDef>, CallError> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let params = cursor.take().map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
            let page: ListToolsResult = self.peer.list_tools(params).await.map_err(call_error)?;
            tools.extend(page.tools.iter().map(tool_def));
            match page.next_cursor {
                Some(next) if !next.is_empty() => cursor = Some(next),
                _ => break,
            }
        }
        Ok(tools)
    }

    /// Calls a tool. Dropping the future (a timeout, a cancelled run) tells the server the request was
    /// cancelled.
    pub(crate) async fn call(&self, tool: &str, arguments: Map<String, Value>) -> Result<ToolResult, CallError> {
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        let result: CallToolResult = self.peer.call_tool(params).await.map_err(call_error)?;
        Ok(tool_result(&result))
    }

    /// Whether the connection is gone.
    pub(crate) fn is_closed(&self) -> bool {
        *self.closed.borrow() || self.peer.is_transport_closed()
    }

    /// Resolves once the connection is gone.
    pub(crate) async fn closed(&self) {
        let mut closed = self.closed.clone();
        let _ = closed.wait_for(|closed| *closed).await;
    }

    /// Ends the connection (and a stdio server's process).
    pub(crate) fn close(&self) {
        if let Some(cancel) = self.cancel.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take() {
            cancel.cancel();
        }
    }

    /// The server process's id, for a stdio server.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// What the server said about itself.
    pub(crate) fn identity(&self) -> &ServerIdentity {
        &self.identity
    }
}

impl Drop for Connection {
    /// A connection nobody holds ends, and a child-process server with it.
    fn drop(&mut self) {
        self.close();
    }
}

fn tool_def(tool: &Tool) -> ToolDef {
    let hints = tool.annotations.as_ref().map_or_else(ToolHints::default, |a| ToolHints {
        read_only: a.read_only_hint,
        destructive: a.destructive_hint,
        idempotent: a.idempotent_hint,
        open_world: a.open_world_hint,
    });
    ToolDef {
        name: tool.name.to_string(),
        title: tool.title.clone(),
        description: tool.description.as_ref().map(|d| d.to_string()),
        input_schema: Value::Object(tool.input_schema.as_ref().clone()),
        output_schema: tool.output_schema.as_ref().map(|s| Value::Object(s.as_ref().clone())),
        hints,
    }
}

fn tool_result(result: &CallToolResult) -> ToolResult {
    ToolResult {
        content: result.content.iter().map(|block| serde_json::to_value(block).unwrap_or(Value::Null)).collect(),
        structured: result.structured_content.clone(),
        is_error: result.is_error.unwrap_or(false),
        error_class: result
            .meta
            .as_ref()
            .and_then(|meta| serde_json::to_value(meta).ok())
            .and_then(|meta| serde_json::from_value(meta[ERROR_CLASS_META].clone()).ok()),
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Server

/// The JSON-RPC error code of a call the served agent's gate refused (a server error in JSON-RPC's range for
/// implementations); `data.reason` says which refusal.
pub const REFUSED: i32 = -32001;

/// Why serving a call failed, as the MCP error the client gets.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Refusal {
    /// The request was wrong: an unknown tool, say (`-32602`).
    InvalidParams { message: String, data: Value },
    /// The request was refused: denied by policy, needs approval ([`REFUSED`]).
    Refused { message: String, data: Value },
    /// The server could not answer (`-32603`).
    Internal { message: String },
}

fn error_data(refusal: Refusal) -> ErrorData {
    match refusal {
        Refusal::InvalidParams { message, data } => ErrorData::invalid_params(message, Some(data)),
        Refusal::Refused { message, data } => ErrorData::new(ErrorCode(REFUSED), message, Some(data)),
        Refusal::Internal { message } => ErrorData::internal_error(message, None),
    }
}

/// What a served set of tools does: list them and call one.
pub(crate) trait ToolHost: Send + Sync + 'static {
    /// The tools, now.
    fn list(&self) -> BoxFuture<'static, Result<Vec<ToolDef>, Refusal>>;
    /// Calls a tool.
    fn call(&self, tool: String, arguments: Map<String, Value>) -> BoxFuture<'static, Result<ToolResult, Refusal>>;
}

/// Who the server says it is.
#[derive(Debug, Clone)]
pub(crate) struct Identity {
    pub name: String,
    pub version: String,
    pub instructions: String,
}

/// One client session's handler; sessions share the host and the list of peers to notify.
#[derive(Clone)]
struct Handler {
    host: Arc<dyn ToolHost>,
    identity: Identity,
    peers: Arc<Mutex<Vec<Peer<RoleServer>>>>,
}

impl ServerHandler for Handler {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder().enable_tools().enable_tool_list_changed().build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(&self.identity.name, &self.identity.version))
            .with_instructions(self.identity.instructions.clone())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let mut peers = self.peers.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        peers.retain(|p| !p.is_transport_closed());
        peers.push(context.peer);
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let defs = self.host.list().await.map_err(error_data)?;
        let tools = defs.iter().map(tool).collect::<Result<Vec<_>, _>>()?;
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.unwrap_or_default();
        let call = self.host.call(request.name.to_string(), arguments);
        let result = tokio::select! {
            result = call => result.map_err(error_data)?,
            () = context.ct.cancelled() => return Err(ErrorData::internal_error("the client cancelled the call", None)),
        };
        let mut wire = json!({"content": result.content, "isError": result.is_error});
        if let Some(structured) = result.structured {
            wire["structuredContent"] = structured;
        }
        if let Some(class) = result.error_class {
            wire["_meta"] = json!({ ERROR_CLASS_META: class });
        }
        let result = match CallToolResult::deserialize(&wire) {
            Ok(result) => result,
            // Blocks the SDK does not accept (a field of the wrong type): served as their JSON text rather than
            // failing a call whose action completed.
            Err(err) => {
                tracing::warn!(%err, "a tool result's content blocks are not valid MCP; they are served as text");
                wire["content"] = json!([{"type": "text", "text": wire["content"].to_string()}]);
                serde_json::from_value(wire)
                    .map_err(|e| ErrorData::internal_error(format!("the result could not be encoded: {e}"), None))?
            }
        };
        Ok(result.into())
    }
}

fn tool(def: &ToolDef) -> Result<Tool, ErrorData> {
    let mut wire = json!({"name": def.name, "inputSchema": def.input_schema});
    if let Some(description) = &def.description {
        wire["description"] = json!(description);
    }
    if let Some(title) = &def.title {
        wire["title"] = json!(title);
    }
    if let Some(output) = &def.output_schema {
        wire["outputSchema"] = output.clone();
    }
    let hints = def.hints;
    wire["annotations"] = json!({
        "readOnlyHint": hints.read_only,
        "destructiveHint": hints.destructive,
        "idempotentHint": hints.idempotent,
        "openWorldHint": hints.open_world,
    });
    serde_json::from_value(wire)
        .map_err(|e| ErrorData::internal_error(format!("tool `{}` could not be described: {e}", def.name), None))
}

/// Sends `tools/list_changed` to every connected client each time `changes` moves, until it closes or `stop`
/// is cancelled.
fn announce_changes(
    peers: Arc<Mutex<Vec<Peer<RoleServer>>>>,
    mut changes: watch::Receiver<u64>,
    stop: tokio_util::sync::CancellationToken,
) {
    tokio::spawn(async move {
        loop {
            tokio::select! {
                changed = changes.changed() => if changed.is_err() { break },
                () = stop.cancelled() => break,
            }
            let live: Vec<Peer<RoleServer>> = {
                let mut peers = peers.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                peers.retain(|p| !p.is_transport_closed());
                peers.clone()
            };
            for peer in live {
                if let Err(err) = peer.notify_tool_list_changed().await {
                    tracing::debug!(%err, "a client missed a tools/list_changed");
                }
            }
        }
    });
}

/// Serves the tools over a byte stream (stdio, a pipe) until the client disconnects.
pub(crate) async fn serve_io<R, W>(
    host: Arc<dyn ToolHost>,
    identity: Identity,
    changes: watch::Receiver<u64>,
    reader: R,
    writer: W,
) -> Result<(), McpError>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let peers = Arc::new(Mutex::new(Vec::new()));
    let handler = Handler { host, identity, peers: peers.clone() };
    let running = handler.serve((reader, writer)).await.map_err(|e| McpError::Serve(e.to_string()))?;
    let stop = tokio_util::sync::CancellationToken::new();
    announce_changes(peers, changes, stop.clone());
    let ended = running.waiting().await;
    stop.cancel();
    ended.map_err(|e| McpError::Serve(e.to_string()))?;
    Ok(())
}

/// The tools as a streamable HTTP service at `/mcp`, for an axum router. Each client gets a session; the
/// service stops serving when `stop` is cancelled.
pub(crate) fn http_router(
    host: Arc<dyn ToolHost>,
    identity: Identity,
    changes: watch::Receiver<u64>,
    stop: tokio_util::sync::CancellationToken,
) -> axum::Router {
    let peers = Arc::new(Mutex::new(Vec::new()));
    let handler = Handler { host, identity, peers: peers.clone() };
    announce_changes(peers, changes, stop.clone());
    let config = StreamableHttpServerConfig::default().with_cancellation_token(stop);
    let service: StreamableHttpService<Handler, LocalSessionManager> =
        StreamableHttpService::new(move || Ok(handler.clone()), Arc::default(), config);
    axum::Router::new().nest_service("/mcp", service)
}
