//! The librarian agent: learns facts from the text files in its drive and answers questions from memory.
//!
//! `learn` (a call) lists the drive, reads every `.txt` file, and memorizes each line written as
//! `subject | predicate | object`; it replies with how many facts it learned. `ask` (a call, `{"question": ..}`)
//! recalls by the question's words and replies with the best fact. The agent is pure: every step is an
//! effect, and each outcome comes back as a signal.

use agentry::prelude::*;
use agentry_skills::{Files, Memory};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use uuid::Uuid;

/// What the librarian is doing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, Agent)]
#[agent(
    name = "librarian",
    skills(Files, Memory),
    routes(
        "learn" => learn,
        "ask" => ask,
        "action.completed" => completed,
        "action.failed" => failed,
        "action.blocked" => failed
    )
)]
pub struct Librarian {
    /// The `learn` call to answer when learning is done.
    pub learning: Option<Uuid>,
    /// Reads and memorizations still running.
    pub outstanding: u32,
    /// Facts memorized by the current `learn`.
    pub learned: u32,
    /// Lines that were not `subject | predicate | object`.
    pub skipped: u32,
}

fn run(action: &str, params: Value) -> Option<Effect> {
    ActionId::new(action).ok().map(|id| Effect::run(id, params))
}

/// `subject | predicate | object`, or `None` for a blank, comment or malformed line.
pub fn parse_fact(line: &str) -> Option<(String, String, String)> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let mut parts = line.split('|').map(str::trim);
    let (s, p, o) = (parts.next()?, parts.next()?, parts.next()?);
    (parts.next().is_none() && !s.is_empty() && !p.is_empty() && !o.is_empty())
        .then(|| (s.to_owned(), p.to_owned(), o.to_owned()))
}

impl Librarian {
    fn learn(&self, signal: &Signal) -> Reaction<Self> {
        let next = Librarian { learning: Some(signal.id()), outstanding: 1, learned: 0, skipped: 0 };
        Reaction::Update(next, run("fs.list", json!({"recursive": true})).into_iter().collect())
    }

    fn ask(&self, signal: &Signal) -> Vec<Effect> {
        let question = signal.data()["question"].as_str().unwrap_or_default();
        run("memory.recall", json!({"query": question, "limit": 1})).into_iter().collect()
    }

    fn completed(&self, signal: &Signal) -> Reaction<Self> {
        let Some(report) = signal.outcome() else { return Reaction::Keep(vec![]) };
        let output = &report.outcome.output;
        let mut next = self.clone();
        let mut effects = Vec::new();
        match report.action.as_str() {
            "fs.list" => {
                let files = output.as_array().into_iter().flatten();
                for file in
                    files.filter(|e| e["kind"] == "file" && e["path"].as_str().is_some_and(|p| p.ends_with(".txt")))
                {
                    effects.extend(run("fs.read", json!({"path": file["path"]})));
                }
                next.outstanding += effects.len() as u32;
            }
            "fs.read" => {
                for line in output["content"].as_str().unwrap_or_default().lines() {
                    match parse_fact(line) {
                        Some((subject, predicate, object)) => {
                            let source = output["path"].clone();
                            let fact =
                                json!({"subject": subject, "predicate": predicate, "object": object, "source": source});
                            effects.extend(run("memory.memorize", fact));
                        }
                        None if !line.trim().is_empty() && !line.trim().starts_with('#') => next.skipped += 1,
                        None => {}
                    }
                }
                next.outstanding += effects.len() as u32;
            }
            "memory.memorize" => next.learned += 1,
            "memory.recall" => {
                let answer = match output.as_array().and_then(|facts| facts.first()) {
                    Some(fact) => {
                        let sentence = format!(
                            "{} {} {}",
                            fact["subject"].as_str().unwrap_or_default(),
                            fact["predicate"].as_str().unwrap_or_default(),
                            fact["object"].as_str().unwrap_or_default()
                        );
                        json!({"answer": sentence, "fact": fact})
                    }
                    None => json!({"answer": null}),
                };
                return Reaction::Keep(
                    signal.causation_id().map(|call| Effect::reply(call, answer)).into_iter().collect(),
                );
            }
            _ => return Reaction::Keep(vec![]),
        }
        next.finish_step(&mut effects);
        Reaction::Update(next, effects)
    }

    fn failed(&self, signal: &Signal) -> Reaction<Self> {
        let Some(report) = signal.outcome() else { return Reaction::Keep(vec![]) };
        if report.awaiting_approval() {
            return Reaction::Keep(vec![]); // the outcome comes later
        }
        if report.action.as_str() == "memory.recall" {
            let error = json!({"error": report.outcome.output_text()});
            return Reaction::Keep(signal.causation_id().map(|call| Effect::reply(call, error)).into_iter().collect());
        }
        let mut next = self.clone();
        next.skipped += 1;
        let mut effects = Vec::new();
        next.finish_step(&mut effects);
        Reaction::Update(next, effects)
    }

    /// One step of learning ended; when none is left, answer the `learn` call.
    fn finish_step(&mut self, effects: &mut Vec<Effect>) {
        if self.learning.is_none() {
            return;
        }
        self.outstanding = self.outstanding.saturating_sub(1);
        if self.outstanding == 0
            && let Some(call) = self.learning.take()
        {
            effects.push(Effect::reply(call, json!({"learned": self.learned, "skipped": self.skipped})));
        }
    }
}

/// The `agentry` command's registry with the librarian added: what a binary of one's own hands to
/// [`agentry_cli::run_with`] (see `examples/agentry_librarian.rs`).
pub fn registry() -> agentry_cli::Registry {
    agentry_cli::Registry::standard().agent::<Librarian>()
}
