//! The simulator's own behaviour: determinism (also across a parallel sweep), virtual time, real and modelled
//! actions, each fault, contacts over a network, replay from a trace, and bad setups refused before running.

use agentry::action::{ActionSpec, Capability, DynAction, ErrorClass, Risk};
use agentry::agent::{Agent, Reaction};
use agentry::effect::{Effect, Target};
use agentry::id::{ActionId, AgentId};
use agentry::signal::Signal;
use agentry::skill::{Skill, SkillDefinition};
use agentry_sim::{
    ActionModel, Approvals, Contacts, Fault, Faults, Latency, Metrics, Network, Process, SimBuilder, SimError, Who,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::time::Duration;

/// Does what its signals say, and notes what comes back.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Worker {
    heard: Vec<String>,
    ticks: u64,
}

impl Agent for Worker {
    fn name() -> &'static str {
        "worker"
    }

    fn start_skills() -> Result<Vec<(Skill, Value)>, agentry::skill::BuildError> {
        Ok(vec![(tools(), Value::Null)])
    }

    fn handle_signal(&self, signal: &Signal) -> Reaction<Self> {
        let data = signal.data();
        let mut next = self.clone();
        match signal.kind().as_str() {
            "do" => {
                let action = ActionId::new(data["action"].as_str().unwrap_or("tools.echo")).unwrap();
                return Reaction::Keep(vec![Effect::run(action, data["params"].clone())]);
            }
            "later" => {
                let after = Duration::from_secs(data["secs"].as_u64().unwrap_or(1));
                let tick = signal.follow("tick").build().unwrap();
                return Reaction::Keep(vec![Effect::schedule("tick", after, tick)]);
            }
            "tell" => {
                let to = AgentId::new(data["to"].as_str().unwrap()).unwrap();
                let hello = signal.follow("hello").build().unwrap();
                return Reaction::Keep(vec![Effect::emit(hello, Target::Agent(to))]);
            }
            "tick" => next.ticks += 1,
            "hello" | "contact" => {
                next.heard.push(format!("{}:{}", signal.kind(), data["peer"].as_str().unwrap_or("")))
            }
            kind if signal.outcome().is_some() => {
                let report = signal.outcome().unwrap();
                let class = report.outcome.error.as_ref().map(|e| format!("{:?}", e.class)).unwrap_or_default();
                next.heard.push(format!("{kind}:{class}"));
            }
            _ => return Reaction::Ignore,
        }
        Reaction::Update(next, vec![])
    }
}

fn action(id: &str, risk: Risk, run: fn() -> agentry::action::ActionFuture) -> DynAction {
    let spec = ActionSpec::new(id, "a test action").unwrap().risk(risk).idempotent(true);
    DynAction::new(spec, move |_, _| run()).unwrap()
}

fn tools() -> Skill {
    Skill::builder("tools", "1.0.0")
        .dyn_action(action("tools.echo", Risk::Low, || Box::pin(async { Ok(json!("echo")) })))
        .dyn_action(action("tools.fetch", Risk::Low, || Box::pin(async { Ok(json!("real fetch")) })))
        .dyn_action(action("tools.wait", Risk::Low, || {
            let mut asked = false;
            Box::pin(std::future::poll_fn(move |_| {
                // Waits once, as a real wait on the world would.
                if asked {
                    return std::task::Poll::Ready(Ok(Value::Null));
                }
                asked = true;
                std::task::Poll::Pending
            }))
        }))
        .dyn_action(action("tools.launch", Risk::High, || Box::pin(async { Ok(json!("launched")) })))
        .dyn_action(calling("tools.relay", |ctx| Box::pin(async move { ctx.call("tools.fetch", Value::Null).await })))
        .dyn_action(calling("tools.spin", |ctx| {
            Box::pin(async move {
                loop {
                    ctx.call("tools.echo", Value::Null).await?;
                }
            })
        }))
        .build()
        .unwrap()
}

/// An action that makes nested calls through its context.
fn calling(id: &str, run: fn(agentry::action::ActionContext) -> agentry::action::ActionFuture) -> DynAction {
    let spec = ActionSpec::new(id, "a test action that calls others").unwrap().idempotent(true);
    DynAction::new(spec, move |_, ctx| run(ctx)).unwrap()
}

fn id(n: usize) -> AgentId {
    AgentId::new(format!("w{n}")).unwrap()
}

fn signal(kind: &str, data: Value) -> Signal {
    Signal::new(kind, data).unwrap()
}

fn world(seed: u64, faults: Faults, agents: usize) -> agentry_sim::Simulation<Worker> {
    let mut sim = SimBuilder::new(seed)
        .skill(tools())
        .model(
            "tools.fetch",
            ActionModel::new(Latency::Fixed(Duration::from_millis(250))).output(|_, _| json!("modelled")),
        )
        .unwrap()
        .faults(faults)
        .process(Process::new("contact", 1.0).unwrap().with_contacts(Contacts::WellMixed))
        .keep_trace(true)
        .keep_runs(true)
        .build()
        .unwrap();
    for n in 0..agents {
        sim.add(id(n), Worker::default()).unwrap();
    }
    sim
}

/// What an agent heard, the background contacts left out.
fn heard(sim: &agentry_sim::Simulation<Worker>, n: usize) -> Vec<String> {
    sim.state(&id(n)).unwrap().domain.heard.iter().filter(|h| !h.starts_with("contact:")).cloned().collect()
}

#[test]
fn the_same_seed_gives_the_same_run_and_another_seed_another() {
    let run = |seed| {
        let mut sim = world(seed, Faults { message_drop: 0.1, ..Faults::default() }, 20);
        for n in 0..20 {
            sim.send(&id(n), signal("tell", json!({"to": id((n + 1) % 20).as_str()}))).unwrap();
        }
        sim.run_until(Duration::from_secs(50));
        (sim.trace().hash(), sim.trace().len())
    };
    assert_eq!(run(1), run(1));
    assert_ne!(run(1).0, run(2).0);
    let sequential: Vec<String> = [1, 2, 3, 4].iter().map(|&s| run(s).0).collect();
    let parallel: Vec<String> =
        agentry_sim::sweep(&[()], &[1, 2, 3, 4], |_, seed| run(seed).0).into_iter().map(|r| r.result).collect();
    assert_eq!(sequential, parallel, "a parallel sweep gives each seed the hash it has alone");
}

#[test]
fn timers_advance_virtual_time_only() {
    let mut sim = world(1, Faults::default(), 1);
    sim.send(&id(0), signal("later", json!({"secs": 3600}))).unwrap();
    let began = std::time::Instant::now();
    sim.run_until(Duration::from_secs(3599));
    assert_eq!(sim.state(&id(0)).unwrap().domain.ticks, 0);
    sim.run_until(Duration::from_secs(3601));
    assert_eq!(sim.state(&id(0)).unwrap().domain.ticks, 1, "an hour of virtual time");
    assert!(began.elapsed() < Duration::from_secs(60), "and not an hour of real time");
}

#[test]
fn real_pure_actions_run_and_models_stand_in_for_the_rest() {
    let mut sim = world(1, Faults::default(), 1);
    for action in ["tools.echo", "tools.fetch", "tools.wait"] {
        sim.send(&id(0), signal("do", json!({"action": action, "params": {}}))).unwrap();
    }
    sim.run_until(Duration::from_secs(1));
    let runs = sim.runs();
    let fetch = runs.iter().find(|r| r.action.as_str() == "tools.fetch").unwrap();
    assert_eq!(fetch.ended - fetch.started, Duration::from_millis(250), "the model's latency, in virtual time");
    let wait = runs.iter().find(|r| r.action.as_str() == "tools.wait").unwrap();
    assert_eq!(wait.error, Some(ErrorClass::Critical), "an action that waits on the world needs a model");
    let heard = heard(&sim, 0);
    assert_eq!(heard.iter().filter(|h| h.starts_with("action.completed")).count(), 2, "{heard:?}");
}

#[test]
fn each_fault_happens_and_is_traced() {
    // Lost messages.
    let mut sim = world(1, Faults { message_drop: 1.0, ..Faults::default() }, 2);
    sim.send(&id(0), signal("tell", json!({"to": "w1"}))).unwrap();
    sim.run_until(Duration::from_millis(10));
    assert!(heard(&sim, 1).is_empty());
    assert!(
        sim.trace()
            .entries()
            .iter()
            .any(|e| matches!(e.what, agentry_sim::What::Fault { fault: Fault::MessageDropped { .. } }))
    );

    // Doubled messages.
    let mut sim = world(1, Faults { message_duplicate: 1.0, ..Faults::default() }, 2);
    sim.send(&id(0), signal("tell", json!({"to": "w1"}))).unwrap();
    sim.run_until(Duration::from_millis(10));
    assert_eq!(heard(&sim, 1), ["hello:", "hello:"]);

    // Failures, retried as the action's policy says, then reported.
    let mut sim = world(1, Faults { action_failure: 1.0, ..Faults::default() }, 1);
    sim.send(&id(0), signal("do", json!({"action": "tools.echo", "params": {}}))).unwrap();
    sim.run_until(Duration::from_secs(60));
    assert_eq!(heard(&sim, 0), ["action.failed:Transient"]);

    // Timeouts.
    let mut sim = world(1, Faults { action_timeout: 1.0, ..Faults::default() }, 1);
    sim.send(&id(0), signal("do", json!({"action": "tools.echo", "params": {}}))).unwrap();
    sim.run_until(Duration::from_secs(3600));
    assert_eq!(heard(&sim, 0), ["action.failed:Timeout"]);

    // Approvals denied: the run waits, then is blocked.
    let denying = Faults { approvals: Approvals::Deny { after: Duration::from_secs(5) }, ..Faults::default() };
    let mut sim = world(1, denying, 1);
    sim.send(&id(0), signal("do", json!({"action": "tools.launch", "params": {}}))).unwrap();
    sim.run_until(Duration::from_secs(10));
    assert_eq!(heard(&sim, 0), ["action.blocked:", "action.blocked:Denied"], "awaiting, then denied");
    let mut sim = world(1, Faults::default(), 1);
    sim.send(&id(0), signal("do", json!({"action": "tools.launch", "params": {}}))).unwrap();
    sim.run_until(Duration::from_secs(10));
    assert_eq!(heard(&sim, 0).last().unwrap(), "action.completed:", "granted");

    // Crashes: a run in flight comes back Interrupted; the state survives.
    let crashing = Faults { crash_rate: 1.0, ..Faults::default() };
    let mut sim = SimBuilder::<Worker>::new(3)
        .skill(tools())
        .model("tools.fetch", ActionModel::new(Latency::Fixed(Duration::from_secs(3600))))
        .unwrap()
        .faults(crashing)
        .keep_trace(true)
        .build()
        .unwrap();
    sim.add(id(0), Worker::default()).unwrap();
    sim.send(&id(0), signal("do", json!({"action": "tools.fetch", "params": {}}))).unwrap();
    sim.run_until(Duration::from_secs(100));
    assert_eq!(heard(&sim, 0), ["action.failed:Interrupted"]);
    assert!(
        sim.trace()
            .entries()
            .iter()
            .any(|e| matches!(e.what, agentry_sim::What::Fault { fault: Fault::Crashed { runs_lost: 1 } }))
    );
}

#[test]
fn network_contacts_stay_among_neighbours() {
    let ring = std::sync::Arc::new(Network::small_world(10, 2, 0.0, 1).unwrap());
    let mut sim = SimBuilder::<Worker>::new(5)
        .skill(tools())
        .process(Process::new("contact", 5.0).unwrap().reaching(Who::All).with_contacts(Contacts::Network(ring)))
        .build()
        .unwrap();
    for n in 0..10 {
        sim.add(id(n), Worker::default()).unwrap();
    }
    sim.run_until(Duration::from_secs(20));
    let heard = sim.state(&id(0)).unwrap().domain.heard.clone();
    assert!(heard.len() > 50, "{}", heard.len());
    assert!(heard.iter().all(|h| h == "contact:w1" || h == "contact:w9"), "{heard:?}");
}

#[test]
fn a_trace_replays_an_agent_s_history_step_by_step() {
    let mut sim = world(9, Faults { message_duplicate: 0.3, ..Faults::default() }, 5);
    for n in 0..5 {
        sim.send(&id(n), signal("do", json!({"action": "tools.fetch", "params": {}}))).unwrap();
        sim.send(&id(n), signal("tell", json!({"to": id((n + 2) % 5).as_str()}))).unwrap();
    }
    sim.run_until(Duration::from_secs(30));
    for n in 0..5 {
        let history = sim.trace().history::<Worker>(&id(n), sim.catalog()).unwrap();
        assert!(history.len() > 10);
        assert_eq!(&history.last().unwrap().state, sim.state(&id(n)).unwrap(), "replaying gives the same state");
        assert!(history.windows(2).all(|w| w[0].at <= w[1].at));
    }
    let unkept = SimBuilder::<Worker>::new(1).skill(tools()).build().unwrap();
    assert!(matches!(unkept.trace().history::<Worker>(&id(0), unkept.catalog()), Err(SimError::Replay { .. })));
}

#[test]
fn a_process_carries_its_data_with_the_contact_added() {
    let contact = Process::new("contact", 2.0).unwrap().data(json!({"topic": "tea", "peer": "overwritten"})).unwrap();
    let alone = Process::new("tip", 2.0).unwrap().data(json!({"amount": 3})).unwrap();
    let mut sim = SimBuilder::<Worker>::new(5)
        .skill(tools())
        .process(contact.with_contacts(Contacts::WellMixed))
        .process(alone)
        .keep_trace(true)
        .build()
        .unwrap();
    for n in 0..3 {
        sim.add(id(n), Worker::default()).unwrap();
    }
    sim.run_until(Duration::from_secs(5));
    let inputs: Vec<Signal> =
        sim.trace().history::<Worker>(&id(0), sim.catalog()).unwrap().into_iter().map(|m| m.input).collect();
    let contact = inputs.iter().find(|s| s.kind().as_str() == "contact").expect("a contact in 5 s at rate 2");
    assert_eq!(contact.data()["topic"], "tea");
    let peer = contact.data()["peer"].as_str().unwrap();
    assert!(peer != id(0).as_str() && (0..3).any(|n| id(n).as_str() == peer), "{peer}");
    let tip = inputs.iter().find(|s| s.kind().as_str() == "tip").expect("a tip in 5 s at rate 2");
    assert_eq!(tip.data(), &json!({"amount": 3}));
    assert_eq!(tip.source(), "agentry/sim");
    assert!(matches!(Process::new("tip", 1.0).unwrap().data(json!(3)), Err(SimError::BadProcessData { .. })));
}

#[test]
fn bad_setups_are_typed_errors_before_the_run() {
    assert!(matches!(Process::new("contact", -1.0), Err(SimError::BadNumber { .. })));
    assert!(matches!(Process::new("not a kind", 1.0), Err(SimError::BadKind { .. })));
    let unknown = SimBuilder::<Worker>::new(1).skill(tools()).model("tools.nothing", ActionModel::new(Latency::ZERO));
    assert!(matches!(unknown.unwrap().build(), Err(SimError::UnknownAction(_))));
    let odds = ActionModel::new(Latency::ZERO).fails(ErrorClass::Transient, 0.7).fails(ErrorClass::Critical, 0.7);
    assert!(matches!(
        SimBuilder::<Worker>::new(1).skill(tools()).model("tools.echo", odds),
        Err(SimError::BadNumber { .. })
    ));
    let twice = Metrics::<Worker>::every(Duration::from_secs(1)).metric("n", |_| 0.0).unwrap().metric("n", |_| 1.0);
    assert!(matches!(twice, Err(SimError::DuplicateMetric(_))));
    let faults = Faults { message_drop: 1.5, ..Faults::default() };
    assert!(matches!(SimBuilder::<Worker>::new(1).faults(faults).build(), Err(SimError::BadNumber { .. })));
    let mut sim = SimBuilder::<Worker>::new(1).skill(tools()).build().unwrap();
    sim.add(id(0), Worker::default()).unwrap();
    assert!(matches!(sim.add(id(0), Worker::default()), Err(SimError::DuplicateAgent(_))));
    assert!(matches!(sim.send(&id(7), signal("x", Value::Null)), Err(SimError::NoSuchAgent(_))));
}

/// The standard `system` skill, its `system.wait` modelled: a day of waiting is a day of virtual time.
#[test]
fn system_wait_advances_virtual_time_only() {
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    struct Sleeper {
        woke: Option<u64>,
    }
    impl Agent for Sleeper {
        fn start_skills() -> Result<Vec<(Skill, Value)>, agentry::skill::BuildError> {
            Ok(vec![(agentry_skills::System::skill().unwrap(), Value::Null)])
        }
        fn handle_signal(&self, signal: &Signal) -> Reaction<Self> {
            match signal.kind().as_str() {
                "nap" => {
                    Reaction::Keep(vec![Effect::run(ActionId::new("system.wait").unwrap(), json!({"ms": 86_400_000}))])
                }
                "action.completed" => {
                    Reaction::Update(Sleeper { woke: signal.outcome().and_then(|r| r.outcome.output.as_u64()) }, vec![])
                }
                _ => Reaction::Ignore,
            }
        }
    }
    let mut sim = SimBuilder::<Sleeper>::new(1)
        .skill(agentry_skills::System::skill().unwrap())
        .model("system.wait", ActionModel::waits_for("ms"))
        .unwrap()
        .build()
        .unwrap();
    sim.add(id(0), Sleeper::default()).unwrap();
    sim.send(&id(0), signal("nap", Value::Null)).unwrap();
    sim.run_until(Duration::from_secs(86_399));
    assert_eq!(sim.state(&id(0)).unwrap().domain.woke, None);
    sim.run_until(Duration::from_secs(86_401));
    assert_eq!(sim.state(&id(0)).unwrap().domain.woke, Some(86_400_000), "woke after a virtual day");
}

/// Children spawned through the shared interpretation (the `spawn` capability checked), stopped by their
/// parent, who hears of it.
#[test]
fn children_are_spawned_under_the_parent_s_policy_and_stopped_by_it() {
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    struct Parent {
        exited: Vec<String>,
    }
    impl Agent for Parent {
        fn handle_signal(&self, signal: &Signal) -> Reaction<Self> {
            let child = AgentId::new("child").unwrap();
            match signal.kind().as_str() {
                "spawn" => Reaction::Keep(vec![Effect::spawn_agent(child, Self::name(), json!(Parent::default()))]),
                "stop" => Reaction::Keep(vec![Effect::stop_child(child)]),
                "agent.child_exited" | "agent.spawn_failed" => {
                    let mut next = self.clone();
                    next.exited.push(signal.kind().to_string());
                    Reaction::Update(next, vec![])
                }
                _ => Reaction::Ignore,
            }
        }
    }
    let mut sim = SimBuilder::<Parent>::new(1).keep_trace(true).build().unwrap();
    let parent = AgentId::new("parent").unwrap();
    sim.add(parent.clone(), Parent::default()).unwrap();
    sim.send(&parent, signal("spawn", Value::Null)).unwrap();
    sim.run_until(Duration::from_secs(1));
    assert_eq!(sim.population(), 1, "no `spawn` capability: refused");
    assert!(sim.trace().entries().iter().any(|e| matches!(&e.what, agentry_sim::What::Refused { .. })));

    let mut sim = SimBuilder::<Parent>::new(1).build().unwrap();
    let policy = agentry::policy::Policy::default().grant(agentry::action::Capability::SPAWN);
    sim.add_with(parent.clone(), Parent::default(), policy, 8).unwrap();
    sim.send(&parent, signal("spawn", Value::Null)).unwrap();
    sim.run_until(Duration::from_secs(1));
    assert_eq!(sim.population(), 2);
    sim.send(&parent, signal("stop", Value::Null)).unwrap();
    sim.run_until(Duration::from_secs(2));
    assert_eq!(sim.population(), 1);
    assert_eq!(sim.state(&parent).unwrap().domain.exited, ["agent.child_exited"]);
}

/// A run's table goes out as CSV and JSON, and as an SVG plot.
#[test]
fn tables_and_plots_are_written() {
    let folder = tempfile::tempdir().unwrap();
    let metrics = Metrics::<Worker>::every(Duration::from_secs(1))
        .metric("contacts", |c| c.agents.iter().map(|a| a.domain.heard.len()).sum::<usize>() as f64)
        .unwrap();
    let mut sim = SimBuilder::new(1)
        .skill(tools())
        .process(Process::new("contact", 1.0).unwrap().with_contacts(Contacts::WellMixed))
        .metrics(metrics)
        .build()
        .unwrap();
    for n in 0..10 {
        sim.add(id(n), Worker::default()).unwrap();
    }
    sim.run_until(Duration::from_secs(10));
    let csv = folder.path().join("contacts.csv");
    sim.table().write_csv(&csv).unwrap();
    let text = std::fs::read_to_string(&csv).unwrap();
    assert!(text.starts_with("time,contacts\n0,"), "{text}");
    assert_eq!(text.lines().count(), 12, "a header and a row a second, both ends included");
    assert_eq!(sim.table().to_json()["columns"], json!(["contacts"]));
    let svg = folder.path().join("contacts.svg");
    let series = agentry_sim::plot::Series::measured("contacts", sim.table().series("contacts"));
    agentry_sim::plot::time_series(&svg, "Contacts", "time", "contacts", &[series]).unwrap();
    let drawn = std::fs::read_to_string(&svg).unwrap();
    assert!(drawn.starts_with("<svg") && drawn.contains("Contacts") && drawn.contains("<polyline"), "an SVG chart");
}

/// A real action that reads `ctx.now()` and `ctx.seed()` gets the virtual time and a seed that the
/// simulation's seed decides.
#[test]
fn a_real_action_reads_virtual_time_and_a_seed_the_simulation_decides() {
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    struct Stamper {
        stamps: Vec<Value>,
    }
    impl Agent for Stamper {
        fn handle_signal(&self, signal: &Signal) -> Reaction<Self> {
            match signal.kind().as_str() {
                "stamp" => Reaction::Keep(vec![Effect::run(ActionId::new("clock.stamp").unwrap(), json!({}))]),
                "action.completed" => {
                    let mut next = self.clone();
                    next.stamps.extend(signal.outcome().map(|r| r.outcome.output.clone()));
                    Reaction::Update(next, vec![])
                }
                _ => Reaction::Ignore,
            }
        }
    }
    let spec = ActionSpec::new("clock.stamp", "Says when and with which seed it ran.").unwrap().idempotent(true);
    let stamp = DynAction::new(spec, |_, ctx| {
        Box::pin(async move { Ok(json!({"now": ctx.now().timestamp(), "seed": ctx.seed()})) })
    })
    .unwrap();
    let clock = Skill::builder("clock", "1.0.0").dyn_action(stamp).build().unwrap();
    let stamps = |seed: u64| {
        let mut sim = SimBuilder::<Stamper>::new(seed).skill(clock.clone()).build().unwrap();
        sim.add(id(0), Stamper::default()).unwrap();
        sim.mount(&id(0), &agentry::id::SkillId::new("clock").unwrap(), Value::Null).unwrap();
        sim.send_after(&id(0), signal("stamp", Value::Null), Duration::from_secs(90)).unwrap();
        sim.send_after(&id(0), signal("stamp", Value::Null), Duration::from_secs(150)).unwrap();
        sim.run_until(Duration::from_secs(151));
        sim.state(&id(0)).unwrap().domain.stamps.clone()
    };
    let first = stamps(7);
    assert_eq!(first.len(), 2);
    let (at90, at150) = (first[0]["now"].as_i64().unwrap(), first[1]["now"].as_i64().unwrap());
    assert_eq!(at150 - at90, 60, "the action's clock is the virtual one");
    assert_ne!(first[0]["seed"], first[1]["seed"], "each run its own seed");
    assert_eq!(stamps(7), first, "the same seed, the same time and seeds in the actions");
    let other = stamps(8);
    assert_ne!(other[0]["seed"], first[0]["seed"], "another simulation seed, another action seed");
    assert_eq!(other[0]["now"], first[0]["now"], "virtual time does not depend on the seed");
}

/// A learner of the `gossip` skill that can also be told to quit (it stops).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Mortal;

impl Agent for Mortal {
    fn name() -> &'static str {
        "mortal"
    }

    fn handle_signal(&self, signal: &Signal) -> Reaction<Self> {
        match signal.kind().as_str() {
            "teach" => Reaction::Keep(vec![Effect::mount_skill(gossip_id(), Value::Null)]),
            "quit" => Reaction::Keep(vec![Effect::stop("told to quit")]),
            _ => Reaction::Ignore,
        }
    }
}

fn gossip_id() -> agentry::id::SkillId {
    agentry::id::SkillId::new(agentry_sim::models::sis::SKILL).unwrap()
}

#[test]
fn a_skill_count_kept_as_skills_come_and_go_equals_a_census_of_every_agent() {
    let metrics = Metrics::every(Duration::from_secs(1))
        .metric("kept", |census| census.with_skill(&gossip_id()) as f64)
        .unwrap()
        .metric("counted", |census| census.agents.iter().filter(|a| a.is_mounted(&gossip_id())).count() as f64)
        .unwrap()
        .metric("alive", |census| census.agents.len() as f64)
        .unwrap();
    let mut sim = SimBuilder::new(7)
        .skill(agentry_sim::models::sis::gossip())
        .process(
            Process::new("contact", 0.6)
                .unwrap()
                .reaching(Who::WithSkill(gossip_id()))
                .with_contacts(Contacts::WellMixed),
        )
        .process(Process::new("forget", 0.2).unwrap().reaching(Who::WithSkill(gossip_id())))
        .process(Process::new("quit", 0.02).unwrap().reaching(Who::All))
        .metrics(metrics)
        .build()
        .unwrap();
    for n in 0..300 {
        sim.add(id(n), Mortal).unwrap();
        if n % 2 == 0 {
            sim.mount(&id(n), &gossip_id(), Value::Null).unwrap();
        }
    }
    sim.run_until(Duration::from_secs(40));
    let table = sim.table();
    let (kept, counted, alive) = (table.series("kept"), table.series("counted"), table.series("alive"));
    assert_eq!(kept, counted, "the kept count is the census's count at every sample");
    assert!(kept.iter().map(|(_, n)| *n as u64).collect::<std::collections::BTreeSet<_>>().len() > 5, "it moved");
    assert!(alive.last().unwrap().1 < 300.0, "some agents quit, some of them knowing the skill");
}

#[test]
fn a_simulation_can_be_sent_to_and_shared_between_threads() {
    fn shareable<T: Send + Sync>() {}
    shareable::<agentry_sim::Simulation<agentry_sim::models::sis::Learner>>();
}

/// Mounts every standard skill and asks for an action of each; notes how each ended and each signal it got.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Everything {
    heard: Vec<Value>,
}

/// An action of each standard skill, with params that reach its code.
fn every_standard_action() -> Vec<(&'static str, Value)> {
    vec![
        ("system.schedule", json!({"kind": "later", "after_ms": 1000, "data": {"n": 1}})),
        ("system.log", json!({"message": "hello"})),
        ("system.wait", json!({"ms": 10})),
        ("memory.memorize", json!({"subject": "ann", "predicate": "lives_in", "object": "paris"})),
        ("memory.recall", json!({"query": "ann"})),
        ("fs.write", json!({"path": "a.txt", "content": "hi"})),
        ("fs.list", json!({"path": "."})),
        ("http.get", json!({"url": "https://example.com/"})),
        ("jobs.submit", json!({"action": "system.log", "params": {"message": "later"}})),
        ("arithmetic.add", json!({"a": 1, "b": 2})),
    ]
}

impl Agent for Everything {
    fn name() -> &'static str {
        "everything"
    }

    fn handle_signal(&self, signal: &Signal) -> Reaction<Self> {
        let mut next = self.clone();
        if signal.kind().as_str() == "go" {
            let runs = every_standard_action()
                .into_iter()
                .map(|(action, params)| Effect::run(ActionId::new(action).unwrap(), params))
                .collect();
            return Reaction::Keep(runs);
        }
        // Everything the signal says, its id and time included: a signal an action made counts here too.
        next.heard.push(json!({"kind": signal.kind().as_str(), "id": signal.id(), "data": signal.data()}));
        Reaction::Update(next, vec![])
    }
}

/// Every standard skill mounted, an action of each asked for: two runs of one seed have one trace hash, since
/// what an action reads of time or chance (a scheduled signal's id and times, a memory's transaction time) comes
/// from its context, which the simulation decides.
#[test]
fn the_standard_skills_are_deterministic_in_simulation() {
    use agentry::skill::SkillDefinition as _;
    let skills = || {
        vec![
            agentry_skills::System::skill().unwrap(),
            agentry_skills::Memory::skill().unwrap(),
            agentry_skills::Files::skill().unwrap(),
            agentry_skills::Http::skill().unwrap(),
            agentry_skills::Jobs::skill().unwrap(),
            agentry_testkit::demo::Arithmetic::skill().unwrap(),
            agentry_testkit::demo::Counter::skill().unwrap(),
        ]
    };
    let run = |seed: u64| {
        let mut builder = SimBuilder::<Everything>::new(seed);
        for skill in skills() {
            builder = builder.skill(skill);
        }
        let mut sim = builder.model("system.wait", ActionModel::waits_for("ms")).unwrap().build().unwrap();
        // Every capability the standard skills need: their code runs (and fails where a simulation has no
        // disk or network) rather than the gate refusing it.
        let mut policy = agentry::policy::Policy::default();
        for capability in [Capability::FS, Capability::NET, Capability::MEMORY] {
            policy = policy.grant(capability);
        }
        sim.add_with(id(0), Everything::default(), policy, 16).unwrap();
        for skill in skills() {
            sim.mount(&id(0), skill.id(), Value::Null).unwrap_or_else(|e| panic!("{} mounts: {e}", skill.id()));
        }
        sim.send_after(&id(0), signal("go", Value::Null), Duration::from_secs(5)).unwrap();
        sim.run_until(Duration::from_secs(60));
        (sim.trace().hash(), sim.state(&id(0)).unwrap().domain.heard.clone())
    };
    let (hash, heard) = run(11);
    let later = heard.iter().find(|h| h["kind"] == "later").expect("the scheduled signal came");
    assert_eq!(later["data"], json!({"n": 1}), "{heard:#?}");
    assert_eq!(heard.len(), every_standard_action().len() + 1, "an outcome of each, and the scheduled signal");
    let refused = |h: &&Value| h["data"]["outcome"]["output_text"].as_str().is_some_and(|t| t.contains("capabilit"));
    let gated: Vec<&Value> = heard.iter().filter(refused).collect();
    assert!(gated.is_empty(), "each action got past the gate to its own code: {gated:#?}");
    assert_eq!(run(11), (hash, heard), "one seed, one run: the same trace and the same signals");
}

/// A nested call in a simulation goes through the gate and plays the called action as live: its model's latency
/// is the caller's, its output the caller's result, and both runs are kept with the callee's caller named. An
/// action that calls without end is stopped with a `Critical` error instead of holding the simulation.
#[test]
fn nested_calls_play_in_virtual_time_and_an_endless_caller_is_stopped() {
    let mut sim = world(3, Faults::default(), 1);
    sim.send(&id(0), signal("do", json!({"action": "tools.relay"}))).unwrap();
    sim.send_after(&id(0), signal("do", json!({"action": "tools.spin"})), Duration::from_secs(1)).unwrap();
    sim.run_until(Duration::from_secs(5));
    let heard = heard(&sim, 0);
    assert_eq!(heard, vec!["action.completed:".to_owned(), "action.failed:Critical".to_owned()], "{heard:?}");
    let relay = sim.runs().iter().find(|r| r.action.as_str() == "tools.relay").expect("the relay ran");
    let fetch = sim.runs().iter().find(|r| r.action.as_str() == "tools.fetch").expect("its call ran");
    assert_eq!(relay.ended - relay.started, Duration::from_millis(250), "the call's latency is the caller's");
    assert!(fetch.parent_run.is_some() && relay.parent_run.is_none());
}

#[test]
fn a_restored_agent_replays_recorded_runs_and_refuses_the_rest_without_running_them() {
    use agentry::action::Outcome;
    use agentry_sim::Recording;
    // A recorded fetch that took 3 s and returned what the world said then; the model would say "modelled".
    let mut recording = Recording::default();
    let fetched = Outcome::completed(json!("recorded fetch"), Duration::from_secs(3), 1);
    let fetch = ActionId::new("tools.fetch").unwrap();
    recording.record(
        fetch.clone(),
        agentry::store::params_digest(&json!({"n": 1})),
        vec![(Duration::from_secs(3), fetched)],
    );
    // A run that had not ended where it was recorded.
    recording.record(fetch, agentry::store::params_digest(&json!({"n": 2})), vec![]);
    assert_eq!(recording.left(), 2);
    let mut sim = SimBuilder::<Worker>::new(1)
        .skill(tools())
        .model("tools.fetch", ActionModel::new(Latency::ZERO).output(|_, _| json!("modelled")))
        .unwrap()
        .replaying(recording)
        .keep_runs(true)
        .keep_trace(true)
        .build()
        .unwrap();
    // The state it had elsewhere, with its start skill mounted (restored, not started again).
    let (mut state, _) = agentry::agent::start(id(0), Worker::default(), &agentry::policy::Policy::default()).unwrap();
    state.domain.ticks = 7;
    sim.restore(state, agentry::policy::Policy::default(), 8).unwrap();
    let recorded = signal("do", json!({"action": "tools.fetch", "params": {"n": 1}}));
    let stamped = (recorded.id(), recorded.time());
    sim.send_recorded(&id(0), recorded, Duration::from_secs(1)).unwrap();
    sim.send_recorded(&id(0), signal("do", json!({"action": "tools.echo", "params": null})), Duration::from_secs(2))
        .unwrap();
    sim.send_recorded(
        &id(0),
        signal("do", json!({"action": "tools.fetch", "params": {"n": 2}})),
        Duration::from_secs(2),
    )
    .unwrap();
    sim.run();
    let runs = sim.runs();
    assert_eq!(runs.len(), 2, "{runs:?}");
    let run = |action: &str| runs.iter().find(|r| r.action.as_str() == action).expect("a run");
    let (fetch, echo) = (run("tools.fetch"), run("tools.echo"));
    assert!(fetch.replayed, "{runs:?}");
    assert_eq!(fetch.ended - fetch.requested, Duration::from_secs(3), "as long as it took where recorded");
    assert!(!echo.replayed, "{runs:?}");
    assert_eq!((echo.error, echo.attempts), (Some(ErrorClass::Critical), 0), "never recorded: refused, not run");
    let state = sim.state(&id(0)).unwrap();
    assert_eq!(state.domain.ticks, 7, "restored as it was");
    assert_eq!(
        state.domain.heard,
        vec!["action.failed:Critical".to_owned(), "action.completed:".to_owned()],
        "the refusal at 2 s, then the recorded outcome at 4 s (not the model's)"
    );
    assert_eq!(sim.recording().map(Recording::left), Some(0), "the run that never ended was asked again too");
    assert_eq!(sim.recording().map(Recording::unrecorded), Some(1), "the echo");
    let agent = id(0);
    let (at, first) = sim.trace().inputs(&agent).next().expect("an input traced");
    assert_eq!((at, first.id(), first.time()), (Duration::from_secs(1), stamped.0, stamped.1), "given as recorded");
}
