//! Serving a set of tools (an agent's actions) to MCP clients.

use super::super::McpError;
use super::super::contract::{ERROR_CLASS_META, ToolDef, ToolResult};
use futures_util::future::BoxFuture;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ErrorCode, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler, ServiceExt};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;

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
