//! Serves a demo agent over MCP on stdin and stdout, so any MCP client can use it: the agent has the
//! `arithmetic` and `memory` skills mounted, and each of its actions is a tool (`arithmetic.add`,
//! `memory.memorize`, `memory.recall`, ...). Its memory lives in `<temp dir>/agentry-mcp-serve`, or in the
//! folder given as the first argument, so it remembers across runs.
//!
//! Point an MCP client at the built example, for instance this repository's own:
//!
//! ```sh
//! cargo build -p agentry-examples --example mcp_serve
//! cargo run -p agentry-examples --example mcp_client -- --call arithmetic.add '{"a": 2, "b": 3}' -- target/debug/examples/mcp_serve
//! ```
//!
//! stdout carries the protocol, so this program prints nothing; errors go to stderr.

use agentry::action::Capability;
use agentry::id::{AgentId, SkillId};
use agentry::policy::Policy;
use agentry::runtime::{Runtime, SpawnOptions};
use agentry::skill::SkillDefinition;
use agentry_skills::Memory;
use agentry_testkit::demo::Arithmetic;
use serde_json::Value;
use std::error::Error;

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let data = std::env::args().nth(1).map_or_else(|| std::env::temp_dir().join("agentry-mcp-serve"), Into::into);
    let runtime = Runtime::builder().data_dir(data).skill(Arithmetic::skill()?).skill(Memory::skill()?).build();
    let agent = AgentId::new("demo")?;
    let policy = Policy::default().grant(Capability::MEMORY);
    let opts = SpawnOptions { id: Some(agent.clone()), policy, ..SpawnOptions::default() };
    let demo = runtime.spawn((), opts).await?;
    demo.mount(&SkillId::new("arithmetic")?, Value::Null).await?;
    demo.mount(&SkillId::new("memory")?, Value::Null).await?;
    if let Err(err) = agentry_skills::mcp::serve_stdio(&runtime, &agent).await {
        eprintln!("mcp_serve: {err}");
    }
    runtime.shutdown(std::time::Duration::from_secs(5)).await;
    Ok(())
}
