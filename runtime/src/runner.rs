//! The action runner: drives one run's life ([`RunLife`], which decides params validation, attempts, retries
//! with backoff and jitter, and the outcome) on tokio time — each attempt polled under the action's timeout,
//! panics caught, backoffs slept, write-ahead awaited — and journals and announces every step. The gate
//! (registration, policy, capabilities, approval) comes before it, in the agent's server.

use crate::action::{ActionContext, ActionError, ActionFuture, DynAction, Outcome, RunReport};
use crate::events::{Event, EventBus, EventKind};
use crate::id::{ActionId, AgentId};
use crate::run_life::{End, Next, Params, RunLife};
use crate::store::PEN;
use crate::store::{RunUpdate, Store, Unwritten};
use chrono::{DateTime, TimeDelta, Utc};
use serde_json::Value;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;
use tokio::time::Instant;
use tracing::Instrument;
use uuid::Uuid;

/// Runs actions and reports on them. Cheap to clone.
#[derive(Clone)]
pub struct Runner {
    events: EventBus,
    store: Arc<dyn Store>,
    /// Whether params that do not match the schema are first coerced where that is safe.
    coerce: bool,
}

impl Runner {
    /// A runner that publishes to `events` and journals to `store`.
    pub fn new(events: EventBus, store: Arc<dyn Store>) -> Self {
        Self { events, store, coerce: true }
    }

    /// The same runner, coercing params (the default) or not.
    pub fn coercing(mut self, coerce: bool) -> Self {
        self.coerce = coerce;
        self
    }

    /// Journals a change to a run (to its record if that is not written yet) and announces it, both stamped
    /// with one reading of the clock.
    /// `at`: the time to stamp, when it is known without reading the clock.
    fn report(
        &self,
        run: &mut RunInHand,
        update: RunUpdate,
        kind: impl FnOnce(&ActionContext) -> EventKind,
        at: Option<DateTime<Utc>>,
    ) -> DateTime<Utc> {
        let now = at.unwrap_or_else(crate::wall_clock::now);
        let ctx = &run.ctx;
        match run.unwritten.as_mut() {
            Some(unwritten) => unwritten.draft.apply(update, now),
            None => {
                if let Err(err) = self.store.update(PEN, ctx.run_id, update, now) {
                    tracing::warn!(run = %ctx.run_id, %err, "the journal refused an update");
                }
            }
        }
        // An event about a run is published only once the run is in the journal, so whoever hears of it can
        // look it up.
        if self.events.is_listened() {
            self.write(run);
            let ctx = &run.ctx;
            let (agent, run, correlation) = (ctx.agent_id.clone(), Some(ctx.run_id), Some(ctx.correlation_id));
            self.events.publish(Event { at: now, agent, run, correlation, kind: kind(ctx) });
        }
        now
    }

    /// [`Runner::execute_detailed`] without the error (the runner's own tests).
    #[cfg(test)]
    pub fn execute<'a>(
        &'a self,
        action: &'a DynAction,
        params: Value,
        ctx: ActionContext,
    ) -> impl Future<Output = Outcome> + Send + 'a {
        futures_util::FutureExt::map(self.execute_detailed(action, params, ctx), |(outcome, _)| outcome)
    }

    /// Runs `action` with `params` to its end and returns the outcome, and the error the run ended with, for a
    /// caller that passes it on. The run must already be journaled (queued); `ctx.attempt` is set here for each
    /// attempt. Nothing runs before the returned future is first polled, and dropping it cancels the run,
    /// including an attempt in flight, and journals it as cancelled.
    pub(crate) fn execute_detailed<'a>(
        &'a self,
        action: &'a DynAction,
        params: Value,
        ctx: ActionContext,
    ) -> impl Future<Output = (Outcome, Option<ActionError>)> + Send + 'a {
        let run = Box::new(RunInHand::new(ctx, params));
        async move {
            let Ending { report, error, unwritten, .. } = match self.start(action.clone(), run) {
                Start::Ended(ending) => ending,
                Start::Waiting(rest) => rest.await,
            };
            if let Some(unwritten) = unwritten {
                unwritten.write_ended(&*self.store);
            }
            (report.outcome, error)
        }
    }

    /// Starts a run whose record is not journaled yet, and drives it in place as far as it goes without waiting:
    /// a run whose action ends at its first poll (a pure computation, a cache hit) ends here, with no future
    /// made for it and no task; a run that waits on anything is handed back as the rest of its execution, to be
    /// polled by a task of its own at once (its action's future registers that task's waker then).
    ///
    /// The record is written once the run waits on anything, or once it ends (so a run that ends at once is one
    /// write). With a durable store, a record still unwritten at the end is handed back with the outcome
    /// instead, for the caller to write beside the outcome, so the two reach the journal's writer together.
    /// A panic of the action is its run's `Critical` error; a panic here otherwise unwinds to the caller, and the
    /// run is journaled as cancelled on the way.
    pub(crate) fn start(&self, action: DynAction, mut run: Box<RunInHand>) -> Start {
        let ctx = &run.ctx;
        // A run is what the GenAI conventions call a tool's execution: their names beside agentry's own.
        let span = tracing::info_span!(
            "action",
            action = %action.spec().id,
            run = %ctx.run_id,
            agent = %ctx.agent_id,
            depth = ctx.depth(),
            "gen_ai.operation.name" = "execute_tool",
            "gen_ai.tool.name" = %action.spec().id,
        );
        let first = {
            let _entered = span.enter();
            let mut guard = CancelOnDrop { runner: self, run: &mut run, armed: true };
            let first = self.first_poll(&action, guard.run);
            guard.disarm();
            first
        };
        match first {
            FirstPoll::Ended(ending) => Start::Ended(with_record(ending, &mut run)),
            FirstPoll::Goes(at, progress) => {
                // Armed before the future is made, so the rest dropped even before its first poll (its caller
                // gave up at once) journals the run as cancelled too.
                let mut rest = Rest { runner: self.clone(), run, armed: true };
                // Boxed as it is made, so its state is written where it stays rather than made and then moved.
                Start::Waiting(Box::pin(async move {
                    let ending = rest.runner.attempts(&action, &mut rest.run, at, progress).instrument(span).await;
                    rest.armed = false;
                    with_record(ending, &mut rest.run)
                }))
            }
        }
    }

    /// Journals a run's record if it is not written yet.
    fn write(&self, run: &mut RunInHand) {
        run.write_record(&*self.store);
    }

    /// Journals and announces a run that ends without finishing; nothing happens if it had already ended.
    pub(crate) fn cancelled(&self, ctx: &ActionContext, why: &str) {
        self.cancelled_run(&ctx.agent_id, ctx.run_id, &ctx.action_id, ctx.correlation_id, why);
    }

    /// [`Runner::cancelled`] for a run known by its ids rather than its context.
    pub(crate) fn cancelled_run(&self, agent: &AgentId, run: Uuid, action: &ActionId, correlation: Uuid, why: &str) {
        let (update, kind) = RunLife::cancelled(action, why);
        if self.store.update(PEN, run, update, Utc::now()).is_ok() {
            self.events.announce(agent, Some(run), Some(correlation), kind);
        }
    }

    /// A run's start, in place: its params checked, and its first attempt begun and polled once, unless it must
    /// wait for its write-ahead first.
    fn first_poll(&self, action: &DynAction, run: &mut RunInHand) -> FirstPoll {
        let spec = action.spec();
        let started = Instant::now();
        let (life, next, checked) = RunLife::admit(action, &mut run.params, self.coerce, Duration::ZERO);
        let mut progress = Progress { life, started, first_start: None };
        if checked == Params::Coerced {
            // The text is of the params as they were given: their digest, made now, is of them, and a retry
            // reads the params as they are now.
            run.params_text = None;
            if let Some(unwritten) = run.unwritten.as_mut() {
                unwritten.forget_text();
            }
        }
        if let Next::End(refused) = next {
            return FirstPoll::Ended(self.finish(run, refused, None));
        }
        if self.begin_attempt(spec, run, &mut progress) {
            return FirstPoll::Goes(Resume::Durable, progress);
        }
        let polled = match self.invoke(action, run, progress.life.attempt()) {
            Ok(mut future) => {
                match poll_once(&mut future, &mut std::task::Context::from_waker(std::task::Waker::noop())) {
                    Poll::Pending => {
                        // From now on the run goes on where others can see it.
                        self.write(run);
                        return FirstPoll::Goes(Resume::Polling(future), progress);
                    }
                    Poll::Ready(result) => result,
                }
            }
            Err(err) => Err(err),
        };
        match self.after_attempt(action, run, Attempted::Ready(polled), &mut progress) {
            After::End(ending) => FirstPoll::Ended(ending),
            After::Retry(backoff) => FirstPoll::Goes(Resume::Retry(backoff), progress),
        }
    }

    /// Drives a run from where its start left it to its end: the rest of the attempt in flight, then the
    /// retries its action's design allows, each after its backoff.
    async fn attempts(
        &self,
        action: &DynAction,
        run: &mut RunInHand,
        mut at: Resume,
        mut progress: Progress,
    ) -> Ending {
        let spec = action.spec();
        loop {
            let result = match at {
                Resume::Polling(future) => self.poll_attempt(run, future, spec.timeout).await,
                Resume::Retry(backoff) => {
                    // Boxed: a retry is rare, and every run's future would otherwise keep room for its timer.
                    Box::pin(tokio::time::sleep(backoff)).await;
                    if let Some(read) = run.params_text().map(serde_json::from_slice::<Value>) {
                        match read {
                            Ok(params) => run.params = params,
                            Err(err) => {
                                let err =
                                    ActionError::critical(format!("the run's params could not be read again: {err}"));
                                let end = progress.life.fail(err, progress.started.elapsed());
                                return self.finish(run, end, progress.first_start);
                            }
                        }
                    }
                    at = Resume::Begin;
                    continue;
                }
                Resume::Begin => {
                    if self.begin_attempt(spec, run, &mut progress) {
                        at = Resume::Durable;
                        continue;
                    }
                    self.attempt(action, run, progress.life.attempt()).await
                }
                Resume::Durable => {
                    // Write-ahead: an action with side effects starts only once its start is durable, so a crash
                    // can never leave a side effect the journal does not know was attempted. Idempotent ones wait
                    // too: the input that asked for the run is then durable as well, so its idempotency key (made
                    // of that input's number) is never given to another run after a crash. (In a cluster, an agent
                    // whose lease this node lost has its writes refused: its run is not started either.)
                    if let Some(durable) = self.store.durable()
                        && durable.flushed_for(&run.ctx.agent_id).await.is_err()
                    {
                        let err = ActionError::critical(
                            "the journal could not make the run's start durable; it was not started",
                        );
                        let end = progress.life.fail(err, progress.started.elapsed());
                        return self.finish(run, end, progress.first_start);
                    }
                    self.attempt(action, run, progress.life.attempt()).await
                }
            };
            match self.after_attempt(action, run, result, &mut progress) {
                After::End(ending) => return ending,
                After::Retry(backoff) => at = Resume::Retry(backoff),
            }
        }
    }

    /// Attempt `attempt`, begun: the action invoked and its future polled to its end.
    async fn attempt(&self, action: &DynAction, run: &mut RunInHand, attempt: u32) -> Attempted {
        match self.invoke(action, run, attempt) {
            Ok(future) => self.poll_attempt(run, future, action.spec().timeout).await,
            Err(err) => Attempted::Ready(Err(err)),
        }
    }

    /// Begins attempt `attempt`: what a failed one asked for is forgotten, and the attempt is journaled and
    /// announced as running. Returns whether it must wait for its start to be durable before the action runs
    /// (write-ahead, see [`Runner::attempts`]): its record then goes to the journal's writer here, before the
    /// server goes on (ahead of anything it journals next, such as a snapshot that folds in the input that asked
    /// for the run).
    fn begin_attempt(&self, spec: &crate::action::ActionSpec, run: &mut RunInHand, progress: &mut Progress) -> bool {
        let begin = progress.life.begin(spec, &mut run.ctx);
        let running = self.report(run, begin.update.clone(), |_| begin.event(&spec.id), None);
        // When the first attempt started, as journaled: the run's end is stamped that much later than it as the
        // run's latency, rather than read from the clock again.
        progress.first_start.get_or_insert(running);
        let writes_ahead = begin.write_ahead && self.store.durable().is_some();
        if writes_ahead {
            self.write(run);
        }
        writes_ahead
    }

    /// Invokes the action for attempt `attempt`; a panic while it builds its future (before its first await) is
    /// the attempt's `Critical` error. The context is copied only for an attempt another may follow, and the
    /// params then too unless their text is at hand (the next attempt reads them again from it); the last
    /// attempt takes the params.
    fn invoke(&self, action: &DynAction, run: &mut RunInHand, attempt: u32) -> Result<ActionFuture, ActionError> {
        let params = match crate::action::may_retry_after(action.spec(), attempt) && run.params_text().is_none() {
            true => run.params.clone(),
            false => std::mem::take(&mut run.params),
        };
        let ctx = run.ctx.clone();
        catch_unwind(AssertUnwindSafe(|| action.invoke(params, ctx))).map_err(|payload| panicked(payload.as_ref()))
    }

    /// Polls an attempt's future to its end under the action's timeout; a panic becomes a `Critical` error. The
    /// future is dropped (the action really stops) when it times out or the run is cancelled. The record is
    /// written as soon as the attempt waits on anything.
    ///
    /// An action that ends at its first poll needs no timer (it could not have been stopped anyway: a timeout
    /// only acts between polls), so the timer is made, in a box of its own, only once the action waits; the
    /// timeout counts from then.
    async fn poll_attempt(
        &self,
        run: &mut RunInHand,
        mut future: ActionFuture,
        timeout: std::time::Duration,
    ) -> Attempted {
        let mut timer: Option<std::pin::Pin<Box<tokio::time::Sleep>>> = None;
        std::future::poll_fn(|cx| {
            if let Poll::Ready(result) = poll_once(&mut future, cx) {
                return Poll::Ready(Attempted::Ready(result));
            }
            self.write(run);
            let timer = timer.get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
            match timer.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Attempted::TimedOut),
                Poll::Pending => Poll::Pending,
            }
        })
        .await
    }

    /// What follows an attempt's result, as the run's life says: its end (it completed, failed for good, or may
    /// not be tried again), or another attempt after a backoff, announced here.
    fn after_attempt(
        &self,
        action: &DynAction,
        run: &mut RunInHand,
        attempted: Attempted,
        progress: &mut Progress,
    ) -> After {
        let now = progress.started.elapsed();
        let next = match attempted {
            Attempted::Ready(result) => progress.life.on_ready(action, &run.ctx, result, now),
            Attempted::TimedOut => progress.life.on_timed_out(action, &run.ctx, now),
        };
        match next {
            Next::End(end) => After::End(self.finish(run, end, progress.first_start)),
            Next::Retry { backoff, .. } => {
                tracing::debug!(attempt = progress.life.attempt(), ?backoff, "retrying");
                self.write(run);
                if let Some(retried) = next.event(&action.spec().id) {
                    let ctx = &run.ctx;
                    self.events.announce(&ctx.agent_id, Some(ctx.run_id), Some(ctx.correlation_id), retried);
                }
                After::Retry(backoff)
            }
            // (The machine follows an attempt with an end or a retry; an attempt asked for at once is a retry
            // with no wait.)
            Next::Attempt(_) => After::Retry(Duration::ZERO),
        }
    }

    /// Journals and announces how a run ended. A record not written yet is written now, unless the store is
    /// durable: then it is handed back with the outcome (see [`Runner::start`]). In memory nothing is gained by
    /// waiting, and the record is written while it is at hand (the in-memory journal takes it as drafted).
    /// `first_start`: when the first attempt started, if one did; the end is stamped as that plus the latency.
    fn finish(&self, run: &mut RunInHand, end: End, first_start: Option<DateTime<Utc>>) -> Ending {
        let update = end.update();
        let kind = |ctx: &ActionContext| end.event(&ctx.action_id);
        let latency = end.outcome.latency;
        let stamp = first_start.and_then(|start| start.checked_add_signed(TimeDelta::from_std(latency).ok()?));
        let at = self.report(run, update, kind, stamp);
        if self.store.durable().is_none()
            && let Some(unwritten) = run.unwritten.take()
        {
            unwritten.write_ended(&*self.store);
        }
        let End { outcome, error, .. } = end;
        let report = RunReport { run_id: run.ctx.run_id, action: run.ctx.action_id.clone(), outcome };
        let report = crate::action::report_box::boxed(report);
        Ending { report, error, unwritten: None, at }
    }
}

/// How a run ended: its outcome (in the box its outcome signal keeps it in), the error it ended with (for a
/// caller that passes it on), its record if that is not journaled yet (see [`Runner::start`]), and
/// when it ended, as its record says (the time its outcome signal is stamped with).
pub(crate) struct Ending {
    pub report: Box<RunReport>,
    pub error: Option<ActionError>,
    pub unwritten: Option<Box<Unwritten>>,
    pub at: DateTime<Utc>,
}

/// A run on its way and being executed: its context, its params (kept for a retry), and its record while that
/// is not journaled yet.
pub(crate) struct RunInHand {
    pub ctx: ActionContext,
    pub params: Value,
    /// The params' compact JSON text, if it was made (for their digest) and the run's record is written; while
    /// it is not, the record's draft keeps the text (see [`RunInHand::params_text()`]).
    pub params_text: Option<Vec<u8>>,
    pub unwritten: Option<Unwritten>,
}

impl RunInHand {
    /// A run with its context and params, whose record is already journaled.
    pub(crate) fn new(ctx: ActionContext, params: Value) -> Self {
        Self { ctx, params, params_text: None, unwritten: None }
    }

    /// The params' compact JSON text, if it was made, wherever it is kept. An attempt another may follow takes
    /// the params when there is a text, and the next one reads them again from it, instead of every first
    /// attempt copying them in case it fails. (JSON text reads back exactly the value it was made of.)
    pub(crate) fn params_text(&self) -> Option<&[u8]> {
        let drafted = || self.unwritten.as_ref().and_then(|unwritten| unwritten.draft.params_text());
        self.params_text.as_deref().or_else(drafted)
    }

    /// Journals the run's record if it is not written yet; the params' text its draft kept stays with the run.
    pub(crate) fn write_record(&mut self, store: &dyn Store) {
        if let Some(unwritten) = self.unwritten.take() {
            let text = unwritten.write(store);
            if self.params_text.is_none() {
                self.params_text = text;
            }
        }
    }
}

/// A run as [`Runner::start`] leaves it.
pub(crate) enum Start {
    /// It ended without waiting on anything.
    Ended(Ending),
    /// It waits on something: the rest of its execution, to be polled by a task (dropping it cancels the run).
    Waiting(std::pin::Pin<Box<dyn Future<Output = Ending> + Send + 'static>>),
}

/// How far a run's start went.
enum FirstPoll {
    Ended(Ending),
    /// It goes on from here.
    Goes(Resume, Progress),
}

/// Where a run's execution picks up.
/// Which attempt is meant is the run's life's to say ([`RunLife::attempt`]): the one begun last.
enum Resume {
    /// The next attempt begins (its write-ahead, if any, first).
    Begin,
    /// The attempt began, and its record went to the journal's writer: it starts once that is durable.
    Durable,
    /// The attempt is in flight: its action's future, polled once already.
    Polling(ActionFuture),
    /// The next attempt begins after this backoff.
    Retry(Duration),
}

/// What a run keeps across its attempts: its life, the instant it was admitted (its clock's zero), and when its
/// first attempt started, as journaled.
struct Progress {
    life: RunLife,
    started: Instant,
    first_start: Option<DateTime<Utc>>,
}

/// How an attempt went on tokio's clock: its action's future ended, or its timeout passed first.
enum Attempted {
    Ready(Result<Value, ActionError>),
    TimedOut,
}

/// What follows an attempt (see [`Runner::after_attempt`]).
enum After {
    End(Ending),
    Retry(Duration),
}

/// A run's ending, with its record if that is still not journaled (see [`Runner::start`]).
fn with_record(mut ending: Ending, run: &mut RunInHand) -> Ending {
    ending.unwritten = run.unwritten.take().map(|unwritten| Box::new(unwritten.ended()));
    ending
}

/// Holds a run while it is driven, and journals it as cancelled if it is let go of before it ends: its
/// execution dropped, or a panic unwinding through its start.
struct CancelOnDrop<'a> {
    runner: &'a Runner,
    run: &'a mut RunInHand,
    armed: bool,
}

impl CancelOnDrop<'_> {
    /// The run ended, or went on elsewhere: nothing to journal on drop.
    fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        if self.armed {
            cancel(self.runner, self.run);
        }
    }
}

/// The rest of a run's execution ([`Start::Waiting`]), holding the run: it journals it as cancelled if it is
/// dropped before the run ends, as [`CancelOnDrop`] does while the run starts.
struct Rest {
    runner: Runner,
    run: Box<RunInHand>,
    armed: bool,
}

impl Drop for Rest {
    fn drop(&mut self) {
        if self.armed {
            cancel(&self.runner, &mut self.run);
        }
    }
}

/// Journals a run let go of before it ended (its record first, if it was not written yet) as cancelled.
fn cancel(runner: &Runner, run: &mut RunInHand) {
    runner.write(run);
    runner.cancelled(&run.ctx, "the run was cancelled before it ended");
}

/// Polls an action's future once; a panic is the attempt's `Critical` error.
fn poll_once(future: &mut ActionFuture, cx: &mut std::task::Context<'_>) -> Poll<Result<Value, ActionError>> {
    match catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx))) {
        Ok(polled) => polled,
        Err(payload) => Poll::Ready(Err(panicked(payload.as_ref()))),
    }
}

/// The `Critical` error for an action that panicked, with the panic's message.
fn panicked(payload: &(dyn std::any::Any + Send)) -> ActionError {
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic with a non-text payload".to_owned());
    ActionError::critical(format!("the action panicked: {message}"))
}

#[cfg(test)]
mod tests {
    use super::{RunInHand, Runner, Start};
    use crate::action::{ActionContext, ActionSpec, DynAction};
    use crate::events::EventBus;
    use crate::id::{ActionId, AgentId};
    use crate::store::digest_tests::params;
    use crate::store::{DraftIds, MemoryStore, RecordDraft, RunStatus, SqliteStore, Store, Unwritten};
    use proptest::prelude::*;
    use serde_json::{Value, json};
    use std::sync::Arc;

    /// The unwritten record of a run queued just now, with `{}` for params.
    fn unwritten(ctx: &ActionContext) -> Unwritten {
        let ids = DraftIds {
            run: ctx.run_id,
            agent: ctx.agent_id.clone(),
            action: ctx.action_id.clone(),
            correlation: ctx.run_id,
            parent_run: None,
        };
        Unwritten { draft: RecordDraft::queued(ids, &json!({}), None, chrono::Utc::now()), plan: None }
    }

    /// A run that must wait for its write-ahead has its record with the journal's writer once its start
    /// returns, before anything polls the rest of it: whatever the server journals next (a snapshot folding in
    /// the input that asked for the run) is written after it.
    #[test]
    fn a_write_ahead_run_is_journaled_before_its_start_returns() {
        let folder = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(folder.path().join("journal.db")).unwrap());
        let runner = Runner::new(EventBus::new(), store.clone());
        let spec = ActionSpec::new("ledger.write", "writes").unwrap().side_effects(true);
        let action = DynAction::new(spec, |_, _| Box::pin(async { Ok(Value::Null) })).unwrap();
        let ctx = ActionContext::new(AgentId::new("a").unwrap(), ActionId::new("ledger.write").unwrap());
        let run_id = ctx.run_id;
        let mut run = RunInHand::new(ctx, json!({}));
        run.unwritten = Some(unwritten(&run.ctx));
        let Start::Waiting(rest) = runner.start(action, Box::new(run)) else {
            panic!("a run with side effects waits for its start to be durable")
        };
        let journaled = store.get(run_id).map(|r| r.status());
        assert_eq!(journaled, Some(RunStatus::Running), "journaled before the rest of the run was polled");
        drop(rest);
    }

    /// The rest of a run that waits, dropped before anything polled it (its caller gave up at once), journals
    /// the run as cancelled: it never stays going in the journal.
    #[test]
    fn a_run_dropped_before_its_rest_was_polled_is_journaled_cancelled() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let runner = Runner::new(EventBus::new(), store.clone());
        let spec = ActionSpec::new("wait.ever", "waits").unwrap();
        let action = DynAction::new(spec, |_, _| Box::pin(std::future::pending())).unwrap();
        let ctx = ActionContext::new(AgentId::new("a").unwrap(), ActionId::new("wait.ever").unwrap());
        let run_id = ctx.run_id;
        let mut run = RunInHand::new(ctx, json!({}));
        run.unwritten = Some(unwritten(&run.ctx));
        let Start::Waiting(rest) = runner.start(action, Box::new(run)) else { panic!("a run that waits") };
        assert_eq!(store.get(run_id).map(|r| r.status()), Some(RunStatus::Running));
        drop(rest);
        let ended = store.get(run_id).expect("journaled");
        assert_eq!((ended.status(), ended.error), (RunStatus::Failed, Some(crate::action::ErrorClass::Cancelled)));
    }

    /// Every float in a value, as bits (so `-0.0` and `0.0` differ).
    fn float_bits(value: &Value, into: &mut Vec<u64>) {
        match value {
            Value::Number(n) if n.is_f64() => into.extend(n.as_f64().map(f64::to_bits)),
            Value::Array(items) => items.iter().for_each(|item| float_bits(item, into)),
            Value::Object(fields) => fields.values().for_each(|field| float_bits(field, into)),
            _ => {}
        }
    }

    proptest! {
        /// What a retry relies on (`RunInHand::params_text`): params read back from their text are the params,
        /// every float bit for bit and every object's keys in their order.
        #[test]
        fn params_read_back_from_their_text_are_the_same(params in params()) {
            let text = serde_json::to_vec(&params).unwrap();
            let read: Value = serde_json::from_slice(&text).unwrap();
            prop_assert_eq!(&read, &params);
            prop_assert_eq!(read.to_string(), params.to_string());
            let (mut got, mut want) = (Vec::new(), Vec::new());
            float_bits(&read, &mut got);
            float_bits(&params, &mut want);
            prop_assert_eq!(got, want);
        }
    }
}

/// The runner with real tokio tasks on a paused clock.
#[cfg(test)]
mod with_tasks;
