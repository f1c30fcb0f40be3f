//! Mounting, unmounting and refreshing skills on a running agent: the only ways its action table changes.

use super::ServerState;
use crate::agent::Agent;
use crate::error::RuntimeError;
use crate::events::EventKind;
use crate::id::{ActionId, SkillId};
use crate::interpret::Origin;
use ractor::RpcReplyPort;
use serde_json::Value;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

impl<A: Agent> ServerState<A> {
    pub(super) fn on_mount(&mut self, skill: &SkillId, opts: &Value, reply: RpcReplyPort<Result<(), RuntimeError>>) {
        let result = self.mount(skill, opts);
        self.reply_when_kept(result, move |result| {
            let _ = reply.send(result);
        });
    }

    pub(super) fn on_unmount(&mut self, skill: &SkillId, reply: RpcReplyPort<Result<(), RuntimeError>>) {
        let result = self.unmount(skill);
        self.reply_when_kept(result, move |result| {
            let _ = reply.send(result);
        });
    }

    pub(super) fn on_refresh(&mut self, skill: &SkillId, done: tokio::sync::oneshot::Sender<Result<(), RuntimeError>>) {
        // Every agent is told of a refresh, with the skill mounted or not: the catalog it keeps is taken again
        // now, so the build replaced (and whatever it holds: a client, a connection) is let go once the refresh
        // returns, not at each idle agent's next signal.
        self.shared.catalog.current(&mut self.catalog);
        // An agent that does not mount it has nothing to keep: no snapshot, so a storm of refreshes costs the
        // agents that do not use the skill nothing but this message.
        if !self.agent.is_mounted(skill) {
            let _ = done.send(Ok(()));
            return;
        }
        let result = self.refresh(skill);
        self.reply_when_kept(result, move |result| {
            let _ = done.send(result);
        });
    }

    /// A change to the mounted skills is not an input, so with a durable store it is kept as a snapshot, and the
    /// caller is answered once that snapshot is durable (by a task: the mailbox does not wait).
    fn reply_when_kept(
        &mut self,
        result: Result<(), RuntimeError>,
        reply: impl FnOnce(Result<(), RuntimeError>) + Send + 'static,
    ) {
        if result.is_err() || self.shared.store.durable().is_none() {
            return reply(result);
        }
        self.save_snapshot();
        let shared = self.shared.clone();
        let Some(durable) = shared.store.durable() else { return reply(result) };
        let flushed = durable.flushed_for(&self.agent.id);
        let agent = self.agent.id.clone();
        tokio::spawn(async move {
            match flushed.await {
                Ok(()) => reply(result),
                Err(_) => reply(Err(RuntimeError::Store {
                    agent,
                    message: "the snapshot after the change could not be made durable".to_owned(),
                })),
            }
        });
    }

    /// A skill as the catalog holds it now.
    fn catalog_skill(&self, skill: &SkillId) -> Result<Arc<crate::skill::Skill>, RuntimeError> {
        self.shared.catalog.snapshot().get(skill).cloned().ok_or_else(|| RuntimeError::UnknownSkill(skill.clone()))
    }

    /// Mounts a catalog skill. The skill's own code (its state init) runs here; a panic in it leaves the agent's
    /// state as it was (mounting changes nothing before the init returns), counts against the restart policy,
    /// and fails the mount with [`RuntimeError::Panicked`].
    pub(super) fn mount(&mut self, skill: &SkillId, opts: &Value) -> Result<(), RuntimeError> {
        let found = self.catalog_skill(skill)?;
        let was_mounted = self.agent.is_mounted(skill);
        let policy = self.policy.clone();
        let mounted = catch_unwind(AssertUnwindSafe(|| crate::skill::mount(&mut self.agent, &found, opts, &policy)));
        let effects = match mounted {
            Ok(result) => result?,
            Err(_panic) => {
                self.survive_panic(None, &format!("the state init of skill `{skill}`"));
                return Err(RuntimeError::Panicked {
                    agent: self.agent.id.clone(),
                    during: format!("mounting `{skill}`"),
                });
            }
        };
        self.interpret(effects, Origin::Mounting);
        // Mounting a skill already mounted at this version is a no-op, and is not announced.
        if !was_mounted {
            self.shared.events.announce(&self.agent.id, None, None, EventKind::SkillMounted { skill: skill.clone() });
        }
        Ok(())
    }

    pub(super) fn unmount(&mut self, skill: &SkillId) -> Result<(), RuntimeError> {
        let was_mounted = self.agent.is_mounted(skill);
        let effects = crate::skill::unmount(&mut self.agent, skill)?;
        self.interpret(effects, Origin::Mounting);
        self.repoint(skill);
        if was_mounted {
            self.shared.events.announce(&self.agent.id, None, None, EventKind::SkillUnmounted { skill: skill.clone() });
        }
        Ok(())
    }

    /// Brings a mounted skill up to date with the catalog's build of it: the table loses the actions it dropped,
    /// gains the new ones, and the ones it kept run the new build's code and contract.
    fn refresh(&mut self, skill: &SkillId) -> Result<(), RuntimeError> {
        if !self.agent.is_mounted(skill) {
            return Ok(());
        }
        let found = self.catalog_skill(skill)?;
        let before: Vec<ActionId> = self.agent.skills().get(skill).map(|m| m.actions.clone()).unwrap_or_default();
        let effects = crate::skill::refresh(&mut self.agent, &found)?;
        self.table.rebuild(skill, found.actions());
        let after: Vec<ActionId> = found.actions().iter().map(|a| a.spec().id.clone()).collect();
        self.interpret(effects, Origin::Mounting);
        self.repoint(skill);
        let added = after.iter().filter(|a| !before.contains(a)).cloned().collect();
        let removed = before.into_iter().filter(|a| !after.contains(a)).collect();
        let kind = EventKind::SkillRefreshed { skill: skill.clone(), added, removed };
        self.shared.events.announce(&self.agent.id, None, None, kind);
        Ok(())
    }

    /// Actions the table runs from `skill` that `skill` no longer provides, but another mounted skill does (so
    /// no `DeregisterAction` removed them), now run from that other skill.
    fn repoint(&mut self, skill: &SkillId) {
        let provided = self.agent.skills().get(skill).map(|m| m.actions.clone()).unwrap_or_default();
        for action in self.table.stale(skill, &provided) {
            self.register(action, None);
        }
    }

    /// Registers an action from the catalog skill that provides it (`skill` first).
    pub(super) fn register(&mut self, action: ActionId, skill: Option<&SkillId>) {
        let catalog = self.shared.catalog.snapshot();
        if !self.table.register(action.clone(), skill, &self.agent, &catalog) {
            tracing::error!(%action, "a registered action is in no catalog skill");
        }
    }
}
