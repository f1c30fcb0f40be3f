//! A durable journal's writer thread: every write queued in order, applied a batch at a time in one
//! transaction (group commit), and whoever waits for durability told. What each batch writes (the writer's
//! plan) is made here, the same for every store; a store's [`Database`] and [`Tables`] only say how its
//! database takes it.

use super::behind::Behind;
use super::draft::ShortText;
use super::durable::{AgentRecord, PlanParts, RunPlan, ScheduleRecord, Snapshot};
use super::input_log::InputBatches;
use super::job_log::JobWrite;
use super::plan_codec;
use super::run_log::{RunBatches, Settled};
use super::signal_codec;
use super::tables::{Database, RunWrite, Tables, json};
use super::{FastHash, PlanDraft, RecordDraft, Refusal, RunRecord, StoreError};
use crate::id::AgentId;
use crate::signal::Signal;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Instant;
use uuid::Uuid;

/// The most writes waiting for the writer. A thread that writes faster than the disk takes them waits when
/// this many are queued (backpressure), so memory stays bounded however long the burst.
pub(crate) const QUEUE: usize = 4 * BATCH;
/// The most writes applied in one transaction.
pub(crate) const BATCH: usize = 4096;
/// A batch smaller than this that nobody waits on waits [`GATHER_FOR`] for more writes before it commits.
pub(crate) const GATHER_BELOW: usize = 256;
pub(crate) const GATHER_FOR: std::time::Duration = std::time::Duration::from_micros(500);
/// While it gathers, the writer sleeps this long at a time and then takes what came.
pub(crate) const GATHER_SLICE: std::time::Duration = std::time::Duration::from_micros(100);
/// How long an ended run whose outcome the agent has not consumed yet may wait to be written, and how many may
/// wait at once (see [`Runs`]).
pub(crate) const HOLD_FOR: std::time::Duration = std::time::Duration::from_millis(10);
pub(crate) const HELD_MOST: usize = BATCH;

/// What the writer thread is asked to do.
// A run's row is by far the largest, and carried inline on purpose (see `Op::Run`).
#[allow(clippy::large_enum_variant)]
pub(crate) enum Op {
    /// Carried inline, like every write of the run path: a box made by the sending thread and freed by the
    /// writer costs both threads the allocator's slow path.
    Run(RunRow),
    /// A run's plan: its idempotency key and the plan's JSON.
    Plan(Uuid, PlanText),
    /// An ended run's outcome signal, as the journal keeps it (`signal_codec.rs`), whether the run is safe to
    /// start again (then its end may be held back a little: see [`Runs`]), and the run's agent.
    Outcome(Uuid, Vec<u8>, bool, AgentId),
    /// An input, as the journal keeps a signal (`signal_codec.rs`), the run whose outcome it is, if it is one
    /// the agent was given, and the signal's id.
    Input(AgentId, u64, Vec<u8>, Option<Uuid>, Uuid),
    /// An input that is the outcome kept for a run (by [`Op::Outcome`]): logged from that.
    KeptInput(AgentId, u64, Uuid),
    Snapshot(Box<Snapshot>),
    Alive(Box<AgentRecord>),
    Spawned(Box<AgentRecord>, Box<Snapshot>),
    Ended(AgentId),
    Armed(Box<ScheduleRecord>),
    Cleared(AgentId, String),
    Refusal(Box<Refusal>),
    Job(JobWrite),
    /// A signal an agent emitted to an agent elsewhere, kept until it is sent on: the agent, the target, the
    /// signal's id and the signal as the journal keeps one (`signal_codec.rs`).
    Sending(Box<(AgentId, AgentId, Uuid, Vec<u8>)>),
    /// A signal kept by [`Op::Sending`] was sent on: its agent and id.
    Sent(AgentId, Uuid),
    /// Answered once every write sent before it is committed.
    Flush(Waiter),
    /// The runtime brought this agent back from the journal after a failed commit left it ahead: its writes
    /// are no longer held back (see `behind.rs`). Not a write.
    Caught(AgentId),
}

impl Op {
    /// Whether it is a write (counted as sent and committed), rather than a request to the writer.
    pub(crate) fn is_write(&self) -> bool {
        !matches!(self, Op::Flush(_) | Op::Caught(_))
    }

    /// The agent whose rows the write changes, where it names one.
    pub(crate) fn agent(&self) -> Option<&AgentId> {
        match self {
            Op::Run(row) => Some(row.draft.agent()),
            Op::Input(agent, ..) | Op::KeptInput(agent, ..) | Op::Ended(agent) | Op::Cleared(agent, _) => Some(agent),
            Op::Sending(sending) => Some(&sending.0),
            // An emit sent on is forgotten whoever holds its agent now: losing the write only sends it again (its
            // target drops the copy), so it is neither held back nor a reason to bring the agent back.
            Op::Sent(..) => None,
            Op::Snapshot(snapshot) | Op::Spawned(_, snapshot) => Some(&snapshot.agent),
            Op::Alive(record) => Some(&record.agent),
            Op::Armed(schedule) => Some(&schedule.agent),
            Op::Refusal(refusal) => Some(&refusal.agent),
            Op::Job(JobWrite::Submitted(job)) => Some(&job.0.agent),
            Op::Job(JobWrite::Changed(job)) => Some(&job.0.agent),
            Op::Job(JobWrite::Told(agent, _)) => Some(agent),
            // A run's plan or outcome: its agent is the pending run's (see `commit`).
            Op::Outcome(.., agent) => Some(agent),
            Op::Plan(..) | Op::Job(JobWrite::Purged(_)) | Op::Flush(_) | Op::Caught(_) => None,
        }
    }
}

/// A run's record on its way to the writer, which makes and serializes it: a run written more than once in one
/// commit (queued, started, ended) is serialized once, and the agent's thread, the busier of the two, does none
/// of it. A run that ended crosses as the server drafted it, with its plan in its parts (see [`PlanRow`]).
///
/// It crosses as a draft, with nothing on the heap: memory allocated on one thread and freed on another makes
/// glibc's allocator lock the first thread's arena from the second, and with a vector per run crossing, the
/// agent's thread spent more time asleep on that lock than the writer spent writing. Its statuses cross in place,
/// and its params as their digest or their short text; the writer makes the record (its digest, its history's
/// vector) on its own thread.
pub(crate) struct RunRow {
    pub(crate) draft: RecordDraft,
    pub(crate) plan: Option<PlanRow>,
    /// Its outcome signal for the agent, as [`Op::Outcome`] carries one.
    pub(crate) outcome: Option<(Vec<u8>, bool)>,
}

/// A run's plan on its way to the writer with its record.
pub(crate) enum PlanRow {
    /// Its parts, the params' text being the draft's, in place: the writer makes its text.
    Parts(PlanDraft),
    /// Its text, made by the sending thread (the params' text was too long to cross in place).
    Made(PlanText),
}

impl RunRow {
    pub(crate) fn of(record: RunRecord) -> Self {
        Self { draft: RecordDraft::of_record(record), plan: None, outcome: None }
    }
}

/// A run's record as the writer keeps it until it is written.
pub(crate) struct Recorded {
    pub(crate) record: RunRecord,
    /// When it was recorded, in milliseconds since the epoch.
    pub(crate) recorded: i64,
    pub(crate) ended: bool,
}

/// The buffers that carry serialized plans, outcomes and inputs to the writer, which hands them back once they
/// are written, so the same buffers go round: nothing is allocated by one thread to be freed by another
/// (which glibc makes both threads pay for, with a lock). (Run records cross as drafts, usually with their plans
/// in their parts, and the writer makes and serializes both: see [`RunRow`].)
#[derive(Debug, Default)]
pub(crate) struct Texts(pub(crate) Mutex<Vec<Vec<u8>>>);

/// How many spare buffers the pool keeps, and the largest it keeps (a rare huge row is not kept for ever). As
/// many as the queue holds writes: when the writer falls behind, that many buffers are on their way to it, and
/// each one the pool could not keep would be freed by the writer and allocated again by an agent's thread. At
/// most 16 MiB, usually far less (a plan is ~200 bytes, an outcome signal ~500).
pub(crate) const TEXTS_KEPT: usize = QUEUE;
pub(crate) const TEXT_KEPT_BYTES: usize = 1024;
/// How many buffers the writer moves into the pool per hold of its lock, so an agent's thread taking one never
/// waits for a whole commit's.
pub(crate) const TEXTS_GIVEN_AT_ONCE: usize = 256;
/// The room a new buffer starts with: an outcome signal is 400-500 bytes of JSON.
pub(crate) const TEXT_STARTS_AT: usize = 512;

impl Texts {
    /// An empty buffer from the pool, or a new one big enough for a usual row (rather than one that grows to it
    /// a doubling at a time).
    pub(crate) fn buffer(&self) -> Vec<u8> {
        let spare = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).pop();
        let mut bytes = spare.unwrap_or_else(|| Vec::with_capacity(TEXT_STARTS_AT));
        bytes.clear();
        bytes
    }

    /// `signal` as the journal keeps it (see `signal_codec.rs`), in a buffer from the pool.
    pub(crate) fn signal(&self, signal: &Signal) -> Vec<u8> {
        let mut bytes = self.buffer();
        signal_codec::encode(signal, &mut bytes);
        bytes
    }

    /// A run's key and its plan as JSON, in a buffer from the pool.
    pub(crate) fn plan(&self, plan: &RunPlan) -> PlanText {
        let mut bytes = self.buffer();
        bytes.extend_from_slice(plan.key.as_bytes());
        // A plan serializes to JSON without fail (plain data, string keys), and JSON is UTF-8.
        let _ = serde_json::to_writer(&mut bytes, plan);
        PlanText { text: String::from_utf8(bytes).unwrap_or_default(), key_len: plan.key.len() }
    }

    /// A run's key and its plan as JSON, made of its parts, in a buffer from the pool: the same text as
    /// [`Texts::plan`] makes of the same plan, with the params' text copied rather than made again.
    pub(crate) fn plan_parts(&self, parts: PlanParts<'_>) -> PlanText {
        let mut bytes = self.buffer();
        bytes.extend_from_slice(parts.key.as_bytes());
        bytes.extend_from_slice(b"{\"key\":");
        // A string serializes to JSON without fail.
        let _ = serde_json::to_writer(&mut bytes, parts.key);
        bytes.extend_from_slice(b",\"params\":");
        bytes.extend_from_slice(parts.params_json);
        bytes.extend_from_slice(if parts.by_agent { b",\"by_agent\":true" } else { b",\"by_agent\":false" });
        bytes.extend_from_slice(b",\"cause\":");
        let mut uuid = uuid::Uuid::encode_buffer();
        match parts.cause {
            Some(cause) => {
                bytes.push(b'"');
                bytes.extend_from_slice(cause.hyphenated().encode_lower(&mut uuid).as_bytes());
                bytes.push(b'"');
            }
            None => bytes.extend_from_slice(b"null"),
        }
        bytes.extend_from_slice(b",\"correlation\":\"");
        bytes.extend_from_slice(parts.correlation.hyphenated().encode_lower(&mut uuid).as_bytes());
        bytes.extend_from_slice(b"\"}");
        // The key is UTF-8 and so is JSON; params text that is not (a store's caller's bug) leaves the plan empty.
        PlanText { text: String::from_utf8(bytes).unwrap_or_default(), key_len: parts.key.len() }
    }

    /// Takes written buffers back.
    pub(crate) fn give_back(&self, spent: &mut Vec<Vec<u8>>) {
        // The lock is held only to move the buffers in: the agents' threads take one from the pool for each row
        // they send, and a commit gives back thousands. Those not kept are dropped after it is released.
        spent.retain(|text| text.capacity() <= TEXT_KEPT_BYTES);
        while !spent.is_empty() {
            let mut pool = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let room = TEXTS_KEPT.saturating_sub(pool.len()).min(spent.len()).min(TEXTS_GIVEN_AT_ONCE);
            if room == 0 {
                break;
            }
            let from = spent.len() - room;
            pool.extend(spent.drain(from..));
        }
        spent.clear();
    }
}

/// A run's idempotency key and its plan's JSON, in one buffer from the pool (one buffer a run rather than two).
pub(crate) struct PlanText {
    pub(crate) text: String,
    pub(crate) key_len: usize,
}

impl PlanText {
    pub(crate) fn key(&self) -> &str {
        self.text.get(..self.key_len).unwrap_or_default()
    }

    pub(crate) fn plan(&self) -> &str {
        self.text.get(self.key_len..).unwrap_or_default()
    }

    pub(crate) fn into_bytes(self) -> Vec<u8> {
        self.text.into_bytes()
    }
}

/// Who waits for a flush: a task, a thread that blocks (a read), or nobody (the writer itself, writing what it
/// held back).
pub(crate) enum Waiter {
    Task(tokio::sync::oneshot::Sender<()>),
    /// A task that waits for one agent's writes: told only if the journal still writes for it (see
    /// [`Database::writes_for`]).
    Agent(AgentId, tokio::sync::oneshot::Sender<()>),
    Thread(mpsc::SyncSender<()>),
    Nobody,
}

impl Waiter {
    pub(crate) fn tell(self) {
        match self {
            Waiter::Task(done) | Waiter::Agent(_, done) => {
                let _ = done.send(());
            }
            Waiter::Thread(done) => {
                let _ = done.send(());
            }
            Waiter::Nobody => {}
        }
    }
}

/// The writer thread: everything waiting goes into one transaction; then the flushes are answered.
pub(crate) fn write_loop(
    db: &mut dyn Database,
    queue: mpsc::Receiver<Op>,
    keep_inputs: bool,
    committed: &AtomicU64,
    texts: &Texts,
    behind: &mut Behind,
) {
    // Kept from batch to batch, so a batch does not grow a new vector each time.
    let mut batch: Vec<Op> = Vec::with_capacity(BATCH);
    let mut spent: Vec<Vec<u8>> = Vec::with_capacity(BATCH);
    let mut runs = Runs::default();
    if let Err(err) = runs.load(db) {
        tracing::error!(%err, "the journal's writer could not read where its runs stand");
    }
    let mut inputs = InputBatches::default();
    inputs.keep_ids(db.wants_input_ids());
    loop {
        // With ended runs held back, the writer wakes to write them once they have waited their time.
        let first = match runs.held_until() {
            None => queue.recv().map(Some).map_err(|_| ()),
            Some(until) => match queue.recv_timeout(until.saturating_duration_since(Instant::now())) {
                Ok(op) => Ok(Some(op)),
                // Time to write those whose time is up: a batch of no writes does that.
                Err(mpsc::RecvTimeoutError::Timeout) => Ok(None),
                Err(mpsc::RecvTimeoutError::Disconnected) => Err(()),
            },
        };
        let Ok(first) = first else { break };
        batch.extend(first);
        let gather = |batch: &mut Vec<Op>| {
            while batch.len() < BATCH
                && let Ok(op) = queue.try_recv()
            {
                batch.push(op);
            }
        };
        gather(&mut batch);
        // A small batch that nobody waits on is given a moment to grow: fewer, larger transactions. The writer
        // sleeps meanwhile instead of waiting on the queue, since a thread waiting on a queue is woken by every
        // write sent to it, and each wake costs the sender a system call. A batch someone waits on commits
        // at once, or one slice after the one waiting arrives.
        let awaited = |op: &Op| matches!(op, Op::Flush(_));
        if batch.len() < GATHER_BELOW && !batch.iter().any(awaited) {
            let until = Instant::now() + GATHER_FOR;
            loop {
                std::thread::sleep(GATHER_SLICE);
                let before = batch.len();
                gather(&mut batch);
                let waited_on = batch[before..].iter().any(awaited);
                if waited_on || batch.len() >= GATHER_BELOW || Instant::now() >= until {
                    break;
                }
            }
        }
        commit(db, &mut batch, (&mut runs, &mut inputs, behind), (&mut spent, texts), keep_inputs, committed);
        db.committed();
        texts.give_back(&mut spent);
    }
    // The last writes: nothing is held back any more.
    batch.push(Op::Flush(Waiter::Nobody));
    commit(db, &mut batch, (&mut runs, &mut inputs, behind), (&mut spent, texts), keep_inputs, committed);
}

/// Applies `batch` in one transaction, then answers its flushes. A flush anywhere in it writes every run held
/// back; without one, ended runs whose outcome the agent has not consumed yet may be held back for the next.
/// The writes of agents a failed commit left ahead of the journal are held back (see [`Behind`]).
pub(crate) fn commit(
    db: &mut dyn Database,
    batch: &mut Vec<Op>,
    (runs, inputs, behind): (&mut Runs, &mut InputBatches, &mut Behind),
    (spent, texts): (&mut Vec<Vec<u8>>, &Texts),
    keep_inputs: bool,
    committed: &AtomicU64,
) {
    let mut flushed = Vec::new();
    // Writes held back count as committed too: they never will be, and reads must not wait for them.
    let writes = batch.iter().filter(|op| op.is_write()).count() as u64;
    behind.hold_back(batch);
    let held_before = runs.held_writes();
    // The agents the commit writes for, in case it fails: those of its writes (an agent's usually come one after
    // another), and those of the runs it may write (held back from earlier commits too). Taken before: a write
    // that fails drops the rest of the batch, and writing the runs forgets whose they were.
    let mut touched: Vec<AgentId> = Vec::new();
    for agent in batch.iter().filter_map(Op::agent) {
        if touched.last() != Some(agent) {
            touched.push(agent.clone());
        }
    }
    touched.extend(runs.by_agent.keys().cloned());
    let outcome = db.transaction(&mut |tx: &mut dyn Tables| {
        for op in batch.drain(..) {
            match op {
                Op::Flush(done) => flushed.push(done),
                // Taken out by `hold_back`.
                Op::Caught(_) => {}
                Op::Run(row) => runs.record(row, texts, spent),
                Op::Plan(run, plan) => {
                    let pending = runs.entry(run);
                    spent.extend(pending.plan.replace(plan).map(PlanText::into_bytes));
                    pending.parts = None;
                    pending.writes += 1;
                }
                Op::Outcome(run, outcome, safe_again, _) => {
                    let pending = runs.entry(run);
                    pending.keep_outcome(outcome, safe_again, spent);
                    pending.writes += 1;
                }
                Op::Input(agent, number, signal, given, id) => {
                    // An outcome signal consumed: the agent was given it.
                    if let Some(run) = given {
                        runs.delivered(tx, run, spent)?;
                    }
                    inputs.add(tx, &agent, (number, Some(id)), &signal)?;
                    spent.push(signal);
                }
                Op::Sending(sending) => {
                    let (agent, to, id, signal) = *sending;
                    tx.outbox(&agent, id, &to, &signal)?;
                    spent.push(signal);
                }
                Op::KeptInput(agent, number, run) => match runs.consumed(run) {
                    // Kept in this batch or held back: logged from there, and never written with the run.
                    Some(signal) => {
                        inputs.add(tx, &agent, (number, None), &signal)?;
                        spent.push(signal);
                    }
                    None => {
                        match tx.kept_outcome(run)? {
                            Some(signal) => inputs.add(tx, &agent, (number, None), &signal)?,
                            // Only when the batch that kept the outcome failed, which was logged then.
                            None => tracing::error!(
                                agent = %agent, seq = number, %run,
                                "a consumed outcome is not in the journal; the input is not logged"
                            ),
                        }
                        tx.delivered(run)?;
                    }
                },
                Op::Snapshot(snapshot) => {
                    // The snapshot folds in the inputs that asked for the agent's ended runs whose outcomes it
                    // has not consumed yet: a recovery from it finds those outcomes only with their runs, so
                    // the runs are written with it.
                    runs.release(&snapshot.agent);
                    apply(tx, Op::Snapshot(snapshot), inputs, keep_inputs)?;
                }
                write => apply(tx, write, inputs, keep_inputs)?,
            }
        }
        inputs.write_all(tx)?;
        runs.write(tx, (spent, texts), !flushed.is_empty())
    });
    // A batch that failed leaves what it did not get to in `batch`: dropped with it, like the runs it held.
    if let Err(err) = &outcome {
        touched.sort_unstable();
        touched.dedup();
        // Brought back by the database's owner (a node), or held back here until the runtime brings them back.
        if !db.failed(&touched, err) {
            behind.fell(touched);
        }
    }
    batch.clear();
    if outcome.is_err() {
        runs.forget(spent);
        inputs.forget();
        // The runs it wrote as going on may not be in the database: read again which are.
        if let Err(err) = runs.load(db) {
            tracing::error!(%err, "the journal's writer could not read where its runs stand");
        }
    }
    // Counted either way: a batch that failed is not retried, and reads must not wait for it for ever. Writes
    // held back count once they are written.
    committed.fetch_add(writes + held_before - runs.held_writes(), Ordering::SeqCst);
    match outcome {
        // Dropping the senders tells the waiters the batch is not durable.
        Err(err) => tracing::error!(%err, "the journal could not commit a batch of writes"),
        Ok(()) => {
            for waiter in flushed {
                match waiter {
                    // Its agent's writes were refused (in this commit or before): dropped, so it hears they were
                    // not kept.
                    Waiter::Agent(agent, _) if !db.writes_for(&agent) => {}
                    waiter => waiter.tell(),
                }
            }
        }
    }
}

/// What the `runs` table is to get, per run, coalesced: a run queued, started and ended within one batch (the
/// usual case under load) is one row write instead of five. An ended run whose outcome the agent has not
/// consumed yet is held back for up to [`HOLD_FOR`]: the agent usually consumes it within a few batches, and
/// the run is then written once, marked delivered and without the outcome (which its input log entry holds),
/// instead of written and then updated. Holding a run back breaks the rule that a commit includes every write
/// sent before it, so it is done only where nothing committed later depends on the run: never for a run that is
/// not safe to start again, and never past a flush (someone waits for everything sent) or a snapshot of its
/// agent (which folds in the input that asked for the run, so a recovery from it could no longer ask again).
#[derive(Default)]
pub(crate) struct Runs {
    /// The runs in the order they first appeared, so rows keep the order runs were recorded in. Between
    /// batches, the runs held back. (A run pending is a few hundred bytes: kept in order, it is read and
    /// written where the runs before it were, where a map would scatter thousands of them over memory no
    /// cache holds.)
    pub(crate) pending: Vec<(Uuid, PendingRun)>,
    /// Where each pending run is in `pending`.
    pub(crate) index: std::collections::HashMap<Uuid, usize, FastHash>,
    /// When the first run held back must be written, and how many writes the runs held back stand for.
    pub(crate) held_until: Option<Instant>,
    pub(crate) held_writes: u64,
    /// The pending runs with a record, by agent, so a snapshot finds its agent's runs without a scan of all.
    /// (It may name runs written since; those are no longer pending and are passed over.)
    pub(crate) by_agent: std::collections::HashMap<AgentId, Vec<Uuid>, FastHash>,
    /// The runs with a row in `runs` that had not ended: their end must update that row, so they never join
    /// a batch of ended runs.
    pub(crate) open: std::collections::HashSet<Uuid, FastHash>,
    /// The place the next run written takes (one order for `runs` and `run_batches`).
    pub(crate) next_place: i64,
    /// The ended runs of this commit gathered into rows of `run_batches`.
    pub(crate) batches: RunBatches,
    /// Where a run's record is serialized for its row in `runs`.
    pub(crate) scratch: Vec<u8>,
    /// Where a batched run's key and plan are made from their parts.
    pub(crate) key: String,
    pub(crate) plan: Vec<u8>,
    /// The end (exclusive) of the places this writer may give (see [`Tables::reserve_places`]); 0 until it
    /// asked.
    pub(crate) place_end: i64,
    /// Whether ended runs are never batched (a journal several writers share: see
    /// [`Database::batches_ended_runs`]).
    pub(crate) unbatched: bool,
}

#[derive(Default)]
pub(crate) struct PendingRun {
    pub(crate) record: Option<Recorded>,
    /// The plan's key and JSON.
    pub(crate) plan: Option<PlanText>,
    /// Or the plan in its parts, with its params' text: made into the form it is written in only then (compact
    /// in a batch of ended runs, JSON in `runs`).
    pub(crate) parts: Option<(PlanDraft, ShortText)>,
    /// The outcome signal's JSON.
    pub(crate) outcome: Option<Vec<u8>>,
    pub(crate) delivered: bool,
    /// Whether its end may be held back (the run is safe to start again), and until when it is.
    pub(crate) holdable: bool,
    pub(crate) hold_until: Option<Instant>,
    /// How many writes it stands for (counted committed once it is written).
    pub(crate) writes: u64,
}

impl PendingRun {
    /// Its outcome signal for the agent (the one before, if any, is spent).
    pub(crate) fn keep_outcome(&mut self, outcome: Vec<u8>, safe_again: bool, spent: &mut Vec<Vec<u8>>) {
        spent.extend(self.outcome.replace(outcome));
        self.holdable = safe_again;
        self.delivered = false;
    }

    /// An ended run, safe to start again, whose outcome the agent has not consumed yet, that may still wait.
    pub(crate) fn may_wait(&self, now: Instant) -> bool {
        self.holdable
            && self.record.as_ref().is_some_and(|r| r.ended)
            && self.outcome.is_some()
            && !self.delivered
            && self.hold_until.is_none_or(|until| until > now)
    }
}

impl Runs {
    /// Reads from the database which runs have a row that had not ended, and where the numbering goes on.
    pub(crate) fn load(&mut self, db: &mut dyn Database) -> Result<(), StoreError> {
        let (next_place, open) = db.open_runs()?;
        self.next_place = self.next_place.max(next_place);
        self.unbatched = !db.batches_ended_runs();
        self.open.clear();
        self.open.extend(open);
        Ok(())
    }

    pub(crate) fn entry(&mut self, run: Uuid) -> &mut PendingRun {
        let at = *self.index.entry(run).or_insert_with(|| {
            self.pending.push((run, PendingRun::default()));
            self.pending.len() - 1
        });
        &mut self.pending[at].1
    }

    pub(crate) fn get_mut(&mut self, run: &Uuid) -> Option<&mut PendingRun> {
        let at = *self.index.get(run)?;
        self.pending.get_mut(at).map(|(_, pending)| pending)
    }

    /// `agent`'s ended runs held back, or pending in this batch, are written with it, outcome and all.
    pub(crate) fn release(&mut self, agent: &AgentId) {
        for run in self.by_agent.get(agent).into_iter().flatten() {
            if let Some(at) = self.index.get(run)
                && let Some((_, pending)) = self.pending.get_mut(*at)
            {
                pending.holdable = false;
            }
        }
    }

    /// A run's record, as it is now, with its plan if it came with one.
    pub(crate) fn record(&mut self, row: RunRow, texts: &Texts, spent: &mut Vec<Vec<u8>>) {
        let RunRow { draft, plan, outcome } = row;
        let (plan, parts) = match plan {
            Some(PlanRow::Made(text)) => (Some(text), None),
            Some(PlanRow::Parts(parts)) => match draft.text_in_place().and_then(ShortText::of) {
                Some(params) => (None, Some((parts, params))),
                // Never, as the store sends them: a plan in its parts comes with its params' text in place.
                None => (parts.with_parts(draft.ids(), draft.params_text(), |p| texts.plan_parts(p)), None),
            },
            None => (None, None),
        };
        let (recorded, ended) = (draft.recorded_ms(), draft.status().is_final());
        let (record, _) = draft.into_record();
        let (run, agent) = (record.run, record.agent.clone());
        let pending = self.entry(run);
        let first = pending.record.is_none();
        pending.record = Some(Recorded { record, recorded, ended });
        // A run has one plan, in one form or the other.
        if let Some(plan) = plan {
            spent.extend(pending.plan.replace(plan).map(PlanText::into_bytes));
            pending.parts = None;
        }
        if let Some(parts) = parts {
            spent.extend(pending.plan.take().map(PlanText::into_bytes));
            pending.parts = Some(parts);
        }
        if let Some((outcome, safe_again)) = outcome {
            pending.keep_outcome(outcome, safe_again, spent);
        }
        pending.writes += 1;
        if first {
            self.by_agent.entry(agent).or_default().push(run);
        }
    }

    /// When the runs held back must be written, if any are.
    pub(crate) fn held_until(&self) -> Option<Instant> {
        self.held_until
    }

    /// How many writes the runs held back stand for.
    pub(crate) fn held_writes(&self) -> u64 {
        self.held_writes
    }

    /// The agent consumed the outcome of `run`: marked with its pending outcome, or in the file.
    pub(crate) fn delivered(
        &mut self,
        db: &mut dyn Tables,
        run: Uuid,
        spent: &mut Vec<Vec<u8>>,
    ) -> Result<(), StoreError> {
        match self.consumed(run) {
            // Consumed while still pending here: it need not be written at all.
            Some(outcome) => spent.push(outcome),
            None => db.delivered(run)?,
        }
        Ok(())
    }

    /// The agent consumed the outcome of `run`: its JSON, if it is still pending here (then the run is marked
    /// delivered and written without it).
    pub(crate) fn consumed(&mut self, run: Uuid) -> Option<Vec<u8>> {
        let pending = self.get_mut(&run)?;
        let outcome = pending.outcome.take()?;
        pending.delivered = true;
        Some(outcome)
    }

    /// Writes what is pending, in order, and forgets it; unless `all`, ended runs not yet delivered may be held
    /// back, each for [`HOLD_FOR`] at most, [`HELD_MOST`] at a time.
    pub(crate) fn write(
        &mut self,
        db: &mut dyn Tables,
        (spent, texts): (&mut Vec<Vec<u8>>, &Texts),
        all: bool,
    ) -> Result<(), StoreError> {
        let now = Instant::now();
        self.held_writes = 0;
        self.held_until = None;
        // Only the runs held back stay pending: they make the new order and the new index by agent.
        self.by_agent.clear();
        self.index.clear();
        for (run, mut pending) in std::mem::take(&mut self.pending) {
            if !all && self.pending.len() < HELD_MOST && pending.may_wait(now) {
                let until = *pending.hold_until.get_or_insert(now + HOLD_FOR);
                self.held_until = Some(self.held_until.map_or(until, |first| first.min(until)));
                self.held_writes += pending.writes;
                if let Some(row) = &pending.record {
                    self.by_agent.entry(row.record.agent.clone()).or_default().push(run);
                }
                self.index.insert(run, self.pending.len());
                self.pending.push((run, pending));
                continue;
            }
            if self.next_place >= self.place_end {
                match db.reserve_places()? {
                    Some(places) => (self.next_place, self.place_end) = (places.start, places.end),
                    None => self.place_end = i64::MAX,
                }
            }
            let place = self.next_place;
            self.next_place += 1;
            if !self.unbatched
                && self.settled(run, &pending)
                && let Some(row) = &pending.record
            {
                let (key, plan) = match (&pending.plan, &pending.parts) {
                    (Some(text), _) => (Some(text.key()), Some(text.plan().as_bytes())),
                    (None, Some(parts)) => {
                        let (draft, params) = parts;
                        let (key, plan) = (&mut self.key, &mut self.plan);
                        key.clear();
                        draft.key.write_to(&row.record.agent, run, key);
                        plan.clear();
                        let parts = draft.parts(key, params.as_bytes());
                        plan_codec::encode(&parts, row.record.correlation, plan);
                        (Some(key.as_str()), Some(&plan[..]))
                    }
                    (None, None) => (None, None),
                };
                let settled = Settled { place, recorded: row.recorded, record: &row.record, key, plan };
                if self.batches.add(db, &settled)? {
                    spent.extend(pending.plan.map(PlanText::into_bytes));
                    continue;
                }
            }
            // Written in `runs`: a plan still in its parts is made into its JSON.
            let mut pending = pending;
            if let (Some(parts), Some(row)) = (pending.parts.take(), &pending.record) {
                let (draft, params) = parts;
                let ids = (&row.record.agent, run);
                pending.plan = draft.with_parts(ids, Some(params.as_bytes()), |p| texts.plan_parts(p));
            }
            if let Some(row) = &pending.record {
                if row.ended {
                    self.open.remove(&run);
                } else {
                    self.open.insert(run);
                }
            }
            write_run(db, &mut self.scratch, place, run, pending, spent)?;
        }
        self.batches.write_all(db)
    }

    /// Whether `run` has nothing more to be written about it and no row to update, so it may join a batch: it
    /// ended, the agent consumed its outcome here, and it never had a row in `runs`.
    pub(crate) fn settled(&self, run: Uuid, pending: &PendingRun) -> bool {
        pending.delivered
            && pending.outcome.is_none()
            && pending.record.as_ref().is_some_and(|row| row.ended)
            && !self.open.contains(&run)
    }

    /// Drops everything pending (its batch failed), handing its texts back.
    pub(crate) fn forget(&mut self, spent: &mut Vec<Vec<u8>>) {
        for (_, pending) in self.pending.drain(..) {
            spent.extend(pending.plan.map(PlanText::into_bytes).into_iter().chain(pending.outcome));
        }
        self.index.clear();
        self.by_agent.clear();
        self.batches.forget();
        self.held_until = None;
        self.held_writes = 0;
    }
}

/// Writes one run's pending changes: its row, or the columns that changed when only they did.
pub(crate) fn write_run(
    db: &mut dyn Tables,
    scratch: &mut Vec<u8>,
    place: i64,
    run: Uuid,
    pending: PendingRun,
    spent: &mut Vec<Vec<u8>>,
) -> Result<(), StoreError> {
    let (key, plan) = (pending.plan.as_ref().map(PlanText::key), pending.plan.as_ref().map(PlanText::plan));
    let outcome = pending.outcome;
    match pending.record {
        Some(row) => {
            scratch.clear();
            serde_json::to_writer(&mut *scratch, &row.record)
                .map_err(|e| StoreError::Database(format!("a run's record could not be written: {e}")))?;
            let record = std::str::from_utf8(scratch).map_err(|e| StoreError::Database(e.to_string()))?;
            db.run(&RunWrite {
                place,
                run,
                agent: &row.record.agent,
                action: &row.record.action,
                status: &json(&row.record.status()),
                recorded: row.recorded,
                ended: row.ended,
                record,
                key,
                plan,
                outcome: outcome.as_deref(),
                delivered: pending.delivered,
            })?;
        }
        None => db.run_parts(run, key, plan, outcome.as_deref(), pending.delivered)?,
    }
    spent.extend(pending.plan.map(PlanText::into_bytes).into_iter().chain(outcome));
    Ok(())
}

/// Applies a write that is not part of a run. One that clears an agent's inputs first writes those gathered
/// in this commit, so it clears them too.
pub(crate) fn apply(
    db: &mut dyn Tables,
    op: Op,
    inputs: &mut InputBatches,
    keep_inputs: bool,
) -> Result<(), StoreError> {
    match op {
        Op::Spawned(record, initial) => {
            inputs.write_agent(db, &record.agent)?;
            db.clear_inputs(&record.agent, None)?;
            db.clear_schedules(&record.agent, None)?;
            db.clear_jobs(&record.agent)?;
            db.clear_outbox(&record.agent)?;
            // A new agent under an id used before starts a history of its own (whatever this journal keeps now).
            db.clear_history(&record.agent)?;
            db.snapshot(&initial, keep_inputs)?;
            db.agent(&record)?;
        }
        Op::Snapshot(snapshot) => {
            // The inputs folded into it are no longer needed to bring the agent back; a journal that keeps
            // every input keeps every snapshot too, each the state as it was at its input.
            db.snapshot(&snapshot, keep_inputs)?;
            if !keep_inputs {
                inputs.write_agent(db, &snapshot.agent)?;
                db.clear_inputs(&snapshot.agent, Some(snapshot.seq))?;
            }
        }
        Op::Alive(record) => db.agent(&record)?,
        Op::Ended(agent) => {
            inputs.write_agent(db, &agent)?;
            db.clear_inputs(&agent, None)?;
            db.forget_agent(&agent)?;
            db.clear_jobs(&agent)?;
            // An agent stopped for good is not brought back to send them again.
            db.clear_outbox(&agent)?;
        }
        Op::Armed(schedule) => db.schedule(&schedule)?,
        Op::Cleared(agent, key) => db.clear_schedules(&agent, Some(&key))?,
        Op::Refusal(refusal) => db.refusal(&refusal)?,
        Op::Job(write) => db.job(&write)?,
        Op::Sent(agent, id) => db.outbox_sent(&agent, id)?,
        // The writer handles these itself.
        Op::Flush(_)
        | Op::Caught(_)
        | Op::Run(_)
        | Op::Plan(..)
        | Op::Outcome(..)
        | Op::Input(..)
        | Op::Sending(_)
        | Op::KeptInput(..) => {}
    }
    Ok(())
}
