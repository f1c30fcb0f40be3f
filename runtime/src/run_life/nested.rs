//! The rules of a nested call ([`ActionContext::call`]): how deep calls may go, the context a called run gets,
//! and what a call leaves its caller (cost, side effects, effects, artifacts), whoever drives the runs.

use crate::action::{ActionContext, ActionError, ActionSpec, Outcome, RunKey, RunScope, Stack};
use crate::id::{ActionId, SkillId};
use serde_json::Value;
use std::sync::Arc;
use uuid::Uuid;

/// The error for a call of `action` from `caller`'s run when calls are already `limit` deep (`None` while
/// they are not): a routine that calls itself without end stops here.
pub fn too_deep(caller: &ActionContext, action: &ActionId, limit: usize) -> Option<ActionError> {
    (caller.depth() >= limit).then(|| {
        ActionError::critical(format!(
            "the call depth limit of {limit} was reached calling `{action}` from {}; a routine probably calls \
             itself without end",
            call_path(caller)
        ))
    })
}

/// The path of calls that led to `ctx`, for messages: `a.b → c.d`.
pub(crate) fn call_path(ctx: &ActionContext) -> String {
    ctx.stack().iter().map(|frame| frame.action.as_str()).collect::<Vec<_>>().join(" → ")
}

/// The key of the next call (or job) `caller`'s run makes: its own key and the call's place among them, so a
/// run started again after a crash makes the same keys.
pub(crate) fn next_key(caller: &ActionContext) -> RunKey {
    let mut sink = caller.sink();
    sink.calls += 1;
    RunKey::Within { caller: caller.idempotency_key().into(), index: sink.calls }
}

/// The context of run `run`, a call of `action` from `caller`'s run, keyed as the caller's next call: the caller's
/// chain, policy, clock, seed and outside caller, the caller's stack with a frame of its own, and the skill
/// that provides `action` with its state. For a driver that has no drive folders (the simulator); it answers
/// the called run's own nested calls as `caller` does.
pub fn context(caller: &ActionContext, action: ActionId, run: Uuid, skill: Option<(SkillId, Value)>) -> ActionContext {
    let key = next_key(caller);
    let (skill, skill_state) = skill.map_or((None, Value::Null), |(skill, state)| (Some(skill), state));
    let from = &caller.scope;
    let scope = RunScope {
        skill,
        drive: None,
        skill_state,
        policy: from.policy.clone(),
        stack: Stack::of(caller.stack(), action.clone(), run),
        sink: std::sync::Mutex::default(),
        link: from.link.as_ref().map(|link| crate::action::Link { services: link.services.clone(), job: link.job }),
        key,
        clock: from.clock,
        seed: from.seed,
        caller: from.caller.clone(),
        from_outside: from.from_outside,
    };
    ActionContext {
        agent_id: caller.agent_id.clone(),
        action_id: action,
        run_id: run,
        attempt: 0,
        correlation_id: caller.correlation_id,
        causation_id: None,
        scope: Arc::new(scope),
        frames: None,
    }
}

/// A call of an action of contract `spec` was admitted for `caller`'s run: an action with side effects that is
/// not idempotent makes the caller's run one that must not be tried again, whatever the call's end.
pub fn entering(caller: &ActionContext, spec: &ActionSpec) {
    if spec.side_effects && !spec.idempotent {
        caller.sink().side_effects = true;
    }
}

/// A call ended: what it cost, and whether it did something that must not happen twice, count for its caller
/// whatever its end; a completed call's effects and artifacts go up to its caller (its effects to be carried
/// out if the caller completes). Returns what the caller's `ctx.call` returns: the call's output, or the error
/// it ended with.
pub fn fold(
    caller: &ActionContext,
    called: &ActionContext,
    outcome: Outcome,
    error: Option<ActionError>,
) -> Result<Value, ActionError> {
    let (cost, side_effects, effects) = {
        let mut sink = called.sink();
        (sink.cost, sink.side_effects, std::mem::take(&mut sink.effects))
    };
    let mut sink = caller.sink();
    if let Some(cost) = cost {
        sink.add_cost(cost);
    }
    sink.side_effects |= side_effects;
    if let Some(error) = error {
        return Err(error);
    }
    sink.effects.extend(effects);
    sink.artifacts.extend(outcome.artifacts);
    Ok(outcome.output)
}
