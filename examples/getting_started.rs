//! Getting started: a skill, an agent, a durable runtime, a call and the journal, in one file.
//! Run it twice: the second time the counter comes back from its journal with what it counted.
//!
//!     cargo run -p agentry-examples --example getting_started -- [data folder]

use agentry::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::time::Duration;

/// Counts the words in a text.
#[derive(Debug, Deserialize, JsonSchema, Action)]
#[action(id = "text.count_words", output = u64, idempotent, cost = cheap)]
struct CountWords {
    /// The text whose words to count.
    text: String,
}

impl CountWords {
    async fn run(self, _ctx: ActionContext) -> Result<u64, ActionError> {
        Ok(self.text.split_whitespace().count() as u64)
    }
}

/// Tools for text.
#[derive(Skill)]
#[skill(id = "text", version = "1.0.0", actions(CountWords))]
struct Text;

/// Answers `count` calls by running `text.count_words`, and keeps a running total.
#[derive(Debug, Clone, Default, Serialize, Deserialize, Agent)]
#[agent(name = "counter", skills(Text), routes("count" => count, "action.*" => answer))]
struct Counter {
    total: u64,
}

impl Counter {
    /// A `count` signal asks for a run; its outcome comes back as an `action.*` signal.
    fn count(&self, signal: &Signal) -> Reaction<Self> {
        let run = Effect::run(ActionId::new("text.count_words").expect("a valid id"), signal.data().clone());
        Reaction::Keep(vec![run])
    }

    /// Answers the call that asked for the run, once the run has ended.
    fn answer(&self, signal: &Signal) -> Reaction<Self> {
        let (Some(report), Some(call)) = (signal.outcome(), signal.causation_id()) else { return Reaction::Ignore };
        match report.outcome.status {
            OutcomeStatus::Completed => {
                let words = report.outcome.output.as_u64().unwrap_or(0);
                let total = self.total + words;
                Reaction::Update(Counter { total }, vec![Effect::reply(call, json!({"words": words, "total": total}))])
            }
            OutcomeStatus::Failed | OutcomeStatus::Blocked => {
                Reaction::Keep(vec![Effect::reply(call, json!({"error": report.outcome.output_text()}))])
            }
            // Not over yet: the run waits for an approver, and its end will come as another signal.
            OutcomeStatus::AwaitingApproval => Reaction::Keep(vec![]),
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let data = std::env::args().nth(1).unwrap_or_else(|| "agentry-data".to_owned());
    // A durable runtime: its journal is `<data>/journal.db`; `open` brings back the agents that were alive.
    let (runtime, recovery) = Runtime::builder().agent::<Counter>()?.durable(&data)?.open().await?;
    let id = AgentId::new("counter")?;
    let counter = if recovery.agents.contains(&id) {
        println!("the counter came back ({} inputs replayed)", recovery.replayed);
        runtime.get::<Counter>(&id)?
    } else {
        runtime.spawn(Counter::default(), SpawnOptions { id: Some(id), ..SpawnOptions::default() }).await?
    };

    let ask = Signal::new("count", json!({"text": "the quick brown fox"}))?;
    let answer = counter.call(ask, Duration::from_secs(5)).await?;
    println!("answer: {answer}");

    // Every run is in the journal: what ran, how it ended, how long it took.
    let runs = runtime.store().query(&RunQuery { agent: Some(counter.id().clone()), ..RunQuery::default() });
    for run in &runs {
        println!("journal: {} {:?} after {} attempt(s)", run.action, run.status(), run.attempts);
    }
    runtime.shutdown(Duration::from_secs(5)).await;
    Ok(())
}
