//! `agentry init`: a commented example manifest to start from.

use crate::error::CliError;
use std::path::PathBuf;
use std::process::ExitCode;

/// The example manifest `agentry init` writes: every section, commented, and valid as it is.
pub const EXAMPLE: &str = r#"# agentry.toml: which agents run, with which skills, MCP servers and models, what they may do and spend.
# `agentry check` validates it; `agentry run` starts it; `agentry config show --resolved` prints it merged.

# import_mcp_json = [".mcp.json"]  # import an existing .mcp.json as it is (keep this above the first [section])

[runtime]
data = ".agentry"          # the data folder (journal, drives), relative to this file
store = "sqlite"           # "sqlite": agents survive restarts and crashes; "memory": nothing survives
keep_history = true        # keep every input: `agentry history`, `state --at` reach back to the first
# hibernate_after = "10m"  # idle agents fall asleep and wake when something reaches them

# An agent: its type, the skills it starts with, and what it may do on top of [permissions].
[agents.helper]
type = "tools"             # "tools" holds skills for `agentry call`; "llm" is driven by a model
skills = ["system", "memory", { name = "fs", options = {} }]

[agents.helper.permissions]
grants = ["fs", "memory"]  # capabilities: fs, net, memory, spawn ... or "*"

# A language model, and an agent it drives (uncomment both):
# [models.local]
# provider = "openai"                    # any OpenAI-compatible server, or "anthropic"
# base_url = "http://127.0.0.1:8080/v1"
# model = "smollm2"
# api_key_env = "OPENAI_API_KEY"         # the variable's name, never the key
#
# [agents.assistant]
# type = "llm"
# model = "local"
# instructions = "You are a careful assistant."
# skills = ["memory"]

# An MCP server whose tools become the skill `mcp.<name>` (the keys other MCP clients use):
# [mcp_servers.everything]
# command = "npx"
# args = ["-y", "@modelcontextprotocol/server-everything"]
# tool_timeout_sec = 60
# trust = "untrusted"                    # its hints about its tools are not believed

# What every agent may do: deny, then ask, then allow; the first rule that matches decides.
[permissions]
deny = ["system.stop"]
ask = ["fs.write", "fs.delete"]
allow = ["fs.read", "fs.list", "memory.*"]
# hosts = ["api.github.com"]             # hosts network actions may reach
# approval_at = "high"                   # the risk from which the rest asks: low, medium, high, never

# What every agent may spend per window ("ask": pause for approval rather than refuse):
[budgets]
"llm.**" = { limit = 200000, window = "1h", when_spent = "ask" }

# How often: runs per window, as a burst that refills evenly ("queue": hold the run until it may go):
[rate_limits]
"http.*" = { runs = 30, per = "1m", when_limited = "queue" }
"#;

/// Writes the example manifest.
pub fn init(path: Option<PathBuf>, force: bool) -> Result<ExitCode, CliError> {
    let path = path.unwrap_or_else(|| PathBuf::from("agentry.toml"));
    if path.exists() && !force {
        return Err(CliError::Usage(format!("{} exists already; pass --force to overwrite it", path.display())));
    }
    std::fs::write(&path, EXAMPLE).map_err(CliError::io(format!("writing {}", path.display())))?;
    println!("wrote {}; next: `agentry check`, then `agentry run`", path.display());
    Ok(ExitCode::SUCCESS)
}
