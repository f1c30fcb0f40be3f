//! Action models: what an action does in a simulation in place of its real code — how long it takes, how
//! often it fails and with which error class, and what it returns.

use crate::SimRng;
use crate::error::{SimError, check};
use agentry::action::ErrorClass;
use rand::RngExt;
use rand_distr::{Distribution, Exp, LogNormal};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// How long something takes in virtual time.
#[derive(Debug, Clone, PartialEq)]
pub enum Latency {
    /// Always this long.
    Fixed(Duration),
    /// Exponentially distributed with this mean (a Poisson server's service time).
    Exponential {
        /// The mean.
        mean: Duration,
    },
    /// Uniform between two bounds.
    Uniform {
        /// The least.
        low: Duration,
        /// The most.
        high: Duration,
    },
    /// Log-normal: `median` and the spread `sigma` of its logarithm (typical of network calls).
    LogNormal {
        /// The median.
        median: Duration,
        /// The standard deviation of the logarithm.
        sigma: f64,
    },
}

impl Latency {
    /// No time at all.
    pub const ZERO: Latency = Latency::Fixed(Duration::ZERO);

    /// Draws one duration.
    pub fn sample(&self, rng: &mut SimRng) -> Duration {
        let seconds = match self {
            Latency::Fixed(d) => return *d,
            Latency::Exponential { mean } => match Exp::new(1.0 / mean.as_secs_f64()) {
                Ok(exp) => exp.sample(rng),
                Err(_) => 0.0,
            },
            Latency::Uniform { low, high } => {
                let (low, high) = (low.as_secs_f64(), high.as_secs_f64());
                low + (high - low) * rng.random::<f64>()
            }
            Latency::LogNormal { median, sigma } => match LogNormal::new(median.as_secs_f64().ln(), *sigma) {
                Ok(dist) => dist.sample(rng),
                Err(_) => median.as_secs_f64(),
            },
        };
        Duration::from_secs_f64(seconds.clamp(0.0, 1e12))
    }

    /// Says what is wrong with the distribution's settings.
    pub(crate) fn check(&self, what: &str) -> Result<(), SimError> {
        match self {
            Latency::Fixed(_) => Ok(()),
            Latency::Exponential { mean } if mean.is_zero() => {
                Err(SimError::BadNumber { what: format!("{what}: the mean"), value: 0.0, expected: "above 0" })
            }
            Latency::Exponential { .. } => Ok(()),
            Latency::Uniform { low, high } if low > high => Err(SimError::BadNumber {
                what: format!("{what}: the upper bound"),
                value: high.as_secs_f64(),
                expected: "at least the lower bound",
            }),
            Latency::Uniform { .. } => Ok(()),
            Latency::LogNormal { median, sigma } => {
                check(&format!("{what}: sigma"), *sigma, false)?;
                if median.is_zero() {
                    return Err(SimError::BadNumber {
                        what: format!("{what}: the median"),
                        value: 0.0,
                        expected: "above 0",
                    });
                }
                Ok(())
            }
        }
    }
}

/// What a modelled action returns, from its params and the simulation's generator.
pub type OutputFn = Arc<dyn Fn(&Value, &mut SimRng) -> Value + Send + Sync>;

/// An action's stand-in: latency, failures by error class, output.
///
/// ```
/// use agentry::action::ErrorClass;
/// use agentry_sim::{ActionModel, Latency};
/// use std::time::Duration;
///
/// let lookup = ActionModel::new(Latency::Exponential { mean: Duration::from_millis(80) })
///     .fails(ErrorClass::Transient, 0.05)
///     .output(|params, _rng| serde_json::json!({"found": params["key"]}));
/// # let _ = lookup;
/// ```
#[derive(Clone)]
pub struct ActionModel {
    pub(crate) latency: Latency,
    /// A params field whose value (milliseconds) is the latency, instead of a draw from `latency`.
    pub(crate) waits_for: Option<String>,
    pub(crate) failures: Vec<(ErrorClass, f64)>,
    pub(crate) output: OutputFn,
}

impl std::fmt::Debug for ActionModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ActionModel").field("latency", &self.latency).field("failures", &self.failures).finish()
    }
}

impl ActionModel {
    /// A model that takes `latency`, never fails, and returns `null`.
    pub fn new(latency: Latency) -> Self {
        Self { latency, waits_for: None, failures: Vec::new(), output: Arc::new(|_, _| Value::Null) }
    }

    /// A model that waits as long as its params' `field` says, in milliseconds, and returns that number: the
    /// model of a wait such as the standard `system.wait` (`ActionModel::waits_for("ms")`), which then
    /// advances virtual time only.
    pub fn waits_for(field: &str) -> Self {
        let key = field.to_owned();
        Self {
            latency: Latency::ZERO,
            waits_for: Some(field.to_owned()),
            failures: Vec::new(),
            output: Arc::new(move |params, _| params.get(&key).cloned().unwrap_or(Value::Null)),
        }
    }

    /// How long one run takes: what its params say for a wait, else a draw.
    pub(crate) fn took(&self, params: &Value, rng: &mut SimRng) -> std::time::Duration {
        match &self.waits_for {
            Some(field) => std::time::Duration::from_millis(params.get(field).and_then(Value::as_u64).unwrap_or(0)),
            None => self.latency.sample(rng),
        }
    }

    /// Also fails with `class` in this share of its runs (on top of the failures already given).
    pub fn fails(mut self, class: ErrorClass, probability: f64) -> Self {
        self.failures.push((class, probability));
        self
    }

    /// Returns what `output` makes of the params.
    pub fn output(mut self, output: impl Fn(&Value, &mut SimRng) -> Value + Send + Sync + 'static) -> Self {
        self.output = Arc::new(output);
        self
    }

    pub(crate) fn check(&self, action: &str) -> Result<(), SimError> {
        self.latency.check(&format!("the latency of `{action}`"))?;
        let mut total = 0.0;
        for (class, probability) in &self.failures {
            check(&format!("the {class:?} failure rate of `{action}`"), *probability, true)?;
            total += probability;
        }
        check(&format!("the failure rates of `{action}` together"), total, true)
    }

    /// Draws a failure class, or none.
    pub(crate) fn failure(&self, rng: &mut SimRng) -> Option<ErrorClass> {
        if self.failures.is_empty() {
            return None;
        }
        let mut draw = rng.random::<f64>();
        for (class, probability) in &self.failures {
            if draw < *probability {
                return Some(*class);
            }
            draw -= probability;
        }
        None
    }
}
