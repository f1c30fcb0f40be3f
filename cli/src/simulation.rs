//! A simulation run from a scenario, in the simulator's own values: the plan (`agentry sim` makes it from a
//! checked file, see [`crate::scenario`]) and the one step that must know the agent type, [`simulate`], made for
//! each type when it is registered ([`crate::Registry::agent`]) and kept there as a plain function pointer
//! ([`Simulate`]), so the command runs any registered type without knowing it. Nothing here reads a file.

use crate::suggest::closest;
use agentry::agent::Agent;
use agentry::id::{AgentId, SkillId};
use agentry::policy::Policy;
use agentry::skill::Skill;
use agentry_sim::{ActionModel, Census, Counts, Faults, Metrics, Process, SimBuilder, SimError, Simulation, Table};
use serde::Serialize;
use serde_json::Value;
use std::time::Duration;

/// A checked scenario, in the simulator's values.
pub(crate) struct Plan {
    /// The agent type of every group.
    pub kind: String,
    /// The seed.
    pub seed: u64,
    /// How long to run, in virtual time.
    pub duration: Duration,
    /// How often the metrics are sampled.
    pub every: Duration,
    /// The registry's skills: the catalog (the agent type's own start skills are added to it when it runs).
    pub skills: Vec<Skill>,
    /// The agents, by group, in the file's order.
    pub groups: Vec<Group>,
    /// The processes of signals.
    pub processes: Vec<Process>,
    /// The action models, by action id.
    pub models: Vec<(String, ActionModel)>,
    /// The faults.
    pub faults: Faults,
    /// The table's columns, in order.
    pub metrics: Vec<(String, Measure)>,
    /// The skills the processes and metrics look for: each must be in the catalog.
    pub looked_for: Vec<String>,
    /// What the plot shows.
    pub plot: Plot,
}

/// One group of agents.
pub(crate) struct Group {
    /// Its name.
    pub name: String,
    /// Its agents' ids: `<name>-0`, `<name>-1`, …
    pub ids: Vec<AgentId>,
    /// The skills each mounts when it starts (beyond its type's own), with their options.
    pub skills: Vec<(SkillId, Value)>,
    /// The initial state, as JSON (`null`: the type's `Default`).
    pub config: Value,
    /// Each agent's policy.
    pub policy: Policy,
    /// The most runs each has in flight.
    pub max_in_flight: usize,
}

/// What the plot shows.
pub(crate) struct Plot {
    /// Its title.
    pub title: String,
    /// Its vertical axis.
    pub y_label: String,
    /// The metrics drawn.
    pub columns: Vec<String>,
}

/// What a metric measures at each sample.
#[derive(Debug, Clone)]
pub(crate) enum Measure {
    /// Live agents.
    Population,
    /// Signals consumed, in all.
    Steps,
    /// Runs completed, in all.
    Completed,
    /// Runs failed, in all.
    Failed,
    /// Runs refused or denied, in all.
    Blocked,
    /// Effects refused, in all.
    Refused,
    /// Faults injected, in all.
    Faults,
    /// Agents with a skill mounted: a count, or a share of the population.
    WithSkill {
        /// The skill.
        skill: SkillId,
        /// As a share rather than a count.
        share: bool,
    },
    /// A number in each agent's state, folded over the agents.
    State {
        /// Where, as a JSON pointer.
        pointer: String,
        /// How the agents' numbers are folded.
        of: Of,
    },
}

/// How a state measure folds the agents' numbers (0 when no agent has one).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Of {
    /// Their sum.
    Sum,
    /// Their mean.
    Mean,
    /// The least.
    Min,
    /// The greatest.
    Max,
}

/// Runs a plan with the agent type it was made for, telling `progress` the virtual time after each slice.
pub(crate) type Simulate = fn(&Plan, &mut dyn FnMut(Duration)) -> Result<Finished, SimFailure>;

/// How many slices a run is cut into, to report progress between them. The run is the same as in one go: the
/// simulator does nothing between two `run_until`s.
const SLICES: u32 = 100;

/// What a run gave.
#[derive(Debug)]
pub(crate) struct Finished {
    /// The metrics, sampled.
    pub table: Table,
    /// The trace's hash: the same seed and scenario give the same hash.
    pub trace_hash: String,
    /// The agents alive at the end.
    pub population: usize,
    /// The simulator's counts at the end.
    pub counts: Counts,
}

/// Why a plan could not run. Each is found before the simulation starts.
#[derive(Debug)]
pub(crate) enum SimFailure {
    /// A model for an action no skill of the catalog provides, and the closest action one does.
    UnknownAction {
        /// The action.
        action: String,
        /// The closest provided.
        closest: Option<String>,
    },
    /// A skill a process or a metric looks for that the catalog does not have, and its closest.
    UnknownSkill {
        /// The skill.
        skill: String,
        /// The closest in the catalog.
        closest: Option<String>,
    },
    /// A group's `config` that is not a state of the agent type.
    Config {
        /// The group.
        group: String,
        /// Why.
        message: String,
    },
    /// The agent type's own start skills do not build.
    StartSkills(String),
    /// Anything else the simulator refused.
    Sim(SimError),
}

/// [`Simulate`] for agents of type `A`.
pub(crate) fn simulate<A: Agent + Default>(
    plan: &Plan,
    progress: &mut dyn FnMut(Duration),
) -> Result<Finished, SimFailure> {
    let mut sim = build::<A>(plan)?;
    populate(&mut sim, plan)?;
    for slice in 1..=SLICES {
        sim.run_until(slice_end(plan.duration, slice));
        progress(sim.now());
    }
    Ok(Finished {
        table: sim.table().clone(),
        trace_hash: sim.trace().hash(),
        population: sim.population(),
        counts: sim.counts().clone(),
    })
}

/// Where slice `slice` of `SLICES` ends.
fn slice_end(duration: Duration, slice: u32) -> Duration {
    let nanos = duration.as_nanos() * u128::from(slice) / u128::from(SLICES);
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

/// The simulation the plan describes, without its agents: the registry's skills and the type's start skills,
/// the models, faults, processes and metrics.
fn build<A: Agent>(plan: &Plan) -> Result<Simulation<A>, SimFailure> {
    let catalog = catalog::<A>(plan)?;
    let actions: Vec<String> =
        catalog.iter().flat_map(|s| s.actions().iter().map(|a| a.spec().id.to_string())).collect();
    let mut builder = SimBuilder::<A>::new(plan.seed).faults(plan.faults.clone()).metrics(metrics::<A>(plan)?);
    for skill in catalog {
        builder = builder.skill(skill);
    }
    for (action, model) in &plan.models {
        builder = builder.model(action, model.clone()).map_err(SimFailure::Sim)?;
    }
    for process in &plan.processes {
        builder = builder.process(process.clone());
    }
    builder.build().map_err(|err| match err {
        SimError::UnknownAction(action) => {
            let closest = closest(action.as_str(), actions.iter().map(String::as_str)).map(str::to_owned);
            SimFailure::UnknownAction { action: action.to_string(), closest }
        }
        err => SimFailure::Sim(err),
    })
}

/// The registry's skills, then the type's start skills (which win over a skill of the same id, as in the
/// runtime); every skill the plan looks for must be among them.
fn catalog<A: Agent>(plan: &Plan) -> Result<Vec<Skill>, SimFailure> {
    let own = A::start_skills().map_err(|e| SimFailure::StartSkills(e.to_string()))?;
    let mut catalog: Vec<Skill> = plan.skills.clone();
    for (skill, _) in own {
        catalog.retain(|s| s.id() != skill.id());
        catalog.push(skill);
    }
    for skill in &plan.looked_for {
        if !catalog.iter().any(|s| s.id().as_str() == skill) {
            let ids: Vec<String> = catalog.iter().map(|s| s.id().to_string()).collect();
            let closest = closest(skill, ids.iter().map(String::as_str)).map(str::to_owned);
            return Err(SimFailure::UnknownSkill { skill: skill.clone(), closest });
        }
    }
    Ok(catalog)
}

fn metrics<A: Agent>(plan: &Plan) -> Result<Metrics<A>, SimFailure> {
    let mut metrics = Metrics::every(plan.every);
    for (name, measure) in &plan.metrics {
        let measure = measure.clone();
        metrics = metrics.metric(name, move |census| measure.of(census)).map_err(SimFailure::Sim)?;
    }
    Ok(metrics)
}

/// Adds every group's agents, in order, each with its policy and its group's start skills (those its type
/// does not mount already).
fn populate<A: Agent + Default>(sim: &mut Simulation<A>, plan: &Plan) -> Result<(), SimFailure> {
    for group in &plan.groups {
        let domain: A = match &group.config {
            serde_json::Value::Null => A::default(),
            config => serde_json::from_value(config.clone()).map_err(|err| SimFailure::Config {
                group: group.name.clone(),
                message: format!("its `config` is not a state of type `{}`: {err}", A::name()),
            })?,
        };
        for id in &group.ids {
            sim.add_with(id.clone(), domain.clone(), group.policy.clone(), group.max_in_flight)
                .map_err(SimFailure::Sim)?;
            for (skill, options) in &group.skills {
                if !sim.state(id).is_some_and(|state| state.is_mounted(skill)) {
                    sim.mount(id, skill, options.clone()).map_err(SimFailure::Sim)?;
                }
            }
        }
    }
    Ok(())
}

impl Measure {
    /// The measure at one sample.
    fn of<A: Agent>(&self, census: &Census<'_, A>) -> f64 {
        let counts = census.counts;
        let population = census.agents.len() as f64;
        match self {
            Measure::Population => population,
            Measure::Steps => counts.steps as f64,
            Measure::Completed => counts.completed as f64,
            Measure::Failed => counts.failed as f64,
            Measure::Blocked => counts.blocked as f64,
            Measure::Refused => counts.refused as f64,
            Measure::Faults => counts.faults as f64,
            Measure::WithSkill { skill, share: false } => census.with_skill(skill) as f64,
            Measure::WithSkill { skill, share: true } if population > 0.0 => {
                census.with_skill(skill) as f64 / population
            }
            Measure::WithSkill { .. } => 0.0,
            Measure::State { pointer, of } => of.fold(census.agents.iter().filter_map(|a| number(&a.domain, pointer))),
        }
    }
}

/// The number at `pointer` in a state (`true` is 1, `false` 0), if there is one.
fn number(domain: &impl Serialize, pointer: &str) -> Option<f64> {
    let value = serde_json::to_value(domain).ok()?;
    let found = value.pointer(pointer)?;
    found.as_f64().or_else(|| found.as_bool().map(|b| if b { 1.0 } else { 0.0 }))
}

impl Of {
    /// The agents' numbers folded (0 when there are none).
    fn fold(self, numbers: impl Iterator<Item = f64>) -> f64 {
        let (mut count, mut sum, mut least, mut most) = (0u64, 0.0, f64::INFINITY, f64::NEG_INFINITY);
        for n in numbers {
            count += 1;
            sum += n;
            least = least.min(n);
            most = most.max(n);
        }
        match self {
            _ if count == 0 => 0.0,
            Of::Sum => sum,
            Of::Mean => sum / count as f64,
            Of::Min => least,
            Of::Max => most,
        }
    }
}
