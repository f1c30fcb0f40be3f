//! `agentry call AGENT ACTION JSON`: one run through the agent's gate (its policy, budgets and approvals, as
//! any run), and its outcome printed. It starts the manifest's runtime for the call and shuts it down after;
//! while it waits, it serves the control socket, so a run that needs approval can be approved from another
//! terminal with `agentry approvals approve RUN`.

use crate::error::CliError;
use crate::manifest::Loaded;
use crate::registry::Registry;
use agentry::action::{Caller, CallerCan, CallerRequest, OutcomeStatus};
use agentry::id::AgentId;
use serde_json::Value;
use std::process::ExitCode;

/// Runs one action and prints its outcome as JSON; exit code 4 unless it completed.
pub async fn call(
    loaded: &Loaded,
    registry: &Registry,
    agent: &str,
    action: &str,
    params: Option<&str>,
) -> Result<ExitCode, CliError> {
    let params: Value = match params {
        Some(text) => serde_json::from_str(text).map_err(|e| {
            CliError::Usage(format!(
                "the params are not JSON ({e}); expected an object such as '{{\"path\": \"a.txt\"}}'"
            ))
        })?,
        None => Value::Object(Default::default()),
    };
    let agent = AgentId::new(agent).map_err(|e| CliError::Usage(e.to_string()))?;
    let data = crate::start::data_dir(loaded);
    crate::start::make_data_dir(&data)?;
    // A runtime runs on this data folder already: it makes the call.
    let request =
        super::control::Request::Call { agent: agent.to_string(), action: action.to_owned(), params: params.clone() };
    match super::control::ask(&data, &request).await {
        Some(Ok(outcome)) => {
            println!("{}", serde_json::to_string_pretty(&outcome).unwrap_or_default());
            let completed = outcome["status"] == "completed";
            return Ok(ExitCode::from(if completed {
                crate::error::code::OK
            } else {
                crate::error::code::NOT_COMPLETED
            }));
        }
        Some(Err((error, code))) => return Err(super::control::failure(error, &code)),
        None => {}
    }
    let hosted = super::host::host(loaded, registry).await?;
    let runtime = hosted.started.runtime.clone();
    let (caller, mut heard) = Caller::new(CallerCan::default());
    let told = tokio::spawn(async move {
        while let Some(request) = heard.recv().await {
            if let CallerRequest::AwaitingOperator(ask) = request {
                eprintln!(
                    "run {} of `{}` waits for approval (risk {:?}): `agentry approvals approve {}` or `deny`",
                    ask.run, ask.spec.id, ask.risk, ask.run
                );
            }
        }
    });
    let outcome = runtime.invoke_with(&agent, action, params, caller).await;
    hosted.close().await;
    told.abort();
    let outcome = outcome?;
    println!("{}", serde_json::to_string_pretty(&outcome).unwrap_or_default());
    if outcome.status == OutcomeStatus::Completed {
        Ok(ExitCode::SUCCESS)
    } else {
        Ok(ExitCode::from(crate::error::code::NOT_COMPLETED))
    }
}

/// Sends a signal to an agent of the live runtime on the data folder.
pub async fn send(loaded: &Loaded, agent: &str, kind: &str, data: Option<&str>) -> Result<ExitCode, CliError> {
    let data: Value = match data {
        Some(text) => serde_json::from_str(text).map_err(|e| CliError::Usage(format!("the data is not JSON ({e})")))?,
        None => Value::Null,
    };
    let request = super::control::Request::Send { agent: agent.to_owned(), kind: kind.to_owned(), data };
    match super::control::ask(&crate::start::data_dir(loaded), &request).await {
        Some(Ok(_)) => {
            println!("sent `{kind}` to {agent}");
            Ok(ExitCode::SUCCESS)
        }
        Some(Err((error, code))) => Err(super::control::failure(error, &code)),
        None => Err(CliError::Start("no runtime runs on this data folder; start it with `agentry run`".to_owned())),
    }
}
