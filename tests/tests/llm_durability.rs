//! An LLM agent on SQLite killed with SIGKILL mid-loop and brought back in a new process: an approval asked
//! before the kill is given after it, no tool call that ran is run again, and no model turn the journal has is
//! asked again (the model of the new process is asked only for what the journal does not have).

use serde_json::{Value, json};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const WORKER: &str = env!("CARGO_BIN_EXE_llm_worker");

type Lines = tokio::io::Lines<BufReader<tokio::process::ChildStdout>>;

fn start(dir: &Path, mode: &str, turns: Value, approve: bool) -> (Child, Lines) {
    let mut command = Command::new(WORKER);
    command.arg(dir).arg(mode).arg(turns.to_string());
    if approve {
        command.arg("--approve");
    }
    let mut child = command.stdout(Stdio::piped()).kill_on_drop(true).spawn().expect("the worker starts");
    let stdout = child.stdout.take().expect("its stdout");
    (child, BufReader::new(stdout).lines())
}

/// Every line until one starts with `prefix` (within 60 s), that one last.
async fn until(lines: &mut Lines, prefix: &str) -> Vec<String> {
    let read = async {
        let mut seen = Vec::new();
        loop {
            match lines.next_line().await.expect("its output") {
                Some(line) => {
                    let done = line.starts_with(prefix);
                    seen.push(line);
                    if done {
                        return seen;
                    }
                }
                None => panic!("the worker ended before printing `{prefix}`: {seen:?}"),
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(60), read).await.unwrap_or_else(|_| panic!("no `{prefix}` within 60 s"))
}

async fn kill(mut child: Child) {
    child.start_kill().expect("the process can be killed");
    let _ = child.wait().await;
}

fn ledger(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("ledger")).unwrap_or_default().lines().map(str::to_owned).collect()
}

fn state(line: &str) -> Value {
    serde_json::from_str(line.trim_start_matches("state ")).expect("a state")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_asked_before_a_kill_is_given_after_it_and_the_model_is_not_asked_again() {
    let folder = tempfile::tempdir().expect("a folder");
    let dir = folder.path();
    let (child, mut lines) = start(dir, "ask", json!([{"call": ["notes__write", {"path": "a"}]}]), false);
    let asked = until(&mut lines, "approval-asked").await;
    assert!(asked.contains(&"model-call 1 user".to_owned()), "{asked:?}");
    let run = asked.last().expect("a line").trim_start_matches("approval-asked ").to_owned();
    kill(child).await;
    assert!(ledger(dir).is_empty(), "nothing written before the approval");

    let (resumed, mut lines) = start(dir, "resume", json!([{"text": "Written."}]), false);
    let seen = until(&mut lines, "state").await;
    kill(resumed).await;
    assert!(seen.contains(&format!("approved {run}")), "the same run waited again and was approved: {seen:?}");
    let calls: Vec<&String> = seen.iter().filter(|l| l.starts_with("model-call")).collect();
    assert_eq!(
        calls,
        ["model-call 1 tool"],
        "asked once, with the tool's result: the first turn came from the journal"
    );
    assert_eq!(ledger(dir), ["write a"], "the tool ran once");
    let state = state(seen.last().expect("the state"));
    let roles: Vec<&str> = state["conversation"]
        .as_array()
        .expect("a conversation")
        .iter()
        .map(|m| m["role"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(roles, ["user", "assistant", "tool", "assistant"]);
    assert_eq!(state["conversation"][3]["parts"][0]["text"], "Written.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_that_ran_before_a_kill_is_not_run_again() {
    let folder = tempfile::tempdir().expect("a folder");
    let dir = folder.path();
    // The second model call never answers: the process is killed while it waits, after the write ran.
    let (child, mut lines) = start(dir, "ask", json!([{"call": ["notes__write", {"path": "a"}]}]), true);
    until(&mut lines, "model-call 2 tool").await;
    kill(child).await;
    assert_eq!(ledger(dir), ["write a"]);

    let (resumed, mut lines) = start(dir, "resume", json!([{"text": "Done."}]), false);
    let seen = until(&mut lines, "state").await;
    kill(resumed).await;
    let calls: Vec<&String> = seen.iter().filter(|l| l.starts_with("model-call")).collect();
    assert_eq!(calls, ["model-call 1 tool"], "only the turn that never answered is asked again: {seen:?}");
    assert!(!seen.iter().any(|l| l.starts_with("approved")), "the approval given before the kill holds");
    assert_eq!(ledger(dir), ["write a"], "the write is not repeated");
    assert_eq!(state(seen.last().expect("the state"))["conversation"][3]["parts"][0]["text"], "Done.");
}
