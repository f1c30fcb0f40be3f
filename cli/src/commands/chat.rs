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
        return remote(&data, agent, timeout, &mut lines, &mut interrupt).await;
    }
    let hosted = super::host::host(loaded, registry).await?;
    let runtime = hosted.started.runtime.clone();
    let mut events = runtime.events();
    // Decisions kept while no runtime ran, then the runs of this agent still waiting from before: asked first.
    super::run::apply_decisions(&runtime, &data).await;
    let waiting = agentry::store::RunQuery {
        agent: Some(id.clone()),
        status: Some(agentry::store::RunStatus::AwaitingApproval),
        ..Default::default()
    };
    let earlier: Vec<Question> = runtime
        .store()
        .query(&waiting)
        .into_iter()
        .map(|r| Question { run: r.run, text: format!("`{}` (waiting from before)", r.action), action: r.action })
        .collect();
    eprintln!("talking to `{agent}`; /exit or Ctrl-D ends");
    let code = match ask_earlier(&runtime, &id, earlier, &mut lines, &mut interrupt).await {
        Some(code) => code,
        None => converse(&runtime, &id, timeout, (&mut events, &mut lines), &mut interrupt).await,
    };
    hosted.close().await;
    Ok(ExitCode::from(code))
}

/// Asks the runs that waited for approval before the chat began, one by one; `Some(code)` when the chat ends
/// meanwhile (end of input, Ctrl-C).
async fn ask_earlier(
    runtime: &Runtime,
    agent: &AgentId,
    earlier: Vec<Question>,
    lines: &mut mpsc::UnboundedReceiver<String>,
    interrupt: &mut tokio::signal::unix::Signal,
) -> Option<u8> {
    for question in earlier {
        loop {
            question.put();
            let line = tokio::select! {
                _ = interrupt.recv() => return Some(crate::error::code::INTERRUPTED),
                line = lines.recv() => line?,
            };
            match super::approvals::answer(runtime, agent, (question.run, &question.action), line.trim()).await {
                Some(done) => {
                    eprintln!("  {done}");
                    break;
                }
                None => eprintln!("  answer a (approve), d (deny) or l (always)"),
            }
        }
    }
    None
}

/// The conversation: a turn for each line typed, until `/exit`, end of input or Ctrl-C; returns the exit code.
async fn converse(
    runtime: &Runtime,
    agent: &AgentId,
    timeout: Duration,
    (events, lines): (&mut broadcast::Receiver<Event>, &mut mpsc::UnboundedReceiver<String>),
    interrupt: &mut tokio::signal::unix::Signal,
) -> u8 {
    loop {
        prompt();
        let text = tokio::select! {
            _ = interrupt.recv() => return crate::error::code::INTERRUPTED,
            line = lines.recv() => match line {
                None => return crate::error::code::OK,
                Some(line) if line.trim() == "/exit" => return crate::error::code::OK,
                Some(line) if line.trim().is_empty() => continue,
                Some(line) => line,
            },
        };
        let turn = Turn { runtime, agent, events: &mut *events, lines: &mut *lines };
        match turn.take(text, timeout, &mut *interrupt).await {
            Some(Ok((reply, streamed))) => say(&reply, streamed),
            Some(Err(error)) => eprintln!("the agent did not answer: {error}"),
            None => return crate::error::code::INTERRUPTED,
        }
    }
}

/// The lines typed, as they come; the channel ends with standard input. A thread of its own reads them: a read
/// from a terminal blocks until a line comes, and the async runtime would wait for a blocking task of its own
/// before the process could end.
pub(super) fn read_lines() -> mpsc::UnboundedReceiver<String> {
    let (tx, rx) = mpsc::unbounded_channel();
    let reader = std::thread::Builder::new().name("agentry-stdin".to_owned()).spawn(move || {
        for line in std::io::stdin().lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    if let Err(error) = reader {
        eprintln!("(standard input cannot be read: {error})");
    }
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
                    // What streamed before the reply and is still queued is shown before it.
                    while let Ok(event) = self.events.try_recv() {
                        if &event.agent == self.agent {
                            self.show(&event, &mut streamed);
                        }
                    }
                    if streamed {
                        println!();
                    }
                    if !asking.is_empty() {
                        eprintln!("({} approval question(s) left unanswered: `agentry approvals` lists them)", asking.len());
                    }
                    return Some(reply.map(|reply| (reply, streamed)).map_err(|e| e.to_string()));
                }
                _ = interrupt.recv() => return None,
                event = self.events.recv() => match event {
                    Ok(event) if &event.agent == self.agent => {
                        if let Some(question) = self.show(&event, &mut streamed) {
                            if asking.is_empty() {
                                // Only a line typed after the question answers it: what was typed before (the
                                // next message, say) never approves a run its writer had not seen.
                                let mut early = 0;
                                while self.lines.try_recv().is_ok() {
                                    early += 1;
                                }
                                if early > 0 {
                                    eprintln!("\n({early} line(s) typed before this question were set aside)");
                                }
                                question.put();
                            }
                            asking.push_back(question);
                        }
                    }
                    Ok(_) => {}
                    Err(broadcast::error::RecvError::Lagged(missed)) => {
                        eprintln!("({missed} events were missed: the terminal is slower than the runtime)");
                    }
                    Err(broadcast::error::RecvError::Closed) => return Some(Err("the runtime stopped".to_owned())),
                },
                line = self.lines.recv(), if !asking.is_empty() => {
                    let Some(line) = line else {
                        return Some(Err("the input ended while a run waits for approval; it waits on (`agentry approvals` lists it)".to_owned()));
                    };
                    let Some(question) = asking.front() else { continue };
                    match super::approvals::answer(self.runtime, self.agent, (question.run, &question.action), line.trim()).await {
                        Some(done) => {
                            eprintln!("  {done}");
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
                print!("{}", crate::render::escape_lines(text));
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

/// Prints the agent's reply: its answer (unless it was shown as it streamed), or why it stopped.
fn say(reply: &Value, streamed: bool) {
    match reply["status"].as_str() {
        Some("answered") if streamed => {}
        Some("answered") => {
            if let Some(text) = reply["text"].as_str() {
                println!("agent: {}", crate::render::escape_lines(text));
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
    timeout: Duration,
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
        let timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        let request = Request::Ask { agent: agent.to_owned(), text, timeout_ms };
        let answered = tokio::select! {
            _ = interrupt.recv() => return Ok(ExitCode::from(crate::error::code::INTERRUPTED)),
            answered = ask(data, &request) => answered,
        };
        match answered {
            Some(Ok(reply)) => say(&reply, false),
            Some(Err((error, code))) => return Err(super::control::failure(error, &code)),
            None => return Err(CliError::Start("the runtime on this data folder stopped".to_owned())),
        }
    }
}
