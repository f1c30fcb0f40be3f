//! The LLM agent against a real OpenAI-compatible server: llama.cpp's (`llama-cpp-python[server]`) serving
//! SmolLM2-135M-Instruct on loopback, installed once by `tests/llama/install.sh` into a cache outside the clone.
//! End to end: the agent is asked, the model answers by streaming, its (forced) tool call runs through the gate,
//! the model is asked again with the result, usage is counted. Answer quality is not tested. Where the server
//! cannot be installed or started, the test says so loudly and skips.

use agentry::events::EventKind;
use agentry::id::{AgentId, SkillId};
use agentry::runtime::{Runtime, SpawnOptions};
use agentry::signal::Signal;
use agentry::store::RunQuery;
use agentry_llm::agent::{ASK, LlmAgent, LlmConfig};
use agentry_llm::chat::ToolChoice;
use agentry_llm::openai::{OpenAi, OpenAiConfig};
use agentry_llm::skill::ModelSkill;
use serde_json::{Value, json};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};

/// The installed server's folder, or why there is none.
fn installed() -> Result<std::path::PathBuf, String> {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("llama/install.sh");
    let out = std::process::Command::new("bash").arg(&script).output().map_err(|e| format!("bash: {e}"))?;
    if !out.status.success() {
        return Err(format!("{} failed: {}", script.display(), String::from_utf8_lossy(&out.stderr)));
    }
    let home = String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or_default().trim().to_owned();
    Ok(std::path::PathBuf::from(home))
}

/// Starts the server on a free loopback port; returns it (killed when dropped) and its base URL, once it says
/// it listens.
async fn serve(home: &std::path::Path) -> Result<(tokio::process::Child, String), String> {
    let port =
        std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map_err(|e| e.to_string())?.port();
    let mut child = tokio::process::Command::new(home.join("venv/bin/python"))
        .args(["-m", "llama_cpp.server", "--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["--chat_format", "chatml-function-calling", "--n_ctx", "2048", "--model"])
        .arg(home.join("SmolLM2-135M-Instruct.Q4_1.gguf"))
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("the server did not start: {e}"))?;
    let mut lines = BufReader::new(child.stderr.take().ok_or("no stderr")?).lines();
    let listening = async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains("Uvicorn running on") {
                return Ok(());
            }
        }
        Err("the server ended before it listened".to_owned())
    };
    tokio::time::timeout(Duration::from_secs(120), listening)
        .await
        .map_err(|_| "not listening after 120 s".to_owned())??;
    // Its log keeps coming: read on, so the pipe never fills; its errors are shown, for a failing test to say why.
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains("Error") {
                eprintln!("llama.cpp's server: {line}");
            }
        }
    });
    Ok((child, format!("http://127.0.0.1:{port}/v1")))
}

fn notes() -> agentry::skill::Skill {
    let schema = json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]});
    let spec = agentry::action::ActionSpec::new("notes.read", "Reads the note at a path.")
        .expect("an id")
        .params_schema(schema);
    let read = agentry::action::DynAction::new(spec, |params, _| {
        Box::pin(async move { Ok(json!({"path": params["path"], "text": "Buy milk."})) })
    })
    .expect("an action");
    agentry::skill::Skill::builder("notes", "1.0.0").dyn_action(read).build().expect("a skill")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_model_streams_calls_a_tool_through_the_gate_and_counts_its_tokens() {
    let home = match installed() {
        Ok(home) => home,
        Err(why) => {
            eprintln!("SKIPPED: llama.cpp's server could not be installed: {why}");
            return;
        }
    };
    let (server, base_url) = match serve(&home).await {
        Ok(server) => server,
        Err(why) => {
            eprintln!("SKIPPED: llama.cpp's server could not be started: {why}");
            return;
        }
    };
    let model = Arc::new(OpenAi::new(OpenAiConfig::new(base_url)).expect("a client"));
    let notes = notes();
    let brain = ModelSkill::new("local", model).tools(&[&notes]).build().expect("the model skill");
    let runtime = Runtime::builder().agent::<LlmAgent>().expect("registers").skill(notes).skill(brain).build();
    let mut config = LlmConfig::new(SkillId::new("llm.local").expect("an id"), "smollm2");
    config.skills = vec![(SkillId::new("notes").expect("an id"), Value::Null)];
    config.tools = vec!["notes.*".into()];
    // The tiny model needs the tool forced; llama.cpp's function-calling format streams a forced choice or none,
    // not an automatic one, so the call after the tool's result answers with what it gave.
    config.first_tool_choice = ToolChoice::Tool("notes__read".into());
    config.later_tool_choice = ToolChoice::None;
    config.max_turns = 3;
    config.max_tokens = Some(64);
    let options = SpawnOptions { id: Some(AgentId::new("reader").expect("an id")), ..SpawnOptions::default() };
    let agent = runtime.spawn(LlmAgent::new(config), options).await.expect("spawned");
    let mut events = runtime.events();
    let ask = Signal::new(ASK, json!({"text": "What does the note at path todo say?"})).expect("a kind");
    let reply = agent.call(ask, Duration::from_secs(180)).await.expect("a reply");
    drop(server);

    // Quality is not the test's business: that it answered, after asking the tool, is.
    assert_eq!(reply["status"], "answered", "{reply}");
    assert_eq!(reply["model_calls"], 2, "asked again with the result: {reply}");
    let usage =
        reply["usage"]["input_tokens"].as_u64().unwrap_or(0) + reply["usage"]["output_tokens"].as_u64().unwrap_or(0);
    assert!(usage > 0, "tokens counted: {reply}");
    let runs = runtime.store().query(&RunQuery::default());
    assert!(
        runs.iter().any(|r| r.action.as_str() == "notes.read" && r.status() == agentry::store::RunStatus::Completed),
        "the forced tool call ran through the gate: {runs:#?}"
    );
    let state = agent.state().await.expect("its state").domain;
    let call = state.conversation[1].tool_calls().next().expect("the model's first answer calls the tool").clone();
    assert_eq!(call.name, "notes__read");
    assert!(call.parsed_arguments().is_ok(), "its streamed fragments assembled into JSON: {call:?}");
    let mut streamed = 0;
    while let Ok(event) = events.try_recv() {
        streamed += usize::from(matches!(event.kind, EventKind::ActionOutput { .. }));
    }
    let texts: usize = state
        .conversation
        .iter()
        .filter(|m| !m.text().is_empty() && m.role == agentry_llm::chat::Role::Assistant)
        .count();
    assert!(texts == 0 || streamed > 0, "text the model wrote reached the event stream as it came");
    runtime.shutdown(Duration::from_secs(5)).await;
}
