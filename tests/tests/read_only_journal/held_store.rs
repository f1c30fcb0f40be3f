//! Code that made the store itself, gave it to a runtime and kept a handle (or opened the runtime's SQLite
//! file beside it) tries to write the journal through the store's own methods: every writer takes the
//! runtime's pen, which no code outside the runtime can make.

use agentry::runtime::Runtime;
use agentry::store::{Durable, JournalPen, MemoryStore, RunRecord, SqliteStore, Store};
use std::sync::Arc;

fn main() {
    let held = Arc::new(MemoryStore::new());
    let _runtime = Runtime::builder().store(held.clone()).build();
    let run = uuid::Uuid::nil();
    let agent = agentry::id::AgentId::new("a").unwrap();
    let action = agentry::id::ActionId::new("pay.order").unwrap();
    let forged = RunRecord::queued(run, agent.clone(), action, &serde_json::json!({}), run);
    let _ = held.record(forged.clone());
    let _ = held.record(&JournalPen(()), forged);
    let file = SqliteStore::open("journal.db").unwrap();
    let signal = agentry::signal::Signal::new("order.paid", serde_json::json!({})).unwrap();
    file.append_input(&agent, 1, &signal);
}
