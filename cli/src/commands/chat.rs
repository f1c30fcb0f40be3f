//! `agentry chat AGENT`: a conversation with an LLM agent in the terminal. Each line typed is a message
//! (`llm.ask`); the model's text is shown as it streams, each tool run it asks for is shown as it goes (through
//! the agent's gate, as any run), an approval is asked right there, and the answer ends the turn. `/exit`, end
//! of input (Ctrl-D) or Ctrl-C ends the chat and shuts the runtime down cleanly: the conversation is the
//! agent's state, journaled, so the next chat goes on where this one stopped.
//!
//! When a runtime runs on the data folder already (`agentry run`), the chat talks to its agent through the
//! control socket; approvals are then asked in that runtime's terminal, or with `agentry approvals`.

use super::control::{Request, ask};
use crate::error::CliError;
use crate::manifest::Loaded;
use crate::registry::Registry;
use agentry::events::{Event, EventKind};
use agentry::id::AgentId;
use agentry::runtime::Runtime;
use agentry::signal::Signal;
use agentry_llm::agent::ASK;
use serde_json::{Value, json};
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;
use tokio::io::AsyncBufReadExt;
use tokio::sync::{broadcast, mpsc};

/// Talks with `agent` until `/exit`, end of input or Ctrl-C.
pub async fn chat(loaded: &Loaded, registry: &Registry, agent: &str, timeout: Duration) -> Result<ExitCode, CliError> {
    let id = AgentId::new(agent).map_err(|e| CliError::Usage(e.to_string()))?;
    match loaded.merged.agents.get(agent).map(|a| a.kind.get_ref().as_str()) {
        Some("llm") => {}
        Some(other) => {
            return Err(CliError::Usage(format!(
                "agent `{agent}` is of type `{other}`; `agentry chat` talks to agents of type `llm`"
            )));
        }
        None => return Err(CliError::NotFound(format!("the manifest has no agent `{agent}`"))),
    }
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt()).map_err(CliError::io("listening for Ctrl-C"))?;
    let mut lines = read_lines();
    let data = crate::start::data_dir(loaded);
    let probe = Request::Approvals;
    if ask(&data, &probe).await.is_some() {
        eprintln!("talking to `{agent}` in the runtime that runs on {}; approvals are asked there", data.display());
        return remote(&data, agent, &mut lines, &mut interrupt).await;
    }
    let hosted = super::host::host(loaded, registry).await?;
    let runtime = hosted.started.runtime.clone();
    let mut events = runtime.events();
    eprintln!("talking to `{agent}`; /exit or Ctrl-D ends");
    let code = loop {
        prompt();
        let text = tokio::select! {
            _ = interrupt.recv() => break crate::error::code::INTERRUPTED,
            line = lines.recv() => match line {
                None => break crate::error::code::OK,
                Some(line) if line.trim() == "/exit" => break crate::error::code::OK,
                Some(line) if line.trim().is_empty() => continue,
                Some(line) => line,
            },
        };
        let turn = Turn { runtime: &runtime, agent: &id, events: &mut events, lines: &mut lines };
        match turn.take(text, timeout, &mut interrupt).await {
            Some(Ok((reply, streamed))) => say(&reply, streamed),
            Some(Err(error)) => eprintln!("the agent did not answer: {error}"),
            None => break crate::error::code::INTERRUPTED,
        }
    };
    hosted.close().await;
    Ok(ExitCode::from(code))
}

/// The lines typed, as they come (a task reads standard input; the channel ends with it).
fn read_lines() -> mpsc::UnboundedReceiver<String> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

fn prompt() {
    print!("you> ");
    let _ = std::io::stdout().flush();
}

/// One turn of the conversation in a runtime this process holds.
struct Turn<'a> {
    runtime: &'a Runtime,
    agent: &'a AgentId,
    events: &'a mut broadcast::Receiver<Event>,
    lines: &'a mut mpsc::UnboundedReceiver<String>,
}

impl Turn<'_> {
    /// Asks the message and shows the turn as it goes, until the reply; `None` on Ctrl-C.
    async fn take(
        self,
        text: String,
        timeout: Duration,
        interrupt: &mut tokio::signal::unix::Signal,
    ) -> Option<Result<(Value, bool), String>> {
        let signal = match Signal::new(ASK, json!({"text": text})) {
            Ok(signal) => signal,
            Err(error) => return Some(Err(error.to_string())),
        };
        let call = self.runtime.call(self.agent, signal, timeout);
        tokio::pin!(call);
        let mut streamed = false;
        // The runs waiting for approval: the first is asked, and the next line typed answers it.
        let mut asking: std::collections::VecDeque<Question> = std::collections::VecDeque::new();
        loop {
            tokio::select! {
                reply = &mut call => {
                    if streamed {
                        println!();
                    }
                    return Some(reply.map(|reply| (reply, streamed)).map_err(|e| e.to_string()));
                }
                _ = interrupt.recv() => return None,
                event = self.events.recv() => match event {
                    Ok(event) if &event.agent == self.agent => {
                        if let Some(question) = self.show(&event, &mut streamed) {
                            if asking.is_empty() {
                                question.put();
                            }
                            asking.push_back(question);
                        }
                    }
                    Ok(_) => {}
                    Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => return Some(Err("the runtime stopped".to_owned())),
                },
                line = self.lines.recv(), if !asking.is_empty() => {
                    let line = line?;
                    let Some(question) = asking.front() else { continue };
                    match decide(self.runtime, self.agent, question, line.trim()).await {
                        Some(said) => {
                            eprintln!("{said}");
                            asking.pop_front();
                            if let Some(next) = asking.front() {
                                next.put();
                            }
                        }
                        None => eprint!("answer a (approve), d (deny) or l (always): "),
                    }
                }
            }
        }
    }

    /// Shows one event of the agent: the model's text as it streams, tool runs as they go, a question for an
    /// approval (returned, to be answered by the next line typed).
    fn show(&self, event: &Event, streamed: &mut bool) -> Option<Question> {
        let model = |action: &agentry::id::ActionId| action.as_str().starts_with("llm.");
        match &event.kind {
            EventKind::ActionOutput { action, text } if model(action) => {
                if !*streamed {
                    print!("agent: ");
                }
                print!("{}", crate::render::escape(text));
                let _ = std::io::stdout().flush();
                *streamed = true;
            }
            EventKind::ActionStarted { action, .. } if !model(action) => {
                eprintln!("  [{} …]", crate::render::escape(action.as_str()));
            }
            EventKind::ActionCompleted { action, .. } if !model(action) => {
                eprintln!("  [{} done]", crate::render::escape(action.as_str()));
            }
            EventKind::ActionFailed { action, class, message } => {
                eprintln!("  [{} failed ({class:?}): {}]", action, crate::render::escape(message));
            }
            EventKind::ActionBlocked { action, reason } => {
                eprintln!("  [{} refused: {}]", action, crate::render::escape(reason));
            }
            EventKind::ApprovalAsked { action, risk, params, .. } => {
                let text = format!("`{action}` (risk {risk:?}) with {}", crate::render::escape(&params.to_string()));
                return Some(Question { run: event.run?, action: action.clone(), text });
            }
            _ => {}
        }
        None
    }
}

/// A run waiting for approval, asked in the chat.
struct Question {
    run: uuid::Uuid,
    action: agentry::id::ActionId,
    /// What the question says of it.
    text: String,
}

impl Question {
    fn put(&self) {
        eprint!("  {}: [a]pprove / [d]eny / a[l]ways? ", self.text);
    }
}

/// Applies an answer to an approval; `None` when the answer is not one.
async fn decide(runtime: &Runtime, agent: &AgentId, question: &Question, answer: &str) -> Option<String> {
    let decided = match answer {
        "a" | "approve" | "y" | "yes" => runtime.decide(agent, question.run, true).await.map(|()| "approved"),
        "d" | "deny" | "n" | "no" => runtime.decide(agent, question.run, false).await.map(|()| "denied"),
        "l" | "always" => {
            runtime.always_allow(agent, &question.action).await.map(|_| "approved, and always allowed from now")
        }
        _ => return None,
    };
    Some(match decided {
        Ok(said) => format!("  {said}"),
        Err(error) => format!("  not decided: {error}"),
    })
}

/// Prints the agent's reply: its answer (unless it was shown as it streamed), or why it stopped.
fn say(reply: &Value, streamed: bool) {
    match reply["status"].as_str() {
        Some("answered") if streamed => {}
        Some("answered") => {
            if let Some(text) = reply["text"].as_str() {
                println!("agent: {}", crate::render::escape(text));
            }
        }
        _ => eprintln!(
            "the exchange stopped: {}",
            crate::render::escape(reply["error"].as_str().unwrap_or("no reason given"))
        ),
    }
}

/// The chat through the control socket of the runtime that runs on the data folder.
async fn remote(
    data: &std::path::Path,
    agent: &str,
    lines: &mut mpsc::UnboundedReceiver<String>,
    interrupt: &mut tokio::signal::unix::Signal,
) -> Result<ExitCode, CliError> {
    loop {
        prompt();
        let text = tokio::select! {
            _ = interrupt.recv() => return Ok(ExitCode::from(crate::error::code::INTERRUPTED)),
            line = lines.recv() => match line {
                None => return Ok(ExitCode::SUCCESS),
                Some(line) if line.trim() == "/exit" => return Ok(ExitCode::SUCCESS),
                Some(line) if line.trim().is_empty() => continue,
                Some(line) => line,
            },
        };
        let request = Request::Ask { agent: agent.to_owned(), text };
        match ask(data, &request).await {
            Some(Ok(reply)) => say(&reply, false),
            Some(Err((error, code))) => return Err(super::control::failure(error, &code)),
            None => return Err(CliError::Start("the runtime on this data folder stopped".to_owned())),
        }
    }
}
