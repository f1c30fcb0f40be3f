//! The Runtime: the handle an application holds — skill catalog, agent directory, event stream, journal — and
//! typed [`AgentRef`]s to talk to agents.

pub use crate::afresh::RestartHook;
pub use crate::claim::{Claim, ClaimHook};
pub use crate::elsewhere::{Elsewhere, ElsewhereHook};
pub use crate::error::RuntimeError;
pub(crate) use crate::restart::Again;
pub use crate::restart::{RestartMode, RestartPolicy, SpawnOptions};

use crate::agent::{Agent, AgentState, StartError, start};
use crate::directory::Directory;
use crate::events::{Event, EventBus};
use crate::id::{AgentId, SkillId};
use crate::jobs::JobBoard;
use crate::messages::{Requester, RunRequest, ServerMsg, Untyped};
use crate::policy::Policy;
pub use crate::recovery::Recovery;
use crate::runner::Runner;
use crate::server::{AgentServer, ServerArgs};
use crate::store::PEN;

use crate::shared::{Reviver, Shared, Spawner};
use crate::signal::Signal;
use crate::skill::{Catalog, LiveCatalog, Skill};
use crate::store::{JournalView, MemoryStore, SqliteStore, Store};
use ractor::rpc::CallResult;
use ractor::{Actor, ActorRef, RpcReplyPort};
use serde_json::Value;
use std::any::TypeId;
use std::future::Future;
use std::marker::PhantomData;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

mod agent_ref;
mod builder;
mod spawn;

#[cfg(test)]
mod crash_tests;

pub use agent_ref::AgentRef;
pub use builder::RuntimeBuilder;
pub(crate) use spawn::{respawner, spawn_agent};

/// How long [`Runtime::shutdown`] waits for one stopped actor's cleanup before killing it.
const STOP_WAIT: Duration = Duration::from_secs(5);

/// How deep routines may nest calls unless [`RuntimeBuilder::max_call_depth`] says otherwise.
pub const DEFAULT_MAX_CALL_DEPTH: usize = 8;

/// How many jobs run at once unless [`RuntimeBuilder::max_jobs`] says otherwise.
pub const DEFAULT_MAX_JOBS: usize = 8;

/// How many inputs an agent handles between two snapshots unless [`RuntimeBuilder::snapshot_every`] says
/// otherwise.
pub const DEFAULT_SNAPSHOT_EVERY: u64 = 100;

/// The journal's file name in a durable runtime's data folder.
pub const JOURNAL: &str = "journal.db";

/// The handle an application holds. Cheap to clone.
#[derive(Clone)]
pub struct Runtime {
    shared: Arc<Shared>,
}

/// An agent's reply to come, to a signal sent with [`Runtime::ask`].
#[derive(Debug)]
pub struct Answer {
    agent: AgentId,
    answer: tokio::sync::oneshot::Receiver<Value>,
}

impl Answer {
    /// Waits at most `timeout` for the reply.
    pub async fn reply(self, timeout: Duration) -> Result<Value, RuntimeError> {
        match tokio::time::timeout(timeout, self.answer).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(_)) => Err(RuntimeError::Stopped(self.agent)),
            Err(_) => Err(RuntimeError::Timeout { agent: self.agent, timeout }),
        }
    }
}

impl Runtime {
    /// Starts building a runtime.
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder::default()
    }

    /// The skill catalog as it is now (skills can be added and refreshed while the runtime runs).
    pub fn catalog(&self) -> Arc<Catalog> {
        self.shared.catalog.snapshot()
    }

    /// The execution journal, read only: only the runtime writes it.
    pub fn store(&self) -> &JournalView {
        &self.shared.journal
    }

    /// A skill's folder in an agent's drive, when the runtime has a data folder (it may not exist yet).
    pub fn drive(&self, agent: &AgentId, skill: &SkillId) -> Option<PathBuf> {
        self.shared.data_dir.as_deref().map(|dir| crate::server::drive_path(dir, agent, skill))
    }

    /// The runtime's jobs.
    pub fn jobs(&self) -> &JobBoard {
        &self.shared.jobs
    }

    /// A receiver of every event from now on.
    pub fn events(&self) -> tokio::sync::broadcast::Receiver<Event> {
        self.shared.events.subscribe()
    }

    /// Spawns an agent: its start skills are mounted (purely) before its actor starts.
    pub async fn spawn<A: Agent>(&self, domain: A, opts: SpawnOptions) -> Result<AgentRef<A>, RuntimeError> {
        spawn_agent(&self.shared, domain, opts).await
    }

    /// Spawns an agent of a registered type by its name ([`RuntimeBuilder::agent`]), from its initial domain
    /// state as JSON, as a `SpawnAgent` effect does: with the id (a new one if none), parent and policy of `opts`
    /// (its other fields are the defaults). For a caller that knows the type only by name, such as a node
    /// spawning for another node. An unregistered type is [`RuntimeError::UnknownAgentType`]; a state that does
    /// not fit the type, [`RuntimeError::Spawn`].
    pub async fn spawn_named(
        &self,
        agent_type: &str,
        init: Value,
        opts: SpawnOptions,
    ) -> Result<AgentId, RuntimeError> {
        let spawner = self.shared.spawners.get(agent_type).map(|s| s.clone());
        let Some(spawner) = spawner else { return Err(RuntimeError::UnknownAgentType(agent_type.to_owned())) };
        let id = opts.id.unwrap_or_else(AgentId::random);
        spawner(self.shared.clone(), id.clone(), init, opts.parent, opts.policy).await?;
        Ok(id)
    }

    /// A typed handle to a running agent.
    pub fn get<A: Agent>(&self, id: &AgentId) -> Result<AgentRef<A>, RuntimeError> {
        let Some(entry) = self.shared.directory.get(id) else {
            // A hibernating agent: the handle thaws it when it is used.
            return match self.shared.sleeping.get(id) {
                Some(sleeper) if sleeper.agent_type.as_ref() == A::name() => {
                    Ok(AgentRef { id: id.clone(), actor: None, shared: self.shared.clone(), _agent: PhantomData })
                }
                Some(_) => Err(RuntimeError::WrongType(id.clone())),
                None => Err(RuntimeError::NoSuchAgent(id.clone())),
            };
        };
        if entry.agent_type != TypeId::of::<A>() {
            return Err(RuntimeError::WrongType(id.clone()));
        }
        Ok(AgentRef {
            id: id.clone(),
            actor: Some(ActorRef::from(entry.cell)),
            shared: self.shared.clone(),
            _agent: PhantomData,
        })
    }

    /// Puts an idle agent to sleep (needs a durable store): its state is snapshotted, its actor stopped, and
    /// only a few bytes stay in memory. A signal, a call or a `get` addressed to it later thaws it, without the
    /// caller seeing a difference but the time it takes; [`Runtime::thaw`] does so at once. Announced as
    /// `agent_hibernated`. An agent with anything going on (runs in flight or queued, approvals pending,
    /// schedules armed) stays awake: [`RuntimeError::Busy`] says why.
    pub async fn hibernate(&self, id: &AgentId) -> Result<(), RuntimeError> {
        let entry = self.shared.directory.get(id).ok_or_else(|| RuntimeError::NoSuchAgent(id.clone()))?;
        let (done, answer) = tokio::sync::oneshot::channel();
        if !self.shared.directory.tell(id, Untyped::Hibernate(Some(done), None)) {
            return Err(RuntimeError::Stopped(id.clone()));
        }
        answer.await.map_err(|_| RuntimeError::Stopped(id.clone()))??;
        let _ = entry.cell.wait(Some(STOP_WAIT)).await;
        Ok(())
    }

    /// Lets go of a hibernating agent without ending it, for another runtime sharing the journal to take it on
    /// (a cluster's node hands an agent over this way): it leaves this runtime, its journal stays as it was when
    /// it fell asleep, and signals for it go where signals for agents this runtime does not have go (the
    /// `elsewhere` hook, if any) from now on. Returns the signals kept for it since it fell asleep, in order, for
    /// the caller to pass on: nobody here gives them to it any more. An agent that is awake (something thawed it
    /// meanwhile) is not let go: `None`. One this runtime does not have: [`RuntimeError::NoSuchAgent`].
    pub async fn release(&self, id: &AgentId) -> Result<Option<Vec<Signal>>, RuntimeError> {
        // No thaw under way or starting meanwhile.
        let _no_thaw = self.shared.waking.lock().await;
        if self.shared.directory.get(id).is_some() {
            return Ok(None);
        }
        let (_, sleeper) = self.shared.sleeping.remove(id).ok_or_else(|| RuntimeError::NoSuchAgent(id.clone()))?;
        // It goes on elsewhere (where it is subscribed anew, as after a restart).
        self.shared.directory.leave_topics(id);
        if let Some((_, timer)) = self.shared.wakers.remove(id) {
            timer.abort();
        }
        Ok(Some(sleeper.kept))
    }

    /// Thaws a hibernated agent now (nothing happens to one that is awake); announced as `agent_thawed`.
    pub async fn thaw(&self, id: &AgentId) -> Result<(), RuntimeError> {
        crate::sleep::wake(&self.shared, id).await
    }

    /// Whether the runtime has this agent, awake or hibernating.
    pub fn contains(&self, id: &AgentId) -> bool {
        self.shared.directory.get(id).is_some() || crate::sleep::is_asleep(&self.shared, id)
    }

    /// Whether an agent is hibernating.
    pub fn is_hibernating(&self, id: &AgentId) -> bool {
        crate::sleep::is_asleep(&self.shared, id)
    }

    /// The id of the agent with this name.
    pub fn find(&self, name: &str) -> Option<AgentId> {
        self.shared.directory.id_of(name)
    }

    /// Delivers a signal to an agent whatever its type. A signal of one of the runtime's own kinds (see
    /// [`crate::kinds`]), or one that claims to come from the runtime, is refused with
    /// [`RuntimeError::Forged`].
    pub fn send(&self, to: &AgentId, signal: Signal) -> Result<(), RuntimeError> {
        check_from_outside(&signal)?;
        crate::sleep::deliver(&self.shared, to, signal)
    }

    /// Delivers a signal that another runtime of the same cluster made, as its node passes it on from an
    /// authenticated peer: an agent's emit to an agent held here, a child's end for its parent here, or an emit to
    /// a topic (to this runtime's subscribers). Such a signal may be of the runtime's own kinds or carry an
    /// agent's source, which [`Runtime::send`] refuses from a caller; so this door is for a node relaying what
    /// its trusted peers' runtimes made, never for input from users or untrusted peers. Returns how many agents
    /// took it.
    pub fn relay(&self, signal: Elsewhere) -> usize {
        match signal {
            // An agent asleep here keeps it, as it keeps what `send` gives it.
            Elsewhere::Agent { to, signal, .. } => {
                usize::from(crate::sleep::deliver(&self.shared, &to, signal).is_ok())
            }
            Elsewhere::Topic { topic, signal } => crate::sleep::publish(&self.shared, &topic, &signal),
        }
    }

    /// Says that the signal `signal` that agent `kept_by` emitted elsewhere, which its journal keeps until then
    /// ([`Elsewhere::Agent`]'s `kept_by`), was sent on: the journal forgets it, and bringing the agent back no
    /// longer sends it again. A node calls this once the node that runs its target took it, once it waits in the
    /// target's inbox, or once it is found to reach nobody.
    pub fn sent_on(&self, kept_by: &AgentId, signal: uuid::Uuid) {
        if let Some(durable) = self.shared.store.durable() {
            durable.sent_on(crate::store::PEN, kept_by, signal);
        }
    }

    /// Sends a signal to an agent whatever its type and waits for its `Reply` to it, at most `timeout` (as
    /// [`AgentRef::call`] does for an agent whose type is known). A hibernated agent is thawed first; a
    /// signal of the runtime's own kinds is refused with [`RuntimeError::Forged`].
    pub async fn call(&self, agent: &AgentId, signal: Signal, timeout: Duration) -> Result<Value, RuntimeError> {
        check_from_outside(&signal)?;
        crate::sleep::wake(&self.shared, agent).await?;
        self.ask(agent, signal)?.reply(timeout).await
    }

    /// Sends a signal to an awake agent now, in order with the signals sent before it, and returns its `Reply` to
    /// come, to be waited for later ([`Answer::reply`]): for a caller that sends several signals in order and
    /// waits for their replies apart (as a node delivering calls from other nodes does). An agent that is not
    /// awake (hibernating: [`Runtime::thaw`] it first) is [`RuntimeError::NoSuchAgent`]; a signal of the
    /// runtime's own kinds is [`RuntimeError::Forged`].
    pub fn ask(&self, agent: &AgentId, signal: Signal) -> Result<Answer, RuntimeError> {
        check_from_outside(&signal)?;
        let (reply, answer) = ractor::concurrency::oneshot();
        if !self.shared.directory.tell(agent, Untyped::Call(Box::new(signal), reply.into())) {
            return Err(RuntimeError::NoSuchAgent(agent.clone()));
        }
        Ok(Answer { agent: agent.clone(), answer })
    }

    /// "Always allow": lets `action` run on `agent` without approval from now on, and approves its runs that
    /// wait for approval now; returns how many it approved. The decision is a policy change (the action's risk is
    /// overridden to low), so it holds across restarts and recovery like any (see [`Runtime::set_policy`]),
    /// unless the agent's policy asks for approval at every risk.
    pub async fn always_allow(&self, agent: &AgentId, action: &crate::id::ActionId) -> Result<usize, RuntimeError> {
        crate::sleep::wake(&self.shared, agent).await?;
        let (done, approved) = tokio::sync::oneshot::channel();
        if !self.shared.directory.tell(agent, Untyped::AlwaysAllow(action.clone(), done)) {
            return Err(RuntimeError::NoSuchAgent(agent.clone()));
        }
        approved.await.map_err(|_| RuntimeError::Stopped(agent.clone()))
    }

    /// Replaces an agent's policy, for good: a supervised restart starts it under the new one, a durable
    /// runtime keeps it for recovery, a hibernated agent is thawed to take it, and the agent's children are
    /// narrowed to fit within it ([`Policy::narrowed_to`]; one asleep or restarting is narrowed when it starts).
    /// Runs already going keep the policy they started under; queued runs and runs waiting for approval meet the
    /// new one at the gate when they start, and run under it (`ctx.policy()`). A skill the new policy does not
    /// allow stays mounted, but none of its actions runs.
    pub async fn set_policy(&self, agent: &AgentId, policy: Policy) -> Result<(), RuntimeError> {
        crate::sleep::wake(&self.shared, agent).await?;
        let (done, changed) = tokio::sync::oneshot::channel();
        if !self.shared.directory.tell(agent, Untyped::SetPolicy(Box::new(policy), done)) {
            return Err(RuntimeError::NoSuchAgent(agent.clone()));
        }
        changed.await.map_err(|_| RuntimeError::Stopped(agent.clone()))
    }

    /// Adds a skill to the catalog while the runtime runs, so agents can mount it (a skill made from an MCP
    /// server after connecting to it, say).
    pub fn add_skill(&self, skill: Skill) -> Result<(), RuntimeError> {
        self.shared.catalog.update(|catalog| {
            if catalog.get(skill.id()).is_some() {
                return Err(RuntimeError::SkillExists(skill.id().clone()));
            }
            catalog.insert(skill);
            Ok(())
        })
    }

    /// Replaces a catalog skill with a new build of itself at the same version, and brings every agent that has
    /// it mounted up to date (see [`crate::skill::refresh`]): each gets the Register/Deregister effects for the
    /// difference and announces `SkillRefreshed`. Returns once every such agent has done so, with the agents it
    /// could not refresh (a new requirement missing there, say) and why. A build at another version is refused
    /// with `VersionConflict` and changes nothing: upgrading is an unmount and a mount.
    pub async fn refresh_skill(&self, skill: Skill) -> Result<Vec<(AgentId, RuntimeError)>, RuntimeError> {
        let id = skill.id().clone();
        self.shared.catalog.update(|catalog| {
            let current = catalog.get(&id).ok_or_else(|| RuntimeError::UnknownSkill(id.clone()))?;
            if current.version() != skill.version() {
                return Err(RuntimeError::Mount(crate::skill::version_conflict(current.version(), &skill)));
            }
            catalog.insert(skill);
            Ok(())
        })?;
        let mut waiting = Vec::new();
        for agent in self.shared.directory.ids() {
            let (done, refreshed) = tokio::sync::oneshot::channel();
            if self.shared.directory.tell(&agent, Untyped::Refresh(id.clone(), done)) {
                waiting.push((agent, refreshed));
            }
        }
        let mut failed = Vec::new();
        for (agent, refreshed) in waiting {
            // A closed channel means the agent stopped meanwhile: nothing to bring up to date.
            if let Ok(Err(error)) = refreshed.await {
                failed.push((agent, error));
            }
        }
        Ok(failed)
    }

    /// Runs one of an agent's actions for a caller outside the agent (an MCP client, a command line) and waits
    /// for its outcome. The run passes the agent's gate like any other: an action that is not registered, not
    /// allowed or lacks a capability comes back as a `Blocked` outcome with a `Denied` error; one that needs
    /// approval is refused with [`RuntimeError::NeedsApproval`], since nobody could tell the caller it waits (see
    /// [`Runtime::invoke_with`] for a caller who waits for the operator's approval). It counts against the agent's in-flight cap, is
    /// journaled and announced like any run, and the effects it asks for are interpreted when it completes; the
    /// agent gets no outcome signal for it. Dropping the returned future (a caller that gives up) cancels the run,
    /// journaled as cancelled.
    pub async fn invoke(
        &self,
        agent: &AgentId,
        action: &str,
        params: Value,
    ) -> Result<crate::action::Outcome, RuntimeError> {
        self.invoke_for(agent, action, params, None).await
    }

    /// [`Runtime::invoke`] for a caller the run can reach: the run's log lines and progress go to it, its
    /// [`ActionContext::sample`](crate::action::ActionContext::sample) and
    /// [`elicit`](crate::action::ActionContext::elicit) ask it, and the calls the run makes reach it too. When
    /// the gate asks for approval, the run waits for it like an agent's own run, approved by whom the caller's
    /// [`Approver`](crate::action::Approver) names: by default the runtime's own approvers
    /// ([`Runtime::decide`], [`AgentRef::approve`] or [`AgentRef::deny`], whoever watches the event stream), and
    /// the caller hears [`CallerRequest::AwaitingOperator`](crate::action::CallerRequest::AwaitingOperator); with
    /// [`Approver::Caller`](crate::action::Approver::Caller) a caller who can elicit gets a
    /// [`CallerRequest::Approve`](crate::action::CallerRequest::Approve) instead, for risks up to its ceiling.
    ///
    /// ```
    /// use agentry::action::{ActionSpec, Caller, CallerCan, CallerRequest, DynAction, LogLevel};
    /// use agentry::runtime::{Runtime, SpawnOptions};
    /// use agentry::skill::Skill;
    /// use serde_json::{Value, json};
    /// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let greet = DynAction::new(ActionSpec::new("hello.greet", "Greets.")?, |_, ctx| {
    ///     Box::pin(async move {
    ///         ctx.log(LogLevel::Info, "greeting");
    ///         Ok(json!("hi"))
    ///     })
    /// })?;
    /// let runtime = Runtime::builder().skill(Skill::builder("hello", "1.0.0").dyn_action(greet).build()?).build();
    /// let agent = runtime.spawn((), SpawnOptions::default()).await?;
    /// agent.mount(&"hello".parse()?, Value::Null).await?;
    ///
    /// let (caller, mut heard) = Caller::new(CallerCan::default());
    /// let outcome = runtime.invoke_with(agent.id(), "hello.greet", json!({}), caller).await?;
    /// assert_eq!(outcome.output, "hi");
    /// assert!(matches!(heard.try_recv()?, CallerRequest::Log { message, .. } if message == "greeting"));
    /// # Ok(()) }
    /// ```
    pub async fn invoke_with(
        &self,
        agent: &AgentId,
        action: &str,
        params: Value,
        caller: crate::action::Caller,
    ) -> Result<crate::action::Outcome, RuntimeError> {
        self.invoke_for(agent, action, params, Some(caller)).await
    }

    async fn invoke_for(
        &self,
        agent: &AgentId,
        action: &str,
        params: Value,
        caller: Option<crate::action::Caller>,
    ) -> Result<crate::action::Outcome, RuntimeError> {
        let action: crate::id::ActionId = action.parse()?;
        // Dropping this future drops the receiver, which tells the run's task its caller gave up.
        let (reply, outcome) = tokio::sync::oneshot::channel();
        let by = Requester::Outside(reply, caller);
        let request = RunRequest { action, params, by, key: crate::action::RunKey::Run };
        if !self.shared.directory.tell(agent, Untyped::Request(Box::new(request))) {
            return Err(RuntimeError::NoSuchAgent(agent.clone()));
        }
        outcome.await.map_err(|_| RuntimeError::Stopped(agent.clone()))?
    }

    /// The contracts of the actions an agent can run now (its live action table), sorted by id.
    pub async fn actions(&self, agent: &AgentId) -> Result<Vec<crate::action::ActionSpec>, RuntimeError> {
        let (reply, specs) = tokio::sync::oneshot::channel();
        if !self.shared.directory.tell(agent, Untyped::Actions(reply)) {
            return Err(RuntimeError::NoSuchAgent(agent.clone()));
        }
        specs.await.map_err(|_| RuntimeError::Stopped(agent.clone()))
    }

    /// Approves (`true`) or denies a run of an agent that waits for approval, without the agent's type (as
    /// [`AgentRef::approve`] and [`AgentRef::deny`] do with it). An approval holds for the contract and params
    /// the run was asked about: if its action's contract changed since (a refreshed skill, an MCP server's new
    /// tool list), the run is asked about again (a new `approval_asked`) and this returns
    /// [`RuntimeError::ApprovalStale`].
    pub async fn decide(&self, agent: &AgentId, run: uuid::Uuid, approve: bool) -> Result<(), RuntimeError> {
        self.tell_verdict(agent, run, crate::messages::Verdict { approve, seen: None }).await
    }

    /// Approves a run only if what it would run now is what the approver saw: `digest` is the one its
    /// `approval_asked` event (or [`ApprovalAsk`](crate::action::ApprovalAsk)) carried. Otherwise refused with
    /// [`RuntimeError::ApprovalStale`], and the run goes on waiting.
    pub async fn approve_seen(&self, agent: &AgentId, run: uuid::Uuid, digest: uuid::Uuid) -> Result<(), RuntimeError> {
        self.tell_verdict(agent, run, crate::messages::Verdict { approve: true, seen: Some(digest) }).await
    }

    async fn tell_verdict(
        &self,
        agent: &AgentId,
        run: uuid::Uuid,
        verdict: crate::messages::Verdict,
    ) -> Result<(), RuntimeError> {
        let (reply, decided) = tokio::sync::oneshot::channel();
        if !self.shared.directory.tell(agent, Untyped::Decide(run, verdict, reply)) {
            return Err(RuntimeError::NoSuchAgent(agent.clone()));
        }
        decided.await.map_err(|_| RuntimeError::Stopped(agent.clone()))?
    }

    /// The skills mounted on an agent now, as the catalog defines them, sorted by id. A mounted skill the
    /// catalog no longer holds is left out.
    pub async fn mounted(&self, agent: &AgentId) -> Result<Vec<Arc<Skill>>, RuntimeError> {
        let (reply, mounted) = tokio::sync::oneshot::channel();
        if !self.shared.directory.tell(agent, Untyped::Mounted(reply)) {
            return Err(RuntimeError::NoSuchAgent(agent.clone()));
        }
        let mounted = mounted.await.map_err(|_| RuntimeError::Stopped(agent.clone()))?;
        let catalog = self.catalog();
        Ok(mounted.iter().filter_map(|(id, _)| catalog.get(id).cloned()).collect())
    }

    /// Subscribes an agent to a topic that `Emit { to: Topic }` delivers to. The subscription lasts while the
    /// agent does in this runtime: through its sleeps (a topic's signal thaws it) and its restarts, until it stops
    /// for good. It is the runtime's, not the journal's: after the process starts again, or on the node that
    /// brings the agent back, the application subscribes it again.
    pub fn subscribe(&self, agent: &AgentId, topic: &str) {
        self.shared.directory.subscribe(topic, agent.clone());
    }

    /// Brings back every agent the durable store says was alive when the process last stopped (nothing with
    /// the in-memory store): each from its latest snapshot, with the inputs logged after it replayed through the
    /// pure `step`. Effects replay produces are not executed again: ended runs keep their journaled outcomes (an
    /// outcome the agent had not consumed yet is given to it), runs waiting for approval wait again (the same
    /// run id can be approved), runs that had not started are started, and a run that started but did not end
    /// is started again with the same idempotency key if its action is idempotent or has no side effects, and
    /// otherwise reaches the agent as `action.failed` with class `Interrupted`. Schedules are armed again; one
    /// whose time passed fires at once, or is skipped if it was made with `skip_if_missed`. Agents of a type not
    /// registered with [`RuntimeBuilder::agent`] stay in the store and are listed in [`Recovery::failed`].
    pub async fn recover(&self) -> Result<Recovery, RuntimeError> {
        crate::rollback::start(&self.shared);
        crate::recovery::recover(&self.shared).await
    }

    /// Stops an agent and waits until it has stopped; its running actions are cancelled.
    pub async fn stop(&self, id: &AgentId) -> Result<(), RuntimeError> {
        self.stop_because(id, "stopped by the runtime").await
    }

    /// [`Runtime::stop`], saying why in its `agent_stopped` event.
    pub async fn stop_because(&self, id: &AgentId, reason: &str) -> Result<(), RuntimeError> {
        // A hibernating agent is ended where it sleeps (after a thaw under way, which leaves it running: then it
        // is stopped as a running agent is).
        if self.shared.directory.get(id).is_none() && self.shared.sleeping.contains_key(id) {
            let _no_thaw = self.shared.waking.lock().await;
            if self.shared.directory.get(id).is_none() && self.shared.sleeping.remove(id).is_some() {
                if let Some(durable) = self.shared.store.durable() {
                    durable.agent_ended(PEN, id);
                }
                self.shared.directory.leave_topics(id);
                return Ok(());
            }
        }
        let entry = self.shared.directory.get(id).ok_or_else(|| RuntimeError::NoSuchAgent(id.clone()))?;
        self.shared.stop_agent(&entry, reason.into());
        let _ = entry.cell.wait(None).await;
        Ok(())
    }

    /// Shuts every agent down gracefully: each stops taking new runs (they fail `Cancelled`), drops its queued
    /// and unapproved runs and its schedules, and lets the runs already going finish; after `grace` (one
    /// deadline for the whole runtime) every agent stops, and whatever still runs is cancelled and journaled.
    pub async fn shutdown(&self, grace: Duration) {
        // Signals kept for hibernating agents are handled first: a thaw under way finishes.
        let waking: Vec<AgentId> =
            self.shared.sleeping.iter().filter(|s| s.waking || !s.kept.is_empty()).map(|s| s.key().clone()).collect();
        for id in waking {
            if let Err(err) = crate::sleep::wake(&self.shared, &id).await {
                tracing::error!(agent = %id, %err, "a hibernated agent could not be thawed for its kept signals");
            }
        }
        self.shared.shutting_down.store(true, std::sync::atomic::Ordering::SeqCst);
        let deadline = tokio::time::Instant::now() + grace;
        let ids = self.shared.directory.ids();
        let mut drained = Vec::with_capacity(ids.len());
        for id in &ids {
            let (done, finished) = tokio::sync::oneshot::channel();
            if self.shared.directory.tell(id, Untyped::Drain(done)) {
                drained.push(finished);
            }
        }
        for finished in drained {
            // An error means the agent stopped on its own meanwhile, which is as good as drained.
            let _ = tokio::time::timeout_at(deadline, finished).await;
        }
        let cells: Vec<_> = ids.iter().filter_map(|id| self.shared.directory.get(id)).map(|e| e.cell).collect();
        for entry in ids.iter().filter_map(|id| self.shared.directory.get(id)) {
            self.shared.stop_agent(&entry, "runtime shutdown".into());
        }
        for cell in cells {
            if cell.wait(Some(STOP_WAIT)).await.is_err() {
                cell.kill();
            }
        }
        // Whatever the agents wrote on their way out is on disk when this returns, so a runtime opened next on
        // the same folder finds it (even while this one's journal is still being dropped).
        if let Some(durable) = self.shared.store.durable()
            && durable.flushed().await.is_err()
        {
            tracing::error!("the journal could not make the last writes before shutdown durable");
        }
    }
}

/// Refuses a signal from outside the runtime that forges one of the runtime's own (its kind or its source).
fn check_from_outside(signal: &Signal) -> Result<(), RuntimeError> {
    if crate::kinds::is_reserved(signal.kind().as_str()) || crate::kinds::is_runtime_source(signal.source()) {
        return Err(RuntimeError::Forged { kind: signal.kind().to_string(), claimed: signal.source().to_owned() });
    }
    Ok(())
}
