use agentry::prelude::*;

/// Calculates.
#[derive(Clone, serde::Serialize, serde::Deserialize, Agent)]
#[agent(name = "calc", mounts(Arithmetic))]
struct Calculator {
    asked: u32,
}

fn main() {}
