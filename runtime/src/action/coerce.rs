//! Safe coercion of params toward an action's schema, for callers (LLMs above all) that send `"5"` for an
//! integer, `"true"` for a boolean, one value for an array, or `null` for a field they mean to leave out (what
//! OpenAI's strict mode makes them send for every optional field). Only these cases are coerced; everything
//! else is left for validation to report, with the JSON pointer of each problem.

use serde_json::{Map, Value};

/// `params` made to fit `schema` where a safe coercion does it, leaving everything else as it was: a string
/// holding an integer, a number or `true`/`false` where that type is expected (and a string is not); a single
/// value where an array is expected (as a one-element array); and `null` for an optional property that does
/// not accept `null` (the property is removed, so its default applies). Pure; works through `$ref`, `allOf` of
/// one schema, and `anyOf`/`oneOf` with a `null` branch (`Option<T>`).
///
/// At the top, `null` params for a schema of an object with no required properties (an action with nothing
/// to be told, or only optional fields) are `{}`: "no params", as a caller that sends no arguments means it.
pub fn coerce(schema: &Value, params: Value) -> Value {
    if params.is_null() && takes_no_params(schema) {
        return Value::Object(Map::new());
    }
    coerce_at(schema, schema, params, 0)
}

/// Whether a schema is one of an object that needs nothing: it takes objects, not `null`, and requires no
/// property.
fn takes_no_params(schema: &Value) -> bool {
    let types = types(schema);
    types.contains(&"object")
        && !types.contains(&"null")
        && schema.get("required").and_then(Value::as_array).is_none_or(Vec::is_empty)
}

/// How deep schemas are followed (a recursive `$ref` stops here and is left as it is).
const MAX_DEPTH: usize = 32;

fn coerce_at(root: &Value, schema: &Value, value: Value, depth: usize) -> Value {
    if depth > MAX_DEPTH {
        return value;
    }
    let schema = resolve(root, schema, depth);
    let types = types(schema);
    match value {
        Value::String(text) if !types.is_empty() && !types.contains(&"string") => match from_text(&text, &types) {
            Some(scalar) => scalar,
            None if types.contains(&"array") => {
                let single = Value::String(text);
                let item = schema.get("items").map_or(single.clone(), |item| coerce_at(root, item, single, depth + 1));
                Value::Array(vec![item])
            }
            None => Value::String(text),
        },
        Value::Object(map) if types.is_empty() || types.contains(&"object") => {
            Value::Object(coerce_object(root, schema, map, depth))
        }
        Value::Array(items) if types.is_empty() || types.contains(&"array") => {
            let item = schema.get("items");
            Value::Array(
                items
                    .into_iter()
                    .map(|v| match item {
                        Some(item) => coerce_at(root, item, v, depth + 1),
                        None => v,
                    })
                    .collect(),
            )
        }
        Value::Null => Value::Null,
        single if types.contains(&"array") && !types.contains(&kind(&single)) => {
            let item = schema.get("items").map_or(single.clone(), |item| coerce_at(root, item, single, depth + 1));
            Value::Array(vec![item])
        }
        other => other,
    }
}

/// The schema a `$ref`, a lone `allOf`, or an `anyOf`/`oneOf` of one schema and `null` stands for.
fn resolve<'a>(root: &'a Value, schema: &'a Value, depth: usize) -> &'a Value {
    if depth > MAX_DEPTH {
        return schema;
    }
    if let Some(Value::String(reference)) = schema.get("$ref")
        && let Some(target) = reference.strip_prefix('#').and_then(|pointer| root.pointer(pointer))
    {
        return resolve(root, target, depth + 1);
    }
    if let Some(Value::Array(all)) = schema.get("allOf")
        && all.len() == 1
    {
        return resolve(root, &all[0], depth + 1);
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = schema.get(key) {
            let not_null: Vec<&Value> = branches.iter().filter(|b| !is_null_schema(b)).collect();
            if not_null.len() == 1 && branches.len() == 2 {
                return resolve(root, not_null[0], depth + 1);
            }
        }
    }
    schema
}

fn is_null_schema(schema: &Value) -> bool {
    schema.get("type") == Some(&Value::String("null".into())) || schema.get("const") == Some(&Value::Null)
}

/// The JSON types a (resolved) schema names; empty when it names none (anything goes).
fn types(schema: &Value) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(one)) => vec![one.as_str()],
        Some(Value::Array(many)) => many.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// The most schemas [`accepts_null`] looks at for one property: its branches (`anyOf`, `allOf`, `$ref`s to
/// shared definitions) can make a schema whose full walk is exponential in its size, so the walk has a budget
/// and, once it is spent, answers "yes" (the `null` is left for validation to judge).
const ACCEPTS_NULL_BUDGET: usize = 256;

/// Whether a schema accepts `null`: it names the `null` type, has a `null` branch, or names no type at all.
/// Within [`ACCEPTS_NULL_BUDGET`] schema visits; past it, `true`.
fn accepts_null(root: &Value, schema: &Value, depth: usize) -> bool {
    let mut budget = ACCEPTS_NULL_BUDGET;
    accepts_null_within(root, schema, depth, &mut budget)
}

fn accepts_null_within(root: &Value, schema: &Value, depth: usize, budget: &mut usize) -> bool {
    if *budget == 0 || depth > MAX_DEPTH || schema == &Value::Bool(true) {
        return true;
    }
    *budget -= 1;
    if let Some(Value::String(reference)) = schema.get("$ref")
        && let Some(target) = reference.strip_prefix('#').and_then(|pointer| root.pointer(pointer))
    {
        return accepts_null_within(root, target, depth + 1, budget);
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = schema.get(key) {
            return branches.iter().any(|b| accepts_null_within(root, b, depth + 1, budget));
        }
    }
    if let Some(Value::Array(all)) = schema.get("allOf") {
        return all.iter().all(|s| accepts_null_within(root, s, depth + 1, budget));
    }
    match schema.get("type") {
        Some(Value::String(one)) => one == "null",
        Some(Value::Array(many)) => many.iter().any(|t| t == "null"),
        _ => schema.get("enum").is_none_or(|values| values.as_array().is_some_and(|v| v.contains(&Value::Null))),
    }
}

fn coerce_object(root: &Value, schema: &Value, map: Map<String, Value>, depth: usize) -> Map<String, Value> {
    let properties = schema.get("properties").and_then(Value::as_object);
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map_or_else(Vec::new, |r| r.iter().filter_map(Value::as_str).collect());
    let mut out = Map::with_capacity(map.len());
    for (key, value) in map {
        let Some(property) = properties.and_then(|p| p.get(&key)) else {
            out.insert(key, value);
            continue;
        };
        // `null` for an optional property that cannot be null means "not given": its default applies.
        if value.is_null() && !required.contains(&key.as_str()) && !accepts_null(root, property, depth + 1) {
            continue;
        }
        let coerced = coerce_at(root, property, value, depth + 1);
        out.insert(key, coerced);
    }
    out
}

/// A string where a non-string type is expected: its integer, number or boolean when it holds one exactly.
fn from_text(text: &str, types: &[&str]) -> Option<Value> {
    let trimmed = text.trim();
    if types.contains(&"integer") {
        if let Ok(n) = trimmed.parse::<i64>() {
            return Some(Value::from(n));
        }
        if let Ok(n) = trimmed.parse::<u64>() {
            return Some(Value::from(n));
        }
    }
    if types.contains(&"number")
        && let Ok(n) = trimmed.parse::<f64>()
        && let Some(number) = serde_json::Number::from_f64(n)
    {
        return Some(Value::Number(number));
    }
    if types.contains(&"boolean") {
        match trimmed {
            "true" => return Some(Value::Bool(true)),
            "false" => return Some(Value::Bool(false)),
            _ => {}
        }
    }
    None
}

/// The JSON type of a value, as a schema names it.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "count": {"type": "integer", "default": 3},
                "ratio": {"type": "number"},
                "flag": {"type": "boolean"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "ids": {"type": "array", "items": {"type": "integer"}},
                "name": {"type": "string"},
                "maybe": {"anyOf": [{"$ref": "#/$defs/Inner"}, {"type": "null"}]},
                "nullable": {"type": ["integer", "null"]},
                "needed": {"type": "integer"}
            },
            "required": ["needed"],
            "$defs": {"Inner": {"type": "object", "properties": {"n": {"type": "integer"}}}}
        })
    }

    /// A schema whose full walk is exponential (each definition used twice by the one before, under `allOf`)
    /// is coerced in bounded time: the `null` walk stops at its budget.
    #[test]
    fn a_validation_bomb_does_not_stall_coercion() {
        let mut defs = serde_json::Map::new();
        for i in 0..64 {
            let next = format!("#/$defs/d{}", i + 1);
            defs.insert(format!("d{i}"), json!({"allOf": [{"$ref": next}, {"$ref": next}]}));
        }
        defs.insert("d64".to_owned(), json!({"type": "string"}));
        let schema = json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/d0"}}, "$defs": defs});
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = done.send(coerce(&schema, json!({"x": null})));
        });
        let coerced = finished.recv_timeout(std::time::Duration::from_secs(60)).expect("coercion finished");
        assert_eq!(coerced, json!({"x": null}), "past the budget the null is left for validation");
    }

    #[test]
    fn the_safe_cases_are_coerced() {
        let given = json!({"count": "5", "ratio": "0.5", "flag": "true", "tags": "one", "ids": ["1", 2],
                           "maybe": {"n": "7"}, "needed": "-2"});
        let expected = json!({"count": 5, "ratio": 0.5, "flag": true, "tags": ["one"], "ids": [1, 2],
                              "maybe": {"n": 7}, "needed": -2});
        assert_eq!(coerce(&schema(), given), expected);
    }

    #[test]
    fn null_params_are_no_params_only_where_nothing_is_required() {
        let empty = json!({"type": "object", "properties": {}});
        assert_eq!(coerce(&empty, Value::Null), json!({}));
        let optional = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
        assert_eq!(coerce(&optional, Value::Null), json!({}));
        // Something is required: `null` is left for validation to report.
        assert_eq!(coerce(&schema(), Value::Null), Value::Null);
        // A schema that takes `null` itself keeps it.
        let nullable = json!({"type": ["object", "null"], "properties": {}});
        assert_eq!(coerce(&nullable, Value::Null), Value::Null);
    }

    #[test]
    fn null_means_the_default_for_optional_fields_only() {
        let given = json!({"count": null, "maybe": null, "nullable": null, "needed": null, "name": null});
        // `count` and `name` cannot be null and are optional: dropped. `maybe` and `nullable` take null.
        // `needed` is required: left for validation to report.
        assert_eq!(coerce(&schema(), given), json!({"maybe": null, "nullable": null, "needed": null}));
    }

    #[test]
    fn everything_else_is_left_alone() {
        let given = json!({"count": "five", "flag": "yes", "name": 5, "ratio": "NaN", "extra": "x"});
        assert_eq!(coerce(&schema(), given.clone()), given);
        assert_eq!(coerce(&json!({"type": "string"}), json!("5")), json!("5"));
        assert_eq!(coerce(&json!(true), json!({"a": "1"})), json!({"a": "1"}));
    }
}
