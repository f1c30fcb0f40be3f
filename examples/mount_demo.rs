//! The pure layer alone: starts the calculator agent (which mounts the arithmetic skill), runs its pure logic
//! on a few signals and prints the effects the AgentServer would interpret — no runtime, no I/O.
//!
//! Run it with `cargo run -p agentry-examples --example mount_demo`.

use agentry::agent::{start, step};
use agentry::effect::Effect;
use agentry::id::AgentId;
use agentry::policy::Policy;
use agentry::signal::Signal;
use agentry::skill::{Catalog, SkillDefinition, mount, unmount};
use agentry::tool::{ToolFormat, tools_for_agent};
use agentry_examples::calculator::Calculator;
use agentry_testkit::demo::Arithmetic;
use serde_json::{Value, json};
use std::error::Error;

fn print_effects(title: &str, effects: &[Effect]) -> Result<(), Box<dyn Error>> {
    println!("{title}");
    for effect in effects {
        println!("  {}", serde_json::to_string(effect)?);
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn Error>> {
    let arithmetic = Arithmetic::skill()?;
    let catalog: Catalog = [arithmetic.clone()].into_iter().collect();
    let policy = Policy::default();
    let (mut state, effects) = start(AgentId::new("calculator-1")?, Calculator::default(), &policy)?;
    print_effects("start (mounts arithmetic):", &effects)?;
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
