//! The official MCP Python SDK (`mcp` on PyPI), pinned by `tests/python/requirements.txt` and installed into a
//! virtual environment in the workspace's ignored `.cache/python-mcp/<version>/` the first time a test asks for
//! it (`.ci/run` installs it too). Staged in a folder of this process's own and renamed into place, so test
//! processes racing to install never see half an environment.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The pinned version of the SDK (the one `tests/python/requirements.txt` names).
pub const VERSION: &str = "1.30.0";

fn tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

/// A script of `tests/python/`.
pub fn script(name: &str) -> PathBuf {
    tests_dir().join("python").join(name)
}

/// The environment's Python with the SDK installed, installing it first if it is not there; `None`, with a
/// loud message on stderr, when this machine cannot make it (no `python3`, no venv module, no PyPI).
pub fn python() -> Option<PathBuf> {
    static INSTALLING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let home = tests_dir().join("..").join(".cache").join("python-mcp").join(VERSION);
    let python = home.join("bin").join("python");
    let _one = INSTALLING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if python.is_file() {
        return Some(python);
    }
    if Command::new("python3").arg("--version").output().is_err() {
        eprintln!(
            "SKIPPED: no python3 on this machine, so the official MCP Python SDK cannot be installed; install \
             Python 3.10 or later (and run .ci/run) to run this test"
        );
        return None;
    }
    let parent = home.parent().expect("the cache folder has a parent");
    std::fs::create_dir_all(parent).expect("the cache folder can be made");
    let staging = parent.join(format!("{VERSION}.installing.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    let made = Command::new("python3").args(["-m", "venv"]).arg(&staging).status().expect("python3 runs");
    if !made.success() {
        eprintln!(
            "SKIPPED: python3 could not make a virtual environment ({made}); install its venv module \
             (Debian: python3-venv, as .ci/run does) to run this test"
        );
        return None;
    }
    let installed = Command::new(staging.join("bin").join("python"))
        .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r"])
        .arg(tests_dir().join("python").join("requirements.txt"))
        .status()
        .expect("pip runs");
    if !installed.success() {
        let _ = std::fs::remove_dir_all(&staging);
        eprintln!(
            "SKIPPED: pip could not install the MCP Python SDK {VERSION} ({installed}); the tests that drive \
             agentry with it need PyPI (run .ci/run where it is reachable)"
        );
        return None;
    }
    if std::fs::rename(&staging, &home).is_err() {
        let _ = std::fs::remove_dir_all(&staging);
    }
    assert!(python.is_file(), "the SDK's Python is missing after installing: {}", python.display());
    Some(python)
}
