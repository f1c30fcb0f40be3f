//! The getting-started program, end to end: `docs/getting-started.md` shows `examples/getting_started.rs`
//! exactly, and the built example answers a call, lists its journal, and comes back from its journal when run
//! a second time on the same folder.

use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the examples crate is in the workspace").to_path_buf()
}

/// The page's `main.rs` block, as a reader sees it (rustdoc's hidden `# ` lines left out).
fn page_program() -> String {
    let page = std::fs::read_to_string(workspace().join("docs/getting-started.md")).expect("the page");
    let start = page.find("<!-- main.rs -->").expect("the page marks its main.rs block with <!-- main.rs -->");
    let block = &page[start..];
    let body = &block[block.find("```rust").expect("a rust block after the mark")..];
    let body = &body[body.find('\n').expect("a fence line") + 1..];
    let body = &body[..body.find("\n```").expect("the block's end")];
    body.lines().filter(|line| *line != "#" && !line.starts_with("# ")).map(|line| format!("{line}\n")).collect()
}

#[test]
fn the_page_shows_the_example_exactly() {
    let example = std::fs::read_to_string(workspace().join("examples/getting_started.rs")).expect("the example");
    // The example's own header (how to run it) is not part of the page's program.
    let program: String =
        example.lines().skip_while(|l| l.starts_with("//!")).skip(1).map(|l| format!("{l}\n")).collect();
    assert_eq!(page_program(), program, "docs/getting-started.md and examples/getting_started.rs differ");
}

/// The example as `cargo test` built it, beside this test's own binary.
fn example() -> PathBuf {
    let me = std::env::current_exe().expect("the test binary");
    let debug = me.parent().and_then(Path::parent).expect("target/<profile>/deps/<test>");
    let path = debug.join("examples").join(format!("getting_started{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.exists(),
        "{} is not built; `cargo test --workspace` builds it (or `cargo build -p agentry-examples --example getting_started`)",
        path.display()
    );
    path
}

fn run(data: &Path) -> String {
    let out = Command::new(example()).arg(data).output().expect("the example starts");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "the example failed: {stdout}{}", String::from_utf8_lossy(&out.stderr));
    stdout
}

#[test]
fn the_program_runs_and_comes_back() {
    let data = tempfile::tempdir().expect("a temporary folder");
    let first = run(data.path());
    assert!(first.contains(r#"answer: {"words":4,"total":4}"#), "{first}");
    assert!(first.contains("journal: text.count_words Completed after 1 attempt(s)"), "{first}");
    assert!(!first.contains("came back"), "{first}");
    assert!(data.path().join("journal.db").exists());

    let second = run(data.path());
    assert!(second.contains("the counter came back"), "{second}");
    assert!(second.contains(r#"answer: {"words":4,"total":8}"#), "it kept its total: {second}");
    assert_eq!(second.matches("journal: text.count_words Completed").count(), 2, "{second}");
}
