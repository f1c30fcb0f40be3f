//! Budgets and rate limits: how much an agent may spend, and how often it may run an action, per time window.
//!
//! Pure and driven by the time it is given (the server gives the wall clock, the simulator its virtual time), so
//! the live runtime and the simulator meter runs alike. The rules are data in the agent's [`Policy`]; the
//! [`Meter`] is what they count: the cost of the runs that ended inside the widest budget window, and one GCRA
//! limiter (from `governor`) per rate limit. Spending comes back after a restart from the journal (every run's
//! record keeps its cost and when it ended); a rate limit starts afresh.

use crate::action::ActionError;
pub use crate::allowance::{Budget, RateLimit, WhenLimited, WhenSpent};
use crate::policy::Policy;
use governor::clock::{Clock, FakeRelativeClock};
use governor::middleware::NoOpMiddleware;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
use std::collections::VecDeque;
use std::num::NonZeroU32;
use std::time::Duration;

/// What the meter says of a run the policy lets through.
#[derive(Debug, Clone, PartialEq)]
pub enum Metered {
    /// It may run now (a rate limit's permit is taken).
    Pass,
    /// It needs approval first: a budget that asks is spent. The reason says which.
    Ask(String),
    /// Refused, with a typed error.
    Refuse(ActionError),
    /// Held until this much time has passed, then asked again.
    Wait(Duration),
}

type Limiter = RateLimiter<NotKeyed, InMemoryState, FakeRelativeClock, NoOpMiddleware<governor::nanos::Nanos>>;

/// What an agent's budgets and rate limits count. Pure: every call is given the time.
pub struct Meter {
    /// Cost of ended runs: when each ended, its action, what it cost, oldest first. Kept for the widest window.
    spent: VecDeque<(Duration, crate::id::ActionId, f64)>,
    /// One limiter per rate limit, in the policy's order, for the rules they were made for.
    limiters: Vec<(RateLimit, Limiter)>,
    /// The limiters' clock, moved on to the time each call is given (never backwards).
    clock: FakeRelativeClock,
    clock_at: Duration,
}

impl std::fmt::Debug for Meter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Meter").field("spent", &self.spent.len()).field("limiters", &self.limiters.len()).finish()
    }
}

impl Meter {
    /// A meter for `policy`'s rules, with nothing spent yet.
    pub fn new(policy: &Policy) -> Self {
        let mut meter =
            Self { spent: VecDeque::new(), limiters: Vec::new(), clock: Default::default(), clock_at: Duration::ZERO };
        meter.renew(policy);
        meter
    }

    /// Follows a new policy: spending is kept; a rate limit whose rule is unchanged keeps its state, a new or
    /// changed one starts full.
    pub fn renew(&mut self, policy: &Policy) {
        let mut old = std::mem::take(&mut self.limiters);
        for rule in &policy.rate_limits {
            let kept = old.iter().position(|(r, _)| r == rule).map(|i| old.swap_remove(i));
            let limiter = match kept {
                Some(pair) => pair,
                None => (rule.clone(), RateLimiter::direct_with_clock(quota(rule), self.clock.clone())),
            };
            self.limiters.push(limiter);
        }
    }

    /// Counts the cost of a run of `action` that ended at `at`.
    pub fn spend(&mut self, action: &crate::id::ActionId, cost: f64, at: Duration) {
        if !(cost.is_finite() && cost > 0.0) {
            return;
        }
        // Kept in time order: a late report goes where it belongs.
        let place = self.spent.iter().rposition(|(t, _, _)| *t <= at).map_or(0, |i| i + 1);
        self.spent.insert(place, (at, action.clone(), cost));
    }

    /// What the runs matching `budget` cost within its window ending at `now`.
    pub fn spent(&self, budget: &Budget, now: Duration) -> f64 {
        let from = now.saturating_sub(budget.window);
        self.spent
            .iter()
            .filter(|(at, action, _)| *at > from && *at <= now && budget.actions.matches(action.as_str()))
            .map(|(_, _, cost)| cost)
            .sum()
    }

    /// Whether a run of `action` may start at `now` under `policy`'s budgets and rate limits. `approved` is
    /// true for a run an approver let through already (a budget that asks then lets it run). Takes a rate
    /// limit's permit only when it answers [`Metered::Pass`].
    pub fn admit(&mut self, policy: &Policy, action: &str, now: Duration, approved: bool) -> Metered {
        self.forget_before(policy, now);
        for budget in policy.budgets.iter().filter(|b| b.actions.matches(action)) {
            let spent = self.spent(budget, now);
            if spent >= budget.limit {
                let reason = format!(
                    "action `{action}` falls under the budget for `{}`: {spent} spent of {} within {}ms",
                    budget.actions,
                    budget.limit,
                    budget.window.as_millis()
                );
                match budget.when_spent {
                    WhenSpent::Refuse => {
                        return Metered::Refuse(ActionError::BudgetExceeded {
                            reason: format!("{reason}; it runs again once older runs leave the window"),
                        });
                    }
                    WhenSpent::Ask if !approved => return Metered::Ask(reason),
                    WhenSpent::Ask => {}
                }
            }
        }
        self.move_clock(now);
        // A run counts against the first rate limit that matches it, as the first matching permission rule
        // decides: so a refusal never takes a permit it does not use.
        let Some((rule, limiter)) = self.limiters.iter().find(|(rule, _)| rule.actions.matches(action)) else {
            return Metered::Pass;
        };
        let Err(not_until) = limiter.check() else { return Metered::Pass };
        let wait = not_until.wait_time_from(self.clock.now());
        match rule.when_limited {
            WhenLimited::Queue => Metered::Wait(wait),
            WhenLimited::Refuse => Metered::Refuse(ActionError::RateLimited {
                reason: format!(
                    "action `{action}` falls under the rate limit for `{}` ({} runs per {}ms); the next run is let \
                     through in {}ms",
                    rule.actions,
                    rule.runs,
                    rule.per.as_millis(),
                    wait.as_millis().max(1)
                ),
            }),
        }
    }

    /// Drops costs older than the widest budget window.
    fn forget_before(&mut self, policy: &Policy, now: Duration) {
        let widest = policy.budgets.iter().map(|b| b.window).max().unwrap_or_default();
        let from = now.saturating_sub(widest);
        while self.spent.front().is_some_and(|(at, _, _)| *at <= from) {
            self.spent.pop_front();
        }
    }

    fn move_clock(&mut self, now: Duration) {
        if now > self.clock_at {
            self.clock.advance(now - self.clock_at);
            self.clock_at = now;
        }
    }
}

fn quota(rule: &RateLimit) -> Quota {
    let every = (rule.per / rule.runs.get()).max(Duration::from_nanos(1));
    Quota::with_period(every).unwrap_or_else(|| Quota::per_second(NonZeroU32::MIN)).allow_burst(rule.runs)
}

#[cfg(test)]
mod tests;
