//! Strategies for values a schema refuses: mutations of valid values, each aimed at one keyword.
//!
//! A mutation only makes a value *likely* refused; [`super::invalid_values`] keeps those the compiled schema
//! actually refuses.

use super::valid::{
    self, INT_MIN, NumRules, StrRules, any_char, array_plan, decimal, enum_candidates, int_above, int_below, int_value,
    object_plan, regex,
};
use super::{At, Ctx, Fail, Kind, Part, R, expand, memo_key};
use proptest::prelude::*;
use proptest::strategy::Union;
use serde_json::{Map, Value};

/// How deep mutations reach into nested values (the root is 0).
const MUTATION_DEPTH: u32 = 6;
/// How many positional items get mutations of their own.
const MUTATED_SLOTS: usize = 4;

/// Values every schema in `parts` together refuses (most of them: see the module doc), or `None` when no
/// mutation applies (the parts accept everything, or values nest too deep to mutate).
pub(super) fn strategy<'s>(
    cx: &Ctx<'s>,
    parts: &[Part<'s>],
    consumed: &[String],
    at: At,
) -> R<Option<BoxedStrategy<Value>>> {
    let key = memo_key(parts, consumed, at);
    if let Some(made) = cx.invalid_memo.borrow().get(&key) {
        return made.clone();
    }
    let made = build(cx, parts, consumed, at);
    cx.invalid_memo.borrow_mut().insert(key, made.clone());
    made
}

fn build<'s>(cx: &Ctx<'s>, parts: &[Part<'s>], consumed: &[String], at: At) -> R<Option<BoxedStrategy<Value>>> {
    if at.depth > MUTATION_DEPTH || at.depth > at.limit {
        return Ok(None);
    }
    let leaf = match expand(cx, parts, consumed) {
        Ok(leaf) => leaf,
        // Nothing fits, so anything is refused.
        Err(fail) if fail.is_empty() => return Ok(Some(anything())),
        Err(fail) => return Err(fail),
    };
    if let Some(choice) = &leaf.choice {
        let mut decided = consumed.to_vec();
        decided.push(choice.path.clone());
        let mut out = Vec::new();
        for branch in &choice.branches {
            let mut with = parts.to_vec();
            with.push(branch.clone());
            if let Some(mutations) = strategy(cx, &with, &decided, at)? {
                out.push(mutations);
            }
        }
        return Ok(union(out));
    }
    let mut out = Vec::new();
    let kinds = leaf.kinds()?;
    for kind in Kind::EVERY {
        if !kinds.has(kind) {
            out.push(sample(kind));
        }
    }
    for (_, not) in &leaf.nots {
        let mut equal: Vec<Value> = not.get("const").into_iter().cloned().collect();
        if let Some(Value::Array(items)) = not.get("enum") {
            equal.extend(items.iter().cloned());
        }
        if !equal.is_empty() {
            out.push(proptest::sample::select(equal).boxed());
        }
    }
    match enum_candidates(cx, &leaf) {
        Ok(Some(candidates)) => {
            out.push(near_misses(&candidates));
            return Ok(union(out));
        }
        Ok(None) => {}
        Err(fail) if fail.is_empty() => {
            out.push(anything());
            return Ok(union(out));
        }
        Err(fail) => return Err(fail),
    }
    if kinds.has(Kind::Int) || kinds.has(Kind::Frac) {
        numbers(&NumRules::read(&leaf)?, !kinds.has(Kind::Frac), &mut out);
    }
    if kinds.has(Kind::Str) {
        strings(&StrRules::read(&leaf)?, cx.formats_asserted, &mut out);
    }
    if kinds.has(Kind::Arr) {
        match array_plan(cx, &leaf, at) {
            Ok(plan) => arrays(cx, &plan, at, &mut out)?,
            Err(Fail::TooDeep(_)) => {}
            Err(fail) if fail.is_empty() => out.push(sample(Kind::Arr)),
            Err(fail) => return Err(fail),
        }
    }
    if kinds.has(Kind::Obj) {
        match object_plan(cx, &leaf, at) {
            Ok(plan) => objects(cx, &plan, at, &mut out)?,
            Err(Fail::TooDeep(_)) => {}
            Err(fail) if fail.is_empty() => out.push(sample(Kind::Obj)),
            Err(fail) => return Err(fail),
        }
    }
    Ok(union(out))
}

fn union(options: Vec<BoxedStrategy<Value>>) -> Option<BoxedStrategy<Value>> {
    (!options.is_empty()).then(|| Union::new(options).boxed())
}

/// Small values of one kind.
pub(super) fn sample(kind: Kind) -> BoxedStrategy<Value> {
    match kind {
        Kind::Null => Just(Value::Null).boxed(),
        Kind::Bool => any::<bool>().prop_map(Value::Bool).boxed(),
        Kind::Int => (-1000i64..=1000).prop_map(Value::from).boxed(),
        Kind::Frac => (-1000i64..1000).prop_map(|k| Value::from(k as f64 + 0.5)).boxed(),
        Kind::Str => regex("[a-zA-Z0-9 _-]{0,10}").prop_map(Value::String).boxed(),
        Kind::Arr => proptest::collection::vec(scalar(), 0..3).prop_map(Value::Array).boxed(),
        Kind::Obj => proptest::collection::btree_map(regex("[a-z]{1,6}"), scalar(), 0..3)
            .prop_map(|fields| Value::Object(fields.into_iter().collect()))
            .boxed(),
    }
}

fn scalar() -> BoxedStrategy<Value> {
    Union::new([Kind::Null, Kind::Bool, Kind::Int, Kind::Frac, Kind::Str].map(sample)).boxed()
}

/// Small values of any kind.
fn anything() -> BoxedStrategy<Value> {
    Union::new(Kind::EVERY.map(sample)).boxed()
}

/// Values next to an `enum`'s: a string with a character more, a number one off, the other boolean, ...
fn near_misses(candidates: &[Value]) -> BoxedStrategy<Value> {
    let mut misses = Vec::new();
    for candidate in candidates {
        match candidate {
            Value::String(s) => {
                misses.push(Value::from(format!("{s}_")));
                misses.push(Value::from(format!("{}X", s.to_uppercase())));
                misses.push(Value::from(""));
            }
            Value::Number(n) => {
                let x = n.as_f64().unwrap_or(0.0);
                misses.extend([x + 1.0, x - 1.0, x + 0.5].map(Value::from));
            }
            Value::Bool(b) => misses.push(Value::Bool(!b)),
            Value::Null => misses.push(Value::from("null")),
            Value::Array(items) => {
                let mut longer = items.clone();
                longer.push(Value::Null);
                misses.push(Value::Array(longer));
            }
            Value::Object(fields) => {
                let mut more = fields.clone();
                more.insert("unexpected".into(), Value::Null);
                misses.push(Value::Object(more));
            }
        }
    }
    let mut options = vec![proptest::sample::select(misses).boxed()];
    // Free values of the candidates' kinds, almost never one of them.
    if candidates.iter().any(Value::is_string) {
        options.push(sample(Kind::Str));
    }
    if candidates.iter().any(Value::is_number) {
        options.push(sample(Kind::Int));
    }
    Union::new(options).boxed()
}

/// Numbers out of bounds, and numbers that are not multiples.
fn numbers(rules: &NumRules, integers_only: bool, out: &mut Vec<BoxedStrategy<Value>>) {
    if let Some((_, bound)) = rules.lo {
        if integers_only {
            let lo = int_above(bound);
            if lo > INT_MIN {
                out.push((1i128..=1000).prop_map(move |d| int_value(lo - d)).boxed());
            }
        } else {
            if bound.exclusive {
                out.push(Just(Value::from(bound.value)).boxed());
            }
            out.push((0.001f64..1000.0).prop_map(move |d| Value::from(bound.value - d)).boxed());
        }
    }
    if let Some((_, bound)) = rules.hi {
        if integers_only {
            let hi = int_below(bound);
            out.push((1i128..=1000).prop_map(move |d| int_value(hi + d)).boxed());
        } else {
            if bound.exclusive {
                out.push(Just(Value::from(bound.value)).boxed());
            }
            out.push((0.001f64..1000.0).prop_map(move |d| Value::from(bound.value + d)).boxed());
        }
    }
    if let Some((_, step)) = rules.step {
        match (integers_only, step.int_step()) {
            (true, Some(s)) if s > 1 => out.push((-100i128..=100).prop_map(move |k| int_value(k * s + 1)).boxed()),
            (true, _) => {}
            // Halfway between two multiples: never a multiple.
            (false, _) => out.push(
                (-100i128..=100)
                    .prop_map(move |k| Value::from(decimal((2 * k + 1) * step.mant as i128 * 5, step.scale + 1)))
                    .boxed(),
            ),
        }
    }
}

/// Strings too short, too long, not matching the pattern, not of the format.
fn strings(rules: &StrRules, formats_asserted: bool, out: &mut Vec<BoxedStrategy<Value>>) {
    let text = |lengths: std::ops::RangeInclusive<usize>| {
        proptest::collection::vec(proptest::char::range(' ', '~'), lengths)
            .prop_map(|chars| Value::String(chars.into_iter().collect()))
            .boxed()
    };
    if rules.min > 0 {
        out.push(text(0..=rules.min - 1));
    }
    if let Some(max) = rules.max {
        out.push(text(max + 1..=max.saturating_add(4)));
    }
    if rules.pattern.is_some() {
        let hi = rules.max.unwrap_or(usize::MAX).min(rules.min.saturating_add(12)).max(rules.min);
        out.push(
            proptest::collection::vec(any_char(), rules.min..=hi)
                .prop_map(|chars| Value::String(chars.into_iter().collect()))
                .boxed(),
        );
    }
    if rules.format.is_some() && formats_asserted {
        out.push(Just(Value::from("%% not of the format %%")).boxed());
    }
}

/// Arrays with too few or too many items, a repeated item, or an item its schema refuses.
fn arrays<'s>(cx: &Ctx<'s>, plan: &valid::ArrayPlan<'s>, at: At, out: &mut Vec<BoxedStrategy<Value>>) -> R<()> {
    let arrays = plan.strategy().prop_map(|v| match v {
        Value::Array(items) => items,
        _ => Vec::new(),
    });
    let filler =
        plan.rest.as_ref().or(plan.slots.first()).map_or_else(|| Just(Value::Null).boxed(), |slot| slot.values.clone());
    if plan.min > 0 {
        let keep = plan.min - 1;
        out.push(
            arrays
                .clone()
                .prop_map(move |mut items| {
                    items.truncate(keep);
                    Value::Array(items)
                })
                .boxed(),
        );
    }
    if let Some(max) = plan.max {
        out.push(
            (arrays.clone(), filler.clone())
                .prop_map(move |(mut items, extra)| {
                    while items.len() <= max {
                        items.push(extra.clone());
                    }
                    Value::Array(items)
                })
                .boxed(),
        );
    }
    if plan.unique {
        out.push(
            (arrays.clone(), filler.clone())
                .prop_map(|(mut items, extra)| {
                    if items.is_empty() {
                        items.push(extra);
                    }
                    items.push(items[0].clone());
                    Value::Array(items)
                })
                .boxed(),
        );
    }
    for (i, slot) in plan.slots.iter().enumerate().take(MUTATED_SLOTS) {
        if let Some(bad) = strategy(cx, &slot.parts, &[], at.child())? {
            out.push(
                (arrays.clone(), bad)
                    .prop_map(move |(mut items, bad)| {
                        while items.len() <= i {
                            items.push(bad.clone());
                        }
                        items[i] = bad;
                        Value::Array(items)
                    })
                    .boxed(),
            );
        }
    }
    let fixed = plan.slots.len();
    let beyond = match &plan.rest {
        Some(rest) => strategy(cx, &rest.parts, &[], at.child())?,
        // No item past the slots may have any value.
        None if plan.rest_forbidden => Some(anything()),
        None => None,
    };
    if let Some(bad) = beyond {
        out.push(
            (arrays, bad)
                .prop_map(move |(mut items, bad)| {
                    if items.len() > fixed {
                        let last = items.len() - 1;
                        items[last] = bad;
                    } else {
                        while items.len() <= fixed {
                            items.push(bad.clone());
                        }
                    }
                    Value::Array(items)
                })
                .boxed(),
        );
    }
    Ok(())
}

/// Objects with a required property removed, a property its schema refuses, a property that may not be
/// there, too few or too many properties.
fn objects<'s>(cx: &Ctx<'s>, plan: &valid::ObjectPlan<'s>, at: At, out: &mut Vec<BoxedStrategy<Value>>) -> R<()> {
    let objects = plan.strategy().prop_map(|v| match v {
        Value::Object(fields) => fields,
        _ => Map::new(),
    });
    let names = plan.names();
    let unused = unused_name(&names);
    let with = |name: String, values: BoxedStrategy<Value>| {
        (objects.clone(), values)
            .prop_map(move |(mut fields, value)| {
                fields.insert(name.clone(), value);
                Value::Object(fields)
            })
            .boxed()
    };
    for prop in &plan.props {
        if prop.required {
            let name = prop.name.clone();
            out.push(
                objects
                    .clone()
                    .prop_map(move |mut fields| {
                        fields.remove(&name);
                        Value::Object(fields)
                    })
                    .boxed(),
            );
        }
        if prop.forbidden {
            out.push(with(prop.name.clone(), scalar()));
        } else if prop.values.is_some()
            && let Some(bad) = strategy(cx, &prop.parts, &[], at.child())?
        {
            out.push(with(prop.name.clone(), bad));
        }
    }
    if plan.closed {
        out.push(with(unused.clone(), scalar()));
    } else if !plan.extra_parts.is_empty()
        && let Some(bad) = strategy(cx, &plan.extra_parts, &[], at.child())?
    {
        out.push(with(unused.clone(), bad));
    }
    if plan.min > 0 {
        let keep = plan.min - 1;
        out.push(
            objects
                .clone()
                .prop_map(move |mut fields| {
                    let extra: Vec<String> = fields.keys().skip(keep).cloned().collect();
                    for name in extra {
                        fields.remove(&name);
                    }
                    Value::Object(fields)
                })
                .boxed(),
        );
    }
    if let Some(max) = plan.max {
        out.push(
            objects
                .prop_map(move |mut fields| {
                    let mut i = 0;
                    while fields.len() <= max {
                        fields.entry(format!("unexpected_{i}")).or_insert(Value::Null);
                        i += 1;
                    }
                    Value::Object(fields)
                })
                .boxed(),
        );
    }
    Ok(())
}

/// A property name none of `names` is.
fn unused_name(names: &[String]) -> String {
    let mut i = 0;
    loop {
        let name = if i == 0 { "unexpected".to_string() } else { format!("unexpected_{i}") };
        if !names.contains(&name) {
            return name;
        }
        i += 1;
    }
}
