//! How the server interprets effects, and which effects it refuses: a change to the action table from anything
//! but mounting, a signal of the runtime's own kinds asked for by someone else, a child the policy does not
//! allow.

use super::ServerState;
use crate::action::Capability;
use crate::agent::Agent;
use crate::effect::{Effect, EffectKind, EffectMeta, EffectRefusal, Target};
use crate::events::EventKind;
use crate::id::ActionId;
use crate::id::AgentId;
use crate::messages::ServerMsg;
use crate::policy::Policy;
use crate::signal::Signal;
use crate::store::Refusal;
use chrono::Utc;
use serde_json::Value;
use std::time::Duration;

/// Where effects come from, which decides what they may do.
#[derive(Clone, Copy)]
pub(crate) enum Origin<'a> {
    /// Mounting, unmounting or refreshing a skill (or the agent's start skills): the only origin that may
    /// change the action table.
    Mounting,
    /// The agent's `step` on this signal (its own handler or a mounted skill's).
    Step(&'a Signal),
    /// A run that completed, through its context.
    Run,
    /// A job's run, through its context.
    Job,
}

impl Origin<'_> {
    fn describe(&self, meta_skill: Option<&crate::id::SkillId>) -> String {
        match (self, meta_skill) {
            (Origin::Mounting, _) => "mounting".to_owned(),
            (Origin::Step(signal), Some(skill)) => format!("skill `{skill}` handling a `{}` signal", signal.kind()),
            (Origin::Step(signal), None) => format!("the agent handling a `{}` signal", signal.kind()),
            (Origin::Run, _) => "a completed run".to_owned(),
            (Origin::Job, _) => "a job's run".to_owned(),
        }
    }

    fn cause(&self) -> Option<&Signal> {
        match self {
            Origin::Step(signal) => Some(signal),
            _ => None,
        }
    }
}

impl<A: Agent> ServerState<A> {
    /// Interprets effects in order, refusing (journaled and announced, never applied) the ones `origin` may not
    /// ask for.
    pub(crate) fn interpret(&mut self, effects: Vec<Effect>, origin: Origin<'_>) {
        for effect in effects {
            let cause = origin.cause();
            match effect.kind {
                EffectKind::RegisterAction { action } => match origin {
                    Origin::Mounting => self.register(action, effect.meta.skill.as_ref()),
                    _ => self.refuse_table_change("register_action", action, origin, &effect.meta),
                },
                EffectKind::DeregisterAction { action } => match origin {
                    Origin::Mounting => self.table.deregister(&action),
                    _ => self.refuse_table_change("deregister_action", action, origin, &effect.meta),
                },
                EffectKind::Run { action, params } => {
                    // A run asked for by an input is keyed by it; one asked for by a run's or job's effects is
                    // keyed by its own id.
                    let key = match origin {
                        Origin::Step(_) => self.next_run_key(),
                        _ => crate::action::RunKey::Run,
                    };
                    self.run_for_agent(action, params, cause, key);
                }
                EffectKind::Emit { signal, to } => {
                    if let Some(signal) = self.own_signal(signal, origin, effect.meta.skill.as_ref()) {
                        self.emit(signal, to);
                    }
                }
                EffectKind::Reply { to, data } => {
                    if let Some(port) = self.calls.remove(&to) {
                        let _ = port.send(data);
                    }
                }
                EffectKind::Schedule { key, after, signal, if_missed } => {
                    if let Some(signal) = self.own_signal(signal, origin, effect.meta.skill.as_ref()) {
                        self.schedule(key, after, signal, if_missed);
                    }
                }
                EffectKind::Cancel { key } => {
                    if let Some(task) = self.schedules.remove(&key) {
                        task.abort();
                        self.forget_schedule(&key);
                    }
                }
                EffectKind::SpawnAgent { id, agent, init, policy } => self.spawn_child(id, agent, init, policy, cause),
                EffectKind::StopChild { id } => self.stop_child(&id),
                EffectKind::Stop { reason } => self.stop_self(crate::supervisor::Exit::Normal(reason)),
            }
        }
    }

    /// Refuses a `RegisterAction` or `DeregisterAction` that did not come from mounting.
    fn refuse_table_change(&self, effect: &str, action: ActionId, origin: Origin<'_>, meta: &EffectMeta) {
        let refusal = EffectRefusal::TableChange {
            effect: effect.to_owned(),
            action,
            origin: origin.describe(meta.skill.as_ref()),
        };
        self.refuse_effect(origin.cause(), refusal);
    }

    /// A signal the agent emits or schedules, stamped with the agent's own source (so its `source` says who
    /// made it), or `None` (and a refusal) when its kind is one of the runtime's own.
    fn own_signal(&self, signal: Signal, origin: Origin<'_>, skill: Option<&crate::id::SkillId>) -> Option<Signal> {
        if crate::kinds::is_reserved(signal.kind().as_str()) {
            let refusal =
                EffectRefusal::ReservedKind { kind: signal.kind().to_string(), origin: origin.describe(skill) };
            self.refuse_effect(origin.cause(), refusal);
            return None;
        }
        Some(signal.with_source(self.source.clone()))
    }

    /// Journals and announces an effect the server did not apply.
    pub(super) fn refuse_effect(&self, cause: Option<&Signal>, refusal: EffectRefusal) {
        tracing::warn!(agent = %self.agent.id, %refusal, "an effect was refused");
        let correlation = cause.map(Signal::correlation_id);
        let record = Refusal { agent: self.agent.id.clone(), at: Utc::now(), cause: cause.map(Signal::id), refusal };
        let kind = EventKind::EffectRefused { refusal: record.refusal.clone() };
        self.shared.store.refused(record);
        self.shared.events.announce(&self.agent.id, None, correlation, kind);
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

    /// Starts a child of a registered agent type under the parent's policy, or a narrower one the effect names.
    /// Needs the `spawn` capability; a failure comes back as an `agent.spawn_failed` signal.
    fn spawn_child(
        &mut self,
        id: AgentId,
        agent: String,
        init: Value,
        policy: Option<Box<Policy>>,
        cause: Option<&Signal>,
    ) {
        if !self.policy.grants(&Capability::SPAWN) {
            self.refuse_effect(cause, EffectRefusal::SpawnNotGranted { child: id });
            return;
        }
        let policy = match policy {
            None => (*self.policy).clone(),
            Some(policy) => match policy.within(&self.policy) {
                Ok(()) => *policy,
                Err(reason) => {
                    self.refuse_effect(cause, EffectRefusal::PolicyBroader { child: id, reason });
                    return;
                }
            },
        };
        let Some(spawner) = self.shared.spawners.get(&agent).map(|s| s.clone()) else {
            let error = crate::error::RuntimeError::UnknownAgentType(agent);
            if let Some(signal) = crate::kinds::spawn_failed(&self.source, &id, &error.to_string()) {
                self.inbox.push_back(signal);
            }
            return;
        };
        let shared = self.shared.clone();
        let me = self.myself.clone();
        let parent = self.agent.id.clone();
        let source = self.source.clone();
        tokio::spawn(async move {
            if let Err(error) = spawner(shared, id.clone(), init, Some(parent), policy).await
                && let Some(signal) = crate::kinds::spawn_failed(&source, &id, &error.to_string())
            {
                let _ = me.cast(ServerMsg::Signal(signal));
            }
        });
    }

    fn stop_child(&self, id: &AgentId) {
        if let Some(child) = self.shared.directory.get(id)
            && child.parent.as_ref() == Some(&self.agent.id)
        {
            child.stop(format!("stopped by its parent `{}`", self.agent.id));
        }
    }

    fn schedule(&mut self, key: String, after: Duration, signal: Signal, if_missed: crate::effect::IfMissed) {
        if self.draining.is_some() {
            tracing::debug!(agent = %self.agent.id, %key, "not scheduling while the runtime shuts down");
            return;
        }
        self.keep_schedule(&key, after, &signal, if_missed);
        self.arm(key, after, signal);
    }

    /// Starts a schedule's timer (replacing one with the same key): its signal comes back as a `Fire` message.
    pub(super) fn arm(&mut self, key: String, after: Duration, signal: Signal) {
        self.schedules.retain(|_, task| !task.is_finished());
        if let Some(previous) = self.schedules.remove(&key) {
            previous.abort();
        }
        let me = self.myself.clone();
        let fired = key.clone();
        let task = tokio::spawn(async move {
            tokio::time::sleep(after).await;
            let _ = me.cast(ServerMsg::Fire(fired, signal));
        });
        self.schedules.insert(key, task);
    }
}
