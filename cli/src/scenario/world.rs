//! The world a scenario puts around its agents, in the simulator's values: processes of signals (whom they reach,
//! whom they name as contacts), action models and faults, each checked at its place in the file, by the
//! simulator's own checks where it has them.

use super::load::Checker;
use super::{ActionModelSection, ApprovalsSection, ContactsSection, FaultsSection, LatencySection};
use super::{ProcessSection, Scenario, WhoSection};
use crate::simulation::Group;
use agentry::action::ErrorClass;
use agentry::id::{AgentId, SkillId};
use agentry_sim::{ActionModel, Approvals, Contacts, Faults, Latency, Network, Process, SimBuilder, Who};
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;
use toml::Spanned;

const NETWORKS: [&str; 4] = ["well_mixed", "random", "small_world", "scale_free"];
const CLASSES: [&str; 10] = [
    "validation",
    "transient",
    "timeout",
    "critical",
    "denied",
    "cancelled",
    "interrupted",
    "reported",
    "budget_exceeded",
    "rate_limited",
];
const LATENCIES: &str = "expected one of `{ fixed = \"1s\" }`, `{ mean = \"80ms\" }` (exponential), `{ low = \"10ms\", high = \"50ms\" }` (uniform), `{ median = \"300ms\", sigma = 0.5 }` (log-normal)";

/// The scenario's processes; each skill one looks for goes to `skills`, with its place.
pub(super) fn processes(
    scenario: &Scenario,
    groups: &[Group],
    checker: &mut Checker,
    skills: &mut Vec<(String, Range<usize>)>,
) -> Vec<Process> {
    let nodes: usize = groups.iter().map(|g| g.ids.len()).sum();
    let mut processes = Vec::new();
    for section in &scenario.processes {
        processes.extend(process(section, (groups, nodes, scenario.seed), checker, skills));
    }
    processes
}

fn process(
    section: &ProcessSection,
    (groups, nodes, seed): (&[Group], usize, u64),
    checker: &mut Checker,
    skills: &mut Vec<(String, Range<usize>)>,
) -> Option<Process> {
    let kind = section.kind.get_ref();
    let rate = checker.rate(&section.rate, &format!("the rate of process `{kind}`"))?;
    let mut process = match Process::new(kind, rate) {
        Ok(process) => process,
        Err(err) => {
            checker.bad(section.kind.span(), err.to_string());
            return None;
        }
    };
    if let Some(data) = &section.data {
        process = match process.data(serde_json::to_value(data.get_ref()).unwrap_or_default()) {
            Ok(process) => process,
            Err(err) => {
                checker.bad(data.span(), err.to_string());
                return None;
            }
        };
    }
    if let Some(who) = &section.who {
        process = process.reaching(reaching(who, groups, checker, skills)?);
    }
    if let Some(contacts) = &section.contacts {
        process = process.with_contacts(contacts_of(contacts, nodes, seed, checker)?);
    }
    Some(process)
}

fn reaching(
    who: &Spanned<WhoSection>,
    groups: &[Group],
    checker: &mut Checker,
    skills: &mut Vec<(String, Range<usize>)>,
) -> Option<Who> {
    let section = who.get_ref();
    match (&section.with_skill, &section.group, &section.agents) {
        (Some(skill), None, None) => match SkillId::new(skill.get_ref().as_str()) {
            Ok(id) => {
                skills.push((skill.get_ref().clone(), skill.span()));
                Some(Who::WithSkill(id))
            }
            Err(err) => {
                checker.bad(skill.span(), format!("`{}` is not a skill id: {err}", skill.get_ref()));
                None
            }
        },
        (None, Some(group), None) => match groups.iter().find(|g| &g.name == group.get_ref()) {
            Some(found) => Some(Who::Agents(found.ids.clone())),
            None => {
                let names: Vec<&str> = groups.iter().map(|g| g.name.as_str()).collect();
                checker.unknown(group.span(), "group", group.get_ref(), &names);
                None
            }
        },
        (None, None, Some(agents)) => {
            let mut ids = Vec::new();
            for agent in agents {
                match agent_of(groups, agent.get_ref()) {
                    Some(id) => ids.push(id.clone()),
                    None => checker.bad(
                        agent.span(),
                        format!(
                            "no agent `{}` in the scenario; agents are named `<group>-<n>`, from `<group>-0`",
                            agent.get_ref()
                        ),
                    ),
                }
            }
            (ids.len() == agents.len()).then_some(Who::Agents(ids))
        }
        _ => {
            let message =
                "expected exactly one of `{ with_skill = \"...\" }`, `{ group = \"...\" }`, `{ agents = [\"...\"] }`";
            checker.bad(who.span(), message);
            None
        }
    }
}

/// The agent named `wanted` (`<group>-<n>`), if the scenario has it.
fn agent_of<'a>(groups: &'a [Group], wanted: &str) -> Option<&'a AgentId> {
    groups.iter().find_map(|group| {
        let n: usize = wanted.strip_prefix(group.name.as_str())?.strip_prefix('-')?.parse().ok()?;
        group.ids.get(n).filter(|id| id.as_str() == wanted)
    })
}

fn contacts_of(section: &ContactsSection, nodes: usize, seed: u64, checker: &mut Checker) -> Option<Contacts> {
    let network = &section.network;
    let seed = section.seed.unwrap_or(seed);
    let missing = |key: &str| format!("a `{}` network needs `{key}`", network.get_ref());
    let made = match network.get_ref().as_str() {
        "well_mixed" => return Some(Contacts::WellMixed),
        "random" => match section.mean_degree {
            // A mean degree past what the agents can have would ask for more links than there are pairs.
            Some(mean) if mean > nodes.saturating_sub(1) as f64 => {
                Err(format!("a mean degree of {mean} is more than {nodes} agents can have"))
            }
            Some(mean) => Network::random(nodes, mean, seed).map_err(|e| e.to_string()),
            None => Err(missing("mean_degree")),
        },
        "small_world" => match (section.degree, section.rewire) {
            (Some(degree), Some(rewire)) => {
                Network::small_world(nodes, degree, rewire, seed).map_err(|e| e.to_string())
            }
            (None, _) => Err(missing("degree")),
            (_, None) => Err(missing("rewire")),
        },
        "scale_free" => match section.links {
            Some(links) => Network::scale_free(nodes, links, seed).map_err(|e| e.to_string()),
            None => Err(missing("links")),
        },
        other => {
            checker.unknown(network.span(), "network", other, &NETWORKS);
            return None;
        }
    };
    match made {
        Ok(network) => Some(Contacts::Network(Arc::new(network))),
        Err(message) => {
            checker.bad(network.span(), message);
            None
        }
    }
}

/// The scenario's action models; each modelled action goes to `places`, at its key.
pub(super) fn models(
    scenario: &Scenario,
    checker: &mut Checker,
    places: &mut Vec<(String, Range<usize>)>,
) -> Vec<(String, ActionModel)> {
    let mut models = Vec::new();
    for (action, section) in &scenario.models {
        let Some(model) = model(action, section, checker) else { continue };
        // The simulator's own checks: an action id, a latency it can draw, failure shares adding up to 1 at most.
        match SimBuilder::<()>::new(0).model(action.get_ref(), model.clone()) {
            Ok(_) => {
                places.push((action.get_ref().clone(), action.span()));
                models.push((action.get_ref().clone(), model));
            }
            Err(err) => checker.bad(action.span(), err.to_string()),
        }
    }
    models
}

fn model(action: &Spanned<String>, section: &ActionModelSection, checker: &mut Checker) -> Option<ActionModel> {
    let mut model = match (&section.latency, &section.waits_for) {
        (Some(_), Some(_)) => {
            let message =
                format!("the model of `{}` has `latency` and `waits_for`; expected one of them", action.get_ref());
            checker.bad(action.span(), message);
            return None;
        }
        (None, Some(field)) => ActionModel::waits_for(field),
        (Some(latency), None) => ActionModel::new(latency_of(latency, checker)?),
        (None, None) => ActionModel::new(Latency::ZERO),
    };
    let mut whole = true;
    for (class, share) in &section.fails {
        let what = format!("the share of `{}` runs failing `{}`", action.get_ref(), class.get_ref());
        match (error_class(class, checker), checker.share(share, &what)) {
            (Some(class), Some(share)) => model = model.fails(class, share),
            _ => whole = false,
        }
    }
    if let Some(output) = &section.output {
        let output = serde_json::to_value(output).unwrap_or_default();
        model = model.output(move |_, _| output.clone());
    }
    whole.then_some(model)
}

fn error_class(name: &Spanned<String>, checker: &mut Checker) -> Option<ErrorClass> {
    let parsed = serde_json::from_value::<ErrorClass>(serde_json::Value::String(name.get_ref().clone())).ok();
    if parsed.is_none() {
        checker.unknown(name.span(), "error class", name.get_ref(), &CLASSES);
    }
    parsed
}

/// A latency distribution as written; whether the simulator can draw from it is checked where it is used.
fn latency_of(latency: &Spanned<LatencySection>, checker: &mut Checker) -> Option<Latency> {
    let l = latency.get_ref();
    match (&l.fixed, &l.mean, &l.low, &l.high, &l.median, l.sigma) {
        (Some(fixed), None, None, None, None, None) => Some(Latency::Fixed(checker.duration(fixed)?)),
        (None, Some(mean), None, None, None, None) => Some(Latency::Exponential { mean: checker.duration(mean)? }),
        (None, None, Some(low), Some(high), None, None) => {
            let (low, high) = (checker.duration(low), checker.duration(high));
            Some(Latency::Uniform { low: low?, high: high? })
        }
        (None, None, None, None, Some(median), Some(sigma)) => {
            Some(Latency::LogNormal { median: checker.duration(median)?, sigma })
        }
        _ => {
            checker.bad(latency.span(), format!("not a latency distribution; {LATENCIES}"));
            None
        }
    }
}

/// The scenario's faults (each off unless given).
pub(super) fn faults(section: &FaultsSection, checker: &mut Checker) -> Faults {
    let mut share = |value: &Option<Spanned<f64>>, what: &str| {
        value.as_ref().and_then(|v| checker.share(v, &format!("`{what}`"))).unwrap_or(0.0)
    };
    let mut faults = Faults {
        action_failure: share(&section.action_failure, "action_failure"),
        action_timeout: share(&section.action_timeout, "action_timeout"),
        message_drop: share(&section.message_drop, "message_drop"),
        message_duplicate: share(&section.message_duplicate, "message_duplicate"),
        ..Faults::default()
    };
    faults.crash_rate = section.crash_rate.as_ref().and_then(|r| checker.rate(r, "`crash_rate`")).unwrap_or(0.0);
    if faults.action_failure + faults.action_timeout > 1.0
        && let Some(timeout) = &section.action_timeout
    {
        checker.bad(timeout.span(), "`action_failure` and `action_timeout` add up to more than 1; expected 1 at most");
    }
    if let Some(approvals) = &section.approvals {
        faults.approvals = approvals_of(approvals, checker);
    }
    if let Some(delay) = &section.message_delay {
        faults.message_delay = latency_of(delay, checker);
        // The simulator's own check of the distribution (a zero mean, bounds the wrong way round).
        let alone = Faults { message_delay: faults.message_delay.clone(), ..Faults::default() };
        if let Err(err) = SimBuilder::<()>::new(0).faults(alone).build() {
            checker.bad(delay.span(), err.to_string());
        }
    }
    faults
}

fn approvals_of(section: &ApprovalsSection, checker: &mut Checker) -> Approvals {
    let after = section.after.as_ref().and_then(|a| checker.duration(a)).unwrap_or(Duration::ZERO);
    match section.grant.as_ref().and_then(|g| checker.share(g, "`approvals.grant`")) {
        Some(grant) if grant <= 0.0 => Approvals::Deny { after },
        Some(grant) if grant < 1.0 => Approvals::Random { grant, after },
        // All granted: the default, and what a wrong share (reported) leaves.
        _ => Approvals::Grant { after },
    }
}
