//! `#[derive(Skill)]`: a skill definition from `#[skill(...)]` keys on a marker type.

use crate::attr::{check_dotted_id, doc_comment, for_each_key, parenthesized, unknown_key};
use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{DeriveInput, LitStr, Path, Type};

const KEYS: &[&str] = &[
    "id",
    "name",
    "version",
    "description",
    "category",
    "tags",
    "actions",
    "requires",
    "instructions",
    "state",
    "handle_signal",
    "offers",
];

/// Everything `#[skill(...)]` said, parsed and checked.
#[derive(Default)]
pub struct SkillAttr {
    /// Where the attribute is, for errors about keys it lacks.
    pub span: Option<proc_macro2::Span>,
    pub id: Option<LitStr>,
    pub name: Option<LitStr>,
    pub version: Option<LitStr>,
    pub description: Option<String>,
    pub category: Option<LitStr>,
    pub tags: Vec<LitStr>,
    pub actions: Vec<Type>,
    pub requires: Vec<LitStr>,
    pub instructions: Option<LitStr>,
    pub state: Option<Type>,
    pub handle_signal: Option<Path>,
    /// A `fn(SkillBuilder) -> SkillBuilder` that adds the skill's prompts and resources.
    pub offers: Option<Path>,
}

/// Parses `#[skill(...)]` and checks what can be checked before type checking.
pub fn parse(input: &DeriveInput) -> syn::Result<SkillAttr> {
    let mut out = SkillAttr::default();
    let span = for_each_key(&input.attrs, "skill", |key, meta| {
        match key {
            "id" => {
                let lit: LitStr = meta.value()?.parse()?;
                check_dotted_id("skill id", &lit.value()).map_err(|e| syn::Error::new(lit.span(), e))?;
                out.id = Some(lit);
            }
            "name" => out.name = Some(meta.value()?.parse()?),
            "version" => {
                let lit: LitStr = meta.value()?.parse()?;
                semver::Version::parse(&lit.value()).map_err(|e| {
                    syn::Error::new(lit.span(), format!("`{}` is not semver ({e}); expected e.g. `1.0.0`", lit.value()))
                })?;
                out.version = Some(lit);
            }
            "description" => out.description = Some(meta.value()?.parse::<LitStr>()?.value()),
            "category" => out.category = Some(meta.value()?.parse()?),
            "tags" => out.tags = parenthesized(meta.input)?,
            "actions" => {
                let actions: Vec<Type> = parenthesized(meta.input)?;
                for (i, ty) in actions.iter().enumerate() {
                    let text = quote!(#ty).to_string();
                    if actions[..i].iter().any(|earlier| quote!(#earlier).to_string() == text) {
                        return Err(syn::Error::new_spanned(
                            ty,
                            format!("action `{text}` is listed twice in `actions(...)`; expected each action once"),
                        ));
                    }
                }
                out.actions = actions;
            }
            "requires" => {
                let requires: Vec<LitStr> = parenthesized(meta.input)?;
                for r in &requires {
                    check_dotted_id("required skill id", &r.value()).map_err(|e| syn::Error::new(r.span(), e))?;
                }
                out.requires = requires;
            }
            "instructions" => out.instructions = Some(meta.value()?.parse()?),
            "state" => out.state = Some(meta.value()?.parse()?),
            "handle_signal" => out.handle_signal = Some(meta.value()?.parse()?),
            "offers" => out.offers = Some(meta.value()?.parse()?),
            _ => return Err(unknown_key(&meta.path, "skill", KEYS)),
        }
        Ok(())
    })?;
    let Some(span) = span else {
        return Err(syn::Error::new_spanned(
            &input.ident,
            "missing `#[skill(...)]`; expected at least `#[skill(id = \"name\", version = \"1.0.0\")]`",
        ));
    };
    out.span = Some(span);
    if let Some(id) = &out.id
        && let Some(me) = out.requires.iter().find(|r| r.value() == id.value())
    {
        return Err(syn::Error::new(
            me.span(),
            format!("skill `{}` requires itself; expected requirements on other skills only", id.value()),
        ));
    }
    if out.description.is_none() {
        out.description = doc_comment(&input.attrs);
    }
    Ok(out)
}

/// Expands the derive.
pub fn expand(input: DeriveInput) -> syn::Result<TokenStream> {
    if !input.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(&input.generics, "`#[derive(Skill)]` does not support generic types"));
    }
    let attr = parse(&input)?;
    let name = &input.ident;
    let at = attr.span.unwrap_or_else(|| name.span());
    let missing = |key: &str, example: &str| {
        syn::Error::new(at, format!("`#[skill(...)]` is missing the required key `{key}`; expected `{example}`"))
    };
    let id = attr.id.ok_or_else(|| missing("id", "id = \"name\""))?;
    let version = attr.version.ok_or_else(|| missing("version", "version = \"1.0.0\""))?;
    if attr.handle_signal.is_some() && attr.state.is_none() {
        return Err(missing("state", "state = T, the type `handle_signal` works on"));
    }

    let s = quote!(::agentry::skill);
    let mut calls = Vec::new();
    if let Some(n) = &attr.name {
        calls.push(quote!(.name(#n)));
    }
    if let Some(d) = &attr.description {
        calls.push(quote!(.description(#d)));
    }
    if let Some(c) = &attr.category {
        calls.push(quote!(.category(#c)));
    }
    for t in &attr.tags {
        calls.push(quote!(.tag(#t)));
    }
    for ty in &attr.actions {
        // Spanned at the type, so a type that is not an action is reported where it is listed.
        calls.push(quote_spanned!(ty.span()=> .action::<#ty>()));
    }
    for r in &attr.requires {
        calls.push(quote!(.requires(#r)));
    }
    if let Some(i) = &attr.instructions {
        calls.push(quote!(.instructions(#i)));
    }
    if let Some(state) = &attr.state {
        calls.push(quote_spanned!(state.span()=> .state::<#state>()));
    }
    if let Some(handler) = &attr.handle_signal {
        let state = &attr.state;
        calls.push(quote_spanned!(handler.span()=> .on_signal::<#state, _>(#handler)));
    }
    if let Some(offers) = &attr.offers {
        calls.push(quote_spanned!(offers.span()=> .with(#offers)));
    }

    Ok(quote! {
        impl #s::SkillDefinition for #name {
            fn skill() -> ::core::result::Result<#s::Skill, #s::BuildError> {
                static SKILL: ::std::sync::OnceLock<::core::result::Result<#s::Skill, #s::BuildError>> =
                    ::std::sync::OnceLock::new();
                SKILL.get_or_init(|| #s::Skill::builder(#id, #version) #(#calls)* .build()).clone()
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(src: TokenStream) -> syn::Result<SkillAttr> {
        parse(&syn::parse2(src).unwrap())
    }

    #[test]
    fn every_key_parses() {
        let attr = parse_str(quote! {
            /// Numbers.
            #[skill(id = "arithmetic", name = "Arithmetic", version = "1.2.0", category = "math", tags("math", "numbers"),
                    actions(Add, ops::Sub), requires("base"), instructions = "Use it.", state = Counter,
                    handle_signal = on_signal, offers = extra::offers)]
            struct Arithmetic;
        })
        .unwrap();
        assert!(attr.offers.is_some());
        assert_eq!(attr.id.unwrap().value(), "arithmetic");
        assert_eq!(attr.description.as_deref(), Some("Numbers."));
        assert_eq!(attr.tags.len(), 2);
        assert_eq!(attr.actions.len(), 2);
        assert_eq!(attr.requires[0].value(), "base");
        assert!(attr.state.is_some() && attr.handle_signal.is_some());
    }

    #[test]
    fn definition_errors() {
        let err = parse_str(quote! { #[skill(id = "a", version = "1.0")] struct X; }).err().unwrap();
        assert!(err.to_string().contains("not semver"), "{err}");
        let err = parse_str(quote! { #[skill(id = "a", actions(A, B, A))] struct X; }).err().unwrap();
        assert!(err.to_string().contains("`A` is listed twice"), "{err}");
        let err = parse_str(quote! { #[skill(id = "a", requires("b", "a"))] struct X; }).err().unwrap();
        assert!(err.to_string().contains("`a` requires itself"), "{err}");
        // The key's name before it was `version`: refused, pointing at the key it is now.
        let err = parse_str(quote! { #[skill(id = "a", vsn = "1.0.0")] struct X; }).err().unwrap();
        assert!(err.to_string().contains("unknown key `vsn`") && err.to_string().contains("`version`"), "{err}");
        let err = expand(syn::parse2(quote! { #[skill(id = "a")] struct X; }).unwrap()).err().unwrap();
        assert!(err.to_string().contains("required key `version`"), "{err}");
    }

    #[test]
    fn offers_passes_the_builder_through_the_function() {
        let out = expand(
            syn::parse2(quote! { #[skill(id = "a", version = "1.0.0", offers = add_prompts)] struct X; }).unwrap(),
        )
        .unwrap()
        .to_string();
        assert!(out.contains(". with (add_prompts)"), "{out}");
    }
}
