//! Building a simulation: its catalog, action models, faults, processes and metrics, checked before it runs.

use super::*;

/// Builds a simulation: the catalog of skills, action models, faults, processes and metrics, checked before
/// anything runs.
pub struct SimBuilder<A: Agent> {
    seed: u64,
    catalog: Catalog,
    models: HashMap<ActionId, ActionModel>,
    faults: Faults,
    processes: Vec<Process>,
    metrics: Metrics<A>,
    keep_trace: bool,
    keep_runs: bool,
    keep_journal: bool,
    max_call_depth: usize,
    epoch: DateTime<Utc>,
    recording: Option<Recording>,
}

impl<A: Agent> SimBuilder<A> {
    /// A simulation seeded with `seed`: the same seed and setup always give the same run.
    pub fn new(seed: u64) -> Self {
        Self {
            seed,
            catalog: Catalog::new(),
            models: HashMap::new(),
            faults: Faults::default(),
            processes: Vec::new(),
            metrics: Metrics::new(),
            keep_trace: false,
            keep_runs: false,
            keep_journal: false,
            max_call_depth: agentry::runtime::DEFAULT_MAX_CALL_DEPTH,
            epoch: DateTime::from_timestamp(1_767_225_600, 0).unwrap_or_default(),
            recording: None,
        }
    }

    /// Adds a skill to the catalog agents mount from.
    pub fn skill(mut self, skill: Skill) -> Self {
        self.catalog.insert(skill);
        self
    }

    /// Runs `action` by this model instead of its code.
    pub fn model(mut self, action: &str, model: ActionModel) -> Result<Self, SimError> {
        let id: ActionId = action
            .parse()
            .map_err(|e: agentry::IdError| SimError::BadKind { kind: action.to_owned(), reason: e.to_string() })?;
        model.check(action)?;
        self.models.insert(id, model);
        Ok(self)
    }

    /// Injects these faults.
    pub fn faults(mut self, faults: Faults) -> Self {
        self.faults = faults;
        self
    }

    /// Adds a Poisson process of signals.
    pub fn process(mut self, process: Process) -> Self {
        self.processes.push(process);
        self
    }

    /// Collects these metrics.
    pub fn metrics(mut self, metrics: Metrics<A>) -> Self {
        self.metrics = metrics;
        self
    }

    /// Keeps the whole trace (every input, refusal and fault), so histories can be replayed; otherwise only its
    /// hash is kept.
    pub fn keep_trace(mut self, keep: bool) -> Self {
        self.keep_trace = keep;
        self
    }

    /// Keeps a journal of every run, record by record as the runtime journals it (see
    /// [`Simulation::journal`]); off by default.
    pub fn keep_journal(mut self, keep: bool) -> Self {
        self.keep_journal = keep;
        self
    }

    /// How deep nested calls ([`ActionContext::call`](agentry::action::ActionContext::call)) may go, as
    /// [`RuntimeBuilder::max_call_depth`](agentry::runtime::RuntimeBuilder::max_call_depth) says live (by
    /// default the runtime's own default).
    pub fn max_call_depth(mut self, depth: usize) -> Self {
        self.max_call_depth = depth;
        self
    }

    /// The calendar time virtual time 0 is: what the agents' signals are stamped from (by default
    /// 2026-01-01T00:00:00Z).
    pub fn epoch(mut self, epoch: DateTime<Utc>) -> Self {
        self.epoch = epoch;
        self
    }

    /// Replays runs from a recording instead of running them: a run asked for with the same action and params
    /// as a recorded one ends as that one did, as long after it was asked (see [`Recording`]), without meeting
    /// the gate, its code or a model; a run the recording has no record of is refused, with a `Critical`
    /// error saying so: a replay runs nothing that did not run where it was recorded. For replaying an agent's
    /// past (a fork, with [`Simulation::restore`] and [`Simulation::send_recorded`]).
    pub fn replaying(mut self, recording: Recording) -> Self {
        self.recording = Some(recording);
        self
    }

    /// Keeps a record of every run that ended (for queueing measures); off by default.
    pub fn keep_runs(mut self, keep: bool) -> Self {
        self.keep_runs = keep;
        self
    }

    /// Builds the simulation, or says what is wrong with its setup.
    pub fn build(self) -> Result<Simulation<A>, SimError> {
        self.faults.check()?;
        for action in self.models.keys() {
            let provided = self.catalog.iter().any(|s| s.actions().iter().any(|a| &a.spec().id == action));
            if !provided {
                return Err(SimError::UnknownAction(action.clone()));
            }
        }
        let mut queue = Agenda::new();
        for (index, process) in self.processes.iter().enumerate() {
            if process.rate > 0.0 {
                queue.push(0, Event::Tick(index));
            }
        }
        if self.metrics.every.is_some() {
            queue.push(0, Event::Sample);
        }
        if self.faults.crash_rate > 0.0 {
            queue.push(0, Event::ArmCrash);
        }
        let columns = self.metrics.clone_names();
        let mut members = Vec::new();
        let knowing = self
            .processes
            .iter()
            .map(|process| match &process.who {
                Who::WithSkill(skill) => Some(match members.iter().position(|m: &Members| &m.skill == skill) {
                    Some(found) => found,
                    None => {
                        members.push(Members { skill: skill.clone(), bits: Vec::new(), count: 0 });
                        members.len() - 1
                    }
                }),
                _ => None,
            })
            .collect();
        let call_queue = CallQueue::default();
        Ok(Simulation {
            catalog: Arc::new(self.catalog),
            models: self.models,
            faults: self.faults,
            processes: self.processes,
            knowing,
            members,
            metrics: self.metrics,
            table: Table::with_columns(columns),
            trace: Trace::new(self.keep_trace),
            keep_runs: self.keep_runs,
            journal: self.keep_journal.then(super::journal::Journal::default),
            call_queue: call_queue.clone(),
            calls: runs::calls(&call_queue),
            max_call_depth: self.max_call_depth,
            runs: Vec::new(),
            replies: Vec::new(),
            agents: Vec::new(),
            index: HashMap::new(),
            queue,
            now: 0,
            rng: SimRng::seed_from_u64(self.seed),
            epoch: self.epoch,
            last_time: (0, self.epoch),
            counts: Counts::default(),
            run_index: 0,
            settling: false,
            recording: self.recording,
        })
    }
}
