//! The job board: long-running runs an agent submits and checks on later, each in a supervised task, at most
//! a configured number running at once across the runtime.

use crate::action::{JobRecord, JobStatus};
use crate::id::{ActionId, AgentId};
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
    Failed(String),
}

struct Job {
    record: watch::Sender<JobRecord>,
    task: Option<AbortHandle>,
}

/// How long an ended job stays on the board unless [`crate::runtime::RuntimeBuilder::job_retention`] says
/// otherwise.
pub const DEFAULT_JOB_RETENTION: Duration = Duration::from_secs(3600);

/// Every job of the runtime. Cheap to share; the runtime owns one. Ended jobs stay visible for a retention
/// time, then are dropped, so the board does not grow for ever.
pub struct JobBoard {
    jobs: DashMap<Uuid, Job>,
    permits: Arc<Semaphore>,
    /// Each agent's own slots, sized by its policy's `running_jobs` (made again when that changes).
    agent_permits: DashMap<AgentId, (usize, Arc<Semaphore>)>,
    retention: Duration,
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
            agent_permits: DashMap::new(),
            retention,
        }
    }

    /// How many jobs the board holds now (running, queued, and ended ones still retained).
    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    /// Whether the board holds no job.
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// Drops the jobs that ended longer than the retention ago.
    fn purge(&self) {
        let Ok(retention) = chrono::Duration::from_std(self.retention) else { return };
        let cutoff = Utc::now() - retention;
        self.jobs.retain(|_, job| {
            let record = job.record.borrow();
            !(record.status.is_final() && record.ended_at.is_some_and(|ended| ended <= cutoff))
        });
    }

    /// One job.
    pub fn get(&self, id: Uuid) -> Option<JobRecord> {
        self.jobs.get(&id).map(|job| job.record.borrow().clone())
    }

    /// How many of an agent's jobs have not ended (queued or running).
    pub fn unended_of(&self, agent: &AgentId) -> usize {
        // An agent that never submitted a job has no slots here: the common case, asked for every agent on
        // each sweep of the hibernation timer, costs one lookup rather than a walk of the board.
        if !self.agent_permits.contains_key(agent) {
            return 0;
        }
        self.jobs
            .iter()
            .filter(|job| {
                let record = job.record.borrow();
                &record.agent == agent && !record.status.is_final()
            })
            .count()
    }

    /// An agent's jobs, oldest first.
    pub fn of_agent(&self, agent: &AgentId) -> Vec<JobRecord> {
        let mut jobs: Vec<JobRecord> =
            self.jobs.iter().map(|job| job.record.borrow().clone()).filter(|record| &record.agent == agent).collect();
        jobs.sort_by_key(|record| (record.submitted_at, record.id));
        jobs
    }

    /// Registers a job and starts `work` in its own task once a slot is free: one of the agent's own
    /// (`limits.running_jobs` of its policy) and then one of the runtime's. `work` gets the job id; `ended` is
    /// told how it ended (not when it is cancelled). Refused when the agent holds as many unended jobs as its
    /// limits allow (running and waiting together).
    pub(crate) fn submit<W, F, E>(
        self: &Arc<Self>,
        agent: AgentId,
        action: ActionId,
        limits: &crate::policy::Limits,
        work: W,
        ended: E,
    ) -> Result<Uuid, JobsFull>
    where
        W: FnOnce(Uuid) -> F + Send + 'static,
        F: Future<Output = JobEnd> + Send + 'static,
        E: FnOnce(JobRecord) + Send + 'static,
    {
        self.purge();
        let (running, queued) = (limits.running_jobs.max(1), limits.queued_jobs);
        let held = self
            .jobs
            .iter()
            .filter(|job| job.record.borrow().agent == agent && !job.record.borrow().status.is_final())
            .count();
        if held >= running.saturating_add(queued) {
            return Err(JobsFull { agent, held, running, queued });
        }
        let mine = {
            let mut slot =
                self.agent_permits.entry(agent.clone()).or_insert_with(|| (running, Arc::new(Semaphore::new(running))));
            if slot.0 != running {
                *slot = (running, Arc::new(Semaphore::new(running)));
            }
            slot.1.clone()
        };
        let id = Uuid::now_v7();
        let record = JobRecord {
            id,
            agent,
            action,
            status: JobStatus::Queued,
            progress: 0.0,
            message: None,
            output: None,
            error: None,
            submitted_at: Utc::now(),
            ended_at: None,
        };
        let (sender, _) = watch::channel(record);
        self.jobs.insert(id, Job { record: sender, task: None });
        let board = self.clone();
        // The task starts only once its abort handle is on the board, so a cancel can always stop it.
        let (handle_kept, kept) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            if kept.await.is_err() {
                return;
            }
            let Ok(_mine) = mine.acquire_owned().await else { return };
            let Ok(_permit) = board.permits.clone().acquire_owned().await else { return };
            // Cancelled while it waited for a slot: it never starts.
            if board.change(id, |r| r.status = JobStatus::Running).is_none() {
                return;
            }
            let end = work(id).await;
            let finished = board.change(id, |r| {
                r.ended_at = Some(Utc::now());
                match end {
                    JobEnd::Completed(output) => {
                        r.status = JobStatus::Completed;
                        r.progress = 1.0;
                        r.output = Some(output);
                    }
                    JobEnd::Failed(error) => {
                        r.status = JobStatus::Failed;
                        r.error = Some(error);
                    }
                }
            });
            if let Some(record) = finished {
                ended(record);
            }
        });
        if let Some(mut job) = self.jobs.get_mut(&id) {
            job.task = Some(task.abort_handle());
        }
        let _ = handle_kept.send(());
        Ok(id)
    }

    /// Applies a change to a job that has not ended; returns the record after it, or `None` if the job is
    /// unknown or had already ended.
    fn change(&self, id: Uuid, f: impl FnOnce(&mut JobRecord)) -> Option<JobRecord> {
        let job = self.jobs.get(&id)?;
        let mut changed = None;
        job.record.send_if_modified(|record| {
            if record.status.is_final() {
                return false;
            }
            f(record);
            changed = Some(record.clone());
            true
        });
        changed
    }

    /// Records progress for a running job.
    pub(crate) fn progress(&self, id: Uuid, fraction: f64, message: Option<String>) {
        self.change(id, |r| {
            r.progress = fraction;
            if message.is_some() {
                r.message = message;
            }
        });
    }

    /// Cancels a job that has not ended: its task is aborted (which cancels its run) and it is marked
    /// cancelled. Returns the record, or `None` if it was unknown or had already ended.
    pub(crate) fn cancel(&self, id: Uuid, reason: &str) -> Option<JobRecord> {
        let cancelled = self.change(id, |r| {
            r.status = JobStatus::Cancelled;
            r.error = Some(reason.to_owned());
            r.ended_at = Some(Utc::now());
        })?;
        if let Some(task) = self.jobs.get(&id).and_then(|job| job.task.clone()) {
            task.abort();
        }
        Some(cancelled)
    }

    /// Cancels every job of an agent that has not ended (the agent stopped); returns them.
    pub(crate) fn cancel_agent(&self, agent: &AgentId, reason: &str) -> Vec<JobRecord> {
        self.agent_permits.remove(agent);
        let ids: Vec<Uuid> = self.of_agent(agent).into_iter().filter(|r| !r.status.is_final()).map(|r| r.id).collect();
        ids.into_iter().filter_map(|id| self.cancel(id, reason)).collect()
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

    fn action() -> ActionId {
        ActionId::new("x.y").unwrap()
    }

    /// A job cancelled while it waits for a slot never starts its work, even once the slot frees up.
    #[tokio::test]
    async fn a_job_cancelled_while_it_waits_never_starts() {
        let board = Arc::new(JobBoard::new(1));
        let limits = crate::policy::Limits::default();
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let first = board
            .submit(
                agent(),
                action(),
                &limits,
                move |_| async move {
                    let _ = released.await;
                    JobEnd::Completed(Value::Null)
                },
                |_| {},
            )
            .unwrap();
        let ran = Arc::new(AtomicBool::new(false));
        let flag = ran.clone();
        let waiting = board
            .submit(
                agent(),
                action(),
                &limits,
                move |_| async move {
                    flag.store(true, Ordering::SeqCst);
                    JobEnd::Completed(Value::Null)
                },
                |_| {},
            )
            .unwrap();
        assert!(board.cancel(waiting, "no longer wanted").is_some());
        let _ = release.send(());
        board.wait(first, Duration::from_secs(60)).await;
        // Slots are handed out in order: a job submitted after it finds its slot only after it would have run.
        let last =
            board.submit(agent(), action(), &limits, |_| async { JobEnd::Completed(Value::Null) }, |_| {}).unwrap();
        let ended = board.wait(last, Duration::from_secs(60)).await.unwrap();
        assert_eq!(ended.status, JobStatus::Completed);
        assert!(!ran.load(Ordering::SeqCst), "a cancelled job ran");
        assert_eq!(board.get(waiting).unwrap().status, JobStatus::Cancelled);
    }
}
