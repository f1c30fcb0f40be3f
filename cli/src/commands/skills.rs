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
    let (mut skills, _mcp) = crate::start::catalog(&loaded.merged, registry).await?;
    let mut mounted: Vec<String> = section.skills.iter().map(|s| s.get_ref().name().to_owned()).collect();
    // The type's own start skills, as it mounts them (its build of each wins over the catalog's, as live).
    if let Some(kind) = registry.agents.get(section.kind.get_ref()) {
        for skill in (kind.start_skills)() {
            mounted.push(skill.id().to_string());
            skills.retain(|s| s.id() != skill.id());
            skills.push(skill);
        }
    }
    // An LLM agent offers its model the actions its `tools` patterns match (by default every action of its
    // skills), never its model's own.
    let offered: Option<Vec<agentry::Pattern>> = (section.kind.get_ref() == "llm")
        .then(|| {
            let patterns: Vec<String> = if section.tools.is_empty() {
                section.skills.iter().map(|s| format!("{}.**", s.get_ref().name())).collect()
            } else {
                section.tools.clone()
            };
            patterns
                .iter()
                .map(|p| {
                    agentry::Pattern::new(p.as_str()).map_err(|e| CliError::Usage(format!("tool pattern `{p}`: {e}")))
                })
                .collect::<Result<_, _>>()
        })
        .transpose()?;
    if let (Some(model), None) = (&section.model, &offered) {
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
        .filter(|a| offered.as_ref().is_none_or(|p| p.iter().any(|p| p.matches(a.spec().id.as_str()))))
        .filter(|a| !matches!(policy.may_run(a.spec()), RunDecision::Deny { .. }))
        .map(|a| describe(a.spec(), format))
        .collect();
    println!("{}", serde_json::to_string_pretty(&tools).unwrap_or_default());
    Ok(ExitCode::SUCCESS)
}
