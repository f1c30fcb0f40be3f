//! The librarian end to end: an agent with `fs` and `memory` mounted learns facts from the text files in its
//! drive, answers questions by recall, and unmounts `fs` at the end — its memory stays.
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
    let data = std::env::temp_dir().join(format!("agentry-librarian-{}", std::process::id()));
    let runtime = Runtime::builder().data_dir(&data).agent::<Librarian>()?.build();
    let policy = Policy::default().grant(Capability::FS).grant(Capability::MEMORY);
    let opts = SpawnOptions { id: Some(AgentId::new("librarian")?), policy, ..SpawnOptions::default() };
    let librarian = runtime.spawn(Librarian::default(), opts).await?;

    // Drop two files into the librarian's drive, as a user would.
    let fs = SkillId::new("fs")?;
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
    std::fs::remove_dir_all(&data)?;
    Ok(())
}
