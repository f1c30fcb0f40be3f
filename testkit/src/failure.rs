//! What a failed check reports: the shrunk sequence of steps, in readable form, and what went wrong.

use std::fmt;

/// A check found a counterexample (or could not run). Its `Display` and `Debug` are the same readable report,
/// so `check(...).unwrap()` in a test prints the shrunk steps.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckFailure {
    /// A property failed; `steps` is the smallest sequence proptest found that still fails.
    #[error("{}", report(check, steps, reason))]
    Counterexample {
        /// Which check (`check_mounting`, `check_agent`).
        check: &'static str,
        /// The shrunk steps, one line each, in order.
        steps: Vec<String>,
        /// What went wrong, naming the step.
        reason: String,
    },
    /// The check could not be set up: a skill whose state schema no values can be generated for, a pattern
    /// that is not a pattern, proptest giving up after too many rejected cases.
    #[error("{check} could not run: {reason}")]
    Setup {
        /// Which check.
        check: &'static str,
        /// Why, with what was expected.
        reason: String,
    },
}

impl CheckFailure {
    /// The shrunk steps of a counterexample (empty for a setup failure).
    pub fn steps(&self) -> &[String] {
        match self {
            Self::Counterexample { steps, .. } => steps,
            Self::Setup { .. } => &[],
        }
    }

    /// What went wrong.
    pub fn reason(&self) -> &str {
        match self {
            Self::Counterexample { reason, .. } | Self::Setup { reason, .. } => reason,
        }
    }
}

impl fmt::Debug for CheckFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

fn report(check: &str, steps: &[String], reason: &str) -> String {
    let plural = if steps.len() == 1 { "" } else { "s" };
    let mut text = format!("{check} found a counterexample ({} step{plural} after shrinking):\n", steps.len());
    for (i, step) in steps.iter().enumerate() {
        text.push_str(&format!("  {}. {step}\n", i + 1));
    }
    text.push_str(&format!("what went wrong: {reason}"));
    text
}
