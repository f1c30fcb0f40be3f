//! Parsing pieces shared by the derives: values written as identifiers or strings, durations, doc comments,
//! and the checks on ids and patterns that can be made at compile time.

use proc_macro2::Span;
use syn::parse::{Parse, ParseStream};
use syn::{Attribute, Expr, ExprLit, Ident, Lit, LitStr, Meta, Token};

/// A value written either bare (`risk = high`) or quoted (`risk = "high"`).
pub struct Word {
    pub text: String,
    pub span: Span,
}

impl Parse for Word {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        if input.peek(LitStr) {
            let lit: LitStr = input.parse()?;
            Ok(Word { text: lit.value(), span: lit.span() })
        } else {
            let ident: Ident = input.call(syn::ext::IdentExt::parse_any)?;
            Ok(Word { text: ident.to_string(), span: ident.span() })
        }
    }
}

/// A comma-separated list in parentheses: `(a, b, "c")`.
pub fn parenthesized<T: Parse>(input: ParseStream<'_>) -> syn::Result<Vec<T>> {
    let content;
    syn::parenthesized!(content in input);
    Ok(content.parse_terminated(T::parse, Token![,])?.into_iter().collect())
}

/// Picks one of the allowed words, or says which are allowed.
pub fn one_of(word: &Word, key: &str, allowed: &[&str]) -> syn::Result<usize> {
    allowed.iter().position(|a| *a == word.text).ok_or_else(|| {
        syn::Error::new(
            word.span,
            format!("`{}` is not a valid `{key}`; expected one of: {}", word.text, allowed.join(", ")),
        )
    })
}

/// A duration such as `500ms`, `30s`, `2m` or `1h`, in milliseconds.
pub fn duration_ms(text: &str) -> Result<u64, String> {
    let expected = "expected a whole number with a unit: `500ms`, `30s`, `2m` or `1h`";
    let split = text.find(|c: char| !c.is_ascii_digit()).ok_or_else(|| format!("`{text}` has no unit; {expected}"))?;
    let (number, unit) = text.split_at(split);
    let n: u64 = number.parse().map_err(|_| format!("`{text}` does not start with a number; {expected}"))?;
    let factor = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => return Err(format!("`{text}` has unit `{unit}`; {expected}")),
    };
    n.checked_mul(factor).ok_or_else(|| format!("`{text}` is too long a duration"))
}

/// The doc comment on an item, lines joined and trimmed, or `None` when it has none.
pub fn doc_comment(attrs: &[Attribute]) -> Option<String> {
    let lines: Vec<String> = attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .filter_map(|a| match &a.meta {
            Meta::NameValue(nv) => match &nv.value {
                Expr::Lit(ExprLit { lit: Lit::Str(s), .. }) => Some(s.value().trim().to_owned()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    let text = lines.join(" ").split_whitespace().collect::<Vec<_>>().join(" ");
    if text.is_empty() { None } else { Some(text) }
}

/// Checks a dotted id the way `agentry::id` does, so a bad literal fails at compile time.
pub fn check_dotted_id(what: &str, id: &str) -> Result<(), String> {
    let expected = "expected dotted segments of ASCII letters, digits, `_` and `-`, such as `arithmetic.add`";
    if id.is_empty() {
        return Err(format!("{what} must not be empty; {expected}"));
    }
    for segment in id.split('.') {
        if segment.is_empty() {
            return Err(format!("{what} `{id}` has an empty segment; {expected}"));
        }
        if let Some(c) = segment.chars().find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-')) {
            return Err(format!("{what} `{id}` contains {c:?}; {expected}"));
        }
        if segment.starts_with('_') || segment.ends_with('_') || segment.contains("__") {
            return Err(format!("{what} `{id}` has `__` or a segment starting or ending with `_`; {expected}"));
        }
    }
    // The same limit as `agentry::id`: as a tool name each dot becomes `__`, and tool names are at most 64.
    let len = id.len() + id.matches('.').count();
    if len > MAX_TOOL_NAME_LEN {
        return Err(format!(
            "{what} `{id}` is {len} characters long as a tool name (each `.` becomes `__`); expected at most \
             {MAX_TOOL_NAME_LEN}, the longest tool name LLM providers accept"
        ));
    }
    Ok(())
}

/// The longest tool name an id may become (`agentry::id::MAX_TOOL_NAME_LEN`).
const MAX_TOOL_NAME_LEN: usize = 64;

/// Checks a signal-kind pattern the way `agentry::pattern` does.
pub fn check_pattern(pattern: &str) -> Result<(), String> {
    let expected = "expected dotted segments where `*` and `**` stand alone, such as `order.*` or `order.**`";
    if pattern.is_empty() {
        return Err(format!("the route pattern is empty; {expected}"));
    }
    for segment in pattern.split('.') {
        if segment.is_empty() {
            return Err(format!("route pattern `{pattern}` has an empty segment; {expected}"));
        }
        if segment.contains('*') && segment != "*" && segment != "**" {
            return Err(format!("route pattern `{pattern}` has segment `{segment}`; {expected}"));
        }
    }
    Ok(())
}

/// An error for a key the attribute does not know.
pub fn unknown_key(path: &syn::Path, attr: &str, allowed: &[&str]) -> syn::Error {
    let name = path.get_ident().map(ToString::to_string).unwrap_or_else(|| "?".into());
    // Keys that were renamed: the old name points at the new one.
    let renamed = match name.as_str() {
        "vsn" if allowed.contains(&"version") => " (`vsn` is called `version` now)",
        _ => "",
    };
    syn::Error::new_spanned(
        path,
        format!("unknown key `{name}` in `#[{attr}(...)]`{renamed}; expected one of: {}", allowed.join(", ")),
    )
}

/// An error for the same key given twice.
fn repeated_key(path: &syn::Path, attr: &str) -> syn::Error {
    syn::Error::new_spanned(path, format!("key given twice in `#[{attr}(...)]`; expected each key once"))
}

/// Calls `f` with each key of every `#[name(...)]` attribute, refusing a key given twice. Returns where the
/// first such attribute is (for errors about keys it lacks), or `None` when there is none.
pub fn for_each_key(
    attrs: &[Attribute],
    name: &str,
    mut f: impl FnMut(&str, &syn::meta::ParseNestedMeta<'_>) -> syn::Result<()>,
) -> syn::Result<Option<Span>> {
    let mut seen: Vec<String> = Vec::new();
    let mut first = None;
    for attr in attrs.iter().filter(|a| a.path().is_ident(name)) {
        first.get_or_insert_with(|| syn::spanned::Spanned::span(attr.path()));
        attr.parse_nested_meta(|meta| {
            let key = meta.path.get_ident().map(ToString::to_string).unwrap_or_default();
            if seen.contains(&key) {
                return Err(repeated_key(&meta.path, name));
            }
            seen.push(key.clone());
            f(&key, &meta)
        })?;
    }
    Ok(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(duration_ms("500ms"), Ok(500));
        assert_eq!(duration_ms("30s"), Ok(30_000));
        assert_eq!(duration_ms("2m"), Ok(120_000));
        assert_eq!(duration_ms("1h"), Ok(3_600_000));
        assert!(duration_ms("30").unwrap_err().contains("no unit"));
        assert!(duration_ms("3d").unwrap_err().contains("unit `d`"));
        assert!(duration_ms("s").unwrap_err().contains("does not start with a number"));
    }

    #[test]
    fn ids_and_patterns() {
        assert!(check_dotted_id("action id", "arithmetic.add").is_ok());
        assert!(check_dotted_id("action id", "a..b").unwrap_err().contains("empty segment"));
        assert!(check_dotted_id("action id", "a b").unwrap_err().contains("' '"));
        assert!(check_dotted_id("action id", "a__b").unwrap_err().contains("`__`"));
        let longest = format!("a.{}", "b".repeat(61));
        assert!(check_dotted_id("action id", &longest).is_ok());
        let too_long = format!("a.{}", "b".repeat(62));
        assert!(check_dotted_id("action id", &too_long).unwrap_err().contains("65 characters"));
        assert!(check_pattern("order.**").is_ok());
        assert!(check_pattern("order.pl*").unwrap_err().contains("`pl*`"));
        assert!(check_pattern("").unwrap_err().contains("empty"));
    }

    #[test]
    fn doc_comments_become_one_line() {
        let item: syn::ItemStruct = syn::parse_quote! {
            /// Adds two
            /// numbers.
            struct Add;
        };
        assert_eq!(doc_comment(&item.attrs).as_deref(), Some("Adds two numbers."));
        let bare: syn::ItemStruct = syn::parse_quote! { struct Bare; };
        assert_eq!(doc_comment(&bare.attrs), None);
    }

    #[test]
    fn words_and_choices() {
        let word: Word = syn::parse_quote!(high);
        assert_eq!(one_of(&word, "risk", &["low", "medium", "high"]).unwrap(), 2);
        let word: Word = syn::parse_quote!("extreme");
        let err = one_of(&word, "risk", &["low", "medium", "high"]).unwrap_err();
        assert_eq!(err.to_string(), "`extreme` is not a valid `risk`; expected one of: low, medium, high");
    }
}
