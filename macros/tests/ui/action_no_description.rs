use agentry::prelude::*;

#[derive(serde::Deserialize, schemars::JsonSchema, Action)]
#[action(id = "math.add", output = f64)]
struct Add {
    a: f64,
}

fn main() {}
