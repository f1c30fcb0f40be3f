//! `docs/simulation.md`: the skill `gossip` and the agent `Learner` of its model, and a searching agent
//! (`MyAgent`, with `my_skill` providing `search.web`) for its sections on models and faults.

use agentry::action::{ActionSpec, Capability, DynAction};
use agentry::prelude::*;
use agentry::skill::{Skill, SkillReaction};
use serde_json::json;

/// The skill of the model, as the page writes it.
pub fn gossip() -> Skill {
    Skill::builder("gossip", "1.0.0")
        .on_signal(|_: &(), signal: &Signal, _ctx| match signal.kind().as_str() {
            "contact" => {
                let Ok(peer) = AgentId::new(signal.data()["peer"].as_str().unwrap_or_default()) else {
                    return SkillReaction::Ignore;
                };
                let Ok(teach) = signal.follow("teach").data(json!({"skill": "gossip"})).build() else {
                    return SkillReaction::Ignore;
                };
                SkillReaction::Handled((), vec![Effect::emit(teach, Target::Agent(peer))])
            }
            "forget" => match SkillId::new("gossip") {
                Ok(gossip) => SkillReaction::Handled((), vec![Effect::unmount_skill(gossip)]),
                Err(_) => SkillReaction::Ignore,
            },
            _ => SkillReaction::Ignore,
        })
        .build()
        .expect("a valid skill")
}

/// The agent of the model, as the page writes it.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Learner;

impl Agent for Learner {
    fn handle_signal(&self, signal: &Signal) -> Reaction<Self> {
        match (signal.kind().as_str(), SkillId::new("gossip")) {
            ("teach", Ok(gossip)) => Reaction::Keep(vec![Effect::mount_skill(gossip, serde_json::Value::Null)]),
            _ => Reaction::Ignore,
        }
    }
}

/// A skill with `search.web` (in a simulation, a model plays it).
pub fn my_skill() -> Skill {
    let spec = ActionSpec::new("search.web", "Searches the web.").expect("an id").capability(Capability::NET);
    let search = DynAction::new(spec, |_, _| Box::pin(async { Ok(json!({"results": []})) })).expect("an action");
    Skill::builder("search", "1.0.0").dyn_action(search).build().expect("a valid skill")
}

/// An agent that searches what `ask` signals say.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct MyAgent;

impl Agent for MyAgent {
    fn handle_signal(&self, signal: &Signal) -> Reaction<Self> {
        match (signal.kind().as_str(), ActionId::new("search.web")) {
            ("ask", Ok(search)) => Reaction::Keep(vec![Effect::run(search, signal.data().clone())]),
            _ => Reaction::Ignore,
        }
    }
}
