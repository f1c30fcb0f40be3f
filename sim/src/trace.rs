//! The trace of a simulation: every input each agent consumed, every effect refused, every fault injected, in
//! order, folded into one hash; kept in full when asked, so any agent's history can be replayed step by step.

use crate::error::SimError;
use crate::faults::Fault;
use agentry::agent::{Agent, AgentState, step};
use agentry::effect::{Effect, EffectKind, EffectRefusal};
use agentry::id::AgentId;
use agentry::policy::Policy;
use agentry::signal::Signal;
use agentry::skill::Catalog;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

/// One thing that happened.
#[derive(Debug, Clone, Serialize)]
pub struct Entry {
    /// When, in virtual time since the start.
    pub at: Duration,
    /// To which agent.
    pub agent: AgentId,
    /// What.
    pub what: What,
}

/// What happened to an agent.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "what", rename_all = "snake_case")]
pub enum What {
    /// It consumed this input (a signal through its `step`).
    Input {
        /// The signal.
        signal: Signal,
    },
    /// One of its effects was refused.
    Refused {
        /// Why.
        refusal: EffectRefusal,
    },
    /// A fault was injected.
    Fault {
        /// Which.
        fault: Fault,
    },
    /// It stopped.
    Stopped {
        /// Why.
        reason: String,
    },
}

/// An agent as it started: its state with its start skills mounted, and its policy.
#[derive(Debug, Clone)]
struct Start {
    state: Value,
    policy: Policy,
}

/// The trace of one simulation run.
pub struct Trace {
    hasher: xxhash_rust::xxh3::Xxh3,
    keep: bool,
    entries: Vec<Entry>,
    starts: BTreeMap<AgentId, Start>,
    recorded: u64,
    /// One entry's bytes, gathered before they go into the hash at once (many small updates cost more).
    scratch: Vec<u8>,
}

/// An entry's time and agent, as the hash takes them. The agent goes in by its number (the order it was added
/// in, the same for the same setup): its id's text lives in an allocation of its own, a cache miss per entry in
/// a simulation of many agents.
fn stamp(bytes: &mut Vec<u8>, at: Duration, agent: usize) {
    let nanos = u64::try_from(at.as_nanos()).unwrap_or(u64::MAX);
    bytes.extend_from_slice(&nanos.to_le_bytes());
    bytes.extend_from_slice(&(agent as u64).to_le_bytes());
}

impl Trace {
    pub(crate) fn new(keep: bool) -> Self {
        Self {
            hasher: xxhash_rust::xxh3::Xxh3::new(),
            keep,
            entries: Vec::new(),
            starts: BTreeMap::new(),
            recorded: 0,
            scratch: Vec::with_capacity(256),
        }
    }

    /// Notes how an agent started (kept only for a full trace).
    pub(crate) fn started<A: Agent>(&mut self, state: &AgentState<A>, policy: &Policy) {
        if self.keep
            && let Ok(json) = serde_json::to_value(state)
        {
            self.starts.insert(state.id.clone(), Start { state: json, policy: policy.clone() });
        }
    }

    /// Records an input: into the hash always, copied into the entries only when the trace is kept in full.
    pub(crate) fn input(&mut self, at: Duration, (number, agent): (usize, &AgentId), signal: &Signal) {
        self.recorded += 1;
        let mut bytes = std::mem::take(&mut self.scratch);
        bytes.clear();
        stamp(&mut bytes, at, number);
        bytes.push(b'i');
        bytes.extend_from_slice(signal.id().as_bytes());
        bytes.extend_from_slice(signal.kind().as_str().as_bytes());
        bytes.push(0);
        bytes.extend_from_slice(signal.source().as_bytes());
        bytes.push(0);
        match signal.data() {
            // The same bytes as the serializer writes, without going through it for the commonest payload.
            serde_json::Value::Null => bytes.extend_from_slice(b"null"),
            data => {
                let _ = serde_json::to_writer(&mut bytes, data);
            }
        }
        self.hasher.update(&bytes);
        self.scratch = bytes;
        if self.keep {
            self.entries.push(Entry { at, agent: agent.clone(), what: What::Input { signal: signal.clone() } });
        }
    }

    /// Records one entry: into the hash always, into the entries when the trace is kept in full.
    pub(crate) fn record(&mut self, at: Duration, (number, agent): (usize, &AgentId), what: What) {
        self.recorded += 1;
        let mut bytes = std::mem::take(&mut self.scratch);
        bytes.clear();
        stamp(&mut bytes, at, number);
        bytes.push(b'o');
        let _ = serde_json::to_writer(&mut bytes, &what);
        self.hasher.update(&bytes);
        self.scratch = bytes;
        if self.keep {
            self.entries.push(Entry { at, agent: agent.clone(), what });
        }
    }

    /// The trace's hash (XXH3, 128 bits, hex): the same seed and setup give the same hash, on any machine,
    /// in any thread of a sweep. It tells runs apart; it is not a cryptographic seal.
    pub fn hash(&self) -> String {
        format!("{:032x}", self.hasher.digest128())
    }

    /// How many entries went into the hash.
    pub fn len(&self) -> u64 {
        self.recorded
    }

    /// Whether nothing happened.
    pub fn is_empty(&self) -> bool {
        self.recorded == 0
    }

    /// The entries, in order (empty unless the trace was kept in full: [`crate::SimBuilder::keep_trace`]).
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The inputs one agent consumed, in order.
    pub fn inputs<'a>(&'a self, agent: &'a AgentId) -> impl Iterator<Item = (Duration, &'a Signal)> + 'a {
        self.entries.iter().filter(move |e| &e.agent == agent).filter_map(|e| match &e.what {
            What::Input { signal } => Some((e.at, signal)),
            _ => None,
        })
    }

    /// Replays one agent's history from the trace: its state after each input it consumed, with the effects
    /// that input produced, through the same pure `step` (and the same learning of skills) the simulation ran.
    pub fn history<A: Agent>(&self, agent: &AgentId, catalog: &Catalog) -> Result<Vec<Moment<A>>, SimError> {
        let replay_error = |reason: &str| SimError::Replay { agent: agent.clone(), reason: reason.to_owned() };
        if !self.keep {
            return Err(replay_error("the trace was not kept in full; build the simulation with `keep_trace(true)`"));
        }
        let start = self.starts.get(agent).ok_or_else(|| replay_error("the agent is not in this trace"))?;
        let mut state: AgentState<A> =
            serde_json::from_value(start.state.clone()).map_err(|e| replay_error(&e.to_string()))?;
        let mut moments = Vec::new();
        for (at, signal) in self.inputs(agent) {
            let effects = match step(&mut state, signal, catalog) {
                Ok(stepped) => stepped.effects,
                Err(_) => Vec::new(),
            };
            learn(&mut state, &effects, catalog, &start.policy);
            moments.push(Moment { at, input: signal.clone(), effects, state: state.clone() });
        }
        Ok(moments)
    }
}

/// One step of an agent's history.
#[derive(Debug, Clone)]
pub struct Moment<A: Agent> {
    /// When.
    pub at: Duration,
    /// The input.
    pub input: Signal,
    /// The effects it produced.
    pub effects: Vec<Effect>,
    /// The agent's state after it.
    pub state: AgentState<A>,
}

/// Applies the skills an agent learned or forgot in one step's effects to its state (the pure half of
/// `MountSkill` / `UnmountSkill`), as a replay does (the simulation's run applies them through the shared interpretation).
fn learn<A: Agent>(state: &mut AgentState<A>, effects: &[Effect], catalog: &Catalog, policy: &Policy) {
    for effect in effects {
        match &effect.kind {
            EffectKind::MountSkill { skill, opts } => {
                if let Some(found) = catalog.get(skill) {
                    let _ = catch_unwind(AssertUnwindSafe(|| agentry::skill::mount(state, found, opts, policy)));
                }
            }
            EffectKind::UnmountSkill { skill } => {
                let _ = agentry::skill::unmount(state, skill);
            }
            _ => {}
        }
    }
}
