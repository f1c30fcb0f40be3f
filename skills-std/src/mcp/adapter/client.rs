//! Connecting to an MCP server and calling its tools.

// rmcp marks logging deprecated because protocol 2026-07-28 drops it; the 2025-11-25 servers agentry talks to by
// default send log lines.
#![allow(deprecated)]

use super::super::McpError;
use super::super::client::Protocol;
use super::super::contract::{ERROR_CLASS_META, ToolDef, ToolHints, ToolResult, WRAPPED_META};
use super::super::oauth::OAuth;
use super::caller::log_level;
use super::in_order::InOrder;
use super::stream_ready::StreamReady;
use agentry::action::{Elicited, LogLevel};
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult,
    ElicitationAction, ElicitationCapability, ErrorCode, FormElicitationCapability, Implementation, ListToolsResult,
    LoggingMessageNotificationParam, PaginatedRequestParams, ServerNotification, Tool,
};
use rmcp::service::{NotificationContext, RequestContext, RunningServiceCancellationToken};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::auth::{
    AuthClient, AuthorizationCallback, AuthorizationManager, AuthorizationRequest, OAuthState,
};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ErrorData, Peer, RoleClient, ServiceError, ServiceExt};
use serde_json::{Map, Value};
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use tokio::io::AsyncBufReadExt;
use tokio::sync::{mpsc, oneshot, watch};

/// How to reach a server, as the adapter needs it.
pub(crate) enum Endpoint<'a> {
    /// A child process speaking MCP on its stdin and stdout.
    Stdio { command: &'a str, args: &'a [String], env: &'a [(String, String)], cwd: Option<&'a std::path::Path> },
    /// A streamable HTTP endpoint (`https://host/mcp`), with the headers to send, the roots to trust, and how to
    /// get a token if the server asks for one.
    Http { url: &'a str, options: HttpOptions, root_certificates: &'a [String], oauth: Option<OAuthFlow<'a>> },
}

/// OAuth settings, with the pre-registered client's secret already read.
pub(crate) struct OAuthFlow<'a> {
    pub config: &'a OAuth,
    pub client_secret: Option<String>,
}

/// The headers sent with every request to an HTTP server, checked: names and values HTTP can carry.
#[derive(Clone, Default)]
pub(crate) struct HttpOptions {
    headers: std::collections::HashMap<HeaderName, HeaderValue>,
    bearer: Option<String>,
}

impl std::fmt::Debug for HttpOptions {
    /// Header names only, and whether there is a token: never the values, which may be secrets.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpOptions")
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("bearer", &self.bearer.as_ref().map(|_| ".."))
            .finish()
    }
}

impl HttpOptions {
    /// Checks each header's name and value, and the token (a line break in one would forge a header).
    pub(crate) fn new(headers: Vec<(String, String)>, bearer: Option<String>) -> Result<Self, String> {
        let mut checked = std::collections::HashMap::new();
        for (name, value) in headers {
            let header = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("`{name}` is not an HTTP header name; expected letters, digits and `-`"))?;
            let mut value = HeaderValue::from_str(&value).map_err(|_| {
                format!("the value of header `{name}` holds characters HTTP cannot carry (a line break, say)")
            })?;
            value.set_sensitive(true);
            checked.insert(header, value);
        }
        if let Some(token) = &bearer
            && HeaderValue::from_str(&format!("Bearer {token}")).is_err()
        {
            return Err("the bearer token holds characters HTTP cannot carry (a line break, say)".to_owned());
        }
        Ok(Self { headers: checked, bearer })
    }
}

/// The most authorizations one request makes: a server that keeps asking for scope it never accepts is given up
/// on, not asked again without end.
const MAX_AUTHORIZATIONS: u32 = 3;

/// What getting a token needs, and the token holder every request of the connection goes through.
struct Reauth {
    url: String,
    config: OAuth,
    client_secret: Option<String>,
    http: reqwest::Client,
    client: AuthClient<reqwest::Client>,
    /// One login at a time; calls that met a challenge while it ran use its token instead of logging in again.
    login: tokio::sync::Mutex<()>,
    /// How many logins have completed: a request that started before the last one retries without a new one.
    logins: std::sync::atomic::AtomicU64,
    /// The scopes granted so far, kept in each new request so a step-up never loses what was granted.
    granted: Mutex<Vec<String>>,
}

/// Whether a challenge is one a login can answer: a bearer challenge with no error, or `invalid_token` (expired,
/// revoked), or `insufficient_scope` (a step-up). Anything else (a 403 that says this user may not) is not.
fn answerable(challenge: &str) -> bool {
    let bearer = challenge.trim_start().get(..6).is_some_and(|s| s.eq_ignore_ascii_case("bearer"));
    let error = param(challenge, "error");
    bearer && matches!(error.as_deref(), None | Some("invalid_token" | "insufficient_scope"))
}

/// A parameter of a `WWW-Authenticate` challenge (`scope="a b"`), unquoted.
fn param(challenge: &str, name: &str) -> Option<String> {
    let lower = challenge.to_ascii_lowercase();
    let at = lower
        .match_indices(&format!("{name}="))
        .find(|(i, _)| *i == 0 || matches!(lower.as_bytes()[i - 1], b' ' | b','))?
        .0
        + name.len()
        + 1;
    let rest = &challenge[at..];
    Some(match rest.strip_prefix('"') {
        Some(quoted) => quoted.split('"').next().unwrap_or_default().to_owned(),
        None => rest.split([',', ' ']).next().unwrap_or_default().to_owned(),
    })
}

impl Reauth {
    async fn new(url: &str, flow: OAuthFlow<'_>, http: reqwest::Client) -> Result<Self, String> {
        let empty =
            AuthorizationManager::new(url).await.map_err(|e| format!("OAuth cannot start for this URL: {e}"))?;
        Ok(Self {
            url: url.to_owned(),
            config: flow.config.clone(),
            client_secret: flow.client_secret,
            client: AuthClient::new(http.clone(), empty),
            http,
            login: tokio::sync::Mutex::new(()),
            logins: std::sync::atomic::AtomicU64::new(0),
            granted: Mutex::new(Vec::new()),
        })
    }

    /// The number of logins completed so far.
    fn logins(&self) -> u64 {
        self.logins.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Logs in for `challenge`, unless a login completed since `seen` (then its token is the answer).
    async fn authorize_after(&self, seen: u64, challenge: String) -> Result<(), String> {
        let _one_at_a_time = self.login.lock().await;
        if self.logins() != seen {
            return Ok(());
        }
        self.authorize(challenge).await?;
        self.logins.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }

    /// The OAuth authorization-code flow against the server's authorization server, from the server's
    /// challenge: discovery, a client id, the user's login through [`OAuth::authorize`], the token, which the
    /// token holder then sends with every request (and refreshes).
    async fn authorize(&self, challenge: String) -> Result<(), String> {
        let config = &self.config;
        let mut state = OAuthState::new(self.url.as_str(), Some(self.http.clone()))
            .await
            .map_err(|e| format!("discovery failed: {e}"))?;
        let mut request = AuthorizationRequest::new(&config.redirect_uri)
            .with_client_name(&config.client_name)
            .with_challenge(challenge.clone());
        if let Some(metadata) = &config.client_metadata_url {
            request = request.with_client_metadata_url(metadata);
        }
        if let Some(id) = &config.client_id {
            request = request.with_preregistered_client(id);
            if let Some(secret) = &self.client_secret {
                request = request.with_client_secret(secret);
            }
        }
        // The scopes asked for: those configured, those granted before and those the challenge names (a step-up
        // keeps what it had). With none of these, the SDK picks from the server's metadata.
        let mut scopes: Vec<String> = config.scopes.clone();
        scopes.extend(lock(&self.granted).iter().cloned());
        scopes.extend(param(&challenge, "scope").iter().flat_map(|s| s.split_whitespace().map(str::to_owned)));
        scopes.sort();
        scopes.dedup();
        if !scopes.is_empty() && (!config.scopes.is_empty() || !lock(&self.granted).is_empty()) {
            request = request.with_scopes(scopes.iter());
        }
        state.start_authorization(request).await.map_err(|e| format!("the client could not be registered: {e}"))?;
        let login = state.get_authorization_url().await.map_err(|e| format!("no authorization URL: {e}"))?;
        let back = (config.authorize)(login).await.map_err(|e| format!("the user did not log in: {e}"))?;
        let callback = AuthorizationCallback::from_redirect_url(&back)
            .map_err(|e| format!("the URL the user came back to is not an authorization response: {e}"))?;
        state
            .handle_callback_with_issuer(&callback.code, &callback.csrf_token, callback.issuer.as_deref())
            .await
            .map_err(|e| format!("the code was not exchanged for a token: {e}"))?;
        let manager = state.into_authorization_manager().ok_or("the authorization did not complete")?;
        let granted = manager.get_current_scopes().await;
        *self.client.auth_manager.lock().await = manager;
        lock(&self.granted).extend(granted);
        Ok(())
    }
}

/// Why a request to a connected server failed.
#[derive(Debug)]
pub(crate) enum CallError {
    /// The connection is gone (the process died, the socket dropped).
    Closed(String),
    /// The server answered with a JSON-RPC error.
    Protocol { code: i32, message: String },
    /// The server wants a token it was not given (no OAuth, a login that failed, or one it keeps refusing).
    Unauthorized(String),
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
            Self::Unauthorized(why) => write!(f, "the server refused the request without a token it accepts: {why}"),
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
#[derive(Clone)]
struct Listener {
    list_changed: mpsc::UnboundedSender<()>,
    name: String,
    in_flight: InFlight,
    /// The server's elicitations waiting for an answer.
    pending: Arc<AtomicUsize>,
}

/// A server's elicitation (a form it asks the user to fill in), for the call in flight to answer.
#[derive(Debug)]
pub(crate) struct Ask {
    /// What the server asks.
    pub message: String,
    /// The form, a JSON Schema object.
    pub schema: Value,
    /// Where the answer goes.
    pub reply: oneshot::Sender<Elicited>,
}

/// What a server sends during a call, for the run that made it.
#[derive(Debug)]
pub(crate) enum FromServer {
    /// It asks for input.
    Elicit(Ask),
    /// A log line.
    Log { level: LogLevel, message: String, fields: Option<Value> },
    /// How far the call got, as a fraction of 1.
    Progress { fraction: f64, message: Option<String> },
}

/// The calls in flight on a connection, each with where what its server sends during it goes and how many
/// elicitations the server made during it.
type InFlight = Arc<Mutex<Vec<(u64, mpsc::UnboundedSender<FromServer>, Arc<AtomicUsize>)>>>;

/// The most elicitations a server may make during one call; more are declined.
pub(crate) const MAX_ELICITATIONS_PER_CALL: usize = 8;

/// The most elicitations of one server waiting for an answer at once; more are declined.
pub(crate) const MAX_PENDING_ELICITATIONS: usize = 8;

/// A call's place among those in flight; leaving it (dropping this) takes the call off the list.
pub(crate) struct Flight {
    id: u64,
    in_flight: InFlight,
}

impl Drop for Flight {
    fn drop(&mut self) {
        lock(&self.in_flight).retain(|(id, _, _)| *id != self.id);
    }
}

impl Listener {
    /// Where what the server sends during a call goes: the only call in flight. With none, or several, which
    /// call it came in cannot be told from what MCP carries.
    fn flight(&self) -> Option<(mpsc::UnboundedSender<FromServer>, Arc<AtomicUsize>)> {
        only_flight(&self.in_flight)
    }
}

/// The only call in flight, if there is exactly one.
fn only_flight(in_flight: &InFlight) -> Option<(mpsc::UnboundedSender<FromServer>, Arc<AtomicUsize>)> {
    match lock(in_flight).as_slice() {
        [(_, to, asked)] => Some((to.clone(), asked.clone())),
        _ => None,
    }
}

/// What a server says during a call (log lines, and progress with a total), passed to the run whose call is in
/// flight, when only one is, as the transport reads it ([`InOrder`]): so it reaches the run before the call's
/// result does. Progress with no total is no fraction, and is not passed on.
fn pass_to_flight(in_flight: InFlight) -> impl Fn(&ServerNotification) + Send + 'static {
    move |notification| {
        let sent = match notification {
            ServerNotification::ProgressNotification(note) => {
                let Some(total) = note.params.total.filter(|total| *total > 0.0) else { return };
                FromServer::Progress { fraction: note.params.progress / total, message: note.params.message.clone() }
            }
            ServerNotification::LoggingMessageNotification(note) => {
                let params = &note.params;
                let (message, fields) = match &params.data {
                    Value::String(text) => (text.clone(), None),
                    data => (params.logger.clone().unwrap_or_default(), Some(data.clone())),
                };
                FromServer::Log { level: log_level(params.level), message, fields }
            }
            _ => return,
        };
        if let Some((to, _)) = only_flight(&in_flight) {
            let _ = to.send(sent);
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl ClientHandler for Listener {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.list_changed.send(());
    }

    /// A server asks for input during a call: the one call in flight answers it (as an approval on the agent
    /// that made it). With none, or several (which one asked cannot be told), the ask is declined.
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let ElicitRequestParams::FormElicitationParams { message, requested_schema, .. } = request else {
            tracing::warn!(server = %self.name, "a URL elicitation was declined: agentry answers forms only");
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        let schema = serde_json::to_value(&requested_schema).unwrap_or(Value::Null);
        let Some((to, asked)) = self.flight() else {
            tracing::warn!(server = %self.name, "an elicitation was declined: it did not come during exactly one call");
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        // Bounded: per call, and waiting at once for the whole server.
        use std::sync::atomic::Ordering::SeqCst;
        if asked.fetch_add(1, SeqCst) >= MAX_ELICITATIONS_PER_CALL {
            tracing::warn!(server = %self.name, "an elicitation was declined: {MAX_ELICITATIONS_PER_CALL} came during this call already");
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        }
        if self.pending.fetch_add(1, SeqCst) >= MAX_PENDING_ELICITATIONS {
            self.pending.fetch_sub(1, SeqCst);
            tracing::warn!(server = %self.name, "an elicitation was declined: {MAX_PENDING_ELICITATIONS} wait for an answer already");
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        }
        let (reply, answer) = oneshot::channel();
        let sent = to.send(FromServer::Elicit(Ask { message, schema, reply })).is_ok();
        // The call's end drops its receiver, and with it every ask not yet answered: those are cancelled.
        let answered = if sent { answer.await.unwrap_or(Elicited::Cancel) } else { Elicited::Cancel };
        self.pending.fetch_sub(1, SeqCst);
        Ok(match answered {
            Elicited::Accept(content) => ElicitResult::new(ElicitationAction::Accept).with_content(content),
            Elicited::Decline => ElicitResult::new(ElicitationAction::Decline),
            Elicited::Cancel => ElicitResult::new(ElicitationAction::Cancel),
        })
    }

    /// A log line goes to the `tracing` log (the run whose call it came during hears of it from the transport,
    /// [`pass_to_flight`]).
    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let level = log_level(params.level);
        let message = match &params.data {
            Value::String(text) => text.clone(),
            data => data.to_string(),
        };
        tracing::debug!(server = %self.name, logger = ?params.logger, ?level, "{message}");
    }

    fn get_info(&self) -> ClientConfig {
        // The handshake asks for the newest version that still has `initialize` (2025-11-25); rmcp's default,
        // its newest known version, is one servers of the initialize era refuse as a mismatch. Elicitation (form
        // mode) is declared: a server's ask becomes an approval on the agent whose call it came in.
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = Some(ElicitationCapability::new().with_form(FormElicitationCapability::default()));
        ClientConfig::new(capabilities, Implementation::new(&self.name, env!("CARGO_PKG_VERSION")))
            .with_protocol_version(rmcp::model::ProtocolVersion::LATEST_WITH_INITIALIZE)
    }
}

/// The session on a transport, by the protocol chosen: the `initialize` handshake (2025-11-25), or
/// `server/discover` first with `initialize` as the fallback for servers that do not know it (2026-07-28).
async fn open_session<T>(
    listener: Listener,
    transport: T,
    protocol: Protocol,
) -> Result<rmcp::service::RunningService<RoleClient, Listener>, rmcp::service::ClientInitializeError>
where
    T: rmcp::transport::Transport<RoleClient> + 'static,
{
    use rmcp::model::ProtocolVersion;
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
    let transport = InOrder::new(transport, pass_to_flight(listener.in_flight.clone()));
    match protocol {
        Protocol::V2025_11_25 => listener.serve(transport).await,
        Protocol::V2026_07_28 => {
            let lifecycle = ClientLifecycleMode::Auto {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                legacy_version: Some(ProtocolVersion::V_2025_11_25),
            };
            listener.serve_with_lifecycle(transport, lifecycle).await
        }
    }
}

/// What the server said about itself in the handshake.
#[derive(Debug, Clone, Default)]
pub(crate) struct ServerIdentity {
    pub name: Option<String>,
    pub version: Option<String>,
    pub instructions: Option<String>,
    /// The protocol revision the handshake settled on.
    pub protocol_version: Option<String>,
}

/// A live connection to a server.
pub(crate) struct Connection {
    peer: Peer<RoleClient>,
    cancel: Mutex<Option<RunningServiceCancellationToken>>,
    closed: watch::Receiver<bool>,
    pid: Option<u32>,
    identity: ServerIdentity,
    in_flight: InFlight,
    next_flight: std::sync::atomic::AtomicU64,
    /// How to get a (new) token when the server asks, for a server with OAuth.
    reauth: Option<Reauth>,
}

/// Connects and does the initialize handshake. `list_changed` hears of every `tools/list_changed`.
pub(crate) async fn connect(
    server: &str,
    endpoint: Endpoint<'_>,
    protocol: Protocol,
    list_changed: mpsc::UnboundedSender<()>,
) -> Result<Connection, McpError> {
    let in_flight = InFlight::default();
    let listener = Listener {
        list_changed,
        name: format!("agentry/{server}"),
        in_flight: in_flight.clone(),
        pending: Arc::default(),
    };
    let handshake = |message: String| McpError::Handshake { server: server.to_owned(), message };
    let (running, pid, reauth) = match endpoint {
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
            (open_session(listener, transport, protocol).await.map_err(|e| handshake(e.to_string()))?, pid, None)
        }
        Endpoint::Http { url, options, root_certificates, oauth } => {
            crate::tls::install_provider();
            let config = |message: String| McpError::Config { server: server.to_owned(), message };
            let mut roots = Vec::new();
            for (i, pem) in root_certificates.iter().enumerate() {
                roots.extend(
                    crate::tls::pem_certificates(pem).map_err(|why| config(format!("root certificate {i} {why}")))?,
                );
            }
            // No redirects: a header or token meant for this server must never follow one elsewhere.
            let client = reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .tls_certs_merge(roots)
                .build()
                .map_err(|e| config(format!("the HTTP client could not start: {e}")))?;
            let mut transport =
                StreamableHttpClientTransportConfig::with_uri(url.to_owned()).custom_headers(options.headers);
            if let Some(token) = options.bearer {
                transport = transport.auth_header(token);
            }
            match oauth {
                None => {
                    let client = StreamReady::new(client);
                    let transport = StreamableHttpClientTransport::with_client(client.clone(), transport);
                    let running =
                        open_session(listener, transport, protocol).await.map_err(|e| handshake(e.to_string()))?;
                    client.opened(STANDALONE_STREAM_WAIT).await;
                    (running, None, None)
                }
                // Every request goes through a token holder, empty at first: a server that never asks is used
                // without a token, and one that asks (now, or for more scope later) gets one.
                Some(flow) => {
                    let reauth = Reauth::new(url, flow, client).await.map_err(config)?;
                    let ready = StreamReady::new(reauth.client.clone());
                    let first = StreamableHttpClientTransport::with_client(ready.clone(), transport.clone());
                    let running = match open_session(listener.clone(), first, protocol).await {
                        Ok(running) => {
                            ready.opened(STANDALONE_STREAM_WAIT).await;
                            running
                        }
                        Err(err) if err.auth_challenge().is_some() => {
                            let challenge = err.auth_challenge().unwrap_or_default().to_owned();
                            reauth
                                .authorize(challenge)
                                .await
                                .map_err(|message| McpError::Authorization { server: server.to_owned(), message })?;
                            let ready = StreamReady::new(reauth.client.clone());
                            let again = StreamableHttpClientTransport::with_client(ready.clone(), transport);
                            let running =
                                open_session(listener, again, protocol).await.map_err(|e| handshake(e.to_string()))?;
                            ready.opened(STANDALONE_STREAM_WAIT).await;
                            running
                        }
                        Err(err) => return Err(handshake(err.to_string())),
                    };
                    (running, None, Some(reauth))
                }
            }
        }
    };
    let identity = running
        .peer_info()
        .map(|info| ServerIdentity {
            name: info.server_info.as_ref().map(|i| i.name.clone()),
            version: info.server_info.as_ref().map(|i| i.version.clone()),
            instructions: info.instructions.clone(),
            protocol_version: Some(info.protocol_version.to_string()),
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
    let next_flight = std::sync::atomic::AtomicU64::new(0);
    Ok(Connection { peer, cancel: Mutex::new(Some(cancel)), closed, pid, identity, in_flight, next_flight, reauth })
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

/// How long a new HTTP session waits for its standalone stream before it is used (see `stream_ready.rs`).
const STANDALONE_STREAM_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The most tools one server may list.
pub(crate) const MAX_TOOLS: usize = 1_000;

/// The most pages of `tools/list` followed.
pub(crate) const MAX_TOOL_PAGES: usize = 100;

impl Connection {
    /// Every tool, following pagination. A tool whose definition does not read is skipped with a warning. A
    /// server that lists more than [`MAX_TOOLS`] tools (or pages past [`MAX_TOOL_PAGES`]) is refused: what it
    /// offers is the server's word, and an agent's tool list (and its model's context) has to stay bounded.
    pub(crate) async fn list_tools(&self) -> Result<Vec<ToolDef>, CallError> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_TOOL_PAGES {
            let params = cursor.take().map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
            let page: ListToolsResult = self.authorized(|| self.peer.list_tools(params.clone())).await?;
            if tools.len() + page.tools.len() > MAX_TOOLS {
                return Err(CallError::Other(format!(
                    "the server lists more than {MAX_TOOLS} tools; expected at most that many (split it into servers \
                     with fewer tools, or allow only some with `allow_tools`)"
                )));
            }
            tools.extend(page.tools.iter().map(tool_def));
            match page.next_cursor {
                Some(next) if !next.is_empty() => cursor = Some(next),
                _ => return Ok(tools),
            }
        }
        Err(CallError::Other(format!("the server's tool list goes on past {MAX_TOOL_PAGES} pages; expected fewer")))
    }

    /// Calls a tool. Dropping the future (a timeout, a cancelled run) tells the server the request was
    /// cancelled.
    pub(crate) async fn call(&self, tool: &str, arguments: Map<String, Value>) -> Result<ToolResult, CallError> {
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        let result: CallToolResult = self.authorized(|| self.peer.call_tool(params.clone())).await?;
        Ok(tool_result(&result))
    }

    /// A request, made again after authorizing when the server answers it with a challenge (no token yet, an
    /// expired one, or too little scope) and OAuth is set up; at most [`MAX_AUTHORIZATIONS`] times.
    async fn authorized<T, F, Fut>(&self, request: F) -> Result<T, CallError>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<T, ServiceError>>,
    {
        let mut authorizations = 0;
        loop {
            let seen = self.reauth.as_ref().map_or(0, Reauth::logins);
            let err = match request().await {
                Err(err) if err.auth_challenge().is_some() => err,
                other => return other.map_err(call_error),
            };
            let challenge = err.auth_challenge().unwrap_or_default().to_owned();
            let Some(reauth) = self.reauth.as_ref().filter(|_| answerable(&challenge)) else {
                return Err(CallError::Unauthorized(err.to_string()));
            };
            if authorizations == MAX_AUTHORIZATIONS {
                return Err(CallError::Unauthorized(format!(
                    "the server still refuses after {MAX_AUTHORIZATIONS} authorizations: {err}"
                )));
            }
            authorizations += 1;
            reauth
                .authorize_after(seen, challenge)
                .await
                .map_err(|e| CallError::Unauthorized(format!("authorization failed: {e}")))?;
        }
    }

    /// Puts a call on the list of those in flight: the server's elicitations during it arrive on the receiver
    /// (when it is the only call in flight), until the [`Flight`] is dropped.
    pub(crate) fn in_flight(&self) -> (Flight, mpsc::UnboundedReceiver<FromServer>) {
        let id = self.next_flight.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (tx, rx) = mpsc::unbounded_channel();
        lock(&self.in_flight).push((id, tx, Arc::default()));
        (Flight { id, in_flight: self.in_flight.clone() }, rx)
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
        if let Some(cancel) = lock(&self.cancel).take() {
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
    let meta = result.meta.as_ref().and_then(|meta| serde_json::to_value(meta).ok()).unwrap_or(Value::Null);
    ToolResult {
        content: result.content.iter().map(|block| serde_json::to_value(block).unwrap_or(Value::Null)).collect(),
        structured: result.structured_content.clone(),
        is_error: result.is_error.unwrap_or(false),
        error_class: serde_json::from_value(meta[ERROR_CLASS_META].clone()).ok(),
        wrapped: meta[WRAPPED_META] == Value::Bool(true),
    }
}

#[cfg(test)]
mod tests {
    use super::{answerable, param};

    #[test]
    fn only_bearer_challenges_a_login_can_answer_start_one() {
        assert!(answerable(r#"Bearer resource_metadata="http://x/.well-known/oauth-protected-resource""#));
        assert!(answerable(r#"Bearer error="insufficient_scope", scope="a b""#));
        assert!(answerable(r#"bearer error="invalid_token""#));
        assert!(!answerable(r#"Bearer error="access_denied""#), "a refusal a login cannot mend");
        assert!(!answerable(r#"Basic realm="x""#));
        assert_eq!(param(r#"Bearer error="insufficient_scope", scope="a b""#, "scope").as_deref(), Some("a b"));
        assert_eq!(param(r#"Bearer scope=a, error=x"#, "scope").as_deref(), Some("a"));
        assert_eq!(param(r#"Bearer myscope="no""#, "scope"), None, "a parameter is matched whole");
    }
}
