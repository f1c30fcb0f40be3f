//! Dotted-name patterns: `order.*` (exactly one segment in place of `*`) and `order.**` (any number of
//! segments, including none, in place of `**`). Routes match signal kinds with them and policies match action
//! ids with them.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt;

/// One piece of a pattern between dots.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Segment {
    Literal(String),
    /// `*`: exactly one segment.
    One,
    /// `**`: zero or more segments.
    Any,
}

/// Why a pattern could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    /// The pattern was empty.
    #[error("pattern must not be empty; expected dotted segments such as `order.*` or `order.**`")]
    Empty,
    /// A segment between dots was empty.
    #[error("pattern `{0}` has an empty segment; expected non-empty segments separated by single dots")]
    EmptySegment(String),
    /// A `*` was mixed with other characters inside one segment.
    #[error("pattern `{pattern}` has segment `{segment}`; a wildcard must be a whole segment (`*` or `**`)")]
    PartialWildcard {
        /// The rejected pattern.
        pattern: String,
        /// The offending segment.
        segment: String,
    },
}

/// A parsed dotted-name pattern with `*` and `**` wildcards.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(try_from = "String", into = "String")]
#[schemars(with = "String")]
pub struct Pattern {
    source: String,
    #[schemars(skip)]
    segments: Vec<Segment>,
}

impl Pattern {
    /// Parses a pattern such as `order.*`, `**.failed` or `arithmetic.add`.
    pub fn new(pattern: impl Into<String>) -> Result<Self, PatternError> {
        let source = pattern.into();
        if source.is_empty() {
            return Err(PatternError::Empty);
        }
        let mut segments = Vec::new();
        for part in source.split('.') {
            let segment = match part {
                "" => return Err(PatternError::EmptySegment(source.clone())),
                "*" => Segment::One,
                "**" => Segment::Any,
                literal if literal.contains('*') => {
                    return Err(PatternError::PartialWildcard { pattern: source.clone(), segment: part.into() });
                }
                literal => Segment::Literal(literal.to_owned()),
            };
            // `**.**` matches exactly what `**` matches; keeping one makes matching linear.
            if segment == Segment::Any && segments.last() == Some(&Segment::Any) {
                continue;
            }
            segments.push(segment);
        }
        Ok(Self { source, segments })
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether a dotted name matches this pattern.
    pub fn matches(&self, name: &str) -> bool {
        let parts: Vec<&str> = name.split('.').collect();
        // Classic wildcard matching over segments: remember the last `**` and how much it has eaten, and on a
        // mismatch let it eat one more part. Linear in practice, never exponential.
        let (mut p, mut n) = (0, 0);
        let mut backtrack: Option<(usize, usize)> = None;
        while n < parts.len() {
            match self.segments.get(p) {
                Some(Segment::Any) => {
                    backtrack = Some((p, n));
                    p += 1;
                    continue;
                }
                Some(Segment::One) => {
                    p += 1;
                    n += 1;
                    continue;
                }
                Some(Segment::Literal(lit)) if lit == parts[n] => {
                    p += 1;
                    n += 1;
                    continue;
                }
                _ => {}
            }
            match backtrack {
                Some((star, eaten)) => {
                    p = star + 1;
                    n = eaten + 1;
                    backtrack = Some((star, eaten + 1));
                }
                None => return false,
            }
        }
        self.segments[p..].iter().all(|s| *s == Segment::Any)
    }
}

impl PartialOrd for Pattern {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// Patterns order by their text, so they can key maps.
impl Ord for Pattern {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.source.cmp(&other.source)
    }
}

impl TryFrom<String> for Pattern {
    type Error = PatternError;
    fn try_from(source: String) -> Result<Self, PatternError> {
        Self::new(source)
    }
}

impl TryFrom<&str> for Pattern {
    type Error = PatternError;
    fn try_from(source: &str) -> Result<Self, PatternError> {
        Self::new(source)
    }
}

impl std::str::FromStr for Pattern {
    type Err = PatternError;
    fn from_str(source: &str) -> Result<Self, PatternError> {
        Self::new(source)
    }
}

impl From<Pattern> for String {
    fn from(p: Pattern) -> String {
        p.source
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_pattern_shows_and_orders_by_its_text() {
        let (a, b) = (Pattern::new("a.*").unwrap(), Pattern::new("b.**").unwrap());
        assert_eq!((a.as_str(), a.to_string(), String::from(b.clone())), ("a.*", "a.*".to_owned(), "b.**".to_owned()));
        assert_eq!(a.partial_cmp(&b), Some(std::cmp::Ordering::Less));
        assert_eq!(b.partial_cmp(&a), Some(std::cmp::Ordering::Greater));
    }

    /// The reference model: a direct recursive reading of the definition.
    fn model(pattern: &[&str], name: &[&str]) -> bool {
        match (pattern.first(), name.first()) {
            (None, None) => true,
            (None, Some(_)) => false,
            (Some(&"**"), _) => model(&pattern[1..], name) || (!name.is_empty() && model(pattern, &name[1..])),
            (Some(_), None) => false,
            (Some(&"*"), Some(_)) => model(&pattern[1..], &name[1..]),
            (Some(lit), Some(part)) => lit == part && model(&pattern[1..], &name[1..]),
        }
    }

    #[test]
    fn examples_from_the_design() {
        let p = |s: &str| Pattern::new(s).unwrap();
        assert!(p("order.*").matches("order.placed"));
        assert!(!p("order.*").matches("order.placed.late"));
        assert!(!p("order.*").matches("order"));
        assert!(p("order.**").matches("order"));
        assert!(p("order.**").matches("order.placed.late"));
        assert!(p("**.failed").matches("action.failed"));
        assert!(p("**").matches("anything.at.all"));
        assert!(!p("action.completed").matches("action.failed"));
    }

    #[test]
    fn rejects_malformed_patterns() {
        assert_eq!(Pattern::new(""), Err(PatternError::Empty));
        assert!(matches!(Pattern::new("a..b"), Err(PatternError::EmptySegment(_))));
        let err = Pattern::new("order.pl*").unwrap_err();
        assert!(err.to_string().contains("`pl*`"), "{err}");
        assert!(serde_json::from_str::<Pattern>("\"a.*x\"").is_err());
    }

    fn segment() -> impl Strategy<Value = &'static str> {
        prop_oneof![Just("a"), Just("b"), Just("c")]
    }

    fn pattern_segment() -> impl Strategy<Value = &'static str> {
        prop_oneof![Just("a"), Just("b"), Just("*"), Just("**")]
    }

    proptest! {
        #[test]
        fn matching_agrees_with_the_model(
            pattern in prop::collection::vec(pattern_segment(), 1..6),
            name in prop::collection::vec(segment(), 1..8),
        ) {
            let compiled = Pattern::new(pattern.join(".")).unwrap();
            prop_assert_eq!(compiled.matches(&name.join(".")), model(&pattern, &name));
        }

        #[test]
        fn serde_round_trip_keeps_the_meaning(pattern in prop::collection::vec(pattern_segment(), 1..6)) {
            let compiled = Pattern::new(pattern.join(".")).unwrap();
            let back: Pattern = serde_json::from_value(serde_json::to_value(&compiled).unwrap()).unwrap();
            prop_assert_eq!(back, compiled);
        }
    }
}
