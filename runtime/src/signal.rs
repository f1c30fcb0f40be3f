//! Signals: the immutable, serializable messages agents react to (CloudEvents-style).
//!
//! A signal made at the edge of the system ([`Signal::new`], [`SignalBuilder::build`]) takes its id and time
//! from the clock. A signal made inside a pure handler as a consequence of another ([`Signal::follow`]) takes
//! them from its cause instead, so pure code stays deterministic: the same cause gives the same follow-up.

use crate::contract::RunReport;
use crate::pattern::Pattern;
use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;
use std::sync::{Arc, OnceLock};
use uuid::Uuid;

/// The source given to signals whose maker named none. (Sources starting with `agentry` are the runtime's own:
/// a signal from outside that claims one is refused.)
pub const DEFAULT_SOURCE: &str = "app";

/// Why a signal kind is not valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KindError {
    /// The kind was empty or had an empty segment.
    #[error("signal kind `{0}` has an empty segment; expected dotted segments such as `order.placed`")]
    EmptySegment(String),
    /// The kind had a character that is not allowed.
    #[error("signal kind `{kind}` contains {found:?}; expected ASCII letters, digits, `_` and `-` between dots")]
    BadChar {
        /// The rejected kind.
        kind: String,
        /// The first offending character.
        found: char,
    },
}

/// A signal's kind: dotted segments such as `order.placed` or `action.completed`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(try_from = "String", into = "String")]
pub struct Kind(Arc<str>);

impl Kind {
    /// Parses and validates a kind.
    pub fn new(kind: impl AsRef<str>) -> Result<Self, KindError> {
        let kind = kind.as_ref();
        for segment in kind.split('.') {
            if segment.is_empty() {
                return Err(KindError::EmptySegment(kind.to_owned()));
            }
            if let Some(found) = segment.chars().find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-')) {
                return Err(KindError::BadChar { kind: kind.to_owned(), found });
            }
        }
        Ok(Self(Arc::from(kind)))
    }

    /// The kind as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this kind matches a pattern such as `order.*`.
    pub fn matches(&self, pattern: &Pattern) -> bool {
        pattern.matches(&self.0)
    }
}

impl TryFrom<String> for Kind {
    type Error = KindError;
    fn try_from(kind: String) -> Result<Self, KindError> {
        Self::new(kind)
    }
}

impl TryFrom<&str> for Kind {
    type Error = KindError;
    fn try_from(kind: &str) -> Result<Self, KindError> {
        Self::new(kind)
    }
}

impl TryFrom<&Kind> for Kind {
    type Error = KindError;
    /// A kind already checked: shares its text.
    fn try_from(kind: &Kind) -> Result<Self, KindError> {
        Ok(kind.clone())
    }
}

impl From<Kind> for String {
    fn from(kind: Kind) -> String {
        kind.0.to_string()
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl PartialEq<&str> for Kind {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

/// An immutable message: something that happened, addressed to an agent.
///
/// `correlation_id` is shared by every signal in one chain of cause and effect (a root signal correlates with
/// itself); `causation_id` is the id of the signal that directly caused this one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Signal {
    id: Uuid,
    kind: Kind,
    source: Arc<str>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    subject: Option<String>,
    #[serde(serialize_with = "crate::time_text::serialize")]
    time: DateTime<Utc>,
    #[serde(default)]
    #[schemars(with = "Value")]
    data: Payload,
    correlation_id: Uuid,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    causation_id: Option<Uuid>,
}

/// A signal's payload, held as JSON or, for an outcome signal the runtime made, as the typed run report; each
/// form is made from the other on first use and kept. The runtime's own outcome signals carry the report, so an
/// agent that reads them with [`Signal::outcome`] (or only looks at the kind) never pays for the JSON. Equality,
/// `Debug` and serialization are those of the JSON, whichever form the payload was made in.
#[derive(Clone)]
enum Payload {
    /// Made from JSON; the report is parsed from it on first use. (Its `OnceLock` starts empty, which costs
    /// nothing to make or clone; one made full would go through its initialisation, once per signal.)
    Json { json: Value, report: OnceLock<Option<Box<RunReport>>> },
    /// Made from a run report; the JSON is built from it on first use.
    Report { report: Box<RunReport>, json: OnceLock<Value> },
}

impl Default for Payload {
    fn default() -> Self {
        Self::from_json(Value::Null)
    }
}

impl Payload {
    fn from_json(json: Value) -> Self {
        Self::Json { json, report: OnceLock::new() }
    }

    fn from_report(report: Box<RunReport>) -> Self {
        Self::Report { report, json: OnceLock::new() }
    }

    /// The JSON, built from the report on first use.
    fn json(&self) -> &Value {
        match self {
            Self::Json { json, .. } => json,
            Self::Report { report, json } => json.get_or_init(|| report.to_json()),
        }
    }

    /// The typed report, parsed from the JSON on first use (`None` when the JSON is not a run report).
    fn report(&self) -> Option<&RunReport> {
        match self {
            Self::Json { json, report } => {
                report.get_or_init(|| RunReport::deserialize(json).ok().map(Box::new)).as_deref()
            }
            Self::Report { report, .. } => Some(report),
        }
    }
}

impl PartialEq for Payload {
    fn eq(&self, other: &Self) -> bool {
        self.json() == other.json()
    }
}

impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.json().fmt(f)
    }
}

impl Serialize for Payload {
    /// A report not yet read as JSON serializes straight from its types (the same text, property-tested).
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Report { report, json } if json.get().is_none() => report.serialize(serializer),
            _ => self.json().serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for Payload {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Value::deserialize(deserializer).map(Self::from_json)
    }
}

/// An outcome signal whose payload is its run report, as parts: what the journal keeps of it in its compact
/// form (see the store's `signal_codec.rs`).
pub(crate) struct OutcomeParts<'a> {
    pub id: Uuid,
    pub kind: &'a Kind,
    pub source: &'a Arc<str>,
    pub subject: Option<&'a str>,
    pub time: DateTime<Utc>,
    pub correlation_id: Uuid,
    pub causation_id: Option<Uuid>,
    pub report: &'a RunReport,
}

impl Signal {
    /// This signal as parts, if its payload is a run report held as types (an outcome signal the runtime made,
    /// or one read back from those parts).
    pub(crate) fn outcome_parts(&self) -> Option<OutcomeParts<'_>> {
        let Payload::Report { report, .. } = &self.data else { return None };
        Some(OutcomeParts {
            id: self.id,
            kind: &self.kind,
            source: &self.source,
            subject: self.subject.as_deref(),
            time: self.time,
            correlation_id: self.correlation_id,
            causation_id: self.causation_id,
            report,
        })
    }

    /// The signal made of these parts (owned); [`Signal::outcome_parts`] read back.
    pub(crate) fn from_outcome_parts(
        id: Uuid,
        kind: Kind,
        source: Arc<str>,
        subject: Option<String>,
        time: DateTime<Utc>,
        (correlation_id, causation_id): (Uuid, Option<Uuid>),
        report: Box<RunReport>,
    ) -> Self {
        Self { id, kind, source, subject, time, data: Payload::from_report(report), correlation_id, causation_id }
    }

    /// A root signal made at the edge of the system, stamped with a fresh UUID v7 and the current time.
    pub fn new(kind: impl TryInto<Kind, Error = KindError>, data: Value) -> Result<Self, KindError> {
        Self::builder(kind).data(data).build()
    }

    /// Starts building a signal of the given kind; the kind is checked by [`SignalBuilder::build`].
    pub fn builder(kind: impl TryInto<Kind, Error = KindError>) -> SignalBuilder {
        SignalBuilder {
            kind: kind.try_into(),
            source: None,
            subject: None,
            data: Payload::default(),
            stamp: None,
            cause: None,
        }
    }

    /// Starts building a signal caused by this one: same correlation, `causation_id` = this signal's id, and a
    /// deterministic id and time derived from this signal, so pure handlers stay pure.
    pub fn follow(&self, kind: impl TryInto<Kind, Error = KindError>) -> SignalBuilder {
        let mut builder = Self::builder(kind);
        builder.cause = Some(Cause { id: self.id, correlation_id: self.correlation_id, time: self.time });
        builder.source = Some(self.source.clone());
        builder
    }

    /// The same signal with this payload (for a driver that sends many signals of one kind: the kind is
    /// checked once, when the first is built).
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Payload::from_json(data);
        self
    }

    /// The same signal with this id and time, for a deterministic driver (the simulator), which stamps every
    /// signal it delivers from its seeded generator and virtual clock. A root signal (one that correlates with
    /// itself) goes on correlating with itself.
    pub fn restamped(mut self, id: Uuid, time: DateTime<Utc>) -> Self {
        if self.correlation_id == self.id {
            self.correlation_id = id;
        }
        self.id = id;
        self.time = time;
        self
    }

    /// The unique id (UUID v7).
    pub fn id(&self) -> Uuid {
        self.id
    }

    /// The kind, e.g. `order.placed`.
    pub fn kind(&self) -> &Kind {
        &self.kind
    }

    /// Who produced the signal.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// What the signal is about, if anything in particular.
    pub fn subject(&self) -> Option<&str> {
        self.subject.as_deref()
    }

    /// When it happened.
    pub fn time(&self) -> DateTime<Utc> {
        self.time
    }

    /// The payload.
    pub fn data(&self) -> &Value {
        self.data.json()
    }

    /// The id shared by every signal in this chain of cause and effect.
    pub fn correlation_id(&self) -> Uuid {
        self.correlation_id
    }

    /// The id of the signal that caused this one, if any.
    pub fn causation_id(&self) -> Option<Uuid> {
        self.causation_id
    }

    /// The run an `action.completed`, `action.failed` or `action.blocked` signal reports, as types; `None` for
    /// any other kind (or data that is not a run report). Parsed from `data` once, on first use.
    ///
    /// ```
    /// # use agentry::Signal;
    /// use agentry::action::OutcomeStatus;
    ///
    /// fn answer(signal: &Signal) -> Option<String> {
    ///     let report = signal.outcome()?;
    ///     let text = report.outcome.output_text();
    ///     match report.outcome.status {
    ///         OutcomeStatus::Completed => Some(text.into_owned()),
    ///         OutcomeStatus::Failed | OutcomeStatus::Blocked => Some(format!("{} failed: {text}", report.action)),
    ///         OutcomeStatus::AwaitingApproval => None, // not over: its end comes as another signal
    ///     }
    /// }
    /// ```
    pub fn outcome(&self) -> Option<&RunReport> {
        if !self.kind.as_str().starts_with("action.") {
            return None;
        }
        self.data.report()
    }

    /// The run report the signal holds, if it holds one (typed, or read from its JSON already), taking the
    /// signal apart.
    pub(crate) fn into_report(self) -> Option<Box<RunReport>> {
        match self.data {
            Payload::Report { report, .. } => Some(report),
            Payload::Json { report, .. } => report.into_inner().flatten(),
        }
    }

    /// The same signal, said to come from `source` (the server stamps what an agent emits with the agent's own).
    pub(crate) fn with_source(mut self, source: Arc<str>) -> Self {
        self.source = source;
        self
    }

    /// The same signal, caused by `cause` if it names no cause of its own: what an agent emits or schedules
    /// while handling an input follows from that input (its causation and correlation), unless it says
    /// otherwise. Its id and time stay as they are.
    pub(crate) fn caused_by_default(mut self, cause: &Signal) -> Self {
        if self.causation_id.is_none() {
            self.causation_id = Some(cause.id);
            self.correlation_id = cause.correlation_id;
        }
        self
    }

    /// Whether this signal's kind matches a pattern.
    pub fn is(&self, pattern: &Pattern) -> bool {
        pattern.matches(self.kind.as_str())
    }
}

#[derive(Debug, Clone)]
struct Cause {
    id: Uuid,
    correlation_id: Uuid,
    time: DateTime<Utc>,
}

/// Builds a [`Signal`]; see [`Signal::builder`] and [`Signal::follow`].
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct SignalBuilder {
    kind: Result<Kind, KindError>,
    source: Option<Arc<str>>,
    subject: Option<String>,
    data: Payload,
    stamp: Option<(Uuid, DateTime<Utc>)>,
    cause: Option<Cause>,
}

impl SignalBuilder {
    /// Who produces the signal (default: the cause's source, or `agentry`).
    pub fn source(mut self, source: impl Into<Arc<str>>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// What the signal is about.
    pub fn subject(mut self, subject: impl Into<String>) -> Self {
        self.subject = Some(subject.into());
        self
    }

    /// The payload.
    pub fn data(mut self, data: Value) -> Self {
        self.data = Payload::from_json(data);
        self
    }

    /// Sets the id and time explicitly, for replay and deterministic tests.
    pub fn stamped(mut self, id: Uuid, time: DateTime<Utc>) -> Self {
        self.stamp = Some((id, time));
        self
    }

    /// Sets the correlation and causation explicitly, as when a signal arrives from elsewhere.
    pub fn caused_by(mut self, correlation_id: Uuid, causation_id: Uuid, time: DateTime<Utc>) -> Self {
        self.cause = Some(Cause { id: causation_id, correlation_id, time });
        self
    }

    /// Builds the signal, or says why its kind is invalid.
    pub fn build(self) -> Result<Signal, KindError> {
        let kind = self.kind?;
        let (id, time) = match (&self.stamp, &self.cause) {
            (Some(stamp), _) => *stamp,
            (None, Some(cause)) => (derived_id(cause, &kind, self.subject.as_deref(), self.data.json()), cause.time),
            (None, None) => crate::wall_clock::stamp(),
        };
        let (correlation_id, causation_id) = match &self.cause {
            Some(cause) => (cause.correlation_id, Some(cause.id)),
            None => (id, None),
        };
        Ok(Signal {
            id,
            kind,
            source: self.source.unwrap_or_else(default_source),
            subject: self.subject,
            time,
            data: self.data,
            correlation_id,
            causation_id,
        })
    }
}

/// [`DEFAULT_SOURCE`], shared: a signal without a named source costs no allocation for it.
fn default_source() -> Arc<str> {
    static SHARED: std::sync::LazyLock<Arc<str>> = std::sync::LazyLock::new(|| Arc::from(DEFAULT_SOURCE));
    SHARED.clone()
}

/// A UUID v7 for a follow-up signal: the cause's millisecond timestamp, and "random" bits taken from a
/// name-based (v5) UUID of the cause id and the follow-up's content. The same cause and content give the same id.
fn derived_id(cause: &Cause, kind: &Kind, subject: Option<&str>, data: &Value) -> Uuid {
    // The name is `kind NUL subject NUL data-as-compact-JSON`, written straight into one buffer.
    let subject = subject.unwrap_or("");
    let mut name = Vec::with_capacity(kind.as_str().len() + subject.len() + 64);
    name.extend_from_slice(kind.as_str().as_bytes());
    name.push(0);
    name.extend_from_slice(subject.as_bytes());
    name.push(0);
    // Writing JSON into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut name, data);
    let digest = Uuid::new_v5(&cause.id, &name);
    let mut random = [0u8; 10];
    random.copy_from_slice(&digest.as_bytes()[6..16]);
    let millis = u64::try_from(cause.time.timestamp_millis()).unwrap_or(0);
    uuid::Builder::from_unix_timestamp_millis(millis, &random).into_uuid()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn root_signals_correlate_with_themselves() {
        let s = Signal::new("order.placed", json!({"n": 1})).unwrap();
        assert_eq!(s.correlation_id(), s.id());
        assert_eq!(s.causation_id(), None);
        assert_eq!(s.id().get_version_num(), 7);
        assert_eq!(s.source(), DEFAULT_SOURCE);
    }

    #[test]
    fn follow_ups_are_deterministic_and_traceable() {
        let cause = Signal::builder("order.placed").source("shop").subject("o-1").build().unwrap();
        let a = cause.follow("order.paid").data(json!(5)).build().unwrap();
        let b = cause.follow("order.paid").data(json!(5)).build().unwrap();
        let c = cause.follow("order.paid").data(json!(6)).build().unwrap();
        assert_eq!(a, b);
        assert_ne!(a.id(), c.id());
        assert_eq!(a.id().get_version_num(), 7);
        assert_eq!(a.correlation_id(), cause.id());
        assert_eq!(a.causation_id(), Some(cause.id()));
        assert_eq!(a.time(), cause.time());
        assert_eq!(a.source(), "shop");
        let d = a.follow("order.shipped").build().unwrap();
        assert_eq!(d.correlation_id(), cause.id(), "correlation is kept down the chain");
        assert_eq!(d.causation_id(), Some(a.id()));
    }

    #[test]
    fn bad_kinds_are_typed_errors() {
        let err = Signal::new("order..placed", Value::Null).unwrap_err();
        assert!(err.to_string().contains("empty segment"), "{err}");
        let err = Signal::new("order placed", Value::Null).unwrap_err();
        assert_eq!(err, KindError::BadChar { kind: "order placed".into(), found: ' ' });
        let bad = json!({"id": Uuid::now_v7(), "kind": "a b", "source": "x", "time": "2026-01-01T00:00:00Z",
            "correlation_id": Uuid::now_v7()});
        assert!(serde_json::from_value::<Signal>(bad).is_err());
    }
}
