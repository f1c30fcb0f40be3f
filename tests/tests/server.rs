//! The AgentServer and Runtime with real actors on tokio's paused clock: the gate, approvals, outcomes as
//! signals, calls and replies, emits, schedules, children, restarts, stop, events and the journal.

use agentry::action::{ActionSpec, Capability, DynAction, ErrorClass, RetryPolicy, Risk};
use agentry::agent::{Agent, Reaction};
use agentry::effect::{Effect, Target};
use agentry::events::EventKind;
use agentry::id::{ActionId, AgentId, SkillId};
use agentry::policy::Policy;
use agentry::runtime::{AgentRef, Runtime, RuntimeError, SpawnOptions};
use agentry::runtime::{RestartMode, RestartPolicy};
use agentry::signal::Signal;
use agentry::skill::Skill;
use agentry::store::{JournalPen, RunQuery, RunRecord, RunStatus, Store};
use agentry_tests::{Operator, wait_for};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use uuid::Uuid;

/// A test agent: `do` runs `data.action` with `data.params`; outcomes are replied to the call that caused them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Probe {
    outcomes: u32,
    pings: u32,
    ticks: u32,
    exited: Vec<String>,
    /// Each `action.blocked` it got: the run and the error's class (`null` while the run waits for approval).
    blocked: Vec<Value>,
}

impl Agent for Probe {
    fn name() -> &'static str {
        "probe"
    }

    fn handle_signal(&self, signal: &Signal) -> Reaction<Self> {
        let data = signal.data();
        let mut next = self.clone();
        let effects = match signal.kind().as_str() {
            "do" => {
                let Ok(action) = ActionId::new(data["action"].as_str().unwrap_or_default()) else {
                    return Reaction::Ignore;
                };
                vec![Effect::run(action, data["params"].clone())]
            }
            "action.completed" | "action.failed" | "action.blocked" => {
                next.outcomes += 1;
                if signal.kind().as_str() == "action.blocked" {
                    next.blocked.push(json!({"run": data["run_id"], "class": data["outcome"]["error"]["class"]}));
                }
                let mut reply = data.clone();
                reply["kind"] = json!(signal.kind().as_str());
                signal.causation_id().map(|to| Effect::reply(to, reply)).into_iter().collect()
            }
            "count" => vec![Effect::reply(
                signal.id(),
                json!({"outcomes": self.outcomes, "pings": self.pings, "ticks": self.ticks, "exited": self.exited,
                       "blocked": self.blocked}),
            )],
            // A ping to `data.to` (an agent id), else to `data.topic`, else to the parent.
            "emit" => {
                let to = match (data["to"].as_str(), data["topic"].as_str()) {
                    (Some(to), _) => Target::Agent(AgentId::new(to).expect("a test target")),
                    (None, Some(topic)) => Target::Topic(topic.to_owned()),
                    (None, None) => Target::Parent,
                };
                let ping = signal.follow("ping").build().expect("a valid kind");
                vec![Effect::emit(ping, to)]
            }
            "ping" => {
                next.pings += 1;
                vec![]
            }
            "schedule" => {
                let tick = signal.follow("tick").build().expect("a valid kind");
                vec![Effect::schedule("t", Duration::from_secs(data["secs"].as_u64().unwrap_or(1)), tick)]
            }
            "cancel" => vec![Effect::cancel("t")],
            "tick" => {
                next.ticks += 1;
                vec![]
            }
            "spawn" => vec![Effect::spawn_agent(AgentId::new("child").unwrap(), "probe", json!(Probe::default()))],
            "stop-child" => vec![Effect::stop_child(AgentId::new("child").unwrap())],
            "agent.child_exited" => {
                next.exited.push(data["child"].as_str().unwrap_or_default().to_owned());
                vec![]
            }
            "boom" => panic!("the handler blew up"),
            "stop" => vec![Effect::stop("asked to stop")],
            _ => return Reaction::Ignore,
        };
        Reaction::Update(next, effects)
    }
}

/// Counters the test actions bump, fresh per test.
#[derive(Default)]
struct Counters {
    risky: AtomicU32,
    flaky: AtomicU32,
    /// The params each attempt of `tools.flaky` was given.
    flaky_params: std::sync::Mutex<Vec<Value>>,
    /// Told when `tools.hold` has started (it then waits for ever).
    held: tokio::sync::Notify,
    /// The runtime's journal, for `tools.look`.
    journal: std::sync::OnceLock<agentry::store::JournalView>,
}

fn dyn_action<F, Fut>(spec: ActionSpec, f: F) -> DynAction
where
    F: Fn(Value) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value, agentry::ActionError>> + Send + 'static,
{
    DynAction::new(spec.params_schema(json!({"type": "object"})), move |p, _| Box::pin(f(p))).unwrap()
}

fn tools(counters: &Arc<Counters>) -> Skill {
    let risky = counters.clone();
    let flaky = counters.clone();
    let held = counters.clone();
    let looking = counters.clone();
    let look = DynAction::new(
        ActionSpec::new("tools.look", "yields once, then says what the journal holds of its run")
            .unwrap()
            .params_schema(json!({"type": "object"})),
        move |_, ctx| {
            let journal = looking.journal.get().cloned();
            Box::pin(async move {
                tokio::task::yield_now().await;
                Ok(json!(journal.and_then(|j| j.get(ctx.run_id)).map(|r| format!("{:?}", r.status()))))
            })
        },
    )
    .unwrap();
    Skill::builder("tools", "1.0.0")
        .dyn_action(look)
        .dyn_action(dyn_action(ActionSpec::new("tools.echo", "echo").unwrap(), |p| async move { Ok(p) }))
        .dyn_action(dyn_action(ActionSpec::new("tools.boom", "panics").unwrap(), |_| async { panic!("action boom") }))
        .dyn_action(dyn_action(
            ActionSpec::new("tools.slow", "hangs").unwrap().timeout(Duration::from_secs(1)).retry(RetryPolicy::never()),
            |_| async {
                std::future::pending::<()>().await;
                Ok(Value::Null)
            },
        ))
        .dyn_action(dyn_action(
            ActionSpec::new("tools.nap", "sleeps `secs` seconds")
                .unwrap()
                .timeout(Duration::from_secs(1000))
                .retry(RetryPolicy::never()),
            |p| async move {
                tokio::time::sleep(Duration::from_secs(p["secs"].as_u64().unwrap_or(0))).await;
                Ok(json!("rested"))
            },
        ))
        .dyn_action(dyn_action(
            ActionSpec::new("tools.risky", "high risk").unwrap().risk(Risk::High).idempotent(true),
            move |_| {
                let n = risky.risky.fetch_add(1, Ordering::SeqCst) + 1;
                async move { if n == 1 { Err(agentry::ActionError::transient("first try fails")) } else { Ok(json!(n)) } }
            },
        ))
        .dyn_action(dyn_action(
            ActionSpec::new("tools.flaky", "transient twice, then returns its params").unwrap().idempotent(true),
            move |p| {
                let n = flaky.flaky.fetch_add(1, Ordering::SeqCst) + 1;
                flaky.flaky_params.lock().unwrap().push(p.clone());
                async move { if n < 3 { Err(agentry::ActionError::transient("busy")) } else { Ok(p) } }
            },
        ))
        .dyn_action(dyn_action(
            ActionSpec::new("tools.whereami", "the task it ran on, after yielding once if `yield`").unwrap(),
            |p| async move {
                if p["yield"] == json!(true) {
                    tokio::task::yield_now().await;
                }
                Ok(json!(tokio::task::try_id().map(|id| id.to_string())))
            },
        ))
        .dyn_action(dyn_action(
            ActionSpec::new("tools.hold", "says it started, then waits for ever").unwrap().timeout(Duration::from_secs(1000)),
            move |_| {
                let held = held.clone();
                async move {
                    held.held.notify_one();
                    std::future::pending::<()>().await;
                    Ok(Value::Null)
                }
            },
        ))
        .dyn_action(dyn_action(ActionSpec::new("tools.read_file", "needs fs").unwrap().capability(Capability::FS), |_| async {
            Ok(json!("contents"))
        }))
        .build()
        .unwrap()
}

const CALL: Duration = Duration::from_secs(30);

async fn setup(policy: Policy) -> (Runtime, AgentRef<Probe>, Arc<Counters>) {
    let counters = Arc::new(Counters::default());
    let runtime = Runtime::builder().skill(tools(&counters)).agent::<Probe>().unwrap().build();
    let _ = counters.journal.set(runtime.store().clone());
    let opts = SpawnOptions { id: Some(AgentId::new("probe").unwrap()), policy, ..SpawnOptions::default() };
    let probe = runtime.spawn(Probe::default(), opts).await.unwrap();
    probe.mount(&SkillId::new("tools").unwrap(), Value::Null).await.unwrap();
    (runtime, probe, counters)
}

fn run(action: &str, params: Value) -> Signal {
    Signal::new("do", json!({"action": action, "params": params})).unwrap()
}

async fn outcome(probe: &AgentRef<Probe>, action: &str, params: Value) -> Value {
    probe.call(run(action, params), CALL).await.unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_call_is_answered_through_a_real_action() {
    let (_rt, probe, _) = setup(Policy::default()).await;
    let reply = outcome(&probe, "tools.echo", json!({"x": 1})).await;
    assert_eq!(reply["kind"], "action.completed");
    assert_eq!(reply["outcome"]["output"], json!({"x": 1}));
    assert_eq!(reply["action"], "tools.echo");
}

#[tokio::test(start_paused = true)]
async fn a_run_that_ends_at_its_first_poll_runs_in_place_and_one_that_waits_gets_its_own_task() {
    let (_rt, probe, _) = setup(Policy::default()).await;
    let task = |reply: Value| {
        assert_eq!(reply["kind"], "action.completed", "{reply}");
        reply["outcome"]["output"].as_str().expect("a task id").to_owned()
    };
    let first = task(outcome(&probe, "tools.whereami", json!({})).await);
    let second = task(outcome(&probe, "tools.whereami", json!({})).await);
    assert_eq!(first, second, "both ran in place, on the agent's own task");
    let waited = task(outcome(&probe, "tools.whereami", json!({"yield": true})).await);
    assert_ne!(waited, first, "a run that waits goes on in a task of its own");
    let again = task(outcome(&probe, "tools.whereami", json!({"yield": true})).await);
    assert_ne!(again, waited, "each waiting run has its own task");
}

#[tokio::test(start_paused = true)]
async fn a_run_is_journaled_once_it_waits_and_one_that_ends_at_once_has_its_whole_history() {
    // Nobody listens to events here, so records are written late: when a run waits, or when it ends.
    let (rt, probe, counters) = setup(Policy::default()).await;
    probe.send(run("tools.hold", json!({}))).unwrap();
    counters.held.notified().await;
    let holding = RunQuery { action: Some(ActionId::new("tools.hold").unwrap()), ..RunQuery::default() };
    let held = rt.store().query(&holding);
    assert_eq!(held.iter().map(RunRecord::status).collect::<Vec<_>>(), [RunStatus::Running], "a waiting run");

    let reply = outcome(&probe, "tools.echo", json!({"x": 1})).await;
    let run_id: Uuid = serde_json::from_value(reply["run_id"].clone()).unwrap();
    let echoed = rt.store().get(run_id).expect("an ended run is in the journal");
    let statuses: Vec<RunStatus> = echoed.history.iter().map(|(status, _)| *status).collect();
    assert_eq!(statuses, [RunStatus::Queued, RunStatus::Running, RunStatus::Completed]);
    assert_eq!((echoed.attempts, echoed.latency.is_some()), (1, true));
    let all = rt.store().query(&RunQuery::default());
    assert_eq!(all.iter().map(|r| r.run).collect::<Vec<_>>(), [held[0].run, run_id], "each run once, in order");
}

#[tokio::test(start_paused = true)]
async fn a_run_that_waits_is_journaled_before_its_action_goes_on() {
    // Nobody listens to events here, so the record is written late: the moment the run first waits, before its
    // task polls the action again.
    let (_rt, probe, _) = setup(Policy::default()).await;
    let reply = outcome(&probe, "tools.look", json!({})).await;
    assert_eq!(reply["outcome"]["output"], json!("Running"), "{reply}");
}

/// A journal (the real in-memory one inside) that, at each write, reads the events published so far and notes
/// every one that names a run it does not hold yet: the journal and the events are written on the same thread,
/// so such an event was published before its run was journaled.
struct Watching {
    journal: agentry::store::MemoryStore,
    events: std::sync::Mutex<Option<tokio::sync::broadcast::Receiver<agentry::events::Event>>>,
    early: std::sync::Mutex<Vec<String>>,
}

impl Watching {
    fn look(&self) {
        let mut events = self.events.lock().unwrap();
        let Some(events) = events.as_mut() else { return };
        while let Ok(event) = events.try_recv() {
            if let Some(run) = event.run
                && self.journal.get(run).is_none()
            {
                self.early.lock().unwrap().push(format!("{:?}", event.kind));
            }
        }
    }
}

impl Store for Watching {
    fn record(&self, pen: &JournalPen, record: RunRecord) -> Result<(), agentry::store::StoreError> {
        self.look();
        self.journal.record(pen, record)
    }
    fn update(
        &self,
        pen: &JournalPen,
        run: Uuid,
        update: agentry::store::RunUpdate,
        at: chrono::DateTime<chrono::Utc>,
    ) -> Result<(), agentry::store::StoreError> {
        self.look();
        self.journal.update(pen, run, update, at)
    }
    fn get(&self, run: Uuid) -> Option<RunRecord> {
        self.journal.get(run)
    }
    fn query(&self, query: &RunQuery) -> Vec<RunRecord> {
        self.journal.query(query)
    }
    fn refused(&self, pen: &JournalPen, refusal: agentry::store::Refusal) {
        self.journal.refused(pen, refusal);
    }
    fn refusals(&self, agent: &AgentId) -> Vec<agentry::store::Refusal> {
        self.journal.refusals(agent)
    }
}

#[tokio::test(start_paused = true)]
async fn a_run_an_event_names_is_already_in_the_journal() {
    let watching = Arc::new(Watching {
        journal: agentry::store::MemoryStore::new(),
        events: std::sync::Mutex::default(),
        early: std::sync::Mutex::default(),
    });
    let counters = Arc::new(Counters::default());
    let runtime = Runtime::builder().skill(tools(&counters)).store(watching.clone()).build();
    *watching.events.lock().unwrap() = Some(runtime.events());
    let probe = runtime.spawn(Probe::default(), SpawnOptions::default()).await.unwrap();
    probe.mount(&SkillId::new("tools").unwrap(), Value::Null).await.unwrap();
    // Runs that end at once, one that is retried, one that waits, and one that is refused.
    for (action, params) in [
        ("tools.echo", json!({})),
        ("tools.flaky", json!({})),
        ("tools.nap", json!({"secs": 1})),
        ("tools.nope", json!({})),
    ] {
        probe.call(run(action, params), CALL).await.unwrap();
    }
    watching.look();
    assert_eq!(
        *watching.early.lock().unwrap(),
        Vec::<String>::new(),
        "events published before their run was journaled"
    );
}

#[tokio::test(start_paused = true)]
async fn a_panicking_action_fails_critical_and_the_agent_goes_on() {
    let (_rt, probe, _) = setup(Policy::default()).await;
    let reply = outcome(&probe, "tools.boom", json!({})).await;
    assert_eq!(
        (reply["kind"].as_str(), reply["outcome"]["error"]["class"].as_str()),
        (Some("action.failed"), Some("critical"))
    );
    assert_eq!(outcome(&probe, "tools.echo", json!({"ok": true})).await["kind"], "action.completed");
}

#[tokio::test(start_paused = true)]
async fn slow_actions_time_out_and_transient_ones_are_retried() {
    let (_rt, probe, counters) = setup(Policy::default()).await;
    let reply = outcome(&probe, "tools.slow", json!({})).await;
    assert_eq!(reply["outcome"]["error"]["class"], "timeout");
    let reply = outcome(&probe, "tools.flaky", json!({})).await;
    assert_eq!((reply["kind"].as_str(), reply["outcome"]["attempts"].as_u64()), (Some("action.completed"), Some(3)));
    assert_eq!(counters.flaky.load(Ordering::SeqCst), 3);
}

/// A retried run's params are read again from their text rather than copied for every attempt: each attempt
/// gets exactly the params the agent gave, floats that JSON text rounds badly and key order included.
#[tokio::test(start_paused = true)]
async fn every_attempt_of_a_retried_run_gets_the_params_it_was_given() {
    let (_rt, probe, counters) = setup(Policy::default()).await;
    let params = json!({
        "z": 0.1, "a": [1.0e-7, 2.2250738585072014e-308, 1.7976931348623157e308, -0.0, 5e-324, 0.30000000000000004],
        "big": u64::MAX, "neg": i64::MIN, "text": "caf\u{e9} \"quoted\"", "nested": {"y": null, "b": [true, {}]}
    });
    let reply = outcome(&probe, "tools.flaky", params.clone()).await;
    assert_eq!(reply["outcome"]["attempts"], 3);
    let seen = counters.flaky_params.lock().unwrap().clone();
    assert_eq!(seen.len(), 3);
    for (attempt, got) in seen.iter().enumerate() {
        assert_eq!(got, &params, "attempt {} got other params", attempt + 1);
        let keys: Vec<&String> = got.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["z", "a", "big", "neg", "text", "nested"], "the keys keep their order");
    }
    let floats =
        |v: &Value| v["a"].as_array().unwrap().iter().map(|f| f.as_f64().unwrap().to_bits()).collect::<Vec<_>>();
    assert_eq!(floats(&seen[2]), floats(&params), "every float is bit for bit the one given");
}

/// The same for short params: their text stays with the run's record until that is written (at the first
/// failed attempt), and goes back to the run for the next attempts.
#[tokio::test(start_paused = true)]
async fn every_attempt_of_a_retried_run_gets_its_short_params() {
    let (_rt, probe, counters) = setup(Policy::default()).await;
    let params = json!({"z": 0.1, "n": [1, "two"]});
    let reply = outcome(&probe, "tools.flaky", params.clone()).await;
    assert_eq!(reply["outcome"]["attempts"], 3);
    let seen = counters.flaky_params.lock().unwrap().clone();
    assert_eq!(seen, [params.clone(), params.clone(), params]);
}

#[tokio::test(start_paused = true)]
async fn unmounted_actions_and_missing_capabilities_are_denied() {
    let (_rt, probe, _) = setup(Policy::default()).await;
    let reply = outcome(&probe, "nowhere.to_be_found", json!({})).await;
    assert_eq!(
        (reply["kind"].as_str(), reply["outcome"]["error"]["class"].as_str()),
        (Some("action.blocked"), Some("denied"))
    );
    let reply = outcome(&probe, "tools.read_file", json!({})).await;
    assert_eq!(reply["outcome"]["error"]["class"], "denied");
    assert!(reply["outcome"]["error"]["message"].as_str().unwrap().contains("fs"));

    probe.unmount(&SkillId::new("tools").unwrap()).await.unwrap();
    let reply = outcome(&probe, "tools.echo", json!({})).await;
    assert_eq!(reply["outcome"]["error"]["class"], "denied", "after unmount new runs are denied");
}

#[tokio::test(start_paused = true)]
async fn a_granted_capability_lets_the_run_through() {
    let (_rt, probe, _) = setup(Policy::default().grant(Capability::FS)).await;
    assert_eq!(outcome(&probe, "tools.read_file", json!({})).await["outcome"]["output"], "contents");
}

#[tokio::test(start_paused = true)]
async fn a_risky_run_waits_for_approval_then_runs_once_without_asking_again_on_retry() {
    let (rt, probe, counters) = setup(Policy::default()).await;
    let mut events = rt.events();
    let reply = outcome(&probe, "tools.risky", json!({})).await;
    assert_eq!(reply["kind"], "action.blocked");
    assert!(reply["outcome"]["error"].is_null(), "waiting, not refused");
    assert_eq!(counters.risky.load(Ordering::SeqCst), 0, "nothing ran before approval");
    let run_id: Uuid = serde_json::from_value(reply["run_id"].clone()).unwrap();
    assert_eq!(rt.store().get(run_id).unwrap().status(), RunStatus::AwaitingApproval);

    probe.approve(run_id).await.unwrap();
    let given = wait_for(&mut events, |e| matches!(e.kind, EventKind::ApprovalGiven { .. })).await;
    let risky = ActionId::new("tools.risky").unwrap();
    assert_eq!((given.run, given.kind), (Some(run_id), EventKind::ApprovalGiven { action: risky, approved: true }));
    let done =
        wait_for(&mut events, |e| e.run == Some(run_id) && matches!(e.kind, EventKind::ActionCompleted { .. })).await;
    assert_eq!(done.kind, EventKind::ActionCompleted { action: ActionId::new("tools.risky").unwrap(), attempts: 2 });
    assert_eq!(counters.risky.load(Ordering::SeqCst), 2, "one transient failure, one retry, no second approval");
    let asked = rt
        .store()
        .query(&RunQuery::default())
        .into_iter()
        .filter(|r| r.status() == RunStatus::AwaitingApproval)
        .count();
    assert_eq!(asked, 0);
    assert!(matches!(probe.approve(run_id).await, Err(RuntimeError::NotAwaitingApproval(_))));
}

#[tokio::test(start_paused = true)]
async fn a_denied_run_is_blocked_with_denied() {
    let (rt, probe, counters) = setup(Policy::default()).await;
    let mut events = rt.events();
    let reply = outcome(&probe, "tools.risky", json!({})).await;
    let run_id: Uuid = serde_json::from_value(reply["run_id"].clone()).unwrap();
    probe.deny(run_id).await.unwrap();
    let given = wait_for(&mut events, |e| matches!(e.kind, EventKind::ApprovalGiven { .. })).await;
    let risky = ActionId::new("tools.risky").unwrap();
    assert_eq!((given.run, given.kind), (Some(run_id), EventKind::ApprovalGiven { action: risky, approved: false }));
    let record = rt.store().get(run_id).unwrap();
    assert_eq!((record.status(), record.error), (RunStatus::Blocked, Some(ErrorClass::Denied)));
    assert_eq!(counters.risky.load(Ordering::SeqCst), 0);
    // The agent heard twice: the run waits (no error), then it was denied. The second is in its mailbox before
    // `count`, because `deny` is answered after the outcome is sent.
    let blocked = json!([{"run": run_id, "class": null}, {"run": run_id, "class": "denied"}]);
    assert_eq!(count(&probe).await["blocked"], blocked);
}

#[tokio::test(start_paused = true)]
async fn one_runs_events_arrive_in_order_and_the_journal_holds_every_run() {
    let (rt, probe, _) = setup(Policy::default()).await;
    let mut events = rt.events();
    let reply = outcome(&probe, "tools.flaky", json!({})).await;
    let run_id: Uuid = serde_json::from_value(reply["run_id"].clone()).unwrap();
    let mut kinds = Vec::new();
    while kinds.last() != Some(&"completed") {
        let event = events.recv().await.unwrap();
        if event.run == Some(run_id) {
            kinds.push(match event.kind {
                EventKind::ActionQueued { .. } => "queued",
                EventKind::ActionStarted { .. } => "started",
                EventKind::ActionRetried { .. } => "retried",
                EventKind::ActionCompleted { .. } => "completed",
                _ => "other",
            });
        }
    }
    assert_eq!(kinds, ["queued", "started", "retried", "started", "retried", "started", "completed"]);
    outcome(&probe, "tools.echo", json!({})).await;
    outcome(&probe, "nowhere.x", json!({})).await;
    let journal = rt.store().query(&RunQuery { agent: Some(probe.id().clone()), ..RunQuery::default() });
    let statuses: Vec<RunStatus> = journal.iter().map(|r| r.status()).collect();
    assert_eq!(statuses, [RunStatus::Completed, RunStatus::Completed, RunStatus::Blocked]);
}

async fn count(probe: &AgentRef<Probe>) -> Value {
    probe.call(Signal::new("count", Value::Null).unwrap(), CALL).await.unwrap()
}

#[tokio::test(start_paused = true)]
async fn emit_delivers_between_agents() {
    let (rt, probe, _) = setup(Policy::default()).await;
    let other = rt
        .spawn(Probe::default(), SpawnOptions { id: Some(AgentId::new("other").unwrap()), ..SpawnOptions::default() })
        .await
        .unwrap();
    probe.send(Signal::new("emit", json!({"to": "other"})).unwrap()).unwrap();
    // The ping is in `other`'s mailbox before `count`, because `probe` handled `emit` before answering this:
    count(&probe).await;
    assert_eq!(count(&other).await["pings"], 1);
}

async fn spawn_probe(rt: &Runtime, id: &str) -> AgentRef<Probe> {
    let opts = SpawnOptions { id: Some(AgentId::new(id).unwrap()), ..SpawnOptions::default() };
    rt.spawn(Probe::default(), opts).await.unwrap()
}

async fn pings(probe: &AgentRef<Probe>) -> Value {
    count(probe).await["pings"].clone()
}

#[tokio::test(start_paused = true)]
async fn emit_reaches_the_parent_and_every_subscriber_of_a_topic() {
    let (rt, probe, _) = setup(Policy::default().grant(Capability::SPAWN)).await;
    let mut events = rt.events();
    probe.send(Signal::new("spawn", Value::Null).unwrap()).unwrap();
    wait_for(&mut events, |e| e.agent.as_str() == "child" && e.kind == EventKind::AgentStarted).await;
    let child: AgentRef<Probe> = rt.get(&AgentId::new("child").unwrap()).unwrap();
    child.send(Signal::new("emit", json!({})).unwrap()).unwrap();
    // The ping is in the parent's mailbox before `count`, because the child handled `emit` before answering this:
    count(&child).await;
    assert_eq!((pings(&probe).await, pings(&child).await), (json!(1), json!(0)), "the parent got the ping");

    let (a, b, outsider) = (spawn_probe(&rt, "a").await, spawn_probe(&rt, "b").await, spawn_probe(&rt, "c").await);
    rt.subscribe(a.id(), "news");
    rt.subscribe(b.id(), "news");
    rt.subscribe(a.id(), "news"); // subscribing twice still delivers once
    rt.subscribe(outsider.id(), "weather");
    probe.send(Signal::new("emit", json!({"topic": "news"})).unwrap()).unwrap();
    probe.send(Signal::new("emit", json!({"topic": "sports"})).unwrap()).unwrap(); // nobody listens
    count(&probe).await;
    let heard = [pings(&a).await, pings(&b).await, pings(&outsider).await, pings(&probe).await, pings(&child).await];
    assert_eq!(heard, [json!(1), json!(1), json!(0), json!(1), json!(0)], "only the topic's subscribers, once each");
}

#[tokio::test(start_paused = true)]
async fn mounting_and_unmounting_are_announced_and_no_ops_are_not() {
    let (rt, probe, _) = setup(Policy::default()).await;
    let mut events = rt.events();
    let tools = SkillId::new("tools").unwrap();
    probe.mount(&tools, Value::Null).await.unwrap(); // already mounted at this version: a no-op
    probe.unmount(&tools).await.unwrap();
    probe.unmount(&tools).await.unwrap(); // not mounted: a no-op
    probe.mount(&tools, Value::Null).await.unwrap();
    // Each is announced before its call returns, so everything is in the stream by now.
    let mut announced = Vec::new();
    while let Ok(event) = events.try_recv() {
        if matches!(event.kind, EventKind::SkillMounted { .. } | EventKind::SkillUnmounted { .. }) {
            announced.push((event.agent.to_string(), event.kind));
        }
    }
    let probe_id = "probe".to_owned();
    assert_eq!(
        announced,
        [
            (probe_id.clone(), EventKind::SkillUnmounted { skill: tools.clone() }),
            (probe_id, EventKind::SkillMounted { skill: tools }),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn agents_are_found_by_name_checked_by_type_and_stopped_by_the_runtime() {
    let (rt, probe, _) = setup(Policy::default()).await;
    let kid_id = AgentId::new("kid").unwrap();
    let opts = SpawnOptions {
        id: Some(kid_id.clone()),
        name: Some("the kid".into()),
        parent: Some(probe.id().clone()),
        ..SpawnOptions::default()
    };
    let kid = rt.spawn(Probe::default(), opts).await.unwrap();
    assert_eq!((rt.find("the kid"), rt.find("nobody")), (Some(kid_id.clone()), None));
    assert_eq!(rt.get::<Operator>(&kid_id).err(), Some(RuntimeError::WrongType(kid_id.clone())));
    assert_eq!(rt.get::<Probe>(&kid_id).map(|found| found.id().clone()), Ok(kid_id.clone()));
    let taken = rt.spawn(Probe::default(), SpawnOptions { name: Some("the kid".into()), ..SpawnOptions::default() });
    assert_eq!(taken.await.err(), Some(RuntimeError::AlreadyExists("the kid".into())));

    let mut events = rt.events();
    rt.stop(&kid_id).await.unwrap();
    let stopped = wait_for(&mut events, |e| matches!(e.kind, EventKind::AgentStopped { .. })).await;
    assert_eq!(stopped.agent, kid_id);
    assert_eq!(count(&probe).await["exited"], json!(["kid"]), "the parent given at spawn heard it stop");
    assert_eq!(count_after_stop(&kid).await, "the agent stopped");
    assert_eq!(rt.find("the kid"), None, "its name is free again");
    assert_eq!(rt.stop(&kid_id).await, Err(RuntimeError::NoSuchAgent(kid_id)));
}

#[tokio::test(start_paused = true)]
async fn schedules_fire_later_and_cancel_stops_them() {
    let (_rt, probe, _) = setup(Policy::default()).await;
    probe.send(Signal::new("schedule", json!({"secs": 5})).unwrap()).unwrap();
    assert_eq!(count(&probe).await["ticks"], 0);
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(count(&probe).await["ticks"], 1, "fired after its delay");
    probe.send(Signal::new("schedule", json!({"secs": 5})).unwrap()).unwrap();
    probe.send(Signal::new("cancel", Value::Null).unwrap()).unwrap();
    count(&probe).await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(count(&probe).await["ticks"], 1, "the cancelled schedule never fired");
}

#[tokio::test(start_paused = true)]
async fn a_child_is_spawned_and_its_parent_hears_when_it_exits() {
    let (rt, probe, _) = setup(Policy::default().grant(Capability::SPAWN)).await;
    let mut events = rt.events();
    probe.send(Signal::new("spawn", Value::Null).unwrap()).unwrap();
    wait_for(&mut events, |e| e.agent.as_str() == "child" && e.kind == EventKind::AgentStarted).await;
    let child: AgentRef<Probe> = rt.get(&AgentId::new("child").unwrap()).unwrap();
    assert_eq!(count(&child).await["outcomes"], 0);
    probe.send(Signal::new("stop-child", Value::Null).unwrap()).unwrap();
    let stopped =
        wait_for(&mut events, |e| e.agent.as_str() == "child" && matches!(e.kind, EventKind::AgentStopped { .. }))
            .await;
    // The reason its parent gave is the one its supervisor keeps (not a generic "stopped").
    assert_eq!(stopped.kind, EventKind::AgentStopped { reason: format!("stopped by its parent `{}`", probe.id()) });
    assert_eq!(count(&probe).await["exited"], json!(["child"]));
    assert!(rt.get::<Probe>(&AgentId::new("child").unwrap()).is_err());
}

#[tokio::test(start_paused = true)]
async fn stopping_an_agent_cancels_its_running_actions() {
    let (rt, probe, _) = setup(Policy::default()).await;
    let mut events = rt.events();
    probe.send(run("tools.slow", json!({}))).unwrap();
    let started = wait_for(&mut events, |e| matches!(e.kind, EventKind::ActionStarted { .. })).await;
    probe.send(Signal::new("stop", Value::Null).unwrap()).unwrap();
    wait_for(&mut events, |e| matches!(e.kind, EventKind::AgentStopped { .. })).await;
    let record = rt.store().get(started.run.unwrap()).unwrap();
    assert_eq!((record.status(), record.error), (RunStatus::Failed, Some(ErrorClass::Cancelled)));
    assert!(probe.send(Signal::new("count", Value::Null).unwrap()).is_err());
}

#[tokio::test(start_paused = true)]
async fn a_panicking_handler_restarts_with_its_state_until_the_limit() {
    let counters = Arc::new(Counters::default());
    let rt = Runtime::builder().skill(tools(&counters)).build();
    let restart = RestartPolicy { mode: RestartMode::Permanent, max_restarts: 2, window: Duration::from_secs(60) };
    let probe = rt.spawn(Probe::default(), SpawnOptions { restart, ..SpawnOptions::default() }).await.unwrap();
    let mut events = rt.events();
    probe.send(Signal::new("schedule", json!({"secs": 1})).unwrap()).unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(count(&probe).await["ticks"], 1);
    for n in 1..=2 {
        probe.send(Signal::new("boom", Value::Null).unwrap()).unwrap();
        let event = wait_for(&mut events, |e| matches!(e.kind, EventKind::AgentRestarted { .. })).await;
        assert_eq!(event.kind, EventKind::AgentRestarted { restarts: n, afresh: false });
        assert_eq!(count(&probe).await["ticks"], 1, "the state survived the panic");
    }
    probe.send(Signal::new("boom", Value::Null).unwrap()).unwrap();
    wait_for(&mut events, |e| matches!(e.kind, EventKind::AgentStopped { .. })).await;
    assert!(matches!(
        probe.call(Signal::new("count", Value::Null).unwrap(), CALL).await,
        Err(RuntimeError::Stopped(_))
    ));
}

#[tokio::test(start_paused = true)]
async fn a_panicking_handler_with_restart_mode_never_stops_at_the_first_panic() {
    let rt = Runtime::builder().build();
    let restart = RestartPolicy { mode: RestartMode::Never, max_restarts: 5, window: Duration::from_secs(60) };
    let probe = rt.spawn(Probe::default(), SpawnOptions { restart, ..SpawnOptions::default() }).await.unwrap();
    let mut events = rt.events();
    probe.send(Signal::new("boom", Value::Null).unwrap()).unwrap();
    let next =
        wait_for(&mut events, |e| matches!(e.kind, EventKind::AgentRestarted { .. } | EventKind::AgentStopped { .. }))
            .await;
    let reason = "the agent's handler panicked and its restart policy is `never`".to_owned();
    assert_eq!((&next.agent, next.kind), (probe.id(), EventKind::AgentStopped { reason }), "no restart first");
    assert_eq!(count_after_stop(&probe).await, "the agent stopped");
}

#[tokio::test(start_paused = true)]
async fn runs_beyond_the_in_flight_cap_wait_in_a_queue() {
    let counters = Arc::new(Counters::default());
    let rt = Runtime::builder().skill(tools(&counters)).build();
    let probe = rt.spawn(Probe::default(), SpawnOptions { max_in_flight: 1, ..SpawnOptions::default() }).await.unwrap();
    probe.mount(&SkillId::new("tools").unwrap(), Value::Null).await.unwrap();
    let mut events = rt.events();
    probe.send(run("tools.slow", json!({"n": 1}))).unwrap();
    probe.send(run("tools.slow", json!({"n": 2}))).unwrap();
    let mut order = Vec::new();
    let mut runs: Vec<Uuid> = Vec::new();
    while order.iter().filter(|(what, _)| *what == "failed").count() < 2 {
        let event = events.recv().await.unwrap();
        let Some(run) = event.run else { continue };
        if !runs.contains(&run) {
            runs.push(run);
        }
        let index = runs.iter().position(|r| *r == run).unwrap();
        match event.kind {
            EventKind::ActionStarted { .. } => order.push(("started", index)),
            EventKind::ActionFailed { .. } => order.push(("failed", index)),
            _ => {}
        }
    }
    assert_eq!(order, [("started", 0), ("failed", 0), ("started", 1), ("failed", 1)], "one at a time");
}

#[tokio::test(start_paused = true)]
async fn shutdown_lets_running_actions_finish_within_the_grace_and_starts_no_new_ones() {
    let counters = Arc::new(Counters::default());
    let rt = Runtime::builder().skill(tools(&counters)).build();
    let probe = rt.spawn(Probe::default(), SpawnOptions { max_in_flight: 1, ..SpawnOptions::default() }).await.unwrap();
    probe.mount(&SkillId::new("tools").unwrap(), Value::Null).await.unwrap();
    let mut events = rt.events();
    probe.send(run("tools.nap", json!({"secs": 3}))).unwrap();
    let napping = wait_for(&mut events, |e| matches!(e.kind, EventKind::ActionStarted { .. })).await.run.unwrap();
    probe.send(run("tools.echo", json!({"queued": true}))).unwrap();
    let queued = wait_for(&mut events, |e| matches!(e.kind, EventKind::ActionQueued { .. })).await.run.unwrap();
    probe.send(Signal::new("schedule", json!({"secs": 1})).unwrap()).unwrap();

    let began = tokio::time::Instant::now();
    let shutdown = tokio::spawn({
        let rt = rt.clone();
        async move { rt.shutdown(Duration::from_secs(10)).await }
    });
    let draining = wait_for(&mut events, |e| matches!(e.kind, EventKind::AgentDraining { .. })).await;
    assert_eq!(draining.kind, EventKind::AgentDraining { running: 1 });
    probe.send(run("tools.echo", json!({"late": true}))).unwrap();
    let late = wait_for(&mut events, |e| matches!(e.kind, EventKind::ActionBlocked { .. })).await;
    shutdown.await.unwrap();

    let waited = began.elapsed();
    assert!(waited >= Duration::from_secs(3) && waited < Duration::from_secs(10), "waited {waited:?}");
    let store = rt.store();
    assert_eq!(store.get(napping).unwrap().status(), RunStatus::Completed, "the running action finished");
    let queued = store.get(queued).unwrap();
    assert_eq!((queued.status(), queued.error), (RunStatus::Failed, Some(ErrorClass::Cancelled)));
    let late = store.get(late.run.unwrap()).unwrap();
    assert_eq!((late.status(), late.error), (RunStatus::Blocked, Some(ErrorClass::Cancelled)));
    assert_eq!(count_after_stop(&probe).await, "the agent stopped");
}

#[tokio::test(start_paused = true)]
async fn shutdown_cancels_what_outlives_the_grace() {
    let (rt, probe, _) = setup(Policy::default()).await;
    let mut events = rt.events();
    probe.send(run("tools.nap", json!({"secs": 500}))).unwrap();
    let napping = wait_for(&mut events, |e| matches!(e.kind, EventKind::ActionStarted { .. })).await.run.unwrap();
    let began = tokio::time::Instant::now();
    rt.shutdown(Duration::from_secs(2)).await;
    let waited = began.elapsed();
    assert!(waited >= Duration::from_secs(2) && waited < Duration::from_secs(500), "waited {waited:?}");
    let record = rt.store().get(napping).unwrap();
    assert_eq!((record.status(), record.error), (RunStatus::Failed, Some(ErrorClass::Cancelled)));
    let failed =
        wait_for(&mut events, |e| e.run == Some(napping) && matches!(e.kind, EventKind::ActionFailed { .. })).await;
    assert!(matches!(failed.kind, EventKind::ActionFailed { class: ErrorClass::Cancelled, .. }));
    assert_eq!(count_after_stop(&probe).await, "the agent stopped");
}

async fn count_after_stop(probe: &AgentRef<Probe>) -> &'static str {
    match probe.call(Signal::new("count", Value::Null).unwrap(), CALL).await {
        Err(RuntimeError::Stopped(_)) => "the agent stopped",
        _ => "the agent still answers",
    }
}
