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
    retention: Duration,
}

impl JobBoard {
    /// A board that runs at most `max_running` jobs at once (at least one) and keeps ended ones for
    /// [`DEFAULT_JOB_RETENTION`].
    pub fn new(max_running: usize) -> Self {
        Self::with_retention(max_running, DEFAULT_JOB_RETENTION)
    }

    /// A board that keeps ended jobs for `retention` after they end.
    pub fn with_retention(max_running: usize, retention: Duration) -> Self {
        Self { jobs: DashMap::new(), permits: Arc::new(Semaphore::new(max_running.max(1))), retention }
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

    /// An agent's jobs, oldest first.
    pub fn of_agent(&self, agent: &AgentId) -> Vec<JobRecord> {
        let mut jobs: Vec<JobRecord> =
            self.jobs.iter().map(|job| job.record.borrow().clone()).filter(|record| &record.agent == agent).collect();
        jobs.sort_by_key(|record| (record.submitted_at, record.id));
        jobs
    }

    /// Registers a job and starts `work` in its own task once a slot is free. `work` gets the job id; `ended`
    /// is told how it ended (not when it is cancelled).
    pub(crate) fn submit<W, F, E>(self: &Arc<Self>, agent: AgentId, action: ActionId, work: W, ended: E) -> Uuid
    where
        W: FnOnce(Uuid) -> F + Send + 'static,
        F: Future<Output = JobEnd> + Send + 'static,
        E: FnOnce(JobRecord) + Send + 'static,
    {
        self.purge();
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
        let task = tokio::spawn(async move {
            let Ok(_permit) = board.permits.clone().acquire_owned().await else { return };
            board.change(id, |r| r.status = JobStatus::Running);
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
        id
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
