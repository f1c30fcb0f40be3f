//! Derive macros for agentry, re-exported by the `agentry` crate: use them as `agentry::Action`,
//! `agentry::Skill` and `agentry::Agent` (or through `agentry::prelude`). Generated code names everything
//! through `::agentry::...`, so a user's crate needs only the one dependency. `docs/macros.md` shows every key.

mod action;
mod agent;
mod attr;
mod skill;

use proc_macro::TokenStream;
use syn::{DeriveInput, parse_macro_input};

/// Derives `agentry::action::Action` for an action's params struct.
///
/// ```ignore
/// /// Adds two numbers.
/// #[derive(Deserialize, JsonSchema, Action)]
/// #[action(id = "arithmetic.add", output = f64, idempotent, cost = cheap)]
/// struct Add { a: f64, b: f64 }
///
/// impl Add {
///     async fn run(self, _ctx: ActionContext) -> Result<f64, ActionError> { Ok(self.a + self.b) }
/// }
/// ```
///
/// Keys: `id` (required), `output` (required), `description` (default: the doc comment), `risk`
/// (`low`/`medium`/`high`), `cost` (`cheap`/`normal`/`expensive`), `side_effects`, `idempotent`,
/// `capabilities(fs, net, ...)`, `timeout = "30s"`, `retry = 3` or `retry(attempts, backoff, max_backoff)`,
/// `category` (`pure`/`job`/`remote`/`artifact`). The user writes the inherent `async fn run(self, ctx)`.
#[proc_macro_derive(Action, attributes(action))]
pub fn derive_action(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    action::expand(input).unwrap_or_else(syn::Error::into_compile_error).into()
}

/// Derives `agentry::skill::SkillDefinition` for a skill's marker type.
///
/// ```ignore
/// /// Basic arithmetic.
/// #[derive(Skill)]
/// #[skill(id = "arithmetic", version = "1.0.0", actions(Add, Subtract, Multiply, Divide))]
/// pub struct Arithmetic;
/// ```
///
/// Keys: `id` and `version` (required), `name`, `description` (default: the doc comment), `category`,
/// `tags("a", ...)`, `actions(Type, ...)`, `requires("skill", ...)`, `instructions`, `state = T` (its schema
/// and `Default`/deserialize-from-options make the per-agent state), `handle_signal = path` (a pure
/// `fn(&T, &Signal, &SkillContext) -> SkillReaction<T>`), `offers = path` (a
/// `fn(SkillBuilder) -> SkillBuilder` that adds the skill's prompts and resources).
#[proc_macro_derive(Skill, attributes(skill))]
pub fn derive_skill(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    skill::expand(input).unwrap_or_else(syn::Error::into_compile_error).into()
}

/// Derives `agentry::agent::Agent` for an agent's domain state.
///
/// ```ignore
/// /// Calculates.
/// #[derive(Clone, Serialize, Deserialize, Agent)]
/// #[agent(name = "calculator", skills(Arithmetic), routes("calculate" => calculate))]
/// struct Calculator { asked: u32 }
/// ```
///
/// Keys: `name` (default: the type's name), `description` (default: the doc comment), `skills(Type, Type =
/// r#"{...options}"#)`, `routes("pattern" => method, ...)`. A route method is a pure
/// `fn(&self, &Signal) -> R` where `R` is `Reaction<Self>` or `Vec<Effect>`; the first matching route wins,
/// and signals no route takes are offered to the mounted skills.
#[proc_macro_derive(Agent, attributes(agent))]
pub fn derive_agent(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    agent::expand(input).unwrap_or_else(syn::Error::into_compile_error).into()
}
