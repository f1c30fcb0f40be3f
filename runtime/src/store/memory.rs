//! The in-memory journal.

use super::{
    EndedDraft, FastHash, JournalPen, RecordDraft, Refusal, RunQuery, RunRecord, RunUpdate, Store, StoreError,
};
use crate::id::AgentId;
use chrono::{DateTime, Utc};
use dashmap::DashMap;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use uuid::Uuid;

/// How many ended runs a [`MemoryStore`] made with [`MemoryStore::new`] keeps.
pub const DEFAULT_KEEP: usize = 100_000;

/// A journaled run, with its place in the order runs were recorded.
#[derive(Debug)]
struct Entry {
    place: u64,
    record: RunRecord,
}

/// A run on the mover's list: its record, or the server's draft of it (made into its record as it is moved).
#[derive(Debug)]
enum Retiring {
    Record(Entry),
    Draft(u64, RecordDraft),
}

/// Ended runs, in the order they ended, with an index by run id.
///
/// The index is brought up to date when it is read (a run looked up by id, a duplicate checked), not as runs
/// are moved in: most ended runs are never looked up, and keeping 100,000 of them indexed as they come and go
/// cost the mover two cache misses a run.
#[derive(Debug, Default)]
struct Ended {
    runs: VecDeque<Entry>,
    /// The end number of each kept run numbered below `indexed`; `runs[0]` has number `first`.
    index: HashMap<Uuid, u64, FastHash>,
    indexed: u64,
    first: u64,
    /// How many runs the last batch moved in.
    last_batch: usize,
}

impl Ended {
    /// The number the next run moved in takes.
    fn next(&self) -> u64 {
        self.first + self.runs.len() as u64
    }

    /// Indexes every kept run not indexed yet. A run id already indexed keeps its first number (a run drafted
    /// by a server has an id the server just made, so this is logged, never expected).
    fn index_all(&mut self) {
        for number in self.indexed.max(self.first)..self.next() {
            let Some(entry) = usize::try_from(number - self.first).ok().and_then(|at| self.runs.get(at)) else {
                break;
            };
            let run = entry.record.run;
            if let std::collections::hash_map::Entry::Vacant(slot) = self.index.entry(run) {
                slot.insert(number);
            } else {
                tracing::error!(%run, "a run was journaled as ended twice; reads by id find the first");
            }
        }
        self.indexed = self.next();
    }

    /// Whether run `run` is among the kept ended runs.
    fn contains(&mut self, run: &Uuid) -> bool {
        self.index_all();
        self.index.contains_key(run)
    }

    fn get(&mut self, run: &Uuid) -> Option<&Entry> {
        self.index_all();
        let number = self.index.get(run)?;
        self.runs.get(usize::try_from(number - self.first).ok()?)
    }

    /// Forgets the oldest kept run.
    fn forget_oldest(&mut self) {
        if let Some(old) = self.runs.pop_front() {
            if self.first < self.indexed && self.index.get(&old.record.run) == Some(&self.first) {
                self.index.remove(&old.record.run);
            }
            self.first += 1;
        }
    }
}

/// A journal kept in memory, in the order runs were recorded. It keeps every run still going and the most
/// recently ended ones, up to a limit; older ended runs are forgotten, so a long-lived process does not grow
/// without end. For a journal that keeps everything, use a store on disk.
///
/// Runs still going live in a map sharded by id, so an agent's server recording a run and the tasks of other
/// runs updating theirs rarely wait for each other; that map stays as small as the work in flight, which keeps
/// its updates cheap. A run that ends is put on a short list, and a thread of the journal's own moves it from
/// there to the ended runs it keeps, in batches: keeping 100,000 ended runs means touching memory that is no
/// longer in any cache, and that work is done beside the agents instead of in their way. Every read moves the
/// list first, so a read sees every write made before it.
///
/// A run recorded once it already ended (as a run that ends at its first poll is) is checked against the runs
/// still going, not against the ended ones; one whose id is already among the ended runs is dropped, with an
/// error in the log, when it is moved. Such a run recorded by an agent's server goes on the list as the server
/// drafted it, unchecked (its id is one the server just made), and the mover makes its record: the params'
/// digest and the history are made on the mover's thread instead of the agent's.
///
/// Only the runtime writes it (see [`JournalPen`]); everyone reads it through [`Runtime::store`]:
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use agentry::runtime::Runtime;
/// use agentry::store::{MemoryStore, RunQuery};
/// let runtime = Runtime::builder().store(std::sync::Arc::new(MemoryStore::keeping(1_000))).build();
/// assert!(runtime.store().query(&RunQuery::default()).is_empty());
/// # }
/// ```
///
/// [`Runtime::store`]: crate::runtime::Runtime::store
#[derive(Debug)]
pub struct MemoryStore {
    journal: Arc<Journal>,
}

/// What a [`MemoryStore`] keeps, shared with its mover thread.
#[derive(Debug)]
struct Journal {
    live: DashMap<Uuid, Entry, FastHash>,
    next: AtomicU64,
    ended: Mutex<Ended>,
    /// Runs that ended, in the order they ended, not yet moved to `ended`.
    retiring: Mutex<Vec<Retiring>>,
    keep: usize,
    /// The most recent refused effects, at most `keep`.
    refusals: Mutex<VecDeque<Refusal>>,
    /// The mover thread, once started (at the first run that ends).
    mover: OnceLock<std::thread::Thread>,
    /// Set while the mover sleeps until woken; cleared by whoever wakes it.
    parked: AtomicBool,
    /// Set when the store is dropped: the mover ends.
    closed: AtomicBool,
}

/// How long the mover waits between looks at the list while runs keep ending, and how many empty looks it takes
/// before it sleeps until woken. Waking a sleeping thread costs the one ending a run a system call, so under a
/// steady stream of runs the mover looks on its own instead.
const MOVER_LOOK: std::time::Duration = std::time::Duration::from_micros(500);
const MOVER_LOOKS_BEFORE_SLEEP: u32 = 4;

/// The most room the list of ended runs is given ahead of them.
const RETIRING_ROOM: usize = 4_096;

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for MemoryStore {
    fn drop(&mut self) {
        self.journal.closed.store(true, Ordering::SeqCst);
        if let Some(mover) = self.journal.mover.get() {
            mover.unpark();
        }
    }
}

impl MemoryStore {
    /// An empty journal that keeps the [`DEFAULT_KEEP`] most recently ended runs.
    pub fn new() -> Self {
        Self::keeping(DEFAULT_KEEP)
    }

    /// An empty journal that keeps the `keep` most recently ended runs (and every run still going).
    pub fn keeping(keep: usize) -> Self {
        let journal = Journal {
            live: DashMap::default(),
            next: AtomicU64::new(0),
            ended: Mutex::default(),
            retiring: Mutex::default(),
            keep,
            refusals: Mutex::default(),
            mover: OnceLock::new(),
            parked: AtomicBool::new(false),
            closed: AtomicBool::new(false),
        };
        Self { journal: Arc::new(journal) }
    }

    /// Journals a run the server drafted, and that ended before it was written: its record is made when the
    /// mover moves it in (or a read does).
    pub(crate) fn record_draft(&self, draft: RecordDraft) {
        let place = self.journal.next.fetch_add(1, Ordering::Relaxed);
        self.retire(Retiring::Draft(place, draft));
    }

    /// Puts a run that just ended on the mover's list, and wakes the mover if it sleeps.
    fn retire(&self, run: Retiring) {
        let journal = &self.journal;
        let first = {
            let mut retiring = lock(&journal.retiring);
            retiring.push(run);
            retiring.len() == 1
        };
        let mover = journal.mover.get_or_init(|| spawn_mover(Arc::downgrade(journal)));
        if first && journal.parked.swap(false, Ordering::SeqCst) {
            mover.unpark();
        }
    }
}

/// Locks a mutex of the journal. What each guards changes with nothing in between that can panic, so a
/// poisoned lock still guards consistent data.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Journal {
    /// The ended runs, with every run on the list moved in first.
    fn settled(&self) -> MutexGuard<'_, Ended> {
        let mut ended = lock(&self.ended);
        // Taken under the ended runs' lock, so batches are moved in the order they ended. The list left in its
        // place has room for twice as many as the last batch (up to a bound), made here: whoever ends runs then
        // pushes onto it without growing it (as a run takes a few hundred bytes, growing copies them all), even
        // as runs come faster, and it is freed where it was made.
        let room = Vec::with_capacity(ended.last_batch.saturating_mul(2).min(RETIRING_ROOM));
        let batch = std::mem::replace(&mut *lock(&self.retiring), room);
        ended.last_batch = batch.len();
        self.move_in(&mut ended, batch);
        ended
    }

    /// Moves ended runs to the back of the ended runs, and forgets the oldest past the limit. A run recorded
    /// whole is checked against the kept ones (a server's draft has an id it just made).
    fn move_in(&self, ended: &mut Ended, batch: Vec<Retiring>) {
        for retiring in batch {
            let entry = match retiring {
                Retiring::Record(entry) if ended.contains(&entry.record.run) => {
                    let run = entry.record.run;
                    tracing::error!(%run, "a run recorded as ended was already journaled as ended; the later record was dropped");
                    continue;
                }
                Retiring::Record(entry) => entry,
                Retiring::Draft(place, draft) => Entry { place, record: draft.into_record().0 },
            };
            ended.runs.push_back(entry);
            // Forgotten as each run comes in, so a run checked later in the batch is checked against the runs
            // kept at its turn.
            while ended.runs.len() > self.keep {
                ended.forget_oldest();
            }
        }
    }
}

/// Starts the thread that moves ended runs in; it holds the journal only while it works, and ends once the
/// store is dropped.
fn spawn_mover(journal: Weak<Journal>) -> std::thread::Thread {
    let spawned = std::thread::Builder::new().name("agentry-mover".to_owned()).spawn(move || {
        let mut empty_looks = 0;
        loop {
            let Some(journal) = journal.upgrade() else { return };
            if journal.closed.load(Ordering::SeqCst) {
                return;
            }
            let had = !lock(&journal.retiring).is_empty();
            if had {
                drop(journal.settled());
                empty_looks = 0;
            } else {
                empty_looks += 1;
            }
            if empty_looks < MOVER_LOOKS_BEFORE_SLEEP {
                drop(journal);
                std::thread::sleep(MOVER_LOOK);
                continue;
            }
            // Sleep until a run ends: say so first, then look once more, so a run that ended meanwhile is seen.
            journal.parked.store(true, Ordering::SeqCst);
            if !lock(&journal.retiring).is_empty() {
                journal.parked.store(false, Ordering::SeqCst);
                continue;
            }
            drop(journal);
            std::thread::park();
            empty_looks = 0;
        }
    });
    match spawned {
        Ok(handle) => handle.thread().clone(),
        // Without a thread of its own the journal still works: every read moves the list in.
        Err(err) => {
            tracing::error!(%err, "the journal's mover thread could not start; reads move ended runs in");
            std::thread::current()
        }
    }
}

impl Store for MemoryStore {
    fn record(&self, _: &JournalPen, record: RunRecord) -> Result<(), StoreError> {
        let run = record.run;
        let journal = &self.journal;
        match journal.live.entry(run) {
            dashmap::Entry::Occupied(_) => Err(StoreError::Duplicate(run)),
            // A run journaled once it already ended goes straight to the mover's list.
            dashmap::Entry::Vacant(_) if record.status().is_final() => {
                let place = journal.next.fetch_add(1, Ordering::Relaxed);
                self.retire(Retiring::Record(Entry { place, record }));
                Ok(())
            }
            // The shard stays locked while the ended runs are checked, so the run cannot end in between.
            dashmap::Entry::Vacant(_) if journal.settled().contains(&run) => Err(StoreError::Duplicate(run)),
            dashmap::Entry::Vacant(slot) => {
                let place = journal.next.fetch_add(1, Ordering::Relaxed);
                slot.insert(Entry { place, record });
                Ok(())
            }
        }
    }

    fn update(&self, _: &JournalPen, run: Uuid, update: RunUpdate, at: DateTime<Utc>) -> Result<(), StoreError> {
        let journal = &self.journal;
        let mut found = false;
        let ended = journal.live.remove_if_mut(&run, |_, entry| {
            found = true;
            entry.record.apply(update, at);
            entry.record.status().is_final()
        });
        match ended {
            // The shard's lock is released here, so taking the list's lock cannot deadlock.
            Some((_, entry)) => self.retire(Retiring::Record(entry)),
            None if !found && journal.settled().contains(&run) => return Err(StoreError::Ended(run)),
            None if !found => return Err(StoreError::UnknownRun(run)),
            None => {}
        }
        Ok(())
    }

    fn get(&self, run: Uuid) -> Option<RunRecord> {
        if let Some(entry) = self.journal.live.get(&run) {
            return Some(entry.record.clone());
        }
        self.journal.settled().get(&run).map(|entry| entry.record.clone())
    }

    fn query(&self, query: &RunQuery) -> Vec<RunRecord> {
        let matches = |record: &RunRecord| query.matches(record);
        let mut found: Vec<(u64, RunRecord)> = {
            let ended = self.journal.settled();
            ended.runs.iter().filter(|e| matches(&e.record)).map(|e| (e.place, e.record.clone())).collect()
        };
        found.extend(self.journal.live.iter().filter(|e| matches(&e.record)).map(|e| (e.place, e.record.clone())));
        found.sort_unstable_by_key(|(place, _)| *place);
        let page = found.into_iter().skip(query.offset).take(query.limit.unwrap_or(usize::MAX));
        page.map(|(_, record)| record).collect()
    }

    fn refused(&self, _: &JournalPen, refusal: Refusal) {
        let mut refusals = lock(&self.journal.refusals);
        refusals.push_back(refusal);
        while refusals.len() > self.journal.keep.max(1) {
            refusals.pop_front();
        }
    }

    fn refusals(&self, agent: &AgentId) -> Vec<Refusal> {
        let refusals = lock(&self.journal.refusals);
        refusals.iter().filter(|r| &r.agent == agent).cloned().collect()
    }

    /// A run that ended without a plan (this journal is not durable, so the server drafts none) goes on the
    /// mover's list as drafted.
    fn take_ended<'a>(&self, ended: EndedDraft<'a>) -> Option<EndedDraft<'a>> {
        match (&ended.0.plan, ended.1) {
            (None, None) => {
                self.record_draft(ended.0.draft.handed_over(false));
                None
            }
            _ => Some(ended),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::ErrorClass;
    use crate::id::{ActionId, AgentId};
    use crate::store::PEN;
    use crate::store::RunStatus;
    use serde_json::json;
    use std::time::Duration;

    fn record(agent: &str, action: &str) -> RunRecord {
        RunRecord::queued(
            Uuid::now_v7(),
            AgentId::new(agent).unwrap(),
            ActionId::new(action).unwrap(),
            &json!({"a": 1}),
            Uuid::nil(),
        )
    }

    #[test]
    fn runs_move_through_statuses_and_end_for_good() {
        let store = MemoryStore::new();
        let r = record("a1", "math.add");
        let id = r.run;
        store.record(PEN, r.clone()).unwrap();
        assert_eq!(store.record(PEN, r), Err(StoreError::Duplicate(id)));
        let running = RunUpdate { status: Some(RunStatus::Running), attempts: Some(1), ..RunUpdate::default() };
        store.update(PEN, id, running, Utc::now()).unwrap();
        let failed = RunUpdate {
            status: Some(RunStatus::Failed),
            latency: Some(Duration::from_millis(7)),
            error: Some(ErrorClass::Timeout),
            ..RunUpdate::default()
        };
        store.update(PEN, id, failed, Utc::now()).unwrap();
        let got = store.get(id).unwrap();
        let statuses: Vec<RunStatus> = got.history.iter().map(|(s, _)| *s).collect();
        assert_eq!(statuses, [RunStatus::Queued, RunStatus::Running, RunStatus::Failed]);
        assert_eq!(
            (got.attempts, got.latency, got.error),
            (1, Some(Duration::from_millis(7)), Some(ErrorClass::Timeout))
        );
        let again = store.update(PEN, id, RunUpdate::default(), Utc::now()).unwrap_err();
        assert!(again.to_string().contains("already ended"), "{again}");
        let unknown = store.update(PEN, Uuid::nil(), RunUpdate::default(), Utc::now()).unwrap_err();
        assert_eq!(unknown, StoreError::UnknownRun(Uuid::nil()));
    }

    /// A run the server drafted and that ended before it was written: the draft goes on the mover's list as it
    /// is, and every read sees the record it makes (digest of the kept text, full history), in its place
    /// among the runs recorded before and after it, whether or not the mover moved it in yet.
    #[test]
    fn a_drafted_run_reads_back_as_its_record_in_its_place() {
        use crate::store::{DraftIds, RecordDraft};
        let store = MemoryStore::new();
        let before = record("a1", "math.add");
        store.record(PEN, before.clone()).unwrap();
        let params = json!({"a": 1, "text": "café"});
        let ids = DraftIds {
            run: Uuid::now_v7(),
            agent: AgentId::new("a1").unwrap(),
            action: ActionId::new("math.div").unwrap(),
            correlation: Uuid::now_v7(),
            parent_run: None,
        };
        let run = ids.run;
        let queued = Utc::now();
        let mut draft = RecordDraft::queued(ids, &params, Some(serde_json::to_vec(&params).unwrap()), queued);
        let running = RunUpdate { status: Some(RunStatus::Running), attempts: Some(1), ..RunUpdate::default() };
        let done = RunUpdate {
            status: Some(RunStatus::Completed),
            latency: Some(Duration::from_millis(3)),
            ..RunUpdate::default()
        };
        let (started, ended) =
            (queued + chrono::TimeDelta::milliseconds(1), queued + chrono::TimeDelta::milliseconds(4));
        draft.apply(running, started);
        draft.apply(done, ended);
        store.record_draft(draft);
        let after = record("a2", "math.add");
        store.record(PEN, after.clone()).unwrap();

        let got = store.get(run).expect("the drafted run is journaled");
        assert_eq!(got.params_digest, crate::store::params_digest(&params));
        assert_eq!(
            got.history,
            [(RunStatus::Queued, queued), (RunStatus::Running, started), (RunStatus::Completed, ended)]
        );
        assert_eq!((got.attempts, got.latency), (1, Some(Duration::from_millis(3))));
        let order: Vec<Uuid> = store.query(&RunQuery::default()).into_iter().map(|r| r.run).collect();
        assert_eq!(order, [before.run, run, after.run]);
        assert_eq!(store.update(PEN, run, RunUpdate::default(), Utc::now()), Err(StoreError::Ended(run)));
    }

    #[test]
    fn queries_filter_by_agent_action_and_status() {
        let store = MemoryStore::new();
        let runs = [record("a1", "math.add"), record("a1", "math.div"), record("a2", "math.add")];
        for r in &runs {
            store.record(PEN, r.clone()).unwrap();
        }
        let done = RunUpdate { status: Some(RunStatus::Completed), ..RunUpdate::default() };
        store.update(PEN, runs[1].run, done, Utc::now()).unwrap();
        let ids = |q: RunQuery| store.query(&q).into_iter().map(|r| r.run).collect::<Vec<_>>();
        assert_eq!(ids(RunQuery::default()), runs.iter().map(|r| r.run).collect::<Vec<_>>());
        assert_eq!(
            ids(RunQuery { agent: Some(AgentId::new("a1").unwrap()), ..RunQuery::default() }),
            [runs[0].run, runs[1].run]
        );
        assert_eq!(
            ids(RunQuery { action: Some(ActionId::new("math.add").unwrap()), ..RunQuery::default() }),
            [runs[0].run, runs[2].run]
        );
        assert_eq!(ids(RunQuery { status: Some(RunStatus::Completed), ..RunQuery::default() }), [runs[1].run]);
        assert_eq!(runs[0].params_digest, crate::store::params_digest(&json!({"a": 1})));
    }

    #[test]
    fn only_the_most_recently_ended_runs_are_kept_and_runs_going_on_never_go() {
        let store = MemoryStore::keeping(2);
        let runs: Vec<RunRecord> = (0..5).map(|_| record("a1", "math.add")).collect();
        for r in &runs {
            store.record(PEN, r.clone()).unwrap();
        }
        let done = || RunUpdate { status: Some(RunStatus::Completed), ..RunUpdate::default() };
        // Runs 1, 3, 0 end in this order; 2 and 4 go on.
        for i in [1, 3, 0] {
            store.update(PEN, runs[i].run, done(), Utc::now()).unwrap();
        }
        let kept: Vec<Uuid> = store.query(&RunQuery::default()).into_iter().map(|r| r.run).collect();
        assert_eq!(kept, [runs[0].run, runs[2].run, runs[3].run, runs[4].run], "run 1 ended first and went");
        assert_eq!(store.get(runs[1].run), None);
        assert_eq!(store.update(PEN, runs[1].run, done(), Utc::now()), Err(StoreError::UnknownRun(runs[1].run)));
        store.update(PEN, runs[2].run, done(), Utc::now()).unwrap();
        let kept: Vec<Uuid> = store.query(&RunQuery::default()).into_iter().map(|r| r.run).collect();
        assert_eq!(kept, [runs[0].run, runs[2].run, runs[4].run]);
    }

    /// Spins (yielding) until `done` holds, for at most ten seconds.
    fn eventually(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(std::time::Instant::now() < deadline, "{what} did not happen within ten seconds");
            std::thread::yield_now();
        }
    }

    #[test]
    fn the_mover_moves_ended_runs_in_without_a_read_and_lets_the_journal_go_with_the_store() {
        let store = MemoryStore::keeping(10);
        let done = || RunUpdate { status: Some(RunStatus::Completed), ..RunUpdate::default() };
        for _ in 0..100 {
            let mut r = record("a1", "math.add");
            r.apply(done(), Utc::now());
            store.record(PEN, r).unwrap();
        }
        let journal = &store.journal;
        eventually("the mover taking the list", || lock(&journal.retiring).is_empty());
        assert_eq!(lock(&journal.ended).runs.len(), 10, "moved in and trimmed to the limit, by the mover alone");
        // Once it sleeps, a run that ends wakes it.
        eventually("the mover sleeping", || journal.parked.load(Ordering::SeqCst));
        let mut r = record("a1", "math.add");
        r.apply(done(), Utc::now());
        let last = r.run;
        store.record(PEN, r).unwrap();
        eventually("the mover waking", || lock(&journal.ended).contains(&last));
        let weak = Arc::downgrade(&store.journal);
        drop(store);
        eventually("the journal being let go", || weak.upgrade().is_none());
    }

    /// One step against the journal: record run `n` of a small pool, or update it to a status (or none).
    #[derive(Debug, Clone)]
    enum Op {
        /// Record run `n`, queued or (as a run that ended at its first poll is) already ended.
        Record(usize, Option<RunStatus>),
        Update(usize, Option<RunStatus>, u32),
        /// Read every run by id, and all of them at once. (Reads bring the index up to date, so writes between
        /// reads check runs against an index that is behind.)
        Read,
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        let status = prop::option::of(prop_oneof![
            Just(RunStatus::Running),
            Just(RunStatus::AwaitingApproval),
            Just(RunStatus::Completed),
            Just(RunStatus::Failed),
            Just(RunStatus::Blocked),
        ]);
        prop_oneof![
            (0..6usize, prop::option::of(prop_oneof![Just(RunStatus::Completed), Just(RunStatus::Failed)]))
                .prop_map(|(n, ended)| Op::Record(n, ended)),
            (0..6usize, status, 0..5u32).prop_map(|(n, s, a)| Op::Update(n, s, a)),
            Just(Op::Read),
        ]
    }

    /// Every run read by id, and all at once, as the model has them.
    fn reads(
        store: &MemoryStore,
        ids: &[Uuid],
        kept: &[RunRecord],
    ) -> Result<(), proptest::test_runner::TestCaseError> {
        proptest::prop_assert_eq!(&store.query(&RunQuery::default()), kept);
        for id in ids {
            proptest::prop_assert_eq!(store.get(*id), kept.iter().find(|r| r.run == *id).cloned());
        }
        Ok(())
    }

    proptest::proptest! {
        /// The journal against a model: every recorded run in record order, the ended ones in end order, and
        /// only the `keep` most recently ended kept.
        #[test]
        fn the_journal_matches_a_model(keep in 0..4usize, ops in proptest::collection::vec(op(), 0..40)) {
            let ids: Vec<Uuid> = (0..6).map(|_| Uuid::now_v7()).collect();
            let store = MemoryStore::keeping(keep);
            // The model: kept records in record order, and the kept ended runs in end order.
            let mut kept: Vec<RunRecord> = Vec::new();
            let mut ended: VecDeque<Uuid> = VecDeque::new();
            let at = Utc::now();
            for op in ops {
                match op {
                    Op::Record(n, end) => {
                        let mut new = record("a1", "math.add");
                        new.run = ids[n];
                        if let Some(status) = end {
                            new.apply(RunUpdate { status: Some(status), ..RunUpdate::default() }, at);
                        }
                        let known = kept.iter().find(|r| r.run == ids[n]);
                        let expected = if known.is_some_and(|r| end.is_some() && r.status().is_final()) {
                            // Checked when moved in, off the caller's thread: dropped, the first one kept.
                            Ok(())
                        } else if known.is_some() {
                            Err(StoreError::Duplicate(ids[n]))
                        } else {
                            kept.push(new.clone());
                            if end.is_some() {
                                ended.push_back(ids[n]);
                                while ended.len() > keep {
                                    let old = ended.pop_front();
                                    kept.retain(|r| Some(r.run) != old);
                                }
                            }
                            Ok(())
                        };
                        proptest::prop_assert_eq!(store.record(PEN, new), expected);
                    }
                    Op::Update(n, status, attempts) => {
                        let update = RunUpdate { status, attempts: Some(attempts), ..RunUpdate::default() };
                        let expected = match kept.iter_mut().find(|r| r.run == ids[n]) {
                            None => Err(StoreError::UnknownRun(ids[n])),
                            Some(r) if r.status().is_final() => Err(StoreError::Ended(ids[n])),
                            Some(r) => {
                                r.apply(update.clone(), at);
                                if r.status().is_final() {
                                    ended.push_back(ids[n]);
                                    while ended.len() > keep {
                                        let old = ended.pop_front();
                                        kept.retain(|r| Some(r.run) != old);
                                    }
                                }
                                Ok(())
                            }
                        };
                        proptest::prop_assert_eq!(store.update(PEN, ids[n], update, at), expected);
                    }
                    Op::Read => reads(&store, &ids, &kept)?,
                }
            }
            reads(&store, &ids, &kept)?;
        }
    }
}
