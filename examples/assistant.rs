//! An assistant: an LLM agent with files (`fs`), memory and, if one is named, an MCP server mounted, talking to
//! any OpenAI-compatible server (OpenAI, llama.cpp's, vLLM, Ollama) or to Anthropic. Type a line, get an answer;
//! every tool call goes through the agent's gate, and one that needs approval is asked on the terminal.
//!
//! ```sh
//! # llama.cpp's server on loopback (tests/llama/install.sh installs it with the SmolLM2 model):
//! ~/.cache/agentry/llama-cpp/0.3.36/venv/bin/python -m llama_cpp.server --port 8080 --n_ctx 8192 \
//!     --chat_format chatml-function-calling --model ~/.cache/agentry/llama-cpp/0.3.36/SmolLM2-135M-Instruct.Q4_1.gguf
//! # (its function-calling format cannot stream a turn where the model chooses whether to call a tool: no streaming)
//! AGENTRY_LLM_BASE_URL=http://127.0.0.1:8080/v1 AGENTRY_LLM_MODEL=smollm2 AGENTRY_LLM_STREAM=0 \
//!     cargo run -p agentry-examples --example assistant
//! # OpenAI (the key is read from the variable named, never from a file):
//! AGENTRY_LLM_BASE_URL=https://api.openai.com/v1 AGENTRY_LLM_MODEL=gpt-4.1-mini AGENTRY_LLM_KEY_ENV=OPENAI_API_KEY \
//!     cargo run -p agentry-examples --example assistant
//! # Anthropic (key in ANTHROPIC_API_KEY):
//! AGENTRY_LLM_PROVIDER=anthropic AGENTRY_LLM_MODEL=claude-sonnet-4-5 cargo run -p agentry-examples --example assistant
//! # with an MCP server as well: everything after `--` is its command line
//! cargo run -p agentry-examples --example assistant -- npx -y @modelcontextprotocol/server-everything stdio
//! ```

use agentry::action::Capability;
use agentry::events::EventKind;
use agentry::id::{AgentId, SkillId};
use agentry::policy::Policy;
use agentry::runtime::{Runtime, SpawnOptions};
use agentry::signal::Signal;
use agentry::skill::SkillDefinition;
use agentry_llm::ChatModel;
use agentry_llm::agent::{ASK, LlmAgent, LlmConfig};
use agentry_llm::anthropic::{Anthropic, AnthropicConfig};
use agentry_llm::openai::{OpenAi, OpenAiConfig};
use agentry_llm::skill::ModelSkill;
use agentry_skills::mcp::{McpClient, McpServer};
use agentry_skills::{Files, Memory};
use serde_json::{Value, json};
use std::error::Error;
use std::io::{BufRead, Write};
use std::sync::Arc;
use std::time::Duration;

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The model the environment names.
fn model() -> Result<(Arc<dyn ChatModel>, String), Box<dyn Error>> {
    let name = env("AGENTRY_LLM_MODEL").ok_or("set AGENTRY_LLM_MODEL to the model's name at the provider")?;
    if env("AGENTRY_LLM_PROVIDER").as_deref() == Some("anthropic") {
        let config = AnthropicConfig {
            api_key_env: env("AGENTRY_LLM_KEY_ENV").unwrap_or_else(|| "ANTHROPIC_API_KEY".into()),
            ..AnthropicConfig::default()
        };
        return Ok((Arc::new(Anthropic::new(config)?), name));
    }
    let base_url = env("AGENTRY_LLM_BASE_URL").ok_or("set AGENTRY_LLM_BASE_URL (http://127.0.0.1:8080/v1, say)")?;
    let stream = env("AGENTRY_LLM_STREAM").is_none_or(|s| s != "0");
    let config = OpenAiConfig { api_key_env: env("AGENTRY_LLM_KEY_ENV"), stream, ..OpenAiConfig::new(base_url) };
    Ok((Arc::new(OpenAi::new(config)?), name))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    agentry_skills::tls::install_provider();
    let (chat, model_name) = model()?;
    let data = std::env::temp_dir().join("agentry-assistant");
    let mut tools = vec![Files::skill()?, Memory::skill()?];
    let mcp_command: Vec<String> = std::env::args().skip_while(|a| a != "--").skip(1).collect();
    let mcp = match mcp_command.split_first() {
        Some((command, args)) => Some(McpClient::connect(McpServer::stdio("tools", command, args.to_vec())).await?),
        None => None,
    };
    if let Some(client) = &mcp {
        tools.push(client.skill());
    }
    let brain = ModelSkill::new("main", chat).tools(&tools.iter().collect::<Vec<_>>()).build()?;
    let mut builder = Runtime::builder().agent::<LlmAgent>()?.data_dir(&data).skill(brain);
    for tool in tools.iter().filter(|t| t.id().as_str() != "mcp.tools") {
        builder = builder.skill(tool.clone());
    }
    let runtime = builder.build();
    if let Some(client) = &mcp {
        client.attach(&runtime)?;
    }

    let mut config = LlmConfig::new(SkillId::new("llm.main")?, model_name);
    config.instructions = Some("You are a helpful assistant. Use the tools when they help.".into());
    config.skills = tools.iter().map(|t| (t.id().clone(), Value::Null)).collect();
    config.tools = vec!["fs.*".into(), "memory.*".into(), "mcp.tools.*".into()];
    // The best six tools for each turn: a small model's context holds no more.
    config.max_tools = Some(6);
    let policy = Policy::default().grant(Capability::FS).grant(Capability::NET);
    let options = SpawnOptions { id: Some(AgentId::new("assistant")?), policy, ..SpawnOptions::default() };
    let assistant = runtime.spawn(LlmAgent::new(config), options).await?;

    // The model's text as it streams, and approvals asked on the terminal.
    let mut events = runtime.events();
    let approver = runtime.clone();
    tokio::spawn(async move {
        while let Ok(event) = events.recv().await {
            match (&event.kind, event.run) {
                (EventKind::ActionOutput { text, .. }, _) => {
                    print!("{text}");
                    let _ = std::io::stdout().flush();
                }
                (EventKind::ApprovalAsked { action, params, .. }, Some(run)) => {
                    println!("\napprove {action} {params}? [y/N]");
                    let mut line = String::new();
                    let _ = std::io::stdin().lock().read_line(&mut line);
                    let _ = approver.decide(&event.agent, run, line.trim() == "y").await;
                }
                _ => {}
            }
        }
    });

    println!("Ask something (an empty line ends).");
    let stdin = std::io::stdin();
    loop {
        print!("> ");
        std::io::stdout().flush()?;
        let mut line = String::new();
        if stdin.lock().read_line(&mut line)? == 0 || line.trim().is_empty() {
            break;
        }
        let ask = Signal::new(ASK, json!({"text": line.trim()}))?;
        let reply = assistant.call(ask, Duration::from_secs(600)).await?;
        match reply["status"].as_str() {
            Some("answered") => println!("\n{}", reply["text"].as_str().unwrap_or_default()),
            _ => println!("\n(stopped: {})", reply["error"].as_str().unwrap_or("no answer")),
        }
        println!(
            "[{} model calls, {} tokens in, {} out]",
            reply["model_calls"], reply["usage"]["input_tokens"], reply["usage"]["output_tokens"]
        );
    }
    if let Some(client) = mcp {
        client.close();
    }
    runtime.shutdown(Duration::from_secs(5)).await;
    Ok(())
}
