//! Whoever holds a runtime (an application, an operator's tool, a model's driver) tries to rewrite its journal:
//! mark a run completed, append an input, drop a snapshot. None of it compiles: the handle is read only.

use agentry::runtime::Runtime;
use agentry::store::{RunStatus, RunUpdate};

fn main() {
    let runtime = Runtime::builder().build();
    let run = uuid::Uuid::nil();
    let forged = RunUpdate { status: Some(RunStatus::Completed), ..RunUpdate::default() };
    let _ = runtime.store().update(run, forged, chrono::Utc::now());
    if let Some(durable) = runtime.store().durable() {
        let signal = agentry::signal::Signal::new("order.paid", serde_json::json!({})).unwrap();
        durable.append_input(&agentry::id::AgentId::new("a").unwrap(), 1, &signal);
    }
}
