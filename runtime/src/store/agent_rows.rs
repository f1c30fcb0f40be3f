//! The rows the SQLite journal's writer gathers in one commit, one per agent, each a summary and a body of
//! entries (the input log's rows and the ended runs' rows): the map they gather in, and the bodies of rows
//! written, kept for the next commit's rows.

use super::FastHash;
use crate::id::AgentId;
use std::collections::HashMap;

/// How many agents' rows the map keeps room for between commits: a usual commit's, not the most one ever had.
const GATHERING_KEEPS: usize = 64;
/// How many written bodies are kept, and the largest kept, so a commit that wrote a row for each of thousands
/// of agents does not keep a buffer per agent for ever.
const SPARE_KEPT: usize = 8;
const SPARE_KEPT_BYTES: usize = 8 * 1024 * 1024;

/// One row being gathered: what its table's columns say about it, and its entries.
pub(super) struct Row<S> {
    pub summary: S,
    pub body: Vec<u8>,
}

/// The rows being gathered, one per agent.
pub(super) struct AgentRows<S> {
    gathering: HashMap<AgentId, Row<S>, FastHash>,
    spare: Vec<Vec<u8>>,
}

impl<S> Default for AgentRows<S> {
    fn default() -> Self {
        Self { gathering: HashMap::default(), spare: Vec::new() }
    }
}

impl<S> AgentRows<S> {
    /// `agent`'s row, if one is being gathered.
    pub(super) fn get(&self, agent: &AgentId) -> Option<&Row<S>> {
        self.gathering.get(agent)
    }

    /// `agent`'s row, started with `start` (and a spare body) if none is being gathered.
    pub(super) fn or_start(&mut self, agent: &AgentId, start: impl FnOnce() -> S) -> &mut Row<S> {
        let spare = &mut self.spare;
        self.gathering
            .entry(agent.clone())
            .or_insert_with(|| Row { summary: start(), body: spare.pop().unwrap_or_default() })
    }

    /// Writes `agent`'s row, if one is being gathered, with `write`.
    pub(super) fn write_agent<E>(
        &mut self,
        agent: &AgentId,
        write: impl FnOnce(&AgentId, S, &[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        match self.gathering.remove(agent) {
            Some(Row { summary, body }) => {
                let written = write(agent, summary, &body);
                self.keep(body);
                written
            }
            None => Ok(()),
        }
    }

    /// Writes every row gathered, with `write`.
    pub(super) fn write_all<E>(&mut self, mut write: impl FnMut(&AgentId, S, &[u8]) -> Result<(), E>) -> Result<(), E> {
        // Taken out and put back, so the map keeps its room from commit to commit.
        let mut gathering = std::mem::take(&mut self.gathering);
        let mut written = Ok(());
        for (agent, Row { summary, body }) in gathering.drain() {
            if written.is_ok() {
                written = write(&agent, summary, &body);
            }
            self.keep(body);
        }
        gathering.shrink_to(GATHERING_KEEPS);
        self.gathering = gathering;
        written
    }

    /// Drops every row gathered (its commit failed).
    pub(super) fn forget(&mut self) {
        let mut gathering = std::mem::take(&mut self.gathering);
        for (_, row) in gathering.drain() {
            self.keep(row.body);
        }
        self.gathering = gathering;
    }

    /// Keeps a written row's body, emptied, for a row of a later commit (a few, none too large).
    fn keep(&mut self, mut body: Vec<u8>) {
        if self.spare.len() < SPARE_KEPT && body.capacity() <= SPARE_KEPT_BYTES {
            body.clear();
            self.spare.push(body);
        }
    }
}
