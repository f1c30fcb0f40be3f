//! What an agent may spend and how often it may run an action: budgets and rate limits as plain data, part of
//! its [`Policy`](crate::policy::Policy). The [`Meter`](crate::meter::Meter) counts them.

use crate::pattern::Pattern;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::num::NonZeroU32;
use std::time::Duration;

/// How much the runs of an agent whose action matches `actions` may cost within any `window` (a sliding
/// window, ending now). Costs are what outcomes report, a model call's tokens included.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Budget {
    /// The actions it counts and guards (`**` for all of them).
    pub actions: Pattern,
    /// The most the matching runs may cost within the window.
    pub limit: f64,
    /// The window's length.
    #[serde(with = "crate::duration_ms")]
    #[schemars(with = "u64")]
    pub window: Duration,
    /// What a run meets once the budget is spent.
    #[serde(default)]
    pub when_spent: WhenSpent,
}

// A budget's limit is a number a policy compares as it is; a NaN limit (never spent) equals nothing, itself
// included, which only makes two such policies unequal.
impl Eq for Budget {}

/// What a run meets once its budget is spent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WhenSpent {
    /// Refused with [`ActionError::BudgetExceeded`](crate::action::ActionError::BudgetExceeded).
    #[default]
    Refuse,
    /// Paused for approval: an approver may let it run over the budget.
    Ask,
}

/// How often an agent may run the actions matching `actions`: `runs` per `per`, as a burst of `runs` that
/// refills at one run every `per / runs` (GCRA). A run counts against the first rate limit whose pattern
/// matches its action, so list narrow patterns before `**`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RateLimit {
    /// The actions it limits, together (`**` for all of them).
    pub actions: Pattern,
    /// How many runs per window, and the largest burst.
    pub runs: NonZeroU32,
    /// The window.
    #[serde(with = "crate::duration_ms")]
    #[schemars(with = "u64")]
    pub per: Duration,
    /// What a run over the limit meets.
    #[serde(default)]
    pub when_limited: WhenLimited,
}

/// What a run over its rate limit meets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WhenLimited {
    /// Refused with [`ActionError::RateLimited`](crate::action::ActionError::RateLimited).
    #[default]
    Refuse,
    /// Held until the limit lets it through (it counts against `limits.queued_runs`).
    Queue,
}
