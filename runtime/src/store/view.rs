//! The journal as a running runtime shows it ([`Runtime::store`](crate::runtime::Runtime::store)): every read
//! and no write. Only the runtime writes its journal (the agents' servers, their runs, the job board); an
//! application, an operator's tool or a model driving the runtime reads it here and cannot rewrite what
//! happened.

use super::{
    AgentRecord, AliveAgent, Durable, Flushed, Refusal, Revival, RunQuery, RunRecord, ScheduleRecord, Snapshot, Store,
    StoreError,
};
use crate::id::AgentId;
use crate::signal::Signal;
use std::sync::Arc;
use uuid::Uuid;

/// The runtime's journal, read only. Cheap to clone.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use agentry::runtime::Runtime;
/// use agentry::store::RunQuery;
/// let runtime = Runtime::builder().build();
/// assert!(runtime.store().query(&RunQuery::default()).is_empty());
/// assert!(runtime.store().durable().is_none(), "an in-memory journal keeps nothing past the process");
/// # }
/// ```
#[derive(Clone)]
pub struct JournalView {
    store: Arc<dyn Store>,
}

impl JournalView {
    /// A view of `store`.
    pub(crate) fn new(store: Arc<dyn Store>) -> Self {
        Self { store }
    }

    /// One run's record.
    pub fn get(&self, run: Uuid) -> Option<RunRecord> {
        self.store.get(run)
    }

    /// Every run that matches, oldest first.
    pub fn query(&self, query: &RunQuery) -> Vec<RunRecord> {
        self.store.query(query)
    }

    /// The effects refused for one agent, oldest first.
    pub fn refusals(&self, agent: &AgentId) -> Vec<Refusal> {
        self.store.refusals(agent)
    }

    /// What the journal keeps past the process (inputs, snapshots, schedules, what brings agents back), if it
    /// is durable.
    pub fn durable(&self) -> Option<DurableView<'_>> {
        self.store.durable().map(DurableView)
    }
}

/// The durable part of the runtime's journal, read only (see [`JournalView::durable`]).
#[derive(Clone, Copy)]
pub struct DurableView<'a>(&'a dyn Durable);

impl DurableView<'_> {
    /// Resolves once everything written before this call is durable (or the journal failed).
    pub fn flushed(&self) -> Flushed {
        self.0.flushed()
    }

    /// Resolves once everything written before this call is durable, and fails if `agent`'s writes were not
    /// kept (the journal failed, or, in a cluster, refused them: the node no longer holds the agent's lease).
    pub fn flushed_for(&self, agent: &crate::id::AgentId) -> Flushed {
        self.0.flushed_for(agent)
    }

    /// The agents the journal would bring back, a page at a time in the order of their ids: at most `limit` of
    /// those whose id comes after `after` (from the first with `None`).
    pub fn alive(&self, after: Option<&AgentId>, limit: usize) -> Result<Vec<AliveAgent>, StoreError> {
        self.0.alive(after, limit)
    }

    /// One agent's record, if it is to be brought back.
    pub fn agent(&self, agent: &AgentId) -> Result<Option<AgentRecord>, StoreError> {
        self.0.agent(agent)
    }

    /// An agent's latest snapshot.
    pub fn snapshot(&self, agent: &AgentId) -> Result<Option<Snapshot>, StoreError> {
        self.0.snapshot(agent)
    }

    /// An agent's inputs after number `after`, in order.
    pub fn inputs_after(&self, agent: &AgentId, after: u64) -> Result<Vec<(u64, Signal)>, StoreError> {
        self.0.inputs_after(agent, after)
    }

    /// An agent's armed schedules.
    pub fn schedules(&self, agent: &AgentId) -> Result<Vec<ScheduleRecord>, StoreError> {
        self.0.schedules(agent)
    }

    /// What brings each of these agents back, in their order (see [`Durable::revivals`]).
    pub fn revivals(&self, agents: &[AgentId]) -> Result<Vec<Result<Revival, StoreError>>, StoreError> {
        self.0.revivals(agents)
    }
}
