//! A served call's way back to its MCP client: what the run sends its [`Caller`] (log lines, progress, sampling
//! and elicitation requests, approval asks) becomes MCP notifications and requests to the client that called.

// rmcp marks logging and sampling deprecated because protocol 2026-07-28 drops them (SEP-2577); the revisions
// agentry negotiates (2025-06-18, 2025-11-25) have them, and the conformance suite checks them.
#![allow(deprecated)]

use super::server::ToolHost;
use agentry::action::{ApprovalAsk, Caller, CallerCan, CallerRequest, Elicited, LogLevel, Role, Sampled, Sampling};
use rmcp::model::{
    CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult, ElicitationAction,
    LoggingLevel, LoggingMessageNotificationParam, ProgressNotificationParam, ProgressToken,
};
use rmcp::service::ElicitationMode;
use rmcp::{Peer, RoleServer};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// The level a session logs at: lines below it are not sent. A client that never sets one gets `info` and up.
pub(crate) type SessionLevel = Arc<Mutex<LogLevel>>;

/// What the client said it can answer in its handshake.
pub(crate) fn can(peer: &Peer<RoleServer>) -> CallerCan {
    let sample = peer.peer_info().is_some_and(|info| info.capabilities.sampling.is_some());
    let elicit = peer.supported_elicitation_modes().contains(&ElicitationMode::Form);
    CallerCan { sample, elicit }
}

/// One served call's link to its client.
pub(crate) struct ToClient {
    pub peer: Peer<RoleServer>,
    pub progress: Option<ProgressToken>,
    pub level: SessionLevel,
    pub host: Arc<dyn ToolHost>,
    /// Cancelled when the call ends or the client cancels it: an approval still being asked is then denied.
    pub done: CancellationToken,
    /// The runs of this call that wait for the operator's approval: denied if the client cancels the call.
    pub awaiting_operator: Mutex<Vec<(agentry::id::AgentId, uuid::Uuid)>>,
}

impl ToClient {
    /// Passes one request on. Notifications are sent before the next request is read, so they keep their order
    /// (and reach the client before the call's result); questions to the client are asked in tasks of their
    /// own, so a slow user never holds up the run's log lines.
    pub(crate) async fn forward(&self, request: CallerRequest) {
        match request {
            CallerRequest::Log { level, logger, message, fields } => {
                let at_least = *self.level.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                if level >= at_least {
                    let data = match fields {
                        Some(fields) => json!({"message": message, "fields": fields}),
                        None => json!(message),
                    };
                    let mut line = LoggingMessageNotificationParam::new(logging_level(level), data);
                    line.logger = Some(logger);
                    let sent = self.peer.notify_logging_message(line).await;
                    if let Err(err) = sent {
                        tracing::debug!(%err, "a client missed a log line");
                    }
                }
            }
            CallerRequest::Progress { progress, total, message } => {
                let Some(token) = self.progress.clone() else { return };
                let mut note = ProgressNotificationParam::new(token, progress);
                note.total = total;
                note.message = message;
                if let Err(err) = self.peer.notify_progress(note).await {
                    tracing::debug!(%err, "a client missed a progress notification");
                }
            }
            CallerRequest::Sample { request, reply } => {
                let peer = self.peer.clone();
                tokio::spawn(async move {
                    let _ = reply.send(sample(&peer, request).await);
                });
            }
            CallerRequest::Elicit { message, schema, reply } => {
                let peer = self.peer.clone();
                tokio::spawn(async move {
                    let _ = reply.send(elicit(&peer, message, schema).await);
                });
            }
            CallerRequest::Approve(ask) => {
                let (peer, host, done) = (self.peer.clone(), self.host.clone(), self.done.clone());
                tokio::spawn(async move {
                    let run = ask.run;
                    let approved = tokio::select! {
                        answer = elicit(&peer, approval_message(&ask), json!({"type": "object", "properties": {}})) => {
                            matches!(answer, Ok(Elicited::Accept(_)))
                        }
                        () = done.cancelled() => false,
                    };
                    host.decide(ask.agent, run, approved, Some(ask.digest)).await;
                });
            }
            CallerRequest::AwaitingOperator(ask) => {
                let message = format!(
                    "`{}` (risk {:?}) waits for the approval of agent `{}`'s operator (run {}); this call goes on \
                     once it is decided",
                    ask.spec.id, ask.risk, ask.agent, ask.run
                );
                lock(&self.awaiting_operator).push((ask.agent.clone(), ask.run));
                let logger = ask.spec.id.to_string();
                let line =
                    CallerRequest::Log { level: LogLevel::Notice, logger, message: message.clone(), fields: None };
                Box::pin(self.forward(line)).await;
                let progress = CallerRequest::Progress { progress: 0.0, total: None, message: Some(message) };
                Box::pin(self.forward(progress)).await;
            }
        }
    }

    /// The call ended with its result: the runs it waited on were decided, nothing is left to deny.
    pub(crate) fn answered(&self) {
        lock(&self.awaiting_operator).clear();
    }
}

/// A call that goes away before its result (the client cancelled it, or its session closed) denies the runs it
/// still waits on for the operator: nobody is left to hear their outcome.
impl Drop for ToClient {
    fn drop(&mut self) {
        let waiting = std::mem::take(&mut *lock(&self.awaiting_operator));
        if waiting.is_empty() {
            return;
        }
        let host = self.host.clone();
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                for (agent, run) in waiting {
                    host.decide(agent, run, false, None).await;
                }
            });
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What the client's user is asked to approve: the action and its contract.
fn approval_message(ask: &ApprovalAsk) -> String {
    let spec = &ask.spec;
    let mut traits = Vec::new();
    if spec.side_effects {
        traits.push("has side effects".to_owned());
    }
    if !spec.idempotent {
        traits.push("is not idempotent".to_owned());
    }
    if !spec.capabilities.is_empty() {
        let needs: Vec<String> = spec.capabilities.iter().map(ToString::to_string).collect();
        traits.push(format!("needs {}", needs.join(", ")));
    }
    let traits = if traits.is_empty() { String::new() } else { format!(" It {}.", traits.join(", ")) };
    format!(
        "Agent `{}` asks to run `{}` (risk {:?}): {}{traits} Params: {}. Accept to approve this run; decline to deny \
         it.",
        ask.agent, spec.id, ask.risk, spec.description, ask.params
    )
}

fn logging_level(level: LogLevel) -> LoggingLevel {
    match level {
        LogLevel::Debug => LoggingLevel::Debug,
        LogLevel::Info => LoggingLevel::Info,
        LogLevel::Notice => LoggingLevel::Notice,
        LogLevel::Warning => LoggingLevel::Warning,
        LogLevel::Error => LoggingLevel::Error,
        LogLevel::Critical => LoggingLevel::Critical,
        LogLevel::Alert => LoggingLevel::Alert,
        LogLevel::Emergency => LoggingLevel::Emergency,
    }
}

/// The level a client set with `logging/setLevel`.
pub(crate) fn log_level(level: LoggingLevel) -> LogLevel {
    match level {
        LoggingLevel::Debug => LogLevel::Debug,
        LoggingLevel::Info => LogLevel::Info,
        LoggingLevel::Notice => LogLevel::Notice,
        LoggingLevel::Warning => LogLevel::Warning,
        LoggingLevel::Error => LogLevel::Error,
        LoggingLevel::Critical => LogLevel::Critical,
        LoggingLevel::Alert => LogLevel::Alert,
        LoggingLevel::Emergency => LogLevel::Emergency,
    }
}

/// `sampling/createMessage` on the client.
async fn sample(peer: &Peer<RoleServer>, request: Sampling) -> Result<Sampled, String> {
    let messages: Vec<Value> = request
        .messages
        .iter()
        .map(|(role, text)| {
            let role = match role {
                Role::User => "user",
                Role::Assistant => "assistant",
            };
            json!({"role": role, "content": {"type": "text", "text": text}})
        })
        .collect();
    let mut wire = json!({"messages": messages, "maxTokens": request.max_tokens});
    if let Some(system) = request.system {
        wire["systemPrompt"] = json!(system);
    }
    let params: CreateMessageRequestParams =
        serde_json::from_value(wire).map_err(|e| format!("the sampling request could not be encoded: {e}"))?;
    let result: CreateMessageResult = peer.create_message(params).await.map_err(|e| e.to_string())?;
    let result = serde_json::to_value(&result).map_err(|e| e.to_string())?;
    // One content block, or (newer revisions) a list of them: the text blocks' text.
    let blocks = match &result["content"] {
        Value::Array(blocks) => blocks.clone(),
        block => vec![block.clone()],
    };
    let text: Vec<&str> = blocks.iter().filter_map(|b| b["text"].as_str()).collect();
    Ok(Sampled {
        text: text.join("\n"),
        model: result["model"].as_str().unwrap_or_default().to_owned(),
        stop_reason: result["stopReason"].as_str().map(str::to_owned),
    })
}

/// `elicitation/create` (form mode) on the client.
async fn elicit(peer: &Peer<RoleServer>, message: String, schema: Value) -> Result<Elicited, String> {
    let wire = json!({"mode": "form", "message": message, "requestedSchema": schema});
    let params: ElicitRequestParams = serde_json::from_value(wire).map_err(|e| {
        format!("the form is not one MCP elicitation takes (an object of strings, numbers, booleans and enums): {e}")
    })?;
    let result: ElicitResult = peer.create_elicitation(params).await.map_err(|e| e.to_string())?;
    Ok(match result.action {
        ElicitationAction::Accept => Elicited::Accept(result.content.unwrap_or_else(|| json!({}))),
        ElicitationAction::Decline => Elicited::Decline,
        // Cancel, or an answer newer than this code knows: nothing was given.
        _ => Elicited::Cancel,
    })
}

/// A caller for one served call, and its requests.
pub(crate) fn caller(peer: &Peer<RoleServer>) -> (Caller, tokio::sync::mpsc::UnboundedReceiver<CallerRequest>) {
    Caller::new(can(peer))
}
