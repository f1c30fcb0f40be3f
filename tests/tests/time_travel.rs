//! Time travel on a real SQLite journal that keeps every input: for every input an agent took, its snapshot
//! history and its input log fold (with the same pure code a recovery uses) into exactly the state the live
//! agent had right after that input, skills it mounted from outside included.

use agentry::agent::{Agent, Reaction};
use agentry::driver::replay_input;
use agentry::id::{AgentId, SkillId};
use agentry::runtime::{Runtime, SpawnOptions};
use agentry::signal::Signal;
use agentry::skill::{AgentState, Catalog, SkillDefinition};
use agentry::store::{SqliteOptions, SqliteStore};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Keeps a running total and the kinds it saw, and answers each signal with the total; `mount` mounts `memory`
/// itself.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Tally {
    total: i64,
    kinds: Vec<String>,
}

impl Agent for Tally {
    fn name() -> &'static str {
        "tally"
    }

    fn handle_signal(&self, signal: &Signal) -> Reaction<Self> {
        let mut next = self.clone();
        next.total += signal.data()["add"].as_i64().unwrap_or(0);
        next.kinds.push(signal.kind().to_string());
        // Every signal is answered, so its caller knows it was taken.
        let mut effects = vec![agentry::effect::Effect::reply(signal.id(), json!(next.total))];
        if signal.kind().as_str() == "mount" {
            effects.push(agentry::effect::Effect::mount_skill(SkillId::new("memory").expect("an id"), Value::Null));
        }
        Reaction::Update(next, effects)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_state_at_every_input_is_the_live_state_after_it() {
    let dir = tempfile::tempdir().expect("a folder");
    let options = SqliteOptions { keep_inputs: true, ..SqliteOptions::default() };
    let memory = agentry_skills::Memory::skill().expect("builds");
    let fs = agentry_skills::Files::skill().expect("builds");
    let (runtime, _) = Runtime::builder()
        .skill(memory.clone())
        .skill(fs.clone())
        .agent::<Tally>()
        .expect("registered")
        .snapshot_every(3)
        .durable_with(dir.path(), options)
        .expect("opens")
        .open()
        .await
        .expect("starts");
    let id = AgentId::new("tally").expect("an id");
    let policy = agentry::policy::Policy::trusted();
    let opts = SpawnOptions { id: Some(id.clone()), policy: policy.clone(), ..SpawnOptions::default() };
    let agent = runtime.spawn(Tally::default(), opts).await.expect("spawned");
    let mut live: Vec<AgentState<Tally>> = Vec::new();
    for n in 1..=10i64 {
        let kind = if n == 4 { "mount" } else { "add" };
        agent.call(Signal::new(kind, json!({"add": n})).expect("a kind"), agentry_tests::CALL).await.expect("answered");
        if n == 6 {
            // A skill mounted from outside: a snapshot, not an input.
            agent.mount(&SkillId::new("fs").expect("an id"), Value::Null).await.expect("mounted");
        }
        live.push(agent.state().await.expect("a state"));
    }
    runtime.shutdown(std::time::Duration::from_secs(10)).await;
    drop(runtime);

    let journal = SqliteStore::open(dir.path().join(agentry::runtime::JOURNAL)).expect("the journal opens");
    let catalog: Catalog = [memory, fs].into_iter().collect();
    let inputs = agentry::store::Durable::inputs_after(&journal, &id, 0).expect("the inputs");
    assert_eq!(inputs.len(), 10, "every input kept");
    for (seq, want) in (1u64..).zip(&live) {
        let (snapshot, after) = journal.history_at(&id, seq).expect("reads").expect("a history");
        assert!(snapshot.seq <= seq && after.iter().all(|(n, _)| *n > snapshot.seq && *n <= seq));
        let mut state: AgentState<Tally> = serde_json::from_value(snapshot.state).expect("a state of the type");
        for (_, signal) in &after {
            replay_input(&mut state, signal, &catalog, &policy);
        }
        assert_eq!(&state, want, "the state at input {seq}");
    }
}
