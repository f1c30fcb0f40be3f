//! How the server carries out effects: what each one means (and which are refused) is decided by the pure
//! [`crate::interpret`] module it shares with the simulator; this module does the I/O.

use super::ServerState;
use crate::agent::Agent;
use crate::effect::{Effect, EffectKind, EffectRefusal, Target};
use crate::events::EventKind;
use crate::id::AgentId;
use crate::interpret::{Command, KeyFrom, Origin};
use crate::messages::ServerMsg;
use crate::policy::Policy;
use crate::signal::Signal;
use crate::store::PEN;
use crate::store::Refusal;
use chrono::Utc;
use serde_json::Value;
use std::time::Duration;
use uuid::Uuid;

/// The most room made ahead for the outcomes of one fan-out's runs (see [`ServerState::interpret`]).
const ENDED_ROOM_AT_MOST: usize = 4_096;

impl<A: Agent> ServerState<A> {
    /// Interprets effects in order, refusing (journaled and announced, never applied) the ones `origin` may not
    /// ask for.
    pub(crate) fn interpret(&mut self, effects: Vec<Effect>, origin: Origin<'_>) {
        self.make_room(&effects);
        for effect in effects {
            let command = crate::interpret::interpret(effect, origin, &self.policy, &self.source);
            self.carry_out(command, origin, None);
        }
    }

    /// Logs input `input` (the outcome kept for run `kept`, if it is one) and interprets the effects its step
    /// returned. The emits among them that go to agents elsewhere are kept in the journal first (see
    /// [`crate::store::Durable::sending`]): written before the input, so an input the journal keeps never lost
    /// what it emitted, and a recovery sends again what was not sent on.
    pub(super) fn interpret_input(&mut self, effects: Vec<Effect>, input: &Signal, kept: Option<Uuid>) {
        let origin = Origin::Step(input);
        let may_go_elsewhere =
            |effect: &Effect| matches!(&effect.kind, EffectKind::Emit { to: Target::Agent(_) | Target::Parent, .. });
        if self.shared.elsewhere.is_none()
            || self.shared.store.durable().is_none()
            || !effects.iter().any(may_go_elsewhere)
        {
            self.log_input(input, kept);
            return self.interpret(effects, origin);
        }
        self.make_room(&effects);
        let commands: Vec<(Command, Option<bool>)> = effects
            .into_iter()
            .map(|effect| {
                let command = crate::interpret::interpret(effect, origin, &self.policy, &self.source);
                let kept = match &command {
                    Command::Emit { signal, to } => self.keep_if_elsewhere(signal, to),
                    _ => false,
                };
                (command, Some(kept))
            })
            .collect();
        self.log_input(input, kept);
        for (command, kept) in commands {
            self.carry_out(command, origin, kept);
        }
    }

    /// Room for the outcomes of the runs `effects` ask for, made once: a fan-out of a thousand runs that end at
    /// once would otherwise grow the queue of ended runs ten times over, copying it each time. (Up to a bound: a
    /// fan-out far larger is left to grow it, rather than holding room for runs that may wait in the queue.)
    fn make_room(&mut self, effects: &[Effect]) {
        let runs = effects.iter().filter(|effect| matches!(effect.kind, EffectKind::Run { .. })).count();
        if runs > 1 {
            self.work().ended.reserve(runs.min(ENDED_ROOM_AT_MOST));
        }
    }

    /// Carries out one interpreted effect; `kept`, for an emit: whether it was kept in the journal, for elsewhere
    /// (`None`: not decided yet, see [`ServerState::emit`]).
    fn carry_out(&mut self, command: Command, origin: Origin<'_>, kept: Option<bool>) {
        let cause = origin.cause();
        match command {
            Command::Register { action, skill } => self.register(action, skill.as_ref()),
            Command::Deregister { action } => self.table.deregister(&action),
            Command::Run { action, params, key } => {
                // A run asked for by an input is keyed by it; one asked for by a run's or job's effects is
                // keyed by its own id.
                let key = match key {
                    KeyFrom::Input => self.next_run_key(),
                    KeyFrom::Run => crate::action::RunKey::Run,
                };
                self.run_for_agent(action, params, cause, key);
            }
            Command::Emit { signal, to } => self.emit(signal, to, kept),
            Command::Reply { to, data } => {
                if let Some(port) = self.under().and_then(|u| u.calls.remove(&to)) {
                    let _ = port.send(data);
                }
            }
            Command::Schedule { key, after, signal, if_missed } => self.schedule(key, after, signal, if_missed),
            Command::Cancel { key } => {
                if let Some(armed) = self.under().and_then(|u| u.schedules.remove(&key)) {
                    armed.task.abort();
                    self.forget_schedule(&key);
                }
            }
            Command::Spawn { id, agent, init, policy } => self.spawn_child(id, agent, init, *policy),
            Command::StopChild { id } => self.stop_child(&id),
            Command::Stop { reason } => self.stop_self(crate::restart::Exit::Normal(reason.into())),
            Command::Mount { skill, opts } => {
                if let Err(err) = self.mount(&skill, &opts) {
                    self.mount_refused(cause, (skill, true), origin, &err);
                }
            }
            Command::Unmount { skill } => {
                if let Err(err) = self.unmount(&skill) {
                    self.mount_refused(cause, (skill, false), origin, &err);
                }
            }
            Command::Refused(refusal) => self.refuse_effect(cause, refusal),
        }
    }

    /// A `MountSkill` (`mounting`) or `UnmountSkill` effect that failed: journaled and announced as refused, and
    /// told to the agent as an `agent.mount_failed` signal (in its inbox, before its next message), so it can see
    /// why the skill it asked for is not there rather than meeting "not registered" later.
    fn mount_refused(
        &mut self,
        cause: Option<&Signal>,
        (skill, mounting): (crate::id::SkillId, bool),
        origin: Origin<'_>,
        error: &crate::error::RuntimeError,
    ) {
        let error = error.to_string();
        if let Some(signal) = crate::kinds::mount_failed(&self.source, (&skill, mounting), &error, cause) {
            self.work().inbox.push_back(super::Inbound { signal, kept: None });
        }
        self.refuse_effect(cause, Command::mount_failed(mounting, skill, origin, error));
    }

    /// Journals and announces an effect the server did not apply.
    pub(super) fn refuse_effect(&self, cause: Option<&Signal>, refusal: EffectRefusal) {
        tracing::warn!(agent = %self.agent.id, %refusal, "an effect was refused");
        let correlation = cause.map(Signal::correlation_id);
        let record = Refusal { agent: self.agent.id.clone(), at: Utc::now(), cause: cause.map(Signal::id), refusal };
        let kind = EventKind::EffectRefused { refusal: record.refusal.clone() };
        self.shared.store.refused(PEN, record);
        self.shared.events.announce(&self.agent.id, None, correlation, kind);
    }

    /// The agent an emit to `to` is for, if it is for one.
    fn emitted_to<'a>(&'a self, to: &'a Target) -> Option<&'a AgentId> {
        match to {
            Target::Agent(id) => Some(id),
            Target::Parent => self.again.parent.as_ref(),
            Target::Topic(_) => None,
        }
    }

    /// Keeps in the journal an emit to an agent elsewhere, until it is sent on; whether it did.
    fn keep_if_elsewhere(&self, signal: &Signal, to: &Target) -> bool {
        let (Some(durable), Some(to)) = (self.shared.store.durable(), self.emitted_to(to)) else { return false };
        if !crate::sleep::goes_elsewhere(&self.shared, to) {
            return false;
        }
        durable.sending(PEN, &self.agent.id, to, signal);
        true
    }

    /// Emits a signal. One to an agent elsewhere is kept in the journal (`kept`: whether it was already, when
    /// that was decided before its input was logged; the decision stands, so no emit is kept after its input) and
    /// handed to the runtime's hook for elsewhere with the agent that keeps it.
    fn emit(&self, signal: Signal, to: Target, kept: Option<bool>) {
        if kept.unwrap_or_else(|| self.keep_if_elsewhere(&signal, &to))
            && let (Some(hook), Some(id)) = (&self.shared.elsewhere, self.emitted_to(&to))
        {
            let kept_by = Some(self.agent.id.clone());
            return hook(crate::elsewhere::Elsewhere::Agent { to: id.clone(), signal, kept_by });
        }
        let delivered = match to {
            Target::Agent(id) => crate::sleep::deliver_anywhere(&self.shared, &id, signal),
            Target::Parent => {
                self.again.parent.as_ref().is_some_and(|p| crate::sleep::deliver_anywhere(&self.shared, p, signal))
            }
            Target::Topic(topic) => {
                let here = crate::sleep::publish(&self.shared, &topic, &signal) > 0;
                if let Some(hook) = &self.shared.elsewhere {
                    hook(crate::elsewhere::Elsewhere::Topic { topic, signal });
                }
                here || self.shared.elsewhere.is_some()
            }
        };
        if !delivered {
            tracing::debug!(agent = %self.agent.id, "an emitted signal reached nobody");
        }
    }

    /// Starts a child of a registered agent type under the policy the interpretation settled on; a failure
    /// comes back as an `agent.spawn_failed` signal.
    fn spawn_child(&mut self, id: AgentId, agent: String, init: Value, policy: Policy) {
        let Some(spawner) = self.shared.spawners.get(&agent).map(|s| s.clone()) else {
            let error = crate::error::RuntimeError::UnknownAgentType(agent);
            if let Some(signal) = crate::kinds::spawn_failed(&self.source, &id, &error.to_string()) {
                self.work().inbox.push_back(super::Inbound { signal, kept: None });
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
                let _ = me.cast(ServerMsg::Signal(Box::new(signal)));
            }
        });
    }

    fn stop_child(&self, id: &AgentId) {
        if let Some(child) = self.shared.directory.get(id)
            && child.parent.as_ref() == Some(&self.agent.id)
        {
            self.shared.stop_agent(&child, format!("stopped by its parent `{}`", self.agent.id));
        }
    }

    fn schedule(&mut self, key: String, after: Duration, signal: Signal, if_missed: crate::effect::IfMissed) {
        if self.draining() {
            tracing::debug!(agent = %self.agent.id, %key, "not scheduling while the runtime shuts down");
            return;
        }
        let limit = self.policy.limits.schedules;
        let schedules = &mut self.work().schedules;
        schedules.retain(|_, armed| !armed.task.is_finished());
        if !schedules.contains_key(&key) && schedules.len() >= limit {
            let refusal = EffectRefusal::LimitReached {
                effect: "schedule".to_owned(),
                what: "schedules".to_owned(),
                knob: "schedules".to_owned(),
                limit: limit as u64,
            };
            return self.refuse_effect(None, refusal);
        }
        self.keep_schedule(&key, after, &signal, if_missed);
        self.arm(key, after, signal);
    }

    /// Starts a schedule's timer (replacing one with the same key): its signal comes back as a `Fire` message.
    pub(super) fn arm(&mut self, key: String, after: Duration, signal: Signal) {
        let me = self.myself.clone();
        let schedules = &mut self.work().schedules;
        schedules.retain(|_, armed| !armed.task.is_finished());
        if let Some(previous) = schedules.remove(&key) {
            previous.task.abort();
        }
        let fired = key.clone();
        let task = tokio::spawn(async move {
            tokio::time::sleep(after).await;
            let _ = me.cast(ServerMsg::Fire(fired, Box::new(signal)));
        });
        schedules.insert(key, super::Armed { task, due: tokio::time::Instant::now() + after });
    }
}
