//! Starting an agent's server: spawned, or started again by its supervisor.

use super::*;

/// Starts an agent: its start skills are mounted (purely), then its actor starts, linked to the runtime's
/// supervisor, and enters the directory (see the server's `enter_directory`: of two spawns racing on one id,
/// the loser never runs).
pub(crate) async fn spawn_agent<A: Agent>(
    shared: &Arc<Shared>,
    domain: A,
    opts: SpawnOptions,
) -> Result<AgentRef<A>, RuntimeError> {
    let history = Arc::new(std::sync::Mutex::new(crate::restart::Restarts::new(opts.restart)));
    spawn_supervised(shared, domain, opts, history, false).await
}

/// [`spawn_agent`] with the restarts counted so far (a restart keeps counting in the same window).
/// `restart`: the agent is started again under the policy it has now, which may have stopped allowing one of
/// its start skills since it was spawned: those are part of the agent, so they are mounted all the same and the
/// gate refuses their actions (as it does for a skill mounted before the policy changed).
fn spawn_supervised<A: Agent>(
    shared: &Arc<Shared>,
    domain: A,
    opts: SpawnOptions,
    history: Arc<std::sync::Mutex<crate::restart::Restarts>>,
    restart: bool,
) -> Pin<Box<dyn Future<Output = Result<AgentRef<A>, RuntimeError>> + Send + '_>> {
    Box::pin(async move {
        crate::rollback::start(shared);
        let id = opts.id.clone().unwrap_or_else(AgentId::random);
        if shared.directory.get(&id).is_some() || shared.sleeping.contains_key(&id) {
            return Err(RuntimeError::AlreadyExists(id.to_string()));
        }
        if let Some(name) = &opts.name
            && shared.directory.id_of(name).is_some()
        {
            return Err(RuntimeError::AlreadyExists(name.clone()));
        }
        let started = if restart {
            let mounts_any = Policy { allow_skills: None, deny_skills: Default::default(), ..opts.policy.clone() };
            start(id.clone(), domain.clone(), &mounts_any)
        } else {
            start(id.clone(), domain.clone(), &opts.policy)
        };
        let (state, start_effects) = started?;
        let catalog = shared.catalog.snapshot();
        for skill in state.skills().keys() {
            if catalog.get(skill).is_none() {
                return Err(RuntimeError::UnknownSkill(skill.clone()));
            }
        }
        // A new agent (not one started again) is claimed first; the claim is held until its actor started.
        let _claim = match (&shared.claim, restart) {
            (Some(claim), false) => {
                Some(claim(id.clone()).await.map_err(|reason| RuntimeError::NotClaimed { agent: id.clone(), reason })?)
            }
            _ => None,
        };
        let again = Arc::new(Again::of(&id, opts));
        let respawn = respawner(&again, domain, history.clone());
        let args =
            ServerArgs { state, start_effects, again, shared: shared.clone(), history, respawn, recovered: None };
        let supervisor = crate::supervisor::supervisor(shared, &id).await?;
        let (actor, _join) = Actor::spawn_linked(None, AgentServer::<A>::new(), args, supervisor)
            .await
            .map_err(|e| crate::error::spawn_error(&id, e))?;
        Ok(AgentRef { id, actor: Some(actor), shared: shared.clone(), _agent: PhantomData })
    })
}

/// How the supervisor starts the agent again from `domain`, counting restarts in `history`.
pub(crate) fn respawner<A: Agent>(
    again: &Arc<Again>,
    domain: A,
    history: Arc<std::sync::Mutex<crate::restart::Restarts>>,
) -> crate::shared::Respawn {
    let again = again.clone();
    Arc::new(move |shared: Arc<Shared>| {
        let (domain, opts, history) = (domain.clone(), again.options(), history.clone());
        Box::pin(async move { spawn_supervised(&shared, domain, opts, history, true).await.map(|_| ()) })
    })
}
