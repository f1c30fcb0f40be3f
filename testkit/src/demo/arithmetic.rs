//! `arithmetic`: add, subtract, multiply and divide two numbers.

use agentry::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;

/// Adds two numbers.
#[derive(Debug, Deserialize, JsonSchema, Action)]
#[action(id = "arithmetic.add", output = f64, idempotent, cost = cheap)]
pub struct Add {
    /// The left operand.
    pub a: f64,
    /// The right operand.
    pub b: f64,
}

impl Add {
    /// `a + b`, or a Validation error when it overflows.
    pub async fn run(self, _ctx: ActionContext) -> Result<f64, ActionError> {
        finite(self.a + self.b)
    }
}

/// Subtracts the second number from the first.
#[derive(Debug, Deserialize, JsonSchema, Action)]
#[action(id = "arithmetic.subtract", output = f64, idempotent, cost = cheap)]
pub struct Subtract {
    /// The number to subtract from.
    pub a: f64,
    /// The number to subtract.
    pub b: f64,
}

impl Subtract {
    /// `a - b`, or a Validation error when it overflows.
    pub async fn run(self, _ctx: ActionContext) -> Result<f64, ActionError> {
        finite(self.a - self.b)
    }
}

/// Multiplies two numbers.
#[derive(Debug, Deserialize, JsonSchema, Action)]
#[action(id = "arithmetic.multiply", output = f64, idempotent, cost = cheap)]
pub struct Multiply {
    /// The left factor.
    pub a: f64,
    /// The right factor.
    pub b: f64,
}

impl Multiply {
    /// `a * b`, or a Validation error when it overflows.
    pub async fn run(self, _ctx: ActionContext) -> Result<f64, ActionError> {
        finite(self.a * self.b)
    }
}

/// Divides the first number by the second, which must not be zero.
#[derive(Debug, Deserialize, JsonSchema, Action)]
#[action(id = "arithmetic.divide", output = f64, idempotent, cost = cheap)]
pub struct Divide {
    /// The dividend.
    pub a: f64,
    /// The divisor; must not be zero.
    pub b: f64,
}

impl Divide {
    /// `a / b`, or a Validation error when `b` is zero or the result overflows.
    pub async fn run(self, _ctx: ActionContext) -> Result<f64, ActionError> {
        if self.b == 0.0 {
            return Err(ActionError::validation("cannot divide by zero; expected a non-zero divisor `b`"));
        }
        finite(self.a / self.b)
    }
}

/// The result, or a Validation error when it is too large for a 64-bit float (JSON has no infinity).
fn finite(result: f64) -> Result<f64, ActionError> {
    if result.is_finite() {
        Ok(result)
    } else {
        Err(ActionError::validation(
            "the result is too large for a 64-bit float; expected operands whose result is finite",
        ))
    }
}

/// Basic arithmetic on two numbers.
#[derive(Skill)]
#[skill(
    id = "arithmetic",
    name = "Arithmetic",
    version = "1.0.0",
    category = "math",
    tags("math"),
    actions(Add, Subtract, Multiply, Divide),
    instructions = "Use these actions for exact arithmetic instead of computing in your head."
)]
pub struct Arithmetic;
