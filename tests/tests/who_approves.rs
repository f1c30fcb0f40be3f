//! Who approves a served call that needs approval, driven by the official MCP Python SDK over streamable HTTP
//! with a client whose elicitation callback accepts everything at once (a scripted client, or a host that
//! auto-accepts). By default the operator approves: the client is never asked, the run waits for
//! `Runtime::decide`, and the client hears that it waits. Only where serving says so does the client's user
//! approve, and never above the ceiling the operator set.

use agentry::action::{ActionSpec, Approver, DynAction, Risk};
use agentry::events::{Event, EventKind};
use agentry::id::AgentId;
use agentry::policy::Policy;
use agentry::store::{RunQuery, RunStatus};
use agentry_skills::mcp::Served;
use agentry_tests::{CALL, Operated};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout};

/// A skill with one high-risk tool with side effects: the default policy asks for approval before it runs.
fn desk() -> agentry::skill::Skill {
    let shred =
        ActionSpec::new("desk.shred", "Shreds the papers on the desk.").unwrap().risk(Risk::High).side_effects(true);
    agentry::skill::Skill::builder("desk", "1.0.0")
        .dyn_action(DynAction::new(shred, |_, _| Box::pin(async { Ok(json!("shredded")) })).unwrap())
        .build()
        .unwrap()
}

fn operator() -> AgentId {
    AgentId::new("operator").unwrap()
}

/// The operator agent served over HTTP on loopback with `approver`, and the official SDK's always-accepting
/// client calling `desk.shred` on it. `None` when this machine cannot run the SDK (said loudly).
struct Session {
    op: Operated,
    client: Child,
    lines: Lines<BufReader<ChildStdout>>,
    stop: tokio_util::sync::CancellationToken,
    /// The runtime's events, from before the client connected.
    events: tokio::sync::broadcast::Receiver<Event>,
}

impl Session {
    async fn start(approver: Approver) -> Option<Self> {
        let python = agentry_tests::python_sdk::python()?;
        let op = Operated::start(vec![desk()], Policy::default(), &[]).await;
        let events = op.runtime.events();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://127.0.0.1:{}/mcp", listener.local_addr().unwrap().port());
        let stop = tokio_util::sync::CancellationToken::new();
        let served = Served::new(&op.runtime, &operator()).approver(approver);
        let stopped = stop.clone();
        tokio::spawn(async move { served.http(listener, async move { stopped.cancelled().await }).await });
        let mut client = tokio::process::Command::new(python)
            .arg(agentry_tests::python_sdk::script("accepting_client.py"))
            .args([&url, "desk.shred"])
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the SDK's client starts");
        let lines = BufReader::new(client.stdout.take().unwrap()).lines();
        Some(Self { op, client, lines, stop, events })
    }

    /// The client's next report, within the test's time limit.
    async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(CALL, self.lines.next_line())
            .await
            .expect("the client reported within the time limit")
            .expect("the client's output is readable")
            .expect("the client reported before it exited");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("the client printed {line:?}, not JSON: {e}"))
    }

    /// Reads the client's reports until one of `kind`, returning it and the ones before it.
    async fn until(&mut self, kind: &str) -> (Value, Vec<Value>) {
        let mut before = Vec::new();
        loop {
            let report = self.next().await;
            if report["kind"] == kind {
                return (report, before);
            }
            before.push(report);
        }
    }

    async fn finish(mut self) -> u64 {
        let (done, _) = self.until("done").await;
        let status = self.client.wait().await.unwrap();
        assert!(status.success(), "the client exited with {status}");
        self.stop.cancel();
        done["asked"].as_u64().unwrap()
    }

    fn run_status(&self) -> RunStatus {
        let runs = self.op.runtime.store().query(&RunQuery { agent: Some(operator()), ..Default::default() });
        assert_eq!(runs.len(), 1, "{runs:?}");
        runs[0].status()
    }

    /// The run the operator is asked to approve.
    async fn approval_asked(&mut self) -> uuid::Uuid {
        let asked =
            agentry_tests::wait_for(&mut self.events, |e| matches!(e.kind, EventKind::ApprovalAsked { .. })).await;
        asked.run.expect("an approval is about a run")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_the_operator_approves_and_an_accepting_client_is_never_asked() {
    for approve in [true, false] {
        let Some(mut session) = Session::start(Approver::default()).await else { return };
        // The client hears that its call waits for the operator, and is asked nothing.
        let (told, before) = session.until("log").await;
        assert!(before.iter().all(|r| r["kind"] != "asked"), "the client was asked: {before:?}");
        let text = told["data"].as_str().unwrap_or_default();
        assert!(told["level"] == "notice" && text.contains("operator") && text.contains("desk.shred"), "{told}");
        assert_eq!(session.run_status(), RunStatus::AwaitingApproval, "nothing ran before the operator decided");

        let run = session.approval_asked().await;
        session.op.runtime.decide(&operator(), run, approve).await.expect("the run waits for the operator");
        let (answer, before) = session.until(if approve { "result" } else { "refused" }).await;
        assert!(before.iter().all(|r| r["kind"] != "asked"), "the client was asked: {before:?}");
        if approve {
            assert_eq!((answer["is_error"].as_bool(), answer["text"].as_str()), (Some(false), Some("shredded")));
            assert_eq!(session.run_status(), RunStatus::Completed);
        } else {
            assert_eq!(answer["data"]["reason"], "denied", "{answer}");
            assert_eq!(session.run_status(), RunStatus::Blocked, "denied, so it never ran");
        }
        assert_eq!(session.finish().await, 0, "the client's user was never asked to approve");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clients_user_approves_only_where_serving_says_so_and_never_above_its_ceiling() {
    // Within the ceiling: the client's user is asked, and its "accept" approves the run.
    let Some(mut session) = Session::start(Approver::Caller { ceiling: Risk::High }).await else { return };
    let (asked, _) = session.until("asked").await;
    assert!(asked["message"].as_str().unwrap().contains("desk.shred"), "{asked}");
    let (result, _) = session.until("result").await;
    assert_eq!(result["text"], "shredded", "{result}");
    assert_eq!(session.run_status(), RunStatus::Completed);
    assert_eq!(session.finish().await, 1);

    // Above the ceiling: the operator approves, as by default; the accepting user is never asked.
    let Some(mut session) = Session::start(Approver::Caller { ceiling: Risk::Medium }).await else { return };
    let (told, before) = session.until("log").await;
    assert!(before.iter().all(|r| r["kind"] != "asked"), "the client was asked: {before:?}");
    assert!(told["data"].as_str().unwrap_or_default().contains("operator"), "{told}");
    let run = session.approval_asked().await;
    session.op.runtime.decide(&operator(), run, true).await.unwrap();
    let (result, _) = session.until("result").await;
    assert_eq!(result["text"], "shredded", "{result}");
    assert_eq!(session.finish().await, 0, "a High run is above a Medium ceiling");
}
