//! The `http` skill over real TLS on loopback: a server with a self-signed certificate is reached only when the
//! agent's mount options trust that certificate, and a redirect from that `https` server down to plain `http`
//! is refused before anything is sent in the clear.

use agentry::action::Capability;
use agentry::policy::Policy;
use agentry::skill::SkillDefinition;
use agentry_skills::Http;
use agentry_tests::Operated;
use agentry_tests::tls::TlsListener;
use axum::Router;
use axum::http::HeaderMap;
use axum::response::Redirect;
use axum::routing::get;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use tokio::net::TcpListener;

/// What the plain-`http` server saw: how many requests, and the last `authorization` header.
#[derive(Default)]
struct Plain {
    hits: AtomicU32,
}

/// Starts a plain HTTP server counting its hits, and an HTTPS server for `localhost` whose `/down` redirects to
/// it. Returns the HTTPS base URL, the certificate's PEM and the plain server's counter.
async fn servers() -> (String, String, Arc<Plain>) {
    let plain = Arc::new(Plain::default());
    let counted = plain.clone();
    let app = Router::new().route(
        "/",
        get(move |_: HeaderMap| async move {
            counted.hits.fetch_add(1, Ordering::SeqCst);
            "in the clear"
        }),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let plain_addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });

    let (listener, port, pem) = TlsListener::localhost().await;
    let secure = Router::new()
        .route("/hello", get(|| async { "over tls" }))
        .route("/down", get(move || async move { Redirect::to(&format!("http://{plain_addr}/")) }));
    tokio::spawn(async move { axum::serve(listener, secure).await });
    (format!("https://localhost:{port}"), pem, plain)
}

async fn agent(options: Value) -> Operated {
    let policy = Policy::default()
        .grant(Capability::NET)
        .allow_host("localhost")
        .allow_host("127.0.0.1")
        .allow_private_network(true)
        .approval_at(None);
    Operated::start(vec![Http::skill().unwrap()], policy, &[("http", options)]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_certificate_is_reached_and_an_untrusted_one_is_not() {
    let (base, pem, _) = servers().await;
    let trusting = agent(json!({"extra_root_certificates": [pem]})).await;
    let got = trusting.output("http.get", json!({"url": format!("{base}/hello")})).await;
    assert_eq!((got["status"].clone(), got["body"].clone()), (json!(200), json!("over tls")));

    let stranger = agent(Value::Null).await;
    let (class, message) = stranger.failure("http.get", json!({"url": format!("{base}/hello")})).await;
    assert_eq!(class, "transient", "{message}");
    assert!(message.contains("request failed"), "the handshake fails: {message}");

    let (class, message) = agent(json!({"extra_root_certificates": ["not a certificate"]}))
        .await
        .failure("http.get", json!({"url": format!("{base}/hello")}))
        .await;
    assert_eq!(class, "validation");
    assert!(message.contains("extra_root_certificates[0]"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_from_https_down_to_http_is_refused_before_anything_is_sent() {
    let (base, pem, plain) = servers().await;
    let op = agent(json!({"extra_root_certificates": [pem]})).await;
    let params = json!({"url": format!("{base}/down"), "headers": {"authorization": "Bearer secret"}});
    let (class, message) = op.failure("http.get", params).await;
    assert_eq!(class, "denied", "{message}");
    assert!(message.contains("from https down to http"), "{message}");
    assert_eq!(plain.hits.load(Ordering::SeqCst), 0, "the plain server was never reached");
    let refused = op.run("http.get", json!({"url": format!("{base}/down"), "follow_redirects": false})).await;
    assert_eq!(refused["outcome"]["output"]["status"], 303, "not following it is fine: {refused:#}");
}
