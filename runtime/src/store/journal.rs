//! The front of a durable journal, the same for every store that keeps one in a database (SQLite, PostgreSQL).
//!
//! Writes never touch the database on the caller's thread. They go, in order, to one writer thread (see
//! `writer.rs`), which applies everything waiting in one transaction (group commit) and then tells whoever
//! waits for durability. The queue to the writer is bounded: a burst of writes faster than the database makes
//! the writing threads wait (for a batch to commit) rather than fill the memory. Reads use a connection of
//! their own ([`Reads`]), so a read does not wait behind a batch of writes: the journal counts the writes sent
//! and the writes committed, and a read that finds some not committed yet waits for them first, so it still
//! sees every write made before it. One exception to "in order": an ended run whose outcome the agent has not
//! consumed yet may be written a few commits later, when that is safe (see `Runs` in `writer.rs`). The records
//! of runs going on are also kept in memory: an update applies to the record there, and `get` answers for them
//! without reading the database. An ended run is only in the database (keeping ended runs in memory as well
//! cost a tenth of a durable run's time), so an update to it, or a `get` of it, reads the database.

use super::behind::Behind;
use super::durable::{AgentRecord, AliveAgent, Flushed, PlanParts, Revival, RunPlan, ScheduleRecord, Snapshot};
use super::job_log::JobWrite;
use super::tables::Database;
use super::writer::{Op, PlanRow, QUEUE, RunRow, Texts, Waiter, write_loop};
use super::{EndedDraft, FastHash, Refusal, RunQuery, RunRecord, RunUpdate, StoreError, Unwritten};
use crate::id::AgentId;
use crate::signal::Signal;
use chrono::{DateTime, Utc};
use dashmap::DashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use uuid::Uuid;

/// A journal's reads, on a connection of their own. Each sees every write committed before it.
pub(crate) trait Reads: Send + Sync + 'static {
    /// One run's record, wherever the database keeps it.
    fn run(&self, run: Uuid) -> Result<Option<RunRecord>, StoreError>;
    /// The runs matching `query`, in the order they were written, each with its idempotency key.
    fn keyed_runs(&self, query: &RunQuery) -> Result<Vec<(RunRecord, Option<String>)>, StoreError>;
    /// An agent's refusals, oldest first.
    fn refusals(&self, agent: &AgentId) -> Result<Vec<Refusal>, StoreError>;
    /// See [`Durable::alive`].
    fn alive(&self, after: Option<&AgentId>, limit: usize) -> Result<Vec<AliveAgent>, StoreError>;
    /// See [`Durable::agent`].
    fn agent(&self, agent: &AgentId) -> Result<Option<AgentRecord>, StoreError>;
    /// See [`Durable::snapshot`].
    fn snapshot(&self, agent: &AgentId) -> Result<Option<Snapshot>, StoreError>;
    /// See [`Durable::inputs_after`].
    fn inputs_after(&self, agent: &AgentId, after: u64) -> Result<Vec<(u64, Signal)>, StoreError>;
    /// See [`Durable::schedules`].
    fn schedules(&self, agent: &AgentId) -> Result<Vec<ScheduleRecord>, StoreError>;
    /// See [`Durable::revivals`]: every agent read as of one commit.
    fn revivals(&self, agents: &[AgentId]) -> Result<Vec<Result<Revival, StoreError>>, StoreError>;
}

/// A durable journal: runs going on in memory, a writer thread, and a reader.
pub(crate) struct Journal<R> {
    /// The records of runs going on, by id: updates apply here, and the updated record is written on.
    live: DashMap<Uuid, RunRecord, FastHash>,
    /// Buffers for the rows sent to the writer, shared with it.
    texts: Arc<Texts>,
    writes: mpsc::SyncSender<Op>,
    writer: Option<JoinHandle<()>>,
    reads: R,
    /// How many writes were sent to the writer, and how many it has committed (in the order sent). A read
    /// that finds the second behind the first waits for a flush.
    sent: AtomicU64,
    committed: Arc<AtomicU64>,
    /// Where the writer tells of agents a failed commit left ahead of the journal: taken by the runtime, which
    /// brings them back (see `behind.rs`).
    behind: std::sync::Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<AgentId>>>,
}

impl<R: Reads> Journal<R> {
    /// Starts the writer thread on the database `open` gives (on that thread), with `live` the runs that had
    /// not ended when the journal was opened; `keep_inputs` keeps every input and snapshot (see
    /// [`super::SqliteOptions::keep_inputs`]).
    pub(crate) fn start<D: Database>(
        reads: R,
        live: DashMap<Uuid, RunRecord, FastHash>,
        keep_inputs: bool,
        open: impl FnOnce() -> D + Send + 'static,
    ) -> Result<Self, StoreError> {
        let committed = Arc::new(AtomicU64::new(0));
        let (writes, queue) = mpsc::sync_channel(QUEUE);
        let counted = committed.clone();
        let texts = Arc::new(Texts::default());
        let spare = texts.clone();
        let (tell, behind) = tokio::sync::mpsc::unbounded_channel();
        let writer = std::thread::Builder::new()
            .name("agentry-journal".to_owned())
            .spawn(move || write_loop(&mut open(), queue, keep_inputs, &counted, &spare, &mut Behind::new(tell)))
            .map_err(|e| StoreError::Database(format!("the journal's writer thread could not start: {e}")))?;
        let behind = std::sync::Mutex::new(Some(behind));
        Ok(Self { live, texts, writes, writer: Some(writer), reads, sent: AtomicU64::new(0), committed, behind })
    }

    /// The reads, once every write sent before this call is committed (at once, when none is pending).
    pub(crate) fn settled(&self) -> Result<&R, StoreError> {
        // Every write sent before this load was queued before any write counted after it, so once the writer
        // has committed as many writes as were sent by now, it has committed those.
        if self.committed.load(Ordering::SeqCst) < self.sent.load(Ordering::SeqCst) {
            let (done, flushed) = mpsc::sync_channel(1);
            self.send(Op::Flush(Waiter::Thread(done)));
            flushed.recv().map_err(|_| {
                StoreError::Database("the journal could not commit the writes this read must see".to_owned())
            })?;
        }
        Ok(&self.reads)
    }

    /// How many runs going on it holds in memory.
    #[cfg(test)]
    pub(crate) fn runs_going_on(&self) -> usize {
        self.live.len()
    }

    /// The reads as they are, without waiting for writes (for what reads need no writes, like a path).
    pub(crate) fn reads(&self) -> &R {
        &self.reads
    }

    /// Queues a write; waits while the queue is full.
    fn send(&self, op: Op) {
        // Counted before it is queued: a write the writer has received was counted.
        if op.is_write() {
            self.sent.fetch_add(1, Ordering::SeqCst);
        }
        // The writer lives as long as this journal; a send fails only if it panicked, which it logs.
        let _ = self.writes.send(op);
    }

    /// One run's record as the database has it (after every write sent before).
    fn stored(&self, run: Uuid) -> Option<RunRecord> {
        self.settled().and_then(|reads| reads.run(run)).unwrap_or_else(|err| {
            tracing::warn!(%err, %run, "a run could not be read from the journal");
            None
        })
    }

    /// The runs matching `query`, with their idempotency keys.
    pub(crate) fn keyed_runs(&self, query: &RunQuery) -> Result<Vec<(RunRecord, Option<String>)>, StoreError> {
        self.settled()?.keyed_runs(query)
    }

    /// Journals a new run. A run going on with the same id is refused as a duplicate; ended runs are not looked
    /// up (that would read the database for every run), so a record reusing an ended run's id is the caller's
    /// error.
    pub(crate) fn record(&self, record: RunRecord) -> Result<(), StoreError> {
        match self.live.entry(record.run) {
            dashmap::Entry::Occupied(_) => return Err(StoreError::Duplicate(record.run)),
            // The shard stays locked until the write is queued, so an update cannot be queued before it.
            dashmap::Entry::Vacant(slot) if !record.status().is_final() => {
                self.send(Op::Run(RunRow::of(slot.insert(record).clone())));
            }
            dashmap::Entry::Vacant(_) => self.send(Op::Run(RunRow::of(record))),
        }
        Ok(())
    }

    /// Applies an update to a run going on. For a run that is not going on, the database says which error it
    /// is: [`StoreError::Ended`] if the run is there, [`StoreError::UnknownRun`] if not.
    pub(crate) fn update(&self, run: Uuid, update: RunUpdate, at: DateTime<Utc>) -> Result<(), StoreError> {
        let mut update = Some(update);
        let ended = self.live.remove_if_mut(&run, |_, record| {
            if let Some(update) = update.take() {
                record.apply(update, at);
            }
            let ended = record.status().is_final();
            if !ended {
                self.send(Op::Run(RunRow::of(record.clone())));
            }
            ended
        });
        match (ended, update) {
            // An ended run leaves the map, and its record crosses to the writer whole, without a copy.
            (Some((_, record)), _) => self.send(Op::Run(RunRow::of(record))),
            // Applied to a run going on.
            (None, None) => {}
            (None, Some(update)) => match self.stored(run) {
                // A run going on that this journal did not load (another writer of a shared journal wrote it: a
                // node took its agent over): from the database, as it is now.
                Some(record) if !record.status().is_final() => {
                    if let dashmap::Entry::Vacant(slot) = self.live.entry(run) {
                        slot.insert(record);
                    }
                    return self.update(run, update, at);
                }
                Some(_) => return Err(StoreError::Ended(run)),
                None => return Err(StoreError::UnknownRun(run)),
            },
        }
        Ok(())
    }

    pub(crate) fn get(&self, run: Uuid) -> Option<RunRecord> {
        if let Some(record) = self.live.get(&run) {
            return Some(record.clone());
        }
        self.stored(run)
    }

    pub(crate) fn query(&self, query: &RunQuery) -> Vec<RunRecord> {
        self.keyed_runs(query).map(|runs| runs.into_iter().map(|(record, _)| record).collect()).unwrap_or_else(|err| {
            tracing::warn!(%err, "the journal could not be queried");
            Vec::new()
        })
    }

    pub(crate) fn refused(&self, refusal: Refusal) {
        self.send(Op::Refusal(Box::new(refusal)));
    }

    pub(crate) fn refusals(&self, agent: &AgentId) -> Vec<Refusal> {
        self.settled().and_then(|reads| reads.refusals(agent)).unwrap_or_else(|err| {
            tracing::warn!(%err, "refusals could not be read from the journal");
            Vec::new()
        })
    }

    /// A run that ended crosses to the writer as the server drafted it, with its plan, in one write (see
    /// [`RunRow`]). It was never recorded, so it cannot be a duplicate of a run going on.
    pub(crate) fn take_ended<'a>(&self, ended: EndedDraft<'a>) -> Option<EndedDraft<'a>> {
        let EndedDraft(Unwritten { draft, plan }, outcome) = ended;
        let plan = match plan {
            Some(plan) if plan.params_text.is_none() && draft.text_in_place().is_some() => Some(PlanRow::Parts(plan)),
            Some(plan) => {
                let made = plan.with_parts(draft.ids(), draft.params_text(), |parts| self.texts.plan_parts(parts));
                made.map(PlanRow::Made)
            }
            None => None,
        };
        let outcome = outcome.map(|kept| (self.texts.signal(kept.signal), kept.safe_again));
        // A long text was copied into the plan's: freed here.
        self.send(Op::Run(RunRow { draft: draft.handed_over(false), plan, outcome }));
        None
    }

    pub(crate) fn flushed(&self) -> Flushed {
        let (done, flushed) = tokio::sync::oneshot::channel();
        self.send(Op::Flush(Waiter::Task(done)));
        flushed
    }

    pub(crate) fn flushed_for(&self, agent: &AgentId) -> Flushed {
        let (done, flushed) = tokio::sync::oneshot::channel();
        self.send(Op::Flush(Waiter::Agent(agent.clone(), done)));
        flushed
    }

    /// The agents a failed commit leaves ahead of the journal, as the writer finds them (once: the runtime
    /// takes them).
    pub(crate) fn fallen_behind(&self) -> Option<tokio::sync::mpsc::UnboundedReceiver<AgentId>> {
        self.behind.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take()
    }

    /// `agent`, fallen behind, was brought back from the journal: its writes are kept again from here on.
    pub(crate) fn caught_up(&self, agent: &AgentId) {
        self.send(Op::Caught(agent.clone()));
    }

    pub(crate) fn append_input(&self, agent: &AgentId, seq: u64, signal: &Signal) {
        let given = signal.outcome().filter(|r| !r.awaiting_approval()).map(|r| r.run_id);
        self.send(Op::Input(agent.clone(), seq, self.texts.signal(signal), given, signal.id()));
    }

    pub(crate) fn save_snapshot(&self, snapshot: Snapshot) {
        self.send(Op::Snapshot(Box::new(snapshot)));
    }

    pub(crate) fn agent_spawned(&self, record: AgentRecord, initial: Snapshot) {
        self.send(Op::Spawned(Box::new(record), Box::new(initial)));
    }

    pub(crate) fn agent_alive(&self, record: AgentRecord) {
        self.send(Op::Alive(Box::new(record)));
    }

    pub(crate) fn agent_ended(&self, agent: &AgentId) {
        self.send(Op::Ended(agent.clone()));
    }

    pub(crate) fn schedule_armed(&self, schedule: ScheduleRecord) {
        self.send(Op::Armed(Box::new(schedule)));
    }

    pub(crate) fn schedule_cleared(&self, agent: &AgentId, key: &str) {
        self.send(Op::Cleared(agent.clone(), key.to_owned()));
    }

    pub(crate) fn run_planned(&self, run: Uuid, plan: &RunPlan) {
        self.send(Op::Plan(run, self.texts.plan(plan)));
    }

    pub(crate) fn run_planned_parts(&self, run: Uuid, parts: PlanParts<'_>) {
        self.send(Op::Plan(run, self.texts.plan_parts(parts)));
    }

    pub(crate) fn run_outcome(&self, agent: &AgentId, run: Uuid, outcome: &Signal, safe_again: bool) {
        self.send(Op::Outcome(run, self.texts.signal(outcome), safe_again, agent.clone()));
    }

    pub(crate) fn append_kept_outcome(&self, agent: &AgentId, seq: u64, run: Uuid) {
        self.send(Op::KeptInput(agent.clone(), seq, run));
    }

    pub(crate) fn job(&self, write: JobWrite) {
        self.send(Op::Job(write));
    }

    pub(crate) fn sending(&self, agent: &AgentId, to: &AgentId, signal: &Signal) {
        let kept = self.texts.signal(signal);
        self.send(Op::Sending(Box::new((agent.clone(), to.clone(), signal.id(), kept))));
    }

    pub(crate) fn sent_on(&self, agent: &AgentId, signal: Uuid) {
        self.send(Op::Sent(agent.clone(), signal));
    }
}

impl<R> Drop for Journal<R> {
    /// Lets the writer apply what is queued, then waits for it.
    fn drop(&mut self) {
        let (closed, _) = mpsc::sync_channel(0);
        drop(std::mem::replace(&mut self.writes, closed));
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

/// Implements [`Store`](super::Store) and [`Durable`] for a store that is a [`Journal`] in its field
/// `journal`: every store that keeps its journal in a database has the same front.
macro_rules! journal_store {
    ($store:ty) => {
        impl $crate::store::Store for $store {
            fn record(
                &self,
                _: &$crate::store::JournalPen,
                record: $crate::store::RunRecord,
            ) -> Result<(), $crate::store::StoreError> {
                self.journal.record(record)
            }

            fn update(
                &self,
                _: &$crate::store::JournalPen,
                run: ::uuid::Uuid,
                update: $crate::store::RunUpdate,
                at: ::chrono::DateTime<::chrono::Utc>,
            ) -> Result<(), $crate::store::StoreError> {
                self.journal.update(run, update, at)
            }

            fn get(&self, run: ::uuid::Uuid) -> Option<$crate::store::RunRecord> {
                self.journal.get(run)
            }

            fn query(&self, query: &$crate::store::RunQuery) -> Vec<$crate::store::RunRecord> {
                self.journal.query(query)
            }

            fn refused(&self, _: &$crate::store::JournalPen, refusal: $crate::store::Refusal) {
                self.journal.refused(refusal)
            }

            fn refusals(&self, agent: &$crate::id::AgentId) -> Vec<$crate::store::Refusal> {
                self.journal.refusals(agent)
            }

            fn durable(&self) -> Option<&dyn $crate::store::Durable> {
                Some(self)
            }

            fn take_ended<'a>(&self, ended: $crate::store::EndedDraft<'a>) -> Option<$crate::store::EndedDraft<'a>> {
                self.journal.take_ended(ended)
            }
        }

        impl $crate::store::Durable for $store {
            fn flushed(&self) -> $crate::store::Flushed {
                self.journal.flushed()
            }

            fn flushed_for(&self, agent: &$crate::id::AgentId) -> $crate::store::Flushed {
                self.journal.flushed_for(agent)
            }

            fn fallen_behind(
                &self,
                _: &$crate::store::JournalPen,
            ) -> Option<::tokio::sync::mpsc::UnboundedReceiver<$crate::id::AgentId>> {
                self.journal.fallen_behind()
            }

            fn caught_up(&self, _: &$crate::store::JournalPen, agent: &$crate::id::AgentId) {
                self.journal.caught_up(agent)
            }

            fn append_input(
                &self,
                _: &$crate::store::JournalPen,
                agent: &$crate::id::AgentId,
                seq: u64,
                signal: &$crate::signal::Signal,
            ) {
                self.journal.append_input(agent, seq, signal)
            }

            fn save_snapshot(&self, _: &$crate::store::JournalPen, snapshot: $crate::store::Snapshot) {
                self.journal.save_snapshot(snapshot)
            }

            fn agent_spawned(
                &self,
                _: &$crate::store::JournalPen,
                record: $crate::store::AgentRecord,
                initial: $crate::store::Snapshot,
            ) {
                self.journal.agent_spawned(record, initial)
            }

            fn agent_alive(&self, _: &$crate::store::JournalPen, record: $crate::store::AgentRecord) {
                self.journal.agent_alive(record)
            }

            fn agent_ended(&self, _: &$crate::store::JournalPen, agent: &$crate::id::AgentId) {
                self.journal.agent_ended(agent)
            }

            fn schedule_armed(&self, _: &$crate::store::JournalPen, schedule: $crate::store::ScheduleRecord) {
                self.journal.schedule_armed(schedule)
            }

            fn schedule_cleared(&self, _: &$crate::store::JournalPen, agent: &$crate::id::AgentId, key: &str) {
                self.journal.schedule_cleared(agent, key)
            }

            fn run_planned(&self, _: &$crate::store::JournalPen, run: ::uuid::Uuid, plan: &$crate::store::RunPlan) {
                self.journal.run_planned(run, plan)
            }

            fn run_planned_parts(
                &self,
                _: &$crate::store::JournalPen,
                run: ::uuid::Uuid,
                parts: $crate::store::PlanParts<'_>,
            ) {
                self.journal.run_planned_parts(run, parts)
            }

            fn run_outcome(
                &self,
                _: &$crate::store::JournalPen,
                agent: &$crate::id::AgentId,
                run: ::uuid::Uuid,
                outcome: &$crate::signal::Signal,
                safe_again: bool,
            ) {
                self.journal.run_outcome(agent, run, outcome, safe_again)
            }

            fn sending(
                &self,
                _: &$crate::store::JournalPen,
                agent: &$crate::id::AgentId,
                to: &$crate::id::AgentId,
                signal: &$crate::signal::Signal,
            ) {
                self.journal.sending(agent, to, signal)
            }

            fn sent_on(&self, _: &$crate::store::JournalPen, agent: &$crate::id::AgentId, signal: ::uuid::Uuid) {
                self.journal.sent_on(agent, signal)
            }

            fn append_kept_outcome(
                &self,
                _: &$crate::store::JournalPen,
                agent: &$crate::id::AgentId,
                seq: u64,
                run: ::uuid::Uuid,
                _signal: &$crate::signal::Signal,
            ) {
                self.journal.append_kept_outcome(agent, seq, run)
            }

            fn job_submitted(
                &self,
                _: &$crate::store::JournalPen,
                record: &$crate::action::JobRecord,
                plan: &$crate::store::JobPlan,
            ) {
                self.journal.job($crate::store::job_log::JobWrite::Submitted(Box::new((record.clone(), plan.clone()))))
            }

            fn job_changed(
                &self,
                _: &$crate::store::JournalPen,
                record: &$crate::action::JobRecord,
                end: Option<&$crate::signal::Signal>,
            ) {
                self.journal.job($crate::store::job_log::JobWrite::Changed(Box::new((record.clone(), end.cloned()))))
            }

            fn job_told(&self, _: &$crate::store::JournalPen, agent: &$crate::id::AgentId, job: ::uuid::Uuid) {
                self.journal.job($crate::store::job_log::JobWrite::Told(agent.clone(), job))
            }

            fn jobs_purged(&self, _: &$crate::store::JournalPen, before: ::chrono::DateTime<::chrono::Utc>) {
                self.journal.job($crate::store::job_log::JobWrite::Purged(before))
            }

            fn alive(
                &self,
                after: Option<&$crate::id::AgentId>,
                limit: usize,
            ) -> Result<Vec<$crate::store::AliveAgent>, $crate::store::StoreError> {
                self.journal.settled()?.alive(after, limit)
            }

            fn agent(
                &self,
                agent: &$crate::id::AgentId,
            ) -> Result<Option<$crate::store::AgentRecord>, $crate::store::StoreError> {
                self.journal.settled()?.agent(agent)
            }

            fn snapshot(
                &self,
                agent: &$crate::id::AgentId,
            ) -> Result<Option<$crate::store::Snapshot>, $crate::store::StoreError> {
                self.journal.settled()?.snapshot(agent)
            }

            fn inputs_after(
                &self,
                agent: &$crate::id::AgentId,
                after: u64,
            ) -> Result<Vec<(u64, $crate::signal::Signal)>, $crate::store::StoreError> {
                self.journal.settled()?.inputs_after(agent, after)
            }

            fn schedules(
                &self,
                agent: &$crate::id::AgentId,
            ) -> Result<Vec<$crate::store::ScheduleRecord>, $crate::store::StoreError> {
                self.journal.settled()?.schedules(agent)
            }

            fn revivals(
                &self,
                agents: &[$crate::id::AgentId],
            ) -> Result<Vec<Result<$crate::store::Revival, $crate::store::StoreError>>, $crate::store::StoreError> {
                self.journal.settled()?.revivals(agents)
            }
        }
    };
}
pub(crate) use journal_store;
