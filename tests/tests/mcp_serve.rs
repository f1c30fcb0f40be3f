//! An agent's actions served over MCP, driven by rmcp's own client: over streamable HTTP on loopback and over
//! a byte stream (what stdio is): `tools/list` is the live table, `tools/call` passes the agent's gate, and
//! unmounting sends `tools/list_changed`.

use agentry::action::{ActionSpec, DynAction, Risk};
use agentry::id::{AgentId, SkillId};
use agentry::pattern::Pattern;
use agentry::policy::Policy;
use agentry::skill::{Skill, SkillDefinition};
use agentry::store::{RunQuery, RunStatus};
use agentry_testkit::demo::Arithmetic;
use agentry_tests::Operated;
use rmcp::model::{CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::{ClientHandler, RoleClient, ServiceError, ServiceExt};
use serde_json::{Value, json};
use std::time::Duration;
use tokio::sync::mpsc;

/// A client that reports every `tools/list_changed`.
struct Watcher {
    changed: mpsc::UnboundedSender<()>,
}

impl ClientHandler for Watcher {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.changed.send(());
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(ClientCapabilities::default(), Implementation::new("agentry-tests", "0"))
    }
}

/// A skill with a risky action and one the policy will deny.
fn vault() -> Skill {
    let shred = ActionSpec::new("vault.shred", "Shreds the vault.").unwrap().risk(Risk::High).side_effects(true);
    let peek = ActionSpec::new("vault.peek", "Looks into the vault.").unwrap();
    let answer = |params: Value, _ctx| -> agentry::action::ActionFuture { Box::pin(async move { Ok(params) }) };
    Skill::builder("vault", "1.0.0")
        .dyn_action(DynAction::new(shred, answer).unwrap())
        .dyn_action(DynAction::new(peek, answer).unwrap())
        .build()
        .unwrap()
}

async fn agent() -> Operated {
    let mut policy = Policy::default();
    policy.deny_actions.push(Pattern::new("vault.peek").unwrap());
    Operated::start(vec![Arithmetic::skill().unwrap(), vault()], policy, &[]).await
}

fn operator() -> AgentId {
    AgentId::new("operator").unwrap()
}

async fn call(
    client: &RunningService<RoleClient, Watcher>,
    tool: &str,
    args: Value,
) -> Result<CallToolResult, ServiceError> {
    let params =
        CallToolRequestParams::new(tool.to_owned()).with_arguments(args.as_object().cloned().unwrap_or_default());
    client.call_tool(params).await
}

fn refusal(result: Result<CallToolResult, ServiceError>) -> (i32, String, Value) {
    match result {
        Err(ServiceError::McpError(error)) => {
            (error.code.0, error.message.to_string(), error.data.unwrap_or(Value::Null))
        }
        other => panic!("expected an MCP error, got {other:?}"),
    }
}

fn text(result: &CallToolResult) -> String {
    result.content.iter().filter_map(|c| c.as_text()).map(|t| t.text.clone()).collect::<Vec<_>>().join("\n")
}

/// Everything a client sees, on whatever transport it came in on.
async fn drive(op: &Operated, client: RunningService<RoleClient, Watcher>, mut changed: mpsc::UnboundedReceiver<()>) {
    let mut names: Vec<String> = client.list_all_tools().await.unwrap().iter().map(|t| t.name.to_string()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "arithmetic.add",
            "arithmetic.divide",
            "arithmetic.multiply",
            "arithmetic.subtract",
            "vault.peek",
            "vault.shred"
        ]
    );
    let tools = client.list_all_tools().await.unwrap();
    let add = tools.iter().find(|t| t.name == "arithmetic.add").unwrap();
    assert_eq!(add.input_schema["properties"]["a"]["type"], "number", "the params schema is the input schema");
    let shred = tools.iter().find(|t| t.name == "vault.shred").unwrap();
    let hints = shred.annotations.as_ref().unwrap();
    assert_eq!((hints.read_only_hint, hints.destructive_hint), (Some(false), Some(true)));

    let sum = call(&client, "arithmetic.add", json!({"a": 2, "b": 3})).await.unwrap();
    assert_eq!(sum.is_error, Some(false));
    assert_eq!(text(&sum), "5.0");
    // A number is structured content too, wrapped in an object (MCP's structured content is one), and its
    // output schema says the same.
    assert_eq!(sum.structured_content, Some(json!({"result": 5.0})));
    let schema = serde_json::to_value(add.output_schema.as_ref().expect("an output schema")).unwrap();
    assert_eq!(schema["properties"]["result"]["type"], "number", "{schema}");
    assert_eq!(schema["x-agentry-wrapped"], true);

    // A failure once the run started is a result the model can read.
    let zero = call(&client, "arithmetic.divide", json!({"a": 1, "b": 0})).await.unwrap();
    assert_eq!(zero.is_error, Some(true));
    assert!(text(&zero).contains("divide by zero"), "{}", text(&zero));
    let bad = call(&client, "arithmetic.add", json!({"a": "two"})).await.unwrap();
    assert_eq!(bad.is_error, Some(true));
    assert!(text(&bad).contains("invalid params"), "{}", text(&bad));

    // Refusals at the gate are MCP errors that say why.
    // A call that needs approval waits for the operator's, who denies it here.
    let mut events = op.runtime.events();
    let operator_denies = async {
        let asked = agentry_tests::wait_for(&mut events, |e| {
            matches!(e.kind, agentry::events::EventKind::ApprovalAsked { .. })
        })
        .await;
        let run = asked.run.unwrap();
        op.runtime.decide(&operator(), run, false).await.unwrap();
        run
    };
    let (refused, run) = tokio::join!(call(&client, "vault.shred", json!({})), operator_denies);
    let (code, message, data) = refusal(refused);
    assert_eq!(code, agentry_skills::mcp::REFUSED);
    assert!(message.contains("denied by its approver"), "{message}");
    assert_eq!(data["reason"], "denied");
    let record = op.runtime.store().get(run).expect("the refused run is journaled");
    assert_eq!(record.status(), RunStatus::Blocked);
    let (code, message, data) = refusal(call(&client, "vault.peek", json!({})).await);
    assert_eq!((code, data["reason"].as_str()), (agentry_skills::mcp::REFUSED, Some("denied")));
    assert!(message.contains("deny pattern"), "{message}");
    let (code, _, data) = refusal(call(&client, "nothing.here", json!({})).await);
    assert_eq!((code, data["reason"].as_str()), (-32602, Some("unknown_tool")));
    let (code, _, _) = refusal(call(&client, "Not An Id", json!({})).await);
    assert_eq!(code, -32602);

    // Every call went through the journal, the refused ones included.
    let runs = op.runtime.store().query(&RunQuery { agent: Some(operator()), ..RunQuery::default() });
    // add, divide, add with bad params, shred, peek and nothing.here; `Not An Id` never became a run.
    assert_eq!(runs.len(), 6, "{runs:#?}");

    // Unmounting tells the client, and the list follows.
    op.agent.unmount(&SkillId::new("vault").unwrap()).await.unwrap();
    tokio::time::timeout(Duration::from_secs(60), changed.recv()).await.expect("list_changed arrives").unwrap();
    let names: Vec<String> = client.list_all_tools().await.unwrap().iter().map(|t| t.name.to_string()).collect();
    assert!(!names.iter().any(|n| n.starts_with("vault.")), "{names:?}");
    let (code, _, data) = refusal(call(&client, "vault.shred", json!({})).await);
    assert_eq!((code, data["reason"].as_str()), (-32602, Some("unknown_tool")));

    // Mounting tells the client too.
    op.agent.mount(&SkillId::new("vault").unwrap(), Value::Null).await.unwrap();
    tokio::time::timeout(Duration::from_secs(60), changed.recv()).await.expect("list_changed arrives").unwrap();
    let names: Vec<String> = client.list_all_tools().await.unwrap().iter().map(|t| t.name.to_string()).collect();
    assert!(names.contains(&"vault.shred".to_owned()), "{names:?}");
    client.cancel().await.unwrap();
}

/// The operator served over streamable HTTP on loopback, until [`Http::stop`].
struct Http {
    url: String,
    stop: tokio::sync::oneshot::Sender<()>,
    server: tokio::task::JoinHandle<Result<(), agentry_skills::mcp::McpError>>,
}

impl Http {
    async fn serve(op: &Operated) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let runtime = op.runtime.clone();
        let server = tokio::spawn(async move {
            agentry_skills::mcp::serve_http(&runtime, &operator(), listener, async {
                let _ = stopped.await;
            })
            .await
        });
        Self { url, stop, server }
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        self.server.await.unwrap().expect("the server stops cleanly");
    }
}

/// The operator served over an in-memory byte stream (what stdio is): the client's end, and the server's task.
fn serve_stream(
    op: &Operated,
) -> (tokio::io::DuplexStream, tokio::task::JoinHandle<Result<(), agentry_skills::mcp::McpError>>) {
    let (ours, theirs) = tokio::io::duplex(64 * 1024);
    let runtime = op.runtime.clone();
    let server = tokio::spawn(async move {
        let (reader, writer) = tokio::io::split(ours);
        agentry_skills::mcp::serve_io(&runtime, &operator(), reader, writer).await
    });
    (theirs, server)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_served_over_streamable_http() {
    // This test builds rmcp's HTTP client itself, so it installs the TLS provider as an application would.
    agentry_skills::tls::install_provider();
    let op = agent().await;
    let served = Http::serve(&op).await;
    let (tx, changed) = mpsc::unbounded_channel();
    let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(served.url.clone());
    let client = Watcher { changed: tx }.serve(transport).await.expect("the client connects");
    drive(&op, client, changed).await;
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_served_over_a_byte_stream_as_on_stdio() {
    let op = agent().await;
    let (theirs, server) = serve_stream(&op);
    let (tx, changed) = mpsc::unbounded_channel();
    let client = Watcher { changed: tx }.serve(theirs).await.expect("the client connects");
    drive(&op, client, changed).await;
    server.await.unwrap().expect("the server ends when the client leaves");
}

/// agentry on both ends: an agent served over HTTP, mounted by another runtime's `McpClient`. A failure keeps its
/// class across the wire: `validation` comes back as `validation`, so the calling agent knows to correct its
/// input.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agentry_to_agentry_keeps_the_error_class() {
    let op = agent().await;
    let served = Http::serve(&op).await;
    let client =
        agentry_skills::mcp::McpClient::connect(agentry_skills::mcp::McpServer::http("peer", &served.url).trusted())
            .await
            .expect("the client connects");
    let caller = Operated::start(vec![], Policy::default(), &[]).await;
    client.attach(&caller.runtime).unwrap();
    caller.agent.mount(client.skill().id(), Value::Null).await.unwrap();
    // A number output crosses as a number: wrapped as structured content by the server, unwrapped here, and
    // the action's output schema is the number's.
    assert_eq!(caller.output("mcp.peer.arithmetic-add", json!({"a": 2, "b": 3})).await, json!(5.0));
    let add = client
        .skill()
        .actions()
        .iter()
        .find(|a| a.spec().id.as_str() == "mcp.peer.arithmetic-add")
        .unwrap()
        .spec()
        .clone();
    assert_eq!(add.output_schema["type"], "number", "{}", add.output_schema);
    let (class, message) = caller.failure("mcp.peer.arithmetic-divide", json!({"a": 1, "b": 0})).await;
    assert_eq!(class, "validation", "{message}");
    assert!(message.contains("divide by zero"), "{message}");

    // One tool is one segment: the served tool `arithmetic.add` is `mcp.peer.arithmetic-add`, so an operator who
    // denies `mcp.peer.*` denies every tool of the server, dotted names included.
    let confined = caller.runtime.spawn(
        (),
        agentry::runtime::SpawnOptions {
            policy: Policy {
                deny_actions: vec![agentry::pattern::Pattern::new("mcp.peer.*").unwrap()],
                ..Policy::default()
            },
            ..Default::default()
        },
    );
    let confined = confined.await.unwrap();
    confined.mount(client.skill().id(), Value::Null).await.unwrap();
    for tool in client.skill().actions() {
        let outcome = caller.runtime.invoke(confined.id(), tool.spec().id.as_str(), json!({"a": 1, "b": 2})).await;
        let outcome = outcome.unwrap();
        assert_eq!(outcome.status, agentry::action::OutcomeStatus::Blocked, "{} escaped `mcp.peer.*`", tool.spec().id);
    }
    client.close();
    served.stop().await;
}

/// An output that looks like content blocks but that MCP refuses (a block's `annotations` is not an object) is
/// served as its JSON text: the run completed, so the call does not fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_content_blocks_are_served_as_text() {
    let spec = ActionSpec::new("odd.blocks", "Answers with a block MCP refuses.").unwrap();
    let odd = DynAction::new(spec, |_, _| {
        Box::pin(async { Ok(json!([{"type": "text", "text": "hello", "annotations": 5}])) })
    })
    .unwrap();
    let skill = Skill::builder("odd", "1.0.0").dyn_action(odd).build().unwrap();
    let op = Operated::start(vec![skill], Policy::default(), &[]).await;
    let (theirs, server) = serve_stream(&op);
    let (tx, _changed) = mpsc::unbounded_channel();
    let client = Watcher { changed: tx }.serve(theirs).await.expect("the client connects");
    let result = call(&client, "odd.blocks", json!({})).await.expect("the call is answered");
    assert_eq!(result.is_error, Some(false));
    assert!(text(&result).contains("\"annotations\":5"), "{}", text(&result));
    client.cancel().await.unwrap();
    server.await.unwrap().expect("the server ends when the client leaves");
}

/// Both protocol revisions are served: a client that negotiates 2026-07-28 (`server/discover`, no `initialize`)
/// lists and calls the agent's tools like one on 2025-11-25.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_on_protocol_2026_07_28_is_served_too() {
    use rmcp::model::ProtocolVersion;
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
    let op = agent().await;
    for version in [ProtocolVersion::V_2025_11_25, ProtocolVersion::V_2026_07_28] {
        let (theirs, _server) = serve_stream(&op);
        let (tx, _changed) = mpsc::unbounded_channel();
        let lifecycle = if version.has_initialize() {
            ClientLifecycleMode::Initialize
        } else {
            ClientLifecycleMode::Discover { preferred_versions: vec![version.clone()] }
        };
        let client =
            Watcher { changed: tx }.serve_with_lifecycle(theirs, lifecycle).await.expect("the client connects");
        assert_eq!(client.peer_info().expect("the server's info").protocol_version, version);
        assert!(client.list_all_tools().await.unwrap().iter().any(|t| t.name == "arithmetic.add"), "{version}");
        let sum = call(&client, "arithmetic.add", json!({"a": 2, "b": 3})).await.unwrap();
        assert_eq!(sum.structured_content, Some(json!({"result": 5.0})), "{version}");
        client.cancel().await.unwrap();
    }
}
