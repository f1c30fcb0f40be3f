//! Recorded runs: what an agent's runs did where it ran for real, for a simulation that replays its past (a
//! fork, see [`SimBuilder::replaying`](crate::SimBuilder::replaying)). A run the simulated agent asks for with the
//! same action and params as a recorded one is not run again (not through the gate, not its code, not a model):
//! its agent is told what it was told then, as long after it asked as it was then.

use agentry::action::Outcome;
use agentry::id::ActionId;
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::time::Duration;
use uuid::Uuid;

/// What one recorded run told its agent, in order, each with how long after the run was asked for: a wait
/// for approval, then its end (the last one). A run that had not ended where it was recorded (nothing told,
/// or only a wait for approval) stays in flight when it is replayed.
pub type Told = Vec<(Duration, Outcome)>;

/// How many runs the recording has no record of a replay refuses before it stops: an agent that asks again
/// each time it is refused would otherwise never let virtual time move on.
pub const MAX_UNRECORDED: usize = 10_000;

/// Recorded runs by action and params, each kind replayed in the order it was recorded.
///
/// ```
/// use agentry::action::Outcome;
/// use agentry::id::ActionId;
/// use agentry_sim::Recording;
/// use std::time::Duration;
///
/// let mut recording = Recording::default();
/// let params = serde_json::json!({"path": "notes.md"});
/// let read = ActionId::new("fs.read")?;
/// let told = Outcome::completed(serde_json::json!("hello"), Duration::from_millis(3), 1);
/// recording.record(read.clone(), agentry::store::params_digest(&params), vec![(Duration::from_millis(3), told)]);
/// assert_eq!(recording.left(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct Recording {
    runs: HashMap<(ActionId, Uuid), VecDeque<Told>>,
    left: usize,
    /// Runs asked for that it had no record of.
    unrecorded: usize,
}

impl Recording {
    /// Records one run of `action` whose params have `params_digest` ([`agentry::store::params_digest`], as the
    /// journal keeps it): what it told its agent. Runs of the same action and params are replayed in the order
    /// they are recorded: record them in the order they were asked for.
    pub fn record(&mut self, action: ActionId, params_digest: Uuid, told: Told) {
        self.runs.entry((action, params_digest)).or_default().push_back(told);
        self.left += 1;
    }

    /// How many recorded runs no simulated run has replayed (yet).
    pub fn left(&self) -> usize {
        self.left
    }

    /// The recorded runs not replayed, by action, sorted by action id.
    pub fn unreplayed(&self) -> Vec<(ActionId, usize)> {
        let mut by_action: HashMap<&ActionId, usize> = HashMap::new();
        for ((action, _), runs) in &self.runs {
            *by_action.entry(action).or_default() += runs.len();
        }
        let mut left: Vec<_> = by_action.into_iter().filter(|(_, n)| *n > 0).map(|(a, n)| (a.clone(), n)).collect();
        left.sort();
        left
    }

    /// How many runs it had no record of were asked for (and refused).
    pub fn unrecorded(&self) -> usize {
        self.unrecorded
    }

    /// Whether the replay must stop: more than [`MAX_UNRECORDED`] runs it had no record of were asked for.
    pub fn exhausted(&self) -> bool {
        self.unrecorded > MAX_UNRECORDED
    }

    /// The next recorded run of `action` with these params, taken out of the recording; `None` (counted) when
    /// it has none.
    pub(crate) fn take(&mut self, action: &ActionId, params: &Value) -> Option<Told> {
        let key = (action.clone(), agentry::store::params_digest(params));
        let Some(runs) = self.runs.get_mut(&key) else {
            self.unrecorded += 1;
            return None;
        };
        let told = runs.pop_front()?;
        if runs.is_empty() {
            self.runs.remove(&key);
        }
        self.left -= 1;
        Some(told)
    }
}
