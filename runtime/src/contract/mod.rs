//! An action's contract and what its runs come to, as plain data: the spec (risk, cost, capabilities, timeout,
//! retries), errors and their classes, outcomes and the report an agent gets, and jobs' records. The bottom of
//! the house: signals, policies and effects speak of these, and [`crate::action`] (where users find them)
//! re-exports them.

mod error;
mod job;
mod outcome;
pub(crate) mod report_box;
mod retry;
mod spec;

pub use error::{ActionError, ErrorClass};
pub use job::{JobRecord, JobStatus};
pub use outcome::{Outcome, OutcomeError, OutcomeStatus, RunReport};
pub(crate) use retry::may_retry_after;
pub use retry::{RetryPolicy, should_retry};
pub use spec::{ActionSpec, Capability, Category, Cost, DEFAULT_TIMEOUT, Risk, params_schema_for, schema_for};
pub(crate) use spec::{as_params_schema, is_unit_schema};
