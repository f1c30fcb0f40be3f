//! How the server interprets effects, and the gate every run passes.

use super::{Pending, Running, ServerMsg, ServerState};
use crate::action::{ActionContext, ActionError, Outcome};
use crate::agent::Agent;
use crate::effect::{Effect, EffectKind, Target};
use crate::events::EventKind;
use crate::id::ActionId;
use crate::policy::RunDecision;
use crate::runtime::RuntimeError;
use crate::signal::Signal;
use crate::store::{RunRecord, RunStatus, RunUpdate};
use chrono::Utc;
use serde_json::Value;
use std::time::Duration;
use uuid::Uuid;

impl<A: Agent> ServerState<A> {
    /// Interprets effects in order. `cause` is the signal whose handling produced them, if any.
    pub(crate) fn interpret(&mut self, effects: Vec<Effect>, cause: Option<&Signal>) {
        for effect in effects {
            match effect.kind {
                EffectKind::RegisterAction { action } => self.register(action, effect.meta.skill.as_ref()),
                EffectKind::DeregisterAction { action } => {
                    self.table.remove(&action);
                }
                EffectKind::Run { action, params } => self.start_run(action, params, cause),
                EffectKind::Emit { signal, to } => self.emit(signal, to),
                EffectKind::Reply { to, data } => {
                    if let Some(port) = self.calls.remove(&to) {
                        let _ = port.send(data);
                    }
                }
                EffectKind::Schedule { key, after, signal } => self.schedule(key, after, signal),
                EffectKind::Cancel { key } => {
                    if let Some(task) = self.schedules.remove(&key) {
                        task.abort();
                    }
                }
                EffectKind::SpawnAgent { id, agent, init } => self.spawn_child(id, agent, init),
                EffectKind::StopChild { id } => {
                    if let Some(child) = self.shared.directory.get(&id)
                        && child.parent.as_ref() == Some(&self.agent.id)
                    {
                        child.cell.stop(Some(format!("stopped by its parent `{}`", self.agent.id)));
                    }
                }
                EffectKind::Stop { reason } => self.myself.stop(Some(reason)),
            }
        }
    }

    fn register(&mut self, action: ActionId, skill: Option<&crate::id::SkillId>) {
        let catalog = &self.shared.catalog;
        let from_skill = skill.and_then(|s| catalog.get(s));
        let found = from_skill
            .into_iter()
            .chain(self.agent.skills().keys().filter_map(|s| catalog.get(s)))
            .flat_map(|s| s.actions())
            .find(|a| a.spec().id == action)
            .cloned();
        match found {
            Some(dyn_action) => {
                self.table.insert(action, dyn_action);
            }
            None => tracing::error!(%action, "a registered action is in no catalog skill"),
        }
    }

    fn emit(&self, signal: Signal, to: Target) {
        let directory = &self.shared.directory;
        let delivered = match to {
            Target::Agent(id) => directory.deliver(&id, signal),
            Target::Parent => self.parent.as_ref().is_some_and(|p| directory.deliver(p, signal)),
            Target::Topic(topic) => {
                let subscribers = directory.subscribers(&topic);
                subscribers.iter().filter(|id| directory.deliver(id, signal.clone())).count() > 0
            }
        };
        if !delivered {
            tracing::debug!(agent = %self.agent.id, "an emitted signal reached nobody");
        }
    }

    /// Starts a child of a registered agent type; a failure comes back as an `agent.spawn_failed` signal.
    fn spawn_child(&self, id: crate::id::AgentId, agent: String, init: Value) {
        let Some(spawner) = self.shared.spawners.get(&agent).map(|s| s.clone()) else {
            let error = RuntimeError::UnknownAgentType(agent);
            self.tell_self("agent.spawn_failed", serde_json::json!({"child": id, "error": error.to_string()}));
            return;
        };
        let shared = self.shared.clone();
        let me = self.myself.clone();
        let parent = self.agent.id.clone();
        tokio::spawn(async move {
            if let Err(error) = spawner(shared, id.clone(), init, Some(parent)).await {
                let data = serde_json::json!({"child": id, "error": error.to_string()});
                if let Ok(signal) = Signal::builder("agent.spawn_failed").data(data).build() {
                    let _ = me.cast(ServerMsg::Signal(signal));
                }
            }
        });
    }

    fn tell_self(&self, kind: &str, data: Value) {
        if let Ok(signal) = Signal::builder(kind).data(data).build() {
            let _ = self.myself.cast(ServerMsg::Signal(signal));
        }
    }

    fn schedule(&mut self, key: String, after: Duration, signal: Signal) {
        if self.draining.is_some() {
            tracing::debug!(agent = %self.agent.id, %key, "not scheduling while the runtime shuts down");
            return;
        }
        self.schedules.retain(|_, task| !task.is_finished());
        if let Some(previous) = self.schedules.remove(&key) {
            previous.abort();
        }
        let me = self.myself.clone();
        let task = tokio::spawn(async move {
            tokio::time::sleep(after).await;
            let _ = me.cast(ServerMsg::Signal(signal));
        });
        self.schedules.insert(key, task);
    }

    /// The gate: the action must be registered here, the policy must allow it and grant its capabilities, and
    /// a risky run waits for approval. Every run is journaled, even one the gate refuses.
    fn start_run(&mut self, action: ActionId, params: Value, cause: Option<&Signal>) {
        let run = Uuid::now_v7();
        let correlation = cause.map_or(run, Signal::correlation_id);
        let ctx = ActionContext {
            agent_id: self.agent.id.clone(),
            action_id: action.clone(),
            run_id: run,
            attempt: 0,
            correlation_id: correlation,
            causation_id: cause.map(Signal::id),
        };
        let record = RunRecord::queued(run, self.agent.id.clone(), action.clone(), &params, correlation);
        if let Err(err) = self.shared.store.record(record) {
            tracing::error!(%err, "the journal refused a new run");
        }
        self.shared.events.announce(
            &self.agent.id,
            Some(run),
            Some(correlation),
            EventKind::ActionQueued { action: action.clone() },
        );
        if self.draining.is_some() {
            return self.block(&ctx, ActionError::cancelled("the runtime is shutting down; no new runs start"));
        }
        let Some(dyn_action) = self.table.get(&action).cloned() else {
            let reason = format!(
                "action `{action}` is not registered on agent `{}`; mount a skill that provides it",
                self.agent.id
            );
            return self.block(&ctx, ActionError::denied(reason));
        };
        match self.policy.may_run(dyn_action.spec()) {
            RunDecision::Deny { reason } => self.block(&ctx, ActionError::denied(reason)),
            RunDecision::NeedsApproval { risk } => {
                self.journal(run, RunUpdate { status: Some(RunStatus::AwaitingApproval), ..RunUpdate::default() });
                self.shared.events.announce(
                    &self.agent.id,
                    Some(run),
                    Some(correlation),
                    EventKind::ApprovalAsked { action },
                );
                let waiting = Outcome::awaiting_approval(format!("waiting for approval (risk {risk:?})"));
                self.deliver_outcome_for(&ctx, &waiting);
                self.awaiting.insert(run, Pending { action: dyn_action, params, ctx });
            }
            RunDecision::Allow => self.enqueue(Pending { action: dyn_action, params, ctx }),
        }
    }

    fn journal(&self, run: Uuid, update: RunUpdate) {
        if let Err(err) = self.shared.store.update(run, update, Utc::now()) {
            tracing::warn!(%run, %err, "the journal refused an update");
        }
    }

    /// Ends a run the gate refused: journaled as blocked, announced, and told to the agent.
    fn block(&self, ctx: &ActionContext, error: ActionError) {
        let outcome = Outcome::failed(&error, Duration::ZERO, 0);
        self.journal(
            ctx.run_id,
            RunUpdate { status: Some(RunStatus::Blocked), error: Some(error.class()), ..RunUpdate::default() },
        );
        let kind = EventKind::ActionBlocked { action: ctx.action_id.clone(), reason: error.to_string() };
        self.shared.events.announce(&self.agent.id, Some(ctx.run_id), Some(ctx.correlation_id), kind);
        self.deliver_outcome_for(ctx, &outcome);
    }

    fn enqueue(&mut self, pending: Pending) {
        if self.running.len() < self.max_in_flight {
            self.launch(pending);
        } else {
            self.queue.push_back(pending);
        }
    }

    pub(crate) fn launch_queued(&mut self) {
        while self.running.len() < self.max_in_flight {
            let Some(next) = self.queue.pop_front() else { break };
            self.launch(next);
        }
    }

    /// Starts a run in its own task; its outcome comes back as a `Finished` message.
    fn launch(&mut self, pending: Pending) {
        let Pending { action, params, ctx } = pending;
        let runner = self.shared.runner.clone();
        let me = self.myself.clone();
        let run = ctx.run_id;
        let task_ctx = ctx.clone();
        let task = tokio::spawn(async move {
            let outcome = runner.execute(&action, params, task_ctx).await;
            let _ = me.cast(ServerMsg::Finished(run, Box::new(outcome)));
        });
        self.running.insert(run, Running { task, ctx });
    }

    /// Approves or denies a run waiting for approval. An approved run is never asked about again, retries
    /// included; a denied one is blocked with a `Denied` error.
    pub(crate) fn decide(&mut self, run: Uuid, approve: bool) -> Result<(), RuntimeError> {
        let pending = self.awaiting.remove(&run).ok_or(RuntimeError::NotAwaitingApproval(run))?;
        let kind = EventKind::ApprovalGiven { action: pending.ctx.action_id.clone(), approved: approve };
        self.shared.events.announce(&self.agent.id, Some(run), Some(pending.ctx.correlation_id), kind);
        if approve {
            self.enqueue(pending);
        } else {
            self.block(&pending.ctx, ActionError::denied("the run was denied by its approver"));
        }
        Ok(())
    }
}
