//! MCP servers mounted as skills, against real servers in real processes: the reference "everything" server from
//! the MCP project (installed from npm), and `mcp_test_server`, written with rmcp's server macros, over stdio
//! and streamable HTTP. Every run goes through a real runtime and agent.

use agentry::events::{Event, EventKind};
use agentry::id::{AgentId, SkillId};
use agentry::policy::Policy;
use agentry_skills::mcp::{ClientStatus, McpClient, McpServer, Reconnect};
use agentry_tests::{Operated, everything};
use serde_json::{Value, json};
use std::time::Duration;
use tokio::sync::broadcast::Receiver;

const TEST_SERVER: &str = env!("CARGO_BIN_EXE_mcp_test_server");

/// How long a test waits for an event or a status before it fails.
const WAIT: Duration = Duration::from_secs(60);

async fn wait_for(events: &mut Receiver<Event>, pred: impl Fn(&Event) -> bool) -> Event {
    tokio::time::timeout(WAIT, async {
        loop {
            match events.recv().await {
                Ok(event) if pred(&event) => return event,
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(e) => panic!("the event stream ended: {e}"),
            }
        }
    })
    .await
    .expect("the event arrives")
}

async fn wait_status(client: &McpClient, pred: impl Fn(&ClientStatus) -> bool) -> ClientStatus {
    let mut status = client.watch_status();
    let seen = tokio::time::timeout(WAIT, status.wait_for(|s| pred(s))).await.expect("the status arrives");
    seen.expect("the client is alive").clone()
}

/// A runtime whose operator agent has the server's skill mounted.
async fn operated(client: &McpClient) -> Operated {
    let op = Operated::start(vec![], Policy::default(), &[]).await;
    client.attach(&op.runtime).expect("the skill joins the catalog");
    op.agent.mount(client.skill().id(), Value::Null).await.expect("the skill mounts");
    op
}

/// The tests' own server, whose hints are taken as they are (the trust tests below mount it untrusted).
fn test_server(name: &str) -> McpServer {
    McpServer::stdio(name, TEST_SERVER, Vec::<String>::new()).trusted()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_everything_server_becomes_a_skill_whose_tools_run() {
    let script = everything::script();
    let server = McpServer::stdio("everything", "node", [script.to_string_lossy().into_owned(), "stdio".to_owned()])
        .env("AGENTRY_PROBE", "from-agentry")
        .timeout(Duration::from_secs(20))
        .trusted();
    let client = McpClient::connect(server).await.expect("the everything server starts and answers");

    let names: Vec<String> = client.tools().iter().map(|t| t.name.clone()).collect();
    for tool in ["echo", "get-sum", "get-tiny-image", "get-structured-content", "get-env"] {
        assert!(names.contains(&tool.to_owned()), "{tool} is listed: {names:?}");
    }
    let skill = client.skill();
    assert_eq!(skill.id().as_str(), "mcp.everything");
    let echo = skill.actions().iter().find(|a| a.spec().id.as_str() == "mcp.everything.echo").expect("echo");
    assert_eq!(echo.spec().params_schema["properties"]["message"]["type"], "string", "the server's schema is kept");
    assert!(!echo.spec().side_effects, "echo says it is read-only");
    assert!(echo.spec().capabilities.is_empty(), "echo says it is not open-world");

    let op = operated(&client).await;
    assert_eq!(op.output("mcp.everything.echo", json!({"message": "hi"})).await, json!("Echo: hi"));
    assert_eq!(op.output("mcp.everything.get-sum", json!({"a": 2, "b": 3})).await, json!("The sum of 2 and 3 is 5."));
    let weather = op.output("mcp.everything.get-structured-content", json!({"location": "Chicago"})).await;
    assert!(weather["temperature"].is_number() && weather["conditions"].is_string(), "{weather}");
    let image = op.output("mcp.everything.get-tiny-image", json!({})).await;
    let kinds: Vec<&str> = image.as_array().expect("mixed content").iter().filter_map(|b| b["type"].as_str()).collect();
    assert!(kinds.contains(&"image") && kinds.contains(&"text"), "{image}");
    let env = op.output("mcp.everything.get-env", json!({})).await;
    assert!(env.as_str().is_some_and(|text| text.contains("from-agentry")), "the child got its environment");

    // Bad arguments are refused by the server's own schema before anything is sent.
    let (class, message) = op.failure("mcp.everything.get-sum", json!({"a": "two", "b": 3})).await;
    assert_eq!(class, "validation");
    assert!(message.contains("/a"), "{message}");
    // A tool that outlives its timeout fails `timeout`.
    client.close();
    let quick = McpServer::stdio("everything2", "node", [script.to_string_lossy().into_owned(), "stdio".to_owned()])
        .timeout(Duration::from_millis(300))
        .trusted();
    let client = McpClient::connect(quick).await.expect("a second everything server starts");
    client.attach(&op.runtime).expect("a second skill joins");
    op.agent.mount(client.skill().id(), Value::Null).await.expect("it mounts");
    let (class, _) =
        op.failure("mcp.everything2.trigger-long-running-operation", json!({"duration": 30, "steps": 3})).await;
    assert_eq!(class, "timeout");
    client.close();
}

/// A server's last progress, sent just before its result, reaches the run before the result does, call after
/// call. (rmcp handles notifications on tasks of their own, which ran after the call had ended now and then, and
/// the run ended at 75%, say; the transport now passes them on as it reads them.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_servers_last_progress_before_its_result_is_never_lost() {
    use agentry::action::{Caller, CallerCan, CallerRequest};
    let script = everything::script();
    let server =
        McpServer::stdio("everything", "node", [script.to_string_lossy().into_owned(), "stdio".to_owned()]).trusted();
    let client = McpClient::connect(server).await.expect("the everything server starts and answers");
    let op = operated(&client).await;
    for call in 0..60 {
        let (caller, mut heard) = Caller::new(CallerCan::default());
        let params = json!({"duration": 0, "steps": 2});
        let outcome = op
            .runtime
            .invoke_with(op.agent.id(), "mcp.everything.trigger-long-running-operation", params, caller)
            .await
            .expect("the call runs");
        assert!(outcome.output.to_string().contains("completed"), "{:?}", outcome.output);
        let mut progress = Vec::new();
        while let Ok(request) = heard.try_recv() {
            if let CallerRequest::Progress { progress: fraction, .. } = request {
                progress.push(fraction);
            }
        }
        assert_eq!(progress, [0.5, 1.0], "call {call}: every step is heard before the end, in order");
    }
    client.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_follow_list_changed_and_every_page_is_listed() {
    let client = McpClient::connect(test_server("test")).await.expect("the test server starts");
    // The server lists three tools a page; all eight come through.
    let mut names: Vec<String> = client.tools().iter().map(|t| t.name.clone()).collect();
    names.sort();
    assert_eq!(names, ["add_tool", "echo", "fail", "hang", "measure", "pid", "remove_tool", "slow"]);
    assert_eq!(client.skill().version().to_string(), "1.2.3", "the server's version is the skill's");

    let op = operated(&client).await;
    let mut events = op.runtime.events();
    assert_eq!(op.output("mcp.test.add_tool", json!({"name": "extra"})).await, json!("added extra"));
    let refreshed = wait_for(&mut events, |e| matches!(e.kind, EventKind::SkillRefreshed { .. })).await;
    let EventKind::SkillRefreshed { skill, added, removed } = refreshed.kind else { unreachable!() };
    assert_eq!(skill, SkillId::new("mcp.test").unwrap());
    assert_eq!(added.iter().map(|a| a.as_str()).collect::<Vec<_>>(), ["mcp.test.extra"]);
    assert!(removed.is_empty());
    let agent = AgentId::new("operator").unwrap();
    let table = op.runtime.actions(&agent).await.unwrap();
    assert!(table.iter().any(|s| s.id.as_str() == "mcp.test.extra"));
    assert_eq!(op.output("mcp.test.extra", json!({})).await, json!("extra answers"));

    assert_eq!(op.output("mcp.test.remove_tool", json!({"name": "extra"})).await, json!("removed extra"));
    let refreshed = wait_for(&mut events, |e| matches!(e.kind, EventKind::SkillRefreshed { .. })).await;
    let EventKind::SkillRefreshed { removed, .. } = refreshed.kind else { unreachable!() };
    assert_eq!(removed.iter().map(|a| a.as_str()).collect::<Vec<_>>(), ["mcp.test.extra"]);
    let (class, message) = op.failure("mcp.test.extra", json!({})).await;
    assert_eq!(class, "denied");
    assert!(message.contains("not registered"), "{message}");
    client.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_errors_and_hung_tools_fail_and_the_connection_goes_on() {
    let client = McpClient::connect(test_server("test").timeout(Duration::from_millis(300))).await.unwrap();
    let op = operated(&client).await;

    let (class, message) = op.failure("mcp.test.fail", json!({"text": "the disk is on fire"})).await;
    assert_eq!(class, "reported", "the tool's own failure, a result a model can act on");
    assert!(message.contains("the disk is on fire"), "the server's text is kept: {message}");

    let reply = op.run("mcp.test.hang", json!({})).await;
    assert_eq!(reply["outcome"]["error"]["class"], "timeout");
    // A read-only tool is retried after a timeout (three attempts by default), and each attempt timed out.
    assert_eq!(reply["outcome"]["attempts"], 3, "{reply:#}");

    assert_eq!(op.output("mcp.test.echo", json!({"text": "still here"})).await, json!("still here"));
    client.close();
}

fn kill(pid: u32) {
    let status = std::process::Command::new("kill").args(["-9", &pid.to_string()]).status().expect("kill runs");
    assert!(status.success(), "the server process was killed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_run_fails_the_run_transient_and_the_client_reconnects() {
    let reconnect = Reconnect { attempts: 5, first: Duration::from_millis(20), max: Duration::from_millis(200) };
    let client = McpClient::connect(test_server("test").reconnect(reconnect)).await.unwrap();
    let op = operated(&client).await;
    let first: u32 = op.output("mcp.test.pid", json!({})).await.as_str().unwrap().parse().unwrap();
    assert_eq!(client.pid(), Some(first), "the client knows its child");

    let mut events = op.runtime.events();
    let agent = op.agent.clone();
    let slow = tokio::spawn(async move {
        let signal = agentry::signal::Signal::new("do", json!({"action": "mcp.test.slow", "params": {"ms": 600_000}}));
        agent.call(signal.unwrap(), agentry_tests::CALL).await
    });
    wait_for(
        &mut events,
        |e| matches!(&e.kind, EventKind::ActionStarted { action, .. } if action.as_str() == "mcp.test.slow"),
    )
    .await;
    kill(first);
    let reply = slow.await.unwrap().expect("the run ends rather than hanging");
    assert_eq!(reply["kind"], "action.failed");
    assert_eq!(reply["outcome"]["error"]["class"], "transient", "{reply:#}");
    assert_eq!(reply["outcome"]["attempts"], 1, "a side-effecting tool is not retried");

    wait_status(&client, |s| *s == ClientStatus::Connected && client.pid().is_some_and(|p| p != first)).await;
    let second: u32 = op.output("mcp.test.pid", json!({})).await.as_str().unwrap().parse().unwrap();
    assert_ne!(first, second, "a new server process answers");
    client.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_comes_back_is_reported_down_and_runs_fail_at_once() {
    let marker = tempfile::tempdir().unwrap();
    let started = marker.path().join("started");
    // A server that starts once: the second start exits at once.
    let script = r#"if [ -e "$1" ]; then echo "gone for good" >&2; exit 3; fi; touch "$1"; exec "$2""#;
    let server = McpServer::stdio(
        "flaky",
        "sh",
        [
            "-c".to_owned(),
            script.to_owned(),
            "sh".to_owned(),
            started.to_string_lossy().into_owned(),
            TEST_SERVER.to_owned(),
        ],
    )
    .reconnect(Reconnect { attempts: 3, first: Duration::from_millis(10), max: Duration::from_millis(40) })
    .trusted();
    let client = McpClient::connect(server).await.unwrap();
    let op = operated(&client).await;
    let pid: u32 = op.output("mcp.flaky.pid", json!({})).await.as_str().unwrap().parse().unwrap();
    kill(pid);
    let down = wait_status(&client, |s| matches!(s, ClientStatus::Down { .. })).await;
    let ClientStatus::Down { error } = down else { unreachable!() };
    assert!(error.contains("flaky"), "the error names the server: {error}");

    let (class, message) = op.failure("mcp.flaky.echo", json!({"text": "anyone?"})).await;
    assert_eq!(class, "transient");
    assert!(message.contains("is down"), "{message}");

    // Once the server can start again, asking the client to reconnect brings the tools back.
    std::fs::remove_file(&started).unwrap();
    client.reconnect();
    wait_status(&client, |s| *s == ClientStatus::Connected).await;
    assert_eq!(op.output("mcp.flaky.echo", json!({"text": "back"})).await, json!("back"));
    client.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_over_streamable_http_becomes_a_skill() {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(TEST_SERVER)
        .args(["--http", "127.0.0.1:0"])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the test server starts");
    let stdout = child.stdout.take().unwrap();
    let url =
        tokio::io::BufReader::new(stdout).lines().next_line().await.unwrap().expect("the server says where it is");

    let client =
        McpClient::connect(McpServer::http("web", url).trusted()).await.expect("the client connects over HTTP");
    assert_eq!(client.tools().len(), 8);
    let op = operated(&client).await;
    assert_eq!(op.output("mcp.web.echo", json!({"text": "over http"})).await, json!("over http"));
    let (class, _) = op.failure("mcp.web.fail", json!({"text": "nope"})).await;
    assert_eq!(class, "reported");
    client.close();
    child.kill().await.unwrap();
}

#[tokio::test]
async fn bad_configurations_are_typed_errors() {
    let err = McpClient::connect(McpServer::stdio("bad name", "true", Vec::<String>::new())).await.unwrap_err();
    assert!(err.to_string().contains("`bad name`"), "{err}");
    let err = McpClient::connect(McpServer::http("files", "ftp://example.invalid/mcp")).await.unwrap_err();
    assert!(err.to_string().contains("scheme `ftp` is not MCP's"), "{err}");
    let err = McpClient::connect(McpServer::stdio("ghost", "/nonexistent/mcp-server", Vec::<String>::new()))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("could not be started"), "{err}");
    // A process that exits at once never completes the handshake.
    let err = McpClient::connect(McpServer::stdio("quitter", "true", Vec::<String>::new())).await.unwrap_err();
    assert!(err.to_string().contains("handshake"), "{err}");
    // Nor does one that never answers: the connect timeout ends the wait.
    let mute = McpServer::stdio("mute", "sleep", ["600"]).connect_timeout(Duration::from_millis(300));
    let err = McpClient::connect(mute).await.unwrap_err();
    assert!(err.to_string().contains("no answer to `initialize` within 300ms"), "{err}");
    // Names are one id segment, so two servers' tools can never share an action id.
    let err = McpClient::connect(McpServer::stdio("a.b", TEST_SERVER, Vec::<String>::new())).await.unwrap_err();
    assert!(err.to_string().contains("has a dot"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_over_http_that_goes_away_and_comes_back_is_reconnected() {
    use tokio::io::AsyncBufReadExt;
    async fn start(address: &str) -> (tokio::process::Child, String) {
        let mut child = tokio::process::Command::new(TEST_SERVER)
            .args(["--http", address])
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the test server starts");
        let stdout = child.stdout.take().unwrap();
        let url = tokio::io::BufReader::new(stdout).lines().next_line().await.unwrap().expect("the server says where");
        (child, url)
    }
    let (mut first, url) = start("127.0.0.1:0").await;
    let address = url.trim_start_matches("http://").trim_end_matches("/mcp").to_owned();
    let reconnect = Reconnect { attempts: 200, first: Duration::from_millis(20), max: Duration::from_millis(100) };
    let client = McpClient::connect(McpServer::http("web", &url).reconnect(reconnect).trusted()).await.unwrap();
    let op = operated(&client).await;
    assert_eq!(op.output("mcp.web.echo", json!({"text": "one"})).await, json!("one"));

    first.kill().await.unwrap();
    let (class, message) = op.failure("mcp.web.slow", json!({"ms": 1})).await;
    assert_eq!(class, "transient", "{message}");
    wait_status(&client, |s| matches!(s, ClientStatus::Reconnecting { .. })).await;

    let (_second, _) = start(&address).await;
    wait_status(&client, |s| *s == ClientStatus::Connected).await;
    assert_eq!(op.output("mcp.web.echo", json!({"text": "two"})).await, json!("two"));
    client.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_policy_overrides_what_a_server_says_of_its_tools() {
    let client = McpClient::connect(test_server("test")).await.unwrap();
    let echo = client.skill().actions().iter().find(|a| a.spec().id.as_str() == "mcp.test.echo").unwrap().clone();
    assert_eq!(echo.spec().risk, agentry::action::Risk::Low, "the server says echo is read-only");
    let mut policy = Policy::default();
    policy.risk_overrides.insert(agentry::pattern::Pattern::new("mcp.test.**").unwrap(), agentry::action::Risk::High);
    policy.deny_actions.push(agentry::pattern::Pattern::new("mcp.test.add_tool").unwrap());
    let op = Operated::start(vec![], policy, &[]).await;
    client.attach(&op.runtime).unwrap();
    op.agent.mount(client.skill().id(), Value::Null).await.unwrap();

    // The operator replies only once a run ends, so ask from outside: the gate's answer comes back at once.
    let agent = AgentId::new("operator").unwrap();
    let refused = op.runtime.invoke(&agent, "mcp.test.echo", json!({"text": "hi"})).await.unwrap_err();
    assert!(matches!(refused, agentry::runtime::RuntimeError::NeedsApproval { .. }), "{refused}");
    let denied = op.runtime.invoke(&agent, "mcp.test.add_tool", json!({"name": "x"})).await.unwrap();
    assert_eq!(denied.error.unwrap().class, agentry::action::ErrorClass::Denied);
    client.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn structured_content_that_breaks_the_tools_output_schema_is_critical() {
    let client = McpClient::connect(test_server("shape")).await.expect("the test server starts");
    let measure = client.tools().iter().find(|t| t.name == "measure").cloned().expect("measure is listed");
    assert_eq!(measure.output_schema.as_ref().map(|s| s["required"].clone()), Some(json!(["celsius"])));
    let op = operated(&client).await;
    assert_eq!(op.output("mcp.shape.measure", json!({})).await, json!({"celsius": 21.5}), "a true answer passes");
    let (class, message) = op.failure("mcp.shape.measure", json!({"lie": true})).await;
    assert_eq!(class, "critical", "{message}");
    assert!(message.contains("/celsius") && message.contains("number"), "the validator says where and why: {message}");
    client.close();
}

/// The attack: the test server says `echo` is read-only and closed-world. Mounted untrusted (the default), that
/// claim buys nothing: medium risk, side effects, no retries, and `net` still needed, so an agent that was not
/// granted `net` cannot run it. The same tool from the same server marked trusted runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_server_cannot_talk_its_tools_down() {
    let client = McpClient::connect(McpServer::stdio("liar", TEST_SERVER, Vec::<String>::new())).await.unwrap();
    let echo = client.skill().actions().iter().find(|a| a.spec().id.as_str() == "mcp.liar.echo").unwrap().clone();
    let spec = echo.spec();
    assert_eq!((spec.risk, spec.side_effects, spec.idempotent), (agentry::action::Risk::Medium, true, false));
    assert!(spec.capabilities.contains(&agentry::action::Capability::NET), "an untrusted tool always needs net");
    let op = operated(&client).await;
    let (class, message) = op.failure("mcp.liar.echo", json!({"text": "hi"})).await;
    assert_eq!(class, "denied", "{message}");
    assert!(message.contains("net"), "{message}");
    client.close();

    let trusted = McpClient::connect(test_server("honest")).await.unwrap();
    let op = operated(&trusted).await;
    assert_eq!(op.output("mcp.honest.echo", json!({"text": "hi"})).await, json!("hi"));
    trusted.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_servers_allow_and_deny_lists_keep_tools_out() {
    let server = test_server("listed").allow_tools(["echo", "p*", "s*"]).deny_tools(["pid"]);
    let client = McpClient::connect(server).await.unwrap();
    let mounted: Vec<String> = client.skill().actions().iter().map(|a| a.spec().id.to_string()).collect();
    // Beside the action that answers the server's elicitations (not a tool of the server), only allowed tools,
    // minus denied ones.
    assert_eq!(mounted, ["mcp.listed.elicitation", "mcp.listed.echo", "mcp.listed.slow"]);
    let skipped = client.skipped();
    let reason = |tool: &str| skipped.iter().find(|s| s.tool == tool).map(|s| s.reason.clone()).unwrap_or_default();
    assert!(reason("pid").contains("deny_tools"), "{skipped:?}");
    assert!(reason("fail").contains("allow_tools"), "{skipped:?}");
    // A call to a tool kept out is refused at the gate: no such action.
    let op = operated(&client).await;
    let (class, _) = op.failure("mcp.listed.pid", json!({})).await;
    assert_eq!(class, "denied");
    client.close();
}

/// A server that answers every request `401` with a bearer challenge and serves no metadata: without OAuth the
/// handshake fails; with it, discovery fails, typed, and the user is never sent to log in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_wants_a_token_it_cannot_give_fails_authorization_typed() {
    use agentry_skills::mcp::{McpError, OAuth};
    use axum::response::IntoResponse;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let challenge = format!(r#"Bearer resource_metadata="{base}/.well-known/oauth-protected-resource/mcp""#);
    let app = axum::Router::new().fallback(move |request: axum::extract::Request| {
        let challenge = challenge.clone();
        async move {
            if request.uri().path().starts_with("/.well-known") {
                return axum::http::StatusCode::NOT_FOUND.into_response();
            }
            (axum::http::StatusCode::UNAUTHORIZED, [("www-authenticate", challenge)]).into_response()
        }
    });
    tokio::spawn(async move { axum::serve(listener, app).await });
    let url = format!("{base}/mcp");

    let err = McpClient::connect(McpServer::http("locked", &url)).await.unwrap_err();
    assert!(matches!(err, McpError::Handshake { .. }), "{err}");

    let asked = Arc::new(AtomicBool::new(false));
    let noted = asked.clone();
    let oauth = OAuth::new("http://127.0.0.1:1/callback", move |_url: String| {
        noted.store(true, Ordering::SeqCst);
        async { Err::<String, String>("no user here".to_owned()) }
    });
    let both = McpServer::http("locked", &url).bearer_env("AGENTRY_UNUSED_TOKEN").oauth(oauth.clone());
    let err = McpClient::connect(both).await.unwrap_err();
    assert!(matches!(err, McpError::Config { .. }) && err.to_string().contains("both a bearer token"), "{err}");
    let err = McpClient::connect(McpServer::http("locked", &url).oauth(oauth)).await.unwrap_err();
    assert!(matches!(err, McpError::Authorization { .. }), "{err}");
    assert!(!asked.load(Ordering::SeqCst), "nobody is sent to log in to a server whose metadata cannot be found");
}

/// Asking for 2026-07-28 gets it from a server that knows it (agentry's own) and falls back to 2025-11-25 with
/// one that does not (the everything server); the default asks for 2025-11-25. Tools run on each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_negotiates_2026_07_28_or_falls_back_to_2025_11_25() {
    use agentry::skill::SkillDefinition;
    use agentry_skills::mcp::Protocol;
    let served =
        Operated::start(vec![agentry_testkit::demo::Arithmetic::skill().unwrap()], Policy::default(), &[]).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://localhost:{}/mcp", listener.local_addr().unwrap().port());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let runtime = served.runtime.clone();
    tokio::spawn(async move {
        let agent = AgentId::new("operator").unwrap();
        agentry_skills::mcp::serve_http(&runtime, &agent, listener, async move {
            let _ = stopped.await;
        })
        .await
    });
    for (protocol, expected) in [(Protocol::V2026_07_28, "2026-07-28"), (Protocol::V2025_11_25, "2025-11-25")] {
        let client = McpClient::connect(McpServer::http("peer", &url).trusted().protocol(protocol)).await.unwrap();
        assert_eq!(client.protocol_version(), Some(expected));
        let op = operated(&client).await;
        assert_eq!(op.output("mcp.peer.arithmetic-add", json!({"a": 2, "b": 3})).await, json!(5.0), "{expected}");
        client.close();
    }
    let _ = stop.send(());

    let script = everything::script();
    let legacy = McpServer::stdio("everything", "node", [script.to_string_lossy().into_owned(), "stdio".to_owned()])
        .timeout(Duration::from_secs(20))
        .trusted()
        .protocol(Protocol::V2026_07_28);
    let client = McpClient::connect(legacy).await.expect("the everything server answers");
    assert_eq!(client.protocol_version(), Some("2025-11-25"), "a server of the initialize era is met on its own");
    let op = operated(&client).await;
    assert_eq!(op.output("mcp.everything.echo", json!({"message": "hi"})).await, json!("Echo: hi"));
    client.close();
}
