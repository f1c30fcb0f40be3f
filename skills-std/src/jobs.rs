//! `jobs`: long-running work. `jobs.submit` starts an action as a job and returns its id at once; the job runs
//! in the runtime's supervised tasks (at most `RuntimeBuilder::max_jobs` at once) through the agent's gate,
//! and the agent gets `job.completed`, `job.failed` or `job.cancelled` when it ends.

use agentry::action::{JobRecord, JobStatus};
use agentry::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;
use uuid::Uuid;

/// The longest `jobs.wait`: one day.
pub const MAX_WAIT_MS: u64 = 24 * 60 * 60 * 1000;

/// Starts an action as a job and returns the job's id without waiting for it.
#[derive(Debug, Deserialize, Serialize, JsonSchema, Action)]
#[action(id = "jobs.submit", output = Submitted, side_effects, idempotent, cost = cheap, category = job)]
pub struct Submit {
    /// The action to run, e.g. `reports.build`; it must be mounted on this agent.
    pub action: String,
    /// Its params.
    #[serde(default)]
    pub params: Value,
}

/// A job that was submitted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Submitted {
    /// The job's id, for `jobs.status`, `jobs.wait` and `jobs.cancel`.
    pub job: Uuid,
}

impl Submit {
    /// Registers the job; it starts when a slot is free.
    pub async fn run(self, ctx: ActionContext) -> Result<Submitted, ActionError> {
        let params = if self.params.is_null() { Value::Object(Default::default()) } else { self.params };
        Ok(Submitted { job: ctx.submit_job(&self.action, params)? })
    }
}

fn unknown(job: Uuid) -> ActionError {
    ActionError::validation(format!("this agent has no job {job}; expected an id `jobs.submit` returned"))
}

/// Tells where one of this agent's jobs is.
#[derive(Debug, Deserialize, Serialize, JsonSchema, Action)]
#[action(id = "jobs.status", output = JobRecord, idempotent, cost = cheap)]
pub struct Status {
    /// The job's id.
    pub job: Uuid,
}

impl Status {
    /// The job's record: status, progress, output or error.
    pub async fn run(self, ctx: ActionContext) -> Result<JobRecord, ActionError> {
        ctx.job(self.job)?.ok_or_else(|| unknown(self.job))
    }
}

/// Waits until one of this agent's jobs ends, or the timeout passes, and tells where it is.
#[derive(Debug, Deserialize, Serialize, JsonSchema, Action)]
#[action(id = "jobs.wait", output = JobRecord, idempotent, cost = cheap, timeout = "25h", retry = 1)]
pub struct Wait {
    /// The job's id.
    pub job: Uuid,
    /// How long to wait at most, in milliseconds (at most one day).
    pub timeout_ms: u64,
}

impl Wait {
    /// The job's record once it ended, or as it is when the timeout passed.
    pub async fn run(self, ctx: ActionContext) -> Result<JobRecord, ActionError> {
        if self.timeout_ms > MAX_WAIT_MS {
            return Err(ActionError::validation(format!(
                "`timeout_ms` is {}; expected at most {MAX_WAIT_MS} (one day)",
                self.timeout_ms
            )));
        }
        ctx.wait_job(self.job, Duration::from_millis(self.timeout_ms)).await?.ok_or_else(|| unknown(self.job))
    }
}

/// Cancels one of this agent's jobs that has not ended; its run is cancelled.
#[derive(Debug, Deserialize, Serialize, JsonSchema, Action)]
#[action(id = "jobs.cancel", output = Cancelled, side_effects, idempotent, cost = cheap)]
pub struct Cancel {
    /// The job's id.
    pub job: Uuid,
}

/// What `jobs.cancel` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Cancelled {
    /// Whether the job was cancelled now (`false`: it had already ended).
    pub cancelled: bool,
    /// Where the job is now.
    pub status: JobStatus,
}

impl Cancel {
    /// Cancels if it still runs or waits.
    pub async fn run(self, ctx: ActionContext) -> Result<Cancelled, ActionError> {
        if ctx.job(self.job)?.is_none() {
            return Err(unknown(self.job));
        }
        let cancelled = ctx.cancel_job(self.job)?;
        let status = ctx.job(self.job)?.map_or(JobStatus::Cancelled, |r| r.status);
        Ok(Cancelled { cancelled, status })
    }
}

/// Lists this agent's jobs, oldest first, optionally only those in one status.
#[derive(Debug, Deserialize, Serialize, JsonSchema, Action)]
#[action(id = "jobs.list", output = Vec<JobRecord>, idempotent, cost = cheap)]
pub struct List {
    /// Only jobs in this status.
    #[serde(default)]
    pub status: Option<JobStatus>,
}

impl List {
    /// The agent's jobs.
    pub async fn run(self, ctx: ActionContext) -> Result<Vec<JobRecord>, ActionError> {
        let mut jobs = ctx.jobs()?;
        if let Some(status) = self.status {
            jobs.retain(|r| r.status == status);
        }
        Ok(jobs)
    }
}

/// Long-running work: submit, status, wait, cancel, list.
#[derive(Skill)]
#[skill(
    id = "jobs",
    name = "Jobs",
    version = "1.0.0",
    category = "work",
    tags("jobs", "background"),
    actions(Submit, Status, Wait, Cancel, List),
    instructions = "Use jobs.submit for work that takes long; you get a job id at once and a job.completed, \
                    job.failed or job.cancelled signal when it ends. jobs.wait blocks until then or a timeout."
)]
pub struct Jobs;
