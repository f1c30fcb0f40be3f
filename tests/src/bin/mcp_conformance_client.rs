//! The client under test for the MCP conformance suite's client scenarios: `conformance client --command
//! <this binary>` starts it with the test server's URL as its last argument and the scenario's name in
//! `MCP_CONFORMANCE_SCENARIO`. It connects with agentry's own `McpClient`, mounts the server's tools on an agent
//! and does what the scenario asks through the agent's gate, as an application would. A server's elicitation is
//! an approval on the agent (`mcp.conformance.elicitation`, high risk); this client's operator approves each
//! one it sees. Exit code 0 when the scenario's steps ran, 1 (with the reason on stderr) when they did not or
//! the scenario is unknown.

use agentry::action::{Capability, Risk};
use agentry::events::EventKind;
use agentry::id::AgentId;
use agentry::pattern::Pattern;
use agentry::policy::Policy;
use agentry::runtime::{Runtime, SpawnOptions};
use agentry_skills::mcp::{McpClient, McpServer, OAuth, Setting};
use serde_json::{Value, json};
use std::error::Error;
use std::time::Duration;

/// The name the server's tools are mounted under: its actions are `mcp.conformance.<tool>`.
const SERVER: &str = "conformance";

/// Where the authorization server sends the user back; nothing listens there, since [`headless_login`] reads
/// the redirect itself.
const REDIRECT: &str = "http://localhost:3000/callback";

/// The client ID metadata document URL the suite's authorization servers accept.
const CLIENT_METADATA: &str = "https://conformance-test.local/client-metadata.json";

/// OAuth as an application would set it up, with the user's login done headless (the suite's authorization
/// servers approve at once) and the pre-registered client the scenario's context names, if any.
fn oauth() -> Result<OAuth, Box<dyn Error>> {
    let mut oauth = OAuth::new(REDIRECT, headless_login)
        .client_name("agentry-conformance-client")
        .client_metadata_url(CLIENT_METADATA);
    if let Ok(context) = std::env::var("MCP_CONFORMANCE_CONTEXT") {
        let context: Value = serde_json::from_str(&context)?;
        if let Some(id) = context["client_id"].as_str() {
            let secret = context["client_secret"].as_str().map(|s| Setting::Text(s.to_owned()));
            oauth = oauth.client(id, secret);
        }
    }
    Ok(oauth)
}

/// The user's login, headless: the authorization URL answers with a redirect to [`REDIRECT`], whose URL (with
/// the code) is the result.
async fn headless_login(url: String) -> Result<String, String> {
    agentry_skills::tls::install_provider();
    let http =
        reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().map_err(|e| e.to_string())?;
    let answer = http.get(&url).send().await.map_err(|e| e.to_string())?;
    let location = answer.headers().get("location").and_then(|v| v.to_str().ok());
    location
        .map(str::to_owned)
        .ok_or_else(|| format!("the authorization URL answered {} with no redirect", answer.status()))
}

#[tokio::main]
async fn main() {
    if let Err(err) = run().await {
        eprintln!("mcp_conformance_client: {err}");
        std::process::exit(1);
    }
}

async fn run() -> Result<(), Box<dyn Error>> {
    let url = std::env::args().next_back().filter(|a| a.starts_with("http")).ok_or("expected the server's URL last")?;
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").map_err(|_| "MCP_CONFORMANCE_SCENARIO is not set")?;
    let mut server = McpServer::http(SERVER, &url).timeout(Duration::from_secs(20));
    if scenario.starts_with("auth/") {
        server = server.oauth(oauth()?);
    }
    let calls: Vec<(&str, Value)> = match scenario.as_str() {
        // The handshake alone.
        "initialize" => Vec::new(),
        "tools_call" => vec![("add_numbers", json!({"a": 2, "b": 3}))],
        // The server ends the call's stream before the result: the client must come back for it.
        "sse-retry" => vec![("test_reconnection", json!({}))],
        // The server asks for a form whose fields all have defaults: approved, the defaults are the answer.
        "elicitation-sep1034-client-defaults" => vec![("test_client_elicitation_defaults", json!({}))],
        // The auth scenarios' servers have one tool, behind OAuth.
        auth if auth.starts_with("auth/") => vec![("test-tool", json!({}))],
        other => return Err(format!("scenario `{other}` is not one this client knows").into()),
    };
    let client = McpClient::connect(server).await?;
    let runtime = Runtime::builder().build();
    client.attach(&runtime)?;
    // The suite's tools carry no hints, so agentry takes them as risky open-world tools: this agent trusts
    // this one test server, on loopback.
    let mut policy = Policy::default().grant(Capability::NET);
    policy.risk_overrides.insert(Pattern::new(format!("mcp.{SERVER}.**"))?, Risk::Low);
    // But a server's elicitation is asked of the operator, as any approval.
    policy.risk_overrides.insert(Pattern::new(format!("mcp.{SERVER}.elicitation"))?, Risk::High);
    policy.allow_hosts.insert("*".to_owned());
    policy.allow_private_network = true;
    let agent = AgentId::new("conformance-client")?;
    let user = runtime.spawn((), SpawnOptions { id: Some(agent.clone()), policy, ..SpawnOptions::default() }).await?;
    user.mount(client.skill().id(), Value::Null).await?;
    // The operator: approves every run the agent asks approval for, and says so. Every event goes to stderr,
    // which the suite shows for a scenario that failed: how far its runs got.
    let mut events = runtime.events();
    let operator = user.clone();
    tokio::spawn(async move {
        loop {
            let event = match events.recv().await {
                Ok(event) => event,
                // Events it missed are gone, but an approval asked later must still be given.
                Err(tokio::sync::broadcast::error::RecvError::Lagged(missed)) => {
                    eprintln!("the operator missed {missed} events");
                    continue;
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
            };
            eprintln!("{} event {:?} (run {:?})", event.at.format("%H:%M:%S%.3f"), event.kind, event.run);
            if let (EventKind::ApprovalAsked { action, .. }, Some(run)) = (&event.kind, event.run) {
                eprintln!("approving {action} (run {run})");
                if let Err(err) = operator.approve(run).await {
                    eprintln!("the approval failed: {err}");
                }
            }
        }
    });
    let mut failed = Vec::new();
    for (tool, params) in calls {
        let action = format!("mcp.{SERVER}.{tool}");
        match runtime.invoke(&agent, &action, params).await {
            Ok(outcome) => match outcome.error {
                None => eprintln!("{action} → {}", outcome.output_text()),
                Some(error) => failed.push(format!("{action} failed ({:?}): {}", error.class, error.message)),
            },
            Err(refused) => failed.push(format!("{action} was refused: {refused}")),
        }
    }
    client.close();
    runtime.shutdown(Duration::from_secs(1)).await;
    if failed.is_empty() { Ok(()) } else { Err(failed.join("; ").into()) }
}
