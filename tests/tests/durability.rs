//! Durable agents against real crashes: a child process (`durable_worker`) runs `Worker` agents on a SQLite
//! journal, the test kills it with SIGKILL, starts it again on the same folder, and checks what the journal, the
//! input log and the ledger files say. Each test runs again with the journal in PostgreSQL (a server of its own,
//! started for the test), as `…_on_postgres`.
//!
//! The torture test kills it at seeded random moments, `AGENTRY_TORTURE_KILLS` times (50 by default; say
//! `AGENTRY_TORTURE_KILLS=1000` for a longer run by hand), with seed `AGENTRY_TORTURE_SEED`, while its agents
//! run ledger actions, submit jobs, mount and unmount a skill, wait for approvals, and (the last one) hibernate
//! and thaw. On PostgreSQL it kills `AGENTRY_TORTURE_KILLS_POSTGRES` times (20 by default).

use agentry::agent::{AgentState, step};
use agentry::id::AgentId;
use agentry::signal::Signal;
use agentry::store::{PostgresOptions, PostgresStore, RunQuery, RunRecord, RunStatus, SqliteStore, Store};
use agentry_tests::durable::{LINES, PURE, Worker, catalog, lines as ledger_lines};
use agentry_tests::postgres::Postgres;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const WORKER: &str = env!("CARGO_BIN_EXE_durable_worker");

/// Where a worker keeps its agents' drives (a folder) and its journal: a SQLite file in the folder, or a
/// PostgreSQL server of the test's own.
struct At {
    dir: PathBuf,
    postgres: Option<Postgres>,
}

impl At {
    fn sqlite(dir: &Path) -> Self {
        Self { dir: dir.to_path_buf(), postgres: None }
    }

    /// The journal in a PostgreSQL server started for the test; `None` (after saying so loudly) where there is
    /// none.
    fn postgres(dir: &Path, test: &str) -> Option<Self> {
        let postgres = agentry_tests::postgres::or_skip(test)?;
        Some(Self { dir: dir.to_path_buf(), postgres: Some(postgres) })
    }

    /// The journal, opened as the worker opens it.
    fn store(&self) -> Box<dyn Store> {
        match &self.postgres {
            Some(postgres) => {
                let options = PostgresOptions { keep_inputs: true, ..Default::default() };
                Box::new(PostgresStore::connect_with(&postgres.url(), options).expect("the journal connects"))
            }
            None => Box::new(SqliteStore::open(self.dir.join("journal.db")).expect("the journal opens")),
        }
    }

    /// A ledger file of an agent's drive.
    fn ledger(&self, agent: &str) -> PathBuf {
        self.dir.join("agents").join(agent).join("ledger").join(LINES)
    }
}

/// Starts the worker process at `at` with these arguments.
fn start(at: &At, args: &[&str]) -> (Child, tokio::io::Lines<BufReader<tokio::process::ChildStdout>>) {
    let mut command = Command::new(WORKER);
    if let Some(postgres) = &at.postgres {
        command.env("AGENTRY_WORKER_POSTGRES", postgres.url());
    }
    let mut child = command
        .arg(&at.dir)
        .args(args)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the worker process starts");
    let stdout = child.stdout.take().expect("its stdout");
    (child, BufReader::new(stdout).lines())
}

/// The next line the process prints that starts with `prefix` (within 60 s).
async fn expect(lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>, prefix: &str) -> String {
    let found = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            match lines.next_line().await.expect("its output") {
                Some(line) if line.starts_with(prefix) => return line,
                Some(_) => {}
                None => panic!("the worker ended before printing `{prefix}`"),
            }
        }
    });
    found.await.unwrap_or_else(|_| panic!("the worker did not print `{prefix}` within 60 s"))
}

/// SIGKILL, and wait for the process to be gone.
async fn kill(mut child: Child) {
    child.start_kill().expect("the process can be killed");
    let _ = child.wait().await;
}

/// Runs the worker in a mode that ends on its own, and returns the line starting with `prefix`.
async fn run_to_end(at: &At, args: &[&str], prefix: &str) -> String {
    let (mut child, mut lines) = start(at, args);
    let line = expect(&mut lines, prefix).await;
    let status = tokio::time::timeout(Duration::from_secs(60), child.wait()).await.expect("it ends").expect("status");
    assert!(status.success(), "the worker failed: {status}");
    line
}

/// Every run in the journal, in the order written: its record and idempotency key.
fn journal(at: &At) -> Vec<(RunRecord, Option<String>)> {
    match &at.postgres {
        Some(postgres) => {
            PostgresStore::connect(&postgres.url()).expect("the journal connects").keyed_runs(&RunQuery::default())
        }
        None => {
            SqliteStore::open(at.dir.join("journal.db")).expect("the journal opens").keyed_runs(&RunQuery::default())
        }
    }
    .expect("the journal reads")
}

/// Every input logged for an agent, in order, as the journal reads them back to bring the agent back.
fn inputs(at: &At, agent: &str) -> Vec<(u64, Signal)> {
    let store = at.store();
    let durable = store.durable().expect("a journal that keeps inputs");
    durable.inputs_after(&AgentId::new(agent).expect("an id"), 0).expect("the inputs read back")
}

/// The agent's latest snapshot: its input number and its whole state (domain and mounted skills).
fn snapshot(at: &At, agent: &str) -> (u64, AgentState<Worker>) {
    let store = at.store();
    let durable = store.durable().expect("a durable journal");
    let snapshot = durable.snapshot(&AgentId::new(agent).expect("an id")).expect("it reads").expect("a snapshot");
    (snapshot.seq, serde_json::from_value(snapshot.state).expect("a worker's state"))
}

/// Every job the journal kept of an agent.
fn kept_jobs(at: &At, agent: &str) -> Vec<agentry::store::KeptJob> {
    let store = at.store();
    let durable = store.durable().expect("a durable journal");
    let revivals = durable.revivals(&[AgentId::new(agent).expect("an id")]).expect("the journal reads");
    revivals.into_iter().next().expect("one").expect("it reads back").jobs
}

/// The state an agent's logged inputs fold to from its first state: each through `step`, and the skills it
/// mounted or unmounted itself applied as the runtime applies them.
fn fold(agent: &str, logged: &[(u64, Signal)]) -> AgentState<Worker> {
    use agentry::effect::EffectKind;
    let catalog = catalog();
    let policy = agentry::policy::Policy::default();
    let id = AgentId::new(agent).expect("an id");
    let (mut state, _) = agentry::agent::start(id, Worker::default(), &policy).expect("it starts");
    for (_, signal) in logged {
        let Ok(stepped) = step(&mut state, signal, &catalog) else { continue };
        for effect in stepped.effects {
            match effect.kind {
                EffectKind::MountSkill { skill, opts } => {
                    let skill = catalog.get(&skill).expect("a skill of the catalog");
                    let _ = agentry::skill::mount(&mut state, skill, &opts, &policy);
                }
                EffectKind::UnmountSkill { skill } => {
                    let _ = agentry::skill::unmount(&mut state, &skill);
                }
                _ => {}
            }
        }
    }
    state
}

/// A seeded generator for the kill moments (SplitMix64).
struct Moments(u64);

impl Moments {
    fn next_ms(&mut self, below: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % below
    }
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_nine_at_random_moments_loses_nothing_and_repeats_no_side_effect() {
    let folder = tempfile::tempdir().expect("a folder");
    torture(&At::sqlite(folder.path()), env_number("AGENTRY_TORTURE_KILLS", 50)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_nine_at_random_moments_loses_nothing_and_repeats_no_side_effect_on_postgres() {
    let folder = tempfile::tempdir().expect("a folder");
    let Some(at) = At::postgres(folder.path(), "durability torture on PostgreSQL") else { return };
    torture(&at, env_number("AGENTRY_TORTURE_KILLS_POSTGRES", 20)).await;
}

async fn torture(at: &At, kills: u64) {
    let mut moments = Moments(env_number("AGENTRY_TORTURE_SEED", 7));
    let mut sleeps = (0usize, 0usize);
    for _ in 0..kills {
        let (child, mut lines) = start(at, &["torture", "3"]);
        expect(&mut lines, "ready").await;
        // The kill moment: a seeded random time into the run (not a wait for anything).
        tokio::time::sleep(Duration::from_millis(moments.next_ms(60))).await;
        kill(child).await;
        // What it printed before it died: how often its sleeper hibernated and thawed.
        while let Ok(Some(line)) = lines.next_line().await {
            sleeps.0 += usize::from(line.starts_with("hibernated"));
            sleeps.1 += usize::from(line.starts_with("thawed"));
        }
    }
    let settled = run_to_end(at, &["settle"], "settled").await;
    assert_eq!(settled, "settled 3", "every worker came back every time");

    let runs = journal(at);
    let keys: BTreeMap<String, &RunRecord> =
        runs.iter().filter_map(|(record, key)| key.as_ref().map(|k| (k.clone(), record))).collect();
    // Completed with their line, interrupted, inputs, lines, pure runs completed.
    let mut counts = (0usize, 0usize, 0usize, 0usize, 0usize);
    // Jobs ended, of those interrupted, mounts of `extra` asked for, runs that were approved and completed.
    let mut more = (0usize, 0u64, 0u64, 0usize);
    let mut tallies = BTreeSet::new();
    for agent in ["w0", "w1", "w2"] {
        let written = ledger_lines(&at.ledger(agent));
        // Every line belongs to a journaled run; no non-idempotent line appears twice.
        let mut charged = BTreeSet::new();
        for (key, what) in &written {
            assert!(keys.contains_key(key), "{agent}: the line `{key} {what}` has no journaled run");
            if what == "charge" {
                assert!(charged.insert(key.clone()), "{agent}: `charge` ran twice for {key}");
            }
        }
        let written_keys: BTreeSet<&String> = written.iter().map(|(k, _)| k).collect();
        // Every run the journal reports completed has its line.
        for (record, key) in runs.iter().filter(|(r, _)| r.agent.as_str() == agent) {
            assert!(record.status().is_final(), "{agent}: run {} never ended: {:?}", record.run, record.status());
            let pure = record.action.as_str() == PURE;
            if pure {
                // Never run twice: a replay that asks again for a pure run finds it journaled (by its key). (A
                // pure run ended at once, so it is journaled only once ended; if its plan, written just after,
                // was lost to a kill, it has no key, and the replay asks for it again under its key.) While
                // anyone listens to events (the worker's approver does), a run is journaled when it is queued,
                // so a kill can leave a pure run queued: the recovery starts it again under its key and ends
                // the old record as interrupted. Two records of one key are a repeat only if neither is that.
                let interrupted = record.error == Some(agentry::action::ErrorClass::Interrupted);
                if let Some(key) = key.as_ref().filter(|_| !interrupted) {
                    assert!(tallies.insert(key.clone()), "{agent}: the pure run {key} is journaled twice");
                }
                counts.4 += usize::from(record.status() == RunStatus::Completed);
            }
            let writes = record.action.as_str().starts_with("ledger.") && !pure;
            if record.status() == RunStatus::Completed && writes {
                let key = key.as_ref().expect("a completed run has a key");
                assert!(written_keys.contains(key), "{agent}: run {key} completed without its line");
                counts.0 += 1;
            }
            if record.error == Some(agentry::action::ErrorClass::Interrupted) {
                counts.1 += 1;
            }
        }
        // The state is the fold of the logged inputs, from the first state (mounts included); no input number is
        // missing.
        let logged = inputs(at, agent);
        let numbers: Vec<u64> = logged.iter().map(|(seq, _)| *seq).collect();
        assert_eq!(numbers, (1..=logged.len() as u64).collect::<Vec<_>>(), "{agent}: the input log has gaps");
        let state = fold(agent, &logged);
        let (seq, kept) = snapshot(at, agent);
        assert_eq!(seq, logged.len() as u64, "{agent}: the last snapshot stands at the last input");
        assert_eq!(
            serde_json::to_value(&state).expect("JSON"),
            serde_json::to_value(&kept).expect("JSON"),
            "{agent}: the state (its skills too) is the fold of its inputs"
        );
        // No job lost, none ended twice: every job it submitted ended and it was told once; every job the
        // journal kept ended, and its end reached the agent.
        let jobs = kept_jobs(at, agent);
        let mut told = BTreeSet::new();
        for job in &state.domain.jobs_ended {
            if !told.insert(*job) {
                let mentions: Vec<String> = logged
                    .iter()
                    .filter(|(_, s)| s.data().to_string().contains(&job.to_string()))
                    .map(|(seq, s)| format!("{seq} {} {} {}", s.kind().as_str(), s.id(), s.data()))
                    .collect();
                let kept: Vec<_> = jobs.iter().filter(|j| j.record.id == *job).collect();
                panic!("{agent}: job {job} ended twice\n{}\n{kept:#?}", mentions.join("\n"));
            }
        }
        for job in &state.domain.jobs_submitted {
            assert!(told.contains(job), "{agent}: job {job} was submitted and never ended");
        }
        for job in &jobs {
            assert!(job.record.status.is_final(), "{agent}: job {} never ended: {:?}", job.record.id, job.record);
            assert!(told.contains(&job.record.id), "{agent}: job {} ended and its agent never heard", job.record.id);
        }
        assert_eq!(told.len(), jobs.len(), "{agent}: told of a job the journal does not have");
        let job_keys: BTreeSet<&String> = jobs.iter().map(|job| &job.plan.key).collect();
        more.0 += jobs.len();
        more.1 += state.domain.jobs_interrupted;
        more.2 += state.domain.ticks / agentry_tests::durable::MOUNT_EVERY;
        // No journaled record was lost: every outcome the agent consumed is of a journaled, ended run; and none
        // reached it twice.
        let mut consumed = BTreeSet::new();
        for (seq, signal) in &logged {
            if let Some(report) = signal.outcome().filter(|r| !r.awaiting_approval()) {
                assert!(
                    consumed.insert(report.run_id),
                    "{agent}: the outcome of run {} reached it twice (input {seq})",
                    report.run_id
                );
                let found = runs.iter().find(|(r, _)| r.run == report.run_id);
                assert!(
                    found.is_some_and(|(r, _)| r.status().is_final()),
                    "{agent}: run {} is not journaled",
                    report.run_id
                );
            }
        }
        // Nothing the agent asked for went unanswered: every key it asked with has a run whose outcome it
        // consumed (a run interrupted and started again shares its key with the run that answered).
        let answered: BTreeSet<uuid::Uuid> =
            logged.iter().filter_map(|(_, signal)| signal.outcome().map(|r| r.run_id)).collect();
        let mut asked: BTreeMap<&String, bool> = BTreeMap::new();
        for (record, key) in runs.iter().filter(|(r, _)| r.agent.as_str() == agent) {
            // A job's run answers to the job (checked above), not to the agent.
            if let Some(key) = key.as_ref().filter(|key| !job_keys.contains(key)) {
                *asked.entry(key).or_default() |= answered.contains(&record.run);
            }
            if record.action.as_str() == "ledger.risky" && record.status() == RunStatus::Completed {
                more.3 += 1;
            }
        }
        let unanswered: Vec<&&String> = asked.iter().filter(|(_, answered)| !**answered).map(|(key, _)| key).collect();
        assert!(unanswered.is_empty(), "{agent}: runs whose outcome never reached the agent: {unanswered:?}");
        counts.2 += logged.len();
        counts.3 += written.len();
    }
    println!(
        "torture: {kills} kills; {} runs journaled, {} completed with their line, {} pure runs completed, {} \
         interrupted; {} inputs logged; {} ledger lines; {} jobs ended, {} of them interrupted; {} mounts and \
         unmounts; {} approved runs completed; {} hibernations, {} thaws",
        runs.len(),
        counts.0,
        counts.4,
        counts.1,
        counts.2,
        counts.3,
        more.0,
        more.1,
        more.2,
        more.3,
        sleeps.0,
        sleeps.1
    );
    assert!(counts.0 > 0, "work got done between the kills");
    assert!(more.0 > 0 && more.2 > 0 && more.3 > 0, "jobs, mounts and approvals happened between the kills");
    assert!(sleeps.0 > 0 && sleeps.1 > 0, "the sleeper hibernated and thawed between the kills");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_asked_before_a_crash_is_given_after_it_and_the_run_happens_once() {
    let folder = tempfile::tempdir().expect("a folder");
    an_approval_asked_before_a_crash_is_given_after_it_and_the_run_happens_once_at(&At::sqlite(folder.path())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_asked_before_a_crash_is_given_after_it_and_the_run_happens_once_on_postgres() {
    let folder = tempfile::tempdir().expect("a folder");
    let Some(at) = At::postgres(
        folder.path(),
        "an_approval_asked_before_a_crash_is_given_after_it_and_the_run_happens_once_on_postgres",
    ) else {
        return;
    };
    an_approval_asked_before_a_crash_is_given_after_it_and_the_run_happens_once_at(&at).await;
}

async fn an_approval_asked_before_a_crash_is_given_after_it_and_the_run_happens_once_at(at: &At) {
    let (child, mut lines) = start(at, &["ask", "ledger.risky", "{}"]);
    let asked = expect(&mut lines, "asked").await;
    kill(child).await;
    let run = asked.trim_start_matches("asked ").to_owned();
    assert!(!run.is_empty(), "{asked}");
    run_to_end(at, &["approve", &run], "approved").await;
    let written = ledger_lines(&at.ledger("w0"));
    assert_eq!(written.iter().filter(|(_, w)| w == "risky").count(), 1, "exactly once: {written:?}");
    let record = journal(at).into_iter().find(|(r, _)| r.run.to_string() == run).expect("the run is journaled");
    assert_eq!(record.0.status(), RunStatus::Completed);
}

/// The approval timeout counts from when the run was asked for: a run whose time ran out while the process
/// was down (killed) expires as it is recovered, rather than waiting a whole timeout again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_timeout_counts_from_the_request_across_a_crash() {
    let folder = tempfile::tempdir().expect("a folder");
    an_approval_timeout_counts_from_the_request_across_a_crash_at(&At::sqlite(folder.path())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_timeout_counts_from_the_request_across_a_crash_on_postgres() {
    let folder = tempfile::tempdir().expect("a folder");
    let Some(at) =
        At::postgres(folder.path(), "an_approval_timeout_counts_from_the_request_across_a_crash_on_postgres")
    else {
        return;
    };
    an_approval_timeout_counts_from_the_request_across_a_crash_at(&at).await;
}

async fn an_approval_timeout_counts_from_the_request_across_a_crash_at(at: &At) {
    let timeout = Duration::from_millis(300);
    let (child, mut lines) = start(at, &["ask", "ledger.risky", "{}", &timeout.as_millis().to_string()]);
    let asked = expect(&mut lines, "asked").await;
    kill(child).await;
    let run: uuid::Uuid = asked.trim_start_matches("asked ").parse().expect("a run id");
    // The time under test is the wall clock's: wait until the run's timeout has passed since it was asked for.
    let (seconds, nanos) = run.get_timestamp().expect("a v7 id").to_unix();
    let asked_at = std::time::UNIX_EPOCH + Duration::new(seconds, nanos);
    if let Ok(left) = (asked_at + timeout).duration_since(std::time::SystemTime::now()) {
        tokio::time::sleep(left).await;
    }
    let tried = run_to_end(at, &["try-approve", &run.to_string()], "tried").await;
    assert!(tried.contains("NotAwaitingApproval"), "the run waited a fresh timeout after the restart: {tried}");
    let record = journal(at).into_iter().find(|(r, _)| r.run == run).expect("the run is journaled");
    assert_eq!(record.0.status(), RunStatus::Blocked, "expired, never run");
    let written = ledger_lines(&at.ledger("w0"));
    assert!(written.iter().all(|(_, w)| w != "risky"), "it never ran: {written:?}");
}

/// The attack on holding ended runs back: a snapshot folds in the input that asked for a run whose outcome the
/// agent has not consumed, and the process dies the moment the snapshot is committed. A recovery from that
/// snapshot will not ask for the run again, so the run and its outcome must be in the same commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_run_with_side_effects_reaches_the_agent_as_interrupted() {
    let folder = tempfile::tempdir().expect("a folder");
    an_interrupted_run_with_side_effects_reaches_the_agent_as_interrupted_at(&At::sqlite(folder.path())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_run_with_side_effects_reaches_the_agent_as_interrupted_on_postgres() {
    let folder = tempfile::tempdir().expect("a folder");
    let Some(at) = At::postgres(
        folder.path(),
        "an_interrupted_run_with_side_effects_reaches_the_agent_as_interrupted_on_postgres",
    ) else {
        return;
    };
    an_interrupted_run_with_side_effects_reaches_the_agent_as_interrupted_at(&at).await;
}

async fn an_interrupted_run_with_side_effects_reaches_the_agent_as_interrupted_at(at: &At) {
    let (child, mut lines) = start(at, &["ask", "ledger.charge", r#"{"hang": true}"#]);
    expect(&mut lines, "asked").await;
    kill(child).await;
    let (resumed, mut lines) = start(at, &["resume"]);
    let state = expect(&mut lines, "state").await;
    kill(resumed).await;
    let state: Worker = serde_json::from_str(state.trim_start_matches("state ")).expect("a state");
    assert_eq!((state.failed, state.interrupted), (1, 1), "the agent was told, and decides: {state:?}");
    let written = ledger_lines(&at.ledger("w0"));
    assert!(written.iter().filter(|(_, w)| w == "charge-start").count() <= 1, "never started again: {written:?}");
    let interrupted: Vec<_> =
        journal(at).into_iter().filter(|(r, _)| r.error == Some(agentry::action::ErrorClass::Interrupted)).collect();
    assert_eq!(interrupted.len(), 1, "journaled as interrupted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_idempotent_run_runs_again_with_the_same_key() {
    let folder = tempfile::tempdir().expect("a folder");
    an_interrupted_idempotent_run_runs_again_with_the_same_key_at(&At::sqlite(folder.path())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_idempotent_run_runs_again_with_the_same_key_on_postgres() {
    let folder = tempfile::tempdir().expect("a folder");
    let Some(at) =
        At::postgres(folder.path(), "an_interrupted_idempotent_run_runs_again_with_the_same_key_on_postgres")
    else {
        return;
    };
    an_interrupted_idempotent_run_runs_again_with_the_same_key_at(&at).await;
}

async fn an_interrupted_idempotent_run_runs_again_with_the_same_key_at(at: &At) {
    let ledger_file = at.ledger("w0");
    // Waits (checking every few milliseconds, at most 30 s) for the ledger file to hold `n` lines.
    let lines_in_file = |n: usize| {
        let ledger_file = ledger_file.clone();
        async move {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
            loop {
                let written = ledger_lines(&ledger_file);
                if written.len() >= n || tokio::time::Instant::now() > deadline {
                    return written;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    };
    let (child, mut lines) = start(at, &["ask", "ledger.note", r#"{"hang": true}"#]);
    expect(&mut lines, "asked").await;
    assert_eq!(lines_in_file(1).await.len(), 1, "the run started its work");
    kill(child).await;
    // Brought back, the run starts again (and hangs again); its second start line carries the same key.
    let (again, mut lines) = start(at, &["wait"]);
    expect(&mut lines, "back").await;
    let written = lines_in_file(2).await;
    // The run before the crash is journaled as interrupted once the one started again is in the journal (so a
    // crash in between starts it again rather than leaving its key unanswered): waited for, at most 30 s.
    let interrupted = |runs: &[(RunRecord, Option<String>)]| {
        runs.iter().any(|(r, _)| r.error == Some(agentry::action::ErrorClass::Interrupted))
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !interrupted(&journal(at)) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    kill(again).await;
    assert_eq!(written.len(), 2, "started once before the crash and once after: {written:?}");
    assert_eq!(written[0], written[1], "the same idempotency key both times");
    let runs = journal(at);
    let first = runs.iter().find(|(r, _)| r.error == Some(agentry::action::ErrorClass::Interrupted)).expect("ended");
    let second = runs.iter().find(|(r, _)| r.status() == RunStatus::Running).expect("running again");
    assert_eq!(first.1, second.1, "one key for both runs");
    assert_ne!(first.0.run, second.0.run, "two runs in the journal");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_survives_a_crash_and_fires_late_or_is_skipped_as_asked() {
    for (skip, fired, left) in [("late", 1, 0), ("skip", 0, 0)] {
        let folder = tempfile::tempdir().expect("a folder");
        a_schedule_fires_late_or_is_skipped(&At::sqlite(folder.path()), (skip, fired, left)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_survives_a_crash_and_fires_late_or_is_skipped_as_asked_on_postgres() {
    for (skip, fired, left) in [("late", 1, 0), ("skip", 0, 0)] {
        let folder = tempfile::tempdir().expect("a folder");
        let Some(at) = At::postgres(folder.path(), "schedules on PostgreSQL") else { return };
        a_schedule_fires_late_or_is_skipped(&at, (skip, fired, left)).await;
    }
}

/// Arms a schedule, kills the worker, brings it back after the schedule's time, and checks it fired late or was
/// skipped as asked.
async fn a_schedule_fires_late_or_is_skipped(at: &At, (skip, fired, left): (&str, u64, usize)) {
    let (child, mut lines) = start(at, &["arm", "50", skip]);
    expect(&mut lines, "armed").await;
    kill(child).await;
    // Brought back after its time: late, it fires at once; skipped, it is dropped.
    tokio::time::sleep(Duration::from_millis(60)).await;
    let line = run_to_end(at, &["alarm"], "state").await;
    let (state, armed) = line.trim_start_matches("state ").split_once(" armed ").expect("state and schedules");
    let state: Worker = serde_json::from_str(state).expect("a state");
    assert_eq!((state.fired, armed.parse::<usize>().expect("a count")), (fired, left), "{skip}: {line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_or_foreign_journal_is_a_typed_error_and_is_left_alone() {
    let folder = tempfile::tempdir().expect("a folder");
    let garbage = folder.path().join("garbage.db");
    let bytes = b"this is not a database, just bytes that go on and on".repeat(100);
    std::fs::write(&garbage, &bytes).expect("written");
    let err = agentry::store::SqliteStore::open(&garbage).expect_err("refused");
    assert!(matches!(err, agentry::store::StoreError::Corrupt { .. }), "{err}");
    assert_eq!(std::fs::read(&garbage).expect("still there"), bytes, "the file is untouched");

    let foreign = folder.path().join("foreign.db");
    rusqlite::Connection::open(&foreign).expect("db").execute_batch("CREATE TABLE orders (id INTEGER);").expect("made");
    let err = agentry::store::SqliteStore::open(&foreign).expect_err("refused");
    assert!(matches!(err, agentry::store::StoreError::Foreign { .. }), "{err}");
    assert!(err.to_string().contains("orders"), "{err}");

    // A real journal cut short in the middle.
    let dir = folder.path().join("cut");
    let (child, mut lines) = start(&At::sqlite(&dir), &["arm", "60000", "late"]);
    expect(&mut lines, "armed").await;
    kill(child).await;
    let journal = dir.join("journal.db");
    // Everything into the main file first, so cutting it cuts records.
    let db = rusqlite::Connection::open(&journal).expect("db");
    db.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())).expect("checkpointed");
    drop(db);
    let bytes = std::fs::read(&journal).expect("the journal");
    std::fs::write(&journal, &bytes[..bytes.len() / 2]).expect("truncated");
    match agentry::store::SqliteStore::open(&journal) {
        Err(err) => assert!(matches!(err, agentry::store::StoreError::Corrupt { .. }), "{err}"),
        Ok(_) => panic!("a journal cut in half opened as if whole"),
    }

    // A snapshot from a newer version of the agent type: a typed error naming both versions, and the others
    // come back.
    let dir = folder.path().join("newer");
    let (child, mut lines) = start(&At::sqlite(&dir), &["arm", "60000", "late"]);
    expect(&mut lines, "armed").await;
    kill(child).await;
    let db = rusqlite::Connection::open(dir.join("journal.db")).expect("db");
    let text: String =
        db.query_row("SELECT snapshot FROM snapshots WHERE agent = 'w0'", [], |r| r.get(0)).expect("one");
    let mut snapshot: Value = serde_json::from_str(&text).expect("json");
    snapshot["version"] = Value::from(9);
    db.execute("UPDATE snapshots SET snapshot = ?1 WHERE agent = 'w0'", [snapshot.to_string()]).expect("changed");
    drop(db);
    let builder = agentry::runtime::Runtime::builder().agent::<Worker>().expect("registered");
    let (_runtime, recovery) = builder.durable(&dir).expect("opens").open().await.expect("recovers");
    let (agent, err) = recovery.failed.first().expect("w0 could not come back");
    assert_eq!(agent.as_str(), "w0");
    assert!(matches!(err, agentry::runtime::RuntimeError::SnapshotVersion { stored: 9, current: 1, .. }), "{err}");
}
