//! Which tools to offer the model for a turn, when more are mounted than a model reads well: a skill matcher
//! that scores each tool against what was asked, by exact name, by its skill's tags, and by keywords (BM25 over
//! its name, description and parameter names), plus an optional semantic score from embeddings
//! ([`SemanticScorer`]). The best `max_tools` are offered; the scores are reported with the model call's run.

use crate::chat::ToolDef;
use crate::error::ModelError;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;

/// A tool the matcher can offer: its definition and its skill's tags.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// The tool.
    pub tool: ToolDef,
    /// Its skill's tags.
    pub tags: Vec<String>,
}

/// How one tool scored for a turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Score {
    /// The tool.
    pub name: String,
    /// The total it is ranked by.
    pub score: f64,
    /// Whether what was asked names it.
    pub exact: bool,
    /// How many of its skill's tags what was asked mentions.
    pub tags: usize,
    /// Its keyword (BM25) score.
    pub keywords: f64,
    /// Its semantic score (cosine similarity of embeddings), when a scorer gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub semantic: Option<f64>,
}

/// What an exact mention of a tool's name adds.
const EXACT: f64 = 10.0;
/// What each of its skill's tags mentioned adds.
const TAG: f64 = 2.0;
/// What a perfect semantic match adds.
const SEMANTIC: f64 = 5.0;
/// BM25's term-frequency saturation and length normalization.
const K1: f64 = 1.2;
const B: f64 = 0.75;

/// Lowercase words of letters and digits (`fs__read_file` is `fs`, `read`, `file`).
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
}

/// The words a tool is found by: its name, description and parameter names.
fn document(tool: &ToolDef) -> Vec<String> {
    let mut text = format!("{} {}", tool.name, tool.description);
    if let Some(properties) = tool.parameters.get("properties").and_then(|p| p.as_object()) {
        for name in properties.keys() {
            text.push(' ');
            text.push_str(name);
        }
    }
    words(&text)
}

/// Scores every candidate against `query`, in the candidates' order (no semantic score).
pub fn score(query: &str, candidates: &[Candidate]) -> Vec<Score> {
    let asked = words(query);
    let asked_set: HashSet<&str> = asked.iter().map(String::as_str).collect();
    let lowered = query.to_lowercase();
    let documents: Vec<Vec<String>> = candidates.iter().map(|c| document(&c.tool)).collect();
    let n = documents.len() as f64;
    let average = documents.iter().map(Vec::len).sum::<usize>() as f64 / n.max(1.0);
    let mut containing: HashMap<&str, usize> = HashMap::new();
    for document in &documents {
        let distinct: HashSet<&str> = document.iter().map(String::as_str).collect();
        for word in distinct {
            *containing.entry(word).or_default() += 1;
        }
    }
    candidates
        .iter()
        .zip(&documents)
        .map(|(candidate, document)| {
            let mut keywords = 0.0;
            for word in &asked_set {
                let frequency = document.iter().filter(|w| w == word).count() as f64;
                if frequency == 0.0 {
                    continue;
                }
                let having = containing.get(word).copied().unwrap_or(0) as f64;
                let idf = ((n - having + 0.5) / (having + 0.5) + 1.0).ln();
                let length = document.len() as f64 / average.max(1.0);
                keywords += idf * frequency * (K1 + 1.0) / (frequency + K1 * (1.0 - B + B * length));
            }
            let name = candidate.tool.name.to_lowercase();
            let dotted = name.replace("__", ".");
            let exact = lowered.contains(&name) || lowered.contains(&dotted);
            let tags = candidate.tags.iter().filter(|tag| asked_set.contains(tag.to_lowercase().as_str())).count();
            let score = keywords + if exact { EXACT } else { 0.0 } + TAG * tags as f64;
            Score { name: candidate.tool.name.clone(), score, exact, tags, keywords, semantic: None }
        })
        .collect()
}

/// Adds semantic similarities (one per candidate, in order, from -1 to 1) to the scores.
pub fn add_semantic(scores: &mut [Score], similarities: &[f64]) {
    for (score, similarity) in scores.iter_mut().zip(similarities) {
        let similarity = if similarity.is_finite() { similarity.clamp(-1.0, 1.0) } else { 0.0 };
        score.semantic = Some(similarity);
        score.score += SEMANTIC * similarity.max(0.0);
    }
}

/// The names of the best `max` tools, best first (ties keep the candidates' order).
pub fn best(scores: &[Score], max: usize) -> Vec<String> {
    let mut ranked: Vec<(usize, &Score)> = scores.iter().enumerate().collect();
    ranked.sort_by(|(a, x), (b, y)| y.score.total_cmp(&x.score).then(a.cmp(b)));
    ranked.into_iter().take(max).map(|(_, s)| s.name.clone()).collect()
}

/// What [`SemanticScorer::similarities`] returns.
pub type Similarities<'a> = Pin<Box<dyn Future<Output = Result<Vec<f64>, ModelError>> + Send + 'a>>;

/// Scores tools by meaning: the similarity of what was asked to each tool's description, from -1 to 1, one per
/// tool in order (embeddings from the provider, where it has them).
pub trait SemanticScorer: Send + Sync {
    /// The similarities.
    fn similarities<'a>(&'a self, query: &'a str, tools: &'a [ToolDef]) -> Similarities<'a>;
}

/// The cosine similarity of two vectors (0 when either is empty or zero, or their lengths differ).
pub fn cosine(a: &[f64], b: &[f64]) -> f64 {
    if a.len() != b.len() || a.is_empty() {
        return 0.0;
    }
    let dot: f64 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norms = a.iter().map(|x| x * x).sum::<f64>().sqrt() * b.iter().map(|x| x * x).sum::<f64>().sqrt();
    if norms == 0.0 { 0.0 } else { dot / norms }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn tool(name: &str, description: &str, params: &[&str]) -> Candidate {
        let properties: serde_json::Map<String, serde_json::Value> =
            params.iter().map(|p| ((*p).to_owned(), json!({"type": "string"}))).collect();
        Candidate {
            tool: ToolDef {
                name: name.into(),
                description: description.into(),
                parameters: json!({"type": "object", "properties": properties}),
            },
            tags: Vec::new(),
        }
    }

    fn tools() -> Vec<Candidate> {
        vec![
            tool("fs__read", "Reads a file from the agent's drive.", &["path"]),
            tool("fs__write", "Writes a file to the agent's drive.", &["path", "text"]),
            tool("http__get", "Fetches a web page over HTTP.", &["url"]),
            tool("time__now", "The current time in a timezone.", &["timezone"]),
            Candidate {
                tags: vec!["memory".into(), "recall".into()],
                ..tool("memory__get", "Looks up a fact.", &["key"])
            },
        ]
    }

    #[test]
    fn keywords_tags_and_names_find_the_right_tools() {
        let tools = tools();
        assert_eq!(best(&score("what time is it in Tokyo? use the timezone", &tools), 1), ["time__now"]);
        assert_eq!(best(&score("fetch the web page at this url", &tools), 1), ["http__get"]);
        let recall = score("do you recall my name?", &tools);
        assert_eq!(best(&recall, 1), ["memory__get"], "by its skill's tag");
        assert_eq!(recall[4].tags, 1);
        let named = score("please call fs.write now", &tools);
        assert!(named[1].exact, "the dotted action id names it");
        assert_eq!(best(&named, 1), ["fs__write"]);
    }

    #[test]
    fn a_semantic_score_can_lift_a_tool_keywords_miss() {
        let tools = tools();
        let mut scores = score("how late is it", &tools);
        add_semantic(&mut scores, &[0.1, 0.1, 0.2, 0.9, 0.0]);
        assert_eq!(best(&scores, 1), ["time__now"]);
        assert_eq!(scores[3].semantic, Some(0.9));
    }

    proptest! {
        /// The ranking does not depend on the order tools were mounted in (ties aside), and a tool the question
        /// names is always offered.
        #[test]
        fn order_does_not_matter_and_a_named_tool_is_offered(
            question in "[a-z ]{0,40}",
            named in 0usize..5,
            rotation in 0usize..5,
            max in 1usize..5,
        ) {
            let tools = tools();
            let query = format!("{question} {}", tools[named].tool.name);
            let scores = score(&query, &tools);
            let mut rotated = tools.clone();
            rotated.rotate_left(rotation);
            let again = score(&query, &rotated);
            for s in &scores {
                let t = again.iter().find(|a| a.name == s.name).expect("the same tools");
                prop_assert!((s.score - t.score).abs() < 1e-9, "{} scored {} then {}", s.name, s.score, t.score);
            }
            prop_assert!(best(&scores, max).contains(&tools[named].tool.name));
        }
    }

    #[test]
    fn cosine_is_plain() {
        assert!((cosine(&[1.0, 0.0], &[1.0, 0.0]) - 1.0).abs() < 1e-12);
        assert_eq!(cosine(&[1.0, 0.0], &[0.0, 1.0]), 0.0);
        assert_eq!(cosine(&[], &[]), 0.0);
        assert_eq!(cosine(&[1.0], &[1.0, 2.0]), 0.0);
    }
}
