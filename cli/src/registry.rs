//! What a manifest can name: the skills in the catalog and the agent types. [`Registry::standard`] has the
//! standard skills (`system`, `fs`, `memory`, `http`, `jobs`) and the built-in agent types (`tools`, `llm`); a
//! user's own binary adds its own with [`Registry::skill`] and [`Registry::agent`] and hands the registry to
//! [`crate::run_with`].

use crate::replay::{Fork, Replay, fork, replay};
use crate::simulation::{Simulate, simulate};
use agentry::agent::{Agent, Reaction};
use agentry::id::{AgentId, SkillId};
use agentry::policy::Policy;
use agentry::runtime::{Runtime, RuntimeBuilder, RuntimeError, SpawnOptions};
use agentry::signal::Signal;
use agentry::skill::{Skill, SkillDefinition};
use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// How an agent of a type is spawned: its id, policy and `config` (the manifest's `config`, or for `llm`
/// agents their model settings) and the skills to mount.
pub(crate) type Spawn = Arc<dyn Fn(Runtime, Spawning) -> BoxFuture<'static, Result<(), String>> + Send + Sync>;

/// What spawning one agent needs.
pub(crate) struct Spawning {
    pub id: AgentId,
    pub policy: Policy,
    pub config: Value,
    pub skills: Vec<(SkillId, Value)>,
}

/// An agent type a manifest may name.
#[derive(Clone)]
pub(crate) struct AgentType {
    /// Registers the type with the runtime (so a durable runtime can bring its agents back).
    pub register: fn(RuntimeBuilder) -> Result<RuntimeBuilder, RuntimeError>,
    pub spawn: Spawn,
    /// Folds logged inputs into a snapshot's state, as a recovery does (for time travel).
    pub replay: Replay,
    /// Plays an agent's past into the simulator from a point (`agentry fork`).
    pub fork: Fork,
    /// The skills the type mounts itself when an agent starts (its own builds of them).
    pub start_skills: fn() -> Vec<Skill>,
    /// Runs a scenario's plan with agents of this type (`agentry sim`); `None` for a type the simulator cannot
    /// run from a file (`llm`: its model is a live service).
    pub simulate: Option<Simulate>,
}

/// The skills agents of type `A` mount themselves when they start; none if they do not build (spawning says
/// why).
fn start_skills<A: Agent>() -> Vec<Skill> {
    A::start_skills().map(|skills| skills.into_iter().map(|(skill, _)| skill).collect()).unwrap_or_default()
}

/// The skills and agent types a manifest may name.
#[derive(Clone, Default)]
pub struct Registry {
    pub(crate) skills: BTreeMap<String, Skill>,
    pub(crate) agents: BTreeMap<String, AgentType>,
}

impl Registry {
    /// The standard skills and the built-in agent types: `tools` (an agent that only holds skills, for
    /// `agentry call`) and `llm` (an LLM agent, with `model` and `instructions`).
    pub fn standard() -> Self {
        let mut registry = Self::default();
        let skills = [
            agentry_skills::System::skill(),
            agentry_skills::Files::skill(),
            agentry_skills::Memory::skill(),
            agentry_skills::Http::skill(),
            agentry_skills::Jobs::skill(),
        ];
        for skill in skills {
            // The standard skills are ours and always build; one that did not would be a bug of this crate.
            registry = registry.skill(skill.expect("a standard skill builds"));
        }
        registry = registry.agent::<Tools>();
        registry.agents.insert(
            "llm".into(),
            AgentType {
                register: |builder| builder.agent::<agentry_llm::agent::LlmAgent>(),
                replay: replay::<agentry_llm::agent::LlmAgent>,
                fork: fork::<agentry_llm::agent::LlmAgent>,
                start_skills: start_skills::<agentry_llm::agent::LlmAgent>,
                simulate: None,
                spawn: Arc::new(|runtime, spawning| {
                    Box::pin(async move {
                        let config: agentry_llm::agent::LlmConfig = serde_json::from_value(spawning.config)
                            .map_err(|err| format!("the LLM agent's settings are wrong: {err}"))?;
                        let opts =
                            SpawnOptions { id: Some(spawning.id), policy: spawning.policy, ..SpawnOptions::default() };
                        runtime
                            .spawn(agentry_llm::agent::LlmAgent::new(config), opts)
                            .await
                            .map(|_| ())
                            .map_err(|e| e.to_string())
                    })
                }),
            },
        );
        registry
    }

    /// Adds a skill to the catalog (replacing one of the same id).
    #[must_use]
    pub fn skill(mut self, skill: Skill) -> Self {
        self.skills.insert(skill.id().to_string(), skill);
        self
    }

    /// Adds an agent type, named as the agent says ([`Agent::name`]); a new agent starts from its
    /// `Default`, and its manifest `config` (if any) is read as the agent's state instead.
    #[must_use]
    pub fn agent<A: Agent + Default + serde::de::DeserializeOwned>(mut self) -> Self {
        let spawn: Spawn = Arc::new(|runtime, spawning: Spawning| {
            Box::pin(async move {
                let domain = match spawning.config {
                    Value::Null => A::default(),
                    config => serde_json::from_value(config).map_err(|err| {
                        format!("the `config` of agent `{}` does not fit its type `{}`: {err}", spawning.id, A::name())
                    })?,
                };
                let opts = SpawnOptions { id: Some(spawning.id), policy: spawning.policy, ..SpawnOptions::default() };
                let agent = runtime.spawn(domain, opts).await.map_err(|e| e.to_string())?;
                let state = agent.state().await.map_err(|e| e.to_string())?;
                // A type's own start skills are mounted already; the manifest may name them too.
                for (skill, options) in spawning.skills.into_iter().filter(|(s, _)| !state.is_mounted(s)) {
                    agent.mount(&skill, options).await.map_err(|e| format!("mounting `{skill}` failed: {e}"))?;
                }
                Ok(())
            })
        });
        self.agents.insert(
            A::name().to_owned(),
            AgentType {
                register: |builder| builder.agent::<A>(),
                spawn,
                replay: replay::<A>,
                fork: fork::<A>,
                start_skills: start_skills::<A>,
                simulate: Some(simulate::<A>),
            },
        );
        self
    }

    /// The skill ids in the catalog.
    pub fn skill_ids(&self) -> impl Iterator<Item = &str> {
        self.skills.keys().map(String::as_str)
    }

    /// The agent type names.
    pub fn agent_types(&self) -> impl Iterator<Item = &str> {
        self.agents.keys().map(String::as_str)
    }
}

/// The built-in `tools` agent: it holds the skills its manifest mounts and runs what callers ask of them
/// (`agentry call`); it keeps no state and answers no signal.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Tools {}

impl Agent for Tools {
    fn name() -> &'static str {
        "tools"
    }

    fn handle_signal(&self, _signal: &Signal) -> Reaction<Self> {
        Reaction::Ignore
    }
}
