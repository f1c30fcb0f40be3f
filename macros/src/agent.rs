//! `#[derive(Agent)]`: an agent from its domain state, its start skills and its signal routes.

use crate::attr::{check_pattern, doc_comment, for_each_key, parenthesized, unknown_key};
use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::parse::{Parse, ParseStream};
use syn::{DeriveInput, Ident, LitStr, Token, Type};

const KEYS: &[&str] = &["name", "description", "skills", "routes"];

/// One start skill: `Counter` or `Counter = r#"{"step": 2}"#` (mount options as JSON).
pub struct StartSkill {
    pub ty: Type,
    pub opts: Option<LitStr>,
}

impl Parse for StartSkill {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let ty: Type = input.parse()?;
        let opts = if input.peek(Token![=]) {
            input.parse::<Token![=]>()?;
            let lit: LitStr = input.parse()?;
            serde_json::from_str::<serde_json::Value>(&lit.value()).map_err(|e| {
                syn::Error::new(
                    lit.span(),
                    format!("mount options are not valid JSON ({e}); expected e.g. r#\"{{\"step\": 2}}\"#"),
                )
            })?;
            Some(lit)
        } else {
            None
        };
        Ok(StartSkill { ty, opts })
    }
}

/// One route: `"order.*" => on_order`.
pub struct Route {
    pub pattern: LitStr,
    pub method: Ident,
}

impl Parse for Route {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let pattern: LitStr = input.parse()?;
        check_pattern(&pattern.value()).map_err(|e| syn::Error::new(pattern.span(), e))?;
        input.parse::<Token![=>]>()?;
        let method: Ident = input.parse()?;
        Ok(Route { pattern, method })
    }
}

/// Everything `#[agent(...)]` said.
#[derive(Default)]
pub struct AgentAttr {
    pub name: Option<LitStr>,
    pub description: Option<String>,
    pub skills: Vec<StartSkill>,
    pub routes: Vec<Route>,
}

/// Parses `#[agent(...)]`; the attribute is optional (an agent with no routes delegates everything to skills).
pub fn parse(input: &DeriveInput) -> syn::Result<AgentAttr> {
    let mut out = AgentAttr::default();
    for_each_key(&input.attrs, "agent", |key, meta| {
        match key {
            "name" => out.name = Some(meta.value()?.parse()?),
            "description" => out.description = Some(meta.value()?.parse::<LitStr>()?.value()),
            "skills" => out.skills = parenthesized(meta.input)?,
            "routes" => out.routes = parenthesized(meta.input)?,
            _ => return Err(unknown_key(&meta.path, "agent", KEYS)),
        }
        Ok(())
    })?;
    if out.description.is_none() {
        out.description = doc_comment(&input.attrs);
    }
    Ok(out)
}

/// Expands the derive.
pub fn expand(input: DeriveInput) -> syn::Result<TokenStream> {
    if !input.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(&input.generics, "`#[derive(Agent)]` does not support generic types"));
    }
    let attr = parse(&input)?;
    let ty = &input.ident;
    let name = attr.name.map(|n| n.value()).unwrap_or_else(|| ty.to_string());
    let description = attr.description.unwrap_or_default();
    let ag = quote!(::agentry::agent);

    let skills = attr.skills.iter().map(|StartSkill { ty, opts }| {
        let opts = match opts {
            Some(json) => quote!(::agentry::__private::serde_json::from_str(#json)
                .expect("the mount options were checked as JSON when the derive expanded")),
            None => quote!(::agentry::__private::serde_json::Value::Null),
        };
        quote_spanned!(syn::spanned::Spanned::span(ty)=>
            (<#ty as ::agentry::skill::SkillDefinition>::skill()?, #opts))
    });

    let patterns: Vec<_> = attr.routes.iter().map(|r| &r.pattern).collect();
    let arms = attr.routes.iter().enumerate().map(|(i, Route { method, .. })| {
        let call = quote_spanned!(method.span()=> Self::#method(self, signal));
        quote! {
            if routes[#i].matches(kind) {
                return ::core::convert::Into::into(#call);
            }
        }
    });

    Ok(quote! {
        impl #ag::Agent for #ty {
            fn name() -> &'static str {
                #name
            }

            fn description() -> &'static str {
                #description
            }

            fn start_skills() -> ::core::result::Result<
                ::std::vec::Vec<(::agentry::skill::Skill, ::agentry::__private::serde_json::Value)>,
                ::agentry::skill::BuildError,
            > {
                ::core::result::Result::Ok(::std::vec![#(#skills),*])
            }

            fn routes() -> &'static [&'static str] {
                &[#(#patterns),*]
            }

            fn handle_signal(&self, signal: &::agentry::signal::Signal) -> #ag::Reaction<Self> {
                static ROUTES: ::std::sync::OnceLock<::std::vec::Vec<::agentry::pattern::Pattern>> =
                    ::std::sync::OnceLock::new();
                let routes = ROUTES.get_or_init(|| {
                    ::std::vec![#(::agentry::pattern::Pattern::new(#patterns)
                        .expect("the route pattern was checked when the derive expanded")),*]
                });
                let kind = signal.kind().as_str();
                let _ = (routes, kind);
                #(#arms)*
                #ag::Reaction::Ignore
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_skills_and_errors() {
        let input: DeriveInput = syn::parse2(quote! {
            /// Calculates.
            #[agent(name = "calculator", skills(Arithmetic, Counter = r#"{"step": 2}"#),
                    routes("calculate" => calculate, "math.**" => on_math))]
            struct Calc { asked: u32 }
        })
        .unwrap();
        let attr = parse(&input).unwrap();
        assert_eq!(attr.description.as_deref(), Some("Calculates."));
        assert_eq!(attr.skills.len(), 2);
        assert!(attr.skills[1].opts.is_some());
        assert_eq!(attr.routes[1].method.to_string(), "on_math");

        let bad: DeriveInput = syn::parse2(quote! { #[agent(routes("calc*" => x))] struct A; }).unwrap();
        assert!(parse(&bad).err().unwrap().to_string().contains("segment `calc*`"));
        let bad: DeriveInput = syn::parse2(quote! { #[agent(skills(C = "{step"))] struct A; }).unwrap();
        assert!(parse(&bad).err().unwrap().to_string().contains("not valid JSON"));
        let bad: DeriveInput = syn::parse2(quote! { #[agent(route("a" => b))] struct A; }).unwrap();
        assert!(parse(&bad).err().unwrap().to_string().contains("unknown key `route`"));
    }
}
