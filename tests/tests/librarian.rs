//! The librarian example agent end to end: it learns facts from files in its drive (runs of fs.list, fs.read
//! and concurrent memory.memorize), answers by recall, and keeps its memory after fs is unmounted.

use agentry::action::Capability;
use agentry::id::{AgentId, SkillId};
use agentry::policy::Policy;
use agentry::runtime::{Runtime, SpawnOptions};
use agentry::signal::Signal;
use agentry_examples::librarian::{Librarian, parse_fact};
use agentry_tests::CALL;
use serde_json::{Value, json};

#[test]
fn fact_lines_parse_and_everything_else_is_skipped() {
    assert_eq!(parse_fact(" a | b | c "), Some(("a".into(), "b".into(), "c".into())));
    for line in ["", "# a | b | c", "a | b", "a | b | c | d", "a |  | c", "no separators"] {
        assert_eq!(parse_fact(line), None, "{line:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_librarian_learns_from_its_drive_and_answers_from_memory() {
    let data = tempfile::tempdir().unwrap();
    let runtime = Runtime::builder().data_dir(data.path()).agent::<Librarian>().unwrap().build();
    let policy = Policy::default().grant(Capability::FS).grant(Capability::MEMORY);
    let opts = SpawnOptions { id: Some(AgentId::new("lib").unwrap()), policy, ..SpawnOptions::default() };
    let librarian = runtime.spawn(Librarian::default(), opts).await.unwrap();
    let fs = SkillId::new("fs").unwrap();
    let drive = runtime.drive(librarian.id(), &fs).unwrap();
    std::fs::create_dir_all(drive.join("a/b")).unwrap();
    let facts: Vec<String> = (0..12).map(|n| format!("planet {n} | has moons | {n} moons")).collect();
    std::fs::write(drive.join("a/planets.txt"), facts.join("\n")).unwrap();
    std::fs::write(drive.join("a/b/cities.txt"), "Lyon | is in | France\nbad line\n").unwrap();
    std::fs::write(drive.join("a/ignored.md"), "Oslo | is in | Norway").unwrap();

    let learned = librarian.call(Signal::new("learn", Value::Null).unwrap(), CALL).await.unwrap();
    assert_eq!(learned, json!({"learned": 13, "skipped": 1}));
    let ask = |q: &str| Signal::new("ask", json!({"question": q})).unwrap();
    assert_eq!(librarian.call(ask("Where is Lyon?"), CALL).await.unwrap()["answer"], "Lyon is in France");
    assert_eq!(librarian.call(ask("Oslo"), CALL).await.unwrap()["answer"], Value::Null, "only .txt files are read");

    librarian.unmount(&fs).await.unwrap();
    let state = librarian.state().await.unwrap();
    assert!(!state.is_mounted(&fs) && state.is_mounted(&SkillId::new("memory").unwrap()));
    assert_eq!(librarian.call(ask("Lyon"), CALL).await.unwrap()["answer"], "Lyon is in France");
    let relearn = librarian.call(Signal::new("learn", Value::Null).unwrap(), CALL).await.unwrap();
    assert_eq!(relearn, json!({"learned": 0, "skipped": 1}), "without fs, listing the drive is denied");
}
