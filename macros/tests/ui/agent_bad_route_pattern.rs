use agentry::prelude::*;

/// Calculates.
#[derive(Clone, serde::Serialize, serde::Deserialize, Agent)]
#[agent(routes("calc*" => calculate))]
struct Calculator {
    asked: u32,
}

impl Calculator {
    fn calculate(&self, _signal: &Signal) -> Vec<Effect> {
        vec![]
    }
}

fn main() {}
