//! The `agentry` command as a user drives it: the real binary (with the librarian registered, as a user's own
//! binary would), real processes, a real SQLite journal in a temporary folder, the reference "everything" MCP
//! server in its own process, a pseudo-terminal for the interactive approval. No sleeps: each step waits for a
//! line the command prints or for a process to end.

use expectrl::Expect;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_agentry_librarian");
const WAIT: Duration = Duration::from_secs(90);

fn agentry(dir: &Path) -> Command {
    let mut command = Command::new(BIN);
    command.current_dir(dir).env("AGENTRY_USER_CONFIG", "").env("HOME", dir).env("NO_COLOR", "1");
    command
}

/// Runs a command to its end: exit code, stdout, stderr.
fn finish(command: &mut Command) -> (i32, String, String) {
    let output = command.output().expect("the binary runs");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (output.status.code().unwrap_or(-1), text(&output.stdout), text(&output.stderr))
}

/// `agentry run` in the background, its stdout read line by line.
struct Running {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Running {
    fn start(dir: &Path, args: &[&str]) -> Self {
        let mut child = agentry(dir)
            .arg("run")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("agentry run starts");
        let stdout = child.stdout.take().expect("piped");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut running = Self { child, lines, seen: Vec::new() };
        running.until(|l| l.starts_with("ready:"));
        running
    }

    /// Waits for the first line from now that `pred` accepts.
    fn until(&mut self, pred: impl Fn(&str) -> bool) -> String {
        loop {
            match self.lines.recv_timeout(WAIT) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if pred(&line) {
                        return line;
                    }
                }
                Err(_) => panic!("the awaited line never came; agentry run printed:\n{}", self.seen.join("\n")),
            }
        }
    }

    /// Ctrl-C: SIGINT, then the exit status and the rest of what it printed.
    fn interrupt(mut self) -> (ExitStatus, Vec<String>) {
        let pid = self.child.id().to_string();
        assert!(Command::new("kill").args(["-INT", &pid]).status().expect("kill runs").success());
        let status = self.child.wait().expect("it ends");
        let rest: Vec<String> = self.lines.try_iter().collect();
        (status, rest)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn manifest(dir: &Path, text: &str) {
    std::fs::write(dir.join("agentry.toml"), text).expect("the manifest is written");
}

const HELPER: &str = r#"
[agents.helper]
type = "tools"
skills = ["fs", "memory"]

[agents.helper.permissions]
grants = ["fs", "memory"]
ask = ["fs.write"]
"#;

/// The run id in a "waits for approval [run <id>]" line.
fn run_of(line: &str) -> String {
    line.rsplit("[run ").next().and_then(|r| r.strip_suffix(']')).expect("a run id").to_owned()
}

#[test]
fn init_check_call_and_the_journal_shows_the_runs() {
    let dir = tempfile::tempdir().expect("a folder");
    let (code, out, _) = finish(agentry(dir.path()).arg("init"));
    assert_eq!(code, 0, "{out}");
    let (code, out, err) = finish(agentry(dir.path()).arg("check"));
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("ok (1 agents"), "{out}");
    // A second init does not overwrite.
    assert_eq!(finish(agentry(dir.path()).arg("init")).0, 2);

    let (code, out, err) = finish(agentry(dir.path()).args(["call", "helper", "fs.list", r#"{"path": "."}"#]));
    assert_eq!(code, 0, "{out}{err}");
    let outcome: Value = serde_json::from_str(&out).expect("the outcome as JSON");
    assert_eq!(outcome["status"], "completed");
    // Denied by the manifest: exit code 4, and the reason.
    let (code, out, _) = finish(agentry(dir.path()).args(["call", "helper", "system.stop", "{}"]));
    assert_eq!(code, 4, "{out}");
    assert!(out.contains("denied"), "{out}");
    // Not JSON: a usage error, and nothing ran.
    let (code, _, err) = finish(agentry(dir.path()).args(["call", "helper", "fs.list", "{path"]));
    assert_eq!((code, err.contains("not JSON")), (2, true), "{err}");

    let (code, out, _) = finish(agentry(dir.path()).args(["journal", "--json"]));
    assert_eq!(code, 0);
    let runs: Vec<Value> = out.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    let actions: Vec<(&str, &str)> = runs
        .iter()
        .map(|r| {
            (
                r["action"].as_str().unwrap_or(""),
                r["history"].as_array().and_then(|h| h.last()).and_then(|s| s[0].as_str()).unwrap_or(""),
            )
        })
        .collect();
    assert!(actions.contains(&("fs.list", "completed")), "{actions:?}");
    assert!(actions.contains(&("system.stop", "blocked")), "{actions:?}");
    assert!(
        !actions.iter().any(|(a, _)| *a == "fs.list" && runs.len() > 2),
        "the bad-JSON call ran nothing: {actions:?}"
    );
    // An agent that does not exist: exit code 6.
    assert_eq!(finish(agentry(dir.path()).args(["inspect", "nobody"])).0, 6);
}

#[test]
fn the_librarian_and_the_everything_server_run_from_a_manifest_and_ctrl_c_stops_cleanly() {
    let script = agentry_tests::everything::script();
    let dir = tempfile::tempdir().expect("a folder");
    manifest(
        dir.path(),
        &format!(
            r#"
[agents.librarian]
type = "librarian"
skills = ["fs", "memory", "mcp.everything"]

[agents.librarian.permissions]
grants = ["fs", "memory", "net"]
allow = ["mcp.everything.trigger-long-running-operation"]

[mcp_servers.everything]
command = "node"
args = [{script:?}, "stdio"]
startup_timeout_sec = 60
"#,
            script = script.to_string_lossy()
        ),
    );
    let mut run = Running::start(dir.path(), &[]);
    assert!(run.seen.last().is_some_and(|l| l.contains("1 MCP server")), "{:?}", run.seen);
    // `call` finds the running runtime through its socket and runs the tool there.
    let (code, out, err) = finish(agentry(dir.path()).args([
        "call",
        "librarian",
        "mcp.everything.echo",
        r#"{"message": "over the wire"}"#,
    ]));
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("over the wire"), "{out}");
    run.until(|l| l.contains("mcp.everything.echo completed"));
    // Long work shows its progress as it goes, a line for each step (the server reports four).
    let (code, out, err) = finish(agentry(dir.path()).args([
        "call",
        "librarian",
        "mcp.everything.trigger-long-running-operation",
        r#"{"duration": 1, "steps": 4}"#,
    ]));
    assert_eq!(code, 0, "{out}{err}");
    let long = "mcp.everything.trigger-long-running-operation";
    let first = run.until(|l| l.contains(long) && l.contains('%'));
    assert!(first.contains("25%"), "{first}");
    let last = run.until(|l| l.contains(long) && (l.contains("100%") || l.contains("completed")));
    assert!(last.contains("100%"), "the last step is shown before the run ends: {last}");
    let (status, rest) = run.interrupt();
    assert_eq!(status.code(), Some(130), "{rest:?}");
    assert!(rest.iter().any(|l| l == "stopped"), "{rest:?}");
    // Nothing lost: the journal has the run, and the librarian comes back on the next start.
    let (_, out, _) =
        finish(agentry(dir.path()).args(["journal", "--action", "mcp.everything.echo", "--status", "completed"]));
    assert_eq!(out.lines().count(), 1, "{out}");
    let run = Running::start(dir.path(), &[]);
    assert!(
        run.seen.iter().any(|l| l.contains("1 came back from the journal") || l.contains("came back")),
        "{:?}",
        run.seen
    );
}

#[test]
fn an_approval_given_from_a_second_process_lets_the_run_go() {
    let dir = tempfile::tempdir().expect("a folder");
    manifest(dir.path(), HELPER);
    let mut run = Running::start(dir.path(), &["--no-prompt"]);
    let call = {
        let mut command = agentry(dir.path());
        command.args(["call", "helper", "fs.write", r#"{"path": "note.txt", "content": "approved"}"#]);
        std::thread::spawn(move || finish(&mut command))
    };
    let asked = run.until(|l| l.contains("fs.write waits for approval"));
    let id = run_of(&asked);
    let (code, out, _) = finish(agentry(dir.path()).args(["approvals", "--json"]));
    assert_eq!(code, 0);
    let pending: Value = serde_json::from_str(out.lines().next().expect("one pending run")).expect("JSON");
    assert_eq!(pending["run"], id.as_str());
    assert_eq!(pending["params"]["content"], "approved", "the approver sees the params");
    assert_eq!(pending["contract"]["id"], "fs.write", "and the contract");
    // A run that does not wait: exit code 6.
    assert_eq!(finish(agentry(dir.path()).args(["approvals", "approve", &uuid::Uuid::nil().to_string()])).0, 6);
    let (code, out, err) = finish(agentry(dir.path()).args(["approvals", "approve", &id]));
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = call.join().expect("the call ends");
    assert_eq!(code, 0, "{out}{err}");
    run.until(|l| l.contains("fs.write completed"));
}

#[test]
fn an_approval_asked_in_the_terminal_is_answered_there() {
    let dir = tempfile::tempdir().expect("a folder");
    manifest(dir.path(), HELPER);
    let mut command = agentry(dir.path());
    command.arg("run");
    let mut session = expectrl::Session::spawn(command).expect("agentry run starts in a pseudo-terminal");
    session.set_expect_timeout(Some(WAIT));
    session.expect("ready:").expect("it gets ready");
    let call = {
        let mut command = agentry(dir.path());
        command.args(["call", "helper", "fs.write", r#"{"path": "pty.txt", "content": "typed"}"#]);
        std::thread::spawn(move || finish(&mut command))
    };
    session.expect("[s]how params: ").expect("the question");
    session.send_line("s").expect("typed");
    session.expect("\"content\": \"typed\"").expect("the params shown");
    session.expect("[s]how params: ").expect("asked again");
    session.send_line("a").expect("typed");
    session.expect("approved").expect("the answer taken");
    let (code, out, err) = call.join().expect("the call ends");
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("completed"), "{out}");
}

#[test]
fn ctrl_c_while_a_run_waits_ends_it_as_cancelled_in_the_journal() {
    let dir = tempfile::tempdir().expect("a folder");
    manifest(dir.path(), HELPER);
    let mut run = Running::start(dir.path(), &["--no-prompt"]);
    let call = {
        let mut command = agentry(dir.path());
        command.args(["call", "helper", "fs.write", r#"{"path": "later.txt", "content": "kept"}"#]);
        std::thread::spawn(move || finish(&mut command))
    };
    let id = run_of(&run.until(|l| l.contains("fs.write waits for approval")));
    let (status, rest) = run.interrupt();
    assert_eq!(status.code(), Some(130), "{rest:?}");
    let (code, _, err) = call.join().expect("the call ends");
    assert_ne!(code, 0, "the call did not complete: {err}");
    // Nothing half-done: the journal says the run ended, cancelled by the shutdown, and nothing was written.
    let (_, out, _) = finish(agentry(dir.path()).args(["journal", "--json", "--action", "fs.write"]));
    let record: Value = serde_json::from_str(out.lines().next().expect("the run")).expect("JSON");
    assert_eq!(record["run"], id.as_str());
    assert_eq!(record["error"], "cancelled", "{record}");
    let (_, out, _) = finish(agentry(dir.path()).args(["approvals"]));
    assert!(out.contains("no run waits"), "{out}");
}

/// Waits until the journal (read by another process, as an operator would) has a run of `action` in
/// `status`: the runtime commits in batches, a moment after it announces.
fn until_journaled(dir: &Path, action: &str, status: &str) -> Value {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let (_, out, _) = finish(agentry(dir).args(["journal", "--json", "--action", action, "--status", status]));
        if let Some(line) = out.lines().next() {
            return serde_json::from_str(line).expect("a JSON line");
        }
        assert!(std::time::Instant::now() < deadline, "no {action} run reached {status} in the journal");
    }
}

#[test]
fn a_decision_made_while_no_runtime_runs_applies_on_the_next_start() {
    let dir = tempfile::tempdir().expect("a folder");
    manifest(
        dir.path(),
        "[agents.librarian]\ntype = \"librarian\"\n\n[agents.librarian.permissions]\ngrants = [\"fs\", \"memory\"]\nask = [\"fs.list\"]\n",
    );
    let mut run = Running::start(dir.path(), &["--no-prompt"]);
    // The librarian asks for `fs.list` itself when it learns: its own run, which outlives any caller.
    let (code, out, err) = finish(agentry(dir.path()).args(["send", "librarian", "learn"]));
    assert_eq!(code, 0, "{out}{err}");
    let id = run_of(&run.until(|l| l.contains("fs.list waits for approval")));
    until_journaled(dir.path(), "fs.list", "awaiting_approval");
    // The process dies (kill -9): the run still waits, as the journal has it.
    run.child.kill().expect("killed");
    run.child.wait().expect("it ended");
    let (_, out, _) = finish(agentry(dir.path()).args(["approvals"]));
    assert!(out.contains(&id), "the waiting run survived the crash: {out}");
    let (code, out, _) = finish(agentry(dir.path()).args(["approvals", "approve", &id]));
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("applied when `agentry run` starts"), "{out}");
    // `send` needs a live runtime: none runs now.
    assert_eq!(finish(agentry(dir.path()).args(["send", "librarian", "learn"])).0, 5);
    let mut run = Running::start(dir.path(), &["--no-prompt"]);
    run.until(|l| l.contains(&format!("applied the decision kept for run {id}")));
    run.until(|l| l.contains("fs.list completed"));
}

#[test]
fn a_rate_limit_holds_under_a_burst_of_calls() {
    let dir = tempfile::tempdir().expect("a folder");
    manifest(dir.path(), &format!("{HELPER}\n[rate_limits]\n\"fs.list\" = {{ runs = 2, per = \"1h\" }}\n"));
    let _run = Running::start(dir.path(), &["--no-prompt"]);
    let calls: Vec<_> = (0..4)
        .map(|_| {
            let mut command = agentry(dir.path());
            command.args(["call", "helper", "fs.list", r#"{"path": "."}"#]);
            std::thread::spawn(move || finish(&mut command))
        })
        .collect();
    let results: Vec<_> = calls.into_iter().map(|c| c.join().expect("ends")).collect();
    let completed = results.iter().filter(|(code, _, _)| *code == 0).count();
    let limited = results.iter().filter(|(code, out, _)| *code == 4 && out.contains("rate_limited")).count();
    assert_eq!((completed, limited), (2, 2), "{results:#?}");
}

#[test]
fn history_lists_the_inputs_and_state_at_folds_them() {
    let dir = tempfile::tempdir().expect("a folder");
    manifest(
        dir.path(),
        "[runtime]\nkeep_history = true\nsnapshot_every = 2\n\n[agents.librarian]\ntype = \"librarian\"\n\n[agents.librarian.permissions]\ngrants = [\"fs\", \"memory\"]\n",
    );
    let mut run = Running::start(dir.path(), &["--no-prompt"]);
    let (code, _, err) = finish(agentry(dir.path()).args(["send", "librarian", "learn"]));
    assert_eq!(code, 0, "{err}");
    run.until(|l| l.contains("fs.list completed"));
    let (status, _) = run.interrupt();
    assert_eq!(status.code(), Some(130));

    let (code, out, _) = finish(agentry(dir.path()).args(["history", "librarian", "--json"]));
    assert_eq!(code, 0);
    let inputs: Vec<Value> = out.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    let kinds: Vec<&str> = inputs.iter().map(|i| i["signal"]["kind"].as_str().unwrap_or("")).collect();
    assert_eq!(kinds.first(), Some(&"learn"), "{kinds:?}");
    assert!(kinds.contains(&"action.completed"), "the recorded outcome is an input: {kinds:?}");
    let state_at = |seq: u64| {
        let (code, out, err) = finish(agentry(dir.path()).args(["state", "librarian", "--at", &seq.to_string()]));
        assert_eq!(code, 0, "{err}");
        serde_json::from_str::<Value>(&out).expect("JSON")["state"]["domain"].clone()
    };
    assert!(state_at(1)["learning"].is_string(), "right after `learn` it is learning");
    let last = inputs.last().and_then(|i| i["seq"].as_u64()).expect("a last input");
    assert!(state_at(last)["learning"].is_null(), "after the last input it has answered");
    assert_eq!(finish(agentry(dir.path()).args(["state", "librarian", "--at", &(last + 1).to_string()])).0, 6);
}

#[test]
fn serve_mcp_answers_a_desktop_client_on_stdio_and_calls_pass_the_gate() {
    use std::io::Write;
    let dir = tempfile::tempdir().expect("a folder");
    manifest(dir.path(), &format!("{HELPER}\n[permissions]\ndeny = [\"fs.delete\"]\n"));
    let mut child = agentry(dir.path())
        .args(["serve-mcp", "--agent", "helper"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("serve-mcp starts");
    let mut stdin = child.stdin.take().expect("piped");
    let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
    let mut ask = |id: u64, method: &str, params: Value| -> Value {
        let request = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(stdin, "{request}").expect("sent");
        if method == "initialize" {
            let line = lines.next().expect("an answer").expect("read");
            writeln!(stdin, "{}", serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
                .expect("sent");
            return serde_json::from_str(&line).expect("JSON");
        }
        loop {
            let line = lines.next().expect("an answer").expect("read");
            let answer: Value = serde_json::from_str(&line).expect("every stdout line is JSON-RPC");
            if answer["id"] == id {
                return answer;
            }
        }
    };
    let init = ask(
        1,
        "initialize",
        serde_json::json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "desktop", "version": "1"}}),
    );
    assert!(init["result"]["serverInfo"].is_object(), "{init}");
    let tools = ask(2, "tools/list", serde_json::json!({}));
    let names: Vec<&str> =
        tools["result"]["tools"].as_array().expect("tools").iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.iter().any(|n| n.contains("fs") && n.contains("list")), "{names:?}");
    let listed = names.iter().find(|n| n.contains("fs") && n.contains("list")).expect("fs.list").to_string();
    let called = ask(3, "tools/call", serde_json::json!({"name": listed, "arguments": {"path": "."}}));
    assert_eq!(called["result"]["isError"], false, "{called}");
    let deleted = names.iter().find(|n| n.contains("fs") && n.contains("delete")).map(ToString::to_string);
    if let Some(delete) = deleted {
        let refused = ask(4, "tools/call", serde_json::json!({"name": delete, "arguments": {"path": "x"}}));
        assert!(
            refused["result"]["isError"] == true || refused["error"].is_object(),
            "the manifest's deny holds: {refused}"
        );
    }
    drop(stdin);
    let status = child.wait().expect("it ends when the client goes");
    assert!(status.success(), "{status:?}");
    let (_, out, _) = finish(agentry(dir.path()).args(["journal", "--action", "fs.list", "--status", "completed"]));
    assert_eq!(out.lines().count(), 1, "the served call is journaled: {out}");
}

#[test]
fn two_processes_never_run_one_data_folder() {
    let dir = tempfile::tempdir().expect("a folder");
    manifest(dir.path(), HELPER);
    let _run = Running::start(dir.path(), &["--no-prompt"]);
    let (code, _, err) = finish(agentry(dir.path()).args(["run", "--no-prompt"]));
    assert_eq!(code, 5, "{err}");
    assert!(err.contains("another agentry process runs on"), "{err}");
    let (code, _, err) = finish(agentry(dir.path()).args(["serve-mcp", "--agent", "helper"]).stdin(Stdio::null()));
    assert_eq!(code, 5, "{err}");
}

#[test]
fn fork_replays_recorded_runs_edited_or_not_and_leaves_the_journal_as_it_was() {
    let dir = tempfile::tempdir().expect("a folder");
    manifest(
        dir.path(),
        "[runtime]\nkeep_history = true\nsnapshot_every = 3\n\n[agents.librarian]\ntype = \"librarian\"\n\n[agents.librarian.permissions]\ngrants = [\"fs\", \"memory\"]\n",
    );
    let drive = dir.path().join(".agentry/agents/librarian/fs");
    std::fs::create_dir_all(&drive).expect("the drive");
    std::fs::write(drive.join("facts.txt"), "ada | wrote | the first program\nrust | is | a language\nnot a fact\n")
        .expect("a file");
    let mut run = Running::start(dir.path(), &["--no-prompt"]);
    let (code, _, err) = finish(agentry(dir.path()).args(["send", "librarian", "learn"]));
    assert_eq!(code, 0, "{err}");
    run.until(|l| l.contains("memory.memorize completed"));
    run.until(|l| l.contains("memory.memorize completed"));
    let (status, _) = run.interrupt();
    assert_eq!(status.code(), Some(130));

    let journal = dir.path().join(".agentry").join(agentry::runtime::JOURNAL);
    let before = std::fs::read(&journal).expect("the journal");
    let (_, out, _) = finish(agentry(dir.path()).args(["history", "librarian", "--json"]));
    let inputs: Vec<Value> = out.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    let last = inputs.last().and_then(|i| i["seq"].as_u64()).expect("inputs");
    let (code, out, err) = finish(agentry(dir.path()).args(["state", "librarian", "--at", &last.to_string()]));
    assert_eq!(code, 0, "{err}");
    let live = serde_json::from_str::<Value>(&out).expect("JSON")["state"]["domain"].clone();
    assert_eq!(live["learned"], 2, "{live}");
    let fork = |extra: &[&str]| {
        let (code, out, err) =
            finish(agentry(dir.path()).args(["fork", "librarian", "--at", "1", "--json"]).args(extra));
        assert_eq!(code, 0, "{err}");
        serde_json::from_str::<Value>(&out).expect("JSON")
    };

    // As recorded: the same runs are asked for again and end as they did, none runs, and the state comes out
    // the same.
    let same = fork(&[]);
    let runs = same["runs"].as_array().expect("runs");
    let actions: Vec<&str> = runs.iter().filter_map(|r| r["action"].as_str()).collect();
    assert_eq!(actions.iter().filter(|a| **a == "memory.memorize").count(), 2, "{same}");
    assert!(actions.contains(&"fs.read"), "{same}");
    assert!(runs.iter().all(|r| r["replayed"] == true && r["status"] == "completed"), "{same}");
    assert_eq!(same["unreplayed"], serde_json::json!([]), "{same}");
    assert_eq!(same["state"]["domain"], live, "the fork comes to the live state");

    // The listing's outcome edited to say the drive is empty: the fork reads nothing and learns nothing, and
    // the recorded reads and memorizations are left over.
    let edited: Vec<String> = inputs
        .iter()
        .filter(|i| i["seq"].as_u64() > Some(1))
        .map(|i| {
            let mut i = i.clone();
            if i["signal"]["data"]["action"] == "fs.list" {
                i["signal"]["data"]["outcome"]["output"] = serde_json::json!([]);
            }
            i.to_string()
        })
        .collect();
    let file = dir.path().join("edited.jsonl");
    std::fs::write(&file, edited.join("\n")).expect("written");
    let empty = fork(&["--inputs", file.to_str().expect("UTF-8")]);
    assert_eq!(empty["runs"], serde_json::json!([]), "{empty}");
    assert_eq!(empty["state"]["domain"]["learned"], 0, "{empty}");
    assert!(empty["state"]["domain"]["learning"].is_null(), "learning is over: {empty}");
    let left: u64 = empty["unreplayed"].as_array().expect("a list").iter().filter_map(|u| u["runs"].as_u64()).sum();
    assert_eq!(left, 3, "one read and two memorizations never asked for: {empty}");

    // The listing's outcome dropped: the fork is still waiting for it.
    let listing = inputs
        .iter()
        .find(|i| i["signal"]["data"]["action"] == "fs.list")
        .and_then(|i| i["seq"].as_u64())
        .expect("the listing's outcome");
    let waiting = fork(&["--drop", &listing.to_string()]);
    assert_eq!(waiting["state"]["domain"]["outstanding"], 1, "{waiting}");
    assert!(waiting["state"]["domain"]["learning"].is_string(), "{waiting}");

    assert_eq!(std::fs::read(&journal).expect("the journal"), before, "the live journal is byte-for-byte the same");
    let (code, _, err) = finish(agentry(dir.path()).args(["fork", "librarian", "--at", "1", "--drop", "999"]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--drop 999"), "{err}");
}

/// llama.cpp's server on loopback (kept alive by what is returned), or `None` after saying loudly why not.
fn model_server() -> Option<(tokio::runtime::Runtime, tokio::process::Child, String)> {
    let home = match agentry_tests::llama::installed() {
        Ok(home) => home,
        Err(why) => {
            eprintln!("SKIPPED: llama.cpp's server could not be installed: {why}");
            return None;
        }
    };
    let tokio = tokio::runtime::Runtime::new().expect("a tokio runtime");
    match tokio.block_on(agentry_tests::llama::serve(&home)) {
        Ok((server, base_url)) => Some((tokio, server, base_url)),
        Err(why) => {
            eprintln!("SKIPPED: llama.cpp's server could not be started: {why}");
            None
        }
    }
}

/// A manifest with the model server and one LLM agent `pal`, plus `extra`.
fn pal(dir: &Path, base_url: &str, extra: &str) {
    manifest(
        dir,
        &format!(
            "[models.local]\nprovider = \"openai\"\nbase_url = \"{base_url}\"\nmodel = \"smollm2\"\n\n[agents.pal]\ntype = \"llm\"\nmodel = \"local\"\ninstructions = \"Answer in one short sentence.\"\nmax_turns = 2\n{extra}"
        ),
    );
}

/// `agentry chat pal` with these lines typed: exit code, stdout, stderr.
fn chat(dir: &Path, typed: &[&str]) -> (Option<i32>, String, String) {
    use std::io::Write;
    let mut child = agentry(dir)
        .args(["chat", "pal", "--timeout", "3m"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("agentry chat starts");
    let mut stdin = child.stdin.take().expect("piped");
    for line in typed {
        writeln!(stdin, "{line}").expect("typed");
    }
    drop(stdin);
    let output = child.wait_with_output().expect("it ends");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (output.status.code(), text(&output.stdout), text(&output.stderr))
}

/// The journal's runs of the model action, oldest first.
fn model_calls(dir: &Path) -> Vec<Value> {
    let (_, out, _) = finish(agentry(dir).args(["journal", "--action", "llm.local.chat", "--json"]));
    out.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect()
}

/// The statuses a journaled run went through.
fn statuses(run: &Value) -> Vec<String> {
    run["history"].as_array().into_iter().flatten().filter_map(|s| s[0].as_str().map(str::to_owned)).collect()
}

#[test]
fn chat_talks_to_an_llm_agent_on_a_real_model_server_and_the_conversation_goes_on_next_time() {
    let Some((_tokio, _server, base_url)) = model_server() else { return };
    let dir = tempfile::tempdir().expect("a folder");
    pal(dir.path(), &base_url, "");
    let (code, out, err) = chat(dir.path(), &["Say hello.", "/exit"]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(out.contains("you> agent: "), "the answer follows the message: {out}\n{err}");
    let (code, out, err) = chat(dir.path(), &["Say goodbye."]);
    assert_eq!(code, Some(0), "end of input ends it: {out}\n{err}");

    assert_eq!(model_calls(dir.path()).len(), 2, "one model call a message");
    let (code, inspected, err) = finish(agentry(dir.path()).args(["inspect", "pal"]));
    assert_eq!(code, 0, "{err}");
    assert!(
        inspected.contains("Say hello.") && inspected.contains("Say goodbye."),
        "the second chat went on with the first's conversation: {inspected}"
    );
}

#[test]
fn a_spent_budget_refuses_the_next_model_call_or_pauses_it_for_an_approval_given_in_the_chat() {
    let Some((_tokio, _server, base_url)) = model_server() else { return };
    // One token an hour: the first call is let through (nothing is spent yet), and spends it.
    let refusing = tempfile::tempdir().expect("a folder");
    pal(refusing.path(), &base_url, "\n[agents.pal.budgets]\n\"llm.local.chat\" = { limit = 1, window = \"1h\" }\n");
    let (code, out, err) = chat(refusing.path(), &["Say hello.", "Say more."]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(err.contains("the exchange stopped"), "the second message is not answered: {out}\n{err}");
    let calls = model_calls(refusing.path());
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(statuses(&calls[0]).last().map(String::as_str), Some("completed"), "{calls:?}");
    assert_eq!(statuses(&calls[1]).last().map(String::as_str), Some("blocked"), "{calls:?}");
    assert_eq!(calls[1]["error"], "budget_exceeded", "{calls:?}");

    // Spent, and `when_spent = "ask"`: the call waits for an approval, asked in the chat. An answer typed before
    // the question (here with the messages, all at once) is set aside, never taken for an approval.
    let asking = tempfile::tempdir().expect("a folder");
    let ask_when_spent =
        "\n[agents.pal.budgets]\n\"llm.local.chat\" = { limit = 1, window = \"1h\", when_spent = \"ask\" }\n";
    pal(asking.path(), &base_url, ask_when_spent);
    let (code, out, err) = chat(asking.path(), &["Say hello.", "Say more.", "a"]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(err.contains("set aside") && err.contains("[a]pprove"), "asked, the early answer set aside: {err}");
    assert!(!err.contains("approved"), "{err}");
    let calls = model_calls(asking.path());
    assert_eq!(calls.len(), 2, "{calls:?}");
    let second = statuses(&calls[1]);
    assert!(second.contains(&"awaiting_approval".to_owned()), "paused: {second:?}");
    assert!(!second.contains(&"completed".to_owned()), "never approved: {second:?}");

    // In a terminal: the question, then the answer typed after it.
    let answered = tempfile::tempdir().expect("a folder");
    pal(answered.path(), &base_url, ask_when_spent);
    let mut command = agentry(answered.path());
    command.args(["chat", "pal", "--timeout", "3m"]);
    let mut session = expectrl::Session::spawn(command).expect("a pseudo-terminal");
    session.set_expect_timeout(Some(WAIT));
    session.expect("you> ").expect("the prompt");
    session.send_line("Say hello.").expect("typed");
    session.expect("you> ").expect("answered");
    session.send_line("Say more.").expect("typed");
    session.expect("[a]pprove").expect("the question");
    session.send_line("a").expect("typed");
    session.expect("approved").expect("the answer taken");
    session.expect("you> ").expect("answered over the budget");
    session.send_line("/exit").expect("typed");
    session.expect(expectrl::Eof).expect("it ends");
    let calls = model_calls(answered.path());
    assert_eq!(calls.len(), 2, "{calls:?}");
    let second = statuses(&calls[1]);
    assert!(second.contains(&"awaiting_approval".to_owned()), "paused: {second:?}");
    assert_eq!(second.last().map(String::as_str), Some("completed"), "then let run over the budget: {second:?}");
}

#[test]
fn sim_runs_a_scenario_into_a_table_and_a_plot_the_same_for_the_same_seed() {
    let dir = tempfile::tempdir().expect("a folder");
    let example = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/scenario.toml"))
        .expect("the example");
    std::fs::write(dir.path().join("scenario.toml"), &example).expect("written");
    let (code, out, err) = finish(agentry(dir.path()).args(["sim", "scenario.toml", "--json"]));
    assert_eq!(code, 0, "{err}");
    assert!(err.is_empty(), "no progress bar off a terminal: {err:?}");
    let summary: Value = serde_json::from_str(&out).expect("one JSON object");
    assert_eq!((summary["agents"].as_u64(), summary["samples"].as_u64()), (Some(20), Some(61)), "{summary}");
    assert!(summary["last"]["completed"].as_f64() > Some(100.0), "{summary}");
    assert!(summary["last"]["learned"].as_f64() > Some(0.0), "modelled outputs meet the schemas: {summary}");
    let csv = std::fs::read_to_string(dir.path().join("scenario.csv")).expect("the table");
    assert_eq!(csv.lines().next(), Some("time,completed,failed,blocked,learned"));
    assert_eq!(csv.lines().count(), 62);
    let svg = std::fs::read_to_string(dir.path().join("scenario.svg")).expect("the plot");
    assert!(svg.contains("<svg") && svg.contains("Librarians asked and learning"));
    // Again, as text, elsewhere: the same run.
    let (code, out, err) = finish(agentry(dir.path()).args(["sim", "scenario.toml", "--out", "again"]));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(summary["trace_hash"].as_str().expect("a hash")), "{out}");
    assert_eq!(std::fs::read(dir.path().join("again/scenario.csv")).expect("the table"), csv.as_bytes());
    // A progress bar on a terminal, as it goes.
    let mut command = agentry(dir.path());
    command.env("TERM", "xterm-256color").env_remove("NO_COLOR").args(["sim", "scenario.toml", "--out", "shown"]);
    let mut session = expectrl::Session::spawn(command).expect("a pseudo-terminal");
    session.set_expect_timeout(Some(WAIT));
    session.expect("virtual time").expect("the progress bar");
    session.expect(expectrl::Eof).expect("it ends");
}

#[test]
fn sim_points_at_a_model_for_an_action_the_type_does_not_have() {
    let dir = tempfile::tempdir().expect("a folder");
    let text = "seed = 1\nduration = \"1m\"\n\n[agents.l]\ntype = \"librarian\"\n\n[models.\"fs.lst\"]\nlatency = { fixed = \"1s\" }\n";
    std::fs::write(dir.path().join("bad.toml"), text).expect("written");
    let (code, out, err) = finish(agentry(dir.path()).args(["sim", "bad.toml"]));
    assert_eq!(code, 3, "{err}");
    assert!(out.is_empty() && err.contains("bad.toml:7:") && err.contains("did you mean `fs.list`?"), "{err}");
    assert!(!dir.path().join("bad.csv").exists(), "nothing ran");
}

/// A manifest with the everything server, `rules` added to its section.
fn everything(dir: &Path, rules: &str) {
    let script = agentry_tests::everything::script();
    manifest(
        dir,
        &format!(
            "[mcp_servers.everything]\ncommand = \"node\"\nargs = [{script:?}, \"stdio\"]\nstartup_timeout_sec = 60\n{rules}\n",
            script = script.to_string_lossy()
        ),
    );
}

#[test]
fn mcp_inspect_lists_a_server_s_tools_with_the_risk_agentry_gives_each() {
    let dir = tempfile::tempdir().expect("a folder");
    everything(dir.path(), "disabled_tools = [\"get-env\"]");
    let (code, out, err) = finish(agentry(dir.path()).args(["mcp", "inspect", "everything", "--json"]));
    assert_eq!(code, 0, "{err}");
    let inspected: Value = serde_json::from_str(&out).expect("JSON");
    let tools = inspected["tools"].as_array().expect("tools");
    let tool = |name: &str| tools.iter().find(|t| t["tool"] == name).unwrap_or_else(|| panic!("{name}: {inspected}"));
    let echo = tool("echo");
    assert_eq!(echo["action"], "mcp.everything.echo", "{echo}");
    assert_eq!(echo["risk"], "medium", "an untrusted server's read-only hint lowers the risk only so far: {echo}");
    assert_eq!(echo["enabled"], true, "{echo}");
    assert_eq!(tool("get-env")["enabled"], false, "kept out by disabled_tools: {inspected}");
    assert!(echo["risk_reason"].as_str().is_some_and(|r| r.contains("untrusted")), "{echo}");
    assert!(inspected["server_info"]["protocol_version"].is_string(), "{inspected}");
    // As text, and a server the manifest does not have.
    let (code, out, _) = finish(agentry(dir.path()).args(["mcp", "inspect", "everything"]));
    assert_eq!(code, 0);
    assert!(out.lines().any(|l| l.contains("mcp.everything.echo") && l.contains("medium")), "{out}");
    let (code, _, err) = finish(agentry(dir.path()).args(["mcp", "inspect", "nope"]));
    assert_eq!(code, 6, "{err}");
    assert!(err.contains("everything"), "it names the servers it has: {err}");
    // Trusted, its hints count as they are.
    everything(dir.path(), "trust = \"trusted\"");
    let (code, out, err) = finish(agentry(dir.path()).args(["mcp", "inspect", "everything", "--json"]));
    assert_eq!(code, 0, "{err}");
    let inspected: Value = serde_json::from_str(&out).expect("JSON");
    let echo = inspected["tools"].as_array().and_then(|t| t.iter().find(|t| t["tool"] == "echo")).expect("echo");
    assert_eq!(echo["risk"], "low", "{echo}");
}

#[test]
fn mcp_validate_checks_a_server_and_fails_on_a_rule_that_matches_no_tool() {
    let dir = tempfile::tempdir().expect("a folder");
    everything(dir.path(), "");
    let (code, out, err) = finish(agentry(dir.path()).args(["mcp", "validate", "everything"]));
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("all 7 checks pass"), "{out}");

    everything(dir.path(), "enabled_tools = [\"echo\", \"no-such-tool\"]");
    let (code, out, err) = finish(agentry(dir.path()).args(["mcp", "validate", "everything", "--json"]));
    assert_eq!(code, 7, "{out}{err}");
    let report: Value = serde_json::from_str(&out).expect("JSON");
    let checks = report["checks"].as_array().expect("checks");
    let failed: Vec<&str> =
        checks.iter().filter(|c| c["outcome"] == "fail").filter_map(|c| c["check"].as_str()).collect();
    assert_eq!(failed, vec!["tool_rules"], "{report}");
    assert!(checks.iter().any(|c| c["detail"].as_str().is_some_and(|d| d.contains("no-such-tool"))), "{report}");

    // A server that never answers `initialize`: `starts` fails in time, the rest are skipped.
    manifest(dir.path(), "[mcp_servers.mute]\ncommand = \"sleep\"\nargs = [\"30\"]\nstartup_timeout_sec = 1\n");
    let (code, out, err) = finish(agentry(dir.path()).args(["mcp", "validate", "mute", "--json"]));
    assert_eq!(code, 7, "{out}{err}");
    let report: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(report["checks"][0]["check"], "starts");
    assert_eq!(report["checks"][0]["outcome"], "fail", "{report}");
    assert!(report["checks"].as_array().expect("checks")[1..].iter().all(|c| c["outcome"] == "skip"), "{report}");
}

#[test]
fn tools_lists_a_type_s_own_skills_and_only_what_an_llm_agent_offers_its_model() {
    let dir = tempfile::tempdir().expect("a folder");
    manifest(
        dir.path(),
        "[models.local]\nprovider = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n\n[agents.librarian]\ntype = \"librarian\"\n\n[agents.librarian.permissions]\ngrants = [\"fs\", \"memory\"]\n\n[agents.pal]\ntype = \"llm\"\nmodel = \"local\"\nskills = [\"fs\", \"memory\"]\ntools = [\"fs.read\", \"memory.*\"]\n\n[agents.pal.permissions]\ngrants = [\"fs\", \"memory\"]\n",
    );
    let names = |agent: &str| -> Vec<String> {
        let (code, out, err) = finish(agentry(dir.path()).args(["tools", "--agent", agent, "--format", "mcp"]));
        assert_eq!(code, 0, "{err}");
        let tools: Vec<Value> = serde_json::from_str(&out).expect("a JSON list");
        tools.iter().filter_map(|t| t["name"].as_str().map(str::to_owned)).collect()
    };
    let librarian = names("librarian");
    assert!(librarian.iter().any(|n| n.starts_with("fs")), "its type's own start skills: {librarian:?}");
    assert!(librarian.iter().any(|n| n.starts_with("memory")), "{librarian:?}");
    let pal = names("pal");
    assert!(pal.iter().any(|n| n.contains("read")), "{pal:?}");
    assert!(!pal.iter().any(|n| n.contains("write") || n.contains("list")), "only what `tools` offers: {pal:?}");
    assert!(!pal.iter().any(|n| n.contains("chat")), "never the model's own action: {pal:?}");
    assert!(pal.iter().any(|n| n.contains("recall")), "{pal:?}");
}

#[test]
fn a_tool_an_mcp_server_adds_while_agentry_runs_reaches_the_agent() {
    let dir = tempfile::tempdir().expect("a folder");
    manifest(
        dir.path(),
        &format!(
            "[agents.helper]\ntype = \"tools\"\nskills = [\"mcp.test\"]\n\n[agents.helper.permissions]\nallow = [\"mcp.test.*\"]\n\n[mcp_servers.test]\ncommand = {:?}\ntrust = \"trusted\"\n",
            env!("CARGO_BIN_EXE_mcp_test_server")
        ),
    );
    let mut run = Running::start(dir.path(), &["--no-prompt"]);
    let call = |action: &str, params: &str| finish(agentry(dir.path()).args(["call", "helper", action, params]));
    let (code, _, _) = call("mcp.test.extra", "{}");
    assert_eq!(code, 4, "no such tool yet");
    let (code, out, err) = call("mcp.test.add_tool", r#"{"name": "extra"}"#);
    assert_eq!(code, 0, "{out}{err}");
    let refreshed = run.until(|l| l.contains("refreshed mcp.test"));
    assert!(refreshed.contains("mcp.test.extra"), "{refreshed}");
    let (code, out, err) = call("mcp.test.extra", "{}");
    assert_eq!(code, 0, "the new tool runs: {out}{err}");
    assert!(out.contains("extra answers"), "{out}");
    let (status, _) = run.interrupt();
    assert_eq!(status.code(), Some(130));
}
