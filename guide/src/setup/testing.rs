//! `docs/testing.md`: a small shop (skills `inventory`, `orders` and `payments`, the agent `Shop`), the
//! arithmetic skill as `my_skill`, and the routine `math.sum3`.

use agentry::action::{ActionSpec, DynAction};
use agentry::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::time::Duration;

/// The state of the `inventory` skill: how many items are on the shelf.
#[derive(Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Shelf {
    /// Items on the shelf.
    #[schemars(range(min = 0))]
    pub items: u32,
}

/// A skill with state and no actions.
pub fn inventory_skill() -> Skill {
    Skill::builder("inventory", "1.0.0").state::<Shelf>().build().expect("a valid skill")
}

/// A skill that requires another.
pub fn orders_skill() -> Skill {
    Skill::builder("orders", "1.0.0").requires("inventory").build().expect("a valid skill")
}

/// `payments.charge`: charges an order (in the tests, the harness plays its outcome).
pub fn payments_skill() -> Skill {
    let spec = ActionSpec::new("payments.charge", "Charges an order.").expect("an id").side_effects(true);
    let charge = DynAction::new(spec, |_, _| Box::pin(async { Ok(json!({"receipt": "r-0"})) })).expect("an action");
    Skill::builder("payments", "1.0.0").dyn_action(charge).build().expect("a valid skill")
}

/// A shop: reserves stock for orders, charges them, and tries a failed charge again a minute later.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Shop {
    /// Items in stock.
    pub stock: u64,
    /// Items reserved for orders.
    pub reserved: u64,
}

impl Default for Shop {
    fn default() -> Self {
        Self { stock: 10, reserved: 0 }
    }
}

impl Agent for Shop {
    fn name() -> &'static str {
        "shop"
    }

    fn start_skills() -> Result<Vec<(Skill, Value)>, agentry::skill::BuildError> {
        Ok(vec![(payments_skill(), Value::Null)])
    }

    fn routes() -> &'static [&'static str] {
        &["order.placed", "order.cancelled", "payment.retry"]
    }

    fn handle_signal(&self, signal: &Signal) -> Reaction<Self> {
        let charge = || Effect::run(ActionId::new("payments.charge").expect("an id"), signal.data().clone());
        match signal.kind().as_str() {
            "order.placed" => {
                let qty = signal.data()["qty"].as_u64().unwrap_or(1);
                if self.reserved.saturating_add(qty) > self.stock {
                    return Reaction::Keep(vec![]);
                }
                Reaction::Update(Shop { reserved: self.reserved + qty, ..self.clone() }, vec![charge()])
            }
            "order.cancelled" => {
                let qty = signal.data()["qty"].as_u64().unwrap_or(1);
                Reaction::Update(Shop { reserved: self.reserved.saturating_sub(qty), ..self.clone() }, vec![])
            }
            "payment.retry" => Reaction::Keep(vec![charge()]),
            "action.failed" => match signal.follow("payment.retry").build() {
                Ok(retry) => Reaction::Keep(vec![Effect::schedule("retry", Duration::from_secs(60), retry)]),
                Err(_) => Reaction::Ignore,
            },
            "action.completed" => match signal.follow("order.paid").build() {
                Ok(paid) => Reaction::Keep(vec![Effect::emit(paid, Target::Parent)]),
                Err(_) => Reaction::Ignore,
            },
            _ => Reaction::Ignore,
        }
    }
}

/// The schema of an order's data.
pub fn order_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1, "maximum": 5}},
        "required": ["sku", "qty"]
    })
}

/// The standard `arithmetic` skill (add, subtract, multiply, divide), as "my skill".
pub fn my_skill() -> Skill {
    agentry_testkit::demo::Arithmetic::skill().expect("the arithmetic skill builds")
}

/// `math.sum3`: adds three numbers with two nested calls of `math.add` (a routine).
pub fn sum3() -> DynAction {
    let spec = ActionSpec::new("math.sum3", "Adds three numbers.")
        .expect("an id")
        .params_schema(json!({"type": "object", "properties": {"xs": {"type": "array", "items": {"type": "integer"}, "minItems": 3, "maxItems": 3}}, "required": ["xs"]}));
    DynAction::new(spec, |params, ctx| {
        Box::pin(async move {
            let xs: Vec<i64> = params["xs"].as_array().into_iter().flatten().filter_map(Value::as_i64).collect();
            let [a, b, c] = xs[..] else {
                return Err(ActionError::validation("expected `xs`: three whole numbers"));
            };
            let first = ctx.call("math.add", json!({"a": a, "b": b})).await?;
            ctx.call("math.add", json!({"a": first, "b": c})).await
        })
    })
    .expect("an action")
}
