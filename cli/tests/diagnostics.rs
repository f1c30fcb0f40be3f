//! Each kind of bad manifest, through the real binary: `agentry check` exits with 3 and prints a diagnostic
//! naming the file, line and column, showing the line, and suggesting the closest valid key or name. The
//! output is compared with `tests/snapshots/<case>.txt`; `UPDATE_SNAPSHOTS=1` writes them anew (review the
//! diff).

use assert_cmd::Command;
use std::path::PathBuf;

fn manifests() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/manifests")
}

fn check(case: &str) -> (i32, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_agentry"))
        .current_dir(manifests())
        .env("AGENTRY_USER_CONFIG", "")
        .env("NO_COLOR", "1")
        .args(["check", &format!("{case}.toml")])
        .output()
        .expect("the binary runs");
    (output.status.code().unwrap_or(-1), String::from_utf8_lossy(&output.stderr).into_owned())
}

fn snapshot(case: &str, text: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/snapshots/{case}.txt"));
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, text).expect("the snapshot is written");
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("no snapshot {}; run with UPDATE_SNAPSHOTS=1", path.display()));
    assert_eq!(text, expected, "the diagnostic for {case} changed (UPDATE_SNAPSHOTS=1 to accept it)");
}

fn case(name: &str, must_say: &[&str]) {
    let (code, stderr) = check(name);
    assert_eq!(code, 3, "{name}: exit code 3 for a wrong manifest\n{stderr}");
    for needle in must_say {
        assert!(stderr.contains(needle), "{name}: expected `{needle}` in\n{stderr}");
    }
    snapshot(name, &stderr);
}

#[test]
fn an_unknown_key_names_the_closest_valid_one() {
    case(
        "unknown_key",
        &["unknown_key.toml:2:1", "unknown key `comand`", "did you mean `command`?", "comand = \"github-mcp\""],
    );
}

#[test]
fn a_value_of_the_wrong_type_is_pointed_at() {
    case("wrong_type", &["wrong_type.toml:2:19", "runs = \"ten\"", "expected a whole number"]);
}

#[test]
fn an_unknown_skill_suggests_the_closest() {
    case("unknown_skill", &["unknown_skill.toml:3:21", "unknown skill `memroy`", "did you mean `memory`?"]);
}

#[test]
fn an_unknown_agent_type_lists_the_registered_ones() {
    case("unknown_agent_type", &["unknown_agent_type.toml:2:8", "unknown type `tool`", "did you mean `tools`?"]);
}

#[test]
fn a_rule_that_matches_nothing_is_an_error() {
    case("rule_matches_nothing", &["rule_matches_nothing.toml:6:9", "matches no action", "did you mean `fs.delete`?"]);
}

#[test]
fn an_unknown_model_suggests_the_defined_one() {
    case("unknown_model", &["unknown_model.toml:7:9", "did you mean `local`?"]);
}

#[test]
fn a_duration_that_is_not_one_says_what_is_expected() {
    case("bad_duration", &["bad_duration.toml:2:", "`an hour` is not a duration", "`1h 30m`"]);
}

#[test]
fn every_mistake_is_reported_at_once() {
    case("two_mistakes", &["unknown skill `htp`", "`ask` rule `fs.writ`", "2 mistake(s)"]);
}

/// `agentry sim` on a bad scenario of `tests/scenarios`: exit code 3, the same kind of diagnostic.
fn scenario(name: &str, must_say: &[&str]) {
    let output = Command::new(env!("CARGO_BIN_EXE_agentry"))
        .current_dir(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios"))
        .env("AGENTRY_USER_CONFIG", "")
        .env("NO_COLOR", "1")
        .args(["sim", &format!("{name}.toml"), "--out", std::env::temp_dir().to_str().expect("UTF-8")])
        .output()
        .expect("the binary runs");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(3), "{name}: exit code 3 for a wrong scenario\n{stderr}");
    for needle in must_say {
        assert!(stderr.contains(needle), "{name}: expected `{needle}` in\n{stderr}");
    }
    snapshot(&format!("scenario_{name}"), &stderr);
}

#[test]
fn a_scenario_s_mistakes_are_diagnosed_as_a_manifest_s() {
    scenario("misspelt_key", &["misspelt_key.toml:3:1", "did you mean `sample_every`?"]);
    scenario("unknown_type", &["unknown_type.toml:5:8", "did you mean `tools`?"]);
    scenario("llm_type", &["llm_type.toml:5:8", "cannot be simulated"]);
    scenario("bad_model", &["bad_model.toml:", "did you mean `transient`?"]);
    scenario("two_mistakes", &["expected a share between 0 and 1", "did you mean `completed`?", "2 mistake(s)"]);
}
