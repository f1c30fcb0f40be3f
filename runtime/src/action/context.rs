//! What an action knows about the run it is part of, and what it may ask of the runtime while it runs: call
//! other actions (routines), request effects, report artifacts and progress, find its drive.

use crate::effect::{Effect, EffectKind};
use crate::id::{ActionId, AgentId, SkillId};
use crate::policy::Policy;
use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use uuid::Uuid;

use super::{ActionError, Caller, CallerCan, CallerRequest, Elicited, JobRecord, LogLevel, Sampled, Sampling};
use std::time::Duration;
use tokio::sync::oneshot;

/// One call on a run's stack: which action, which run, and the state the action keeps in it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Frame {
    /// The action this frame runs.
    pub action: ActionId,
    /// The run this frame belongs to.
    pub run_id: Uuid,
    /// The frame's own state: whatever the action chooses to record in it (progress of a routine, say). Its
    /// callees see it in their stack; it goes away with the frame.
    pub state: Value,
}

/// What a run collects besides its output: effects for the agent's server and artifacts for the outcome.
#[derive(Debug, Default)]
pub(crate) struct RunSink {
    pub effects: Vec<Effect>,
    pub artifacts: Vec<PathBuf>,
    /// What the run cost so far, in the action's own unit, across every attempt and nested call.
    pub cost: Option<f64>,
    /// Whether a nested call started an action with side effects that is not idempotent: such a run is never
    /// retried, so the side effect is not repeated.
    pub side_effects: bool,
    /// How many nested calls the run has made (each call's idempotency key counts on from its caller's).
    pub calls: u32,
    /// How many ids the run made ([`ActionContext::new_id`]).
    pub ids: u64,
    /// The progress last announced on the event stream, in thousandths, and its message.
    pub announced: Option<(u16, Option<String>)>,
}

/// The topic of the note a run's progress is announced as on the event stream
/// ([`ActionContext::progress`]).
pub const PROGRESS: &str = "progress";

/// Where a run's idempotency key comes from. Never from a fresh random id when it can come from stable data,
/// so the key survives a restart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RunKey {
    /// The `index`th run the agent asked for while handling its input number `seq`, in its incarnation
    /// `incarnation` (see [`input_key_prefix`]).
    Input { incarnation: u64, seq: u64, index: u32 },
    /// The `index`th nested call of the run with key `caller`.
    Within { caller: Arc<str>, index: u32 },
    /// A key given again: a run re-run after a restart keeps the key it had.
    Given(Arc<str>),
    /// A run asked for from outside the agent: its own id (it is never re-run after a restart).
    Run,
}

/// The start of the keys of the runs an agent asks for in one incarnation, before `/<input>/<n>`:
/// `<agent>~<incarnation>`, the agent id escaped (`%`, `/` and `~` as `%25`, `%2F`, `%7E`) so that no two
/// agents' keys can be the same text whatever their ids hold (`x/5` and `x` never meet). An incarnation is a
/// fresh start of the agent (a spawn, a supervised restart), so a new incarnation never reuses a key, while a
/// recovery, which goes on with the same incarnation, makes the same keys again. Incarnation 0 is a journal
/// written before incarnations existed: its keys keep their old form, `<agent>` as it is.
pub(crate) fn input_key_prefix(agent: &AgentId, incarnation: u64) -> String {
    let mut out = String::with_capacity(agent.as_str().len() + 24);
    write_input_key_prefix(agent, incarnation, &mut out);
    out
}

fn write_input_key_prefix(agent: &AgentId, incarnation: u64, out: &mut String) {
    let id = agent.as_str();
    if incarnation == 0 {
        out.push_str(id);
        return;
    }
    if id.contains(['%', '/', '~']) {
        for c in id.chars() {
            match c {
                '%' => out.push_str("%25"),
                '/' => out.push_str("%2F"),
                '~' => out.push_str("%7E"),
                c => out.push(c),
            }
        }
    } else {
        out.push_str(id);
    }
    out.push('~');
    out.push_str(itoa::Buffer::new().format(incarnation));
}

/// A new incarnation number: the time now in milliseconds since 1970, and always more than the last one this
/// process handed out (two starts in one millisecond still differ).
pub(crate) fn new_incarnation() -> u64 {
    static LAST: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let now = u64::try_from(crate::wall_clock::now().timestamp_millis()).unwrap_or(1).max(1);
    let mut last = LAST.load(std::sync::atomic::Ordering::Relaxed);
    loop {
        let next = now.max(last + 1);
        match LAST.compare_exchange_weak(
            last,
            next,
            std::sync::atomic::Ordering::Relaxed,
            std::sync::atomic::Ordering::Relaxed,
        ) {
            Ok(_) => return next,
            Err(seen) => last = seen,
        }
    }
}

impl RunKey {
    /// Appends the key's text (see [`ActionContext::idempotency_key`]) for a run `run` of `agent` to `out`.
    /// Written piece by piece rather than through `format!`: every run with a durable journal has its key made.
    pub(crate) fn write_to(&self, agent: &AgentId, run: Uuid, out: &mut String) {
        let mut number = itoa::Buffer::new();
        match self {
            RunKey::Input { incarnation, seq, index } => {
                out.reserve(agent.as_str().len() + 48);
                write_input_key_prefix(agent, *incarnation, out);
                out.push('/');
                out.push_str(number.format(*seq));
                out.push('/');
                out.push_str(number.format(*index));
            }
            RunKey::Within { caller, index } => {
                out.push_str(caller);
                out.push('/');
                out.push_str(number.format(*index));
            }
            RunKey::Given(key) => out.push_str(key),
            RunKey::Run => {
                out.push_str(agent.as_str());
                out.push_str("/run/");
                out.push_str(run.hyphenated().encode_lower(&mut Uuid::encode_buffer()));
            }
        }
    }
}

impl RunSink {
    /// Adds to the run's cost.
    pub(crate) fn add_cost(&mut self, amount: f64) {
        self.cost = Some(self.cost.unwrap_or(0.0) + amount);
    }
}

impl RunSink {
    /// Locks a run's sink, shared by its context's copies and its server.
    pub(crate) fn lock(sink: &Mutex<RunSink>) -> MutexGuard<'_, RunSink> {
        // Each push is one call on a plain Vec: a panic elsewhere cannot leave it half-written.
        sink.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// What [`ActionContext::sub_drive`] does when the sub-drive exists already.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum IfDriveExists {
    /// Refuse with a `Validation` error.
    #[default]
    Fail,
    /// Use it as it is.
    Reuse,
    /// Make a fresh one beside it: `name (1)`, `name (2)`, …
    Rename,
}

/// The longest sub-drive name.
const MAX_SUB_DRIVE_NAME: usize = 100;

/// The runtime services a run reaches through its context. Absent for a context made with
/// [`ActionContext::new`] (an action invoked directly, as in a unit test).
#[derive(Clone)]
pub(crate) struct Link {
    pub services: Arc<dyn RunServices>,
    /// The job this run belongs to, if it was submitted as one.
    pub job: Option<Uuid>,
}

/// What the actor layer does for a running action. Implemented by the runtime; kept behind a trait so the
/// pure `action` module does not import the actor modules.
pub(crate) trait RunServices: Send + Sync {
    /// Runs `action` with `params` as a nested call of the run `ctx` describes, through the agent's gate.
    fn call(&self, ctx: &ActionContext, action: ActionId, params: Value) -> crate::action::ActionFuture;
    /// Starts `action` as a job of the agent; returns the job id at once.
    fn submit_job(&self, ctx: &ActionContext, action: ActionId, params: Value) -> Result<Uuid, ActionError>;
    /// Records a job's progress.
    fn job_progress(&self, job: Uuid, fraction: f64, message: Option<String>);
    /// One job of this agent.
    fn job(&self, ctx: &ActionContext, job: Uuid) -> Option<JobRecord>;
    /// Every job of this agent, oldest first.
    fn jobs(&self, ctx: &ActionContext) -> Vec<JobRecord>;
    /// Cancels a job of this agent; `false` when it had already ended or is unknown.
    fn cancel_job(&self, ctx: &ActionContext, job: Uuid) -> bool;
    /// Waits until a job of this agent ends, at most `timeout`; `None` when it is unknown.
    fn wait_job(&self, ctx: &ActionContext, job: Uuid, timeout: Duration) -> BoxFuture<Option<JobRecord>>;
    /// Announces that the run changed a resource (an event for MCP servers' subscribers).
    fn resource_changed(&self, ctx: &ActionContext, uri: String);
    /// Announces a piece of the run's output, as it is made.
    fn output(&self, ctx: &ActionContext, text: String);
    /// Announces a note of the run about its work.
    fn note(&self, ctx: &ActionContext, topic: String, data: Value);
}

type Answer = dyn Fn(&ActionContext, ActionId, Value) -> crate::action::ActionFuture + Send + Sync;

/// Services for a directly invoked action that only answer its nested calls ([`ActionContext::with_calls`]).
struct CallsOnly(Box<Answer>);

impl RunServices for CallsOnly {
    fn call(&self, ctx: &ActionContext, action: ActionId, params: Value) -> crate::action::ActionFuture {
        (self.0)(ctx, action, params)
    }

    fn submit_job(&self, ctx: &ActionContext, _action: ActionId, _params: Value) -> Result<Uuid, ActionError> {
        Err(ctx.detached("submit jobs"))
    }

    fn job_progress(&self, _job: Uuid, _fraction: f64, _message: Option<String>) {}

    fn job(&self, _ctx: &ActionContext, _job: Uuid) -> Option<JobRecord> {
        None
    }

    fn jobs(&self, _ctx: &ActionContext) -> Vec<JobRecord> {
        Vec::new()
    }

    fn cancel_job(&self, _ctx: &ActionContext, _job: Uuid) -> bool {
        false
    }

    fn wait_job(&self, _ctx: &ActionContext, _job: Uuid, _timeout: Duration) -> BoxFuture<Option<JobRecord>> {
        Box::pin(async { None })
    }

    fn resource_changed(&self, _ctx: &ActionContext, _uri: String) {}

    fn output(&self, _ctx: &ActionContext, _text: String) {}

    fn note(&self, _ctx: &ActionContext, _topic: String, _data: Value) {}
}

/// A way to answer nested calls ([`ActionContext::call`]) that many contexts share
/// ([`ContextBuilder::calls`](crate::driver::ContextBuilder::calls)): one allocation, however many runs use it.
#[derive(Clone)]
pub struct Calls(Arc<dyn RunServices>);

impl Calls {
    /// Calls answered by `answer` (as [`ContextBuilder::answering`](crate::driver::ContextBuilder::answering)
    /// does); jobs stay unavailable.
    pub fn answering(
        answer: impl Fn(&ActionContext, ActionId, Value) -> crate::action::ActionFuture + Send + Sync + 'static,
    ) -> Self {
        Self(Arc::new(CallsOnly(Box::new(answer))))
    }
}

/// A boxed future, as [`RunServices`] returns.
pub(crate) type BoxFuture<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send>>;

/// The run an action executes in: who runs it, which attempt this is, the signal chain that caused it, the
/// call stack, and a way back to the runtime.
///
/// Cheap to clone and to move: who the run is sits in the context itself, and everything else (skill, drive,
/// policy, stack, services) in a scope its copies share.
#[derive(Clone)]
pub struct ActionContext {
    /// The agent the action runs for.
    pub agent_id: AgentId,
    /// The action being run.
    pub action_id: ActionId,
    /// This run's id: the same across retries of one run.
    pub run_id: Uuid,
    /// Which attempt this is, from 1.
    pub attempt: u32,
    /// The correlation id of the signal chain that caused the run.
    pub correlation_id: Uuid,
    /// The signal whose effects asked for the run, if any.
    pub causation_id: Option<Uuid>,
    /// Shared by every copy of the context (each attempt gets one, the runner keeps one): a run's context is
    /// handed on many times, and each hand-over then moves who the run is and a pointer.
    pub(crate) scope: Arc<RunScope>,
    /// This copy's call stack, once its action changed its own frame ([`ActionContext::frame_mut`]); until
    /// then, the one the run began with, in its scope.
    pub(crate) frames: Option<Arc<[Frame]>>,
}

/// What the copies of a run's context share (see [`ActionContext::scope`]). A builder method that changes it
/// on a context whose scope is shared gives that context a copy of its own, with a sink of its own.
pub(crate) struct RunScope {
    pub skill: Option<SkillId>,
    pub drive: Option<Arc<Path>>,
    pub skill_state: Value,
    pub policy: Arc<Policy>,
    /// The call stack the run began with.
    pub stack: Stack,
    /// The effects, artifacts and cost the run reported, through whichever copy of its context.
    pub sink: Mutex<RunSink>,
    pub link: Option<Link>,
    pub key: RunKey,
    pub clock: Clock,
    pub seed: Option<u64>,
    /// Whoever asked for the run from outside the agent, when it can be reached (an MCP client).
    pub caller: Option<super::Caller>,
    /// Whether the run was asked for from outside the agent, or by a run (or job) that was: the calls and jobs
    /// it makes meet the policy's `deny_outside` too.
    pub from_outside: bool,
}

impl Clone for RunScope {
    /// A copy with everything but the sink, which starts empty: the copy is another context's.
    fn clone(&self) -> Self {
        Self {
            skill: self.skill.clone(),
            drive: self.drive.clone(),
            skill_state: self.skill_state.clone(),
            policy: self.policy.clone(),
            stack: self.stack.clone(),
            sink: Mutex::default(),
            link: self.link.clone(),
            key: self.key.clone(),
            clock: self.clock,
            seed: self.seed,
            caller: self.caller.clone(),
            from_outside: self.from_outside,
        }
    }
}

/// A run's call stack, outermost run first and never empty: the last frame is the run's own. A run the agent
/// asked for (the usual case) has only its own frame, kept inline.
#[derive(Clone)]
pub(crate) enum Stack {
    Own([Frame; 1]),
    Nested(Box<[Frame]>),
}

impl Stack {
    /// The stack of run `run` of `action`, called by the runs whose frames are `callers` (none for a run the
    /// agent asked for).
    pub(crate) fn of(callers: &[Frame], action: ActionId, run: Uuid) -> Self {
        let own = Frame { action, run_id: run, state: Value::Null };
        match callers {
            [] => Self::Own([own]),
            callers => Self::Nested(callers.iter().cloned().chain(std::iter::once(own)).collect()),
        }
    }

    /// The stack made of `frames` as they were kept (`None` for no frame: a stack is never empty).
    pub(crate) fn from_frames(frames: &[Frame]) -> Option<Self> {
        match frames {
            [] => None,
            [own] => Some(Self::Own([own.clone()])),
            frames => Some(Self::Nested(frames.into())),
        }
    }

    fn frames(&self) -> &[Frame] {
        match self {
            Self::Own(own) => own,
            Self::Nested(frames) => frames,
        }
    }
}

/// Where a run's [`ActionContext::now`] comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Clock {
    /// The wall clock (a live runtime).
    Wall,
    /// Time stands still at this instant (a simulation's virtual time, a test harness).
    Fixed(DateTime<Utc>),
}

impl fmt::Debug for ActionContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ActionContext")
            .field("agent_id", &self.agent_id)
            .field("action_id", &self.action_id)
            .field("run_id", &self.run_id)
            .field("attempt", &self.attempt)
            .field("depth", &self.depth())
            .field("drive", &self.scope.drive)
            .finish_non_exhaustive()
    }
}

/// The effects a run asked for through its context; see [`requested`](crate::driver::requested).
pub struct Requested(Arc<RunScope>);

impl Requested {
    /// Takes the effects asked for so far.
    pub fn take(&self) -> Vec<crate::effect::Effect> {
        std::mem::take(&mut RunSink::lock(&self.0.sink).effects)
    }
}

impl ActionContext {
    /// A context for invoking an action directly, outside any runtime (unit tests, scripts): a fresh run,
    /// the default policy, no drive, and no way to call other actions.
    pub fn new(agent_id: AgentId, action_id: ActionId) -> Self {
        let run_id = Uuid::now_v7();
        let scope = RunScope {
            skill: None,
            drive: None,
            skill_state: Value::Null,
            policy: Arc::new(Policy::default()),
            stack: Stack::of(&[], action_id.clone(), run_id),
            sink: Mutex::default(),
            link: None,
            key: RunKey::Run,
            clock: Clock::Wall,
            seed: None,
            caller: None,
            from_outside: false,
        };
        Self {
            agent_id,
            action_id,
            run_id,
            attempt: 1,
            correlation_id: run_id,
            causation_id: None,
            scope: Arc::new(scope),
            frames: None,
        }
    }

    /// The run's scope, to change: from then on this context's own copy (see [`ActionContext::scope`]).
    pub(crate) fn scope_mut(&mut self) -> &mut RunScope {
        Arc::make_mut(&mut self.scope)
    }

    /// A key naming this run that stays the same if the run is started again after a crash (with the same
    /// params, by the same agent): send it to services that de-duplicate requests (the `http` skill sends it as
    /// `Idempotency-Key`). It is made of the agent's id and the number of the input whose handling asked for
    /// the run, and the call's place for a nested call: `<agent>/<input>/<n>`, `<caller's key>/<n>`. A run asked
    /// for from outside the agent (an invoke, an MCP call) is keyed by its run id.
    ///
    /// ```
    /// use agentry::action::ActionContext;
    /// use agentry::id::{ActionId, AgentId};
    /// let ctx = ActionContext::new(AgentId::new("a")?, ActionId::new("x.y")?);
    /// assert_eq!(ctx.idempotency_key(), format!("a/run/{}", ctx.run_id));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn idempotency_key(&self) -> String {
        let mut key = String::new();
        self.scope.key.write_to(&self.agent_id, self.run_id, &mut key);
        key
    }

    /// The same context with this drive folder (for direct invocation, e.g. testing a file skill).
    pub(crate) fn with_drive(mut self, drive: impl Into<PathBuf>) -> Self {
        self.scope_mut().drive = Some(Arc::from(drive.into()));
        self
    }

    /// The same context for a run that a driver other than the runtime starts (the simulator): its ids and its
    /// idempotency key are given rather than made, so they are the same on every run of a seeded simulation.
    pub(crate) fn with_run(mut self, run: Uuid, correlation: Uuid, causation: Option<Uuid>, key: &str) -> Self {
        self.run_id = run;
        self.correlation_id = correlation;
        self.causation_id = causation;
        let action = self.action_id.clone();
        let scope = self.scope_mut();
        scope.key = RunKey::Given(key.into());
        scope.stack = Stack::of(&[], action, run);
        self.frames = None;
        self
    }

    /// The same context, run from this skill.
    pub(crate) fn with_skill(mut self, skill: SkillId) -> Self {
        self.scope_mut().skill = Some(skill);
        self
    }

    /// A handle on the effects the action asks for through this context ([`ActionContext::effect`]), for a
    /// driver to interpret once the run completed.
    pub(crate) fn requested(&self) -> Requested {
        Requested(self.scope.clone())
    }

    /// The same context with this skill state (for direct invocation).
    pub(crate) fn with_skill_state(mut self, state: Value) -> Self {
        self.scope_mut().skill_state = state;
        self
    }

    /// The same context, answering the action's nested calls ([`ActionContext::call`]) with `answer`, for
    /// direct invocation (a test harness that captures the calls and plays the called actions). Jobs stay
    /// unavailable, as for any context made with [`ActionContext::new`].
    pub(crate) fn with_calls(
        mut self,
        answer: impl Fn(&ActionContext, ActionId, Value) -> crate::action::ActionFuture + Send + Sync + 'static,
    ) -> Self {
        self.scope_mut().link = Some(Link { services: Arc::new(CallsOnly(Box::new(answer))), job: None });
        self
    }

    /// The same context, answering the action's nested calls with `calls` (made once, and shared by every
    /// context a driver makes: the simulator answers every run's calls this way).
    pub(crate) fn with_calls_from(mut self, calls: &Calls) -> Self {
        self.scope_mut().link = Some(Link { services: calls.0.clone(), job: None });
        self
    }

    /// The time now, for an action that needs it: the wall clock in a live runtime, the virtual time in a
    /// simulation, the fixed instant a test gave ([`ContextBuilder::clock`](crate::driver::ContextBuilder::clock)). Read time here rather than
    /// from the system, and the action stays deterministic wherever it is driven.
    pub fn now(&self) -> DateTime<Utc> {
        match self.scope.clock {
            Clock::Wall => Utc::now(),
            Clock::Fixed(at) => at,
        }
    }

    /// A seed for the action's randomness: the one a test gave ([`ContextBuilder::seed`](crate::driver::ContextBuilder::seed)), else one
    /// derived from the run id, so it is the same across a run's retries and, in a seeded simulation (whose
    /// run ids come from its generator), the same on every replay.
    pub fn seed(&self) -> u64 {
        self.scope.seed.unwrap_or_else(|| {
            let (high, low) = self.run_id.as_u64_pair();
            high ^ low.rotate_left(32)
        })
    }

    /// A fresh id for something the action makes (a signal it schedules, say): time-ordered (UUID v7) at
    /// [`ActionContext::now`], its other bits drawn from [`ActionContext::seed`] and how many ids the run made
    /// before. Live, each run's ids are its own; in a simulation, whose run ids and clock are its own, the same
    /// ids come on every replay. Make ids here rather than with `Uuid::now_v7()`.
    ///
    /// ```
    /// use agentry::driver::ContextBuilder;
    /// use agentry::id::{ActionId, AgentId};
    /// let ctx = || ContextBuilder::new(AgentId::new("a").unwrap(), ActionId::new("x.y").unwrap())
    ///     .seed(7)
    ///     .clock(chrono::DateTime::UNIX_EPOCH)
    ///     .build();
    /// let (one, two) = (ctx(), ctx());
    /// assert_eq!(one.new_id(), two.new_id(), "the same seed, clock and place: the same id");
    /// assert_ne!(one.new_id(), one.new_id(), "each id of a run is its own");
    /// ```
    pub fn new_id(&self) -> Uuid {
        let made = {
            let mut sink = self.sink();
            sink.ids += 1;
            sink.ids
        };
        // SplitMix64 over the seed and the id's place: 80 bits for the id's random part.
        let mix = |mut z: u64| {
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        let base = self.seed().wrapping_add(made.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let (high, low) = (mix(base), mix(base ^ 0x5DEE_CE66_D1CE_4E5B));
        let mut random = [0u8; 10];
        random[..8].copy_from_slice(&high.to_le_bytes());
        random[8..].copy_from_slice(&low.to_le_bytes()[..2]);
        let millis = u64::try_from(self.now().timestamp_millis()).unwrap_or_default();
        uuid::Builder::from_unix_timestamp_millis(millis, &random).into_uuid()
    }

    /// The same context with time standing still at `at` (for a deterministic driver or a test).
    pub(crate) fn with_clock(mut self, at: DateTime<Utc>) -> Self {
        self.scope_mut().clock = Clock::Fixed(at);
        self
    }

    /// The same context with this seed (for a test).
    pub(crate) fn with_seed(mut self, seed: u64) -> Self {
        self.scope_mut().seed = Some(seed);
        self
    }

    /// The same context under this policy (for direct invocation).
    pub(crate) fn with_policy(mut self, policy: impl Into<Arc<Policy>>) -> Self {
        self.scope_mut().policy = policy.into();
        self
    }

    /// The skill the action came from, when the runtime knows it.
    pub fn skill(&self) -> Option<&SkillId> {
        self.scope.skill.as_ref()
    }

    /// The agent's policy as it was when the run started.
    pub fn policy(&self) -> &Policy {
        &self.scope.policy
    }

    /// This skill's folder inside the agent's drive, or a `Denied` error when the runtime has no data folder.
    /// The folder may not exist yet.
    pub fn drive(&self) -> Result<&Path, ActionError> {
        self.scope.drive.as_deref().ok_or_else(|| {
            ActionError::denied(format!(
                "action `{}` needs a drive, but the runtime has no data folder; set one with \
                 `RuntimeBuilder::data_dir`",
                self.action_id
            ))
        })
    }

    /// A named sub-drive of this skill's drive: a folder `name` directly inside it, created (with the drive) if
    /// needed, for work the skill keeps apart (one per task, per conversation). What happens when it exists is
    /// `if_exists`'s choice. `name` is one plain folder name (no `/`, backslash or NUL, not `.` or `..`, at most 100
    /// bytes), else a `Validation` error; without a data folder the run is `Denied`, as for [`Self::drive`].
    ///
    /// ```
    /// # use agentry::action::IfDriveExists;
    /// # use agentry::driver::ContextBuilder;
    /// # use agentry::id::{ActionId, AgentId};
    /// let home = std::env::temp_dir().join(format!("agentry-doc-{}", std::process::id()));
    /// let ctx = ContextBuilder::new(AgentId::new("a").unwrap(), ActionId::new("notes.start").unwrap()).drive(&home).build();
    /// let first = ctx.sub_drive("task", IfDriveExists::Rename).unwrap();
    /// let second = ctx.sub_drive("task", IfDriveExists::Rename).unwrap();
    /// assert_eq!((first.file_name().unwrap(), second.file_name().unwrap()), ("task".as_ref(), "task (1)".as_ref()));
    /// assert!(ctx.sub_drive("../escape", IfDriveExists::Reuse).is_err());
    /// # std::fs::remove_dir_all(&home).unwrap();
    /// ```
    pub fn sub_drive(&self, name: &str, if_exists: IfDriveExists) -> Result<PathBuf, ActionError> {
        let plain = !name.is_empty()
            && name.len() <= MAX_SUB_DRIVE_NAME
            && name != "."
            && name != ".."
            && !name.contains(['/', '\\', '\0']);
        if !plain {
            return Err(ActionError::validation(format!(
                "sub-drive name {name:?} is not one plain folder name; expected 1 to {MAX_SUB_DRIVE_NAME} bytes \
                 without `/`, `\\`, NUL, and not `.` or `..`"
            )));
        }
        let drive = self.drive()?.to_path_buf();
        let io = |e: std::io::Error| ActionError::transient(format!("the sub-drive `{name}` could not be made: {e}"));
        std::fs::create_dir_all(&drive).map_err(io)?;
        // Inside the drive through a capability handle, which never leaves it and never follows a symlink: a
        // link planted where the sub-drive would be is not reused as one.
        let dir = cap_std::fs::Dir::open_ambient_dir(&drive, cap_std::ambient_authority()).map_err(io)?;
        for n in 0..=1000u32 {
            let candidate = if n == 0 { name.to_owned() } else { format!("{name} ({n})") };
            match dir.create_dir(&candidate) {
                Ok(()) => return Ok(drive.join(candidate)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => match if_exists {
                    IfDriveExists::Fail => {
                        return Err(ActionError::validation(format!(
                            "the sub-drive `{name}` exists already; expected a new name, or `reuse` or `rename`"
                        )));
                    }
                    IfDriveExists::Reuse => {
                        let found = dir.symlink_metadata(&candidate).map_err(io)?;
                        if found.is_dir() && !found.file_type().is_symlink() {
                            return Ok(drive.join(candidate));
                        }
                        return Err(ActionError::validation(format!(
                            "`{name}` in the drive is not a folder (a symlink is never reused as a sub-drive)"
                        )));
                    }
                    IfDriveExists::Rename => {}
                },
                Err(e) => return Err(io(e)),
            }
        }
        Err(ActionError::validation(format!("no free name beside the sub-drive `{name}` after 1000 tries")))
    }

    /// The mounted skill's per-agent state, as the type the skill declared.
    pub fn skill_state<T: DeserializeOwned>(&self) -> Result<T, ActionError> {
        T::deserialize(&self.scope.skill_state).map_err(|e| {
            ActionError::critical(format!(
                "the state of the skill behind `{}` does not fit its type: {e}",
                self.action_id
            ))
        })
    }

    /// The call stack, outermost run first; the last frame is this run's own.
    pub fn stack(&self) -> &[Frame] {
        self.frames.as_deref().unwrap_or_else(|| self.scope.stack.frames())
    }

    /// How deep this run is nested: 1 for a run the agent asked for, 2 for an action it called, and so on.
    pub fn depth(&self) -> usize {
        self.stack().len()
    }

    /// This run's own frame, whose `state` the action may set.
    pub fn frame_mut(&mut self) -> &mut Frame {
        // The stack is shared with the copies of this context (other attempts, the runner): this context gets a
        // stack of its own before its frame changes.
        let frames = self.frames.get_or_insert_with(|| Arc::from(self.scope.stack.frames()));
        let frames = Arc::make_mut(frames);
        let last = frames.len() - 1;
        &mut frames[last]
    }

    /// Calls another action through the agent's gate — it must be mounted on this agent, allowed by its
    /// policy, its capabilities granted and, if risky, approved — as a nested run with its own frame, and
    /// returns its output or its error.
    pub async fn call(&self, action: impl AsRef<str>, params: Value) -> Result<Value, ActionError> {
        let action = ActionId::new(action.as_ref())
            .map_err(|e| ActionError::validation(format!("cannot call `{}`: {e}", action.as_ref())))?;
        self.services("call other actions")?.call(self, action, params).await
    }

    /// Calls a typed action (see [`ActionContext::call`]) and returns its typed output.
    pub async fn call_typed<A>(&self, params: A) -> Result<A::Output, ActionError>
    where
        A: super::Action + Serialize,
        A::Output: DeserializeOwned,
    {
        let id = A::spec().id;
        let params = serde_json::to_value(params)
            .map_err(|e| ActionError::critical(format!("the params of `{id}` do not serialize: {e}")))?;
        let output = self.call(id.as_str(), params).await?;
        serde_json::from_value(output)
            .map_err(|e| ActionError::critical(format!("the output of `{id}` does not fit its type: {e}")))
    }

    /// Starts an action as a job of this agent (see the `jobs` skill) and returns the job id at once.
    pub fn submit_job(&self, action: impl AsRef<str>, params: Value) -> Result<Uuid, ActionError> {
        let action = ActionId::new(action.as_ref())
            .map_err(|e| ActionError::validation(format!("cannot submit `{}`: {e}", action.as_ref())))?;
        self.services("submit jobs")?.submit_job(self, action, params)
    }

    /// One of this agent's jobs, or `None` when it has no job of that id.
    pub fn job(&self, job: Uuid) -> Result<Option<JobRecord>, ActionError> {
        Ok(self.services("see jobs")?.job(self, job))
    }

    /// Every job of this agent, oldest first.
    pub fn jobs(&self) -> Result<Vec<JobRecord>, ActionError> {
        Ok(self.services("see jobs")?.jobs(self))
    }

    /// Cancels one of this agent's jobs; `false` when it had already ended or is unknown.
    pub fn cancel_job(&self, job: Uuid) -> Result<bool, ActionError> {
        Ok(self.services("cancel jobs")?.cancel_job(self, job))
    }

    /// Waits until one of this agent's jobs ends, at most `timeout`, and returns it as it then is; `None`
    /// when the agent has no job of that id.
    pub async fn wait_job(&self, job: Uuid, timeout: Duration) -> Result<Option<JobRecord>, ActionError> {
        Ok(self.services("wait for jobs")?.wait_job(self, job, timeout).await)
    }

    fn services(&self, what: &str) -> Result<&Arc<dyn RunServices>, ActionError> {
        self.scope.link.as_ref().map(|l| &l.services).ok_or_else(|| self.detached(what))
    }

    /// Reports progress (a fraction from 0 to 1, and an optional message): announced to whoever watches the
    /// event stream (an [`ActionNote`](crate::events::EventKind::ActionNote) of topic [`PROGRESS`], when it
    /// moved by a hundredth since the last one, says something new, or reaches 1), to the job's record when this run is part of a job, and to the
    /// caller when this is the run the caller asked for (not a call it made) and the caller listens (an MCP
    /// client that sent a progress token). Outside a runtime it does nothing.
    pub fn progress(&self, fraction: f64, message: Option<String>) {
        if fraction.is_nan() {
            return;
        }
        let fraction = fraction.clamp(0.0, 1.0);
        // Only the run the caller asked for reports to it: a nested call's own 0..1 would make its progress go
        // backwards.
        if let Some(caller) = self.scope.caller.as_ref().filter(|_| self.depth() <= 1) {
            caller.send(CallerRequest::Progress { progress: fraction, total: Some(1.0), message: message.clone() });
        }
        // Announced when it moved by a hundredth or says something new: a run that reports at every byte
        // does not flood the event stream.
        if let Some(link) = &self.scope.link {
            let thousandths = (fraction * 1000.0).round() as u16;
            let moved = {
                let mut sink = self.sink();
                let moved = sink.announced.as_ref().is_none_or(|(last, said)| {
                    thousandths.abs_diff(*last) >= 10 || *said != message || (thousandths == 1000 && *last != 1000)
                });
                if moved {
                    sink.announced = Some((thousandths, message.clone()));
                }
                moved
            };
            if moved {
                let note = serde_json::json!({"fraction": fraction, "message": message});
                link.services.note(self, PROGRESS.to_owned(), note);
            }
        }
        if let Some(Link { services, job: Some(job) }) = &self.scope.link {
            services.job_progress(*job, fraction, message);
        }
    }

    /// Writes a line to the runtime's `tracing` log (target `agentry::agent`, tagged with the agent, run and
    /// action) and sends it to the run's caller, if one listens (an MCP client gets it as a log notification when
    /// the level is at or above the one it set).
    pub fn log(&self, level: LogLevel, message: impl Into<String>) {
        self.log_with(level, message, None);
    }

    /// [`ActionContext::log`] with structured details: logged as JSON in the `fields` field, and sent to the
    /// caller beside the message.
    pub fn log_with(&self, level: LogLevel, message: impl Into<String>, fields: Option<serde_json::Value>) {
        let message = message.into();
        let (agent, run, action) = (self.agent_id.as_str(), self.run_id, self.action_id.as_str());
        let details = fields.as_ref().map(ToString::to_string).unwrap_or_default();
        match level {
            LogLevel::Debug => {
                tracing::debug!(target: "agentry::agent", agent, %run, action, fields = details, "{message}")
            }
            LogLevel::Info | LogLevel::Notice => {
                tracing::info!(target: "agentry::agent", agent, %run, action, fields = details, "{message}")
            }
            LogLevel::Warning => {
                tracing::warn!(target: "agentry::agent", agent, %run, action, fields = details, "{message}")
            }
            _ => tracing::error!(target: "agentry::agent", agent, %run, action, fields = details, "{message}"),
        }
        if let Some(caller) = &self.scope.caller {
            caller.send(CallerRequest::Log { level, logger: self.action_id.to_string(), message, fields });
        }
    }

    /// Asks the caller's model for a completion (MCP sampling). Fails `denied` when the run has no caller that
    /// can sample (it was not asked for by an MCP client that declared sampling), and `transient` when the
    /// caller could not answer.
    pub async fn sample(&self, request: Sampling) -> Result<Sampled, ActionError> {
        let caller = self.caller_that(|can| can.sample, "sample its caller's model (sampling)")?;
        let (reply, answer) = oneshot::channel();
        if !caller.send(CallerRequest::Sample { request, reply }) {
            return Err(ActionError::cancelled("the caller went away before it was asked for a completion"));
        }
        answer
            .await
            .map_err(|_| ActionError::cancelled("the caller went away before it answered the sampling request"))?
            .map_err(|e| ActionError::transient(format!("the caller's model did not answer: {e}")))
    }

    /// Asks the caller's user for input (MCP elicitation): `message`, and a form described by `schema` (a JSON
    /// Schema object whose properties are strings, numbers, integers, booleans or enums, with defaults if
    /// wanted). Fails `denied` when the run has no caller that can ask its user, and `transient` when the caller
    /// could not answer.
    pub async fn elicit(&self, message: impl Into<String>, schema: Value) -> Result<Elicited, ActionError> {
        let caller = self.caller_that(|can| can.elicit, "ask its caller's user for input (elicitation)")?;
        let (reply, answer) = oneshot::channel();
        if !caller.send(CallerRequest::Elicit { message: message.into(), schema, reply }) {
            return Err(ActionError::cancelled("the caller went away before it was asked for input"));
        }
        answer
            .await
            .map_err(|_| ActionError::cancelled("the caller went away before it answered the elicitation"))?
            .map_err(|e| ActionError::transient(format!("the caller's user could not be asked: {e}")))
    }

    /// The run's caller, if it can do what `can` picks.
    fn caller_that(&self, can: impl Fn(CallerCan) -> bool, what: &str) -> Result<&Caller, ActionError> {
        self.scope.caller.as_ref().filter(|caller| can(caller.can())).ok_or_else(|| {
            ActionError::denied(format!(
                "action `{}` cannot {what}: the run was not asked for by a caller that can; expected a call from an \
                 MCP client that declares the capability",
                self.action_id
            ))
        })
    }

    /// The run's caller, if it was asked for by one that can be reached (see [`Caller`]).
    pub fn caller(&self) -> Option<&Caller> {
        self.scope.caller.as_ref()
    }

    /// Asks the agent's server to interpret an effect once this run completes successfully (an agent-level
    /// effect such as `Stop`, `Schedule` or `Emit`). Effects that change the action table are refused (only
    /// mounting does that), and so are signals of the runtime's own kinds (see [`crate::kinds`]).
    pub fn effect(&self, effect: Effect) -> Result<(), ActionError> {
        if matches!(effect.kind, EffectKind::RegisterAction { .. } | EffectKind::DeregisterAction { .. }) {
            return Err(ActionError::denied(format!(
                "action `{}` asked to change the action table; only mounting and unmounting skills do that",
                self.action_id
            )));
        }
        if let EffectKind::Emit { signal, .. } | EffectKind::Schedule { signal, .. } = &effect.kind
            && crate::kinds::is_reserved(signal.kind().as_str())
        {
            return Err(ActionError::denied(format!(
                "action `{}` asked for a signal of kind `{}`; kinds in the `action.`, `job.` and `agent.` namespaces \
                 are made only by the runtime",
                self.action_id,
                signal.kind()
            )));
        }
        self.sink().effects.push(effect);
        Ok(())
    }

    /// Says that this run changed a resource the agent's skills offer (by its URI, such as `drive:///notes.md`),
    /// so clients subscribed to it hear of it: the runtime announces [`crate::events::EventKind::ResourceChanged`]
    /// at once. Outside a runtime it does nothing.
    pub fn resource_changed(&self, uri: impl Into<String>) {
        if let Some(link) = &self.scope.link {
            link.services.resource_changed(self, uri.into());
        }
    }

    /// Reports something about this run's work on the event stream as it goes (`topic` says what, `data` is
    /// the note): the runtime announces an `ActionNote` event at once. Outside a runtime it
    /// does nothing.
    pub fn note(&self, topic: impl Into<String>, data: serde_json::Value) {
        if let Some(link) = &self.scope.link {
            link.services.note(self, topic.into(), data);
        }
    }

    /// Passes on a piece of this run's output as it is made (a language model's text as it streams in): the
    /// runtime announces [`crate::events::EventKind::ActionOutput`] at once, so whoever watches the event stream
    /// sees it before the run ends. The run's outcome still carries the whole output. Outside a runtime it does
    /// nothing.
    pub fn output(&self, text: impl Into<String>) {
        if let Some(link) = &self.scope.link {
            link.services.output(self, text.into());
        }
    }

    /// Reports what this run cost, in the action's own unit (tokens, cents); reports add up, across attempts
    /// and with the costs of the actions it calls. The total reaches the outcome's `cost` and the journal. A
    /// negative or non-finite amount is ignored.
    pub fn cost(&self, amount: f64) {
        if amount.is_finite() && amount >= 0.0 {
            self.sink().add_cost(amount);
        }
    }

    /// Reports a file the run produced (a path inside the drive); it appears in the outcome's `artifacts`.
    pub fn artifact(&self, path: impl Into<PathBuf>) {
        self.sink().artifacts.push(path.into());
    }

    pub(crate) fn sink(&self) -> MutexGuard<'_, RunSink> {
        RunSink::lock(&self.scope.sink)
    }

    fn detached(&self, what: &str) -> ActionError {
        ActionError::denied(format!(
            "action `{}` was invoked outside an agent's server and cannot {what}; run it through the runtime",
            self.action_id
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Input keys are unambiguous whatever an agent id holds, and never repeat across incarnations: two
    /// different (agent, incarnation, input, n) never make the same key (`x/5` and `x` included).
    #[test]
    fn input_keys_are_unique_per_agent_and_incarnation() {
        use proptest::prelude::*;
        let key = |agent: &str, incarnation: u64, seq: u64, index: u32| {
            let mut out = String::new();
            let agent = AgentId::new(agent).unwrap();
            RunKey::Input { incarnation, seq, index }.write_to(&agent, Uuid::nil(), &mut out);
            out
        };
        assert_ne!(key("x/5", 7, 1, 0), key("x", 7, 5, 1));
        assert_ne!(key("x~7", 1, 1, 0), key("x", 7, 1, 0));
        assert_ne!(key("a", 1, 1, 0), key("a", 2, 1, 0), "a restart never reuses a key");
        let agent = prop_oneof![Just("x".to_owned()), Just("x/5".to_owned()), Just("x~1".to_owned()), "[a-z/~%]{1,6}"];
        proptest!(ProptestConfig::with_cases(1000), |(a in (agent.clone(), 1..4u64, 0..4u64, 0..3u32), b in (agent, 1..4u64, 0..4u64, 0..3u32))| {
            prop_assume!(a != b);
            prop_assert_ne!(key(&a.0, a.1, a.2, a.3), key(&b.0, b.1, b.2, b.3));
        });
    }

    /// A symlink planted where a sub-drive would be (pointing out of the drive) is never reused as one.
    #[cfg(unix)]
    #[test]
    fn a_symlink_is_never_reused_as_a_sub_drive() {
        let home = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let drive = home.path().join("drive");
        std::fs::create_dir_all(&drive).unwrap();
        std::os::unix::fs::symlink(outside.path(), drive.join("task")).unwrap();
        let ctx =
            ActionContext::new(AgentId::new("a").unwrap(), ActionId::new("notes.start").unwrap()).with_drive(&drive);
        let refused = ctx.sub_drive("task", IfDriveExists::Reuse).unwrap_err();
        assert!(refused.to_string().contains("symlink"), "{refused}");
        // A real folder is reused.
        std::fs::create_dir(drive.join("real")).unwrap();
        assert_eq!(ctx.sub_drive("real", IfDriveExists::Reuse).unwrap(), drive.join("real"));
    }

    fn context() -> ActionContext {
        ActionContext::new(AgentId::new("a").expect("a valid id"), ActionId::new("x.y").expect("a valid id"))
    }

    proptest::proptest! {
        /// Model: the key as `format!` writes it, for every kind of key.
        #[test]
        fn a_key_is_written_as_its_parts_joined_by_slashes(
            agent in "[a-z][a-z0-9-]{0,20}", seq in proptest::prelude::any::<u64>(),
            index in proptest::prelude::any::<u32>(), caller in "[a-z0-9/-]{1,30}",
        ) {
            let agent = AgentId::new(&agent).expect("a valid id");
            let run = Uuid::now_v7();
            let written = |key: RunKey| {
                let mut out = String::from("kept ");
                key.write_to(&agent, run, &mut out);
                out
            };
            // Incarnation 0: a journal written before incarnations, whose keys keep their old form.
            proptest::prop_assert_eq!(written(RunKey::Input { incarnation: 0, seq, index }), format!("kept {agent}/{seq}/{index}"));
            let within = RunKey::Within { caller: caller.as_str().into(), index };
            proptest::prop_assert_eq!(written(within), format!("kept {caller}/{index}"));
            proptest::prop_assert_eq!(written(RunKey::Given(caller.as_str().into())), format!("kept {caller}"));
            proptest::prop_assert_eq!(written(RunKey::Run), format!("kept {agent}/run/{run}"));
        }
    }

    #[test]
    fn a_frame_changed_in_one_copy_of_a_context_is_unchanged_in_the_others() {
        let mut first = context();
        let mut second = first.clone();
        first.frame_mut().state = serde_json::json!("first's");
        assert_eq!(second.stack()[0].state, Value::Null, "a copy made before the change does not see it");
        let third = first.clone();
        second.frame_mut().state = serde_json::json!("second's");
        assert_eq!(first.stack()[0].state, serde_json::json!("first's"));
        assert_eq!(third.stack()[0].state, serde_json::json!("first's"), "a copy made after sees it");
        let mut handed = first.clone();
        handed.frame_mut().state = serde_json::json!("handed");
        assert_eq!(first.stack()[0].state, serde_json::json!("first's"), "what the runner keeps is its own");
        // The sink is the run's: every copy reports to it, even one whose frame changed.
        handed.artifact("made.txt");
        assert_eq!(first.sink().artifacts, vec![PathBuf::from("made.txt")]);
        // A copy changed by a builder method is another context, with a sink of its own.
        let other = first.clone().with_seed(7);
        other.artifact("other.txt");
        assert_eq!(first.sink().artifacts, vec![PathBuf::from("made.txt")]);
        assert_eq!(other.sink().artifacts, vec![PathBuf::from("other.txt")]);
        assert_eq!((handed.depth(), first.depth(), third.depth()), (1, 1, 1));
    }

    #[test]
    fn the_clock_is_the_wall_unless_fixed() {
        let before = Utc::now();
        let now = context().now();
        assert!(before <= now && now <= Utc::now());
        let at = DateTime::UNIX_EPOCH + chrono::Duration::days(1);
        let fixed = context().with_clock(at);
        assert_eq!((fixed.now(), fixed.clone().now()), (at, at));
    }

    #[test]
    fn the_seed_follows_the_run_unless_given() {
        let one = context();
        assert_eq!(one.seed(), one.clone().seed(), "the same run, the same seed");
        let other = context();
        assert_ne!(one.seed(), other.seed(), "another run, another seed");
        assert_eq!(one.with_seed(7).seed(), 7);
    }
}
