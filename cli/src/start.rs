//! Starting a runtime from a manifest: its MCP servers connected, its models made into skills, every agent
//! type registered, the journal opened (agents that lived before come back), and the manifest's agents that
//! did not come back spawned with their start skills and policy.

use crate::error::CliError;
use crate::manifest::{Loaded, Manifest, McpServerSection, ModelSection, Provider, StoreKind, Trust};
use crate::registry::{Registry, Spawning};
use agentry::id::{AgentId, SkillId};
use agentry::runtime::{Recovery, Runtime};
use agentry::skill::Skill;
use agentry::store::SqliteOptions;
use agentry_skills::mcp::{McpClient, McpServer};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// A runtime started from a manifest.
pub struct Started {
    /// The runtime.
    pub runtime: Runtime,
    /// What came back from the journal.
    pub recovery: Recovery,
    /// The connected MCP servers (closed when this is dropped).
    pub mcp: Vec<McpClient>,
    /// The manifest's agents, in id order.
    pub agents: Vec<AgentId>,
    /// The data folder.
    pub data: PathBuf,
}

impl Drop for Started {
    fn drop(&mut self) {
        for client in &self.mcp {
            client.close();
        }
    }
}

/// The data folder a manifest names, relative to its (last) file.
pub fn data_dir(loaded: &Loaded) -> PathBuf {
    let data = &loaded.merged.runtime.data;
    if data.is_absolute() { data.clone() } else { loaded.dir().join(data) }
}

/// Makes the data folder if it is not there, readable by its owner only (it holds the journal, the drives and
/// the decisions kept for the next start).
pub fn make_data_dir(data: &std::path::Path) -> Result<(), crate::error::CliError> {
    use std::os::unix::fs::DirBuilderExt;
    if data.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(data)
        .map_err(crate::error::CliError::io(format!("creating the data folder {}", data.display())))
}

/// Every skill the manifest can mount: the registry's, one per enabled MCP server (connected, so its tools are
/// known) and one per model (offered the others' actions as tools).
pub async fn catalog(manifest: &Manifest, registry: &Registry) -> Result<(Vec<Skill>, Vec<McpClient>), CliError> {
    let mut mcp = Vec::new();
    for (name, server) in manifest.mcp_servers.iter().filter(|(_, s)| s.enabled) {
        let config = mcp_server(name, server).map_err(|e| CliError::Start(format!("MCP server `{name}`: {e}")))?;
        let client = McpClient::connect(config)
            .await
            .map_err(|e| CliError::Start(format!("MCP server `{name}` did not connect: {e}")))?;
        mcp.push(client);
    }
    let mut skills: Vec<Skill> = registry.skills.values().cloned().collect();
    skills.extend(mcp.iter().map(McpClient::skill));
    let tool_skills: Vec<&Skill> = skills.iter().collect();
    let mut model_skills = Vec::new();
    for (name, model) in &manifest.models {
        let chat = chat_model(model).map_err(|e| CliError::Start(format!("model `{name}`: {e}")))?;
        let mut skill = agentry_llm::skill::ModelSkill::new(name.as_str(), chat).tools(&tool_skills);
        if let Some(timeout) = model.timeout_sec {
            skill = skill.timeout(seconds(timeout));
        }
        model_skills.push(skill.build().map_err(|e| CliError::Start(format!("model `{name}`: {e}")))?);
    }
    skills.extend(model_skills);
    Ok((skills, mcp))
}

/// Starts everything the manifest says.
pub async fn start(loaded: &Loaded, registry: &Registry) -> Result<Started, CliError> {
    let manifest = &loaded.merged;
    let data = data_dir(loaded);
    make_data_dir(&data)?;
    let (skills, mcp) = catalog(manifest, registry).await?;
    let mut builder = Runtime::builder();
    for skill in skills {
        builder = builder.skill(skill);
    }
    for kind in registry.agents.values() {
        builder = (kind.register)(builder).map_err(|e| CliError::Start(e.to_string()))?;
    }
    if let Some(idle) = &manifest.runtime.hibernate_after {
        let idle = crate::manifest::parse_duration(idle).map_err(|(_, e)| CliError::Start(e))?;
        builder = builder.hibernate_after(idle);
    }
    if let Some(every) = manifest.runtime.snapshot_every {
        builder = builder.snapshot_every(every);
    }
    let (runtime, recovery) = match manifest.runtime.store {
        StoreKind::Sqlite => builder
            .durable_with(
                &data,
                SqliteOptions { keep_inputs: manifest.runtime.keep_history, ..SqliteOptions::default() },
            )
            .map_err(|e| CliError::Start(format!("the journal in {} cannot be opened: {e}", data.display())))?
            .open()
            .await
            .map_err(|e| CliError::Start(e.to_string()))?,
        StoreKind::Memory => (builder.data_dir(&data).build(), Recovery::default()),
    };
    // The servers' tool lists followed from now on: a tool added or removed reaches the agents that mount it.
    for client in &mcp {
        client.follow(&runtime);
    }
    let mut agents = Vec::new();
    for (id, section) in &manifest.agents {
        let agent = AgentId::new(id.as_str()).map_err(|e| CliError::Start(format!("agent `{id}`: {e}")))?;
        let policy = crate::manifest::policy::for_agent(manifest, section)
            .map_err(|(_, e)| CliError::Start(format!("agent `{id}`: {e}")))?;
        if recovery.agents.contains(&agent) || recovery.asleep.contains(&agent) {
            // It came back as it was; the manifest's policy (it may have changed since) holds from now, with
            // the "always allow" answers given to it before (each an override to low risk of one action).
            let mut policy = policy;
            let before =
                runtime.store().durable().and_then(|d| d.agent(&agent).ok().flatten()).and_then(|r| r.policy());
            for (pattern, risk) in before.map(|p| p.risk_overrides).unwrap_or_default() {
                if risk == agentry::action::Risk::Low && agentry::id::ActionId::new(pattern.as_str()).is_ok() {
                    policy.risk_overrides.entry(pattern).or_insert(risk);
                }
            }
            runtime.set_policy(&agent, policy).await?;
        } else {
            let kind = registry
                .agents
                .get(section.kind.get_ref())
                .ok_or_else(|| CliError::Start(format!("agent `{id}`: no agent type `{}`", section.kind.get_ref())))?;
            let skills = start_skills(section)?;
            let config = agent_config(manifest, id, section, &skills)?;
            let spawning = Spawning { id: agent.clone(), policy, config, skills };
            (kind.spawn)(runtime.clone(), spawning).await.map_err(|e| CliError::Start(format!("agent `{id}`: {e}")))?;
        }
        agents.push(agent);
    }
    Ok(Started { runtime, recovery, mcp, agents, data })
}

fn seconds(secs: f64) -> Duration {
    Duration::try_from_secs_f64(secs).unwrap_or(Duration::from_secs(60))
}

fn start_skills(section: &crate::manifest::AgentSection) -> Result<Vec<(SkillId, Value)>, CliError> {
    section
        .skills
        .iter()
        .map(|entry| {
            let id = SkillId::new(entry.get_ref().name()).map_err(|e| CliError::Start(e.to_string()))?;
            Ok((id, entry.get_ref().options()))
        })
        .collect()
}

/// The `config` an agent type gets: the manifest's own for registered types, the model settings for `llm`.
fn agent_config(
    manifest: &Manifest,
    id: &str,
    section: &crate::manifest::AgentSection,
    skills: &[(SkillId, Value)],
) -> Result<Value, CliError> {
    if section.kind.get_ref() != "llm" {
        return Ok(section.config.as_ref().map_or(Value::Null, |c| serde_json::to_value(c).unwrap_or_default()));
    }
    let Some(model_name) = &section.model else {
        return Err(CliError::Start(format!("agent `{id}` is an `llm` agent and names no `model`")));
    };
    let model = manifest
        .models
        .get(model_name.get_ref())
        .ok_or_else(|| CliError::Start(format!("agent `{id}`: no model `{}` in [models]", model_name.get_ref())))?;
    let model_skill =
        SkillId::new(format!("llm.{}", model_name.get_ref())).map_err(|e| CliError::Start(e.to_string()))?;
    let mut config = agentry_llm::agent::LlmConfig::new(model_skill, model.model.clone());
    config.instructions = section.instructions.clone();
    config.skills = skills.to_vec();
    config.tools = if section.tools.is_empty() {
        skills.iter().map(|(skill, _)| format!("{skill}.**")).collect()
    } else {
        section.tools.clone()
    };
    if let Some(turns) = section.max_turns {
        config.max_turns = turns;
    }
    config.token_budget = section.token_budget;
    serde_json::to_value(config).map_err(|e| CliError::Start(e.to_string()))
}

/// An MCP server's settings, with `${VAR}` expanded.
pub fn mcp_server(name: &str, s: &McpServerSection) -> Result<McpServer, String> {
    use crate::manifest::mcp_json::expand;
    let mut server = match (&s.command, &s.url) {
        (Some(command), None) => {
            let args: Result<Vec<String>, _> = s.args.iter().map(|a| expand(a)).collect();
            let mut server = McpServer::stdio(
                name,
                expand(command.get_ref()).map_err(|e| e.to_string())?,
                args.map_err(|e| e.to_string())?,
            );
            for (key, value) in &s.env {
                server = server.env(key, expand(value).map_err(|e| e.to_string())?);
            }
            if let Some(cwd) = &s.cwd {
                server = server.cwd(cwd);
            }
            server
        }
        (None, Some(url)) => {
            let mut server = McpServer::http(name, expand(url.get_ref()).map_err(|e| e.to_string())?);
            for (key, value) in &s.http_headers {
                server = server.header(key, expand(value).map_err(|e| e.to_string())?);
            }
            if let Some(var) = &s.bearer_token_env_var {
                server = server.bearer_env(var);
            }
            server
        }
        _ => return Err("expected exactly one of `command` (stdio) and `url` (HTTP)".to_owned()),
    };
    if let Some(secs) = s.startup_timeout_sec {
        server = server.connect_timeout(seconds(secs));
    }
    if let Some(secs) = s.tool_timeout_sec {
        server = server.timeout(seconds(secs));
    }
    if let Some(tools) = &s.enabled_tools {
        server = server.allow_tools(tools.iter().cloned());
    }
    if !s.disabled_tools.is_empty() {
        server = server.deny_tools(s.disabled_tools.iter().cloned());
    }
    if s.trust == Trust::Trusted {
        server = server.trusted();
    }
    Ok(server)
}

/// A model's client.
fn chat_model(model: &ModelSection) -> Result<Arc<dyn agentry_llm::ChatModel>, String> {
    let timeout = model.timeout_sec.map_or(Duration::from_secs(300), seconds);
    match model.provider {
        Provider::Openai => {
            let mut config = agentry_llm::openai::OpenAiConfig::new(
                model.base_url.clone().unwrap_or_else(|| "https://api.openai.com/v1".to_owned()),
            );
            config.api_key_env = model.api_key_env.clone();
            config.stream = model.stream;
            config.timeout = timeout;
            Ok(Arc::new(agentry_llm::openai::OpenAi::new(config).map_err(|e| e.to_string())?))
        }
        Provider::Anthropic => {
            let mut config = agentry_llm::anthropic::AnthropicConfig::default();
            if let Some(url) = &model.base_url {
                config.base_url = url.clone();
            }
            if let Some(var) = &model.api_key_env {
                config.api_key_env = var.clone();
            }
            config.stream = model.stream;
            config.timeout = timeout;
            Ok(Arc::new(agentry_llm::anthropic::Anthropic::new(config).map_err(|e| e.to_string())?))
        }
    }
}
