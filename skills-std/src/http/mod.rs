//! `http`: GET, POST, PUT and DELETE to hosts the agent's policy allows (capability `net` plus
//! [`Policy::allow_hosts`](agentry::policy::Policy::allow_hosts)), with headers, JSON or text bodies, a timeout
//! and a response size limit. Redirects are followed only to allowed hosts.
//!
//! Names are resolved first, and every address they resolve to must be public, unless the policy grants the
//! private network (`allow_private_network`) or names the address itself; the request then connects to the
//! addresses that were checked, so a name cannot resolve to one address for the check and another for the
//! connection (DNS rebinding). A redirect to another origin drops the credentials (`Authorization`, `Cookie`,
//! `Proxy-Authorization` and the headers named in `secret_headers`), and a redirect from `https` to `http` is
//! refused.

pub mod address;

use agentry::prelude::*;
use futures_util::future::BoxFuture;
use reqwest::{Method, StatusCode};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;
use url::Url;

/// The timeout of a request unless it sets one: 30 seconds.
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
/// The longest timeout a request may set: 5 minutes (the actions' own timeout is a little longer).
pub const MAX_TIMEOUT_MS: u64 = 300_000;
/// The largest response body accepted unless a request says otherwise: 1 MiB.
pub const DEFAULT_MAX_BYTES: u64 = 1024 * 1024;
/// How many redirects are followed at most.
pub const MAX_REDIRECTS: usize = 5;

/// The skill's per-agent settings, set as mount options.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// CA certificates (PEM text) trusted for `https` besides the system's, for services behind a private CA.
    pub extra_root_certificates: Vec<String>,
}

impl HttpConfig {
    /// The extra roots, parsed; a text that holds no PEM certificate, or a broken one, is a `validation` error
    /// naming it.
    fn roots(&self) -> Result<Vec<reqwest::Certificate>, ActionError> {
        let mut roots = Vec::new();
        for (i, pem) in self.extra_root_certificates.iter().enumerate() {
            roots.extend(crate::tls::pem_certificates(pem).map_err(|why| {
                ActionError::validation(format!(
                    "mount option `extra_root_certificates[{i}]` {why}; expected PEM text with `-----BEGIN \
                     CERTIFICATE-----` blocks"
                ))
            })?);
        }
        Ok(roots)
    }
}

/// What every request takes.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
pub struct RequestParams {
    /// The URL, `http` or `https`.
    pub url: String,
    /// Request headers. `Host` and the hop-by-hop headers (`Connection`, `Transfer-Encoding`, …) are refused:
    /// the client sets them.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// A JSON body (sent with `content-type: application/json`).
    #[serde(default)]
    pub json: Option<Value>,
    /// A text body (sent with `content-type: text/plain` unless a header says otherwise).
    #[serde(default)]
    pub text: Option<String>,
    /// How long to wait for the whole exchange, in milliseconds (default 30 s, at most 5 min).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// The largest response body accepted, in bytes (default 1 MiB; at most the policy's
    /// `limits.http_max_bytes`).
    #[serde(default)]
    pub max_bytes: Option<u64>,
    /// Follow redirects to allowed hosts (default true).
    #[serde(default)]
    pub follow_redirects: Option<bool>,
    /// Headers that carry secrets besides `Authorization`, `Cookie` and `Proxy-Authorization` (an API key
    /// header, say): they are dropped, like those, when a redirect leaves the original origin.
    #[serde(default)]
    pub secret_headers: Vec<String>,
}

/// What the server answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The URL that answered, after redirects.
    pub url: String,
    /// Response headers (names in lower case; repeated ones joined with `, `).
    pub headers: BTreeMap<String, String>,
    /// The body: JSON when the server said it is JSON, else text.
    pub body: Value,
}

/// Turns a host name into the addresses to connect to: the system's resolver unless one was set with
/// [`set_resolver`] (tests, or an application with DNS of its own).
pub trait Resolve: Send + Sync + 'static {
    /// The addresses `host` resolves to, each with `port`.
    fn resolve(&self, host: &str, port: u16) -> BoxFuture<'static, std::io::Result<Vec<SocketAddr>>>;
}

/// The system's resolver (`getaddrinfo` through tokio).
struct SystemResolver;

impl Resolve for SystemResolver {
    fn resolve(&self, host: &str, port: u16) -> BoxFuture<'static, std::io::Result<Vec<SocketAddr>>> {
        let host = host.to_owned();
        Box::pin(async move { Ok(tokio::net::lookup_host((host.as_str(), port)).await?.collect()) })
    }
}

fn resolver_slot() -> &'static RwLock<Arc<dyn Resolve>> {
    static RESOLVER: OnceLock<RwLock<Arc<dyn Resolve>>> = OnceLock::new();
    RESOLVER.get_or_init(|| RwLock::new(Arc::new(SystemResolver)))
}

/// Replaces the resolver the `http` skill uses in this process. Every address it returns is still checked
/// against the agent's policy, and the request connects to exactly those addresses.
pub fn set_resolver(resolver: Arc<dyn Resolve>) {
    *resolver_slot().write().unwrap_or_else(|poisoned| poisoned.into_inner()) = resolver;
}

fn resolver() -> Arc<dyn Resolve> {
    resolver_slot().read().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
}

/// The addresses a URL may be fetched from: its IP, or every address its name resolves to, each allowed by the
/// policy (see [`address::allowed`]); any refused address refuses the request.
async fn checked_addresses(url: &Url, ctx: &ActionContext) -> Result<Vec<SocketAddr>, ActionError> {
    let host = url.host_str().unwrap_or_default().trim_start_matches('[').trim_end_matches(']');
    let port = url.port_or_known_default().unwrap_or(80);
    let addresses = match host.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => resolver()
            .resolve(host, port)
            .await
            .map_err(|e| ActionError::transient(format!("the name `{host}` could not be resolved: {e}")))?,
    };
    if addresses.is_empty() {
        return Err(ActionError::transient(format!("the name `{host}` resolved to no address")));
    }
    for addr in &addresses {
        if let Err(range) = address::allowed(addr.ip(), ctx.policy()) {
            return Err(ActionError::denied(format!(
                "host `{host}` resolves to {}, which is {range}; expected a public address, or a policy that \
                 grants this one (`allow_private_network`, or the address itself in `allow_hosts`)",
                addr.ip()
            )));
        }
    }
    Ok(addresses)
}

/// A client that connects `url`'s host only to `addresses` (no DNS of its own, no proxy, no redirects), trusting
/// the system's roots and `roots` for `https`.
fn pinned_client(
    url: &Url,
    addresses: &[SocketAddr],
    roots: &[reqwest::Certificate],
) -> Result<reqwest::Client, ActionError> {
    crate::tls::install_provider();
    let mut builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .tls_certs_merge(roots.iter().cloned());
    if let Some(host) = url.host_str()
        && host.parse::<IpAddr>().is_err()
    {
        builder = builder.resolve_to_addrs(host, addresses);
    }
    builder.build().map_err(|e| ActionError::critical(format!("the HTTP client could not start: {e}")))
}

/// Headers that carry credentials, dropped when a redirect leaves the original origin.
const CREDENTIALS: [&str; 3] = ["authorization", "cookie", "proxy-authorization"];

fn allowed_url(text: &str, ctx: &ActionContext) -> Result<Url, ActionError> {
    let url = Url::parse(text).map_err(|e| ActionError::validation(format!("`url` {text:?} is not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ActionError::validation(format!(
            "`url` uses scheme `{}`; expected `http` or `https`",
            url.scheme()
        )));
    }
    let host = url.host_str().ok_or_else(|| ActionError::validation(format!("`url` {text:?} has no host")))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if !ctx.policy().host_allowed(host) {
        let allowed: Vec<&str> = ctx.policy().allow_hosts.iter().map(String::as_str).collect();
        return Err(ActionError::denied(format!(
            "host `{host}` is not on the agent's allowlist (allowed: {allowed:?}); add it with `Policy::allow_host`"
        )));
    }
    Ok(url)
}

/// A request error as an action error.
fn send_error(err: &reqwest::Error, timeout: Duration) -> ActionError {
    if err.is_timeout() {
        ActionError::Timeout { after: timeout }
    } else if err.is_builder() {
        ActionError::validation(format!("the request could not be built: {err}"))
    } else {
        ActionError::transient(format!("the request failed: {err}"))
    }
}

/// An answer that is not a success, as an action error: 401/403 denied, 408/429 and 5xx transient, other 4xx
/// invalid.
fn status_error(status: StatusCode, body: &Value) -> ActionError {
    let mut snippet = match body {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    if snippet.len() > 200 {
        let mut cut = 200;
        while !snippet.is_char_boundary(cut) {
            cut -= 1;
        }
        snippet.truncate(cut);
    }
    let message = format!("the server answered {status}: {snippet}");
    match status.as_u16() {
        401 | 403 => ActionError::denied(message),
        408 | 429 => ActionError::transient(message),
        500.. => ActionError::transient(message),
        _ => ActionError::validation(message),
    }
}

/// Reads the body up to `max` bytes.
async fn read_body(mut response: reqwest::Response, max: u64, timeout: Duration) -> Result<Vec<u8>, ActionError> {
    let too_big = |size: u64| {
        ActionError::validation(format!(
            "the response body is {size}+ bytes; expected at most {max} (raise `max_bytes`)"
        ))
    };
    if let Some(length) = response.content_length().filter(|l| *l > max) {
        return Err(too_big(length));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| send_error(&e, timeout))? {
        body.extend_from_slice(&chunk);
        if body.len() as u64 > max {
            return Err(too_big(body.len() as u64));
        }
    }
    Ok(body)
}

/// Headers a caller may not set: `Host` (the request goes to the host its URL names, which the policy checked,
/// never to another one on the same address) and the hop-by-hop headers of the connection itself, which the
/// client manages (RFC 9110 §7.6.1), so a request cannot be smuggled past the checks in them.
const REFUSED_HEADERS: [&str; 10] = [
    "host",
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "content-length",
    "expect",
];

fn refuse_headers(headers: &BTreeMap<String, String>) -> Result<(), ActionError> {
    match headers.keys().find(|name| REFUSED_HEADERS.iter().any(|refused| name.trim().eq_ignore_ascii_case(refused))) {
        Some(name) => Err(ActionError::denied(format!(
            "header `{name}` may not be set by a caller; expected none of {} (the client sets them itself)",
            REFUSED_HEADERS.join(", ")
        ))),
        None => Ok(()),
    }
}

async fn exchange(method: Method, params: RequestParams, ctx: &ActionContext) -> Result<Response, ActionError> {
    if params.json.is_some() && params.text.is_some() {
        return Err(ActionError::validation("both `json` and `text` are set; expected at most one body"));
    }
    let timeout_ms = params.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS);
    if timeout_ms == 0 || timeout_ms > MAX_TIMEOUT_MS {
        return Err(ActionError::validation(format!("`timeout_ms` is {timeout_ms}; expected 1 to {MAX_TIMEOUT_MS}")));
    }
    let timeout = Duration::from_millis(timeout_ms);
    let ceiling = ctx.policy().limits.http_max_bytes;
    let max = params.max_bytes.unwrap_or(DEFAULT_MAX_BYTES.min(ceiling));
    if max > ceiling {
        return Err(ActionError::denied(format!(
            "`max_bytes` is {max}; the agent's policy allows at most {ceiling} (`limits.http_max_bytes`)"
        )));
    }
    refuse_headers(&params.headers)?;
    let roots = ctx.skill_state::<HttpConfig>()?.roots()?;
    let mut url = allowed_url(&params.url, ctx)?;
    let origin = url.origin();
    let mut headers = params.headers.clone();
    let mut method = method;
    let mut with_body = true;
    let exchange = async {
        for _ in 0..=MAX_REDIRECTS {
            let addresses = checked_addresses(&url, ctx).await?;
            let client = pinned_client(&url, &addresses, &roots)?;
            let mut request = client.request(method.clone(), url.clone());
            // A request that may change something carries the run's idempotency key, stable across a restart of
            // the process, so a server that de-duplicates sees a repeat as one (unless the caller set its own).
            if method != Method::GET
                && method != Method::HEAD
                && !headers.keys().any(|k| k.eq_ignore_ascii_case("idempotency-key"))
            {
                request = request.header("idempotency-key", ctx.idempotency_key());
            }
            for (name, value) in &headers {
                request = request.header(name, value);
            }
            if with_body {
                if let Some(json) = &params.json {
                    request = request.json(json);
                } else if let Some(text) = &params.text {
                    if !headers.keys().any(|k| k.eq_ignore_ascii_case("content-type")) {
                        request = request.header("content-type", "text/plain; charset=utf-8");
                    }
                    request = request.body(text.clone());
                }
            }
            let response = request.send().await.map_err(|e| send_error(&e, timeout))?;
            let status = response.status();
            let location = response.headers().get("location").and_then(|l| l.to_str().ok()).map(str::to_owned);
            if status.is_redirection()
                && params.follow_redirects.unwrap_or(true)
                && let Some(location) = location
            {
                let next = url.join(&location).map_err(|e| {
                    ActionError::validation(format!("the server redirected to {location:?}, not a URL: {e}"))
                })?;
                if url.scheme() == "https" && next.scheme() == "http" {
                    return Err(ActionError::denied(format!(
                        "the server redirected from `{url}` to `{next}`, from https down to http; refused so \
                         nothing sent over TLS goes out in the clear"
                    )));
                }
                let next = allowed_url(next.as_str(), ctx)?;
                if next.origin() != origin {
                    headers.retain(|name, _| {
                        let name = name.to_ascii_lowercase();
                        !CREDENTIALS.contains(&name.as_str())
                            && !params.secret_headers.iter().any(|secret| secret.eq_ignore_ascii_case(&name))
                    });
                }
                url = next;
                if matches!(status.as_u16(), 301..=303) && method != Method::HEAD {
                    method = Method::GET;
                    with_body = false;
                }
                continue;
            }
            return finish(response, max, timeout).await;
        }
        Err(ActionError::validation(format!("more than {MAX_REDIRECTS} redirects; expected fewer")))
    };
    tokio::time::timeout(timeout, exchange).await.map_err(|_| ActionError::Timeout { after: timeout })?
}

async fn finish(response: reqwest::Response, max: u64, timeout: Duration) -> Result<Response, ActionError> {
    let status = response.status();
    let url = response.url().to_string();
    let mut headers: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in response.headers() {
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        headers.entry(name.as_str().to_owned()).and_modify(|v| *v = format!("{v}, {value}")).or_insert(value);
    }
    let is_json = headers.get("content-type").is_some_and(|t| t.contains("json"));
    let bytes = read_body(response, max, timeout).await?;
    let body = match is_json.then(|| serde_json::from_slice::<Value>(&bytes)) {
        Some(Ok(json)) => json,
        _ => Value::String(String::from_utf8_lossy(&bytes).into_owned()),
    };
    if status.is_client_error() || status.is_server_error() {
        return Err(status_error(status, &body));
    }
    Ok(Response { status: status.as_u16(), url, headers, body })
}

macro_rules! verb {
    ($name:ident, $id:literal, $method:expr, $doc:literal, $($contract:tt)*) => {
        #[doc = $doc]
        #[derive(Debug, Deserialize, Serialize, JsonSchema, Action)]
        #[action(id = $id, output = Response, capabilities(net), category = remote, timeout = "6m", $($contract)*)]
        pub struct $name {
            /// The request.
            #[serde(flatten)]
            pub request: RequestParams,
        }

        impl $name {
            /// Sends the request and reads the answer.
            pub async fn run(self, ctx: ActionContext) -> Result<Response, ActionError> {
                exchange($method, self.request, &ctx).await
            }
        }
    };
}

verb!(Get, "http.get", Method::GET, "Fetches a URL.", idempotent);
verb!(
    Post,
    "http.post",
    Method::POST,
    "Sends data to a URL (not retried: it may not be idempotent).",
    side_effects,
    risk = medium
);
verb!(Put, "http.put", Method::PUT, "Stores data at a URL.", side_effects, idempotent, risk = medium);
verb!(Delete, "http.delete", Method::DELETE, "Deletes what a URL names.", side_effects, idempotent, risk = medium);

/// HTTP requests to hosts the agent's policy allows.
#[derive(Skill)]
#[skill(
    id = "http",
    name = "HTTP",
    version = "1.0.0",
    category = "network",
    tags("http", "web"),
    state = HttpConfig,
    actions(Get, Post, Put, Delete),
    instructions = "Only hosts on your policy's allowlist can be reached. A 5xx answer is a transient failure \
                    (GET, PUT and DELETE are retried); other 4xx answers fail with the server's message."
)]
pub struct Http;
