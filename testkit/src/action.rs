//! One action, run directly with a context and checked against its own contract.

use crate::failure::CheckFailure;
use crate::schema;
use agentry::action::{ActionError, DynAction, ErrorClass};
use agentry::driver::ContextBuilder;
use agentry::effect::Effect;
use agentry::id::{ActionId, AgentId};
use agentry::policy::Policy;
use chrono::{DateTime, Utc};
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};
use serde_json::Value;
use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::{Arc, Mutex};

const CHECK: &str = "check_action";

/// Why a harness could not be made.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// The temporary drive could not be made.
    #[error("the temporary drive could not be made: {0}")]
    Drive(std::io::Error),
    /// The runtime the action's future runs on could not be made.
    #[error("the harness's tokio runtime could not be made: {0}")]
    Runtime(std::io::Error),
}

/// What one run of an action gave.
#[derive(Debug)]
pub struct ActionRun {
    /// The output, or the error (a panic in the action is a `Critical` error saying so).
    pub result: Result<Value, ActionError>,
    /// The effects the action asked for through its context (`ctx.effect`), in order; none unless it completed
    /// (the server drops a failed run's effects).
    pub effects: Vec<Effect>,
    /// Whether `run` was called at all (false when validation refused the params).
    pub ran: bool,
    /// Whether the action panicked (the result is then a `Critical` error with the panic's message).
    pub panicked: bool,
    /// Whether the action completed with an output its output schema refuses (the result is then the
    /// `Critical` error the server would report).
    pub broke_output_schema: bool,
    /// The nested calls the action made (`ctx.call`), in order: each action and its params.
    pub calls: Vec<(ActionId, Value)>,
}

/// How the harness answers one nested call.
type Answer = Arc<dyn Fn(Value) -> Result<Value, ActionError> + Send + Sync>;

/// Runs one action outside any runtime, as the server would: params coerced and validated first (refused params
/// never reach `run`), the action's timeout, a panic caught, the output checked against the output schema.
/// Its clock (`ctx.now()`) and seed (`ctx.seed()`) are fixed (see [`ActionHarness::clock`]). Nested calls (`ctx.call`) are captured and answered by what you give [`ActionHarness::answer`]. The action gets a temporary drive
/// (deleted with the harness), the policy you give (default: [`Policy::default`]) and the skill state you give.
///
/// ```
/// use agentry::action::{ActionSpec, DynAction};
/// use agentry_testkit::ActionHarness;
/// use serde_json::json;
///
/// let spec = ActionSpec::new("math.double", "Doubles n.").unwrap().params_schema(json!({
///     "type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]
/// }));
/// let double = DynAction::new(spec, |params, _ctx| {
///     Box::pin(async move { Ok(json!(params["n"].as_i64().unwrap_or(0) * 2)) })
/// })
/// .unwrap();
/// let harness = ActionHarness::new(&double).unwrap();
/// assert_eq!(harness.run(json!({"n": 21})).result.unwrap(), json!(42));
/// assert!(!harness.run(json!({"n": "x"})).ran, "invalid params never reach run");
/// ```
pub struct ActionHarness {
    action: DynAction,
    agent: AgentId,
    policy: Policy,
    skill_state: Value,
    drive: tempfile::TempDir,
    runtime: tokio::runtime::Runtime,
    answers: HashMap<ActionId, Answer>,
    clock: DateTime<Utc>,
    seed: u64,
}

impl ActionHarness {
    /// A harness for `action`, with a fresh temporary drive.
    pub fn new(action: &DynAction) -> Result<Self, HarnessError> {
        let runtime =
            tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(HarnessError::Runtime)?;
        Ok(Self {
            action: action.clone(),
            agent: AgentId::new("testkit-agent").unwrap_or_else(|_| unreachable!("a valid literal id")),
            policy: Policy::default(),
            skill_state: Value::Null,
            drive: tempfile::tempdir().map_err(HarnessError::Drive)?,
            runtime,
            answers: HashMap::new(),
            clock: DateTime::UNIX_EPOCH,
            seed: 0,
        })
    }

    /// Runs under this policy.
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    /// Gives the action this skill state (what `ctx.skill_state()` reads).
    pub fn skill_state(mut self, state: Value) -> Self {
        self.skill_state = state;
        self
    }

    /// Fixes the action's clock (`ctx.now()`) at `at` (default: the Unix epoch).
    pub fn clock(mut self, at: DateTime<Utc>) -> Self {
        self.clock = at;
        self
    }

    /// Fixes the action's seed (`ctx.seed()`; default 0).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Answers the action's nested calls of `action` (`ctx.call`) with `answer`, in place of running it. A call
    /// with no answer fails with a `Denied` error that says so; every call is captured in [`ActionRun::calls`].
    pub fn answer(
        mut self,
        action: &str,
        answer: impl Fn(Value) -> Result<Value, ActionError> + Send + Sync + 'static,
    ) -> Result<Self, agentry::id::IdError> {
        self.answers.insert(ActionId::new(action)?, Arc::new(answer));
        Ok(self)
    }

    /// The temporary drive the action sees as `ctx.drive()`.
    pub fn drive(&self) -> &Path {
        self.drive.path()
    }

    /// Runs the action on `params` as the server would: params that break the schema get the runner's safe
    /// coercions first (strings holding numbers, one value for an array, …) and are refused if they still break
    /// it; the run is under the action's timeout; effects asked through the context are kept only if it
    /// completed.
    pub fn run(&self, params: Value) -> ActionRun {
        let params = if self.action.is_valid(&params) { params } else { self.action.coerce(params) };
        if let Err(err) = self.action.validate(&params) {
            return ActionRun {
                result: Err(err),
                effects: Vec::new(),
                ran: false,
                panicked: false,
                broke_output_schema: false,
                calls: Vec::new(),
            };
        }
        let ctx = ContextBuilder::new(self.agent.clone(), self.action.spec().id.clone())
            .drive(self.drive.path())
            .policy(self.policy.clone())
            .skill_state(self.skill_state.clone())
            .clock(self.clock)
            .seed(self.seed);
        let calls: Arc<Mutex<Vec<(ActionId, Value)>>> = Arc::default();
        let answers = self.answers.clone();
        let made = calls.clone();
        let ctx = ctx.answering(move |_ctx, action, params| {
            made.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push((action.clone(), params.clone()));
            let result = match answers.get(&action) {
                Some(answer) => answer(params),
                None => Err(ActionError::denied(format!(
                    "the harness has no answer for a call of `{action}`; give one with ActionHarness::answer"
                ))),
            };
            Box::pin(async move { result })
        });
        let ctx = ctx.build();
        let requested = agentry::driver::requested(&ctx);
        let timeout = self.action.spec().timeout;
        // An action may panic while it builds its future (before its first await), not only while it runs.
        let joined = match std::panic::catch_unwind(AssertUnwindSafe(|| self.action.invoke(params, ctx))) {
            Ok(future) => {
                let mut task = self.runtime.spawn(future);
                self.runtime.block_on(async {
                    match tokio::time::timeout(timeout, &mut task).await {
                        Ok(joined) => joined.map_err(panic_text),
                        Err(_elapsed) => {
                            // As live, a timed-out attempt is dropped: it must not go on writing to the drive.
                            task.abort();
                            Ok(Err(ActionError::Timeout { after: timeout }))
                        }
                    }
                })
            }
            Err(panic) => Err(payload_text(panic.as_ref())),
        };
        let (result, panicked) = match joined {
            Ok(result) => (result, false),
            Err(text) => (Err(ActionError::critical(format!("the action panicked: {text}"))), true),
        };
        let mut broke_output_schema = false;
        let result = result.and_then(|output| {
            self.action.check_output(&output).inspect_err(|_| broke_output_schema = true).map(|()| output)
        });
        let effects = if result.is_ok() { requested.take() } else { Vec::new() };
        let calls = std::mem::take(&mut *calls.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        ActionRun { result, effects, ran: true, panicked, broke_output_schema, calls }
    }
}

fn panic_text(err: tokio::task::JoinError) -> String {
    match err.try_into_panic() {
        Ok(panic) => payload_text(panic.as_ref()),
        Err(err) => err.to_string(),
    }
}

fn payload_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}

/// Checks an action against its own contract with the default settings; see [`ActionCheck`].
pub fn check_action(action: &DynAction) -> Result<(), CheckFailure> {
    ActionCheck::new(action).run()
}

/// Which params an action may refuse although its schema accepts them.
type Refusal = Box<dyn Fn(&Value) -> bool>;

/// Properties of one action, run through an [`ActionHarness`]:
/// - params generated from its params schema validate (the generator's own check), and the action never panics
///   on them and never breaks its output schema;
/// - it never refuses them as invalid (a `Validation` error): its schema should say what its `run` accepts.
///   Name the refusals a schema cannot say with [`ActionCheck::refuses_when`]; for an action whose refusals
///   depend on the world (a file that is not there), turn this off with [`ActionCheck::refusals_allowed`];
/// - params the schema refuses (and the runner's coercions cannot repair) are stopped by validation with a
///   `Validation` error and never reach `run`.
pub struct ActionCheck {
    action: DynAction,
    policy: Policy,
    skill_state: Value,
    refusals_allowed: bool,
    expected_refusal: Option<Refusal>,
    cases: Option<u32>,
}

impl ActionCheck {
    /// The check for one action, with the default policy and no skill state.
    pub fn new(action: &DynAction) -> Self {
        Self {
            action: action.clone(),
            policy: Policy::default(),
            skill_state: Value::Null,
            refusals_allowed: false,
            expected_refusal: None,
            cases: None,
        }
    }

    /// Runs the action under this policy.
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    /// Gives the action this skill state.
    pub fn skill_state(mut self, state: Value) -> Self {
        self.skill_state = state;
        self
    }

    /// Lets the action refuse valid params with a `Validation` error (it still must not panic).
    pub fn refusals_allowed(mut self) -> Self {
        self.refusals_allowed = true;
        self
    }

    /// Names the params the action may refuse with a `Validation` error although its schema accepts them,
    /// for a refusal a schema cannot say (an arithmetic overflow): any other refusal is still a finding.
    pub fn refuses_when(mut self, expected: impl Fn(&Value) -> bool + 'static) -> Self {
        self.expected_refusal = Some(Box::new(expected));
        self
    }

    /// How many params to try each way (default: proptest's, honouring `PROPTEST_CASES`).
    pub fn cases(mut self, cases: u32) -> Self {
        self.cases = Some(cases);
        self
    }

    /// Runs params the schema accepts (`what`, for the message): `Err` says why the run breaks the contract (a
    /// panic, an output the output schema refuses, or a `Validation` refusal not named as expected).
    fn judge_accepted(&self, harness: &ActionHarness, params: Value, what: &str) -> Result<(), String> {
        let expected = self.refusals_allowed || self.expected_refusal.as_ref().is_some_and(|when| when(&params));
        let run = harness.run(params);
        match run.result {
            Err(err) if run.panicked || run.broke_output_schema => Err(err.to_string()),
            Err(err) if err.class() == ErrorClass::Validation && !expected => {
                Err(format!("the schema accepts {what} but the action refuses them: {err}"))
            }
            _ => Ok(()),
        }
    }

    /// Runs the check.
    pub fn run(&self) -> Result<(), CheckFailure> {
        let setup = |reason: String| CheckFailure::Setup { check: CHECK, reason };
        let id = self.action.spec().id.clone();
        let harness = ActionHarness::new(&self.action)
            .map_err(|err| setup(err.to_string()))?
            .policy(self.policy.clone())
            .skill_state(self.skill_state.clone());
        let valid =
            schema::params(&self.action).map_err(|err| setup(format!("no params can be drawn for `{id}`: {err}")))?;
        let config = Config {
            cases: self.cases.unwrap_or(Config::default().cases),
            failure_persistence: None,
            ..Config::default()
        };
        let counterexample = |reason: String, params: Value| CheckFailure::Counterexample {
            check: CHECK,
            steps: vec![format!("run `{id}` with params {params}")],
            reason,
        };
        // "No params", as models and clients send it for an action that needs none: `{}` and `null` (coerced to
        // `{}` live). Where the schema takes them, the action must too, drawn or not.
        for params in [Value::Object(serde_json::Map::new()), Value::Null] {
            if !self.action.is_valid(&self.action.coerce(params.clone())) {
                continue;
            }
            if let Err(reason) = self.judge_accepted(&harness, params.clone(), "these params (no params)") {
                return Err(counterexample(reason, params));
            }
        }
        let result = TestRunner::new(config.clone()).run(&valid, |params| {
            if let Err(err) = self.action.validate(&params) {
                return Err(TestCaseError::fail(format!("params generated from the schema do not validate: {err}")));
            }
            self.judge_accepted(&harness, params, "these params").map_err(TestCaseError::fail)
        });
        match result {
            Ok(()) => {}
            Err(TestError::Fail(reason, params)) => return Err(counterexample(reason.message().to_owned(), params)),
            Err(TestError::Abort(reason)) => return Err(setup(reason.message().to_owned())),
        }
        let Ok(invalid) = schema::invalid_params(&self.action) else { return Ok(()) };
        let result = TestRunner::new(config).run(&invalid, |params| {
            // Params the runner's coercions repair run live too (`{"n": "5"}` for an integer `n`).
            if self.action.is_valid(&self.action.coerce(params.clone())) {
                return Ok(());
            }
            let run = harness.run(params);
            if run.ran {
                return Err(TestCaseError::fail("params the schema refuses reached the action's run".to_owned()));
            }
            match run.result {
                Err(err) if err.class() == ErrorClass::Validation => Ok(()),
                other => {
                    Err(TestCaseError::fail(format!("refused params gave {other:?}, expected a Validation error")))
                }
            }
        });
        match result {
            Ok(()) => Ok(()),
            Err(TestError::Fail(reason, params)) => Err(counterexample(reason.message().to_owned(), params)),
            Err(TestError::Abort(reason)) => Err(setup(reason.message().to_owned())),
        }
    }
}
