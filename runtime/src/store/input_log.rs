//! The agents' input logs in a durable journal, a batch at a time: the writer puts the inputs an agent logged
//! in one commit into one row of `input_batches` (numbered `first_seq..=last_seq`), rather than a row each.
//! An input is read back only to bring its agent back, always with those after it, so nothing is lost by
//! keeping them together, and a commit of a thousand inputs writes one row instead of a thousand: about a
//! tenth of the writer's work per run in the throughput bench.
//!
//! A row's body is its inputs one after another, each as its number (8 bytes, little-endian), the length of its
//! JSON (4 bytes, little-endian) and the JSON. SQLite journals written before batches keep their rows in
//! `inputs` (one per input); both are read and both are cleared.

use super::StoreError;
use super::agent_rows::{AgentRows, Row};
use super::tables::Tables;
use crate::id::AgentId;
use crate::signal::Signal;
use rusqlite::{Connection, params};

/// The most bytes one row's body holds, well under SQLite's limit on a value (1 GB): an input that would take a
/// row past it starts a new one (an input larger than that has a row of its own).
const BODY_MOST: usize = 64 * 1024 * 1024;
/// The bytes before each input's JSON in a body: its number and its length.
const ENTRY_HEAD: usize = 12;

/// An input's number as SQLite keeps it.
pub(super) fn number(seq: u64) -> i64 {
    i64::try_from(seq).unwrap_or(i64::MAX)
}

/// The inputs the writer is gathering in the current commit, an agent at a time.
#[derive(Default)]
pub(super) struct InputBatches {
    /// Per agent with inputs in this commit: its row so far.
    rows: AgentRows<Numbers>,
    /// Whether each row keeps the ids of its signals (see `Database::wants_input_ids`).
    ids: bool,
}

/// A row's first and last input numbers, and (when kept) the ids of its signals.
struct Numbers {
    first: u64,
    last: u64,
    ids: Vec<uuid::Uuid>,
}

impl InputBatches {
    /// Whether rows keep the ids of their signals.
    pub(super) fn keep_ids(&mut self, keep: bool) {
        self.ids = keep;
    }

    /// Adds input `seq` of `agent` (signal `id`, for one the journal did not keep already), as the journal keeps a
    /// signal (see `signal_codec.rs`). An input that does not follow the agent's last one here, or that would
    /// take its row past [`BODY_MOST`], starts a new row (the one gathered so far is written first).
    pub(super) fn add(
        &mut self,
        db: &mut dyn Tables,
        agent: &AgentId,
        (seq, id): (u64, Option<uuid::Uuid>),
        kept: &[u8],
    ) -> Result<(), StoreError> {
        // An entry gives its length in 4 bytes (and SQLite refuses a value over 1 GB anyway).
        let len = u32::try_from(kept.len())
            .map_err(|_| StoreError::Database(format!("an input of {} bytes; expected less than 4 GiB", kept.len())))?;
        let entry = ENTRY_HEAD + kept.len();
        let ends_row = |row: &Row<Numbers>| {
            row.summary.last.checked_add(1) != Some(seq) || (!row.body.is_empty() && row.body.len() + entry > BODY_MOST)
        };
        if self.rows.get(agent).is_some_and(ends_row) {
            self.write_agent(db, agent)?;
        }
        let row = self.rows.or_start(agent, || Numbers { first: seq, last: seq, ids: Vec::new() });
        row.summary.last = seq;
        if self.ids {
            row.summary.ids.extend(id);
        }
        row.body.extend_from_slice(&seq.to_le_bytes());
        row.body.extend_from_slice(&len.to_le_bytes());
        row.body.extend_from_slice(kept);
        Ok(())
    }

    /// Writes what is gathered for `agent` (before a write that clears its inputs).
    pub(super) fn write_agent(&mut self, db: &mut dyn Tables, agent: &AgentId) -> Result<(), StoreError> {
        self.rows.write_agent(agent, |agent, n, body| db.input_batch(agent, (n.first, n.last), body, &n.ids))
    }

    /// Writes everything gathered.
    pub(super) fn write_all(&mut self, db: &mut dyn Tables) -> Result<(), StoreError> {
        self.rows.write_all(|agent, n, body| db.input_batch(agent, (n.first, n.last), body, &n.ids))
    }

    /// Drops what is gathered (its commit failed).
    pub(super) fn forget(&mut self) {
        self.rows.forget();
    }
}

/// Clears `agent`'s logged inputs in a SQLite journal: all of them, or those numbered up to `upto` (folded into a
/// snapshot). A row of a batch with inputs on both sides of `upto` is kept whole until a later snapshot covers it.
pub(super) fn clear(db: &Connection, agent: &AgentId, upto: Option<u64>) -> rusqlite::Result<()> {
    let upto = upto.map_or(i64::MAX, number);
    db.prepare_cached("DELETE FROM inputs WHERE agent = ?1 AND seq <= ?2")?.execute(params![agent.as_str(), upto])?;
    db.prepare_cached("DELETE FROM input_batches WHERE agent = ?1 AND last_seq <= ?2")?
        .execute(params![agent.as_str(), upto])?;
    Ok(())
}

/// `agent`'s logged inputs numbered after `after` in a SQLite journal, in order. Where one number was logged
/// twice (only a journal written both one input a row and in batches could), the later is kept.
pub(super) fn after(db: &Connection, agent: &AgentId, after: u64) -> Result<Vec<(u64, Signal)>, StoreError> {
    let database = |err: rusqlite::Error| StoreError::Database(err.to_string());
    let mut found: Vec<(u64, Signal)> = Vec::new();
    let mut legacy = db
        .prepare_cached("SELECT seq, signal FROM inputs WHERE agent = ?1 AND seq > ?2 ORDER BY seq")
        .map_err(database)?;
    let rows = legacy
        .query_map(params![agent.as_str(), number(after)], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))
        .map_err(database)?;
    for row in rows {
        let (seq, text) = row.map_err(database)?;
        found.push((u64::try_from(seq).unwrap_or_default(), decode_input(text.as_bytes())?));
    }
    let mut batches = db
        .prepare_cached("SELECT body FROM input_batches WHERE agent = ?1 AND last_seq > ?2 ORDER BY place")
        .map_err(database)?;
    let mut bodies = batches.query(params![agent.as_str(), number(after)]).map_err(database)?;
    while let Some(row) = bodies.next().map_err(database)? {
        let body = row.get_ref(0).map_err(database)?.as_blob().map_err(|e| StoreError::Decode {
            what: "input batch",
            message: format!("{e}; expected the batch's inputs as a blob"),
        })?;
        read_body(body, after, &mut found)?;
    }
    Ok(in_order(found))
}

/// Adds the inputs of a row's body numbered after `after` to `found`.
pub(super) fn read_body(body: &[u8], after: u64, found: &mut Vec<(u64, Signal)>) -> Result<(), StoreError> {
    for entry in entries(body) {
        let (seq, json) = entry?;
        if seq > after {
            found.push((seq, decode_input(json)?));
        }
    }
    Ok(())
}

/// Inputs read back in the order their rows were written, in order of their numbers, each number once (the one
/// logged last).
pub(super) fn in_order(mut found: Vec<(u64, Signal)>) -> Vec<(u64, Signal)> {
    // Logged in order, read in order: sorted already, unless a number was logged twice.
    if !found.windows(2).all(|pair| pair[0].0 < pair[1].0) {
        // A stable sort keeps a number's entries in the order they were logged; the last of each is kept.
        found.sort_by_key(|(seq, _)| *seq);
        let mut kept: Vec<(u64, Signal)> = Vec::with_capacity(found.len());
        for entry in found {
            match kept.last_mut() {
                Some(last) if last.0 == entry.0 => *last = entry,
                _ => kept.push(entry),
            }
        }
        found = kept;
    }
    found
}

fn decode_input(kept: &[u8]) -> Result<Signal, StoreError> {
    super::signal_codec::decode(kept)
}

/// The inputs in a batch's body, in order: each one's number and JSON.
fn entries(mut body: &[u8]) -> impl Iterator<Item = Result<(u64, &[u8]), StoreError>> {
    let cut = |what: &str| StoreError::Decode {
        what: "input batch",
        message: format!("the batch ends in the middle of an input's {what}; expected number, length and JSON"),
    };
    std::iter::from_fn(move || {
        if body.is_empty() {
            return None;
        }
        let entry = (|| {
            let (seq, rest) = body.split_first_chunk::<8>().ok_or_else(|| cut("number"))?;
            let (len, rest) = rest.split_first_chunk::<4>().ok_or_else(|| cut("length"))?;
            let len = u32::from_le_bytes(*len) as usize;
            let json = rest.get(..len).ok_or_else(|| cut("JSON"))?;
            Ok((u64::from_le_bytes(*seq), json, &rest[len..]))
        })();
        Some(match entry {
            Ok((seq, json, rest)) => {
                body = rest;
                Ok((seq, json))
            }
            Err(err) => {
                // Nothing more is read from a damaged body.
                body = &[];
                Err(err)
            }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::sqlite::SqliteTables;
    use proptest::prelude::*;
    use serde_json::json;

    fn journal() -> Connection {
        let db = Connection::open_in_memory().unwrap();
        db.execute_batch(
            "CREATE TABLE inputs (agent TEXT NOT NULL, seq INTEGER NOT NULL, signal TEXT NOT NULL,
                 PRIMARY KEY (agent, seq)) WITHOUT ROWID;
             CREATE TABLE input_batches (place INTEGER PRIMARY KEY, agent TEXT NOT NULL,
                 first_seq INTEGER NOT NULL, last_seq INTEGER NOT NULL, body BLOB NOT NULL);",
        )
        .unwrap();
        db
    }

    fn signal(seq: u64) -> Signal {
        Signal::new("tick", json!(seq)).unwrap()
    }

    fn rows(db: &Connection) -> Vec<(String, i64, i64)> {
        let mut statement = db.prepare("SELECT agent, first_seq, last_seq FROM input_batches ORDER BY place").unwrap();
        statement.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap().map(Result::unwrap).collect()
    }

    proptest! {
        /// Inputs of several agents, added in any interleaving over several commits, with snapshots (at the
        /// last input or before it) clearing what they folded in: the inputs after any number past the last
        /// snapshot read back exactly as a plain list of every input logged says (the model).
        #[test]
        fn inputs_read_back_as_logged_whatever_the_batches(
            steps in proptest::collection::vec((0usize..3, 0u8..10, any::<u8>()), 1..120),
            after in 0u64..40,
        ) {
            let db = journal();
            let agents = [AgentId::new("a").unwrap(), AgentId::new("b").unwrap(), AgentId::new("c").unwrap()];
            let mut batches = InputBatches::default();
            let mut model: Vec<Vec<(u64, Signal)>> = vec![Vec::new(); 3];
            let mut snapshot = [0u64; 3];
            for (who, what, short) in steps {
                match what {
                    // A commit ends.
                    0 => batches.write_all(&mut SqliteTables::new(&db)).unwrap(),
                    // A snapshot folds in what was logged so far, or stands a little before its end.
                    1 => {
                        batches.write_agent(&mut SqliteTables::new(&db), &agents[who]).unwrap();
                        let logged = model[who].len() as u64;
                        snapshot[who] = logged.saturating_sub(u64::from(short % 4)).max(snapshot[who]);
                        clear(&db, &agents[who], Some(snapshot[who])).unwrap();
                    }
                    _ => {
                        let seq = model[who].len() as u64 + 1;
                        let input = signal(seq);
                        batches.add(&mut SqliteTables::new(&db), &agents[who], (seq, None), serde_json::to_string(&input).unwrap().as_bytes()).unwrap();
                        model[who].push((seq, input));
                    }
                }
            }
            batches.write_all(&mut SqliteTables::new(&db)).unwrap();
            for (index, agent) in agents.iter().enumerate() {
                let from = after.max(snapshot[index]);
                let read = super::after(&db, agent, from).unwrap();
                let expected: Vec<(u64, Signal)> = model[index].iter().filter(|(seq, _)| *seq > from).cloned().collect();
                prop_assert_eq!(read, expected);
            }
        }
    }

    #[test]
    fn one_commit_of_an_agents_inputs_is_one_row_and_a_gap_starts_another() {
        let db = journal();
        let me = AgentId::new("me").unwrap();
        let mut batches = InputBatches::default();
        for seq in [1, 2, 3, 7, 8] {
            batches
                .add(
                    &mut SqliteTables::new(&db),
                    &me,
                    (seq, None),
                    serde_json::to_string(&signal(seq)).unwrap().as_bytes(),
                )
                .unwrap();
        }
        batches.write_all(&mut SqliteTables::new(&db)).unwrap();
        assert_eq!(rows(&db), [("me".to_owned(), 1, 3), ("me".to_owned(), 7, 8)]);
        assert_eq!(after(&db, &me, 2).unwrap().iter().map(|(seq, _)| *seq).collect::<Vec<_>>(), [3, 7, 8]);
    }

    #[test]
    fn a_journal_with_one_input_a_row_is_read_and_cleared_with_the_batches() {
        let db = journal();
        let me = AgentId::new("me").unwrap();
        let logged: Vec<(u64, Signal)> = (1..=3).map(|seq| (seq, signal(seq))).collect();
        for (seq, input) in &logged[..2] {
            let text = serde_json::to_string(input).unwrap();
            db.execute("INSERT INTO inputs VALUES ('me', ?1, ?2)", params![number(*seq), text]).unwrap();
        }
        let mut batches = InputBatches::default();
        batches
            .add(&mut SqliteTables::new(&db), &me, (3, None), serde_json::to_string(&logged[2].1).unwrap().as_bytes())
            .unwrap();
        batches.write_all(&mut SqliteTables::new(&db)).unwrap();
        assert_eq!(after(&db, &me, 0).unwrap(), logged, "the rows of both kinds, in order");
        clear(&db, &me, None).unwrap();
        assert!(after(&db, &me, 0).unwrap().is_empty());
    }

    #[test]
    fn a_row_holds_at_most_its_limit_and_a_larger_input_has_a_row_of_its_own() {
        let db = journal();
        let me = AgentId::new("me").unwrap();
        let mut batches = InputBatches::default();
        // Three inputs of a third of the limit each: two fit in a row, the third starts another.
        let big = serde_json::to_string(&Signal::new("big", json!("x".repeat(BODY_MOST / 3))).unwrap()).unwrap();
        for seq in 1..=3 {
            batches.add(&mut SqliteTables::new(&db), &me, (seq, None), big.as_bytes()).unwrap();
        }
        batches.write_all(&mut SqliteTables::new(&db)).unwrap();
        assert_eq!(rows(&db), [("me".to_owned(), 1, 2), ("me".to_owned(), 3, 3)]);
        assert_eq!(after(&db, &me, 0).unwrap().len(), 3);
        let huge = serde_json::to_string(&Signal::new("huge", json!("x".repeat(BODY_MOST))).unwrap()).unwrap();
        batches.add(&mut SqliteTables::new(&db), &me, (4, None), huge.as_bytes()).unwrap();
        batches.add(&mut SqliteTables::new(&db), &me, (5, None), big.as_bytes()).unwrap();
        batches.write_all(&mut SqliteTables::new(&db)).unwrap();
        assert_eq!(&rows(&db)[2..], [("me".to_owned(), 4, 4), ("me".to_owned(), 5, 5)]);
        assert_eq!(after(&db, &me, 3).unwrap().len(), 2);
    }

    #[test]
    fn a_number_logged_twice_reads_back_once_as_logged_last() {
        let db = journal();
        let me = AgentId::new("me").unwrap();
        let (old, new, other) = (signal(1), signal(1), signal(2));
        db.execute("INSERT INTO inputs VALUES ('me', 1, ?1)", [serde_json::to_string(&old).unwrap()]).unwrap();
        let mut batches = InputBatches::default();
        for (seq, input) in [(1, &new), (2, &other)] {
            batches
                .add(&mut SqliteTables::new(&db), &me, (seq, None), serde_json::to_string(input).unwrap().as_bytes())
                .unwrap();
        }
        batches.write_all(&mut SqliteTables::new(&db)).unwrap();
        assert_eq!(after(&db, &me, 0).unwrap(), [(1, new), (2, other)].to_vec());
    }

    #[test]
    fn a_damaged_batch_is_a_typed_error() {
        let db = journal();
        let me = AgentId::new("me").unwrap();
        let mut batches = InputBatches::default();
        batches
            .add(&mut SqliteTables::new(&db), &me, (1, None), serde_json::to_string(&signal(1)).unwrap().as_bytes())
            .unwrap();
        batches.write_all(&mut SqliteTables::new(&db)).unwrap();
        db.execute("UPDATE input_batches SET body = substr(body, 1, length(body) - 3)", []).unwrap();
        let err = after(&db, &me, 0).unwrap_err();
        assert!(matches!(err, StoreError::Decode { what: "input batch", .. }), "{err}");
        db.execute("UPDATE input_batches SET body = x'0100000000000000'", []).unwrap();
        assert!(matches!(after(&db, &me, 0), Err(StoreError::Decode { what: "input batch", .. })));
        db.execute("UPDATE input_batches SET body = x'01000000000000000200000041'", []).unwrap();
        assert!(matches!(after(&db, &me, 0), Err(StoreError::Decode { .. })));
    }
}
