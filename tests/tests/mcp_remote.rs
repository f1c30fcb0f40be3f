//! A remote MCP server for real: agentry's own MCP server behind TLS on loopback, with a self-signed certificate
//! and a gate that wants a bearer token and two headers. The client reaches it only when it trusts the
//! certificate and sends them, with the secrets read from environment variables; every way a secret could
//! leak or a header be forged is refused before anything is sent.

use agentry::action::{ActionSpec, DynAction};
use agentry::id::AgentId;
use agentry::runtime::{Runtime, SpawnOptions};
use agentry::skill::Skill;
use agentry_skills::mcp::{McpClient, McpError, McpServer};
use agentry_tests::tls::TlsListener;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::Response;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use tokio_util::sync::CancellationToken;

const TOKEN_VAR: &str = "AGENTRY_TEST_MCP_TOKEN";
const KEY_VAR: &str = "AGENTRY_TEST_MCP_KEY";
const FORGED_VAR: &str = "AGENTRY_TEST_MCP_FORGED";
const UNSET_VAR: &str = "AGENTRY_TEST_MCP_UNSET";

/// How many requests reached the server, and how many it let through.
#[derive(Default)]
struct Seen {
    requests: AtomicU32,
    admitted: AtomicU32,
}

/// An agent with one tool, served over HTTPS for `localhost`, admitting only requests with the right bearer
/// token, `x-tenant: acme` and `x-api-key: k3y`. Returns the URL, the certificate's PEM and what it saw.
async fn serve() -> (String, String, Arc<Seen>, CancellationToken) {
    let echo = ActionSpec::new("remote.echo", "Echoes.").unwrap();
    let skill = Skill::builder("remote", "1.0.0")
        .dyn_action(DynAction::new(echo, |params, _| Box::pin(async move { Ok(params) })).unwrap())
        .build()
        .unwrap();
    let runtime = Runtime::builder().skill(skill).build();
    let agent = AgentId::new("remote").unwrap();
    let served = runtime.spawn((), SpawnOptions { id: Some(agent.clone()), ..Default::default() }).await.unwrap();
    served.mount(&"remote".parse().unwrap(), Value::Null).await.unwrap();
    let seen = Arc::new(Seen::default());
    let stop = CancellationToken::new();
    let counted = seen.clone();
    let gate = move |request: Request, next: Next| {
        let seen = counted.clone();
        async move {
            seen.requests.fetch_add(1, Ordering::SeqCst);
            let admitted = {
                let header = |name: &str| request.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
                header("authorization").as_deref() == Some("Bearer s3cret")
                    && header("x-tenant").as_deref() == Some("acme")
                    && header("x-api-key").as_deref() == Some("k3y")
            };
            if !admitted {
                return Err(StatusCode::UNAUTHORIZED);
            }
            seen.admitted.fetch_add(1, Ordering::SeqCst);
            Ok::<Response, StatusCode>(next.run(request).await)
        }
    };
    let router =
        agentry_skills::mcp::http_router(&runtime, &agent, stop.clone()).layer(axum::middleware::from_fn(gate));
    let (listener, port, pem) = TlsListener::localhost().await;
    let stopping = stop.clone();
    tokio::spawn(async move {
        axum::serve(listener, router).with_graceful_shutdown(async move { stopping.cancelled().await }).await
    });
    (format!("https://localhost:{port}/mcp"), pem, seen, stop)
}

fn config_error(result: Result<McpClient, McpError>) -> String {
    match result {
        Err(err @ McpError::Config { .. }) => err.to_string(),
        other => panic!("expected a configuration error, got {other:?}"),
    }
}

/// Set in the child process that runs the client with its environment.
const CHILD: &str = "AGENTRY_TEST_MCP_REMOTE_CHILD";

/// Runs [`the_client_side`] in a child process of this test binary with the secrets in its environment (a test
/// never changes its own process's environment while other threads may read it).
#[test]
fn an_https_server_with_a_bearer_token_and_headers_from_the_environment() {
    let exe = std::env::current_exe().expect("the test binary");
    let output = std::process::Command::new(exe)
        .args(["--exact", "the_client_side", "--ignored", "--nocapture"])
        .env(CHILD, "1")
        .env(TOKEN_VAR, "s3cret")
        .env(KEY_VAR, "k3y")
        .env(FORGED_VAR, "k3y\r\nx-admin: yes")
        .env_remove(UNSET_VAR)
        .output()
        .expect("the child runs");
    let report = format!("{}\n{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "the client side failed:\n{report}");
    assert!(report.contains("1 passed"), "the client side ran:\n{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by an_https_server_with_a_bearer_token_and_headers_from_the_environment, with its environment"]
async fn the_client_side() {
    assert!(
        std::env::var_os(CHILD).is_some(),
        "run through an_https_server_with_a_bearer_token_and_headers_from_the_environment"
    );
    let (url, pem, seen, stop) = serve().await;
    let server = || McpServer::http("remote", &url).bearer_env(TOKEN_VAR).header("X-Tenant", "acme");

    // Everything right: the tool is mounted and runs.
    let client = McpClient::connect(server().header_env("X-Api-Key", KEY_VAR).root_certificate(&pem))
        .await
        .expect("the client reaches the HTTPS server");
    let runtime = Runtime::builder().build();
    client.attach(&runtime).unwrap();
    let agent = runtime
        .spawn(
            (),
            SpawnOptions {
                policy: agentry::policy::Policy::default().grant(agentry::action::Capability::NET),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    agent.mount(&"mcp.remote".parse().unwrap(), Value::Null).await.unwrap();
    let outcome = runtime.invoke(agent.id(), "mcp.remote.remote-echo", json!({"say": "hi"})).await.unwrap();
    assert_eq!(outcome.output, json!({"say": "hi"}), "{outcome:?}");
    client.close();
    let admitted = seen.admitted.load(Ordering::SeqCst);
    assert!(admitted >= 2, "the handshake and the call went through the gate: {admitted}");

    // From here on each client sends a wrong key, so any request of theirs that reached the server would be
    // refused and counted (the closed client's session end may still arrive, admitted).
    let refused = || seen.requests.load(Ordering::SeqCst) - seen.admitted.load(Ordering::SeqCst);

    // A certificate the client does not trust: the handshake fails, nothing reaches the server.
    let err = McpClient::connect(server().header("X-Api-Key", "wrong")).await.unwrap_err();
    assert!(matches!(err, McpError::Handshake { .. }), "{err}");
    assert_eq!(refused(), 0, "no request crossed an untrusted TLS handshake");

    // The wrong key over TLS it trusts: the server refuses, and the client says so.
    let err = McpClient::connect(server().header("X-Api-Key", "wrong").root_certificate(&pem)).await.unwrap_err();
    assert!(matches!(err, McpError::Handshake { .. }), "{err}");
    let before = refused();
    assert!(before > 0, "the server refused the wrong key");

    // Refused before anything is sent: an unset variable, a forged header, a secret in the clear off this
    // machine, a certificate that is not one.
    let server = || server().header("X-Api-Key", "wrong");
    let err =
        config_error(McpClient::connect(server().header_env("X-Api-Key", UNSET_VAR).root_certificate(&pem)).await);
    assert!(err.contains(UNSET_VAR) && err.contains("not set"), "{err}");
    let err =
        config_error(McpClient::connect(server().header_env("X-Api-Key", FORGED_VAR).root_certificate(&pem)).await);
    assert!(err.contains("cannot carry"), "{err}");
    assert!(!err.contains("x-admin"), "the secret's value is not echoed: {err}");
    let err = config_error(McpClient::connect(server().header("Bad Header", "x").root_certificate(&pem)).await);
    assert!(err.contains("not an HTTP header name"), "{err}");
    let clear = McpServer::http("remote", "http://example.invalid/mcp").bearer_env(TOKEN_VAR);
    let err = config_error(McpClient::connect(clear).await);
    assert!(err.contains("in the clear"), "{err}");
    let err = config_error(McpClient::connect(server().root_certificate("not a certificate")).await);
    assert!(err.contains("root certificate 0"), "{err}");
    assert_eq!(refused(), before, "none of these sent a request");
    stop.cancel();
}
