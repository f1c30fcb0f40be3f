//! A scenario, the file `agentry sim` runs: a seed and a duration, groups of agents of one registered type (their
//! start skills and policy written as an agent of `agentry.toml` writes them), processes of signals, action
//! models, faults, the metrics sampled into a table, and the plot. This module is the file's shape (every key,
//! with its default); [`load`] reads one, checks it with the manifest's own checks and diagnostics (file, line,
//! column, the closest valid key) and turns it into a [`Plan`](crate::simulation::Plan) of the simulator's
//! values, which [`crate::simulation`] runs.

mod columns;
mod load;
mod plan;
mod world;

pub(crate) use load::load;
pub(crate) use plan::Places;

use crate::manifest::{BudgetSection, Permissions, RateSection, SkillEntry};
use indexmap::IndexMap;
use serde::Deserialize;
use toml::Spanned;

/// A whole scenario file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// The seed: the same seed and scenario give the same run, to the trace hash.
    pub seed: u64,
    /// How long to simulate, in virtual time (`100s`, `10m`, `2h`).
    pub duration: Spanned<String>,
    /// How often the metrics are sampled, from time 0 (default: a hundredth of `duration`).
    #[serde(default)]
    pub sample_every: Option<Spanned<String>>,
    /// The agents, by group, in the file's order: `count` agents named `<group>-0`, `<group>-1`, … All groups
    /// are of one agent type.
    pub agents: IndexMap<Spanned<String>, GroupSection>,
    /// What every agent may do, as the manifest's `[permissions]` (a group's own add to it).
    #[serde(default)]
    pub permissions: Permissions,
    /// What every agent may spend, as the manifest's `[budgets]`.
    #[serde(default)]
    pub budgets: IndexMap<Spanned<String>, BudgetSection>,
    /// How often every agent may run actions, as the manifest's `[rate_limits]`.
    #[serde(default)]
    pub rate_limits: IndexMap<Spanned<String>, RateSection>,
    /// Signals reaching agents at random times (`[[processes]]`), in the file's order.
    #[serde(default)]
    pub processes: Vec<ProcessSection>,
    /// What actions do in place of their code, by action id (`[models."memory.recall"]`).
    #[serde(default)]
    pub models: IndexMap<Spanned<String>, ActionModelSection>,
    /// The faults injected (all off by default).
    #[serde(default)]
    pub faults: FaultsSection,
    /// The table's columns, by name, in the file's order (default: `population`, `completed`, `failed`,
    /// `blocked`).
    #[serde(default)]
    pub metrics: IndexMap<Spanned<String>, Spanned<MetricEntry>>,
    /// The SVG plot of the table.
    #[serde(default)]
    pub plot: PlotSection,
}

/// `[agents.<group>]`: the keys of a manifest's agent that a simulation uses, and how many of them.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupSection {
    /// The agent type: one the binary registers (`tools`, or a user's own).
    #[serde(rename = "type")]
    pub kind: Spanned<String>,
    /// How many agents (default 1).
    #[serde(default = "one")]
    pub count: Spanned<u64>,
    /// Skills mounted on each when it starts, in order, each a name or `{ name, options }`.
    #[serde(default)]
    pub skills: Vec<Spanned<SkillEntry>>,
    /// The agents' initial state, read as the agent type (default: the type's `Default`).
    #[serde(default)]
    pub config: Option<toml::Value>,
    /// The most runs each has in flight at once; more wait in a queue (default 64).
    #[serde(default)]
    pub max_in_flight: Option<usize>,
    /// What these agents may do, on top of the top-level `[permissions]`.
    #[serde(default)]
    pub permissions: Permissions,
    /// What these agents may spend, on top of the top-level `[budgets]`.
    #[serde(default)]
    pub budgets: IndexMap<Spanned<String>, BudgetSection>,
    /// How often these agents may run actions, after the top-level `[rate_limits]`.
    #[serde(default)]
    pub rate_limits: IndexMap<Spanned<String>, RateSection>,
}

fn one() -> Spanned<u64> {
    Spanned::new(0..0, 1)
}

/// `[[processes]]`: signals of one kind reaching each agent at a rate, in virtual time.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessSection {
    /// The signals' kind.
    pub kind: Spanned<String>,
    /// How many per agent per second of virtual time, on average (a Poisson process).
    pub rate: Spanned<f64>,
    /// Which agents: `{ with_skill = "..." }`, `{ group = "..." }` or `{ agents = ["..."] }` (default: all).
    #[serde(default)]
    pub who: Option<Spanned<WhoSection>>,
    /// Whom each signal names as a contact, in its data as `peer` (default: no one).
    #[serde(default)]
    pub contacts: Option<ContactsSection>,
    /// The signals' data: a table (a contact is added to it as `peer`).
    #[serde(default)]
    pub data: Option<Spanned<toml::Value>>,
}

/// Which agents a process reaches: exactly one key.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WhoSection {
    /// The agents with this skill mounted.
    #[serde(default)]
    pub with_skill: Option<Spanned<String>>,
    /// The agents of this group.
    #[serde(default)]
    pub group: Option<Spanned<String>>,
    /// These agents, by id (`<group>-<n>`).
    #[serde(default)]
    pub agents: Option<Vec<Spanned<String>>>,
}

/// Whom a process's signals name as a contact.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContactsSection {
    /// `well_mixed` (any other agent), `random` (Erdős–Rényi, with `mean_degree`), `small_world`
    /// (Watts–Strogatz, with `degree` and `rewire`) or `scale_free` (Barabási–Albert, with `links`).
    pub network: Spanned<String>,
    /// `random`: the mean number of contacts.
    #[serde(default)]
    pub mean_degree: Option<f64>,
    /// `small_world`: each agent's nearest neighbours on the ring (even).
    #[serde(default)]
    pub degree: Option<usize>,
    /// `small_world`: the share of links rewired at random.
    #[serde(default)]
    pub rewire: Option<f64>,
    /// `scale_free`: the links each new agent makes.
    #[serde(default)]
    pub links: Option<usize>,
    /// The network's own seed (default: the scenario's).
    #[serde(default)]
    pub seed: Option<u64>,
}

/// `[models."<action>"]`: an action's stand-in.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActionModelSection {
    /// How long a run takes (default: no time at all).
    #[serde(default)]
    pub latency: Option<Spanned<LatencySection>>,
    /// Instead of `latency`: the params field whose value (milliseconds) is how long a run takes, as a wait.
    #[serde(default)]
    pub waits_for: Option<String>,
    /// The share of runs that fail, by error class (`transient`, `timeout`, `critical`, ...).
    #[serde(default)]
    pub fails: IndexMap<Spanned<String>, Spanned<f64>>,
    /// What every run returns (default: nothing, `null`); it must meet the action's output schema.
    #[serde(default)]
    pub output: Option<toml::Value>,
}

/// A latency distribution: `{ fixed = "1s" }`, `{ mean = "80ms" }` (exponential), `{ low = "10ms", high =
/// "50ms" }` (uniform) or `{ median = "300ms", sigma = 0.5 }` (log-normal).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LatencySection {
    /// Always this long.
    #[serde(default)]
    pub fixed: Option<Spanned<String>>,
    /// Exponential, with this mean.
    #[serde(default)]
    pub mean: Option<Spanned<String>>,
    /// Uniform, from this …
    #[serde(default)]
    pub low: Option<Spanned<String>>,
    /// … to this.
    #[serde(default)]
    pub high: Option<Spanned<String>>,
    /// Log-normal, with this median …
    #[serde(default)]
    pub median: Option<Spanned<String>>,
    /// … and this spread of its logarithm.
    #[serde(default)]
    pub sigma: Option<f64>,
}

/// `[faults]`: every one off unless given.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultsSection {
    /// The share of action attempts that fail `transient`.
    #[serde(default)]
    pub action_failure: Option<Spanned<f64>>,
    /// The share of action attempts that time out.
    #[serde(default)]
    pub action_timeout: Option<Spanned<f64>>,
    /// The share of signals between agents that are lost.
    #[serde(default)]
    pub message_drop: Option<Spanned<f64>>,
    /// The share of signals between agents delivered twice.
    #[serde(default)]
    pub message_duplicate: Option<Spanned<f64>>,
    /// How long signals between agents take (a latency distribution; default: none).
    #[serde(default)]
    pub message_delay: Option<Spanned<LatencySection>>,
    /// Crashes per agent per second of virtual time.
    #[serde(default)]
    pub crash_rate: Option<Spanned<f64>>,
    /// How runs that wait for approval are decided (default: all granted at once).
    #[serde(default)]
    pub approvals: Option<ApprovalsSection>,
}

/// `approvals = { grant = 0.8, after = "30s" }`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalsSection {
    /// The share granted: 1 grants all (the default), 0 denies all.
    #[serde(default)]
    pub grant: Option<Spanned<f64>>,
    /// How long the approver takes (default `0s`).
    #[serde(default)]
    pub after: Option<Spanned<String>>,
}

/// A metric: a measure's name, or a table.
#[derive(Debug, Clone, Deserialize)]
#[serde(
    untagged,
    expecting = "a measure's name (`population`, `steps`, `completed`, `failed`, `blocked`, `refused`, `faults`), or a table `{ with_skill = \"...\" }` or `{ state = \"/pointer\", of = \"sum\" }`"
)]
pub enum MetricEntry {
    /// `"completed"`.
    Named(String),
    /// `{ with_skill = "gossip", share = true }`, `{ state = "/learned", of = "mean" }`.
    Table(MeasureTable),
}

/// A metric written as a table: exactly one of `with_skill` and `state`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeasureTable {
    /// How many agents have this skill mounted.
    #[serde(default)]
    pub with_skill: Option<String>,
    /// With `with_skill`: as a share of the population (0 to 1) rather than a count.
    #[serde(default)]
    pub share: bool,
    /// A number (or `true`/`false`) in each agent's state, as a JSON pointer (`/learned`).
    #[serde(default)]
    pub state: Option<String>,
    /// With `state`: `sum` (the default), `mean`, `min` or `max` over the agents.
    #[serde(default)]
    pub of: Option<String>,
}

/// `[plot]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlotSection {
    /// Its title (default: the scenario file's name).
    #[serde(default)]
    pub title: Option<String>,
    /// The label of its vertical axis (default `value`).
    #[serde(default)]
    pub y_label: Option<String>,
    /// The metrics drawn, by name (default: every one).
    #[serde(default)]
    pub metrics: Vec<Spanned<String>>,
}
