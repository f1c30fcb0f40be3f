use agentry::prelude::*;

/// Adds.
#[derive(serde::Deserialize, schemars::JsonSchema, Action)]
#[action(id = "math.add", output = f64)]
struct Add {
    a: f64,
}

impl Add {
    async fn run(self, _ctx: ActionContext) -> Result<f64, ActionError> {
        Ok(self.a)
    }
}

/// Math.
#[derive(Skill)]
#[skill(id = "math", version = "1.0.0", actions(Add, Add))]
struct Math;

fn main() {}
