//! The `http` skill through a real runtime against a real HTTP server on loopback: success, JSON and text
//! bodies, headers, 404, 500 as a transient error (retried only where the action allows), a timeout, a body
//! over the limit, hosts not on the allowlist, and redirects.

use agentry::action::Capability;
use agentry::policy::Policy;
use agentry::skill::SkillDefinition;
use agentry_skills::Http;
use agentry_tests::{McpWire, Operated};
use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Redirect};
use axum::routing::{any, get};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

#[derive(Default)]
struct Hits {
    boom: AtomicU32,
    any: AtomicU32,
}

async fn echo(method: Method, headers: HeaderMap, body: String) -> Json<Value> {
    let header = headers.get("x-agent").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let content_type = headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let key = headers.get("idempotency-key").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    Json(json!({"method": method.as_str(), "body": body, "x-agent": header, "content-type": content_type,
                "idempotency-key": key}))
}

/// Starts the test server on a free loopback port.
async fn server() -> (SocketAddr, Arc<Hits>) {
    let hits = Arc::new(Hits::default());
    let app = Router::new()
        .route("/json", get(|| async { Json(json!({"hello": "world"})) }))
        .route("/text", get(|| async { "plain words" }))
        .route("/echo", any(echo))
        .route("/missing", get(|| async { (StatusCode::NOT_FOUND, "no such page") }))
        .route(
            "/boom",
            any(|State(hits): State<Arc<Hits>>| async move {
                hits.boom.fetch_add(1, Ordering::SeqCst);
                (StatusCode::INTERNAL_SERVER_ERROR, "it broke").into_response()
            }),
        )
        .route("/slow", any(std::future::pending::<&'static str>))
        .route("/big", get(|| async { "x".repeat(64 * 1024) }))
        .route("/hop", get(|| async { Redirect::to("/json") }))
        .route("/away", get(|| async { Redirect::to("http://localhost:9/json") }))
        .route(
            "/count",
            any(|State(hits): State<Arc<Hits>>| async move {
                hits.any.fetch_add(1, Ordering::SeqCst);
                "counted"
            }),
        )
        .with_state(hits.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, hits)
}

async fn http() -> (Operated, String, Arc<Hits>) {
    let (addr, hits) = server().await;
    let policy = Policy::default().grant(Capability::NET).allow_host("127.0.0.1").approval_at(None);
    let op = Operated::start(vec![Http::skill().unwrap()], policy, &[]).await;
    (op, format!("http://{addr}"), hits)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn successful_requests_carry_headers_and_json_or_text_bodies() {
    let (op, base, _) = http().await;
    let got = op.output("http.get", json!({"url": format!("{base}/json")})).await;
    assert_eq!((got["status"].clone(), got["body"].clone()), (json!(200), json!({"hello": "world"})));
    assert!(got["headers"]["content-type"].as_str().unwrap().contains("application/json"));
    let got = op.output("http.get", json!({"url": format!("{base}/text")})).await;
    assert_eq!(got["body"], "plain words");

    let posted = op
        .output("http.post", json!({"url": format!("{base}/echo"), "json": {"n": 1}, "headers": {"x-agent": "op"}}))
        .await;
    assert_eq!(posted["body"]["method"], "POST");
    assert_eq!(posted["body"]["body"], r#"{"n":1}"#);
    assert_eq!(posted["body"]["x-agent"], "op");
    assert_eq!(posted["body"]["content-type"], "application/json");
    let put = op.output("http.put", json!({"url": format!("{base}/echo"), "text": "hello"})).await;
    assert_eq!((put["body"]["method"].clone(), put["body"]["body"].clone()), (json!("PUT"), json!("hello")));
    assert!(put["body"]["content-type"].as_str().unwrap().starts_with("text/plain"));
    let deleted = op.output("http.delete", json!({"url": format!("{base}/echo")})).await;
    assert_eq!(deleted["body"]["method"], "DELETE");
    // Requests that may change something carry the run's idempotency key (the agent's id and input number).
    let keys: Vec<&str> =
        [&posted, &put, &deleted].iter().map(|r| r["body"]["idempotency-key"].as_str().unwrap()).collect();
    assert!(keys.iter().all(|k| k.starts_with("operator~")), "{keys:?}");
    assert!(keys[0] != keys[1] && keys[1] != keys[2], "one key per run: {keys:?}");
    let got = op.output("http.get", json!({"url": format!("{base}/echo")})).await;
    assert_eq!(got["body"]["idempotency-key"], "", "a GET changes nothing and carries no key");
    let own = json!({"url": format!("{base}/echo"), "json": {}, "headers": {"Idempotency-Key": "mine"}});
    assert_eq!(op.output("http.post", own).await["body"]["idempotency-key"], "mine", "the caller's key stands");
    let hopped = op.output("http.get", json!({"url": format!("{base}/hop")})).await;
    assert_eq!(
        (hopped["url"].clone(), hopped["body"].clone()),
        (json!(format!("{base}/json")), json!({"hello": "world"}))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_answers_are_classified_and_only_safe_requests_are_retried() {
    let (op, base, hits) = http().await;
    let (class, message) = op.failure("http.get", json!({"url": format!("{base}/missing")})).await;
    assert_eq!(class, "validation");
    assert!(message.contains("404") && message.contains("no such page"), "{message}");

    let reply = op.run("http.get", json!({"url": format!("{base}/boom")})).await;
    assert_eq!(reply["outcome"]["error"]["class"], "transient", "{reply:#}");
    assert_eq!(reply["outcome"]["attempts"], 3, "a GET is retried");
    assert_eq!(hits.boom.load(Ordering::SeqCst), 3);
    let reply = op.run("http.post", json!({"url": format!("{base}/boom"), "json": {}})).await;
    assert_eq!(reply["outcome"]["error"]["class"], "transient");
    assert_eq!(hits.boom.load(Ordering::SeqCst), 4, "a POST runs exactly once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_answers_time_out_and_big_bodies_are_refused() {
    let (op, base, _) = http().await;
    let reply = op.run("http.post", json!({"url": format!("{base}/slow"), "timeout_ms": 200})).await;
    assert_eq!(reply["outcome"]["error"]["class"], "timeout", "{reply:#}");
    let (class, message) = op.failure("http.get", json!({"url": format!("{base}/big"), "max_bytes": 1000})).await;
    assert_eq!(class, "validation");
    assert!(message.contains("at most 1000"), "{message}");
    assert_eq!(
        op.output("http.get", json!({"url": format!("{base}/big")})).await["body"].as_str().unwrap().len(),
        65536
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosts_not_allowed_and_bad_requests_are_refused() {
    let (op, base, _) = http().await;
    let localhost = base.replace("127.0.0.1", "localhost");
    let (class, message) = op.failure("http.get", json!({"url": format!("{localhost}/json")})).await;
    assert_eq!(class, "denied");
    assert!(message.contains("`localhost` is not on the agent's allowlist"), "{message}");
    let (class, message) = op.failure("http.get", json!({"url": format!("{base}/away")})).await;
    assert_eq!(class, "denied", "a redirect to a host not allowed is refused: {message}");
    let (class, _) = op.failure("http.get", json!({"url": "ftp://127.0.0.1/file"})).await;
    assert_eq!(class, "validation");
    let (class, _) = op.failure("http.get", json!({"url": "not a url"})).await;
    assert_eq!(class, "validation");
    let (class, _) = op.failure("http.post", json!({"url": format!("{base}/echo"), "json": {}, "text": "both"})).await;
    assert_eq!(class, "validation");
    let (class, _) = op.failure("http.get", json!({"url": format!("{base}/json"), "timeout_ms": 0})).await;
    assert_eq!(class, "validation");

    // Without the `net` capability the gate refuses before any request.
    let no_net = Operated::start(vec![Http::skill().unwrap()], Policy::default().allow_host("127.0.0.1"), &[]).await;
    let (class, message) = no_net.failure("http.get", json!({"url": format!("{base}/json")})).await;
    assert_eq!(class, "denied");
    assert!(message.contains("net"), "{message}");
}

/// A resolver for this test process: `*.loop.test` names resolve to loopback, `rebind.test` answers a public
/// address first and loopback after (a DNS rebinding attack); every other name goes to the system's resolver.
struct Attacker {
    rebind_calls: AtomicU32,
}

impl agentry_skills::http::Resolve for Attacker {
    fn resolve(
        &self,
        host: &str,
        port: u16,
    ) -> futures_util::future::BoxFuture<'static, std::io::Result<Vec<std::net::SocketAddr>>> {
        let loopback: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
        let answer = if host.ends_with(".loop.test") {
            Ok(vec![loopback])
        } else if host == "mapped.loop6.test" {
            Ok(vec![std::net::SocketAddr::new("::ffff:127.0.0.1".parse().unwrap(), port)])
        } else if host == "rebind.test" {
            match self.rebind_calls.fetch_add(1, Ordering::SeqCst) {
                0 => Ok(vec![([198, 51, 100, 7], port).into()]),
                _ => Ok(vec![loopback]),
            }
        } else {
            let host = host.to_owned();
            return Box::pin(async move { Ok(tokio::net::lookup_host((host.as_str(), port)).await?.collect()) });
        };
        Box::pin(async move { answer })
    }
}

fn attacker() -> Arc<Attacker> {
    static ATTACKER: std::sync::OnceLock<Arc<Attacker>> = std::sync::OnceLock::new();
    ATTACKER
        .get_or_init(|| {
            let attacker = Arc::new(Attacker { rebind_calls: AtomicU32::new(0) });
            agentry_skills::http::set_resolver(attacker.clone());
            attacker
        })
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_that_resolves_to_a_private_address_is_refused_unless_granted() {
    let _attacker = attacker();
    let (addr, _) = server().await;
    let port = addr.port();
    let allowlisted = Policy::default().grant(Capability::NET).allow_host("*.loop.test").allow_host("*.loop6.test");
    let op = Operated::start(vec![Http::skill().unwrap()], allowlisted.clone().approval_at(None), &[]).await;
    for host in ["evil.loop.test", "mapped.loop6.test"] {
        let (class, message) = op.failure("http.get", json!({"url": format!("http://{host}:{port}/json")})).await;
        assert_eq!(class, "denied", "{host}: {message}");
        assert!(message.contains("loopback") || message.contains("IPv4-mapped"), "{message}");
    }
    // Cloud metadata, by address, is refused even with every host allowed.
    let any_host = Policy::default().grant(Capability::NET).allow_host("*").approval_at(None);
    let open = Operated::start(vec![Http::skill().unwrap()], any_host, &[]).await;
    let (class, message) = open.failure("http.get", json!({"url": "http://169.254.169.254/latest/meta-data/"})).await;
    assert_eq!(class, "denied", "{message}");
    assert!(message.contains("link-local"), "{message}");
    let (class, _) = open.failure("http.get", json!({"url": format!("http://[::1]:{port}/json")})).await;
    assert_eq!(class, "denied");

    // With the private network granted, the same name is fetched, from the address the check saw.
    let granted = allowlisted.allow_private_network(true).approval_at(None);
    let op = Operated::start(vec![Http::skill().unwrap()], granted, &[]).await;
    let got = op.output("http.get", json!({"url": format!("http://evil.loop.test:{port}/json")})).await;
    assert_eq!(got["body"], json!({"hello": "world"}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_that_rebinds_to_loopback_after_the_check_is_never_reached() {
    let attacker = attacker();
    let (addr, hits) = server().await;
    let policy = Policy::default().grant(Capability::NET).allow_host("rebind.test").approval_at(None);
    let op = Operated::start(vec![Http::skill().unwrap()], policy, &[]).await;
    let before = attacker.rebind_calls.load(Ordering::SeqCst);
    let url = format!("http://rebind.test:{}/boom", addr.port());
    let reply = op.run("http.post", json!({"url": url, "timeout_ms": 1500})).await;
    assert_ne!(reply["kind"], "action.completed", "{reply:#}");
    assert_eq!(hits.boom.load(Ordering::SeqCst), 0, "the loopback server was never reached");
    assert_eq!(attacker.rebind_calls.load(Ordering::SeqCst) - before, 1, "the name was resolved once, and pinned");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_are_dropped_when_a_redirect_leaves_the_origin() {
    // The same app on two ports: two origins on one host.
    let other = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let elsewhere = other.local_addr().unwrap();
    let names = |headers: HeaderMap| async move {
        let names: Vec<String> = headers.keys().map(|k| k.as_str().to_owned()).collect();
        Json(json!(names))
    };
    let app = Router::new()
        .route("/stay", get(|| async { Redirect::to("/echo-all") }))
        .route("/leave", get(move || async move { Redirect::to(&format!("http://{elsewhere}/echo-all")) }))
        .route("/echo-all", get(names));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = listener.local_addr().unwrap();
    let second = app.clone();
    tokio::spawn(async move { axum::serve(listener, app).await });
    tokio::spawn(async move { axum::serve(other, second).await });
    let policy = Policy::default().grant(Capability::NET).allow_host("127.0.0.1").approval_at(None);
    let op = Operated::start(vec![Http::skill().unwrap()], policy, &[]).await;
    let headers = json!({"authorization": "Bearer s3cret", "cookie": "session=1", "proxy-authorization": "Basic x",
                         "x-api-key": "k", "x-trace": "t"});
    let received = async |path: &str| {
        let params = json!({"url": format!("http://{origin}{path}"), "headers": headers,
                            "secret_headers": ["X-Api-Key"]});
        op.output("http.get", params).await["body"].as_array().unwrap().clone()
    };
    let names = received("/stay").await;
    assert!(names.contains(&json!("authorization")) && names.contains(&json!("x-api-key")), "{names:?}");
    let names = received("/leave").await;
    for secret in ["authorization", "cookie", "proxy-authorization", "x-api-key"] {
        assert!(!names.contains(&json!(secret)), "{secret} crossed to another origin: {names:?}");
    }
    assert!(names.contains(&json!("x-trace")), "other headers go on: {names:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_client_meets_the_same_ssrf_refusal() {
    let _attacker = attacker();
    let (addr, _) = server().await;
    let policy = Policy::default().grant(Capability::NET).allow_host("*.loop.test").approval_at(None);
    let op = Operated::start(vec![Http::skill().unwrap()], policy, &[]).await;
    let mut wire = McpWire::connect(&op).await;
    let url = format!("http://evil.loop.test:{}/json", addr.port());
    let (text, is_error) = wire.call_tool("http.get", json!({"url": url})).await;
    assert!(is_error, "{text}");
    assert!(text.contains("loopback"), "the client reads why: {text}");
}

/// A caller cannot aim a request at another virtual host than its URL names (`Host`), nor set the headers of
/// the connection itself (hop-by-hop: `Transfer-Encoding`, `Connection`, …), nor read more than the policy's
/// ceiling: each is refused before anything reaches the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smuggling_headers_and_oversized_reads_are_refused_before_anything_is_sent() {
    let (addr, hits) = server().await;
    let mut policy = Policy::default().grant(Capability::NET).allow_host("127.0.0.1").approval_at(None);
    policy.limits.http_max_bytes = 4096;
    let op = Operated::start(vec![Http::skill().unwrap()], policy, &[]).await;
    let url = format!("http://{addr}/count");
    for (name, value) in
        [("Host", "internal.example"), ("transfer-encoding", "chunked"), ("Connection", "upgrade"), ("TE", "trailers")]
    {
        let (class, message) =
            op.failure("http.post", json!({"url": url, "headers": {name: value}, "text": "x"})).await;
        assert_eq!(class, "denied", "{name}: {message}");
        assert!(message.contains(name), "{message}");
    }
    let (class, message) = op.failure("http.get", json!({"url": url, "max_bytes": 4097})).await;
    assert_eq!(class, "denied", "{message}");
    assert!(message.contains("limits.http_max_bytes"), "{message}");
    assert_eq!(hits.any.load(Ordering::SeqCst), 0, "a refused request reached the server");
    // Within the rules, the same request goes through.
    op.output("http.get", json!({"url": url, "max_bytes": 4096})).await;
    assert_eq!(hits.any.load(Ordering::SeqCst), 1);
}
