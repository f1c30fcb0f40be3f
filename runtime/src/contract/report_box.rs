//! Boxes for run reports, reused. Every run's report is boxed where the run ends and kept by its outcome signal
//! until the agent consumed it. An agent that asks for many runs at once makes all their boxes, then frees them
//! one by one as it is told of each outcome: far more blocks of one size than the allocator keeps at hand, so
//! each box would be made and freed on its slow path. Instead, a thread that frees a consumed report keeps its
//! box (emptied: the outcome goes at once) for the next report it makes, up to [`SPARE_BOXES`].

use super::{Outcome, RunReport};
use std::cell::RefCell;

/// The most emptied boxes a thread keeps (about 240 bytes each).
const SPARE_BOXES: usize = 1_024;

thread_local! {
    // The boxes themselves are what is kept, to be handed out as they are: `vec_box` does not apply.
    #[allow(clippy::vec_box)]
    static SPARE: RefCell<Vec<Box<RunReport>>> = const { RefCell::new(Vec::new()) };
}

/// `report` in a box: one this thread kept, if it has one, else a new one.
pub(crate) fn boxed(report: RunReport) -> Box<RunReport> {
    let spare = SPARE.try_with(|spare| spare.try_borrow_mut().ok().and_then(|mut spare| spare.pop()));
    match spare {
        Ok(Some(mut kept)) => {
            *kept = report;
            kept
        }
        _ => Box::new(report),
    }
}

/// Frees what a consumed report holds, and keeps its box for [`boxed`] (or frees it, if this thread keeps enough).
pub(crate) fn spare(mut report: Box<RunReport>) {
    report.outcome = Outcome::emptied();
    let _ = SPARE.try_with(|spare| {
        if let Ok(mut spare) = spare.try_borrow_mut()
            && spare.len() < SPARE_BOXES
        {
            spare.push(report);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::id::ActionId;
    use serde_json::json;
    use std::time::Duration;

    fn report(output: serde_json::Value) -> RunReport {
        let action = ActionId::new("math.add").unwrap();
        RunReport { run_id: uuid::Uuid::now_v7(), action, outcome: Outcome::completed(output, Duration::ZERO, 1) }
    }

    /// A spared box comes back for the next report, holding that report and nothing of the one before; what
    /// the spared report held is freed when it is spared, not when its box is used again.
    #[test]
    fn a_spared_box_is_reused_and_holds_only_the_new_report() {
        std::thread::spawn(|| {
            let first = boxed(report(json!({"big": "x".repeat(1_000)})));
            let place: *const RunReport = &*first;
            spare(first);
            let kept = SPARE.with(|spare| spare.borrow().last().map(|r| r.outcome.output.clone()));
            assert_eq!(kept, Some(serde_json::Value::Null), "its output was freed when it was spared");
            let next = report(json!(7));
            let again = boxed(next.clone());
            assert_eq!(&*again as *const RunReport, place, "the spared box is reused");
            assert_eq!(*again, next);
        })
        .join()
        .unwrap();
    }

    /// A thread keeps at most `SPARE_BOXES`; the rest are freed.
    #[test]
    fn a_thread_keeps_a_bounded_number_of_boxes() {
        std::thread::spawn(|| {
            for _ in 0..SPARE_BOXES + 10 {
                spare(Box::new(report(json!(1))));
            }
            assert_eq!(SPARE.with(|spare| spare.borrow().len()), SPARE_BOXES);
        })
        .join()
        .unwrap();
    }
}
