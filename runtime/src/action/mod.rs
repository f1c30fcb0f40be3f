//! Actions: typed capabilities with a contract.
//!
//! An action's type is its params: a `Deserialize + JsonSchema` struct that implements [`Action`] with its
//! output type, its [`ActionSpec`] (the contract as data) and an async `run`. [`DynAction`] is the erased,
//! object-safe form the rest of the system holds: it validates JSON params against a schema compiled once, and
//! runs the action on JSON.

mod caller;
mod coerce;
pub(crate) mod context;
mod dynamic;

pub(crate) use crate::contract::{may_retry_after, report_box};
pub use caller::{
    ApprovalAsk, Approver, Caller, CallerCan, CallerRequest, Elicited, LogLevel, Role, Sampled, Sampling,
    approval_digest,
};
pub use coerce::coerce;
pub use context::{ActionContext, Frame, IfDriveExists, PROGRESS};
pub(crate) use context::{
    BoxFuture, Clock, Link, RunKey, RunScope, RunServices, RunSink, Stack, input_key_prefix, new_incarnation,
};
pub(crate) use dynamic::schema_errors;
pub use dynamic::{ActionFuture, DynAction, SchemaError};
// The contract's data, where users find it (see `crate::contract`).
pub use crate::contract::{
    ActionError, ActionSpec, Capability, Category, Cost, DEFAULT_TIMEOUT, ErrorClass, JobRecord, JobStatus, Outcome,
    OutcomeError, OutcomeStatus, RetryPolicy, Risk, RunReport, params_schema_for, schema_for, should_retry,
};

use schemars::JsonSchema;
use serde::{Serialize, de::DeserializeOwned};
use std::future::Future;

/// A typed action. The implementing type is the action's params; `run` consumes them.
///
/// ```
/// use agentry::{Action, ActionContext, ActionError, ActionSpec};
/// use schemars::JsonSchema;
/// use serde::Deserialize;
///
/// /// Adds two numbers.
/// #[derive(Deserialize, JsonSchema)]
/// struct Add {
///     /// The left operand.
///     a: f64,
///     /// The right operand.
///     b: f64,
/// }
///
/// impl Action for Add {
///     type Output = f64;
///     fn spec() -> ActionSpec {
///         ActionSpec::new("arithmetic.add", "Adds two numbers.").expect("a valid id")
///     }
///     async fn run(self, _ctx: ActionContext) -> Result<f64, ActionError> {
///         Ok(self.a + self.b)
///     }
/// }
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an agentry action",
    label = "expected a type that implements `Action`",
    note = "derive it with `#[derive(Action)]` and `#[action(id = \"skill.verb\", output = T)]`, or implement it by hand"
)]
pub trait Action: DeserializeOwned + JsonSchema + Send + 'static {
    /// What a successful run returns.
    type Output: Serialize + JsonSchema + Send + 'static;

    /// The contract. Its params and output schemas are always replaced by the ones generated from `Self` and
    /// `Self::Output`, so they cannot disagree with the types.
    fn spec() -> ActionSpec;

    /// Does the work. Runs in the actor layer, in a supervised task, after params were validated.
    fn run(self, ctx: ActionContext) -> impl Future<Output = Result<Self::Output, ActionError>> + Send;

    /// A pure check of the params (and, through `ctx`, the skill's state) before the action runs; `Err` says
    /// what is wrong. A failed precondition is a `Validation` error and `run` is never called. Default: none.
    /// `#[action(pre = path)]` sets it to a `fn(&Self, &ActionContext) -> Result<(), String>`.
    fn precondition(&self, _ctx: &ActionContext) -> Result<(), String> {
        Ok(())
    }

    /// A pure check of the output after a successful run; a failed postcondition is a `Critical` error (the
    /// action broke its promise). Default: none. `#[action(post = path)]` sets it to a
    /// `fn(&Output) -> Result<(), String>`.
    fn postcondition(_output: &Self::Output) -> Result<(), String> {
        Ok(())
    }
}
