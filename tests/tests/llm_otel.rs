//! The LLM agent's spans exported to OpenTelemetry (agentry-llm's `otel` feature) and read back from an
//! in-memory exporter: a model call's span carries the GenAI conventions' attributes, and a tool's run is an
//! `execute_tool` span naming the tool.

use agentry::action::{ActionSpec, DynAction};
use agentry::id::{AgentId, SkillId};
use agentry::runtime::{Runtime, SpawnOptions};
use agentry::signal::Signal;
use agentry::skill::Skill;
use agentry_llm::agent::{ASK, LlmAgent, LlmConfig};
use agentry_llm::skill::ModelSkill;
use agentry_testkit::model::{ScriptedModel, Turn};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tracing_subscriber::layer::SubscriberExt;

fn attribute(span: &opentelemetry_sdk::trace::SpanData, key: &str) -> Option<String> {
    span.attributes.iter().find(|kv| kv.key.as_str() == key).map(|kv| kv.value.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_calls_and_tool_runs_are_exported_with_the_genai_attributes() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder().with_simple_exporter(exporter.clone()).build();
    let subscriber =
        tracing_subscriber::registry().with(agentry_llm::otel::layer().with_tracer(provider.tracer("agentry")));
    tracing::subscriber::set_global_default(subscriber).expect("the only subscriber of this test binary");

    let spec = ActionSpec::new("notes.count", "Counts notes.").expect("an id").params_schema(json!({"type": "object"}));
    let count = DynAction::new(spec, |_, _| Box::pin(async { Ok(json!(3)) })).expect("an action");
    let notes = Skill::builder("notes", "1.0.0").dyn_action(count).build().expect("a skill");
    let model = Arc::new(ScriptedModel::new([Turn::call("notes__count", json!({})), Turn::text("3.")]));
    let brain = ModelSkill::new("scripted", model).tools(&[&notes]).build().expect("the model skill");
    let runtime = Runtime::builder().agent::<LlmAgent>().expect("registers").skill(notes).skill(brain).build();
    let mut config = LlmConfig::new(SkillId::new("llm.scripted").expect("an id"), "scripted-1");
    config.skills = vec![(SkillId::new("notes").expect("an id"), Value::Null)];
    config.tools = vec!["notes.*".into()];
    let options = SpawnOptions { id: Some(AgentId::new("counter").expect("an id")), ..SpawnOptions::default() };
    let agent = runtime.spawn(LlmAgent::new(config), options).await.expect("spawned");
    let reply =
        agent.call(Signal::new(ASK, json!({"text": "How many?"})).expect("a kind"), Duration::from_secs(10)).await;
    assert_eq!(reply.expect("a reply")["status"], "answered");
    runtime.shutdown(Duration::from_secs(5)).await;
    provider.force_flush().expect("flushed");

    let spans = exporter.get_finished_spans().expect("the spans");
    let chats: Vec<_> = spans.iter().filter(|s| s.name == "chat").collect();
    assert_eq!(chats.len(), 2, "one span per model call");
    let first = chats[0];
    assert_eq!(attribute(first, "gen_ai.operation.name").as_deref(), Some("chat"));
    assert_eq!(attribute(first, "gen_ai.provider.name").as_deref(), Some("scripted"));
    assert_eq!(attribute(first, "gen_ai.request.model").as_deref(), Some("scripted-1"));
    assert!(attribute(first, "gen_ai.usage.input_tokens").is_some_and(|t| t.parse::<i64>().is_ok_and(|t| t > 0)));
    assert!(attribute(first, "gen_ai.usage.output_tokens").is_some());
    let finishes: Vec<Option<String>> = chats.iter().map(|s| attribute(s, "gen_ai.response.finish_reasons")).collect();
    assert!(finishes.contains(&Some("tool_calls".into())) && finishes.contains(&Some("stop".into())), "{finishes:?}");
    let tool = spans
        .iter()
        .find(|s| s.name == "action" && attribute(s, "gen_ai.tool.name").as_deref() == Some("notes.count"))
        .expect("the tool's run has its span");
    assert_eq!(attribute(tool, "gen_ai.operation.name").as_deref(), Some("execute_tool"));
}
