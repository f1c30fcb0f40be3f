//! The `memory` skill's two clocks against a model, through a real runtime on a real SQLite file.
//!
//! The model keeps, after every change, a whole copy of what the agent believes (fact id → predicate, object,
//! valid from, valid until). The store keeps versions of rows instead. For random sequences of memorize (now or
//! back-dated, contradicting or keeping the previous facts) and forget (by id or by subject, now or at a date),
//! a recall `as_recorded` the time of each change and `as_of` each date finds exactly what the model's copy after
//! that change says was true at that date. Set `AGENTRY_MEMORY_CASES` for a longer run by hand.

use agentry::action::Capability;
use agentry::policy::Policy;
use agentry::skill::SkillDefinition;
use agentry_skills::Memory;
use agentry_tests::Operated;
use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

const PREDICATES: [&str; 2] = ["lives_in", "works_at"];
const OBJECTS: [&str; 3] = ["Paris", "Berlin", "Rome"];
const DAYS: u32 = 8;

#[derive(Debug, Clone)]
enum Op {
    /// Memorize `OBJECTS[object]` for `PREDICATES[predicate]`, true from day `from` (or now).
    Memorize { predicate: usize, object: usize, from: Option<u32>, keep_previous: bool },
    /// Forget one fact (the `n`th the model knows, modulo how many) or all of a predicate, at day `at` (or now).
    Forget { target: Target, at: Option<u32> },
}

#[derive(Debug, Clone)]
enum Target {
    Fact(usize),
    Predicate(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..PREDICATES.len(), 0..OBJECTS.len(), prop::option::weighted(0.8, 0..DAYS), any::<bool>())
            .prop_map(|(predicate, object, from, keep_previous)| Op::Memorize { predicate, object, from, keep_previous }),
        1 => (prop_oneof![any::<usize>().prop_map(Target::Fact), (0..PREDICATES.len()).prop_map(Target::Predicate)],
              prop::option::weighted(0.7, 0..DAYS))
            .prop_map(|(target, at)| Op::Forget { target, at }),
    ]
}

fn day(n: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2020, 1, 1, 0, 0, 0).unwrap() + TimeDelta::days(i64::from(n))
}

/// A fact as the model holds it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Belief {
    predicate: String,
    object: String,
    from: DateTime<Utc>,
    until: Option<DateTime<Utc>>,
}

type Beliefs = BTreeMap<i64, Belief>;

fn time(value: &Value) -> DateTime<Utc> {
    serde_json::from_value(value.clone()).expect("an RFC 3339 time")
}

/// What the store returned: each fact as (id, belief).
fn found(facts: &Value) -> BTreeSet<(i64, Belief)> {
    let facts = facts.as_array().expect("an array of facts");
    facts
        .iter()
        .map(|f| {
            let until = (!f["valid_until"].is_null()).then(|| time(&f["valid_until"]));
            let belief = Belief {
                predicate: f["predicate"].as_str().unwrap_or_default().to_owned(),
                object: f["object"].as_str().unwrap_or_default().to_owned(),
                from: time(&f["valid_from"]),
                until,
            };
            (f["id"].as_i64().unwrap_or_default(), belief)
        })
        .collect()
}

/// What the model says was true at `at`.
fn true_at(beliefs: &Beliefs, at: DateTime<Utc>) -> BTreeSet<(i64, Belief)> {
    beliefs
        .iter()
        .filter(|(_, b)| b.from <= at && b.until.is_none_or(|until| until > at))
        .map(|(id, b)| (*id, b.clone()))
        .collect()
}

/// The model's memorize: the same object already true (open, or true at `from`) is known; otherwise the facts of
/// that predicate still true at `from` end there, and one that became true later ends the new one.
/// Returns the ids it ended and, when the fact is new, its id.
fn model_memorize(
    beliefs: &mut Beliefs,
    predicate: &str,
    object: &str,
    from: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
    keep: bool,
) -> Option<(i64, Vec<i64>)> {
    let from_or_now = from.unwrap_or(now);
    let mut same: Vec<(i64, Belief)> =
        beliefs.iter().filter(|(_, b)| b.predicate == predicate).map(|(id, b)| (*id, b.clone())).collect();
    same.sort_by_key(|(id, b)| (b.from, *id));
    let known = same.iter().any(|(_, b)| {
        b.object == object && (b.until.is_none() || (b.from <= from_or_now && b.until > Some(from_or_now)))
    });
    if known {
        return None;
    }
    let mut closed = Vec::new();
    let mut until: Option<DateTime<Utc>> = None;
    if !keep {
        for (id, old) in same {
            if old.from > from_or_now {
                until = Some(until.map_or(old.from, |u| u.min(old.from)));
            } else if old.until.is_none_or(|u| u > from_or_now) {
                beliefs.get_mut(&id).expect("a known fact").until = Some(from_or_now);
                closed.push(id);
            }
        }
    }
    let id = beliefs.keys().max().map_or(1, |max| max + 1);
    beliefs.insert(id, Belief { predicate: predicate.to_owned(), object: object.to_owned(), from: from_or_now, until });
    Some((id, closed))
}

async fn check(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let op =
        Operated::start(vec![Memory::skill().expect("memory")], Policy::default().grant(Capability::MEMORY), &[]).await;
    // (transaction time, beliefs after that change)
    let mut history: Vec<(DateTime<Utc>, Beliefs)> = Vec::new();
    let mut beliefs = Beliefs::new();
    for step in &ops {
        match step {
            Op::Memorize { predicate, object, from, keep_previous } => {
                let (predicate, object) = (PREDICATES[*predicate], OBJECTS[*object]);
                let mut params = json!({"subject": "alice", "predicate": predicate, "object": object, "keep_previous": keep_previous});
                if let Some(from) = from {
                    params["valid_from"] = json!(day(*from));
                }
                let out = op.output("memory.memorize", params).await;
                let recorded = time(&out["fact"]["recorded_at"]);
                let expected = model_memorize(&mut beliefs, predicate, object, from.map(day), recorded, *keep_previous);
                match expected {
                    None => prop_assert_eq!(&out["already_known"], &json!(true), "{:?}: {}", step, out),
                    Some((id, closed)) => {
                        prop_assert_eq!(&out["already_known"], &json!(false), "{:?}: {}", step, out);
                        prop_assert_eq!(&out["fact"]["id"], &json!(id), "{:?}: {}", step, out);
                        prop_assert_eq!(&out["closed"], &json!(closed), "{:?}: {}", step, out);
                        prop_assert!(history.last().is_none_or(|(t, _)| *t < recorded), "transaction times increase");
                        history.push((recorded, beliefs.clone()));
                    }
                }
            }
            Op::Forget { target, at } => {
                let (params, chosen): (Value, Vec<i64>) = match target {
                    Target::Fact(n) if !beliefs.is_empty() => {
                        let id = *beliefs.keys().nth(n % beliefs.len()).expect("in range");
                        (json!({"id": id}), vec![id])
                    }
                    Target::Fact(_) => continue,
                    Target::Predicate(p) => {
                        let ids = beliefs.iter().filter(|(_, b)| b.predicate == PREDICATES[*p]).map(|(id, _)| *id);
                        (json!({"subject": "alice", "predicate": PREDICATES[*p]}), ids.collect())
                    }
                };
                let mut params = params;
                if let Some(at) = at {
                    params["at"] = json!(day(*at));
                }
                let out = op.output("memory.forget", params).await;
                let open: BTreeSet<i64> = chosen.into_iter().filter(|id| beliefs[id].until.is_none()).collect();
                let forgotten: BTreeSet<i64> = serde_json::from_value(out["forgotten"].clone()).expect("ids");
                prop_assert_eq!(&forgotten, &open, "{:?}: {}", step, out);
                if open.is_empty() {
                    prop_assert!(out["recorded_at"].is_null(), "nothing changed: {}", out);
                    continue;
                }
                let recorded = time(&out["recorded_at"]);
                for id in &open {
                    beliefs.get_mut(id).expect("a known fact").until = Some(at.map_or(recorded, day));
                }
                prop_assert!(history.last().is_none_or(|(t, _)| *t < recorded), "transaction times increase");
                history.push((recorded, beliefs.clone()));
            }
        }
    }

    let later = history.last().map_or(day(DAYS), |(t, _)| *t) + TimeDelta::days(1);
    let valid_times: Vec<DateTime<Utc>> =
        (0..DAYS).map(|d| day(d) + TimeDelta::hours(12)).chain([day(0), later]).collect();
    let recall = |as_of: DateTime<Utc>, as_recorded: Option<DateTime<Utc>>| {
        let mut params = json!({"subject": "alice", "as_of": as_of, "limit": 100});
        if let Some(at) = as_recorded {
            params["as_recorded"] = json!(at);
        }
        op.output("memory.recall", params)
    };
    // Before the first change, nothing was believed; after each, what the model's copy says; without
    // `as_recorded`, what the agent believes now.
    let first = history.first().map_or(later, |(t, _)| *t);
    let mut moments: Vec<(Option<DateTime<Utc>>, Beliefs)> =
        vec![(Some(first - TimeDelta::milliseconds(1)), Beliefs::new())];
    moments.extend(history.iter().map(|(t, b)| (Some(*t), b.clone())));
    moments.push((None, beliefs.clone()));
    for (as_recorded, believed) in &moments {
        for as_of in &valid_times {
            let got = found(&recall(*as_of, *as_recorded).await);
            let want = true_at(believed, *as_of);
            prop_assert_eq!(&got, &want, "as_of {} as_recorded {:?} after {:?}", as_of, as_recorded, ops);
        }
    }
    Ok(())
}

#[test]
fn both_clocks_agree_with_a_model_of_beliefs_over_time() {
    let cases = std::env::var("AGENTRY_MEMORY_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(24);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("tokio");
    let mut runner = TestRunner::new(Config { cases, failure_persistence: None, ..Config::default() });
    runner
        .run(&prop::collection::vec(op(), 1..10), |ops| runtime.block_on(check(ops)))
        .unwrap_or_else(|failure| panic!("{failure}"));
}
