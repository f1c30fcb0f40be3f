//! The agent directory: every live agent by id and by name, with a type-erased way to deliver a signal to it.

use crate::id::AgentId;
use crate::signal::Signal;
use dashmap::DashMap;
use ractor::ActorCell;
use std::any::TypeId;
use std::sync::Arc;

/// What the runtime can tell an agent without knowing its type.
pub(crate) enum Untyped {
    /// A signal to handle.
    Signal(Signal),
    /// Start draining (see [`crate::server::ServerMsg::Drain`]); the sender is told once nothing runs.
    Drain(tokio::sync::oneshot::Sender<()>),
    /// A nested call for the gate.
    Admit(Box<crate::server::Admit>),
    /// Effects a job's run asked for.
    Effects(Vec<crate::effect::Effect>),
    /// A run asked for from outside the agent.
    Invoke(Box<crate::server::Invoke>),
    /// Bring a refreshed skill up to date.
    Refresh(crate::id::SkillId, tokio::sync::oneshot::Sender<Result<(), crate::runtime::RuntimeError>>),
    /// The contracts of the live table's actions.
    Actions(tokio::sync::oneshot::Sender<Vec<crate::action::ActionSpec>>),
}

impl<A: crate::agent::Agent> From<Untyped> for crate::server::ServerMsg<A> {
    fn from(message: Untyped) -> Self {
        match message {
            Untyped::Signal(signal) => Self::Signal(signal),
            Untyped::Drain(done) => Self::Drain(done),
            Untyped::Admit(admit) => Self::Admit(admit),
            Untyped::Effects(effects) => Self::Effects(effects),
            Untyped::Invoke(invoke) => Self::Invoke(invoke),
            Untyped::Refresh(skill, done) => Self::Refresh(skill, done),
            Untyped::Actions(reply) => Self::Actions(reply),
        }
    }
}

/// Puts an untyped message in one agent's mailbox; `false` when the agent is gone.
pub(crate) type Deliver = Arc<dyn Fn(Untyped) -> bool + Send + Sync>;

/// One live agent.
#[derive(Clone)]
pub(crate) struct Entry {
    pub name: Option<String>,
    pub parent: Option<AgentId>,
    pub agent_type: TypeId,
    pub cell: ActorCell,
    pub deliver: Deliver,
}

/// Every live agent, by id and by name, plus topic subscriptions. Concurrent reads never block each other.
#[derive(Default)]
pub(crate) struct Directory {
    by_id: DashMap<AgentId, Entry>,
    by_name: DashMap<String, AgentId>,
    topics: DashMap<String, Vec<AgentId>>,
}

impl Directory {
    /// Adds an agent; `false` (and nothing added) when its id or name is taken.
    pub fn insert(&self, id: AgentId, entry: Entry) -> bool {
        if self.by_id.contains_key(&id) {
            return false;
        }
        if let Some(name) = &entry.name {
            match self.by_name.entry(name.clone()) {
                dashmap::Entry::Occupied(_) => return false,
                dashmap::Entry::Vacant(slot) => {
                    slot.insert(id.clone());
                }
            }
        }
        self.by_id.insert(id, entry);
        true
    }

    pub fn remove(&self, id: &AgentId) -> Option<Entry> {
        let (_, entry) = self.by_id.remove(id)?;
        if let Some(name) = &entry.name {
            self.by_name.remove_if(name, |_, owner| owner == id);
        }
        for mut subscribers in self.topics.iter_mut() {
            subscribers.retain(|s| s != id);
        }
        Some(entry)
    }

    pub fn get(&self, id: &AgentId) -> Option<Entry> {
        self.by_id.get(id).map(|e| e.clone())
    }

    pub fn id_of(&self, name: &str) -> Option<AgentId> {
        self.by_name.get(name).map(|id| id.clone())
    }

    pub fn ids(&self) -> Vec<AgentId> {
        self.by_id.iter().map(|e| e.key().clone()).collect()
    }

    pub fn deliver(&self, id: &AgentId, signal: Signal) -> bool {
        self.tell(id, Untyped::Signal(signal))
    }

    pub fn tell(&self, id: &AgentId, message: Untyped) -> bool {
        match self.by_id.get(id).map(|e| e.deliver.clone()) {
            Some(deliver) => deliver(message),
            None => false,
        }
    }

    pub fn subscribe(&self, topic: &str, id: AgentId) {
        let mut subscribers = self.topics.entry(topic.to_owned()).or_default();
        if !subscribers.contains(&id) {
            subscribers.push(id);
        }
    }

    pub fn subscribers(&self, topic: &str) -> Vec<AgentId> {
        self.topics.get(topic).map(|s| s.clone()).unwrap_or_default()
    }
}
