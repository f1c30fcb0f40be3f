//! The agent's budgets and rate limits on the live server: its [`Meter`], made from the journal (so what was
//! spent in a window survives a restart), fed each run's cost as it ends, and the runs a rate limit holds.

use super::{ServerState, Ticket};
use crate::action::ActionError;
use crate::agent::Agent;
use crate::messages::ServerMsg;
use crate::meter::Meter;
use crate::store::{RunQuery, RunStatus};
use chrono::{DateTime, Utc};
use std::time::Duration;
use uuid::Uuid;

/// How long before its widest budget window the journal is read for runs that ended inside it (a run is
/// listed by when it was asked for, and may have ended much later).
const LONG_RUNS: Duration = Duration::from_secs(24 * 3600);

/// A time as the meter counts it: since the Unix epoch.
pub(crate) fn since_epoch(at: DateTime<Utc>) -> Duration {
    (at - DateTime::UNIX_EPOCH).to_std().unwrap_or_default()
}

impl<A: Agent> ServerState<A> {
    /// A meter for the policy's budgets and rate limits, with what the agent's runs cost within the widest
    /// budget window as the journal has it; `None` when the policy has neither (an agent without them keeps
    /// nothing).
    pub(super) fn new_meter(&self) -> Option<Box<Meter>> {
        if self.policy.budgets.is_empty() && self.policy.rate_limits.is_empty() {
            return None;
        }
        let mut meter = Meter::new(&self.policy);
        if let Some(widest) = self.policy.budgets.iter().map(|b| b.window).max() {
            let now = crate::wall_clock::now();
            let back = chrono::Duration::from_std(widest + LONG_RUNS).unwrap_or(chrono::Duration::MAX);
            let query = RunQuery {
                agent: Some(self.agent.id.clone()),
                since: now.checked_sub_signed(back),
                ..RunQuery::default()
            };
            // A nested run's cost is in its caller's already (a run's cost counts the calls it made), as live.
            for record in self.shared.store.query(&query).into_iter().filter(|r| r.parent_run.is_none()) {
                let (Some(cost), Some((status, ended))) = (record.cost, record.history.last()) else { continue };
                if RunStatus::is_final(*status) {
                    meter.spend(&record.action, cost, since_epoch(*ended));
                }
            }
        }
        Some(Box::new(meter))
    }

    /// Counts what a run that ended cost.
    pub(super) fn spend(&mut self, action: &crate::id::ActionId, cost: Option<f64>) {
        if let (Some(meter), Some(cost)) = (self.meter.as_deref_mut(), cost) {
            meter.spend(action, cost, since_epoch(crate::wall_clock::now()));
        }
    }

    /// Holds a run a rate limit does not let through yet, for `wait`, then brings it back to the gate. Held
    /// runs count with the queued ones against `limits.queued_runs`.
    pub(super) fn hold(&mut self, ticket: Ticket, wait: Duration) -> Result<(), (Ticket, ActionError)> {
        let limit = self.policy.limits.queued_runs;
        if self.under().is_some_and(|u| u.queue.len() + u.throttled.len() >= limit) {
            let error = ActionError::RateLimited {
                reason: format!(
                    "the agent has {limit} runs waiting already, as many as its policy allows \
                     (`limits.queued_runs`); this one was not held for its rate limit, ask again later"
                ),
            };
            return Err((ticket, error));
        }
        // Journaled as it waits, like a queued run (so a shutdown or a crash finds it), its params kept once.
        let mut ticket = ticket;
        self.write_record(&mut ticket.run);
        ticket.run.params_text = None;
        let run = ticket.run.ctx.run_id;
        let me = self.myself.clone();
        let timer = tokio::spawn(async move {
            tokio::time::sleep(wait).await;
            let _ = me.cast(ServerMsg::Throttled(run));
        });
        self.work().throttled.insert(run, (ticket, timer));
        Ok(())
    }

    /// A held run's wait is over: it meets the gate again.
    pub(super) fn release(&mut self, run: Uuid) {
        if let Some((ticket, _)) = self.under().and_then(|u| u.throttled.remove(&run)) {
            self.through_gate(ticket);
        }
    }
}
