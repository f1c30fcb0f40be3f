//! The calculator end to end: a runtime with the arithmetic skill, a calculator agent, and `call`s answered
//! through real action runs — plus what the event stream and the journal saw.
//!
//! Run it with `cargo run -p agentry-examples --example calculator`.

use agentry::runtime::{Runtime, SpawnOptions};
use agentry::signal::Signal;
use agentry::store::RunQuery;
use agentry_examples::calculator::Calculator;
use serde_json::json;
use std::error::Error;
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let runtime = Runtime::builder().agent::<Calculator>()?.build();
    let mut events = runtime.events();
    let calculator = runtime.spawn(Calculator::default(), SpawnOptions::default()).await?;

    for (op, a, b) in [("add", 2, 3), ("multiply", 6, 7), ("divide", 1, 4), ("divide", 1, 0)] {
        let question =
            Signal::builder("calculate").source("example").data(json!({"op": op, "a": a, "b": b})).build()?;
        let answer = calculator.call(question, Duration::from_secs(5)).await?;
        println!("{op}({a}, {b}) = {answer}");
    }

    let state = calculator.state().await?;
    println!("calculations asked: {}", state.domain.asked);
    println!("journal:");
    for record in runtime.store().query(&RunQuery::default()) {
        println!(
            "  {} {:?} after {} attempt(s), error {:?}",
            record.action,
            record.status(),
            record.attempts,
            record.error
        );
    }
    runtime.shutdown(Duration::from_secs(1)).await;
    println!("events seen:");
    while let Ok(event) = events.try_recv() {
        println!("  {}", serde_json::to_string(&event)?);
    }
    Ok(())
}
