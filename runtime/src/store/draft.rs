//! A run's record while the server still holds it, unwritten: the server journals a new run late, so a run that
//! ends at its first poll is written once, ended, instead of once per status.
//!
//! Until then the record is a draft that costs the agent's thread little: its statuses are kept in place rather
//! than in a vector of their own, and the params' digest is not made yet (the draft keeps their JSON text, made
//! anyway). Whoever writes the draft makes the record. The runtime's journals take a run that ended as a draft
//! (see [`Store::take_ended`]) and make its record on a thread of their own, beside the agents: the in-memory one
//! on its mover (see [`super::MemoryStore`]), the SQLite one on its writer, with the run's plan and outcome.

use super::{PlanParts, RunRecord, RunStatus, RunUpdate, Store, params_digest, text_digest};
use crate::action::{ErrorClass, RunKey};
use crate::id::{ActionId, AgentId};
use crate::store::PEN;
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::time::Duration;
use uuid::Uuid;

/// A run's record not yet in the journal, with its plan (for a durable store). Whatever happens to the run
/// meanwhile is applied to the draft; it is written as soon as the run waits on anything (or is parked, or
/// ends), so the journal never misses a run that is going on.
#[derive(Debug)]
pub(crate) struct Unwritten {
    pub draft: RecordDraft,
    pub plan: Option<PlanDraft>,
}

/// A run's plan as the server keeps it until the run is journaled: [`PlanParts`] in their parts, with no text
/// made yet. The key is made when the plan is written; the params' text is the draft's, which keeps it for
/// the digest anyway, unless the run's params were coerced since (the plan keeps the params as they were
/// asked for, since a recovery asks for them again).
#[derive(Debug)]
pub(crate) struct PlanDraft {
    pub key: RunKey,
    pub by_agent: bool,
    pub cause: Option<Uuid>,
    pub correlation: Uuid,
    /// The params' text as asked for, when the draft no longer keeps it.
    pub params_text: Option<Vec<u8>>,
}

/// A run that ended, as the server drafted it, offered to a store to journal its own way (see
/// [`Store::take_ended`]), with the outcome signal its agent is given, to be kept with it (see
/// [`super::Durable::run_outcome`]), if it is.
#[doc(hidden)]
#[derive(Debug)]
pub struct EndedDraft<'a>(pub(crate) Unwritten, pub(crate) Option<KeptOutcome<'a>>);

/// An outcome signal to keep for the agent, and whether its run is safe to start again.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KeptOutcome<'a> {
    pub signal: &'a crate::signal::Signal,
    pub safe_again: bool,
}

impl PlanDraft {
    /// Calls `write` with the plan's parts, its key made now for run `run` of `agent`, and its params' text its
    /// own or else `draft_text` (the draft's). `None` if there is no text to write (never, as the server drafts
    /// runs: it is logged).
    pub fn with_parts<T>(
        &self,
        (agent, run): (&AgentId, Uuid),
        draft_text: Option<&[u8]>,
        write: impl FnOnce(PlanParts<'_>) -> T,
    ) -> Option<T> {
        let Some(params_json) = self.params_text.as_deref().or(draft_text) else {
            tracing::error!(%run, "a run's plan has no params' text; the plan is not kept");
            return None;
        };
        let mut key = String::new();
        self.key.write_to(agent, run, &mut key);
        Some(write(self.parts(&key, params_json)))
    }

    /// The plan's parts, with its key and its params' text as given.
    pub fn parts<'a>(&self, key: &'a str, params_json: &'a [u8]) -> PlanParts<'a> {
        PlanParts { key, params_json, by_agent: self.by_agent, cause: self.cause, correlation: self.correlation }
    }
}

impl Unwritten {
    /// Writes the record, then its plan (both go to a durable store's writer in that order). Returns the
    /// params' text the draft kept, for the run to keep (a retry reads its params again from it).
    pub fn write(self, store: &dyn Store) -> Option<Vec<u8>> {
        let Unwritten { draft, plan } = self;
        let (run, agent) = (draft.run, draft.agent.clone());
        // A short text kept in place is gone with the draft: copied out first.
        let short = draft.text_in_place().and_then(ShortText::of);
        let (record, long) = draft.into_record();
        if let Err(err) = store.record(PEN, record) {
            tracing::error!(%err, "the journal refused a new run");
        }
        // The text made again from one kept in place, for the run to keep.
        let text = long.or_else(|| short.map(|short| short.as_bytes().to_vec()));
        if let (Some(plan), Some(durable)) = (plan, store.durable()) {
            plan.with_parts((&agent, run), text.as_deref(), |parts| durable.run_planned_parts(PEN, run, parts));
        }
        text
    }

    /// The unwritten record of a run that ended, to be written later (beside its outcome): the params' text is
    /// not needed any more, and is freed now, on the thread that made it (see [`RecordDraft::handed_over`]),
    /// rather than kept with every other ended run's until their records are written; unless the plan is to
    /// be written with it and it is too long to be kept in place.
    pub fn ended(mut self) -> Self {
        let keep_long = self.plan.as_ref().is_some_and(|plan| plan.params_text.is_none());
        self.draft = self.draft.handed_over(keep_long);
        self
    }

    /// The run's params changed (they were coerced): the draft makes their digest now and forgets their text,
    /// which the plan keeps if it has none of its own (it keeps the params as asked for).
    pub fn forget_text(&mut self) {
        let text = self.draft.forget_text();
        if let Some(plan) = self.plan.as_mut()
            && plan.params_text.is_none()
        {
            plan.params_text = text;
        }
    }

    /// Writes the record of a run that ended (its params' text is not needed any more): offered to the store
    /// as drafted first (the runtime's own stores make the record on their own threads).
    pub fn write_ended(self, store: &dyn Store) {
        if let Some(EndedDraft(unwritten, _)) = store.take_ended(EndedDraft(self, None)) {
            drop(unwritten.write(store));
        }
    }

    /// [`Unwritten::write_ended`], with the run's outcome signal kept for its agent (`safe_again`: see
    /// [`super::Durable::run_outcome`]): a durable store of the runtime's takes both in one write.
    pub fn write_ended_with_outcome(self, store: &dyn Store, signal: &crate::signal::Signal, safe_again: bool) {
        let (run, agent) = (self.draft.run, self.draft.agent().clone());
        let kept = KeptOutcome { signal, safe_again };
        if let Some(EndedDraft(unwritten, _)) = store.take_ended(EndedDraft(self, Some(kept))) {
            drop(unwritten.write(store));
            if let Some(durable) = store.durable() {
                durable.run_outcome(PEN, &agent, run, signal, safe_again);
            }
        }
    }
}

/// The params of a drafted record: their digest, or the JSON text it is made from (short text copied in place,
/// for a draft that goes to another thread: see [`RecordDraft::handed_over`]).
#[derive(Debug)]
enum Params {
    Digest(Uuid),
    Text(Vec<u8>),
    Short(ShortText),
}

/// A short params' text, kept in a draft in place (see [`RecordDraft::text_in_place`]), or copied out of one.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ShortText {
    len: u8,
    bytes: [u8; SHORT_TEXT],
}

impl ShortText {
    /// `text`, if it is short enough to be kept in place.
    pub fn of(text: &[u8]) -> Option<Self> {
        let len = u8::try_from(text.len()).ok().filter(|_| text.len() <= SHORT_TEXT)?;
        let mut bytes = [0; SHORT_TEXT];
        bytes[..text.len()].copy_from_slice(text);
        Some(Self { len, bytes })
    }

    /// The compact JSON text of `value`, written in place, if it is short enough.
    pub fn written(value: &Value) -> Option<Self> {
        let mut filling = Filling { bytes: [0; SHORT_TEXT], len: 0 };
        serde_json::to_writer(&mut filling, value).ok()?;
        // At most SHORT_TEXT, which fits a u8.
        Some(Self { len: filling.len as u8, bytes: filling.bytes })
    }

    /// The text.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

/// A [`ShortText`] being written: refuses (with an error that allocates nothing) whatever would not fit.
struct Filling {
    bytes: [u8; SHORT_TEXT],
    len: usize,
}

impl std::io::Write for Filling {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let end = self.len + buf.len();
        let room = self.bytes.get_mut(self.len..end).ok_or(std::io::ErrorKind::WriteZero)?;
        room.copy_from_slice(buf);
        self.len = end;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The longest params' text a draft handed over keeps in place, rather than their digest (made before it goes).
const SHORT_TEXT: usize = 46;

/// How many statuses a draft keeps in place: queued, running and ended, the statuses of a run that ends at its
/// first poll, and one more. (A run that waits or is parked is written before it has more.)
const IN_PLACE: usize = 4;

/// A run's record in the making; see the module's documentation.
#[derive(Debug)]
pub(crate) struct RecordDraft {
    run: Uuid,
    agent: AgentId,
    action: ActionId,
    params: Params,
    correlation: Uuid,
    parent_run: Option<Uuid>,
    /// The first `statuses` entries are the history so far; `more` holds any past [`IN_PLACE`].
    history: [(RunStatus, DateTime<Utc>); IN_PLACE],
    statuses: u8,
    more: Vec<(RunStatus, DateTime<Utc>)>,
    attempts: u32,
    latency: Option<Duration>,
    cost: Option<f64>,
    error: Option<ErrorClass>,
}

/// Who a drafted run is: its ids, and the run that called it (for a nested run).
pub(crate) struct DraftIds {
    pub run: Uuid,
    pub agent: AgentId,
    pub action: ActionId,
    pub correlation: Uuid,
    pub parent_run: Option<Uuid>,
}

impl RecordDraft {
    /// The run's agent.
    pub(crate) fn agent(&self) -> &AgentId {
        &self.agent
    }

    /// A run queued `at`, with `params` and their compact JSON text, if it was made (the draft keeps it and
    /// makes the digest from it when the record is made).
    #[cfg(test)]
    pub fn queued(ids: DraftIds, params: &Value, text: Option<Vec<u8>>, at: DateTime<Utc>) -> Self {
        let params = match text {
            Some(text) => Params::Text(text),
            None => Params::Digest(params_digest(params)),
        };
        Self::with_params(ids, params, at)
    }

    /// A run queued `at`, with `params`, whose compact JSON text the draft makes and keeps: for the digest, made
    /// when the record is made, and for a retry to read the params back from. A short text is written in place,
    /// so a run with short params that ends at once allocates nothing for it.
    pub fn queued_with_text(ids: DraftIds, params: &Value, at: DateTime<Utc>) -> Self {
        let params = match ShortText::written(params) {
            Some(short) => Params::Short(short),
            None => match serde_json::to_vec(params) {
                Ok(text) => Params::Text(text),
                Err(_) => Params::Digest(params_digest(params)),
            },
        };
        Self::with_params(ids, params, at)
    }

    fn with_params(ids: DraftIds, params: Params, at: DateTime<Utc>) -> Self {
        let DraftIds { run, agent, action, correlation, parent_run } = ids;
        Self {
            run,
            agent,
            action,
            params,
            correlation,
            parent_run,
            history: [(RunStatus::Queued, at); IN_PLACE],
            statuses: 1,
            more: Vec::new(),
            attempts: 0,
            latency: None,
            cost: None,
            error: None,
        }
    }

    /// A record as a draft, to cross to another thread: its statuses in place (its history's vector is freed
    /// here, on the thread that allocated it), any past the usual few in a vector of their own.
    pub fn of_record(record: RunRecord) -> Self {
        let RunRecord {
            run,
            agent,
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
        let first = history.first().copied().unwrap_or((RunStatus::Queued, DateTime::<Utc>::UNIX_EPOCH));
        let mut in_place = [first; IN_PLACE];
        let statuses = history.len().min(IN_PLACE);
        in_place[..statuses].copy_from_slice(&history[..statuses]);
        let more = history.get(IN_PLACE..).map(<[_]>::to_vec).unwrap_or_default();
        Self {
            run,
            agent,
            action,
            params: Params::Digest(params_digest),
            correlation,
            parent_run,
            history: in_place,
            // At most IN_PLACE, which is a u8.
            statuses: statuses as u8,
            more,
            attempts,
            latency,
            cost,
            error,
        }
    }

    /// When the run was queued (when it was first recorded).
    pub fn queued_at(&self) -> DateTime<Utc> {
        self.history[0].1
    }

    /// When the run was first recorded, in milliseconds since the epoch (0 for a record with no history).
    pub fn recorded_ms(&self) -> i64 {
        if self.statuses == 0 { 0 } else { self.history[0].1.timestamp_millis() }
    }

    /// The run's status now: its latest (queued, for a record with no history).
    pub fn status(&self) -> RunStatus {
        let in_place = self.history[..usize::from(self.statuses)].last();
        self.more.last().or(in_place).map_or(RunStatus::Queued, |(status, _)| *status)
    }

    /// The params' text the draft keeps, if it keeps it.
    pub fn params_text(&self) -> Option<&[u8]> {
        match &self.params {
            Params::Text(text) => Some(text),
            Params::Short(short) => Some(short.as_bytes()),
            Params::Digest(_) => None,
        }
    }

    /// The draft, ready to go to another thread that makes its record: the params' text is freed here, where it
    /// was made (a block freed by another thread costs both threads a lock), a short one copied in place first.
    /// With `keep_long`, a text too long to be kept in place is kept as it is (for a plan still to be written).
    pub fn handed_over(mut self, keep_long: bool) -> Self {
        if let Params::Text(text) = &self.params {
            match ShortText::of(text) {
                Some(short) => self.params = Params::Short(short),
                None if keep_long => {}
                None => self.params = Params::Digest(text_digest(text)),
            }
        }
        self
    }

    /// The params' text, if the draft keeps it in place (short: written so when queued, or copied so when
    /// handed over): what a thread the draft was handed to may read.
    pub fn text_in_place(&self) -> Option<&[u8]> {
        match &self.params {
            Params::Short(short) => Some(short.as_bytes()),
            Params::Text(_) | Params::Digest(_) => None,
        }
    }

    /// The run's id and its agent.
    pub fn ids(&self) -> (&AgentId, Uuid) {
        (&self.agent, self.run)
    }

    /// Makes the params' digest now from the text the draft kept, and forgets the text (returned): the run's
    /// params changed since (they were coerced to their schema), and a retry must not read the old ones.
    pub fn forget_text(&mut self) -> Option<Vec<u8>> {
        let text = self.params_text().map(<[u8]>::to_vec)?;
        self.params = Params::Digest(text_digest(&text));
        Some(text)
    }

    /// Applies an update, as a store does to a run still going; `at` stamps a new status.
    pub fn apply(&mut self, update: RunUpdate, at: DateTime<Utc>) {
        let status = update.apply_to(&mut self.attempts, &mut self.latency, &mut self.cost, &mut self.error);
        if let Some(status) = status {
            match self.history.get_mut(usize::from(self.statuses)) {
                Some(slot) => {
                    *slot = (status, at);
                    self.statuses += 1;
                }
                None => self.more.push((status, at)),
            }
        }
    }

    /// The run's record, and the params' text the draft kept.
    pub fn into_record(self) -> (RunRecord, Option<Vec<u8>>) {
        let (params_digest, text) = match self.params {
            Params::Digest(digest) => (digest, None),
            Params::Text(text) => (text_digest(&text), Some(text)),
            Params::Short(short) => (text_digest(short.as_bytes()), None),
        };
        let mut history = Vec::with_capacity(usize::from(self.statuses) + self.more.len());
        history.extend_from_slice(&self.history[..usize::from(self.statuses)]);
        history.extend(self.more);
        let record = RunRecord {
            run: self.run,
            agent: self.agent,
            action: self.action,
            params_digest,
            correlation: self.correlation,
            parent_run: self.parent_run,
            history,
            attempts: self.attempts,
            latency: self.latency,
            cost: self.cost,
            error: self.error,
        };
        (record, text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn ids() -> DraftIds {
        DraftIds {
            run: Uuid::now_v7(),
            agent: AgentId::new("a1").unwrap(),
            action: ActionId::new("math.add").unwrap(),
            correlation: Uuid::now_v7(),
            parent_run: Some(Uuid::now_v7()),
        }
    }

    fn status() -> impl Strategy<Value = RunStatus> {
        (0u8..7).prop_map(|n| super::super::run_codec::status_of(n).expect("seven statuses"))
    }

    fn update() -> impl Strategy<Value = RunUpdate> {
        (
            proptest::option::of(status()),
            proptest::option::of(0u32..9),
            proptest::option::of(0u64..10_000),
            proptest::option::of(0.0f64..5.0),
            proptest::option::of(prop_oneof![Just(ErrorClass::Timeout), Just(ErrorClass::Critical)]),
        )
            .prop_map(|(status, attempts, latency, cost, error)| RunUpdate {
                status,
                attempts,
                latency: latency.map(Duration::from_millis),
                cost,
                error,
            })
    }

    /// JSON values, nested, with text that takes more bytes than characters and needs escapes.
    fn params() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<i64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            "[a-zé\\\"\n]{0,30}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
                proptest::collection::vec(("[a-z]{0,6}", inner), 0..6)
                    .prop_map(|fields| Value::Object(fields.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// A draft that writes its params' text itself keeps the same text `serde_json::to_vec` makes, in place
        /// when it fits (nothing to hand over, nothing to give back) and in a vector of its own when it does
        /// not; either way its record has the params' digest.
        #[test]
        fn a_draft_writes_the_params_text_in_place_when_it_fits(params in params()) {
            let expected = serde_json::to_vec(&params).unwrap();
            let draft = RecordDraft::queued_with_text(ids(), &params, Utc::now());
            prop_assert_eq!(draft.params_text(), Some(&expected[..]));
            let short = expected.len() <= SHORT_TEXT;
            prop_assert_eq!(draft.text_in_place().is_some(), short, "{} bytes", expected.len());
            let (record, given_back) = draft.into_record();
            prop_assert_eq!(record.params_digest, params_digest(&params));
            prop_assert_eq!(given_back, (!short).then_some(expected));
        }

        /// A record crosses to another thread as a draft and is made whole again there, whatever its history's
        /// length (its first statuses cross in place), with its status and when it was recorded read alike.
        #[test]
        fn a_record_made_a_draft_is_made_again_the_same(
            updates in proptest::collection::vec((update(), 0i64..100_000), 0..9),
            empty in any::<bool>(),
        ) {
            let ids = ids();
            let mut record = RunRecord::queued(ids.run, ids.agent, ids.action, &json!({"i": 1}), ids.correlation);
            record.parent_run = ids.parent_run;
            if empty {
                record.history.clear();
            }
            for (update, ms) in updates {
                record.apply(update, Utc::now() + chrono::TimeDelta::milliseconds(ms));
            }
            let draft = RecordDraft::of_record(record.clone());
            prop_assert_eq!(draft.status(), record.status());
            let recorded = record.history.first().map_or(0, |(_, at)| at.timestamp_millis());
            prop_assert_eq!(draft.recorded_ms(), recorded);
            prop_assert_eq!(draft.into_record(), (record, None));
        }

        /// Model: the record the journal has always made, a queued record with every update applied to it. A
        /// draft given the same updates makes the same record, however many statuses it had, with the params'
        /// digest made from the text it kept, or from the params when it kept none.
        #[test]
        fn a_draft_makes_the_record_its_updates_make(
            updates in proptest::collection::vec((update(), 0i64..100_000), 0..9),
            i in any::<i64>(),
            kept_text in any::<bool>(),
            handed_over in any::<bool>(),
            long in any::<bool>(),
        ) {
            let text_field = if long { "café, and then some more words to pass the short text's limit" } else { "café" };
            let (ids, params) = (ids(), json!({"i": i, "text": text_field}));
            let queued = Utc::now();
            let mut model = RunRecord::queued_at(
                ids.run, ids.agent.clone(), ids.action.clone(), params_digest(&params), ids.correlation, queued,
            );
            model.parent_run = ids.parent_run;
            let text = kept_text.then(|| serde_json::to_vec(&params).unwrap());
            let mut draft = RecordDraft::queued(ids, &params, text.clone(), queued);
            prop_assert_eq!(draft.params_text(), text.as_deref());
            for (update, ms) in updates {
                let at = queued + chrono::TimeDelta::milliseconds(ms);
                model.apply(update.clone(), at);
                draft.apply(update, at);
            }
            if handed_over {
                draft = draft.handed_over(false);
            }
            let (record, kept) = draft.into_record();
            prop_assert_eq!(record, model);
            // A draft handed over keeps no text to give back.
            prop_assert_eq!(kept, text.filter(|_| !handed_over));
        }
    }
}
