//! The kit for driving agents and runs outside the runtime: what the simulator (`agentry-sim`) and the testing
//! kit (`agentry-testkit`) are built on. **Unstable by name**: it may change in any release, and an
//! application needs none of it (it spawns agents on a [`Runtime`](crate::runtime::Runtime)).
//!
//! A driver holds an agent's [`ActionTable`] and asks the [`gate`] before every run; it carries out each
//! effect as [`interpret`] says ([`Command`], from an [`Origin`]); it lets a run
//! live as the [`RunLife`] machine says, on its own clock, with [`nested`] calls by the same rules; and it tells
//! the agent how things went with the same signals the runtime makes ([`action_outcome_at`] and the other
//! `*_at` constructors, stamped with the driver's own ids and time).

pub use crate::action::context::{Calls, Requested};
pub use crate::interpret::{Command, KeyFrom, Origin, interpret};
pub use crate::kinds::stamped::{RunRef, Stamp, action_outcome_at, child_exited_at, mount_failed_at, spawn_failed_at};
pub use crate::recovery::{replay_input, table_effects};
pub use crate::run_life::{Begin, End, Next, Params, RunLife, nested};
pub use crate::table::{ActionTable, Gate, Registered, gate, gate_metered};

use crate::action::ActionContext;
use crate::id::{ActionId, AgentId, SkillId};
use crate::policy::Policy;
use crate::skill::Skill;
use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

/// Makes the context of a run that a driver other than the runtime starts, or that a test runs directly: who
/// the run is, the policy, clock and seed it reads, the skill it runs from, and who answers its nested calls.
///
/// ```
/// use agentry::driver::ContextBuilder;
/// use agentry::id::{ActionId, AgentId};
/// let ctx = || {
///     ContextBuilder::new(AgentId::new("a").unwrap(), ActionId::new("x.y").unwrap())
///         .seed(7)
///         .clock(chrono::DateTime::UNIX_EPOCH)
///         .build()
/// };
/// let (one, two) = (ctx(), ctx());
/// assert_eq!(one.now(), chrono::DateTime::UNIX_EPOCH);
/// assert_eq!(one.new_id(), two.new_id(), "the same seed, clock and place: the same id");
/// ```
pub struct ContextBuilder(ActionContext);

impl ContextBuilder {
    /// A context for a run of `action` for `agent` under the default policy, reading the wall clock, with a
    /// fresh run id, no skill, and no way to make nested calls or jobs.
    pub fn new(agent: AgentId, action: ActionId) -> Self {
        Self(ActionContext::new(agent, action))
    }

    /// Its ids and idempotency key, given rather than made, so they are the same on every replay of a seeded
    /// simulation.
    pub fn run(self, run: Uuid, correlation: Uuid, causation: Option<Uuid>, key: &str) -> Self {
        Self(self.0.with_run(run, correlation, causation, key))
    }

    /// The folder [`ActionContext::drive`] gives (a skill's drive, which the runtime makes per agent and
    /// skill under its data folder).
    pub fn drive(self, drive: impl Into<std::path::PathBuf>) -> Self {
        Self(self.0.with_drive(drive))
    }

    /// The policy it runs under (what [`ActionContext::policy`] says): a `Policy`, or an `Arc<Policy>` the driver
    /// shares between its runs.
    pub fn policy(self, policy: impl Into<std::sync::Arc<Policy>>) -> Self {
        Self(self.0.with_policy(policy))
    }

    /// A fixed time for [`ActionContext::now`] (a simulation's virtual time, a test's instant).
    pub fn clock(self, at: DateTime<Utc>) -> Self {
        Self(self.0.with_clock(at))
    }

    /// The seed [`ActionContext::seed`] gives, and [`ActionContext::new_id`] draws from.
    pub fn seed(self, seed: u64) -> Self {
        Self(self.0.with_seed(seed))
    }

    /// The skill the run is from, and that skill's state for the agent.
    pub fn skill(self, skill: SkillId, state: Value) -> Self {
        Self(self.0.with_skill(skill).with_skill_state(state))
    }

    /// The skill state the run reads, without a skill (an action tried on its own).
    pub fn skill_state(self, state: Value) -> Self {
        Self(self.0.with_skill_state(state))
    }

    /// Its nested calls ([`ActionContext::call`]) answered by `calls`, shared with other contexts.
    pub fn calls(self, calls: &Calls) -> Self {
        Self(self.0.with_calls_from(calls))
    }

    /// Its nested calls answered by `answer` (a harness that captures the calls and plays the called actions).
    pub fn answering(
        self,
        answer: impl Fn(&ActionContext, ActionId, Value) -> crate::action::ActionFuture + Send + Sync + 'static,
    ) -> Self {
        Self(self.0.with_calls(answer))
    }

    /// The context.
    pub fn build(self) -> ActionContext {
        self.0
    }
}

/// A handle on the effects a run asks for through `ctx` ([`ActionContext::effect`]), for a driver to carry
/// out once the run completed.
pub fn requested(ctx: &ActionContext) -> Requested {
    ctx.requested()
}

/// What `skill`'s own initial-state function makes of these mount options, before the state schema is checked
/// (`Err` when it refuses them): [`Skill::initial_state`] is this plus the check, and a test kit uses the two
/// apart to tell options a skill refuses from a state that breaks the skill's own schema.
pub fn make_state(skill: &Skill, opts: &Value) -> Result<Value, String> {
    skill.make_state(opts)
}
