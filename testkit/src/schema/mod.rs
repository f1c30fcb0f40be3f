//! Proptest strategies for JSON values a JSON Schema accepts, and for values it refuses.
//!
//! [`values`] draws only values the schema accepts; [`invalid_values`] draws only values it refuses (each a
//! small mutation of a valid value: a wrong type, a required property removed, a number out of bounds, ...).
//! [`params`] and [`invalid_params`] do the same for an action's params schema. Both are built from the schema
//! itself (`properties`, `items`, bounds, patterns, `$ref`s to `$defs`, ...) and checked by the compiled
//! schema as a last safety net, so a value that slipped through could never reach your test.
//!
//! A schema that uses a keyword the generator cannot honour (`not`, `if`, `patternProperties`, ...) is refused
//! with [`SchemaError::Unsupported`] naming the keyword and where it is, rather than drawing values that might
//! not fit it.
//!
//! ```
//! use agentry_testkit::schema::{invalid_values, values};
//! use proptest::prelude::*;
//! use proptest::test_runner::TestRunner;
//! use serde_json::json;
//!
//! let schema = json!({
//!     "type": "object",
//!     "properties": {
//!         "name": {"type": "string", "minLength": 1, "maxLength": 20},
//!         "age": {"type": "integer", "minimum": 0, "maximum": 150},
//!         "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "uniqueItems": true}
//!     },
//!     "required": ["name"],
//!     "additionalProperties": false
//! });
//! let validator = jsonschema::validator_for(&schema).unwrap();
//!
//! let mut runner = TestRunner::default();
//! runner
//!     .run(&values(&schema).unwrap(), |person| {
//!         prop_assert!(validator.is_valid(&person), "{person}");
//!         Ok(())
//!     })
//!     .unwrap();
//! runner
//!     .run(&invalid_values(&schema).unwrap(), |wrong| {
//!         prop_assert!(!validator.is_valid(&wrong), "{wrong}");
//!         Ok(())
//!     })
//!     .unwrap();
//! ```
//!
//! # What is supported
//!
//! - `true`/`{}` (any small JSON value), `false` (nothing: [`SchemaError::Unsatisfiable`]);
//! - `type` (one or several), `enum`, `const`;
//! - objects: `properties`, `required`, `additionalProperties` (`false`, `true` or a schema),
//!   `minProperties`, `maxProperties`. Optional properties are sometimes present, sometimes absent; properties
//!   beyond the named ones are drawn only where `additionalProperties` allows them explicitly, or for an
//!   object schema that names none (a map);
//! - arrays: `items`, `prefixItems` (and the older `items: [...]` with `additionalItems`), `minItems`,
//!   `maxItems`, `uniqueItems`;
//! - numbers: `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum` (numeric, or draft 4's boolean
//!   form), `multipleOf` (also decimal ones such as `0.01`). An integer `format` such as schemars' `uint8` or
//!   `int32` narrows the drawn range to the Rust type's, so the values also deserialize;
//! - strings: `minLength`, `maxLength` (in characters), `pattern` (unanchored as JSON Schema says; drawn from
//!   the pattern itself), `format`: `date-time`, `date`, `time`, `partial-date-time`, `partial-time`, `uuid`,
//!   `email`, `uri`, `uri-reference`, `hostname`, `ipv4`, `ipv6`, `ip`;
//! - `anyOf`, `oneOf` (a value from one branch, kept only if it matches no other), `allOf` and sibling
//!   keywords (merged: every part constrains the value), `not` with a `const` or an `enum` (values equal to
//!   one are skipped);
//! - `$ref` to a local `#/$defs/...`, `#/definitions/...` or any other `#/...` pointer, recursive ones
//!   included (values nest at most a few levels);
//! - annotations (`title`, `description`, `default`, `examples`, `$schema`, `$id`, `$comment`, `readOnly`,
//!   `writeOnly`, `deprecated`, a `format` on a non-string) and unknown keywords are ignored, as validators
//!   do.
//!
//! Unsupported (an error naming the keyword): `not` of anything but `const`/`enum`, `if`/`then`/`else`,
//! `dependentRequired`, `dependentSchemas`, `dependencies`, `patternProperties`, `propertyNames`,
//! `unevaluatedProperties`, `contains`, `minContains`, `maxContains`, `unevaluatedItems`, `$dynamicRef`,
//! `$recursiveRef`, `contentEncoding`, `contentMediaType`, `contentSchema`, non-local `$ref`s, a string
//! `format` not listed above, two different `pattern`s (or `format`s) on one string, `pattern` with `format`.

mod invalid;
mod valid;

use agentry::action::DynAction;
use jsonschema::{Validator, ValidatorMap};
use proptest::strategy::{BoxedStrategy, Strategy};
use serde_json::{Map, Value};
use std::cell::RefCell;
use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::sync::Arc;

/// Why values cannot be generated for a schema (names the keyword and where it is).
///
/// Every `path` is a JSON pointer into the schema (`/properties/name/pattern`); the root is `""`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    /// A keyword the generator does not support: it constrains values in a way no value is drawn for.
    #[error(
        "cannot generate values for `{keyword}` {}: {reason}; expected a schema that uses only the keywords \
         listed in `agentry_testkit::schema` (or a hand-written strategy for this part)",
        Where(path)
    )]
    Unsupported {
        /// The keyword, e.g. `patternProperties`.
        keyword: String,
        /// Where the keyword is, a JSON pointer into the schema.
        path: String,
        /// What the generator cannot do with it.
        reason: String,
    },
    /// The schema itself is malformed (e.g. `minimum` not a number, a `$ref` to nothing).
    #[error("the schema is malformed {}: {reason}; expected a valid JSON Schema", Where(path))]
    Invalid {
        /// Where the problem is, a JSON pointer into the schema.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// No value satisfies the schema (e.g. `minimum` above `maximum`, a required property forbidden, an empty
    /// `enum`); for [`invalid_values`], no value is refused (the schema accepts everything).
    #[error("no value fits the schema {}: {reason}", Where(path))]
    Unsatisfiable {
        /// Where the contradiction is, a JSON pointer into the schema.
        path: String,
        /// What contradicts what.
        reason: String,
    },
}

/// A path in a message: at `/a/b`, or at the root.
struct Where<'a>(&'a str);

impl fmt::Display for Where<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            "" => f.write_str("at the root"),
            path => write!(f, "at `{path}`"),
        }
    }
}

/// A strategy for the values `schema` accepts.
///
/// Fails when the schema uses a keyword the generator cannot honour ([`SchemaError::Unsupported`]), is not
/// a valid JSON Schema ([`SchemaError::Invalid`]) or accepts nothing ([`SchemaError::Unsatisfiable`]). The
/// values are small (a few levels deep, a few items or properties) so tests stay fast.
pub fn values(schema: &Value) -> Result<BoxedStrategy<Value>, SchemaError> {
    let (strategy, checks) = unchecked_values(schema)?;
    Ok(strategy.prop_filter("a value the schema accepts", move |v| checks.accepts("", v)).boxed())
}

/// [`values`] before the last check: every value should already fit (the tests hold it to that).
fn unchecked_values(schema: &Value) -> Result<(BoxedStrategy<Value>, Arc<Checks>), SchemaError> {
    let cx = Ctx::new(schema)?;
    let strategy = valid::strategy(&cx, &[Part::root(schema)], &[], At::ROOT).map_err(Fail::into_error)?;
    Ok((strategy, cx.checks.clone()))
}

/// A strategy for values `schema` refuses: mutations of valid values (a wrong type at the root or at a
/// property, a required property removed, an extra property where `additionalProperties` is `false`, a number
/// out of bounds, a string too long or too short, a value outside the `enum`, too few or too many items, ...).
/// Every value is checked against the compiled schema and kept only if it is refused.
///
/// Fails like [`values`], and with [`SchemaError::Unsatisfiable`] for a schema that accepts every value
/// (`true`, `{}`).
pub fn invalid_values(schema: &Value) -> Result<BoxedStrategy<Value>, SchemaError> {
    let strategy = unchecked_invalid_values(schema)?;
    // Refused by the validator actions use (formats as annotations where the draft says so), hence by any
    // stricter one.
    let validator = jsonschema::validator_for(schema).map_err(|e| compile_error(schema, e))?;
    Ok(strategy.prop_filter("a value the schema refuses", move |v| !validator.is_valid(v)).boxed())
}

/// [`invalid_values`] before the check: mutations, most of them refused.
fn unchecked_invalid_values(schema: &Value) -> Result<BoxedStrategy<Value>, SchemaError> {
    let cx = Ctx::new(schema)?;
    let everything = || SchemaError::Unsatisfiable {
        path: String::new(),
        reason: "the schema accepts every JSON value, so no value is invalid".into(),
    };
    let root = [Part::root(schema)];
    if let Ok(leaf) = expand(&cx, &root, &[])
        && leaf.unconstrained()
    {
        return Err(everything());
    }
    // What cannot be drawn valid is not mutated either: the same errors as `values` (an unsatisfiable schema
    // aside, whose invalid values are any).
    if let Err(
        fail @ (Fail::TooDeep(_) | Fail::Schema(SchemaError::Unsupported { .. } | SchemaError::Invalid { .. })),
    ) = valid::strategy(&cx, &root, &[], At::ROOT)
    {
        return Err(fail.into_error());
    }
    invalid::strategy(&cx, &root, &[], At::ROOT).map_err(Fail::into_error)?.ok_or_else(everything)
}

/// Valid params for an action: `values(&action.spec().params_schema)`.
pub fn params(action: &DynAction) -> Result<BoxedStrategy<Value>, SchemaError> {
    values(&action.spec().params_schema)
}

/// Params the action's schema refuses: `invalid_values(&action.spec().params_schema)`. Validation must stop
/// every one of them before the action runs.
pub fn invalid_params(action: &DynAction) -> Result<BoxedStrategy<Value>, SchemaError> {
    invalid_values(&action.spec().params_schema)
}

/// How deep values nest (objects and arrays), counting the root as 0.
const MAX_DEPTH: u32 = 10;
/// How deep a value nests below a schema that constrains nothing (`true`, `{}`).
const ANY_DEPTH: u32 = 2;

/// Where a value is being drawn: its nesting depth and the deepest it may go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct At {
    pub depth: u32,
    pub limit: u32,
}

impl At {
    const ROOT: At = At { depth: 0, limit: MAX_DEPTH };

    /// One level down (an item, a property).
    pub fn child(self) -> At {
        At { depth: self.depth + 1, ..self }
    }

    /// Below a schema that constrains nothing, values stay shallow.
    pub fn loose(self) -> At {
        At { limit: self.limit.min(self.depth + ANY_DEPTH), ..self }
    }

    /// How many items or extra properties beyond the required ones are drawn at most: fewer deeper down.
    pub fn spare(self) -> usize {
        match self.depth {
            0..=1 => 4,
            2..=3 => 3,
            4..=5 => 2,
            _ => 1,
        }
    }
}

/// Why a part of a schema yields no strategy.
#[derive(Debug, Clone)]
pub(super) enum Fail {
    Schema(SchemaError),
    /// Every value would nest deeper than the limit (a recursive `$ref` with no way out within it), at `path`.
    TooDeep(String),
}

impl Fail {
    fn into_error(self) -> SchemaError {
        match self {
            Fail::Schema(error) => error,
            Fail::TooDeep(path) => SchemaError::Unsupported {
                keyword: "$ref".into(),
                path,
                reason: format!(
                    "every value nests deeper than {MAX_DEPTH} levels (a recursive reference with no optional way \
                     out)"
                ),
            },
        }
    }

    /// Whether the failure only means "no value here" (a branch, an optional property or an item can be
    /// skipped), rather than a problem with the schema.
    pub fn is_empty(&self) -> bool {
        matches!(self, Fail::TooDeep(_) | Fail::Schema(SchemaError::Unsatisfiable { .. }))
    }
}

impl From<SchemaError> for Fail {
    fn from(error: SchemaError) -> Self {
        Fail::Schema(error)
    }
}

pub(super) type R<T> = Result<T, Fail>;

pub(super) fn unsupported(keyword: &str, path: &str, reason: impl Into<String>) -> Fail {
    Fail::Schema(SchemaError::Unsupported { keyword: keyword.into(), path: path.into(), reason: reason.into() })
}

pub(super) fn invalid(path: &str, reason: impl Into<String>) -> Fail {
    Fail::Schema(SchemaError::Invalid { path: path.into(), reason: reason.into() })
}

pub(super) fn unsatisfiable(path: &str, reason: impl Into<String>) -> Fail {
    Fail::Schema(SchemaError::Unsatisfiable { path: path.into(), reason: reason.into() })
}

/// Why the validator could not compile `root`: the first `$ref` that is not local or points to nothing (the
/// validator does not say where it is), else the validator's own error (where in the schema, for a schema the meta-schema
/// refuses).
fn compile_error(root: &Value, error: jsonschema::ValidationError<'_>) -> SchemaError {
    fn broken(root: &Value, node: &Value, path: &str) -> Option<SchemaError> {
        match node {
            Value::Object(map) => {
                if let Some(Value::String(reference)) = map.get("$ref") {
                    match reference.strip_prefix('#') {
                        None => {
                            return Some(SchemaError::Unsupported {
                                keyword: "$ref".into(),
                                path: join(path, "$ref"),
                                reason: format!(
                                    "`{reference}` is not a local reference; only `#/...` pointers within the \
                                     schema are followed"
                                ),
                            });
                        }
                        Some(fragment)
                            if (fragment.is_empty() || fragment.starts_with('/'))
                                && root.pointer(&percent_decode(fragment)).is_none() =>
                        {
                            return Some(SchemaError::Invalid {
                                path: join(path, "$ref"),
                                reason: format!("`$ref` points to `{reference}`, which is not in the schema"),
                            });
                        }
                        Some(_) => {}
                    }
                }
                map.iter().find_map(|(key, value)| broken(root, value, &join(path, key)))
            }
            Value::Array(items) => {
                items.iter().enumerate().find_map(|(i, value)| broken(root, value, &join(path, &i.to_string())))
            }
            _ => None,
        }
    }
    broken(root, root, "")
        .unwrap_or_else(|| SchemaError::Invalid { path: error.instance_path().to_string(), reason: error.to_string() })
}

/// `path/key`, with `key` escaped as a JSON pointer token.
pub(super) fn join(path: &str, key: &str) -> String {
    format!("{path}/{}", key.replace('~', "~0").replace('/', "~1"))
}

/// One schema among those a value must satisfy, and where it is in the root schema.
#[derive(Clone, Debug)]
pub(super) struct Part<'s> {
    pub path: String,
    pub schema: &'s Value,
}

impl<'s> Part<'s> {
    fn root(schema: &'s Value) -> Self {
        Part { path: String::new(), schema }
    }

    pub fn at(path: String, schema: &'s Value) -> Self {
        Part { path, schema }
    }
}

/// The compiled schema and the memo of strategies already built.
pub(super) struct Ctx<'s> {
    root: &'s Value,
    /// A validator for every subschema (formats asserted), by JSON pointer.
    pub checks: Arc<Checks>,
    /// Whether the validator actions use asserts `format` for this schema's draft.
    pub formats_asserted: bool,
    pub valid_memo: RefCell<HashMap<String, R<BoxedStrategy<Value>>>>,
    pub invalid_memo: RefCell<HashMap<String, R<Option<BoxedStrategy<Value>>>>>,
}

/// Validators for every subschema of the root, formats asserted.
pub(super) struct Checks {
    map: ValidatorMap,
    root: Validator,
}

impl fmt::Debug for Checks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Checks").field("subschemas", &self.map.len()).finish()
    }
}

impl Checks {
    /// Whether the subschema at `path` accepts `value` (`true` when it has no validator of its own).
    pub fn accepts(&self, path: &str, value: &Value) -> bool {
        if path.is_empty() {
            return self.root.is_valid(value);
        }
        self.map.get(&format!("#{path}")).is_none_or(|v| v.is_valid(value))
    }
}

impl<'s> Ctx<'s> {
    fn new(root: &'s Value) -> Result<Self, SchemaError> {
        let options = jsonschema::options().should_validate_formats(true);
        let validator = options.build(root).map_err(|e| compile_error(root, e))?;
        let map = options.build_map(root).map_err(|e| compile_error(root, e))?;
        let mut probe = Map::new();
        if let Some(dialect) = root.get("$schema") {
            probe.insert("$schema".into(), dialect.clone());
        }
        probe.insert("format".into(), Value::from("date"));
        let formats_asserted =
            jsonschema::validator_for(&Value::Object(probe)).is_ok_and(|v| !v.is_valid(&Value::from("not a date")));
        Ok(Ctx {
            root,
            checks: Arc::new(Checks { map, root: validator }),
            formats_asserted,
            valid_memo: RefCell::default(),
            invalid_memo: RefCell::default(),
        })
    }

    /// The schema a `$ref` (at `path`) points to.
    fn follow(&self, path: &str, reference: &'s Value) -> R<Part<'s>> {
        let Value::String(reference) = reference else { return Err(invalid(path, "`$ref` must be a string")) };
        let Some(fragment) = reference.strip_prefix('#') else {
            return Err(unsupported(
                "$ref",
                path,
                format!("`{reference}` is not a local reference; only `#/...` pointers within the schema are followed"),
            ));
        };
        let pointer = percent_decode(fragment);
        if !pointer.is_empty() && !pointer.starts_with('/') {
            return Err(unsupported(
                "$ref",
                path,
                format!("`{reference}` names an anchor; only `#/...` pointers within the schema are followed"),
            ));
        }
        match self.root.pointer(&pointer) {
            Some(target) => Ok(Part::at(pointer, target)),
            None => Err(invalid(path, format!("`$ref` points to `{reference}`, which is not in the schema"))),
        }
    }
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The keywords values are drawn for.
const HANDLED: &[&str] = &[
    "type",
    "enum",
    "const",
    "properties",
    "required",
    "additionalProperties",
    "minProperties",
    "maxProperties",
    "items",
    "prefixItems",
    "additionalItems",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "format",
];

/// Keywords that constrain nothing.
const ANNOTATIONS: &[&str] = &[
    "title",
    "description",
    "default",
    "examples",
    "$schema",
    "$id",
    "id",
    "$comment",
    "readOnly",
    "writeOnly",
    "deprecated",
    "$anchor",
    "$dynamicAnchor",
    "$recursiveAnchor",
    "$vocabulary",
    "$defs",
    "definitions",
];

/// Keywords that constrain values in ways the generator does not follow, with why.
const UNSUPPORTED: &[(&str, &str)] = &[
    ("if", "conditional schemas are not generated"),
    ("then", "conditional schemas are not generated"),
    ("else", "conditional schemas are not generated"),
    ("dependentRequired", "properties required by others are not generated"),
    ("dependentSchemas", "schemas that depend on present properties are not generated"),
    ("dependencies", "properties required by others are not generated"),
    ("patternProperties", "properties named by a pattern are not generated"),
    ("propertyNames", "constraints on property names are not generated"),
    ("unevaluatedProperties", "unevaluated properties are not tracked"),
    ("contains", "arrays that must contain a matching item are not generated"),
    ("minContains", "arrays that must contain a matching item are not generated"),
    ("maxContains", "arrays that must contain a matching item are not generated"),
    ("unevaluatedItems", "unevaluated items are not tracked"),
    ("$dynamicRef", "dynamic references are not followed"),
    ("$recursiveRef", "recursive references are not followed"),
    ("contentEncoding", "encoded content is not generated"),
    ("contentMediaType", "encoded content is not generated"),
    ("contentSchema", "encoded content is not generated"),
];

/// An `anyOf` or a `oneOf` not yet decided: values come from one branch at a time.
#[derive(Clone, Debug)]
pub(super) struct Choice<'s> {
    pub one_of: bool,
    /// The keyword's path (`/anyOf`).
    pub path: String,
    pub branches: Vec<Part<'s>>,
}

/// The schemas a value must satisfy, with `$ref`s followed and `allOf`s flattened: every object schema among
/// them, the first `anyOf`/`oneOf` still to decide, and the `not`s to filter by.
#[derive(Default, Debug)]
pub(super) struct Leaf<'s> {
    pub parts: Vec<(String, &'s Map<String, Value>)>,
    pub choice: Option<Choice<'s>>,
    /// Every `not` (a `const` or an `enum`): its path and its schema.
    pub nots: Vec<(String, &'s Value)>,
    /// Whether any keyword constrains values.
    constrained: bool,
}

impl<'s> Leaf<'s> {
    /// Whether every value fits (`true`, `{}`, only annotations).
    pub fn unconstrained(&self) -> bool {
        !self.constrained
    }

    /// Every occurrence of `keyword`: its path and value.
    pub fn all<'a>(&'a self, keyword: &'a str) -> impl Iterator<Item = (String, &'s Value)> + 'a {
        self.parts.iter().filter_map(move |(path, map)| map.get(keyword).map(|v| (join(path, keyword), v)))
    }

    /// The JSON types every part allows.
    pub fn kinds(&self) -> R<Kinds> {
        let mut kinds = Kinds::ALL;
        for (path, value) in self.all("type") {
            let names: Vec<&Value> = match value {
                Value::Array(names) => names.iter().collect(),
                single => vec![single],
            };
            let mut these = Kinds::NONE;
            for name in names {
                let Some(kind) = name.as_str().and_then(Kinds::named) else {
                    return Err(invalid(&path, format!("`{name}` is not a JSON Schema type")));
                };
                these = these.union(kind);
            }
            kinds = kinds.intersect(these);
        }
        Ok(kinds)
    }
}

/// Follows `$ref`s and flattens `allOf`s in `parts`, checking every keyword; `consumed` lists the
/// `anyOf`/`oneOf`s already decided (by path).
pub(super) fn expand<'s>(cx: &Ctx<'s>, parts: &[Part<'s>], consumed: &[String]) -> R<Leaf<'s>> {
    let mut queue: VecDeque<Part<'s>> = parts.iter().cloned().collect();
    let mut seen = HashSet::new();
    let mut leaf = Leaf::default();
    while let Some(part) = queue.pop_front() {
        if !seen.insert(part.path.clone()) {
            continue;
        }
        let map = match part.schema {
            Value::Bool(true) => continue,
            Value::Bool(false) => {
                return Err(unsatisfiable(&part.path, "the schema is `false`, which accepts no value"));
            }
            Value::Object(map) => map,
            other => {
                return Err(invalid(&part.path, format!("a schema must be an object or a boolean, not `{other}`")));
            }
        };
        for (key, value) in map {
            let at = join(&part.path, key);
            match key.as_str() {
                "$ref" => queue.push_back(cx.follow(&at, value)?),
                "allOf" => {
                    for (i, schema) in subschemas(&at, value)?.iter().enumerate() {
                        queue.push_back(Part::at(join(&at, &i.to_string()), schema));
                    }
                }
                "anyOf" | "oneOf" => {
                    let branches = subschemas(&at, value)?;
                    if !consumed.contains(&at) && leaf.choice.is_none() {
                        leaf.constrained = true;
                        leaf.choice = Some(Choice {
                            one_of: key == "oneOf",
                            branches: branches
                                .iter()
                                .enumerate()
                                .map(|(i, schema)| Part::at(join(&at, &i.to_string()), schema))
                                .collect(),
                            path: at,
                        });
                    }
                }
                "not" => {
                    let simple = value.as_object().is_some_and(|not| {
                        not.keys().any(|k| k == "const" || k == "enum")
                            && not.keys().all(|k| k == "const" || k == "enum" || ANNOTATIONS.contains(&k.as_str()))
                    });
                    if !simple {
                        return Err(unsupported(
                            "not",
                            &at,
                            "only a `not` of a `const` or an `enum` is generated (values equal to one are skipped)",
                        ));
                    }
                    leaf.constrained = true;
                    leaf.nots.push((at, value));
                }
                "format" => {
                    // A format constrains strings only, and only when it is one the generator knows; an
                    // unknown one is refused when strings are drawn.
                    leaf.constrained = true;
                }
                k if HANDLED.contains(&k) => leaf.constrained = true,
                k if ANNOTATIONS.contains(&k) => {}
                k => {
                    if let Some((_, why)) = UNSUPPORTED.iter().find(|(name, _)| *name == k) {
                        return Err(unsupported(k, &at, *why));
                    }
                    // Unknown keywords are annotations to validators too.
                }
            }
        }
        leaf.parts.push((part.path, map));
    }
    Ok(leaf)
}

fn subschemas<'s>(path: &str, value: &'s Value) -> R<&'s [Value]> {
    match value {
        Value::Array(schemas) if !schemas.is_empty() => Ok(schemas),
        _ => Err(invalid(path, "expected a non-empty array of schemas")),
    }
}

/// The memo key of a set of parts at a place.
pub(super) fn memo_key(parts: &[Part<'_>], consumed: &[String], at: At) -> String {
    let mut key = format!("{}:{}", at.depth, at.limit);
    for part in parts {
        key.push('\u{1}');
        key.push_str(&part.path);
    }
    key.push('\u{2}');
    for path in consumed {
        key.push('\u{1}');
        key.push_str(path);
    }
    key
}

/// A JSON type; numbers split into integers and non-integers (`number` is both, `integer` only the first).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Null,
    Bool,
    Int,
    Frac,
    Str,
    Arr,
    Obj,
}

impl Kind {
    pub const EVERY: [Kind; 7] = [Kind::Null, Kind::Bool, Kind::Int, Kind::Frac, Kind::Str, Kind::Arr, Kind::Obj];

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// A set of [`Kind`]s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Kinds(u8);

impl Kinds {
    pub const ALL: Kinds = Kinds(0b111_1111);
    pub const NONE: Kinds = Kinds(0);

    fn named(name: &str) -> Option<Kinds> {
        Some(match name {
            "null" => Kinds(Kind::Null.bit()),
            "boolean" => Kinds(Kind::Bool.bit()),
            "integer" => Kinds(Kind::Int.bit()),
            "number" => Kinds(Kind::Int.bit() | Kind::Frac.bit()),
            "string" => Kinds(Kind::Str.bit()),
            "array" => Kinds(Kind::Arr.bit()),
            "object" => Kinds(Kind::Obj.bit()),
            _ => return None,
        })
    }

    pub fn has(self, kind: Kind) -> bool {
        self.0 & kind.bit() != 0
    }

    fn union(self, other: Kinds) -> Kinds {
        Kinds(self.0 | other.0)
    }

    fn intersect(self, other: Kinds) -> Kinds {
        Kinds(self.0 & other.0)
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

/// Equality as JSON Schema has it (`enum`, `const`, `uniqueItems`): numbers by value, so `1` equals `1.0`.
pub(super) fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64(), x.as_u64(), y.as_u64()) {
            (Some(x), Some(y), _, _) => x == y,
            (_, _, Some(x), Some(y)) => x == y,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| json_eq(x, y)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentry::skill::SkillDefinition;
    use proptest::prop_assert;
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, TestRunner};
    use serde_json::json;

    /// The validator with formats asserted: stricter than the one actions use (2020-12 leaves formats as
    /// annotations), so values it accepts fit either.
    fn strict(schema: &Value) -> Validator {
        jsonschema::options().should_validate_formats(true).build(schema).unwrap()
    }

    fn runner() -> TestRunner {
        TestRunner::new(Config { cases: 96, failure_persistence: None, ..Config::default() })
    }

    /// `n` values, drawn with a fixed seed (for checks over a whole sample).
    fn draws(strategy: &BoxedStrategy<Value>, n: usize) -> Vec<Value> {
        let mut runner = TestRunner::deterministic();
        (0..n).map(|_| strategy.new_tree(&mut runner).unwrap().current()).collect()
    }

    /// Schemas of every shape the generator supports.
    fn table() -> Vec<(&'static str, Value)> {
        vec![
            ("true", json!(true)),
            ("empty", json!({"description": "anything"})),
            ("scalar types", json!({"type": ["integer", "boolean", "null"]})),
            ("bounded multiples", json!({"type": "integer", "minimum": -5, "maximum": 17, "multipleOf": 3})),
            ("exclusive bounds", json!({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1})),
            ("decimal multiples", json!({"type": "number", "minimum": -10, "maximum": 10, "multipleOf": 0.01})),
            ("string lengths", json!({"type": "string", "minLength": 2, "maxLength": 5})),
            ("anchored pattern", json!({"type": "string", "pattern": "^[A-Z]{2}-\\d{3,5}$"})),
            ("unanchored pattern", json!({"type": "string", "pattern": "ab+c", "maxLength": 6})),
            (
                "common patterns",
                json!({
                    "type": "object",
                    "properties": {
                        "email": {"type": "string", "pattern": "^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\\.[a-zA-Z]{2,}$"},
                        "phone": {"type": "string", "pattern": "^\\+?[1-9]\\d{1,14}$"},
                        "url": {"type": "string", "pattern": "^https?:\\/\\/"},
                        "slug": {"type": "string", "pattern": "^[a-z0-9]+(?:-[a-z0-9]+)*$", "maxLength": 12},
                        "word": {"type": "string", "pattern": "^\\w+$"},
                        "name": {"type": "string", "pattern": "^[^\\s@]+$"},
                        "colour": {"type": "string", "pattern": "^#?([a-f0-9]{6}|[a-f0-9]{3})$"}
                    },
                    "required": ["email", "phone", "url", "slug", "word", "name", "colour"]
                }),
            ),
            (
                "huge bounds",
                json!({
                    "type": "array",
                    "prefixItems": [
                        {"type": "number", "minimum": 1e308},
                        {"type": "number", "minimum": -1.7e308, "maximum": 1.7e308},
                        {"type": "integer", "minimum": 1e30}
                    ],
                    "items": false,
                    "minItems": 2
                }),
            ),
            (
                "semver pattern",
                json!({"type": "string", "pattern": r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"}),
            ),
            (
                "formats",
                json!({
                    "type": "object",
                    "properties": {
                        "at": {"type": "string", "format": "date-time"},
                        "day": {"type": "string", "format": "date"},
                        "clock": {"type": "string", "format": "time"},
                        "id": {"type": "string", "format": "uuid"},
                        "mail": {"type": "string", "format": "email"},
                        "link": {"type": "string", "format": "uri"},
                        "host": {"type": "string", "format": "hostname"},
                        "v4": {"type": "string", "format": "ipv4"},
                        "v6": {"type": "string", "format": "ipv6"}
                    },
                    "required": ["at", "day", "clock", "id", "mail", "link", "host", "v4", "v6"]
                }),
            ),
            ("enum", json!({"enum": ["red", "green", 3, null, {"a": 1}]})),
            ("const", json!({"const": {"k": [1, 2]}})),
            (
                "closed object",
                json!({
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "minLength": 1, "maxLength": 8},
                        "age": {"type": "integer", "minimum": 0, "maximum": 150},
                        "admin": {"type": "boolean"}
                    },
                    "required": ["name", "age"],
                    "additionalProperties": false
                }),
            ),
            (
                "map",
                json!({"type": "object", "additionalProperties": {"type": "integer"}, "minProperties": 1, "maxProperties": 3}),
            ),
            (
                "unique array",
                json!({"type": "array", "items": {"type": "string", "maxLength": 3}, "minItems": 1, "maxItems": 4, "uniqueItems": true}),
            ),
            (
                "tuple",
                json!({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": false, "minItems": 2}),
            ),
            ("nullable", json!({"type": ["string", "null"], "minLength": 1})),
            ("anyOf", json!({"anyOf": [{"type": "string", "maxLength": 2}, {"type": "integer", "minimum": 10}]})),
            (
                "overlapping oneOf",
                json!({"oneOf": [
                    {"type": "integer", "minimum": 0, "maximum": 10},
                    {"type": "integer", "minimum": 5, "maximum": 20}
                ]}),
            ),
            (
                "allOf",
                json!({"allOf": [
                    {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                    {"properties": {"a": {"minimum": 3}, "b": {"type": "string"}}, "required": ["b"]}
                ]}),
            ),
            (
                "allOf closing another's properties",
                json!({"allOf": [
                    {"properties": {"a": {"type": "integer"}}, "additionalProperties": false},
                    {"type": "object", "properties": {"b": {"type": "string"}}}
                ]}),
            ),
            ("not", json!({"type": "integer", "minimum": -3, "maximum": 3, "not": {"const": 0}})),
            (
                "property count",
                json!({"type": "object", "properties": {"a": {}, "b": {}, "c": {}}, "minProperties": 2, "maxProperties": 2}),
            ),
            (
                "recursive tree",
                json!({
                    "$ref": "#/$defs/Node",
                    "$defs": {"Node": {
                        "type": "object",
                        "properties": {
                            "value": {"type": "integer"},
                            "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}
                        },
                        "required": ["value", "children"]
                    }}
                }),
            ),
            (
                "draft 7",
                json!({
                    "$schema": "http://json-schema.org/draft-07/schema#",
                    "definitions": {"Pos": {"type": "integer", "minimum": 0, "exclusiveMaximum": 100}},
                    "type": "array",
                    "items": [{"$ref": "#/definitions/Pos"}, {"type": "string", "format": "date"}],
                    "additionalItems": false
                }),
            ),
            ("schemars", schemars_order()),
        ]
    }

    /// A params struct as a user writes one, its schema from schemars (draft 2020-12, `$defs`).
    mod order {
        use schemars::JsonSchema;
        use serde::Deserialize;
        use std::collections::{BTreeSet, HashMap};

        /// An order.
        #[derive(Debug, Deserialize, JsonSchema)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        pub struct Order {
            pub id: uuid::Uuid,
            pub customer: Customer,
            #[schemars(length(min = 1))]
            pub lines: Vec<Line>,
            pub note: Option<String>,
            pub placed: chrono::DateTime<chrono::Utc>,
            pub due: Option<chrono::NaiveDate>,
            pub priority: Priority,
            pub shipping: Option<Address>,
            pub tags: HashMap<String, u8>,
            #[serde(default)]
            pub labels: BTreeSet<String>,
            pub payment: Payment,
            pub retries: std::num::NonZeroU8,
            pub offset: std::num::NonZeroI32,
            pub pair: (u16, bool),
            pub ratio: f32,
        }

        /// Who ordered.
        #[derive(Debug, Deserialize, JsonSchema)]
        #[allow(dead_code)]
        pub struct Customer {
            #[schemars(length(min = 1, max = 40))]
            pub name: String,
            #[schemars(email)]
            pub email: String,
            pub age: Option<u8>,
        }

        /// One line of an order.
        #[derive(Debug, Deserialize, JsonSchema)]
        #[allow(dead_code)]
        pub struct Line {
            #[schemars(regex(pattern = r"^[A-Z]{3}-\d{4}$"))]
            pub sku: String,
            #[schemars(range(min = 1, max = 100))]
            pub quantity: u32,
            pub price: f64,
        }

        /// How soon.
        #[derive(Debug, Deserialize, JsonSchema)]
        pub enum Priority {
            /// Whenever.
            Low,
            /// Soon.
            Normal,
            /// Now.
            High,
        }

        /// Where to.
        #[derive(Debug, Deserialize, JsonSchema)]
        #[allow(dead_code)]
        pub struct Address {
            pub street: String,
            pub city: String,
            pub zip: Option<String>,
        }

        /// How it is paid.
        #[derive(Debug, Deserialize, JsonSchema)]
        #[serde(tag = "method", rename_all = "snake_case")]
        #[allow(dead_code)]
        pub enum Payment {
            Card {
                #[schemars(regex(pattern = r"^\d{4}$"))]
                last4: String,
            },
            Invoice {
                days: u16,
            },
            Cash,
        }
    }

    fn schemars_order() -> Value {
        serde_json::to_value(schemars::schema_for!(order::Order)).unwrap()
    }

    #[test]
    fn every_drawn_value_fits_its_schema() {
        for (name, schema) in table() {
            // Before the last safety net: the construction alone must be right.
            let (strategy, _) = unchecked_values(&schema).unwrap_or_else(|e| panic!("{name}: {e}"));
            let (default, strict) = (jsonschema::validator_for(&schema).unwrap(), strict(&schema));
            runner()
                .run(&strategy, |value| {
                    prop_assert!(default.is_valid(&value), "{name}: {value} is refused");
                    prop_assert!(strict.is_valid(&value), "{name}: {value} is refused with formats asserted");
                    Ok(())
                })
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }

    #[test]
    fn every_invalid_value_is_refused() {
        for (name, schema) in table() {
            if matches!(name, "true" | "empty") {
                continue;
            }
            let strategy = invalid_values(&schema).unwrap_or_else(|e| panic!("{name}: {e}"));
            let validator = jsonschema::validator_for(&schema).unwrap();
            runner()
                .run(&strategy, |value| {
                    prop_assert!(!validator.is_valid(&value), "{name}: {value} is accepted");
                    Ok(())
                })
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }

    #[test]
    fn mutations_are_mostly_refused_before_the_check() {
        // Mutations that miss would be dropped by the last check; too many and proptest gives up.
        for (name, schema) in table() {
            if matches!(name, "true" | "empty") {
                continue;
            }
            let validator = jsonschema::validator_for(&schema).unwrap();
            let all = draws(&unchecked_invalid_values(&schema).unwrap(), 300);
            let refused = all.iter().filter(|v| !validator.is_valid(v)).count();
            assert!(refused * 10 >= all.len() * 8, "{name}: only {refused} of {} mutations are refused", all.len());
        }
    }

    proptest::proptest! {
        #![proptest_config(Config { cases: 64, failure_persistence: None, ..Config::default() })]

        /// Values of a schemars schema are params the Rust type deserializes (integer formats bound the ranges).
        #[test]
        fn schemars_values_deserialize_into_their_type(order in values(&schemars_order()).unwrap()) {
            let parsed = serde_json::from_value::<order::Order>(order.clone());
            prop_assert!(parsed.is_ok(), "{order}: {parsed:?}");
        }
    }

    #[test]
    fn values_cover_the_schema() {
        let of = |name: &str| table().into_iter().find(|(n, _)| *n == name).unwrap().1;
        let sample = |name: &str| draws(&values(&of(name)).unwrap(), 300);

        let people = sample("closed object");
        assert!(people.iter().any(|p| p.get("admin").is_some()) && people.iter().any(|p| p.get("admin").is_none()));
        assert!(people.iter().any(|p| p["age"] == 0) && people.iter().any(|p| p["age"] == 150), "bounds are reached");

        let lengths: Vec<usize> = sample("unique array").iter().map(|a| a.as_array().unwrap().len()).collect();
        assert!(lengths.contains(&1) && lengths.contains(&4), "{lengths:?}");

        let colours = sample("enum");
        for candidate in of("enum")["enum"].as_array().unwrap() {
            assert!(colours.contains(candidate), "{candidate} is never drawn");
        }

        let either = sample("anyOf");
        assert!(either.iter().any(Value::is_string) && either.iter().any(Value::is_i64));

        let anything = sample("true");
        for kind in
            [Value::is_null, Value::is_boolean, Value::is_number, Value::is_string, Value::is_array, Value::is_object]
        {
            assert!(anything.iter().any(kind));
        }

        fn depth(v: &Value) -> usize {
            v["children"].as_array().map_or(0, |c| 1 + c.iter().map(depth).max().unwrap_or(0))
        }
        let trees = sample("recursive tree");
        let deepest = trees.iter().map(depth).max().unwrap();
        assert!((3..=MAX_DEPTH as usize / 2 + 1).contains(&deepest), "the deepest tree nests {deepest} levels");
        assert!(trees.iter().all(|t| t.to_string().len() < 20_000), "trees stay small");
    }

    #[test]
    fn mutations_cover_each_keyword() {
        let people = table().into_iter().find(|(n, _)| *n == "closed object").unwrap().1;
        let mut seen = HashSet::new();
        for wrong in draws(&invalid_values(&people).unwrap(), 600) {
            let Some(fields) = wrong.as_object() else {
                seen.insert("root type");
                continue;
            };
            if !fields.contains_key("name") || !fields.contains_key("age") {
                seen.insert("required");
            }
            if fields.keys().any(|k| !["name", "age", "admin"].contains(&k.as_str())) {
                seen.insert("additionalProperties");
            }
            match fields.get("name") {
                Some(Value::String(name)) if name.is_empty() => seen.insert("minLength"),
                Some(Value::String(name)) if name.chars().count() > 8 => seen.insert("maxLength"),
                Some(Value::String(_)) | None => false,
                Some(_) => seen.insert("property type"),
            };
            match fields.get("age").and_then(Value::as_i64) {
                Some(age) if age < 0 => seen.insert("minimum"),
                Some(age) if age > 150 => seen.insert("maximum"),
                _ => false,
            };
        }
        let expected = [
            "root type",
            "required",
            "additionalProperties",
            "minLength",
            "maxLength",
            "property type",
            "minimum",
            "maximum",
        ];
        for mutation in expected {
            assert!(seen.contains(mutation), "no `{mutation}` mutation among {seen:?}");
        }

        let list =
            json!({"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 3, "uniqueItems": true});
        let mut seen = HashSet::new();
        for wrong in draws(&invalid_values(&list).unwrap(), 400) {
            let Some(items) = wrong.as_array() else {
                seen.insert("root type");
                continue;
            };
            if items.len() < 2 {
                seen.insert("minItems");
            }
            if items.len() > 3 {
                seen.insert("maxItems");
            }
            if items.iter().enumerate().any(|(i, a)| items[..i].contains(a)) {
                seen.insert("uniqueItems");
            }
            if items.iter().any(|i| !i.is_i64()) {
                seen.insert("items");
            }
        }
        for mutation in ["root type", "minItems", "maxItems", "uniqueItems", "items"] {
            assert!(seen.contains(mutation), "no `{mutation}` mutation among {seen:?}");
        }
    }

    #[test]
    fn every_standard_action_gets_valid_and_invalid_params() {
        let skills = [
            crate::demo::Arithmetic::skill(),
            crate::demo::Counter::skill(),
            agentry_skills::Files::skill(),
            agentry_skills::Http::skill(),
            agentry_skills::Jobs::skill(),
            agentry_skills::Memory::skill(),
            agentry_skills::System::skill(),
        ];
        let mut runner = TestRunner::new(Config { cases: 24, failure_persistence: None, ..Config::default() });
        for skill in skills.map(Result::unwrap) {
            for action in skill.actions() {
                let id = &action.spec().id;
                let valid = params(action).unwrap_or_else(|e| panic!("{id}: {e}"));
                runner
                    .run(&valid, |p| {
                        prop_assert!(action.validate(&p).is_ok(), "{id}: {p} is refused: {:?}", action.validate(&p));
                        Ok(())
                    })
                    .unwrap_or_else(|e| panic!("{id}: {e}"));
                let invalid = invalid_params(action).unwrap_or_else(|e| panic!("{id}: {e}"));
                runner
                    .run(&invalid, |p| {
                        prop_assert!(action.validate(&p).is_err(), "{id}: {p} is accepted");
                        Ok(())
                    })
                    .unwrap_or_else(|e| panic!("{id}: {e}"));
            }
        }
    }

    /// The error for a schema from [`values`] (and the same from [`invalid_values`]).
    fn error(schema: Value) -> SchemaError {
        let Err(error) = values(&schema) else { panic!("{schema} has values") };
        if !matches!(error, SchemaError::Unsatisfiable { .. }) {
            assert_eq!(invalid_values(&schema).err(), Some(error.clone()), "{schema}");
        }
        error
    }

    #[test]
    fn unsupported_keywords_are_named_with_where_they_are() {
        let cases = [
            (json!({"not": {"type": "string"}}), "not", "/not"),
            (json!({"if": {"type": "string"}, "then": {"minLength": 2}}), "if", "/if"),
            (
                json!({"type": "object", "properties": {"a": {"type": "object", "patternProperties": {"^x": {}}}}}),
                "patternProperties",
                "/properties/a/patternProperties",
            ),
            (json!({"dependentRequired": {"a": ["b"]}}), "dependentRequired", "/dependentRequired"),
            (json!({"type": "array", "contains": {"type": "integer"}}), "contains", "/contains"),
            (json!({"type": "object", "propertyNames": {"maxLength": 3}}), "propertyNames", "/propertyNames"),
            (json!({"unevaluatedProperties": false}), "unevaluatedProperties", "/unevaluatedProperties"),
            (json!({"type": "array", "items": {"type": "string", "format": "color"}}), "format", "/items/format"),
            (json!({"type": "string", "pattern": "\\bword\\b"}), "pattern", "/pattern"),
            (json!({"type": "string", "allOf": [{"pattern": "^a"}, {"pattern": "b$"}]}), "pattern", "/allOf/1/pattern"),
            (json!({"$ref": "https://example.com/other.json"}), "$ref", "/$ref"),
            (json!({"$defs": {"A": {"$anchor": "a", "type": "integer"}}, "$ref": "#a"}), "$ref", "/$ref"),
            (
                json!({"$ref": "#/$defs/L", "$defs": {"L": {"type": "object", "properties": {"next": {"$ref": "#/$defs/L"}}, "required": ["next"]}}}),
                "$ref",
                "/$defs/L/properties/next",
            ),
        ];
        for (schema, keyword, path) in cases {
            match error(schema.clone()) {
                SchemaError::Unsupported { keyword: k, path: p, .. } if k == keyword && p == path => {}
                other => panic!("{schema}: expected `{keyword}` unsupported at `{path}`, got {other:?}"),
            }
        }
        // A format on something other than a string constrains nothing; a numeric one on a string neither.
        assert!(values(&json!({"type": "integer", "format": "color"})).is_ok());
        assert!(values(&json!({"type": "string", "format": "int32"})).is_ok());
    }

    #[test]
    fn malformed_schemas_are_invalid_where_they_are() {
        let cases = [
            (json!({"minimum": "x"}), "/minimum"),
            (json!({"type": 12}), "/type"),
            (json!({"properties": {"a": {"type": "strin"}}}), "/properties/a/type"),
            (json!({"pattern": "("}), "/pattern"),
            (json!({"properties": {"a": {"$ref": "#/$defs/nope"}}}), "/properties/a/$ref"),
        ];
        for (schema, path) in cases {
            match error(schema.clone()) {
                SchemaError::Invalid { path: p, .. } if p == path => {}
                other => panic!("{schema}: expected invalid at `{path}`, got {other:?}"),
            }
        }
    }

    #[test]
    fn unsatisfiable_schemas_say_where() {
        let cases = [
            (json!(false), ""),
            (json!({"type": "integer", "minimum": 5, "maximum": 1}), "/maximum"),
            (json!({"type": "integer", "minimum": 0.2, "maximum": 0.8}), "/maximum"),
            (json!({"type": "integer", "minimum": 1, "maximum": 5, "multipleOf": 7}), "/multipleOf"),
            (json!({"type": "string", "minLength": 3, "maxLength": 2}), "/maxLength"),
            (json!({"type": "array", "minItems": 3, "maxItems": 1}), "/maxItems"),
            (
                json!({"type": "array", "prefixItems": [{"type": "integer"}], "items": false, "minItems": 2}),
                "/minItems",
            ),
            (json!({"type": "object", "properties": {"a": false}, "required": ["a"]}), "/required"),
            (json!({"type": "object", "required": ["x"], "additionalProperties": false}), "/required"),
            (
                json!({"type": "object", "properties": {"a": {}}, "additionalProperties": false, "minProperties": 2}),
                "/minProperties",
            ),
            (json!({"enum": []}), "/enum"),
            (json!({"type": "string", "enum": [1, 2]}), "/enum"),
            (json!({"allOf": [{"type": "string"}, {"type": "integer"}]}), "/allOf/1/type"),
            (json!({"anyOf": [false, {"type": "integer", "minimum": 3, "maximum": 2}]}), "/anyOf"),
        ];
        for (schema, path) in cases {
            match error(schema.clone()) {
                SchemaError::Unsatisfiable { path: p, .. } if p == path => {}
                other => panic!("{schema}: expected unsatisfiable at `{path}`, got {other:?}"),
            }
        }
        // Refusing everything, `false` has invalid values: anything.
        let wrong = draws(&invalid_values(&json!(false)).unwrap(), 50);
        assert!(wrong.iter().any(Value::is_object) && wrong.iter().any(Value::is_string));
    }

    #[test]
    fn a_schema_that_accepts_everything_has_no_invalid_values() {
        for schema in [json!(true), json!({}), json!({"title": "T", "description": "anything", "x-custom": 1})] {
            assert!(
                matches!(invalid_values(&schema), Err(SchemaError::Unsatisfiable { ref path, .. }) if path.is_empty()),
                "{schema}"
            );
            assert!(values(&schema).is_ok());
        }
    }

    #[test]
    fn messages_name_the_keyword_the_place_and_what_is_expected() {
        let message = error(json!({"properties": {"a": {"not": {"minimum": 3}}}})).to_string();
        assert!(message.starts_with("cannot generate values for `not` at `/properties/a/not`: "), "{message}");
        assert!(message.contains("; expected "), "{message}");
        let message = error(json!(false)).to_string();
        assert!(message.starts_with("no value fits the schema at the root: "), "{message}");
        let message = error(json!({"minimum": "x"})).to_string();
        assert!(message.starts_with("the schema is malformed at `/minimum`: "), "{message}");
    }

    #[test]
    fn formats_are_annotations_to_the_default_validator_in_2020_12() {
        // Why `values` checks with formats asserted and `invalid_values` skips format mutations here.
        let schema = json!({"type": "string", "format": "date"});
        assert!(jsonschema::validator_for(&schema).unwrap().is_valid(&json!("not a date")));
        assert!(!strict(&schema).is_valid(&json!("not a date")));
        let wrong = draws(&unchecked_invalid_values(&schema).unwrap(), 200);
        assert!(!wrong.iter().any(|w| w.as_str().is_some_and(|s| s.starts_with("%%"))));
        // Draft 7 asserts them: there a malformed date is a mutation.
        let draft7 = json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "string", "format": "date"});
        let wrong = draws(&invalid_values(&draft7).unwrap(), 200);
        assert!(wrong.iter().any(Value::is_string), "{wrong:?}");
    }
}
