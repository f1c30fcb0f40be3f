//! Live and simulated runs agree on everything: over generated skills (actions that fail by a script, retry as
//! their contract says, report cost and artifacts, and call each other), policies (denied actions) and signal
//! scripts (params drawn from the actions' schema by `agentry-testkit`, some coercible, some refused), the
//! live runtime (tokio's paused clock, its in-memory journal) and the simulator give the agent the same
//! outcomes — status, output, error class, attempts, cost, artifacts, nested calls' results — and journal the
//! same records, in the same order: action, caller, params digest, every status the run went through,
//! attempts, cost and error class.
//!
//! Both sides drive the same run machine (`agentry::driver::RunLife`) and the same nested-call rules, so they
//! may differ only in their clocks (latencies and timestamps are left out) and their ids.
//!
//! `AGENTRY_DIFFERENTIAL_CASES` sets the number of generated cases (128 by default; 2,000 take a few seconds).

use agentry::action::{ActionContext, ActionError, ActionSpec, DynAction, ErrorClass, RetryPolicy, Risk};
use agentry::agent::{Agent, Reaction};
use agentry::effect::Effect;
use agentry::events::EventKind;
use agentry::id::{ActionId, AgentId, SkillId};
use agentry::pattern::Pattern;
use agentry::policy::Policy;
use agentry::runtime::{Runtime, SpawnOptions};
use agentry::signal::Signal;
use agentry::skill::Skill;
use agentry::store::{RunQuery, RunRecord};
use agentry_sim::SimBuilder;
use proptest::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::time::Duration;

/// What one attempt of a generated action does.
#[derive(Debug, Clone, Copy)]
enum Step {
    Complete,
    Fail(ErrorClass),
}

/// A generated action: its contract, what each attempt does (the last step repeats), what it reports, and
/// which action it calls.
#[derive(Debug, Clone)]
struct Plan {
    steps: Vec<Step>,
    idempotent: bool,
    side_effects: bool,
    max_attempts: u32,
    cost: Option<f64>,
    artifact: bool,
    calls: Option<usize>,
    /// High risk: the policy asks for approval, which is given.
    risky: bool,
}

/// One generated case: the skill's actions, the ones the policy denies, and the signal script.
#[derive(Debug, Clone)]
struct Case {
    plans: Vec<Plan>,
    denied: Vec<usize>,
    script: Vec<(usize, Value)>,
}

const ACTIONS: usize = 4;

fn action_id(n: usize) -> String {
    format!("lab.a{n}")
}

fn params_schema() -> Value {
    json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 1000}}, "required": ["n"]})
}

fn error(class: ErrorClass) -> ActionError {
    match class {
        ErrorClass::Timeout => ActionError::Timeout { after: Duration::from_secs(1) },
        class => ActionError::of_class(class, "a scripted failure"),
    }
}

/// The action a plan describes: the same code on both sides.
fn action(n: usize, plan: &Plan) -> DynAction {
    let spec = ActionSpec::new(action_id(n), "A generated action.")
        .unwrap()
        .params_schema(params_schema())
        .idempotent(plan.idempotent)
        .side_effects(plan.side_effects)
        .retry(RetryPolicy { max_attempts: plan.max_attempts, ..RetryPolicy::default() })
        .risk(if plan.risky { Risk::High } else { Risk::Low });
    let plan = plan.clone();
    DynAction::new(spec, move |params: Value, ctx: ActionContext| {
        let plan = plan.clone();
        Box::pin(async move {
            let attempt = usize::try_from(ctx.attempt.max(1) - 1).unwrap();
            let step = plan.steps[attempt.min(plan.steps.len() - 1)];
            if let Some(cost) = plan.cost {
                ctx.cost(cost);
            }
            if plan.artifact {
                ctx.artifact(format!("{}-{}.txt", ctx.action_id, ctx.attempt));
            }
            let n = params["n"].as_i64().unwrap_or(0);
            let called = match plan.calls {
                Some(target) => match ctx.call(action_id(target), json!({"n": n + 1})).await {
                    Ok(output) => output,
                    Err(err) => json!({"error": err.class()}),
                },
                None => Value::Null,
            };
            match step {
                Step::Complete => Ok(json!({"n": n, "attempt": ctx.attempt, "called": called})),
                Step::Fail(class) => Err(error(class)),
            }
        })
    })
    .unwrap()
}

fn skill(case: &Case) -> Skill {
    let mut builder = Skill::builder("lab", "1.0.0");
    for (n, plan) in case.plans.iter().enumerate() {
        builder = builder.dyn_action(action(n, plan));
    }
    builder.build().unwrap()
}

/// The case's policy: its denied actions refused, and high-risk runs approved first.
fn policy(case: &Case) -> Policy {
    let asks = Policy::default().approval_at(Some(Risk::High));
    case.denied.iter().fold(asks, |policy, &n| policy.deny_action(Pattern::new(action_id(n)).unwrap()))
}

/// Runs what it is told to, and keeps every outcome it hears.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Lab {
    heard: Vec<Value>,
}

impl Agent for Lab {
    fn name() -> &'static str {
        "lab"
    }

    fn handle_signal(&self, signal: &Signal) -> Reaction<Self> {
        let mut next = self.clone();
        let effects = match (signal.kind().as_str(), signal.outcome()) {
            ("go", _) => {
                let data = signal.data();
                let action = ActionId::new(data["action"].as_str().unwrap_or("lab.none")).unwrap();
                vec![Effect::run(action, data["params"].clone())]
            }
            (_, Some(report)) => {
                let outcome = &report.outcome;
                next.heard.push(json!({
                    "kind": signal.kind().as_str(),
                    "action": report.action.as_str(),
                    "status": outcome.status,
                    "output": outcome.output,
                    "error": outcome.error.as_ref().map(|e| e.class),
                    "attempts": outcome.attempts,
                    "cost": outcome.cost,
                    "artifacts": outcome.artifacts,
                }));
                vec![]
            }
            _ => vec![],
        };
        Reaction::Update(next, effects)
    }
}

fn lab() -> AgentId {
    AgentId::new("lab-1").unwrap()
}

fn go(n: usize, params: &Value) -> Signal {
    Signal::new("go", json!({"action": action_id(n), "params": params})).unwrap()
}

/// What of a journal both sides must agree on, in order: each record with its caller as a position in the
/// list, and without ids, times and latency.
fn essence(records: &[RunRecord]) -> Vec<Value> {
    let place: HashMap<uuid::Uuid, usize> = records.iter().enumerate().map(|(n, r)| (r.run, n)).collect();
    records
        .iter()
        .map(|r| {
            json!({
                "action": r.action.as_str(),
                "caller": r.parent_run.map(|p| place.get(&p).copied()),
                "params": r.params_digest,
                "history": r.history.iter().map(|(status, _)| *status).collect::<Vec<_>>(),
                "attempts": r.attempts,
                "cost": r.cost,
                "error": r.error,
            })
        })
        .collect()
}

/// How far apart the script's signals are: everything a signal causes is over before the next, on both sides
/// (the longest chains of calls and retries a case can make wait well under this).
const SPACING: Duration = Duration::from_secs(120);

/// The case live, on tokio's paused clock.
fn live(case: &Case) -> (Lab, Vec<Value>) {
    let tokio = tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap();
    tokio.block_on(async {
        let runtime = Runtime::builder().skill(skill(case)).agent::<Lab>().unwrap().build();
        // The approver: every run that asks is approved at once, as the simulation's default approver does.
        let mut events = runtime.events();
        let approver = runtime.clone();
        tokio::spawn(async move {
            while let Ok(event) = events.recv().await {
                if let (EventKind::ApprovalAsked { .. }, Some(run)) = (&event.kind, event.run) {
                    approver.decide(&event.agent, run, true).await.unwrap();
                }
            }
        });
        let options = SpawnOptions { id: Some(lab()), policy: policy(case), ..Default::default() };
        let agent = runtime.spawn(Lab::default(), options).await.unwrap();
        agent.mount(&SkillId::new("lab").unwrap(), Value::Null).await.unwrap();
        for (n, params) in &case.script {
            agent.send(go(*n, params)).unwrap();
            tokio::time::sleep(SPACING).await;
        }
        let state = agent.state().await.unwrap().domain;
        let mut records = runtime.store().query(&RunQuery { agent: Some(lab()), ..Default::default() });
        // In the order the runs were asked for: their ids are time-ordered.
        records.sort_by_key(|r| r.run);
        runtime.shutdown(Duration::from_secs(1)).await;
        (state, essence(&records))
    })
}

/// The case simulated, on virtual time.
fn simulated(case: &Case) -> (Lab, Vec<Value>) {
    let mut sim = SimBuilder::<Lab>::new(7).skill(skill(case)).keep_journal(true).build().unwrap();
    sim.add_with(lab(), Lab::default(), policy(case), 64).unwrap();
    sim.mount(&lab(), &SkillId::new("lab").unwrap(), Value::Null).unwrap();
    for (second, (n, params)) in case.script.iter().enumerate() {
        sim.send_after(&lab(), go(*n, params), SPACING * u32::try_from(second).unwrap()).unwrap();
    }
    sim.run();
    (sim.state(&lab()).unwrap().domain.clone(), essence(&sim.journal(&lab())))
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => Just(Step::Complete),
        2 => Just(Step::Fail(ErrorClass::Transient)),
        1 => Just(Step::Fail(ErrorClass::Timeout)),
        1 => Just(Step::Fail(ErrorClass::Validation)),
        1 => Just(Step::Fail(ErrorClass::Denied)),
    ]
}

fn plan() -> impl Strategy<Value = Plan> {
    (
        proptest::collection::vec(step(), 1..4),
        any::<bool>(),
        any::<bool>(),
        1u32..4,
        proptest::option::weighted(0.5, (1u32..100).prop_map(|c| f64::from(c) / 4.0)),
        any::<bool>(),
        proptest::option::weighted(0.4, 0..ACTIONS),
        proptest::bool::weighted(0.2),
    )
        .prop_map(|(steps, idempotent, side_effects, max_attempts, cost, artifact, calls, risky)| Plan {
            steps,
            idempotent,
            side_effects,
            max_attempts,
            cost,
            artifact,
            calls,
            risky,
        })
}

/// Params for a `go`: valid ones drawn from the schema, ones coercion mends (the number as text), and ones
/// it cannot (drawn from what the schema refuses).
fn params() -> BoxedStrategy<Value> {
    let schema = params_schema();
    let valid = agentry_testkit::schema::values(&schema).unwrap();
    let invalid = agentry_testkit::schema::invalid_values(&schema).unwrap();
    prop_oneof![
        4 => valid,
        1 => (0i64..1000).prop_map(|n| json!({"n": n.to_string()})),
        1 => invalid,
    ]
    .boxed()
}

fn case() -> impl Strategy<Value = Case> {
    (
        proptest::collection::vec(plan(), ACTIONS),
        proptest::collection::vec(0..ACTIONS + 1, 0..2),
        proptest::collection::vec((0..ACTIONS + 1, params()), 1..8),
    )
        .prop_map(|(mut plans, denied, script)| {
            // An action that calls itself or one before it runs once: calls then go in chains, down to the depth
            // limit, rather than in trees of retries too big to journal.
            for (n, plan) in plans.iter_mut().enumerate() {
                if plan.calls.is_some_and(|target| target <= n) {
                    plan.max_attempts = 1;
                }
            }
            Case { plans, denied, script }
        })
}

fn cases() -> u32 {
    std::env::var("AGENTRY_DIFFERENTIAL_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(128)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn live_and_simulated_runs_agree_on_everything(case in case()) {
        let (live_state, live_journal) = live(&case);
        let (sim_state, sim_journal) = simulated(&case);
        prop_assert_eq!(&sim_state.heard, &live_state.heard, "the outcomes the agent heard");
        prop_assert_eq!(&sim_journal, &live_journal, "the journal");
        prop_assert!(!live_journal.is_empty());
    }
}
