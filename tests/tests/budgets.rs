//! Budgets and rate limits on live agents: a spent budget refuses with `BudgetExceeded`, or pauses the run for
//! approval; what was spent survives a restart on a real SQLite file; a rate limit holds under a burst, refusing
//! with `RateLimited` or holding the runs over it until it lets them through. Real actors, real journal.

use agentry::action::{ActionSpec, DynAction};
use agentry::events::EventKind;
use agentry::id::{AgentId, SkillId};
use agentry::pattern::Pattern;
use agentry::policy::{Budget, Policy, RateLimit, WhenLimited, WhenSpent};
use agentry::runtime::{Runtime, SpawnOptions};
use agentry::skill::Skill;
use agentry_tests::{Operated, Operator, wait_for};
use serde_json::json;
use std::num::NonZeroU32;
use std::time::Duration;

/// `meter.spend` costs what its params say; `meter.tick` costs nothing.
fn meter_skill() -> Skill {
    let spend = ActionSpec::new("meter.spend", "costs what it is told").expect("a valid id");
    let spend = DynAction::new(spend, |params, ctx| {
        Box::pin(async move {
            ctx.cost(params["cost"].as_f64().unwrap_or_default());
            Ok(json!("spent"))
        })
    })
    .expect("a valid action");
    let tick = ActionSpec::new("meter.tick", "does nothing").expect("a valid id");
    let tick = DynAction::new(tick, |_, _| Box::pin(async { Ok(json!("tick")) })).expect("a valid action");
    Skill::builder("meter", "1.0.0").dyn_action(spend).dyn_action(tick).build().expect("a valid skill")
}

fn budget(limit: f64, when_spent: WhenSpent) -> Budget {
    Budget {
        actions: Pattern::new("meter.*").expect("a valid pattern"),
        limit,
        window: Duration::from_secs(3600),
        when_spent,
    }
}

fn rate(runs: u32, per: Duration, when_limited: WhenLimited) -> RateLimit {
    RateLimit {
        actions: Pattern::new("meter.tick").expect("a valid pattern"),
        runs: NonZeroU32::new(runs).expect("not zero"),
        per,
        when_limited,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spent_budget_refuses_and_stays_spent_after_a_restart() {
    let data = tempfile::tempdir().expect("a folder");
    let policy = Policy::default().budget(budget(10.0, WhenSpent::Refuse));
    let id = AgentId::new("spender").expect("a valid id");
    {
        let (runtime, _) = Runtime::builder()
            .skill(meter_skill())
            .agent::<Operator>()
            .expect("registered")
            .durable(data.path())
            .expect("opens")
            .open()
            .await
            .expect("starts");
        let opts = SpawnOptions { id: Some(id.clone()), policy, ..SpawnOptions::default() };
        let agent = runtime.spawn(Operator::default(), opts).await.expect("spawned");
        agent.mount(&SkillId::new("meter").expect("an id"), json!(null)).await.expect("mounted");
        let operated = Operated::wrap(runtime, agent);
        for _ in 0..3 {
            operated.output("meter.spend", json!({"cost": 4})).await;
        }
        let (class, message) = operated.failure("meter.spend", json!({"cost": 4})).await;
        assert_eq!(class, "budget_exceeded", "{message}");
        assert!(message.contains("12 spent of 10"), "{message}");
        operated.runtime.shutdown(Duration::from_secs(10)).await;
    }
    // The same data folder, a new process's runtime: the spending comes back from the journal.
    let (runtime, recovery) = Runtime::builder()
        .skill(meter_skill())
        .agent::<Operator>()
        .expect("registered")
        .durable(data.path())
        .expect("opens")
        .open()
        .await
        .expect("recovers");
    assert!(recovery.failed.is_empty(), "{:?}", recovery.failed);
    let agent = runtime.get::<Operator>(&id).expect("recovered");
    let operated = Operated::wrap(runtime, agent);
    let (class, _) = operated.failure("meter.spend", json!({"cost": 1})).await;
    assert_eq!(class, "budget_exceeded", "the budget was spent before the restart");
    operated.runtime.shutdown(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spent_budget_that_asks_pauses_the_run_for_approval() {
    let policy = Policy::default().budget(budget(5.0, WhenSpent::Ask));
    let op = Operated::start(vec![meter_skill()], policy, &[]).await;
    op.output("meter.spend", json!({"cost": 6})).await;
    let mut events = op.runtime.events();
    let signal =
        agentry::signal::Signal::new("do", json!({"action": "meter.spend", "params": {"cost": 1}})).expect("a kind");
    let reply = {
        let agent = op.agent.clone();
        tokio::spawn(async move { agent.call(signal, agentry_tests::CALL).await })
    };
    let asked = wait_for(&mut events, |e| matches!(e.kind, EventKind::ApprovalAsked { .. })).await;
    op.agent.approve(asked.run.expect("a run")).await.expect("approved");
    // The operator replies to the run's last outcome; the first it hears is "awaiting approval", so wait for the
    // completion event of this run, then for its reply.
    let run = asked.run;
    wait_for(&mut events, |e| matches!(e.kind, EventKind::ActionCompleted { .. }) && e.run == run).await;
    let reply = reply.await.expect("joined").expect("a reply");
    assert!(reply["kind"] == "action.blocked" || reply["kind"] == "action.completed", "{reply:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limit_refuses_a_burst_beyond_it() {
    let policy = Policy::default().rate_limit(rate(3, Duration::from_secs(3600), WhenLimited::Refuse));
    let op = Operated::start(vec![meter_skill()], policy, &[]).await;
    let burst = (0..6).map(|_| op.run("meter.tick", json!({})));
    let replies = futures_util::future::join_all(burst).await;
    let completed = replies.iter().filter(|r| r["kind"] == "action.completed").count();
    let limited: Vec<_> = replies.iter().filter(|r| r["outcome"]["error"]["class"] == "rate_limited").collect();
    assert_eq!((completed, limited.len()), (3, 3), "{replies:#?}");
    let message = limited[0]["outcome"]["error"]["message"].as_str().expect("a message");
    assert!(message.contains("3 runs per 3600000ms"), "{message}");
    // Another action is not under that limit.
    op.output("meter.spend", json!({"cost": 0})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limit_that_queues_holds_the_runs_over_it_and_lets_them_through_in_turn() {
    let per = Duration::from_millis(300);
    let policy = Policy::default().rate_limit(rate(2, per, WhenLimited::Queue));
    let op = Operated::start(vec![meter_skill()], policy, &[]).await;
    let burst = (0..5).map(|_| op.run("meter.tick", json!({})));
    let replies = futures_util::future::join_all(burst).await;
    assert!(replies.iter().all(|r| r["kind"] == "action.completed"), "{replies:#?}");
    // Two at once, then one every 150 ms: the journal's start times say the limit held.
    let query = agentry::store::RunQuery {
        action: Some(agentry::id::ActionId::new("meter.tick").expect("an id")),
        ..Default::default()
    };
    let mut started: Vec<_> = op
        .runtime
        .store()
        .query(&query)
        .iter()
        .filter_map(|r| r.history.iter().find(|(s, _)| *s == agentry::store::RunStatus::Running).map(|(_, at)| *at))
        .collect();
    started.sort();
    assert_eq!(started.len(), 5);
    let interval = chrono::Duration::from_std(per / 2).expect("a duration");
    // GCRA: the k-th run over the burst starts no sooner than k intervals after the first.
    for (k, at) in started.iter().enumerate().skip(2) {
        let k = i32::try_from(k - 1).expect("small");
        assert!(*at - started[0] >= interval * k - chrono::Duration::milliseconds(2), "{started:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_held_by_a_rate_limit_is_journaled_and_a_shutdown_ends_it() {
    let policy = Policy::default().rate_limit(rate(1, Duration::from_secs(3600), WhenLimited::Queue));
    let op = Operated::start(vec![meter_skill()], policy, &[]).await;
    op.output("meter.tick", json!({})).await;
    let mut events = op.runtime.events();
    // The second is held for an hour: it is in the journal while it waits.
    let agent = op.agent.clone();
    let held = tokio::spawn(async move {
        let signal = agentry::signal::Signal::new("do", json!({"action": "meter.tick", "params": {}})).expect("a kind");
        agent.call(signal, agentry_tests::CALL).await
    });
    let queued = wait_for(&mut events, |e| matches!(e.kind, EventKind::ActionQueued { .. })).await;
    let run = queued.run.expect("a run");
    // The operator's next message is taken after the turn that held the run: a barrier, not a wait.
    op.operator().await;
    assert!(op.runtime.store().get(run).is_some(), "the held run is journaled");
    op.runtime.shutdown(Duration::from_secs(5)).await;
    let record = op.runtime.store().get(run).expect("still there");
    assert!(record.status().is_final(), "a shutdown ends it, never leaves it queued: {record:?}");
    let _ = held.await;
}
