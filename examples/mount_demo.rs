//! Mounts an arithmetic skill on a calculator agent, runs the pure logic on a few signals and prints the
//! effects the AgentServer would interpret — no runtime, no I/O, just the pure layer.
//!
//! Run it with `cargo run -p agentry-examples --example mount_demo`.

use agentry::action::{Action, ActionContext, ActionError, ActionSpec};
use agentry::agent::{Agent, AgentState, Reaction, step};
use agentry::effect::Effect;
use agentry::id::{ActionId, AgentId};
use agentry::pattern::Pattern;
use agentry::policy::Policy;
use agentry::signal::Signal;
use agentry::skill::{Catalog, Skill, mount, unmount};
use agentry::tool::{ToolFormat, tools_for_agent};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::error::Error;

/// Adds two numbers.
#[derive(Deserialize, JsonSchema)]
struct Add {
    /// The left operand.
    a: f64,
    /// The right operand.
    b: f64,
}

impl Action for Add {
    type Output = f64;
    fn spec() -> ActionSpec {
        ActionSpec::new("arithmetic.add", "Adds two numbers.").expect("a valid id").idempotent(true)
    }
    async fn run(self, _ctx: ActionContext) -> Result<f64, ActionError> {
        Ok(self.a + self.b)
    }
}

/// Divides two numbers.
#[derive(Deserialize, JsonSchema)]
struct Divide {
    /// The dividend.
    a: f64,
    /// The divisor; must not be zero.
    b: f64,
}

impl Action for Divide {
    type Output = f64;
    fn spec() -> ActionSpec {
        ActionSpec::new("arithmetic.divide", "Divides a by b.").expect("a valid id").idempotent(true)
    }
    async fn run(self, _ctx: ActionContext) -> Result<f64, ActionError> {
        if self.b == 0.0 {
            return Err(ActionError::validation("cannot divide by zero; expected a non-zero `b`"));
        }
        Ok(self.a / self.b)
    }
}

/// The calculator's domain state: how many calculations it was asked for.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Calculator {
    asked: u32,
}

impl Agent for Calculator {
    fn handle_signal(&self, signal: &Signal) -> Reaction<Self> {
        let calculate = Pattern::new("calculate").expect("a valid pattern");
        if !signal.is(&calculate) {
            return Reaction::Ignore;
        }
        let op = signal.data()["op"].as_str().unwrap_or_default();
        let Ok(action) = ActionId::new(format!("arithmetic.{op}")) else {
            return Reaction::Keep(vec![]);
        };
        let params = json!({"a": signal.data()["a"], "b": signal.data()["b"]});
        Reaction::Update(Calculator { asked: self.asked + 1 }, vec![Effect::run(action, params)])
    }
}

fn print_effects(title: &str, effects: &[Effect]) -> Result<(), Box<dyn Error>> {
    println!("{title}");
    for effect in effects {
        println!("  {}", serde_json::to_string(effect)?);
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn Error>> {
    let arithmetic = Skill::builder("arithmetic", "1.0.0")
        .description("Adds and divides numbers.")
        .action::<Add>()
        .action::<Divide>()
        .build()?;
    let catalog: Catalog = [arithmetic.clone()].into_iter().collect();
    let policy = Policy::default();
    let mut state = AgentState::new(AgentId::new("calculator-1")?, Calculator { asked: 0 });

    let effects = mount(&mut state, &arithmetic, &Value::Null, &policy)?;
    print_effects("mount arithmetic:", &effects)?;
    print_effects("mount arithmetic again (a no-op):", &mount(&mut state, &arithmetic, &Value::Null, &policy)?)?;

    for data in [json!({"op": "add", "a": 2, "b": 3}), json!({"op": "divide", "a": 1, "b": 4})] {
        let signal = Signal::builder("calculate").source("demo").data(data).build()?;
        let next = step(&mut state, &signal, &catalog)?;
        print_effects(&format!("signal {} {}:", signal.kind(), signal.data()), &next.effects)?;
    }
    println!("calculations asked: {}", state.domain.asked);

    println!("tools offered to an LLM (Anthropic format):");
    for tool in tools_for_agent(&state, &catalog, ToolFormat::Anthropic)? {
        println!("  {tool}");
    }

    print_effects("unmount arithmetic:", &unmount(&mut state, arithmetic.id())?)?;
    Ok(())
}
