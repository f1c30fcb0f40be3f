//! What a SQLite journal holds when the process dies right after one of its commits. The test runs itself
//! again as a child process, which writes a journal and aborts as soon as the commit it waits for is in the
//! file; the parent reads what the child left.

use super::SqliteStore;
use crate::id::{ActionId, AgentId};
use crate::signal::Signal;
use crate::store::{AgentRecord, Durable, PEN, RunPlan, RunRecord, RunStatus, RunUpdate, Snapshot, Store};
use serde_json::{Value, json};
use std::path::Path;

/// Set in the child process: the folder to write the journal in.
const CHILD_DIR: &str = "AGENTRY_ABORT_TEST_DIR";

/// A snapshot past the input that asked for a run whose outcome the agent was not given yet: once the snapshot
/// is durable, so is the run with its outcome, even when the process dies the moment the snapshot is committed
/// (the run, safe to start again, may otherwise be kept a little later than its end).
#[test]
fn a_snapshot_past_a_run_whose_outcome_waits_is_never_durable_without_the_run() {
    if let Some(dir) = std::env::var_os(CHILD_DIR) {
        snapshot_then_abort(Path::new(&dir));
    }
    let folder = tempfile::tempdir().expect("a folder");
    let name = concat!(module_path!(), "::a_snapshot_past_a_run_whose_outcome_waits_is_never_durable_without_the_run");
    let name = name.split_once("::").map_or(name, |(_crate, path)| path);
    let exe = std::env::current_exe().expect("the test binary");
    let child = std::process::Command::new(exe)
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD_DIR, folder.path())
        .output()
        .expect("the child runs");
    let stdout = String::from_utf8_lossy(&child.stdout);
    assert!(!child.status.success(), "the child aborted: {}\n{stdout}", child.status);
    let run: uuid::Uuid = stdout
        .lines()
        .find_map(|line| line.split_once("snapshotted ").map(|(_, run)| run.trim()))
        .unwrap_or_else(|| panic!("the child says what it wrote:\n{stdout}"))
        .parse()
        .expect("a run id");
    let store = SqliteStore::open(folder.path().join("journal.db")).expect("the journal opens");
    let revivals = store.revivals(&[me()]).expect("the journal reads");
    let revival = revivals.into_iter().next().expect("one revival").expect("w0 reads back");
    assert_eq!(revival.snapshot.map(|s| s.seq), Some(1), "the snapshot past the input is durable");
    let kept = revival.runs.iter().find(|r| r.record.run == run);
    assert!(
        kept.is_some_and(|r| r.outcome.is_some() && !r.delivered && r.record.status().is_final()),
        "the run ended with its outcome kept for the agent, so the recovery gives it: {:?}",
        revival.runs
    );
}

fn me() -> AgentId {
    AgentId::new("w0").expect("a valid id")
}

fn signal(kind: &str, data: Value) -> Signal {
    Signal::new(kind, data).expect("a valid kind")
}

/// In the child: logs an input of `w0` that asks for a run, ends the run (safe to start again) with its outcome
/// not consumed yet, snapshots `w0` past that input, and aborts as soon as the snapshot is committed (watched
/// from a second connection), printing `snapshotted <run>` first.
fn snapshot_then_abort(dir: &Path) -> ! {
    let path = dir.join("journal.db");
    let store = SqliteStore::open(&path).expect("the journal opens");
    let snapshot = |seq: u64| Snapshot {
        agent: me(),
        seq,
        agent_type: "worker".to_owned(),
        version: 1,
        state: json!({"seq": seq}),
        at: chrono::Utc::now(),
        incarnation: 0,
    };
    let record = AgentRecord { agent: me(), agent_type: "worker".to_owned(), spawn: json!({}), asleep: false };
    store.agent_spawned(PEN, record, snapshot(0));
    let go = signal("go", Value::Null);
    store.append_input(PEN, &me(), 1, &go);
    let run = uuid::Uuid::now_v7();
    let action = ActionId::new("ledger.append").expect("an id");
    store.record(PEN, RunRecord::queued(run, me(), action, &json!({}), go.id())).expect("recorded");
    let plan =
        RunPlan { key: "w0/1/0".to_owned(), params: json!({}), by_agent: true, cause: None, correlation: go.id() };
    store.run_planned(PEN, run, &plan);
    let done = RunUpdate { status: Some(RunStatus::Completed), ..RunUpdate::default() };
    store.update(PEN, run, done, chrono::Utc::now()).expect("ended");
    store.run_outcome(PEN, &me(), run, &signal("action.completed", json!({"run": run})), true);
    store.save_snapshot(PEN, snapshot(1));
    // Watching the file, not asking the store: a read through the store would flush everything first.
    let watcher = rusqlite::Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .expect("a second connection");
    loop {
        let seq: Option<i64> = watcher
            .query_row("SELECT json_extract(snapshot, '$.seq') FROM snapshots WHERE agent = 'w0'", [], |r| r.get(0))
            .unwrap_or(None);
        if seq == Some(1) {
            break;
        }
        std::thread::yield_now();
    }
    println!("snapshotted {run}");
    std::process::abort();
}
