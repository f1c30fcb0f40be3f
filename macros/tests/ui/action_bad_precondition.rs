use agentry::prelude::*;

/// Divides.
#[derive(serde::Deserialize, schemars::JsonSchema, Action)]
#[action(id = "math.divide", output = f64, pre = no_such_check)]
struct Divide {
    a: f64,
    b: f64,
}

impl Divide {
    async fn run(self, _ctx: ActionContext) -> Result<f64, ActionError> {
        Ok(self.a / self.b)
    }
}

fn main() {}
