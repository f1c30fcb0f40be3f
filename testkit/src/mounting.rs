//! The ready model test of mounting for a user's own catalog: random sequences of mount, unmount, mount_all
//! and signals, run against the real pure mounting functions and checked after every step against a reference
//! model and the design's invariants.

use crate::failure::CheckFailure;
use crate::ops::{MountOp, mount_ops};
use agentry::Signal;
use agentry::agent::{AgentState, step};
use agentry::effect::{Effect, EffectKind};
use agentry::id::{ActionId, AgentId, SkillId};
use agentry::policy::Policy;
use agentry::skill::{Catalog, MountError, Skill, mount, mount_all, unmount};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

const CHECK: &str = "check_mounting";

/// Runs the mounting model test on `catalog` under `policy` with the default settings (proptest's number of
/// cases, which honours `PROPTEST_CASES`; sequences of up to 12 operations; signals of the kinds `tick` and
/// `test.*`). See [`MountingCheck`] for the settings and the invariants checked.
///
/// ```
/// use agentry::policy::Policy;
/// use agentry::skill::{Catalog, Skill};
///
/// let base = Skill::builder("base", "1.0.0").build().unwrap();
/// let extra = Skill::builder("extra", "1.0.0").requires("base").build().unwrap();
/// let catalog: Catalog = [base, extra].into_iter().collect();
/// agentry_testkit::check_mounting(&catalog, &Policy::default()).unwrap();
/// ```
pub fn check_mounting(catalog: &Catalog, policy: &Policy) -> Result<(), CheckFailure> {
    MountingCheck::new(catalog, policy).run()
}

/// The mounting model test, with its settings.
///
/// Each case draws a sequence of operations over the catalog's skills (mount with options drawn from the
/// skill's state schema, unmount, mount_all of one to four skills, and a signal offered to the mounted skills'
/// handlers), applies them with agentry's pure `mount`, `unmount`, `mount_all` and `step` to a fresh agent
/// state, and after every step checks:
/// - the result is the one the design's rules give (a reference model: same version mounted is a no-op,
///   requirements first, the initial state must fit the state schema, the policy must allow the skill, a skill
///   another requires cannot go, dependency order for mount_all, all or nothing);
/// - the action table folded from every effect so far equals the actions of the mounted skills, with no action
///   registered twice or deregistered when absent (shared actions are reference-counted);
/// - every mounted skill's requirements are mounted, and its state fits its schema (also after its signal
///   handler ran), and every handler can read its state;
/// - a failed operation changes nothing;
/// - mounting a skill and unmounting it again restores the state exactly;
/// - for options the state schema accepts, the skill's initial state fits the schema (or the skill refuses
///   the options with an error);
/// - a skill's signal handler never registers or deregisters actions (only mounting changes the table).
///
/// On failure the report holds the shrunk sequence, one readable line per step.
#[derive(Debug, Clone)]
pub struct MountingCheck {
    catalog: Catalog,
    policy: Policy,
    cases: Option<u32>,
    max_ops: usize,
    kinds: Vec<String>,
}

impl MountingCheck {
    /// The check for this catalog and policy, with the default settings.
    pub fn new(catalog: &Catalog, policy: &Policy) -> Self {
        Self {
            catalog: catalog.clone(),
            policy: policy.clone(),
            cases: None,
            max_ops: 12,
            kinds: vec!["tick".to_owned(), "test.*".to_owned()],
        }
    }

    /// How many random sequences to run (default: proptest's, 256 unless `PROPTEST_CASES` says otherwise).
    pub fn cases(mut self, cases: u32) -> Self {
        self.cases = Some(cases);
        self
    }

    /// The longest sequence of operations in one case (default 12).
    pub fn max_ops(mut self, max_ops: usize) -> Self {
        self.max_ops = max_ops.max(1);
        self
    }

    /// The kinds of the signals offered to mounted skills, as patterns such as `order.*` (default `tick` and
    /// `test.*`). Name the kinds your skills handle so their handlers are exercised.
    pub fn signal_kinds<I: IntoIterator<Item = S>, S: Into<String>>(mut self, kinds: I) -> Self {
        self.kinds = kinds.into_iter().map(Into::into).collect();
        self
    }

    /// Runs the check.
    pub fn run(&self) -> Result<(), CheckFailure> {
        let setup = |reason: String| CheckFailure::Setup { check: CHECK, reason };
        let kinds: Vec<&str> = self.kinds.iter().map(String::as_str).collect();
        let ops = prop::collection::vec(mount_ops(&self.catalog, &kinds).map_err(setup)?, 1..=self.max_ops);
        let config = match self.cases {
            Some(cases) => Config { cases, failure_persistence: None, ..Config::default() },
            None => Config { failure_persistence: None, ..Config::default() },
        };
        let mut runner = TestRunner::new(config);
        let result = runner.run(&ops, |ops| Machine::new(&self.catalog, &self.policy).run(&ops));
        match result {
            Ok(()) => Ok(()),
            Err(TestError::Fail(reason, ops)) => Err(CheckFailure::Counterexample {
                check: CHECK,
                steps: ops.iter().map(ToString::to_string).collect(),
                reason: reason.message().to_owned(),
            }),
            Err(TestError::Abort(reason)) => Err(setup(reason.message().to_owned())),
        }
    }
}

/// What the reference model expects an operation to return.
#[derive(Debug, Clone, PartialEq)]
enum Expected {
    /// Success, with (registers?, action) per effect, in order.
    Ok(Vec<(bool, ActionId)>),
    VersionConflict(SkillId),
    Missing(SkillId, Vec<SkillId>),
    InvalidState(SkillId),
    Denied(SkillId),
    RequiredBy(SkillId, Vec<SkillId>),
    Cycle,
}

/// The reference model: which skills are mounted, read straight from the design's rules.
#[derive(Debug, Clone, Default)]
struct Model {
    mounted: BTreeMap<SkillId, Arc<Skill>>,
}

impl Model {
    fn provided(&self, action: &ActionId) -> bool {
        self.mounted.values().any(|s| s.actions().iter().any(|a| &a.spec().id == action))
    }

    fn mount(&mut self, skill: &Arc<Skill>, opts: &Value, policy: &Policy) -> Expected {
        if let Some(mounted) = self.mounted.get(skill.id()) {
            return if mounted.version() == skill.version() {
                Expected::Ok(Vec::new())
            } else {
                Expected::VersionConflict(skill.id().clone())
            };
        }
        let missing: Vec<SkillId> =
            skill.requires().iter().filter(|r| !self.mounted.contains_key(*r)).cloned().collect();
        if !missing.is_empty() {
            return Expected::Missing(skill.id().clone(), missing);
        }
        let fits = agentry::driver::make_state(skill, opts).is_ok_and(|state| skill.state_errors(&state).is_empty());
        if !fits {
            return Expected::InvalidState(skill.id().clone());
        }
        if policy.may_mount(skill.id()).is_err() {
            return Expected::Denied(skill.id().clone());
        }
        let effects = skill
            .actions()
            .iter()
            .map(|a| a.spec().id.clone())
            .filter(|a| !self.provided(a))
            .map(|a| (true, a))
            .collect();
        self.mounted.insert(skill.id().clone(), skill.clone());
        Expected::Ok(effects)
    }

    fn unmount(&mut self, skill: &SkillId) -> Expected {
        if !self.mounted.contains_key(skill) {
            return Expected::Ok(Vec::new());
        }
        let dependents: Vec<SkillId> =
            self.mounted.iter().filter(|(_, s)| s.requires().contains(skill)).map(|(id, _)| id.clone()).collect();
        if !dependents.is_empty() {
            return Expected::RequiredBy(skill.clone(), dependents);
        }
        let Some(removed) = self.mounted.remove(skill) else { return Expected::Ok(Vec::new()) };
        let effects = removed
            .actions()
            .iter()
            .map(|a| a.spec().id.clone())
            .filter(|a| !self.provided(a))
            .map(|a| (false, a))
            .collect();
        Expected::Ok(effects)
    }

    /// Requirements among the given entries first (their first occurrence), depth first, otherwise in the
    /// order given; `None` on a cycle.
    fn order(entries: &[(Arc<Skill>, Value)]) -> Option<Vec<usize>> {
        fn visit(entries: &[(Arc<Skill>, Value)], i: usize, marks: &mut [u8], out: &mut Vec<usize>) -> bool {
            match marks[i] {
                2 => return true,
                1 => return false,
                _ => {}
            }
            marks[i] = 1;
            for r in entries[i].0.requires() {
                if let Some(j) = entries.iter().position(|(s, _)| s.id() == r)
                    && !visit(entries, j, marks, out)
                {
                    return false;
                }
            }
            marks[i] = 2;
            out.push(i);
            true
        }
        let mut marks = vec![0u8; entries.len()];
        let mut out = Vec::new();
        for i in 0..entries.len() {
            if !visit(entries, i, &mut marks, &mut out) {
                return None;
            }
        }
        Some(out)
    }

    fn mount_all(&mut self, entries: &[(Arc<Skill>, Value)], policy: &Policy) -> Expected {
        let Some(order) = Self::order(entries) else { return Expected::Cycle };
        let mut trial = self.clone();
        let mut effects = Vec::new();
        for i in order {
            match trial.mount(&entries[i].0, &entries[i].1, policy) {
                Expected::Ok(more) => effects.extend(more),
                err => return err,
            }
        }
        *self = trial;
        Expected::Ok(effects)
    }
}

/// The system under test beside its model, with the action table folded from effects.
struct Machine<'a> {
    catalog: &'a Catalog,
    policy: &'a Policy,
    state: AgentState<()>,
    model: Model,
    table: BTreeSet<ActionId>,
}

fn fail(step: usize, op: &MountOp, what: String) -> TestCaseError {
    TestCaseError::fail(format!("step {} ({op}): {what}", step + 1))
}

impl<'a> Machine<'a> {
    fn new(catalog: &'a Catalog, policy: &'a Policy) -> Self {
        let id = AgentId::new("testkit-agent").unwrap_or_else(|_| unreachable!("a valid literal id"));
        Self { catalog, policy, state: AgentState::new(id, ()), model: Model::default(), table: BTreeSet::new() }
    }

    fn skill(&self, id: &SkillId) -> Arc<Skill> {
        self.catalog.get(id).cloned().unwrap_or_else(|| unreachable!("operations name catalog skills only"))
    }

    fn run(mut self, ops: &[MountOp]) -> Result<(), TestCaseError> {
        for (i, op) in ops.iter().enumerate() {
            self.apply(op).map_err(|what| fail(i, op, what))?;
            self.invariants().map_err(|what| fail(i, op, what))?;
        }
        Ok(())
    }

    fn apply(&mut self, op: &MountOp) -> Result<(), String> {
        let before = self.state.clone();
        let (result, expected) = match op {
            MountOp::Mount { skill, opts } => {
                let skill = self.skill(skill);
                self.options_fit(&skill, opts)?;
                let result = mount(&mut self.state, &skill, opts, self.policy);
                (result, self.model.mount(&skill, opts, self.policy))
            }
            MountOp::Unmount { skill } => (unmount(&mut self.state, skill), self.model.unmount(skill)),
            MountOp::MountAll { entries } => {
                let entries: Vec<(Arc<Skill>, Value)> =
                    entries.iter().map(|(id, opts)| (self.skill(id), opts.clone())).collect();
                for (skill, opts) in &entries {
                    self.options_fit(skill, opts)?;
                }
                let given: Vec<(&Skill, Value)> = entries.iter().map(|(s, o)| (s.as_ref(), o.clone())).collect();
                let result = mount_all(&mut self.state, &given, self.policy);
                (result, self.model.mount_all(&entries, self.policy))
            }
            MountOp::Signal { signal } => return self.signal(signal),
        };
        let observed = observe(&result);
        if observed != expected {
            return Err(format!("agentry returned {observed:?} where the mounting rules give {expected:?}"));
        }
        match result {
            Err(_) if self.state != before => Err("the operation failed but changed the agent's state".to_owned()),
            Err(_) => Ok(()),
            Ok(effects) => {
                self.fold(&effects)?;
                if let MountOp::Mount { skill, .. } = op
                    && !before.is_mounted(skill)
                    && self.state.is_mounted(skill)
                {
                    self.unmount_restores(skill, &before, &effects)?;
                }
                Ok(())
            }
        }
    }

    /// Options the state schema accepts must give a state that fits it, unless the skill refuses them. (Other
    /// options, `null` among them for most schemas, may well give a state that does not fit: that is the
    /// `InvalidState` the rules expect.)
    fn options_fit(&self, skill: &Skill, opts: &Value) -> Result<(), String> {
        if !skill.state_errors(opts).is_empty() {
            return Ok(());
        }
        let Ok(state) = agentry::driver::make_state(skill, opts) else { return Ok(()) };
        let errors = skill.state_errors(&state);
        if errors.is_empty() {
            return Ok(());
        }
        Err(format!(
            "skill `{}` made the initial state {state} from options its state schema accepts, and that state breaks \
             the schema: {}",
            skill.id(),
            errors.join("; ")
        ))
    }

    /// Unmounting a skill just mounted gives back the state before it, deregistering what it registered.
    fn unmount_restores(&self, skill: &SkillId, before: &AgentState<()>, registered: &[Effect]) -> Result<(), String> {
        let mut trial = self.state.clone();
        let effects = unmount(&mut trial, skill).map_err(|err| format!("unmounting it again failed: {err}"))?;
        if trial != *before {
            return Err("mounting it and unmounting it again did not restore the agent's state".to_owned());
        }
        let gone: BTreeSet<&ActionId> = effects.iter().filter_map(deregistered).collect();
        let added: BTreeSet<&ActionId> = registered.iter().filter_map(registered_action).collect();
        if gone != added {
            return Err(format!("unmounting it again deregisters {gone:?}, but mounting it registered {added:?}"));
        }
        Ok(())
    }

    /// Offers a signal to the mounted skills (the agent itself ignores everything).
    fn signal(&mut self, signal: &Signal) -> Result<(), String> {
        let before = self.state.clone();
        match step(&mut self.state, signal, self.catalog) {
            // Live, a failed step drops the signal for the whole agent: a skill whose handler cannot read its
            // own state is a bug to report, not an outcome.
            Err(err) if self.state != before => {
                Err(format!("handling the signal failed ({err}) and changed the state"))
            }
            Err(err) => Err(format!("handling the signal failed, so no skill would get it: {err}")),
            Ok(step) => {
                if let Some(effect) = step.effects.iter().find(|e| changes_table(e)) {
                    let skill = effect.meta.skill.as_ref().map_or("?".to_owned(), ToString::to_string);
                    return Err(format!(
                        "skill `{skill}`'s signal handler returned {:?}; only mounting and unmounting may change the \
                         action table (the server refuses it)",
                        effect.kind
                    ));
                }
                Ok(())
            }
        }
    }

    /// Folds effects into the action table: each register must add, each deregister must remove.
    fn fold(&mut self, effects: &[Effect]) -> Result<(), String> {
        for effect in effects {
            match &effect.kind {
                EffectKind::RegisterAction { action } => {
                    if !self.table.insert(action.clone()) {
                        return Err(format!("`{action}` was registered while already in the action table"));
                    }
                    if effect.meta.skill.is_none() {
                        return Err(format!("the registration of `{action}` does not name its skill"));
                    }
                }
                EffectKind::DeregisterAction { action } => {
                    if !self.table.remove(action) {
                        return Err(format!("`{action}` was deregistered while not in the action table"));
                    }
                }
                other => return Err(format!("mounting returned {other:?}; expected only Register/DeregisterAction")),
            }
        }
        Ok(())
    }

    fn invariants(&self) -> Result<(), String> {
        let provided: BTreeSet<ActionId> = self.state.actions().into_iter().cloned().collect();
        if provided != self.table {
            return Err(format!(
                "the action table folded from the effects is {:?}, but the mounted skills provide {provided:?}",
                self.table
            ));
        }
        let model: BTreeSet<&SkillId> = self.model.mounted.keys().collect();
        let real: BTreeSet<&SkillId> = self.state.skills().keys().collect();
        if model != real {
            return Err(format!("mounted skills are {real:?}, the model expects {model:?}"));
        }
        for (id, mounted) in self.state.skills() {
            if let Some(missing) = mounted.requires.iter().find(|r| !self.state.is_mounted(r)) {
                return Err(format!("`{id}` is mounted without `{missing}`, which it requires"));
            }
            let skill = self.skill(id);
            let errors = skill.state_errors(&mounted.state);
            if !errors.is_empty() {
                return Err(format!(
                    "skill `{id}`'s state {} breaks its state schema: {}",
                    mounted.state,
                    errors.join("; ")
                ));
            }
        }
        Ok(())
    }
}

fn changes_table(effect: &Effect) -> bool {
    matches!(effect.kind, EffectKind::RegisterAction { .. } | EffectKind::DeregisterAction { .. })
}

fn registered_action(effect: &Effect) -> Option<&ActionId> {
    match &effect.kind {
        EffectKind::RegisterAction { action } => Some(action),
        _ => None,
    }
}

fn deregistered(effect: &Effect) -> Option<&ActionId> {
    match &effect.kind {
        EffectKind::DeregisterAction { action } => Some(action),
        _ => None,
    }
}

fn observe(result: &Result<Vec<Effect>, MountError>) -> Expected {
    match result {
        Ok(effects) => Expected::Ok(
            effects
                .iter()
                .filter_map(|e| match &e.kind {
                    EffectKind::RegisterAction { action } => Some((true, action.clone())),
                    EffectKind::DeregisterAction { action } => Some((false, action.clone())),
                    _ => None,
                })
                .collect(),
        ),
        Err(MountError::VersionConflict { skill, .. }) => Expected::VersionConflict(skill.clone()),
        Err(MountError::MissingDependency { skill, missing }) => Expected::Missing(skill.clone(), missing.clone()),
        Err(MountError::InvalidState { skill, .. }) => Expected::InvalidState(skill.clone()),
        Err(MountError::Denied { skill, .. }) => Expected::Denied(skill.clone()),
        Err(MountError::RequiredBy { skill, dependents }) => Expected::RequiredBy(skill.clone(), dependents.clone()),
        Err(MountError::Cycle { .. }) => Expected::Cycle,
    }
}
