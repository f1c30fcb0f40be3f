//! The table's columns and the plot: each metric a scenario names made into a [`Measure`] the simulator samples
//! (a count it keeps, agents with a skill, or a number in each agent's state folded over them), and the metrics
//! the plot draws. Each is checked at its place in the file.

use super::load::Checker;
use super::{MeasureTable, MetricEntry, Scenario};
use crate::simulation::{Measure, Of, Plot};
use agentry::id::SkillId;
use std::ops::Range;
use std::path::Path;

/// The measures a metric may name, and the defaults when `[metrics]` names none.
const MEASURES: [&str; 7] = ["population", "steps", "completed", "failed", "blocked", "refused", "faults"];
const DEFAULT_METRICS: [&str; 4] = ["population", "completed", "failed", "blocked"];

/// The table's columns, in the file's order (the defaults when `[metrics]` names none); each skill one looks
/// for goes to `skills`, with its place.
pub(super) fn metrics(
    scenario: &Scenario,
    checker: &mut Checker,
    skills: &mut Vec<(String, Range<usize>)>,
) -> Vec<(String, Measure)> {
    if scenario.metrics.is_empty() {
        return DEFAULT_METRICS.iter().filter_map(|name| named(name).map(|m| ((*name).to_owned(), m))).collect();
    }
    let mut metrics = Vec::new();
    for (name, entry) in &scenario.metrics {
        if name.get_ref() == "time" {
            checker.bad(name.span(), "`time` is the table's first column; give this metric another name");
            continue;
        }
        let measure = match entry.get_ref() {
            MetricEntry::Named(word) => named(word).or_else(|| {
                checker.unknown(entry.span(), "measure", word, &MEASURES);
                None
            }),
            MetricEntry::Table(table) => measured(table, entry.span(), checker, skills),
        };
        metrics.extend(measure.map(|m| (name.get_ref().clone(), m)));
    }
    metrics
}

fn named(word: &str) -> Option<Measure> {
    Some(match word {
        "population" => Measure::Population,
        "steps" => Measure::Steps,
        "completed" => Measure::Completed,
        "failed" => Measure::Failed,
        "blocked" => Measure::Blocked,
        "refused" => Measure::Refused,
        "faults" => Measure::Faults,
        _ => return None,
    })
}

fn measured(
    table: &MeasureTable,
    span: Range<usize>,
    checker: &mut Checker,
    skills: &mut Vec<(String, Range<usize>)>,
) -> Option<Measure> {
    match (&table.with_skill, &table.state) {
        (Some(skill), None) if table.of.is_none() => match SkillId::new(skill.as_str()) {
            Ok(id) => {
                skills.push((skill.clone(), span));
                Some(Measure::WithSkill { skill: id, share: table.share })
            }
            Err(err) => {
                checker.bad(span, format!("`{skill}` is not a skill id: {err}"));
                None
            }
        },
        (None, Some(pointer)) if !table.share => {
            if !pointer.is_empty() && !pointer.starts_with('/') {
                checker.bad(span, format!("`{pointer}` is not a JSON pointer; expected one such as `/learned`"));
                return None;
            }
            let of = match table.of.as_deref().unwrap_or("sum") {
                "sum" => Of::Sum,
                "mean" => Of::Mean,
                "min" => Of::Min,
                "max" => Of::Max,
                other => {
                    checker.unknown(span, "fold", other, &["sum", "mean", "min", "max"]);
                    return None;
                }
            };
            Some(Measure::State { pointer: pointer.clone(), of })
        }
        _ => {
            checker.bad(span, "expected `{ with_skill = \"...\" }` (with `share = true` for a share of the population) or `{ state = \"/pointer\" }` (with `of` = `sum`, `mean`, `min` or `max`)");
            None
        }
    }
}

/// What the plot shows: the metrics `[plot]` names (every one by default), its title and axis.
pub(super) fn plot(path: &Path, scenario: &Scenario, metrics: &[(String, Measure)], checker: &mut Checker) -> Plot {
    let names: Vec<&str> = metrics.iter().map(|(name, _)| name.as_str()).collect();
    let mut columns: Vec<String> = Vec::new();
    for wanted in &scenario.plot.metrics {
        match names.iter().find(|n| **n == wanted.get_ref().as_str()) {
            Some(found) => columns.push((*found).to_owned()),
            None => checker.unknown(wanted.span(), "metric", wanted.get_ref(), &names),
        }
    }
    if scenario.plot.metrics.is_empty() {
        columns = names.iter().map(|n| (*n).to_owned()).collect();
    }
    let stem = || path.file_stem().map_or_else(|| "simulation".to_owned(), |s| s.to_string_lossy().into_owned());
    Plot {
        title: scenario.plot.title.clone().unwrap_or_else(stem),
        y_label: scenario.plot.y_label.clone().unwrap_or_else(|| "value".to_owned()),
        columns,
    }
}
