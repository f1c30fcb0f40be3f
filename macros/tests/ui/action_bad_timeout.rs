use agentry::prelude::*;

/// Adds.
#[derive(serde::Deserialize, schemars::JsonSchema, Action)]
#[action(id = "math.add", output = f64, timeout = "3 days")]
struct Add {
    a: f64,
}

fn main() {}
