//! A run's record while the server still holds it, unwritten: the server journals a new run late, so a run that
//! ends at its first poll is written once, ended, instead of once per status.
//!
//! Until then the record is a draft that costs the agent's thread little: its statuses are kept in place rather
//! than in a vector of their own, and the params' digest is not made yet (the draft keeps their JSON text, made
//! anyway). Whoever writes the draft makes the record. An in-memory journal takes a run that ended as a draft
//! and makes its record on its own thread, beside the agents (see [`super::MemoryStore`]).

use super::{PlanParts, RunRecord, RunStatus, RunUpdate, Store, params_digest, text_digest};
use crate::action::ErrorClass;
use crate::id::{ActionId, AgentId};
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
    pub plan: Option<Box<PlanDraft>>,
}

/// A run's plan as the server keeps it until the run is journaled: [`PlanParts`], owned.
#[derive(Debug)]
pub(crate) struct PlanDraft {
    pub key: String,
    pub params_json: Vec<u8>,
    pub by_agent: bool,
    pub cause: Option<Uuid>,
    pub correlation: Uuid,
}

impl PlanDraft {
    pub fn parts(&self) -> PlanParts<'_> {
        PlanParts {
            key: &self.key,
            params_json: &self.params_json,
            by_agent: self.by_agent,
            cause: self.cause,
            correlation: self.correlation,
        }
    }
}

impl Unwritten {
    /// Writes the record, then its plan (both go to a durable store's writer in that order). Returns the
    /// params' text the draft kept, for the run to keep (a retry reads its params again from it).
    pub fn write(self, store: &dyn Store) -> Option<Vec<u8>> {
        let (record, text) = self.draft.into_record();
        let run = record.run;
        if let Err(err) = store.record(record) {
            tracing::error!(%err, "the journal refused a new run");
        }
        if let (Some(plan), Some(durable)) = (self.plan, store.durable()) {
            durable.run_planned_parts(run, plan.parts());
        }
        text
    }

    /// The unwritten record of a run that ended, to be written later (beside its outcome): the params' text is
    /// not needed any more, and is freed now, on the thread that made it (see [`RecordDraft::handed_over`]),
    /// rather than kept with every other ended run's until their records are written.
    pub fn ended(mut self) -> Self {
        self.draft = self.draft.handed_over();
        self
    }

    /// Writes the record of a run that ended (its params' text is not needed any more). An in-memory journal
    /// takes the draft as it is, and makes the record on its own thread.
    pub fn write_ended(self, store: &dyn Store) {
        match (store.in_memory(), &self.plan) {
            (Some(memory), None) => memory.record_draft(self.draft.handed_over()),
            _ => drop(self.write(store)),
        }
    }
}

/// The params of a drafted record: their digest, or the JSON text it is made from (short text copied in place,
/// for a draft that goes to another thread: see [`RecordDraft::handed_over`]).
#[derive(Debug)]
enum Params {
    Digest(Uuid),
    Text(Vec<u8>),
    Short(u8, [u8; SHORT_TEXT]),
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
    /// A run queued `at`, with `params` and their compact JSON text, if it was made (the draft keeps it and
    /// makes the digest from it when the record is made).
    pub fn queued(ids: DraftIds, params: &Value, text: Option<Vec<u8>>, at: DateTime<Utc>) -> Self {
        let DraftIds { run, agent, action, correlation, parent_run } = ids;
        let params = match text {
            Some(text) => Params::Text(text),
            None => Params::Digest(params_digest(params)),
        };
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

    /// When the run was queued.
    pub fn queued_at(&self) -> DateTime<Utc> {
        self.history[0].1
    }

    /// The params' text the draft keeps, if it keeps it.
    pub fn params_text(&self) -> Option<&[u8]> {
        match &self.params {
            Params::Text(text) => Some(text),
            Params::Short(len, short) => short.get(..usize::from(*len)),
            Params::Digest(_) => None,
        }
    }

    /// The draft, ready to go to another thread that makes its record: the params' text is freed here, where it
    /// was made (a block freed by another thread costs both threads a lock), a short one copied in place first.
    pub fn handed_over(mut self) -> Self {
        if let Params::Text(text) = &self.params {
            self.params = match u8::try_from(text.len()) {
                Ok(len) if text.len() <= SHORT_TEXT => {
                    let mut short = [0; SHORT_TEXT];
                    short[..text.len()].copy_from_slice(text);
                    Params::Short(len, short)
                }
                _ => Params::Digest(text_digest(text)),
            };
        }
        self
    }

    /// Makes the params' digest now from the text the draft kept, and forgets the text: the run's params
    /// changed since (they were coerced to their schema), and a retry must not read the old ones.
    pub fn forget_text(&mut self) {
        if let Some(text) = self.params_text() {
            self.params = Params::Digest(text_digest(text));
        }
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
            Params::Short(len, short) => (text_digest(&short[..usize::from(len)]), None),
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

    proptest! {
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
                draft = draft.handed_over();
            }
            let (record, kept) = draft.into_record();
            prop_assert_eq!(record, model);
            // A draft handed over keeps no text to give back.
            prop_assert_eq!(kept, text.filter(|_| !handed_over));
        }
    }
}
