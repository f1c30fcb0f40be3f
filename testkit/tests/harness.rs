//! The kit's harnesses, driven as a user would: `AgentHarness` (runs, approvals, schedules, the trust
//! boundary, the assert helpers and their messages, errors), `ActionHarness`, and `check_action` finding a
//! planted bug.

use agentry::action::{ActionFuture, DynAction, ErrorClass, RunReport};
use agentry::effect::{EffectKind, EffectRefusal};
use agentry::kinds;
use agentry::prelude::*;
use agentry::skill::{BuildError, Catalog, Skill};
use agentry_testkit::{ActionCheck, ActionHarness, AgentHarness, AgentHarnessError, CheckFailure, check_action};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

// ---------------------------------------------------------------------------------------------------------
// Skills and agents under test.
// ---------------------------------------------------------------------------------------------------------

/// Saves a note; its output is the note's text.
#[derive(Debug, Deserialize, schemars::JsonSchema, Action)]
#[action(id = "notes.save", output = String)]
struct SaveNote {
    text: String,
}

impl SaveNote {
    async fn run(self, _ctx: ActionContext) -> Result<String, ActionError> {
        Ok(self.text)
    }
}

/// Deletes every note: risky, so the default policy asks for approval first.
#[derive(Debug, Deserialize, schemars::JsonSchema, Action)]
#[action(id = "notes.wipe", output = u32, risk = high, side_effects)]
struct WipeNotes {}

impl WipeNotes {
    async fn run(self, _ctx: ActionContext) -> Result<u32, ActionError> {
        Ok(0)
    }
}

/// Keeps notes.
#[derive(Skill)]
#[skill(id = "notes", version = "1.0.0", actions(SaveNote, WipeNotes))]
struct Notes;

fn action_id(id: &str) -> ActionId {
    ActionId::new(id).expect("a valid action id")
}

/// Turns requests into runs of the `notes` skill's actions and records how every run ended.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, Agent)]
#[agent(
    name = "clerk",
    skills(Notes),
    routes(
        "note.save" => save,
        "note.wipe" => wipe,
        "note.burn" => burn,
        "action.completed" => ended,
        "action.failed" => ended,
        "action.blocked" => ended
    )
)]
struct Clerk {
    asked: u32,
    /// Outputs of completed runs.
    saved: Vec<String>,
    /// `action: Class` of failed runs.
    failed: Vec<String>,
    /// Actions whose runs wait for approval.
    awaiting: Vec<String>,
    /// `action: Class` of runs refused or denied.
    refused: Vec<String>,
}

impl Clerk {
    fn ask(&self, action: &str, params: Value) -> Reaction<Self> {
        let next = Clerk { asked: self.asked + 1, ..self.clone() };
        Reaction::Update(next, vec![Effect::run(action_id(action), params)])
    }

    fn save(&self, signal: &Signal) -> Reaction<Self> {
        self.ask("notes.save", json!({"text": signal.data()["text"]}))
    }

    fn wipe(&self, _signal: &Signal) -> Reaction<Self> {
        self.ask("notes.wipe", json!({}))
    }

    /// Asks for an action no mounted skill provides.
    fn burn(&self, _signal: &Signal) -> Reaction<Self> {
        self.ask("notes.burn", json!({}))
    }

    fn ended(&self, signal: &Signal) -> Reaction<Self> {
        let Some(report) = signal.outcome() else { return Reaction::Keep(vec![]) };
        let mut next = self.clone();
        let class = report.outcome.error.as_ref().map(|e| format!("{}: {:?}", report.action, e.class));
        match (signal.kind().as_str(), class) {
            (kinds::ACTION_COMPLETED, _) => next.saved.push(report.outcome.output_text().into_owned()),
            (kinds::ACTION_BLOCKED, None) => next.awaiting.push(report.action.to_string()),
            (kinds::ACTION_FAILED, Some(class)) => next.failed.push(class),
            (_, Some(class)) => next.refused.push(class),
            (other, None) => panic!("an outcome of kind `{other}` without an error"),
        }
        Reaction::Update(next, vec![])
    }
}

/// A skill built by hand, around one erased action.
fn math_skill() -> Result<Skill, BuildError> {
    let spec = ActionSpec::new("math.add", "Adds a and b.")?.params_schema(json!({
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"]
    }));
    let add = DynAction::new(spec, |params, _ctx| {
        Box::pin(async move { Ok(json!(params["a"].as_i64().unwrap_or(0) + params["b"].as_i64().unwrap_or(0))) })
    })?;
    Skill::builder("math", "1.0.0").dyn_action(add).build()
}

/// An agent written by hand (no derive, no name of its own): adds what it is sent through `math.add` runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Tally {
    total: i64,
    pending: u32,
}

impl Agent for Tally {
    fn start_skills() -> Result<Vec<(Skill, Value)>, BuildError> {
        Ok(vec![(math_skill()?, Value::Null)])
    }

    fn handle_signal(&self, signal: &Signal) -> Reaction<Self> {
        match signal.kind().as_str() {
            "add" => {
                let run = Effect::run(action_id("math.add"), json!({"a": self.total, "b": signal.data()["n"]}));
                Reaction::Update(Tally { pending: self.pending + 1, ..self.clone() }, vec![run])
            }
            kinds::ACTION_COMPLETED => {
                let total = signal.outcome().and_then(|r| r.outcome.output.as_i64()).unwrap_or(self.total);
                Reaction::Update(Tally { total, pending: self.pending.saturating_sub(1) }, vec![])
            }
            "peek" => Reaction::Keep(vec![Effect::reply(signal.id(), json!(self.total))]),
            _ => Reaction::Ignore,
        }
    }
}

/// Schedules `alarm.ring` signals by key and records when each rang.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, Agent)]
#[agent(routes("alarm.set" => set, "alarm.cancel" => cancel, "alarm.ring" => ring))]
struct Alarm {
    /// (key, the time it was due, in milliseconds since the epoch), in the order they rang.
    rung: Vec<(String, i64)>,
}

impl Alarm {
    fn set(&self, signal: &Signal) -> Vec<Effect> {
        let key = signal.data()["key"].as_str().unwrap_or("alarm").to_owned();
        let after = Duration::from_secs(signal.data()["secs"].as_u64().unwrap_or(0));
        let due = signal.time().timestamp_millis() + i64::try_from(after.as_millis()).expect("a short wait");
        let ring = signal.follow("alarm.ring").data(json!({"key": key, "due": due})).build().expect("a valid kind");
        vec![Effect::schedule(key, after, ring)]
    }

    fn cancel(&self, signal: &Signal) -> Vec<Effect> {
        vec![Effect::cancel(signal.data()["key"].as_str().unwrap_or("alarm"))]
    }

    fn ring(&self, signal: &Signal) -> Reaction<Self> {
        let mut next = self.clone();
        let key = signal.data()["key"].as_str().unwrap_or_default().to_owned();
        next.rung.push((key, signal.data()["due"].as_i64().unwrap_or(-1)));
        Reaction::Update(next, vec![])
    }
}

/// Talks: to its parent, to itself, in replies, and (on `spin`) to itself for ever.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, Agent)]
#[agent(
    name = "chatter",
    routes(
        "hello" => hello,
        "ask" => ask,
        "echo" => echo,
        "echo.back" => echoed,
        "spin" => spin,
        "fork" => fork,
        "noop" => noop
    )
)]
struct Chatter {
    echoes: u32,
}

fn me() -> Target {
    Target::Agent(AgentId::new("chatter").expect("a valid agent id"))
}

impl Chatter {
    fn hello(&self, signal: &Signal) -> Vec<Effect> {
        let back = signal.follow("hello.back").data(json!({"hi": true})).build().expect("a valid kind");
        vec![Effect::emit(back, Target::Parent)]
    }

    fn ask(&self, signal: &Signal) -> Vec<Effect> {
        vec![Effect::reply(signal.id(), json!({"answer": 42}))]
    }

    fn echo(&self, signal: &Signal) -> Vec<Effect> {
        vec![Effect::emit(signal.follow("echo.back").build().expect("a valid kind"), me())]
    }

    fn echoed(&self, _signal: &Signal) -> Reaction<Self> {
        Reaction::Update(Chatter { echoes: self.echoes + 1 }, vec![])
    }

    fn spin(&self, signal: &Signal) -> Vec<Effect> {
        vec![Effect::emit(signal.follow("spin").build().expect("a valid kind"), me())]
    }

    /// Two signals to itself for every one: the queue grows as it loops.
    fn fork(&self, signal: &Signal) -> Vec<Effect> {
        (0..2)
            .map(|i| Effect::emit(signal.follow("fork").data(json!(i)).build().expect("a valid kind"), me()))
            .collect()
    }

    fn noop(&self, _signal: &Signal) -> Vec<Effect> {
        vec![]
    }
}

/// Tries to cross the trust boundary: change its own action table, forge the runtime's signals.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, Agent)]
#[agent(name = "rogue", skills(Notes), routes("grab" => grab, "forge" => forge))]
struct Rogue {}

impl Rogue {
    fn grab(&self, _signal: &Signal) -> Vec<Effect> {
        vec![Effect::register(action_id("admin.shutdown")), Effect::deregister(action_id("notes.save"))]
    }

    fn forge(&self, signal: &Signal) -> Vec<Effect> {
        let fake = |kind: &str| {
            let data = json!({"run_id": uuid::Uuid::nil(), "action": "notes.wipe", "outcome": {}});
            signal.follow(kind).data(data).build().expect("a valid kind")
        };
        let to = Target::Agent(AgentId::new("rogue").expect("a valid agent id"));
        vec![
            Effect::emit(fake(kinds::ACTION_COMPLETED), to),
            Effect::schedule("later", Duration::from_secs(1), fake(kinds::JOB_COMPLETED)),
        ]
    }
}

// ---------------------------------------------------------------------------------------------------------
// Helpers.
// ---------------------------------------------------------------------------------------------------------

/// The last signal the agent consumed.
fn last_input<A: Agent>(harness: &AgentHarness<A>) -> &Signal {
    harness.inputs().last().expect("the agent consumed a signal")
}

/// The run report of the last signal the agent consumed (which must be an outcome).
fn last_report<A: Agent>(harness: &AgentHarness<A>) -> &RunReport {
    let signal = last_input(harness);
    signal.outcome().unwrap_or_else(|| panic!("the last input `{}` is not an outcome", signal.kind()))
}

/// The message a closure panicked with; fails the test if it did not panic.
fn panic_message(f: impl FnOnce()) -> String {
    let payload = catch_unwind(AssertUnwindSafe(f)).expect_err("expected a panic");
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .expect("a panic with a text message")
}

fn at(secs: u64) -> DateTime<Utc> {
    DateTime::UNIX_EPOCH + chrono::Duration::seconds(i64::try_from(secs).expect("a small number"))
}

fn rung(harness: &AgentHarness<Alarm>) -> Vec<(&str, u64)> {
    let ms = |t: i64| u64::try_from(t).expect("after the epoch") / 1000;
    harness.domain().rung.iter().map(|(key, t)| (key.as_str(), ms(*t))).collect()
}

fn an_action(
    id: &str,
    params: Value,
    run: impl Fn(Value, ActionContext) -> ActionFuture + Send + Sync + 'static,
) -> DynAction {
    let spec = ActionSpec::new(id, "A test action.").expect("a valid id").params_schema(params);
    DynAction::new(spec, run).expect("a valid schema")
}

// ---------------------------------------------------------------------------------------------------------
// 1. Derived and hand-written agents.
// ---------------------------------------------------------------------------------------------------------

#[test]
fn a_derived_agent_is_driven_with_its_start_skills_mounted() {
    let mut clerk = AgentHarness::new(Clerk::default()).expect("the clerk starts");
    assert_eq!(clerk.actions(), vec![action_id("notes.save"), action_id("notes.wipe")]);
    assert!(clerk.state().is_mounted(&SkillId::new("notes").expect("an id")));
    assert!(clerk.inputs().is_empty() && clerk.effects().is_empty(), "nothing happened yet");

    let effects = clerk.send("note.save", json!({"text": "milk"})).expect("sent").to_vec();
    assert_eq!(effects.len(), 1, "{effects:?}");
    assert_eq!(effects[0].kind, EffectKind::Run { action: action_id("notes.save"), params: json!({"text": "milk"}) });
    assert_eq!(clerk.effects(), effects.as_slice(), "`effects()` is what `send` returned");
    assert_eq!(clerk.domain().asked, 1);
    assert_eq!(clerk.state().domain, *clerk.domain());
    assert_eq!(clerk.state().id.as_str(), "clerk", "the derive's name is the agent id");

    let inputs = clerk.inputs();
    assert_eq!(inputs.len(), 1);
    assert_eq!(inputs[0].kind().as_str(), "note.save");
    assert_eq!(inputs[0].data(), &json!({"text": "milk"}));
    assert_eq!(inputs[0].time(), at(0), "stamped by the harness's clock");
    assert_eq!(effects[0].meta.cause, Some(inputs[0].id()), "the effect names the signal that caused it");
}

#[test]
fn a_hand_written_agent_is_driven_the_same_way() {
    let mut tally = AgentHarness::new(Tally::default()).expect("the tally starts");
    assert_eq!(tally.actions(), vec![action_id("math.add")], "its hand-built start skill is mounted");
    assert_eq!(tally.state().id.as_str(), std::any::type_name::<Tally>(), "the default name is the type's");

    let effects = tally.send("add", json!({"n": 5})).expect("sent");
    assert!(matches!(&effects[0].kind, EffectKind::Run { action, params }
        if action.as_str() == "math.add" && params == &json!({"a": 0, "b": 5})));
    assert_eq!(tally.domain().pending, 1);
    let run = tally.assert_run("math.add").clone();
    assert_eq!(run.params, json!({"a": 0, "b": 5}));

    tally.complete("math.add", json!(5)).expect("completed");
    assert_eq!(*tally.domain(), Tally { total: 5, pending: 0 });
    assert!(tally.effects().is_empty(), "the outcome led to no effects");

    tally.send("peek", Value::Null).expect("sent");
    assert_eq!(tally.assert_replied(), &json!(5));
    let kinds: Vec<&str> = tally.inputs().iter().map(|s| s.kind().as_str()).collect();
    assert_eq!(kinds, ["add", kinds::ACTION_COMPLETED, "peek"]);

    // A signal nobody handles does nothing.
    tally.send("weather.report", Value::Null).expect("sent");
    tally.assert_quiet();
    assert_eq!(tally.inputs().len(), 4, "it is still in the input log");

    // A skill of the catalog mounted as the owner would: its actions join the table.
    let catalog: Catalog = [Notes::skill().expect("the skill builds")].into_iter().collect();
    let mut tally = AgentHarness::with(Tally::default(), &catalog, &Policy::default()).expect("starts");
    tally.mount("notes", Value::Null).expect("mounted");
    assert_eq!(tally.actions(), vec![action_id("math.add"), action_id("notes.save"), action_id("notes.wipe")]);
    let err = tally.mount("nowhere", Value::Null).expect_err("not in the catalog");
    assert!(matches!(&err, AgentHarnessError::Mount(why) if why.contains("`nowhere`")), "{err}");
    // Unmounted as the owner would; a skill another requires, or none at all, is an error.
    tally.unmount("notes").expect("unmounted");
    assert_eq!(tally.actions(), vec![action_id("math.add")]);
    assert!(matches!(tally.unmount("not a skill!"), Err(AgentHarnessError::SkillId(..))));
    tally.unmount("notes").expect("not mounted any more: nothing to do");
}

#[test]
fn a_stopped_agent_takes_nothing_more() {
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, Agent)]
    #[agent(routes("quit" => quit, "later" => later))]
    struct Quitter {}
    impl Quitter {
        fn later(&self, signal: &Signal) -> Vec<Effect> {
            let tick = signal.follow("tick").build().expect("a valid kind");
            vec![Effect::schedule("tick", Duration::from_secs(5), tick)]
        }
        fn quit(&self, signal: &Signal) -> Vec<Effect> {
            let bye = signal.follow("bye").build().expect("a valid kind");
            vec![Effect::stop("done"), Effect::emit(bye, Target::Parent)]
        }
    }
    let mut quitter = AgentHarness::new(Quitter::default()).expect("starts");
    quitter.send("later", Value::Null).expect("sent");
    quitter.send("quit", Value::Null).expect("sent");
    assert_eq!(quitter.said().stopped.as_deref(), Some("done"));
    let err = quitter.send("later", Value::Null).expect_err("stopped");
    assert!(matches!(&err, AgentHarnessError::Stopped(why) if why == "done"), "{err}");
    assert!(matches!(quitter.advance(Duration::from_secs(10)), Err(AgentHarnessError::Stopped(_))));
    assert_eq!(quitter.inputs().len(), 2, "the timer went with the agent");
}

#[test]
fn a_self_emit_waits_behind_the_outcomes_of_its_step() {
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, Agent)]
    #[agent(name = "me", routes("go" => go, "again" => seen, "action.blocked" => seen))]
    struct Orderly {
        seen: Vec<String>,
    }
    impl Orderly {
        fn go(&self, signal: &Signal) -> Vec<Effect> {
            let again = signal.follow("again").build().expect("a valid kind");
            let me = Target::Agent(AgentId::new("me").expect("a valid id"));
            vec![Effect::emit(again, me), Effect::run(action_id("nothing.here"), json!({}))]
        }
        fn seen(&self, signal: &Signal) -> Reaction<Self> {
            let mut next = self.clone();
            next.seen.push(signal.kind().to_string());
            Reaction::Update(next, vec![])
        }
    }
    let mut orderly = AgentHarness::new(Orderly::default()).expect("starts");
    orderly.send("go", Value::Null).expect("sent");
    // As live: the refused run's outcome is in the agent's inbox, fed before its mailbox (the self-emit).
    assert_eq!(orderly.domain().seen, ["action.blocked", "again"]);
}

// ---------------------------------------------------------------------------------------------------------
// 2. Runs.
// ---------------------------------------------------------------------------------------------------------

#[test]
fn a_run_waits_until_the_test_completes_it() {
    let mut clerk = AgentHarness::new(Clerk::default()).expect("starts");
    clerk.send("note.save", json!({"text": "milk"})).expect("sent");
    let asked_by = last_input(&clerk).clone();
    assert_eq!(clerk.runs().len(), 1);
    assert!(clerk.blocked().is_empty());
    let run = clerk.runs()[0].clone();
    assert_eq!(run.action, action_id("notes.save"));
    assert_eq!(run.params, json!({"text": "milk"}));
    assert_eq!(clerk.assert_run("notes.save"), &run);
    assert!(clerk.domain().saved.is_empty(), "no outcome before the test gives one");
    assert_eq!(clerk.inputs().len(), 1, "the agent heard nothing back yet");

    // By run id.
    clerk.complete(&run.id.to_string(), json!("milk")).expect("completed");
    assert!(clerk.runs().is_empty(), "a completed run no longer waits");
    let outcome = last_input(&clerk);
    assert_eq!(outcome.kind().as_str(), kinds::ACTION_COMPLETED);
    assert_eq!(outcome.causation_id(), Some(asked_by.id()), "the outcome follows the signal that asked");
    assert_eq!(outcome.correlation_id(), asked_by.correlation_id());
    let report = last_report(&clerk);
    assert_eq!((report.run_id, &report.action), (run.id, &run.action));
    assert!(report.completed());
    assert_eq!(report.outcome.output, json!("milk"));
    assert_eq!(clerk.domain().saved, ["milk"], "the agent reacted to the outcome");

    // By action id, oldest first.
    clerk.send("note.save", json!({"text": "eggs"})).expect("sent");
    clerk.send("note.save", json!({"text": "flour"})).expect("sent");
    assert_eq!(clerk.runs().len(), 2);
    let oldest = clerk.runs()[0].id;
    clerk.complete("notes.save", json!("eggs")).expect("completed");
    assert_eq!(last_report(&clerk).run_id, oldest);
    assert_eq!(clerk.runs().len(), 1);
    assert_eq!(clerk.runs()[0].params, json!({"text": "flour"}));
    assert_eq!(clerk.domain().saved, ["milk", "eggs"]);
}

#[test]
fn a_failed_run_delivers_action_failed() {
    let mut clerk = AgentHarness::new(Clerk::default()).expect("starts");
    clerk.send("note.save", json!({"text": "milk"})).expect("sent");
    let run = clerk.runs()[0].id;
    clerk.fail("notes.save", ActionError::transient("the disk is busy")).expect("failed");
    assert!(clerk.runs().is_empty());
    assert_eq!(last_input(&clerk).kind().as_str(), kinds::ACTION_FAILED);
    let report = last_report(&clerk);
    assert_eq!(report.run_id, run);
    assert!(!report.completed());
    assert_eq!(report.outcome.error.as_ref().map(|e| e.class), Some(ErrorClass::Transient));
    assert!(report.error_message().is_some_and(|m| m.contains("the disk is busy")), "{report:?}");
    assert_eq!(clerk.domain().failed, ["notes.save: Transient"]);
    assert!(clerk.domain().saved.is_empty());
}

#[test]
fn a_run_of_an_unregistered_action_is_refused_and_never_waits() {
    let mut clerk = AgentHarness::new(Clerk::default()).expect("starts");
    let effects = clerk.send("note.burn", Value::Null).expect("sent").to_vec();
    assert!(matches!(&effects[0].kind, EffectKind::Run { action, .. } if action.as_str() == "notes.burn"));
    assert!(clerk.runs().is_empty(), "{:?}", clerk.runs());
    assert!(clerk.blocked().is_empty(), "{:?}", clerk.blocked());
    assert_eq!(last_input(&clerk).kind().as_str(), kinds::ACTION_BLOCKED);
    let report = last_report(&clerk);
    assert!(!report.awaiting_approval());
    assert_eq!(report.outcome.error.as_ref().map(|e| e.class), Some(ErrorClass::Denied));
    assert!(report.error_message().is_some_and(|m| m.contains("not registered")), "{report:?}");
    assert_eq!(clerk.domain().refused, ["notes.burn: Denied"]);
    assert!(matches!(clerk.complete("notes.burn", Value::Null), Err(AgentHarnessError::NoSuchRun { .. })));

    // A run the policy denies comes back the same way.
    let policy = Policy::default().deny_action(Pattern::new("notes.save").expect("a pattern"));
    let mut clerk = AgentHarness::with(Clerk::default(), &Catalog::new(), &policy).expect("starts");
    clerk.send("note.save", json!({"text": "milk"})).expect("sent");
    assert!(clerk.runs().is_empty());
    assert!(last_report(&clerk).error_message().is_some_and(|m| m.contains("deny")), "{:?}", last_report(&clerk));
    assert_eq!(clerk.domain().refused, ["notes.save: Denied"]);
}

// ---------------------------------------------------------------------------------------------------------
// 3. Approvals.
// ---------------------------------------------------------------------------------------------------------

#[test]
fn a_risky_run_waits_for_approval_then_runs() {
    let mut clerk = AgentHarness::new(Clerk::default()).expect("starts");
    clerk.send("note.wipe", Value::Null).expect("sent");
    assert!(clerk.runs().is_empty(), "not before it is approved");
    assert_eq!(clerk.blocked().len(), 1);
    let run = clerk.blocked()[0].clone();
    assert_eq!(run.action, action_id("notes.wipe"));
    assert_eq!(last_input(&clerk).kind().as_str(), kinds::ACTION_BLOCKED);
    let report = last_report(&clerk);
    assert!(report.awaiting_approval(), "{report:?}");
    assert_eq!(report.run_id, run.id);
    assert_eq!(clerk.domain().awaiting, ["notes.wipe"]);
    assert!(matches!(clerk.complete("notes.wipe", json!(0)), Err(AgentHarnessError::NoSuchRun { .. })));

    clerk.approve("notes.wipe").expect("approved");
    assert!(clerk.blocked().is_empty());
    assert_eq!(clerk.runs(), std::slice::from_ref(&run), "the same run now waits for its outcome");
    assert_eq!(clerk.inputs().len(), 2, "approving tells the agent nothing yet");
    assert!(matches!(clerk.approve("notes.wipe"), Err(AgentHarnessError::NoSuchRun { what, .. })
        if what.contains("approval")));

    clerk.complete(&run.id.to_string(), json!(3)).expect("completed");
    assert_eq!(clerk.domain().saved, ["3"]);
    assert!(clerk.domain().refused.is_empty());
}

#[test]
fn a_denied_run_is_blocked_with_a_denied_error() {
    let mut clerk = AgentHarness::new(Clerk::default()).expect("starts");
    clerk.send("note.wipe", Value::Null).expect("sent");
    let run = clerk.blocked()[0].id;
    clerk.deny(&run.to_string()).expect("denied");
    assert!(clerk.blocked().is_empty() && clerk.runs().is_empty());
    assert_eq!(last_input(&clerk).kind().as_str(), kinds::ACTION_BLOCKED);
    let report = last_report(&clerk);
    assert_eq!(report.run_id, run);
    assert!(!report.awaiting_approval());
    assert_eq!(report.outcome.error.as_ref().map(|e| e.class), Some(ErrorClass::Denied));
    assert_eq!(clerk.domain().awaiting, ["notes.wipe"]);
    assert_eq!(clerk.domain().refused, ["notes.wipe: Denied"]);

    // A policy that never asks lets the same run straight through.
    let trusting = Policy::default().approval_at(None);
    let mut clerk = AgentHarness::with(Clerk::default(), &Catalog::new(), &trusting).expect("starts");
    clerk.send("note.wipe", Value::Null).expect("sent");
    assert!(clerk.blocked().is_empty());
    clerk.assert_run("notes.wipe");
    assert!(clerk.domain().awaiting.is_empty());
}

// ---------------------------------------------------------------------------------------------------------
// 4. Schedules and the virtual clock.
// ---------------------------------------------------------------------------------------------------------

#[test]
fn a_schedule_fires_exactly_when_the_clock_reaches_it() {
    let mut alarm = AgentHarness::new(Alarm::default()).expect("starts");
    alarm.send("alarm.set", json!({"key": "tea", "secs": 60})).expect("sent");
    assert!(alarm.said().emitted.is_empty(), "a schedule is not an emit");

    alarm.advance(Duration::from_secs(59)).expect("advanced");
    alarm.assert_quiet();
    assert_eq!(alarm.now(), Duration::from_secs(59));
    assert!(alarm.domain().rung.is_empty(), "not a second early");
    assert_eq!(alarm.inputs().len(), 1);

    alarm.advance(Duration::from_secs(1)).expect("advanced");
    assert_eq!(alarm.now(), Duration::from_secs(60));
    assert_eq!(rung(&alarm), [("tea", 60)]);
    let fired = last_input(&alarm);
    assert_eq!(fired.kind().as_str(), "alarm.ring");
    assert_eq!(fired.time(), at(0), "delivered as it was scheduled (its time is the one the agent gave it), as live");
    assert_eq!(fired.source(), "agentry/agent/Alarm", "what the agent schedules carries its own source");
    assert_ne!(fired.id(), alarm.inputs()[0].id());

    alarm.advance(Duration::from_secs(3600)).expect("advanced");
    assert_eq!(rung(&alarm), [("tea", 60)], "a schedule fires once");
    assert_eq!(alarm.now(), Duration::from_secs(3660));

    // Scheduled from the time it was asked for, not from zero.
    alarm.send("alarm.set", json!({"key": "bread", "secs": 5})).expect("sent");
    assert_eq!(last_input(&alarm).time(), at(3660));
    alarm.advance(Duration::from_secs(4)).expect("advanced");
    assert_eq!(rung(&alarm).len(), 1);
    alarm.advance(Duration::from_secs(10)).expect("advanced");
    assert_eq!(rung(&alarm), [("tea", 60), ("bread", 3665)], "fired at its due time inside a longer advance");
    assert_eq!(alarm.now(), Duration::from_secs(3674));
}

#[test]
fn a_cancelled_or_replaced_schedule_does_not_fire() {
    let mut alarm = AgentHarness::new(Alarm::default()).expect("starts");
    alarm.send("alarm.set", json!({"key": "tea", "secs": 30})).expect("sent");
    alarm.advance(Duration::from_secs(10)).expect("advanced");
    alarm.send("alarm.cancel", json!({"key": "tea"})).expect("sent");
    alarm.advance(Duration::from_secs(3600)).expect("advanced");
    assert!(alarm.domain().rung.is_empty(), "{:?}", alarm.domain());

    // The same key again replaces the schedule.
    alarm.send("alarm.set", json!({"key": "tea", "secs": 10})).expect("sent");
    alarm.send("alarm.set", json!({"key": "tea", "secs": 50})).expect("sent");
    alarm.advance(Duration::from_secs(20)).expect("advanced");
    assert!(alarm.domain().rung.is_empty(), "the first time was replaced");
    alarm.advance(Duration::from_secs(100)).expect("advanced");
    assert_eq!(rung(&alarm), [("tea", 3610 + 50)], "only the second time, once");
}

#[test]
fn several_schedules_fire_in_time_order() {
    let mut alarm = AgentHarness::new(Alarm::default()).expect("starts");
    // Keys in the reverse of their times' order, so key order cannot pass for time order.
    for (key, secs) in [("a", 30), ("b", 20), ("c", 10), ("d", 20)] {
        alarm.send("alarm.set", json!({"key": key, "secs": secs})).expect("sent");
    }
    alarm.advance(Duration::from_secs(25)).expect("advanced");
    assert_eq!(rung(&alarm), [("c", 10), ("b", 20), ("d", 20)]);
    alarm.advance(Duration::from_secs(25)).expect("advanced");
    assert_eq!(rung(&alarm), [("c", 10), ("b", 20), ("d", 20), ("a", 30)]);
    let kinds: Vec<&str> = alarm.inputs()[4..].iter().map(|s| s.kind().as_str()).collect();
    assert_eq!(kinds, ["alarm.ring"; 4], "each fired once, as scheduled");
}

// ---------------------------------------------------------------------------------------------------------
// 5. The trust boundary.
// ---------------------------------------------------------------------------------------------------------

#[test]
fn a_handler_cannot_change_the_action_table() {
    let mut rogue = AgentHarness::new(Rogue::default()).expect("starts");
    let before = rogue.actions();
    assert_eq!(before, vec![action_id("notes.save"), action_id("notes.wipe")]);
    let effects = rogue.send("grab", Value::Null).expect("sent").to_vec();
    assert_eq!(effects.len(), 2, "the effects were asked for");
    assert_eq!(rogue.actions(), before, "and none was applied");
    let refused = &rogue.said().refused;
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert!(
        matches!(&refused[0], EffectRefusal::TableChange { effect, action, .. }
        if effect == "register_action" && action.as_str() == "admin.shutdown"),
        "{refused:?}"
    );
    assert!(
        matches!(&refused[1], EffectRefusal::TableChange { effect, action, .. }
        if effect == "deregister_action" && action.as_str() == "notes.save"),
        "{refused:?}"
    );
    assert!(rogue.state().provides(&action_id("notes.save")));
    assert!(rogue.said().emitted.is_empty() && rogue.runs().is_empty());
}

#[test]
fn a_handler_cannot_forge_the_runtimes_signals() {
    let mut rogue = AgentHarness::new(Rogue::default()).expect("starts");
    rogue.send("forge", Value::Null).expect("sent");
    let refused = &rogue.said().refused;
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert!(matches!(&refused[0], EffectRefusal::ReservedKind { kind, .. } if kind == kinds::ACTION_COMPLETED));
    assert!(matches!(&refused[1], EffectRefusal::ReservedKind { kind, .. } if kind == kinds::JOB_COMPLETED));
    assert!(rogue.said().emitted.is_empty(), "{:?}", rogue.said());
    assert_eq!(rogue.inputs().len(), 1, "the forged signal never reached the agent");
    rogue.advance(Duration::from_secs(60)).expect("advanced");
    rogue.assert_quiet();
    assert_eq!(rogue.inputs().len(), 1, "nor was it scheduled");
}

// ---------------------------------------------------------------------------------------------------------
// 6. Emits, replies and the assert helpers.
// ---------------------------------------------------------------------------------------------------------

#[test]
fn emits_to_the_parent_are_said_and_emits_to_itself_come_back() {
    let mut chatter = AgentHarness::new(Chatter::default()).expect("starts");
    chatter.send("hello", Value::Null).expect("sent");
    let emitted = &chatter.said().emitted;
    assert_eq!(emitted.len(), 1, "{emitted:?}");
    assert_eq!(emitted[0].0.kind().as_str(), "hello.back");
    assert_eq!(emitted[0].1, Target::Parent);
    let signal = chatter.assert_emitted("hello.back");
    assert_eq!(signal.data(), &json!({"hi": true}));
    assert_eq!(signal.source(), "agentry/agent/chatter");
    assert_eq!(chatter.inputs().len(), 1, "a signal to the parent does not come back");

    chatter.send("echo", Value::Null).expect("sent");
    assert_eq!(chatter.domain().echoes, 1, "the agent heard its own signal");
    let kinds: Vec<&str> = chatter.inputs().iter().map(|s| s.kind().as_str()).collect();
    assert_eq!(kinds, ["hello", "echo", "echo.back"]);
    assert_eq!(chatter.said().emitted[0].1, me());
    assert!(chatter.said().emitted.iter().all(|(s, _)| s.kind().as_str() != "hello.back"), "only this call's");

    chatter.send("ask", Value::Null).expect("sent");
    assert_eq!(chatter.assert_replied(), &json!({"answer": 42}));
    assert_eq!(chatter.said().replies[0].0, last_input(&chatter).id(), "the reply answers the call");

    chatter.send("noop", Value::Null).expect("sent");
    chatter.assert_quiet();
    assert!(chatter.said().replies.is_empty());
}

#[test]
fn the_assert_helpers_fail_with_what_happened() {
    let mut chatter = AgentHarness::new(Chatter::default()).expect("starts");
    chatter.send("hello", Value::Null).expect("sent");

    let message = panic_message(|| {
        chatter.assert_emitted("goodbye");
    });
    assert!(message.contains("expected a `goodbye` signal to be emitted"), "{message}");
    assert!(message.contains("hello.back"), "names what was emitted instead: {message}");

    let message = panic_message(|| {
        chatter.assert_replied();
    });
    assert!(message.contains("expected a reply"), "{message}");
    assert!(message.contains("Emit"), "names the effects: {message}");

    let message = panic_message(|| chatter.assert_quiet());
    assert!(message.contains("expected no effects"), "{message}");
    assert!(message.contains("hello.back"), "{message}");

    let message = panic_message(|| {
        chatter.assert_run("notes.save");
    });
    assert!(message.contains("expected a run of `notes.save` to be waiting"), "{message}");
    assert!(message.contains("waiting runs: none"), "{message}");

    let mut clerk = AgentHarness::new(Clerk::default()).expect("starts");
    clerk.send("note.save", json!({"text": "milk"})).expect("sent");
    clerk.send("note.wipe", Value::Null).expect("sent");
    let (waiting, blocked) = (clerk.runs()[0].id, clerk.blocked()[0].id);
    let message = panic_message(|| {
        clerk.assert_run("notes.wipe");
    });
    assert!(message.contains(&format!("notes.save ({waiting})")), "lists the waiting runs: {message}");
    assert!(message.contains(&format!("awaiting approval: notes.wipe ({blocked})")), "{message}");

    clerk.send("note.burn", Value::Null).expect("sent");
    let message = panic_message(|| {
        clerk.assert_emitted("anything");
    });
    assert!(message.contains("emitted: []"), "{message}");

    // What passes returns what it found.
    assert_eq!(clerk.assert_run("notes.save").id, waiting);
}

// ---------------------------------------------------------------------------------------------------------
// 7. Errors.
// ---------------------------------------------------------------------------------------------------------

#[test]
fn ending_a_run_that_does_not_wait_names_the_runs_that_do() {
    let mut clerk = AgentHarness::new(Clerk::default()).expect("starts");
    let err = clerk.complete("nothing.here", json!(1)).expect_err("nothing waits");
    assert!(
        matches!(&err, AgentHarnessError::NoSuchRun { name, waiting, .. }
        if name == "nothing.here" && waiting == "none"),
        "{err:?}"
    );

    clerk.send("note.save", json!({"text": "milk"})).expect("sent");
    clerk.send("note.wipe", Value::Null).expect("sent");
    let run = clerk.runs()[0].id;
    let err = clerk.complete("nothing.here", json!(1)).expect_err("no such run");
    let AgentHarnessError::NoSuchRun { what, name, waiting } = &err else { panic!("{err:?}") };
    assert_eq!((*what, name.as_str()), ("waiting run", "nothing.here"));
    assert_eq!(waiting, &format!("notes.save ({run})"));
    let message = err.to_string();
    assert!(message.contains("`nothing.here`") && message.contains(&run.to_string()), "{message}");
    assert!(matches!(
        clerk.fail("nothing.here", ActionError::transient("x")),
        Err(AgentHarnessError::NoSuchRun { .. })
    ));
    let err = clerk.deny("notes.save").expect_err("that one does not wait for approval");
    assert!(err.to_string().contains("notes.wipe"), "lists what awaits approval: {err}");

    // Nothing changed.
    assert_eq!((clerk.runs().len(), clerk.blocked().len()), (1, 1));
    assert_eq!(clerk.inputs().len(), 3);
}

#[test]
fn an_invalid_kind_is_a_kind_error() {
    let mut chatter = AgentHarness::new(Chatter::default()).expect("starts");
    for bad in ["two words", "order..placed", ""] {
        let err = chatter.send(bad, Value::Null).expect_err("an invalid kind");
        assert!(matches!(&err, AgentHarnessError::Kind(kind, _) if kind == bad), "{err:?}");
        assert!(err.to_string().contains("not a valid signal kind"), "{err}");
    }
    assert!(chatter.inputs().is_empty(), "nothing reached the agent");
}

#[test]
fn an_agent_that_talks_to_itself_for_ever_is_looping() {
    let mut chatter = AgentHarness::new(Chatter::default()).expect("starts");
    let err = chatter.send("spin", Value::Null).expect_err("it never settles");
    let AgentHarnessError::Looping(budget) = err else { panic!("{err:?}") };
    assert!(budget > 0);
    assert_eq!(chatter.inputs().len(), budget, "it handled the whole budget");
    assert!(err.to_string().contains("without settling"), "{err}");

    // The loop does not carry over into the next call.
    chatter.send("echo", Value::Null).expect("the harness is usable again");
    assert_eq!(chatter.domain().echoes, 1);
    assert_eq!(chatter.inputs().len(), budget + 2);

    // Nor does a loop that leaves a growing queue behind it.
    let mut chatter = AgentHarness::new(Chatter::default()).expect("starts");
    let err = chatter.send("fork", Value::Null).expect_err("it never settles");
    assert!(matches!(err, AgentHarnessError::Looping(_)), "{err:?}");
    let handled = chatter.inputs().len();
    chatter.send("echo", Value::Null).expect("the rest of the loop was dropped with the failed call");
    let kinds: Vec<&str> = chatter.inputs()[handled..].iter().map(|s| s.kind().as_str()).collect();
    assert_eq!(kinds, ["echo", "echo.back"]);
    chatter.send("noop", Value::Null).expect("sent");
    chatter.assert_quiet();
}

// ---------------------------------------------------------------------------------------------------------
// 8. ActionHarness.
// ---------------------------------------------------------------------------------------------------------

/// An fs-like action: writes `text` into the file `name` in its drive, and counts how often it ran.
fn writer(runs: Arc<AtomicUsize>) -> DynAction {
    let params = json!({
        "type": "object",
        "properties": {"name": {"type": "string", "pattern": "^[a-z]{1,12}\\.txt$"}, "text": {"type": "string"}},
        "required": ["name", "text"],
        "additionalProperties": false
    });
    let spec = ActionSpec::new("files.write", "Writes a file into the drive.")
        .expect("a valid id")
        .params_schema(params)
        .output_schema(json!({"type": "object", "properties": {"bytes": {"type": "integer"}}, "required": ["bytes"]}));
    DynAction::new(spec, move |params, ctx| {
        let runs = runs.clone();
        Box::pin(async move {
            runs.fetch_add(1, Ordering::SeqCst);
            let name = params["name"].as_str().unwrap_or_default();
            let text = params["text"].as_str().unwrap_or_default();
            let path = ctx.drive()?.join(name);
            std::fs::write(&path, text).map_err(|e| ActionError::transient(e.to_string()))?;
            Ok(json!({"bytes": text.len()}))
        })
    })
    .expect("a valid schema")
}

#[test]
fn an_action_writes_into_the_harness_drive() {
    let runs = Arc::new(AtomicUsize::new(0));
    let harness = ActionHarness::new(&writer(runs.clone())).expect("a harness");
    let drive = harness.drive().to_path_buf();
    assert!(drive.is_dir(), "the drive exists before any run");

    let run = harness.run(json!({"name": "hello.txt", "text": "hi there"}));
    assert!(run.ran && !run.panicked && !run.broke_output_schema, "{run:?}");
    assert_eq!(run.result, Ok(json!({"bytes": 8})));
    assert_eq!(std::fs::read_to_string(drive.join("hello.txt")).expect("the file is there"), "hi there");
    assert_eq!(runs.load(Ordering::SeqCst), 1);

    // Invalid params never reach `run`.
    for bad in [json!({"name": "hello.txt"}), json!({"name": "../up.txt", "text": "x"}), json!("hello.txt")] {
        let run = harness.run(bad.clone());
        assert!(!run.ran, "{bad} reached run");
        assert!(!run.panicked && run.effects.is_empty());
        let err = run.result.expect_err("refused");
        assert_eq!(err.class(), ErrorClass::Validation, "{err}");
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1, "run was not called for invalid params");
    assert!(!drive.join("..").join("up.txt").exists());

    drop(harness);
    assert!(!drive.exists(), "the drive is deleted with the harness");
}

#[test]
fn a_panicking_action_is_caught_as_critical() {
    let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
    let action = an_action("boom.later", schema.clone(), |params, _ctx| {
        Box::pin(async move {
            if params["n"] == json!(13) {
                panic!("unlucky thirteen");
            }
            Ok(params["n"].clone())
        })
    });
    let harness = ActionHarness::new(&action).expect("a harness");
    assert!(!harness.run(json!({"n": 12})).panicked);
    let run = harness.run(json!({"n": 13}));
    assert!(run.ran && run.panicked && !run.broke_output_schema, "{run:?}");
    let err = run.result.expect_err("a panic is an error");
    assert_eq!(err.class(), ErrorClass::Critical);
    assert!(err.to_string().contains("unlucky thirteen"), "{err}");

    // A panic while the action builds its future (before it is polled) is caught too, as the runner does.
    let eager = an_action("boom.now", schema, |params, _ctx| {
        let n = params["n"].as_i64().expect("n is given");
        Box::pin(async move { Ok(json!(n)) })
    });
    let harness = ActionHarness::new(&eager).expect("a harness");
    assert_eq!(harness.run(json!({"n": 1})).result, Ok(json!(1)));
    let run = harness.run(json!({}));
    assert!(run.ran && run.panicked, "{run:?}");
    let err = run.result.expect_err("a panic is an error");
    assert_eq!(err.class(), ErrorClass::Critical);
    assert!(err.to_string().contains("n is given"), "{err}");
}

#[test]
fn an_output_that_breaks_its_schema_is_reported() {
    let spec = ActionSpec::new("count.up", "Counts.")
        .expect("a valid id")
        .params_schema(json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}))
        .output_schema(json!({"type": "integer", "minimum": 0}));
    let action =
        DynAction::new(spec, |params, _ctx| Box::pin(async move { Ok(params["n"].clone()) })).expect("a valid schema");
    let harness = ActionHarness::new(&action).expect("a harness");
    let fine = harness.run(json!({"n": 3}));
    assert_eq!((fine.result, fine.broke_output_schema), (Ok(json!(3)), false));
    let run = harness.run(json!({"n": -3}));
    assert!(run.ran && run.broke_output_schema && !run.panicked, "{run:?}");
    let err = run.result.expect_err("the output breaks its schema");
    assert_eq!(err.class(), ErrorClass::Critical);
    assert!(err.to_string().contains("output schema"), "{err}");
}

#[test]
fn effects_asked_through_the_context_are_captured() {
    let action = an_action("files.announce", json!({"type": "object"}), |_params, ctx| {
        Box::pin(async move {
            let saved = Signal::new("files.saved", json!({"n": 1})).expect("a valid kind");
            ctx.effect(Effect::emit(saved, Target::Parent))?;
            let check = Signal::new("files.check", Value::Null).expect("a valid kind");
            ctx.effect(Effect::schedule("check", Duration::from_secs(5), check))?;
            let grab = ctx.effect(Effect::register(action_id("admin.shutdown"))).map_err(|e| e.class());
            let forged = Signal::new(kinds::ACTION_COMPLETED, Value::Null).expect("a valid kind");
            let forge = ctx.effect(Effect::emit(forged, Target::Parent)).map_err(|e| e.class());
            Ok(json!({"grab": format!("{grab:?}"), "forge": format!("{forge:?}")}))
        })
    });
    let run = ActionHarness::new(&action).expect("a harness").run(json!({}));
    assert_eq!(run.result, Ok(json!({"grab": "Err(Denied)", "forge": "Err(Denied)"})));
    assert_eq!(run.effects.len(), 2, "only what the context accepted: {:?}", run.effects);
    assert!(matches!(&run.effects[0].kind, EffectKind::Emit { signal, to: Target::Parent }
        if signal.kind().as_str() == "files.saved"));
    assert!(matches!(&run.effects[1].kind, EffectKind::Schedule { key, after, .. }
        if key == "check" && *after == Duration::from_secs(5)));
}

#[test]
fn the_harness_gives_the_action_its_policy_and_skill_state() {
    let action = an_action("state.peek", json!({"type": "object"}), |_params, ctx| {
        Box::pin(async move {
            let state: Value = ctx.skill_state()?;
            Ok(json!({"state": state, "fs": ctx.policy().grants(&Capability::FS)}))
        })
    });
    let plain = ActionHarness::new(&action).expect("a harness").run(json!({}));
    assert_eq!(plain.result, Ok(json!({"state": null, "fs": false})));
    let given = ActionHarness::new(&action)
        .expect("a harness")
        .skill_state(json!({"count": 3}))
        .policy(Policy::trusted())
        .run(json!({}));
    assert_eq!(given.result, Ok(json!({"state": {"count": 3}, "fs": true})));
}

// ---------------------------------------------------------------------------------------------------------
// 9. check_action.
// ---------------------------------------------------------------------------------------------------------

/// Halves `n`. The picky one's schema accepts any integer, but its run refuses negative ones: a planted bug.
fn halve(picky: bool) -> DynAction {
    let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
    an_action("math.halve", schema, move |params, _ctx| {
        Box::pin(async move {
            let n = params.get("n").and_then(Value::as_i64).unwrap_or(0);
            if picky && n < 0 {
                return Err(ActionError::validation(format!("n must not be negative; got {n}")));
            }
            Ok(json!(n / 2))
        })
    })
}

#[test]
fn check_action_finds_a_schema_that_accepts_what_run_refuses() {
    // Several times: the generator draws the schema's bounds (i64::MIN) on purpose, and a counterexample found
    // there must shrink to the smallest one too.
    for _ in 0..8 {
        let failure = check_action(&halve(true)).expect_err("the planted bug is found");
        assert!(matches!(failure, CheckFailure::Counterexample { check: "check_action", .. }), "{failure}");
        assert_eq!(failure.steps(), [r#"run `math.halve` with params {"n":-1}"#], "{failure}");
        assert!(failure.reason().contains("the schema accepts these params but the action refuses them"), "{failure}");
        assert!(failure.reason().contains("got -1"), "{failure}");
        assert!(failure.to_string().contains("1 step after shrinking"), "{failure}");
    }
}

#[test]
fn check_action_passes_sound_actions_and_allowed_refusals() {
    check_action(&halve(false)).expect("a sound action passes");
    ActionCheck::new(&halve(true)).refusals_allowed().run().expect("refusals are allowed");
    let negative = |params: &Value| params.get("n").and_then(Value::as_i64).is_some_and(|n| n < 0);
    ActionCheck::new(&halve(true)).refuses_when(negative).run().expect("the refusals it names are allowed");
    let below_ten = |params: &Value| params.get("n").and_then(Value::as_i64).is_some_and(|n| n < -10);
    // Only a draw of -10..=-1 shows the refusal that is not named; 256 cases missed one about once in sixty runs,
    // 1,024 miss it about once in ten million.
    let check = ActionCheck::new(&halve(true)).refuses_when(below_ten).cases(1_024);
    let failure = check.run().expect_err("others are not");
    assert!(failure.reason().contains("refuses them"), "{failure}");
    for action in Notes::skill().expect("the skill builds").actions() {
        check_action(action).expect("the derived actions keep their contracts");
    }
    let harness_check = ActionCheck::new(&writer(Arc::new(AtomicUsize::new(0)))).cases(32).run();
    harness_check.expect("the writer keeps its contract");
}

#[test]
fn check_action_finds_a_panic_and_shrinks_it() {
    let schema = json!({
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 20}},
        "required": ["n"]
    });
    let action = an_action("math.unlucky", schema, |params, _ctx| {
        Box::pin(async move {
            if params["n"] == json!(13) {
                panic!("unlucky thirteen");
            }
            Ok(Value::Null)
        })
    });
    let failure = check_action(&action).expect_err("the panic is found");
    assert_eq!(failure.steps(), [r#"run `math.unlucky` with params {"n":13}"#], "{failure}");
    assert!(failure.reason().contains("unlucky thirteen"), "{failure}");
    // Refusals being allowed does not excuse a panic.
    assert!(ActionCheck::new(&action).refusals_allowed().run().is_err());
}

// ---------------------------------------------------------------------------------------------------------
// 10. The harnesses keep the live server's rules: approvals expire, outputs are checked, timeouts apply,
//     params are coerced, a failed run's effects are dropped.
// ---------------------------------------------------------------------------------------------------------

#[test]
fn an_approval_expires_when_the_clock_passes_the_policys_timeout() {
    let policy = Policy::default().approval_timeout(Some(Duration::from_secs(10)));
    let mut clerk = AgentHarness::with(Clerk::default(), &Catalog::new(), &policy).expect("starts");
    clerk.advance(Duration::from_secs(5)).expect("advanced");
    clerk.send("note.wipe", Value::Null).expect("sent");
    clerk.advance(Duration::from_secs(9)).expect("advanced");
    assert_eq!(clerk.blocked().len(), 1, "not expired 9 s after it was asked for");
    clerk.advance(Duration::from_secs(1)).expect("advanced");
    assert!(clerk.blocked().is_empty(), "expired at 10 s");
    assert_eq!(clerk.domain().refused, ["notes.wipe: Denied"]);
    assert_eq!(last_input(&clerk).time(), at(15), "delivered when it expired");
    assert!(last_report(&clerk).error_message().is_some_and(|m| m.contains("longer than its policy allows")));
    assert!(matches!(clerk.approve("notes.wipe"), Err(AgentHarnessError::NoSuchRun { .. })));
}

#[test]
fn an_output_that_breaks_the_actions_output_schema_fails_the_run() {
    let mut clerk = AgentHarness::new(Clerk::default()).expect("starts");
    clerk.send("note.save", json!({"text": "hi"})).expect("sent");
    // `notes.save` promises a string.
    clerk.complete("notes.save", json!(42)).expect("completed");
    assert!(clerk.domain().saved.is_empty(), "{:?}", clerk.domain());
    assert_eq!(clerk.domain().failed, ["notes.save: Critical"]);
    assert!(last_report(&clerk).error_message().is_some_and(|m| m.contains("output schema")));
}

#[test]
fn the_action_harness_applies_the_timeout_coerces_params_and_drops_a_failed_runs_effects() {
    let sleeper = an_action("clock.sleep", json!({"type": "object"}), |_params, _ctx| {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok(Value::Null)
        })
    });
    let spec = ActionSpec { timeout: Duration::from_millis(20), ..sleeper.spec().clone() };
    let inner = sleeper.clone();
    let sleeper = DynAction::new(spec, move |params, ctx| inner.invoke(params, ctx)).expect("a valid schema");
    let run = ActionHarness::new(&sleeper).expect("a harness").run(json!({}));
    assert!(run.ran && !run.panicked);
    assert_eq!(run.result.expect_err("timed out").class(), ErrorClass::Timeout);

    let doubled = an_action(
        "math.double",
        json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
        |params, ctx| {
            Box::pin(async move {
                let told = Signal::new("math.doubled", Value::Null).expect("a valid kind");
                ctx.effect(Effect::emit(told, Target::Parent))?;
                match params["n"].as_i64() {
                    Some(n) if n >= 0 => Ok(json!(n * 2)),
                    _ => Err(ActionError::transient("negative numbers are not doubled today")),
                }
            })
        },
    );
    let harness = ActionHarness::new(&doubled).expect("a harness");
    let run = harness.run(json!({"n": "21"}));
    assert_eq!(run.result, Ok(json!(42)), "a string holding an integer is coerced, as live");
    assert_eq!(run.effects.len(), 1);
    let run = harness.run(json!({"n": -1}));
    assert!(run.ran && run.result.is_err());
    assert!(run.effects.is_empty(), "a failed run's effects are dropped, as live: {:?}", run.effects);
}

#[test]
fn nested_calls_are_captured_and_answered_by_the_test() {
    let sum3 = an_action(
        "math.sum3",
        json!({"type": "object", "properties": {"xs": {"type": "array", "items": {"type": "integer"}}}}),
        |params, ctx| {
            Box::pin(async move {
                let xs: Vec<i64> = params["xs"].as_array().into_iter().flatten().filter_map(Value::as_i64).collect();
                let first = ctx.call("math.add", json!({"a": xs[0], "b": xs[1]})).await?;
                ctx.call("math.add", json!({"a": first, "b": xs[2]})).await
            })
        },
    );
    let harness = ActionHarness::new(&sum3)
        .expect("a harness")
        .answer("math.add", |params| Ok(json!(params["a"].as_i64().unwrap_or(0) + params["b"].as_i64().unwrap_or(0))))
        .expect("a valid id");
    let run = harness.run(json!({"xs": [1, 2, 3]}));
    assert_eq!(run.result, Ok(json!(6)));
    assert_eq!(
        run.calls,
        [(action_id("math.add"), json!({"a": 1, "b": 2})), (action_id("math.add"), json!({"a": 3, "b": 3}))]
    );

    let unanswered = ActionHarness::new(&sum3).expect("a harness").run(json!({"xs": [1, 2, 3]}));
    let err = unanswered.result.expect_err("no answer");
    assert_eq!(err.class(), ErrorClass::Denied);
    assert!(err.to_string().contains("no answer for a call of `math.add`"), "{err}");
    assert_eq!(unanswered.calls.len(), 1, "the call is captured even unanswered");
}

#[test]
fn the_action_harness_fixes_the_clock_and_the_seed() {
    let stamp = an_action("time.stamp", json!({"type": "object"}), |_params, ctx| {
        Box::pin(async move { Ok(json!({"now": ctx.now().to_rfc3339(), "seed": ctx.seed()})) })
    });
    let harness = ActionHarness::new(&stamp).expect("a harness");
    let first = harness.run(json!({})).result.expect("runs");
    assert_eq!(first, json!({"now": "1970-01-01T00:00:00+00:00", "seed": 0}));
    assert_eq!(harness.run(json!({})).result.expect("runs"), first, "the same on every run");
    let later = ActionHarness::new(&stamp).expect("a harness").clock(at(90)).seed(42);
    assert_eq!(later.run(json!({})).result.expect("runs"), json!({"now": "1970-01-01T00:01:30+00:00", "seed": 42}));
}
