//! A property of the journal's runs, written through the writer as the server writes them: whichever table a
//! run lands in (`runs`, or a batch row of `run_batches`), every read finds what a plain list of the runs
//! would give.

use super::tests::Writer;
use super::*;
use crate::id::ActionId;
use crate::store::RunStatus;
use crate::store::RunUpdate;
use crate::store::durable::RunPlan;
use crate::store::tables::json;
use crate::store::writer::PlanText;
use crate::store::writer::{Op, RunRow, Waiter};
use chrono::TimeZone;
use chrono::Utc;
use proptest::prelude::*;

/// How one run goes.
#[derive(Debug, Clone, Copy)]
enum Fate {
    /// Ends at once; the agent consumes its outcome in the same commit (the usual case: a batch row).
    Consumed,
    /// Ends at once; its outcome waits for the agent, not safe to hold (a row in `runs`, with the outcome).
    Unconsumed,
    /// Ends at once; its outcome goes to nobody (a routine's or an outside caller's run).
    NoOutcome,
    /// Ends at once, asked for by the agent; its outcome never reached the journal (lost to a crash).
    Lost,
    /// Written going on in one commit, ended and consumed in the next (its row in `runs` is updated).
    Waits,
}

#[derive(Debug, Clone)]
struct Spec {
    agent: usize,
    action: usize,
    failed: bool,
    fate: Fate,
    /// The input that asked for it (its key), or none (a run without a plan).
    seq: Option<u64>,
    /// Its id: time-ordered, made this many ms after the start, or (`None`) a random one.
    id_ms: Option<u64>,
    /// When it was recorded, ms after the start.
    at: i64,
}

const START_MS: u64 = 1_800_000_000_000;
const AGENTS: [&str; 3] = ["a", "b", "ab"];
const ACTIONS: [&str; 2] = ["x.y", "x.z"];

fn spec() -> impl Strategy<Value = Spec> {
    let fate = prop_oneof![
        4 => Just(Fate::Consumed),
        1 => Just(Fate::Unconsumed),
        1 => Just(Fate::NoOutcome),
        1 => Just(Fate::Waits),
        1 => Just(Fate::Lost),
    ];
    let id = prop_oneof![6 => (0u64..4_000).prop_map(Some), 1 => Just(None)];
    (0..AGENTS.len(), 0..ACTIONS.len(), any::<bool>(), fate, proptest::option::of(0u64..12), id, 0i64..3_000)
        .prop_map(|(agent, action, failed, fate, seq, id_ms, at)| Spec { agent, action, failed, fate, seq, id_ms, at })
}

/// A run's record as of `status`.
fn record(spec: &Spec, run: Uuid, status: RunStatus) -> RunRecord {
    let agent = AgentId::new(AGENTS[spec.agent]).unwrap();
    let mut record =
        RunRecord::queued(run, agent, ActionId::new(ACTIONS[spec.action]).unwrap(), &serde_json::json!({}), run);
    let at = Utc.timestamp_millis_opt(START_MS as i64 + spec.at).unwrap();
    record.history = vec![(RunStatus::Queued, at)];
    if status != RunStatus::Queued {
        record
            .apply(RunUpdate { status: Some(status), ..RunUpdate::default() }, at + chrono::Duration::milliseconds(1));
    }
    record
}

fn key(spec: &Spec) -> Option<String> {
    spec.seq.map(|seq| format!("{}/{seq}/0", AGENTS[spec.agent]))
}

/// A query over the generated runs.
fn a_query() -> impl Strategy<Value = RunQuery> {
    let time =
        proptest::option::of((0i64..3_200).prop_map(|ms| Utc.timestamp_millis_opt(START_MS as i64 + ms).unwrap()));
    let status = proptest::option::of(prop_oneof![
        Just(RunStatus::Completed),
        Just(RunStatus::Failed),
        Just(RunStatus::Running)
    ]);
    (
        proptest::option::of(0..AGENTS.len()),
        proptest::option::of(0..ACTIONS.len()),
        status,
        time.clone(),
        time,
        0usize..5,
        proptest::option::of(0usize..8),
    )
        .prop_map(|(agent, action, status, since, until, offset, limit)| RunQuery {
            agent: agent.map(|a| AgentId::new(AGENTS[a]).unwrap()),
            action: action.map(|a| ActionId::new(ACTIONS[a]).unwrap()),
            status,
            since,
            until,
            offset,
            limit,
        })
}

/// What is written and what a plain list says about it.
struct Written {
    writer: Writer,
    /// Every run in the order it was first written: its latest record, key, and whether the agent has yet to
    /// be answered (its outcome kept and not consumed, or lost).
    model: Vec<(RunRecord, Option<String>, bool)>,
}

fn write(specs: &[Spec], cuts: &[usize]) -> Written {
    let mut writer = Writer::new();
    let mut model = Vec::new();
    let mut seqs = [0u64; AGENTS.len()];
    let mut later: Vec<Op> = Vec::new();
    let mut chunks = Vec::new();
    let mut rest = specs;
    for cut in cuts {
        let (chunk, after) = rest.split_at((*cut).min(rest.len()));
        chunks.push(chunk);
        rest = after;
    }
    chunks.push(rest);
    for chunk in chunks {
        let mut ops: Vec<Op> = std::mem::take(&mut later);
        for spec in chunk {
            let n = model.len() as u64;
            let run = match spec.id_ms {
                Some(ms) => Uuid::new_v7(uuid::Timestamp::from_unix(
                    uuid::NoContext,
                    (START_MS + ms) / 1000,
                    ((START_MS + ms) % 1000 * 1_000_000) as u32,
                )),
                None => Uuid::new_v5(&Uuid::NAMESPACE_OID, &n.to_le_bytes()),
            };
            let agent = AgentId::new(AGENTS[spec.agent]).unwrap();
            let ended = if spec.failed { RunStatus::Failed } else { RunStatus::Completed };
            let plan = key(spec).map(|key| {
                let plan = RunPlan {
                    key: key.clone(),
                    params: serde_json::json!({}),
                    by_agent: !matches!(spec.fate, Fate::NoOutcome),
                    cause: None,
                    correlation: run,
                };
                (key, json(&plan))
            });
            let outcome =
                json(&Signal::new("action.completed", serde_json::json!({ "run": run })).unwrap()).into_bytes();
            let mut consume = |ops: &mut Vec<Op>| {
                seqs[spec.agent] += 1;
                ops.push(Op::KeptInput(agent.clone(), seqs[spec.agent], run));
            };
            let first = if matches!(spec.fate, Fate::Waits) { RunStatus::Running } else { ended };
            ops.push(Op::Run(RunRow::of(record(spec, run, first))));
            if let Some((key, plan)) = plan.clone() {
                ops.push(Op::Plan(run, PlanText { key_len: key.len(), text: key + &plan }));
            }
            match spec.fate {
                Fate::Consumed => {
                    ops.push(Op::Outcome(run, outcome, true, agent.clone()));
                    consume(&mut ops);
                }
                Fate::Unconsumed => ops.push(Op::Outcome(run, outcome, false, agent.clone())),
                Fate::NoOutcome | Fate::Lost => {}
                Fate::Waits => {
                    later.push(Op::Run(RunRow::of(record(spec, run, ended))));
                    later.push(Op::Outcome(run, outcome, true, agent.clone()));
                    consume(&mut later);
                }
            }
            // What a recovery must see whatever its snapshot: an outcome kept and not consumed, or one lost.
            let lost = matches!(spec.fate, Fate::Lost) && spec.seq.is_some();
            model.push((record(spec, run, ended), key(spec), matches!(spec.fate, Fate::Unconsumed) || lost));
        }
        ops.push(Op::Flush(Waiter::Nobody));
        writer.commit(ops);
    }
    later.push(Op::Flush(Waiter::Nobody));
    writer.commit(later);
    Written { writer, model }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn every_read_of_runs_finds_what_a_plain_list_gives(
        specs in proptest::collection::vec(spec(), 0..40),
        cuts in proptest::collection::vec(0usize..12, 0..4),
        queries in proptest::collection::vec(a_query(), 1..6),
        after in 0u64..12,
    ) {
        let Written { writer, model } = write(&specs, &cuts);
        let db = &writer.db;
        for query in &queries {
            let expected: Vec<(RunRecord, Option<String>)> = model.iter()
                .filter(|(record, _, _)| query.matches(record))
                .skip(query.offset)
                .take(query.limit.unwrap_or(usize::MAX))
                .map(|(record, key, _)| (record.clone(), key.clone()))
                .collect();
            prop_assert_eq!(run_log::query(db, query).unwrap(), expected, "{:?}", query);
        }
        for (record, _, _) in &model {
            let in_table: Option<String> = db
                .query_row("SELECT record FROM runs WHERE run = ?1", [record.run.to_string()], |r| r.get(0))
                .optional()
                .unwrap();
            let found = match in_table {
                Some(text) => Some(serde_json::from_str::<RunRecord>(&text).unwrap()),
                None => run_log::find(db, record.run).unwrap().map(|(record, _)| record),
            };
            prop_assert_eq!(found.as_ref(), Some(record), "every run is found by its id");
        }
        for name in AGENTS {
            let agent = AgentId::new(name).unwrap();
            let expected: Vec<Uuid> = model.iter()
                .filter(|(record, key, kept)| record.agent == agent
                    && (*kept || key.as_deref().and_then(|k| run_log::key_seq(name, k)).is_some_and(|s| s > after)))
                .map(|(record, _, _)| record.run)
                .collect();
            let revived: Vec<Uuid> = run_log::revival_runs(db, &agent, agent.as_str(), after).unwrap().iter().map(|r| r.record.run).collect();
            prop_assert_eq!(revived, expected, "the runs a recovery of {} after {} needs", name, after);
        }
    }
}

#[test]
fn runs_under_load_land_in_batch_rows_and_runs_going_on_in_their_own() {
    let specs: Vec<Spec> = (0..20)
        .map(|i| Spec {
            agent: 0,
            action: 0,
            failed: false,
            fate: if i == 3 { Fate::Waits } else { Fate::Consumed },
            seq: Some(i),
            id_ms: Some(i),
            at: i as i64,
        })
        .collect();
    let Written { writer, model } = write(&specs, &[]);
    let count = |sql: &str| writer.db.query_row(sql, [], |r| r.get::<_, i64>(0)).unwrap();
    assert_eq!(count("SELECT count(*) FROM run_batches"), 1, "one agent's ended runs of one commit: one row");
    assert_eq!(count("SELECT count(*) FROM runs"), 1, "the run that was going on keeps its own row");
    assert_eq!(count("SELECT count(*) FROM run_batch_actions"), 1);
    let all: Vec<Uuid> = run_log::query(&writer.db, &RunQuery::default()).unwrap().iter().map(|(r, _)| r.run).collect();
    assert_eq!(all, model.iter().map(|(r, _, _)| r.run).collect::<Vec<_>>(), "in the order first written");
}
