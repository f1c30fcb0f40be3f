//! Policies: pure decisions about what an agent may mount and run.

pub use crate::allowance::{Budget, RateLimit, WhenLimited, WhenSpent};
use crate::contract::{ActionSpec, Capability, Risk};
use crate::id::SkillId;
use crate::pattern::Pattern;
use crate::target::Target;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// Which capabilities a policy grants.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Grants {
    /// Every capability.
    All,
    /// Only these.
    Only(BTreeSet<Capability>),
}

/// What an agent may do. The default allows every skill and action, grants no capabilities, and asks for
/// approval before high-risk runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Policy {
    /// Skills that may be mounted; `None` means any not denied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_skills: Option<BTreeSet<SkillId>>,
    /// Skills that may never be mounted.
    #[serde(default)]
    pub deny_skills: BTreeSet<SkillId>,
    /// Actions that may run, by id pattern; `None` means any not denied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_actions: Option<Vec<Pattern>>,
    /// Actions that may never run, by id pattern.
    #[serde(default)]
    pub deny_actions: Vec<Pattern>,
    /// Capabilities granted to the agent's actions.
    pub grants: Grants,
    /// Runs at or above this risk wait for approval; `None` never asks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_at: Option<Risk>,
    /// The risk to assume for some actions whatever their spec says (a remote tool's hints can lie).
    #[serde(default)]
    pub risk_overrides: BTreeMap<Pattern, Risk>,
    /// Hosts that network actions (capability `net`) may reach: a name (`api.example.com`), a wildcard for
    /// its subdomains (`*.example.com`), an IP address, or `*` for any host. Empty: none.
    #[serde(default)]
    pub allow_hosts: BTreeSet<String>,
    /// Whether network actions may reach loopback, private, link-local and the other special address ranges
    /// (see the `http` skill). Default `false`: only public addresses, or special ones listed by address in
    /// `allow_hosts`.
    #[serde(default)]
    pub allow_private_network: bool,
    /// How long a run may wait for approval before it is refused (`None`: for ever). Default: one hour.
    #[serde(default = "default_approval_timeout", with = "crate::duration_ms::option")]
    #[schemars(with = "Option<u64>")]
    pub approval_timeout: Option<Duration>,
    /// The agents it may emit signals to, by id pattern (ids read as dotted names: `team.*`, `**`); `None`
    /// means any. Its own parent is always allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emit_agents: Option<Vec<Pattern>>,
    /// The topics it may publish signals to, by pattern; `None` means any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emit_topics: Option<Vec<Pattern>>,
    /// Actions a caller outside the agent (`Runtime::invoke`, an MCP client) may not run, by pattern: by
    /// default the agent's own plumbing, `system.stop`, `system.schedule` and `system.cancel`, so no caller can
    /// end an agent for good or plant signals in it.
    #[serde(default = "default_deny_outside")]
    pub deny_outside: Vec<Pattern>,
    /// How much the agent may make the runtime keep or do at once.
    #[serde(default)]
    pub limits: Limits,
    /// Actions that always ask for approval, whatever their risk, by pattern (after `deny_actions`; before
    /// `unasked_actions`: the first of deny, ask, allow that matches decides).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ask_actions: Vec<Pattern>,
    /// Actions that run without asking for approval, whatever their risk, by pattern, unless a deny or ask
    /// pattern matched first. Capabilities are still checked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unasked_actions: Vec<Pattern>,
    /// What the agent's runs may cost per time window (see [`Budget`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub budgets: Vec<Budget>,
    /// How often the agent may run actions per time window (see [`RateLimit`]); a run counts against the first
    /// that matches its action.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rate_limits: Vec<RateLimit>,
}

/// How much an agent may make the runtime keep or do at once. Each limit, when reached, refuses with a typed
/// error that names it; none is ever exceeded quietly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct Limits {
    /// Signals scheduled and not yet fired (`system.schedule`, `Schedule` effects).
    pub schedules: usize,
    /// Jobs running at once (each also takes one of the runtime's job slots).
    pub running_jobs: usize,
    /// Jobs waiting for a slot.
    pub queued_jobs: usize,
    /// Runs waiting for one of the agent's in-flight slots.
    pub queued_runs: usize,
    /// Runs waiting for approval.
    pub awaiting_approval: usize,
    /// Signals kept for the agent while it is hibernated (and being thawed).
    pub kept_signals: usize,
    /// The most bytes an `http` action reads of a response body; a `max_bytes` asked above it is refused.
    pub http_max_bytes: u64,
    /// The most bytes `fs.read` reads of a file; a `max_bytes` asked above it is refused.
    pub read_max_bytes: u64,
    /// The bytes the `fs` skill's folder of the agent's drive may hold (what its writes may fill).
    pub drive_bytes: u64,
    /// The files (and folders) the `fs` skill's folder of the agent's drive may hold.
    pub drive_files: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            schedules: 1_000,
            running_jobs: 4,
            queued_jobs: 64,
            queued_runs: 4_096,
            awaiting_approval: 256,
            kept_signals: 10_000,
            http_max_bytes: 64 * 1024 * 1024,
            read_max_bytes: 64 * 1024 * 1024,
            drive_bytes: 1024 * 1024 * 1024,
            drive_files: 100_000,
        }
    }
}

impl Limits {
    /// Each limit the smaller of the two.
    #[must_use]
    pub fn narrowed_to(&self, other: &Limits) -> Limits {
        Limits {
            schedules: self.schedules.min(other.schedules),
            running_jobs: self.running_jobs.min(other.running_jobs),
            queued_jobs: self.queued_jobs.min(other.queued_jobs),
            queued_runs: self.queued_runs.min(other.queued_runs),
            awaiting_approval: self.awaiting_approval.min(other.awaiting_approval),
            kept_signals: self.kept_signals.min(other.kept_signals),
            http_max_bytes: self.http_max_bytes.min(other.http_max_bytes),
            read_max_bytes: self.read_max_bytes.min(other.read_max_bytes),
            drive_bytes: self.drive_bytes.min(other.drive_bytes),
            drive_files: self.drive_files.min(other.drive_files),
        }
    }

    /// The first limit that is higher than `other`'s, by name.
    pub fn above(&self, other: &Limits) -> Option<&'static str> {
        let pairs: [(&'static str, u64, u64); 10] = [
            ("schedules", self.schedules as u64, other.schedules as u64),
            ("running_jobs", self.running_jobs as u64, other.running_jobs as u64),
            ("queued_jobs", self.queued_jobs as u64, other.queued_jobs as u64),
            ("queued_runs", self.queued_runs as u64, other.queued_runs as u64),
            ("awaiting_approval", self.awaiting_approval as u64, other.awaiting_approval as u64),
            ("kept_signals", self.kept_signals as u64, other.kept_signals as u64),
            ("http_max_bytes", self.http_max_bytes, other.http_max_bytes),
            ("read_max_bytes", self.read_max_bytes, other.read_max_bytes),
            ("drive_bytes", self.drive_bytes, other.drive_bytes),
            ("drive_files", self.drive_files, other.drive_files),
        ];
        pairs.into_iter().find(|(_, mine, theirs)| mine > theirs).map(|(name, _, _)| name)
    }
}

/// What outside callers may not run unless a policy says otherwise: the agent's own plumbing.
fn default_deny_outside() -> Vec<Pattern> {
    ["system.stop", "system.schedule", "system.cancel"].into_iter().filter_map(|text| Pattern::new(text).ok()).collect()
}

/// How long a run waits for approval unless its policy says otherwise.
pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(3600);

fn default_approval_timeout() -> Option<Duration> {
    Some(DEFAULT_APPROVAL_TIMEOUT)
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            allow_skills: None,
            deny_skills: BTreeSet::new(),
            allow_actions: None,
            deny_actions: Vec::new(),
            grants: Grants::Only(BTreeSet::new()),
            approval_at: Some(Risk::High),
            risk_overrides: BTreeMap::new(),
            allow_hosts: BTreeSet::new(),
            allow_private_network: false,
            approval_timeout: default_approval_timeout(),
            emit_agents: None,
            emit_topics: None,
            deny_outside: default_deny_outside(),
            limits: Limits::default(),
            ask_actions: Vec::new(),
            unasked_actions: Vec::new(),
            budgets: Vec::new(),
            rate_limits: Vec::new(),
        }
    }
}

/// The policy's answer for one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunDecision {
    /// Run it.
    Allow,
    /// Ask for approval first; the run is blocked until then.
    NeedsApproval {
        /// The risk that asked for it.
        risk: Risk,
    },
    /// Refuse it.
    Deny {
        /// Which rule refused it.
        reason: String,
    },
}

impl Policy {
    /// A policy for code you trust: everything allowed, every capability granted, any host (the private network
    /// included), no approvals.
    pub fn trusted() -> Self {
        Self {
            grants: Grants::All,
            approval_at: None,
            allow_hosts: BTreeSet::from(["*".to_owned()]),
            allow_private_network: true,
            ..Self::default()
        }
    }

    /// Lets network actions reach a host (see [`Policy::allow_hosts`]).
    pub fn allow_host(mut self, host: impl Into<String>) -> Self {
        self.allow_hosts.insert(host.into().to_ascii_lowercase());
        self
    }

    /// Whether network actions may reach `host` (compared without case; a trailing dot is ignored).
    pub fn host_allowed(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.allow_hosts.iter().any(|allowed| {
            let allowed = allowed.trim_end_matches('.').to_ascii_lowercase();
            match allowed.strip_prefix("*.") {
                _ if allowed == "*" => true,
                Some(domain) => host.len() > domain.len() + 1 && host.ends_with(&format!(".{domain}")),
                None => host == allowed,
            }
        })
    }

    /// Grants a capability.
    pub fn grant(mut self, capability: Capability) -> Self {
        if let Grants::Only(set) = &mut self.grants {
            set.insert(capability);
        }
        self
    }

    /// Denies a skill.
    pub fn deny_skill(mut self, skill: SkillId) -> Self {
        self.deny_skills.insert(skill);
        self
    }

    /// Denies actions whose ids match a pattern.
    pub fn deny_action(mut self, pattern: Pattern) -> Self {
        self.deny_actions.push(pattern);
        self
    }

    /// Asks for approval before every run of an action matching `pattern`, whatever its risk.
    pub fn ask_action(mut self, pattern: Pattern) -> Self {
        self.ask_actions.push(pattern);
        self
    }

    /// Lets actions matching `pattern` run without approval, whatever their risk (unless denied or asked for
    /// first).
    pub fn unasked_action(mut self, pattern: Pattern) -> Self {
        self.unasked_actions.push(pattern);
        self
    }

    /// Adds a budget.
    pub fn budget(mut self, budget: Budget) -> Self {
        self.budgets.push(budget);
        self
    }

    /// Adds a rate limit (after those already there: a run counts against the first that matches).
    pub fn rate_limit(mut self, limit: RateLimit) -> Self {
        self.rate_limits.push(limit);
        self
    }

    /// Sets the risk from which approval is needed (`None`: never).
    pub fn approval_at(mut self, risk: Option<Risk>) -> Self {
        self.approval_at = risk;
        self
    }

    /// Lets network actions reach loopback, private and the other special address ranges (see
    /// [`Policy::allow_private_network`]).
    pub fn allow_private_network(mut self, allow: bool) -> Self {
        self.allow_private_network = allow;
        self
    }

    /// Sets how long a run may wait for approval before it is refused (`None`: for ever).
    pub fn approval_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.approval_timeout = timeout;
        self
    }

    /// Whether this policy is within `parent`'s: it allows nothing `parent` refuses. A child agent may get a
    /// policy of its own only if it is. Compared rule by rule, conservatively (patterns by their text):
    /// grants, allowed skills, actions and hosts are subsets of the parent's; its deny lists and risk
    /// overrides include the parent's, and any other override it adds assumes risk High (an override replaces
    /// an action's own risk, so a lower one could skip the parent's approvals); it asks for approval at the parent's risk or lower, and waits for one
    /// no longer. `Err` names the first rule that is broader.
    pub fn within(&self, parent: &Policy) -> Result<(), String> {
        match (&self.grants, &parent.grants) {
            (_, Grants::All) => {}
            (Grants::All, Grants::Only(_)) => return Err("it grants every capability".into()),
            (Grants::Only(mine), Grants::Only(theirs)) => {
                if let Some(extra) = mine.difference(theirs).next() {
                    return Err(format!("it grants capability `{}`", extra.as_str()));
                }
            }
        }
        if let Some(theirs) = &parent.allow_skills {
            match &self.allow_skills {
                None => return Err("it allows any skill".into()),
                Some(mine) => {
                    if let Some(extra) = mine.difference(theirs).next() {
                        return Err(format!("it allows skill `{extra}`"));
                    }
                }
            }
        }
        if let Some(missing) = parent.deny_skills.difference(&self.deny_skills).next() {
            return Err(format!("it does not deny skill `{missing}`"));
        }
        if let Some(theirs) = &parent.allow_actions {
            match &self.allow_actions {
                None => return Err("it allows any action".into()),
                Some(mine) => {
                    if let Some(extra) = mine.iter().find(|p| !theirs.contains(p)) {
                        return Err(format!("it allows actions matching `{extra}`"));
                    }
                }
            }
        }
        if let Some(missing) = parent.deny_actions.iter().find(|p| !self.deny_actions.contains(p)) {
            return Err(format!("it does not deny actions matching `{missing}`"));
        }
        match (self.approval_at, parent.approval_at) {
            (_, None) => {}
            (None, Some(_)) => return Err("it never asks for approval".into()),
            (Some(mine), Some(theirs)) if mine > theirs => {
                return Err(format!("it asks for approval only from risk {mine:?}, not {theirs:?}"));
            }
            _ => {}
        }
        if let Some(theirs) = parent.approval_timeout {
            match self.approval_timeout {
                None => return Err("its approvals never expire".into()),
                Some(mine) if mine > theirs => return Err(format!("its approvals wait {mine:?}, not {theirs:?}")),
                _ => {}
            }
        }
        for (pattern, risk) in &parent.risk_overrides {
            if self.risk_overrides.get(pattern).is_none_or(|mine| mine < risk) {
                return Err(format!("it does not assume risk {risk:?} for actions matching `{pattern}`"));
            }
        }
        // An override replaces an action's own risk, so one the parent does not have could lower it below the
        // parent's approval threshold: only the highest risk is safe to add.
        if let Some((pattern, risk)) = self
            .risk_overrides
            .iter()
            .find(|(pattern, risk)| !parent.risk_overrides.contains_key(*pattern) && **risk < Risk::High)
        {
            return Err(format!(
                "it assumes risk {risk:?} for actions matching `{pattern}`, which its parent does not override; a \
                 child may add only overrides at risk High"
            ));
        }
        for (what, mine, theirs) in
            [("agents", &self.emit_agents, &parent.emit_agents), ("topics", &self.emit_topics, &parent.emit_topics)]
        {
            if let Some(theirs) = theirs {
                match mine {
                    None => return Err(format!("it may emit to any of the {what}")),
                    Some(mine) => {
                        if let Some(extra) = mine.iter().find(|p| !theirs.contains(p)) {
                            return Err(format!("it may emit to {what} matching `{extra}`"));
                        }
                    }
                }
            }
        }
        if let Some(missing) = parent.deny_outside.iter().find(|p| !self.deny_outside.contains(p)) {
            return Err(format!("it lets outside callers run actions matching `{missing}`"));
        }
        if let Some(limit) = self.limits.above(&parent.limits) {
            return Err(format!("its limit `{limit}` is higher"));
        }
        if let Some(missing) = parent.ask_actions.iter().find(|p| !self.ask_actions.contains(p)) {
            return Err(format!("it does not ask for approval of actions matching `{missing}`"));
        }
        if let Some(extra) = self.unasked_actions.iter().find(|p| !parent.unasked_actions.contains(p)) {
            return Err(format!("it runs actions matching `{extra}` without approval"));
        }
        if let Some(missing) = parent.budgets.iter().find(|b| !self.budgets.contains(b)) {
            return Err(format!("it does not keep the budget for `{}`", missing.actions));
        }
        // A run counts against the first rate limit that matches: the parent's must come first, or a broader
        // one of the child's could shadow them.
        if !self.rate_limits.starts_with(&parent.rate_limits) {
            return Err("its rate limits do not begin with its parent's".into());
        }
        if self.allow_private_network && !parent.allow_private_network {
            return Err("it allows the private network".into());
        }
        if !parent.allow_hosts.contains("*")
            && let Some(extra) = self.allow_hosts.iter().find(|h| !parent.allow_hosts.contains(*h))
        {
            return Err(format!("it allows host `{extra}`"));
        }
        Ok(())
    }

    /// This policy narrowed to fit within `parent`'s: it allows only what both allow, and asks for approval
    /// wherever either asks (so `narrowed_to(parent).within(parent)` holds). What a parent's new policy does to
    /// its live children. Rules compared by text (patterns, hosts) keep only what both name, conservatively; a
    /// risk override only one of them has becomes risk `High`, since either could be lowering an action's risk.
    #[must_use]
    pub fn narrowed_to(&self, parent: &Policy) -> Policy {
        fn both<T: Ord + Clone>(mine: &Option<BTreeSet<T>>, theirs: &Option<BTreeSet<T>>) -> Option<BTreeSet<T>> {
            match (mine, theirs) {
                (None, None) => None,
                (Some(one), None) | (None, Some(one)) => Some(one.clone()),
                (Some(mine), Some(theirs)) => Some(mine.intersection(theirs).cloned().collect()),
            }
        }
        fn least<T: Ord + Copy>(mine: Option<T>, theirs: Option<T>) -> Option<T> {
            match (mine, theirs) {
                (Some(mine), Some(theirs)) => Some(mine.min(theirs)),
                (one, None) | (None, one) => one,
            }
        }
        let grants = match (&self.grants, &parent.grants) {
            (Grants::All, other) | (other, Grants::All) => other.clone(),
            (Grants::Only(mine), Grants::Only(theirs)) => Grants::Only(mine.intersection(theirs).cloned().collect()),
        };
        fn common(mine: &Option<Vec<Pattern>>, theirs: &Option<Vec<Pattern>>) -> Option<Vec<Pattern>> {
            match (mine, theirs) {
                (None, None) => None,
                (Some(one), None) | (None, Some(one)) => Some(one.clone()),
                (Some(mine), Some(theirs)) => Some(mine.iter().filter(|p| theirs.contains(p)).cloned().collect()),
            }
        }
        let allow_actions = common(&self.allow_actions, &parent.allow_actions);
        let mut deny_actions = self.deny_actions.clone();
        deny_actions.extend(parent.deny_actions.iter().filter(|p| !self.deny_actions.contains(p)).cloned());
        let mut risk_overrides = BTreeMap::new();
        for pattern in self.risk_overrides.keys().chain(parent.risk_overrides.keys()) {
            let risk = match (self.risk_overrides.get(pattern), parent.risk_overrides.get(pattern)) {
                (Some(mine), Some(theirs)) => *mine.max(theirs),
                _ => Risk::High,
            };
            risk_overrides.insert(pattern.clone(), risk);
        }
        let allow_hosts = if parent.allow_hosts.contains("*") {
            self.allow_hosts.clone()
        } else if self.allow_hosts.contains("*") {
            parent.allow_hosts.clone()
        } else {
            self.allow_hosts.intersection(&parent.allow_hosts).cloned().collect()
        };
        Policy {
            allow_skills: both(&self.allow_skills, &parent.allow_skills),
            deny_skills: self.deny_skills.union(&parent.deny_skills).cloned().collect(),
            allow_actions,
            deny_actions,
            grants,
            approval_at: least(self.approval_at, parent.approval_at),
            risk_overrides,
            allow_hosts,
            allow_private_network: self.allow_private_network && parent.allow_private_network,
            approval_timeout: least(self.approval_timeout, parent.approval_timeout),
            emit_agents: common(&self.emit_agents, &parent.emit_agents),
            emit_topics: common(&self.emit_topics, &parent.emit_topics),
            deny_outside: {
                let mut deny = self.deny_outside.clone();
                deny.extend(parent.deny_outside.iter().filter(|p| !self.deny_outside.contains(p)).cloned());
                deny
            },
            limits: self.limits.narrowed_to(&parent.limits),
            ask_actions: {
                let mut ask = self.ask_actions.clone();
                ask.extend(parent.ask_actions.iter().filter(|p| !self.ask_actions.contains(p)).cloned());
                ask
            },
            unasked_actions: self
                .unasked_actions
                .iter()
                .filter(|p| parent.unasked_actions.contains(p))
                .cloned()
                .collect(),
            budgets: {
                let mut budgets = self.budgets.clone();
                budgets.extend(parent.budgets.iter().filter(|b| !self.budgets.contains(b)).cloned());
                budgets
            },
            rate_limits: {
                let mut limits = parent.rate_limits.clone();
                limits.extend(self.rate_limits.iter().filter(|l| !parent.rate_limits.contains(l)).cloned());
                limits
            },
        }
    }

    /// Whether a capability is granted.
    pub fn grants(&self, capability: &Capability) -> bool {
        match &self.grants {
            Grants::All => true,
            Grants::Only(set) => set.contains(capability),
        }
    }

    /// May this agent mount this skill? `Err` says which rule refused it.
    pub fn may_mount(&self, skill: &SkillId) -> Result<(), String> {
        if self.deny_skills.contains(skill) {
            return Err(format!("skill `{skill}` is on the policy's deny list"));
        }
        match &self.allow_skills {
            Some(allowed) if !allowed.contains(skill) => {
                Err(format!("skill `{skill}` is not on the policy's allow list"))
            }
            _ => Ok(()),
        }
    }

    /// May a caller outside the agent run this action? `Err` names the pattern that refuses it.
    pub fn may_run_from_outside(&self, action: &str) -> Result<(), String> {
        match self.deny_outside.iter().find(|p| p.matches(action)) {
            Some(pattern) => Err(format!(
                "action `{action}` matches `{pattern}`, which the policy keeps from callers outside the agent \
                 (`deny_outside`); the agent itself may still run it"
            )),
            None => Ok(()),
        }
    }

    /// May this agent emit a signal to `to`? Its parent always; another agent or a topic when it matches the
    /// policy's patterns for them (or there are none). `Err` says which rule refused it.
    pub fn may_emit(&self, to: &Target) -> Result<(), String> {
        let (allowed, what, name) = match to {
            Target::Parent => return Ok(()),
            Target::Agent(agent) => (&self.emit_agents, "agent", agent.as_str()),
            Target::Topic(topic) => (&self.emit_topics, "topic", topic.as_str()),
        };
        match allowed {
            Some(patterns) if !patterns.iter().any(|p| p.matches(name)) => {
                Err(format!("{what} `{name}` matches none of the policy's patterns for where the agent may emit"))
            }
            _ => Ok(()),
        }
    }

    /// The risk this policy assumes for an action: an override if one matches, else the spec's own.
    pub fn effective_risk(&self, spec: &ActionSpec) -> Risk {
        self.risk_overrides
            .iter()
            .filter(|(pattern, _)| pattern.matches(spec.id.as_str()))
            .map(|(_, risk)| *risk)
            .max()
            .unwrap_or(spec.risk)
    }

    /// May this agent run this action, and does the run need approval? Checks, in order: the deny list, the
    /// allow list, every capability the action needs, the ask list, the unasked list, then the approval
    /// threshold. (Budgets and rate limits are counted by the [`Meter`](crate::meter::Meter).)
    pub fn may_run(&self, spec: &ActionSpec) -> RunDecision {
        let id = spec.id.as_str();
        if let Some(pattern) = self.deny_actions.iter().find(|p| p.matches(id)) {
            return RunDecision::Deny {
                reason: format!("action `{id}` matches the policy's deny pattern `{pattern}`"),
            };
        }
        if let Some(allowed) = &self.allow_actions
            && !allowed.iter().any(|p| p.matches(id))
        {
            return RunDecision::Deny { reason: format!("action `{id}` matches no allow pattern of the policy") };
        }
        let missing: Vec<&str> = spec.capabilities.iter().filter(|c| !self.grants(c)).map(Capability::as_str).collect();
        if !missing.is_empty() {
            return RunDecision::Deny {
                reason: format!("action `{id}` needs capabilities the policy does not grant: {}", missing.join(", ")),
            };
        }
        let risk = self.effective_risk(spec);
        if self.ask_actions.iter().any(|p| p.matches(id)) {
            return RunDecision::NeedsApproval { risk };
        }
        if self.unasked_actions.iter().any(|p| p.matches(id)) {
            return RunDecision::Allow;
        }
        match self.approval_at {
            Some(threshold) if risk >= threshold => RunDecision::NeedsApproval { risk },
            _ => RunDecision::Allow,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(id: &str) -> ActionSpec {
        ActionSpec::new(id, "test").unwrap()
    }

    #[test]
    fn deny_then_ask_then_allow_the_first_that_matches_decides() {
        let pattern = |p: &str| Pattern::new(p).unwrap();
        let policy = Policy::default()
            .deny_action(pattern("fs.delete"))
            .ask_action(pattern("fs.write"))
            .ask_action(pattern("http.**"))
            .unasked_action(pattern("fs.*"))
            .unasked_action(pattern("http.get"));
        assert!(matches!(policy.may_run(&spec("fs.delete")), RunDecision::Deny { .. }));
        assert_eq!(policy.may_run(&spec("fs.write")), RunDecision::NeedsApproval { risk: Risk::Low });
        // Asked before allowed: `http.get` matches both.
        assert_eq!(policy.may_run(&spec("http.get")), RunDecision::NeedsApproval { risk: Risk::Low });
        assert_eq!(policy.may_run(&spec("fs.read").risk(Risk::High)), RunDecision::Allow);
        // Matching none of them: the risk decides.
        assert_eq!(policy.may_run(&spec("mem.put").risk(Risk::High)), RunDecision::NeedsApproval { risk: Risk::High });
        // A child may not drop an ask, nor add an allow its parent lacks; narrowing keeps asks, drops allows.
        let child = Policy::default().unasked_action(pattern("fs.*"));
        assert!(child.within(&policy).is_err());
        let narrowed = Policy::default().unasked_action(pattern("mem.*")).narrowed_to(&policy);
        assert!(narrowed.within(&policy).is_ok(), "{:?}", narrowed.within(&policy));
        assert_eq!(narrowed.ask_actions, policy.ask_actions);
        assert!(narrowed.unasked_actions.is_empty());
    }

    #[test]
    fn default_policy_allows_low_risk_and_asks_for_high() {
        let policy = Policy::default();
        assert_eq!(policy.may_run(&spec("a.b")), RunDecision::Allow);
        assert_eq!(policy.may_run(&spec("a.b").risk(Risk::High)), RunDecision::NeedsApproval { risk: Risk::High });
        assert_eq!(Policy::trusted().may_run(&spec("a.b").risk(Risk::High)), RunDecision::Allow);
    }

    #[test]
    fn hosts_match_exactly_by_subdomain_wildcard_or_star() {
        let policy =
            Policy::default().allow_host("API.example.com").allow_host("*.internal.test").allow_host("127.0.0.1");
        for host in ["api.example.com", "Api.Example.Com.", "a.internal.test", "x.y.internal.test", "127.0.0.1"] {
            assert!(policy.host_allowed(host), "{host} should be allowed");
        }
        for host in ["example.com", "evil-api.example.com", "internal.test", "xinternal.test", "127.0.0.2", ""] {
            assert!(!policy.host_allowed(host), "{host} should be refused");
        }
        assert!(!Policy::default().host_allowed("example.com"), "no hosts by default");
        assert!(Policy::trusted().host_allowed("anything.example"));
    }

    #[test]
    fn capabilities_must_be_granted() {
        let needs_fs = spec("fs.read").capability(Capability::FS).capability(Capability::NET);
        let RunDecision::Deny { reason } = Policy::default().grant(Capability::NET).may_run(&needs_fs) else {
            panic!("expected a denial")
        };
        assert!(reason.contains("fs") && !reason.contains("net"), "{reason}");
        assert_eq!(
            Policy::default().grant(Capability::FS).grant(Capability::NET).may_run(&needs_fs),
            RunDecision::Allow
        );
    }

    #[test]
    fn deny_and_allow_lists() {
        let policy = Policy::default().deny_action(Pattern::new("shell.**").unwrap());
        assert!(matches!(policy.may_run(&spec("shell.exec")), RunDecision::Deny { .. }));
        let only_math =
            Policy { allow_actions: Some(vec![Pattern::new("arithmetic.*").unwrap()]), ..Policy::default() };
        assert_eq!(only_math.may_run(&spec("arithmetic.add")), RunDecision::Allow);
        assert!(matches!(only_math.may_run(&spec("fs.read")), RunDecision::Deny { .. }));
        let skill = SkillId::new("shell").unwrap();
        let err = Policy::default().deny_skill(skill.clone()).may_mount(&skill).unwrap_err();
        assert!(err.contains("shell") && err.contains("deny list"));
        let allow = Policy { allow_skills: Some([SkillId::new("math").unwrap()].into()), ..Policy::default() };
        assert!(allow.may_mount(&skill).unwrap_err().contains("allow list"));
    }

    #[test]
    fn an_allow_list_lets_its_own_skills_be_mounted() {
        let math = SkillId::new("math").unwrap();
        let allow = Policy { allow_skills: Some([math.clone()].into()), ..Policy::default() };
        assert_eq!(allow.may_mount(&math), Ok(()));
        assert_eq!(Policy::default().may_mount(&math), Ok(()), "no allow list: any skill not denied");
    }

    #[test]
    fn a_wildcard_host_needs_a_label_before_its_domain() {
        let policy = Policy::default().allow_host("*.internal.test");
        assert!(policy.host_allowed("a.internal.test"));
        for host in [".internal.test", "internal.test", "internal.test."] {
            assert!(!policy.host_allowed(host), "{host}: the wildcard stands for at least one character");
        }
    }

    #[test]
    fn the_builders_set_what_they_name() {
        let policy = Policy::default()
            .approval_at(Some(Risk::Medium))
            .allow_private_network(true)
            .approval_timeout(Some(Duration::from_secs(5)));
        assert_eq!(policy.approval_at, Some(Risk::Medium));
        assert!(policy.allow_private_network);
        assert_eq!(policy.approval_timeout, Some(Duration::from_secs(5)));
        let never = Policy::default().approval_at(None).approval_timeout(None);
        assert_eq!((never.approval_at, never.approval_timeout), (None, None));
    }

    #[test]
    fn trusted_grants_everything_and_reaches_the_private_network() {
        let trusted = Policy::trusted();
        assert_eq!(trusted.grants, Grants::All);
        assert!(trusted.grants(&Capability::FS) && trusted.grants(&Capability::NET));
        assert!(trusted.allow_private_network);
        assert_eq!(trusted.approval_at, None);
    }

    #[test]
    fn a_policy_read_without_a_timeout_waits_an_hour_for_approvals() {
        let read: Policy = serde_json::from_value(serde_json::json!({"grants": "all"})).unwrap();
        assert_eq!(read.approval_timeout, Some(DEFAULT_APPROVAL_TIMEOUT));
        assert_eq!(DEFAULT_APPROVAL_TIMEOUT, Duration::from_secs(3600));
        assert_eq!(Policy::default().approval_timeout, Some(DEFAULT_APPROVAL_TIMEOUT));
        let never: Policy =
            serde_json::from_value(serde_json::json!({"grants": "all", "approval_timeout": null})).unwrap();
        assert_eq!(never.approval_timeout, None, "an explicit null waits for ever");
    }

    #[test]
    fn a_child_keeps_or_raises_its_parents_risk_overrides_and_adds_only_high_ones() {
        let pattern = |text: &str| Pattern::new(text).unwrap();
        let mut parent = Policy::default();
        parent.risk_overrides.insert(pattern("web.*"), Risk::Medium);
        let with = |overrides: &[(&str, Risk)]| {
            let mut child = parent.clone();
            child.risk_overrides = overrides.iter().map(|(p, r)| (pattern(p), *r)).collect();
            child.within(&parent)
        };
        assert_eq!(with(&[("web.*", Risk::Medium)]), Ok(()));
        assert_eq!(with(&[("web.*", Risk::High)]), Ok(()), "raising a risk is narrower");
        assert_eq!(with(&[("web.*", Risk::Medium), ("shell.*", Risk::High)]), Ok(()), "an added override at High");
        let lowered = with(&[("web.*", Risk::Low)]).unwrap_err();
        assert!(lowered.contains("Medium") && lowered.contains("web.*"), "{lowered}");
        assert!(with(&[]).unwrap_err().contains("web.*"), "dropping the parent's override");
        let added = with(&[("web.*", Risk::Medium), ("shell.*", Risk::Medium)]).unwrap_err();
        assert!(added.contains("shell.*") && added.contains("High"), "{added}");
    }

    #[test]
    fn risk_overrides_win_over_hints() {
        let mut policy = Policy::default();
        policy.risk_overrides.insert(Pattern::new("mcp.**").unwrap(), Risk::High);
        assert_eq!(
            policy.may_run(&spec("mcp.srv.tool").risk(Risk::Low)),
            RunDecision::NeedsApproval { risk: Risk::High }
        );
    }

    mod within {
        //! `within` against what it promises: a child policy it accepts refuses everything its parent refuses,
        //! and every policy is within itself.
        use super::*;
        use proptest::prelude::*;

        const SKILLS: [&str; 3] = ["math", "shell", "web"];
        const ACTIONS: [&str; 4] = ["math.add", "shell.exec", "web.get", "web.post"];
        const PATTERNS: [&str; 4] = ["math.*", "shell.**", "web.*", "**"];
        const HOSTS: [&str; 4] = ["api.test", "*.api.test", "x.api.test", "*"];
        const CAPS: [Capability; 2] = [Capability::FS, Capability::NET];
        const RISKS: [Risk; 3] = [Risk::Low, Risk::Medium, Risk::High];

        fn subset<T: Clone + std::fmt::Debug>(of: &'static [T]) -> impl Strategy<Value = Vec<T>> {
            proptest::sample::subsequence(of, 0..=of.len())
        }

        fn skills(names: Vec<&str>) -> BTreeSet<SkillId> {
            names.into_iter().map(|n| SkillId::new(n).unwrap()).collect()
        }

        fn patterns(texts: Vec<&str>) -> Vec<Pattern> {
            texts.into_iter().map(|t| Pattern::new(t).unwrap()).collect()
        }

        /// One rule of a policy set to a value drawn from a small domain, so two policies often share rules.
        #[derive(Debug, Clone)]
        enum Rule {
            Grants(Option<Vec<Capability>>),
            AllowSkills(Option<Vec<&'static str>>),
            DenySkills(Vec<&'static str>),
            AllowActions(Option<Vec<&'static str>>),
            DenyActions(Vec<&'static str>),
            ApprovalAt(Option<Risk>),
            Timeout(Option<u64>),
            Override(&'static str, Option<Risk>),
            Hosts(Vec<&'static str>),
            Private(bool),
            EmitAgents(Option<Vec<&'static str>>),
            EmitTopics(Option<Vec<&'static str>>),
            DenyOutside(Vec<&'static str>),
            Schedules(usize),
            Ask(Vec<&'static str>),
            Unasked(Vec<&'static str>),
        }

        fn rule() -> impl Strategy<Value = Rule> {
            prop_oneof![
                proptest::option::of(subset(&CAPS)).prop_map(Rule::Grants),
                proptest::option::of(subset(&SKILLS)).prop_map(Rule::AllowSkills),
                subset(&SKILLS).prop_map(Rule::DenySkills),
                proptest::option::of(subset(&PATTERNS)).prop_map(Rule::AllowActions),
                subset(&PATTERNS).prop_map(Rule::DenyActions),
                proptest::option::of(proptest::sample::select(&RISKS[..])).prop_map(Rule::ApprovalAt),
                proptest::option::of(1..4u64).prop_map(Rule::Timeout),
                (proptest::sample::select(&PATTERNS[..]), proptest::option::of(proptest::sample::select(&RISKS[..])))
                    .prop_map(|(p, r)| Rule::Override(p, r)),
                subset(&HOSTS).prop_map(Rule::Hosts),
                any::<bool>().prop_map(Rule::Private),
                proptest::option::of(subset(&PATTERNS)).prop_map(Rule::EmitAgents),
                proptest::option::of(subset(&PATTERNS)).prop_map(Rule::EmitTopics),
                subset(&PATTERNS).prop_map(Rule::DenyOutside),
                (1..4usize).prop_map(Rule::Schedules),
                subset(&PATTERNS).prop_map(Rule::Ask),
                subset(&PATTERNS).prop_map(Rule::Unasked),
            ]
        }

        fn apply(mut policy: Policy, rule: Rule) -> Policy {
            match rule {
                Rule::Grants(None) => policy.grants = Grants::All,
                Rule::Grants(Some(caps)) => policy.grants = Grants::Only(caps.into_iter().collect()),
                Rule::AllowSkills(names) => policy.allow_skills = names.map(skills),
                Rule::DenySkills(names) => policy.deny_skills = skills(names),
                Rule::AllowActions(texts) => policy.allow_actions = texts.map(patterns),
                Rule::DenyActions(texts) => policy.deny_actions = patterns(texts),
                Rule::ApprovalAt(risk) => policy.approval_at = risk,
                Rule::Timeout(secs) => policy.approval_timeout = secs.map(Duration::from_secs),
                Rule::Override(text, None) => {
                    policy.risk_overrides.remove(&Pattern::new(text).unwrap());
                }
                Rule::Override(text, Some(risk)) => {
                    policy.risk_overrides.insert(Pattern::new(text).unwrap(), risk);
                }
                Rule::Hosts(hosts) => policy.allow_hosts = hosts.into_iter().map(str::to_owned).collect(),
                Rule::Private(allow) => policy.allow_private_network = allow,
                Rule::EmitAgents(texts) => policy.emit_agents = texts.map(patterns),
                Rule::EmitTopics(texts) => policy.emit_topics = texts.map(patterns),
                Rule::DenyOutside(texts) => policy.deny_outside = patterns(texts),
                Rule::Schedules(limit) => policy.limits.schedules = limit,
                Rule::Ask(texts) => policy.ask_actions = patterns(texts),
                Rule::Unasked(texts) => policy.unasked_actions = patterns(texts),
            }
            policy
        }

        /// A parent made of random rules, and a child that is the parent with a few rules changed (none: the
        /// parent itself), so children within their parent and children broader than it both come up often.
        fn family() -> impl Strategy<Value = (Policy, Policy)> {
            (proptest::collection::vec(rule(), 0..8), proptest::collection::vec(rule(), 0..3)).prop_map(
                |(rules, changes)| {
                    let parent = rules.into_iter().fold(Policy::default(), apply);
                    let child = changes.into_iter().fold(parent.clone(), apply);
                    (parent, child)
                },
            )
        }

        fn specs() -> Vec<ActionSpec> {
            let mut specs = Vec::new();
            for id in ACTIONS {
                for risk in RISKS {
                    for caps in [&[][..], &[Capability::FS][..], &CAPS[..]] {
                        let spec = caps.iter().fold(spec(id).risk(risk), |s, c| s.capability(c.clone()));
                        specs.push(spec);
                    }
                }
            }
            specs
        }

        fn spec(id: &str) -> ActionSpec {
            ActionSpec::new(id, "test").unwrap()
        }

        fn targets() -> Vec<crate::effect::Target> {
            use crate::effect::Target;
            let mut targets = vec![Target::Parent];
            for name in ACTIONS {
                targets.push(Target::Agent(crate::id::AgentId::new(name).unwrap()));
                targets.push(Target::Topic(name.to_owned()));
            }
            targets
        }

        proptest! {
            // Cheap cases, and a broader child must meet an action that shows it: many of them.
            #![proptest_config(ProptestConfig::with_cases(2048))]

            #[test]
            fn a_narrowed_policy_is_within_both_and_allows_nothing_either_refuses(
                (mine, _) in family(),
                (theirs, _) in family(),
            ) {
                let narrowed = mine.narrowed_to(&theirs);
                prop_assert_eq!(narrowed.within(&theirs), Ok(()));
                for policy in [&mine, &theirs] {
                    for spec in specs() {
                        let (theirs, ours) = (policy.may_run(&spec), narrowed.may_run(&spec));
                        let denied = |d: &RunDecision| matches!(d, RunDecision::Deny { .. });
                        prop_assert!(!denied(&theirs) || denied(&ours), "{} {:?}: {:?}", spec.id, spec.risk, ours);
                        let asks = matches!(theirs, RunDecision::NeedsApproval { .. });
                        prop_assert!(!asks || ours != RunDecision::Allow, "{} {:?}: it does not ask", spec.id, spec.risk);
                    }
                    for name in SKILLS {
                        let skill = SkillId::new(name).unwrap();
                        prop_assert!(policy.may_mount(&skill).is_ok() || narrowed.may_mount(&skill).is_err());
                    }
                    for host in ["api.test", "x.api.test", "y.api.test", "other.test"] {
                        prop_assert!(policy.host_allowed(host) || !narrowed.host_allowed(host), "{}", host);
                    }
                    prop_assert!(policy.allow_private_network || !narrowed.allow_private_network);
                    for to in targets() {
                        prop_assert!(policy.may_emit(&to).is_ok() || narrowed.may_emit(&to).is_err(), "{:?}", to);
                    }
                    for id in ACTIONS {
                        prop_assert!(policy.may_run_from_outside(id).is_ok() || narrowed.may_run_from_outside(id).is_err());
                    }
                    prop_assert!(narrowed.limits.schedules <= policy.limits.schedules);
                }
                // A policy within its parent already keeps all it allows (but its text-compared rules).
                prop_assert_eq!(mine.narrowed_to(&mine), mine.clone());
            }

            #[test]
            fn a_policy_is_within_itself((policy, _) in family()) {
                prop_assert_eq!(policy.within(&policy), Ok(()));
            }

            #[test]
            fn a_child_within_its_parent_allows_nothing_the_parent_refuses((parent, child) in family()) {
                let Ok(()) = child.within(&parent) else { return Ok(()) };
                for spec in specs() {
                    let (theirs, mine) = (parent.may_run(&spec), child.may_run(&spec));
                    let denied = |d: &RunDecision| matches!(d, RunDecision::Deny { .. });
                    prop_assert!(!denied(&theirs) || denied(&mine), "{} {:?}: child {:?}", spec.id, spec.risk, mine);
                    let asks = matches!(theirs, RunDecision::NeedsApproval { .. });
                    prop_assert!(!asks || mine != RunDecision::Allow, "{} {:?}: the child does not ask", spec.id, spec.risk);
                }
                for name in SKILLS {
                    let skill = SkillId::new(name).unwrap();
                    prop_assert!(parent.may_mount(&skill).is_ok() || child.may_mount(&skill).is_err(), "{}", name);
                }
                for host in ["api.test", "x.api.test", "y.api.test", "other.test"] {
                    prop_assert!(parent.host_allowed(host) || !child.host_allowed(host), "{}", host);
                }
                prop_assert!(parent.allow_private_network || !child.allow_private_network);
                for to in targets() {
                    prop_assert!(parent.may_emit(&to).is_ok() || child.may_emit(&to).is_err(), "{:?}", to);
                }
                for id in ACTIONS {
                    prop_assert!(parent.may_run_from_outside(id).is_ok() || child.may_run_from_outside(id).is_err());
                }
                prop_assert!(child.limits.schedules <= parent.limits.schedules);
                if let Some(theirs) = parent.approval_timeout {
                    prop_assert!(child.approval_timeout.is_some_and(|mine| mine <= theirs));
                }
            }

        }
    }
}
