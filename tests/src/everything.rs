//! The reference "everything" MCP server from the MCP project, installed from the npm registry into the
//! workspace's ignored `.cache/mcp` folder the first time a test asks for it.

use std::path::{Path, PathBuf};

/// The pinned version of `@modelcontextprotocol/server-everything`.
pub const VERSION: &str = "2026.8.31";

fn cache() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(".cache").join("mcp").join(VERSION)
}

/// The server's entry script, installing the package first if it is not there.
pub fn script() -> PathBuf {
    let home = cache();
    let script = home.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if script.is_file() {
        return script;
    }
    let package = format!("@modelcontextprotocol/server-everything@{VERSION}");
    crate::npm::install(&home, "the everything server", &[], &["install", &package], || script.is_file());
    assert!(script.is_file(), "the everything server's script is missing after installing: {}", script.display());
    script
}
