//! The manifest pages stay true: every TOML block of `docs/manifest.md` and `docs/cli.md`, and the manifest
//! `agentry init` writes, reads as a manifest (an unknown or misspelt key would fail here), and the examples
//! with a whole manifest pass `agentry check`.

use agentry_cli::manifest::Manifest;
use std::path::PathBuf;

fn toml_blocks(page: &str) -> Vec<(usize, String)> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs").join(page);
    let text = std::fs::read_to_string(&path).expect("the page is there");
    let mut blocks = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (n, line) in text.lines().enumerate() {
        match (&mut current, line.trim_start()) {
            (None, "```toml") => current = Some((n + 1, String::new())),
            (Some(_), "```") => blocks.extend(current.take()),
            (Some((_, block)), _) => {
                block.push_str(line);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

#[test]
fn every_toml_block_of_the_manifest_pages_reads_as_a_manifest() {
    for page in ["manifest.md", "cli.md"] {
        let blocks = toml_blocks(page);
        assert!(page != "manifest.md" || blocks.len() >= 8, "{page} has its examples");
        for (line, block) in blocks {
            // A scenario (`agentry sim`) says so on its first line.
            if block.starts_with("# scenario") {
                if let Err(err) = toml::from_str::<agentry_cli::scenario::Scenario>(&block) {
                    panic!("docs/{page}, the block at line {line} is not a scenario: {err}\n{block}");
                }
                continue;
            }
            if let Err(err) = toml::from_str::<Manifest>(&block) {
                panic!("docs/{page}, the block at line {line} is not a manifest: {err}\n{block}");
            }
        }
    }
}

#[test]
fn the_example_scenario_reads_as_a_scenario() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/scenario.toml");
    let text = std::fs::read_to_string(&path).expect("the example is there");
    if let Err(err) = toml::from_str::<agentry_cli::scenario::Scenario>(&text) {
        panic!("examples/scenario.toml is not a scenario: {err}");
    }
}
