//! OpenAI's strict-mode dialect of JSON Schema: every object closed and every property required, with
//! optional properties made nullable so "absent" can still be said.

use serde_json::{Map, Value, json};

/// String formats strict mode accepts; others (such as schemars' `double` or `uint32`) are dropped.
const STRICT_FORMATS: &[&str] = &["date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"];

/// Rewrites a JSON Schema into strict mode: `additionalProperties: false` and all properties `required` on
/// every object; properties that were optional become nullable; `oneOf` becomes `anyOf`; a lone `allOf` is
/// merged in; `$schema`, `default` and unsupported formats are removed.
pub fn strict_schema(schema: &Value) -> Value {
    let mut out = schema.clone();
    if let Some(map) = out.as_object_mut() {
        map.remove("$schema");
    }
    rewrite(&mut out);
    out
}

fn rewrite(schema: &mut Value) {
    let Some(map) = schema.as_object_mut() else { return };
    merge_single_all_of(map);
    map.remove("default");
    if let Some(Value::String(format)) = map.get("format")
        && !STRICT_FORMATS.contains(&format.as_str())
    {
        map.remove("format");
    }
    if let Some(one_of) = map.remove("oneOf") {
        map.insert("anyOf".into(), one_of);
    }
    for key in ["anyOf", "prefixItems"] {
        if let Some(Value::Array(items)) = map.get_mut(key) {
            items.iter_mut().for_each(rewrite);
        }
    }
    for key in ["items", "not"] {
        if let Some(sub) = map.get_mut(key) {
            rewrite(sub);
        }
    }
    for key in ["$defs", "definitions"] {
        if let Some(Value::Object(defs)) = map.get_mut(key) {
            defs.values_mut().for_each(rewrite);
        }
    }
    close_object(map);
}

/// `{"allOf": [X], ...rest}` becomes `{...X, ...rest}` (schemars writes a `$ref` with a description this way).
fn merge_single_all_of(map: &mut Map<String, Value>) {
    let single = matches!(map.get("allOf"), Some(Value::Array(items)) if items.len() == 1);
    if !single {
        return;
    }
    if let Some(Value::Array(mut items)) = map.remove("allOf")
        && let Some(Value::Object(inner)) = items.pop()
    {
        for (k, v) in inner {
            map.entry(k).or_insert(v);
        }
    }
}

fn close_object(map: &mut Map<String, Value>) {
    let is_object = map.get("type") == Some(&json!("object")) || map.contains_key("properties");
    if !is_object {
        return;
    }
    let required: Vec<String> = match map.get("required") {
        Some(Value::Array(names)) => names.iter().filter_map(|n| n.as_str().map(str::to_owned)).collect(),
        _ => Vec::new(),
    };
    let mut all = Vec::new();
    if let Some(Value::Object(properties)) = map.get_mut("properties") {
        for (name, property) in properties.iter_mut() {
            rewrite(property);
            if !required.contains(name) {
                make_nullable(property);
            }
            all.push(Value::String(name.clone()));
        }
    } else {
        map.insert("properties".into(), json!({}));
    }
    map.insert("required".into(), Value::Array(all));
    map.insert("additionalProperties".into(), Value::Bool(false));
}

fn make_nullable(schema: &mut Value) {
    let null = json!("null");
    let Some(map) = schema.as_object_mut() else { return };
    match map.get_mut("type") {
        Some(Value::String(t)) if t == "null" => return,
        Some(Value::String(t)) => {
            let t = Value::String(std::mem::take(t));
            map.insert("type".into(), json!([t, "null"]));
        }
        Some(Value::Array(types)) => {
            if types.contains(&null) {
                return;
            }
            types.push(null.clone());
        }
        _ => {
            let already =
                matches!(map.get("anyOf"), Some(Value::Array(v)) if v.iter().any(|s| s.get("type") == Some(&null)));
            if !already {
                let inner = std::mem::take(map);
                map.insert("anyOf".into(), json!([Value::Object(inner), {"type": "null"}]));
            }
            return;
        }
    }
    if let Some(Value::Array(values)) = map.get_mut("enum")
        && !values.contains(&Value::Null)
    {
        values.push(Value::Null);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn optional_enums_get_null_and_refs_are_wrapped() {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
                "shape": {"oneOf": [{"type": "object", "properties": {"r": {"type": "number", "format": "double"}}, "required": ["r"]}]},
                "when": {"type": "string", "format": "date-time"},
                "node": {"$ref": "#/$defs/Node"},
            },
            "required": ["when"],
            "$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}},
        });
        let strict = strict_schema(&schema);
        assert_eq!(
            strict,
            json!({
                "type": "object",
                "properties": {
                    "mode": {"type": ["string", "null"], "enum": ["a", "b", null]},
                    "shape": {"anyOf": [
                        {"anyOf": [{"type": "object", "properties": {"r": {"type": "number"}}, "required": ["r"],
                            "additionalProperties": false}]},
                        {"type": "null"},
                    ]},
                    "when": {"type": "string", "format": "date-time"},
                    "node": {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}]},
                },
                "required": ["mode", "shape", "when", "node"],
                "additionalProperties": false,
                "$defs": {"Node": {
                    "type": "object",
                    "properties": {"next": {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}]}},
                    "required": ["next"],
                    "additionalProperties": false,
                }},
            })
        );
    }
}
