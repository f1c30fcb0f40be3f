//! Strategies for signals: kinds drawn from patterns (`order.*`, `order.**`), with data from a strategy.

use agentry::Signal;
use agentry::pattern::Pattern;
use proptest::prelude::*;
use serde_json::Value;

/// Kinds that match one of `patterns`: a `*` segment becomes one random segment and `**` zero to two of them.
/// `Err` names a pattern that is not valid.
pub fn kinds(patterns: &[&str]) -> Result<BoxedStrategy<String>, String> {
    let mut choices = Vec::with_capacity(patterns.len());
    for text in patterns {
        let pattern = Pattern::new(*text).map_err(|err| format!("`{text}` is not a signal kind pattern: {err}"))?;
        choices.push(kind_for(pattern.as_str()));
    }
    if choices.is_empty() {
        return Err("no signal kind patterns were given; expected at least one, such as `order.*`".to_owned());
    }
    Ok(proptest::strategy::Union::new(choices).boxed())
}

fn kind_for(pattern: &str) -> BoxedStrategy<String> {
    let segment = || "[a-z][a-z0-9_]{0,5}";
    let parts: Vec<BoxedStrategy<Vec<String>>> = pattern
        .split('.')
        .map(|part| match part {
            "*" => segment().prop_map(|s| vec![s]).boxed(),
            "**" => prop::collection::vec(segment(), 0..=2).boxed(),
            literal => Just(vec![literal.to_owned()]).boxed(),
        })
        .collect();
    parts
        .prop_map(|parts| parts.concat().join("."))
        .prop_filter("a kind has at least one segment", |k| !k.is_empty())
        .boxed()
}

/// Signals whose kinds match `patterns`, with data from `data` (use [`crate::schema::values`] of a schema, or
/// `Just(Value::Null)`). Each signal is a root signal from the default source.
pub fn signals(patterns: &[&str], data: BoxedStrategy<Value>) -> Result<BoxedStrategy<Signal>, String> {
    Ok((kinds(patterns)?, data)
        .prop_filter_map("a generated kind is valid", |(kind, data)| Signal::new(kind, data).ok())
        .boxed())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::test_runner::TestRunner;

    #[test]
    fn generated_kinds_match_their_patterns() {
        let patterns = ["order.*", "job.**", "tick"];
        let compiled: Vec<Pattern> = patterns.iter().map(|p| Pattern::new(*p).expect("a pattern")).collect();
        let mut runner = TestRunner::default();
        runner
            .run(&kinds(&patterns).expect("valid patterns"), |kind| {
                prop_assert!(compiled.iter().any(|p| p.matches(&kind)), "{kind} matches none of the patterns");
                Ok(())
            })
            .expect("every kind matches");
    }

    #[test]
    fn bad_patterns_are_named() {
        let err = kinds(&["order..x"]).expect_err("refused");
        assert!(err.contains("order..x"), "{err}");
        assert!(kinds(&[]).is_err());
    }
}
