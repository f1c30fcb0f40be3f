//! What an effect means, decided purely: the one interpretation of effects that the AgentServer and the
//! simulator (the `agentry-sim` crate) both carry out, so their semantics cannot drift. Each effect becomes a
//! [`Command`] for a driver to perform (register an action, start a run, deliver a signal, arm a timer, …) or a
//! refusal: a change to the action table from anything but mounting, a signal of the runtime's own kinds asked
//! for by someone else, a child the policy does not allow. The gate and the action table, the other half of
//! the shared semantics, are in [`crate::table`].

use crate::action::Capability;
use crate::effect::{Effect, EffectKind, EffectRefusal, IfMissed, Target};
use crate::id::{ActionId, AgentId, SkillId};
use crate::policy::Policy;
use crate::signal::Signal;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

/// Where effects come from, which decides what they may do.
#[derive(Clone, Copy)]
pub enum Origin<'a> {
    /// Mounting, unmounting or refreshing a skill (or the agent's start skills): the only origin that may
    /// change the action table.
    Mounting,
    /// The agent's `step` on this signal (its own handler or a mounted skill's).
    Step(&'a Signal),
    /// A run that completed, through its context.
    Run,
    /// A run a caller outside the agent asked for (`Runtime::invoke`, an MCP client), through its context: a
    /// signal it emits or schedules says so in its source ([`crate::kinds::OUTSIDE_SOURCE`]), never that it is
    /// the agent's own.
    Outside,
    /// A job's run, through its context.
    Job,
}

impl Origin<'_> {
    /// Who asked, in words, for a refusal's message.
    pub fn describe(&self, meta_skill: Option<&SkillId>) -> String {
        match (self, meta_skill) {
            (Origin::Mounting, _) => "mounting".to_owned(),
            (Origin::Step(signal), Some(skill)) => format!("skill `{skill}` handling a `{}` signal", signal.kind()),
            (Origin::Step(signal), None) => format!("the agent handling a `{}` signal", signal.kind()),
            (Origin::Run, _) => "a completed run".to_owned(),
            (Origin::Outside, _) => "a run asked for from outside the agent".to_owned(),
            (Origin::Job, _) => "a job's run".to_owned(),
        }
    }

    /// The input that caused the effects, if they came from `step`.
    pub fn cause(&self) -> Option<&Signal> {
        match self {
            Origin::Step(signal) => Some(signal),
            _ => None,
        }
    }
}

/// What a run's idempotency key is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyFrom {
    /// The input that asked for it (a run asked for by `step`): stable across a replay.
    Input,
    /// The run's own id (a run asked for by another run or a job).
    Run,
}

/// What one effect asks the driver to do.
#[derive(Debug)]
pub enum Command {
    /// Add the action to the live table.
    Register {
        /// The action.
        action: ActionId,
        /// The skill to take it from first (the one mounting it).
        skill: Option<SkillId>,
    },
    /// Remove the action from the live table.
    Deregister {
        /// The action.
        action: ActionId,
    },
    /// Ask for a run through the gate.
    Run {
        /// The action.
        action: ActionId,
        /// Its params.
        params: Value,
        /// What its idempotency key is made of.
        key: KeyFrom,
    },
    /// Deliver the signal (already stamped with the agent's source).
    Emit {
        /// The signal.
        signal: Signal,
        /// Where to.
        to: Target,
    },
    /// Answer the call waiting on this signal id.
    Reply {
        /// The id of the signal the call sent.
        to: Uuid,
        /// The answer.
        data: Value,
    },
    /// Arm (or re-arm) the timer of this key.
    Schedule {
        /// The timer's key.
        key: String,
        /// When it fires, from now.
        after: Duration,
        /// What it delivers (already stamped with the agent's source).
        signal: Signal,
        /// What a timer that should have fired while the agent was down does.
        if_missed: IfMissed,
    },
    /// Disarm the timer of this key.
    Cancel {
        /// The timer's key.
        key: String,
    },
    /// Start a child.
    Spawn {
        /// Its id.
        id: AgentId,
        /// Its agent type's registered name.
        agent: String,
        /// Its initial domain state.
        init: Value,
        /// Its policy: the parent's, or the narrower one the effect named.
        policy: Box<Policy>,
    },
    /// Stop the child of this id (only a child of this agent).
    StopChild {
        /// The child.
        id: AgentId,
    },
    /// Stop this agent.
    Stop {
        /// Why.
        reason: String,
    },
    /// Mount a catalog skill on this agent, under its policy; a failure is refused with
    /// [`Command::mount_failed`].
    Mount {
        /// The skill.
        skill: SkillId,
        /// Its mount options.
        opts: Value,
    },
    /// Unmount a skill from this agent.
    Unmount {
        /// The skill.
        skill: SkillId,
    },
    /// Not applied: journal and announce why.
    Refused(EffectRefusal),
}

impl Command {
    /// The refusal for a `MountSkill` (`mounting` true) or `UnmountSkill` that failed with `reason`.
    pub fn mount_failed(mounting: bool, skill: SkillId, origin: Origin<'_>, reason: String) -> EffectRefusal {
        let effect = if mounting { "mount_skill" } else { "unmount_skill" }.to_owned();
        EffectRefusal::Mount { effect, skill, origin: origin.describe(None), reason }
    }
}

/// What one effect means for an agent with `policy` whose signals carry `source`, coming from `origin`.
pub fn interpret(effect: Effect, origin: Origin<'_>, policy: &Policy, source: &Arc<str>) -> Command {
    let skill = effect.meta.skill;
    let table_change = |effect: &str, action: ActionId| {
        Command::Refused(EffectRefusal::TableChange {
            effect: effect.to_owned(),
            action,
            origin: origin.describe(skill.as_ref()),
        })
    };
    // A signal the agent emits or schedules carries its own source; one of the runtime's kinds is refused.
    let own = |signal: Signal| -> Result<Signal, EffectRefusal> {
        if crate::kinds::is_reserved(signal.kind().as_str()) {
            let kind = signal.kind().to_string();
            return Err(EffectRefusal::ReservedKind { kind, origin: origin.describe(skill.as_ref()) });
        }
        match origin {
            Origin::Outside => Ok(signal.with_source(crate::kinds::OUTSIDE_SOURCE.into())),
            // What a step makes follows from the input it handles, unless the agent named another cause.
            Origin::Step(cause) => Ok(signal.with_source(source.clone()).caused_by_default(cause)),
            _ => Ok(signal.with_source(source.clone())),
        }
    };
    let from_a_run = matches!(origin, Origin::Run | Origin::Outside | Origin::Job);
    let mount_outside_step = |effect: &str, asked: SkillId| {
        Command::Refused(EffectRefusal::MountOutsideStep {
            effect: effect.to_owned(),
            skill: asked,
            origin: origin.describe(skill.as_ref()),
        })
    };
    match effect.kind {
        EffectKind::RegisterAction { action } => match origin {
            Origin::Mounting => Command::Register { action, skill },
            _ => table_change("register_action", action),
        },
        EffectKind::DeregisterAction { action } => match origin {
            Origin::Mounting => Command::Deregister { action },
            _ => table_change("deregister_action", action),
        },
        EffectKind::Run { action, params } => {
            let key = match origin {
                Origin::Step(_) => KeyFrom::Input,
                _ => KeyFrom::Run,
            };
            Command::Run { action, params, key }
        }
        EffectKind::Emit { signal, to } => match (own(signal), policy.may_emit(&to)) {
            (Ok(signal), Ok(())) => Command::Emit { signal, to },
            (Err(refused), _) => Command::Refused(refused),
            (Ok(signal), Err(reason)) => Command::Refused(EffectRefusal::EmitNotAllowed {
                kind: signal.kind().to_string(),
                origin: origin.describe(skill.as_ref()),
                reason,
            }),
        },
        EffectKind::Reply { to, data } => Command::Reply { to, data },
        EffectKind::Schedule { key, after, signal, if_missed } => match own(signal) {
            Ok(signal) => Command::Schedule { key, after, signal, if_missed },
            Err(refused) => Command::Refused(refused),
        },
        EffectKind::Cancel { key } => Command::Cancel { key },
        EffectKind::SpawnAgent { id, agent, init, policy: asked } => {
            if !policy.grants(&Capability::SPAWN) {
                return Command::Refused(EffectRefusal::SpawnNotGranted { child: id });
            }
            match asked {
                None => Command::Spawn { id, agent, init, policy: Box::new(policy.clone()) },
                Some(asked) => match asked.within(policy) {
                    Ok(()) => Command::Spawn { id, agent, init, policy: asked },
                    Err(reason) => Command::Refused(EffectRefusal::PolicyBroader { child: id, reason }),
                },
            }
        }
        // The skills mounted are the agent's state, which is the fold of its inputs: only its own handling of an
        // input (or mounting itself) changes them, so a recovery that replays the inputs mounts them again. A run
        // or job asking for it would change the state outside any input, and vanish with the process.
        EffectKind::MountSkill { skill, .. } if from_a_run => mount_outside_step("mount_skill", skill),
        EffectKind::UnmountSkill { skill } if from_a_run => mount_outside_step("unmount_skill", skill),
        EffectKind::MountSkill { skill, opts } => Command::Mount { skill, opts },
        EffectKind::UnmountSkill { skill } => Command::Unmount { skill },
        EffectKind::StopChild { id } => Command::StopChild { id },
        EffectKind::Stop { reason } => Command::Stop { reason },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::effect::Effect;
    use serde_json::json;

    fn signal(kind: &str) -> Signal {
        Signal::new(kind, Value::Null).expect("a valid kind")
    }

    #[test]
    fn only_mounting_changes_the_table() {
        let action = ActionId::new("echo.say").expect("an id");
        let input = signal("go");
        let register = || Effect::register(action.clone());
        assert!(matches!(
            interpret(register(), Origin::Mounting, &Policy::default(), &Arc::from("a")),
            Command::Register { .. }
        ));
        for origin in [Origin::Step(&input), Origin::Run, Origin::Job] {
            let refused = interpret(register(), origin, &Policy::default(), &Arc::from("a"));
            assert!(matches!(refused, Command::Refused(EffectRefusal::TableChange { .. })), "{refused:?}");
        }
    }

    #[test]
    fn reserved_kinds_are_refused_and_own_signals_stamped() {
        let input = signal("go");
        let to = Target::Agent(AgentId::new("b").expect("an id"));
        let emit = |kind: &str| Effect::emit(signal(kind), to.clone());
        let refused =
            interpret(emit("action.completed"), Origin::Step(&input), &Policy::default(), &Arc::from("agent:a"));
        assert!(matches!(refused, Command::Refused(EffectRefusal::ReservedKind { .. })), "{refused:?}");
        match interpret(emit("hello"), Origin::Step(&input), &Policy::default(), &Arc::from("agent:a")) {
            Command::Emit { signal, .. } => assert_eq!(signal.source(), "agent:a"),
            other => panic!("expected an emit, got {other:?}"),
        }
    }

    #[test]
    fn runs_from_step_are_keyed_by_their_input() {
        let input = signal("go");
        let run = || Effect::run(ActionId::new("echo.say").expect("an id"), json!({}));
        assert!(matches!(
            interpret(run(), Origin::Step(&input), &Policy::default(), &Arc::from("a")),
            Command::Run { key: KeyFrom::Input, .. }
        ));
        assert!(matches!(
            interpret(run(), Origin::Run, &Policy::default(), &Arc::from("a")),
            Command::Run { key: KeyFrom::Run, .. }
        ));
    }

    #[test]
    fn spawning_needs_the_capability() {
        let input = signal("go");
        let spawn = || Effect::spawn_agent(AgentId::new("child").expect("an id"), "worker", Value::Null);
        let refused = interpret(spawn(), Origin::Step(&input), &Policy::default(), &Arc::from("a"));
        assert!(matches!(refused, Command::Refused(EffectRefusal::SpawnNotGranted { .. })), "{refused:?}");
    }
}
