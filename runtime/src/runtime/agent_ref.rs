//! [`AgentRef`]: a typed handle to one agent, asleep or awake.

use super::*;

/// A typed handle to one agent.
pub struct AgentRef<A: Agent> {
    pub(super) id: AgentId,
    /// The actor this handle was made for (`None` for a handle to a hibernating agent).
    pub(super) actor: Option<ActorRef<ServerMsg<A>>>,
    pub(super) shared: Arc<Shared>,
    pub(super) _agent: PhantomData<fn() -> A>,
}

impl<A: Agent> Clone for AgentRef<A> {
    fn clone(&self) -> Self {
        Self { id: self.id.clone(), actor: self.actor.clone(), shared: self.shared.clone(), _agent: PhantomData }
    }
}

impl<A: Agent> AgentRef<A> {
    /// The agent's id.
    pub fn id(&self) -> &AgentId {
        &self.id
    }

    /// The agent's actor now: the one this handle was made for while it runs, else the one its supervisor
    /// restarted (or a thaw brought back) under the same id and type, if any.
    fn actor(&self) -> Option<ActorRef<ServerMsg<A>>> {
        use ractor::ActorStatus;
        if let Some(actor) = &self.actor
            && matches!(actor.get_status(), ActorStatus::Running | ActorStatus::Starting | ActorStatus::Upgrading)
        {
            return Some(actor.clone());
        }
        match self.shared.directory.get(&self.id) {
            Some(entry) if entry.agent_type == TypeId::of::<A>() => Some(ActorRef::from(entry.cell)),
            _ => self.actor.clone(),
        }
    }

    /// The agent's actor, thawing the agent first if it hibernates.
    async fn awake(&self) -> Result<ActorRef<ServerMsg<A>>, RuntimeError> {
        if crate::sleep::is_asleep(&self.shared, &self.id) {
            crate::sleep::wake(&self.shared, &self.id).await?;
        }
        self.actor().ok_or_else(|| RuntimeError::Stopped(self.id.clone()))
    }

    /// Asks the actor, thawing the agent if it hibernates; a request dropped because the agent fell asleep
    /// meanwhile is asked again of the thawed agent, once.
    async fn ask<T: Send + 'static>(
        &self,
        message: impl Fn(RpcReplyPort<T>) -> ServerMsg<A>,
        timeout: Option<Duration>,
    ) -> Result<T, RuntimeError> {
        let mut again = true;
        loop {
            let result = self.awake().await?.call(&message, timeout).await;
            match self.answer(result, timeout.unwrap_or_default()) {
                Err(RuntimeError::Stopped(_)) if again && crate::sleep::is_asleep(&self.shared, &self.id) => {
                    again = false;
                }
                answer => return answer,
            }
        }
    }

    /// Sends a signal without waiting (cast); to a hibernating agent, it is kept for it and the agent thawed. A
    /// forged runtime signal is refused (see [`Runtime::send`]).
    pub fn send(&self, signal: Signal) -> Result<(), RuntimeError> {
        check_from_outside(&signal)?;
        let Some(actor) = self.actor() else { return crate::sleep::deliver(&self.shared, &self.id, signal) };
        match actor.cast(ServerMsg::Signal(Box::new(signal))) {
            Ok(()) => Ok(()),
            Err(ractor::MessagingErr::SendErr(ServerMsg::Signal(signal))) => {
                crate::sleep::deliver(&self.shared, &self.id, *signal)
            }
            Err(_) => Err(RuntimeError::Stopped(self.id.clone())),
        }
    }

    /// Sends a signal and waits for the agent's `Reply` to it, at most `timeout`.
    pub async fn call(&self, signal: Signal, timeout: Duration) -> Result<Value, RuntimeError> {
        check_from_outside(&signal)?;
        self.ask(|port| ServerMsg::Call(Box::new(signal.clone()), port), Some(timeout)).await
    }

    fn answer<T>(
        &self,
        result: Result<CallResult<T>, impl std::fmt::Debug>,
        timeout: Duration,
    ) -> Result<T, RuntimeError> {
        match result {
            Ok(CallResult::Success(value)) => Ok(value),
            Ok(CallResult::Timeout) => Err(RuntimeError::Timeout { agent: self.id.clone(), timeout }),
            Ok(CallResult::SenderError) | Err(_) => Err(RuntimeError::Stopped(self.id.clone())),
        }
    }

    /// A snapshot of the agent's state.
    pub async fn state(&self) -> Result<AgentState<A>, RuntimeError> {
        self.ask(ServerMsg::Snapshot, None).await
    }

    /// Mounts a catalog skill with options.
    pub async fn mount(&self, skill: &SkillId, opts: Value) -> Result<(), RuntimeError> {
        self.ask(|port| ServerMsg::Mount(Box::new((skill.clone(), opts.clone())), port), None).await?
    }

    /// Unmounts a skill.
    pub async fn unmount(&self, skill: &SkillId) -> Result<(), RuntimeError> {
        self.ask(|port| ServerMsg::Unmount(skill.clone(), port), None).await?
    }

    /// Approves a run that waits for approval.
    pub async fn approve(&self, run: Uuid) -> Result<(), RuntimeError> {
        let verdict = crate::messages::Verdict { approve: true, seen: None };
        self.ask(|port| ServerMsg::Decide(run, verdict, port), None).await?
    }

    /// Denies a run that waits for approval.
    pub async fn deny(&self, run: Uuid) -> Result<(), RuntimeError> {
        let verdict = crate::messages::Verdict { approve: false, seen: None };
        self.ask(|port| ServerMsg::Decide(run, verdict, port), None).await?
    }

    /// Stops the agent and waits until it has stopped (a hibernating agent is ended where it sleeps).
    pub async fn stop(&self) {
        let reason = "stopped through its AgentRef".to_owned();
        let Some(actor) = self.actor().filter(|_| !crate::sleep::is_asleep(&self.shared, &self.id)) else {
            let _ = Runtime { shared: self.shared.clone() }.stop(&self.id).await;
            return;
        };
        if let Some(entry) = self.shared.directory.get(&self.id).filter(|e| e.cell.get_id() == actor.get_id()) {
            self.shared.stop_agent(&entry, reason);
            let _ = actor.wait(None).await;
        } else {
            let _ = actor.stop_and_wait(Some(reason), None).await;
        }
    }
}
