//! A child process for the durability tests: a durable runtime on the data folder given, with `Worker` agents
//! (see `agentry_tests::durable`). The tests kill it with SIGKILL at chosen or random moments and start it
//! again on the same folder. Each mode prints one line when it reaches the state the test waits for.
//!
//! `durable_worker <dir> torture <agents>`: brings back what was alive (agents hibernate after 5 ms idle),
//! spawns the missing workers `w0`.., prints `ready`, then sends ticks for ever: every 2 ms to all but the last
//! worker (with runs that need approval, which it approves as they are asked for), and every 16 ms to the last,
//! which hibernates and thaws between them (each printed: `hibernated <agent>`, `thawed <agent>`).
//! `durable_worker <dir> settle`: brings back what was alive (thawing sleepers), approves what waits for
//! approval, waits until no run or job is going and every outcome and job end reached its agent, shuts down
//! gracefully and prints `settled <agents>`.
//! `durable_worker <dir> ask <action> <params-json>`: spawns `w0`, makes it ask for the run, prints `asked <run>`
//! once the run waits for approval or has started, then waits for ever.
//! `durable_worker <dir> approve <run>`: brings `w0` back, approves the run, prints `approved` once it completed.
//! `durable_worker <dir> wait`: brings back what was alive, prints `back`, and waits for ever.
//! `durable_worker <dir> resume`: brings `w0` back and prints its state as JSON once it has no run in flight.
//! `durable_worker <dir> arm <ms> <skip>`: spawns `w0`, arms a schedule, prints `armed` once it is durable.
//! `durable_worker <dir> alarm`: brings `w0` back; once its alarm fired or its schedule is gone, prints
//! `state <json> armed <schedules left>`.
//!
//! With `AGENTRY_WORKER_POSTGRES` set (a connection string), the journal is in that PostgreSQL database instead
//! of a SQLite file in the folder (the agents' drives stay in the folder).

use agentry::events::EventKind;
use agentry::id::AgentId;
use agentry::runtime::{Runtime, SpawnOptions};
use agentry::signal::Signal;
use agentry::store::{RunQuery, RunStatus};
use agentry_tests::durable::Worker;
use serde_json::{Value, json};
use std::time::Duration;

/// The variable that names a PostgreSQL database for the journal (a connection string).
const POSTGRES: &str = "AGENTRY_WORKER_POSTGRES";

fn worker(n: usize) -> AgentId {
    AgentId::new(format!("w{n}")).expect("a valid id")
}

fn signal(kind: &str, data: Value) -> Signal {
    Signal::new(kind, data).expect("a valid kind")
}

async fn open(dir: &str, hibernate: bool) -> Runtime {
    let builder =
        Runtime::builder().agent::<Worker>().expect("the worker registers").skill(agentry_tests::durable::extra());
    // The journal: in PostgreSQL when the test names a database, else a SQLite file in the folder.
    let builder = match std::env::var(POSTGRES) {
        Ok(url) => {
            let options = agentry::store::PostgresOptions { keep_inputs: true, ..Default::default() };
            let store = agentry::store::PostgresStore::connect_with(&url, options).expect("the journal connects");
            builder.data_dir(dir).store(std::sync::Arc::new(store))
        }
        Err(_) => {
            let options = agentry::store::SqliteOptions { keep_inputs: true, ..Default::default() };
            builder.durable_with(dir, options).expect("the journal opens")
        }
    };
    let mut builder = builder.snapshot_every(7);
    if hibernate {
        builder = builder.hibernate_after(Duration::from_millis(5));
    }
    let (runtime, recovery) = builder.open().await.expect("the runtime opens");
    for (agent, err) in &recovery.failed {
        eprintln!("could not bring back {agent}: {err}");
    }
    runtime
}

async fn spawn(runtime: &Runtime, n: usize) {
    spawn_with(runtime, n, agentry::policy::Policy::default()).await;
}

async fn spawn_with(runtime: &Runtime, n: usize, policy: agentry::policy::Policy) {
    let opts = SpawnOptions { id: Some(worker(n)), policy, ..SpawnOptions::default() };
    if runtime.get::<Worker>(&worker(n)).is_err() {
        runtime.spawn(Worker::default(), opts).await.expect("the worker starts");
    }
}

/// Whether any run is still going (queued, approved or running).
fn busy(runtime: &Runtime) -> bool {
    [RunStatus::Queued, RunStatus::Approved, RunStatus::Running]
        .into_iter()
        .any(|status| !runtime.store().query(&RunQuery { status: Some(status), ..RunQuery::default() }).is_empty())
}

/// Whether a job has not ended, or its end has not reached its agent, as the journal says.
fn jobs_pending(runtime: &Runtime, agents: &[AgentId]) -> bool {
    let Some(durable) = runtime.store().durable() else { return false };
    let Ok(revivals) = durable.revivals(agents) else { return true };
    revivals
        .into_iter()
        .flatten()
        .any(|revival| revival.jobs.iter().any(|job| !job.record.status.is_final() || (job.end.is_some() && !job.told)))
}

/// Approves every run the journal says waits for approval (asked before this process's event stream began).
async fn approve_waiting(runtime: &Runtime) {
    let query = RunQuery { status: Some(RunStatus::AwaitingApproval), ..RunQuery::default() };
    for run in runtime.store().query(&query) {
        let _ = runtime.decide(&run.agent, run.run, true).await;
    }
}

/// Whether an ended run's outcome is still on its way to its agent, as the journal says: a run that ended in its
/// task is journaled as ended before its outcome reaches the agent's server, so the journal saying no run is going
/// does not mean every outcome was handed over.
fn outcomes_pending(runtime: &Runtime, agents: &[AgentId]) -> bool {
    let Some(durable) = runtime.store().durable() else { return false };
    let Ok(revivals) = durable.revivals(agents) else { return true };
    revivals.into_iter().flatten().any(|revival| {
        revival.runs.iter().any(|run| {
            let by_agent = run.plan.as_ref().is_some_and(|plan| plan.by_agent);
            run.record.status().is_final() && by_agent && !run.delivered
        })
    })
}

/// Waits (checking every few milliseconds, at most 30 s) until no run is going, every agent's inbox is fed and
/// every ended run's outcome reached its agent.
async fn quiet(runtime: &Runtime, agents: &[AgentId]) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let mut fed = true;
        for agent in agents {
            // A round trip through the agent's mailbox: its inbox is fed before the answer.
            fed &= runtime.get::<Worker>(agent).map(|_| ()).is_ok();
            if let Ok(found) = runtime.get::<Worker>(agent) {
                let _ = found.state().await;
            }
        }
        approve_waiting(runtime).await;
        if fed && !busy(runtime) && !outcomes_pending(runtime, agents) && !jobs_pending(runtime, agents) {
            return;
        }
        if tokio::time::Instant::now() > deadline {
            eprintln!("runs still going after 30 s");
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (dir, mode) = (args[1].as_str(), args[2].as_str());
    let runtime = open(dir, mode == "torture").await;
    match mode {
        "torture" => {
            let agents: usize = args[3].parse().expect("a number of agents");
            for n in 0..agents {
                spawn(&runtime, n).await;
            }
            // Approvals: those asked before this process began, and each one asked from now on.
            let mut events = runtime.events();
            approve_waiting(&runtime).await;
            let approver = runtime.clone();
            tokio::spawn(async move {
                loop {
                    // Events missed while this task lagged behind are skipped (a missed approval is found in the
                    // journal by the next process).
                    let event = match events.recv().await {
                        Ok(event) => event,
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
                    };
                    match (&event.kind, event.run) {
                        (EventKind::ApprovalAsked { .. }, Some(run)) => {
                            let _ = approver.decide(&event.agent, run, true).await;
                        }
                        (EventKind::AgentHibernated, _) => println!("hibernated {}", event.agent),
                        (EventKind::AgentThawed, _) => println!("thawed {}", event.agent),
                        _ => {}
                    }
                }
            });
            println!("ready");
            for round in 0u64.. {
                for n in 0..agents.saturating_sub(1) {
                    let _ = runtime.send(&worker(n), signal("tick", json!({"risky": true})));
                }
                if round % 8 == 0 {
                    let _ = runtime.send(&worker(agents - 1), signal("tick", Value::Null));
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
        "settle" => {
            for n in 0..16 {
                let _ = runtime.thaw(&worker(n)).await;
            }
            let agents: Vec<AgentId> = (0..16).map(worker).filter(|a| runtime.get::<Worker>(a).is_ok()).collect();
            quiet(&runtime, &agents).await;
            runtime.shutdown(Duration::from_secs(5)).await;
            println!("settled {}", agents.len());
        }
        "ask" => {
            // An optional last argument: the approval timeout, in milliseconds.
            let mut policy = agentry::policy::Policy::default();
            if let Some(ms) = args.get(5).and_then(|ms| ms.parse().ok()) {
                policy = policy.approval_timeout(Some(Duration::from_millis(ms)));
            }
            spawn_with(&runtime, 0, policy).await;
            let mut events = runtime.events();
            let params: Value = serde_json::from_str(&args[4]).expect("params JSON");
            runtime.send(&worker(0), signal("do", json!({"action": args[3], "params": params}))).expect("sent");
            loop {
                let event = events.recv().await.expect("events");
                if matches!(event.kind, EventKind::ApprovalAsked { .. } | EventKind::ActionStarted { .. }) {
                    // What the test kills the process after must be on disk first.
                    if let Some(durable) = runtime.store().durable() {
                        let _ = durable.flushed().await;
                    }
                    println!("asked {}", event.run.map(|r| r.to_string()).unwrap_or_default());
                    break;
                }
            }
            std::future::pending::<()>().await;
        }
        "approve" => {
            let run: uuid::Uuid = args[3].parse().expect("a run id");
            let mut events = runtime.events();
            runtime.get::<Worker>(&worker(0)).expect("w0 is back").approve(run).await.expect("approved");
            loop {
                let event = events.recv().await.expect("events");
                if event.run == Some(run) && matches!(event.kind, EventKind::ActionCompleted { .. }) {
                    break;
                }
            }
            quiet(&runtime, &[worker(0)]).await;
            runtime.shutdown(Duration::from_secs(5)).await;
            println!("approved");
        }
        "try-approve" => {
            let run: uuid::Uuid = args[3].parse().expect("a run id");
            let tried = runtime.get::<Worker>(&worker(0)).expect("w0 is back").approve(run).await;
            runtime.shutdown(Duration::from_secs(5)).await;
            println!("tried {}", tried.map_or_else(|e| format!("{e:?}"), |()| "approved".to_owned()));
        }
        "wait" => {
            println!("back");
            std::future::pending::<()>().await;
        }
        "resume" => {
            quiet(&runtime, &[worker(0)]).await;
            let state = runtime.get::<Worker>(&worker(0)).expect("w0 is back").state().await.expect("state");
            println!("state {}", serde_json::to_string(&state.domain).expect("JSON"));
            std::future::pending::<()>().await;
        }
        "arm" => {
            spawn(&runtime, 0).await;
            let skip = args[4] == "skip";
            let data = json!({"after_ms": args[3].parse::<u64>().expect("ms"), "skip_if_missed": skip});
            let w0 = runtime.get::<Worker>(&worker(0)).expect("w0");
            w0.send(signal("arm", data)).expect("sent");
            let _ = w0.state().await;
            if let Some(durable) = runtime.store().durable() {
                let _ = durable.flushed().await;
            }
            println!("armed");
            std::future::pending::<()>().await;
        }
        "alarm" => {
            // Until the schedule is gone (fired, or skipped), at most 10 s.
            let w0 = runtime.get::<Worker>(&worker(0)).expect("w0 is back");
            let durable = runtime.store().durable().expect("a durable store");
            let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
            let (state, armed) = loop {
                // The schedules first: a schedule is forgotten only after its signal was handled, so a state read
                // after seeing it gone includes that signal.
                let armed = durable.schedules(&worker(0)).expect("schedules").len();
                let state = w0.state().await.expect("state").domain;
                if armed == 0 || tokio::time::Instant::now() > deadline {
                    break (state, armed);
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            };
            println!("state {} armed {armed}", serde_json::to_string(&state).expect("JSON"));
            runtime.shutdown(Duration::from_secs(5)).await;
        }
        other => panic!("unknown mode {other}"),
    }
}
