//! The commands, one module each.

mod approvals;
mod call;
mod chat;
mod cluster;
mod config;
mod control;
mod fork;
mod history;
mod host;
mod init;
mod journal;
mod mcp;
mod run;
mod serve_mcp;
mod sim;
mod skills;

use crate::args::{Cli, ClusterCommand, Command, ConfigCommand, McpCommand};
use crate::error::CliError;
use crate::manifest::{Loaded, check::check, load};
use crate::registry::Registry;
use std::path::PathBuf;
use std::process::ExitCode;

/// Runs the command.
pub async fn dispatch(cli: Cli, registry: Registry) -> Result<ExitCode, CliError> {
    let user = cli.user_config.or_else(|| std::env::var_os("AGENTRY_USER_CONFIG").map(PathBuf::from));
    let layers = Layers { manifest: cli.manifest, user };
    match cli.command {
        Command::Init { path, force } => init::init(path, force),
        Command::Check { file } => {
            let loaded = layers.load(file, &registry)?;
            println!(
                "{}: ok ({} agents, {} MCP servers, {} models)",
                loaded.layers.iter().map(|l| l.path.display().to_string()).collect::<Vec<_>>().join(" + "),
                loaded.merged.agents.len(),
                loaded.merged.mcp_servers.len(),
                loaded.merged.models.len()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Config { what: ConfigCommand::Show { resolved } } => {
            config::show(&layers.load(None, &registry)?, resolved)
        }
        Command::Run { file, json, no_prompt } => {
            run::run(&layers.load(file, &registry)?, &registry, json, !no_prompt).await
        }
        Command::Skills { json } => skills::skills(&layers.load(None, &registry)?, &registry, json).await,
        Command::Tools { agent, format } => {
            skills::tools(&layers.load(None, &registry)?, &registry, &agent, format).await
        }
        Command::Call { agent, action, params } => {
            call::call(&layers.load(None, &registry)?, &registry, &agent, &action, params.as_deref()).await
        }
        Command::Send { agent, kind, data } => {
            call::send(&layers.load(None, &registry)?, &agent, &kind, data.as_deref()).await
        }
        Command::Approvals(args) => approvals::approvals(&layers.load(None, &registry)?, args).await,
        Command::Journal(args) => journal::journal(&layers.load(None, &registry)?, args),
        Command::Cluster { what: ClusterCommand::Status { postgres_env, fullest, json } } => {
            cluster::status(&postgres_env, fullest, json).await
        }
        Command::Inspect { agent } => journal::inspect(&layers.load(None, &registry)?, &agent).await,
        Command::ServeMcp { agent, http } => {
            serve_mcp::serve_mcp(&layers.load(None, &registry)?, &registry, &agent, http.as_deref()).await
        }
        Command::History { agent, after, json } => {
            history::history(&layers.load(None, &registry)?, &agent, after, json)
        }
        Command::Sim { scenario, out, json } => sim::sim(&scenario, out.as_deref(), json, &registry),
        Command::Chat { agent, timeout } => {
            chat::chat(&layers.load(None, &registry)?, &registry, &agent, timeout).await
        }
        Command::Mcp { what: McpCommand::Inspect { name, json } } => {
            mcp::inspect(&layers.load(None, &registry)?, &name, json).await
        }
        Command::Mcp { what: McpCommand::Validate { name, json } } => {
            mcp::validate(&layers.load(None, &registry)?, &name, json).await
        }
        Command::Fork { agent, at, inputs, drop, play_for, seed, json } => {
            let ask = fork::ForkAsk { agent: &agent, at, inputs: inputs.as_deref(), drop: &drop, play_for, seed, json };
            fork::fork(&layers.load(None, &registry)?, &registry, ask).await
        }
        Command::State { agent, at } => history::state(&layers.load(None, &registry)?, &registry, &agent, at).await,
        Command::Completions { shell } => {
            let mut command = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut command, "agentry", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Where the manifest's layers are.
struct Layers {
    manifest: Option<PathBuf>,
    user: Option<PathBuf>,
}

impl Layers {
    /// Reads and checks the layers: the user file (if any), then the manifest (`file`, else `-f`, else
    /// `agentry.toml`).
    fn load(&self, file: Option<PathBuf>, registry: &Registry) -> Result<Loaded, CliError> {
        let mut paths = Vec::new();
        match &self.user {
            // Named (by flag or variable): it must be there; an empty name means none.
            Some(user) if user.as_os_str().is_empty() => {}
            Some(user) => paths.push(user.clone()),
            None => {
                if let Some(home) = std::env::var_os("HOME") {
                    let default = PathBuf::from(home).join(".config/agentry/agentry.toml");
                    if default.is_file() {
                        paths.push(default);
                    }
                }
            }
        }
        paths.push(file.or_else(|| self.manifest.clone()).unwrap_or_else(|| PathBuf::from("agentry.toml")));
        let loaded = load(&paths).map_err(CliError::Manifest)?;
        let errors = check(&loaded, registry);
        if errors.is_empty() { Ok(loaded) } else { Err(CliError::Manifest(errors)) }
    }
}
