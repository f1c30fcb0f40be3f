//! The job board: long-running runs an agent submits and checks on later, each in a supervised task, at most
//! a configured number running at once across the runtime.
//!
//! With a durable store the board journals every job (see [`crate::store::Durable::job_submitted`]): when it
//! is submitted, with what starting it again needs; when it starts, before its run (whose own write-ahead then
//! makes the start durable before an action with side effects begins); as it makes progress; and when it
//! ends, with the signal for its agent. A recovery puts the jobs back on the board and starts again those that
//! need it (see the server's `durability` module).

use crate::action::{ActionError, JobRecord, JobStatus};
use crate::id::{ActionId, AgentId};
use crate::signal::Signal;
use crate::store::PEN;
use crate::store::{Durable, JobPlan, Store};
use chrono::Utc;
use dashmap::DashMap;
use serde_json::Value;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Semaphore, watch};
use tokio::task::AbortHandle;
use uuid::Uuid;

/// How a job ended, as its task reports it.
pub(crate) enum JobEnd {
    Completed(Value),
    Failed(ActionError),
}

struct Job {
    record: watch::Sender<JobRecord>,
    /// The idempotency key of its run: a second submission with the same key (the submitting run started again
    /// after a crash) is the same job.
    key: Arc<str>,
    task: Option<AbortHandle>,
}

/// A job to put on the board.
pub(crate) struct NewJob {
    pub agent: AgentId,
    pub action: ActionId,
    pub plan: JobPlan,
    /// A job kept from before the process stopped, started again under its id (whatever the limits say: it
    /// was taken once).
    pub again: Option<JobRecord>,
}

/// Announces on the event stream that a job ended (`JobEnded`, for its agent, with no run).
pub(crate) fn announce_end(events: &crate::events::EventBus, record: &JobRecord) {
    let ended = crate::events::EventKind::JobEnded { job: record.id, status: record.status };
    events.announce(&record.agent, None, None, ended);
}

/// A job that ended: its record and the signal for its agent.
pub(crate) type Ended = (JobRecord, Option<Signal>);

/// How long an ended job stays on the board unless [`crate::runtime::RuntimeBuilder::job_retention`] says
/// otherwise.
pub const DEFAULT_JOB_RETENTION: Duration = Duration::from_secs(3600);

/// Every job of the runtime. Cheap to share; the runtime owns one. Ended jobs stay visible for a retention
/// time, then are dropped, so the board does not grow for ever.
///
/// Two maps, never locked together: the jobs by id, and each agent's index of its jobs. What a submission or
/// the hibernation sweep asks of an agent costs that agent's jobs, not the board's.
pub struct JobBoard {
    jobs: DashMap<Uuid, Job>,
    permits: Arc<Semaphore>,
    agents: DashMap<AgentId, AgentJobs>,
    retention: Duration,
    /// The jobs that ended, in the order they did (those restored after a restart are added as they are
    /// restored): dropping the expired ones takes them from the front, never a walk of the board.
    ended: std::sync::Mutex<std::collections::VecDeque<(chrono::DateTime<Utc>, Uuid)>>,
    /// Where jobs are journaled, when the runtime's store is durable.
    journal: Option<Arc<dyn Store>>,
}

/// One agent's jobs, as the board indexes them.
#[derive(Default)]
struct AgentJobs {
    /// Its own slots, sized by its policy's `running_jobs` (made again when that changes).
    slots: Option<(usize, Arc<Semaphore>)>,
    /// Its jobs on the board, by the key of their run.
    keys: std::collections::HashMap<Arc<str>, Uuid>,
    /// How many of them have not ended.
    unended: usize,
}

/// Why a job was not taken: the agent holds as many jobs as its policy allows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "agent `{agent}` has {held} jobs running or waiting, as many as its policy allows ({running} running and \
     {queued} waiting: `limits.running_jobs`, `limits.queued_jobs`); expected one of them to end first"
)]
pub struct JobsFull {
    /// The agent.
    pub agent: AgentId,
    /// The jobs it holds that have not ended.
    pub held: usize,
    /// Its running limit.
    pub running: usize,
    /// Its waiting limit.
    pub queued: usize,
}

impl JobBoard {
    /// A board that runs at most `max_running` jobs at once (at least one) and keeps ended ones for
    /// [`DEFAULT_JOB_RETENTION`].
    pub fn new(max_running: usize) -> Self {
        Self::with_retention(max_running, DEFAULT_JOB_RETENTION)
    }

    /// A board that keeps ended jobs for `retention` after they end.
    pub fn with_retention(max_running: usize, retention: Duration) -> Self {
        Self {
            jobs: DashMap::new(),
            permits: Arc::new(Semaphore::new(max_running.max(1))),
            agents: DashMap::new(),
            retention,
            ended: std::sync::Mutex::default(),
            journal: None,
        }
    }

    /// The same board, journaling its jobs in `store` when it is durable.
    pub(crate) fn journaled(mut self, store: Arc<dyn Store>) -> Self {
        self.journal = store.durable().is_some().then_some(store);
        self
    }

    fn durable(&self) -> Option<&dyn Durable> {
        self.journal.as_deref().and_then(|store| store.durable())
    }

    /// How many jobs the board holds now (running, queued, and ended ones still retained).
    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    /// Whether the board holds no job.
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// The time before which ended jobs are no longer kept.
    fn cutoff(&self) -> Option<chrono::DateTime<Utc>> {
        chrono::Duration::from_std(self.retention).ok().map(|retention| Utc::now() - retention)
    }

    /// Whether a job ended before `cutoff`.
    fn expired(record: &JobRecord, cutoff: chrono::DateTime<Utc>) -> bool {
        record.status.is_final() && record.ended_at.is_some_and(|ended| ended <= cutoff)
    }

    /// The ended jobs, in the order they ended.
    fn ended_order(&self) -> std::sync::MutexGuard<'_, std::collections::VecDeque<(chrono::DateTime<Utc>, Uuid)>> {
        self.ended.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Drops the jobs that ended longer than the retention ago (from the journal too).
    fn purge(&self) {
        let Some(cutoff) = self.cutoff() else { return };
        let expired: Vec<Uuid> = {
            let mut ended = self.ended_order();
            let mut expired = Vec::new();
            while let Some((_, id)) = ended.front().filter(|(at, _)| *at <= cutoff).copied() {
                ended.pop_front();
                expired.push(id);
            }
            expired
        };
        if expired.is_empty() {
            return;
        }
        for id in expired {
            if let Some((_, job)) = self.jobs.remove(&id) {
                let agent = job.record.borrow().agent.clone();
                if let Some(mut jobs) = self.agents.get_mut(&agent) {
                    jobs.keys.remove(&job.key);
                }
            }
        }
        if let Some(durable) = self.durable() {
            durable.jobs_purged(PEN, cutoff);
        }
    }

    /// Puts a job kept from before a restart on the board and in its agent's index.
    fn insert(&self, record: JobRecord, key: Arc<str>) {
        let (id, agent, unended) = (record.id, record.agent.clone(), !record.status.is_final());
        if let Some(at) = record.ended_at.filter(|_| !unended) {
            self.ended_order().push_back((at, id));
        }
        let (sender, _) = watch::channel(record);
        self.jobs.insert(id, Job { record: sender, key: key.clone(), task: None });
        let mut jobs = self.agents.entry(agent).or_default();
        jobs.keys.insert(key, id);
        jobs.unended += usize::from(unended);
    }

    /// One job.
    pub fn get(&self, id: Uuid) -> Option<JobRecord> {
        self.jobs.get(&id).map(|job| job.record.borrow().clone())
    }

    /// How many of an agent's jobs have not ended (queued or running).
    pub fn unended_of(&self, agent: &AgentId) -> usize {
        self.agents.get(agent).map_or(0, |jobs| jobs.unended)
    }

    /// An agent's jobs, oldest first.
    pub fn of_agent(&self, agent: &AgentId) -> Vec<JobRecord> {
        let ids: Vec<Uuid> =
            self.agents.get(agent).map(|jobs| jobs.keys.values().copied().collect()).unwrap_or_default();
        let mut jobs: Vec<JobRecord> = ids.into_iter().filter_map(|id| self.get(id)).collect();
        jobs.sort_by_key(|record| (record.submitted_at, record.id));
        jobs
    }

    /// Registers a job and starts `work` in its own task once a slot is free: one of the agent's own
    /// (`limits.running_jobs` of its policy) and then one of the runtime's. `work` gets the job id and says how
    /// it ended, or `None` when its run was cut off because the runtime is shutting down: the job is then left as
    /// the journal has it (started), for the next recovery to start again or report as interrupted, never ended
    /// as failed. `ended` is told how it ended, with the signal for its agent (not when it is cancelled). Refused when the agent holds
    /// as many unended jobs as its limits allow (running and waiting together). A job of the agent with the same
    /// key is the same job: its id is returned, and nothing starts.
    pub(crate) fn submit<W, F, E>(
        self: &Arc<Self>,
        job: NewJob,
        limits: &crate::policy::Limits,
        work: W,
        ended: E,
    ) -> Result<Uuid, JobsFull>
    where
        W: FnOnce(Uuid) -> F + Send + 'static,
        F: Future<Output = Option<JobEnd>> + Send + 'static,
        E: FnOnce(JobRecord, Option<Signal>) + Send + 'static,
    {
        self.purge();
        let NewJob { agent, action, plan, again } = job;
        let (running, queued) = (limits.running_jobs.max(1), limits.queued_jobs);
        let id = again.as_ref().map_or_else(Uuid::now_v7, |kept| kept.id);
        let key: Arc<str> = plan.key.as_str().into();
        // Checked and taken under the agent's guard: two submissions at once never both pass the limit, nor
        // make two jobs of one key.
        let mine = {
            let mut jobs = self.agents.entry(agent.clone()).or_default();
            if again.is_none() {
                if let Some(id) = jobs.keys.get(&key) {
                    return Ok(*id);
                }
                if jobs.unended >= running.saturating_add(queued) {
                    return Err(JobsFull { agent, held: jobs.unended, running, queued });
                }
            }
            jobs.keys.insert(key.clone(), id);
            jobs.unended += 1;
            match &jobs.slots {
                Some((size, slots)) if *size == running => slots.clone(),
                _ => {
                    let slots = Arc::new(Semaphore::new(running));
                    jobs.slots = Some((running, slots.clone()));
                    slots
                }
            }
        };
        let restarted = again.is_some();
        let record = match again {
            // Started again from the start: what it reported before is gone with the run that reported it.
            Some(kept) => JobRecord::queued(kept.id, kept.agent, kept.action, kept.submitted_at),
            None => JobRecord::queued(id, agent, action, Utc::now()),
        };
        if let Some(durable) = self.durable() {
            if restarted {
                durable.job_changed(PEN, &record, None);
            } else {
                durable.job_submitted(PEN, &record, &plan);
            }
        }
        let (sender, _) = watch::channel(record);
        self.jobs.insert(id, Job { record: sender, key, task: None });
        let board = self.clone();
        // The task starts only once its abort handle is on the board, so a cancel can always stop it.
        let (handle_kept, kept) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            if kept.await.is_err() {
                return;
            }
            let Ok(_mine) = mine.acquire_owned().await else { return };
            let Ok(_permit) = board.permits.clone().acquire_owned().await else { return };
            // Cancelled while it waited for a slot: it never starts. Its start is journaled before its run is
            // asked for, so the run's write-ahead makes it durable before an action with side effects begins.
            if board.change(id, |r| r.status = JobStatus::Running).is_none() {
                return;
            }
            let Some(end) = work(id).await else { return };
            let finished = board.finish(id, |r| match end {
                JobEnd::Completed(output) => {
                    r.status = JobStatus::Completed;
                    r.progress = 1.0;
                    r.output = Some(output);
                }
                JobEnd::Failed(error) => {
                    r.status = JobStatus::Failed;
                    r.class = Some(error.class());
                    r.error = Some(error.to_string());
                }
            });
            if let Some((record, signal)) = finished {
                ended(record, signal);
            }
        });
        if let Some(mut job) = self.jobs.get_mut(&id) {
            job.task = Some(task.abort_handle());
        }
        let _ = handle_kept.send(());
        Ok(id)
    }

    /// Puts back on the board, with no task, a job kept from before the process stopped, so it is listed again
    /// (an ended one that is older than the retention is not).
    pub(crate) fn restore(&self, record: JobRecord, key: &str) {
        if self.cutoff().is_some_and(|cutoff| Self::expired(&record, cutoff)) {
            return;
        }
        self.insert(record, key.into());
    }

    /// Ends a job that has not ended, journaled with the signal for its agent (see [`JobBoard::change`]).
    pub(crate) fn finish(&self, id: Uuid, f: impl FnOnce(&mut JobRecord)) -> Option<Ended> {
        let record = self.change_quietly(id, |r| {
            r.ended_at = Some(Utc::now());
            f(r);
        })?;
        let signal = crate::kinds::job_ended(&crate::kinds::agent_source(&record.agent), &record);
        if let Some(durable) = self.durable() {
            durable.job_changed(PEN, &record, signal.as_ref());
        }
        Some((record, signal))
    }

    /// Applies a change to a job that has not ended, journaled; returns the record after it, or `None` if the
    /// job is unknown or had already ended.
    fn change(&self, id: Uuid, f: impl FnOnce(&mut JobRecord)) -> Option<JobRecord> {
        let record = self.change_quietly(id, f)?;
        if let Some(durable) = self.durable() {
            durable.job_changed(PEN, &record, None);
        }
        Some(record)
    }

    /// Applies a change to a job that has not ended, not journaled.
    fn change_quietly(&self, id: Uuid, f: impl FnOnce(&mut JobRecord)) -> Option<JobRecord> {
        let mut changed = None;
        if let Some(job) = self.jobs.get(&id) {
            job.record.send_if_modified(|record| {
                if record.status.is_final() {
                    return false;
                }
                f(record);
                changed = Some(record.clone());
                true
            });
        }
        let changed = changed?;
        // Its agent's count, with the board's guard let go (the two maps are never locked together).
        if changed.status.is_final() {
            if let Some(mut jobs) = self.agents.get_mut(&changed.agent) {
                jobs.unended = jobs.unended.saturating_sub(1);
            }
            self.ended_order().push_back((changed.ended_at.unwrap_or_else(Utc::now), changed.id));
        }
        Some(changed)
    }

    /// Records progress for a running job (journaled).
    pub(crate) fn progress(&self, id: Uuid, fraction: f64, message: Option<String>) {
        self.change(id, |r| {
            r.progress = fraction;
            if message.is_some() {
                r.message = message;
            }
        });
    }

    /// Cancels a job that has not ended: its task is aborted (which cancels its run) and it is marked
    /// cancelled. Returns the record and the signal for its agent, or `None` if it was unknown or had already
    /// ended.
    pub(crate) fn cancel(&self, id: Uuid, reason: &str) -> Option<Ended> {
        let cancelled = self.finish(id, |r| {
            r.status = JobStatus::Cancelled;
            r.error = Some(reason.to_owned());
        })?;
        self.abort(id);
        Some(cancelled)
    }

    fn abort(&self, id: Uuid) {
        if let Some(task) = self.jobs.get(&id).and_then(|job| job.task.clone()) {
            task.abort();
        }
    }

    /// The ids of an agent's jobs that have not ended.
    fn unended_ids(&self, agent: &AgentId) -> Vec<Uuid> {
        self.of_agent(agent).into_iter().filter(|r| !r.status.is_final()).map(|r| r.id).collect()
    }

    /// Cancels every job of an agent that has not ended (the agent stopped and is not coming back as it was);
    /// returns them. Its agent is not told (it stopped), so none is kept for it.
    pub(crate) fn cancel_agent(&self, agent: &AgentId, reason: &str) -> Vec<JobRecord> {
        if let Some(mut jobs) = self.agents.get_mut(agent) {
            jobs.slots = None;
        }
        let mut cancelled = Vec::new();
        for id in self.unended_ids(agent) {
            let Some(record) = self.change(id, |r| {
                r.status = JobStatus::Cancelled;
                r.error = Some(reason.to_owned());
                r.ended_at = Some(Utc::now());
            }) else {
                continue;
            };
            self.abort(id);
            cancelled.push(record);
        }
        cancelled
    }

    /// Stops the tasks of an agent's jobs that have not ended and takes them off the board, journaling nothing:
    /// the runtime shuts down, and the journal keeps them as they were, for the next recovery to settle.
    pub(crate) fn abandon_agent(&self, agent: &AgentId) {
        let ids = self.unended_ids(agent);
        for id in &ids {
            self.abort(*id);
        }
        let keys: Vec<Arc<str>> = ids.iter().filter_map(|id| self.jobs.remove(id)).map(|(_, job)| job.key).collect();
        if let Some(mut jobs) = self.agents.get_mut(agent) {
            jobs.slots = None;
            for key in &keys {
                jobs.keys.remove(key);
            }
            jobs.unended = jobs.unended.saturating_sub(keys.len());
        }
    }

    /// Waits until a job ends, at most `timeout`, and returns it as it then is.
    pub async fn wait(&self, id: Uuid, timeout: Duration) -> Option<JobRecord> {
        let mut watching = self.jobs.get(&id)?.record.subscribe();
        let _ = tokio::time::timeout(timeout, watching.wait_for(|r| r.status.is_final())).await;
        let current = watching.borrow().clone();
        Some(current)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    fn agent() -> AgentId {
        AgentId::new("a").unwrap()
    }

    fn job(key: &str) -> NewJob {
        let plan = JobPlan {
            key: key.to_owned(),
            params: Value::Null,
            stack: Vec::new(),
            correlation: Uuid::nil(),
            from_outside: false,
        };
        NewJob { agent: agent(), action: ActionId::new("x.y").unwrap(), plan, again: None }
    }

    /// A job cancelled while it waits for a slot never starts its work, even once the slot frees up.
    #[tokio::test]
    async fn a_job_cancelled_while_it_waits_never_starts() {
        let board = Arc::new(JobBoard::new(1));
        let limits = crate::policy::Limits::default();
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let first = board
            .submit(
                job("a"),
                &limits,
                move |_| async move {
                    let _ = released.await;
                    Some(JobEnd::Completed(Value::Null))
                },
                |_, _| {},
            )
            .unwrap();
        let ran = Arc::new(AtomicBool::new(false));
        let flag = ran.clone();
        let waiting = board
            .submit(
                job("b"),
                &limits,
                move |_| async move {
                    flag.store(true, Ordering::SeqCst);
                    Some(JobEnd::Completed(Value::Null))
                },
                |_, _| {},
            )
            .unwrap();
        assert!(board.cancel(waiting, "no longer wanted").is_some());
        let _ = release.send(());
        board.wait(first, Duration::from_secs(60)).await;
        // Slots are handed out in order: a job submitted after it finds its slot only after it would have run.
        let last =
            board.submit(job("c"), &limits, |_| async { Some(JobEnd::Completed(Value::Null)) }, |_, _| {}).unwrap();
        let ended = board.wait(last, Duration::from_secs(60)).await.unwrap();
        assert_eq!(ended.status, JobStatus::Completed);
        assert!(!ran.load(Ordering::SeqCst), "a cancelled job ran");
        assert_eq!(board.get(waiting).unwrap().status, JobStatus::Cancelled);
    }
}
