//! How the server interprets effects, and the gate every run passes.

use super::services::Admitted;
use super::{Admit, Pending, Registered, Running, ServerMsg, ServerState};
use crate::action::{ActionContext, ActionError, DynAction, Frame, Link, Outcome, Risk};
use crate::agent::Agent;
use crate::effect::{Effect, EffectKind, Target};
use crate::events::EventKind;
use crate::id::ActionId;
use crate::id::SkillId;
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
                EffectKind::Stop { reason } => self.stop_self(reason),
            }
        }
    }

    pub(crate) fn register(&mut self, action: ActionId, skill: Option<&SkillId>) {
        let catalog = self.shared.catalog.snapshot();
        let mounted = self.agent.skills().keys();
        let found = skill
            .into_iter()
            .chain(mounted)
            .filter_map(|s| catalog.get(s))
            .find_map(|s| s.actions().iter().find(|a| a.spec().id == action).map(|a| (a.clone(), s.id().clone())));
        match found {
            Some((dyn_action, skill)) => {
                self.table.insert(action, Registered { action: dyn_action, skill: Some(skill) });
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

    /// A run the agent asked for: journaled, through the gate, then queued, parked for approval or refused.
    fn start_run(&mut self, action: ActionId, params: Value, cause: Option<&Signal>) {
        let run = Uuid::now_v7();
        let correlation = cause.map_or(run, Signal::correlation_id);
        let ctx = self.run_context(action, run, correlation, cause.map(Signal::id), None);
        self.journal_queued(&ctx, &params, None);
        match self.gate(&ctx) {
            Gate::Refused(error) => {
                let outcome = self.block(&ctx, &error);
                self.deliver_outcome_for(&ctx, &outcome);
            }
            Gate::NeedsApproval(action, risk) => {
                self.ask_approval(&ctx);
                let waiting = Outcome::awaiting_approval(format!("waiting for approval (risk {risk:?})"));
                self.deliver_outcome_for(&ctx, &waiting);
                self.awaiting.insert(run, Pending { action, params, ctx, caller: None, invoker: None });
            }
            Gate::Pass(action) => self.enqueue(Pending { action, params, ctx, caller: None, invoker: None }),
        }
    }

    /// A nested call an action makes through its context: the same gate as any run; the caller is told when
    /// the call may run (it runs in the caller's task), or why not.
    pub(crate) fn admit(&mut self, admit: Admit) {
        let Admit { action, params, caller, reply } = admit;
        let ctx = self.run_context(action, Uuid::now_v7(), caller.correlation_id, None, Some(&caller));
        self.journal_queued(&ctx, &params, Some(caller.run_id));
        match self.gate(&ctx) {
            Gate::Refused(error) => {
                self.block(&ctx, &error);
                let _ = reply.send(Err(error));
            }
            Gate::NeedsApproval(action, _) => {
                self.ask_approval(&ctx);
                self.awaiting.insert(ctx.run_id, Pending { action, params, ctx, caller: Some(reply), invoker: None });
            }
            Gate::Pass(action) => {
                if reply.send(Ok(Admitted { action, ctx: ctx.clone() })).is_err() {
                    self.shared.runner.cancelled(&ctx, "the caller gave up before the nested call was admitted");
                }
            }
        }
    }

    /// A run asked for from outside the agent (an MCP client, a command line): the same gate as any run, but
    /// nobody can wait for an approval, so a run that needs one is refused (blocked, and journaled so) with
    /// [`RuntimeError::NeedsApproval`]. The outcome goes to the invoker; the agent gets no outcome signal.
    pub(crate) fn invoke(&mut self, invoke: super::Invoke) {
        let super::Invoke { action, params, reply } = invoke;
        let run = Uuid::now_v7();
        let ctx = self.run_context(action, run, run, None, None);
        self.journal_queued(&ctx, &params, None);
        match self.gate(&ctx) {
            Gate::Refused(error) => {
                let outcome = self.block(&ctx, &error);
                let _ = reply.send(Ok(outcome));
            }
            Gate::NeedsApproval(_, risk) => {
                let error = ActionError::denied(format!(
                    "action `{}` needs approval at risk {risk:?}, and a run asked for from outside the agent cannot \
                     wait for one; expected the agent to run it itself, or a policy that does not ask",
                    ctx.action_id
                ));
                self.block(&ctx, &error);
                let refused = RuntimeError::NeedsApproval {
                    agent: self.agent.id.clone(),
                    action: ctx.action_id.clone(),
                    risk,
                    run,
                };
                let _ = reply.send(Err(refused));
            }
            Gate::Pass(action) => {
                self.enqueue(Pending { action, params, ctx, caller: None, invoker: Some(reply) });
            }
        }
    }

    /// The context of a new run: its skill's drive folder and state, the policy, the call stack with a frame
    /// of its own, and the way back to this server.
    fn run_context(
        &self,
        action: ActionId,
        run: Uuid,
        correlation: Uuid,
        causation: Option<Uuid>,
        caller: Option<&ActionContext>,
    ) -> ActionContext {
        let skill = self.table.get(&action).and_then(|r| r.skill.clone());
        let drive = match (&self.shared.data_dir, &skill) {
            (Some(dir), Some(skill)) => Some(super::drive_path(dir, &self.agent.id, skill)),
            _ => None,
        };
        let skill_state = skill.as_ref().and_then(|s| self.agent.skill_state(s)).cloned().unwrap_or(Value::Null);
        let mut stack = caller.map(|c| c.stack().to_vec()).unwrap_or_default();
        stack.push(Frame { action: action.clone(), run_id: run, state: Value::Null });
        let job = caller.and_then(|c| c.link.as_ref()).and_then(|l| l.job);
        ActionContext {
            agent_id: self.agent.id.clone(),
            action_id: action,
            run_id: run,
            attempt: 0,
            correlation_id: correlation,
            causation_id: causation,
            skill,
            drive,
            skill_state,
            policy: self.policy.clone(),
            stack,
            sink: std::sync::Arc::default(),
            link: Some(Link { services: self.services.clone(), job }),
        }
    }

    /// Every run is journaled and announced as queued, even one the gate then refuses.
    fn journal_queued(&self, ctx: &ActionContext, params: &Value, parent_run: Option<Uuid>) {
        let mut record =
            RunRecord::queued(ctx.run_id, self.agent.id.clone(), ctx.action_id.clone(), params, ctx.correlation_id);
        record.parent_run = parent_run;
        if let Err(err) = self.shared.store.record(record) {
            tracing::error!(%err, "the journal refused a new run");
        }
        let kind = EventKind::ActionQueued { action: ctx.action_id.clone(), parent_run, depth: ctx.depth() };
        self.shared.events.announce(&self.agent.id, Some(ctx.run_id), Some(ctx.correlation_id), kind);
    }

    /// The gate: the agent must not be draining, the action must be registered here, the policy must allow it
    /// and grant its capabilities, and a risky run waits for approval.
    fn gate(&self, ctx: &ActionContext) -> Gate {
        if self.draining.is_some() {
            return Gate::Refused(ActionError::cancelled("the runtime is shutting down; no new runs start"));
        }
        let Some(registered) = self.table.get(&ctx.action_id) else {
            return Gate::Refused(ActionError::denied(format!(
                "action `{}` is not registered on agent `{}`; mount a skill that provides it",
                ctx.action_id, self.agent.id
            )));
        };
        match self.policy.may_run(registered.action.spec()) {
            RunDecision::Deny { reason } => Gate::Refused(ActionError::denied(reason)),
            RunDecision::NeedsApproval { risk } => Gate::NeedsApproval(registered.action.clone(), risk),
            RunDecision::Allow => Gate::Pass(registered.action.clone()),
        }
    }

    fn ask_approval(&self, ctx: &ActionContext) {
        self.journal(ctx.run_id, RunUpdate { status: Some(RunStatus::AwaitingApproval), ..RunUpdate::default() });
        let kind = EventKind::ApprovalAsked { action: ctx.action_id.clone() };
        self.shared.events.announce(&self.agent.id, Some(ctx.run_id), Some(ctx.correlation_id), kind);
    }

    fn journal(&self, run: Uuid, update: RunUpdate) {
        if let Err(err) = self.shared.store.update(run, update, Utc::now()) {
            tracing::warn!(%run, %err, "the journal refused an update");
        }
    }

    /// Ends a run the gate refused: journaled as blocked and announced; returns its outcome.
    fn block(&self, ctx: &ActionContext, error: &ActionError) -> Outcome {
        let outcome = Outcome::failed(error, Duration::ZERO, 0);
        self.journal(
            ctx.run_id,
            RunUpdate { status: Some(RunStatus::Blocked), error: Some(error.class()), ..RunUpdate::default() },
        );
        let kind = EventKind::ActionBlocked { action: ctx.action_id.clone(), reason: error.to_string() };
        self.shared.events.announce(&self.agent.id, Some(ctx.run_id), Some(ctx.correlation_id), kind);
        outcome
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

    /// Starts a run in its own task; its outcome comes back as a `Finished` message. A run whose outside caller
    /// gave up is cancelled instead, before it starts or while it runs.
    fn launch(&mut self, pending: Pending) {
        let Pending { action, params, ctx, mut invoker, .. } = pending;
        if invoker.as_ref().is_some_and(|reply| reply.is_closed()) {
            self.shared.runner.cancelled(&ctx, "the caller gave up before the run started");
            return;
        }
        let runner = self.shared.runner.clone();
        let me = self.myself.clone();
        let run = ctx.run_id;
        let ids = super::RunIds::of(&ctx);
        let sink = ctx.sink.clone();
        let task_ctx = ctx;
        let task = tokio::spawn(async move {
            // Boxed, so the task spawned here stays small instead of carrying every attempt's state inline.
            let execution = Box::pin(runner.execute(&action, params, task_ctx));
            let outcome = match invoker.as_mut() {
                None => execution.await,
                Some(reply) => tokio::select! {
                    outcome = execution => outcome,
                    // Dropping the execution cancels the run and journals it so.
                    () = reply.closed() => Outcome::failed(&ActionError::cancelled("the caller gave up"), Duration::ZERO, 0),
                },
            };
            let _ = me.cast(ServerMsg::Finished(run, Box::new(outcome), invoker));
        });
        self.running.insert(run, Running { task, ids, sink });
    }

    /// Approves or denies a run waiting for approval. An approved run is never asked about again, retries
    /// included; a denied one is blocked with a `Denied` error.
    pub(crate) fn decide(&mut self, run: Uuid, approve: bool) -> Result<(), RuntimeError> {
        let pending = self.awaiting.remove(&run).ok_or(RuntimeError::NotAwaitingApproval(run))?;
        let kind = EventKind::ApprovalGiven { action: pending.ctx.action_id.clone(), approved: approve };
        self.shared.events.announce(&self.agent.id, Some(run), Some(pending.ctx.correlation_id), kind);
        match (approve, pending.caller) {
            (true, Some(caller)) => {
                let ctx = pending.ctx.clone();
                if caller.send(Ok(Admitted { action: pending.action, ctx: pending.ctx })).is_err() {
                    self.shared.runner.cancelled(&ctx, "the caller gave up while the call waited for approval");
                }
            }
            (true, None) => self.enqueue(Pending { caller: None, ..pending }),
            (false, caller) => {
                let error = ActionError::denied("the run was denied by its approver");
                let outcome = self.block(&pending.ctx, &error);
                match caller {
                    Some(caller) => {
                        let _ = caller.send(Err(error));
                    }
                    None => self.deliver_outcome_for(&pending.ctx, &outcome),
                }
            }
        }
        Ok(())
    }
}

/// What the gate says about one run.
enum Gate {
    Refused(ActionError),
    NeedsApproval(DynAction, Risk),
    Pass(DynAction),
}
