//! Data collection: metrics the user defines, sampled at an interval of virtual time into a table that
//! exports as CSV or JSON (and plots, see [`crate::plot`]).

use crate::error::SimError;
use agentry::agent::{Agent, AgentState};
use agentry::id::SkillId;
use serde::Serialize;
use std::path::Path;
use std::time::Duration;

/// Counts kept as the simulation runs, for metrics.
#[derive(Debug, Default, Clone)]
pub struct Counts {
    /// Signals consumed through `step`, in all.
    pub steps: u64,
    /// Runs that ended, by status: completed, failed, blocked.
    pub completed: u64,
    /// Runs that failed.
    pub failed: u64,
    /// Runs refused or denied.
    pub blocked: u64,
    /// Effects refused.
    pub refused: u64,
    /// Faults injected.
    pub faults: u64,
}

/// What a metric sees at a sample: every live agent's state, and the simulation's counts.
pub struct Census<'a, A: Agent> {
    /// The live agents' states.
    pub agents: Vec<&'a AgentState<A>>,
    /// The counts so far.
    pub counts: &'a Counts,
    /// How many live agents have each skill the simulator tracks (the skills its processes look for).
    tracked: &'a [(&'a SkillId, usize)],
}

impl<A: Agent> Census<'_, A> {
    /// How many agents have `skill` mounted.
    pub fn with_skill(&self, skill: &SkillId) -> usize {
        if let Some((_, count)) = self.tracked.iter().find(|(tracked, _)| *tracked == skill) {
            return *count;
        }
        self.agents.iter().filter(|a| a.is_mounted(skill)).count()
    }

    /// How many agents' domain state satisfies `test`.
    pub fn count(&self, test: impl Fn(&A) -> bool) -> usize {
        self.agents.iter().filter(|a| test(&a.domain)).count()
    }
}

type MetricFn<A> = Box<dyn Fn(&Census<'_, A>) -> f64 + Send + Sync>;

/// The metrics to collect, and how often.
///
/// ```
/// use agentry_sim::Metrics;
/// use agentry::id::SkillId;
/// use std::time::Duration;
///
/// let gossip = SkillId::new("gossip").unwrap();
/// let metrics = Metrics::<()>::every(Duration::from_secs(1))
///     .metric("knowing", move |census| census.with_skill(&gossip) as f64).unwrap()
///     .metric("steps", |census| census.counts.steps as f64).unwrap();
/// assert!(metrics.clone_names().contains(&"knowing".to_owned()));
/// ```
pub struct Metrics<A: Agent> {
    pub(crate) every: Option<Duration>,
    defined: Vec<(String, MetricFn<A>)>,
}

impl<A: Agent> Default for Metrics<A> {
    fn default() -> Self {
        Self::new()
    }
}

impl<A: Agent> Metrics<A> {
    /// No metrics.
    pub fn new() -> Self {
        Self { every: None, defined: Vec::new() }
    }

    /// Metrics sampled at the start and then every `interval` of virtual time.
    pub fn every(interval: Duration) -> Self {
        Self { every: Some(interval.max(Duration::from_nanos(1))), defined: Vec::new() }
    }

    /// Adds a metric; a name used twice is an error.
    pub fn metric(
        mut self,
        name: &str,
        measure: impl Fn(&Census<'_, A>) -> f64 + Send + Sync + 'static,
    ) -> Result<Self, SimError> {
        if self.defined.iter().any(|(n, _)| n == name) {
            return Err(SimError::DuplicateMetric(name.to_owned()));
        }
        self.defined.push((name.to_owned(), Box::new(measure)));
        Ok(self)
    }

    /// The metrics' names, in order.
    pub fn clone_names(&self) -> Vec<String> {
        self.defined.iter().map(|(n, _)| n.clone()).collect()
    }

    pub(crate) fn sample<'a>(
        &self,
        at: Duration,
        agents: impl Iterator<Item = &'a AgentState<A>>,
        counts: &Counts,
        tracked: &[(&SkillId, usize)],
    ) -> Row {
        let census = Census { agents: agents.collect(), counts, tracked };
        Row { time: at.as_secs_f64(), values: self.defined.iter().map(|(_, measure)| measure(&census)).collect() }
    }
}

/// One sample: its virtual time in seconds and each metric's value.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// The time.
    pub time: f64,
    /// The values, in the metrics' order.
    pub values: Vec<f64>,
}

/// The samples of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Table {
    /// The metrics' names.
    pub columns: Vec<String>,
    /// The samples, in time order.
    pub rows: Vec<Row>,
}

impl Table {
    pub(crate) fn with_columns(columns: Vec<String>) -> Self {
        Self { columns, rows: Vec::new() }
    }

    pub(crate) fn push(&mut self, row: Row) {
        self.rows.push(row);
    }

    /// One metric over time, as `(time, value)` points (empty for an unknown name).
    pub fn series(&self, name: &str) -> Vec<(f64, f64)> {
        match self.columns.iter().position(|c| c == name) {
            Some(i) => self.rows.iter().map(|r| (r.time, r.values[i])).collect(),
            None => Vec::new(),
        }
    }

    /// The mean of a metric over the samples at or after `from` seconds (`None` without such samples).
    pub fn mean_after(&self, name: &str, from: f64) -> Option<f64> {
        let values: Vec<f64> = self.series(name).into_iter().filter(|(t, _)| *t >= from).map(|(_, v)| v).collect();
        (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
    }

    /// Writes the table as CSV: a `time` column, then one per metric.
    pub fn write_csv(&self, path: &Path) -> Result<(), SimError> {
        let failed = |e: csv::Error| SimError::Output { what: path.display().to_string(), message: e.to_string() };
        let mut writer = csv::Writer::from_path(path).map_err(failed)?;
        let mut header = vec!["time".to_owned()];
        header.extend(self.columns.iter().cloned());
        writer.write_record(&header).map_err(failed)?;
        for row in &self.rows {
            let mut record = vec![row.time.to_string()];
            record.extend(row.values.iter().map(f64::to_string));
            writer.write_record(&record).map_err(failed)?;
        }
        writer.flush().map_err(|e| SimError::Output { what: path.display().to_string(), message: e.to_string() })
    }

    /// The table as JSON: `{"columns": [...], "rows": [{"time": t, "values": [...]}, ...]}`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}
