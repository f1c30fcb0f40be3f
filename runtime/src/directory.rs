//! The agent directory: every live agent by id and by name, with a type-erased way to deliver a signal to it.

use crate::agent::Agent;
use crate::id::AgentId;
use crate::messages::{ServerMsg, Untyped};
use crate::signal::Signal;
use dashmap::DashMap;
use ractor::{ActorCell, ActorRef};
use std::any::TypeId;

/// Puts an untyped message in the mailbox of an agent's actor; `false` when the agent is gone. One function per
/// agent type ([`deliver`]), so an entry carries a pointer rather than a closure of its own.
pub(crate) type Deliver = fn(&ActorCell, Untyped) -> bool;

/// The [`Deliver`] of agents of type `A`.
pub(crate) fn deliver<A: Agent>(cell: &ActorCell, message: Untyped) -> bool {
    ActorRef::<ServerMsg<A>>::from(cell.clone()).cast(message.into()).is_ok()
}

/// One live agent.
#[derive(Clone)]
pub(crate) struct Entry {
    pub name: Option<String>,
    pub parent: Option<AgentId>,
    pub agent_type: TypeId,
    pub cell: ActorCell,
    pub deliver: Deliver,
}

impl Entry {
    pub fn new(
        name: Option<String>,
        parent: Option<AgentId>,
        agent_type: TypeId,
        cell: ActorCell,
        deliver: Deliver,
    ) -> Self {
        Self { name, parent, agent_type, cell, deliver }
    }
}

/// Every live agent, by id and by name, plus topic subscriptions. Concurrent reads never block each other.
#[derive(Default)]
pub(crate) struct Directory {
    by_id: DashMap<AgentId, Entry>,
    by_name: DashMap<String, AgentId>,
    topics: DashMap<String, Vec<AgentId>>,
}

impl Directory {
    /// Adds an agent, or says what is taken (its id or its name) and adds nothing. Atomic: of two inserts
    /// racing on one id or name, exactly one wins.
    pub fn insert(&self, id: AgentId, entry: Entry) -> Result<(), String> {
        let name = entry.name.clone();
        match self.by_id.entry(id.clone()) {
            dashmap::Entry::Occupied(_) => return Err(id.to_string()),
            dashmap::Entry::Vacant(slot) => {
                slot.insert(entry);
            }
        }
        if let Some(name) = name {
            match self.by_name.entry(name.clone()) {
                dashmap::Entry::Occupied(_) => {
                    self.by_id.remove(&id);
                    return Err(name);
                }
                dashmap::Entry::Vacant(slot) => {
                    slot.insert(id);
                }
            }
        }
        Ok(())
    }

    /// Removes the agent of this id if its entry is the actor `cell`'s (not a later agent's of the same id);
    /// returns the entry it removed. Its topics are kept: an agent that sleeps, or is started again, is still
    /// subscribed (see [`Directory::leave_topics`]).
    pub fn remove_cell(&self, id: &AgentId, cell: ractor::ActorId) -> Option<Entry> {
        let (_, entry) = self.by_id.remove_if(id, |_, entry| entry.cell.get_id() == cell)?;
        if let Some(name) = &entry.name {
            self.by_name.remove_if(name, |_, owner| owner == id);
        }
        Some(entry)
    }

    /// Unsubscribes an agent that is gone for good from every topic (an empty topic is dropped).
    pub fn leave_topics(&self, id: &AgentId) {
        self.topics.retain(|_, subscribers| {
            subscribers.retain(|s| s != id);
            !subscribers.is_empty()
        });
    }

    /// Whether an agent of this id runs here.
    pub fn contains(&self, id: &AgentId) -> bool {
        self.by_id.contains_key(id)
    }

    pub fn get(&self, id: &AgentId) -> Option<Entry> {
        self.by_id.get(id).map(|e| e.clone())
    }

    pub fn id_of(&self, name: &str) -> Option<AgentId> {
        self.by_name.get(name).map(|id| id.clone())
    }

    /// The live agents whose parent is `parent`.
    pub fn children_of(&self, parent: &AgentId) -> Vec<AgentId> {
        self.by_id.iter().filter(|e| e.parent.as_ref() == Some(parent)).map(|e| e.key().clone()).collect()
    }

    pub fn ids(&self) -> Vec<AgentId> {
        self.by_id.iter().map(|e| e.key().clone()).collect()
    }

    pub fn deliver(&self, id: &AgentId, signal: Signal) -> bool {
        self.tell(id, Untyped::Signal(signal))
    }

    /// Delivers a signal to the agent if it is in the directory (`Some` with whether its actor took it), else
    /// gives the signal back in `signal`.
    pub fn offer(&self, id: &AgentId, signal: &mut Option<Signal>) -> Option<bool> {
        let (deliver, cell) = self.by_id.get(id).map(|e| (e.deliver, e.cell.clone()))?;
        signal.take().map(|signal| deliver(&cell, Untyped::Signal(signal)))
    }

    pub fn tell(&self, id: &AgentId, message: Untyped) -> bool {
        match self.by_id.get(id).map(|e| (e.deliver, e.cell.clone())) {
            Some((deliver, cell)) => deliver(&cell, message),
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
