//! The `memory` skill through a real runtime on a real SQLite file: contradictions close old facts, `as_of`
//! sees the past, forgetting keeps history, noise is reproducible, reflection folds episodes, bad input fails.

use agentry::action::{ActionSpec, Capability, DynAction};
use agentry::id::{AgentId, SkillId};
use agentry::policy::Policy;
use agentry::skill::{Skill, SkillDefinition};
use agentry_skills::Memory;
use agentry_tests::Operated;
use serde_json::{Value, json};
use std::collections::BTreeSet;

async fn memory(options: Value) -> Operated {
    let policy = Policy::default().grant(Capability::MEMORY);
    Operated::start(vec![Memory::skill().unwrap(), summarizer()], policy, &[("memory", options)]).await
}

/// `summ.write` turns `{"facts": [...]}` into a custom summary naming how many facts it got.
fn summarizer() -> Skill {
    let spec = ActionSpec::new("summ.write", "writes summaries").unwrap().params_schema(json!({"type": "object"}));
    let action = DynAction::new(spec, |params, _| {
        Box::pin(async move {
            Ok(json!({"summary": format!("custom: {} facts", params["facts"].as_array().map_or(0, Vec::len))}))
        })
    });
    Skill::builder("summ", "1.0.0").dyn_action(action.unwrap()).build().unwrap()
}

async fn memorize(op: &Operated, subject: &str, predicate: &str, object: &str, from: &str) -> Value {
    let params = json!({"subject": subject, "predicate": predicate, "object": object, "valid_from": from});
    op.output("memory.memorize", params).await
}

fn objects(facts: &Value) -> Vec<&str> {
    facts.as_array().unwrap().iter().map(|f| f["object"].as_str().unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contradicting_fact_closes_the_old_one_and_as_of_sees_the_past() {
    let op = memory(Value::Null).await;
    let paris = memorize(&op, "alice", "lives_in", "Paris", "2020-01-01T00:00:00Z").await;
    let berlin = memorize(&op, "alice", "lives_in", "Berlin", "2024-06-01T00:00:00Z").await;
    assert_eq!(berlin["closed"], json!([paris["fact"]["id"]]), "Berlin closes Paris");
    let now = op.output("memory.recall", json!({"query": "where does alice live"})).await;
    assert_eq!(objects(&now), ["Berlin"]);
    let then = op.output("memory.recall", json!({"query": "alice", "as_of": "2023-01-01T00:00:00Z"})).await;
    assert_eq!(objects(&then), ["Paris"], "before the change, the old fact");
    assert_eq!(then[0]["valid_until"], "2024-06-01T00:00:00Z");
    let before = op.output("memory.recall", json!({"query": "alice", "as_of": "2019-01-01T00:00:00Z"})).await;
    assert!(objects(&before).is_empty(), "nothing was known to be true before 2020");

    let again = memorize(&op, "alice", "lives_in", "Berlin", "2025-01-01T00:00:00Z").await;
    assert_eq!(
        (again["already_known"].clone(), again["fact"]["id"].clone()),
        (json!(true), berlin["fact"]["id"].clone())
    );
    let phones = json!({"subject": "alice", "predicate": "phone", "object": "111", "keep_previous": true});
    op.output("memory.memorize", phones.clone()).await;
    let mut other_phone = phones.clone();
    other_phone["object"] = json!("222");
    let second = op.output("memory.memorize", other_phone).await;
    assert_eq!(second["closed"], json!([]), "keep_previous keeps both");
    let both = op.output("memory.recall", json!({"subject": "alice", "predicate": "phone"})).await;
    assert_eq!(objects(&both).into_iter().collect::<BTreeSet<_>>(), BTreeSet::from(["111", "222"]));

    let db = op.runtime.drive(&AgentId::new("operator").unwrap(), &SkillId::new("memory").unwrap()).unwrap();
    let db = rusqlite::Connection::open(db.join("memory.db")).unwrap();
    let mode: String = db.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
    assert_eq!(mode, "wal", "a real SQLite file in WAL mode, in the agent's drive");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_back_dated_fact_ends_where_a_later_one_took_over() {
    let op = memory(Value::Null).await;
    let berlin = memorize(&op, "alice", "lives_in", "Berlin", "2024-06-01T00:00:00Z").await;
    let paris = memorize(&op, "alice", "lives_in", "Paris", "2020-01-01T00:00:00Z").await;
    assert_eq!(paris["closed"], json!([]), "the later fact stays open");
    assert_eq!(paris["fact"]["valid_until"], "2024-06-01T00:00:00Z", "Paris was true until Berlin took over");
    let now = op.output("memory.recall", json!({"query": "alice"})).await;
    assert_eq!(objects(&now), ["Berlin"], "only the current fact is true now");
    assert_eq!(now[0]["id"], berlin["fact"]["id"]);
    let then = op.output("memory.recall", json!({"query": "alice", "as_of": "2021-01-01T00:00:00Z"})).await;
    assert_eq!(objects(&then), ["Paris"]);
    assert_eq!(then[0]["valid_until"], "2024-06-01T00:00:00Z");

    // A fact dated between the two cuts the earlier one short and ends where the later one begins.
    let london = memorize(&op, "alice", "lives_in", "London", "2022-01-01T00:00:00Z").await;
    assert_eq!(london["closed"], json!([paris["fact"]["id"]]));
    assert_eq!(london["fact"]["valid_until"], "2024-06-01T00:00:00Z");
    for (as_of, expected) in [
        ("2019-01-01T00:00:00Z", vec![]),
        ("2021-01-01T00:00:00Z", vec!["Paris"]),
        ("2023-01-01T00:00:00Z", vec!["London"]),
        ("2025-01-01T00:00:00Z", vec!["Berlin"]),
    ] {
        let found = op.output("memory.recall", json!({"subject": "alice", "as_of": as_of})).await;
        assert_eq!(objects(&found), expected, "as of {as_of}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recall_ranks_by_relevance_then_confidence_then_id() {
    let op = memory(Value::Null).await;
    // Each fact that mentions `comet` is four tokens long except the `sky` one, and mentions it once except
    // `halley`, which mentions it twice. bm25 therefore ranks halley first, the long fact last, and ties `tail` and `dust`, which are
    // alike but for one unmatched word; confidence orders the tie. Confidence and insertion order run against
    // the ranking, so neither alone would give it.
    let facts = [
        ("sky", "shows", "a comet passing behind many distant bright stars tonight", 1.0),
        ("comet tail", "is", "long", 0.3),
        ("comet dust", "is", "fine", 0.9),
        ("comet", "named", "comet halley", 0.2),
        ("moon", "is", "far", 1.0),
    ];
    for (subject, predicate, object, confidence) in facts {
        let params = json!({"subject": subject, "predicate": predicate, "object": object, "confidence": confidence});
        op.output("memory.memorize", params).await;
    }
    let found = op.output("memory.recall", json!({"query": "comet"})).await;
    let subjects: Vec<&str> = found.as_array().unwrap().iter().map(|f| f["subject"].as_str().unwrap()).collect();
    assert_eq!(subjects, ["comet", "comet dust", "comet tail", "sky"], "best match first; `moon` does not match");
    let scores: Vec<f64> = found.as_array().unwrap().iter().map(|f| f["score"].as_f64().unwrap()).collect();
    assert!(scores[0] > scores[1] && scores[2] > scores[3], "a better match scores higher: {scores:?}");
    assert_eq!(scores[1], scores[2], "the tie is bm25's, broken by confidence: {scores:?}");

    // Alike and equally sure: the older fact (lower id) first, whatever their names.
    for subject in ["planet b", "planet a"] {
        op.output("memory.memorize", json!({"subject": subject, "predicate": "is", "object": "red"})).await;
    }
    let tie = op.output("memory.recall", json!({"query": "planet"})).await;
    let subjects: Vec<&str> = tie.as_array().unwrap().iter().map(|f| f["subject"].as_str().unwrap()).collect();
    assert_eq!(subjects, ["planet b", "planet a"]);
    assert!(tie[0]["id"].as_i64() < tie[1]["id"].as_i64() && tie[0]["score"] == tie[1]["score"], "{tie}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forgetting_hides_a_fact_now_but_not_from_the_past() {
    let op = memory(Value::Null).await;
    let fact = memorize(&op, "bob", "likes", "jazz", "2021-01-01T00:00:00Z").await;
    let id = fact["fact"]["id"].clone();
    let forgotten = op.output("memory.forget", json!({"id": id, "at": "2024-01-01T00:00:00Z"})).await;
    assert_eq!(forgotten["forgotten"], json!([id]));
    assert!(objects(&op.output("memory.recall", json!({"query": "jazz"})).await).is_empty());
    let earlier = op.output("memory.recall", json!({"query": "jazz", "as_of": "2022-01-01T00:00:00Z"})).await;
    assert_eq!(objects(&earlier), ["jazz"]);
    assert_eq!(op.output("memory.forget", json!({"id": id})).await["forgotten"], json!([]), "already forgotten");
    memorize(&op, "bob", "likes", "tea", "2021-01-01T00:00:00Z").await;
    memorize(&op, "bob", "owns", "a bike", "2021-01-01T00:00:00Z").await;
    let by_subject = op.output("memory.forget", json!({"subject": "bob"})).await;
    assert_eq!(by_subject["forgotten"].as_array().unwrap().len(), 2);
    assert!(objects(&op.output("memory.recall", json!({"subject": "bob"})).await).is_empty());
}

async fn hundred_widgets(op: &Operated) {
    for n in 0..100 {
        let params = json!({"subject": format!("widget {n}"), "predicate": "colour", "object": format!("shade {n}")});
        op.output("memory.memorize", params).await;
    }
}

async fn recalled_ids(op: &Operated) -> BTreeSet<i64> {
    let found = op.output("memory.recall", json!({"query": "widget", "limit": 100})).await;
    found.as_array().unwrap().iter().map(|f| f["id"].as_i64().unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn noise_zero_is_exact_and_a_seeded_half_is_a_reproducible_half() {
    let exact = memory(Value::Null).await;
    hundred_widgets(&exact).await;
    assert_eq!(recalled_ids(&exact).await.len(), 100, "noise 0 returns every match");

    let noisy = memory(json!({"noise_level": 0.5, "seed": 42})).await;
    hundred_widgets(&noisy).await;
    let first = recalled_ids(&noisy).await;
    assert!((35..=65).contains(&first.len()), "about half: {}", first.len());
    assert_eq!(recalled_ids(&noisy).await, first, "the same seed drops the same facts");

    let other = memory(json!({"noise_level": 0.5, "seed": 7})).await;
    hundred_widgets(&other).await;
    assert_ne!(recalled_ids(&other).await, first, "another seed, another subset");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflect_folds_episodes_into_a_summary_and_archives_them() {
    let op = memory(Value::Null).await;
    for (n, what) in ["woke up", "read mail", "met carol"].iter().enumerate() {
        let params = json!({"subject": "day", "predicate": "event", "object": what, "kind": "episodic",
                            "valid_from": format!("2026-11-20T0{n}:00:00Z"), "keep_previous": true});
        op.output("memory.memorize", params).await;
    }
    memorize(&op, "day", "weather", "sunny", "2026-11-20T00:00:00Z").await;
    let reflection = op.output("memory.reflect", json!({"subject": "day"})).await;
    assert_eq!(reflection["folded"].as_array().unwrap().len(), 3, "only the episodes");
    assert_eq!(
        reflection["summary"]["object"],
        "3 episodes from 2026-11-20T00:00:00+00:00 to 2026-11-20T02:00:00+00:00: day event woke up; day event read \
         mail; day event met carol"
    );
    assert_eq!(reflection["summary"]["kind"], "summary");
    let recalled = op.output("memory.recall", json!({"subject": "day"})).await;
    let kinds: BTreeSet<&str> = recalled.as_array().unwrap().iter().map(|f| f["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, BTreeSet::from(["semantic", "summary"]), "the episodes are archived");
    let all = op.output("memory.recall", json!({"subject": "day", "include_archived": true})).await;
    assert_eq!(all.as_array().unwrap().len(), 5, "archived, not deleted");
    assert_eq!(op.output("memory.reflect", json!({"subject": "day"})).await, json!({"summary": null, "folded": []}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugged_in_summarizer_writes_the_reflection() {
    let op = memory(json!({"summarizer": "summ.write"})).await;
    for what in ["a", "b"] {
        let params =
            json!({"subject": "log", "predicate": "saw", "object": what, "kind": "episodic", "keep_previous": true});
        op.output("memory.memorize", params).await;
    }
    let reflection = op.output("memory.reflect", json!({})).await;
    assert_eq!(reflection["summary"]["object"], "custom: 2 facts");
    assert_eq!(reflection["summary"]["subject"], "reflection");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_and_changes_nothing() {
    let op = memory(Value::Null).await;
    let cases = [
        ("memory.memorize", json!({"subject": " ", "predicate": "p", "object": "o"})),
        ("memory.memorize", json!({"subject": "s", "predicate": "p", "object": "o", "confidence": 2.0})),
        ("memory.memorize", json!({"subject": "s", "predicate": "p", "object": "o", "valid_from": "yesterday"})),
        ("memory.memorize", json!({"subject": "s", "predicate": "p"})),
        ("memory.recall", json!({"query": "x", "limit": 0})),
        ("memory.recall", json!({"query": "x", "limit": 1000})),
        ("memory.forget", json!({})),
        ("memory.forget", json!({"predicate": "p"})),
        ("memory.forget", json!({"id": 12345})),
        ("memory.reflect", json!({"limit": 0})),
    ];
    for (action, params) in cases {
        let (class, message) = op.failure(action, params.clone()).await;
        assert_eq!(class, "validation", "{action} {params}: {message}");
    }
    assert!(objects(&op.output("memory.recall", json!({})).await).is_empty(), "nothing was stored");
    let found = op.output("memory.recall", json!({"query": "\" OR NEAR( *"})).await;
    assert_eq!(found, json!([]), "FTS syntax in a query is only words to search for");

    let memory_id = SkillId::new("memory").unwrap();
    op.agent.unmount(&memory_id).await.unwrap();
    let refused = op.agent.mount(&memory_id, json!({"noise_level": 2.0})).await.unwrap_err();
    assert!(refused.to_string().contains("noise_level"), "{refused}");
    op.agent.mount(&memory_id, json!({"noise_level": 0.1})).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn distortion_makes_wrong_memories_reproducibly_and_zero_is_exact() {
    let truth = |facts: &Value| -> Vec<(String, String)> {
        facts
            .as_array()
            .unwrap()
            .iter()
            .map(|f| (f["subject"].as_str().unwrap().to_owned(), f["object"].as_str().unwrap().to_owned()))
            .collect()
    };
    let recall = json!({"query": "likes", "limit": 20});
    for (distortion, seed) in [(0.0, 1u64), (1.0, 3), (0.5, 11)] {
        let op = memory(json!({"distortion": distortion, "seed": seed})).await;
        for i in 0..12 {
            memorize(&op, &format!("person{i}"), "likes", &format!("thing{i}"), "2026-01-01T00:00:00Z").await;
        }
        let first = op.output("memory.recall", recall.clone()).await;
        let again = op.output("memory.recall", recall.clone()).await;
        assert_eq!(first, again, "the same seed and query distort the same way");
        let pairs = truth(&first);
        assert_eq!(pairs.len(), 12);
        let wrong = pairs.iter().filter(|(s, o)| s.replace("person", "thing") != *o).count();
        for (_, object) in &pairs {
            assert!(object.starts_with("thing"), "a distorted object is another fact's object: {object}");
        }
        match distortion {
            0.0 => assert_eq!(wrong, 0, "0 is exact"),
            1.0 => assert_eq!(wrong, 12, "every fact is wrong at 1"),
            _ => assert!((2..=10).contains(&wrong), "about half are wrong: {wrong}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_agent_believed_then_stays_queryable_after_it_changed_its_mind() {
    let op = memory(Value::Null).await;
    let paris = memorize(&op, "alice", "lives_in", "Paris", "2020-01-01T00:00:00Z").await;
    let believed_paris = paris["fact"]["recorded_at"].clone();
    let berlin = memorize(&op, "alice", "lives_in", "Berlin", "2024-06-01T00:00:00Z").await;
    let believed_berlin = berlin["fact"]["recorded_at"].clone();
    let forgot = op.output("memory.forget", json!({"id": berlin["fact"]["id"], "at": "2025-06-01T00:00:00Z"})).await;
    let believed_nothing = forgot["recorded_at"].clone();
    assert!(believed_paris.as_str() < believed_berlin.as_str() && believed_berlin.as_str() < believed_nothing.as_str());

    // "What did the agent believe, at each of these times, about where alice lived in 2025?"
    let about_2025 =
        |recorded: &Value| json!({"subject": "alice", "as_of": "2025-01-01T00:00:00Z", "as_recorded": recorded});
    let then = op.output("memory.recall", about_2025(&believed_paris)).await;
    assert_eq!(objects(&then), ["Paris"], "before Berlin was recorded, Paris was believed to last");
    assert_eq!(then[0]["valid_until"], Value::Null, "and it was open then");
    assert!(then[0]["recorded_until"].is_string(), "a later version replaced that belief: {then}");
    let later = op.output("memory.recall", about_2025(&believed_berlin)).await;
    assert_eq!(objects(&later), ["Berlin"]);
    let after_forgetting = op.output("memory.recall", about_2025(&believed_nothing)).await;
    assert_eq!(objects(&after_forgetting), ["Berlin"], "forgotten from mid-2025 on: still true in January");
    let now = op.output("memory.recall", json!({"subject": "alice", "as_of": "2025-07-01T00:00:00Z"})).await;
    assert!(objects(&now).is_empty(), "ended in June 2025");
    let before_any = op
        .output(
            "memory.recall",
            json!({"subject": "alice", "as_of": "2021-01-01T00:00:00Z", "as_recorded": "2001-01-01T00:00:00Z"}),
        )
        .await;
    assert!(objects(&before_any).is_empty(), "nothing was recorded in 2001");

    // Every version is kept: Paris (open, then ended), Berlin (open, then ended). Nothing was overwritten.
    let db = op.runtime.drive(&AgentId::new("operator").unwrap(), &SkillId::new("memory").unwrap()).unwrap();
    let db = rusqlite::Connection::open(db.join("memory.db")).unwrap();
    let versions: i64 = db.query_row("SELECT COUNT(*) FROM facts", [], |r| r.get(0)).unwrap();
    assert_eq!(versions, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recording_an_ended_back_dated_fact_again_stores_no_duplicate() {
    let op = memory(Value::Null).await;
    let paris = memorize(&op, "alice", "lives_in", "Paris", "2020-01-01T00:00:00Z").await;
    memorize(&op, "alice", "lives_in", "Berlin", "2024-06-01T00:00:00Z").await;
    for from in ["2020-01-01T00:00:00Z", "2022-03-01T00:00:00Z"] {
        let again = memorize(&op, "alice", "lives_in", "Paris", from).await;
        assert_eq!(again["already_known"], true, "Paris was already believed true from {from}: {again}");
        assert_eq!(again["fact"]["id"], paris["fact"]["id"]);
    }
    let then = op.output("memory.recall", json!({"subject": "alice", "as_of": "2021-01-01T00:00:00Z"})).await;
    assert_eq!(objects(&then), ["Paris"], "one Paris, not two");
    // Outside the time it was known to be true, the same object is a new fact: alice moved back in 2025.
    let back = memorize(&op, "alice", "lives_in", "Paris", "2025-01-01T00:00:00Z").await;
    assert_eq!(back["already_known"], false);
    assert_ne!(back["fact"]["id"], paris["fact"]["id"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_schema_database_is_upgraded_and_keeps_its_facts() {
    let data = tempfile::tempdir().unwrap();
    let folder = data.path().join("agents/operator/memory");
    std::fs::create_dir_all(&folder).unwrap();
    {
        // The first schema: one row per fact, changed in place.
        let db = rusqlite::Connection::open(folder.join("memory.db")).unwrap();
        db.execute_batch(
            "CREATE TABLE facts (id INTEGER PRIMARY KEY, subject TEXT NOT NULL, predicate TEXT NOT NULL, \
             object TEXT NOT NULL, confidence REAL NOT NULL, source TEXT, kind TEXT NOT NULL, \
             valid_from INTEGER NOT NULL, valid_until INTEGER, recorded_at INTEGER NOT NULL, \
             archived INTEGER NOT NULL DEFAULT 0);
             CREATE VIRTUAL TABLE facts_text USING fts5(subject, predicate, object, content = 'facts', content_rowid = 'id');
             CREATE TRIGGER facts_indexed AFTER INSERT ON facts BEGIN
                 INSERT INTO facts_text(rowid, subject, predicate, object) VALUES (new.id, new.subject, new.predicate, new.object);
             END;
             INSERT INTO facts VALUES (1, 'alice', 'lives_in', 'Paris', 1.0, NULL, 'semantic', 1577836800000, 1717200000000, 1700000000000, 0);
             INSERT INTO facts VALUES (2, 'alice', 'lives_in', 'Berlin', 1.0, NULL, 'semantic', 1717200000000, NULL, 1700000000001, 0);",
        )
        .unwrap();
    }
    let policy = Policy::default().grant(Capability::MEMORY);
    let op = Operated::start_with(vec![Memory::skill().unwrap()], policy, &[], |b| b.data_dir(data.path())).await;
    let drive = op.runtime.drive(&AgentId::new("operator").unwrap(), &SkillId::new("memory").unwrap()).unwrap();
    assert_eq!(drive, folder, "the test wrote the database where the skill looks");
    let found = op.output("memory.recall", json!({"query": "alice"})).await;
    assert_eq!(objects(&found), ["Berlin"], "{found}");
    let then = op.output("memory.recall", json!({"subject": "alice", "as_of": "2021-01-01T00:00:00Z"})).await;
    assert_eq!((objects(&then), then[0]["id"].clone()), (vec!["Paris"], json!(1)));
    let rome = memorize(&op, "alice", "lives_in", "Rome", "2025-01-01T00:00:00Z").await;
    assert_eq!((rome["fact"]["id"].clone(), rome["closed"].clone()), (json!(3), json!([2])));
}
