//! Reference models: small agentry agents whose behaviour theory predicts, used by the crate's checks against
//! that theory, its examples and its benches. Each is written as a user would write it.

/// Skill diffusion as an SIS epidemic: an agent with the `gossip` skill mounted teaches it to a random contact
/// at rate β (the contact mounts it) and forgets it at rate γ (it unmounts it). Mean-field theory gives the
/// endemic share of agents that know it: `1 − γ/β` above the threshold β/γ = 1, and none below.
pub mod sis {
    use crate::{Contacts, Metrics, Process, SimBuilder, SimError, Simulation, Who};
    use agentry::agent::{Agent, Reaction};
    use agentry::effect::{Effect, Target};
    use agentry::id::{AgentId, SkillId};
    use agentry::signal::Signal;
    use agentry::skill::{Skill, SkillReaction};
    use serde::{Deserialize, Serialize};
    use serde_json::{Value, json};
    use std::time::Duration;

    /// The skill that spreads.
    pub const SKILL: &str = "gossip";

    /// The metric: the share of agents that know the skill.
    pub const KNOWING: &str = "knowing";

    fn skill_id() -> SkillId {
        SkillId::new(SKILL).unwrap_or_else(|_| unreachable!("`gossip` is a valid skill id"))
    }

    /// The `gossip` skill: on a `contact` it teaches itself to the peer; on `forget` it unmounts itself.
    pub fn gossip() -> Skill {
        Skill::builder(SKILL, "1.0.0")
            .description("Knows something worth telling, and tells it.")
            .on_signal(|_: &(), signal: &Signal, _ctx| match signal.kind().as_str() {
                "contact" => {
                    let Some(peer) = signal.data()["peer"].as_str().and_then(|p| AgentId::new(p).ok()) else {
                        return SkillReaction::Ignore;
                    };
                    match signal.follow("teach").data(json!({"skill": SKILL})).build() {
                        Ok(teach) => SkillReaction::Handled((), vec![Effect::emit(teach, Target::Agent(peer))]),
                        Err(_) => SkillReaction::Ignore,
                    }
                }
                "forget" => SkillReaction::Handled((), vec![Effect::unmount_skill(skill_id())]),
                _ => SkillReaction::Ignore,
            })
            .build()
            .unwrap_or_else(|e| unreachable!("the gossip skill is well formed: {e}"))
    }

    /// An agent that learns a skill it is taught.
    #[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
    pub struct Learner;

    impl Agent for Learner {
        fn name() -> &'static str {
            "learner"
        }

        fn handle_signal(&self, signal: &Signal) -> Reaction<Self> {
            if signal.kind().as_str() != "teach" {
                return Reaction::Ignore;
            }
            match signal.data()["skill"].as_str().and_then(|s| SkillId::new(s).ok()) {
                Some(skill) => Reaction::Keep(vec![Effect::mount_skill(skill, Value::Null)]),
                None => Reaction::Ignore,
            }
        }
    }

    /// The endemic share mean-field theory predicts.
    pub fn endemic_share(beta: f64, gamma: f64) -> f64 {
        (1.0 - gamma / beta).max(0.0)
    }

    /// A simulation of `agents` learners, the first `initially` of them knowing the skill, sampled every
    /// `sample_every`.
    pub fn simulation(
        agents: usize,
        beta: f64,
        gamma: f64,
        initially: f64,
        seed: u64,
        sample_every: Duration,
    ) -> Result<Simulation<Learner>, SimError> {
        crate::error::check("the initial share", initially, true)?;
        let skill = skill_id();
        let counted = skill.clone();
        let metrics = Metrics::every(sample_every)
            .metric(KNOWING, move |census| census.with_skill(&counted) as f64 / census.agents.len().max(1) as f64)?;
        let mut sim = SimBuilder::new(seed)
            .skill(gossip())
            .process(
                Process::new("contact", beta)?
                    .reaching(Who::WithSkill(skill.clone()))
                    .with_contacts(Contacts::WellMixed),
            )
            .process(Process::new("forget", gamma)?.reaching(Who::WithSkill(skill.clone())))
            .metrics(metrics)
            .build()?;
        let knowing = (agents as f64 * initially).round() as usize;
        for n in 0..agents {
            let id = AgentId::new(format!("a{n}"))
                .map_err(|e| SimError::BadKind { kind: n.to_string(), reason: e.to_string() })?;
            sim.add(id.clone(), Learner)?;
            if n < knowing {
                sim.mount(&id, &skill, Value::Null)?;
            }
        }
        Ok(sim)
    }
}

/// An M/M/1 queue: jobs reach one desk agent as a Poisson process at rate λ; it serves one at a time (one run
/// in flight, the rest queued by the runtime's own run queue), each taking an exponential time of rate μ (an
/// action model). Queueing theory gives the mean time a job spends in the system: `1 / (μ − λ)`.
pub mod queue {
    use crate::{ActionModel, Latency, Process, SimBuilder, SimError, Simulation, Who};
    use agentry::action::{ActionSpec, DynAction};
    use agentry::agent::{Agent, Reaction};
    use agentry::effect::Effect;
    use agentry::id::{ActionId, AgentId};
    use agentry::policy::Policy;
    use agentry::signal::Signal;
    use agentry::skill::Skill;
    use serde::{Deserialize, Serialize};
    use serde_json::{Value, json};
    use std::time::Duration;

    /// The action that serves one job.
    pub const SERVE: &str = "desk.serve";

    /// The desk's skill: one action, whose real code does nothing (the model stands in for the work).
    pub fn desk() -> Skill {
        let spec = ActionSpec::new(SERVE, "Serves one job.")
            .unwrap_or_else(|_| unreachable!("a valid id"))
            .timeout(Duration::from_secs(24 * 3600));
        let action = DynAction::new(spec, |_, _| Box::pin(async { Ok(Value::Null) }))
            .unwrap_or_else(|_| unreachable!("a valid action"));
        Skill::builder("desk", "1.0.0").dyn_action(action).build().unwrap_or_else(|_| unreachable!("a valid skill"))
    }

    /// The desk agent: each `job` asks for one run of [`SERVE`].
    #[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
    pub struct Desk;

    impl Agent for Desk {
        fn name() -> &'static str {
            "desk"
        }

        fn start_skills() -> Result<Vec<(Skill, Value)>, agentry::skill::BuildError> {
            Ok(vec![(desk(), Value::Null)])
        }

        fn handle_signal(&self, signal: &Signal) -> Reaction<Self> {
            match signal.kind().as_str() {
                "job" => match SERVE.parse::<ActionId>() {
                    Ok(serve) => Reaction::Keep(vec![Effect::run(serve, json!({}))]),
                    Err(_) => Reaction::Ignore,
                },
                _ => Reaction::Ignore,
            }
        }
    }

    /// The mean time in system M/M/1 theory gives.
    pub fn mean_time_in_system(lambda: f64, mu: f64) -> f64 {
        1.0 / (mu - lambda)
    }

    /// A simulation of the desk with arrivals at `lambda` and service at `mu` (per second), keeping its runs.
    pub fn simulation(lambda: f64, mu: f64, seed: u64) -> Result<Simulation<Desk>, SimError> {
        crate::error::check("the service rate", mu, false)?;
        let agent = AgentId::new("desk").unwrap_or_else(|_| unreachable!("a valid id"));
        let service = ActionModel::new(Latency::Exponential { mean: Duration::from_secs_f64(1.0 / mu) });
        let mut sim = SimBuilder::new(seed)
            .skill(desk())
            .model(SERVE, service)?
            .process(Process::new("job", lambda)?.reaching(Who::Agents(vec![agent.clone()])))
            .keep_runs(true)
            .build()?;
        sim.add_with(agent, Desk, Policy::default(), 1)?;
        Ok(sim)
    }
}
