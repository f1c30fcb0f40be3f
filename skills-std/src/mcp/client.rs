//! An MCP server as a skill: connect, list its tools, make one action per tool, and keep the skill true to the
//! server — through `tools/list_changed`, a dying process and a dropped connection.

use super::McpError;
use super::adapter::{self, CallError, Connection, Endpoint};
use super::contract::{self, ToolDef, Trust};
use super::oauth::OAuth;
use agentry::action::{ActionContext, ActionError, ActionSpec, DynAction, Elicited, Risk};
use agentry::runtime::{Runtime, RuntimeError};
use agentry::skill::Skill;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};
use std::time::Duration;
use tokio::sync::{Notify, mpsc, watch};
use tokio_util::sync::CancellationToken;

/// How the client reaches the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpTransport {
    /// Start the server as a child process and speak MCP on its stdin and stdout.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Environment variables to set for it.
        env: Vec<(String, String)>,
        /// Its working folder (default: this process's).
        cwd: Option<PathBuf>,
    },
    /// Streamable HTTP at a URL such as `https://mcp.example.com/mcp` or `http://127.0.0.1:8000/mcp`.
    Http {
        /// The endpoint.
        url: String,
        /// Headers sent with every request ([`McpServer::header`], [`McpServer::header_env`]).
        headers: Vec<(String, Setting)>,
        /// The environment variable that holds a bearer token ([`McpServer::bearer_env`]).
        bearer_env: Option<String>,
        /// PEM certificates trusted besides the system's roots ([`McpServer::root_certificate`]).
        root_certificates: Vec<String>,
        /// How to get a token when the server asks for one ([`McpServer::oauth`]).
        oauth: Option<OAuth>,
    },
}

/// The MCP protocol revision the client asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// 2025-11-25, with the `initialize` handshake (the default). A server can ask the client things during a
    /// call (elicitation, which agentry answers as approvals) and send it log lines and progress.
    #[default]
    V2025_11_25,
    /// 2026-07-28, negotiated with `server/discover`, falling back to 2025-11-25 for a server that does not know
    /// it. This revision has no requests from server to client, so a server cannot elicit during a call.
    V2026_07_28,
}

/// The protocol revisions the client works with: the two it asks for ([`Protocol`]) and the one before
/// (2025-06-18), which a server may answer with.
pub const SUPPORTED_PROTOCOL_VERSIONS: [&str; 3] = ["2025-06-18", "2025-11-25", "2026-07-28"];

/// Where a setting's value (a header's, a client secret's) comes from. Its `Debug` shows variable names, never
/// text values (which may be secrets).
#[derive(Clone, PartialEq, Eq)]
pub enum Setting {
    /// This text, as it is (for values that are not secret, or secrets the application got elsewhere, never
    /// from a configuration file).
    Text(String),
    /// The environment variable of this name, read at each connection (for secrets, which never belong in a
    /// file).
    Env(String),
}

impl std::fmt::Debug for Setting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Text(_) => f.write_str("Text(..)"),
            Self::Env(var) => f.debug_tuple("Env").field(var).finish(),
        }
    }
}

impl Setting {
    /// The value now: the text, or the variable's value.
    fn read(&self, server: &str, what: &str) -> Result<String, McpError> {
        match self {
            Self::Text(text) => Ok(text.clone()),
            Self::Env(var) => std::env::var(var).map_err(|_| McpError::Config {
                server: server.to_owned(),
                message: format!("the environment variable `{var}` is not set (or not UTF-8); expected {what}"),
            }),
        }
    }
}

/// How the client reconnects after losing the server: `attempts` tries, waiting `first` before the first and
/// twice as long before each next one, at most `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reconnect {
    /// How many tries before the server is reported down.
    pub attempts: u32,
    /// The wait before the first try.
    pub first: Duration,
    /// The longest wait between tries.
    pub max: Duration,
}

impl Default for Reconnect {
    /// Six tries, from 200 ms up to 5 s apart (about 11 s in all).
    fn default() -> Self {
        Self { attempts: 6, first: Duration::from_millis(200), max: Duration::from_secs(5) }
    }
}

/// How long connecting to a server and listing its tools may take unless [`McpServer::connect_timeout`] says
/// otherwise.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// An MCP server to mount as a skill: its name (the skill is `mcp.<name>`, each tool `mcp.<name>.<tool>`), how
/// to reach it, the timeout of one tool call, and how to reconnect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServer {
    /// The server's name in agentry: ASCII letters, digits, `_` and `-`.
    pub name: String,
    /// How to reach it.
    pub transport: McpTransport,
    /// How long one tool call may take (each action's timeout).
    pub timeout: Duration,
    /// How long connecting (the handshake) and listing the tools may take.
    pub connect_timeout: Duration,
    /// How to reconnect.
    pub reconnect: Reconnect,
    /// How far the server's hints about its tools are taken (default: untrusted).
    pub trust: Trust,
    /// The only tools to mount (names, or a prefix ending in `*`); empty: every tool.
    pub allow_tools: Vec<String>,
    /// Tools never to mount (names, or a prefix ending in `*`); wins over `allow_tools`.
    pub deny_tools: Vec<String>,
    /// The protocol revision to ask for.
    pub protocol: Protocol,
}

/// Whether a tool name matches a configured name (of `allow_tools` or `deny_tools`): equal, `*`, or a prefix
/// ending in `*`.
pub fn tool_rule_matches(pattern: &str, tool: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => tool.starts_with(prefix),
        None => pattern == tool,
    }
}

impl McpServer {
    /// Why the configuration keeps a tool out, if it does.
    fn refuses(&self, tool: &str) -> Option<String> {
        if let Some(pattern) = self.deny_tools.iter().find(|p| tool_rule_matches(p, tool)) {
            return Some(format!("denied by this server's configuration (`{pattern}` in deny_tools)"));
        }
        if !self.allow_tools.is_empty() && !self.allow_tools.iter().any(|p| tool_rule_matches(p, tool)) {
            return Some("not among this server's allowed tools (allow_tools)".to_owned());
        }
        None
    }
}

impl McpServer {
    /// A server started as a child process.
    pub fn stdio(
        name: impl Into<String>,
        command: impl Into<String>,
        args: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        let transport = McpTransport::Stdio {
            command: command.into(),
            args: args.into_iter().map(Into::into).collect(),
            env: Vec::new(),
            cwd: None,
        };
        Self::new(name, transport)
    }

    /// A server at a streamable HTTP URL.
    pub fn http(name: impl Into<String>, url: impl Into<String>) -> Self {
        let transport = McpTransport::Http {
            url: url.into(),
            headers: Vec::new(),
            bearer_env: None,
            root_certificates: Vec::new(),
            oauth: None,
        };
        Self::new(name, transport)
    }

    /// Asks for this protocol revision (see [`Protocol`]; default 2025-11-25).
    pub fn protocol(mut self, protocol: Protocol) -> Self {
        self.protocol = protocol;
        self
    }

    /// Gets a token with OAuth when the server answers `401` with a challenge (see [`OAuth`]): the server's
    /// metadata is discovered, the client registered (or its metadata URL or pre-registered id used), the user
    /// logs in through [`OAuth::authorize`], and the token goes with every request. HTTP servers only.
    pub fn oauth(mut self, config: OAuth) -> Self {
        if let McpTransport::Http { oauth, .. } = &mut self.transport {
            *oauth = Some(config);
        }
        self
    }

    /// Sends `Authorization: Bearer <token>` with every request, the token read from the environment variable
    /// `var` at each connection (so a rotated token is picked up on reconnecting). HTTP servers only. A secret is
    /// sent over plain `http://` only to a loopback host.
    pub fn bearer_env(mut self, var: impl Into<String>) -> Self {
        if let McpTransport::Http { bearer_env, .. } = &mut self.transport {
            *bearer_env = Some(var.into());
        }
        self
    }

    /// Sends a header with every request, with this value as it is (not for secrets: see
    /// [`McpServer::header_env`]). HTTP servers only.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        if let McpTransport::Http { headers, .. } = &mut self.transport {
            headers.push((name.into(), Setting::Text(value.into())));
        }
        self
    }

    /// Sends a header with every request, its value read from the environment variable `var` at each
    /// connection. HTTP servers only. A secret is sent over plain `http://` only to a loopback host.
    pub fn header_env(mut self, name: impl Into<String>, var: impl Into<String>) -> Self {
        if let McpTransport::Http { headers, .. } = &mut self.transport {
            headers.push((name.into(), Setting::Env(var.into())));
        }
        self
    }

    /// Trusts this PEM certificate (a private CA, a self-signed server) besides the system's roots for an
    /// `https://` server.
    pub fn root_certificate(mut self, pem: impl Into<String>) -> Self {
        if let McpTransport::Http { root_certificates, .. } = &mut self.transport {
            root_certificates.push(pem.into());
        }
        self
    }

    fn new(name: impl Into<String>, transport: McpTransport) -> Self {
        Self {
            name: name.into(),
            transport,
            timeout: agentry::action::DEFAULT_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            reconnect: Reconnect::default(),
            trust: Trust::Untrusted,
            allow_tools: Vec::new(),
            deny_tools: Vec::new(),
            protocol: Protocol::default(),
        }
    }

    /// Takes the server's hints about its tools as they are (see [`Trust`]): for a server one runs oneself.
    pub fn trusted(mut self) -> Self {
        self.trust = Trust::Trusted;
        self
    }

    /// Mounts only these tools (names, or a prefix ending in `*`); the rest are listed by
    /// [`McpClient::skipped`].
    pub fn allow_tools(mut self, tools: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.allow_tools.extend(tools.into_iter().map(Into::into));
        self
    }

    /// Never mounts these tools (names, or a prefix ending in `*`), even if allowed.
    pub fn deny_tools(mut self, tools: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.deny_tools.extend(tools.into_iter().map(Into::into));
        self
    }

    /// Sets an environment variable for a child-process server (ignored over HTTP).
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        if let McpTransport::Stdio { env, .. } = &mut self.transport {
            env.push((key.into(), value.into()));
        }
        self
    }

    /// Sets the working folder of a child-process server (ignored over HTTP).
    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        if let McpTransport::Stdio { cwd, .. } = &mut self.transport {
            *cwd = Some(dir.into());
        }
        self
    }

    /// Sets the timeout of one tool call.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets how long connecting and listing the tools may take.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets how the client reconnects.
    pub fn reconnect(mut self, reconnect: Reconnect) -> Self {
        self.reconnect = reconnect;
        self
    }
}

/// Where the connection stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientStatus {
    /// Connected; runs go to the server.
    Connected,
    /// The connection was lost; this try is under way. Runs fail `transient` meanwhile.
    Reconnecting {
        /// Which try, from 1.
        attempt: u32,
    },
    /// Every try failed: the server is reported down, and runs fail at once until [`McpClient::reconnect`]
    /// brings it back.
    Down {
        /// The last error.
        error: String,
    },
    /// [`McpClient::close`] was called.
    Closed,
}

/// A tool the server offers that could not become an action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedTool {
    /// The tool's name on the server.
    pub tool: String,
    /// Why it was skipped.
    pub reason: String,
}

/// The skill as last built from the server's tools.
struct Built {
    tools: Vec<ToolDef>,
    skipped: Vec<SkippedTool>,
    skill: Skill,
}

/// What a tool call needs: the server, the connection to it now, and where the connection stands. The skill's
/// actions share it with the client, so they need no handle on the client itself.
struct Line {
    server: McpServer,
    connection: RwLock<Option<Arc<Connection>>>,
    status: watch::Sender<ClientStatus>,
}

impl Line {
    /// The connection now, if any.
    fn current(&self) -> Option<Arc<Connection>> {
        self.connection.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Replaces the connection; the one it held, if any, is returned.
    fn set(&self, connection: Option<Arc<Connection>>) -> Option<Arc<Connection>> {
        std::mem::replace(&mut *self.connection.write().unwrap_or_else(PoisonError::into_inner), connection)
    }

    /// Ends the connection and says the client is closed.
    fn close(&self) {
        if let Some(connection) = self.set(None) {
            connection.close();
        }
        self.status.send_replace(ClientStatus::Closed);
    }
}

struct Inner {
    line: Arc<Line>,
    /// The skill's version: the server's own when it is semver, else `0.0.0`; fixed for the client's life, so
    /// rebuilt skills refresh in place.
    version: String,
    identity: adapter::ServerIdentity,
    built: Mutex<Built>,
    runtime: Mutex<Option<Runtime>>,
    list_changed: mpsc::UnboundedSender<()>,
    retry: Arc<Notify>,
    stop: CancellationToken,
    /// One resync at a time, from listing to refreshing the runtime, so an older list never lands last.
    syncing: tokio::sync::Mutex<()>,
}

impl Drop for Inner {
    /// The last handle gone: the connection (and a child-process server) ends with it.
    fn drop(&mut self) {
        self.stop.cancel();
        self.line.close();
    }
}

/// A connection to one MCP server, and the skill made of its tools. Cheap to clone; it runs until
/// [`McpClient::close`] or until the last clone is dropped, and no longer than the tokio runtime it was made on.
/// Once the client is gone, the skill's actions fail `cancelled`.
#[derive(Clone)]
pub struct McpClient {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for McpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpClient").field("server", &self.inner.line.server.name).finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl McpClient {
    /// Connects, does the handshake and lists every tool. The client then keeps itself connected and its
    /// skill up to date in the background.
    pub async fn connect(server: McpServer) -> Result<Self, McpError> {
        if server.name.contains('.') {
            let reason = "it has a dot, so the ids of two servers' tools could meet".to_owned();
            return Err(McpError::BadName { name: server.name.clone(), reason });
        }
        contract::skill_id(&server.name)
            .map_err(|e| McpError::BadName { name: server.name.clone(), reason: e.to_string() })?;
        if let McpTransport::Http { url, .. } = &server.transport {
            check_url(&server.name, url)?;
        }
        let (list_changed, changes) = mpsc::unbounded_channel();
        let connection = open(&server, list_changed.clone()).await?;
        let tools = list(&server, &connection).await?;
        let identity = connection.identity().clone();
        let version =
            identity.version.as_deref().filter(|v| semver::Version::parse(v).is_ok()).unwrap_or("0.0.0").to_owned();
        let line = Arc::new(Line {
            connection: RwLock::new(Some(Arc::new(connection))),
            status: watch::Sender::new(ClientStatus::Connected),
            server,
        });
        // On an error the line, and the connection with it, is dropped, which ends the connection.
        let built = build(&line, &version, &identity, tools)
            .map_err(|message| McpError::Skill { server: line.server.name.clone(), message })?;
        let inner = Arc::new(Inner {
            line,
            version,
            identity,
            built: Mutex::new(built),
            runtime: Mutex::new(None),
            list_changed,
            retry: Arc::default(),
            stop: CancellationToken::new(),
            syncing: tokio::sync::Mutex::new(()),
        });
        tokio::spawn(supervise(Arc::downgrade(&inner), changes));
        Ok(Self { inner })
    }

    /// The protocol revision the first handshake settled on (`2025-11-25`, `2026-07-28`).
    pub fn protocol_version(&self) -> Option<&str> {
        self.inner.identity.protocol_version.as_deref()
    }

    /// What the server said it is in its handshake: its name and version, as it gave them (a peer's word;
    /// either may be missing).
    pub fn server_info(&self) -> (Option<&str>, Option<&str>) {
        (self.inner.identity.name.as_deref(), self.inner.identity.version.as_deref())
    }

    /// The server's name in agentry.
    pub fn name(&self) -> &str {
        &self.inner.line.server.name
    }

    /// The skill made of the server's tools, as built last: id `mcp.<name>`, one action per tool.
    pub fn skill(&self) -> Skill {
        lock(&self.inner.built).skill.clone()
    }

    /// The server's tools, as listed last.
    pub fn tools(&self) -> Vec<ToolDef> {
        lock(&self.inner.built).tools.clone()
    }

    /// The tools that could not become actions, and why.
    pub fn skipped(&self) -> Vec<SkippedTool> {
        lock(&self.inner.built).skipped.clone()
    }

    /// Where the connection stands.
    pub fn status(&self) -> ClientStatus {
        self.inner.line.status.borrow().clone()
    }

    /// A receiver that sees every change of [`McpClient::status`].
    pub fn watch_status(&self) -> watch::Receiver<ClientStatus> {
        self.inner.line.status.subscribe()
    }

    /// The process id of a child-process server, while connected.
    pub fn pid(&self) -> Option<u32> {
        self.inner.line.current().and_then(|c| c.pid())
    }

    /// Adds the skill to a runtime's catalog, so agents can mount it, and keeps it there up to date: when the
    /// server's tools change, the runtime refreshes the skill on every agent that has it mounted.
    pub fn attach(&self, runtime: &Runtime) -> Result<(), RuntimeError> {
        // The runtime is known before the skill is added, so a change listed meanwhile reaches it too: either
        // the build added here already has it, or the refresh that follows brings it.
        let previous = lock(&self.inner.runtime).replace(runtime.clone());
        if let Err(error) = runtime.add_skill(self.skill()) {
            *lock(&self.inner.runtime) = previous;
            return Err(error);
        }
        Ok(())
    }

    /// Keeps up to date a runtime that has this skill already (given to its builder, so that a recovery finds
    /// it): when the server's tools change, the runtime refreshes the skill on every agent that has it mounted.
    /// [`McpClient::attach`] adds the skill and does this too.
    pub fn follow(&self, runtime: &Runtime) {
        *lock(&self.inner.runtime) = Some(runtime.clone());
    }

    /// Lists the tools again now and rebuilds the skill; `true` when they changed.
    pub async fn refresh(&self) -> Result<bool, McpError> {
        resync(&self.inner).await
    }

    /// Tries again to reach a server reported down; does nothing otherwise.
    pub fn reconnect(&self) {
        if matches!(*self.inner.line.status.borrow(), ClientStatus::Down { .. }) {
            self.inner.retry.notify_one();
        }
    }

    /// Ends the connection (and a child-process server) and stops keeping the skill up to date. Runs fail
    /// from now on.
    pub fn close(&self) {
        self.inner.stop.cancel();
        self.inner.line.close();
    }
}

fn check_url(server: &str, url: &str) -> Result<(), McpError> {
    let bad =
        |reason: &str| McpError::BadUrl { server: server.to_owned(), url: url.to_owned(), reason: reason.to_owned() };
    let parsed =
        url::Url::parse(url).map_err(|e| bad(&format!("it does not parse ({e}); expected https://host/path")))?;
    match parsed.scheme() {
        "http" | "https" => Ok(()),
        other => Err(bad(&format!("scheme `{other}` is not MCP's; expected https:// or http://"))),
    }
}

/// Whether a URL's host is this machine, the only place a secret may go over plain `http`.
fn is_loopback(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(domain)) => domain.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// The headers, bearer token and roots of an HTTP server, with secrets read from the environment now. A secret
/// bound for a plain `http://` URL off this machine is refused, as is a variable that is not set or a name or
/// value HTTP cannot carry (a line break, say).
fn http_options(
    server: &McpServer,
    url: &str,
    headers: &[(String, Setting)],
    bearer_env: Option<&str>,
    oauth: bool,
) -> Result<adapter::HttpOptions, McpError> {
    let config = |message: String| McpError::Config { server: server.name.clone(), message };
    if oauth && bearer_env.is_some() {
        return Err(config(
            "both a bearer token (bearer_env) and OAuth are set; expected one, since a fixed token would be sent in \
             place of the one OAuth gets"
                .to_owned(),
        ));
    }
    let has_secret = oauth || bearer_env.is_some() || headers.iter().any(|(_, v)| matches!(v, Setting::Env(_)));
    let parsed = url::Url::parse(url).map_err(|e| config(format!("the URL does not parse: {e}")))?;
    if has_secret && parsed.scheme() == "http" && !is_loopback(&parsed) {
        return Err(config(format!(
            "a secret (a bearer token, a header from the environment, OAuth tokens) would go in the clear to `{}`; \
             expected an https:// URL, or plain http to localhost only",
            parsed.host_str().unwrap_or_default()
        )));
    }
    let mut resolved = Vec::with_capacity(headers.len());
    for (name, value) in headers {
        resolved.push((name.clone(), value.read(&server.name, &format!("the value of header `{name}`"))?));
    }
    let bearer =
        bearer_env.map(|var| Setting::Env(var.to_owned()).read(&server.name, "the bearer token")).transpose()?;
    adapter::HttpOptions::new(resolved, bearer).map_err(config)
}

/// OAuth settings with the client secret read from the environment now.
fn oauth_flow<'a>(server: &McpServer, config: &'a OAuth) -> Result<adapter::OAuthFlow<'a>, McpError> {
    let client_secret =
        config.client_secret.as_ref().map(|secret| secret.read(&server.name, "the OAuth client secret")).transpose()?;
    Ok(adapter::OAuthFlow { config, client_secret })
}

/// Connects and does the handshake, within the server's connect timeout: a server that never answers is an
/// error, not a wait without end.
async fn open(server: &McpServer, list_changed: mpsc::UnboundedSender<()>) -> Result<Connection, McpError> {
    let endpoint = match &server.transport {
        McpTransport::Stdio { command, args, env, cwd } => Endpoint::Stdio { command, args, env, cwd: cwd.as_deref() },
        McpTransport::Http { url, headers, bearer_env, root_certificates, oauth } => {
            let options = http_options(server, url, headers, bearer_env.as_deref(), oauth.is_some())?;
            let oauth = oauth.as_ref().map(|config| oauth_flow(server, config)).transpose()?;
            Endpoint::Http { url, options, root_certificates, oauth }
        }
    };
    // Dropping an unfinished handshake drops its transport, which ends a child process.
    let within = server.connect_timeout;
    tokio::time::timeout(within, adapter::connect(&server.name, endpoint, server.protocol, list_changed))
        .await
        .map_err(|_| McpError::Handshake {
            server: server.name.clone(),
            message: format!("no answer to `initialize` within {}ms", within.as_millis()),
        })?
}

/// Lists every tool, within the server's connect timeout.
async fn list(server: &McpServer, connection: &Connection) -> Result<Vec<ToolDef>, McpError> {
    let error = |message: String| McpError::ListTools { server: server.name.clone(), message };
    let within = server.connect_timeout;
    match tokio::time::timeout(within, connection.list_tools()).await {
        Ok(listed) => listed.map_err(|e| error(e.to_string())),
        Err(_) => Err(error(format!("no answer to `tools/list` within {}ms", within.as_millis()))),
    }
}

/// Builds the skill for a tool list: one action per tool that can be one, the rest skipped with the reason.
fn build(
    line: &Arc<Line>,
    version: &str,
    identity: &adapter::ServerIdentity,
    tools: Vec<ToolDef>,
) -> Result<Built, String> {
    let server = &line.server;
    let skill_id = format!("mcp.{}", server.name);
    let mut skipped = Vec::new();
    let mut builder = Skill::builder(&skill_id, version)
        .name(identity.name.clone().unwrap_or_else(|| format!("MCP server {}", server.name)))
        .description(format!("The tools of the MCP server `{}`.", server.name))
        .category("mcp")
        .tag("mcp")
        .instructions(identity.instructions.clone().unwrap_or_default());
    let mut seen = std::collections::BTreeSet::new();
    builder = builder.dyn_action(elicitation_action(&server.name)?);
    for tool in &tools {
        let allowed = match server.refuses(&tool.name) {
            Some(reason) => Err(reason),
            None if tool.name == ELICITATION => {
                Err(format!("`{ELICITATION}` is the action that answers this server's elicitations"))
            }
            // Its schemas are the server's word: small, self-contained and cheap to check, or not compiled.
            None => super::schema_guard::check(&tool.input_schema)
                .map_err(|why| format!("its input schema is refused: {why}"))
                .and_then(|()| match &tool.output_schema {
                    Some(output) => {
                        super::schema_guard::check(output).map_err(|why| format!("its output schema is refused: {why}"))
                    }
                    None => Ok(()),
                }),
        };
        let action = allowed.and_then(|()| contract::action_spec(&server.name, tool, server.timeout, server.trust));
        let action = action.and_then(|spec| {
            if !seen.insert(spec.id.clone()) {
                return Err("another tool has the same name".to_owned());
            }
            let line = line.clone();
            let name = tool.name.clone();
            DynAction::new(spec, move |params, ctx| {
                let line = line.clone();
                let name = name.clone();
                Box::pin(async move { call(&line, &name, params, &ctx).await })
            })
            .map_err(|e| e.to_string())
        });
        match action {
            Ok(action) => builder = builder.dyn_action(action),
            Err(reason) => {
                tracing::warn!(server = %server.name, tool = %tool.name, %reason, "an MCP tool was skipped");
                skipped.push(SkippedTool { tool: tool.name.clone(), reason });
            }
        }
    }
    let skill = builder.build().map_err(|e| e.to_string())?;
    Ok(Built { tools, skipped, skill })
}

/// A server's log line or progress during a call, logged or reported by the run that made it. The server is
/// not trusted with the host's log: its line is tagged with its name, cut to one line of at most 2,000
/// characters, and at most a warning, whatever level it claimed.
fn pass_on(ctx: &ActionContext, server: &str, sent: adapter::FromServer) {
    match sent {
        adapter::FromServer::Log { level, message, fields } => {
            let line: String = message.chars().map(|c| if c.is_control() { ' ' } else { c }).take(2000).collect();
            ctx.log_with(level.min(agentry::action::LogLevel::Warning), format!("[mcp {server}] {line}"), fields);
        }
        adapter::FromServer::Progress { fraction, message } => ctx.progress(fraction, message),
        adapter::FromServer::Elicit(ask) => {
            let _ = ask.reply.send(Elicited::Decline);
        }
    }
}

/// The tool name kept for the action that answers a server's elicitations: `mcp.<server>.elicitation`.
pub const ELICITATION: &str = "elicitation";

/// The action a server's elicitation becomes: a high-risk run of the agent, so the default policy asks for
/// approval (journaled and announced like any). Approved, it answers with the form's defaults; denied, the
/// server is told `decline`.
fn elicitation_action(server: &str) -> Result<DynAction, String> {
    let spec = ActionSpec::new(
        format!("mcp.{server}.{ELICITATION}").as_str(),
        format!("Answers an elicitation of MCP server `{server}` with its form's defaults, once approved."),
    )
    .map_err(|e| e.to_string())?
    .risk(Risk::High)
    .params_schema(json!({
        "type": "object",
        "properties": {
            "message": {"type": "string", "description": "What the server asks."},
            "schema": {"type": "object", "description": "The form the server asks to be filled in."},
        },
        "required": ["message", "schema"],
    }));
    DynAction::new(spec, |params, _ctx| {
        Box::pin(async move { contract::form_defaults(&params["schema"]).map_err(ActionError::validation) })
    })
    .map_err(|e| e.to_string())
}

/// A server's elicitation during a call, asked of the agent as a run of `mcp.<server>.elicitation` nested in the
/// call: approved, the form's defaults are the answer; denied (or refused by the policy), `decline`; anything
/// else (the agent stopped, a required field without a default), `cancel`.
async fn approve_elicitation(ctx: &ActionContext, server: &str, ask: &adapter::Ask) -> Elicited {
    let params = json!({"message": ask.message, "schema": ask.schema});
    match ctx.call(format!("mcp.{server}.{ELICITATION}"), params).await {
        Ok(content) => Elicited::Accept(content),
        Err(error) if error.class() == agentry::action::ErrorClass::Denied => Elicited::Decline,
        Err(error) => {
            tracing::warn!(server, %error, "an elicitation was cancelled");
            Elicited::Cancel
        }
    }
}

/// One tool call as an action run: a lost connection is `transient` (the client is reconnecting), the
/// server's `invalid params` is `validation`, another JSON-RPC error is `critical`, and the result maps as
/// [`contract::output`] says.
async fn call(line: &Line, tool: &str, params: Value, ctx: &ActionContext) -> Result<Value, ActionError> {
    let server = &line.server.name;
    let arguments = contract::arguments(params)?;
    let Some(connection) = line.current().filter(|c| !c.is_closed()) else {
        let status = line.status.borrow().clone();
        return Err(match status {
            ClientStatus::Down { error } => {
                ActionError::transient(format!("MCP server `{server}` is down ({error}); it gave up reconnecting"))
            }
            ClientStatus::Closed => ActionError::cancelled(format!("the client of MCP server `{server}` is closed")),
            _ => ActionError::transient(format!("MCP server `{server}` is not connected; reconnecting")),
        });
    };
    // While the call runs, the server may ask for input (each ask is an approval on this agent), log and report
    // progress (the run logs and reports them in turn, so its own caller hears of them).
    let (_flight, mut from_server) = connection.in_flight();
    let call = connection.call(tool, arguments);
    tokio::pin!(call);
    let called = loop {
        tokio::select! {
            called = &mut call => break called,
            Some(sent) = from_server.recv() => match sent {
                adapter::FromServer::Elicit(ask) => {
                    let answer = approve_elicitation(ctx, server, &ask).await;
                    let _ = ask.reply.send(answer);
                }
                sent => pass_on(ctx, server, sent),
            },
        }
    };
    // What the server sent just before its result is passed on still; an ask that came too late is declined.
    drop(_flight);
    from_server.close();
    while let Ok(sent) = from_server.try_recv() {
        match sent {
            adapter::FromServer::Elicit(ask) => {
                let _ = ask.reply.send(Elicited::Decline);
            }
            sent => pass_on(ctx, server, sent),
        }
    }
    match called {
        Ok(result) => contract::output(tool, result),
        Err(CallError::Closed(why)) => {
            // Over HTTP the session can outlive a dead server; ending it makes the client reconnect.
            connection.close();
            Err(ActionError::transient(format!(
                "MCP server `{server}` went away during `{tool}` ({why}); reconnecting"
            )))
        }
        Err(CallError::Unauthorized(why)) => {
            // Not retried: another try would only ask the user to log in again.
            Err(ActionError::denied(format!("MCP server `{server}` refused `{tool}`: {why}")))
        }
        Err(err) if err.is_invalid_params() => {
            Err(ActionError::validation(format!("MCP server `{server}` refused the arguments of `{tool}`: {err}")))
        }
        Err(err @ CallError::Protocol { .. }) => {
            Err(ActionError::critical(format!("MCP server `{server}` failed `{tool}`: {err}")))
        }
        Err(err) => {
            Err(ActionError::transient(format!("MCP server `{server}` could not be asked for `{tool}`: {err}")))
        }
    }
}

/// Lists the tools and rebuilds the skill; when they changed, the attached runtime refreshes it.
async fn resync(inner: &Arc<Inner>) -> Result<bool, McpError> {
    let _one_at_a_time = inner.syncing.lock().await;
    let server = inner.line.server.name.clone();
    let connection = inner.line.current().ok_or_else(|| McpError::Closed(server.clone()))?;
    let tools = list(&inner.line.server, &connection).await?;
    let skill = {
        let mut built = lock(&inner.built);
        if built.tools == tools {
            return Ok(false);
        }
        *built = build(&inner.line, &inner.version, &inner.identity, tools)
            .map_err(|message| McpError::Skill { server: server.clone(), message })?;
        built.skill.clone()
    };
    let runtime = lock(&inner.runtime).clone();
    if let Some(runtime) = runtime {
        match runtime.refresh_skill(skill).await {
            Ok(failed) => {
                for (agent, err) in failed {
                    tracing::warn!(%agent, %err, server = %server, "an agent could not take the MCP server's new tools");
                }
            }
            Err(err) => tracing::error!(%err, server = %server, "the runtime could not refresh the MCP skill"),
        }
    }
    Ok(true)
}

/// The shortest time between two readings of a server's tool list prompted by `tools/list_changed`.
pub(crate) const MIN_RESYNC_INTERVAL: std::time::Duration = std::time::Duration::from_millis(500);

/// Keeps the client true to the server: re-lists on `tools/list_changed`, and reconnects when the connection
/// is lost. Ends when the client is closed or dropped; it holds the client only while it works, never while it
/// waits, so dropping the last handle ends it.
async fn supervise(weak: Weak<Inner>, mut changes: mpsc::UnboundedReceiver<()>) {
    // When the tools were last listed again: a server that says its list changed over and over gets it read at
    // most once per `MIN_RESYNC_INTERVAL`, each refresh covering every notice that came meanwhile.
    let mut last_resync: Option<tokio::time::Instant> = None;
    loop {
        let Some(inner) = weak.upgrade() else { return };
        let stop = inner.stop.clone();
        let connection = inner.line.current();
        drop(inner);
        let lost = async {
            match &connection {
                Some(c) => c.closed().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = stop.cancelled() => return,
            changed = changes.recv() => {
                if changed.is_none() { return }
                if let Some(last) = last_resync {
                    tokio::select! {
                        () = stop.cancelled() => return,
                        () = tokio::time::sleep_until(last + MIN_RESYNC_INTERVAL) => {}
                    }
                }
                while changes.try_recv().is_ok() {}
                last_resync = Some(tokio::time::Instant::now());
                let Some(inner) = weak.upgrade() else { return };
                if let Err(err) = resync(&inner).await {
                    tracing::warn!(%err, "an MCP server's new tool list could not be read");
                }
            }
            () = lost => {
                drop(connection);
                reconnect(&weak).await;
            }
        }
    }
}

/// Tries to reach the server again with backoff; on success the tools are listed again (they may have changed
/// while it was away). After the last try the server is reported down until [`McpClient::reconnect`].
async fn reconnect(weak: &Weak<Inner>) {
    let Some(inner) = weak.upgrade() else { return };
    let server = inner.line.server.clone();
    let (stop, retry, list_changed) = (inner.stop.clone(), inner.retry.clone(), inner.list_changed.clone());
    inner.line.set(None);
    drop(inner);
    loop {
        let policy = server.reconnect;
        let mut wait = policy.first;
        let mut last_error = String::from("no try was made");
        for attempt in 1..=policy.attempts.max(1) {
            let Some(inner) = weak.upgrade() else { return };
            inner.line.status.send_replace(ClientStatus::Reconnecting { attempt });
            drop(inner);
            tracing::info!(server = %server.name, attempt, "reconnecting to an MCP server");
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(wait) => {}
            }
            wait = (wait * 2).min(policy.max);
            let opened = tokio::select! {
                () = stop.cancelled() => return,
                opened = open(&server, list_changed.clone()) => opened,
            };
            match opened {
                Ok(connection) => {
                    let Some(inner) = weak.upgrade() else { return };
                    if stop.is_cancelled() {
                        // Closed while this try was under way: the new connection goes at once.
                        connection.close();
                        return;
                    }
                    inner.line.set(Some(Arc::new(connection)));
                    if let Err(err) = resync(&inner).await {
                        tracing::warn!(%err, server = %server.name, "the tools could not be listed after reconnecting");
                    }
                    inner.line.status.send_replace(ClientStatus::Connected);
                    return;
                }
                Err(err) => last_error = err.to_string(),
            }
        }
        tracing::error!(server = %server.name, error = %last_error, "an MCP server is down: every reconnection failed");
        match weak.upgrade() {
            Some(inner) => {
                inner.line.status.send_replace(ClientStatus::Down { error: last_error });
            }
            None => return,
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = retry.notified() => {}
        }
    }
}
