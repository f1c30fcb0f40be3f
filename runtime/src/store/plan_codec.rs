//! A run's plan as a batch row of the SQLite journal keeps it: compact bytes instead of JSON.
//!
//! A batched run's plan is written once and read only by a recovery, and its entry already gives the run's
//! idempotency key and its record the run's correlation id: the JSON form spelled the key again and two ids as
//! text (about 180 bytes, half of a batched run's bytes). Here it is the params' JSON and a few bytes more.
//!
//! Layout: the tag byte [`TAG`]; a byte of flags ([`BY_AGENT`], [`CAUSE`], [`CORRELATION`]); the cause (16 bytes)
//! if its flag is set; the correlation id (16 bytes) if its flag is set, else it is the record's; the params'
//! JSON as a text (its length in 4 bytes, then its bytes).
//!
//! Entries written before this form carry the plan's JSON, which always starts with `{`: [`decode`] reads both.

use super::compact::{Reader, put_text};
use super::{PlanParts, RunPlan, StoreError};
use uuid::Uuid;

/// The first byte of a plan in this form (a JSON plan starts with `{`).
const TAG: u8 = 1;
/// The agent itself asked for the run.
const BY_AGENT: u8 = 1;
/// A cause follows.
const CAUSE: u8 = 2;
/// A correlation id follows (it is not the record's).
const CORRELATION: u8 = 4;

/// Appends the plan made of `parts` in this form to `out`, all but its key (the entry keeps it) and its
/// correlation id when that is `record_correlation` (the record keeps it).
pub(super) fn encode(parts: &PlanParts<'_>, record_correlation: Uuid, out: &mut Vec<u8>) {
    let PlanParts { key: _, params_json, by_agent, cause, correlation } = *parts;
    let own_correlation = (correlation != record_correlation).then_some(correlation);
    let flag = |set: bool, flag: u8| if set { flag } else { 0 };
    let flags = flag(by_agent, BY_AGENT) | flag(cause.is_some(), CAUSE) | flag(own_correlation.is_some(), CORRELATION);
    out.extend_from_slice(&[TAG, flags]);
    for id in [cause, own_correlation].into_iter().flatten() {
        out.extend_from_slice(id.as_bytes());
    }
    put_text(out, params_json);
}

/// The plan of a batched run from its entry's bytes, in this form or as JSON: `key` is the entry's, and
/// `record_correlation` the run's record's.
pub(super) fn decode(bytes: &[u8], key: Option<&str>, record_correlation: Uuid) -> Result<RunPlan, StoreError> {
    match bytes.first() {
        Some(&TAG) => {
            plan(Reader::new(&bytes[1..], "run plan", "a plan as a batch row keeps it"), key, record_correlation)
        }
        _ => serde_json::from_slice(bytes).map_err(|e| StoreError::Decode { what: "run plan", message: e.to_string() }),
    }
}

fn plan(mut r: Reader<'_>, key: Option<&str>, record_correlation: Uuid) -> Result<RunPlan, StoreError> {
    let flags = r.byte("flags")?;
    if flags & !(BY_AGENT | CAUSE | CORRELATION) != 0 {
        return Err(r.damaged(format!("its flags are {flags:#04x}, with bits not known")));
    }
    let cause = if flags & CAUSE != 0 { Some(r.uuid("cause")?) } else { None };
    let correlation = if flags & CORRELATION != 0 { r.uuid("correlation")? } else { record_correlation };
    let params = r.text("params")?;
    let params = serde_json::from_str(params).map_err(|e| r.damaged(format!("its params: {e}")))?;
    let key = key.ok_or_else(|| r.damaged("its entry has no key; a plan in this form takes the entry's"))?;
    r.end()?;
    Ok(RunPlan { key: key.to_owned(), params, by_agent: flags & BY_AGENT != 0, cause, correlation })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::digest_tests::params;
    use proptest::prelude::*;

    proptest! {
        /// Model: the plan itself. In this form, given back its key and its record's correlation id, it reads
        /// back as it was, whatever its params, cause and correlation; as JSON it reads back the same.
        #[test]
        fn a_plan_reads_back_as_it_was_in_this_form_and_as_json(
            params in params(),
            by_agent in any::<bool>(),
            cause in proptest::option::of(any::<u128>()),
            same_correlation in any::<bool>(),
        ) {
            let (record_correlation, key) = (Uuid::now_v7(), "me/3/1");
            let correlation = if same_correlation { record_correlation } else { Uuid::now_v7() };
            let cause = cause.map(Uuid::from_u128);
            let plan = RunPlan { key: key.to_owned(), params: params.clone(), by_agent, cause, correlation };
            let params_json = serde_json::to_vec(&params).unwrap();
            let parts = PlanParts { key, params_json: &params_json, by_agent, cause, correlation };
            let mut out = Vec::new();
            encode(&parts, record_correlation, &mut out);
            prop_assert_eq!(decode(&out, Some(key), record_correlation).unwrap(), plan.clone());
            let json = serde_json::to_vec(&plan).unwrap();
            prop_assert_eq!(decode(&json, Some(key), record_correlation).unwrap(), plan);
        }

        /// Bytes cut short or changed read as a typed error or as some plan, never a panic.
        #[test]
        fn damaged_bytes_are_a_typed_error_never_a_panic(cut in 0usize..60, flip in 0usize..60, bit in 0u8..8) {
            let params_json = br#"{"i":7}"#;
            let parts = PlanParts { key: "k", params_json, by_agent: true, cause: Some(Uuid::now_v7()), correlation: Uuid::now_v7() };
            let mut out = Vec::new();
            encode(&parts, Uuid::nil(), &mut out);
            if let Some(byte) = out.get_mut(flip) {
                *byte ^= 1 << bit;
            }
            out.truncate(cut);
            if let Err(err) = decode(&out, Some("k"), Uuid::nil()) {
                prop_assert!(matches!(err, StoreError::Decode { .. }), "{err}");
            }
        }
    }

    #[test]
    fn a_plan_in_this_form_without_its_entrys_key_is_refused() {
        let parts =
            PlanParts { key: "k", params_json: b"null", by_agent: false, cause: None, correlation: Uuid::nil() };
        let mut out = Vec::new();
        encode(&parts, Uuid::nil(), &mut out);
        let err = decode(&out, None, Uuid::nil()).unwrap_err();
        assert!(err.to_string().contains("no key"), "{err}");
    }
}
