//! The plan: a scenario in the simulator's own values — its duration, its groups with their agents' ids,
//! policies and start skills — each made from the file's words or refused with a diagnostic at its place. The
//! world around the agents (processes, action models, faults) is made by [`super::world`], the table's columns
//! and the plot by [`super::columns`].

use super::columns::{metrics, plot};
use super::load::{Checker, as_agent};
use super::{GroupSection, Scenario};
use crate::manifest::Manifest;
use crate::manifest::diagnostic::{Code, ManifestError, Source};
use crate::registry::Registry;
use crate::simulation::{Group, Plan};
use agentry::id::{AgentId, SkillId};
use serde_json::Value;
use std::ops::Range;
use std::path::Path;
use std::time::Duration;

/// The most agents a scenario may have in all: each costs memory before anything runs.
const MAX_AGENTS: u64 = 10_000_000;
/// The most samples a run may take: each is a row of the table, kept in memory.
const MAX_SAMPLES: u128 = 1_000_000;

/// Where the names that only the agent type's catalog can judge are in the file.
pub(crate) struct Places {
    /// The file.
    pub source: Source,
    /// Each modelled action, at its key.
    pub models: Vec<(String, Range<usize>)>,
    /// Each skill a process or a metric looks for.
    pub skills: Vec<(String, Range<usize>)>,
    /// Each group, at its `type`.
    pub groups: Vec<(String, Range<usize>)>,
}

/// The plan of `scenario`, and where its names are in the file; what is wrong is kept in `checker` (the plan is
/// then only good for discarding).
pub(super) fn plan(
    path: &Path,
    scenario: &Scenario,
    manifest: &Manifest,
    registry: &Registry,
    checker: &mut Checker,
) -> (Plan, Places) {
    let kind = agent_type(scenario, registry, checker);
    let duration = duration(scenario, checker);
    let every = every(scenario, duration, checker);
    let mut places =
        Places { source: checker.source.clone(), models: Vec::new(), skills: Vec::new(), groups: Vec::new() };
    let groups = groups(scenario, manifest, checker, &mut places);
    let processes = super::world::processes(scenario, &groups, checker, &mut places.skills);
    let models = super::world::models(scenario, checker, &mut places.models);
    let faults = super::world::faults(&scenario.faults, checker);
    let metrics = metrics(scenario, checker, &mut places.skills);
    let plot = plot(path, scenario, &metrics, checker);
    let skills = registry.skills.values().cloned().collect();
    let looked_for = places.skills.iter().map(|(skill, _)| skill.clone()).collect();
    let plan = Plan {
        kind,
        seed: scenario.seed,
        duration,
        every,
        skills,
        groups,
        processes,
        models,
        faults,
        metrics,
        looked_for,
        plot,
    };
    (plan, places)
}

/// The one agent type of every group; refused when groups differ or the type cannot be simulated (an unknown
/// type is the manifest's check's to report).
fn agent_type(scenario: &Scenario, registry: &Registry, checker: &mut Checker) -> String {
    let mut groups = scenario.agents.iter();
    let Some((_, first)) = groups.next() else {
        checker.push(ManifestError::whole(
            Code::BadValue,
            "the scenario has no agents; expected at least one group: `[agents.<name>]` with `type` and `count`",
        ));
        return String::new();
    };
    let kind = first.kind.get_ref();
    for (name, group) in groups.filter(|(_, g)| g.kind.get_ref() != kind) {
        let message = format!(
            "group `{}` is of type `{}` and the first group of type `{kind}`; a simulation runs agents of one type",
            name.get_ref(),
            group.kind.get_ref()
        );
        let error = checker
            .at(Code::BadValue, group.kind.span(), message)
            .label("another type")
            .help("give every group the same `type` (a type of your own may be an enum of several kinds of agent)");
        checker.push(error);
    }
    if registry.agents.get(kind.as_str()).is_some_and(|t| t.simulate.is_none()) {
        let message = format!("agents of type `{kind}` cannot be simulated from a scenario");
        let error = checker.at(Code::UnknownAgentType, first.kind.span(), message).label("not simulated").help(
            "the types a binary registers with `Registry::agent` can be (`tools`, or your own); `llm` agents need a live model",
        );
        checker.push(error);
    }
    kind.clone()
}

fn duration(scenario: &Scenario, checker: &mut Checker) -> Duration {
    let Some(duration) = checker.duration(&scenario.duration) else { return Duration::ZERO };
    if duration.is_zero() || u64::try_from(duration.as_nanos()).is_err() {
        let message = format!(
            "the simulation cannot run for `{}`; expected more than zero and less than its clock reaches (about 584 years)",
            scenario.duration.get_ref()
        );
        checker.bad(scenario.duration.span(), message);
        return Duration::ZERO;
    }
    duration
}

fn every(scenario: &Scenario, duration: Duration, checker: &mut Checker) -> Duration {
    let Some(text) = &scenario.sample_every else { return (duration / 100).max(Duration::from_nanos(1)) };
    let Some(every) = checker.duration(text) else { return duration };
    if every.is_zero() {
        checker.bad(text.span(), "the metrics cannot be sampled every `0s`; expected a duration longer than zero");
        return duration;
    }
    let samples = duration.as_nanos() / every.as_nanos();
    if samples > MAX_SAMPLES {
        let message = format!(
            "sampling every `{}` for `{}` takes {samples} samples; expected at most {MAX_SAMPLES} (sample less often)",
            text.get_ref(),
            scenario.duration.get_ref()
        );
        checker.bad(text.span(), message);
    }
    every
}

fn groups(scenario: &Scenario, manifest: &Manifest, checker: &mut Checker, places: &mut Places) -> Vec<Group> {
    let mut total = 0u64;
    let mut groups = Vec::new();
    for (name, section) in &scenario.agents {
        total = total.saturating_add(*section.count.get_ref());
        if total > MAX_AGENTS {
            let message = format!("the scenario has {total} agents up to this group; expected at most {MAX_AGENTS}");
            checker.bad(section.count.span(), message);
            continue;
        }
        places.groups.push((name.get_ref().clone(), section.kind.span()));
        groups.push(group(name.get_ref(), section, manifest));
    }
    groups
}

fn group(name: &str, section: &GroupSection, manifest: &Manifest) -> Group {
    // At most MAX_AGENTS, which fits any usize this runs on.
    let count = usize::try_from(*section.count.get_ref()).unwrap_or(0);
    let skills = section.skills.iter().filter_map(|entry| {
        let entry = entry.get_ref();
        SkillId::new(entry.name()).ok().map(|id| (id, entry.options()))
    });
    Group {
        name: name.to_owned(),
        ids: (0..count).filter_map(|n| AgentId::new(format!("{name}-{n}")).ok()).collect(),
        skills: skills.collect(),
        config: section.config.as_ref().map_or(Value::Null, |c| serde_json::to_value(c).unwrap_or_default()),
        // A wrong rule, budget or rate limit is already reported by the manifest's checks.
        policy: crate::manifest::policy::for_agent(manifest, &as_agent(section)).unwrap_or_default(),
        max_in_flight: section.max_in_flight.unwrap_or(64),
    }
}
