//! Strategies for the values a schema accepts, built from its keywords.

use super::{
    At, Choice, Ctx, Fail, Kind, Leaf, Part, R, SchemaError, expand, invalid, join, json_eq, memo_key, unsatisfiable,
    unsupported,
};
use proptest::prelude::*;
use proptest::strategy::Union;
use regex_syntax::hir::{Capture, Class, ClassUnicode, ClassUnicodeRange, Hir, HirKind, Look, Repetition};
use serde_json::{Map, Number, Value};
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};

/// The values every schema in `parts` accepts, with the `anyOf`/`oneOf`s in `consumed` already decided.
pub(super) fn strategy<'s>(cx: &Ctx<'s>, parts: &[Part<'s>], consumed: &[String], at: At) -> R<BoxedStrategy<Value>> {
    let key = memo_key(parts, consumed, at);
    if let Some(made) = cx.valid_memo.borrow().get(&key) {
        return made.clone();
    }
    let made = build(cx, parts, consumed, at);
    cx.valid_memo.borrow_mut().insert(key, made.clone());
    made
}

fn build<'s>(cx: &Ctx<'s>, parts: &[Part<'s>], consumed: &[String], at: At) -> R<BoxedStrategy<Value>> {
    if at.depth > at.limit {
        return Err(Fail::TooDeep(parts.last().map_or_else(String::new, |p| p.path.clone())));
    }
    let leaf = expand(cx, parts, consumed)?;
    let at = if leaf.unconstrained() { at.loose() } else { at };
    if let Some(choice) = &leaf.choice {
        return choose(cx, parts, consumed, choice, at);
    }
    let drawn = draw(cx, &leaf, at)?;
    if leaf.nots.is_empty() {
        return Ok(drawn);
    }
    let nots: Vec<String> = leaf.nots.iter().map(|(path, _)| path.clone()).collect();
    let checks = cx.checks.clone();
    Ok(drawn.prop_filter("a value no `not` matches", move |v| nots.iter().all(|p| !checks.accepts(p, v))).boxed())
}

/// One branch of `choice` at a time, each merged with the rest of `parts`.
fn choose<'s>(
    cx: &Ctx<'s>,
    parts: &[Part<'s>],
    consumed: &[String],
    choice: &Choice<'s>,
    at: At,
) -> R<BoxedStrategy<Value>> {
    let mut decided = consumed.to_vec();
    decided.push(choice.path.clone());
    let mut options = Vec::new();
    let mut empty: Option<Fail> = None;
    for (i, branch) in choice.branches.iter().enumerate() {
        let mut with = parts.to_vec();
        with.push(branch.clone());
        match strategy(cx, &with, &decided, at) {
            Ok(values) => options.push((i, values)),
            Err(fail) if fail.is_empty() => {
                empty.get_or_insert(fail);
            }
            Err(fail) => return Err(fail),
        }
    }
    if options.is_empty() {
        let keyword = if choice.one_of { "oneOf" } else { "anyOf" };
        return Err(match empty {
            Some(Fail::Schema(SchemaError::Unsatisfiable { path, reason })) => unsatisfiable(
                &choice.path,
                format!("no branch of `{keyword}` can have a value (the first one: {reason} at `{path}`)"),
            ),
            Some(fail) => fail,
            None => unsatisfiable(&choice.path, format!("`{keyword}` has no branch")),
        });
    }
    if !choice.one_of {
        return Ok(Union::new(options.into_iter().map(|(_, values)| values)).boxed());
    }
    // A value of `oneOf` matches exactly one branch: the one it was drawn from.
    let count = choice.branches.len();
    let options = options.into_iter().map(|(i, values)| {
        let others: Vec<String> = (0..count).filter(|&j| j != i).map(|j| join(&choice.path, &j.to_string())).collect();
        let checks = cx.checks.clone();
        values
            .prop_filter("a value no other `oneOf` branch accepts", move |v| {
                others.iter().all(|p| !checks.accepts(p, v))
            })
            .boxed()
    });
    Ok(Union::new(options).boxed())
}

/// The values of a leaf (no choice left): from its `enum`/`const`, else from each type it allows.
fn draw<'s>(cx: &Ctx<'s>, leaf: &Leaf<'s>, at: At) -> R<BoxedStrategy<Value>> {
    if let Some(candidates) = enum_candidates(cx, leaf)? {
        return Ok(proptest::sample::select(candidates).boxed());
    }
    let kinds = leaf.kinds()?;
    if kinds.is_empty() {
        let path = leaf.all("type").last().map_or_else(String::new, |(path, _)| path);
        return Err(unsatisfiable(&path, "the `type`s that apply here have no type in common"));
    }
    let mut options: Vec<(u32, BoxedStrategy<Value>)> = Vec::new();
    let mut empty: Option<Fail> = None;
    let mut take = |weight: u32, made: R<Option<BoxedStrategy<Value>>>| -> R<()> {
        match made {
            Ok(Some(values)) => options.push((weight, values)),
            Ok(None) => {}
            Err(fail) if fail.is_empty() => {
                empty.get_or_insert(fail);
            }
            Err(fail) => return Err(fail),
        }
        Ok(())
    };
    if kinds.has(Kind::Null) {
        take(1, Ok(Some(Just(Value::Null).boxed())))?;
    }
    if kinds.has(Kind::Bool) {
        take(3, Ok(Some(any::<bool>().prop_map(Value::Bool).boxed())))?;
    }
    if kinds.has(Kind::Int) || kinds.has(Kind::Frac) {
        let rules = NumRules::read(leaf)?;
        if kinds.has(Kind::Int) {
            take(3, rules.integers().map(Some))?;
        }
        if kinds.has(Kind::Frac) {
            take(3, rules.fractions())?;
        }
    }
    if kinds.has(Kind::Str) {
        take(3, StrRules::read(leaf).and_then(|rules| rules.strategy()).map(Some))?;
    }
    if kinds.has(Kind::Arr) {
        take(3, array_plan(cx, leaf, at).map(|plan| Some(plan.strategy())))?;
    }
    if kinds.has(Kind::Obj) {
        take(3, object_plan(cx, leaf, at).map(|plan| Some(plan.strategy())))?;
    }
    match (options.is_empty(), empty) {
        (false, _) => Ok(Union::new_weighted(options).boxed()),
        (true, Some(fail)) => Err(fail),
        (true, None) => {
            Err(unsatisfiable(leaf.parts.first().map_or("", |(p, _)| p.as_str()), "no type can have a value"))
        }
    }
}

/// The values of the leaf's `enum`s and `const`s that every part accepts, or `None` without any.
pub(super) fn enum_candidates<'s>(cx: &Ctx<'s>, leaf: &Leaf<'s>) -> R<Option<Vec<Value>>> {
    let mut lists: Vec<(String, Vec<&Value>)> = leaf.all("const").map(|(path, value)| (path, vec![value])).collect();
    for (path, value) in leaf.all("enum") {
        let Value::Array(items) = value else { return Err(invalid(&path, "`enum` must be an array")) };
        lists.push((path, items.iter().collect()));
    }
    let Some((path, first)) = lists.first() else { return Ok(None) };
    if first.is_empty() {
        return Err(unsatisfiable(path, "the `enum` is empty"));
    }
    let mut kept: Vec<Value> = Vec::new();
    for candidate in first {
        if leaf.parts.iter().all(|(part, _)| cx.checks.accepts(part, candidate))
            && !kept.iter().any(|k| json_eq(k, candidate))
        {
            kept.push((*candidate).clone());
        }
    }
    if kept.is_empty() {
        return Err(unsatisfiable(path, "no value of the `enum`/`const` fits the rest of the schema"));
    }
    Ok(Some(kept))
}

// ----- numbers -----

/// The smallest and largest integers drawn: what JSON numbers hold exactly (`i64` and `u64`).
pub(super) const INT_MIN: i128 = i64::MIN as i128;
pub(super) const INT_MAX: i128 = u64::MAX as i128;

/// A numeric bound.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Bound {
    pub value: f64,
    pub exclusive: bool,
}

/// A decimal `mant / 10^scale`, as `multipleOf` is compared (by its decimal digits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Dec {
    pub mant: u128,
    pub scale: u32,
}

impl Dec {
    /// The decimal a JSON number is written as; `None` when it is negative or has too many digits.
    fn parse(number: &Number) -> Option<Dec> {
        let text = number.to_string();
        let (digits, exponent) = match text.split_once(['e', 'E']) {
            Some((digits, exponent)) => (digits, exponent.trim_start_matches('+').parse::<i32>().ok()?),
            None => (text.as_str(), 0),
        };
        if digits.starts_with('-') {
            return None;
        }
        let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
        let all = format!("{whole}{fraction}");
        let all = all.trim_start_matches('0');
        let mut mant: u128 = if all.is_empty() { 0 } else { all.parse().ok()? };
        let mut scale = i32::try_from(fraction.len()).ok()? - exponent;
        while scale < 0 {
            mant = mant.checked_mul(10)?;
            scale += 1;
        }
        Dec::normal(mant, u32::try_from(scale).ok()?)
    }

    fn normal(mut mant: u128, mut scale: u32) -> Option<Dec> {
        while scale > 0 && mant != 0 && mant.is_multiple_of(10) {
            mant /= 10;
            scale -= 1;
        }
        (scale <= 30 && mant < 10u128.pow(30)).then_some(Dec { mant, scale })
    }

    /// The least common multiple: the values that are multiples of both.
    fn lcm(self, other: Dec) -> Option<Dec> {
        let scale = self.scale.max(other.scale);
        let a = self.mant.checked_mul(10u128.checked_pow(scale - self.scale)?)?;
        let b = other.mant.checked_mul(10u128.checked_pow(scale - other.scale)?)?;
        Dec::normal((a / gcd(a, b)).checked_mul(b)?, scale)
    }

    /// The smallest positive integer that is a multiple.
    pub fn int_step(self) -> Option<i128> {
        let power = 10u128.checked_pow(self.scale)?;
        i128::try_from(self.mant / gcd(self.mant, power)).ok()
    }

    /// `k` times this, as the `f64` whose shortest decimal form is the exact product.
    pub fn times(self, k: i128) -> f64 {
        decimal(k * self.mant as i128, self.scale)
    }

    fn show(self) -> String {
        decimal(self.mant as i128, self.scale).to_string()
    }
}

/// `digits / 10^scale` as an `f64`.
pub(super) fn decimal(digits: i128, scale: u32) -> f64 {
    format!("{digits}e-{scale}").parse().unwrap_or(f64::NAN)
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// The numeric keywords of a leaf, merged.
#[derive(Clone, Debug)]
pub(super) struct NumRules {
    pub lo: Option<(String, Bound)>,
    pub hi: Option<(String, Bound)>,
    pub step: Option<(String, Dec)>,
    /// The range of the Rust integer type a `format` names (`uint8`, `int32`, ...): a hint, not a constraint.
    pub int_range: (i128, i128),
    /// A `format: float` hint: stay within `f32`.
    pub float32: bool,
}

impl NumRules {
    pub fn read(leaf: &Leaf<'_>) -> R<NumRules> {
        let mut rules = NumRules { lo: None, hi: None, step: None, int_range: (INT_MIN, INT_MAX), float32: false };
        for (path, map) in &leaf.parts {
            let number = |key: &str| -> R<Option<(String, f64)>> {
                let at = join(path, key);
                match map.get(key) {
                    None => Ok(None),
                    Some(Value::Number(n)) => Ok(Some((at, n.as_f64().unwrap_or(f64::NAN)))),
                    // Draft 4's boolean form modifies `minimum`/`maximum`.
                    Some(Value::Bool(_)) if key.starts_with("exclusive") => Ok(None),
                    Some(other) => Err(invalid(&at, format!("`{key}` must be a number, not `{other}`"))),
                }
            };
            let draft4 = |key: &str| map.get(key) == Some(&Value::Bool(true));
            if let Some((at, value)) = number("minimum")? {
                rules.raise(at, Bound { value, exclusive: draft4("exclusiveMinimum") });
            }
            if let Some((at, value)) = number("exclusiveMinimum")? {
                rules.raise(at, Bound { value, exclusive: true });
            }
            if let Some((at, value)) = number("maximum")? {
                rules.lower(at, Bound { value, exclusive: draft4("exclusiveMaximum") });
            }
            if let Some((at, value)) = number("exclusiveMaximum")? {
                rules.lower(at, Bound { value, exclusive: true });
            }
            if let Some(step) = map.get("multipleOf") {
                let at = join(path, "multipleOf");
                let Value::Number(n) = step else {
                    return Err(invalid(&at, format!("`multipleOf` must be a number, not `{step}`")));
                };
                let dec = Dec::parse(n).ok_or_else(|| {
                    unsupported("multipleOf", &at, format!("`{n}` has too many digits to draw multiples"))
                })?;
                if dec.mant == 0 {
                    return Err(invalid(&at, "`multipleOf` must be greater than 0"));
                }
                let merged = match rules.step.take() {
                    None => dec,
                    Some((_, other)) => other.lcm(dec).ok_or_else(|| {
                        unsupported("multipleOf", &at, "the common multiple of the `multipleOf`s has too many digits")
                    })?,
                };
                rules.step = Some((at, merged));
            }
            if let Some(Value::String(format)) = map.get("format") {
                if let Some((lo, hi)) = int_format(format) {
                    rules.int_range = (rules.int_range.0.max(lo), rules.int_range.1.min(hi));
                }
                rules.float32 |= format == "float";
            }
        }
        Ok(rules)
    }

    fn raise(&mut self, path: String, bound: Bound) {
        let keep = self.lo.as_ref().is_some_and(|(_, old)| {
            old.value > bound.value || (old.value == bound.value && (old.exclusive || !bound.exclusive))
        });
        if !keep {
            self.lo = Some((path, bound));
        }
    }

    fn lower(&mut self, path: String, bound: Bound) {
        let keep = self.hi.as_ref().is_some_and(|(_, old)| {
            old.value < bound.value || (old.value == bound.value && (old.exclusive || !bound.exclusive))
        });
        if !keep {
            self.hi = Some((path, bound));
        }
    }

    /// Where to blame an empty range.
    fn blame(&self) -> String {
        self.hi.as_ref().or(self.lo.as_ref()).map_or_else(String::new, |(path, _)| path.clone())
    }

    /// The smallest and largest integer within the bounds (and the format's range).
    pub fn int_bounds(&self) -> (i128, i128) {
        let lo = self.lo.as_ref().map_or(INT_MIN, |(_, b)| int_above(*b));
        let hi = self.hi.as_ref().map_or(INT_MAX, |(_, b)| int_below(*b));
        (lo.max(self.int_range.0), hi.min(self.int_range.1))
    }

    pub fn integers(&self) -> R<BoxedStrategy<Value>> {
        let (lo, hi) = self.int_bounds();
        if lo > hi {
            return Err(unsatisfiable(&self.blame(), "no integer lies within the bounds"));
        }
        let step = match &self.step {
            None => 1,
            Some((path, dec)) => {
                dec.int_step().ok_or_else(|| unsupported("multipleOf", path, "the multiple has too many digits"))?
            }
        };
        let (kmin, kmax) = (-(-lo).div_euclid(step), hi.div_euclid(step));
        if kmin > kmax {
            let path = self.step.as_ref().map_or_else(String::new, |(p, _)| p.clone());
            return Err(unsatisfiable(&path, format!("no integer multiple of {step} lies within the bounds")));
        }
        Ok(near_zero(kmin, kmax).prop_map(move |k| int_value(k * step)).boxed())
    }

    /// Numbers that need not be integers; `None` when every allowed number is an integer (drawn by
    /// [`NumRules::integers`]).
    pub fn fractions(&self) -> R<Option<BoxedStrategy<Value>>> {
        let lo = self.lo.as_ref().map(|(_, b)| *b);
        let hi = self.hi.as_ref().map(|(_, b)| *b);
        let inside = move |x: &f64| {
            x.is_finite()
                && lo.is_none_or(|b| if b.exclusive { *x > b.value } else { *x >= b.value })
                && hi.is_none_or(|b| if b.exclusive { *x < b.value } else { *x <= b.value })
        };
        let wide = if self.float32 { f64::from(f32::MAX) } else { 1e300 };
        let a = lo.map_or(hi.map_or(-wide, |h| h.value.min(-wide)), |l| l.value);
        let b = hi.map_or(lo.map_or(wide, |l| l.value.max(wide)), |h| h.value);
        if a > b || (a == b && (lo.is_some_and(|l| l.exclusive) || hi.is_some_and(|h| h.exclusive))) {
            return Err(unsatisfiable(&self.blame(), "no number lies within the bounds"));
        }
        match &self.step {
            Some((_, dec)) if dec.scale == 0 => Ok(None),
            Some((path, dec)) => {
                let dec = *dec;
                let m = dec.times(1);
                // Multiples stay below 10^15 in magnitude, where every one is exact as an `f64`.
                let cap = 10i128.pow(15) / (dec.mant as i128).max(1);
                let kmin = ((a.max(-1e15) / m).ceil() as i128).max(-cap);
                let kmax = ((b.min(1e15) / m).floor() as i128).min(cap);
                if kmin > kmax {
                    if a > 1e15 || b < -1e15 {
                        return Err(unsupported("multipleOf", path, "decimal multiples beyond 10^15 are not drawn"));
                    }
                    return Err(unsatisfiable(path, format!("no multiple of {} lies within the bounds", dec.show())));
                }
                Ok(Some(
                    near_zero(kmin, kmax)
                        .prop_map(move |k| dec.times(k))
                        .prop_filter("a multiple within the bounds", inside)
                        .prop_map(Value::from)
                        .boxed(),
                ))
            }
            None => {
                let (sa, sb) = if b < -1000.0 {
                    ((b - 1000.0).max(a), b)
                } else if a > 1000.0 {
                    (a, (a + 1000.0).min(b))
                } else {
                    (a.max(-1000.0), b.min(1000.0))
                };
                // The whole range, within ±1e300 where it reaches beyond (a span must stay finite).
                let (fa, fb) = match (a.max(-1e300), b.min(1e300)) {
                    (fa, fb) if fa <= fb => (fa, fb),
                    _ => (a, b),
                };
                let mut options = vec![(6, (sa..=sb).boxed()), (2, (fa..=fb).boxed())];
                if lo.is_some_and(|l| !l.exclusive) {
                    options.push((1, Just(a).boxed()));
                }
                if hi.is_some_and(|h| !h.exclusive) {
                    options.push((1, Just(b).boxed()));
                }
                Ok(Some(
                    Union::new_weighted(options)
                        .prop_filter("a number within the bounds", inside)
                        .prop_map(Value::from)
                        .boxed(),
                ))
            }
        }
    }
}

/// The range of the Rust integer type an integer `format` names (schemars writes them).
pub(super) fn int_format(format: &str) -> Option<(i128, i128)> {
    Some(match format {
        "int8" => (i8::MIN.into(), i8::MAX.into()),
        "int16" => (i16::MIN.into(), i16::MAX.into()),
        "int32" => (i32::MIN.into(), i32::MAX.into()),
        "int64" | "int" => (i64::MIN.into(), i64::MAX.into()),
        "uint8" => (0, u8::MAX.into()),
        "uint16" => (0, u16::MAX.into()),
        "uint32" => (0, u32::MAX.into()),
        "uint64" | "uint" => (0, u64::MAX.into()),
        "int128" => (INT_MIN, INT_MAX),
        "uint128" => (0, INT_MAX),
        _ => return None,
    })
}

/// Whether a `format` describes numbers (schemars' `int32`, `double`, ...): it says nothing of strings.
fn numeric_format(format: &str) -> bool {
    int_format(format).is_some() || format == "float" || format == "double"
}

/// The smallest integer above (or at) a bound, clamped just outside the drawable range.
pub(super) fn int_above(bound: Bound) -> i128 {
    let x = if bound.exclusive { bound.value.floor() + 1.0 } else { bound.value.ceil() };
    clamp_int(x)
}

/// The largest integer below (or at) a bound, clamped just outside the drawable range.
pub(super) fn int_below(bound: Bound) -> i128 {
    let x = if bound.exclusive { bound.value.ceil() - 1.0 } else { bound.value.floor() };
    clamp_int(x)
}

fn clamp_int(x: f64) -> i128 {
    if x.is_nan() {
        0
    } else if x < INT_MIN as f64 {
        INT_MIN - 1
    } else if x > INT_MAX as f64 {
        INT_MAX + 1
    } else {
        x as i128
    }
}

/// An integer as JSON: exactly when `i64` or `u64` holds it, else the nearest `f64`.
pub(super) fn int_value(n: i128) -> Value {
    if let Ok(n) = i64::try_from(n) {
        Value::from(n)
    } else if let Ok(n) = u64::try_from(n) {
        Value::from(n)
    } else {
        Value::from(n as f64)
    }
}

/// Integers in `lo..=hi`, mostly small (near zero, or near the bound closest to it), sometimes anywhere, and
/// sometimes exactly a bound.
pub(super) fn near_zero(lo: i128, hi: i128) -> BoxedStrategy<i128> {
    const SMALL: i128 = 100;
    let (a, b) = if hi < -SMALL {
        ((hi - SMALL).max(lo), hi)
    } else if lo > SMALL {
        (lo, (lo + SMALL).min(hi))
    } else {
        (lo.max(-SMALL), hi.min(SMALL))
    };
    Union::new_weighted(vec![
        (6, (a..=b).boxed()),
        (2, (lo..=hi).boxed()),
        (1, Edge { start: lo, lo, hi }.boxed()),
        (1, Edge { start: hi, lo, hi }.boxed()),
    ])
    .boxed()
}

/// An integer that starts at `start` (a bound, where bugs live) and shrinks toward the value of `lo..=hi`
/// closest to zero, so a counterexample found at a bound still shrinks to the smallest one.
#[derive(Debug, Clone, Copy)]
struct Edge {
    start: i128,
    lo: i128,
    hi: i128,
}

impl Strategy for Edge {
    type Tree = EdgeTree;
    type Value = i128;

    fn new_tree(&self, _runner: &mut proptest::test_runner::TestRunner) -> proptest::strategy::NewTree<Self> {
        let target = 0i128.clamp(self.lo, self.hi);
        let distance = self.start.abs_diff(target);
        let sign = if self.start < target { -1 } else { 1 };
        Ok(EdgeTree { target, sign, low: 0, high: distance, current: distance })
    }
}

/// A binary search on the distance from the target: `high` is the smallest distance known to fail, `low` the
/// smallest not yet ruled out.
#[derive(Debug, Clone, Copy)]
struct EdgeTree {
    target: i128,
    sign: i128,
    low: u128,
    high: u128,
    current: u128,
}

impl EdgeTree {
    fn reposition(&mut self) -> bool {
        let middle = self.low + (self.high - self.low) / 2;
        if middle == self.current {
            return false;
        }
        self.current = middle;
        true
    }
}

impl proptest::strategy::ValueTree for EdgeTree {
    type Value = i128;

    fn current(&self) -> i128 {
        // The distance never exceeds the span of an i128 range around a target inside it.
        self.target + self.sign * i128::try_from(self.current).unwrap_or(i128::MAX)
    }

    fn simplify(&mut self) -> bool {
        if self.high <= self.low {
            return false;
        }
        self.high = self.current;
        self.reposition()
    }

    fn complicate(&mut self) -> bool {
        if self.current >= self.high {
            return false;
        }
        self.low = self.current + 1;
        self.reposition()
    }
}

// ----- strings -----

/// The string keywords of a leaf, merged.
#[derive(Clone, Debug, Default)]
pub(super) struct StrRules {
    pub min: usize,
    pub max: Option<usize>,
    pub max_path: String,
    pub pattern: Option<(String, String)>,
    pub format: Option<(String, String)>,
}

impl StrRules {
    pub fn read(leaf: &Leaf<'_>) -> R<StrRules> {
        let mut rules = StrRules::default();
        for (path, map) in &leaf.parts {
            if let Some(value) = map.get("minLength") {
                rules.min = rules.min.max(count(&join(path, "minLength"), value)?);
            }
            if let Some(value) = map.get("maxLength") {
                let at = join(path, "maxLength");
                let max = count(&at, value)?;
                if rules.max.is_none_or(|old| max < old) {
                    rules.max = Some(max);
                    rules.max_path = at;
                }
            }
            if let Some(value) = map.get("pattern") {
                let at = join(path, "pattern");
                let Value::String(pattern) = value else {
                    return Err(invalid(&at, format!("`pattern` must be a string, not `{value}`")));
                };
                match &rules.pattern {
                    None => rules.pattern = Some((at, pattern.clone())),
                    Some((_, old)) if old == pattern => {}
                    Some(_) => {
                        return Err(unsupported(
                            "pattern",
                            &at,
                            "a second, different `pattern` applies to the same string (through `allOf` or `$ref`); \
                             the generator cannot intersect regular expressions",
                        ));
                    }
                }
            }
            if let Some(value) = map.get("format") {
                let at = join(path, "format");
                let Value::String(format) = value else {
                    return Err(invalid(&at, format!("`format` must be a string, not `{value}`")));
                };
                if numeric_format(format) {
                    continue;
                }
                match &rules.format {
                    None => rules.format = Some((at, format.clone())),
                    Some((_, old)) if old == format => {}
                    Some((_, old)) => {
                        return Err(unsupported(
                            "format",
                            &at,
                            format!("a second format (`{format}` besides `{old}`) applies to the same string"),
                        ));
                    }
                }
            }
        }
        if let (Some((at, _)), Some((_, format))) = (&rules.pattern, &rules.format) {
            return Err(unsupported(
                "pattern",
                at,
                format!("a `pattern` together with `format: {format}` is not drawn"),
            ));
        }
        Ok(rules)
    }

    pub fn strategy(&self) -> R<BoxedStrategy<Value>> {
        let (min, max) = (self.min, self.max);
        if let Some(max) = max
            && max < min
        {
            return Err(unsatisfiable(&self.max_path, format!("`maxLength` {max} is below `minLength` {min}")));
        }
        let within = move |s: &String| {
            let n = s.chars().count();
            n >= min && max.is_none_or(|m| n <= m)
        };
        let strings = if let Some((path, format)) = &self.format {
            format_strings(path, format)?.prop_filter("a length within the bounds", within).boxed()
        } else if let Some((path, pattern)) = &self.pattern {
            pattern_strings(path, pattern, min, max)?.prop_filter("a length within the bounds", within).boxed()
        } else {
            let hi = max.unwrap_or(usize::MAX).min(min.saturating_add(12));
            proptest::collection::vec(any_char(), min..=hi).prop_map(String::from_iter).boxed()
        };
        Ok(strings.prop_map(Value::String).boxed())
    }
}

/// A non-negative integer keyword (`minLength`, `maxItems`, ...).
pub(super) fn count(path: &str, value: &Value) -> R<usize> {
    value
        .as_u64()
        .or_else(|| value.as_f64().filter(|f| *f >= 0.0 && f.fract() == 0.0).map(|f| f as u64))
        .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
        .ok_or_else(|| invalid(path, format!("expected a non-negative integer, not `{value}`")))
}

/// Characters for free text: mostly printable ASCII, sometimes anything (accents, CJK, emoji, controls).
pub(super) fn any_char() -> BoxedStrategy<char> {
    Union::new_weighted(vec![
        (12, proptest::char::range(' ', '~').boxed()),
        (1, any::<char>().boxed()),
        (1, proptest::sample::select(vec!['é', 'ß', 'Ω', '中', '😀', '\n', '\t', '"', '\\', '\u{0}']).boxed()),
    ])
    .boxed()
}

/// Strings matching one of the generator's own regular expressions.
pub(super) fn regex(pattern: &'static str) -> BoxedStrategy<String> {
    proptest::string::string_regex(pattern).expect("the generator's own regular expressions parse").boxed()
}

/// Strings of a `format`.
fn format_strings(path: &str, format: &str) -> R<BoxedStrategy<String>> {
    fn date() -> impl Strategy<Value = String> {
        (1970u32..=2099, 1u32..=12, 1u32..=28).prop_map(|(y, m, d)| format!("{y:04}-{m:02}-{d:02}"))
    }
    fn time() -> impl Strategy<Value = String> {
        (0u32..24, 0u32..60, 0u32..60, proptest::option::of(0u32..1000)).prop_map(|(h, m, s, milli)| match milli {
            Some(milli) => format!("{h:02}:{m:02}:{s:02}.{milli:03}"),
            None => format!("{h:02}:{m:02}:{s:02}"),
        })
    }
    fn offset() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("Z".to_string()),
            (any::<bool>(), 0u32..=14, proptest::sample::select(vec![0u32, 30, 45]))
                .prop_map(|(west, h, m)| format!("{}{h:02}:{m:02}", if west { '-' } else { '+' })),
        ]
    }
    fn uri() -> BoxedStrategy<String> {
        regex(r"https?://[a-z][a-z0-9]{0,9}\.(com|org|net)(/[a-z0-9_-]{1,8}){0,3}(\?[a-z]{1,5}=[a-z0-9]{1,5})?")
    }
    fn ipv4() -> BoxedStrategy<String> {
        any::<[u8; 4]>().prop_map(|octets| Ipv4Addr::from(octets).to_string()).boxed()
    }
    fn ipv6() -> BoxedStrategy<String> {
        any::<[u16; 8]>().prop_map(|segments| Ipv6Addr::from(segments).to_string()).boxed()
    }
    Ok(match format {
        "date" => date().boxed(),
        "date-time" => (date(), time(), offset()).prop_map(|(d, t, o)| format!("{d}T{t}{o}")).boxed(),
        "partial-date-time" => (date(), time()).prop_map(|(d, t)| format!("{d}T{t}")).boxed(),
        "time" => (time(), offset()).prop_map(|(t, o)| format!("{t}{o}")).boxed(),
        "partial-time" => time().boxed(),
        "uuid" => any::<u128>()
            .prop_map(|n| {
                let hex = format!("{n:032x}");
                format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..])
            })
            .boxed(),
        "email" => regex(r"[a-z][a-z0-9]{0,7}(\.[a-z0-9]{1,5})?@[a-z][a-z0-9]{0,7}\.(com|org|net|io)"),
        "uri" => uri(),
        "uri-reference" => prop_oneof![uri(), regex("(/[a-z0-9_-]{1,8}){1,3}")].boxed(),
        // One hyphen at most per label: `--` at a label's third and fourth characters marks IDNA labels.
        "hostname" => regex(r"[a-z][a-z0-9]{0,5}(-[a-z0-9]{1,4})?(\.[a-z][a-z0-9]{0,5}(-[a-z0-9]{1,4})?){0,2}"),
        "ipv4" => ipv4(),
        "ipv6" => ipv6(),
        "ip" => prop_oneof![ipv4(), ipv6()].boxed(),
        other => {
            return Err(unsupported(
                "format",
                path,
                format!(
                    "strings of format `{other}` are not drawn (known: date-time, date, time, partial-date-time, \
                     partial-time, uuid, email, uri, uri-reference, hostname, ipv4, ipv6, ip)"
                ),
            ));
        }
    })
}

/// Strings that match `pattern`, drawn from the pattern itself: anchors at its ends are dropped (JSON Schema
/// patterns are unanchored, so a full match is a match), classes keep to printable ASCII where they hold any
/// (so `\d` draws `0-9`, as ECMA-262 means it), and repetitions stay short (within `max`, reaching `min`).
fn pattern_strings(path: &str, pattern: &str, min: usize, max: Option<usize>) -> R<BoxedStrategy<String>> {
    let refused = |why: String| unsupported("pattern", path, why);
    let hir = regex_syntax::ParserBuilder::new()
        .build()
        .parse(pattern)
        .map_err(|_| refused(format!("`{pattern}` uses syntax the generator cannot parse")))?;
    let extra = u32::try_from(min.max(8)).unwrap_or(u32::MAX);
    let max = max.map(|m| u32::try_from(m).unwrap_or(u32::MAX));
    let cap = move |least: u32| -> u32 {
        let soft = least.saturating_add(extra);
        max.map_or(soft, |m| soft.min(m.max(least)))
    };
    let tamed = tame(&hir, true, true, &cap).map_err(|why| refused(format!("`{pattern}`: {why}")))?;
    let strings = proptest::string::string_regex_parsed(&tamed)
        .map_err(|e| refused(format!("`{pattern}` cannot be drawn from: {e}")))?;
    Ok(strings.boxed())
}

/// `hir` made drawable: see [`pattern_strings`]. `start`/`end`: whether it sits at the start/end of the pattern.
fn tame(hir: &Hir, start: bool, end: bool, cap: &dyn Fn(u32) -> u32) -> Result<Hir, String> {
    Ok(match hir.kind() {
        HirKind::Empty | HirKind::Literal(_) | HirKind::Class(Class::Bytes(_)) => hir.clone(),
        HirKind::Class(Class::Unicode(class)) => {
            let mut ascii = class.clone();
            ascii.intersect(&ClassUnicode::new([ClassUnicodeRange::new(' ', '~')]));
            Hir::class(Class::Unicode(if ascii.ranges().is_empty() { class.clone() } else { ascii }))
        }
        HirKind::Look(look) => match look {
            Look::Start | Look::StartLF | Look::StartCRLF if start => Hir::empty(),
            Look::End | Look::EndLF | Look::EndCRLF if end => Hir::empty(),
            _ => return Err("anchors inside the pattern and word boundaries are not drawn from".into()),
        },
        HirKind::Repetition(rep) => {
            let upper = cap(rep.min);
            Hir::repetition(Repetition {
                min: rep.min,
                max: Some(rep.max.map_or(upper, |m| m.min(upper.max(rep.min)))),
                greedy: rep.greedy,
                sub: Box::new(tame(&rep.sub, false, false, cap)?),
            })
        }
        HirKind::Capture(capture) => Hir::capture(Capture {
            index: capture.index,
            name: capture.name.clone(),
            sub: Box::new(tame(&capture.sub, start, end, cap)?),
        }),
        HirKind::Concat(subs) => {
            let last = subs.len().saturating_sub(1);
            Hir::concat(
                subs.iter()
                    .enumerate()
                    .map(|(i, sub)| tame(sub, start && i == 0, end && i == last, cap))
                    .collect::<Result<_, _>>()?,
            )
        }
        HirKind::Alternation(subs) => {
            Hir::alternation(subs.iter().map(|sub| tame(sub, start, end, cap)).collect::<Result<_, _>>()?)
        }
    })
}

// ----- arrays -----

/// The schemas one item (or every item past the fixed ones) must satisfy, and its values.
pub(super) struct Slot<'s> {
    pub parts: Vec<Part<'s>>,
    pub values: BoxedStrategy<Value>,
}

/// How arrays of a leaf are drawn.
pub(super) struct ArrayPlan<'s> {
    pub min: usize,
    pub max: Option<usize>,
    pub unique: bool,
    /// The positional items (`prefixItems`), up to the first that cannot have a value.
    pub slots: Vec<Slot<'s>>,
    /// Items past the slots; `None` when none can have a value.
    pub rest: Option<Slot<'s>>,
    /// Whether items past the slots are forbidden (rather than only too deep to draw).
    pub rest_forbidden: bool,
    lo: usize,
    hi: usize,
}

pub(super) fn array_plan<'s>(cx: &Ctx<'s>, leaf: &Leaf<'s>, at: At) -> R<ArrayPlan<'s>> {
    struct Shape<'s> {
        prefix: Vec<Part<'s>>,
        rest: Option<Part<'s>>,
    }
    let (mut min, mut max, mut unique) = (0, None::<usize>, false);
    let (mut min_path, mut max_path) = (String::new(), String::new());
    let mut shapes = Vec::new();
    for (path, map) in &leaf.parts {
        let positional = |key: &str, items: &'s [Value]| -> Vec<Part<'s>> {
            let at = join(path, key);
            items.iter().enumerate().map(|(i, schema)| Part::at(join(&at, &i.to_string()), schema)).collect()
        };
        let mut shape = Shape { prefix: Vec::new(), rest: None };
        match map.get("prefixItems") {
            None => {}
            Some(Value::Array(items)) => shape.prefix = positional("prefixItems", items),
            Some(_) => return Err(invalid(&join(path, "prefixItems"), "`prefixItems` must be an array of schemas")),
        }
        match map.get("items") {
            // The tuple form of drafts before 2020-12.
            Some(Value::Array(items)) => {
                shape.prefix = positional("items", items);
                shape.rest = map.get("additionalItems").map(|s| Part::at(join(path, "additionalItems"), s));
            }
            Some(schema) => shape.rest = Some(Part::at(join(path, "items"), schema)),
            None => {}
        }
        if let Some(value) = map.get("minItems") {
            let n = count(&join(path, "minItems"), value)?;
            if n > min {
                (min, min_path) = (n, join(path, "minItems"));
            }
        }
        if let Some(value) = map.get("maxItems") {
            let n = count(&join(path, "maxItems"), value)?;
            if max.is_none_or(|old| n < old) {
                (max, max_path) = (Some(n), join(path, "maxItems"));
            }
        }
        unique |= map.get("uniqueItems") == Some(&Value::Bool(true));
        shapes.push(shape);
    }
    if let Some(max) = max
        && max < min
    {
        return Err(unsatisfiable(&max_path, format!("`maxItems` {max} is below `minItems` {min}")));
    }
    let width = shapes.iter().map(|s| s.prefix.len()).max().unwrap_or(0);
    let mut slots = Vec::new();
    let mut stop: Option<Fail> = None;
    for i in 0..width {
        let parts: Vec<Part<'s>> = shapes.iter().filter_map(|s| s.prefix.get(i).or(s.rest.as_ref()).cloned()).collect();
        match strategy(cx, &parts, &[], at.child()) {
            Ok(values) => slots.push(Slot { parts, values }),
            Err(fail) if fail.is_empty() => {
                stop = Some(fail);
                break;
            }
            Err(fail) => return Err(fail),
        }
    }
    let mut rest = None;
    if stop.is_none() {
        let parts: Vec<Part<'s>> = shapes.iter().filter_map(|s| s.rest.clone()).collect();
        match strategy(cx, &parts, &[], at.child()) {
            Ok(values) => rest = Some(Slot { parts, values }),
            Err(fail) if fail.is_empty() => stop = Some(fail),
            Err(fail) => return Err(fail),
        }
    }
    let rest_forbidden = matches!(stop, Some(Fail::Schema(_)));
    let reachable = if rest.is_some() { usize::MAX } else { slots.len() };
    if min > reachable {
        return Err(match stop {
            Some(Fail::Schema(SchemaError::Unsatisfiable { reason, path })) => unsatisfiable(
                &min_path,
                format!("`minItems` is {min} but item {reachable} cannot have any value: {reason} at `{path}`"),
            ),
            Some(fail) => fail,
            None => unsatisfiable(&min_path, format!("`minItems` is {min} but only {reachable} items can be drawn")),
        });
    }
    let hi = max.unwrap_or(usize::MAX).min(reachable).min(min.max(slots.len()).saturating_add(at.spare()));
    Ok(ArrayPlan { min, max, unique, slots, rest, rest_forbidden, lo: min, hi })
}

impl ArrayPlan<'_> {
    pub fn strategy(&self) -> BoxedStrategy<Value> {
        let slots: Vec<BoxedStrategy<Value>> = self.slots.iter().map(|s| s.values.clone()).collect();
        let rest = self.rest.as_ref().map_or_else(|| Just(Value::Null).boxed(), |s| s.values.clone());
        let (fixed, lo) = (slots.len(), self.lo);
        let items = (self.lo..=self.hi).prop_flat_map(move |len| {
            (0..len).map(|i| if i < fixed { slots[i].clone() } else { rest.clone() }).collect::<Vec<_>>()
        });
        if !self.unique {
            return items.prop_map(Value::Array).boxed();
        }
        items.prop_filter_map("distinct items", move |items| distinct(items, fixed, lo).map(Value::Array)).boxed()
    }
}

/// `items` without repeats: a repeated item past the `fixed` ones is dropped, a repeated fixed one (or too
/// few left) rejects the draw.
fn distinct(items: Vec<Value>, fixed: usize, min: usize) -> Option<Vec<Value>> {
    let mut out: Vec<Value> = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        if out.iter().any(|seen| json_eq(seen, &item)) {
            if i < fixed {
                return None;
            }
            continue;
        }
        out.push(item);
    }
    (out.len() >= min).then_some(out)
}

// ----- objects -----

/// A named property: whether it is required, the schemas its value must satisfy, and its values (`None` when
/// it cannot have one, or only too deep to draw).
pub(super) struct Prop<'s> {
    pub name: String,
    pub required: bool,
    pub parts: Vec<Part<'s>>,
    pub values: Option<BoxedStrategy<Value>>,
    /// Whether no value is allowed at all (rather than only too deep to draw).
    pub forbidden: bool,
}

/// How objects of a leaf are drawn.
pub(super) struct ObjectPlan<'s> {
    pub props: Vec<Prop<'s>>,
    /// Properties beyond the named ones, when some are drawn.
    pub extras: Option<Slot<'s>>,
    /// The `additionalProperties` schemas.
    pub extra_parts: Vec<Part<'s>>,
    /// Whether some `additionalProperties` is `false`.
    pub closed: bool,
    pub min: usize,
    pub max: Option<usize>,
    extra_range: (usize, usize),
    optional_odds: f64,
}

pub(super) fn object_plan<'s>(cx: &Ctx<'s>, leaf: &Leaf<'s>, at: At) -> R<ObjectPlan<'s>> {
    struct Shape<'s> {
        path: String,
        properties: Option<&'s Map<String, Value>>,
        additional: Option<Part<'s>>,
    }
    let mut shapes = Vec::new();
    let mut names: Vec<String> = Vec::new();
    let mut required: Vec<(String, String)> = Vec::new();
    let (mut min, mut max, mut closed) = (0, None::<usize>, false);
    let (mut min_path, mut max_path) = (String::new(), String::new());
    for (path, map) in &leaf.parts {
        let properties = match map.get("properties") {
            None => None,
            Some(Value::Object(properties)) => Some(properties),
            Some(_) => return Err(invalid(&join(path, "properties"), "`properties` must be an object of schemas")),
        };
        for name in properties.into_iter().flat_map(|p| p.keys()) {
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
        if let Some(list) = map.get("required") {
            let at = join(path, "required");
            let Value::Array(list) = list else { return Err(invalid(&at, "`required` must be an array of names")) };
            for name in list {
                let Value::String(name) = name else {
                    return Err(invalid(&at, "`required` must be an array of names"));
                };
                if !required.iter().any(|(n, _)| n == name) {
                    required.push((name.clone(), at.clone()));
                }
            }
        }
        let additional = map.get("additionalProperties").map(|s| Part::at(join(path, "additionalProperties"), s));
        closed |= additional.as_ref().is_some_and(|a| *a.schema == Value::Bool(false));
        if let Some(value) = map.get("minProperties") {
            let n = count(&join(path, "minProperties"), value)?;
            if n > min {
                (min, min_path) = (n, join(path, "minProperties"));
            }
        }
        if let Some(value) = map.get("maxProperties") {
            let n = count(&join(path, "maxProperties"), value)?;
            if max.is_none_or(|old| n < old) {
                (max, max_path) = (Some(n), join(path, "maxProperties"));
            }
        }
        shapes.push(Shape { path: path.clone(), properties, additional });
    }
    for (name, _) in &required {
        if !names.contains(name) {
            names.push(name.clone());
        }
    }
    let mut props = Vec::new();
    for name in names {
        let parts: Vec<Part<'s>> = shapes
            .iter()
            .filter_map(|s| match s.properties.and_then(|p| p.get(&name)) {
                Some(schema) => Some(Part::at(join(&join(&s.path, "properties"), &name), schema)),
                None => s.additional.clone(),
            })
            .collect();
        let requirement = required.iter().find(|(n, _)| *n == name).map(|(_, path)| path.clone());
        let (values, forbidden) = match strategy(cx, &parts, &[], at.child()) {
            Ok(values) => (Some(values), false),
            Err(fail) if fail.is_empty() => match (requirement.as_deref(), fail) {
                (Some(at), Fail::Schema(SchemaError::Unsatisfiable { reason, path })) => {
                    return Err(unsatisfiable(
                        at,
                        format!("the required property `{name}` cannot have any value: {reason} at `{path}`"),
                    ));
                }
                (Some(_), fail) => return Err(fail),
                (None, fail) => (None, matches!(fail, Fail::Schema(_))),
            },
            Err(fail) => return Err(fail),
        };
        props.push(Prop { name, required: requirement.is_some(), parts, values, forbidden });
    }
    let extra_parts: Vec<Part<'s>> = shapes.iter().filter_map(|s| s.additional.clone()).collect();
    let map_like = !extra_parts.is_empty() || shapes.iter().all(|s| s.properties.is_none());
    let mut extras = None;
    if !closed && map_like {
        match strategy(cx, &extra_parts, &[], at.child()) {
            Ok(values) => extras = Some(Slot { parts: extra_parts.clone(), values }),
            Err(fail) if fail.is_empty() => {}
            Err(fail) => return Err(fail),
        }
    }
    let needed = props.iter().filter(|p| p.required).count();
    let optional = props.iter().filter(|p| !p.required && p.values.is_some()).count();
    if let Some(max) = max {
        if max < min {
            return Err(unsatisfiable(&max_path, format!("`maxProperties` {max} is below `minProperties` {min}")));
        }
        if needed > max {
            return Err(unsatisfiable(
                &max_path,
                format!("{needed} properties are required but `maxProperties` is {max}"),
            ));
        }
    }
    if extras.is_none() && needed + optional < min {
        return Err(unsatisfiable(
            &min_path,
            format!("`minProperties` is {min} but at most {} properties can be present", needed + optional),
        ));
    }
    let lo = min.saturating_sub(needed + optional);
    let room = max.map_or(usize::MAX, |m| m - needed);
    let hi = if extras.is_some() { lo.max(at.spare().min(3)).min(room) } else { 0 };
    let optional_odds = if at.depth < 4 { 0.5 } else { 0.3 };
    Ok(ObjectPlan { props, extras, extra_parts, closed, min, max, extra_range: (lo, hi), optional_odds })
}

impl ObjectPlan<'_> {
    /// Every named property.
    pub fn names(&self) -> Vec<String> {
        self.props.iter().map(|p| p.name.clone()).collect()
    }

    pub fn strategy(&self) -> BoxedStrategy<Value> {
        let mut names = Vec::new();
        let mut values: Vec<BoxedStrategy<Option<Value>>> = Vec::new();
        for prop in &self.props {
            let Some(drawn) = &prop.values else { continue };
            names.push(prop.name.clone());
            values.push(match prop.required {
                true => drawn.clone().prop_map(Some).boxed(),
                false => proptest::option::weighted(self.optional_odds, drawn.clone()).boxed(),
            });
        }
        let extras = match &self.extras {
            Some(slot) => {
                let named = self.names();
                let (lo, hi) = self.extra_range;
                let key =
                    regex("[a-z][a-z0-9_]{0,7}").prop_filter("a name no property has", move |k| !named.contains(k));
                proptest::collection::btree_map(key, slot.values.clone(), lo..=hi).boxed()
            }
            None => Just(BTreeMap::new()).boxed(),
        };
        let objects = (values, extras).prop_map(move |(values, extras)| {
            let mut object = Map::new();
            for (name, value) in names.iter().zip(values) {
                if let Some(value) = value {
                    object.insert(name.clone(), value);
                }
            }
            for (name, value) in extras {
                object.entry(name).or_insert(value);
            }
            object
        });
        let (min, max) = (self.min, self.max);
        if min == 0 && max.is_none() {
            return objects.prop_map(Value::Object).boxed();
        }
        objects
            .prop_filter("a property count within the bounds", move |o| {
                o.len() >= min && max.is_none_or(|m| o.len() <= m)
            })
            .prop_map(Value::Object)
            .boxed()
    }
}
