//! A run's life as one pure state machine ([`RunLife`]), and the rules of nested calls ([`nested`]).

pub mod nested;

#[cfg(test)]
mod tests;

use crate::action::{ActionContext, ActionError, ActionSpec, DynAction, ErrorClass, Outcome, OutcomeStatus};
use crate::events::EventKind;
use crate::id::ActionId;
use crate::store::{RunStatus, RunUpdate};
use serde_json::Value;
use std::time::Duration;

/// A run's life as one pure state machine: what happens to a run once the gate let it through — its params
/// checked (and coerced where that is safe), each attempt begun, its result judged against the action's
/// contract, retries with backoff and jitter as the action's design allows, and how it ends, with its cost
/// and artifacts — and the journal records and events each step makes. Nested calls follow the rules in
/// [`nested`](crate::driver::nested).
///
/// It takes events (admitted, an attempt's result, a timeout, a backoff over, a failure of the driver) with the
/// time they happened at, and answers with what to do next ([`Next`]). It never awaits and never reads a clock:
/// the agent's server drives it on tokio time, the simulator on virtual time, so a run means the same in both.
///
/// ```
/// use agentry::action::{ActionContext, ActionError, ActionSpec, DynAction, OutcomeStatus, RetryPolicy};
/// use agentry::driver::{Next, RunLife};
/// use agentry::id::{ActionId, AgentId};
/// use serde_json::json;
/// use std::time::Duration;
///
/// let spec = ActionSpec::new("net.ping", "Pings.").unwrap().retry(RetryPolicy::attempts(2));
/// let action = DynAction::new(spec, |_, _| Box::pin(async { Ok(json!("pong")) })).unwrap();
/// let mut ctx = ActionContext::new(AgentId::new("a").unwrap(), ActionId::new("net.ping").unwrap());
/// let mut params = json!({});
/// let (mut life, next, _) = RunLife::admit(&action, &mut params, true, Duration::ZERO);
/// assert!(matches!(next, Next::Attempt(1)));
/// life.begin(action.spec(), &mut ctx);
/// // The driver runs the attempt; it failed in a way worth another try.
/// let next = life.on_ready(&action, &ctx, Err(ActionError::transient("flaky")), Duration::from_millis(5));
/// let Next::Retry { backoff, .. } = next else { panic!("a transient failure is retried") };
/// // The driver waits the backoff out, then begins the next attempt, which completes.
/// assert!(matches!(life.backoff_over(), Next::Attempt(2)));
/// life.begin(action.spec(), &mut ctx);
/// let now = Duration::from_millis(5) + backoff + Duration::from_millis(5);
/// let Next::End(end) = life.on_ready(&action, &ctx, Ok(json!("pong")), now) else { panic!("it ended") };
/// assert_eq!((end.outcome.status, end.outcome.attempts, end.outcome.latency), (OutcomeStatus::Completed, 2, now));
/// ```
///
/// Small and plain: a driver keeps it beside the run.
#[derive(Debug, Clone)]
pub struct RunLife {
    /// The attempt begun last (0 before the first).
    attempt: u32,
    /// When the run was admitted, on the driver's clock: its latency counts from then.
    admitted: Duration,
}

/// What a driver does next with a run.
// Returned by value and matched at once: boxing the end would cost every run an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Next {
    /// Begin attempt `n` ([`RunLife::begin`]), then run the action and report its result
    /// ([`RunLife::on_ready`], or [`RunLife::on_timed_out`] when the attempt's [`Begin::timeout`] passes first).
    Attempt(u32),
    /// Attempt `failed` failed in a way worth another try: announce it ([`Next::event`]), wait `backoff`, then
    /// call [`RunLife::backoff_over`].
    Retry {
        /// The attempt that failed.
        failed: u32,
        /// How long to wait before the next one.
        backoff: Duration,
        /// The class of the error it failed with.
        class: ErrorClass,
    },
    /// The run ended.
    End(End),
}

impl Next {
    /// What to announce for a retry (`None` for the other steps, whose events [`Begin`] and [`End`] carry).
    pub fn event(&self, action: &ActionId) -> Option<EventKind> {
        match *self {
            Next::Retry { failed, backoff, class } => {
                Some(EventKind::ActionRetried { action: action.clone(), attempt: failed, class, backoff })
            }
            _ => None,
        }
    }
}

/// An attempt begun: what to journal and announce, and how to run it.
#[derive(Debug, Clone)]
pub struct Begin {
    /// Its number, from 1.
    pub attempt: u32,
    /// Its start's journal record: the run is running, with this many attempts.
    pub update: RunUpdate,
    /// Whether the action may start only once this record is durable (write-ahead): an action with side effects,
    /// so that a crash never leaves one the journal does not know was attempted. A driver without a durable
    /// journal starts it at once.
    pub write_ahead: bool,
    /// How long the attempt may take before it is stopped and reported as timed out.
    pub timeout: Duration,
}

impl Begin {
    /// What to announce.
    pub fn event(&self, action: &ActionId) -> EventKind {
        EventKind::ActionStarted { action: action.clone(), attempt: self.attempt }
    }
}

/// How a run ended: its outcome, the error it ended with (for a caller that passes it on: a nested call's
/// caller gets it as it was), and what to journal and announce.
#[derive(Debug)]
pub struct End {
    /// The outcome its requester gets.
    pub outcome: Outcome,
    /// The error it ended with, if it did not complete.
    pub error: Option<ActionError>,
    /// Whether it was refused before it was admitted (see [`End::refused`]).
    pub refused: bool,
}

impl End {
    /// A run the gate (or anything before its first attempt: its approver, an expired approval, a full queue)
    /// refused: it never ran, and is journaled as blocked whatever the error's class.
    pub fn refused(error: ActionError) -> Self {
        Self { outcome: Outcome::from_error(&error, Duration::ZERO, 0), error: Some(error), refused: true }
    }

    /// Its end's journal record: a refused run is blocked; one that was admitted has its outcome's status, its
    /// attempts, latency and cost.
    pub fn update(&self) -> RunUpdate {
        let outcome = &self.outcome;
        let error = outcome.error.as_ref().map(|e| e.class);
        if self.refused {
            return RunUpdate { status: Some(RunStatus::Blocked), error, ..RunUpdate::default() };
        }
        RunUpdate {
            status: Some(outcome.status.into()),
            attempts: Some(outcome.attempts),
            latency: Some(outcome.latency),
            cost: outcome.cost,
            error,
        }
    }

    /// What to announce.
    pub fn event(&self, action: &ActionId) -> EventKind {
        let action = action.clone();
        match (&self.outcome.error, self.outcome.status) {
            (None, _) => EventKind::ActionCompleted { action, attempts: self.outcome.attempts },
            (Some(e), _) if self.refused || self.outcome.status == OutcomeStatus::Blocked => {
                EventKind::ActionBlocked { action, reason: e.message.clone() }
            }
            (Some(e), _) => EventKind::ActionFailed { action, class: e.class, message: e.message.clone() },
        }
    }
}

/// How a run's params met their schema ([`RunLife::admit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Params {
    /// They matched as given.
    AsGiven,
    /// They did not match, and were coerced (whether or not they then matched).
    Coerced,
}

impl RunLife {
    /// A run the gate let through, admitted at `now` (the driver's clock): its params are checked against the
    /// action's schema, and coerced first where that is safe (when `coerce`); params that still do not match
    /// end the run with a `Validation` error and no attempt. Otherwise the first attempt is next.
    pub fn admit(action: &DynAction, params: &mut Value, coerce: bool, now: Duration) -> (Self, Next, Params) {
        let life = Self { attempt: 0, admitted: now };
        let Err(err) = action.validate(params) else { return (life, Next::Attempt(1), Params::AsGiven) };
        let refused = match coerce {
            true => {
                *params = action.coerce(std::mem::take(params));
                action.validate(params).err()
            }
            false => Some(err),
        };
        let next = match refused {
            Some(err) => Next::End(life.fail(err, now)),
            None => Next::Attempt(1),
        };
        (life, next, Params::Coerced)
    }

    /// The attempt begun last (0 before the first).
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// Begins the next attempt: `ctx` is set to it, and what a failed attempt asked for through the context
    /// (effects, artifacts) is forgotten. The driver journals and announces what this returns, then invokes the
    /// action with a copy of `ctx`.
    pub fn begin(&mut self, spec: &ActionSpec, ctx: &mut ActionContext) -> Begin {
        self.attempt += 1;
        ctx.attempt = self.attempt;
        {
            let mut sink = ctx.sink();
            sink.effects.clear();
            sink.artifacts.clear();
        }
        Begin {
            attempt: self.attempt,
            update: RunUpdate {
                status: Some(RunStatus::Running),
                attempts: Some(self.attempt),
                ..RunUpdate::default()
            },
            write_ahead: spec.side_effects,
            timeout: spec.timeout,
        }
    }

    /// The attempt in flight ended at `now` with `result`: an output that meets the action's output schema
    /// completes the run, with the cost and artifacts the run reported through `ctx`. An error ends it too,
    /// unless it is worth another try: a transient or timeout error, of an action that may be retried, with
    /// attempts left, and no nested call of the attempt did something that must not happen twice.
    pub fn on_ready(
        &mut self,
        action: &DynAction,
        ctx: &ActionContext,
        result: Result<Value, ActionError>,
        now: Duration,
    ) -> Next {
        let spec = action.spec();
        let err = match result.and_then(|output| action.check_output(&output).map(|()| output)) {
            Ok(output) => {
                let mut outcome = Outcome::completed(output, self.latency(now), self.attempt);
                let mut sink = ctx.sink();
                outcome.artifacts = std::mem::take(&mut sink.artifacts);
                outcome.cost = sink.cost;
                return Next::End(End { outcome, error: None, refused: false });
            }
            Err(err) => err,
        };
        let (cost, side_effects) = {
            let sink = ctx.sink();
            (sink.cost, sink.side_effects)
        };
        if side_effects || !crate::action::should_retry(spec, &err, self.attempt) {
            let mut end = self.fail(err, now);
            end.outcome.cost = cost;
            return Next::End(end);
        }
        let backoff = spec.retry.backoff(self.attempt, jitter_sample(ctx.run_id, self.attempt));
        Next::Retry { failed: self.attempt, backoff, class: err.class() }
    }

    /// The attempt in flight ran past its action's timeout at `now`: the driver stops it, and it failed with a
    /// `Timeout` error (retried as [`RunLife::on_ready`] says).
    pub fn on_timed_out(&mut self, action: &DynAction, ctx: &ActionContext, now: Duration) -> Next {
        let after = action.spec().timeout;
        self.on_ready(action, ctx, Err(ActionError::Timeout { after }), now)
    }

    /// The backoff after a failed attempt is over: the next attempt is next.
    pub fn backoff_over(&self) -> Next {
        Next::Attempt(self.attempt + 1)
    }

    /// The run ends at `now` with `error`, which is not the action's own: its driver could not go on (the
    /// journal could not make its start durable, its params could not be read again, it was cancelled). It
    /// counts the attempts begun so far.
    pub fn fail(&self, error: ActionError, now: Duration) -> End {
        End {
            outcome: Outcome::from_error(&error, self.latency(now), self.attempt),
            error: Some(error),
            refused: false,
        }
    }

    /// The journal record and the event of a run cancelled after it was admitted (its requester gave up, its
    /// agent stopped), known by its action only: its driver may hold nothing else of it any more.
    pub fn cancelled(action: &ActionId, why: &str) -> (RunUpdate, EventKind) {
        let update =
            RunUpdate { status: Some(RunStatus::Failed), error: Some(ErrorClass::Cancelled), ..RunUpdate::default() };
        let kind =
            EventKind::ActionFailed { action: action.clone(), class: ErrorClass::Cancelled, message: why.into() };
        (update, kind)
    }

    /// The journal record of a run the gate parked until it is approved.
    pub fn asked() -> RunUpdate {
        RunUpdate { status: Some(RunStatus::AwaitingApproval), ..RunUpdate::default() }
    }

    /// The journal record of a parked run its approver approved: it meets the gate again, and is never asked
    /// about again (retries included).
    pub fn approved() -> RunUpdate {
        RunUpdate { status: Some(RunStatus::Approved), ..RunUpdate::default() }
    }

    /// The error a parked run its approver denied is refused with ([`End::refused`]).
    pub fn denied() -> ActionError {
        ActionError::denied("the run was denied by its approver")
    }

    fn latency(&self, now: Duration) -> Duration {
        now.saturating_sub(self.admitted)
    }
}

/// A uniform sample in `0..1` for backoff jitter, mixed from the run id and attempt (SplitMix64): each run
/// spreads differently, and a run whose id a seeded simulation made waits the same on every replay.
fn jitter_sample(run: uuid::Uuid, attempt: u32) -> f64 {
    let (hi, lo) = run.as_u64_pair();
    let mut z = hi ^ lo ^ u64::from(attempt).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    // The top 53 bits make an exactly representable fraction.
    (z >> 11) as f64 / (1u64 << 53) as f64
}
