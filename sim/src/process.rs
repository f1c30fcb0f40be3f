//! Poisson processes: signals that reach agents at random times, at a rate per agent — contacts, arrivals,
//! ticks. Randomness enters the pure agents only this way, as data carried by signals.

use crate::error::{SimError, check};
use crate::network::Network;
use agentry::id::{AgentId, SkillId};
use agentry::signal::Signal;

/// Which agents a process reaches.
#[derive(Debug, Clone)]
pub enum Who {
    /// Every agent.
    All,
    /// Agents with this skill mounted (others are skipped, which is the same as a signal they would ignore).
    WithSkill(SkillId),
    /// These agents.
    Agents(Vec<AgentId>),
}

/// Whom a process's signal names as the contact (in its data, as `"peer": "<agent id>"`).
#[derive(Debug, Clone)]
pub enum Contacts {
    /// No one: the signal's data is the process's own ([`Process::data`]), `null` if it has none.
    None,
    /// Any other agent, uniformly (a well-mixed population).
    WellMixed,
    /// A neighbour in this network, uniformly (an agent without neighbours gets no signal).
    Network(std::sync::Arc<Network>),
}

/// Signals of one kind reaching each agent of `who` at `rate` per unit of virtual time (a second), each
/// naming a contact as `contacts` says.
///
/// What a process's signal holds: its kind; `source` `agentry/sim`; an id from the simulation's generator and
/// the virtual time it arrives at; and as data, the object given with [`data`](Process::data) (`null` if none),
/// with `"peer": "<agent id>"` added when it names a contact.
///
/// ```
/// use agentry_sim::{Contacts, Process, Who};
/// use serde_json::json;
///
/// let contacts = Process::new("contact", 0.8).unwrap().reaching(Who::All).with_contacts(Contacts::WellMixed);
/// // Each `order` signal carries `{"item": "tea", "quantity": 2}`; a contact would add `"peer"`.
/// let orders = Process::new("order", 0.1).unwrap().data(json!({"item": "tea", "quantity": 2})).unwrap();
/// # let _ = (contacts, orders);
/// ```
#[derive(Debug, Clone)]
pub struct Process {
    /// A signal of the process's kind, copied and stamped for each one it sends.
    pub(crate) template: Signal,
    pub(crate) rate: f64,
    pub(crate) who: Who,
    pub(crate) contacts: Contacts,
}

impl Process {
    /// Signals of `kind` at `rate` per agent per unit of time, to every agent, with no contact.
    pub fn new(kind: &str, rate: f64) -> Result<Self, SimError> {
        check(&format!("the rate of process `{kind}`"), rate, false)?;
        let template = Signal::builder(kind)
            .source("agentry/sim")
            .build()
            .map_err(|e| SimError::BadKind { kind: kind.to_owned(), reason: e.to_string() })?;
        Ok(Self { template, rate, who: Who::All, contacts: Contacts::None })
    }

    /// Every signal of the process carries this data: a JSON object (a contact, if the process names one, is
    /// added to it as `peer`). Anything but an object is refused, since a contact could not be added to it.
    pub fn data(mut self, data: serde_json::Value) -> Result<Self, SimError> {
        let serde_json::Value::Object(data) = data else {
            return Err(SimError::BadProcessData { kind: self.template.kind().to_string(), data: data.to_string() });
        };
        self.template = self.template.with_data(serde_json::Value::Object(data));
        Ok(self)
    }

    /// Reaching these agents.
    pub fn reaching(mut self, who: Who) -> Self {
        self.who = who;
        self
    }

    /// Naming contacts this way.
    pub fn with_contacts(mut self, contacts: Contacts) -> Self {
        self.contacts = contacts;
        self
    }
}
