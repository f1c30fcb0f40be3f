//! `#[derive(Action)]`: the contract of a typed action from `#[action(...)]` keys on its params struct.

use crate::attr::{Word, doc_comment, duration_ms, for_each_key, one_of, parenthesized, unknown_key};
use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::{DeriveInput, LitBool, LitInt, LitStr, Type};

const KEYS: &[&str] = &[
    "id",
    "description",
    "output",
    "risk",
    "cost",
    "side_effects",
    "idempotent",
    "capabilities",
    "timeout",
    "retry",
    "category",
    "pre",
    "post",
];
const RISKS: &[&str] = &["low", "medium", "high"];
const COSTS: &[&str] = &["cheap", "normal", "expensive"];
const CATEGORIES: &[&str] = &["pure", "job", "remote", "artifact"];

/// Everything `#[action(...)]` said, parsed and checked.
#[derive(Default)]
pub struct ActionAttr {
    /// Where the attribute is, for errors about keys it lacks.
    pub span: Option<proc_macro2::Span>,
    pub id: Option<LitStr>,
    pub description: Option<String>,
    pub output: Option<Type>,
    pub risk: Option<usize>,
    pub cost: Option<usize>,
    pub category: Option<usize>,
    pub side_effects: Option<bool>,
    pub idempotent: Option<bool>,
    pub capabilities: Vec<String>,
    pub timeout_ms: Option<u64>,
    pub retry: Option<Retry>,
    /// `pre = path`: a `fn(&Self, &ActionContext) -> Result<(), String>` checked before `run`.
    pub pre: Option<syn::Path>,
    /// `post = path`: a `fn(&Output) -> Result<(), String>` checked after `run`.
    pub post: Option<syn::Path>,
}

/// The retry policy as written: `retry = 3` or `retry(attempts = 3, backoff = "100ms", max_backoff = "5s")`.
#[derive(Default)]
pub struct Retry {
    pub attempts: Option<u32>,
    pub backoff_ms: Option<u64>,
    pub max_backoff_ms: Option<u64>,
}

fn flag(meta: &syn::meta::ParseNestedMeta<'_>) -> syn::Result<bool> {
    if meta.input.peek(syn::Token![=]) { Ok(meta.value()?.parse::<LitBool>()?.value) } else { Ok(true) }
}

fn duration(lit: &LitStr) -> syn::Result<u64> {
    duration_ms(&lit.value()).map_err(|e| syn::Error::new(lit.span(), e))
}

fn parse_retry(meta: &syn::meta::ParseNestedMeta<'_>) -> syn::Result<Retry> {
    let mut retry = Retry::default();
    if meta.input.peek(syn::Token![=]) {
        let n: LitInt = meta.value()?.parse()?;
        retry.attempts = Some(n.base10_parse()?);
        return Ok(retry);
    }
    meta.parse_nested_meta(|inner| {
        if inner.path.is_ident("attempts") {
            retry.attempts = Some(inner.value()?.parse::<LitInt>()?.base10_parse()?);
        } else if inner.path.is_ident("backoff") {
            retry.backoff_ms = Some(duration(&inner.value()?.parse()?)?);
        } else if inner.path.is_ident("max_backoff") {
            retry.max_backoff_ms = Some(duration(&inner.value()?.parse()?)?);
        } else {
            return Err(unknown_key(&inner.path, "action(retry", &["attempts", "backoff", "max_backoff"]));
        }
        Ok(())
    })?;
    Ok(retry)
}

/// Parses `#[action(...)]` from the item's attributes.
pub fn parse(input: &DeriveInput) -> syn::Result<ActionAttr> {
    let mut out = ActionAttr::default();
    let span = for_each_key(&input.attrs, "action", |key, meta| {
        match key {
            "id" => {
                let lit: LitStr = meta.value()?.parse()?;
                crate::attr::check_dotted_id("action id", &lit.value()).map_err(|e| syn::Error::new(lit.span(), e))?;
                out.id = Some(lit);
            }
            "description" => out.description = Some(meta.value()?.parse::<LitStr>()?.value()),
            "output" => out.output = Some(meta.value()?.parse()?),
            "risk" => out.risk = Some(one_of(&meta.value()?.parse::<Word>()?, "risk", RISKS)?),
            "cost" => out.cost = Some(one_of(&meta.value()?.parse::<Word>()?, "cost", COSTS)?),
            "category" => out.category = Some(one_of(&meta.value()?.parse::<Word>()?, "category", CATEGORIES)?),
            "side_effects" => out.side_effects = Some(flag(meta)?),
            "idempotent" => out.idempotent = Some(flag(meta)?),
            "capabilities" => {
                out.capabilities = parenthesized::<Word>(meta.input)?.into_iter().map(|w| w.text).collect()
            }
            "timeout" => out.timeout_ms = Some(duration(&meta.value()?.parse()?)?),
            "retry" => out.retry = Some(parse_retry(meta)?),
            "pre" => out.pre = Some(meta.value()?.parse()?),
            "post" => out.post = Some(meta.value()?.parse()?),
            _ => return Err(unknown_key(&meta.path, "action", KEYS)),
        }
        Ok(())
    })?;
    let Some(span) = span else {
        return Err(syn::Error::new_spanned(
            &input.ident,
            "missing `#[action(...)]`; expected at least `#[action(id = \"skill.verb\", output = T)]`",
        ));
    };
    out.span = Some(span);
    if out.description.is_none() {
        out.description = doc_comment(&input.attrs);
    }
    Ok(out)
}

/// Expands the derive.
pub fn expand(input: DeriveInput) -> syn::Result<TokenStream> {
    if !input.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(
            &input.generics,
            "`#[derive(Action)]` does not support generic params types",
        ));
    }
    let attr = parse(&input)?;
    let name = &input.ident;
    let at = attr.span.unwrap_or_else(|| name.span());
    let id = attr.id.ok_or_else(|| {
        syn::Error::new(at, "`#[action(...)]` is missing the required key `id`; expected `id = \"skill.verb\"`")
    })?;
    let output = attr.output.ok_or_else(|| {
        syn::Error::new(at, "`#[action(...)]` is missing the required key `output`; expected `output = T`")
    })?;
    let description = attr.description.ok_or_else(|| {
        syn::Error::new(at, "the action has no description; expected a doc comment or `description = \"...\"`")
    })?;

    let a = quote!(::agentry::action);
    let mut setters = Vec::new();
    if let Some(i) = attr.risk {
        let v = [quote!(Low), quote!(Medium), quote!(High)][i].clone();
        setters.push(quote!(.risk(#a::Risk::#v)));
    }
    if let Some(i) = attr.cost {
        let v = [quote!(Cheap), quote!(Normal), quote!(Expensive)][i].clone();
        setters.push(quote!(.cost(#a::Cost::#v)));
    }
    if let Some(i) = attr.category {
        let v = [quote!(Pure), quote!(Job), quote!(Remote), quote!(Artifact)][i].clone();
        setters.push(quote!(.category(#a::Category::#v)));
    }
    if let Some(b) = attr.side_effects {
        setters.push(quote!(.side_effects(#b)));
    }
    if let Some(b) = attr.idempotent {
        setters.push(quote!(.idempotent(#b)));
    }
    for capability in &attr.capabilities {
        setters.push(quote!(.capability(#a::Capability::new(#capability))));
    }
    if let Some(ms) = attr.timeout_ms {
        setters.push(quote!(.timeout(::core::time::Duration::from_millis(#ms))));
    }
    if let Some(retry) = attr.retry {
        let mut fields = Vec::new();
        if let Some(n) = retry.attempts {
            fields.push(quote!(max_attempts: #n));
        }
        if let Some(ms) = retry.backoff_ms {
            fields.push(quote!(initial_backoff: ::core::time::Duration::from_millis(#ms)));
        }
        if let Some(ms) = retry.max_backoff_ms {
            fields.push(quote!(max_backoff: ::core::time::Duration::from_millis(#ms)));
        }
        setters.push(quote!(.retry(#a::RetryPolicy { #(#fields,)* ..::core::default::Default::default() })));
    }

    // Only the path carries the type's span (so a missing `run` is reported at the type); `self` and `ctx`
    // keep the derive's own hygiene, so the derive also works on a type a `macro_rules!` macro declares.
    let run = quote_spanned!(name.span()=> #name::run);
    let call = quote!(#run(self, ctx));
    // The checks' paths keep their own spans, so a path that names nothing is reported at the attribute.
    let pre = attr.pre.map(|path| {
        quote! {
            fn precondition(&self, ctx: &#a::ActionContext) -> ::core::result::Result<(), ::std::string::String> {
                #path(self, ctx)
            }
        }
    });
    let post = attr.post.map(|path| {
        quote! {
            fn postcondition(output: &#output) -> ::core::result::Result<(), ::std::string::String> {
                #path(output)
            }
        }
    });
    Ok(quote! {
        impl #a::Action for #name {
            type Output = #output;

            fn spec() -> #a::ActionSpec {
                #a::ActionSpec::new(#id, #description)
                    .expect("the action id was checked when the derive expanded")
                    #(#setters)*
            }

            fn run(
                self,
                ctx: #a::ActionContext,
            ) -> impl ::core::future::Future<Output = ::core::result::Result<#output, #a::ActionError>>
                   + ::core::marker::Send {
                // The inherent `run` the user writes: a path prefers inherent functions over trait ones. Without
                // one, this resolves to itself and the recursive future fails to compile (`()` is not a future).
                #call
            }

            #pre
            #post
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(src: TokenStream) -> syn::Result<ActionAttr> {
        parse(&syn::parse2(src).unwrap())
    }

    #[test]
    fn every_key_parses() {
        let attr = parse_str(quote! {
            /// Sends mail.
            #[action(id = "mail.send", output = String, risk = high, cost = "expensive", side_effects,
                     idempotent = false, capabilities(net, "smtp"), timeout = "10s",
                     retry(attempts = 5, backoff = "50ms", max_backoff = "1s"), category = remote)]
            struct Send { to: String }
        })
        .unwrap();
        assert_eq!(attr.id.unwrap().value(), "mail.send");
        assert_eq!(attr.description.as_deref(), Some("Sends mail."));
        assert_eq!((attr.risk, attr.cost, attr.category), (Some(2), Some(2), Some(2)));
        assert_eq!((attr.side_effects, attr.idempotent), (Some(true), Some(false)));
        assert_eq!(attr.capabilities, ["net", "smtp"]);
        assert_eq!(attr.timeout_ms, Some(10_000));
        let retry = attr.retry.unwrap();
        assert_eq!((retry.attempts, retry.backoff_ms, retry.max_backoff_ms), (Some(5), Some(50), Some(1000)));
    }

    #[test]
    fn bad_keys_and_values_are_named() {
        let err = parse_str(quote! { #[action(id = "a.b", colour = red)] struct X; }).err().unwrap();
        assert!(err.to_string().starts_with("unknown key `colour`"), "{err}");
        let err = parse_str(quote! { #[action(id = "a.b", risk = extreme)] struct X; }).err().unwrap();
        assert!(err.to_string().contains("expected one of: low, medium, high"), "{err}");
        let err = parse_str(quote! { #[action(id = "a..b")] struct X; }).err().unwrap();
        assert!(err.to_string().contains("empty segment"), "{err}");
        let err = parse_str(quote! { #[action(id = "a.b", id = "c.d")] struct X; }).err().unwrap();
        assert!(err.to_string().contains("key given twice"), "{err}");
        let err = parse_str(quote! { struct X; }).err().unwrap();
        assert!(err.to_string().contains("missing `#[action(...)]`"), "{err}");
    }

    #[test]
    fn missing_required_keys_are_errors() {
        let err = expand(
            syn::parse2(quote! { /// Doc.
            #[action(output = u8)] struct X; })
            .unwrap(),
        )
        .err()
        .unwrap();
        assert!(err.to_string().contains("required key `id`"), "{err}");
        let err = expand(syn::parse2(quote! { #[action(id = "a.b", output = u8)] struct X; }).unwrap()).err().unwrap();
        assert!(err.to_string().contains("no description"), "{err}");
    }
}
