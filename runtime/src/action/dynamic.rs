//! The erased, object-safe form of an action: a spec, a params validator compiled once, and a function
//! from JSON params to a JSON result.

use super::Action;
use super::context::ActionContext;
use crate::contract::ActionError;
use crate::contract::{ActionSpec, as_params_schema, is_unit_schema, schema_for};
use serde_json::Value;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// The future an erased action returns.
pub type ActionFuture = Pin<Box<dyn Future<Output = Result<Value, ActionError>> + Send + 'static>>;

type RunFn = dyn Fn(Value, ActionContext) -> ActionFuture + Send + Sync;

/// Every way `value` breaks the schema, each as "at `/path`: problem" (or "`whole`: problem" at the root).
pub(crate) fn schema_errors(validator: &jsonschema::Validator, value: &Value, whole: &str) -> Vec<String> {
    validator
        .iter_errors(value)
        .map(|e| {
            let path = e.instance_path().to_string();
            if path.is_empty() { format!("{whole}: {e}") } else { format!("at `{path}`: {e}") }
        })
        .collect()
}

/// A schema that could not be compiled into a validator.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the params schema of action `{action}` is not a valid JSON Schema: {message}")]
pub struct SchemaError {
    /// The action whose schema is invalid.
    pub action: String,
    /// The compiler's message.
    pub message: String,
}

struct Inner {
    spec: ActionSpec,
    validator: jsonschema::Validator,
    /// Checks outputs; `None` when the output schema accepts anything.
    output: Option<jsonschema::Validator>,
    run: Box<RunFn>,
}

/// An action as the runtime holds it: cheap to clone, shareable across tasks.
#[derive(Clone)]
pub struct DynAction {
    inner: Arc<Inner>,
}

impl fmt::Debug for DynAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DynAction").field("id", &self.inner.spec.id).finish_non_exhaustive()
    }
}

impl DynAction {
    /// Erases a typed action. Its schemas come from its types (params as [`super::params_schema_for`] says: params
    /// with no fields are an object, even written as a unit struct, which then reads from `{}`).
    pub fn typed<A: Action>() -> Result<Self, SchemaError> {
        let own = schema_for::<A>();
        let unit = is_unit_schema(&own);
        let spec = A::spec().params_schema(as_params_schema(own)).output_schema(schema_for::<A::Output>());
        Self::new(spec, move |params, ctx| {
            // A unit struct reads only from `null`; its params (an object, checked already) say nothing more.
            let params = if unit { Value::Null } else { params };
            Box::pin(async move {
                let params: A = serde_json::from_value(params)
                    .map_err(|e| ActionError::validation(format!("params do not fit the action's type: {e}")))?;
                if let Err(why) = params.precondition(&ctx) {
                    return Err(ActionError::validation(format!(
                        "the precondition of `{}` failed: {why}",
                        ctx.action_id
                    )));
                }
                let id = ctx.action_id.clone();
                let output = params.run(ctx).await?;
                if let Err(why) = A::postcondition(&output) {
                    return Err(ActionError::critical(format!("the postcondition of `{id}` failed: {why}")));
                }
                serde_json::to_value(output)
                    .map_err(|e| ActionError::critical(format!("the action's output could not be serialized: {e}")))
            })
        })
    }

    /// An action from a spec and a function, for actions defined at run time (MCP tools, scripted tools).
    /// The params schema is compiled here, once.
    pub fn new<F>(spec: ActionSpec, run: F) -> Result<Self, SchemaError>
    where
        F: Fn(Value, ActionContext) -> ActionFuture + Send + Sync + 'static,
    {
        let validator = jsonschema::validator_for(&spec.params_schema)
            .map_err(|e| SchemaError { action: spec.id.to_string(), message: e.to_string() })?;
        let accepts_anything = matches!(&spec.output_schema, Value::Bool(true))
            || spec
                .output_schema
                .as_object()
                .is_some_and(|o| o.keys().all(|k| k.starts_with('$') || k == "title" || k == "description"));
        let output = match accepts_anything {
            true => None,
            false => Some(jsonschema::validator_for(&spec.output_schema).map_err(|e| SchemaError {
                action: spec.id.to_string(),
                message: format!("its output schema: {e}"),
            })?),
        };
        Ok(Self { inner: Arc::new(Inner { spec, validator, output, run: Box::new(run) }) })
    }

    /// Checks an output against the action's output schema: a mismatch is a `Critical` error (the action broke
    /// its contract) with the validator's messages.
    pub fn check_output(&self, output: &Value) -> Result<(), ActionError> {
        let Some(validator) = &self.inner.output else { return Ok(()) };
        if validator.is_valid(output) {
            return Ok(());
        }
        let problems = schema_errors(validator, output, "the output");
        Err(ActionError::critical(format!(
            "the output of `{}` does not match its output schema: {}",
            self.inner.spec.id,
            problems.join("; ")
        )))
    }

    /// The action's contract.
    pub fn spec(&self) -> &ActionSpec {
        &self.inner.spec
    }

    /// Whether params match the action's schema.
    pub fn is_valid(&self, params: &Value) -> bool {
        self.inner.validator.is_valid(params)
    }

    /// Params made to fit the action's schema where a safe coercion does it (see [`super::coerce`]).
    pub fn coerce(&self, params: Value) -> Value {
        super::coerce(&self.inner.spec.params_schema, params)
    }

    /// Checks params against the schema; the error lists every violation with where it is.
    pub fn validate(&self, params: &Value) -> Result<(), ActionError> {
        if self.inner.validator.is_valid(params) {
            return Ok(());
        }
        let problems = schema_errors(&self.inner.validator, params, "the params");
        Err(ActionError::validation(format!(
            "params for `{}` do not match its schema: {}",
            self.inner.spec.id,
            problems.join("; ")
        )))
    }

    /// Runs the action on params that already passed [`DynAction::validate`]. The future owns everything it
    /// needs, so it can be spawned on its own task.
    pub fn invoke(&self, params: Value, ctx: ActionContext) -> ActionFuture {
        (self.inner.run)(params, ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::id::{ActionId, AgentId};
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};
    use serde_json::json;

    /// Divides two numbers.
    #[derive(Deserialize, JsonSchema)]
    struct Divide {
        a: f64,
        b: f64,
    }

    #[derive(Serialize, JsonSchema)]
    struct Quotient {
        value: f64,
    }

    impl Action for Divide {
        type Output = Quotient;
        fn spec() -> ActionSpec {
            ActionSpec::new("arithmetic.divide", "Divides a by b.").unwrap()
        }
        async fn run(self, _ctx: ActionContext) -> Result<Quotient, ActionError> {
            if self.b == 0.0 {
                return Err(ActionError::validation("cannot divide by zero; expected a non-zero `b`"));
            }
            Ok(Quotient { value: self.a / self.b })
        }
    }

    fn ctx() -> ActionContext {
        ActionContext::new(AgentId::new("a1").unwrap(), ActionId::new("arithmetic.divide").unwrap())
    }

    #[test]
    fn typed_actions_take_their_schemas_from_their_types() {
        let action = DynAction::typed::<Divide>().unwrap();
        let schema = &action.spec().params_schema;
        assert_eq!(schema["properties"]["a"]["type"], "number");
        assert_eq!(schema["required"], json!(["a", "b"]));
        assert_eq!(action.spec().output_schema["properties"]["value"]["type"], "number");
    }

    #[test]
    fn validation_names_every_problem() {
        let action = DynAction::typed::<Divide>().unwrap();
        assert!(action.validate(&json!({"a": 1, "b": 2})).is_ok());
        let err = action.validate(&json!({"a": "one"})).unwrap_err();
        let ActionError::Validation { message } = &err else { panic!("{err:?}") };
        assert!(message.contains("arithmetic.divide"), "{message}");
        assert!(message.contains("/a"), "{message}");
        assert!(message.contains("\"b\" is a required property"), "{message}");
    }

    #[tokio::test]
    async fn invoking_runs_the_typed_body() {
        let action = DynAction::typed::<Divide>().unwrap();
        assert_eq!(action.invoke(json!({"a": 6, "b": 3}), ctx()).await, Ok(json!({"value": 2.0})));
        let err = action.invoke(json!({"a": 6, "b": 0}), ctx()).await.unwrap_err();
        assert!(err.to_string().contains("divide by zero"));
    }

    #[test]
    fn an_invalid_schema_is_a_typed_error() {
        let spec = ActionSpec::new("x.y", "bad").unwrap().params_schema(json!({"type": 12}));
        let err = DynAction::new(spec, |_, _| Box::pin(async { Ok(Value::Null) })).unwrap_err();
        assert_eq!(err.action, "x.y");
        assert!(err.to_string().contains("not a valid JSON Schema"));
    }
}
