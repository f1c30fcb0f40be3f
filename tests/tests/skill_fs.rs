//! The `fs` skill through a real runtime, on real files: every action, the drive's confinement (each way out
//! refused), artifacts, and `make_home_dir` as a routine whose nested calls pass the gate.

use agentry::action::Capability;
use agentry::events::EventKind;
use agentry::id::{AgentId, SkillId};
use agentry::policy::Policy;
use agentry::skill::SkillDefinition;
use agentry_skills::Files;
use agentry_tests::{McpWire, Operated};
use serde_json::json;
use std::path::PathBuf;

async fn files() -> Operated {
    Operated::start(vec![Files::skill().unwrap()], Policy::default().grant(Capability::FS), &[]).await
}

fn drive(op: &Operated) -> PathBuf {
    op.runtime.drive(&AgentId::new("operator").unwrap(), &SkillId::new("fs").unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_read_append_and_stat_work_on_real_files_inside_the_drive() {
    let op = files().await;
    let reply = op.run("fs.write", json!({"path": "notes/today.txt", "content": "tea at four\n"})).await;
    assert_eq!(reply["outcome"]["output"], json!({"path": "notes/today.txt", "bytes": 12}));
    assert_eq!(reply["outcome"]["artifacts"], json!(["notes/today.txt"]), "written files are artifacts");
    let on_disk = drive(&op).join("notes/today.txt");
    assert_eq!(std::fs::read_to_string(&on_disk).unwrap(), "tea at four\n");
    assert!(on_disk.starts_with(op.data.path().join("agents/operator/fs")));

    let read = op.output("fs.read", json!({"path": "notes/today.txt"})).await;
    assert_eq!(read["content"], "tea at four\n");
    let appended = op.output("fs.append", json!({"path": "notes/today.txt", "content": "cake at five\n"})).await;
    assert_eq!(appended["bytes"], 25);
    assert_eq!(std::fs::read_to_string(&on_disk).unwrap(), "tea at four\ncake at five\n");

    let stat = op.output("fs.stat", json!({"path": "notes/today.txt"})).await;
    assert_eq!(
        (stat["exists"].clone(), stat["kind"].clone(), stat["size"].clone()),
        (json!(true), json!("file"), json!(25))
    );
    assert_eq!(op.output("fs.stat", json!({"path": "nowhere"})).await["exists"], false);
    let (class, message) = op.failure("fs.read", json!({"path": "nowhere.txt"})).await;
    assert_eq!((class.as_str(), message.contains("does not exist")), ("validation", true), "{message}");
    let (class, message) = op.failure("fs.read", json!({"path": "notes/today.txt", "max_bytes": 4})).await;
    assert_eq!((class.as_str(), message.contains("at most 4")), ("validation", true), "{message}");
    std::fs::write(drive(&op).join("blob.bin"), [0xff, 0xfe, 0x00]).unwrap();
    let (class, message) = op.failure("fs.read", json!({"path": "blob.bin"})).await;
    assert_eq!((class.as_str(), message.contains("not UTF-8")), ("validation", true), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_follow_their_if_exists_policy() {
    let op = files().await;
    op.output("fs.write", json!({"path": "a.txt", "content": "one"})).await;
    let (class, message) = op.failure("fs.write", json!({"path": "a.txt", "content": "two"})).await;
    assert_eq!((class.as_str(), message.contains("already exists")), ("validation", true), "{message}");
    assert_eq!(std::fs::read_to_string(drive(&op).join("a.txt")).unwrap(), "one", "a refused write loses nothing");
    let renamed = op.output("fs.write", json!({"path": "a.txt", "content": "two", "if_exists": "rename"})).await;
    assert_eq!(renamed["path"], "a (1).txt");
    let renamed = op.output("fs.write", json!({"path": "a.txt", "content": "three", "if_exists": "rename"})).await;
    assert_eq!(renamed["path"], "a (2).txt");
    op.output("fs.write", json!({"path": "a.txt", "content": "four", "if_exists": "overwrite"})).await;
    assert_eq!(std::fs::read_to_string(drive(&op).join("a.txt")).unwrap(), "four");
    let (class, _) = op.failure("fs.write", json!({"path": "a.txt", "content": "x", "if_exists": "maybe"})).await;
    assert_eq!(class, "validation");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_mkdir_move_and_delete() {
    let op = files().await;
    assert_eq!(op.output("fs.mkdir", json!({"path": "docs/old"})).await, json!({"path": "docs/old", "created": true}));
    assert_eq!(op.output("fs.mkdir", json!({"path": "docs/old"})).await["created"], false);
    op.output("fs.write", json!({"path": "docs/a.md", "content": "alpha"})).await;
    op.output("fs.write", json!({"path": "docs/b.md", "content": "beta"})).await;
    let top = op.output("fs.list", json!({})).await;
    assert_eq!(top, json!([{"path": "docs", "kind": "dir", "size": 0}]));
    let all = op.output("fs.list", json!({"path": "docs", "recursive": true})).await;
    let paths: Vec<&str> = all.as_array().unwrap().iter().map(|e| e["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["docs/a.md", "docs/b.md", "docs/old"]);

    let (class, _) = op.failure("fs.move", json!({"from": "docs/a.md", "to": "docs/b.md"})).await;
    assert_eq!(class, "validation", "moving onto an existing file fails by default");
    let moved = op.output("fs.move", json!({"from": "docs/a.md", "to": "docs/b.md", "if_exists": "rename"})).await;
    assert_eq!(moved, json!({"from": "docs/a.md", "to": "docs/b (1).md"}));
    op.output("fs.move", json!({"from": "docs/b (1).md", "to": "archive/2026/a.md"})).await;
    assert_eq!(std::fs::read_to_string(drive(&op).join("archive/2026/a.md")).unwrap(), "alpha");

    let (class, message) = op.failure("fs.delete", json!({"path": "docs"})).await;
    assert_eq!(class, "validation", "a folder with files needs `recursive`: {message}");
    assert_eq!(op.output("fs.delete", json!({"path": "docs", "recursive": true})).await["deleted"], true);
    assert_eq!(op.output("fs.delete", json!({"path": "docs"})).await["deleted"], false);
    assert!(!drive(&op).join("docs").exists());
    let (class, _) = op.failure("fs.delete", json!({"path": ""})).await;
    assert_eq!(class, "denied", "the drive itself is never deleted");
    assert!(drive(&op).exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_way_out_of_the_drive_is_refused() {
    let op = files().await;
    op.output("fs.mkdir", json!({"path": "inside"})).await;
    let drive = drive(&op);
    // A sibling folder whose name starts like the drive's, with a secret in it, and a folder outside.
    let sibling = drive.with_file_name("fs_evil");
    std::fs::create_dir_all(&sibling).unwrap();
    std::fs::write(sibling.join("secret.txt"), "sibling secret").unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "outside secret").unwrap();
    std::os::unix::fs::symlink(outside.path(), drive.join("inside/out")).unwrap();
    std::os::unix::fs::symlink(&sibling, drive.join("evil")).unwrap();
    std::os::unix::fs::symlink("../../fs_evil/secret.txt", drive.join("inside/relative")).unwrap();

    let refused = [
        ("fs.read", json!({"path": "../fs_evil/secret.txt"}), "denied"),
        ("fs.read", json!({"path": "inside/../../fs_evil/secret.txt"}), "denied"),
        ("fs.read", json!({"path": "/etc/passwd"}), "denied"),
        ("fs.read", json!({"path": "inside/out/secret.txt"}), "denied"),
        ("fs.read", json!({"path": "evil/secret.txt"}), "denied"),
        ("fs.read", json!({"path": "inside/relative"}), "denied"),
        ("fs.write", json!({"path": "inside/out/planted.txt", "content": "x"}), "denied"),
        ("fs.write", json!({"path": "../fs_evil/planted.txt", "content": "x"}), "denied"),
        ("fs.list", json!({"path": "inside/out"}), "denied"),
        ("fs.mkdir", json!({"path": "evil/sub"}), "denied"),
        ("fs.move", json!({"from": "inside", "to": "../moved"}), "denied"),
        ("fs.read", json!({"path": "a\u{0}b"}), "validation"),
        ("fs.read", json!({"path": "x".repeat(256)}), "validation"),
        ("fs.read", json!({"path": "a/".repeat(2100)}), "validation"),
    ];
    for (action, params, expected) in refused {
        let (class, message) = op.failure(action, params.clone()).await;
        assert_eq!(class, expected, "{action} {params}: {message}");
    }
    assert!(!outside.path().join("planted.txt").exists() && !sibling.join("planted.txt").exists());
    assert!(!sibling.join("sub").exists());
    assert!(drive.join("inside").exists(), "a refused move loses nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_fs_capability_or_a_data_folder_runs_are_denied() {
    let op = Operated::start(vec![Files::skill().unwrap()], Policy::default(), &[]).await;
    let (class, message) = op.failure("fs.list", json!({})).await;
    assert_eq!(class, "denied", "{message}");
    let runtime = agentry::runtime::Runtime::builder().skill(Files::skill().unwrap()).build();
    let opts = agentry::runtime::SpawnOptions { policy: Policy::default().grant(Capability::FS), ..Default::default() };
    let agent = runtime.spawn(agentry_tests::Operator::default(), opts).await.unwrap();
    agent.mount(&SkillId::new("fs").unwrap(), serde_json::Value::Null).await.unwrap();
    let ask = agentry::signal::Signal::new("do", json!({"action": "fs.list", "params": {}})).unwrap();
    let reply = agent.call(ask, agentry_tests::CALL).await.unwrap();
    let message = reply["outcome"]["error"]["message"].as_str().unwrap();
    assert!(message.contains("no data folder"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn make_home_dir_calls_mkdir_through_the_gate_as_nested_runs() {
    let op = files().await;
    let mut events = op.runtime.events();
    let reply = op.run("fs.make_home_dir", json!({"user": "ada"})).await;
    assert_eq!(reply["kind"], "action.completed", "{reply:#}");
    let routine: uuid::Uuid = serde_json::from_value(reply["run_id"].clone()).unwrap();
    for folder in agentry_skills::fs::HOME_FOLDERS {
        assert!(drive(&op).join("home/ada").join(folder).is_dir(), "{folder}");
    }
    let mut nested = Vec::new();
    while nested.len() < 4 {
        let event = events.recv().await.unwrap();
        if let EventKind::ActionQueued { action, parent_run, depth } = event.kind
            && action.as_str() == "fs.mkdir"
        {
            assert_eq!((parent_run, depth), (Some(routine), 2), "the nesting shows on the event stream");
            nested.push(event.run.unwrap());
        }
    }
    for run in nested {
        assert_eq!(op.runtime.store().get(run).unwrap().parent_run, Some(routine), "and in the journal");
    }
    let (class, _) = op.failure("fs.make_home_dir", json!({"user": "../root"})).await;
    assert_eq!(class, "validation");

    // A nested call passes the same gate: with fs.mkdir denied by policy, the routine fails with Denied.
    let policy = Policy::default().grant(Capability::FS).deny_action("fs.mkdir".parse().unwrap());
    let denied = Operated::start(vec![Files::skill().unwrap()], policy, &[]).await;
    let (class, message) = denied.failure("fs.make_home_dir", json!({"user": "ada"})).await;
    assert_eq!(class, "denied", "{message}");
    assert!(!drive(&denied).join("home").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_and_stat_report_refusals_and_folders_consistently() {
    let op = files().await;
    op.output("fs.mkdir", json!({"path": "box"})).await;
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("keep.txt"), "keep").unwrap();
    std::os::unix::fs::symlink(outside.path(), drive(&op).join("box/out")).unwrap();
    let (class, message) = op.failure("fs.delete", json!({"path": "box/out/keep.txt"})).await;
    assert_eq!(class, "denied", "{message}");
    assert!(outside.path().join("keep.txt").exists());
    assert_eq!(op.output("fs.stat", json!({"path": "box"})).await["size"], 0, "folders have no size, as in fs.list");
    op.output("fs.write", json!({"path": "a:b.txt", "content": "colons are fine"})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_regular_files_are_read() {
    let op = files().await;
    std::fs::create_dir_all(drive(&op)).unwrap();
    let fifo = drive(&op).join("pipe");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if !made.is_ok_and(|status| status.success()) {
        eprintln!("SKIPPED: `mkfifo` is not available here, so reading a FIFO cannot be tried");
        return;
    }
    // A FIFO with no writer would block the read for ever; it is refused before it is opened.
    let (class, message) = op.failure("fs.read", json!({"path": "pipe"})).await;
    assert_eq!(class, "validation");
    assert!(message.contains("not a regular file"), "{message}");
    std::fs::create_dir_all(drive(&op).join("folder")).unwrap();
    let (class, message) = op.failure("fs.read", json!({"path": "folder"})).await;
    assert_eq!(class, "validation", "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn move_with_overwrite_replaces_the_target() {
    let op = files().await;
    op.output("fs.write", json!({"path": "a.txt", "content": "new"})).await;
    op.output("fs.write", json!({"path": "b.txt", "content": "old"})).await;
    let (class, _) = op.failure("fs.move", json!({"from": "a.txt", "to": "b.txt"})).await;
    assert_eq!(class, "validation", "the default refuses to replace");
    let moved = op.output("fs.move", json!({"from": "a.txt", "to": "b.txt", "if_exists": "overwrite"})).await;
    assert_eq!(moved["to"], "b.txt");
    assert_eq!(std::fs::read_to_string(drive(&op).join("b.txt")).unwrap(), "new");
    assert!(!drive(&op).join("a.txt").exists());
}

/// Unusual agent ids each get one drive folder of their own, directly under `agents/`, never shared, even on a
/// filesystem that ignores case (macOS, Windows): folder names are compared as such a filesystem does.
#[test]
fn unusual_agent_ids_get_drives_of_their_own() {
    use proptest::prelude::*;
    let runtime = agentry::runtime::Runtime::builder().data_dir("/data").build();
    let fs = SkillId::new("fs").unwrap();
    let folder = |id: &str| {
        let drive = runtime.drive(&AgentId::new(id).unwrap(), &fs).unwrap();
        let relative = drive.strip_prefix("/data/agents").expect("inside the agents folder").to_path_buf();
        let parts: Vec<_> = relative.components().collect();
        assert_eq!(parts.len(), 2, "`{id}` became {relative:?}");
        assert!(matches!(parts[0], std::path::Component::Normal(_)), "`{id}` became {relative:?}");
        assert!(relative.to_string_lossy().len() < 255 + 3, "`{id}`: a file name fits");
        // As a case-insensitive filesystem sees it.
        parts[0].as_os_str().to_string_lossy().to_lowercase()
    };
    let long = |end: char| format!("{}{end}", "x".repeat(400));
    let ids = ["a/b", "a%2Fb", "..", ".", "a\\b", "ü", "a b", &long('1'), &long('2'), "A", "a"];
    let folders: Vec<_> = ids.iter().map(|id| folder(id)).collect();
    for (i, a) in folders.iter().enumerate() {
        for (j, b) in folders.iter().enumerate() {
            assert!(i == j || a != b, "`{}` and `{}` share a drive", ids[i], ids[j]);
        }
    }
    proptest!(ProptestConfig::with_cases(500), |(a in "\\PC{1,40}", b in "\\PC{1,40}")| {
        prop_assume!(a != b);
        prop_assert_ne!(folder(&a), folder(&b));
    });
    // Skills whose ids differ only by case get folders of their own too.
    let agent = AgentId::new("a").unwrap();
    let (upper, lower) = (SkillId::new("Notes").unwrap(), SkillId::new("notes").unwrap());
    let skill_folder = |skill: &SkillId| runtime.drive(&agent, skill).unwrap().to_string_lossy().to_lowercase();
    assert_ne!(skill_folder(&upper), skill_folder(&lower));
}

/// A drive an earlier release kept under the agent id as it was (uppercase letters and all) is moved to the
/// case-safe folder the first time the agent uses it: nothing the agent wrote is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drive_kept_under_an_earlier_folder_name_is_moved_on_first_use() {
    let data = tempfile::tempdir().unwrap();
    let legacy = data.path().join("agents/Ann/fs");
    std::fs::create_dir_all(&legacy).unwrap();
    std::fs::write(legacy.join("kept.txt"), "from before").unwrap();
    let runtime = agentry::runtime::Runtime::builder().data_dir(data.path()).skill(Files::skill().unwrap()).build();
    let policy = Policy::default().grant(agentry::action::Capability::FS);
    let opts = agentry::runtime::SpawnOptions { id: Some(AgentId::new("Ann").unwrap()), policy, ..Default::default() };
    let ann = runtime.spawn((), opts).await.unwrap();
    ann.mount(&SkillId::new("fs").unwrap(), serde_json::Value::Null).await.unwrap();
    let read = runtime.invoke(ann.id(), "fs.read", json!({"path": "kept.txt"})).await.unwrap();
    assert_eq!(read.output["content"], "from before", "{read:?}");
    let drive = runtime.drive(ann.id(), &SkillId::new("fs").unwrap()).unwrap();
    assert!(drive.join("kept.txt").is_file() && !legacy.exists(), "moved to {}", drive.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_client_meets_the_same_confinement() {
    let op = files().await;
    op.output("fs.write", json!({"path": "notes.txt", "content": "mine"})).await;
    let drive = drive(&op);
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "outside secret").unwrap();
    std::os::unix::fs::symlink(outside.path(), drive.join("out")).unwrap();
    let fifo = drive.join("pipe");
    let has_fifo = std::process::Command::new("mkfifo").arg(&fifo).status().is_ok_and(|s| s.success());
    if !has_fifo {
        eprintln!("SKIPPED (the FIFO part): `mkfifo` is not available here");
    }

    let mut wire = McpWire::connect(&op).await;
    let (text, is_error) = wire.call_tool("fs.read", json!({"path": "notes.txt"})).await;
    assert!(!is_error && text.contains("mine"), "the way in works: {text}");
    let mut attacks = vec![
        json!({"path": "../../../../etc/passwd"}),
        json!({"path": "/etc/passwd"}),
        json!({"path": "out/secret.txt"}),
        json!({"path": "a\u{0}b"}),
    ];
    if has_fifo {
        attacks.push(json!({"path": "pipe"}));
    }
    for arguments in attacks {
        let (text, is_error) = wire.call_tool("fs.read", arguments.clone()).await;
        assert!(is_error, "{arguments} was read: {text}");
        assert!(!text.contains("outside secret") && !text.contains("root:"), "{arguments} leaked: {text}");
    }
    let (text, is_error) = wire.call_tool("fs.write", json!({"path": "out/planted.txt", "content": "x"})).await;
    assert!(is_error, "{text}");
    assert!(!outside.path().join("planted.txt").exists(), "nothing was planted outside the drive");
}

/// The drive has a quota (bytes and entries) and `fs.read` a ceiling, both in the policy: past them a write or
/// read is refused and nothing changes on disk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_drive_quota_and_the_read_ceiling_hold() {
    let mut policy = Policy::default().grant(Capability::FS);
    policy.limits.drive_bytes = 100;
    policy.limits.drive_files = 4;
    policy.limits.read_max_bytes = 50;
    let op = Operated::start(vec![Files::skill().unwrap()], policy, &[]).await;
    op.output("fs.write", json!({"path": "a.txt", "content": "x".repeat(60)})).await;
    let (class, message) = op.failure("fs.write", json!({"path": "b.txt", "content": "y".repeat(60)})).await;
    assert_eq!(class, "denied", "{message}");
    assert!(message.contains("limits.drive_bytes"), "{message}");
    assert!(!drive(&op).join("b.txt").exists(), "a refused write left a file");
    let (class, message) = op.failure("fs.append", json!({"path": "a.txt", "content": "z".repeat(60)})).await;
    assert_eq!(class, "denied", "{message}");
    assert_eq!(std::fs::read_to_string(drive(&op).join("a.txt")).unwrap().len(), 60, "a refused append wrote");
    // Entries count too: folders and files.
    op.output("fs.mkdir", json!({"path": "one/two"})).await;
    let (class, message) = op.failure("fs.mkdir", json!({"path": "three/four"})).await;
    assert_eq!(class, "denied", "{message}");
    // A read may not ask for more than the ceiling, and the default stays within it.
    let (class, message) = op.failure("fs.read", json!({"path": "a.txt", "max_bytes": 51})).await;
    assert_eq!(class, "denied", "{message}");
    assert!(message.contains("limits.read_max_bytes"), "{message}");
    let (class, message) = op.failure("fs.read", json!({"path": "a.txt"})).await;
    assert_eq!(class, "validation", "60 bytes is over the 50-byte ceiling: {message}");
}
