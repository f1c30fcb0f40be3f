//! A run record as a batch row of the SQLite journal keeps it: compact bytes instead of JSON.
//!
//! A batched run's record is written once and read rarely (a query, a recovery), and its row already says
//! whose run it is and which: the JSON form spelled the run's id, its agent's id, two more ids and three instants
//! as text (about 420 bytes, a sixth of the writer's time spent making them). Here the record is ~100 bytes of
//! fixed-width fields, without the run's id and agent, which the entry and the row give back.
//!
//! Layout (integers little-endian): the tag byte [`TAG`]; the action as a length (4 bytes) and its text; the params
//! digest and the correlation id (16 bytes each); the parent run (a byte 0, or 1 and 16 bytes); the attempts
//! (4 bytes); the latency (0, or 1 and milliseconds in 8 bytes); the cost (0, or 1 and an `f64` in 8 bytes); the
//! error (a byte: 0 for none, else its class's number); the history as a count (4 bytes) and per status its
//! number (a byte), seconds since the epoch (8 bytes) and nanoseconds (4 bytes).
//!
//! Entries written before this form carry the record's JSON, which always starts with `{`: [`decode`] reads both.

use super::compact::{Reader, put_optional, put_text};
use super::{RunRecord, RunStatus, StoreError};
use crate::action::ErrorClass;
use crate::id::{ActionId, AgentId};
use chrono::{DateTime, Utc};
use std::time::Duration;
use uuid::Uuid;

/// The first byte of a record in this form (a JSON record starts with `{`).
pub(super) const TAG: u8 = 1;

/// A status's number, here and in a batch row's bit per status.
pub(super) fn status_number(status: RunStatus) -> u8 {
    match status {
        RunStatus::Queued => 0,
        RunStatus::AwaitingApproval => 1,
        RunStatus::Approved => 2,
        RunStatus::Running => 3,
        RunStatus::Completed => 4,
        RunStatus::Failed => 5,
        RunStatus::Blocked => 6,
    }
}

/// The status numbered `number` ([`status_number`]), if there is one.
pub(super) fn status_of(number: u8) -> Option<RunStatus> {
    [
        RunStatus::Queued,
        RunStatus::AwaitingApproval,
        RunStatus::Approved,
        RunStatus::Running,
        RunStatus::Completed,
        RunStatus::Failed,
        RunStatus::Blocked,
    ]
    .into_iter()
    .find(|status| status_number(*status) == number)
}

/// An error class's number (here, and in the compact form of an outcome signal).
pub(super) fn error_number(class: ErrorClass) -> u8 {
    match class {
        ErrorClass::Validation => 1,
        ErrorClass::Transient => 2,
        ErrorClass::Timeout => 3,
        ErrorClass::Critical => 4,
        ErrorClass::Denied => 5,
        ErrorClass::Cancelled => 6,
        ErrorClass::Interrupted => 7,
        ErrorClass::Reported => 8,
        ErrorClass::BudgetExceeded => 9,
        ErrorClass::RateLimited => 10,
    }
}

pub(super) fn error_of(number: u8) -> Option<ErrorClass> {
    [
        ErrorClass::Validation,
        ErrorClass::Transient,
        ErrorClass::Timeout,
        ErrorClass::Critical,
        ErrorClass::Denied,
        ErrorClass::Cancelled,
        ErrorClass::Interrupted,
        ErrorClass::Reported,
        ErrorClass::BudgetExceeded,
        ErrorClass::RateLimited,
    ]
    .into_iter()
    .find(|class| error_number(*class) == number)
}

/// Appends `record` in this form to `out`, all but its run id and agent. Reading it back gives what reading
/// its JSON would: the latency to the millisecond, a cost that is not a finite number as none.
pub(super) fn encode(record: &RunRecord, out: &mut Vec<u8>) {
    // Every field is named, so a field added to the record cannot be forgotten here.
    let RunRecord {
        run: _,
        agent: _,
        action,
        params_digest,
        correlation,
        parent_run,
        history,
        attempts,
        latency,
        cost,
        error,
    } = record;
    out.push(TAG);
    put_text(out, action.as_str().as_bytes());
    out.extend_from_slice(params_digest.as_bytes());
    out.extend_from_slice(correlation.as_bytes());
    put_optional(out, parent_run.as_ref(), |out, parent| out.extend_from_slice(parent.as_bytes()));
    out.extend_from_slice(&attempts.to_le_bytes());
    put_optional(out, latency.as_ref(), |out, latency| {
        out.extend_from_slice(&u64::try_from(latency.as_millis()).unwrap_or(u64::MAX).to_le_bytes());
    });
    put_optional(out, cost.filter(|cost| cost.is_finite()), |out, cost| out.extend_from_slice(&cost.to_le_bytes()));
    out.push(error.map_or(0, error_number));
    out.extend_from_slice(&u32::try_from(history.len()).unwrap_or(u32::MAX).to_le_bytes());
    for (status, at) in history {
        out.push(status_number(*status));
        out.extend_from_slice(&at.timestamp().to_le_bytes());
        out.extend_from_slice(&at.timestamp_subsec_nanos().to_le_bytes());
    }
}

/// The record of run `run` of `agent` from a batch entry's bytes, in this form or as JSON.
pub(super) fn decode(run: Uuid, agent: &AgentId, bytes: &[u8]) -> Result<RunRecord, StoreError> {
    match bytes.first() {
        Some(&TAG) => record(Reader::new(&bytes[1..], "run record", "a record as a batch row keeps it"), run, agent),
        _ => {
            serde_json::from_slice(bytes).map_err(|e| StoreError::Decode { what: "run record", message: e.to_string() })
        }
    }
}

fn record(mut r: Reader<'_>, run: Uuid, agent: &AgentId) -> Result<RunRecord, StoreError> {
    let action = ActionId::new(r.text("action")?).map_err(|e| r.damaged(format!("its action: {e}")))?;
    let params_digest = r.uuid("params digest")?;
    let correlation = r.uuid("correlation")?;
    let parent_run = r.optional("parent run", |r| r.uuid("parent run"))?;
    let attempts = r.u32("attempts")?;
    let latency = r.optional("latency", |r| r.u64("latency").map(Duration::from_millis))?;
    let cost = r.optional("cost", |r| r.bytes("cost").map(f64::from_le_bytes))?;
    let error = match r.byte("error")? {
        0 => None,
        n => Some(error_of(n).ok_or_else(|| r.damaged(format!("its error class is {n}, not one known")))?),
    };
    // Each status takes 13 bytes.
    let count = r.count("history", 13)?;
    let mut history = Vec::with_capacity(count);
    for _ in 0..count {
        let number = r.byte("history")?;
        let status = status_of(number).ok_or_else(|| r.damaged(format!("a status is {number}, not one known")))?;
        let seconds = i64::from_le_bytes(r.bytes("history")?);
        let nanos = r.u32("history")?;
        let at: DateTime<Utc> = DateTime::from_timestamp(seconds, nanos)
            .ok_or_else(|| r.damaged(format!("an instant ({seconds} s, {nanos} ns) is out of range")))?;
        history.push((status, at));
    }
    r.end()?;
    Ok(RunRecord {
        run,
        agent: agent.clone(),
        action,
        params_digest,
        correlation,
        parent_run,
        history,
        attempts,
        latency,
        cost,
        error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn status() -> impl Strategy<Value = RunStatus> {
        (0u8..7).prop_map(|n| status_of(n).expect("seven statuses"))
    }

    fn instant() -> impl Strategy<Value = DateTime<Utc>> {
        // Any instant from 1900 to 2200, any nanosecond (a leap second's included, on a minute's last second).
        (-2_208_988_800i64..7_258_118_400, 0u32..1_000_000_000, any::<bool>()).prop_map(|(seconds, nanos, leap)| {
            let leap_second = seconds - seconds.rem_euclid(60) + 59;
            match leap {
                true => DateTime::from_timestamp(leap_second, 1_000_000_000 + nanos).expect("a leap second"),
                false => DateTime::from_timestamp(seconds, nanos).expect("in range"),
            }
        })
    }

    fn record() -> impl Strategy<Value = RunRecord> {
        let ids = (any::<[u8; 16]>(), any::<[u8; 16]>(), any::<[u8; 16]>(), proptest::option::of(any::<[u8; 16]>()));
        let cost = proptest::option::of(prop_oneof![any::<f64>(), Just(f64::NAN), Just(f64::INFINITY)]);
        let error = proptest::option::of((1u8..8).prop_map(|n| error_of(n).expect("seven classes")));
        (
            ids,
            "[a-z]{1,12}\\.[a-z]{1,20}",
            proptest::collection::vec((status(), instant()), 0..6),
            any::<u32>(),
            proptest::option::of(any::<u64>().prop_map(Duration::from_nanos)),
            cost,
            error,
        )
            .prop_map(
                |((run, digest, correlation, parent), action, history, attempts, latency, cost, error)| RunRecord {
                    run: Uuid::from_bytes(run),
                    agent: AgentId::new("agentry/agent/someone").expect("an id"),
                    action: ActionId::new(action).expect("a valid action id"),
                    params_digest: Uuid::from_bytes(digest),
                    correlation: Uuid::from_bytes(correlation),
                    parent_run: parent.map(Uuid::from_bytes),
                    history,
                    attempts,
                    latency,
                    cost,
                    error,
                },
            )
    }

    proptest! {
        /// A record read back from this form equals the one read back from its JSON.
        #[test]
        fn a_record_reads_back_as_its_json_does(record in record()) {
            let mut bytes = Vec::new();
            encode(&record, &mut bytes);
            let from_json: RunRecord = serde_json::from_str(&serde_json::to_string(&record).unwrap()).unwrap();
            let read = decode(record.run, &record.agent, &bytes).unwrap();
            // NaN is not equal to itself: compare costs by their bits.
            prop_assert_eq!(read.cost.map(f64::to_bits), from_json.cost.map(f64::to_bits));
            prop_assert_eq!(RunRecord { cost: None, ..read }, RunRecord { cost: None, ..from_json });
        }

        /// A record cut short anywhere, or with a byte changed, is a typed error or another record; never a panic.
        #[test]
        fn damaged_bytes_never_panic(
            record in record(),
            cut in any::<prop::sample::Index>(),
            flip in any::<(prop::sample::Index, u8)>(),
        ) {
            let mut bytes = Vec::new();
            encode(&record, &mut bytes);
            let cut = cut.index(bytes.len());
            prop_assert!(decode(record.run, &record.agent, &bytes[..cut]).is_err());
            let (at, value) = flip;
            let at = at.index(bytes.len());
            bytes[at] = value;
            let _ = decode(record.run, &record.agent, &bytes);
        }
    }

    #[test]
    fn a_record_in_this_form_is_a_quarter_of_its_json() {
        let agent = AgentId::new("agentry/agent/01a2107a-09a6-743f-bee3-a83d069e9a8c").unwrap();
        let mut record = RunRecord::queued(
            Uuid::now_v7(),
            agent.clone(),
            ActionId::new("noop.run").unwrap(),
            &serde_json::json!({"i": 1}),
            Uuid::now_v7(),
        );
        record.history.push((RunStatus::Running, Utc::now()));
        record.history.push((RunStatus::Completed, Utc::now()));
        let mut bytes = Vec::new();
        encode(&record, &mut bytes);
        let json = serde_json::to_vec(&record).unwrap();
        assert!(bytes.len() * 4 <= json.len(), "{} bytes against {} of JSON", bytes.len(), json.len());
        assert_eq!(decode(record.run, &agent, &bytes).unwrap(), record);
        assert_eq!(decode(record.run, &agent, &json).unwrap(), record, "a record written as JSON still reads");
    }
}
