//! What an agent's server does for the actions it runs: nested calls through its gate (routines), jobs, and
//! the folder each skill gets in the agent's drive.

use crate::action::{ActionContext, ActionError, ActionFuture, BoxFuture, JobRecord, Link, RunKey, RunServices};
use crate::directory::Deliver;
use crate::effect::Effect;
use crate::id::{ActionId, AgentId, SkillId};
use crate::jobs::{JobEnd, JobsFull, NewJob};
use crate::messages::{Admitted, Requester, RunRequest, Untyped};
use crate::run_life::nested;
use crate::shared::Shared;
use crate::signal::Signal;
use crate::store::JobPlan;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use uuid::Uuid;

/// One agent's services, shared by every run of that agent.
#[derive(Clone)]
pub(crate) struct AgentServices {
    /// The agent's actor, and how to put a message in its mailbox.
    pub cell: ractor::ActorCell,
    pub deliver: Deliver,
    pub shared: Arc<Shared>,
}

/// The longest agent folder name; longer escaped ids are cut and given a digest of the whole id.
const MAX_FOLDER: usize = 150;

/// A skill's folder in an agent's drive: `<data>/agents/<agent>/<skill>`. The agent id and the skill id are
/// escaped (anything but lowercase ASCII letters, digits, `_` and `-`, and the dots of a skill id, becomes
/// `%xx`, uppercase letters included), so every id maps to one folder of its own even on a filesystem that
/// ignores case (`Ann` and `ann` are `%41nn` and `ann`); an agent id whose escaped form is too long for a file
/// name keeps its first part plus `~` and a digest of the whole id.
pub(crate) fn drive_path(data_dir: &Path, agent: &AgentId, skill: &SkillId) -> PathBuf {
    let mut folder = escaped(agent.as_str(), false);
    if folder.len() > MAX_FOLDER {
        let digest = Uuid::new_v5(&Uuid::NAMESPACE_OID, agent.as_str().as_bytes()).simple().to_string();
        let mut cut = MAX_FOLDER - digest.len() - 1;
        // Never in the middle of an escape.
        while folder.as_bytes().get(cut.saturating_sub(1)) == Some(&b'%')
            || folder.as_bytes().get(cut.saturating_sub(2)) == Some(&b'%')
        {
            cut -= 1;
        }
        folder.truncate(cut);
        folder = format!("{folder}~{digest}");
    }
    data_dir.join("agents").join(folder).join(escaped(skill.as_str(), true))
}

/// `text` with every byte but lowercase ASCII letters, digits, `_`, `-` (and `.` when `dots`) as `%xx`.
fn escaped(text: &str, dots: bool) -> String {
    let mut folder = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'_' || byte == b'-' || (dots && byte == b'.')
        {
            folder.push(char::from(byte));
        } else {
            folder.push_str(&format!("%{byte:02x}"));
        }
    }
    folder
}

/// Where releases before case-safe folder names kept this drive (uppercase letters as they were), if that is a
/// different folder: a drive found there is moved to [`drive_path`] on first use.
pub(crate) fn legacy_drive_path(data_dir: &Path, agent: &AgentId, skill: &SkillId) -> Option<PathBuf> {
    let mut folder = String::with_capacity(agent.as_str().len());
    for byte in agent.as_str().bytes() {
        if byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-' {
            folder.push(char::from(byte));
        } else {
            folder.push_str(&format!("%{byte:02X}"));
        }
    }
    if folder.len() > MAX_FOLDER {
        let digest = Uuid::new_v5(&Uuid::NAMESPACE_OID, agent.as_str().as_bytes()).simple().to_string();
        folder.truncate(MAX_FOLDER - digest.len() - 1);
        folder = format!("{folder}~{digest}");
    }
    let legacy = data_dir.join("agents").join(folder).join(skill.as_str());
    (legacy != drive_path(data_dir, agent, skill)).then_some(legacy)
}

/// Moves a drive from where an earlier release kept it, when it is there and nothing is at `drive` yet.
pub(crate) fn adopt_legacy_drive(data_dir: &Path, agent: &AgentId, skill: &SkillId, drive: &Path) {
    let Some(legacy) = legacy_drive_path(data_dir, agent, skill) else { return };
    if !legacy.is_dir() || drive.exists() {
        return;
    }
    // On a filesystem that ignores case, the old folder of `Ann` is the folder of `ann` (whose name did not
    // change): when an agent whose id differs only by case has its drive there, it is that agent's, and stays.
    if let Ok(lower) = AgentId::new(agent.as_str().to_lowercase())
        && lower != *agent
        && drive_path(data_dir, &lower, skill).exists()
    {
        tracing::warn!(%agent, %skill, legacy = %legacy.display(), "a drive kept under an earlier folder name was not moved: another agent's drive may be the same folder");
        return;
    }
    let moved = drive.parent().map_or(Ok(()), std::fs::create_dir_all).and_then(|()| std::fs::rename(&legacy, drive));
    if let Err(err) = moved {
        tracing::warn!(%agent, %skill, %err, legacy = %legacy.display(), "a drive kept where an earlier release put it could not be moved");
    }
}

/// Tells an agent one of its jobs ended (with the signal the board made and journaled), and announces it.
/// Delivered by the agent's id, not to the actor that submitted the job: an agent that fell asleep just as its
/// job ended gets it kept, and is thawed for it.
pub(crate) fn job_ended(shared: &Arc<Shared>, record: &JobRecord, signal: Option<Signal>) {
    if let Some(signal) = signal
        && let Err(err) = crate::sleep::deliver(shared, &record.agent, signal)
    {
        tracing::warn!(agent = %record.agent, job = %record.id, %err, "a job's end could not reach its agent");
    }
    crate::jobs::announce_end(&shared.events, record);
}

impl AgentServices {
    /// Announces an event of the run `ctx` describes.
    fn announce(&self, ctx: &ActionContext, kind: crate::events::EventKind) {
        self.shared.events.announce(&ctx.agent_id, Some(ctx.run_id), Some(ctx.correlation_id), kind);
    }

    /// Puts a job on the board whose run is called from `parent` (the run that submitted it, or after a crash
    /// one made like it) with the key in the job's plan.
    pub(crate) fn start_job(
        &self,
        parent: ActionContext,
        job: NewJob,
        limits: &crate::policy::Limits,
    ) -> Result<Uuid, JobsFull> {
        let me = Arc::new(self.clone());
        let (action, params) = (job.action.clone(), job.plan.params.clone());
        let key: Arc<str> = job.plan.key.as_str().into();
        let from_outside = parent.scope.from_outside;
        let mut parent = parent;
        // A job outlives the run that submitted it, but inherits its stack: its run is one level deeper, so
        // jobs that submit jobs meet the depth limit like routines that call themselves.
        parent.scope_mut().sink = std::sync::Mutex::default();
        let work = move |id: Uuid| async move {
            let services: Arc<dyn RunServices> = me.clone();
            parent.scope_mut().link = Some(Link { services, job: Some(id) });
            let result = me.call_with(&parent, action, params, RunKey::Given(key)).await;
            let effects: Vec<Effect> = std::mem::take(&mut parent.sink().effects);
            if result.is_ok() && !effects.is_empty() {
                (me.deliver)(&me.cell, Untyped::Effects(effects, from_outside));
            }
            let stopping = me.shared.shutting_down.load(std::sync::atomic::Ordering::SeqCst);
            match result {
                Ok(output) => Some(JobEnd::Completed(output)),
                // Refused or cut off because the runtime is stopping: not the job's end.
                Err(error) if stopping && error.class() == crate::action::ErrorClass::Cancelled => None,
                Err(error) => Some(JobEnd::Failed(error)),
            }
        };
        let shared = self.shared.clone();
        let ended = move |record: JobRecord, signal: Option<Signal>| job_ended(&shared, &record, signal);
        self.shared.jobs.submit(job, limits, work, ended)
    }

    /// A nested call of `action` from `ctx`'s run, keyed `key`, through the agent's gate.
    fn call_with(&self, ctx: &ActionContext, action: ActionId, params: Value, key: RunKey) -> ActionFuture {
        if let Some(error) = nested::too_deep(ctx, &action, self.shared.max_call_depth) {
            return Box::pin(async move { Err(error) });
        }
        let (reply, admitted) = oneshot::channel();
        let caller = ctx.clone();
        let by = Requester::Routine { caller: Box::new(caller.clone()), reply };
        let request = RunRequest { action, params: params.clone(), by, key };
        let sent = (self.deliver)(&self.cell, Untyped::Request(Box::new(request)));
        let runner = self.shared.runner.clone();
        Box::pin(async move {
            if !sent {
                return Err(ActionError::cancelled("the agent stopped; the nested call was not made"));
            }
            let Admitted { action, ctx: nested } = admitted
                .await
                .map_err(|_| ActionError::cancelled("the agent stopped before the nested call was admitted"))??;
            nested::entering(&caller, action.spec());
            let (outcome, error) = runner.execute_detailed(&action, params, nested.clone()).await;
            nested::fold(&caller, &nested, outcome, error)
        })
    }
}

impl RunServices for AgentServices {
    fn call(&self, ctx: &ActionContext, action: ActionId, params: Value) -> ActionFuture {
        let key = nested::next_key(ctx);
        self.call_with(ctx, action, params, key)
    }

    fn submit_job(&self, ctx: &ActionContext, action: ActionId, params: Value) -> Result<Uuid, ActionError> {
        let limit = self.shared.max_call_depth;
        if ctx.depth() >= limit {
            return Err(ActionError::critical(format!(
                "the call depth limit of {limit} was reached submitting `{action}` as a job from {}; a job runs one \
                 level below the run that submits it, so an action that submits itself stops here",
                nested::call_path(ctx)
            )));
        }
        // Keyed like a call of the submitting run: a run started again after a crash submits the same job.
        let mut key = String::new();
        nested::next_key(ctx).write_to(&ctx.agent_id, ctx.run_id, &mut key);
        let plan = JobPlan {
            key,
            params,
            stack: ctx.stack().to_vec(),
            correlation: ctx.correlation_id,
            from_outside: ctx.scope.from_outside,
        };
        let job = NewJob { agent: ctx.agent_id.clone(), action, plan, again: None };
        self.start_job(ctx.clone(), job, &ctx.policy().limits).map_err(|full| ActionError::denied(full.to_string()))
    }

    fn job_progress(&self, job: Uuid, fraction: f64, message: Option<String>) {
        self.shared.jobs.progress(job, fraction, message);
    }

    fn job(&self, ctx: &ActionContext, job: Uuid) -> Option<JobRecord> {
        self.shared.jobs.get(job).filter(|record| record.agent == ctx.agent_id)
    }

    fn jobs(&self, ctx: &ActionContext) -> Vec<JobRecord> {
        self.shared.jobs.of_agent(&ctx.agent_id)
    }

    fn cancel_job(&self, ctx: &ActionContext, job: Uuid) -> bool {
        if self.job(ctx, job).is_none() {
            return false;
        }
        match self.shared.jobs.cancel(job, "cancelled by `jobs.cancel`") {
            Some((record, signal)) => {
                job_ended(&self.shared, &record, signal);
                true
            }
            None => false,
        }
    }

    fn wait_job(&self, ctx: &ActionContext, job: Uuid, timeout: Duration) -> BoxFuture<Option<JobRecord>> {
        let shared = self.shared.clone();
        let known = self.job(ctx, job).is_some();
        Box::pin(async move { if known { shared.jobs.wait(job, timeout).await } else { None } })
    }

    fn resource_changed(&self, ctx: &ActionContext, uri: String) {
        self.announce(ctx, crate::events::EventKind::ResourceChanged { uri });
    }

    fn output(&self, ctx: &ActionContext, text: String) {
        self.announce(ctx, crate::events::EventKind::ActionOutput { action: ctx.action_id.clone(), text });
    }

    fn note(&self, ctx: &ActionContext, topic: String, data: Value) {
        self.announce(ctx, crate::events::EventKind::ActionNote { action: ctx.action_id.clone(), topic, data });
    }
}
