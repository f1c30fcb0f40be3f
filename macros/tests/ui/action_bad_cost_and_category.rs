use agentry::prelude::*;

/// Adds.
#[derive(serde::Deserialize, schemars::JsonSchema, Action)]
#[action(id = "math.add", output = f64, cost = free)]
struct Add {
    a: f64,
}

/// Subtracts.
#[derive(serde::Deserialize, schemars::JsonSchema, Action)]
#[action(id = "math.sub", output = f64, category = batch)]
struct Sub {
    a: f64,
}

fn main() {}
