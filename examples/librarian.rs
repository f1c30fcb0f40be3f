//! The librarian end to end: an agent with `fs` and `memory` mounted learns facts from the text files in its
//! drive, answers questions by recall, and unmounts `fs` at the end — its memory stays.
//!
//! The runtime is durable: its journal is a SQLite file in the data folder (`AGENTRY_LIBRARIAN_DATA`, else
//! `agentry-librarian` in the system's temporary folder), which keeps the librarian's inputs and snapshots. Run
//! the example again and the librarian comes back, with what it learned and the skills it had mounted.
//!
//! Run it with `cargo run -p agentry-examples --example librarian`.

use agentry::action::Capability;
use agentry::id::{AgentId, SkillId};
use agentry::policy::Policy;
use agentry::runtime::{Runtime, SpawnOptions};
use agentry::signal::Signal;
use agentry::store::RunQuery;
use agentry_examples::librarian::Librarian;
use serde_json::{Value, json};
use std::error::Error;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

const PEOPLE: &str = "\
# subject | predicate | object
Ada Lovelace | wrote | the first published algorithm
Ada Lovelace | worked with | Charles Babbage
Grace Hopper | created | the first compiler
";

const PLACES: &str = "\
Analytical Engine | was designed in | London
Harvard Mark I | was built in | Cambridge, Massachusetts
this line has no separators and is skipped
";

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let data = std::env::var_os("AGENTRY_LIBRARIAN_DATA")
        .map_or_else(|| std::env::temp_dir().join("agentry-librarian"), std::path::PathBuf::from);
    let (runtime, recovery) = Runtime::builder().agent::<Librarian>()?.durable(&data)?.open().await?;
    println!("data: {} (journal: {})", data.display(), data.join(agentry::runtime::JOURNAL).display());
    let id = AgentId::new("librarian")?;
    let fs = SkillId::new("fs")?;
    let librarian = if recovery.agents.contains(&id) {
        println!("the librarian came back ({} logged inputs replayed)", recovery.replayed);
        let librarian = runtime.get::<Librarian>(&id)?;
        if !librarian.state().await?.is_mounted(&fs) {
            librarian.mount(&fs, Value::Null).await?;
        }
        librarian
    } else {
        let policy = Policy::default().grant(Capability::FS).grant(Capability::MEMORY);
        let opts = SpawnOptions { id: Some(id), policy, ..SpawnOptions::default() };
        runtime.spawn(Librarian::default(), opts).await?
    };

    // Drop two files into the librarian's drive, as a user would.
    let drive = runtime.drive(librarian.id(), &fs).ok_or("the runtime has a data folder")?;
    std::fs::create_dir_all(drive.join("notes"))?;
    std::fs::write(drive.join("notes/people.txt"), PEOPLE)?;
    std::fs::write(drive.join("notes/places.txt"), PLACES)?;
    println!("drive: {}", drive.display());

    let learned = librarian.call(Signal::new("learn", Value::Null)?, WAIT).await?;
    println!("learned: {learned}");

    for question in ["Who created the first compiler?", "Where was the Analytical Engine designed?", "Babbage"] {
        let reply = librarian.call(Signal::new("ask", json!({"question": question}))?, WAIT).await?;
        println!("{question} -> {}", reply["answer"]);
    }

    librarian.unmount(&fs).await?;
    let mounted: Vec<String> = librarian.state().await?.skills().keys().map(ToString::to_string).collect();
    println!("after unmounting fs, mounted skills: {mounted:?}");
    let reply = librarian.call(Signal::new("ask", json!({"question": "compiler"}))?, WAIT).await?;
    println!("memory still answers: compiler -> {}", reply["answer"]);

    let runs = runtime.store().query(&RunQuery::default());
    let failed: Vec<_> = runs.iter().filter(|r| r.error.is_some()).map(|r| (r.action.to_string(), r.error)).collect();
    println!("journal: {} runs, failed: {failed:?}", runs.len());

    runtime.shutdown(Duration::from_secs(5)).await;
    println!("run it again: the librarian comes back from {}", data.display());
    Ok(())
}
