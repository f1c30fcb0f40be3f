//! A process running one LLM agent (`scribe`) on a durable runtime, for the tests that kill it mid-loop
//! (`tests/llm_durability.rs`). Its model is scripted; every model call prints `model-call <n> <role of the
//! conversation's last message>`, and a call past the script waits for ever (a model that never answers). Its
//! tool `notes.write` (high risk: approval asked) appends `write <path>` to `<dir>/ledger`.
//!
//! `llm_worker <dir> ask <turns json>`: spawns `scribe`, asks it something, prints `asked`; prints
//! `approval-asked <run>` for each approval asked (once it is durable), and approves it when `--approve` is given.
//! `llm_worker <dir> resume <turns json>`: brings `scribe` back, approves the runs waiting for approval (printing
//! `approved <run>`), and once the exchange ended prints `state <json>` and exits.

use agentry::action::{ActionSpec, DynAction, Risk};
use agentry::events::EventKind;
use agentry::id::{AgentId, SkillId};
use agentry::runtime::{Runtime, SpawnOptions};
use agentry::signal::Signal;
use agentry::skill::Skill;
use agentry::store::{RunQuery, RunStatus};
use agentry_llm::agent::{ASK, LlmAgent, LlmConfig};
use agentry_llm::chat::{ChatRequest, ChatResponse, Role};
use agentry_llm::skill::ModelSkill;
use agentry_llm::{ChatModel, DeltaSink, ModelFuture};
use agentry_testkit::model::{ScriptedModel, Turn};
use serde_json::{Value, json};
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// The scripted model, telling the test of each call, and never answering past its script.
struct Loud {
    script: ScriptedModel,
    calls: AtomicUsize,
    /// The runtime's journal, once it is built: a call that will never answer first waits until everything
    /// before it is durable, so the test's kill after it finds it all in the journal.
    journal: std::sync::OnceLock<agentry::store::JournalView>,
}

impl ChatModel for Loud {
    fn provider(&self) -> &str {
        "scripted"
    }

    fn complete<'a>(&'a self, request: &'a ChatRequest, on_delta: DeltaSink<'a>) -> ModelFuture<'a> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let line = format!("model-call {n} {}", role_name(request.messages.last().map(|m| m.role)));
        if self.script.left() == 0 {
            let journal = self.journal.get().cloned();
            return Box::pin(async move {
                if let Some(durable) = journal.as_ref().and_then(|j| j.durable()) {
                    let _ = durable.flushed().await;
                }
                say(&line);
                std::future::pending::<Result<ChatResponse, agentry_llm::ModelError>>().await
            });
        }
        say(&line);
        self.script.complete(request, on_delta)
    }
}

fn role_name(role: Option<Role>) -> &'static str {
    match role {
        Some(Role::User) => "user",
        Some(Role::Assistant) => "assistant",
        Some(Role::Tool) => "tool",
        None => "none",
    }
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// `notes.write`: high risk, side effects; appends `write <path>` to the ledger.
fn notes(dir: std::path::PathBuf) -> Skill {
    let schema = json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]});
    let spec = ActionSpec::new("notes.write", "Writes a note.")
        .expect("an id")
        .params_schema(schema)
        .side_effects(true)
        .risk(Risk::High);
    let write = DynAction::new(spec, move |params, _| {
        let ledger = dir.join("ledger");
        Box::pin(async move {
            let line = format!("write {}\n", params["path"].as_str().unwrap_or("?"));
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&ledger)
                .map_err(|e| agentry::action::ActionError::critical(e.to_string()))?;
            file.write_all(line.as_bytes()).map_err(|e| agentry::action::ActionError::critical(e.to_string()))?;
            Ok(json!("written"))
        })
    })
    .expect("an action");
    Skill::builder("notes", "1.0.0").dyn_action(write).build().expect("a skill")
}

fn scribe() -> AgentId {
    AgentId::new("scribe").expect("an id")
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (dir, mode) = (std::path::PathBuf::from(&args[1]), args[2].as_str());
    let turns: Vec<Value> = serde_json::from_str(&args[3]).expect("turns as JSON");
    let approve = args.iter().any(|a| a == "--approve");
    let script = ScriptedModel::new(turns.iter().map(turn));
    let model = Arc::new(Loud { script, calls: AtomicUsize::new(0), journal: std::sync::OnceLock::new() });
    let notes = notes(dir.clone());
    let brain = ModelSkill::new("scripted", model.clone()).tools(&[&notes]).build().expect("the model skill");
    let builder = Runtime::builder().agent::<LlmAgent>().expect("registers").skill(notes).skill(brain);
    let runtime = builder.durable(&dir).expect("the journal opens").build();
    let _ = model.journal.set(runtime.store().clone());
    // Listening before the recovery: what it starts again is heard.
    let mut events = runtime.events();
    runtime.recover().await.expect("the journal reads back");
    match mode {
        "ask" => {
            let mut config = LlmConfig::new(SkillId::new("llm.scripted").expect("an id"), "scripted-1");
            config.skills = vec![(SkillId::new("notes").expect("an id"), Value::Null)];
            config.tools = vec!["notes.*".into()];
            let options = SpawnOptions { id: Some(scribe()), ..SpawnOptions::default() };
            let agent = runtime.spawn(LlmAgent::new(config), options).await.expect("spawned");
            agent.send(Signal::new(ASK, json!({"text": "Write a."})).expect("a kind")).expect("sent");
            say("asked");
            while let Ok(event) = events.recv().await {
                if let (EventKind::ApprovalAsked { .. }, Some(run)) = (&event.kind, event.run) {
                    // Said once the request is durable (the journal commits in batches, a few ms apart).
                    if let Some(durable) = runtime.store().durable() {
                        let _ = durable.flushed().await;
                    }
                    say(&format!("approval-asked {run}"));
                    if approve {
                        runtime.decide(&event.agent, run, true).await.expect("approved");
                    }
                }
            }
        }
        "resume" => {
            let waiting = RunQuery { status: Some(RunStatus::AwaitingApproval), ..RunQuery::default() };
            for run in runtime.store().query(&waiting) {
                runtime.decide(&run.agent, run.run, true).await.expect("approved");
                say(&format!("approved {}", run.run));
            }
            let agent = runtime.get::<LlmAgent>(&scribe()).expect("scribe is back");
            loop {
                let state = agent.state().await.expect("its state").domain;
                if state.exchange.is_none() {
                    say(&format!("state {}", serde_json::to_string(&state).expect("JSON")));
                    break;
                }
                // Each model call's end is an event: the exchange can only have ended after one.
                while let Ok(event) = events.recv().await {
                    if matches!(&event.kind, EventKind::ActionCompleted { action, .. } if action.as_str() == "llm.scripted.chat")
                    {
                        break;
                    }
                }
            }
            runtime.shutdown(Duration::from_secs(5)).await;
        }
        other => panic!("unknown mode {other}"),
    }
}

/// A scripted turn from its JSON: `{"text": ...}` or `{"call": [tool, arguments]}`.
fn turn(value: &Value) -> Turn {
    match (value.get("text"), value.get("call")) {
        (Some(text), _) => Turn::text(text.as_str().unwrap_or_default()),
        (_, Some(call)) => Turn::call(call[0].as_str().unwrap_or_default(), call[1].clone()),
        _ => panic!("a turn is text or a call: {value}"),
    }
}
