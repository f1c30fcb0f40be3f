//! An agent's [`Policy`] from the manifest: the top-level `[permissions]`, `[budgets]` and `[rate_limits]`
//! with the agent's own added (the agent's rate limits first, so its narrower ones count before the shared).

use super::diagnostic::{Code, ManifestError, Source};
use super::{AgentSection, BudgetSection, Manifest, Permissions, RateSection, WhenLimitedText, WhenSpentText};
use agentry::action::{Capability, Risk};
use agentry::pattern::Pattern;
use agentry::policy::{Budget, Grants, Policy, RateLimit, WhenLimited, WhenSpent};
use indexmap::IndexMap;
use std::num::NonZeroU32;
use toml::Spanned;

/// A wrong value, with where it is.
pub type Wrong = (std::ops::Range<usize>, String);

/// The policy of `agent` under `manifest`.
pub fn for_agent(manifest: &Manifest, agent: &AgentSection) -> Result<Policy, Wrong> {
    let mut policy = Policy::default();
    apply_permissions(&mut policy, &manifest.permissions)?;
    let (threshold, timeout) = (policy.approval_at, policy.approval_timeout);
    apply_permissions(&mut policy, &agent.permissions)?;
    // An agent's own threshold and timeout may only be stricter than the shared ones.
    if manifest.permissions.approval_at.is_some() {
        policy.approval_at = match (threshold, policy.approval_at) {
            (Some(shared), Some(own)) => Some(shared.min(own)),
            (shared, own) => shared.or(own),
        };
    }
    if manifest.permissions.approval_timeout.is_some() {
        policy.approval_timeout = match (timeout, policy.approval_timeout) {
            (Some(shared), Some(own)) => Some(shared.min(own)),
            (shared, own) => shared.or(own),
        };
    }
    for (pattern, budget) in agent.budgets.iter().chain(&manifest.budgets) {
        policy.budgets.push(budget_of(pattern, budget)?);
    }
    // The shared limits first: a run counts against the first that matches, and an agent's own must not hide them.
    for (pattern, rate) in manifest.rate_limits.iter().chain(&agent.rate_limits) {
        policy.rate_limits.push(rate_of(pattern, rate)?);
    }
    Ok(policy)
}

/// Every value of a layer that has the right type but is still wrong (a pattern, a capability, a risk, a
/// duration), as diagnostics.
pub fn check(source: &Source, manifest: &Manifest) -> Vec<ManifestError> {
    let mut errors = Vec::new();
    let mut scratch = Policy::default();
    let mut permissions = vec![&manifest.permissions];
    permissions.extend(manifest.agents.values().map(|a| &a.permissions));
    for p in permissions {
        if let Err((span, message)) = apply_permissions(&mut scratch, p) {
            errors.push(ManifestError::at(Code::BadValue, source, span, message));
        }
    }
    let mut budgets: Vec<&IndexMap<Spanned<String>, BudgetSection>> = vec![&manifest.budgets];
    budgets.extend(manifest.agents.values().map(|a| &a.budgets));
    for (pattern, budget) in budgets.into_iter().flatten() {
        if let Err((span, message)) = budget_of(pattern, budget) {
            errors.push(ManifestError::at(Code::BadValue, source, span, message));
        }
    }
    let mut rates: Vec<&IndexMap<Spanned<String>, RateSection>> = vec![&manifest.rate_limits];
    rates.extend(manifest.agents.values().map(|a| &a.rate_limits));
    for (pattern, rate) in rates.into_iter().flatten() {
        if let Err((span, message)) = rate_of(pattern, rate) {
            errors.push(ManifestError::at(Code::BadValue, source, span, message));
        }
    }
    errors
}

/// A pattern as written, or why it is not one.
pub fn pattern(text: &Spanned<String>) -> Result<Pattern, Wrong> {
    Pattern::new(text.get_ref().as_str()).map_err(|err| (text.span(), err.to_string()))
}

fn apply_permissions(policy: &mut Policy, p: &Permissions) -> Result<(), Wrong> {
    for rule in &p.deny {
        policy.deny_actions.push(pattern(rule)?);
    }
    for rule in &p.ask {
        policy.ask_actions.push(pattern(rule)?);
    }
    for rule in &p.allow {
        policy.unasked_actions.push(pattern(rule)?);
    }
    for grant in &p.grants {
        let name = grant.get_ref().as_str();
        if name == "*" {
            policy.grants = Grants::All;
            continue;
        }
        if name.is_empty()
            || !name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
        {
            return Err((
                grant.span(),
                format!(
                    "`{name}` is not a capability; expected a name such as `fs`, `net`, `memory`, `spawn`, or `*` for all"
                ),
            ));
        }
        if let Grants::Only(set) = &mut policy.grants {
            set.insert(Capability::new(name));
        }
    }
    policy.allow_hosts.extend(p.hosts.iter().map(|h| h.to_ascii_lowercase()));
    if let Some(risk) = &p.approval_at {
        policy.approval_at = match risk.get_ref().as_str() {
            "low" => Some(Risk::Low),
            "medium" => Some(Risk::Medium),
            "high" => Some(Risk::High),
            "never" => None,
            other => {
                return Err((
                    risk.span(),
                    format!("`{other}` is not a risk; expected `low`, `medium`, `high` or `never`"),
                ));
            }
        };
    }
    if let Some(timeout) = &p.approval_timeout {
        policy.approval_timeout = Some(super::durations::parse(timeout)?);
    }
    if let Some(bytes) = p.drive_quota_bytes {
        policy.limits.drive_bytes = policy.limits.drive_bytes.min(bytes);
    }
    if let Some(files) = p.drive_quota_files {
        policy.limits.drive_files = policy.limits.drive_files.min(files);
    }
    Ok(())
}

fn budget_of(pattern_text: &Spanned<String>, budget: &BudgetSection) -> Result<Budget, Wrong> {
    if !(budget.limit.is_finite() && budget.limit >= 0.0) {
        return Err((
            pattern_text.span(),
            format!(
                "the budget for `{}` has limit {}; expected a number of 0 or more",
                pattern_text.get_ref(),
                budget.limit
            ),
        ));
    }
    Ok(Budget {
        actions: pattern(pattern_text)?,
        limit: budget.limit,
        window: super::durations::parse(&budget.window)?,
        when_spent: match budget.when_spent {
            WhenSpentText::Refuse => WhenSpent::Refuse,
            WhenSpentText::Ask => WhenSpent::Ask,
        },
    })
}

fn rate_of(pattern_text: &Spanned<String>, rate: &RateSection) -> Result<RateLimit, Wrong> {
    let runs = NonZeroU32::new(rate.runs).ok_or_else(|| {
        (
            pattern_text.span(),
            format!(
                "the rate limit for `{}` allows 0 runs; expected 1 or more (use `deny` to forbid an action)",
                pattern_text.get_ref()
            ),
        )
    })?;
    let per = super::durations::parse(&rate.per)?;
    if per.is_zero() {
        return Err((rate.per.span(), "a rate limit's window must be longer than zero".to_owned()));
    }
    Ok(RateLimit {
        actions: pattern(pattern_text)?,
        runs,
        per,
        when_limited: match rate.when_limited {
            WhenLimitedText::Refuse => WhenLimited::Refuse,
            WhenLimitedText::Queue => WhenLimited::Queue,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_limits_keep_the_file_order_and_an_agent_cannot_loosen_the_shared_threshold() {
        let text = "[permissions]\napproval_at = \"medium\"\n\n[rate_limits]\n\"http.*\" = { runs = 1, per = \"1s\" }\n\"**\" = { runs = 9, per = \"1s\" }\n\n[agents.a]\ntype = \"tools\"\n\n[agents.a.permissions]\napproval_at = \"never\"\n";
        let manifest: Manifest = toml::from_str(text).expect("it parses");
        let policy = for_agent(&manifest, &manifest.agents["a"]).expect("a policy");
        let order: Vec<&str> = policy.rate_limits.iter().map(|r| r.actions.as_str()).collect();
        assert_eq!(order, ["http.*", "**"], "the narrow limit written first counts first");
        assert_eq!(policy.approval_at, Some(Risk::Medium), "`never` on the agent does not lift the shared threshold");
    }
}
