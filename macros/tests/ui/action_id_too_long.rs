use agentry::prelude::*;

/// Adds.
#[derive(serde::Deserialize, schemars::JsonSchema, Action)]
#[action(id = "arithmetic.add_two_numbers_together_and_then_report_the_sum_back", output = f64)]
struct Add {
    a: f64,
}

fn main() {}
