//! The agent the cluster tests run on their node processes (`cluster_node`): a `Tally` keeps, in order, every
//! number it was given, so a test can tell a signal applied twice, lost, or out of order; and a handle on a node
//! process, for the tests and the failover bench.

use crate::postgres::Postgres;
use agentry::agent::{Agent, Reaction};
use agentry::effect::{Effect, Target};
use agentry::id::AgentId;
use agentry::signal::Signal;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

/// Every number given to it with `add`, in the order it was applied.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally {
    /// The numbers, in order.
    pub applied: Vec<u64>,
    /// Each child's end it was told of: the child, and why.
    #[serde(default)]
    pub exits: Vec<(String, String)>,
    /// The `adopt` call waiting to hear that its child could not be spawned.
    #[serde(default)]
    pub adopting: Option<uuid::Uuid>,
}

impl Agent for Tally {
    fn name() -> &'static str {
        "tally"
    }

    fn handle_signal(&self, signal: &Signal) -> Reaction<Self> {
        match signal.kind().as_str() {
            // `add n`: keeps n, and replies how many it has.
            "add" => {
                let mut next = self.clone();
                next.applied.push(signal.data().as_u64().unwrap_or_default());
                let reply = Effect::reply(signal.id(), json!(next.applied.len()));
                Reaction::Update(next, vec![reply])
            }
            // A child of its ended (or its node went down).
            agentry::kinds::AGENT_CHILD_EXITED => {
                let mut next = self.clone();
                let data = signal.data();
                let text = |key: &str| data[key].as_str().unwrap_or_default().to_owned();
                next.exits.push((text("child"), text("reason")));
                Reaction::Update(next, vec![])
            }
            // `adopt <child>`: spawns a `Tally` child (it needs the `spawn` capability); replies only if the
            // spawn failed, with why (a child that starts is seen in the runtime's events).
            "adopt" => match signal.data().as_str().and_then(|child| AgentId::new(child).ok()) {
                Some(child) => {
                    let next = Tally { adopting: Some(signal.id()), ..self.clone() };
                    Reaction::Update(next, vec![Effect::spawn_agent(child, Self::name(), json!(Tally::default()))])
                }
                None => Reaction::Ignore,
            },
            agentry::kinds::AGENT_SPAWN_FAILED => match self.adopting {
                Some(call) => {
                    let next = Tally { adopting: None, ..self.clone() };
                    Reaction::Update(next, vec![Effect::reply(call, signal.data().clone())])
                }
                None => Reaction::Ignore,
            },
            // `spray {to: [ids], times}`: emits `add 1` to each agent of `to`, `times` rounds over them; replies
            // `true` once it did.
            "spray" => {
                let data = signal.data();
                let to: Vec<AgentId> = data["to"]
                    .as_array()
                    .map(|to| to.iter().filter_map(|t| t.as_str().and_then(|t| AgentId::new(t).ok())).collect())
                    .unwrap_or_default();
                let times = data["times"].as_u64().unwrap_or(1);
                let mut effects = Vec::new();
                for _ in 0..times {
                    for target in &to {
                        if let Ok(add) = Signal::new("add", json!(1)) {
                            effects.push(Effect::emit(add, Target::Agent(target.clone())));
                        }
                    }
                }
                effects.push(Effect::reply(signal.id(), json!(true)));
                Reaction::Keep(effects)
            }
            // `quit`: stops itself (an agent whose restart policy is `Permanent` is started again afresh).
            "quit" => Reaction::Keep(vec![Effect::stop("asked to quit")]),
            // `ask`: replies its state.
            "ask" => Reaction::Keep(vec![Effect::reply(signal.id(), json!(self))]),
            // `tell {to, n}`: emits `add n` to agent `to`; `shout {topic, n}`: to a topic's subscribers. Replies
            // `true` once it did.
            "tell" | "shout" => {
                let data = signal.data();
                let add = Signal::new("add", data["n"].clone()).ok();
                let to = match signal.kind().as_str() {
                    "tell" => data["to"].as_str().and_then(|to| AgentId::new(to).ok()).map(Target::Agent),
                    _ => data["topic"].as_str().map(|topic| Target::Topic(topic.to_owned())),
                };
                match (add, to) {
                    (Some(add), Some(to)) => {
                        Reaction::Keep(vec![Effect::emit(add, to), Effect::reply(signal.id(), json!(true))])
                    }
                    _ => Reaction::Ignore,
                }
            }
            _ => Reaction::Ignore,
        }
    }
}

/// The longest a test waits for a line from a node.
pub const WAIT: Duration = Duration::from_secs(30);

/// A node process: its stdin for commands, and its lines, those not asked for yet kept in order.
pub struct NodeProcess {
    /// The process.
    pub child: Child,
    stdin: ChildStdin,
    /// Its lines, as they come.
    pub lines: mpsc::UnboundedReceiver<String>,
    /// Its lines not asked for yet, in order.
    pub kept: Vec<String>,
}

impl NodeProcess {
    /// Starts the node program `program` (the `cluster_node` binary) as node `name` with leases of `lease_ms`.
    pub async fn start(program: &str, postgres: &Postgres, lease_ms: u64, name: &str) -> Self {
        Self::start_with(program, postgres, lease_ms, name, &[]).await
    }

    /// [`NodeProcess::start`] with more environment (the wire's settings, say).
    pub async fn start_with(
        program: &str,
        postgres: &Postgres,
        lease_ms: u64,
        name: &str,
        env: &[(&str, &str)],
    ) -> Self {
        let mut child = Command::new(program)
            .args([name, &lease_ms.to_string()])
            .env("AGENTRY_NODE_POSTGRES", postgres.url())
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the node starts");
        let stdin = child.stdin.take().expect("its stdin");
        let mut out = BufReader::new(child.stdout.take().expect("its stdout")).lines();
        let (send, lines) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok(Some(line)) = out.next_line().await {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        let mut node = Self { child, stdin, lines, kept: Vec::new() };
        node.expect(&format!("up {name}")).await;
        node
    }

    /// Sends a command line.
    pub async fn send(&mut self, command: &str) {
        self.stdin.write_all(format!("{command}\n").as_bytes()).await.expect("the node takes a command");
        self.stdin.flush().await.expect("flushed");
    }

    /// The first line (kept or new) that starts with `prefix`; the others are kept.
    pub async fn expect(&mut self, prefix: &str) -> String {
        self.expect_any(&[prefix]).await
    }

    /// The first line (kept or new) that starts with one of `prefixes`; the others are kept.
    pub async fn expect_any(&mut self, prefixes: &[&str]) -> String {
        let prefix = prefixes.join("` or `");
        let wanted = |line: &str| prefixes.iter().any(|p| line.starts_with(p));
        if let Some(at) = self.kept.iter().position(|l| wanted(l)) {
            return self.kept.remove(at);
        }
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            match tokio::time::timeout_at(deadline, self.lines.recv()).await {
                Ok(Some(line)) if wanted(&line) => return line,
                Ok(Some(line)) => self.kept.push(line),
                Ok(None) => panic!("the node ended before printing `{prefix}`; it printed {:?}", self.kept),
                Err(_) => panic!("the node did not print `{prefix}` within {WAIT:?}; it printed {:?}", self.kept),
            }
        }
    }

    /// Sends a command and returns the answer line starting with one of `answers`.
    pub async fn ask(&mut self, command: &str, answer: &str) -> String {
        self.send(command).await;
        self.expect(answer).await
    }

    /// Adds `n` to the agent, which must be acknowledged.
    pub async fn add(&mut self, agent: &str, n: u64) {
        self.send(&format!("add {agent} {n}")).await;
        let answer = self.expect(&format!("ack {agent} {n}")).await;
        assert_eq!(answer, format!("ack {agent} {n}"));
    }

    /// The agent's state, as this node has it (which must hold it).
    pub async fn state(&mut self, agent: &str) -> Tally {
        let line = self.ask(&format!("state {agent}"), &format!("state {agent} ")).await;
        serde_json::from_str(line.trim_start_matches(&format!("state {agent} "))).expect("a tally")
    }

    /// Where the node listens on the wire (it printed it before `up`).
    pub async fn wire_address(&mut self) -> String {
        self.expect("wire ").await.trim_start_matches("wire ").to_owned()
    }

    /// The process id.
    pub fn pid(&self) -> String {
        self.child.id().expect("running").to_string()
    }

    /// Sends a signal (`KILL`, `STOP`, `CONT`) to the process.
    pub fn signal(&self, name: &str) {
        let status = std::process::Command::new("kill").args([&format!("-{name}"), &self.pid()]).status();
        assert!(status.is_ok_and(|s| s.success()), "kill -{name} failed");
    }
}
