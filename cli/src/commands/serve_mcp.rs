//! `agentry serve-mcp --agent ID [--http ADDR]`: an agent's actions as an MCP server, for a desktop MCP client
//! (stdio, the usual `mcpServers` entry) or over streamable HTTP. Each tool call is a run through the agent's
//! gate; one that needs approval waits for the operator (`agentry approvals` in another terminal). Over stdio,
//! stdout is the protocol's: everything else goes to stderr.

use crate::error::CliError;
use crate::manifest::Loaded;
use crate::registry::Registry;
use agentry::id::AgentId;
use std::process::ExitCode;

/// Serves until the client disconnects (stdio) or Ctrl-C (HTTP).
pub async fn serve_mcp(
    loaded: &Loaded,
    registry: &Registry,
    agent: &str,
    http: Option<&str>,
) -> Result<ExitCode, CliError> {
    let agent = AgentId::new(agent).map_err(|e| CliError::Usage(e.to_string()))?;
    if !loaded.merged.agents.contains_key(agent.as_str()) {
        return Err(CliError::NotFound(format!("the manifest has no agent `{agent}`")));
    }
    let hosted = super::host::host(loaded, registry).await?;
    let runtime = hosted.started.runtime.clone();
    let served = match http {
        None => agentry_skills::mcp::serve_stdio(&runtime, &agent).await,
        Some(addr) => {
            let listener =
                tokio::net::TcpListener::bind(addr).await.map_err(CliError::io(format!("listening on {addr}")))?;
            let local = listener.local_addr().map_err(CliError::io("reading the address"))?;
            eprintln!("serving agent `{agent}` at http://{local}/mcp; Ctrl-C stops");
            let stop = async {
                let _ = tokio::signal::ctrl_c().await;
            };
            agentry_skills::mcp::serve_http(&runtime, &agent, listener, stop).await
        }
    };
    hosted.close().await;
    served.map_err(|e| CliError::Start(format!("serving MCP: {e}")))?;
    Ok(ExitCode::SUCCESS)
}
