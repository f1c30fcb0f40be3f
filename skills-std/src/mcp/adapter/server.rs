//! Serving an agent to MCP clients: its actions as tools, its skills' prompts and resources, completions,
//! logging levels and resource subscriptions per session.

// rmcp marks logging (and resource subscriptions) deprecated because protocol 2026-07-28 drops them (SEP-2577);
// the revisions agentry serves (2025-06-18, 2025-11-25) have them, and the conformance suite checks them.
#![allow(deprecated)]

use super::super::McpError;
use super::super::contract::{ERROR_CLASS_META, ToolDef, ToolResult, WRAPPED_META};
use super::super::offers;
use super::caller::{SessionLevel, ToClient, caller, log_level};
use agentry::action::{Caller, CallerRequest};
use agentry::id::AgentId;
use agentry::skill::Skill;
use futures_util::future::BoxFuture;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams, CompleteResult, ErrorCode,
    GetPromptRequestParams, GetPromptResponse, GetPromptResult, Implementation, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Reference, ResourceUpdatedNotificationParam,
    ServerCapabilities, ServerConfig, SetLevelRequestParams, SubscribeRequestParams, Tool, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler, ServiceExt};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;

/// The most resources one session may subscribe to.
pub(crate) const MAX_SUBSCRIPTIONS: usize = 256;

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
    /// No resource has that URI (`-32002`, as MCP says).
    NotFound { message: String, data: Value },
    /// The server could not answer (`-32603`).
    Internal { message: String },
}

fn error_data(refusal: Refusal) -> ErrorData {
    match refusal {
        Refusal::InvalidParams { message, data } => ErrorData::invalid_params(message, Some(data)),
        Refusal::Refused { message, data } => ErrorData::new(ErrorCode(REFUSED), message, Some(data)),
        Refusal::NotFound { message, data } => ErrorData::resource_not_found(message, Some(data)),
        Refusal::Internal { message } => ErrorData::internal_error(message, None),
    }
}

/// What a served set of tools does: list them, call one, and settle an approval a call asked for.
pub(crate) trait ToolHost: Send + Sync + 'static {
    /// The tools, now.
    fn list(&self) -> BoxFuture<'static, Result<Vec<ToolDef>, Refusal>>;
    /// Calls a tool for a client that `caller` reaches.
    fn call(
        &self,
        tool: String,
        arguments: Map<String, Value>,
        caller: Caller,
    ) -> BoxFuture<'static, Result<ToolResult, Refusal>>;
    /// Approves or denies a run that waits for the client's approval; an approval is bound to `seen`, the digest
    /// of the contract and params the client's user was shown.
    fn decide(
        &self,
        agent: AgentId,
        run: uuid::Uuid,
        approve: bool,
        seen: Option<uuid::Uuid>,
    ) -> BoxFuture<'static, ()>;
    /// The skills mounted now (their prompts and resources are served).
    fn skills(&self) -> BoxFuture<'static, Result<Vec<Arc<Skill>>, Refusal>>;
    /// Reads a resource by URI: its contents as MCP JSON.
    fn read(&self, uri: String) -> BoxFuture<'static, Result<Vec<Value>, Refusal>>;
}

/// Something the clients hear about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change {
    /// The skills changed: so may the tools, prompts and resources.
    Skills,
    /// A run changed the resource at this URI.
    Resource(String),
}

/// The resources one session subscribed to, by percent-decoded URI.
type Subscriptions = Arc<Mutex<BTreeSet<String>>>;

/// A connected client, for notifications.
#[derive(Clone)]
struct Session {
    peer: Peer<RoleServer>,
    subscriptions: Subscriptions,
}

/// A URI as subscriptions compare it: percent-decoded, so `drive:///a%20b` and `drive:///a b` are one.
fn decoded(uri: &str) -> String {
    percent_encoding::percent_decode_str(uri).decode_utf8_lossy().into_owned()
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The most completion values one answer carries (MCP's limit).
const MAX_COMPLETIONS: usize = 100;

/// Who the server says it is.
#[derive(Debug, Clone)]
pub(crate) struct Identity {
    pub name: String,
    pub version: String,
    pub instructions: String,
}

/// One client session's handler; sessions share the host and the list of sessions to notify, and each has its
/// own log level and subscriptions.
#[derive(Clone)]
struct Handler {
    host: Arc<dyn ToolHost>,
    identity: Identity,
    sessions: Arc<Mutex<Vec<Session>>>,
    level: SessionLevel,
    subscriptions: Subscriptions,
}

impl Handler {
    fn new(host: Arc<dyn ToolHost>, identity: Identity, sessions: Arc<Mutex<Vec<Session>>>) -> Self {
        Self { host, identity, sessions, level: SessionLevel::default(), subscriptions: Subscriptions::default() }
    }

    /// The same handler for a new session, which starts at the default log level with no subscriptions.
    fn for_session(&self) -> Self {
        Self { level: SessionLevel::default(), subscriptions: Subscriptions::default(), ..self.clone() }
    }

    async fn skills(&self) -> Result<Vec<Arc<Skill>>, ErrorData> {
        self.host.skills().await.map_err(error_data)
    }
}

/// Decodes MCP JSON this module built into the SDK's type.
fn wire<T: serde::de::DeserializeOwned>(what: &str, value: Value) -> Result<T, ErrorData> {
    serde_json::from_value(value)
        .map_err(|e| ErrorData::internal_error(format!("{what} could not be encoded: {e}"), None))
}

impl ServerHandler for Handler {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_logging()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_resources()
            .enable_resources_list_changed()
            .enable_resources_subscribe()
            .enable_completions()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(&self.identity.name, &self.identity.version))
            .with_instructions(self.identity.instructions.clone())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let mut sessions = lock(&self.sessions);
        sessions.retain(|s| !s.peer.is_transport_closed());
        sessions.push(Session { peer: context.peer, subscriptions: self.subscriptions.clone() });
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let prompts: Vec<Value> = offers::prompts(&self.skills().await?).iter().map(offers::prompt_def).collect();
        wire("the prompt list", json!({"prompts": prompts}))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let prompts = offers::prompts(&self.skills().await?);
        let Some(prompt) = prompts.iter().find(|p| p.name == request.name) else {
            let message = format!("no prompt `{}`; expected a name prompts/list gives", request.name);
            return Err(ErrorData::invalid_params(message, Some(json!({"reason": "unknown_prompt"}))));
        };
        let given: BTreeMap<String, String> = request
            .arguments
            .unwrap_or_default()
            .into_iter()
            .map(|(name, value)| match value {
                Value::String(text) => (name, text),
                other => (name, other.to_string()),
            })
            .collect();
        let messages = prompt
            .render(&given)
            .map_err(|e| ErrorData::invalid_params(e.to_string(), Some(json!({"reason": "bad_arguments"}))))?;
        let result: GetPromptResult = wire(
            "the prompt",
            json!({"description": prompt.description, "messages": offers::prompt_messages(&messages)}),
        )?;
        Ok(result.into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let resources = offers::resources(&self.skills().await?);
        let listed: Vec<Value> = resources.iter().filter(|r| !r.is_template()).map(offers::resource_def).collect();
        wire("the resource list", json!({"resources": listed}))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let resources = offers::resources(&self.skills().await?);
        let listed: Vec<Value> = resources.iter().filter(|r| r.is_template()).map(offers::resource_def).collect();
        wire("the resource template list", json!({"resourceTemplates": listed}))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let contents = tokio::select! {
            contents = self.host.read(request.uri.clone()) => contents.map_err(error_data)?,
            () = context.ct.cancelled() => return Err(ErrorData::internal_error("the client cancelled the read", None)),
        };
        let result: ReadResourceResult = wire("the resource's contents", json!({"contents": contents}))?;
        Ok(result.into())
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let uri = decoded(&request.uri);
        let mut subscriptions = lock(&self.subscriptions);
        if subscriptions.len() >= MAX_SUBSCRIPTIONS && !subscriptions.contains(&uri) {
            return Err(ErrorData::new(
                ErrorCode(REFUSED),
                format!(
                    "this session watches {MAX_SUBSCRIPTIONS} resources already, as many as a session may; \
                     unsubscribe from one first"
                ),
                Some(json!({"reason": "limit", "limit": MAX_SUBSCRIPTIONS})),
            ));
        }
        subscriptions.insert(uri);
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        lock(&self.subscriptions).remove(&decoded(&request.uri));
        Ok(())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let skills = self.skills().await?;
        let (name, prefix) = (request.argument.name.as_str(), request.argument.value.as_str());
        let values = match &request.r#ref {
            Reference::Prompt(prompt) => offers::prompts(&skills)
                .iter()
                .find(|p| p.name == prompt.name)
                .map(|p| p.complete(name, prefix))
                .unwrap_or_default(),
            Reference::Resource(resource) => offers::resources(&skills)
                .iter()
                .find(|r| r.uri == resource.uri)
                .map(|r| r.complete(name, prefix))
                .unwrap_or_default(),
            // A kind of reference newer than this code: nothing to offer.
            _ => Vec::new(),
        };
        let total = values.len();
        let values: Vec<String> = values.into_iter().take(MAX_COMPLETIONS).collect();
        wire(
            "the completion",
            json!({"completion": {"values": values, "total": total, "hasMore": total > MAX_COMPLETIONS}}),
        )
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        *self.level.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = log_level(request.level);
        Ok(())
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
        let (caller, mut requests) = caller(&context.peer);
        let done = context.ct.child_token();
        let _done = done.clone().drop_guard();
        let to_client = ToClient {
            peer: context.peer.clone(),
            progress: context.meta.get_progress_token(),
            level: self.level.clone(),
            host: self.host.clone(),
            done,
            awaiting_operator: Mutex::default(),
        };
        let mut call = self.host.call(request.name.to_string(), arguments, caller);
        let result = loop {
            tokio::select! {
                biased;
                () = context.ct.cancelled() => {
                    // Approvals asked but not yet passed on are denied: nobody is left to answer them.
                    requests.close();
                    while let Ok(asked) = requests.try_recv() {
                        if let CallerRequest::Approve(ask) | CallerRequest::AwaitingOperator(ask) = asked {
                            self.host.decide(ask.agent, ask.run, false, None).await;
                        }
                    }
                    return Err(ErrorData::internal_error("the client cancelled the call", None));
                }
                Some(asked) = requests.recv() => to_client.forward(asked).await,
                result = &mut call => break result.map_err(error_data)?,
            }
        };
        // What the run sent just before it ended still goes out, ahead of the result.
        while let Ok(asked) = requests.try_recv() {
            to_client.forward(asked).await;
        }
        to_client.answered();
        let mut wire = json!({"content": result.content, "isError": result.is_error});
        if let Some(structured) = result.structured {
            wire["structuredContent"] = structured;
        }
        if let Some(class) = result.error_class {
            wire["_meta"] = json!({ ERROR_CLASS_META: class });
        }
        if result.wrapped {
            wire["_meta"] = json!({ WRAPPED_META: true });
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

/// Tells the connected clients of each change until `changes` closes or `stop` is cancelled: a change of skills
/// is `tools/list_changed`, `prompts/list_changed` and `resources/list_changed` to every client; a changed
/// resource is `resources/updated` to the clients subscribed to it.
fn announce_changes(
    sessions: Arc<Mutex<Vec<Session>>>,
    mut changes: mpsc::UnboundedReceiver<Change>,
    stop: tokio_util::sync::CancellationToken,
) {
    tokio::spawn(async move {
        loop {
            let change = tokio::select! {
                change = changes.recv() => match change { Some(change) => change, None => break },
                () = stop.cancelled() => break,
            };
            let live: Vec<Session> = {
                let mut sessions = lock(&sessions);
                sessions.retain(|s| !s.peer.is_transport_closed());
                sessions.clone()
            };
            for session in live {
                let sent = match &change {
                    Change::Skills => {
                        let tools = session.peer.notify_tool_list_changed().await;
                        let prompts = session.peer.notify_prompt_list_changed().await;
                        let resources = session.peer.notify_resource_list_changed().await;
                        tools.and(prompts).and(resources)
                    }
                    Change::Resource(uri) if lock(&session.subscriptions).contains(&decoded(uri)) => {
                        session.peer.notify_resource_updated(ResourceUpdatedNotificationParam::new(uri.clone())).await
                    }
                    Change::Resource(_) => Ok(()),
                };
                if let Err(err) = sent {
                    tracing::debug!(%err, ?change, "a client missed a notification");
                }
            }
        }
    });
}

/// Serves the tools over a byte stream (stdio, a pipe) until the client disconnects.
pub(crate) async fn serve_io<R, W>(
    host: Arc<dyn ToolHost>,
    identity: Identity,
    changes: mpsc::UnboundedReceiver<Change>,
    reader: R,
    writer: W,
) -> Result<(), McpError>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let sessions = Arc::new(Mutex::new(Vec::new()));
    let handler = Handler::new(host, identity, sessions.clone());
    let running = handler.serve((reader, writer)).await.map_err(|e| McpError::Serve(e.to_string()))?;
    let stop = tokio_util::sync::CancellationToken::new();
    announce_changes(sessions, changes, stop.clone());
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
    changes: mpsc::UnboundedReceiver<Change>,
    stop: tokio_util::sync::CancellationToken,
) -> axum::Router {
    let sessions = Arc::new(Mutex::new(Vec::new()));
    let handler = Handler::new(host, identity, sessions.clone());
    announce_changes(sessions, changes, stop.clone());
    let config = StreamableHttpServerConfig::default().with_cancellation_token(stop);
    let service: StreamableHttpService<Handler, LocalSessionManager> =
        StreamableHttpService::new(move || Ok(handler.for_session()), Arc::default(), config);
    axum::Router::new().nest_service("/mcp", service)
}
