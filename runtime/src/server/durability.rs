//! Keeping an agent durable when the runtime's store outlives the process (see [`crate::store::Durable`]):
//! every input `step` consumes is logged with its number, the state is snapshotted every few inputs and at each
//! change that is not an input (a mount, a policy), each run keeps what starting it again needs, and schedules
//! are kept until they fire. With the in-memory store none of this happens, and none of it costs anything.
//!
//! After a crash, [`ServerState::resolve`] settles what the log and the journal say was going on: outcomes the
//! agent was not given yet are given, runs that were waiting for approval wait again, and runs that started
//! but did not end are started again with the same idempotency key when that is safe, or reach the agent as
//! `Interrupted` when it is not.

use super::{RunIds, ServerState, Ticket};
use crate::action::{ActionError, Outcome, RunKey};
use crate::agent::Agent;
use crate::effect::IfMissed;
use crate::events::EventKind;
use crate::id::{ActionId, AgentId};
use crate::messages::{Requester, RunRequest};
use crate::policy::Policy;
use crate::restart::RestartPolicy;
use crate::signal::Signal;
use crate::store::PEN;
use crate::store::{AgentRecord, KeyedRun, RunPlan, RunStatus, RunUpdate, ScheduleRecord, Snapshot};
use chrono::Utc;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashSet;
use std::time::Duration;
use uuid::Uuid;

/// How an agent was spawned, kept so a recovering runtime spawns it the same way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SpawnSettings {
    pub policy: Policy,
    pub restart: RestartPolicy,
    pub max_in_flight: usize,
    pub parent: Option<AgentId>,
    pub name: Option<String>,
}

/// A run the replayed inputs asked for: its key and what it was asked with.
#[derive(Debug, Clone)]
pub(crate) struct Replayed {
    pub key: String,
    pub action: ActionId,
    pub params: Value,
    pub correlation: Uuid,
    pub cause: Uuid,
}

/// What a recovering server takes over from the store and the replay.
#[derive(Debug, Default)]
pub(crate) struct Recovered {
    /// The number of the last input folded into the state.
    pub seq: u64,
    /// The incarnation it goes on with (its snapshot's).
    pub incarnation: u64,
    /// Runs the journal says need looking at.
    pub runs: Vec<KeyedRun>,
    /// Runs the replay asked for, whether or not the journal has them.
    pub replayed: Vec<Replayed>,
    /// The schedules that were armed.
    pub schedules: Vec<ScheduleRecord>,
    /// The ids of the inputs replayed (a schedule whose signal is among them had fired).
    pub inputs: HashSet<Uuid>,
    /// The agent's jobs, as the journal kept them.
    pub jobs: Vec<crate::store::KeptJob>,
}

/// How many times its usual interval a snapshot may wait for the outcomes in the agent's inbox.
const SNAPSHOT_WAITS_AT_MOST: u64 = 10;

impl<A: Agent> ServerState<A> {
    /// Numbers the input about to be stepped and logs it (by naming the run, when it is the outcome the journal
    /// kept for run `kept`).
    pub(super) fn log_input(&mut self, signal: &Signal, kept: Option<Uuid>) {
        self.seq += 1;
        self.step_runs = 0;
        if let Some(durable) = self.shared.store.durable() {
            match kept {
                Some(run) => durable.append_kept_outcome(PEN, &self.agent.id, self.seq, run, signal),
                None => durable.append_input(PEN, &self.agent.id, self.seq, signal),
            }
            // The end of one of its jobs, consumed: a recovery does not give it again.
            if let Some(job) = crate::kinds::ended_job(signal) {
                durable.job_told(PEN, &self.agent.id, job);
            }
            self.since_snapshot += 1;
        }
    }

    /// After an input: a snapshot once enough inputs were logged since the last one. While outcomes wait for
    /// the agent (signals in its inbox, or runs that ended and are not handled yet), the snapshot waits for them,
    /// up to [`SNAPSHOT_WAITS_AT_MOST`] times as many inputs: a snapshot folds in the inputs that asked for those
    /// runs, so the journal must write every waiting outcome with it (where it is later marked consumed), rather
    /// than once, when the agent consumes it.
    pub(super) fn after_input(&mut self) {
        let every = self.shared.snapshot_every;
        if self.since_snapshot >= every {
            let waiting = self.underway.as_ref().is_some_and(|u| !u.inbox.is_empty() || !u.ended.is_empty());
            if !waiting || self.since_snapshot >= every.saturating_mul(SNAPSHOT_WAITS_AT_MOST) {
                self.save_snapshot();
            }
        }
    }

    /// The key of the next run the agent asks for while handling the current input.
    pub(super) fn next_run_key(&mut self) -> RunKey {
        let index = self.step_runs;
        self.step_runs += 1;
        RunKey::Input { incarnation: self.incarnation, seq: self.seq, index }
    }

    /// The agent's state as a snapshot at the current input.
    fn snapshot_now(&self) -> Option<Snapshot> {
        match serde_json::to_value(&self.agent) {
            Ok(state) => Some(Snapshot {
                agent: self.agent.id.clone(),
                seq: self.seq,
                agent_type: A::name().to_owned(),
                version: A::version(),
                state,
                at: Utc::now(),
                incarnation: self.incarnation,
            }),
            Err(err) => {
                tracing::error!(agent = %self.agent.id, %err, "the agent's state does not serialize; no snapshot");
                None
            }
        }
    }

    /// Saves a snapshot of the state now (with a durable store).
    pub(super) fn save_snapshot(&mut self) {
        let Some(durable) = self.shared.store.durable() else { return };
        if let Some(snapshot) = self.snapshot_now() {
            durable.save_snapshot(PEN, snapshot);
            self.since_snapshot = 0;
        }
    }

    fn agent_record(&self, asleep: bool) -> AgentRecord {
        let settings = SpawnSettings {
            policy: (*self.policy).clone(),
            restart: self.again.restart,
            max_in_flight: self.again.max_in_flight,
            parent: self.again.parent.clone(),
            name: self.again.name.clone(),
        };
        AgentRecord {
            agent: self.agent.id.clone(),
            agent_type: A::name().to_owned(),
            spawn: serde_json::to_value(settings).unwrap_or(Value::Null),
            asleep,
        }
    }

    /// Keeps whether the agent is asleep, so a recovery leaves it so.
    pub(super) fn keep_asleep(&self, asleep: bool) {
        if let Some(durable) = self.shared.store.durable() {
            durable.agent_alive(PEN, self.agent_record(asleep));
        }
    }

    /// A new agent is kept from its first state on; a recovered one from its recovered state.
    pub(super) fn keep_from_start(&mut self, recovered: bool) {
        let Some(durable) = self.shared.store.durable() else { return };
        if recovered {
            self.keep_asleep(false);
            self.save_snapshot();
        } else if let Some(initial) = self.snapshot_now() {
            durable.agent_spawned(PEN, self.agent_record(false), initial);
        }
    }

    /// The spawn settings changed (the policy): kept for the recovery.
    pub(super) fn keep_settings(&self) {
        if let Some(durable) = self.shared.store.durable() {
            durable.agent_alive(PEN, self.agent_record(false));
        }
    }

    /// The agent stopped for good (not for a runtime shutdown, after which it comes back): nothing of it is
    /// brought back. A runtime shutdown keeps a last snapshot instead.
    pub(super) fn keep_or_forget(&mut self, for_good: bool) {
        let Some(durable) = self.shared.store.durable() else { return };
        if for_good {
            durable.agent_ended(PEN, &self.agent.id);
        } else {
            self.save_snapshot();
        }
    }

    /// What starting a new run again needs, to be kept with its record (with a durable store).
    /// `params_text`: whether the run's draft keeps the params' JSON text (which the plan then shares).
    pub(super) fn plan_run(
        &self,
        ctx: &crate::action::ActionContext,
        (params, params_text): (&Value, bool),
        by: &Requester,
    ) -> Option<crate::store::PlanDraft> {
        self.shared.store.durable()?;
        Some(crate::store::PlanDraft {
            key: ctx.scope.key.clone(),
            by_agent: matches!(by, Requester::Agent { .. }),
            cause: ctx.causation_id,
            correlation: ctx.correlation_id,
            // Serializing a `Value` cannot fail.
            params_text: (!params_text).then(|| serde_json::to_vec(params).unwrap_or_default()),
        })
    }

    /// Whether a run of `action` may be started again with the same key: its action (still mounted) has no side
    /// effects, or idempotent ones.
    pub(super) fn safe_again(&self, action: &ActionId) -> bool {
        self.table.get(action).is_some_and(|r| {
            let spec = r.action.spec();
            spec.idempotent || !spec.side_effects
        })
    }

    /// Keeps an outcome signal of a run of `action` until the agent consumed it; whether it was kept. The store
    /// may journal the run's end late (until the agent consumes the outcome) only if `may_wait` (nothing the run
    /// asked for was done yet: no effects) and the run is safe to start again, since a crash before that end is
    /// durable starts the run again.
    /// `unwritten`: the run's record, if it is not journaled yet: journaled with the outcome (in one write, with
    /// the runtime's durable store), or alone when the outcome is not kept.
    pub(super) fn keep_outcome(
        &self,
        run: Uuid,
        action: &ActionId,
        signal: &Signal,
        (may_wait, unwritten): (bool, Option<Box<crate::store::Unwritten>>),
    ) -> bool {
        let store = &*self.shared.store;
        if let Some(durable) = store.durable()
            && signal.outcome().is_some_and(|r| !r.awaiting_approval())
        {
            let safe_again = may_wait && self.safe_again(action);
            match unwritten {
                Some(unwritten) => unwritten.write_ended_with_outcome(store, signal, safe_again),
                None => durable.run_outcome(PEN, &self.agent.id, run, signal, safe_again),
            }
            return true;
        }
        if let Some(unwritten) = unwritten {
            unwritten.write_ended(store);
        }
        false
    }

    /// Keeps an armed schedule.
    pub(super) fn keep_schedule(&self, key: &str, after: Duration, signal: &Signal, if_missed: IfMissed) {
        if let Some(durable) = self.shared.store.durable() {
            let due = Utc::now() + chrono::TimeDelta::from_std(after).unwrap_or(chrono::TimeDelta::MAX);
            let record = ScheduleRecord {
                agent: self.agent.id.clone(),
                key: key.to_owned(),
                due,
                signal: signal.clone(),
                if_missed,
            };
            durable.schedule_armed(PEN, record);
        }
    }

    /// Forgets a schedule that fired or was cancelled.
    pub(super) fn forget_schedule(&self, key: &str) {
        if let Some(durable) = self.shared.store.durable() {
            durable.schedule_cleared(PEN, &self.agent.id, key);
        }
    }

    /// A schedule fired: its signal is fed, then the schedule forgotten (a crash in between fires it once more
    /// unless the recovery finds its signal among the logged inputs).
    pub(super) fn fire(&mut self, key: String, signal: Signal) {
        if let Some(underway) = self.under() {
            underway.schedules.remove(&key);
        }
        self.feed(signal);
        self.forget_schedule(&key);
    }

    /// Settles what was going on when the process stopped (see the module docs).
    pub(super) fn resolve(&mut self, recovered: Recovered) {
        self.seq = recovered.seq;
        self.incarnation = recovered.incarnation;
        let journaled: HashSet<&str> =
            recovered.runs.iter().filter_map(|r| r.plan.as_ref()).map(|p| p.key.as_str()).collect();
        let unjournaled: Vec<Replayed> =
            recovered.replayed.iter().filter(|r| !journaled.contains(r.key.as_str())).cloned().collect();
        // Jobs first: a submitting run started again below finds its job on the board.
        self.resolve_jobs(recovered.jobs, &recovered.inputs);
        for run in recovered.runs {
            self.resolve_run(run);
        }
        // Runs the log asked for that never reached the journal: asked for now.
        for replayed in unjournaled {
            let by = Requester::Agent { correlation: Some(replayed.correlation), cause: Some(replayed.cause) };
            let key = RunKey::Given(replayed.key.into());
            self.request_run(RunRequest { action: replayed.action, params: replayed.params, by, key });
        }
        for schedule in recovered.schedules {
            let fired = recovered.inputs.contains(&schedule.signal.id());
            // Missed: due while the process was down. One due since the runtime started (met late by a thaw) is
            // not missed; it fires now.
            let missed = schedule.due <= self.shared.started_at;
            if fired || (missed && schedule.if_missed == IfMissed::Skip) {
                self.forget_schedule(&schedule.key);
                continue;
            }
            let after = (schedule.due - Utc::now()).to_std().unwrap_or(Duration::ZERO);
            self.arm(schedule.key, after, schedule.signal);
        }
    }

    fn resolve_run(&mut self, run: KeyedRun) {
        let status = run.record.status();
        let by_agent = run.plan.as_ref().is_some_and(|p| p.by_agent);
        // A run whose end is journaled but whose outcome is not: the process stopped between the two, and the
        // agent never heard of it. (A run the recovery itself ended as interrupted and started again has no
        // outcome either; the run started again answers for it.)
        let outcome_lost = status.is_final()
            && by_agent
            && !run.delivered
            && run.outcome.is_none()
            && run.record.error != Some(crate::action::ErrorClass::Interrupted);
        if outcome_lost {
            // The agent decides, as for a run with side effects that was going on: it is told the run was
            // interrupted (its record, ended, stays as it is; the outcome is kept with it).
            let ids = RunIds {
                run: run.record.run,
                action: run.record.action.clone(),
                correlation: run.record.correlation,
                causation: run.plan.as_ref().and_then(|p| p.cause),
            };
            let why = "it ended, but the process stopped before its outcome was kept";
            let error = self.interrupt(&ids, why, false);
            self.tell_outcome(&ids, ids.report(Outcome::from_error(&error, Duration::ZERO, 0)), None, (false, None));
            return;
        }
        if status.is_final() {
            if by_agent
                && !run.delivered
                && let Some(outcome) = run.outcome
            {
                // Read from the journal, where it is kept.
                let kept = Some(run.record.run);
                self.work().inbox.push_back(super::Inbound { signal: outcome, kept });
            }
            return;
        }
        let ids = RunIds {
            run: run.record.run,
            action: run.record.action.clone(),
            correlation: run.record.correlation,
            causation: run.plan.as_ref().and_then(|p| p.cause),
        };
        let plan = match run.plan.filter(|p| p.by_agent) {
            Some(plan) if status == RunStatus::AwaitingApproval => return self.await_again(ids, plan),
            Some(plan) => plan,
            None => {
                // A routine's call or an outside caller's run: its caller did not survive the process.
                self.interrupt(&ids, "its caller was in the process that stopped", true);
                return;
            }
        };
        let safe_again = self.safe_again(&ids.action);
        let started = matches!(status, RunStatus::Running);
        if started && !safe_again {
            let why = "it was running when the process stopped, and it has side effects";
            // Its outcome is kept before it is journaled as ended: a crash in between leaves it going on (to be
            // answered by the next recovery), never ended without its answer.
            let error = ActionError::interrupted(why);
            self.tell_outcome(&ids, ids.report(Outcome::from_error(&error, Duration::ZERO, 0)), None, (false, None));
            self.interrupt(&ids, why, true);
            return;
        }
        // Not started yet, or safe to run again: run again, with the same key. The run started again reaches the
        // journal's writer before this one is journaled as interrupted (one that ended at once is handled now,
        // which journals it): a crash in between leaves this one going on, to be started again by the next
        // recovery, never ended with no run left to answer for its key.
        let by = Requester::Agent { correlation: Some(plan.correlation), cause: plan.cause };
        let key = RunKey::Given(plan.key.into());
        self.request_run(RunRequest { action: ids.action.clone(), params: plan.params, by, key });
        while let Some(ended) = self.under().and_then(|u| u.ended.pop_front()) {
            self.conclude(ended);
        }
        self.interrupt(&ids, "started again after the process stopped", true);
    }

    /// Ends a run the process stopped under as `Interrupted`, announced, and journaled so if `journal` (a run
    /// whose end is journaled keeps its record); returns the error.
    fn interrupt(&self, ids: &RunIds, why: &str, journal: bool) -> ActionError {
        let error = ActionError::interrupted(why);
        let update = RunUpdate {
            status: Some(RunStatus::Failed),
            error: Some(crate::action::ErrorClass::Interrupted),
            ..RunUpdate::default()
        };
        if journal && let Err(err) = self.shared.store.update(PEN, ids.run, update, Utc::now()) {
            tracing::warn!(run = %ids.run, %err, "the journal refused to end an interrupted run");
        }
        let kind = EventKind::ActionFailed {
            action: ids.action.clone(),
            class: crate::action::ErrorClass::Interrupted,
            message: error.to_string(),
        };
        self.shared.events.announce(&self.agent.id, Some(ids.run), Some(ids.correlation), kind);
        error
    }

    /// A run that waited for approval when the process stopped waits again, under the same run id, so an
    /// approval given after the restart reaches it; it is announced again (for approvers on the new event
    /// stream), and its expiry counts from when it was first asked for, not from the restart.
    fn await_again(&mut self, ids: RunIds, plan: RunPlan) {
        let by = Requester::Agent { correlation: Some(plan.correlation), cause: plan.cause };
        let mut ctx = self.run_context(ids.action.clone(), &by, RunKey::Given(plan.key.into()), ids.run);
        ctx.correlation_id = ids.correlation;
        let in_hand = Box::new(crate::runner::RunInHand::new(ctx, plan.params));
        let ticket = Ticket { run: in_hand, by, approved: false, cleared: None, metered: false };
        let contract = self.table.get(&ids.action).map(|a| a.action.spec().clone());
        let risk = contract.as_ref().map_or(crate::action::Risk::High, |c| self.policy.effective_risk(c));
        let digest =
            contract.as_ref().map_or(Uuid::nil(), |c| crate::action::approval_digest(c, risk, &ticket.run.params));
        if let Some(contract) = contract {
            self.announce_asked(&ticket, risk, contract, digest);
        }
        self.park(ticket, risk, digest);
    }
}
