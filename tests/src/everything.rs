//! The reference "everything" MCP server from the MCP project, installed from the npm registry into the
//! workspace's ignored `.cache/mcp` folder the first time a test asks for it.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The pinned version of `@modelcontextprotocol/server-everything`.
pub const VERSION: &str = "2026.8.31";

fn cache() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(".cache").join("mcp").join(VERSION)
}

/// The server's entry script, installing the package first if it is not there. Installs go to a fresh folder
/// that is renamed into place, so test processes racing to install never see half a package.
pub fn script() -> PathBuf {
    let home = cache();
    let script = home.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if script.is_file() {
        return script;
    }
    let parent = home.parent().expect("the cache folder has a parent");
    std::fs::create_dir_all(parent).expect("the cache folder can be made");
    let staging = parent.join(format!("{VERSION}.installing.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).expect("a staging folder can be made");
    let status = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--loglevel=error", "--prefix"])
        .arg(&staging)
        .arg(format!("@modelcontextprotocol/server-everything@{VERSION}"))
        .status()
        .expect("npm runs (Node.js and npm must be installed)");
    assert!(status.success(), "npm could not install the everything server: {status}");
    // Another process may have finished first; then its copy stands and this one is dropped.
    if std::fs::rename(&staging, &home).is_err() {
        let _ = std::fs::remove_dir_all(&staging);
    }
    assert!(script.is_file(), "the everything server's script is missing after installing: {}", script.display());
    script
}
