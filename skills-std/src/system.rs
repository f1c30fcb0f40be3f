//! `system`: waiting, logging, stopping the agent and scheduling a signal to it.

use agentry::action::LogLevel;
use agentry::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;

/// The longest `system.wait` or `system.schedule` delay: one day.
pub const MAX_DELAY_MS: u64 = 24 * 60 * 60 * 1000;

fn delay(ms: u64, what: &str) -> Result<Duration, ActionError> {
    if ms > MAX_DELAY_MS {
        return Err(ActionError::validation(format!(
            "`{what}` is {ms} ms; expected at most {MAX_DELAY_MS} ms (one day)"
        )));
    }
    Ok(Duration::from_millis(ms))
}

/// Waits for a while without holding a thread, then completes with how long it waited.
#[derive(Debug, Deserialize, Serialize, JsonSchema, Action)]
#[action(id = "system.wait", output = u64, idempotent, cost = cheap, timeout = "25h", retry = 1)]
pub struct Wait {
    /// How long to wait, in milliseconds (at most one day).
    pub ms: u64,
}

impl Wait {
    /// Sleeps on the runtime's timer.
    pub async fn run(self, _ctx: ActionContext) -> Result<u64, ActionError> {
        tokio::time::sleep(delay(self.ms, "ms")?).await;
        Ok(self.ms)
    }
}

/// How loud a log line is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// Very detailed tracing.
    Trace,
    /// Debugging detail.
    Debug,
    /// Normal operation.
    #[default]
    Info,
    /// Something looks wrong.
    Warn,
    /// Something failed.
    Error,
}

/// Writes a line to the runtime's `tracing` log, tagged with the agent and run.
#[derive(Debug, Deserialize, Serialize, JsonSchema, Action)]
#[action(id = "system.log", output = (), idempotent, cost = cheap)]
pub struct Log {
    /// The line to write.
    pub message: String,
    /// How loud it is (default `info`).
    #[serde(default)]
    pub level: Level,
    /// Structured details, logged as JSON.
    #[serde(default)]
    pub fields: Option<Value>,
}

impl Log {
    /// Logs the line through the run's context: to the `tracing` log (target `agentry::agent`, tagged with the
    /// agent, run and action, with `fields` as JSON), and to the run's caller when one listens (an MCP client at
    /// or below this level). `trace` lines go to `tracing` only.
    pub async fn run(self, ctx: ActionContext) -> Result<(), ActionError> {
        let level = match self.level {
            Level::Trace => {
                let fields = self.fields.map(|f| f.to_string()).unwrap_or_default();
                let (agent, run, message) = (ctx.agent_id.as_str(), ctx.run_id, self.message.as_str());
                tracing::trace!(target: "agentry::agent", agent, %run, fields, "{message}");
                return Ok(());
            }
            Level::Debug => LogLevel::Debug,
            Level::Info => LogLevel::Info,
            Level::Warn => LogLevel::Warning,
            Level::Error => LogLevel::Error,
        };
        ctx.log_with(level, self.message, self.fields);
        Ok(())
    }
}

/// Ends the agent: once this run completes, its server interprets a `Stop` effect.
#[derive(Debug, Deserialize, Serialize, JsonSchema, Action)]
#[action(id = "system.stop", output = (), side_effects, risk = medium)]
pub struct Stop {
    /// Why the agent stops (shown on the event stream).
    pub reason: String,
}

impl Stop {
    /// Asks for the `Stop` effect.
    pub async fn run(self, ctx: ActionContext) -> Result<(), ActionError> {
        ctx.effect(Effect::stop(self.reason))
    }
}

/// Sends the agent a signal of its own after a delay; scheduling the same key again replaces the earlier one.
#[derive(Debug, Deserialize, Serialize, JsonSchema, Action)]
#[action(id = "system.schedule", output = ScheduledSignal, side_effects, idempotent, cost = cheap)]
pub struct Schedule {
    /// The signal's kind, e.g. `reminder.due`.
    pub kind: String,
    /// The signal's data.
    #[serde(default)]
    pub data: Value,
    /// How long from now, in milliseconds (at most one day).
    pub after_ms: u64,
    /// A name for the schedule, to replace it or cancel it with `system.cancel` (default: the kind).
    #[serde(default)]
    pub key: Option<String>,
}

/// What `system.schedule` set up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ScheduledSignal {
    /// The schedule's key.
    pub key: String,
    /// The id the signal will carry.
    pub signal_id: uuid::Uuid,
}

impl Schedule {
    /// Asks for the `Schedule` effect.
    pub async fn run(self, ctx: ActionContext) -> Result<ScheduledSignal, ActionError> {
        let after = delay(self.after_ms, "after_ms")?;
        let signal = Signal::builder(self.kind.as_str())
            .source(agentry::kinds::agent_source(&ctx.agent_id))
            .data(self.data)
            .caused_by(ctx.correlation_id, ctx.run_id, ctx.now())
            .stamped(ctx.new_id(), ctx.now())
            .build()
            .map_err(|e| ActionError::validation(format!("`kind` is not a signal kind: {e}")))?;
        let key = self.key.unwrap_or(self.kind);
        let signal_id = signal.id();
        ctx.effect(Effect::schedule(key.clone(), after, signal))?;
        Ok(ScheduledSignal { key, signal_id })
    }
}

/// Cancels a schedule by its key, if it has not fired yet.
#[derive(Debug, Deserialize, Serialize, JsonSchema, Action)]
#[action(id = "system.cancel", output = (), side_effects, idempotent, cost = cheap)]
pub struct CancelSchedule {
    /// The schedule's key.
    pub key: String,
}

impl CancelSchedule {
    /// Asks for the `Cancel` effect.
    pub async fn run(self, ctx: ActionContext) -> Result<(), ActionError> {
        ctx.effect(Effect::cancel(self.key))
    }
}

/// The agent's own plumbing: wait, log, stop, schedule, cancel.
#[derive(Skill)]
#[skill(
    id = "system",
    name = "System",
    version = "1.0.0",
    category = "system",
    tags("time", "logging", "lifecycle"),
    actions(Wait, Log, Stop, Schedule, CancelSchedule),
    instructions = "Use system.wait to pause, system.log to leave a note in the log, system.schedule to remind \
                    yourself later with a signal, and system.stop only when your work is done."
)]
pub struct System;
