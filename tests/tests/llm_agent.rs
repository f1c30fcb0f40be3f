//! The LLM agent on a real runtime, driven by the testing kit's scripted model: tool calls run through the gate
//! (approval asked, given and denied), parallel calls (the same tool twice included) find their calls, every
//! kind of bad call goes back to the model as an error it can act on, and an exchange stops at its turn limit,
//! its token budget, or a model that fails.

use agentry::action::{ActionSpec, DynAction, Risk};
use agentry::events::EventKind;
use agentry::id::{AgentId, SkillId};
use agentry::runtime::{AgentRef, Runtime, SpawnOptions};
use agentry::signal::Signal;
use agentry::skill::Skill;
use agentry::store::{RunQuery, RunStatus};
use agentry_llm::ModelError;
use agentry_llm::agent::{ASK, LlmAgent, LlmConfig};
use agentry_llm::chat::{ChatRequest, Message, Part, Role, ToolResult, Usage};
use agentry_llm::skill::ModelSkill;
use agentry_llm::window::{ContextWindow, WindowStrategy};
use agentry_testkit::model::{ScriptedModel, Turn};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// The tools: `notes.read` (a path, required), `notes.count`, and `notes.write` (high risk: the default
/// policy asks for approval).
fn notes() -> Skill {
    let path_schema = json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]});
    let read = DynAction::new(
        ActionSpec::new("notes.read", "Reads a note.").expect("an id").params_schema(path_schema.clone()),
        |params, _| {
            Box::pin(async move {
                // `slow` ends after the others asked at once would have: outcomes come back out of order.
                if params["path"] == "slow" {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Ok(json!({"note": format!("contents of {}", params["path"].as_str().unwrap_or("?"))}))
            })
        },
    )
    .expect("an action");
    let count = DynAction::new(
        ActionSpec::new("notes.count", "Counts the notes.").expect("an id").params_schema(json!({"type": "object"})),
        |_, _| Box::pin(async { Ok(json!(3)) }),
    )
    .expect("an action");
    let write = DynAction::new(
        ActionSpec::new("notes.write", "Writes a note.")
            .expect("an id")
            .params_schema(path_schema)
            .side_effects(true)
            .risk(Risk::High),
        |params, _| Box::pin(async move { Ok(json!(format!("wrote {}", params["path"].as_str().unwrap_or("?")))) }),
    )
    .expect("an action");
    Skill::builder("notes", "1.0.0").dyn_action(read).dyn_action(count).dyn_action(write).build().expect("a skill")
}

fn skill(id: &str) -> SkillId {
    SkillId::new(id).expect("a skill id")
}

struct Setup {
    runtime: Runtime,
    agent: AgentRef<LlmAgent>,
    model: Arc<ScriptedModel>,
}

async fn start(turns: Vec<Turn>, configure: impl FnOnce(&mut LlmConfig)) -> Setup {
    let model = Arc::new(ScriptedModel::new(turns));
    let notes = notes();
    let brain = ModelSkill::new("scripted", model.clone()).tools(&[&notes]).build().expect("the model skill");
    let runtime =
        Runtime::builder().agent::<LlmAgent>().expect("the agent type registers").skill(notes).skill(brain).build();
    let mut config = LlmConfig::new(skill("llm.scripted"), "scripted-1");
    config.instructions = Some("You keep notes.".into());
    config.skills = vec![(skill("notes"), Value::Null)];
    config.tools = vec!["notes.*".into()];
    configure(&mut config);
    let options = SpawnOptions { id: Some(AgentId::new("scribe").expect("an id")), ..SpawnOptions::default() };
    let agent = runtime.spawn(LlmAgent::new(config), options).await.expect("the agent starts");
    Setup { runtime, agent, model }
}

async fn ask(agent: &AgentRef<LlmAgent>, text: &str) -> Value {
    let signal = Signal::new(ASK, json!({"text": text})).expect("a kind");
    agent.call(signal, Duration::from_secs(20)).await.expect("a reply")
}

/// The tool results the model was given in request `n`'s last message.
fn results_seen(model: &ScriptedModel, n: usize) -> Vec<ToolResult> {
    let request: ChatRequest = model.requests()[n].clone();
    let last = request.messages.last().expect("a message").clone();
    assert_eq!(last.role, Role::Tool, "request {n} ends with tool results");
    last.parts
        .into_iter()
        .filter_map(|p| match p {
            Part::ToolResult(r) => Some(r),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn an_answer_without_tools_is_the_reply() {
    let setup = start(vec![Turn::text("Hello.")], |_| {}).await;
    let mut events = setup.runtime.events();
    let reply = ask(&setup.agent, "Hi").await;
    let mut streamed = Vec::new();
    while let Ok(event) = events.try_recv() {
        if let EventKind::ActionOutput { action, text } = event.kind {
            streamed.push((action.to_string(), text));
        }
    }
    assert_eq!(streamed, [("llm.scripted.chat".to_owned(), "Hello.".to_owned())], "the text reached the event stream");
    assert_eq!(reply["status"], "answered");
    assert_eq!(reply["text"], "Hello.");
    assert_eq!(reply["model_calls"], 1);
    let request = &setup.model.requests()[0];
    assert_eq!(request.system.as_deref(), Some("You keep notes."));
    assert_eq!(request.model, "scripted-1");
    let offered: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(offered, ["notes__read", "notes__count", "notes__write"]);
    let state = setup.agent.state().await.expect("its state").domain;
    assert_eq!(state.conversation.len(), 2, "the question and the answer");
    assert!(state.used.total() > 0, "usage counted");
    setup.runtime.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn a_tool_call_runs_through_the_gate_and_its_result_goes_back_to_the_model() {
    let setup = start(
        vec![Turn::call("notes__read", json!({"path": "todo"})), Turn::text("It says: contents of todo.")],
        |_| {},
    )
    .await;
    let reply = ask(&setup.agent, "What is in todo?").await;
    assert_eq!((reply["status"].clone(), reply["model_calls"].clone()), (json!("answered"), json!(2)));
    let results = results_seen(&setup.model, 1);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].call_id, "call_0");
    assert!(!results[0].is_error && results[0].content.contains("contents of todo"), "{results:?}");
    let runs = setup.runtime.store().query(&RunQuery::default());
    let actions: Vec<&str> = runs.iter().map(|r| r.action.as_str()).collect();
    assert_eq!(actions, ["llm.scripted.chat", "notes.read", "llm.scripted.chat"], "every call is a journaled run");
    let model_cost: f64 = runs.iter().filter(|r| r.action.as_str() == "llm.scripted.chat").filter_map(|r| r.cost).sum();
    let reported = reply["usage"]["input_tokens"].as_f64().unwrap_or(0.0)
        + reply["usage"]["output_tokens"].as_f64().unwrap_or(0.0);
    assert_eq!(model_cost, reported, "the tokens are the model calls' cost");
    setup.runtime.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn parallel_calls_find_their_calls_the_same_tool_twice_included() {
    let calls = Turn::calls([
        ("notes__read", json!({"path": "slow"})),
        ("notes__count", json!({})),
        ("notes__read", json!({"path": "b"})),
    ]);
    let setup = start(vec![calls, Turn::text("Done.")], |_| {}).await;
    let reply = ask(&setup.agent, "Read a and b, and count.").await;
    assert_eq!(reply["status"], "answered");
    let results = results_seen(&setup.model, 1);
    let by_call: Vec<(&str, &str)> = results.iter().map(|r| (r.call_id.as_str(), r.content.as_str())).collect();
    assert_eq!(
        by_call,
        [("call_0", r#"{"note":"contents of slow"}"#), ("call_1", "3"), ("call_2", r#"{"note":"contents of b"}"#)],
        "each result answers its own call, in the model's order"
    );
    setup.runtime.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn bad_calls_go_back_to_the_model_as_errors_and_never_crash_the_loop() {
    let turns = vec![
        Turn::raw_call("notes__read", r#"{"path": "a""#),
        Turn::call("shell__run", json!({"command": "rm -rf /"})),
        Turn::call("notes__read", json!({"path": 5})),
        Turn::call("llm__scripted__chat", json!({})),
        Turn::text("I give up."),
    ];
    let setup = start(turns, |_| {}).await;
    let reply = ask(&setup.agent, "Read a.").await;
    assert_eq!((reply["status"].clone(), reply["text"].clone()), (json!("answered"), json!("I give up.")));
    let malformed = &results_seen(&setup.model, 1)[0];
    assert!(malformed.is_error && malformed.content.contains("not valid JSON"), "{malformed:?}");
    let unknown = &results_seen(&setup.model, 2)[0];
    assert!(unknown.is_error && unknown.content.contains("no tool `shell__run`"), "{unknown:?}");
    assert!(unknown.content.contains("notes__read"), "it says which tools there are: {unknown:?}");
    let invalid = &results_seen(&setup.model, 3)[0];
    assert!(invalid.is_error && invalid.content.contains("validation"), "the action refused the params: {invalid:?}");
    let itself = &results_seen(&setup.model, 4)[0];
    assert!(itself.is_error, "the model cannot call itself as a tool: {itself:?}");
    let runs = setup.runtime.store().query(&RunQuery::default());
    assert!(runs.iter().all(|r| r.action.as_str() != "shell.run"), "nothing unknown was asked for");
    setup.runtime.shutdown(Duration::from_secs(5)).await;
}

/// One simulation of a scribe asked to write a note (approval granted after a virtual second) and read two:
/// its replies and trace hash.
fn simulate(seed: u64) -> (Vec<Value>, String) {
    use agentry_sim::{Approvals, Faults, SimBuilder};
    let turns = vec![
        Turn::calls([("notes__write", json!({"path": "a"})), ("notes__read", json!({"path": "a"}))]),
        Turn::call("notes__read", json!({"path": "b"})),
        Turn::text("Done."),
    ];
    let model = Arc::new(ScriptedModel::new(turns));
    let notes = notes_fast();
    let brain = ModelSkill::new("scripted", model.clone()).tools(&[&notes]).build().expect("the model skill");
    let faults = Faults { approvals: Approvals::Grant { after: Duration::from_secs(1) }, ..Faults::default() };
    let mut sim = SimBuilder::<LlmAgent>::new(seed)
        .skill(notes)
        .skill(brain)
        .faults(faults)
        .keep_trace(true)
        .build()
        .expect("a simulation");
    let mut config = LlmConfig::new(skill("llm.scripted"), "scripted-1");
    config.skills = vec![(skill("notes"), Value::Null)];
    config.tools = vec!["notes.*".into()];
    let scribe = AgentId::new("scribe").expect("an id");
    sim.add(scribe.clone(), LlmAgent::new(config)).expect("added");
    sim.send(&scribe, Signal::new(ASK, json!({"text": "Write a, read a and b."})).expect("a kind")).expect("sent");
    sim.run();
    let replies = sim.replies().iter().map(|(_, reply)| reply.clone()).collect();
    (replies, sim.trace().hash())
}

/// `notes` with no waiting in `notes.read` (a simulation runs actions that finish at their first poll).
fn notes_fast() -> Skill {
    let path_schema = json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]});
    let read = DynAction::new(
        ActionSpec::new("notes.read", "Reads a note.").expect("an id").params_schema(path_schema.clone()),
        |params, _| {
            Box::pin(async move { Ok(json!(format!("contents of {}", params["path"].as_str().unwrap_or("?")))) })
        },
    )
    .expect("an action");
    let write = DynAction::new(
        ActionSpec::new("notes.write", "Writes a note.")
            .expect("an id")
            .params_schema(path_schema)
            .side_effects(true)
            .risk(Risk::High),
        |_, _| Box::pin(async { Ok(json!("written")) }),
    )
    .expect("an action");
    Skill::builder("notes", "1.0.0").dyn_action(read).dyn_action(write).build().expect("a skill")
}

#[test]
fn the_same_loop_runs_in_the_simulator_deterministically() {
    let (replies, hash) = simulate(7);
    assert_eq!(replies.len(), 1, "{replies:?}");
    assert_eq!((replies[0]["status"].clone(), replies[0]["text"].clone()), (json!("answered"), json!("Done.")));
    assert_eq!(replies[0]["model_calls"], 3);
    let (again, same) = simulate(7);
    assert_eq!((again, same), (replies, hash), "the same seed, the same run, step for step");
}

/// Approves (or denies) every approval the runtime asks for, as they come.
fn approver(runtime: &Runtime, approve: bool) -> tokio::task::JoinHandle<usize> {
    let mut events = runtime.events();
    let runtime = runtime.clone();
    tokio::spawn(async move {
        let mut decided = 0;
        while let Ok(event) = events.recv().await {
            if let (EventKind::ApprovalAsked { .. }, Some(run)) = (&event.kind, event.run) {
                runtime.decide(&event.agent, run, approve).await.expect("decided");
                decided += 1;
            }
        }
        decided
    })
}

#[tokio::test]
async fn a_risky_tool_waits_for_approval_and_a_denial_is_a_result_the_model_reads() {
    let turns = vec![
        Turn::call("notes__write", json!({"path": "a"})),
        Turn::text("Written."),
        Turn::call("notes__write", json!({"path": "b"})),
        Turn::text("I was not allowed."),
    ];
    let setup = start(turns, |_| {}).await;
    let approving = approver(&setup.runtime, true);
    let reply = ask(&setup.agent, "Write a.").await;
    approving.abort();
    assert_eq!(reply["status"], "answered");
    let approved = &results_seen(&setup.model, 1)[0];
    assert_eq!((approved.is_error, approved.content.as_str()), (false, "wrote a"));
    let query = RunQuery { status: Some(RunStatus::Completed), ..RunQuery::default() };
    let written = setup.runtime.store().query(&query).into_iter().find(|r| r.action.as_str() == "notes.write");
    let history: Vec<RunStatus> = written.expect("the write ran").history.iter().map(|(s, _)| *s).collect();
    assert!(history.contains(&RunStatus::AwaitingApproval), "it waited for approval: {history:?}");

    let denying = approver(&setup.runtime, false);
    let reply = ask(&setup.agent, "Write b.").await;
    denying.abort();
    assert_eq!(reply["text"], "I was not allowed.");
    let denied = &results_seen(&setup.model, 3)[0];
    assert!(denied.is_error && denied.content.contains("denied"), "{denied:?}");
    setup.runtime.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn an_exchange_stops_at_its_turn_limit() {
    let again = || Turn::call("notes__count", json!({}));
    let setup = start(vec![again(), again(), again()], |config| config.max_turns = 2).await;
    let reply = ask(&setup.agent, "Count forever.").await;
    assert_eq!(reply["status"], "stopped");
    assert!(reply["error"].as_str().is_some_and(|e| e.contains("asked 2 times")), "{reply}");
    assert_eq!(setup.model.left(), 1, "not asked a third time");
    setup.runtime.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn an_exchange_stops_when_its_token_budget_is_spent() {
    let costly = Turn::call("notes__count", json!({})).with_usage(Usage::new(400, 200));
    let setup = start(vec![costly, Turn::text("never")], |config| config.token_budget = Some(500)).await;
    let reply = ask(&setup.agent, "Count.").await;
    assert_eq!(reply["status"], "stopped");
    assert!(reply["error"].as_str().is_some_and(|e| e.contains("600 tokens of its budget of 500")), "{reply}");
    assert_eq!(setup.model.left(), 1, "the model was not asked again");
    setup.runtime.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn a_failing_model_ends_the_exchange_with_a_reply_and_the_next_message_starts_afresh() {
    let quota = ModelError::QuotaExhausted { message: "pay".into() };
    let setup = start(vec![Turn::Fail(quota), Turn::text("Back.")], |_| {}).await;
    let reply = ask(&setup.agent, "Hi").await;
    assert_eq!(reply["status"], "stopped");
    assert!(reply["error"].as_str().is_some_and(|e| e.contains("quota")), "{reply}");
    let reply = ask(&setup.agent, "Hi again").await;
    assert_eq!(reply["text"], "Back.");
    setup.runtime.shutdown(Duration::from_secs(5)).await;
}

/// A long message: about 50 tokens as the window estimates them.
fn long(word: &str) -> String {
    format!("{word} ").repeat(40)
}

#[tokio::test]
async fn a_conversation_over_its_window_drops_its_oldest_turns() {
    let turns = vec![Turn::text(long("one")), Turn::text(long("two")), Turn::text("three")];
    let window = ContextWindow { max_tokens: 150, strategy: WindowStrategy::DropOldest };
    let setup = start(turns, |config| config.window = Some(window)).await;
    for question in ["first", "second", "third"] {
        assert_eq!(ask(&setup.agent, &long(question)).await["status"], "answered");
    }
    let third = &setup.model.requests()[2];
    assert_eq!(third.messages.first().map(|m| m.role), Some(Role::User), "it starts with a user message");
    assert!(third.messages.len() < 5, "the oldest turns went: {} messages", third.messages.len());
    assert!(third.messages.last().is_some_and(|m| m.text().starts_with("third")), "the question is kept");
    let state = setup.agent.state().await.expect("its state").domain;
    assert!(!state.conversation.iter().any(|m| m.text().starts_with("first")), "dropped from the state too");
    setup.runtime.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn a_conversation_over_its_window_can_be_summarized_by_the_model() {
    let turns = vec![Turn::text(long("one")), Turn::text("They talked about one."), Turn::text("two")];
    let window = ContextWindow { max_tokens: 100, strategy: WindowStrategy::Summarize };
    let setup = start(turns, |config| config.window = Some(window)).await;
    assert_eq!(ask(&setup.agent, &long("first")).await["status"], "answered");
    let reply = ask(&setup.agent, "second").await;
    assert_eq!((reply["text"].clone(), reply["model_calls"].clone()), (json!("two"), json!(2)));
    let requests = setup.model.requests();
    let summary_ask = &requests[1];
    assert!(summary_ask.tools.is_empty(), "no tools offered for a summary");
    assert!(summary_ask.messages[0].text().contains("user: first"), "the transcript is in the ask");
    let after = &requests[2];
    assert!(after.messages[0].text().starts_with("Summary of the earlier conversation: They talked about one."));
    assert_eq!(after.messages.last().map(Message::text).as_deref(), Some("second"));
    setup.runtime.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn only_the_best_tools_for_the_turn_are_offered_and_their_scores_are_on_the_event_stream() {
    let setup = start(vec![Turn::text("There are 3.")], |config| config.max_tools = Some(1)).await;
    let mut events = setup.runtime.events();
    ask(&setup.agent, "How many notes are there? Count them.").await;
    let offered: Vec<String> = setup.model.requests()[0].tools.iter().map(|t| t.name.clone()).collect();
    assert_eq!(offered, ["notes__count"]);
    let mut note = None;
    while let Ok(event) = events.try_recv() {
        if let EventKind::ActionNote { topic, data, .. } = event.kind
            && topic == "tools_offered"
        {
            note = Some(data);
        }
    }
    let note = note.expect("the scores were announced");
    assert_eq!(note["offered"], json!(["notes__count"]));
    let scores = note["scores"].as_array().expect("scores");
    assert_eq!(scores.len(), 3, "every candidate scored: {note}");
    assert!(scores.iter().all(|s| s["score"].is_number() && s["keywords"].is_number()), "{note}");
    setup.runtime.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn another_agent_is_a_tool_asked_through_the_gate() {
    use agentry_llm::agent_tool::AgentTool;
    let boss_model = Arc::new(ScriptedModel::new([
        Turn::call("agent__helper__ask", json!({"text": "What is 2 + 2?"})),
        Turn::text("The helper says 4."),
        Turn::call("agent__helper__ask", json!({"text": "And 3 + 3?"})),
        Turn::text("I may not ask."),
    ]));
    let helper_model = Arc::new(ScriptedModel::new([Turn::text("4")]));
    let runtime = Runtime::builder().agent::<LlmAgent>().expect("registers").build();
    let helper_id = AgentId::new("helper").expect("an id");
    let helper_tool =
        AgentTool::new("helper", helper_id.clone(), "Answers arithmetic.").build(runtime.clone()).expect("a tool");
    let boss_brain = ModelSkill::new("boss", boss_model.clone()).tools(&[&helper_tool]).build().expect("a skill");
    let helper_brain = ModelSkill::new("helper", helper_model.clone()).build().expect("a skill");
    for skill in [helper_tool, boss_brain, helper_brain] {
        runtime.add_skill(skill).expect("added");
    }
    let helper_config = LlmConfig::new(skill("llm.helper"), "scripted-1");
    let options = SpawnOptions { id: Some(helper_id), ..SpawnOptions::default() };
    runtime.spawn(LlmAgent::new(helper_config), options).await.expect("the helper starts");
    let mut boss_config = LlmConfig::new(skill("llm.boss"), "scripted-1");
    boss_config.skills = vec![(skill("agent.helper"), Value::Null)];
    boss_config.tools = vec!["agent.**".into()];
    let options = SpawnOptions { id: Some(AgentId::new("boss").expect("an id")), ..SpawnOptions::default() };
    let boss = runtime.spawn(LlmAgent::new(boss_config), options).await.expect("the boss starts");

    let reply = ask(&boss, "Ask the helper what 2 + 2 is.").await;
    assert_eq!(reply["text"], "The helper says 4.");
    let result = &results_seen(&boss_model, 1)[0];
    assert_eq!((result.is_error, result.content.as_str()), (false, "4"), "the helper's reply is the tool's result");
    assert_eq!(helper_model.requests()[0].messages[0].text(), "What is 2 + 2?");
    let runs = runtime.store().query(&RunQuery::default());
    assert!(
        runs.iter().any(|r| r.agent.as_str() == "boss" && r.action.as_str() == "agent.helper.ask"),
        "a run of the boss"
    );

    // A policy that does not allow delegating: the call is refused at the gate, and the model reads why.
    let policy =
        agentry::policy::Policy::default().deny_action(agentry::pattern::Pattern::new("agent.**").expect("a pattern"));
    runtime.set_policy(&AgentId::new("boss").expect("an id"), policy).await.expect("set");
    let reply = ask(&boss, "And 3 + 3?").await;
    assert_eq!(reply["text"], "I may not ask.");
    let refused = &results_seen(&boss_model, 3)[0];
    assert!(refused.is_error && refused.content.contains("denied"), "{refused:?}");
    assert_eq!(helper_model.requests().len(), 1, "the helper was not asked again");
    runtime.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn the_first_call_of_an_exchange_can_be_made_to_call_a_tool_and_the_later_ones_to_answer() {
    use agentry_llm::chat::ToolChoice;
    let turns = vec![Turn::call("notes__count", json!({})), Turn::text("3.")];
    let setup = start(turns, |config| {
        config.first_tool_choice = ToolChoice::Tool("notes__count".into());
        config.later_tool_choice = ToolChoice::None;
    })
    .await;
    ask(&setup.agent, "How many?").await;
    let choices: Vec<ToolChoice> = setup.model.requests().iter().map(|r| r.tool_choice.clone()).collect();
    assert_eq!(choices, [ToolChoice::Tool("notes__count".into()), ToolChoice::None]);
    setup.runtime.shutdown(Duration::from_secs(5)).await;
}

/// An operator's "always allow" for a tool holds from then on, across a restart: the approval is not asked again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_allow_is_journaled_and_holds_after_a_restart() {
    let folder = tempfile::tempdir().expect("a folder");
    let open = |turns: Vec<Turn>| {
        let model = Arc::new(ScriptedModel::new(turns));
        let notes = notes();
        let brain = ModelSkill::new("scripted", model).tools(&[&notes]).build().expect("the model skill");
        Runtime::builder()
            .agent::<LlmAgent>()
            .expect("registers")
            .skill(notes)
            .skill(brain)
            .durable(folder.path())
            .expect("the journal opens")
    };
    let scribe = AgentId::new("scribe").expect("an id");
    let (runtime, _) = open(vec![Turn::call("notes__write", json!({"path": "a"})), Turn::text("Written.")])
        .open()
        .await
        .expect("opens");
    let mut config = LlmConfig::new(skill("llm.scripted"), "scripted-1");
    config.skills = vec![(skill("notes"), Value::Null)];
    config.tools = vec!["notes.*".into()];
    let options = SpawnOptions { id: Some(scribe.clone()), ..SpawnOptions::default() };
    let agent = runtime.spawn(LlmAgent::new(config), options).await.expect("spawned");
    let mut events = runtime.events();
    let operator = runtime.clone();
    let allowing = tokio::spawn(async move {
        while let Ok(event) = events.recv().await {
            if let EventKind::ApprovalAsked { action, .. } = &event.kind {
                return operator.always_allow(&event.agent, action).await.expect("allowed");
            }
        }
        0
    });
    assert_eq!(ask(&agent, "Write a.").await["text"], "Written.");
    assert_eq!(allowing.await.expect("the operator"), 1, "the waiting run was approved with it");
    runtime.shutdown(Duration::from_secs(5)).await;

    let (runtime, _) = open(vec![Turn::call("notes__write", json!({"path": "b"})), Turn::text("Written again.")])
        .open()
        .await
        .expect("reopens");
    let mut events = runtime.events();
    let agent = runtime.get::<LlmAgent>(&scribe).expect("back");
    assert_eq!(ask(&agent, "Write b.").await["text"], "Written again.");
    while let Ok(event) = events.try_recv() {
        assert!(!matches!(event.kind, EventKind::ApprovalAsked { .. }), "asked again after the restart: {event:?}");
    }
    let written = runtime.store().query(&RunQuery { status: Some(RunStatus::Completed), ..RunQuery::default() });
    assert_eq!(written.iter().filter(|r| r.action.as_str() == "notes.write").count(), 2);
    runtime.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn a_message_without_text_is_refused_with_a_reply_that_says_what_was_expected() {
    let setup = start(vec![Turn::text("unused")], |_| {}).await;
    let signal = Signal::new(ASK, json!({"question": 42})).expect("a kind");
    let reply = setup.agent.call(signal, Duration::from_secs(5)).await.expect("a reply");
    assert_eq!(reply["status"], "refused");
    assert!(reply["error"].as_str().is_some_and(|e| e.contains("\"text\": string")), "{reply}");
    assert_eq!(setup.model.requests().len(), 0, "the model was not asked");
    assert!(setup.agent.state().await.expect("its state").domain.conversation.is_empty(), "nothing kept");
    setup.runtime.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn messages_past_the_waiting_limit_are_refused_with_a_reply() {
    // The first exchange waits for an approval nobody gives, so later messages wait behind it.
    let setup = start(vec![Turn::call("notes__write", json!({"path": "a"}))], |config| config.max_waiting = 1).await;
    let first = Signal::new(ASK, json!({"text": "Write a."})).expect("a kind");
    setup.agent.send(first).expect("sent");
    let second = Signal::new(ASK, json!({"text": "Then this."})).expect("a kind");
    setup.agent.send(second).expect("sent");
    let third = ask(&setup.agent, "And this.").await;
    assert_eq!(third["status"], "refused");
    assert!(third["error"].as_str().is_some_and(|e| e.contains("max_waiting")), "{third}");
    assert_eq!(setup.agent.state().await.expect("its state").domain.waiting.len(), 1, "one kept, no more");
    setup.runtime.shutdown(Duration::from_secs(1)).await;
}
