//! A policy change holds: it survives a supervised restart and a recovery from SQLite, narrows the agent's live
//! children, applies to runs that waited (for approval) when they run, and a skill it no longer allows stays
//! mounted but runs nothing. Each attack through real actors, a real SQLite file and a real loopback listener.

use agentry::action::{ActionSpec, Caller, CallerCan, Capability, DynAction, ErrorClass, OutcomeStatus};
use agentry::agent::{Agent, Reaction};
use agentry::effect::Effect;
use agentry::events::EventKind;
use agentry::id::{AgentId, SkillId};
use agentry::policy::Policy;
use agentry::runtime::{RestartMode, RestartPolicy, Runtime, SpawnOptions};
use agentry::signal::Signal;
use agentry::skill::{Skill, SkillDefinition};
use agentry_skills::{Http, System};
use agentry_tests::{Operated, wait_for};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// A skill with one harmless action.
fn desk() -> Skill {
    let read = ActionSpec::new("desk.read", "Reads the papers on the desk.").unwrap();
    Skill::builder("desk", "1.0.0")
        .dyn_action(DynAction::new(read, |_, _| Box::pin(async { Ok(json!("read")) })).unwrap())
        .build()
        .unwrap()
}

fn desk_id() -> SkillId {
    SkillId::new("desk").unwrap()
}

/// An agent that starts with `desk` and `system` mounted, hires a child (another clerk) when told to, and stops
/// itself on `quit`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Clerk;

impl Agent for Clerk {
    fn name() -> &'static str {
        "clerk"
    }

    fn start_skills() -> Result<Vec<(Skill, Value)>, agentry::skill::BuildError> {
        Ok(vec![(desk(), Value::Null), (System::skill()?, Value::Null)])
    }

    fn handle_signal(&self, signal: &Signal) -> Reaction<Self> {
        match (signal.kind().as_str(), signal.data()["id"].as_str().map(AgentId::new)) {
            ("hire", Some(Ok(child))) => Reaction::Keep(vec![Effect::spawn_agent(child, "clerk", Value::Null)]),
            ("quit", _) => Reaction::Keep(vec![Effect::stop("asked to quit")]),
            _ => Reaction::Ignore,
        }
    }
}

fn clerk() -> AgentId {
    AgentId::new("clerk").unwrap()
}

/// Whether `agent` may run `desk.read` now: `Ok` when it ran, `Err` with the refusal when the gate refused it.
async fn reads(runtime: &Runtime, agent: &AgentId) -> Result<(), String> {
    let outcome = runtime.invoke(agent, "desk.read", Value::Null).await.expect("the agent answers");
    match (outcome.status, outcome.error) {
        (OutcomeStatus::Completed, _) => Ok(()),
        (OutcomeStatus::Blocked, Some(error)) if error.class == ErrorClass::Denied => Err(error.message),
        other => panic!("neither ran nor refused: {other:?}"),
    }
}

fn no_desk() -> Policy {
    Policy::default().deny_skill(desk_id())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_change_survives_a_supervised_restart_and_a_recovery() {
    let folder = tempfile::tempdir().unwrap();
    let open = || async {
        let (runtime, _) = Runtime::builder()
            .agent::<Clerk>()
            .unwrap()
            .skill(desk())
            .durable(folder.path())
            .unwrap()
            .open()
            .await
            .unwrap();
        runtime
    };
    let runtime = open().await;
    let restart = RestartPolicy { mode: RestartMode::Permanent, ..RestartPolicy::default() };
    let opts = SpawnOptions { id: Some(clerk()), restart, ..SpawnOptions::default() };
    runtime.spawn(Clerk, opts).await.unwrap();
    assert_eq!(reads(&runtime, &clerk()).await, Ok(()));

    // The skill stays mounted, but the gate no longer runs its actions.
    runtime.set_policy(&clerk(), no_desk()).await.unwrap();
    let refused = reads(&runtime, &clerk()).await.unwrap_err();
    assert!(refused.contains("desk") && refused.contains("deny list"), "{refused}");
    assert!(runtime.mounted(&clerk()).await.unwrap().iter().any(|s| s.id() == &desk_id()), "still mounted");

    // The agent stops itself; its restart policy starts it again, under the policy it had.
    let mut events = runtime.events();
    runtime.send(&clerk(), Signal::new("quit", Value::Null).unwrap()).unwrap();
    wait_for(&mut events, |e| matches!(e.kind, EventKind::AgentRestarted { .. }) && e.agent == clerk()).await;
    assert!(reads(&runtime, &clerk()).await.is_err(), "a restart undid the policy change");

    // And a recovery from the journal after the runtime stops.
    runtime.shutdown(std::time::Duration::from_secs(5)).await;
    drop(runtime);
    let runtime = open().await;
    assert!(reads(&runtime, &clerk()).await.is_err(), "a recovery undid the policy change");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parents_new_policy_narrows_its_live_children() {
    let runtime = Runtime::builder().agent::<Clerk>().unwrap().skill(desk()).build();
    let policy = Policy::default().grant(Capability::SPAWN);
    let opts = SpawnOptions { id: Some(clerk()), policy, ..SpawnOptions::default() };
    let boss = runtime.spawn(Clerk, opts).await.unwrap();
    let (kid, grandkid) = (AgentId::new("kid").unwrap(), AgentId::new("grandkid").unwrap());
    let mut events = runtime.events();
    boss.send(Signal::new("hire", json!({"id": "kid"})).unwrap()).unwrap();
    wait_for(&mut events, |e| matches!(e.kind, EventKind::AgentStarted) && e.agent == kid).await;
    runtime.send(&kid, Signal::new("hire", json!({"id": "grandkid"})).unwrap()).unwrap();
    wait_for(&mut events, |e| matches!(e.kind, EventKind::AgentStarted) && e.agent == grandkid).await;
    assert_eq!(reads(&runtime, &grandkid).await, Ok(()));

    runtime.set_policy(&clerk(), no_desk()).await.unwrap();
    // Each narrows its own children before it takes the next message, and the call below comes after.
    for agent in [&clerk(), &kid] {
        assert!(reads(&runtime, agent).await.is_err(), "{agent} kept a broader policy than its parent's");
    }
    assert!(reads(&runtime, &grandkid).await.is_err(), "the grandchild kept a broader policy");
}

/// A loopback listener that tells, in order, the address of each connection it accepts.
async fn listener() -> (std::net::SocketAddr, tokio::sync::mpsc::UnboundedReceiver<std::net::SocketAddr>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tell, accepted) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((stream, peer)) = listener.accept().await {
            drop(stream);
            if tell.send(peer).is_err() {
                break;
            }
        }
    });
    (addr, accepted)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_waited_for_approval_runs_under_the_policy_of_now() {
    let (addr, mut accepted) = listener().await;
    let policy =
        Policy::default().grant(Capability::NET).allow_host("127.0.0.1").approval_at(Some(agentry::action::Risk::Low));
    let op = Operated::start(vec![Http::skill().unwrap()], policy.clone(), &[]).await;
    let operator = op.agent.id().clone();
    let mut events = op.runtime.events();
    let (caller, _heard) = Caller::new(CallerCan::default());
    let (runtime, agent) = (op.runtime.clone(), operator.clone());
    let url = format!("http://{addr}/secret");
    let call = tokio::spawn(async move { runtime.invoke_with(&agent, "http.get", json!({"url": url}), caller).await });
    let asked = wait_for(&mut events, |e| matches!(e.kind, EventKind::ApprovalAsked { .. })).await;

    // While it waits, the operator revokes the host; then someone approves the run.
    let mut revoked = policy;
    revoked.allow_hosts.clear();
    op.runtime.set_policy(&operator, revoked).await.unwrap();
    op.runtime.decide(&operator, asked.run.unwrap(), true).await.unwrap();
    let outcome = call.await.unwrap().unwrap();
    assert_eq!(outcome.status, OutcomeStatus::Blocked, "{outcome:?}");
    let error = outcome.error.unwrap();
    assert!(error.class == ErrorClass::Denied && error.message.contains("127.0.0.1"), "{error:?}");

    // Nothing reached the listener: a connection of our own is the first it accepts.
    let ours = tokio::net::TcpStream::connect(addr).await.unwrap();
    let first = accepted.recv().await.unwrap();
    assert_eq!(first, ours.local_addr().unwrap(), "the revoked host was reached");
}

/// An agent that emits `hello` where it is told (`say` with `to` an agent id, or `topic`), then answers the call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Talker;

impl Agent for Talker {
    fn name() -> &'static str {
        "talker"
    }

    fn handle_signal(&self, signal: &Signal) -> Reaction<Self> {
        use agentry::effect::Target;
        let data = signal.data();
        let to = match (data["to"].as_str().map(AgentId::new), data["topic"].as_str()) {
            (Some(Ok(agent)), _) => Target::Agent(agent),
            (_, Some(topic)) => Target::Topic(topic.to_owned()),
            _ => return Reaction::Ignore,
        };
        let hello = Signal::new("hello", Value::Null).unwrap();
        Reaction::Keep(vec![Effect::emit(hello, to), Effect::reply(signal.id(), json!("said"))])
    }
}

/// An operator confines where an agent (one a model drives, say) may emit: other agents and topics by pattern.
/// What it may not reach never gets the signal, and the refusal is announced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_confines_where_an_agent_may_emit() {
    use agentry::pattern::Pattern;
    let runtime = Runtime::builder().build();
    let spawn_listener = |id: &str| {
        let opts = SpawnOptions { id: Some(AgentId::new(id).unwrap()), ..SpawnOptions::default() };
        runtime.spawn(agentry_tests::Operator::default(), opts)
    };
    let friend = spawn_listener("team.friend").await.unwrap();
    let stranger = spawn_listener("stranger").await.unwrap();
    runtime.subscribe(friend.id(), "news.public");
    runtime.subscribe(stranger.id(), "secrets");
    let policy = Policy {
        emit_agents: Some(vec![Pattern::new("team.*").unwrap()]),
        emit_topics: Some(vec![Pattern::new("news.*").unwrap()]),
        ..Policy::default()
    };
    let talker = runtime.spawn(Talker, SpawnOptions { policy, ..SpawnOptions::default() }).await.unwrap();
    let mut events = runtime.events();
    let say = |data: Value| talker.call(Signal::new("say", data).unwrap(), agentry_tests::CALL);

    for refused in [json!({"to": "stranger"}), json!({"topic": "secrets"})] {
        say(refused.clone()).await.unwrap();
        let event = wait_for(&mut events, |e| matches!(e.kind, EventKind::EffectRefused { .. })).await;
        let EventKind::EffectRefused { refusal } = event.kind else { unreachable!() };
        assert!(matches!(refusal, agentry::effect::EffectRefusal::EmitNotAllowed { .. }), "{refused}: {refusal:?}");
    }
    for allowed in [json!({"to": "team.friend"}), json!({"topic": "news.public"})] {
        say(allowed).await.unwrap();
    }
    // The emits went out before each call was answered, so the listeners have them now (or never will).
    let friend_heard: agentry_tests::Operator = serde_json::from_value(heard(&friend).await).unwrap();
    assert_eq!(friend_heard.others, ["hello", "hello"], "from the agent and from the topic");
    let stranger_heard: agentry_tests::Operator = serde_json::from_value(heard(&stranger).await).unwrap();
    assert!(stranger_heard.others.is_empty(), "the stranger heard {:?}", stranger_heard.others);
}

/// What an `Operator` heard: its state, asked for with a call.
async fn heard(agent: &agentry::runtime::AgentRef<agentry_tests::Operator>) -> Value {
    agent.call(Signal::new("ask", Value::Null).unwrap(), agentry_tests::CALL).await.unwrap()
}

/// A new approval timeout applies to the runs already waiting, counted from when they were asked for: a run
/// that has waited longer than the new policy allows expires at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shorter_approval_timeout_applies_to_runs_already_waiting() {
    let policy = Policy::default().approval_at(Some(agentry::action::Risk::Low));
    let op = Operated::start(vec![desk()], policy.clone(), &[]).await;
    let operator = op.agent.id().clone();
    let waiting = op.run("desk.read", Value::Null).await;
    assert_eq!(waiting["outcome"]["status"], "awaiting_approval", "{waiting:#}");
    let run: uuid::Uuid = serde_json::from_value(waiting["run_id"].clone()).unwrap();
    op.runtime.set_policy(&operator, policy.approval_timeout(Some(std::time::Duration::ZERO))).await.unwrap();
    let late = op.runtime.decide(&operator, run, true).await.unwrap_err();
    assert!(matches!(late, agentry::runtime::RuntimeError::NotAwaitingApproval(r) if r == run), "{late}");
    assert_eq!(op.runtime.store().get(run).unwrap().status(), agentry::store::RunStatus::Blocked);
}

/// A child asleep when its parent's policy changed is narrowed when it thaws, even with its parent asleep by
/// then (the parent's policy read from its durable record).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sleeping_child_is_narrowed_when_it_thaws_even_with_its_parent_asleep() {
    let folder = tempfile::tempdir().unwrap();
    let (runtime, _) = Runtime::builder()
        .agent::<Clerk>()
        .unwrap()
        .skill(desk())
        .durable(folder.path())
        .unwrap()
        .open()
        .await
        .unwrap();
    let opts = SpawnOptions {
        id: Some(clerk()),
        policy: Policy::default().grant(Capability::SPAWN),
        ..SpawnOptions::default()
    };
    let boss = runtime.spawn(Clerk, opts).await.unwrap();
    let kid = AgentId::new("kid").unwrap();
    let mut events = runtime.events();
    boss.send(Signal::new("hire", json!({"id": "kid"})).unwrap()).unwrap();
    wait_for(&mut events, |e| matches!(e.kind, EventKind::AgentStarted) && e.agent == kid).await;
    runtime.hibernate(&kid).await.unwrap();
    runtime.set_policy(&clerk(), no_desk()).await.unwrap();
    runtime.hibernate(&clerk()).await.unwrap();
    // The kid thaws (for a signal), its parent still asleep.
    runtime.send(&kid, Signal::new("nothing", Value::Null).unwrap()).unwrap();
    wait_for(&mut events, |e| matches!(e.kind, EventKind::AgentThawed) && e.agent == kid).await;
    assert!(reads(&runtime, &kid).await.is_err(), "the kid kept a broader policy than its sleeping parent's");
    assert!(runtime.is_hibernating(&clerk()), "the parent stayed asleep");
}
