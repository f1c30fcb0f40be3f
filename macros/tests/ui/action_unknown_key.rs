use agentry::prelude::*;

/// Adds.
#[derive(serde::Deserialize, schemars::JsonSchema, Action)]
#[action(id = "math.add", output = f64, colour = "red")]
struct Add {
    a: f64,
}

impl Add {
    async fn run(self, _ctx: ActionContext) -> Result<f64, ActionError> {
        Ok(self.a)
    }
}

fn main() {}
