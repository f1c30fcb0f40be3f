//! Mounts any MCP server as a skill, lists its tools with the contracts agentry gave them, and calls the ones
//! named on the command line through an agent's gate.
//!
//! ```sh
//! # a server started as a child process: everything after `--` is its command line
//! cargo run -p agentry-examples --example mcp_client -- --call echo '{"message": "hi"}' -- npx -y @modelcontextprotocol/server-everything stdio
//! # a server at a streamable HTTP endpoint
//! cargo run -p agentry-examples --example mcp_client -- --http http://127.0.0.1:8000/mcp --call get-sum '{"a": 2, "b": 3}'
//! ```
//!
//! The agent's policy grants `net`, so open-world tools may run, and asks for approval at high risk as the
//! default policy does: a destructive tool is refused here, since nobody is there to approve it. The server is
//! untrusted unless `--trusted` is given: its hints then cannot lower a tool's risk below medium.

use agentry::action::Capability;
use agentry::id::AgentId;
use agentry::policy::Policy;
use agentry::runtime::{Runtime, SpawnOptions};
use agentry_skills::mcp::{McpClient, McpServer};
use serde_json::Value;
use std::error::Error;

/// What the command line asked for.
struct Args {
    server: McpServer,
    calls: Vec<(String, Value)>,
}

fn usage() -> String {
    "usage: mcp_client [--name NAME] [--trusted] [--call TOOL JSON]... (--http URL | -- COMMAND [ARGS...])".to_owned()
}

fn parse() -> Result<Args, String> {
    let mut args = std::env::args().skip(1);
    let mut name = "server".to_owned();
    let mut calls = Vec::new();
    let mut server = None;
    let mut trusted = false;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--name" => name = args.next().ok_or_else(usage)?,
            "--trusted" => trusted = true,
            "--call" => {
                let tool = args.next().ok_or_else(usage)?;
                let json = args.next().ok_or_else(usage)?;
                let params =
                    serde_json::from_str(&json).map_err(|e| format!("the params of `{tool}` are not JSON: {e}"))?;
                calls.push((tool, params));
            }
            "--http" => server = Some(McpServer::http(&name, args.next().ok_or_else(usage)?)),
            "--" => {
                let command = args.next().ok_or_else(usage)?;
                server = Some(McpServer::stdio(&name, command, args.by_ref().collect::<Vec<_>>()));
            }
            other => return Err(format!("unknown argument `{other}`; {}", usage())),
        }
    }
    let server = server.ok_or_else(usage)?;
    let server = if trusted { server.trusted() } else { server };
    Ok(Args { server, calls })
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let Args { server, calls } = parse()?;
    let name = server.name.clone();
    let client = McpClient::connect(server).await?;
    let skill = client.skill();
    println!("{} ({} {}): {} tools", skill.id(), skill.name(), skill.version(), skill.actions().len());
    for action in skill.actions() {
        let spec = action.spec();
        let needs: Vec<&str> = spec.capabilities.iter().map(Capability::as_str).collect();
        println!(
            "  {:<40} risk {:?}, {}, needs [{}]: {}",
            spec.id.as_str(),
            spec.risk,
            if spec.side_effects { "side effects" } else { "read-only" },
            needs.join(", "),
            spec.description.lines().next().unwrap_or_default()
        );
    }
    for skipped in client.skipped() {
        println!("  skipped `{}`: {}", skipped.tool, skipped.reason);
    }

    let runtime = Runtime::builder().build();
    client.attach(&runtime)?;
    let policy = Policy::default().grant(Capability::NET);
    let agent = AgentId::new("mcp-user")?;
    let opts = SpawnOptions { id: Some(agent.clone()), policy, ..SpawnOptions::default() };
    let user = runtime.spawn((), opts).await?;
    user.mount(skill.id(), Value::Null).await?;
    for (tool, params) in calls {
        let action = format!("mcp.{name}.{tool}");
        match runtime.invoke(&agent, &action, params).await {
            Ok(outcome) => match outcome.error {
                None => println!("{action} → {}", outcome.output_text()),
                Some(error) => println!("{action} → {:?}: {}", error.class, error.message),
            },
            Err(refused) => println!("{action} → refused: {refused}"),
        }
    }
    client.close();
    runtime.shutdown(std::time::Duration::from_secs(1)).await;
    Ok(())
}
