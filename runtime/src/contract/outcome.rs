//! The outcome of an action run: what every run returns, for the agent, people and LLMs.

use super::error::{ActionError, ErrorClass};
use crate::duration_ms;
use crate::id::ActionId;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::path::PathBuf;
use std::time::Duration;
use uuid::Uuid;

/// How a run ended, or that it has not ended yet because it waits for approval.
///
/// Only [`AwaitingApproval`](Self::AwaitingApproval) is not an end: the run goes on once it is approved (or is
/// refused when denied or expired), and its end reaches the agent as another outcome signal. Match on the
/// status and the obvious code is the right code:
///
/// ```
/// use agentry::action::{Outcome, OutcomeStatus};
///
/// fn answer(outcome: &Outcome) -> Option<String> {
///     match outcome.status {
///         OutcomeStatus::Completed => Some(format!("done: {}", outcome.output_text())),
///         OutcomeStatus::Failed | OutcomeStatus::Blocked => Some(format!("error: {}", outcome.output_text())),
///         OutcomeStatus::AwaitingApproval => None, // not over yet: its end comes later
///     }
/// }
/// assert_eq!(answer(&Outcome::awaiting_approval("waiting for approval".into())), None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeStatus {
    /// The action returned its output.
    Completed,
    /// The action failed (after any retries).
    Failed,
    /// The run was refused: by the gate, by its approver, or because its approval expired (its outcome carries
    /// a `Denied` error).
    Blocked,
    /// The run has not ended: it waits for approval. Its outcome has no error and no output; its end comes as
    /// another outcome signal of the same run.
    AwaitingApproval,
}

/// The error part of a failed or blocked outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct OutcomeError {
    /// The error's class.
    pub class: ErrorClass,
    /// The error's message.
    pub message: String,
}

impl From<&ActionError> for OutcomeError {
    fn from(err: &ActionError) -> Self {
        Self { class: err.class(), message: err.to_string() }
    }
}

/// What a run returned: status, output (JSON and text), error, artifacts, cost, latency and attempts.
///
/// Its text for people and LLMs ([`Outcome::output_text`]) is made when someone reads it, from the output or
/// the error, unless one was given ([`Outcome::with_output_text`]): most outcomes reach only their agent, which
/// reads the output. Serialized, an outcome always carries its text, as `output_text`.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// How the run ended.
    pub status: OutcomeStatus,
    /// The action's output (`null` unless completed).
    pub output: Value,
    /// The text, where it is not the one made from the output or the error.
    text: Option<String>,
    /// Why it failed or is blocked.
    pub error: Option<OutcomeError>,
    /// Files the run produced.
    pub artifacts: Vec<PathBuf>,
    /// What the run cost, in the action's own unit (tokens, cents), if it reports one.
    pub cost: Option<f64>,
    /// Wall time from the first attempt's start to the end.
    pub latency: Duration,
    /// How many attempts ran.
    pub attempts: u32,
}

/// An outcome as it is read: the same fields, with its text always there (and its schema).
#[derive(Deserialize, JsonSchema)]
#[schemars(rename = "Outcome")]
struct OutcomeForm {
    /// How the run ended.
    status: OutcomeStatus,
    /// The action's output (`null` unless completed).
    output: Value,
    /// The output, or the error, as text for people and LLMs.
    output_text: String,
    /// Why it failed or is blocked.
    #[serde(default)]
    error: Option<OutcomeError>,
    /// Files the run produced.
    #[serde(default)]
    artifacts: Vec<PathBuf>,
    /// What the run cost, in the action's own unit (tokens, cents), if it reports one.
    #[serde(default)]
    cost: Option<f64>,
    /// Wall time from the first attempt's start to the end.
    #[serde(with = "duration_ms")]
    #[schemars(with = "u64")]
    latency: Duration,
    /// How many attempts ran.
    attempts: u32,
}

/// An outcome as it is written, borrowed field by field: nothing is copied but a text that has to be made.
#[derive(Serialize)]
struct OutcomeView<'a> {
    status: OutcomeStatus,
    output: &'a Value,
    output_text: std::borrow::Cow<'a, str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a OutcomeError>,
    #[serde(skip_serializing_if = "<[PathBuf]>::is_empty")]
    artifacts: &'a [PathBuf],
    #[serde(skip_serializing_if = "Option::is_none")]
    cost: Option<f64>,
    #[serde(with = "duration_ms")]
    latency: Duration,
    attempts: u32,
}

impl Serialize for Outcome {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        OutcomeView {
            status: self.status,
            output: &self.output,
            output_text: self.output_text(),
            error: self.error.as_ref(),
            artifacts: &self.artifacts,
            cost: self.cost,
            latency: self.latency,
            attempts: self.attempts,
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Outcome {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let form = OutcomeForm::deserialize(deserializer)?;
        let outcome = Outcome {
            status: form.status.as_read(form.error.is_some()),
            output: form.output,
            text: None,
            error: form.error,
            artifacts: form.artifacts,
            cost: form.cost,
            latency: form.latency,
            attempts: form.attempts,
        };
        Ok(outcome.with_output_text(form.output_text))
    }
}

impl JsonSchema for Outcome {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Outcome".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        OutcomeForm::json_schema(generator)
    }
}

/// Two outcomes are equal when they read the same, their text included (given or made).
impl PartialEq for Outcome {
    fn eq(&self, other: &Self) -> bool {
        self.status == other.status
            && self.output == other.output
            && self.error == other.error
            && self.artifacts == other.artifacts
            && self.cost == other.cost
            && self.latency == other.latency
            && self.attempts == other.attempts
            && self.output_text() == other.output_text()
    }
}

impl Outcome {
    /// An outcome that holds nothing: what a spared report box keeps (see `report_box`).
    pub(crate) fn emptied() -> Self {
        Self::completed(Value::Null, Duration::ZERO, 0)
    }

    /// A completed outcome; its text is the output itself when that is a string, else compact JSON.
    pub fn completed(output: Value, latency: Duration, attempts: u32) -> Self {
        Self {
            status: OutcomeStatus::Completed,
            output,
            text: None,
            error: None,
            artifacts: Vec::new(),
            cost: None,
            latency,
            attempts,
        }
    }

    /// The outcome of a run that has not ended: it waits for approval ([`OutcomeStatus::AwaitingApproval`],
    /// told to the agent as `action.blocked` with no error).
    pub fn awaiting_approval(output_text: String) -> Self {
        Self {
            status: OutcomeStatus::AwaitingApproval,
            output: Value::Null,
            text: Some(output_text),
            error: None,
            artifacts: Vec::new(),
            cost: None,
            latency: Duration::ZERO,
            attempts: 0,
        }
    }

    /// The outcome of a run that ended with `error`: `Blocked` for a `Denied` error (the run was refused: by the
    /// gate, its approver, or the action's own check of what it may do), `Failed` for any other. Its text is the
    /// error's message.
    pub fn from_error(error: &ActionError, latency: Duration, attempts: u32) -> Self {
        let status = match error.class() {
            ErrorClass::Denied => OutcomeStatus::Blocked,
            _ => OutcomeStatus::Failed,
        };
        Self {
            status,
            output: Value::Null,
            text: None,
            error: Some(error.into()),
            artifacts: Vec::new(),
            cost: None,
            latency,
            attempts,
        }
    }

    /// The output, or the error, as text for people and LLMs: the text given with
    /// [`Outcome::with_output_text`], else the error's message, else the output itself when it is a string,
    /// else the output as compact JSON.
    ///
    /// ```
    /// use agentry::action::Outcome;
    /// use serde_json::json;
    /// use std::time::Duration;
    ///
    /// let outcome = Outcome::completed(json!({"sum": 3}), Duration::ZERO, 1);
    /// assert_eq!(outcome.output_text(), r#"{"sum":3}"#);
    /// assert_eq!(Outcome::completed(json!("three"), Duration::ZERO, 1).output_text(), "three");
    /// let told = outcome.with_output_text("three, as asked");
    /// assert_eq!(told.output_text(), "three, as asked");
    /// ```
    pub fn output_text(&self) -> std::borrow::Cow<'_, str> {
        use std::borrow::Cow;
        match (&self.text, &self.error, &self.output) {
            (Some(text), _, _) => Cow::Borrowed(text),
            (None, Some(error), _) => Cow::Borrowed(&error.message),
            (None, None, Value::String(text)) => Cow::Borrowed(text),
            (None, None, output) => Cow::Owned(output.to_string()),
        }
    }

    /// The text it keeps, where it is not the one made from the output or the error (for the journal's compact
    /// form of an outcome).
    pub(crate) fn kept_text(&self) -> Option<&str> {
        self.text.as_deref()
    }

    /// The outcome with `text` as the text it keeps, as [`Outcome::kept_text`] gave it.
    pub(crate) fn keeping_text(mut self, text: Option<String>) -> Self {
        self.text = text;
        self
    }

    /// [`Outcome::output_text`], taking the outcome (a text it holds is moved, not copied).
    pub fn into_output_text(self) -> String {
        match self.text {
            Some(text) => text,
            None => self.output_text().into_owned(),
        }
    }

    /// The same outcome with `text` as its text for people and LLMs, instead of the one made from its output or
    /// error.
    pub fn with_output_text(mut self, text: impl Into<String>) -> Self {
        let text = text.into();
        // A text that says what the made one would is not kept twice.
        self.text = None;
        if self.output_text() != text {
            self.text = Some(text);
        }
        self
    }
}

/// An outcome signal read as types: which run, which action, and how it ended. Get one with
/// [`Signal::outcome`](crate::Signal::outcome).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// The run.
    pub run_id: Uuid,
    /// The action it ran.
    pub action: ActionId,
    /// How it ended.
    pub outcome: Outcome,
}

impl RunReport {
    /// The report as the JSON payload of its outcome signal (the same value its serialization gives).
    pub(crate) fn to_json(&self) -> Value {
        let mut data = Map::with_capacity(3);
        data.insert("run_id".to_owned(), json!(self.run_id));
        data.insert("action".to_owned(), Value::String(self.action.as_str().to_owned()));
        data.insert("outcome".to_owned(), self.outcome.clone().into_json());
        Value::Object(data)
    }

    /// Whether the run completed.
    pub fn completed(&self) -> bool {
        self.outcome.status == OutcomeStatus::Completed
    }

    /// Whether the run has not ended: it waits for approval, and its end will come as another outcome signal.
    pub fn awaiting_approval(&self) -> bool {
        self.outcome.status == OutcomeStatus::AwaitingApproval
    }

    /// Whether the run has ended (completed, failed or refused): whether this is the last outcome signal of it.
    pub fn ended(&self) -> bool {
        !self.awaiting_approval()
    }

    /// The error's message, when it failed or was refused (`None` while it waits for approval: check
    /// [`ended`](Self::ended) before reading `None` as success).
    pub fn error_message(&self) -> Option<&str> {
        self.outcome.error.as_ref().map(|e| e.message.as_str())
    }
}

impl OutcomeStatus {
    /// The status as a journal's outcome says it, with or without an error: before `AwaitingApproval` existed, a
    /// run waiting for approval was written `Blocked` with no error.
    pub(crate) fn as_read(self, has_error: bool) -> Self {
        match (self, has_error) {
            (Self::Blocked, false) => Self::AwaitingApproval,
            (status, _) => status,
        }
    }

    /// The status as its JSON text.
    fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Blocked => "blocked",
            Self::AwaitingApproval => "awaiting_approval",
        }
    }
}

impl Outcome {
    /// The outcome as the JSON its serialization gives, moving the output instead of copying it (every run's
    /// outcome reaches its agent as JSON). An artifact path that is not UTF-8 is written lossily rather than
    /// failing.
    pub fn into_json(mut self) -> Value {
        let mut map = Map::with_capacity(8);
        map.insert("status".to_owned(), Value::String(self.status.as_str().to_owned()));
        let text = self.text.take().unwrap_or_else(|| self.output_text().into_owned());
        map.insert("output".to_owned(), self.output);
        map.insert("output_text".to_owned(), Value::String(text));
        if let Some(error) = self.error {
            map.insert("error".to_owned(), json!({"class": error.class, "message": error.message}));
        }
        if !self.artifacts.is_empty() {
            let paths = self.artifacts.iter().map(|p| Value::String(p.to_string_lossy().into_owned())).collect();
            map.insert("artifacts".to_owned(), Value::Array(paths));
        }
        if let Some(cost) = self.cost {
            map.insert("cost".to_owned(), json!(cost));
        }
        map.insert("latency".to_owned(), json!(u64::try_from(self.latency.as_millis()).unwrap_or(u64::MAX)));
        map.insert("attempts".to_owned(), json!(self.attempts));
        Value::Object(map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn outcome() -> impl Strategy<Value = Outcome> {
        let status = prop_oneof![
            Just(OutcomeStatus::Completed),
            Just(OutcomeStatus::Failed),
            Just(OutcomeStatus::Blocked),
            Just(OutcomeStatus::AwaitingApproval)
        ];
        let class = prop_oneof![
            Just(ErrorClass::Validation),
            Just(ErrorClass::Transient),
            Just(ErrorClass::Timeout),
            Just(ErrorClass::Critical),
            Just(ErrorClass::Denied),
            Just(ErrorClass::Cancelled),
            Just(ErrorClass::Interrupted),
            Just(ErrorClass::Reported),
            Just(ErrorClass::BudgetExceeded),
            Just(ErrorClass::RateLimited),
        ];
        let output = prop_oneof![
            Just(Value::Null),
            any::<i64>().prop_map(|n| json!(n)),
            "[a-z \"]{0,6}".prop_map(Value::String),
            prop::collection::btree_map("[a-z]{1,3}", any::<bool>(), 0..3).prop_map(|m| json!(m)),
        ];
        (
            status,
            output,
            prop::option::of(".{0,8}"),
            prop::option::of((class, ".{0,8}")),
            prop::collection::vec("[a-z/]{1,6}", 0..3),
            prop::option::of(prop_oneof![any::<f64>(), Just(f64::NAN)]),
            any::<u64>(),
            any::<u32>(),
        )
            .prop_map(|(status, output, output_text, error, artifacts, cost, latency, attempts)| {
                let error = error.map(|(class, message)| OutcomeError { class, message });
                // As the runtime makes them: a refusal carries its error, a run waiting for approval none.
                let status = match (status, &error) {
                    (OutcomeStatus::Blocked, None) => OutcomeStatus::AwaitingApproval,
                    (OutcomeStatus::AwaitingApproval, Some(_)) => OutcomeStatus::Blocked,
                    (status, _) => status,
                };
                let outcome = Outcome {
                    status,
                    output,
                    text: None,
                    error,
                    artifacts: artifacts.into_iter().map(PathBuf::from).collect(),
                    cost,
                    latency: Duration::from_millis(latency),
                    attempts,
                };
                // About half of them carry a text of their own.
                match output_text {
                    Some(text) => outcome.with_output_text(text),
                    None => outcome,
                }
            })
    }

    /// Before `awaiting_approval` existed, a run waiting for approval was written `blocked` with no error; it
    /// reads back as waiting, and a refusal (with its error) stays blocked.
    #[test]
    fn an_old_blocked_outcome_without_error_reads_as_awaiting_approval() {
        let old = json!({"status": "blocked", "output": null, "output_text": "waiting", "latency": 0, "attempts": 0});
        let read: Outcome = serde_json::from_value(old).expect("reads");
        assert_eq!(read.status, OutcomeStatus::AwaitingApproval);
        let refused = json!({"status": "blocked", "output": null, "output_text": "no", "latency": 0, "attempts": 0,
            "error": {"class": "denied", "message": "no"}});
        let read: Outcome = serde_json::from_value(refused).expect("reads");
        assert_eq!(read.status, OutcomeStatus::Blocked);
        let waiting = Outcome::awaiting_approval("waiting".to_owned());
        assert_eq!(serde_json::to_value(&waiting).unwrap()["status"], "awaiting_approval");
    }

    proptest! {
        /// An outcome read back from its JSON is the same outcome, with the same text, whether its text was
        /// given or made.
        #[test]
        fn an_outcome_reads_back_as_written(outcome in outcome()) {
            let text = outcome.output_text().into_owned();
            let json = serde_json::to_value(&outcome).expect("an outcome with UTF-8 paths serializes");
            prop_assert_eq!(json["output_text"].as_str(), Some(text.as_str()));
            let back: Outcome = serde_json::from_value(json).expect("reads back");
            prop_assert_eq!(back.output_text(), text.as_str());
            prop_assert_eq!(back.clone().into_output_text(), text);
            let outcome = Outcome { cost: outcome.cost.filter(|cost| cost.is_finite()), ..outcome };
            prop_assert_eq!(back, outcome);
        }

        /// The hand-built JSON is exactly what serializing the outcome gives, key order included.
        #[test]
        fn into_json_is_the_serialization(outcome in outcome()) {
            let serialized = serde_json::to_string(&outcome).expect("an outcome with UTF-8 paths serializes");
            prop_assert_eq!(outcome.into_json().to_string(), serialized);
        }

        /// An outcome signal kept typed serializes, compares and reads exactly as one made from its JSON.
        #[test]
        fn a_typed_outcome_signal_is_its_json(outcome in outcome(), run in any::<u128>()) {
            let action = ActionId::new("noop.run").expect("a valid id");
            let run_id = Uuid::from_u128(run);
            let run = crate::kinds::stamped::RunRef { run: run_id, action: &action, correlation: Uuid::nil(), causation: None };
            let stamp = (Uuid::from_u128(1), chrono::DateTime::UNIX_EPOCH);
            let typed = crate::kinds::stamped::action_outcome_at(&"agentry".into(), run, outcome.clone(), stamp).expect("a signal");
            // A cost that is not a number reads as none in both forms (JSON has no NaN).
            let outcome = Outcome { cost: outcome.cost.filter(|cost| cost.is_finite()), ..outcome };
            let report = RunReport { run_id, action: action.clone(), outcome };
            prop_assert_eq!(serde_json::to_string(&report).expect("serializes"), report.to_json().to_string());
            let from_json = typed.clone().with_data(report.to_json());
            prop_assert_eq!(serde_json::to_string(&typed).expect("serializes"), serde_json::to_string(&from_json).expect("serializes"));
            prop_assert_eq!(typed.outcome(), Some(&report));
            prop_assert_eq!(from_json.outcome(), Some(&report));
            prop_assert_eq!(typed.data(), &report.to_json());
            prop_assert_eq!(&typed, &from_json);
            let back: crate::Signal = serde_json::from_str(&serde_json::to_string(&typed).expect("serializes")).expect("parses");
            prop_assert_eq!(back, typed);
        }
    }
}
