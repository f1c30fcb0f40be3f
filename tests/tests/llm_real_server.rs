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
use std::sync::Arc;
use std::time::Duration;

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
    let home = match agentry_tests::llama::installed() {
        Ok(home) => home,
        Err(why) => {
            eprintln!("SKIPPED: llama.cpp's server could not be installed: {why}");
            return;
        }
    };
    let (server, base_url) = match agentry_tests::llama::serve(&home).await {
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
