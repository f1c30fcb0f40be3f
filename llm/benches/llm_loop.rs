//! The LLM loop's overhead: one exchange is a model turn that calls a no-op tool, the tool's run, and a model
//! turn that answers; the model answers at once (zero latency), so what is measured is the loop.
//!
//! `llm_loop/agentry_memory`: an `LlmAgent` on the runtime with the in-memory journal, asked with `call`.
//! `llm_loop/agentry_sqlite`: the same on a SQLite journal.
//! `llm_loop/bare`: a plain Rust loop calling the same model and the same tool directly, with the same messages.
//! Criterion reports model turns per second; the ratios are the loop's overhead.

use agentry::action::{ActionSpec, DynAction};
use agentry::id::{AgentId, SkillId};
use agentry::runtime::{AgentRef, Runtime, SpawnOptions};
use agentry::signal::Signal;
use agentry::skill::Skill;
use agentry_llm::agent::{ASK, LlmAgent, LlmConfig};
use agentry_llm::chat::{ChatRequest, ChatResponse, FinishReason, Message, Part, Role, ToolCall, ToolResult, Usage};
use agentry_llm::skill::ModelSkill;
use agentry_llm::{ChatModel, DeltaSink, ModelFuture};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A model with no latency: after a user message it calls `noop__run`; after a tool result it answers.
struct Instant0;

impl ChatModel for Instant0 {
    fn provider(&self) -> &str {
        "bench"
    }

    fn complete<'a>(&'a self, request: &'a ChatRequest, _on_delta: DeltaSink<'a>) -> ModelFuture<'a> {
        let after_tool = request.messages.last().is_some_and(|m| m.role == Role::Tool);
        let message = if after_tool {
            Message::assistant("done")
        } else {
            let call = ToolCall { id: "call_0".into(), name: "noop__run".into(), arguments: "{}".into() };
            Message { role: Role::Assistant, parts: vec![Part::ToolCall(call)] }
        };
        let finish = if after_tool { FinishReason::Stop } else { FinishReason::ToolCalls };
        let answer = ChatResponse { message, usage: Usage::new(10, 2), finish, model: "bench".into() };
        Box::pin(std::future::ready(Ok(answer)))
    }
}

fn noop() -> Skill {
    let spec = ActionSpec::new("noop.run", "Does nothing.").expect("an id").params_schema(json!({"type": "object"}));
    let run = DynAction::new(spec, |_, _| Box::pin(async { Ok(json!("ok")) })).expect("an action");
    Skill::builder("noop", "1.0.0").dyn_action(run).build().expect("a skill")
}

async fn agent(runtime: &Runtime, n: usize) -> AgentRef<LlmAgent> {
    let mut config = LlmConfig::new(SkillId::new("llm.bench").expect("an id"), "bench");
    config.skills = vec![(SkillId::new("noop").expect("an id"), Value::Null)];
    config.tools = vec!["noop.*".into()];
    // A window keeps the conversation (and the model call's params) from growing with every exchange.
    config.window = Some(agentry_llm::window::ContextWindow { max_tokens: 200, strategy: Default::default() });
    let options =
        SpawnOptions { id: Some(AgentId::new(format!("bench-{n}")).expect("an id")), ..SpawnOptions::default() };
    runtime.spawn(LlmAgent::new(config), options).await.expect("spawned")
}

fn runtime(durable: Option<&std::path::Path>) -> Runtime {
    let noop = noop();
    let brain = ModelSkill::new("bench", Arc::new(Instant0)).tools(&[&noop]).build().expect("the model skill");
    let builder = Runtime::builder().agent::<LlmAgent>().expect("registers").skill(noop).skill(brain);
    match durable {
        Some(dir) => builder.durable(dir).expect("the journal opens").build(),
        None => builder.build(),
    }
}

async fn exchange(agent: &AgentRef<LlmAgent>) {
    let ask = Signal::new(ASK, json!({"text": "go"})).expect("a kind");
    let reply = agent.call(ask, Duration::from_secs(10)).await.expect("a reply");
    assert_eq!(reply["status"], "answered");
}

/// `iters` exchanges, one after the other; their time.
async fn exchanges(agent: &AgentRef<LlmAgent>, iters: u64) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        exchange(agent).await;
    }
    start.elapsed()
}

/// The same exchange with nothing but the model and the tool, called directly.
async fn bare_exchange(model: &Instant0, tool: &DynAction, conversation: &mut Vec<Message>) {
    conversation.push(Message::user("go"));
    let mut request = ChatRequest::new("bench", conversation.clone());
    let first = model.complete(&request, &|_| {}).await.expect("an answer");
    let calls: Vec<ToolCall> = first.message.tool_calls().cloned().collect();
    conversation.push(first.message);
    let mut results = Vec::new();
    for call in calls {
        let params = call.parsed_arguments().expect("arguments");
        let ctx = agentry::action::ActionContext::new(AgentId::new("bare").expect("an id"), tool.spec().id.clone());
        tool.validate(&params).expect("valid params");
        let output = tool.invoke(params, ctx).await.expect("the tool runs");
        results.push(ToolResult { call_id: call.id, content: output.to_string(), is_error: false });
    }
    conversation.push(Message::tool_results(results));
    request.messages = conversation.clone();
    let answer = model.complete(&request, &|_| {}).await.expect("an answer");
    conversation.push(answer.message);
    // The same bound as the agent's window: the last exchange only.
    let keep = conversation.len().saturating_sub(4);
    conversation.drain(..keep);
}

fn llm_loop(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a runtime");
    let mut group = c.benchmark_group("llm_loop");
    group.throughput(Throughput::Elements(2));
    let memory = runtime(None);
    let in_memory = rt.block_on(agent(&memory, 0));
    group.bench_function("agentry_memory", |b| b.iter_custom(|iters| rt.block_on(exchanges(&in_memory, iters))));
    let folder = tempfile::tempdir().expect("a folder");
    let sqlite = rt.block_on(async { runtime(Some(folder.path())) });
    let on_disk = rt.block_on(agent(&sqlite, 1));
    group.bench_function("agentry_sqlite", |b| b.iter_custom(|iters| rt.block_on(exchanges(&on_disk, iters))));
    let tool = noop().actions()[0].clone();
    group.bench_function("bare", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut conversation = Vec::new();
                let start = Instant::now();
                for _ in 0..iters {
                    bare_exchange(&Instant0, &tool, &mut conversation).await;
                }
                start.elapsed()
            })
        })
    });
    group.finish();
    rt.block_on(memory.shutdown(Duration::from_secs(1)));
    rt.block_on(sqlite.shutdown(Duration::from_secs(1)));
}

criterion_group!(benches, llm_loop);
criterion_main!(benches);
