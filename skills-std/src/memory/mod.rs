//! `memory`: the agent's knowledge in an embedded SQLite database in its drive. Facts are (subject, predicate,
//! object, confidence, source) with two clocks: valid time, when the fact was true (`valid_from`/`valid_until`),
//! and transaction time, when the agent held it (`recorded_at`/`recorded_until`). Nothing is ever deleted or
//! overwritten: contradicting, forgetting and reflecting write new versions of the facts they end or archive, so
//! `as_of` can ask what was true then and `as_recorded` what the agent believed then. A seeded `noise_level`
//! and `distortion` make recall imperfect on purpose.

mod store;

use agentry::prelude::*;
use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::path::PathBuf;

/// The database file's name in the skill's drive folder.
pub const DATABASE: &str = "memory.db";
/// The most facts one recall returns.
pub const MAX_RECALL: usize = 100;
/// How many matches a recall considers before noise and the limit apply.
const CANDIDATES: usize = 10_000;

/// What kind of fact this is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FactKind {
    /// Something known about the world (the default).
    #[default]
    Semantic,
    /// Something that happened; `memory.reflect` folds these into summaries.
    Episodic,
    /// A summary `memory.reflect` made.
    Summary,
}

impl FactKind {
    fn as_str(self) -> &'static str {
        match self {
            Self::Semantic => "semantic",
            Self::Episodic => "episodic",
            Self::Summary => "summary",
        }
    }

    fn parse(text: &str) -> Self {
        match text {
            "episodic" => Self::Episodic,
            "summary" => Self::Summary,
            _ => Self::Semantic,
        }
    }
}

/// One fact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Fact {
    /// Its id.
    pub id: i64,
    /// What it is about.
    pub subject: String,
    /// The relation.
    pub predicate: String,
    /// The value.
    pub object: String,
    /// How sure the agent is, from 0 to 1.
    pub confidence: f64,
    /// Where it came from.
    pub source: Option<String>,
    /// What kind of fact.
    pub kind: FactKind,
    /// From when it was true.
    pub valid_from: DateTime<Utc>,
    /// Until when it was true (`None`: still is).
    pub valid_until: Option<DateTime<Utc>>,
    /// When the agent recorded this version of it (transaction time).
    pub recorded_at: DateTime<Utc>,
    /// Until when the agent held this version (`None`: it still does); a newer version replaced it then.
    pub recorded_until: Option<DateTime<Utc>>,
    /// Whether a summary replaced it.
    pub archived: bool,
    /// How well it matched the recall's query (higher is better).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
}

/// The memory's per-agent settings, set as mount options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct MemoryConfig {
    /// The share of recall results dropped at random, to simulate imperfect memory: 0 is exact, 1 forgets all.
    #[schemars(range(min = 0.0, max = 1.0))]
    pub noise_level: f64,
    /// The share of recalled facts that come back distorted, to simulate wrong memories ("hallucination
    /// mode"): a distorted fact carries another recalled fact's object and a perturbed confidence. 0 is exact.
    #[schemars(range(min = 0.0, max = 1.0))]
    pub distortion: f64,
    /// The seed of that randomness: the same seed, query and facts drop and distort the same results.
    pub seed: u64,
    /// An action that writes reflections (given `{"facts": [...]}`, it returns the summary text); by default a
    /// deterministic summary is written.
    pub summarizer: Option<String>,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        Self { noise_level: 0.0, distortion: 0.0, seed: 0, summarizer: None }
    }
}

fn database(ctx: &ActionContext) -> Result<PathBuf, ActionError> {
    Ok(ctx.drive()?.join(DATABASE))
}

/// Runs blocking database work off the async threads.
async fn with_db<T, F>(ctx: &ActionContext, work: F) -> Result<T, ActionError>
where
    T: Send + 'static,
    F: FnOnce(&mut rusqlite::Connection) -> Result<T, ActionError> + Send + 'static,
{
    let path = database(ctx)?;
    tokio::task::spawn_blocking(move || work(&mut store::open(&path)?))
        .await
        .map_err(|e| ActionError::critical(format!("the memory task failed: {e}")))?
}

fn required(name: &str, value: &str) -> Result<(), ActionError> {
    if value.trim().is_empty() {
        return Err(ActionError::validation(format!("`{name}` is empty; expected some text")));
    }
    Ok(())
}

fn confidence(value: f64) -> Result<f64, ActionError> {
    if !(0.0..=1.0).contains(&value) {
        return Err(ActionError::validation(format!("`confidence` is {value}; expected 0 to 1")));
    }
    Ok(value)
}

fn one() -> f64 {
    1.0
}

/// Records a fact. Unless told to keep several, a contradiction replaces what was believed from the new fact's
/// `valid_from`: the facts for the same subject and predicate still true then end there, and a fact that
/// became true later ends the new one where it took over, so at any time at most one of them is true.
#[derive(Debug, Deserialize, Serialize, JsonSchema, Action)]
#[action(id = "memory.memorize", output = Memorized, side_effects, capabilities(memory), cost = cheap)]
pub struct Memorize {
    /// What the fact is about, e.g. `alice`.
    pub subject: String,
    /// The relation, e.g. `lives_in`.
    pub predicate: String,
    /// The value, e.g. `Paris`.
    pub object: String,
    /// How sure, from 0 to 1 (default 1).
    #[serde(default = "one")]
    pub confidence: f64,
    /// Where it came from.
    #[serde(default)]
    pub source: Option<String>,
    /// What kind of fact (default `semantic`).
    #[serde(default)]
    pub kind: FactKind,
    /// From when it is true (default: now).
    #[serde(default)]
    pub valid_from: Option<DateTime<Utc>>,
    /// Keep the other facts for this subject and predicate true (a person can have several phone numbers).
    #[serde(default)]
    pub keep_previous: bool,
}

/// What `memory.memorize` did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Memorized {
    /// The fact as stored (the existing one, if it was already known).
    pub fact: Fact,
    /// The ids of the facts it ended at the new fact's `valid_from`: open ones closed, and closed ones that
    /// were still true then cut short.
    pub closed: Vec<i64>,
    /// Whether the same fact was already true, so nothing changed.
    pub already_known: bool,
}

impl Memorize {
    /// Ends what it contradicts and records the fact, ended where a later fact took over, in one transaction.
    pub async fn run(self, ctx: ActionContext) -> Result<Memorized, ActionError> {
        required("subject", &self.subject)?;
        required("predicate", &self.predicate)?;
        required("object", &self.object)?;
        let confidence = confidence(self.confidence)?;
        let clock = ctx.now();
        with_db(&ctx, move |db| {
            let tx = store::write(db)?;
            let now = store::transaction_time(&tx, clock)?;
            let valid_from = self.valid_from.unwrap_or(now);
            let believed = store::believed(&tx, &self.subject, &self.predicate)?;
            // Known already: the same object, still true or true at `valid_from` (a back-dated fact recorded
            // again after it ended is not stored twice).
            let known = believed.iter().find(|f| {
                f.object == self.object
                    && (f.valid_until.is_none() || (f.valid_from <= valid_from && f.valid_until > Some(valid_from)))
            });
            if let Some(known) = known {
                return Ok(Memorized { fact: known.clone(), closed: Vec::new(), already_known: true });
            }
            let mut closed = Vec::new();
            let mut valid_until: Option<DateTime<Utc>> = None;
            if !self.keep_previous {
                for old in believed {
                    if old.valid_from > valid_from {
                        // It took over later, so the new fact was true only until then.
                        valid_until = Some(valid_until.map_or(old.valid_from, |until| until.min(old.valid_from)));
                    } else if old.valid_until.is_none_or(|until| until > valid_from) {
                        store::revise(&tx, &old, now, |f| f.valid_until = Some(valid_from))?;
                        closed.push(old.id);
                    }
                }
            }
            let mut fact = Fact {
                id: 0,
                subject: self.subject,
                predicate: self.predicate,
                object: self.object,
                confidence,
                source: self.source,
                kind: self.kind,
                valid_from,
                valid_until,
                recorded_at: now,
                recorded_until: None,
                archived: false,
                score: None,
            };
            fact.id = store::insert(&tx, &fact)?;
            tx.commit().map_err(store::db_error)?;
            Ok(Memorized { fact, closed, already_known: false })
        })
        .await
    }
}

/// A uniform number in `0..1` from the seed, the fact and the query (SplitMix64), so noise is reproducible and
/// does not depend on the order results come in.
fn noise_sample(seed: u64, fact: i64, query: &str) -> f64 {
    let text = query.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    let mut z = seed ^ text ^ (fact as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

fn ten() -> usize {
    10
}

/// Finds facts by full-text search (any of the query's words, ranked) and filters, as they were true now or
/// at `as_of`, as the agent believes now or believed at `as_recorded`.
#[derive(Debug, Deserialize, Serialize, JsonSchema, Action)]
#[action(id = "memory.recall", output = Vec<Fact>, idempotent, capabilities(memory), cost = cheap)]
pub struct Recall {
    /// Words to look for in subjects, predicates and objects; empty lists the newest facts.
    #[serde(default)]
    pub query: String,
    /// Only facts about this subject.
    #[serde(default)]
    pub subject: Option<String>,
    /// Only facts with this predicate.
    #[serde(default)]
    pub predicate: Option<String>,
    /// What was true at this time (default: now).
    #[serde(default)]
    pub as_of: Option<DateTime<Utc>>,
    /// As the agent believed at this time (default: what it believes now): with `as_of`, "what did the agent
    /// believe on day X about day Y".
    #[serde(default)]
    pub as_recorded: Option<DateTime<Utc>>,
    /// Also facts that a summary replaced.
    #[serde(default)]
    pub include_archived: bool,
    /// How many at most (default 10, at most 100).
    #[serde(default = "ten")]
    pub limit: usize,
}

impl Recall {
    /// Searches, then drops results at the configured noise level, then keeps the best `limit`.
    pub async fn run(self, ctx: ActionContext) -> Result<Vec<Fact>, ActionError> {
        if self.limit == 0 || self.limit > MAX_RECALL {
            return Err(ActionError::validation(format!("`limit` is {}; expected 1 to {MAX_RECALL}", self.limit)));
        }
        let config: MemoryConfig = ctx.skill_state()?;
        let now = ctx.now();
        with_db(&ctx, move |db| {
            let search = store::Search {
                text: store::match_any(&self.query),
                subject: self.subject.as_deref(),
                predicate: self.predicate.as_deref(),
                kind: None,
                true_at: Some(self.as_of.unwrap_or(now)),
                believed_at: self.as_recorded,
                since: None,
                include_archived: self.include_archived,
                cap: CANDIDATES,
            };
            let found = store::search(db, &search, false)?;
            let kept: Vec<Fact> = found
                .into_iter()
                .filter(|f| {
                    config.noise_level <= 0.0 || noise_sample(config.seed, f.id, &self.query) >= config.noise_level
                })
                .take(self.limit)
                .collect();
            Ok(distort(kept, &config, &self.query))
        })
        .await
    }
}

/// Salts the samples of distortion apart from those of dropping, and from each other.
const DISTORT: u64 = 0xD157_0127;
const PARTNER: u64 = 0x9A27_4E12;
const NUDGE: u64 = 0x7E_2A57;

/// Recalled facts with a `distortion` share of them made wrong, reproducibly: each chosen fact takes the
/// object another recalled fact had, and its confidence moves by up to 0.3 either way (kept within 0..1).
/// Nothing changes at 0, or when fewer than two facts were recalled.
fn distort(mut facts: Vec<Fact>, config: &MemoryConfig, query: &str) -> Vec<Fact> {
    if config.distortion <= 0.0 || facts.len() < 2 {
        return facts;
    }
    let objects: Vec<String> = facts.iter().map(|f| f.object.clone()).collect();
    for (i, fact) in facts.iter_mut().enumerate() {
        if noise_sample(config.seed ^ DISTORT, fact.id, query) >= config.distortion {
            continue;
        }
        // Another fact's object: an offset of 1..len from this one, so never its own.
        let offset = 1 + (noise_sample(config.seed ^ PARTNER, fact.id, query) * (objects.len() - 1) as f64) as usize;
        fact.object = objects[(i + offset.min(objects.len() - 1)) % objects.len()].clone();
        let nudge = (noise_sample(config.seed ^ NUDGE, fact.id, query) - 0.5) * 0.6;
        fact.confidence = (fact.confidence + nudge).clamp(0.0, 1.0);
    }
    facts
}

/// Stops believing facts: they stop being true now (or at `at`). Nothing is deleted or overwritten, so `as_of`
/// an earlier time still finds them, and `as_recorded` an earlier time finds them as they were believed then.
#[derive(Debug, Deserialize, Serialize, JsonSchema, Action)]
#[action(id = "memory.forget", output = Forgotten, side_effects, idempotent, capabilities(memory), cost = cheap)]
pub struct Forget {
    /// The fact to forget.
    #[serde(default)]
    pub id: Option<i64>,
    /// Or: every fact still true about this subject (with `predicate`, only those).
    #[serde(default)]
    pub subject: Option<String>,
    /// With `subject`: only facts with this predicate.
    #[serde(default)]
    pub predicate: Option<String>,
    /// When they stop being true (default: now).
    #[serde(default)]
    pub at: Option<DateTime<Utc>>,
}

/// What `memory.forget` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Forgotten {
    /// The ids of the facts closed now.
    pub forgotten: Vec<i64>,
    /// When the change was recorded (the transaction time to pass as `as_recorded`), `None` when nothing changed.
    pub recorded_at: Option<DateTime<Utc>>,
}

impl Forget {
    /// Closes the chosen facts that are still true.
    pub async fn run(self, ctx: ActionContext) -> Result<Forgotten, ActionError> {
        if self.id.is_none() && self.subject.is_none() {
            return Err(ActionError::validation("expected `id`, or `subject` (and maybe `predicate`)"));
        }
        if self.predicate.is_some() && self.subject.is_none() {
            return Err(ActionError::validation("`predicate` needs a `subject`"));
        }
        let clock = ctx.now();
        with_db(&ctx, move |db| {
            let tx = store::write(db)?;
            let now = store::transaction_time(&tx, clock)?;
            let at = self.at.unwrap_or(now);
            let mut targets: Vec<Fact> = Vec::new();
            if let Some(id) = self.id {
                let fact = store::get(&tx, id)?.ok_or_else(|| {
                    ActionError::validation(format!("there is no fact {id}; expected an id recall returned"))
                })?;
                targets.push(fact);
            }
            if let Some(subject) = &self.subject {
                let search = store::Search {
                    text: None,
                    subject: Some(subject),
                    predicate: self.predicate.as_deref(),
                    kind: None,
                    true_at: None,
                    believed_at: None,
                    since: None,
                    include_archived: false,
                    cap: CANDIDATES,
                };
                targets.extend(store::search(&tx, &search, true)?);
            }
            let mut forgotten = Vec::new();
            for fact in targets.into_iter().filter(|f| f.valid_until.is_none()) {
                if !forgotten.contains(&fact.id) {
                    store::revise(&tx, &fact, now, |f| f.valid_until = Some(at))?;
                    forgotten.push(fact.id);
                }
            }
            tx.commit().map_err(store::db_error)?;
            let recorded_at = (!forgotten.is_empty()).then_some(now);
            Ok(Forgotten { forgotten, recorded_at })
        })
        .await
    }
}

fn fifty() -> usize {
    50
}

/// Folds recent episodic facts into one summary fact and archives them. The summary is deterministic unless
/// the mount options name a `summarizer` action, which is called through the agent's gate.
#[derive(Debug, Deserialize, Serialize, JsonSchema, Action)]
#[action(id = "memory.reflect", output = Reflection, side_effects, capabilities(memory), cost = normal)]
pub struct Reflect {
    /// Only episodes about this subject; the summary is about it too (default subject: `reflection`).
    #[serde(default)]
    pub subject: Option<String>,
    /// Only episodes that became true at or after this time.
    #[serde(default)]
    pub since: Option<DateTime<Utc>>,
    /// How many episodes at most, oldest first (default 50).
    #[serde(default = "fifty")]
    pub limit: usize,
}

/// What `memory.reflect` did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Reflection {
    /// The summary fact, if there was anything to fold.
    pub summary: Option<Fact>,
    /// The ids of the episodes folded into it (now archived).
    pub folded: Vec<i64>,
}

/// The deterministic summary: how many episodes, their span, and each in order.
fn summarize(episodes: &[Fact]) -> String {
    let (Some(first), Some(last)) = (episodes.first(), episodes.last()) else { return String::new() };
    let items: Vec<String> = episodes.iter().map(|f| format!("{} {} {}", f.subject, f.predicate, f.object)).collect();
    format!(
        "{} episodes from {} to {}: {}",
        episodes.len(),
        first.valid_from.to_rfc3339(),
        last.valid_from.to_rfc3339(),
        items.join("; ")
    )
}

impl Reflect {
    /// Reads the episodes, writes the summary (calling the summarizer if one is set), archives them.
    pub async fn run(self, ctx: ActionContext) -> Result<Reflection, ActionError> {
        if self.limit == 0 {
            return Err(ActionError::validation("`limit` is 0; expected at least 1"));
        }
        let config: MemoryConfig = ctx.skill_state()?;
        let subject = self.subject.clone();
        let (since, limit) = (self.since, self.limit);
        let episodes = with_db(&ctx, move |db| {
            let search = store::Search {
                text: None,
                subject: subject.as_deref(),
                predicate: None,
                kind: Some(FactKind::Episodic),
                true_at: None,
                believed_at: None,
                since,
                include_archived: false,
                cap: limit,
            };
            store::search(db, &search, true)
        })
        .await?;
        if episodes.is_empty() {
            return Ok(Reflection { summary: None, folded: Vec::new() });
        }
        let text = match &config.summarizer {
            None => summarize(&episodes),
            Some(action) => match ctx.call(action, json!({"facts": episodes})).await? {
                Value::String(text) => text,
                Value::Object(map) if map.get("summary").is_some_and(Value::is_string) => {
                    map["summary"].as_str().unwrap_or_default().to_owned()
                }
                other => {
                    return Err(ActionError::critical(format!(
                        "summarizer `{action}` returned {other}; expected a string or {{\"summary\": string}}"
                    )));
                }
            },
        };
        let confidence = episodes.iter().map(|f| f.confidence).sum::<f64>() / episodes.len() as f64;
        let folded: Vec<i64> = episodes.iter().map(|f| f.id).collect();
        let about = self.subject.unwrap_or_else(|| "reflection".to_owned());
        let clock = ctx.now();
        with_db(&ctx, move |db| {
            let tx = store::write(db)?;
            let now = store::transaction_time(&tx, clock)?;
            let mut summary = Fact {
                id: 0,
                subject: about,
                predicate: "summary".to_owned(),
                object: text,
                confidence,
                source: Some("memory.reflect".to_owned()),
                kind: FactKind::Summary,
                valid_from: now,
                valid_until: None,
                recorded_at: now,
                recorded_until: None,
                archived: false,
                score: None,
            };
            summary.id = store::insert(&tx, &summary)?;
            for id in &folded {
                // An episode changed since it was read is archived as it is now.
                if let Some(episode) = store::get(&tx, *id)?.filter(|e| !e.archived) {
                    store::revise(&tx, &episode, now, |f| f.archived = true)?;
                }
            }
            tx.commit().map_err(store::db_error)?;
            Ok(Reflection { summary: Some(summary), folded })
        })
        .await
    }
}

/// The agent's knowledge: facts with two clocks, full-text recall, forgetting that keeps history, reflection.
#[derive(Skill)]
#[skill(
    id = "memory",
    name = "Memory",
    version = "1.0.0",
    category = "knowledge",
    tags("memory", "facts", "search"),
    state = MemoryConfig,
    actions(Memorize, Recall, Forget, Reflect),
    instructions = "memory.memorize a fact as subject, predicate, object; a new object for the same subject and \
                    predicate replaces the old one. memory.recall searches by words; pass as_of to ask what was \
                    true at a time, and as_recorded to ask what you believed then. memory.forget never deletes: earlier times still remember."
)]
pub struct Memory;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noise_samples_are_uniform_enough_and_reproducible() {
        let kept = (0..10_000).filter(|id| noise_sample(7, *id, "alice") >= 0.5).count();
        assert!((4_700..=5_300).contains(&kept), "{kept}");
        assert_eq!(noise_sample(7, 3, "q"), noise_sample(7, 3, "q"));
        assert_ne!(noise_sample(7, 3, "q"), noise_sample(8, 3, "q"));
    }

    #[test]
    fn transaction_times_never_repeat_or_go_back() {
        let folder = tempfile::tempdir().unwrap();
        let db = store::open(&folder.path().join(DATABASE)).unwrap();
        let first = store::transaction_time(&db, Utc::now()).unwrap();
        assert!(first <= Utc::now());
        // A write recorded ahead of the clock (it was moved back since): the next write comes after it anyway.
        let ahead = DateTime::from_timestamp_millis(Utc::now().timestamp_millis() + 3_600_000).unwrap();
        let fact = Fact {
            id: 0,
            subject: "s".into(),
            predicate: "p".into(),
            object: "o".into(),
            confidence: 1.0,
            source: None,
            kind: FactKind::Semantic,
            valid_from: ahead,
            valid_until: None,
            recorded_at: ahead,
            recorded_until: None,
            archived: false,
            score: None,
        };
        store::insert(&db, &fact).unwrap();
        assert_eq!(store::transaction_time(&db, Utc::now()).unwrap(), ahead + chrono::TimeDelta::milliseconds(1));
    }

    #[test]
    fn queries_become_safe_fts_matches() {
        assert_eq!(
            store::match_any("Where does Alice live?").as_deref(),
            Some(r#""where" OR "does" OR "alice" OR "live""#)
        );
        assert_eq!(store::match_any(r#"" OR NEAR( *"#).as_deref(), Some(r#""or" OR "near""#), "syntax becomes words");
        assert_eq!(store::match_any(r#"" ( * - ^"#), None);
    }
}
