//! The world around the agents: signals between them (through the message faults), processes, crashes and
//! stops.

use super::*;

impl<A: Agent> Simulation<A> {
    /// A signal from one agent to another, through the message faults.
    pub(super) fn deliver(&mut self, to: usize, signal: Signal) {
        if self.faults.message_drop > 0.0 && self.rng.random::<f64>() < self.faults.message_drop {
            return self.fault(to, Fault::MessageDropped { signal: signal.id() });
        }
        let copies = if self.faults.message_duplicate > 0.0 && self.rng.random::<f64>() < self.faults.message_duplicate
        {
            self.fault(to, Fault::MessageDuplicated { signal: signal.id() });
            2
        } else {
            1
        };
        let mut signal = Some(signal);
        for copy in 0..copies {
            let delay = match &self.faults.message_delay {
                Some(latency) => nanos(latency.sample(&mut self.rng)),
                None => 0,
            };
            // The last copy is the signal itself, moved.
            let this = if copy + 1 == copies { signal.take() } else { signal.clone() };
            if let Some(this) = this {
                self.push(self.now.saturating_add(delay), Event::Deliver(to, this));
            }
        }
    }

    /// A process's signal to one agent, then its next tick.
    pub(super) fn tick(&mut self, index: usize) {
        let candidates = match &self.processes[index].who {
            Who::Agents(ids) => ids.len(),
            _ => self.agents.len(),
        };
        if candidates > 0 {
            let pick = self.rng.random_range(0..candidates);
            let process = &self.processes[index];
            let target = match &process.who {
                Who::Agents(ids) => self.index.get(&ids[pick]).copied(),
                Who::All => Some(pick),
                Who::WithSkill(_) => {
                    let members = self.knowing[index].and_then(|m| self.members.get(m));
                    Some(pick).filter(|&n| members.is_some_and(|m| m.has(n)))
                }
            };
            if let Some(target) = target.filter(|&n| self.agents[n].alive) {
                let contact = match &process.contacts {
                    Contacts::None => Some(None),
                    Contacts::WellMixed if self.agents.len() > 1 => {
                        let mut peer = self.rng.random_range(0..self.agents.len() - 1);
                        if peer >= target {
                            peer += 1;
                        }
                        Some(Some(peer))
                    }
                    Contacts::WellMixed => None,
                    Contacts::Network(network) => {
                        let neighbours = network.neighbours(target);
                        if neighbours.is_empty() {
                            None
                        } else {
                            Some(Some(neighbours[self.rng.random_range(0..neighbours.len())] as usize))
                        }
                    }
                };
                if let Some(peer) = contact {
                    // The template carries the process's data (or `null`); a contact is added to it.
                    let template = self.processes[index].template.clone();
                    let signal = match peer.and_then(|p| self.agents.get(p)) {
                        Some(peer) => {
                            let mut data = template.data().as_object().cloned().unwrap_or_default();
                            data.insert("peer".to_owned(), json!(peer.id.as_str()));
                            template.with_data(serde_json::Value::Object(data))
                        }
                        None => template,
                    };
                    let signal = self.stamp_at(signal, self.now);
                    self.consume_settling(target, signal);
                }
            }
        }
        let rate = self.processes[index].rate * candidates.max(1) as f64;
        let wait = rand_distr::Distribution::sample(
            &rand_distr::Exp::new(rate).unwrap_or(rand_distr::Exp::new(1.0).unwrap_or_else(|_| unreachable!())),
            &mut self.rng,
        );
        let at = self.now.saturating_add(nanos(Duration::from_secs_f64(wait.min(1e12))));
        self.push(at, Event::Tick(index));
    }

    pub(super) fn arm_crash(&mut self) {
        let rate = self.faults.crash_rate * self.agents.len().max(1) as f64;
        let wait = -self.rng.random::<f64>().max(f64::MIN_POSITIVE).ln() / rate;
        let at = self.now.saturating_add(nanos(Duration::from_secs_f64(wait.min(1e12))));
        self.push(at, Event::Crash);
    }

    /// A random agent crashes: its runs in flight are lost (it gets each back as `Interrupted`), its queued
    /// runs and timers stay, and it goes on from its last good state.
    pub(super) fn crash(&mut self) {
        if self.agents.is_empty() {
            return;
        }
        let victim = self.rng.random_range(0..self.agents.len());
        if !self.agents[victim].alive {
            return;
        }
        let slot = &mut self.agents[victim];
        slot.incarnation += 1;
        slot.in_flight = 0;
        let mut lost: Vec<RunIds> = slot.running.drain().map(|(_, ids)| ids).collect();
        lost.sort_by_key(|ids| ids.run);
        self.fault(victim, Fault::Crashed { runs_lost: lost.len() });
        for ids in lost {
            let error = ActionError::interrupted("the agent crashed while the run was in flight");
            let update =
                RunUpdate { status: Some(RunStatus::Failed), error: Some(error.class()), ..Default::default() };
            self.journal_update(ids.run, update, Duration::ZERO);
            self.answer(victim, &ids, self.now, Outcome::from_error(&error, Duration::ZERO, 1), Vec::new());
        }
        self.launch_queued(victim);
    }

    /// Stops an agent: its runs and timers are dropped, its parent told.
    pub(super) fn stop(&mut self, agent: usize, reason: &str) {
        let slot = &mut self.agents[agent];
        if !slot.alive {
            return;
        }
        slot.alive = false;
        slot.timers.clear();
        slot.queued.clear();
        slot.running.clear();
        // A stopped agent is no one's member (a process that picked it would skip it anyway).
        for members in &mut self.members {
            members.set(agent, false);
        }
        let (id, parent) = (slot.id.clone(), slot.parent);
        self.trace.record(self.now(), (agent, &id), What::Stopped { reason: reason.to_owned() });
        if let Some(parent) = parent.filter(|&p| self.agents[p].alive) {
            let source = self.agents[parent].source.clone();
            let stamp = (self.fresh_id(), self.time(self.now));
            if let Some(signal) = driver::child_exited_at(&source, &id, reason, stamp) {
                self.push(self.now, Event::Deliver(parent, signal));
            }
        }
    }
}
