//! Reading a scenario: the file parsed into a [`Scenario`]; its groups checked as a manifest's agents are, by
//! the manifest's own checks (agent types, skills, permission rules, budgets, rate limits) through a manifest
//! made of them, so a mistake reads the same in both files; then its own parts checked and made into the
//! simulator's values ([`Plan`]). Every mistake is a diagnostic with the file, line and column, and all are
//! reported at once.

use super::plan::{self, Places};
use super::{GroupSection, Scenario};
use crate::manifest::diagnostic::{Code, ManifestError, Source, closest, from_toml, source};
use crate::manifest::{AgentSection, Layer, Loaded, Manifest, parse_duration};
use crate::registry::Registry;
use crate::simulation::Plan;
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;
use std::time::Duration;
use toml::Spanned;

/// Reads, checks and plans the scenario at `path`, or says every mistake in it.
pub(crate) fn load(path: &Path, registry: &Registry) -> Result<(Plan, Places), Vec<ManifestError>> {
    let text = std::fs::read_to_string(path).map_err(|err| {
        vec![ManifestError::whole(
            Code::Unreadable,
            format!(
                "cannot read the scenario {}: {err}; expected a TOML file (`docs/cli.md` shows one)",
                path.display()
            ),
        )]
    })?;
    let source = source(path, &text);
    let scenario: Scenario = toml::from_str(&text).map_err(|err| vec![from_toml(&source, &err)])?;
    let manifest = as_manifest(&scenario);
    let errors = manifest_mistakes(path, &source, &manifest, registry);
    let mut checker = Checker { source, errors };
    let planned = plan::plan(path, &scenario, &manifest, registry, &mut checker);
    if checker.errors.is_empty() { Ok(planned) } else { Err(checker.errors) }
}

/// The scenario's agents and shared policy as a manifest: each group an agent named as the group.
fn as_manifest(scenario: &Scenario) -> Manifest {
    Manifest {
        agents: scenario.agents.iter().map(|(name, group)| (name.get_ref().clone(), as_agent(group))).collect(),
        permissions: scenario.permissions.clone(),
        budgets: scenario.budgets.clone(),
        rate_limits: scenario.rate_limits.clone(),
        ..Manifest::default()
    }
}

/// A group as a manifest's agent (without the `llm` keys, which a simulation has no use for).
pub(super) fn as_agent(group: &GroupSection) -> AgentSection {
    AgentSection {
        kind: group.kind.clone(),
        skills: group.skills.clone(),
        model: None,
        instructions: None,
        tools: Vec::new(),
        max_turns: None,
        token_budget: None,
        config: group.config.clone(),
        permissions: group.permissions.clone(),
        budgets: group.budgets.clone(),
        rate_limits: group.rate_limits.clone(),
    }
}

/// What `agentry check` would find in that manifest, at the scenario's own places. A scenario has no
/// `[models]`, so "names no model" (said of `llm` agents) is left to [`plan`], which refuses the type itself.
fn manifest_mistakes(path: &Path, source: &Source, manifest: &Manifest, registry: &Registry) -> Vec<ManifestError> {
    let layer = Layer { path: path.to_owned(), source: source.clone(), manifest: manifest.clone() };
    let loaded = Loaded { layers: vec![layer], merged: manifest.clone(), origins: BTreeMap::new() };
    crate::manifest::check::check(&loaded, registry).into_iter().filter(|e| e.code != Code::UnknownModel).collect()
}

/// The mistakes found so far in one scenario file, and the file they are in.
pub(super) struct Checker {
    /// The file's name and text.
    pub source: Source,
    /// The mistakes, in the order found.
    pub errors: Vec<ManifestError>,
}

impl Checker {
    /// A diagnostic at a place in the file (not yet kept: add a label or help, then [`Checker::push`]).
    pub fn at(&self, code: Code, span: Range<usize>, message: impl Into<String>) -> ManifestError {
        ManifestError::at(code, &self.source, span, message)
    }

    /// Keeps a mistake.
    pub fn push(&mut self, error: ManifestError) {
        self.errors.push(error);
    }

    /// Keeps a value of the right type that is still wrong.
    pub fn bad(&mut self, span: Range<usize>, message: impl Into<String>) {
        let error = self.at(Code::BadValue, span, message);
        self.push(error);
    }

    /// Keeps a name that is none of `valid`, with the closest of them if one is close.
    pub fn unknown(&mut self, span: Range<usize>, what: &str, wrong: &str, valid: &[&str]) {
        let listed = valid.iter().map(|v| format!("`{v}`")).collect::<Vec<_>>().join(", ");
        let error = self.at(Code::BadValue, span, format!("unknown {what} `{wrong}`")).label(format!("no such {what}"));
        let error = match closest(wrong, valid.iter().copied()) {
            Some(best) => error.help(format!("did you mean `{best}`? (expected one of {listed})")),
            None => error.help(format!("expected one of {listed}")),
        };
        self.push(error);
    }

    /// A duration as written (`30s`, `1h 30m`), or `None` with the mistake kept.
    pub fn duration(&mut self, text: &Spanned<String>) -> Option<Duration> {
        match parse_duration(text) {
            Ok(duration) => Some(duration),
            Err((span, message)) => {
                self.bad(span, message);
                None
            }
        }
    }

    /// A share between 0 and 1, or `None` with the mistake kept.
    pub fn share(&mut self, value: &Spanned<f64>, what: &str) -> Option<f64> {
        let v = *value.get_ref();
        if v.is_finite() && (0.0..=1.0).contains(&v) {
            return Some(v);
        }
        self.bad(value.span(), format!("{what} is {v}; expected a share between 0 and 1"));
        None
    }

    /// A rate (per second) of 0 or more, or `None` with the mistake kept.
    pub fn rate(&mut self, value: &Spanned<f64>, what: &str) -> Option<f64> {
        let v = *value.get_ref();
        if v.is_finite() && v >= 0.0 {
            return Some(v);
        }
        self.bad(value.span(), format!("{what} is {v}; expected a number of 0 or more (per agent per second)"));
        None
    }
}
