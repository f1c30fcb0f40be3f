//! The SQLite journal's own tests: what it keeps reads back, older files open, bad files are refused.

use super::*;
use crate::action::RunKey;
use crate::id::ActionId;
use crate::store::PEN;
use crate::store::behind::Behind;
use crate::store::durable::{Durable, PlanParts, RunPlan};
use crate::store::input_log::InputBatches;
use crate::store::tables::json;
use crate::store::writer::{HOLD_FOR, PlanText, Runs, TEXT_KEPT_BYTES, TEXTS_KEPT, commit};
use crate::store::writer::{Op, PlanRow, RunRow, Texts, Waiter};
use crate::store::{KeyedRun, RunStatus};
use crate::store::{PlanDraft, RecordDraft};
use crate::store::{RunUpdate, Store, Unwritten};
use chrono::Utc;
use proptest::prelude::*;
use serde_json::Value;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

fn agent(name: &str) -> AgentId {
    AgentId::new(name).unwrap()
}

proptest! {
    /// A plan made of its parts (the params as the text the server made of them) is the very text the plan
    /// itself serializes to, so both read back the same.
    #[test]
    fn a_plan_made_of_its_parts_is_the_plans_own_text(
        key in ".{0,40}",
        params in crate::store::digest_tests::params(),
        by_agent in any::<bool>(),
        cause in proptest::option::of(any::<u128>()),
        correlation in any::<u128>(),
    ) {
        let plan = RunPlan {
            key,
            params,
            by_agent,
            cause: cause.map(Uuid::from_u128),
            correlation: Uuid::from_u128(correlation),
        };
        let params_json = serde_json::to_vec(&plan.params).unwrap();
        let parts = PlanParts {
            key: &plan.key,
            params_json: &params_json,
            by_agent,
            cause: plan.cause,
            correlation: plan.correlation,
        };
        let texts = Texts::default();
        let (whole, made) = (texts.plan(&plan), texts.plan_parts(parts));
        prop_assert_eq!((made.key(), made.plan()), (whole.key(), whole.plan()));
        prop_assert_eq!(serde_json::from_str::<RunPlan>(made.plan()).unwrap(), plan);
    }
}

#[test]
fn runs_going_on_are_updated_in_memory_and_ended_ones_are_read_from_the_file() {
    let folder = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(folder.path().join("journal.db")).unwrap();
    let (me, action) = (agent("me"), ActionId::new("x.y").unwrap());
    let queued = |run| RunRecord::queued(run, me.clone(), action.clone(), &json!({}), run);
    let status = |status| RunUpdate { status: Some(status), ..RunUpdate::default() };
    let (going, ended_whole, unknown) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());

    store.record(PEN, queued(going)).unwrap();
    assert_eq!(
        store.record(PEN, queued(going)),
        Err(StoreError::Duplicate(going)),
        "a run going on is not recorded twice"
    );
    store.update(PEN, going, status(RunStatus::Running), Utc::now()).unwrap();
    assert_eq!(store.get(going).map(|r| r.status()), Some(RunStatus::Running));
    store.update(PEN, going, status(RunStatus::Completed), Utc::now()).unwrap();
    assert!(store.journal.runs_going_on() == 0, "an ended run leaves the memory");
    let read = store.get(going).expect("an ended run is read from the file");
    assert_eq!(
        read.history.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
        [RunStatus::Queued, RunStatus::Running, RunStatus::Completed]
    );
    assert_eq!(store.update(PEN, going, status(RunStatus::Failed), Utc::now()), Err(StoreError::Ended(going)));
    assert_eq!(store.get(going), Some(read), "an update to an ended run changes nothing");

    // A run recorded once it already ended (as one that ends at its first poll is) goes straight to the file.
    let mut whole = queued(ended_whole);
    whole.apply(status(RunStatus::Completed), Utc::now());
    store.record(PEN, whole.clone()).unwrap();
    assert!(store.journal.runs_going_on() == 0);
    assert_eq!(store.get(ended_whole), Some(whole));
    assert_eq!(
        store.update(PEN, ended_whole, status(RunStatus::Failed), Utc::now()),
        Err(StoreError::Ended(ended_whole))
    );

    assert_eq!(
        store.update(PEN, unknown, status(RunStatus::Running), Utc::now()),
        Err(StoreError::UnknownRun(unknown))
    );
    assert_eq!(store.get(unknown), None);
}

#[test]
fn row_buffers_go_round_and_only_small_ones_are_kept() {
    let texts = Texts::default();
    let order = Signal::new("order.placed", json!({"a": [1, 2, 3]})).unwrap();
    let first = texts.signal(&order);
    assert_eq!(first, serde_json::to_vec(&order).unwrap(), "a signal that is not an outcome is kept as JSON");
    let (address, capacity) = (first.as_ptr(), first.capacity());
    texts.give_back(&mut vec![first]);
    let again = texts.signal(&Signal::new("b", json!(null)).unwrap());
    assert!(again.starts_with(b"{"), "a buffer from the pool holds only the new text");
    assert_eq!((again.as_ptr(), again.capacity()), (address, capacity), "the same buffer came back");
    let huge = vec![b'x'; TEXT_KEPT_BYTES + 1];
    texts.give_back(&mut vec![again, huge]);
    assert_eq!(texts.0.lock().unwrap().len(), 1, "a buffer larger than the limit is let go");
    let mut many: Vec<Vec<u8>> = (0..TEXTS_KEPT + 10).map(|_| Vec::with_capacity(8)).collect();
    texts.give_back(&mut many);
    assert_eq!(texts.0.lock().unwrap().len(), TEXTS_KEPT, "the pool keeps at most its limit");
    assert!(many.is_empty(), "every buffer handed back was taken");
    // A key and its plan share one buffer.
    let plan = RunPlan {
        key: "me/1/0".into(),
        params: json!({"i": 1}),
        by_agent: true,
        cause: None,
        correlation: Uuid::nil(),
    };
    let text = texts.plan(&plan);
    assert_eq!(text.key(), "me/1/0");
    assert_eq!(serde_json::from_str::<RunPlan>(text.plan()).unwrap(), plan);
}

fn snapshot_at(agent: &AgentId, seq: u64) -> Snapshot {
    Snapshot {
        agent: agent.clone(),
        seq,
        agent_type: "test".to_owned(),
        version: 1,
        state: json!({"seq": seq}),
        at: Utc::now(),
        incarnation: 0,
    }
}

#[test]
fn a_read_sees_every_write_sent_before_it_while_others_keep_writing() {
    let folder = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(folder.path().join("journal.db")).unwrap());
    let (reader, busy) = (agent("reader"), agent("busy"));
    // Another writer, in bursts, so the writer has work queued when the reads come.
    let noise = {
        let (store, busy) = (store.clone(), busy.clone());
        std::thread::spawn(move || {
            for seq in 1..=20_000 {
                store.append_input(PEN, &busy, seq, &Signal::new("noise", json!(seq)).unwrap());
                if seq % 100 == 0 {
                    std::thread::yield_now();
                }
            }
        })
    };
    for seq in 1..=500 {
        store.append_input(PEN, &reader, seq, &Signal::new("tick", json!(seq)).unwrap());
        let inputs = store.inputs_after(&reader, seq - 1).unwrap();
        assert_eq!(inputs.len(), 1, "input {seq} was written before the read");
        // A snapshot drops the inputs it folded in.
        store.save_snapshot(PEN, snapshot_at(&reader, seq));
        assert_eq!(store.snapshot(&reader).unwrap().map(|s| s.seq), Some(seq));
    }
    noise.join().unwrap();
    assert_eq!(store.inputs_after(&busy, 0).unwrap().len(), 20_000);
}

#[test]
fn a_revival_has_the_runs_to_settle_and_those_the_inputs_after_the_snapshot_asked_for() {
    let folder = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(folder.path().join("journal.db")).unwrap();
    let (me, other) = (agent("me"), agent("other"));
    let record = AgentRecord { agent: me.clone(), agent_type: "test".to_owned(), spawn: json!({}), asleep: false };
    store.agent_spawned(PEN, record.clone(), snapshot_at(&me, 0));
    for seq in 1..=4 {
        store.append_input(PEN, &me, seq, &Signal::new("tick", json!(seq)).unwrap());
    }
    store.save_snapshot(PEN, snapshot_at(&me, 2));
    let action = ActionId::new("x.y").unwrap();
    // (key, ended): only the run going on and the one asked for by input 3 are for the recovery.
    let runs = [("me/1/0", true), ("me/1/1", false), ("me/3/0", true), ("me/run/7", true), ("other/3/0", true)];
    let mut ids = Vec::new();
    for (key, ended) in runs {
        let run = Uuid::now_v7();
        let whose = if key.starts_with("other") { &other } else { &me };
        store.record(PEN, RunRecord::queued(run, whose.clone(), action.clone(), &json!({}), run)).unwrap();
        // The ended ones were asked for from outside (no outcome for the agent, so none of it was lost).
        let by_agent = !ended;
        let plan = RunPlan { key: key.to_owned(), params: json!({}), by_agent, cause: None, correlation: run };
        store.run_planned(PEN, run, &plan);
        if ended {
            let done = RunUpdate { status: Some(RunStatus::Completed), ..RunUpdate::default() };
            store.update(PEN, run, done, Utc::now()).unwrap();
        }
        ids.push(run);
    }
    let revivals = store.revivals(&[me.clone(), agent("nobody")]).unwrap();
    let [Ok(mine), Ok(nobody)] = &revivals[..] else { panic!("two revivals: {revivals:?}") };
    assert_eq!(mine.record.as_ref(), Some(&record));
    assert_eq!(mine.snapshot.as_ref().map(|s| s.seq), Some(2));
    assert_eq!(mine.inputs.iter().map(|(seq, _)| *seq).collect::<Vec<_>>(), [3, 4]);
    let keys: Vec<&str> = mine.runs.iter().filter_map(|r| r.plan.as_ref()).map(|p| p.key.as_str()).collect();
    assert_eq!(keys, ["me/1/1", "me/3/0"]);
    assert_eq!(mine.runs.iter().map(|r| r.record.run).collect::<Vec<_>>(), [ids[1], ids[2]]);
    assert_eq!(nobody, &Revival::default(), "an agent the store does not know has nothing to bring back");
}

/// A run of `me`'s that ended at its first poll, as the server drafts it with its plan, twice (for two
/// stores); and what the journal must bring back of it (its record, its plan with the params as asked for,
/// no outcome).
fn drafted_run(me: &AgentId, key: RunKey, params: &Value, coerced: bool) -> ([Unwritten; 2], KeyedRun) {
    let run = Uuid::now_v7();
    let (action, cause, queued) = (ActionId::new("x.y").unwrap(), Uuid::now_v7(), Utc::now());
    let running = RunUpdate { status: Some(RunStatus::Running), attempts: Some(1), ..RunUpdate::default() };
    let done = RunUpdate { status: Some(RunStatus::Completed), ..RunUpdate::default() };
    let updates = [(running, Utc::now()), (done, Utc::now())];
    let drafted = || {
        let ids = crate::store::DraftIds {
            run,
            agent: me.clone(),
            action: action.clone(),
            correlation: run,
            parent_run: None,
        };
        let text = serde_json::to_vec(params).unwrap();
        let draft = RecordDraft::queued(ids, params, Some(text), queued);
        let plan =
            PlanDraft { key: key.clone(), by_agent: true, cause: Some(cause), correlation: run, params_text: None };
        let mut unwritten = Unwritten { draft, plan: Some(plan) };
        if coerced {
            unwritten.forget_text();
        }
        for (update, at) in &updates {
            unwritten.draft.apply(update.clone(), *at);
        }
        unwritten.ended()
    };
    let mut model =
        RunRecord::queued_at(run, me.clone(), action.clone(), crate::store::params_digest(params), run, queued);
    for (update, at) in &updates {
        model.apply(update.clone(), *at);
    }
    let mut key_text = String::new();
    key.write_to(me, run, &mut key_text);
    let plan = RunPlan { key: key_text, params: params.clone(), by_agent: true, cause: Some(cause), correlation: run };
    ([drafted(), drafted()], KeyedRun { record: model, plan: Some(plan), outcome: None, delivered: false })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Model: a run's record and plan as the server drafted them. A run that ended reaches the journal as
    /// drafted (its plan made by the writer from its parts, or by the sending thread when its params are
    /// long or were coerced since), with its outcome for the agent or not, and the recovery reads back the
    /// same record, plan and outcome as when the same run is journaled through `record`,
    /// `run_planned_parts` and `run_outcome`.
    #[test]
    fn an_ended_run_taken_as_drafted_reads_back_as_one_written_through_record_and_plan(
        runs in proptest::collection::vec(
            (any::<bool>(), any::<bool>(), any::<bool>(), 0u32..4, proptest::option::of(any::<bool>())),
            1..6,
        ),
    ) {
        let me = agent("me");
        let folder = tempfile::tempdir().unwrap();
        let drafted = SqliteStore::open(folder.path().join("drafted.db")).unwrap();
        let general = SqliteStore::open(folder.path().join("general.db")).unwrap();
        let (source, action): (Arc<str>, _) = ("agentry/agent/me".into(), ActionId::new("x.y").unwrap());
        let mut expected = Vec::new();
        for (i, (long, given, coerced, index, outcome)) in runs.into_iter().enumerate() {
            let text = if long { "a text long enough not to be kept in place by a draft" } else { "short" };
            let params = json!({"i": i, "text": text});
            let seq = i as u64 + 1;
            let key = if given { RunKey::Given(format!("me/{seq}/{index}").into()) } else { RunKey::Input { incarnation: 0, seq, index } };
            let ([taken, written], mut model) = drafted_run(&me, key, &params, coerced);
            let run = model.record.run;
            match outcome {
                Some(safe_again) => {
                    let made = crate::action::Outcome::completed(params.clone(), std::time::Duration::ZERO, 1);
                    let refs = crate::kinds::stamped::RunRef { run, action: &action, correlation: run, causation: None };
                    let signal = crate::kinds::stamped::action_outcome_at(&source, refs, made, (Uuid::now_v7(), Utc::now())).unwrap();
                    taken.write_ended_with_outcome(&drafted, &signal, safe_again);
                    // The same run, through the general road.
                    drop(written.write(&general));
                    general.run_outcome(PEN, &me, run, &signal, safe_again);
                    model.outcome = Some(signal);
                }
                None => {
                    taken.write_ended(&drafted);
                    drop(written.write(&general));
                }
            }
            expected.push(model);
        }
        // A run whose end may wait for its outcome to be consumed is written when that wait ends, and takes its
        // place then: the runs are compared in the order of their ids.
        expected.sort_by_key(|run| run.record.run);
        for store in [&drafted, &general] {
            let revivals = store.revivals(std::slice::from_ref(&me)).unwrap();
            let [Ok(revival)] = &revivals[..] else { panic!("one revival: {revivals:?}") };
            let mut runs = revival.runs.clone();
            runs.sort_by_key(|run| run.record.run);
            prop_assert_eq!(runs, expected.clone());
        }
    }
}

fn record_of(agent: &AgentId, parent: Option<&AgentId>, asleep: bool) -> AgentRecord {
    let agent_type = if agent.as_str().ends_with('0') { "zero" } else { "other" };
    AgentRecord { agent: agent.clone(), agent_type: agent_type.to_owned(), spawn: json!({"parent": parent}), asleep }
}

/// Every page of [`Durable::alive`], from the first.
fn listed(store: &SqliteStore, limit: usize) -> Vec<AliveAgent> {
    let (mut all, mut after) = (Vec::new(), None::<AgentId>);
    loop {
        let page = store.alive(after.as_ref(), limit).unwrap();
        assert!(page.len() <= limit, "a page holds at most {limit}");
        assert!(page.iter().all(|a| after.as_ref().is_none_or(|after| a.agent > *after)), "only ids after the last");
        let Some(last) = page.last() else { return all };
        after = Some(last.agent.clone());
        all.extend(page);
    }
}

#[test]
fn agents_are_listed_a_page_at_a_time_in_order_of_id_without_their_records() {
    let folder = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(folder.path().join("journal.db")).unwrap();
    let mut model = std::collections::BTreeMap::new();
    for n in (0..23).rev() {
        let id = agent(&format!("a{n:02}"));
        let parent = (n % 3 == 1).then(|| agent("a00"));
        let record = record_of(&id, parent.as_ref(), false);
        store.agent_spawned(PEN, record.clone(), snapshot_at(&id, 0));
        model.insert(id, record);
    }
    // Some fall asleep, one ends.
    for n in [4, 7, 20] {
        let record = model.get_mut(&agent(&format!("a{n:02}"))).unwrap();
        record.asleep = true;
        store.agent_alive(PEN, record.clone());
    }
    store.agent_ended(PEN, &agent("a05"));
    model.remove(&agent("a05"));
    let expected: Vec<AliveAgent> = model.values().map(AliveAgent::of).collect();
    for limit in [1, 4, 22, 100] {
        assert_eq!(listed(&store, limit), expected, "pages of {limit}");
    }
    assert_eq!(expected.iter().filter(|a| a.asleep).count(), 3);
    assert_eq!(expected[1].parent, Some(agent("a00")));
}

#[test]
fn a_version_1_journal_is_brought_up_to_date_and_lists_its_agents() {
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("journal.db");
    let (parent, child) = (agent("p0"), agent("c1"));
    let records = [record_of(&parent, None, false), record_of(&child, Some(&parent), true)];
    {
        // The version 1 schema of `agents`: a record and nothing else.
        let db = Connection::open(&path).unwrap();
        db.execute_batch("CREATE TABLE agents (agent TEXT PRIMARY KEY, record TEXT NOT NULL);").unwrap();
        for record in &records {
            db.execute("INSERT INTO agents VALUES (?1, ?2)", params![record.agent.as_str(), json(record)]).unwrap();
        }
        // A record that is not JSON: listed with what can be known (awake, no type), which fails that
        // agent's revival alone rather than the whole open.
        db.execute("INSERT INTO agents VALUES ('x9', 'not json')", []).unwrap();
        db.pragma_update(None, "application_id", APPLICATION_ID).unwrap();
        db.pragma_update(None, "user_version", 1).unwrap();
    }
    let store = SqliteStore::open(&path).unwrap();
    let mut expected: Vec<AliveAgent> = records.iter().map(AliveAgent::of).collect();
    expected.push(AliveAgent {
        agent: agent("x9"),
        agent_type: String::new(),
        asleep: false,
        parent: None,
        next_due: None,
        jobs_pending: false,
    });
    expected.sort_by(|a, b| a.agent.cmp(&b.agent));
    assert_eq!(listed(&store, 10), expected);
    assert_eq!(store.agent(&child).unwrap().as_ref(), Some(&records[1]), "the record itself is kept");
    drop(store);
    let version: i64 = Connection::open(&path).unwrap().query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(version, VERSION);
}

#[test]
fn a_new_journal_has_big_pages_and_an_old_one_keeps_its_own() {
    let folder = tempfile::tempdir().unwrap();
    let page_size = |path: &Path| -> i64 {
        Connection::open(path).unwrap().query_row("PRAGMA page_size", [], |r| r.get(0)).unwrap()
    };
    let fresh = folder.path().join("fresh.db");
    drop(SqliteStore::open(&fresh).unwrap());
    assert_eq!(page_size(&fresh), PAGE_SIZE);

    let old = folder.path().join("old.db");
    {
        let db = Connection::open(&old).unwrap();
        db.pragma_update(None, "page_size", 4096).unwrap();
        db.execute_batch("CREATE TABLE agents (agent TEXT PRIMARY KEY, record TEXT NOT NULL);").unwrap();
        db.pragma_update(None, "application_id", APPLICATION_ID).unwrap();
        db.pragma_update(None, "user_version", 1).unwrap();
    }
    let store = SqliteStore::open(&old).unwrap();
    let id = agent("kept");
    store.agent_spawned(PEN, record_of(&id, None, false), snapshot_at(&id, 0));
    assert_eq!(listed(&store, 10).len(), 1, "the old file takes writes");
    drop(store);
    assert_eq!(page_size(&old), 4096, "a file keeps the page size it was made with");
}

#[test]
fn a_damaged_page_is_refused_on_open_when_asked_to_verify_and_never_panics() {
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("journal.db");
    {
        let store = SqliteStore::open(&path).unwrap();
        for n in 0..2000 {
            let id = agent(&format!("a{n:04}"));
            store.agent_spawned(PEN, record_of(&id, None, n % 2 == 0), snapshot_at(&id, 0));
        }
    }
    // Everything into the main file, then garbage over a page in its middle: the file is as long as before.
    Connection::open(&path).unwrap().query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())).unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    let page = usize::try_from(PAGE_SIZE).unwrap();
    let middle = bytes.len() / 2 / page * page;
    bytes[middle..middle + page].fill(0x5a);
    std::fs::write(&path, &bytes).unwrap();

    let verified = SqliteStore::open_with(&path, SqliteOptions { verify: true, ..SqliteOptions::default() });
    assert!(matches!(verified, Err(StoreError::Corrupt { .. })), "{verified:?}");
    assert_eq!(std::fs::read(&path).unwrap(), bytes, "refusing it changed nothing");
    // Without the check it may open; reading the damaged page is then an error of the read, not a panic.
    if let Ok(store) = SqliteStore::open(&path) {
        let mut after = None::<AgentId>;
        loop {
            match store.alive(after.as_ref(), 100) {
                Ok(page) if page.is_empty() => break,
                Ok(page) => after = page.last().map(|a| a.agent.clone()),
                Err(_) => break,
            }
        }
        let _ = store.revivals(&[agent("a1000")]);
    }
}

/// A journal file with the schema, and what the writer keeps between batches.
pub(super) struct Writer {
    _folder: tempfile::TempDir,
    pub(super) db: Connection,
    runs: Runs,
    committed: AtomicU64,
}

impl Writer {
    pub(super) fn new() -> Self {
        let folder = tempfile::tempdir().unwrap();
        let db = Connection::open(folder.path().join("journal.db")).unwrap();
        db.execute_batch(SCHEMA).unwrap();
        db.execute_batch(run_log::SCHEMA).unwrap();
        let mut runs = Runs::default();
        let (next_place, open) = tables::open_runs(&db).unwrap();
        runs.next_place = next_place;
        runs.open.extend(open);
        Self { _folder: folder, db, runs, committed: AtomicU64::new(0) }
    }

    pub(super) fn commit(&mut self, ops: Vec<Op>) {
        let (mut batch, mut spent, texts) = (ops, Vec::new(), Texts::default());
        let mut inputs = InputBatches::default();
        let (runs, inputs) = (&mut self.runs, &mut inputs);
        let mut behind = Behind::new(tokio::sync::mpsc::unbounded_channel().0);
        let mut db = TestDatabase(&mut self.db);
        commit(&mut db, &mut batch, (runs, inputs, &mut behind), (&mut spent, &texts), false, &self.committed);
    }

    fn committed(&self) -> u64 {
        self.committed.load(Ordering::SeqCst)
    }

    /// The run's row, if written: whether it ended, its outcome and whether it was delivered. A run in a
    /// batch of ended runs ended, and its outcome was delivered.
    fn row(&self, run: Uuid) -> Option<(bool, Option<String>, bool)> {
        let row = self
            .db
            .query_row("SELECT final, outcome, delivered FROM runs WHERE run = ?1", [run.to_string()], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .optional()
            .unwrap();
        row.or_else(|| run_log::find(&self.db, run).unwrap().map(|_| (true, None, true)))
    }

    fn input(&self, agent: &AgentId, seq: u64) -> Option<Signal> {
        inputs_after(&self.db, agent, seq - 1).unwrap().into_iter().find(|(s, _)| *s == seq).map(|(_, x)| x)
    }
}

/// A test's connection as the writer's database (without a checkpointer).
struct TestDatabase<'a>(&'a mut Connection);

impl crate::store::tables::Database for TestDatabase<'_> {
    fn transaction(
        &mut self,
        write: &mut dyn FnMut(&mut dyn crate::store::tables::Tables) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let tx = self.0.transaction().map_err(database)?;
        write(&mut SqliteTables::new(&tx))?;
        tx.commit().map_err(database)
    }

    fn open_runs(&mut self) -> Result<(i64, Vec<Uuid>), StoreError> {
        tables::open_runs(self.0)
    }
}

/// An outcome signal's JSON, told apart by its run.
fn outcome_of(run: Uuid) -> String {
    json(&Signal::new("action.completed", json!({ "run": run })).unwrap())
}

/// The writes of a run of `me` that ended at once, with its outcome (`safe_again` or not).
fn ended_run(me: &AgentId, safe_again: bool) -> (Uuid, String, Vec<Op>) {
    let run = Uuid::now_v7();
    let mut record = RunRecord::queued(run, me.clone(), ActionId::new("x.y").unwrap(), &json!({}), run);
    record.apply(RunUpdate { status: Some(RunStatus::Completed), ..RunUpdate::default() }, Utc::now());
    let row = RunRow::of(record);
    let outcome = outcome_of(run);
    let key = format!("{me}/1/0");
    let plan = PlanText { key_len: key.len(), text: key + "{}" };
    let ops =
        vec![Op::Run(row), Op::Plan(run, plan), Op::Outcome(run, outcome.clone().into_bytes(), safe_again, me.clone())];
    (run, outcome, ops)
}

/// A run that ended as drafted, its outcome consumed in the same commit, joins a batch: its plan is kept in
/// the compact form (a few bytes beside its params, against ~180 as JSON), and a recovery reads it whole.
#[test]
fn a_batched_run_keeps_its_plan_compact_and_a_recovery_reads_it_whole() {
    let me = agent("me");
    let mut writer = Writer::new();
    let ([drafted, _], model) =
        drafted_run(&me, RunKey::Input { incarnation: 0, seq: 1, index: 0 }, &json!({"i": 7}), false);
    let Unwritten { draft, plan } = drafted;
    let run = model.record.run;
    writer.commit(vec![
        // The record with its plan and its outcome, in one write, as the store sends a run that ended.
        Op::Run(RunRow {
            draft: draft.handed_over(false),
            plan: plan.map(PlanRow::Parts),
            outcome: Some((outcome_of(run).into_bytes(), true)),
        }),
        Op::KeptInput(me.clone(), 1, run),
    ]);
    let body: Vec<u8> = writer.db.query_row("SELECT body FROM run_batches", [], |r| r.get(0)).unwrap();
    let entry = run_log::entries(&body).next().unwrap().unwrap();
    assert_eq!(entry.key, Some("me/1/0"));
    let plan = entry.plan.expect("a plan");
    assert!(plan.len() < 40 && plan.first() != Some(&b'{'), "compact: {:?}", String::from_utf8_lossy(plan));
    let runs = run_log::revival_runs(&writer.db, &me, me.as_str(), 0).unwrap();
    assert_eq!(runs, vec![KeyedRun { delivered: true, ..model }]);
}

#[test]
fn outcome_signals_the_runtime_made_are_kept_compact_and_read_back_equal() {
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("journal.db");
    let store = SqliteStore::open(&path).unwrap();
    let me = agent("me");
    let record = AgentRecord { agent: me.clone(), agent_type: "test".to_owned(), spawn: json!({}), asleep: false };
    store.agent_spawned(PEN, record, snapshot_at(&me, 0));
    let action = ActionId::new("x.y").unwrap();
    let source: Arc<str> = "agentry/agent/me".into();
    let mut outcomes = Vec::new();
    for (n, safe_again) in [(1u64, false), (2, true)] {
        let run = Uuid::now_v7();
        let mut record = RunRecord::queued(run, me.clone(), action.clone(), &json!({}), run);
        record.apply(RunUpdate { status: Some(RunStatus::Completed), ..RunUpdate::default() }, Utc::now());
        store.record(PEN, record).unwrap();
        let key = format!("me/{n}/0");
        store.run_planned(PEN, run, &RunPlan { key, params: json!({}), by_agent: true, cause: None, correlation: run });
        let made =
            crate::action::Outcome::completed(json!({ "n": n, "text": "é\"" }), std::time::Duration::from_millis(7), 1);
        let refs = crate::kinds::stamped::RunRef { run, action: &action, correlation: run, causation: Some(run) };
        let signal =
            crate::kinds::stamped::action_outcome_at(&source, refs, made, (Uuid::now_v7(), Utc::now())).unwrap();
        store.run_outcome(PEN, &me, run, &signal, safe_again);
        outcomes.push((run, signal));
    }
    // The second is consumed as input 1: logged in the agent's input log.
    let (consumed, logged) = &outcomes[1];
    store.append_kept_outcome(PEN, &me, 1, *consumed, logged);
    let revivals = store.revivals(std::slice::from_ref(&me)).unwrap();
    let [Ok(revival)] = &revivals[..] else { panic!("one revival: {revivals:?}") };
    assert_eq!(revival.inputs, vec![(1, logged.clone())], "the logged outcome reads back equal");
    assert!(revival.inputs[0].1.outcome().is_some());
    let (waiting, kept) = &outcomes[0];
    let run = revival.runs.iter().find(|r| r.record.run == *waiting).expect("the run whose outcome waits");
    assert_eq!(run.outcome.as_ref(), Some(kept), "the outcome kept with its run reads back equal");
    drop(store);
    let db = Connection::open(&path).unwrap();
    let kind: String =
        db.query_row("SELECT typeof(outcome) FROM runs WHERE run = ?1", [waiting.to_string()], |r| r.get(0)).unwrap();
    assert_eq!(kind, "blob", "kept in the compact form");
}

#[test]
fn an_ended_run_waits_for_its_outcome_to_be_consumed_and_is_then_written_once_without_it() {
    let mut writer = Writer::new();
    let me = agent("me");
    let (run, outcome, mut ops) = ended_run(&me, true);
    ops.push(Op::Input(agent("other"), 1, b"{}".to_vec(), None, Uuid::now_v7()));
    writer.commit(ops);
    assert_eq!(writer.row(run), None, "held back while the agent has not consumed the outcome");
    assert_eq!(writer.committed(), 1, "what is held back does not count as committed");

    writer.commit(vec![Op::KeptInput(me.clone(), 1, run)]);
    assert_eq!(writer.row(run), Some((true, None, true)), "written once, delivered, its outcome in the log");
    assert_eq!(writer.input(&me, 1), Some(decode("input", &outcome).unwrap()));
    assert_eq!(writer.committed(), 5, "every write counted once written");
}

#[test]
fn a_run_not_safe_to_start_again_is_written_at_once_and_its_outcome_copied_to_the_log_when_consumed() {
    let mut writer = Writer::new();
    let me = agent("me");
    let (run, outcome, ops) = ended_run(&me, false);
    writer.commit(ops);
    assert_eq!(writer.row(run), Some((true, Some(outcome.clone()), false)));
    assert_eq!(writer.committed(), 3);

    writer.commit(vec![Op::KeptInput(me.clone(), 1, run)]);
    let input = writer.input(&me, 1);
    assert_eq!(input, Some(decode("input", &outcome).unwrap()), "the input is the outcome as it was kept");
    assert_eq!(writer.row(run), Some((true, Some(outcome), true)), "and the run is marked delivered");
}

#[test]
fn a_flush_or_the_end_of_the_wait_writes_what_was_held_back() {
    let mut writer = Writer::new();
    let me = agent("me");
    let (flushed, outcome, ops) = ended_run(&me, true);
    writer.commit(ops);
    assert_eq!(writer.row(flushed), None);
    writer.commit(vec![Op::Flush(Waiter::Nobody)]);
    assert_eq!(writer.row(flushed), Some((true, Some(outcome), false)), "someone waits: written, to be delivered");
    assert_eq!(writer.committed(), 3);

    let (late, _, ops) = ended_run(&me, true);
    writer.commit(ops);
    assert!(writer.runs.held_until().is_some_and(|until| until <= Instant::now() + HOLD_FOR));
    writer.commit(Vec::new());
    assert_eq!(writer.row(late), None, "a batch of nothing before its time writes nothing");
    for (_, pending) in &mut writer.runs.pending {
        pending.hold_until = Some(Instant::now());
    }
    writer.commit(Vec::new());
    assert!(writer.row(late).is_some_and(|(_, outcome, _)| outcome.is_some()), "its time is up: written");
    assert_eq!((writer.runs.held_until(), writer.committed()), (None, 6));
}

#[test]
fn a_snapshot_of_its_agent_writes_an_ended_run_held_back_with_its_outcome() {
    let mut writer = Writer::new();
    let (me, other) = (agent("me"), agent("other"));
    let (held, outcome, ops) = ended_run(&me, true);
    writer.commit(ops);
    writer.commit(vec![Op::Snapshot(Box::new(snapshot_at(&other, 5)))]);
    assert_eq!(writer.row(held), None, "another agent's snapshot does not need it");
    writer.commit(vec![Op::Snapshot(Box::new(snapshot_at(&me, 1)))]);
    assert_eq!(writer.row(held), Some((true, Some(outcome), false)), "committed with the snapshot");

    // The same when the run and the snapshot are in one batch; a run that ends after it may still wait.
    let (before, outcome, mut ops) = ended_run(&me, true);
    ops.push(Op::Snapshot(Box::new(snapshot_at(&me, 2))));
    let (after, _, later) = ended_run(&me, true);
    ops.extend(later);
    writer.commit(ops);
    assert_eq!(writer.row(before), Some((true, Some(outcome), false)));
    assert_eq!(writer.row(after), None);
}

#[test]
fn the_writer_writes_what_it_held_back_when_its_time_is_up_and_when_the_store_closes() {
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("journal.db");
    let me = agent("me");
    let written = |run: Uuid| -> bool {
        let raw = Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
        raw.query_row("SELECT count(*) FROM runs WHERE run = ?1", [run.to_string()], |r| r.get::<_, i64>(0)).unwrap()
            == 1
    };
    let ended = |store: &SqliteStore| {
        let run = Uuid::now_v7();
        store.record(PEN, RunRecord::queued(run, me.clone(), ActionId::new("x.y").unwrap(), &json!({}), run)).unwrap();
        let done = RunUpdate { status: Some(RunStatus::Completed), ..RunUpdate::default() };
        store.update(PEN, run, done, Utc::now()).unwrap();
        store.run_outcome(PEN, &me, run, &Signal::new("action.completed", json!({})).unwrap(), true);
        run
    };
    let store = SqliteStore::open(&path).unwrap();
    let first = ended(&store);
    // Nothing else is written: the writer wakes by itself. (Watching the file; it gives up after 10 s.)
    let start = Instant::now();
    while !written(first) {
        assert!(start.elapsed() < std::time::Duration::from_secs(10), "the held run was never written");
        std::thread::yield_now();
    }
    let last = ended(&store);
    drop(store);
    assert!(written(last), "closing the store writes what it held back");
}

#[test]
fn a_version_3_journal_opens_and_its_runs_are_read_in_order_beside_those_written_in_batches() {
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("journal.db");
    let me = agent("me");
    let ended = |run: Uuid| {
        let mut record = RunRecord::queued(run, me.clone(), ActionId::new("x.y").unwrap(), &json!({}), run);
        record.apply(RunUpdate { status: Some(RunStatus::Completed), ..RunUpdate::default() }, Utc::now());
        record
    };
    let old = ended(Uuid::now_v7());
    drop(SqliteStore::open(&path).unwrap());
    {
        // What version 3 wrote: every run a row of `runs`, and no batches.
        let db = Connection::open(&path).unwrap();
        db.execute_batch("DROP TABLE run_batches; DROP TABLE run_batch_actions; PRAGMA user_version = 3;").unwrap();
        db.execute(
            "INSERT INTO runs (run, agent, action, status, recorded, final, record, key, delivered) \
             VALUES (?1, 'me', 'x.y', '\"completed\"', 0, 1, ?2, 'me/1/0', 1)",
            params![old.run.to_string(), json(&old)],
        )
        .unwrap();
    }
    let store = SqliteStore::open(&path).unwrap();
    let new: Vec<RunRecord> = (0..3).map(|_| ended(Uuid::now_v7())).collect();
    for (n, record) in new.iter().enumerate() {
        let seq = n as u64 + 2;
        store.record(PEN, record.clone()).unwrap();
        let plan = RunPlan {
            key: format!("me/{seq}/0"),
            params: json!({}),
            by_agent: true,
            cause: None,
            correlation: record.run,
        };
        store.run_planned(PEN, record.run, &plan);
        let outcome = Signal::new("action.completed", json!({ "run": record.run })).unwrap();
        store.run_outcome(PEN, &me, record.run, &outcome, true);
        store.append_kept_outcome(PEN, &me, seq, record.run, &outcome);
    }
    let keyed = store.keyed_runs(&RunQuery::default()).unwrap();
    let expected: Vec<(RunRecord, Option<String>)> = std::iter::once((old.clone(), Some("me/1/0".to_owned())))
        .chain(new.iter().enumerate().map(|(n, r)| (r.clone(), Some(format!("me/{}/0", n + 2)))))
        .collect();
    assert_eq!(keyed, expected, "the old row first, then the new ones, each with its key");
    drop(store);
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(store.get(old.run), Some(old), "an old run is found by its id");
    assert_eq!(store.get(new[1].run).as_ref(), Some(&new[1]), "so is a new one, read from the file");
    drop(store);
    let version: i64 = Connection::open(&path).unwrap().query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(version, VERSION);
}

#[test]
fn a_version_4_journal_with_records_and_signals_as_json_opens_and_reads() {
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("journal.db");
    let me = agent("me");
    let store = SqliteStore::open(&path).unwrap();
    let record = AgentRecord { agent: me.clone(), agent_type: "test".to_owned(), spawn: json!({}), asleep: false };
    store.agent_spawned(PEN, record, snapshot_at(&me, 0));
    drop(store);
    let ended = |run: Uuid| {
        let mut record = RunRecord::queued(run, me.clone(), ActionId::new("x.y").unwrap(), &json!({}), run);
        record.apply(RunUpdate { status: Some(RunStatus::Completed), ..RunUpdate::default() }, Utc::now());
        record
    };
    let (batched, waiting) = (ended(Uuid::now_v7()), ended(Uuid::now_v7()));
    let plan = |key: &str, run: Uuid| RunPlan {
        key: key.into(),
        params: json!({}),
        by_agent: true,
        cause: None,
        correlation: run,
    };
    let input = Signal::new("tick", json!(1)).unwrap();
    let outcome = Signal::new("action.completed", json!({ "run_id": waiting.run })).unwrap();
    {
        // What version 4 wrote: a batch row whose run's record is JSON, a run whose outcome waits (JSON, as
        // text), and an input logged as JSON.
        let db = Connection::open(&path).unwrap();
        let mut body = Vec::new();
        body.extend_from_slice(&1i64.to_le_bytes());
        body.extend_from_slice(batched.run.as_bytes());
        for text in [b"me/1/0".to_vec(), json(&plan("me/1/0", batched.run)).into_bytes(), json(&batched).into_bytes()] {
            body.extend_from_slice(&(text.len() as u32).to_le_bytes());
            body.extend_from_slice(&text);
        }
        db.execute(
            "INSERT INTO run_batches VALUES (1, 1, 'me', 1, ?1, ?1, 0, ?2, ?3, ?4)",
            params![&batched.run.as_bytes()[..], i64::MAX / 2, run_log::status_bit(RunStatus::Completed), body],
        )
        .unwrap();
        db.execute("INSERT INTO run_batch_actions VALUES ('x.y', 1)", []).unwrap();
        db.execute(
            "INSERT INTO runs (run, agent, action, status, recorded, final, record, key, plan, outcome, delivered, place) \
             VALUES (?1, 'me', 'x.y', '\"completed\"', 0, 1, ?2, 'me/2/0', ?3, ?4, 0, 2)",
            params![waiting.run.to_string(), json(&waiting), json(&plan("me/2/0", waiting.run)), json(&outcome)],
        )
        .unwrap();
        let mut inputs = Vec::new();
        inputs.extend_from_slice(&1u64.to_le_bytes());
        let text = json(&input);
        inputs.extend_from_slice(&(text.len() as u32).to_le_bytes());
        inputs.extend_from_slice(text.as_bytes());
        db.execute("INSERT INTO input_batches (agent, first_seq, last_seq, body) VALUES ('me', 1, 1, ?1)", [inputs])
            .unwrap();
        db.execute_batch("PRAGMA user_version = 4;").unwrap();
    }
    let store = SqliteStore::open(&path).unwrap();
    let keyed = store.keyed_runs(&RunQuery::default()).unwrap();
    let expected = vec![(batched.clone(), Some("me/1/0".to_owned())), (waiting.clone(), Some("me/2/0".to_owned()))];
    assert_eq!(keyed, expected, "the batched run's JSON record reads, in its place");
    assert_eq!(store.get(batched.run), Some(batched.clone()));
    let revivals = store.revivals(std::slice::from_ref(&me)).unwrap();
    let [Ok(revival)] = &revivals[..] else { panic!("one revival: {revivals:?}") };
    assert_eq!(revival.inputs, vec![(1, input)], "an input logged as JSON reads");
    let kept = revival.runs.iter().find(|r| r.record.run == waiting.run).expect("the run whose outcome waits");
    assert_eq!(kept.outcome.as_ref(), Some(&outcome), "an outcome kept as JSON reads");
    let asked = revival.runs.iter().find(|r| r.record.run == batched.run).expect("the batched run input 1 asked for");
    assert_eq!(asked.plan, Some(plan("me/1/0", batched.run)), "a batched run's plan kept as JSON reads");
    drop(store);
    let version: i64 = Connection::open(&path).unwrap().query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(version, VERSION);
}

/// A journal from before jobs were journaled (version 6, no `jobs` table) opens, lists its agents, and keeps
/// jobs from then on.
#[test]
fn a_version_6_journal_opens_and_keeps_jobs_from_then_on() {
    use crate::action::JobRecord;
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("journal.db");
    let me = agent("me");
    let record = AgentRecord { agent: me.clone(), agent_type: "t".into(), spawn: Value::Null, asleep: true };
    {
        let store = SqliteStore::open(&path).unwrap();
        let initial = Snapshot {
            agent: me.clone(),
            seq: 0,
            agent_type: "t".into(),
            version: 1,
            state: Value::Null,
            at: Utc::now(),
            incarnation: 1,
        };
        store.agent_spawned(PEN, record.clone(), initial);
        drop(store);
        let db = Connection::open(&path).unwrap();
        db.execute_batch("DROP TABLE jobs; PRAGMA user_version = 6;").unwrap();
    }
    let store = SqliteStore::open(&path).unwrap();
    let listed = store.alive(None, 10).unwrap();
    assert_eq!(listed, vec![AliveAgent::of(&record)], "listed as before, with no job pending");
    let job = JobRecord::queued(Uuid::now_v7(), me.clone(), ActionId::new("x.y").unwrap(), Utc::now());
    let plan = super::super::JobPlan {
        key: "me~1/1/0/1".into(),
        params: json!({"n": 1}),
        stack: Vec::new(),
        correlation: Uuid::nil(),
        from_outside: false,
    };
    store.job_submitted(PEN, &job, &plan);
    let listed = store.alive(None, 10).unwrap();
    assert!(listed[0].jobs_pending, "a sleeper with a job not ended is to be woken");
    let revivals = store.revivals(std::slice::from_ref(&me)).unwrap();
    let [Ok(revival)] = &revivals[..] else { panic!("one revival: {revivals:?}") };
    assert_eq!(revival.jobs.len(), 1);
    assert_eq!((&revival.jobs[0].record, &revival.jobs[0].plan), (&job, &plan));
    drop(store);
    let version: i64 = Connection::open(&path).unwrap().query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(version, VERSION);
}

#[test]
fn a_version_2_journal_opens_and_its_inputs_are_read_with_those_logged_after() {
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("journal.db");
    let me = agent("me");
    let logged: Vec<(u64, Signal)> = (1..=3).map(|seq| (seq, Signal::new("tick", json!(seq)).unwrap())).collect();
    drop(SqliteStore::open(&path).unwrap());
    {
        let db = Connection::open(&path).unwrap();
        db.execute_batch("DROP TABLE input_batches; PRAGMA user_version = 2;").unwrap();
        for (seq, signal) in &logged[..2] {
            db.execute("INSERT INTO inputs VALUES ('me', ?1, ?2)", params![*seq as i64, json(signal)]).unwrap();
        }
    }
    let store = SqliteStore::open(&path).unwrap();
    store.append_input(PEN, &me, 3, &logged[2].1);
    assert_eq!(store.inputs_after(&me, 0).unwrap(), logged, "the old rows and the new batch, in order");
    store.save_snapshot(PEN, snapshot_at(&me, 3));
    assert!(store.inputs_after(&me, 0).unwrap().is_empty(), "a snapshot clears both");
    drop(store);
    let version: i64 = Connection::open(&path).unwrap().query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(version, VERSION);
}
