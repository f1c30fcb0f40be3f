//! Drives one agent purely, with no runtime: the same `step`, effect interpretation and gate as the server,
//! with runs, approvals and the clock in the test's hands.

use agentry::Signal;
use agentry::action::{ActionError, Outcome};
use agentry::agent::{Agent, AgentState, StartError, start, step};
use agentry::driver::{self, ActionTable, Command, Gate, Origin, RunRef, gate, interpret};
use agentry::effect::{Effect, EffectRefusal, Target};
use agentry::id::{ActionId, AgentId, SkillId};
use agentry::kinds;
use agentry::policy::Policy;
use agentry::skill::{Catalog, mount, unmount};
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::time::Duration;
use uuid::Uuid;

/// How many signals one call may feed the agent (its own follow-ups included) before the harness says the
/// agent is looping.
const SETTLE_BUDGET: usize = 10_000;

/// Why the harness could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum AgentHarnessError {
    /// The agent did not start (its start skills).
    #[error("the agent did not start: {0}")]
    Start(#[from] StartError),
    /// The agent's type name is not a valid agent id.
    #[error("the agent's name `{0}` is not a valid agent id; expected non-empty text")]
    Name(String),
    /// A signal kind was not valid.
    #[error("`{0}` is not a valid signal kind: {1}")]
    Kind(String, String),
    /// A skill id was not valid.
    #[error("`{0}` is not a valid skill id: {1}")]
    SkillId(String, String),
    /// `step` failed.
    #[error("step failed on a `{kind}` signal: {error}")]
    Step {
        /// The signal's kind.
        kind: String,
        /// The error.
        error: agentry::agent::StepError,
    },
    /// No run (or blocked run) matches what was named.
    #[error("no {what} matches `{name}`; the runs waiting are: {waiting}")]
    NoSuchRun {
        /// Runs waiting for an outcome, or runs waiting for approval.
        what: &'static str,
        /// The run id or action id asked for.
        name: String,
        /// What is waiting, for the message.
        waiting: String,
    },
    /// The agent stopped itself (`Effect::stop`); nothing more reaches it.
    #[error("the agent stopped itself ({0}); a stopped agent takes no more signals, runs or time")]
    Stopped(String),
    /// Mounting or unmounting a skill failed.
    #[error("{0}")]
    Mount(String),
    /// The agent asked to mount (`Effect::mount_skill`) a skill the harness's catalog does not have. It was
    /// refused as live, and the agent got `agent.mount_failed`; the call in which it happened says so.
    #[error(
        "the agent asked to mount skill `{skill}` while handling a `{kind}` signal, and it is not in the harness's \
         catalog; give it to `AgentHarness::with` in the catalog (live: add it with `RuntimeBuilder::skill`)"
    )]
    MissingSkill {
        /// The skill asked for.
        skill: SkillId,
        /// The kind of the signal whose handling asked for it (or `none`, for a mount at start).
        kind: String,
    },
    /// The agent kept producing signals for itself past the harness's budget.
    #[error("the agent handled {0} signals in one call without settling; expected it to stop producing signals")]
    Looping(usize),
}

/// A run the agent asked for that passed the gate (or waits for approval), until the test ends it.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingRun {
    /// The run's id.
    pub id: Uuid,
    /// The action.
    pub action: ActionId,
    /// The params the agent gave.
    pub params: Value,
    correlation: Uuid,
    causation: Option<Uuid>,
    /// When it was asked for, on the harness's clock (an approval expires from then).
    asked: Duration,
}

/// What the agent did in the last call, besides its runs: signals, replies, timers and refusals.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Said {
    /// Signals emitted, with where to.
    pub emitted: Vec<(Signal, Target)>,
    /// Replies, by the id of the signal they answer.
    pub replies: Vec<(Uuid, Value)>,
    /// Effects refused (a forbidden table change, a forged kind, a child the policy does not allow, …).
    pub refused: Vec<EffectRefusal>,
    /// Children asked for: their ids and agent types.
    pub spawned: Vec<(AgentId, String)>,
    /// Children asked to stop.
    pub stopped_children: Vec<AgentId>,
    /// Why the agent asked to stop itself, if it did.
    pub stopped: Option<String>,
}

/// Drives one agent with no runtime: [`send`](Self::send) a signal and read what it did; runs it asks for wait
/// until you [`complete`](Self::complete) or [`fail`](Self::fail) them; risky ones wait for
/// [`approve`](Self::approve) or [`deny`](Self::deny); [`advance`](Self::advance) moves a virtual clock and
/// fires schedules. Effects go through agentry's own interpreter and gate, so what the harness allows is what
/// the server allows. Outcome signals reach the agent after the effects of the step that caused them, as live.
///
/// ```
/// use agentry::prelude::*;
/// use agentry_testkit::AgentHarness;
/// use serde::{Deserialize, Serialize};
/// use serde_json::json;
///
/// #[derive(Debug, Clone, Default, Serialize, Deserialize, Agent)]
/// #[agent(routes("ping" => ping))]
/// struct Pinger {
///     pings: u32,
/// }
///
/// impl Pinger {
///     fn ping(&self, signal: &Signal) -> Reaction<Self> {
///         let pong = signal.follow("pong").build().expect("a valid kind");
///         Reaction::Update(Pinger { pings: self.pings + 1 }, vec![Effect::emit(pong, Target::Parent)])
///     }
/// }
///
/// let mut harness = AgentHarness::new(Pinger::default()).unwrap();
/// harness.send("ping", json!(null)).unwrap();
/// harness.assert_emitted("pong");
/// assert_eq!(harness.domain().pings, 1);
/// ```
pub struct AgentHarness<A: Agent> {
    state: AgentState<A>,
    catalog: Catalog,
    policy: Policy,
    table: ActionTable,
    source: std::sync::Arc<str>,
    start: DateTime<Utc>,
    now: Duration,
    next_id: u64,
    inbox: VecDeque<Signal>,
    mailbox: VecDeque<Signal>,
    stopped: Option<String>,
    runs: Vec<PendingRun>,
    blocked: Vec<PendingRun>,
    timers: BTreeMap<String, (Duration, Signal)>,
    inputs: Vec<Signal>,
    effects: Vec<Effect>,
    said: Said,
    /// A skill the agent asked to mount that the catalog lacks, reported by the call in which it happened.
    missing: Option<AgentHarnessError>,
}

impl<A: Agent> AgentHarness<A> {
    /// A harness for an agent starting from `initial`, with its start skills mounted under the default policy.
    pub fn new(initial: A) -> Result<Self, AgentHarnessError> {
        Self::with(initial, &Catalog::new(), &Policy::default())
    }

    /// A harness whose agent may also mount the skills of `catalog` (through `mount_skill` effects or
    /// [`mount`](Self::mount)), and runs under `policy` (its gate, approvals and mounts: the policy given at
    /// spawn, live). The agent's start skills are added to the catalog by themselves.
    ///
    /// A `mount_skill` effect for a skill the catalog lacks is refused as live (the agent gets
    /// `agent.mount_failed`), and the call in which it happened returns [`AgentHarnessError::MissingSkill`].
    ///
    /// ```
    /// use agentry::prelude::*;
    /// use agentry_testkit::{AgentHarness, AgentHarnessError};
    /// use serde::{Deserialize, Serialize};
    /// use serde_json::json;
    ///
    /// #[derive(Debug, Clone, Default, Serialize, Deserialize, Agent)]
    /// #[agent(routes("learn" => learn))]
    /// struct Student {}
    ///
    /// impl Student {
    ///     fn learn(&self, _: &Signal) -> Reaction<Self> {
    ///         let skill = SkillId::new("arithmetic").expect("a valid id");
    ///         Reaction::Keep(vec![Effect::mount_skill(skill, json!(null))])
    ///     }
    /// }
    ///
    /// // Without the skill in its catalog, the harness says so at the step that asked for it.
    /// let mut alone = AgentHarness::new(Student {}).unwrap();
    /// let err = alone.send("learn", json!(null)).unwrap_err();
    /// assert!(matches!(err, AgentHarnessError::MissingSkill { .. }), "{err}");
    ///
    /// let catalog: Catalog = [agentry_testkit::demo::Arithmetic::skill().unwrap()].into_iter().collect();
    /// let mut harness = AgentHarness::with(Student {}, &catalog, &Policy::default()).unwrap();
    /// harness.send("learn", json!(null)).unwrap();
    /// assert!(harness.actions().iter().any(|a| a.as_str() == "arithmetic.add"));
    /// ```
    pub fn with(initial: A, catalog: &Catalog, policy: &Policy) -> Result<Self, AgentHarnessError> {
        let id = AgentId::new(A::name()).map_err(|_| AgentHarnessError::Name(A::name().to_owned()))?;
        let source = kinds::agent_source(&id);
        let (state, effects) = start(id, initial, policy)?;
        let mut catalog = catalog.clone();
        for (skill, _) in A::start_skills().map_err(StartError::from)? {
            catalog.insert(skill);
        }
        let mut harness = Self {
            state,
            catalog,
            policy: policy.clone(),
            table: ActionTable::default(),
            source,
            start: DateTime::UNIX_EPOCH,
            now: Duration::ZERO,
            next_id: 0,
            inbox: VecDeque::new(),
            mailbox: VecDeque::new(),
            stopped: None,
            runs: Vec::new(),
            blocked: Vec::new(),
            timers: BTreeMap::new(),
            inputs: Vec::new(),
            effects: Vec::new(),
            said: Said::default(),
            missing: None,
        };
        harness.mounting(effects);
        Ok(harness)
    }

    /// Sends a signal of `kind` with `data` from outside, stamped by the harness's clock; returns the effects
    /// of every step it led to (outcomes of runs refused by the gate included).
    pub fn send(&mut self, kind: &str, data: Value) -> Result<&[Effect], AgentHarnessError> {
        let signal = Signal::builder(kind)
            .data(data)
            .stamped(self.fresh_id(), self.time())
            .build()
            .map_err(|err| AgentHarnessError::Kind(kind.to_owned(), err.to_string()))?;
        self.send_signal(signal)
    }

    /// Sends a signal you built (kept as it is: its id and time are yours).
    pub fn send_signal(&mut self, signal: Signal) -> Result<&[Effect], AgentHarnessError> {
        self.begin()?;
        self.inbox.push_back(signal);
        self.settle()?;
        Ok(&self.effects)
    }

    /// Ends a waiting run with this output: the agent gets `action.completed` (or `action.failed` with a
    /// `Critical` error when the output breaks the action's output schema, as live). `run` is the run's id, or
    /// an action id for the oldest waiting run of that action.
    pub fn complete(&mut self, run: &str, output: Value) -> Result<&[Effect], AgentHarnessError> {
        let pending = self.take(run, false)?;
        self.begin()?;
        // As live: an output that breaks the action's output schema is a critical failure, not an output.
        let checked = match self.table.get(&pending.action) {
            Some(registered) => registered.action.check_output(&output),
            None => Ok(()),
        };
        let outcome = match checked {
            Ok(()) => Outcome::completed(output, Duration::ZERO, 1),
            Err(error) => Outcome::from_error(&error, Duration::ZERO, 1),
        };
        self.tell(&pending, outcome);
        self.settle()?;
        Ok(&self.effects)
    }

    /// Ends a waiting run with this error: the agent gets `action.failed` (or `action.blocked` for `Denied`).
    pub fn fail(&mut self, run: &str, error: ActionError) -> Result<&[Effect], AgentHarnessError> {
        let pending = self.take(run, false)?;
        self.begin()?;
        self.tell(&pending, Outcome::from_error(&error, Duration::ZERO, 1));
        self.settle()?;
        Ok(&self.effects)
    }

    /// Approves a run waiting for approval: it meets the gate again and, if it passes, waits for its outcome.
    pub fn approve(&mut self, run: &str) -> Result<&[Effect], AgentHarnessError> {
        let pending = self.take(run, true)?;
        self.begin()?;
        self.through_gate(pending, true);
        self.settle()?;
        Ok(&self.effects)
    }

    /// Denies a run waiting for approval: the agent gets `action.blocked` with a `Denied` error.
    pub fn deny(&mut self, run: &str) -> Result<&[Effect], AgentHarnessError> {
        let pending = self.take(run, true)?;
        self.begin()?;
        let error = ActionError::denied("the run was denied by its approver");
        self.tell(&pending, Outcome::from_error(&error, Duration::ZERO, 0));
        self.settle()?;
        Ok(&self.effects)
    }

    /// Moves the virtual clock forward, firing every schedule that falls due and expiring every approval that
    /// waited longer than the policy's `approval_timeout` (the agent gets a `Denied` outcome), in time order.
    pub fn advance(&mut self, by: Duration) -> Result<&[Effect], AgentHarnessError> {
        self.begin()?;
        let until = self.now.saturating_add(by);
        loop {
            let timer = self
                .timers
                .iter()
                .filter(|(_, (at, _))| *at <= until)
                .min_by_key(|(key, (at, _))| (*at, (*key).clone()))
                .map(|(key, (at, _))| (*at, key.clone()));
            let expiry = self.policy.approval_timeout.and_then(|after| {
                let (index, run) = self.blocked.iter().enumerate().min_by_key(|(_, run)| run.asked)?;
                let at = run.asked.saturating_add(after);
                (at <= until).then_some((at, index))
            });
            match (timer, expiry) {
                // An approval that expires first (or at the same instant as a timer) goes first.
                (timer, Some((at, index))) if timer.as_ref().is_none_or(|(due, _)| at <= *due) => {
                    self.now = at;
                    let run = self.blocked.remove(index);
                    let waited = self.policy.approval_timeout.unwrap_or_default().as_millis();
                    let error = ActionError::denied(format!(
                        "the run waited for approval longer than its policy allows ({waited}ms); ask for it again"
                    ));
                    self.tell(&run, Outcome::from_error(&error, Duration::ZERO, 0));
                }
                (Some((at, key)), _) => {
                    // Delivered as it was scheduled (its id and time are the ones the agent made), as live.
                    let Some((_, signal)) = self.timers.remove(&key) else { break };
                    self.now = at;
                    self.inbox.push_back(signal);
                }
                (None, _) => break,
            }
            self.settle()?;
        }
        self.now = until;
        Ok(&self.effects)
    }

    /// Mounts a skill of the catalog as the agent's owner would (`Runtime::mount`); `Err` says why not.
    pub fn mount(&mut self, skill: &str, opts: Value) -> Result<(), AgentHarnessError> {
        self.begin()?;
        let id = SkillId::new(skill).map_err(|err| AgentHarnessError::SkillId(skill.to_owned(), err.to_string()))?;
        let found = self.catalog.get(&id).cloned();
        let skill = found.ok_or_else(|| AgentHarnessError::Mount(format!("skill `{id}` is not in the catalog")))?;
        let effects = mount(&mut self.state, &skill, &opts, &self.policy)
            .map_err(|err| AgentHarnessError::Mount(err.to_string()))?;
        self.mounting(effects);
        Ok(())
    }

    /// Unmounts a skill as the agent's owner would (`Runtime::unmount`); `Err` says why not.
    pub fn unmount(&mut self, skill: &str) -> Result<(), AgentHarnessError> {
        self.begin()?;
        let id = SkillId::new(skill).map_err(|err| AgentHarnessError::SkillId(skill.to_owned(), err.to_string()))?;
        let effects = unmount(&mut self.state, &id).map_err(|err| AgentHarnessError::Mount(err.to_string()))?;
        self.mounting(effects);
        self.repoint(&id);
        Ok(())
    }

    /// The agent's whole state.
    pub fn state(&self) -> &AgentState<A> {
        &self.state
    }

    /// The agent's domain state.
    pub fn domain(&self) -> &A {
        &self.state.domain
    }

    /// The effects of every step the last call led to, in order.
    pub fn effects(&self) -> &[Effect] {
        &self.effects
    }

    /// What the last call's effects did besides runs: emitted signals, replies, refusals, children.
    pub fn said(&self) -> &Said {
        &self.said
    }

    /// Runs waiting for an outcome, oldest first.
    pub fn runs(&self) -> &[PendingRun] {
        &self.runs
    }

    /// Runs waiting for approval, oldest first.
    pub fn blocked(&self) -> &[PendingRun] {
        &self.blocked
    }

    /// Every signal the agent consumed so far, in order (its input log).
    pub fn inputs(&self) -> &[Signal] {
        &self.inputs
    }

    /// The virtual time since the harness started.
    pub fn now(&self) -> Duration {
        self.now
    }

    /// The actions the agent can run now.
    pub fn actions(&self) -> Vec<ActionId> {
        self.table.specs().into_iter().map(|spec| spec.id).collect()
    }

    /// The signal of `kind` the last call emitted; panics with what was emitted instead.
    pub fn assert_emitted(&self, kind: &str) -> &Signal {
        match self.said.emitted.iter().find(|(s, _)| s.kind().as_str() == kind) {
            Some((signal, _)) => signal,
            None => panic!("expected a `{kind}` signal to be emitted; {}", self.describe()),
        }
    }

    /// The oldest waiting run of `action`; panics with what is waiting instead.
    pub fn assert_run(&self, action: &str) -> &PendingRun {
        match self.runs.iter().find(|r| r.action.as_str() == action) {
            Some(run) => run,
            None => panic!("expected a run of `{action}` to be waiting; {}", self.describe()),
        }
    }

    /// The reply the last call made; panics with what was done instead.
    pub fn assert_replied(&self) -> &Value {
        match self.said.replies.first() {
            Some((_, data)) => data,
            None => panic!("expected a reply; {}", self.describe()),
        }
    }

    /// Panics unless the last call did nothing at all (no effect from any step).
    pub fn assert_quiet(&self) {
        assert!(self.effects.is_empty(), "expected no effects; {}", self.describe());
    }

    /// What the last call did and what waits, for assertion messages.
    pub fn describe(&self) -> String {
        let mut text = String::new();
        let kinds: Vec<String> = self.effects.iter().map(|e| format!("{:?}", e.kind)).collect();
        let _ = write!(text, "the last call's effects were [{}]", kinds.join(", "));
        let emitted: Vec<&str> = self.said.emitted.iter().map(|(s, _)| s.kind().as_str()).collect();
        let _ = write!(text, "; emitted: {emitted:?}; waiting runs: {}", list_of(&self.runs));
        let _ = write!(text, "; awaiting approval: {}", list_of(&self.blocked));
        if !self.said.refused.is_empty() {
            let _ = write!(text, "; refused: {:?}", self.said.refused);
        }
        text
    }

    fn begin(&mut self) -> Result<(), AgentHarnessError> {
        if let Some(reason) = &self.stopped {
            return Err(AgentHarnessError::Stopped(reason.clone()));
        }
        self.effects.clear();
        self.said = Said::default();
        self.missing = None;
        Ok(())
    }

    fn time(&self) -> DateTime<Utc> {
        self.start + chrono::Duration::from_std(self.now).unwrap_or(chrono::Duration::MAX)
    }

    fn fresh_id(&mut self) -> Uuid {
        self.next_id += 1;
        let millis = u64::try_from(self.now.as_millis()).unwrap_or(u64::MAX);
        let mut random = [0u8; 10];
        random[2..].copy_from_slice(&self.next_id.to_be_bytes());
        uuid::Builder::from_unix_timestamp_millis(millis, &random).into_uuid()
    }

    fn take(&mut self, run: &str, blocked: bool) -> Result<PendingRun, AgentHarnessError> {
        let list = if blocked { &mut self.blocked } else { &mut self.runs };
        let found = list.iter().position(|r| r.id.to_string() == run || r.action.as_str() == run);
        match found {
            Some(index) => Ok(list.remove(index)),
            None => Err(AgentHarnessError::NoSuchRun {
                what: if blocked { "run awaiting approval" } else { "waiting run" },
                name: run.to_owned(),
                waiting: list_of(list),
            }),
        }
    }

    /// Feeds the agent until nothing is left: its inbox (outcomes, and signals from outside) first, then its
    /// mailbox (signals it sent itself), as the live server does.
    fn settle(&mut self) -> Result<(), AgentHarnessError> {
        let mut fed = 0;
        while let Some(signal) = self.inbox.pop_front().or_else(|| self.mailbox.pop_front()) {
            fed += 1;
            if fed > SETTLE_BUDGET {
                // What the loop left queued goes with the failed call, or the next call would take the loop up.
                self.inbox.clear();
                self.mailbox.clear();
                return Err(AgentHarnessError::Looping(SETTLE_BUDGET));
            }
            let step = match step(&mut self.state, &signal, &self.catalog) {
                Ok(step) => step,
                Err(error) => {
                    let kind = signal.kind().to_string();
                    self.inputs.push(signal);
                    self.inbox.clear();
                    self.mailbox.clear();
                    return Err(AgentHarnessError::Step { kind, error });
                }
            };
            self.effects.extend(step.effects.iter().cloned());
            for effect in step.effects {
                self.carry_out(effect, Origin::Step(&signal));
            }
            self.inputs.push(signal);
            if self.stopped.is_some() {
                // A stopped agent's runs, approvals and timers go with it.
                self.inbox.clear();
                self.mailbox.clear();
                self.runs.clear();
                self.blocked.clear();
                self.timers.clear();
                break;
            }
        }
        match self.missing.take() {
            Some(missing) => Err(missing),
            None => Ok(()),
        }
    }

    /// After an unmount, actions another mounted skill still provides run that skill's code, as live.
    fn repoint(&mut self, skill: &SkillId) {
        let provided = self.state.skills().get(skill).map(|m| m.actions.clone()).unwrap_or_default();
        for action in self.table.stale(skill, &provided) {
            self.table.register(action, None, &self.state, &self.catalog);
        }
    }

    fn mounting(&mut self, effects: Vec<Effect>) {
        for effect in effects {
            self.carry_out(effect, Origin::Mounting);
        }
    }

    fn mount_skill(&mut self, skill: &SkillId, opts: &Value, origin: Origin<'_>) {
        let result = match self.catalog.get(skill).cloned() {
            Some(found) => mount(&mut self.state, &found, opts, &self.policy).map_err(|err| err.to_string()),
            None => {
                let kind = origin.cause().map_or_else(|| "none".to_owned(), |s| s.kind().to_string());
                self.missing.get_or_insert(AgentHarnessError::MissingSkill { skill: skill.clone(), kind });
                Err(format!(
                    "skill `{skill}` is not in the harness's catalog; give it to `AgentHarness::with` (live: add it \
                     with `RuntimeBuilder::skill`)"
                ))
            }
        };
        match result {
            Ok(effects) => self.mounting(effects),
            Err(reason) => self.mount_refused((skill.clone(), true), origin, reason),
        }
    }

    /// A mount or unmount the agent asked for that failed: refused, and told to the agent as `agent.mount_failed`
    /// in its inbox, as live.
    fn mount_refused(&mut self, (skill, mounting): (SkillId, bool), origin: Origin<'_>, reason: String) {
        let stamp = (self.fresh_id(), self.time());
        if let Some(signal) = driver::mount_failed_at(&self.source, (&skill, mounting), &reason, origin.cause(), stamp)
        {
            self.inbox.push_back(signal);
        }
        self.said.refused.push(Command::mount_failed(mounting, skill, origin, reason));
    }

    fn carry_out(&mut self, effect: Effect, origin: Origin<'_>) {
        let cause = origin.cause().map(|s| (s.correlation_id(), s.id()));
        match interpret(effect, origin, &self.policy, &self.source) {
            Command::Register { action, skill } => {
                self.table.register(action, skill.as_ref(), &self.state, &self.catalog);
            }
            Command::Deregister { action } => self.table.deregister(&action),
            Command::Run { action, params, .. } => {
                let (correlation, causation) = match cause {
                    Some((correlation, causation)) => (correlation, Some(causation)),
                    None => (Uuid::nil(), None),
                };
                let run = PendingRun { id: self.fresh_id(), action, params, correlation, causation, asked: self.now };
                self.through_gate(run, false);
            }
            Command::Emit { signal, to } => {
                // A signal to the agent itself comes back to it, after this step's effects, as live.
                if to == Target::Agent(self.state.id.clone()) {
                    self.mailbox.push_back(signal.clone());
                }
                self.said.emitted.push((signal, to));
            }
            Command::Reply { to, data } => self.said.replies.push((to, data)),
            Command::Schedule { key, after, signal, .. } => {
                self.timers.insert(key, (self.now.saturating_add(after), signal));
            }
            Command::Cancel { key } => {
                self.timers.remove(&key);
            }
            Command::Spawn { id, agent, .. } => self.said.spawned.push((id, agent)),
            Command::StopChild { id } => self.said.stopped_children.push(id),
            Command::Stop { reason } => {
                self.said.stopped = Some(reason.clone());
                self.stopped = Some(reason);
            }
            Command::Mount { skill, opts } => self.mount_skill(&skill, &opts, origin),
            Command::Unmount { skill } => match unmount(&mut self.state, &skill) {
                Ok(effects) => {
                    self.mounting(effects);
                    self.repoint(&skill);
                }
                Err(err) => self.mount_refused((skill, false), origin, err.to_string()),
            },
            Command::Refused(refusal) => self.said.refused.push(refusal),
        }
    }

    fn through_gate(&mut self, run: PendingRun, approved: bool) {
        match gate(&self.table, &self.policy, &self.state.id, &run.action, true) {
            Gate::Refused(error) => self.tell(&run, Outcome::from_error(&error, Duration::ZERO, 0)),
            Gate::NeedsApproval(_, risk) if !approved => {
                self.tell(&run, Outcome::awaiting_approval(format!("waiting for approval (risk {risk:?})")));
                self.blocked.push(run);
            }
            // Only a meter holds a run (budgets and rate limits are the runtime's, and the harness has none).
            Gate::NeedsApproval(..) | Gate::Pass(_) | Gate::Wait(_) => self.runs.push(run),
        }
    }

    /// Puts the outcome signal of a run in the agent's inbox.
    fn tell(&mut self, run: &PendingRun, outcome: Outcome) {
        let stamp = (self.fresh_id(), self.time());
        let reference =
            RunRef { run: run.id, action: &run.action, correlation: run.correlation, causation: run.causation };
        if let Some(signal) = driver::action_outcome_at(&self.source, reference, outcome, stamp) {
            self.inbox.push_back(signal);
        }
    }
}

fn list_of(runs: &[PendingRun]) -> String {
    if runs.is_empty() {
        return "none".to_owned();
    }
    runs.iter().map(|r| format!("{} ({})", r.action, r.id)).collect::<Vec<_>>().join(", ")
}
