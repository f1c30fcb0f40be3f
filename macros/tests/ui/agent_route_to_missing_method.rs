use agentry::prelude::*;

/// Calculates.
#[derive(Clone, serde::Serialize, serde::Deserialize, Agent)]
#[agent(routes("calculate" => calculate))]
struct Calculator {
    asked: u32,
}

fn main() {}
