//! What the operator waits for, each beside its baseline in the same run:
//! - `agentry run` from its start to "ready" with ten agents and one MCP server (the `agentry serve-mcp` of a
//!   second manifest, a real server in its own process), beside the same runtime started from Rust;
//! - `agentry state --at` on an agent with 100,000 inputs, beside the same fold done in-process.
//!
//! `cargo bench -p agentry-cli --bench operator` (AGENTRY_BENCH_RUNS sets the repetitions, default 5).

use agentry::id::{AgentId, SkillId};
use agentry::runtime::{Runtime, SpawnOptions};
use agentry::signal::Signal;
use agentry::skill::SkillDefinition;
use agentry::store::SqliteOptions;
use agentry_skills::mcp::{McpClient, McpServer};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_agentry");

fn agentry(dir: &Path) -> Command {
    let mut command = Command::new(BIN);
    command.current_dir(dir).env("AGENTRY_USER_CONFIG", "").env("HOME", dir);
    command
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn manifests(dir: &Path) {
    std::fs::create_dir_all(dir.join("peer")).expect("a folder");
    std::fs::write(
        dir.join("peer/agentry.toml"),
        "[runtime]\nstore = \"memory\"\n\n[agents.helper]\ntype = \"tools\"\nskills = [\"memory\"]\n",
    )
    .expect("written");
    let mut text = format!(
        "[mcp_servers.peer]\ncommand = {BIN:?}\nargs = [\"-f\", {:?}, \"serve-mcp\", \"--agent\", \"helper\"]\nenv = {{ AGENTRY_USER_CONFIG = \"\" }}\n",
        dir.join("peer/agentry.toml").to_string_lossy()
    );
    for n in 0..10 {
        text.push_str(&format!("\n[agents.a{n}]\ntype = \"tools\"\nskills = [\"fs\", \"memory\", \"mcp.peer\"]\n\n[agents.a{n}.permissions]\ngrants = [\"fs\", \"memory\", \"net\"]\n"));
    }
    std::fs::write(dir.join("agentry.toml"), text).expect("written");
}

/// `agentry run` until it prints "ready", then Ctrl-C.
fn command_to_ready(dir: &Path) -> Duration {
    let _ = std::fs::remove_dir_all(dir.join(".agentry"));
    let began = Instant::now();
    let mut child =
        agentry(dir).args(["run", "--no-prompt"]).stdin(Stdio::null()).stdout(Stdio::piped()).spawn().expect("starts");
    let stdout = child.stdout.take().expect("piped");
    let ready = BufReader::new(stdout).lines().map_while(Result::ok).any(|l| l.starts_with("ready:"));
    let took = began.elapsed();
    assert!(ready, "agentry run never got ready");
    let _ = Command::new("kill").args(["-INT", &child.id().to_string()]).status();
    let _ = child.wait();
    took
}

/// The same runtime from Rust: the catalog, the MCP server connected, the journal opened, ten agents with
/// their skills mounted.
async fn rust_to_ready(dir: &Path) -> Duration {
    let data = dir.join("rust-data");
    let _ = std::fs::remove_dir_all(&data);
    let began = Instant::now();
    let server = McpServer::stdio(
        "peer",
        BIN,
        ["-f", &dir.join("peer/agentry.toml").to_string_lossy(), "serve-mcp", "--agent", "helper"],
    )
    .env("AGENTRY_USER_CONFIG", "");
    let client = McpClient::connect(server).await.expect("the peer connects");
    let mut builder = Runtime::builder().skill(client.skill()).agent::<agentry_cli::Tools>().expect("registered");
    for skill in [
        agentry_skills::System::skill(),
        agentry_skills::Files::skill(),
        agentry_skills::Memory::skill(),
        agentry_skills::Http::skill(),
        agentry_skills::Jobs::skill(),
    ] {
        builder = builder.skill(skill.expect("builds"));
    }
    let (runtime, _) = builder.durable(&data).expect("opens").open().await.expect("starts");
    let policy = agentry::policy::Policy::trusted();
    for n in 0..10 {
        let opts = SpawnOptions {
            id: Some(AgentId::new(format!("a{n}")).expect("an id")),
            policy: policy.clone(),
            ..SpawnOptions::default()
        };
        let agent = runtime.spawn(agentry_cli::Tools::default(), opts).await.expect("spawned");
        for skill in ["fs", "memory", "mcp.peer"] {
            agent.mount(&SkillId::new(skill).expect("an id"), serde_json::Value::Null).await.expect("mounted");
        }
    }
    let took = began.elapsed();
    runtime.shutdown(Duration::from_secs(10)).await;
    client.close();
    took
}

/// A journal with one `tools` agent that took `inputs` signals, every one kept.
async fn long_history(dir: &Path, inputs: u64) {
    std::fs::write(dir.join("agentry.toml"), "[runtime]\nkeep_history = true\n\n[agents.tally]\ntype = \"tools\"\n")
        .expect("written");
    let options = SqliteOptions { keep_inputs: true, ..SqliteOptions::default() };
    let (runtime, _) = Runtime::builder()
        .agent::<agentry_cli::Tools>()
        .expect("registered")
        .durable_with(dir.join(".agentry"), options)
        .expect("opens")
        .open()
        .await
        .expect("starts");
    let opts = SpawnOptions { id: Some(AgentId::new("tally").expect("an id")), ..SpawnOptions::default() };
    let agent = runtime.spawn(agentry_cli::Tools::default(), opts).await.expect("spawned");
    for n in 0..inputs {
        agent.send(Signal::new("tick", serde_json::json!({"n": n})).expect("a kind")).expect("sent");
    }
    // The last input is in once a call behind it is answered (a `tools` agent answers none: its state is read).
    agent.state().await.expect("a state");
    runtime.shutdown(Duration::from_secs(30)).await;
}

fn main() {
    let runs: usize = std::env::var("AGENTRY_BENCH_RUNS").ok().and_then(|r| r.parse().ok()).unwrap_or(5);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a runtime");
    let dir = tempfile::tempdir().expect("a folder");
    manifests(dir.path());
    let command: Vec<Duration> = (0..runs).map(|_| command_to_ready(dir.path())).collect();
    let rust: Vec<Duration> = (0..runs).map(|_| rt.block_on(rust_to_ready(dir.path()))).collect();
    let (c, r) = (median(command), median(rust));
    println!(
        "start to ready, 10 agents + 1 MCP server: agentry run {c:?}, from Rust {r:?} (median of {runs}; {:.2}x)",
        c.as_secs_f64() / r.as_secs_f64()
    );

    let history = tempfile::tempdir().expect("a folder");
    let inputs = 100_000;
    rt.block_on(long_history(history.path(), inputs));
    let at = inputs.to_string();
    let command: Vec<Duration> = (0..runs)
        .map(|_| {
            let began = Instant::now();
            let output = agentry(history.path()).args(["state", "tally", "--at", &at]).output().expect("runs");
            assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
            began.elapsed()
        })
        .collect();
    let journal = agentry::store::SqliteStore::open(history.path().join(".agentry/journal.db")).expect("opens");
    let catalog = agentry::skill::Catalog::new();
    let id = AgentId::new("tally").expect("an id");
    let kept = agentry::store::Durable::inputs_after(&journal, &id, 0).expect("reads").len();
    assert_eq!(kept as u64, inputs, "every input is kept");
    let rust: Vec<Duration> = (0..runs)
        .map(|_| {
            let began = Instant::now();
            let (snapshot, after) = journal.history_at(&id, inputs).expect("reads").expect("a history");
            let mut state: agentry::skill::AgentState<agentry_cli::Tools> =
                serde_json::from_value(snapshot.state).expect("a state");
            for (_, signal) in &after {
                agentry::driver::replay_input(&mut state, signal, &catalog, &agentry::policy::Policy::default());
            }
            began.elapsed()
        })
        .collect();
    let (c, r) = (median(command), median(rust));
    println!(
        "state --at {inputs} of {inputs} inputs: agentry state {c:?}, in-process fold {r:?} (median of {runs}; {:.2}x)",
        c.as_secs_f64() / r.as_secs_f64()
    );
}
