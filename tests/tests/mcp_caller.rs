//! A served call's way back to its MCP client, driven by rmcp's own client: where serving lets the client's user
//! approve, a risky tool is approved (or denied) by that user through elicitation and journaled like any
//! approval (by default the operator approves: see `who_approves.rs`); a run's log lines (its
//! own, `system.log`'s and those of the calls it makes) reach the client at or above the level it set; a run
//! asks the client's model and user only when the client said it can answer.

// rmcp marks logging deprecated because protocol 2026-07-28 drops it; the revisions agentry serves have it.
#![allow(deprecated)]

use agentry::action::{ActionSpec, Approver, DynAction, LogLevel, Risk, Sampling};
use agentry::events::EventKind;
use agentry::id::AgentId;
use agentry::policy::Policy;
use agentry::skill::{Skill, SkillDefinition};
use agentry::store::RunStatus;
use agentry_skills::System;
use agentry_skills::mcp::Served;
use agentry_tests::Operated;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult,
    ElicitationAction, ElicitationCapability, FormElicitationCapability, Implementation, LoggingLevel,
    LoggingMessageNotificationParam, SetLevelRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, RunningService};
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceError, ServiceExt};
use serde_json::json;
use tokio::sync::mpsc;

/// A client whose user answers every elicitation with `answer` (when it declares elicitation at all), and
/// which reports each elicitation's message and each log line.
struct User {
    elicits: bool,
    /// Never answers an elicitation (a user who walked away).
    hangs: bool,
    answer: ElicitationAction,
    asked: mpsc::UnboundedSender<String>,
    logged: mpsc::UnboundedSender<(LoggingLevel, String)>,
}

impl ClientHandler for User {
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let message = match request {
            ElicitRequestParams::FormElicitationParams { message, .. } => message,
            other => format!("{other:?}"),
        };
        let _ = self.asked.send(message);
        if self.hangs {
            std::future::pending::<()>().await;
        }
        let result = ElicitResult::new(self.answer.clone());
        Ok(if self.answer == ElicitationAction::Accept { result.with_content(json!({})) } else { result })
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.logged.send((params.level, params.data.as_str().unwrap_or_default().to_owned()));
    }

    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        if self.elicits {
            capabilities.elicitation =
                Some(ElicitationCapability::new().with_form(FormElicitationCapability::default()));
        }
        ClientConfig::new(capabilities, Implementation::new("agentry-tests", "0"))
    }
}

struct Heard {
    asked: mpsc::UnboundedReceiver<String>,
    logged: mpsc::UnboundedReceiver<(LoggingLevel, String)>,
}

/// A skill with a risky tool, a tool that logs at every level (and through `system.log`), and tools that ask
/// the caller's model and user.
fn desk() -> Skill {
    let shred =
        ActionSpec::new("desk.shred", "Shreds the papers on the desk.").unwrap().risk(Risk::High).side_effects(true);
    let chatty = ActionSpec::new("desk.chatty", "Logs at every level.").unwrap();
    let ask_model = ActionSpec::new("desk.ask_model", "Asks the caller's model.").unwrap();
    let ask_user = ActionSpec::new("desk.ask_user", "Asks the caller's user.").unwrap();
    Skill::builder("desk", "1.0.0")
        .dyn_action(DynAction::new(shred, |_, _| Box::pin(async { Ok(json!("shredded")) })).unwrap())
        .dyn_action(
            DynAction::new(chatty, |_, ctx| {
                Box::pin(async move {
                    ctx.log(LogLevel::Debug, "debug line");
                    ctx.log(LogLevel::Info, "info line");
                    ctx.log(LogLevel::Warning, "warning line");
                    // A call the run makes reaches the same caller.
                    ctx.call("system.log", json!({"message": "from system.log", "level": "error"})).await?;
                    ctx.call("system.log", json!({"message": "quiet system.log", "level": "info"})).await?;
                    ctx.log(LogLevel::Critical, "last line");
                    Ok(json!("logged"))
                })
            })
            .unwrap(),
        )
        .dyn_action(
            DynAction::new(ask_model, |_, ctx| {
                Box::pin(async move { Ok(json!(ctx.sample(Sampling::prompt("hello?", 10)).await?.text)) })
            })
            .unwrap(),
        )
        .dyn_action(
            DynAction::new(ask_user, |_, ctx| {
                Box::pin(async move {
                    let answer = ctx.elicit("Your name?", json!({"type": "object", "properties": {}})).await?;
                    Ok(serde_json::to_value(answer).unwrap())
                })
            })
            .unwrap(),
        )
        .build()
        .unwrap()
}

async fn agent() -> Operated {
    Operated::start(vec![System::skill().unwrap(), desk()], Policy::default(), &[]).await
}

fn operator() -> AgentId {
    AgentId::new("operator").unwrap()
}

/// A client on an in-memory byte stream to the served operator.
async fn connect(op: &Operated, elicits: bool, answer: ElicitationAction) -> (RunningService<RoleClient, User>, Heard) {
    connect_user(op, elicits, false, answer).await
}

async fn connect_user(
    op: &Operated,
    elicits: bool,
    hangs: bool,
    answer: ElicitationAction,
) -> (RunningService<RoleClient, User>, Heard) {
    let (ours, theirs) = tokio::io::duplex(64 * 1024);
    let runtime = op.runtime.clone();
    tokio::spawn(async move {
        let (reader, writer) = tokio::io::split(ours);
        // The client's user approves, for whatever risk: what these tests check is the way to and from it.
        let approver = Approver::Caller { ceiling: Risk::High };
        Served::new(&runtime, &operator()).approver(approver).io(reader, writer).await
    });
    let (asked_tx, asked) = mpsc::unbounded_channel();
    let (logged_tx, logged) = mpsc::unbounded_channel();
    let user = User { elicits, hangs, answer, asked: asked_tx, logged: logged_tx };
    let client = user.serve(theirs).await.expect("the client connects");
    (client, Heard { asked, logged })
}

async fn call(client: &RunningService<RoleClient, User>, tool: &str) -> Result<CallToolResult, ServiceError> {
    client.call_tool(CallToolRequestParams::new(tool.to_owned())).await
}

fn text(result: &CallToolResult) -> String {
    result.content.iter().filter_map(|c| c.as_text()).map(|t| t.text.clone()).collect::<Vec<_>>().join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_risky_tool_runs_once_the_clients_user_approves_it() {
    let op = agent().await;
    let mut events = op.runtime.events();
    let (client, mut heard) = connect(&op, true, ElicitationAction::Accept).await;
    let result = call(&client, "desk.shred").await.expect("the approved call completes");
    assert_eq!((result.is_error, text(&result)), (Some(false), "shredded".to_owned()));
    let asked = heard.asked.recv().await.expect("the user was asked");
    assert!(asked.contains("desk.shred") && asked.contains("risk High") && asked.contains("side effects"), "{asked}");

    // Asked and given like any approval: announced, and journaled as approved before it ran.
    let mut seen = Vec::new();
    while let Ok(event) = events.try_recv() {
        seen.push(event.kind);
    }
    assert!(seen.iter().any(|k| matches!(k, EventKind::ApprovalAsked { .. })), "{seen:?}");
    assert!(seen.iter().any(|k| matches!(k, EventKind::ApprovalGiven { approved: true, .. })), "{seen:?}");
    let runs = op.runtime.store().query(&agentry::store::RunQuery { agent: Some(operator()), ..Default::default() });
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].status(), RunStatus::Completed);
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_risky_tool_the_clients_user_declines_is_denied_and_never_runs() {
    for answer in [ElicitationAction::Decline, ElicitationAction::Cancel] {
        let op = agent().await;
        let (client, mut heard) = connect(&op, true, answer.clone()).await;
        let refused = call(&client, "desk.shred").await;
        let Err(ServiceError::McpError(error)) = refused else { panic!("expected a refusal, got {refused:?}") };
        assert_eq!(error.code.0, agentry_skills::mcp::REFUSED, "{answer:?}");
        assert_eq!(error.data.unwrap()["reason"], "denied", "{answer:?}");
        assert!(error.message.contains("denied by its approver"), "{}", error.message);
        heard.asked.recv().await.expect("the user was asked");
        let runs =
            op.runtime.store().query(&agentry::store::RunQuery { agent: Some(operator()), ..Default::default() });
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].status(), RunStatus::Blocked, "{answer:?}: denied, so it never ran");
        client.cancel().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_goes_away_while_asked_leaves_no_approval_waiting() {
    let op = agent().await;
    let mut events = op.runtime.events();
    let (client, mut heard) = connect_user(&op, true, true, ElicitationAction::Accept).await;
    let call = tokio::spawn(async move {
        let _ = client.call_tool(CallToolRequestParams::new("desk.shred")).await;
        client
    });
    heard.asked.recv().await.expect("the user was asked");
    // The user never answers; the client goes away.
    call.abort();
    let denied = agentry_tests::wait_for(&mut events, |e| matches!(e.kind, EventKind::ApprovalGiven { .. })).await;
    assert!(matches!(denied.kind, EventKind::ApprovalGiven { approved: false, .. }), "{denied:?}");
    // Blocked is announced once it is journaled.
    agentry_tests::wait_for(&mut events, |e| matches!(e.kind, EventKind::ActionBlocked { .. })).await;
    let runs = op.runtime.store().query(&agentry::store::RunQuery { agent: Some(operator()), ..Default::default() });
    assert_eq!(runs[0].status(), RunStatus::Blocked, "denied, never run");
}

/// A client that cannot elicit has no user to approve, whatever serving allows: its risky call waits for the
/// operator, and it is told so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_elicitation_a_risky_tool_waits_for_the_operator_and_nothing_is_asked() {
    let op = agent().await;
    let mut events = op.runtime.events();
    let (client, mut heard) = connect(&op, false, ElicitationAction::Accept).await;
    let call = tokio::spawn(async move { (call(&client, "desk.shred").await, client) });
    let (level, told) = heard.logged.recv().await.expect("the client is told");
    assert!(level == LoggingLevel::Notice && told.contains("operator"), "{level:?} {told}");
    let asked = agentry_tests::wait_for(&mut events, |e| matches!(e.kind, EventKind::ApprovalAsked { .. })).await;
    op.runtime.decide(&operator(), asked.run.unwrap(), false).await.unwrap();
    let (refused, client) = call.await.unwrap();
    let Err(ServiceError::McpError(error)) = refused else { panic!("expected a refusal, got {refused:?}") };
    assert_eq!(error.data.unwrap()["reason"], "denied");
    client.cancel().await.unwrap();
    assert!(heard.asked.recv().await.is_none(), "nobody was asked");
}

/// A client that goes away while its call waits for the operator leaves nothing waiting: the run is denied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_goes_away_while_the_operator_is_asked_leaves_no_approval_waiting() {
    let op = agent().await;
    let mut events = op.runtime.events();
    let (client, mut heard) = connect(&op, false, ElicitationAction::Accept).await;
    let call = tokio::spawn(async move {
        let _ = client.call_tool(CallToolRequestParams::new("desk.shred")).await;
        client
    });
    heard.logged.recv().await.expect("the client is told it waits");
    call.abort();
    let denied = agentry_tests::wait_for(&mut events, |e| matches!(e.kind, EventKind::ApprovalGiven { .. })).await;
    assert!(matches!(denied.kind, EventKind::ApprovalGiven { approved: false, .. }), "{denied:?}");
    agentry_tests::wait_for(&mut events, |e| matches!(e.kind, EventKind::ActionBlocked { .. })).await;
    let runs = op.runtime.store().query(&agentry::store::RunQuery { agent: Some(operator()), ..Default::default() });
    assert_eq!(runs[0].status(), RunStatus::Blocked, "denied, never run");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_lines_reach_the_client_at_or_above_the_level_it_set() {
    let op = agent().await;
    let (client, mut heard) = connect(&op, false, ElicitationAction::Accept).await;
    client.set_level(SetLevelRequestParams::new(LoggingLevel::Warning)).await.expect("the level is set");
    let result = call(&client, "desk.chatty").await.unwrap();
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    let mut lines = heard_all(&mut heard, 3).await;
    lines.sort();
    assert_eq!(lines, ["Critical: last line", "Error: from system.log", "Warning: warning line"]);
    // Nothing else arrives: once the client is gone, every line it got is in the channel.
    client.cancel().await.unwrap();
    assert_eq!(heard.logged.recv().await, None, "nothing below the level was sent");

    // Without a level set, a session hears `info` and up.
    let (fresh, mut heard) = connect(&op, false, ElicitationAction::Accept).await;
    call(&fresh, "desk.chatty").await.unwrap();
    let mut levels: Vec<String> = heard_all(&mut heard, 5)
        .await
        .iter()
        .map(|line| line.split(':').next().unwrap_or_default().to_owned())
        .collect();
    levels.sort();
    assert_eq!(levels, ["Critical", "Error", "Info", "Info", "Warning"]);
    fresh.cancel().await.unwrap();
    assert_eq!(heard.logged.recv().await, None, "no debug line was sent");
}

/// The first `n` log lines the client got, as `Level: line` (the client handles notifications concurrently, so
/// they come in any order).
async fn heard_all(heard: &mut Heard, n: usize) -> Vec<String> {
    let mut lines = Vec::new();
    while lines.len() < n {
        let line = tokio::time::timeout(agentry_tests::CALL, heard.logged.recv()).await.ok().flatten();
        let Some((level, line)) = line else { panic!("only {} lines arrived: {lines:?}", lines.len()) };
        lines.push(format!("{level:?}: {line}"));
    }
    lines
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_asks_the_clients_model_or_user_only_if_the_client_can_answer() {
    let op = agent().await;
    let (client, _heard) = connect(&op, false, ElicitationAction::Accept).await;
    for tool in ["desk.ask_model", "desk.ask_user"] {
        let result = call(&client, tool).await.unwrap();
        assert_eq!(result.is_error, Some(true), "{tool}");
        assert!(text(&result).contains("cannot"), "{tool}: {}", text(&result));
        let meta = serde_json::to_value(result.meta.unwrap()).unwrap();
        assert_eq!(meta["io.agentry/errorClass"], "denied", "{tool}");
    }
    client.cancel().await.unwrap();

    // A client with a user: the form's answer is the run's output.
    let (client, mut heard) = connect(&op, true, ElicitationAction::Decline).await;
    let result = call(&client, "desk.ask_user").await.unwrap();
    assert_eq!(text(&result), r#"{"action":"decline"}"#);
    assert_eq!(heard.asked.recv().await.as_deref(), Some("Your name?"));
    client.cancel().await.unwrap();
}

/// agentry to agentry: a served action asks its caller's user through elicitation, and the caller is an
/// agentry `McpClient`, so the ask becomes an approval on the agent whose call it came in. Approved, the form's
/// defaults are the answer; denied, the server hears `decline`. Both journaled like any approval.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_servers_elicitation_is_an_approval_on_the_calling_agent() {
    use agentry::action::Elicited;

    // The server: an agent whose one action asks for a form with a default.
    let ask = ActionSpec::new("form.ask", "Asks for a name.").unwrap();
    let form = Skill::builder("form", "1.0.0")
        .dyn_action(
            DynAction::new(ask, |_, ctx| {
                Box::pin(async move {
                    let schema =
                        json!({"type": "object", "properties": {"name": {"type": "string", "default": "Ann"}}});
                    let answer: Elicited = ctx.elicit("Your name?", schema).await?;
                    Ok(serde_json::to_value(answer).unwrap())
                })
            })
            .unwrap(),
        )
        .build()
        .unwrap();
    let remote = Remote::start(form).await;
    let (runtime, caller) = (&remote.runtime, &remote.caller);

    for approve in [true, false] {
        let mut events = runtime.events();
        let call = runtime.invoke(caller.id(), "mcp.form.form-ask", json!({}));
        tokio::pin!(call);
        // The call waits on the approval: answer it when it is asked.
        let asked = loop {
            tokio::select! {
                event = events.recv() => {
                    let event = event.unwrap();
                    if let EventKind::ApprovalAsked { action, .. } = &event.kind {
                        break (action.to_string(), event.run.unwrap());
                    }
                }
                done = &mut call => panic!("the call ended before any approval was asked: {done:?}"),
            }
        };
        assert_eq!(asked.0, "mcp.form.elicitation");
        if approve {
            caller.approve(asked.1).await.unwrap()
        } else {
            caller.deny(asked.1).await.unwrap()
        }
        let outcome = call.await.unwrap();
        let expected = if approve {
            json!({"action": "accept", "content": {"name": "Ann"}})
        } else {
            json!({"action": "decline"})
        };
        assert_eq!(outcome.output, expected, "approved: {approve}; {outcome:?}");
        let record = runtime.store().get(asked.1).expect("the elicitation's run is journaled");
        let status = if approve { RunStatus::Completed } else { RunStatus::Blocked };
        assert_eq!(record.status(), status);
    }
    remote.stop();
}

/// Through two agents: a served action's log line and progress reach the agentry client's run, which logs and
/// reports them in turn, so the caller of *that* run hears them while the call is still under way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_actions_log_and_progress_reach_the_local_caller() {
    use agentry::action::{Caller, CallerCan, CallerRequest};
    use std::sync::Arc;

    // The server's action logs, reports half done, and holds until the test lets it go.
    let release = Arc::new(tokio::sync::Notify::new());
    let held = release.clone();
    let hold = ActionSpec::new("relay.hold", "Logs, reports progress, and waits.").unwrap();
    let relay = Skill::builder("relay", "1.0.0")
        .dyn_action(
            DynAction::new(hold, move |_, ctx| {
                let held = held.clone();
                Box::pin(async move {
                    ctx.log(LogLevel::Warning, "holding");
                    ctx.progress(0.5, Some("half".to_owned()));
                    held.notified().await;
                    Ok(json!("released"))
                })
            })
            .unwrap(),
        )
        .build()
        .unwrap();
    let remote = Remote::start(relay).await;
    let (runtime, local) = (&remote.runtime, &remote.caller);

    let (caller, mut heard) = Caller::new(CallerCan::default());
    let call = runtime.invoke_with(local.id(), "mcp.relay.relay-hold", json!({}), caller);
    tokio::pin!(call);
    let (mut logged, mut progressed) = (None, None);
    while logged.is_none() || progressed.is_none() {
        tokio::select! {
            request = heard.recv() => match request.expect("the caller hears from the run") {
                CallerRequest::Log { level, message, .. } => logged = Some((level, message)),
                CallerRequest::Progress { progress, message, .. } => progressed = Some((progress, message)),
                other => panic!("unexpected {other:?}"),
            },
            done = &mut call => panic!("the call ended before its log and progress came through: {done:?}"),
        }
    }
    assert_eq!(logged, Some((LogLevel::Warning, "[mcp relay] holding".to_owned())), "tagged with the server");
    assert_eq!(progressed, Some((0.5, Some("half".to_owned()))));
    release.notify_one();
    let outcome = call.await.unwrap();
    assert_eq!(outcome.output, json!("released"));
    remote.stop();
}

/// A skill served over HTTP on loopback by an agent of its own runtime, and an agent of another runtime that
/// mounts it through an `McpClient` (named as the skill), with `net` granted and the served skill's tools at low
/// risk, so only what the server asks needs approval.
struct Remote {
    runtime: agentry::runtime::Runtime,
    caller: agentry::runtime::AgentRef<()>,
    client: agentry_skills::mcp::McpClient,
    stop: tokio_util::sync::CancellationToken,
}

impl Remote {
    async fn start(skill: Skill) -> Self {
        use agentry::action::Capability;
        use agentry::pattern::Pattern;
        use agentry::runtime::{Runtime, SpawnOptions};
        use agentry_skills::mcp::{McpClient, McpServer};
        let name = skill.id().to_string();
        let tools: Vec<String> = skill.actions().iter().map(|a| a.spec().id.to_string()).collect();
        let server = Runtime::builder().skill(skill).build();
        let served = server.spawn((), SpawnOptions::default()).await.unwrap();
        served.mount(&name.parse().unwrap(), serde_json::Value::Null).await.unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://localhost:{}/mcp", listener.local_addr().unwrap().port());
        let stop = tokio_util::sync::CancellationToken::new();
        let (id, stopped) = (served.id().clone(), stop.clone());
        tokio::spawn(async move {
            agentry_skills::mcp::serve_http(&server, &id, listener, async move { stopped.cancelled().await }).await
        });
        let client = McpClient::connect(McpServer::http(&name, &url)).await.unwrap();
        let runtime = Runtime::builder().build();
        client.attach(&runtime).unwrap();
        let mut policy = Policy::default().grant(Capability::NET);
        for tool in &tools {
            let action = agentry_skills::mcp::contract::action_id(&name, tool).unwrap();
            policy.risk_overrides.insert(Pattern::new(action.as_str()).unwrap(), Risk::Low);
        }
        let caller = runtime.spawn((), SpawnOptions { policy, ..SpawnOptions::default() }).await.unwrap();
        caller.mount(client.skill().id(), serde_json::Value::Null).await.unwrap();
        Self { runtime, caller, client, stop }
    }

    fn stop(&self) {
        self.client.close();
        self.stop.cancel();
    }
}
