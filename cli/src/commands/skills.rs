//! `agentry skills` and `agentry tools`: what can be mounted, and what an agent's model would be offered.

use crate::args::Format;
use crate::error::CliError;
use crate::manifest::Loaded;
use crate::registry::Registry;
use agentry::policy::RunDecision;
use agentry::tool::{ToolFormat, describe};
use serde_json::json;
use std::process::ExitCode;

/// Lists every skill with its actions, risk and description.
pub async fn skills(loaded: &Loaded, registry: &Registry, json: bool) -> Result<ExitCode, CliError> {
    let (skills, _mcp) = crate::start::catalog(&loaded.merged, registry).await?;
    for skill in &skills {
        if json {
            let actions: Vec<_> = skill
                .actions()
                .iter()
                .map(|a| json!({"id": a.spec().id, "risk": a.spec().risk, "description": a.spec().description}))
                .collect();
            println!("{}", json!({"skill": skill.id(), "version": skill.version().to_string(), "actions": actions}));
            continue;
        }
        println!("{} {}", skill.id(), skill.version());
        for action in skill.actions() {
            let spec = action.spec();
            println!(
                "  {:<28} {:<7} {}",
                spec.id.as_str(),
                format!("{:?}", spec.risk).to_lowercase(),
                spec.description
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints the agent's actions (its start skills', less what its policy denies) as tool definitions.
pub async fn tools(loaded: &Loaded, registry: &Registry, agent: &str, format: Format) -> Result<ExitCode, CliError> {
    let section = loaded
        .merged
        .agents
        .get(agent)
        .ok_or_else(|| CliError::NotFound(format!("the manifest has no agent `{agent}`")))?;
    let policy = crate::manifest::policy::for_agent(&loaded.merged, section).map_err(|(_, e)| CliError::Usage(e))?;
    let (skills, _mcp) = crate::start::catalog(&loaded.merged, registry).await?;
    let mut mounted: Vec<String> = section.skills.iter().map(|s| s.get_ref().name().to_owned()).collect();
    if let Some(model) = &section.model {
        mounted.push(format!("llm.{}", model.get_ref()));
    }
    let format = match format {
        Format::Openai => ToolFormat::OpenAi,
        Format::OpenaiStrict => ToolFormat::OpenAiStrict,
        Format::Anthropic => ToolFormat::Anthropic,
        Format::Mcp => ToolFormat::Mcp,
    };
    let tools: Vec<_> = skills
        .iter()
        .filter(|s| mounted.iter().any(|m| m == s.id().as_str()))
        .flat_map(|s| s.actions().iter())
        .filter(|a| !matches!(policy.may_run(a.spec()), RunDecision::Deny { .. }))
        .map(|a| describe(a.spec(), format))
        .collect();
    println!("{}", serde_json::to_string_pretty(&tools).unwrap_or_default());
    Ok(ExitCode::SUCCESS)
}
