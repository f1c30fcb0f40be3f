//! Properties of a user's agent: random sequences of signals of the kinds it routes, each fed through
//! agentry's pure `step`, with its determinism, panic-freedom, serde round trip, the user's invariant and the
//! delegation of ignored signals to mounted skills checked after every step.

use crate::failure::CheckFailure;
use crate::{schema, signals};
use agentry::Signal;
use agentry::agent::{Agent, AgentState, Reaction, Step, start, step};
use agentry::effect::Effect;
use agentry::id::AgentId;
use agentry::policy::Policy;
use agentry::skill::{Catalog, SkillContext, SkillReaction};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};
use serde_json::Value;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

const CHECK: &str = "check_agent";

type Invariant<A> = Arc<dyn Fn(&AgentState<A>) -> Result<(), String> + Send + Sync>;

/// Runs the agent properties with the default settings: signals of the kinds `A::routes()` lists (and
/// `tick`), with arbitrary JSON data, in sequences of up to 12, from `initial` with its start skills mounted.
/// See [`AgentCheck`].
///
/// ```
/// use agentry::prelude::*;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Debug, Clone, Default, Serialize, Deserialize, Agent)]
/// #[agent(routes("count" => count))]
/// struct Counter {
///     n: u64,
/// }
///
/// impl Counter {
///     fn count(&self, _signal: &Signal) -> Reaction<Self> {
///         Reaction::Update(Counter { n: self.n.saturating_add(1) }, vec![])
///     }
/// }
///
/// agentry_testkit::check_agent(Counter::default()).unwrap();
/// ```
pub fn check_agent<A: Agent>(initial: A) -> Result<(), CheckFailure> {
    AgentCheck::new(initial).run()
}

/// The agent properties, with their settings. After every step of a random sequence of signals:
/// - `step` did not panic, and did not fail;
/// - `step` is deterministic: the same state and signal give the same effects and the same state;
/// - the state survives a serde round trip (serialize, deserialize, serialize: the same JSON);
/// - the invariant you supplied holds;
/// - delegation holds: a signal the agent ignores leaves its domain state alone and gives exactly the effects
///   of the mounted skills' handlers, in skill id order; a signal the agent handles leaves every skill's state
///   alone.
pub struct AgentCheck<A: Agent> {
    initial: A,
    policy: Policy,
    kinds: Vec<String>,
    data: Option<BoxedStrategy<Value>>,
    invariant: Option<Invariant<A>>,
    cases: Option<u32>,
    max_steps: usize,
}

impl<A: Agent> AgentCheck<A> {
    /// The check of an agent starting from `initial` (its start skills are mounted, as the runtime would).
    pub fn new(initial: A) -> Self {
        let mut kinds: Vec<String> = A::routes().iter().map(|k| (*k).to_owned()).collect();
        kinds.push("tick".to_owned());
        Self { initial, policy: Policy::default(), kinds, data: None, invariant: None, cases: None, max_steps: 12 }
    }

    /// The policy the start skills are mounted under (default: [`Policy::default`]).
    pub fn policy(mut self, policy: &Policy) -> Self {
        self.policy = policy.clone();
        self
    }

    /// The kinds of the signals to send, as patterns (default: the agent's routes and `tick`).
    pub fn signal_kinds<I: IntoIterator<Item = S>, S: Into<String>>(mut self, kinds: I) -> Self {
        self.kinds = kinds.into_iter().map(Into::into).collect();
        self
    }

    /// The signals' data (default: arbitrary small JSON). Use [`crate::schema::values`] for data of a shape.
    pub fn data(mut self, data: BoxedStrategy<Value>) -> Self {
        self.data = Some(data);
        self
    }

    /// A property of the agent's state that must hold after every step: `Err` says what is wrong.
    pub fn invariant(
        mut self,
        invariant: impl Fn(&AgentState<A>) -> Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        self.invariant = Some(Arc::new(invariant));
        self
    }

    /// How many random sequences to run (default: proptest's, 256 unless `PROPTEST_CASES` says otherwise).
    pub fn cases(mut self, cases: u32) -> Self {
        self.cases = Some(cases);
        self
    }

    /// The longest sequence of signals in one case (default 12).
    pub fn max_steps(mut self, max_steps: usize) -> Self {
        self.max_steps = max_steps.max(1);
        self
    }

    /// Runs the check.
    pub fn run(&self) -> Result<(), CheckFailure> {
        let setup = |reason: String| CheckFailure::Setup { check: CHECK, reason };
        let id = AgentId::new(A::name()).map_err(|err| setup(format!("the agent's name is not an id: {err}")))?;
        let (start_state, _) = start(id, self.initial.clone(), &self.policy)
            .map_err(|err| setup(format!("the agent does not start: {err}")))?;
        let mut catalog = Catalog::new();
        for (skill, _) in A::start_skills().map_err(|err| setup(err.to_string()))? {
            catalog.insert(skill);
        }
        let data = match &self.data {
            Some(data) => data.clone(),
            None => schema::values(&Value::Bool(true)).map_err(|err| setup(err.to_string()))?,
        };
        let kinds: Vec<&str> = self.kinds.iter().map(String::as_str).collect();
        let signals = signals::signals(&kinds, data).map_err(setup)?;
        let sequences = prop::collection::vec(signals, 1..=self.max_steps);
        let config = Config {
            cases: self.cases.unwrap_or(Config::default().cases),
            failure_persistence: None,
            ..Config::default()
        };
        let result = TestRunner::new(config).run(&sequences, |signals| {
            let mut state = start_state.clone();
            for (i, signal) in signals.iter().enumerate() {
                self.step_checked(&mut state, signal, &catalog).map_err(|what| {
                    TestCaseError::fail(format!(
                        "step {} (signal `{}` with data {}): {what}",
                        i + 1,
                        signal.kind(),
                        signal.data()
                    ))
                })?;
            }
            Ok(())
        });
        match result {
            Ok(()) => Ok(()),
            Err(TestError::Fail(reason, signals)) => Err(CheckFailure::Counterexample {
                check: CHECK,
                steps: signals.iter().map(|s| format!("signal `{}` with data {}", s.kind(), s.data())).collect(),
                reason: reason.message().to_owned(),
            }),
            Err(TestError::Abort(reason)) => Err(setup(reason.message().to_owned())),
        }
    }

    fn step_checked(&self, state: &mut AgentState<A>, signal: &Signal, catalog: &Catalog) -> Result<(), String> {
        let before = state.clone();
        let first = guarded(state, signal, catalog)?;
        let mut again = before.clone();
        let second = guarded(&mut again, signal, catalog)?;
        if first != second || json(state)? != json(&again)? {
            let differs = first.effects.iter().zip(&second.effects).find(|(a, b)| a != b);
            let hint = match differs {
                Some((a, b)) => format!("; the effects first differ at {:?} against {:?}", a.kind, b.kind),
                None => String::new(),
            };
            return Err(format!(
                "step is not deterministic: the same state and signal gave different results{hint} (build \
                 follow-up signals with `signal.follow(..)`, which derives their id and time from the cause, not \
                 with `Signal::new`)"
            ));
        }
        // Compared as JSON values, so a map whose key order depends on a hash seed (a `HashMap`) compares by
        // content, and floats are compared exactly (no text in between).
        let value = json(state)?;
        let back: AgentState<A> = serde_json::from_value(value.clone())
            .map_err(|err| format!("the state serializes to {value} but does not deserialize from it: {err}"))?;
        let again = json(&back)?;
        if again != value {
            return Err(format!("the state does not survive a serde round trip: {value} came back as {again}"));
        }
        if let Some(invariant) = &self.invariant {
            invariant(state).map_err(|err| format!("the invariant does not hold: {err}"))?;
        }
        delegation(&before, state, signal, catalog, &first)
    }
}

/// One step, with a panic or an error reported as what went wrong.
fn guarded<A: Agent>(state: &mut AgentState<A>, signal: &Signal, catalog: &Catalog) -> Result<Step, String> {
    match catch_unwind(AssertUnwindSafe(|| step(state, signal, catalog))) {
        Ok(Ok(step)) => Ok(step),
        Ok(Err(err)) => Err(format!("step failed: {err}")),
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".to_owned());
            Err(format!("step panicked: {message}"))
        }
    }
}

fn json<T: serde::Serialize>(value: &T) -> Result<Value, String> {
    serde_json::to_value(value).map_err(|err| format!("the state does not serialize: {err}"))
}

/// A signal the agent ignores goes to the mounted skills, in id order; one it handles goes nowhere else.
fn delegation<A: Agent>(
    before: &AgentState<A>,
    after: &AgentState<A>,
    signal: &Signal,
    catalog: &Catalog,
    step: &Step,
) -> Result<(), String> {
    let ignored = matches!(before.domain.handle_signal(signal), Reaction::Ignore);
    if !ignored {
        if before.skills() != after.skills() {
            return Err("the agent handled the signal, yet a skill's state changed".to_owned());
        }
        return Ok(());
    }
    if json(&before.domain)? != json(&after.domain)? {
        return Err("the agent ignored the signal, yet its domain state changed".to_owned());
    }
    let mut expected: Vec<Effect> = Vec::new();
    for (id, mounted) in before.skills() {
        let Some(skill) = catalog.get(id) else {
            return Err(format!("skill `{id}` is mounted but not in the catalog"));
        };
        let ctx = SkillContext { agent_id: &before.id, skill_id: id };
        match skill.handle_signal(&mounted.state, signal, &ctx) {
            Ok(SkillReaction::Handled(_, effects)) => expected.extend(effects),
            Ok(SkillReaction::Ignore) => {}
            Err(err) => return Err(format!("skill `{id}`'s handler failed: {err}")),
        }
    }
    let kinds = |effects: &[Effect]| effects.iter().map(|e| format!("{:?}", e.kind)).collect::<Vec<_>>();
    if kinds(&expected) != kinds(&step.effects) {
        return Err(format!(
            "the agent ignored the signal; its skills' handlers give {:?}, but the step gave {:?}",
            kinds(&expected),
            kinds(&step.effects)
        ));
    }
    Ok(())
}
