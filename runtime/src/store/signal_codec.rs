//! Signals as the SQLite journal keeps them: an outcome signal the runtime made in a compact form, every other
//! signal as its JSON.
//!
//! An agent's server keeps every outcome its runs end with, and it is logged as the agent's input once consumed:
//! one per run, made on the agent's own thread. As JSON that was a fifth of that thread's time with a durable
//! journal (five ids as text, an instant, the output written twice: as itself and as its text), and ~460 bytes.
//! In this form ids and the instant are fixed-width bytes, and the output's text is kept only where it is not
//! the one made from the output. Reading one back gives a signal equal to the one kept (the same JSON), with its
//! report already as types.
//!
//! Layout (integers little-endian; a text is a length in 4 bytes and its bytes; an optional value is a byte 0, or
//! 1 and the value): the tag byte [`TAG`]; the signal's id (16 bytes); its time as seconds (8 bytes) and
//! nanoseconds (4 bytes); its correlation id (16 bytes); its optional causation id; its kind, source and optional
//! subject (texts); the run's id (16 bytes) and action (text); the outcome's status (a byte), output (its JSON, a
//! text), optional kept text, optional error (its class's number, a byte, and its message, a text), artifacts (a
//! count in 4 bytes and a text each), optional cost (8 bytes), latency in milliseconds (8 bytes) and attempts
//! (4 bytes).
//!
//! JSON always starts with `{`, so [`decode`] tells the two apart by the first byte.

use super::StoreError;
use super::compact::{Reader, put_optional, put_text};
use super::run_codec::{error_number, error_of};
use crate::action::{Outcome, OutcomeError, OutcomeStatus, RunReport};
use crate::id::ActionId;
use crate::signal::{Kind, Signal};
use chrono::{DateTime, Utc};
use std::sync::Arc;
use std::time::Duration;

/// The first byte of a signal in the compact form.
const TAG: u8 = 1;

/// Appends `signal` to `out`: an outcome signal whose report is held as types in the compact form, any other as
/// its JSON.
pub(super) fn encode(signal: &Signal, out: &mut Vec<u8>) {
    let Some(parts) = signal.outcome_parts() else {
        // A signal serializes to JSON without fail (plain data, string keys).
        let _ = serde_json::to_writer(out, signal);
        return;
    };
    out.push(TAG);
    out.extend_from_slice(parts.id.as_bytes());
    out.extend_from_slice(&parts.time.timestamp().to_le_bytes());
    out.extend_from_slice(&parts.time.timestamp_subsec_nanos().to_le_bytes());
    out.extend_from_slice(parts.correlation_id.as_bytes());
    put_optional(out, parts.causation_id, |out, id| out.extend_from_slice(id.as_bytes()));
    put_text(out, parts.kind.as_str().as_bytes());
    put_text(out, parts.source.as_bytes());
    put_optional(out, parts.subject, |out, subject| put_text(out, subject.as_bytes()));
    let RunReport { run_id, action, outcome } = parts.report;
    out.extend_from_slice(run_id.as_bytes());
    put_text(out, action.as_str().as_bytes());
    out.push(match outcome.status {
        OutcomeStatus::Completed => 0,
        OutcomeStatus::Failed => 1,
        OutcomeStatus::Blocked => 2,
        OutcomeStatus::AwaitingApproval => 3,
    });
    // The output's JSON is written in place, its length once it is known.
    let at = out.len();
    out.extend_from_slice(&[0; 4]);
    let _ = serde_json::to_writer(&mut *out, &outcome.output);
    let len = u32::try_from(out.len() - at - 4).unwrap_or(u32::MAX);
    out[at..at + 4].copy_from_slice(&len.to_le_bytes());
    put_optional(out, outcome.kept_text(), |out, kept| put_text(out, kept.as_bytes()));
    put_optional(out, outcome.error.as_ref(), |out, error| {
        out.push(error_number(error.class));
        put_text(out, error.message.as_bytes());
    });
    out.extend_from_slice(&u32::try_from(outcome.artifacts.len()).unwrap_or(u32::MAX).to_le_bytes());
    for artifact in &outcome.artifacts {
        // As the JSON form writes a path: its text, lossily.
        put_text(out, artifact.to_string_lossy().as_bytes());
    }
    put_optional(out, outcome.cost.filter(|cost| cost.is_finite()), |out, cost| {
        out.extend_from_slice(&cost.to_le_bytes());
    });
    out.extend_from_slice(&u64::try_from(outcome.latency.as_millis()).unwrap_or(u64::MAX).to_le_bytes());
    out.extend_from_slice(&outcome.attempts.to_le_bytes());
}

/// A signal the journal kept, in either form.
pub(super) fn decode(bytes: &[u8]) -> Result<Signal, StoreError> {
    match bytes.first() {
        Some(&TAG) => signal(Reader::new(&bytes[1..], "input", "an outcome signal as the journal keeps it")),
        _ => serde_json::from_slice(bytes).map_err(|e| StoreError::Decode { what: "input", message: e.to_string() }),
    }
}

fn signal(mut r: Reader<'_>) -> Result<Signal, StoreError> {
    let id = r.uuid("id")?;
    let seconds = i64::from_le_bytes(r.bytes("time")?);
    let nanos = r.u32("time")?;
    let time: DateTime<Utc> = DateTime::from_timestamp(seconds, nanos)
        .ok_or_else(|| r.damaged(format!("its time ({seconds} s, {nanos} ns) is out of range")))?;
    let correlation = r.uuid("correlation id")?;
    let causation = r.optional("causation id", |r| r.uuid("causation id"))?;
    let kind = Kind::new(r.text("kind")?).map_err(|e| r.damaged(format!("its kind: {e}")))?;
    let source: Arc<str> = r.text("source")?.into();
    let subject = r.optional("subject", |r| r.text("subject").map(str::to_owned))?;
    let run_id = r.uuid("run id")?;
    let action = ActionId::new(r.text("action")?).map_err(|e| r.damaged(format!("its action: {e}")))?;
    let status = match r.byte("status")? {
        0 => OutcomeStatus::Completed,
        1 => OutcomeStatus::Failed,
        2 => OutcomeStatus::Blocked,
        3 => OutcomeStatus::AwaitingApproval,
        other => return Err(r.damaged(format!("its status is {other}, not one known"))),
    };
    let output = serde_json::from_str(r.text("output")?).map_err(|e| r.damaged(format!("its output: {e}")))?;
    let kept = r.optional("text", |r| r.text("text").map(str::to_owned))?;
    let error = r.optional("error", |r| {
        let number = r.byte("error")?;
        let class = error_of(number).ok_or_else(|| r.damaged(format!("its error class is {number}, not one known")))?;
        Ok(OutcomeError { class, message: r.text("error")?.to_owned() })
    })?;
    // Each artifact takes at least its 4-byte length.
    let count = r.count("artifacts", 4)?;
    let mut artifacts = Vec::with_capacity(count);
    for _ in 0..count {
        artifacts.push(r.text("artifacts")?.into());
    }
    let cost = r.optional("cost", |r| r.bytes("cost").map(f64::from_le_bytes))?;
    let latency = Duration::from_millis(r.u64("latency")?);
    let attempts = r.u32("attempts")?;
    r.end()?;
    let mut outcome = Outcome::completed(output, latency, attempts).keeping_text(kept);
    outcome.status = status.as_read(error.is_some());
    outcome.error = error;
    outcome.artifacts = artifacts;
    outcome.cost = cost;
    let report = Box::new(RunReport { run_id, action, outcome });
    Ok(Signal::from_outcome_parts(id, kind, source, subject, time, (correlation, causation), report))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::ActionError;
    use crate::kinds::stamped::{RunRef, action_outcome_at};
    use proptest::prelude::*;
    use serde_json::{Value, json};
    use uuid::Uuid;

    fn output() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<i64>().prop_map(Value::from),
            ".{0,20}".prop_map(Value::from),
            (".{0,8}", any::<i32>()).prop_map(|(key, n)| json!({ key: n, "list": [n, "x"] })),
        ]
    }

    fn outcome() -> impl Strategy<Value = Outcome> {
        let error = (0u8..7, ".{0,30}", any::<u32>()).prop_map(|(class, message, ms)| match class {
            0 => ActionError::Validation { message },
            1 => ActionError::Transient { message },
            2 => ActionError::Timeout { after: Duration::from_millis(u64::from(ms)) },
            3 => ActionError::Critical { message },
            4 => ActionError::Denied { reason: message },
            5 => ActionError::Cancelled { reason: message },
            _ => ActionError::Interrupted { reason: message },
        });
        let cost = proptest::option::of(prop_oneof![any::<f64>(), Just(f64::NAN)]);
        (
            output(),
            proptest::option::of(error),
            proptest::option::of(".{0,20}"),
            proptest::collection::vec("[a-z/]{1,12}", 0..3),
            cost,
            any::<u32>().prop_map(|ms| Duration::from_micros(u64::from(ms) * 7)),
            any::<u32>(),
        )
            .prop_map(|(output, error, text, artifacts, cost, latency, attempts)| {
                let mut outcome = match error {
                    Some(error) => Outcome::from_error(&error, latency, attempts),
                    None if attempts % 5 == 0 => Outcome::awaiting_approval("waiting".to_owned()),
                    None => Outcome::completed(output, latency, attempts),
                };
                if let Some(text) = text {
                    outcome = outcome.with_output_text(text);
                }
                outcome.artifacts = artifacts.into_iter().map(Into::into).collect();
                outcome.cost = cost;
                outcome
            })
    }

    fn signal() -> impl Strategy<Value = Signal> {
        (
            outcome(),
            any::<[u8; 16]>(),
            any::<u128>(),
            proptest::option::of(any::<u128>()),
            -1_000_000_000i64..5_000_000_000,
        )
            .prop_map(|(outcome, run, correlation, causation, seconds)| {
                let source: Arc<str> = "agentry/agent/someone".into();
                let action = ActionId::new("noop.run").unwrap();
                let run = RunRef {
                    run: Uuid::from_bytes(run),
                    action: &action,
                    correlation: Uuid::from_u128(correlation),
                    causation: causation.map(Uuid::from_u128),
                };
                let stamp = (Uuid::now_v7(), DateTime::from_timestamp(seconds, 123_456_789).unwrap());
                action_outcome_at(&source, run, outcome, stamp).expect("an outcome signal")
            })
    }

    /// A journal written before `AwaitingApproval` existed kept a waiting run's outcome as `Blocked` (2) with no
    /// error: it reads back as waiting, not as refused.
    #[test]
    fn an_old_blocked_outcome_without_error_reads_as_awaiting_approval() {
        let source: Arc<str> = "agentry/agent/someone".into();
        let action = ActionId::new("noop.run").unwrap();
        let run = RunRef { run: Uuid::from_u128(7), action: &action, correlation: Uuid::from_u128(1), causation: None };
        let waiting = Outcome::awaiting_approval("waiting".to_owned());
        let stamp = (Uuid::now_v7(), DateTime::from_timestamp(0, 0).unwrap());
        let signal = action_outcome_at(&source, run, waiting, stamp).expect("an outcome signal");
        let mut bytes = Vec::new();
        encode(&signal, &mut bytes);
        // The status byte sits right before the output's 4-byte length; the output (`null`) is 4 bytes long.
        let status = bytes.windows(5).position(|w| w == [3, 4, 0, 0, 0]).expect("status then the output's length");
        bytes[status] = 2;
        let read = decode(&bytes).unwrap();
        assert!(read.outcome().unwrap().awaiting_approval(), "{read:?}");
    }

    proptest! {
        /// An outcome signal reads back equal to the one kept, and serializes to the same JSON.
        #[test]
        fn an_outcome_signal_reads_back_as_it_was_kept(signal in signal()) {
            let mut bytes = Vec::new();
            encode(&signal, &mut bytes);
            prop_assert_eq!(bytes[0], TAG);
            let read = decode(&bytes).unwrap();
            prop_assert_eq!(serde_json::to_string(&read).unwrap(), serde_json::to_string(&signal).unwrap());
            prop_assert_eq!(&read, &signal);
            prop_assert!(read.outcome().is_some(), "its report is there as types");
        }

        /// Cut short anywhere, it is a typed error; with a byte changed, an error or another signal; never a panic.
        #[test]
        fn damaged_bytes_never_panic(
            signal in signal(),
            cut in any::<prop::sample::Index>(),
            flip in any::<(prop::sample::Index, u8)>(),
        ) {
            let mut bytes = Vec::new();
            encode(&signal, &mut bytes);
            prop_assert!(decode(&bytes[..cut.index(bytes.len())]).is_err());
            let (at, value) = flip;
            let at = at.index(bytes.len());
            bytes[at] = value;
            let _ = decode(&bytes);
        }
    }

    #[test]
    fn other_signals_are_kept_as_json_and_read_back() {
        let signal = Signal::new("order.placed", json!({"id": 7})).unwrap();
        let mut bytes = Vec::new();
        encode(&signal, &mut bytes);
        assert_eq!(bytes, serde_json::to_vec(&signal).unwrap());
        assert_eq!(decode(&bytes).unwrap(), signal);
        // An outcome signal read from JSON (its report not yet typed) is kept as JSON too, and reads back.
        let from_json: Signal = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(decode(&bytes).unwrap(), from_json);
    }

    #[test]
    fn a_usual_outcome_signal_is_a_third_of_its_json() {
        let source: Arc<str> = "agentry/agent/01a2107a-09a6-743f-bee3-a83d069e9a8c".into();
        let action = ActionId::new("noop.run").unwrap();
        let run = RunRef {
            run: Uuid::now_v7(),
            action: &action,
            correlation: Uuid::now_v7(),
            causation: Some(Uuid::now_v7()),
        };
        let outcome = Outcome::completed(json!({"i": 88}), Duration::ZERO, 1);
        let signal = action_outcome_at(&source, run, outcome, (Uuid::now_v7(), Utc::now())).unwrap();
        let mut bytes = Vec::new();
        encode(&signal, &mut bytes);
        let json = serde_json::to_vec(&signal).unwrap();
        assert!(bytes.len() * 2 <= json.len(), "{} bytes against {} of JSON", bytes.len(), json.len());
    }
}
