//! `docs/concepts.md`: the actions `Divide` and `Add`, the skills `arithmetic` and `ledger`, the agent `Clerk`.

use agentry::skill::SkillReaction;
use agentry::{Action, ActionContext, ActionError, ActionId, ActionSpec, Agent, Cost, Effect, Reaction, Signal, Skill};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// `arithmetic.divide`, as the page's Actions section writes it.
#[derive(Deserialize, JsonSchema)]
pub struct Divide {
    /// The dividend.
    pub a: f64,
    /// The divisor.
    pub b: f64,
}

/// What `Divide` returns.
#[derive(Serialize, JsonSchema)]
pub struct Quotient {
    /// `a / b`.
    pub value: f64,
}

impl Action for Divide {
    type Output = Quotient;
    fn spec() -> ActionSpec {
        ActionSpec::new("arithmetic.divide", "Divides a by b.").expect("a valid id").cost(Cost::Cheap).idempotent(true)
    }
    async fn run(self, _ctx: ActionContext) -> Result<Quotient, ActionError> {
        if self.b == 0.0 {
            return Err(ActionError::validation("cannot divide by zero; expected a non-zero `b`"));
        }
        Ok(Quotient { value: self.a / self.b })
    }
}

/// `arithmetic.add`, "written the same way".
#[derive(Deserialize, JsonSchema)]
pub struct Add {
    /// The first number.
    pub a: f64,
    /// The second number.
    pub b: f64,
}

impl Action for Add {
    type Output = f64;
    fn spec() -> ActionSpec {
        ActionSpec::new("arithmetic.add", "Adds a and b.").expect("a valid id").cost(Cost::Cheap).idempotent(true)
    }
    async fn run(self, _ctx: ActionContext) -> Result<f64, ActionError> {
        Ok(self.a + self.b)
    }
}

/// The ledger skill's state.
#[derive(Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct Ledger {
    /// How many runs completed.
    pub completed: u32,
}

/// The skill `arithmetic` of the Skills section.
pub fn arithmetic() -> Skill {
    Skill::builder("arithmetic", "1.0.0")
        .instructions("Call arithmetic__add or arithmetic__divide with numbers `a` and `b`.")
        .action::<Add>()
        .action::<Divide>()
        .build()
        .expect("a valid skill")
}

/// The skill `ledger` of the Skills section.
pub fn ledger() -> Skill {
    Skill::builder("ledger", "0.1.0")
        .requires("arithmetic")
        .state::<Ledger>()
        .on_signal(|ledger: &Ledger, signal: &Signal, _ctx| {
            if signal.kind().as_str() != "action.completed" {
                return SkillReaction::Ignore;
            }
            SkillReaction::Handled(Ledger { completed: ledger.completed + 1 }, Vec::new())
        })
        .build()
        .expect("a valid skill")
}

/// The agent `Clerk` of the Agents section.
#[derive(Clone, Default, Serialize, Deserialize)]
pub struct Clerk {
    /// How many orders it took.
    pub orders: u32,
}

impl Agent for Clerk {
    fn handle_signal(&self, signal: &Signal) -> Reaction<Self> {
        match signal.kind().as_str() {
            "order.placed" => {
                let add = ActionId::new("arithmetic.add").expect("a valid id");
                let run = Effect::run(add, json!({"a": self.orders, "b": 1}));
                Reaction::Update(Clerk { orders: self.orders + 1 }, vec![run])
            }
            "order.ping" => Reaction::Keep(vec![Effect::reply(signal.id(), json!("pong"))]),
            _ => Reaction::Ignore,
        }
    }
}
