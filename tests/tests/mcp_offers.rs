//! What an agent's skills offer over MCP besides tools, driven by rmcp's own client on a byte stream: the drive as
//! resources read through `fs.read` (confined and gated exactly as `fs.read` is, tried like an attacker),
//! subscriptions told when `fs.*` changes a file, skills' instructions and declared prompts, completions, and
//! the lists following mounting.

// rmcp marks resources/subscribe deprecated because protocol 2026-07-28 replaces it; the revisions agentry
// serves have it.
#![allow(deprecated)]

use agentry::action::Capability;
use agentry::id::{AgentId, SkillId};
use agentry::pattern::Pattern;
use agentry::policy::Policy;
use agentry::skill::{Prompt, Skill, SkillDefinition};
use agentry_skills::Files;
use agentry_tests::Operated;
use rmcp::model::{
    ArgumentInfo, CallToolRequestParams, ClientCapabilities, ClientConfig, CompleteRequestParams,
    GetPromptRequestParams, Implementation, PromptReference, ReadResourceRequestParams, Reference,
    ResourceUpdatedNotificationParam, SubscribeRequestParams, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::{ClientHandler, RoleClient, ServiceError, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// A client that reports each `resources/updated` and each `prompts/list_changed`.
struct Watcher {
    updated: mpsc::UnboundedSender<String>,
    prompts_changed: mpsc::UnboundedSender<()>,
}

impl ClientHandler for Watcher {
    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.updated.send(params.uri);
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.prompts_changed.send(());
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(ClientCapabilities::default(), Implementation::new("agentry-tests", "0"))
    }
}

struct Heard {
    updated: mpsc::UnboundedReceiver<String>,
    prompts_changed: mpsc::UnboundedReceiver<()>,
}

/// A skill that declares a prompt with arguments and completions.
fn letters() -> Skill {
    Skill::builder("letters", "1.0.0")
        .instructions("Write short letters.")
        .prompt(
            Prompt::new("letters.thank", "Thanks someone.")
                .argument("who", "Whom to thank", true)
                .argument("for", "What for", false)
                .values("who", ["Ann", "Andrew", "Bea"])
                .user("Write a thank-you note to {who} for {for}."),
        )
        .build()
        .unwrap()
}

async fn agent(policy: Policy) -> Operated {
    Operated::start(vec![Files::skill().unwrap(), letters()], policy.grant(Capability::FS), &[]).await
}

fn operator() -> AgentId {
    AgentId::new("operator").unwrap()
}

async fn connect(op: &Operated) -> (RunningService<RoleClient, Watcher>, Heard) {
    let (ours, theirs) = tokio::io::duplex(64 * 1024);
    let runtime = op.runtime.clone();
    tokio::spawn(async move {
        let (reader, writer) = tokio::io::split(ours);
        agentry_skills::mcp::serve_io(&runtime, &operator(), reader, writer).await
    });
    let (updated_tx, updated) = mpsc::unbounded_channel();
    let (prompts_tx, prompts_changed) = mpsc::unbounded_channel();
    let client = Watcher { updated: updated_tx, prompts_changed: prompts_tx }.serve(theirs).await.unwrap();
    (client, Heard { updated, prompts_changed })
}

/// The next notification, or `None` if none comes within a minute (a failure, never a wait for timing).
async fn next<T>(heard: &mut mpsc::UnboundedReceiver<T>) -> Option<T> {
    tokio::time::timeout(agentry_tests::CALL, heard.recv()).await.ok().flatten()
}

async fn read(client: &RunningService<RoleClient, Watcher>, uri: &str) -> Result<Value, ServiceError> {
    let result = client.read_resource(ReadResourceRequestParams::new(uri)).await?;
    Ok(serde_json::to_value(result).unwrap())
}

async fn write(client: &RunningService<RoleClient, Watcher>, path: &str, content: &str) {
    let args = json!({"path": path, "content": content, "if_exists": "overwrite"});
    let result =
        client.call_tool(CallToolRequestParams::new("fs.write").with_arguments(args.as_object().unwrap().clone()));
    assert_eq!(result.await.unwrap().is_error, Some(false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_drive_is_a_resource_template_read_through_fs_read() {
    let op = agent(Policy::default()).await;
    let (client, _heard) = connect(&op).await;
    let templates = serde_json::to_value(client.list_resource_templates(None).await.unwrap()).unwrap();
    assert_eq!(templates["resourceTemplates"][0]["uriTemplate"], "drive:///{+path}");
    let listed = serde_json::to_value(client.list_resources(None).await.unwrap()).unwrap();
    assert_eq!(listed["resources"], json!([]), "the drive is a template, not a list of files");

    write(&client, "notes/a b.md", "tea at four").await;
    for uri in ["drive:///notes/a b.md", "drive:///notes/a%20b.md"] {
        let read = read(&client, uri).await.unwrap();
        assert_eq!(read["contents"], json!([{"uri": uri, "mimeType": "text/plain", "text": "tea at four"}]));
    }
    // Each read is a run of fs.read, journaled like any.
    let reads = op.runtime.store().query(&agentry::store::RunQuery {
        agent: Some(operator()),
        action: Some("fs.read".parse().unwrap()),
        ..Default::default()
    });
    assert_eq!(reads.len(), 2);
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_resource_uri_gets_out_of_the_drive() {
    let op = agent(Policy::default()).await;
    let secret = op.data.path().join("secret.txt");
    std::fs::write(&secret, "the secret").unwrap();
    let (client, _heard) = connect(&op).await;
    write(&client, "inside.txt", "fine").await;
    let attacks = [
        "drive:///../../../secret.txt".to_owned(),
        "drive:///%2e%2e/%2e%2e/%2e%2e/secret.txt".to_owned(),
        "drive:///..%2F..%2F..%2Fsecret.txt".to_owned(),
        format!("drive:///{}", secret.display()),
        format!("drive:///%2F{}", secret.display().to_string().trim_start_matches('/')),
        "drive:///inside.txt%00".to_owned(),
        "file:///etc/passwd".to_owned(),
        "drive://other-host/inside.txt".to_owned(),
    ];
    for uri in &attacks {
        match read(&client, uri).await {
            Err(ServiceError::McpError(error)) => {
                assert!(!error.message.contains("the secret"), "{uri}: {}", error.message);
            }
            other => panic!("{uri} was read: {other:?}"),
        }
    }
    // A link inside the drive that points out of it is not followed either.
    let drive = op.runtime.drive(&operator(), &SkillId::new("fs").unwrap()).unwrap();
    std::os::unix::fs::symlink(&secret, drive.join("link.txt")).unwrap();
    assert!(read(&client, "drive:///link.txt").await.is_err(), "a symlink out of the drive is refused");
    // And an unknown URI is MCP's resource-not-found.
    let Err(ServiceError::McpError(error)) = read(&client, "nothing:///here").await else { panic!() };
    assert_eq!(error.code.0, -32002);
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reading_passes_the_gate_like_any_run() {
    let mut policy = Policy::default();
    policy.deny_actions.push(Pattern::new("fs.read").unwrap());
    let op = agent(policy).await;
    let (client, _heard) = connect(&op).await;
    write(&client, "a.txt", "x").await;
    let Err(ServiceError::McpError(error)) = read(&client, "drive:///a.txt").await else { panic!("read") };
    assert_eq!((error.code.0, error.data.unwrap()["reason"].clone()), (agentry_skills::mcp::REFUSED, json!("denied")));
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribers_hear_of_the_files_fs_changes() {
    let op = agent(Policy::default()).await;
    let (client, mut heard) = connect(&op).await;
    client.subscribe(SubscribeRequestParams::new("drive:///watched%20file.md")).await.unwrap();
    // A file nobody watches changes first; the first news must still be of the watched one.
    write(&client, "other.md", "1").await;
    write(&client, "watched file.md", "2").await;
    assert_eq!(next(&mut heard.updated).await.as_deref(), Some("drive:///watched%20file.md"));
    // Appends, moves and deletes tell too.
    op.output("fs.append", json!({"path": "watched file.md", "content": "3"})).await;
    assert_eq!(next(&mut heard.updated).await.as_deref(), Some("drive:///watched%20file.md"));
    op.output("fs.move", json!({"from": "watched file.md", "to": "moved.md"})).await;
    assert_eq!(next(&mut heard.updated).await.as_deref(), Some("drive:///watched%20file.md"));
    op.output("fs.write", json!({"path": "watched file.md", "content": "4"})).await;
    assert_eq!(next(&mut heard.updated).await.as_deref(), Some("drive:///watched%20file.md"));
    op.output("fs.delete", json!({"path": "watched file.md"})).await;
    assert_eq!(next(&mut heard.updated).await.as_deref(), Some("drive:///watched%20file.md"));

    // A file whose name holds a `%` is its own: a change to `a%20b.md` is not news of `a b.md`.
    client.subscribe(SubscribeRequestParams::new("drive:///a%20b.md")).await.unwrap();
    write(&client, "a%20b.md", "not a b.md").await;
    write(&client, "a b.md", "a b.md").await;
    assert_eq!(next(&mut heard.updated).await.as_deref(), Some("drive:///a%20b.md"));
    client.unsubscribe(UnsubscribeRequestParams::new("drive:///a b.md")).await.unwrap();

    // After unsubscribing, nothing more: a write to it, then one to a newly watched file, and only the latter.
    client.unsubscribe(UnsubscribeRequestParams::new("drive:///watched file.md")).await.unwrap();
    client.subscribe(SubscribeRequestParams::new("drive:///last.md")).await.unwrap();
    write(&client, "watched file.md", "5").await;
    write(&client, "last.md", "6").await;
    assert_eq!(next(&mut heard.updated).await.as_deref(), Some("drive:///last.md"));
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skills_offer_their_instructions_and_prompts_with_completions() {
    let op = agent(Policy::default()).await;
    let (client, mut heard) = connect(&op).await;
    let names: Vec<String> = client.list_all_prompts().await.unwrap().into_iter().map(|p| p.name).collect();
    assert_eq!(names, ["fs.instructions", "letters.instructions", "letters.thank"]);

    let get = |args: Value| {
        let mut params = GetPromptRequestParams::new("letters.thank");
        params.arguments = args.as_object().cloned();
        client.get_prompt(params)
    };
    let got = serde_json::to_value(get(json!({"who": "Ann", "for": "{who}"})).await.unwrap()).unwrap();
    assert_eq!(got["messages"][0]["content"]["text"], "Write a thank-you note to Ann for {who}.");
    let Err(ServiceError::McpError(error)) = get(json!({"for": "tea"})).await else { panic!("a missing argument") };
    assert!(error.message.contains("needs argument `who`"), "{}", error.message);
    let Err(ServiceError::McpError(error)) = get(json!({"who": "Ann", "whom": "Bea"})).await else { panic!() };
    assert!(error.message.contains("no argument `whom`"), "{}", error.message);

    let complete = CompleteRequestParams::new(
        Reference::Prompt(PromptReference::new("letters.thank")),
        ArgumentInfo::new("who", "An"),
    );
    let completed = client.complete(complete).await.unwrap();
    assert_eq!(completed.completion.values, ["Ann", "Andrew"]);

    // Unmounting a skill takes its prompts away, and clients are told.
    op.agent.unmount(&SkillId::new("letters").unwrap()).await.unwrap();
    next(&mut heard.prompts_changed).await.expect("prompts/list_changed arrives");
    let names: Vec<String> = client.list_all_prompts().await.unwrap().into_iter().map(|p| p.name).collect();
    assert_eq!(names, ["fs.instructions"]);
    client.cancel().await.unwrap();
}

/// A session subscribes to at most 256 resources: past that a subscription is refused (and one it holds
/// already may be asked for again), so a client cannot make the server keep an unbounded list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriptions_per_session_are_bounded() {
    let op = agent(Policy::default()).await;
    let (client, _heard) = connect(&op).await;
    for n in 0..256 {
        client.subscribe(SubscribeRequestParams::new(format!("drive:///f{n}.md"))).await.unwrap();
    }
    let Err(ServiceError::McpError(error)) =
        client.subscribe(SubscribeRequestParams::new("drive:///one-more.md")).await
    else {
        panic!("the 257th subscription is refused")
    };
    assert_eq!((error.code.0, error.data.unwrap()["reason"].clone()), (agentry_skills::mcp::REFUSED, json!("limit")));
    client.subscribe(SubscribeRequestParams::new("drive:///f0.md")).await.expect("one it holds is fine");
    client.unsubscribe(UnsubscribeRequestParams::new("drive:///f0.md")).await.unwrap();
    client.subscribe(SubscribeRequestParams::new("drive:///one-more.md")).await.expect("room again");
    client.cancel().await.unwrap();
}
