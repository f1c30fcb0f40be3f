//! The calculator agent: mounts `arithmetic` at start and turns `calculate` signals into runs.

use agentry::prelude::*;
use agentry_testkit::demo::Arithmetic;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// Answers `calculate` signals (`{"op": "add", "a": 1, "b": 2}`) by running the matching arithmetic action.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, Agent)]
#[agent(
    name = "calculator",
    skills(Arithmetic),
    routes(
        "calculate" => calculate,
        "action.completed" => answer,
        "action.failed" => answer,
        "action.blocked" => answer
    )
)]
pub struct Calculator {
    /// How many calculations it started.
    pub asked: u64,
}

impl Calculator {
    fn calculate(&self, signal: &Signal) -> Reaction<Self> {
        let data = signal.data();
        let action = match data["op"].as_str() {
            Some(op @ ("add" | "subtract" | "multiply" | "divide")) => format!("arithmetic.{op}"),
            _ => return Reaction::Ignore,
        };
        let Ok(action) = ActionId::new(action) else { return Reaction::Ignore };
        let run = Effect::run(action, json!({"a": data["a"], "b": data["b"]}));
        Reaction::Update(Calculator { asked: self.asked + 1 }, vec![run])
    }

    /// Answers the `calculate` call that caused a run with the run's output, or its error; a run that only waits
    /// for approval is answered later, when it has run or been refused.
    fn answer(&self, signal: &Signal) -> Vec<Effect> {
        let (Some(report), Some(call)) = (signal.outcome(), signal.causation_id()) else { return vec![] };
        let answer = match report.outcome.status {
            OutcomeStatus::Completed => json!({"result": report.outcome.output}),
            OutcomeStatus::Failed | OutcomeStatus::Blocked => json!({"error": report.outcome.output_text()}),
            OutcomeStatus::AwaitingApproval => return vec![],
        };
        vec![Effect::reply(call, answer)]
    }
}
