//! A server's schemas are untrusted input: before a tool's schema is compiled into a validator it must be
//! small, shallow, refer only inside itself, and cheap to check a value against. What a check costs is bounded
//! per value the schema applies to, so validating params costs at most [`MAX_COST`] schema visits for each
//! value in them, however the schema is shaped: a "validation bomb" (a chain of `$ref`s each used twice under
//! `allOf`, whose cost doubles with each link) and a `$ref` cycle that never descends into the value are
//! refused here, when the server is attached, rather than met by an agent's run. Pure.

use serde_json::Value;
use std::collections::HashMap;

/// The longest schema, as JSON text.
pub const MAX_SCHEMA_BYTES: usize = 64 * 1024;

/// The deepest nesting of a schema's JSON.
pub const MAX_DEPTH: usize = 48;

/// The most schema visits one value may cost: a schema and everything it applies to the same value (its
/// `$ref`, `allOf`, `anyOf`, `oneOf`, `not`, `if`/`then`/`else`, `dependentSchemas`), counted with repeats.
pub const MAX_COST: u64 = 2_000;

/// Keywords whose schemas apply to the same value as the schema they are in.
const SAME_VALUE_LISTS: [&str; 3] = ["allOf", "anyOf", "oneOf"];
const SAME_VALUE_ONE: [&str; 4] = ["not", "if", "then", "else"];

/// Keywords whose schemas apply to the parts of a value (one level down).
const PARTS_ONE: [&str; 7] = [
    "items",
    "additionalProperties",
    "contains",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "additionalItems",
];
const PARTS_MAP: [&str; 2] = ["properties", "patternProperties"];

/// Whether `schema` may be compiled and checked values against; `Err` says what is wrong with it and what was
/// expected.
pub fn check(schema: &Value) -> Result<(), String> {
    let size = serde_json::to_string(schema).map(|text| text.len()).unwrap_or(usize::MAX);
    if size > MAX_SCHEMA_BYTES {
        return Err(format!("its schema is {size} bytes of JSON; expected at most {MAX_SCHEMA_BYTES}"));
    }
    let depth = depth_of(schema, 0);
    if depth > MAX_DEPTH {
        return Err(format!("its schema nests {depth} levels deep; expected at most {MAX_DEPTH}"));
    }
    let mut walk = Walk { root: schema, costs: HashMap::new(), on_path: Vec::new() };
    walk.every_schema(schema, String::new())
}

/// How deep a JSON value nests (stops counting past the limit).
fn depth_of(value: &Value, depth: usize) -> usize {
    if depth > MAX_DEPTH {
        return depth;
    }
    match value {
        Value::Array(items) => items.iter().map(|v| depth_of(v, depth + 1)).max().unwrap_or(depth),
        Value::Object(map) => map.values().map(|v| depth_of(v, depth + 1)).max().unwrap_or(depth),
        _ => depth,
    }
}

struct Walk<'a> {
    root: &'a Value,
    /// The same-value cost of each schema, by its JSON pointer.
    costs: HashMap<String, u64>,
    /// The schemas whose cost is being worked out (a cycle comes back to one of them).
    on_path: Vec<String>,
}

impl<'a> Walk<'a> {
    /// Checks every subschema, as each may be applied to some part of a value.
    fn every_schema(&mut self, schema: &'a Value, at: String) -> Result<(), String> {
        let Value::Object(map) = schema else { return Ok(()) };
        self.cost(schema, &at)?;
        for (key, child) in map {
            let here = format!("{at}/{}", escape(key));
            match key.as_str() {
                _ if SAME_VALUE_LISTS.contains(&key.as_str()) || key == "prefixItems" => {
                    for (index, item) in child.as_array().into_iter().flatten().enumerate() {
                        self.every_schema(item, format!("{here}/{index}"))?;
                    }
                }
                _ if PARTS_MAP.contains(&key.as_str())
                    || key == "$defs"
                    || key == "definitions"
                    || key == "dependentSchemas"
                    || key == "dependencies" =>
                {
                    for (name, item) in child.as_object().into_iter().flatten() {
                        self.every_schema(item, format!("{here}/{}", escape(name)))?;
                    }
                }
                _ if PARTS_ONE.contains(&key.as_str()) || SAME_VALUE_ONE.contains(&key.as_str()) => {
                    if let Value::Array(items) = child {
                        for (index, item) in items.iter().enumerate() {
                            self.every_schema(item, format!("{here}/{index}"))?;
                        }
                    } else {
                        self.every_schema(child, here)?;
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// What checking one value against `schema` costs, in schema visits, counting what applies to the same
    /// value; `Err` for a cycle that never descends into the value, a reference that leaves the schema, or a
    /// cost past [`MAX_COST`].
    fn cost(&mut self, schema: &'a Value, at: &str) -> Result<u64, String> {
        if let Some(known) = self.costs.get(at) {
            return Ok(*known);
        }
        let Value::Object(map) = schema else { return Ok(1) };
        if self.on_path.iter().any(|p| p == at) {
            return Err(format!(
                "its schema refers back to `#{at}` without descending into the value (a `$ref` cycle); expected \
                 every cycle to pass through `properties`, `items` or the like"
            ));
        }
        for unsupported in ["$dynamicRef", "$recursiveRef"] {
            if map.contains_key(unsupported) {
                return Err(format!("its schema uses `{unsupported}`; expected plain `$ref`s into the schema itself"));
            }
        }
        // An `$id` below the root starts a resource of its own, against which its `$ref`s resolve: the walk here
        // resolves every `$ref` from the root, so such a schema is refused rather than judged wrongly.
        if !at.is_empty() && map.contains_key("$id") {
            return Err(format!(
                "its schema sets `$id` at `#{at}`; expected one resource, with `$id` at most at its root"
            ));
        }
        self.on_path.push(at.to_owned());
        let mut total: u64 = 1;
        let mut add = |walk: &mut Self, child: &'a Value, pointer: String| -> Result<(), String> {
            total = total.saturating_add(walk.cost(child, &pointer)?);
            Ok(())
        };
        if let Some(reference) = map.get("$ref") {
            let (target, pointer) = self.resolve(reference)?;
            add(self, target, pointer)?;
        }
        for key in SAME_VALUE_LISTS {
            for (index, item) in map.get(key).and_then(Value::as_array).into_iter().flatten().enumerate() {
                add(self, item, format!("{at}/{key}/{index}"))?;
            }
        }
        for key in SAME_VALUE_ONE {
            if let Some(item) = map.get(key) {
                add(self, item, format!("{at}/{key}"))?;
            }
        }
        for keyword in ["dependentSchemas", "dependencies"] {
            // (`dependencies` also takes arrays of property names, which are no schemas.)
            for (name, item) in map.get(keyword).and_then(Value::as_object).into_iter().flatten() {
                if item.is_object() {
                    add(self, item, format!("{at}/{keyword}/{}", escape(name)))?;
                }
            }
        }
        self.on_path.pop();
        if total > MAX_COST {
            return Err(format!(
                "checking one value against its schema at `#{at}` costs {total} schema visits (its `$ref`s and \
                 `allOf`/`anyOf`/`oneOf` multiply); expected at most {MAX_COST}"
            ));
        }
        self.costs.insert(at.to_owned(), total);
        Ok(total)
    }

    /// The schema a `$ref` names, which must be a JSON pointer into this schema (`#`, `#/$defs/...`).
    fn resolve(&self, reference: &Value) -> Result<(&'a Value, String), String> {
        let text = reference.as_str().ok_or_else(|| "its schema has a `$ref` that is not a string".to_owned())?;
        let pointer = text.strip_prefix('#').ok_or_else(|| {
            format!("its schema refers to `{text}`, outside itself; expected only `#...` references into the schema")
        })?;
        let decoded = percent_decoded(pointer);
        let target = self
            .root
            .pointer(&decoded)
            .ok_or_else(|| format!("its schema refers to `{text}`, which it does not hold"))?;
        Ok((target, decoded))
    }
}

/// A key as a JSON pointer segment.
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// A `$ref`'s fragment with its percent-escapes decoded (a URI fragment may escape characters of a pointer).
fn percent_decoded(fragment: &str) -> String {
    let bytes = fragment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        match (bytes[i], bytes.get(i + 1).copied().and_then(hex), bytes.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(high), Some(low)) => {
                out.push((high * 16 + low) as u8);
                i += 3;
            }
            (byte, _, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A chain of `n` definitions, each used twice under `allOf` by the one before: checking costs 2^n.
    pub(crate) fn bomb(n: usize) -> Value {
        let mut defs = serde_json::Map::new();
        for i in 0..n {
            let next = format!("#/$defs/d{}", i + 1);
            defs.insert(format!("d{i}"), json!({"allOf": [{"$ref": next}, {"$ref": next}]}));
        }
        defs.insert(format!("d{n}"), json!({"type": "string"}));
        json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/d0"}}, "$defs": defs})
    }

    #[test]
    fn ordinary_schemas_pass() {
        let plain = json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": ["string", "null"]}},
                           "required": ["a"]});
        assert_eq!(check(&plain), Ok(()));
        // A recursive schema that descends (a tree) is fine: its cost grows with the value, not the schema.
        let tree = json!({"$defs": {"node": {"type": "object", "properties": {
            "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}},
            "type": "object", "properties": {"root": {"$ref": "#/$defs/node"}}});
        assert_eq!(check(&tree), Ok(()));
        assert_eq!(check(&bomb(8)), Ok(()), "2^8 visits is within the bound");
    }

    #[test]
    fn bombs_cycles_escapes_and_giants_are_refused() {
        let refused = check(&bomb(20)).unwrap_err();
        assert!(refused.contains("costs"), "{refused}");
        let cycle = json!({"$defs": {"a": {"allOf": [{"$ref": "#/$defs/b"}]}, "b": {"anyOf": [{"$ref": "#/$defs/a"}]}},
                           "properties": {"x": {"$ref": "#/$defs/a"}}});
        assert!(check(&cycle).unwrap_err().contains("cycle"));
        let itself = json!({"$ref": "#"});
        assert!(check(&itself).unwrap_err().contains("cycle"));
        let through_dependencies = json!({"dependencies": {"x": {"$ref": "#"}}});
        assert!(check(&through_dependencies).unwrap_err().contains("cycle"));
        let nested_resource = json!({"properties": {"x": {"$id": "https://example.com/inner", "$ref": "#"}}});
        assert!(check(&nested_resource).unwrap_err().contains("$id"));
        let remote = json!({"properties": {"x": {"$ref": "https://example.com/schema.json"}}});
        assert!(check(&remote).unwrap_err().contains("outside itself"));
        let file = json!({"properties": {"x": {"$ref": "file:///etc/passwd"}}});
        assert!(check(&file).is_err());
        let missing = json!({"properties": {"x": {"$ref": "#/$defs/nothing"}}});
        assert!(check(&missing).unwrap_err().contains("does not hold"));
        let huge = json!({"properties": {"x": {"description": "x".repeat(MAX_SCHEMA_BYTES)}}});
        assert!(check(&huge).unwrap_err().contains("bytes"));
        let mut deep = json!({"type": "string"});
        for _ in 0..60 {
            deep = json!({"properties": {"x": deep}});
        }
        assert!(check(&deep).unwrap_err().contains("levels deep"));
    }
}
