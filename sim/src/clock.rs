//! The virtual clock's agenda: events by time, and events at the same time in the order they were scheduled.
//! The heap holds only `(time, order, slot)`; the events themselves wait in a slab, so sifting the heap moves
//! a few bytes rather than whole signals.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Events on virtual time, in nanoseconds since the start.
pub(crate) struct Agenda<E> {
    heap: BinaryHeap<Reverse<(u64, u64, u32)>>,
    slots: Vec<Option<E>>,
    free: Vec<u32>,
    scheduled: u64,
}

impl<E> Agenda<E> {
    pub fn new() -> Self {
        Self { heap: BinaryHeap::new(), slots: Vec::new(), free: Vec::new(), scheduled: 0 }
    }

    /// Schedules `event` at `at`; returns its place in the order of scheduling.
    pub fn push(&mut self, at: u64, event: E) -> u64 {
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize] = Some(event);
                slot
            }
            None => {
                self.slots.push(Some(event));
                u32::try_from(self.slots.len() - 1).unwrap_or(u32::MAX)
            }
        };
        let order = self.scheduled;
        self.scheduled += 1;
        self.heap.push(Reverse((at, order, slot)));
        order
    }

    /// The place in the order of scheduling the next event pushed will get.
    pub fn next_order(&self) -> u64 {
        self.scheduled
    }

    /// When the next event happens.
    pub fn next_at(&self) -> Option<u64> {
        self.heap.peek().map(|Reverse((at, _, _))| *at)
    }

    /// The next event and its time.
    pub fn pop(&mut self) -> Option<(u64, E)> {
        let Reverse((at, _, slot)) = self.heap.pop()?;
        let event = self.slots.get_mut(slot as usize)?.take()?;
        self.free.push(slot);
        Some((at, event))
    }
}

#[cfg(test)]
mod tests {
    use super::Agenda;

    #[test]
    fn events_come_by_time_then_in_the_order_they_were_scheduled() {
        let mut agenda = Agenda::new();
        for (at, name) in [(5, "e"), (1, "a"), (5, "f"), (3, "c"), (1, "b"), (3, "d")] {
            agenda.push(at, name);
        }
        let mut order = Vec::new();
        while let Some((_, name)) = agenda.pop() {
            order.push(name);
            if name == "c" {
                agenda.push(3, "d2");
            }
        }
        assert_eq!(order, ["a", "b", "c", "d", "d2", "e", "f"]);
    }
}
