//! The command line, as clap reads it.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

/// Run agents from a manifest, and operate them.
#[derive(Debug, Parser)]
#[command(name = "agentry", version, about, long_about = None)]
pub struct Cli {
    /// The manifest (default: `agentry.toml` in this folder).
    #[arg(short = 'f', long = "manifest", global = true, env = "AGENTRY_MANIFEST")]
    pub manifest: Option<PathBuf>,
    /// The user layer, read before the manifest (default: `$AGENTRY_USER_CONFIG`, else
    /// `~/.config/agentry/agentry.toml` if it exists; an empty name: none).
    #[arg(long, global = true)]
    pub user_config: Option<PathBuf>,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Writes a commented example manifest.
    Init {
        /// Where (default: `agentry.toml`).
        path: Option<PathBuf>,
        /// Overwrite a file that exists.
        #[arg(long)]
        force: bool,
    },
    /// Checks a manifest: prints each mistake with its file, line and column.
    Check {
        /// The manifest (default: the one `-f` names, or `agentry.toml`).
        file: Option<PathBuf>,
    },
    /// Shows the configuration.
    Config {
        /// What to show.
        #[command(subcommand)]
        what: ConfigCommand,
    },
    /// Starts the manifest's agents, prints events, asks approvals, until Ctrl-C.
    Run {
        /// The manifest (default: the one `-f` names, or `agentry.toml`).
        file: Option<PathBuf>,
        /// Print events as JSON lines.
        #[arg(long)]
        json: bool,
        /// Do not ask approvals in the terminal (leave them to `agentry approvals`).
        #[arg(long)]
        no_prompt: bool,
    },
    /// Lists the skills a manifest can mount, with their actions.
    Skills {
        /// As JSON.
        #[arg(long)]
        json: bool,
    },
    /// Prints an agent's actions as tool definitions for a model.
    Tools {
        /// The agent.
        #[arg(long)]
        agent: String,
        /// The format.
        #[arg(long, value_enum, default_value_t = Format::Openai)]
        format: Format,
    },
    /// Runs one action on an agent, through its gate, and prints the outcome.
    Call {
        /// The agent.
        agent: String,
        /// The action id.
        action: String,
        /// The params, as JSON (default `{}`).
        params: Option<String>,
    },
    /// Sends a signal to an agent of the runtime that runs on the data folder (`agentry run`).
    Send {
        /// The agent.
        agent: String,
        /// The signal's kind.
        kind: String,
        /// Its data, as JSON (default `null`).
        data: Option<String>,
    },
    /// Lists runs waiting for approval, and approves or denies them.
    Approvals(ApprovalsArgs),
    /// Lists journaled runs.
    Journal(JournalArgs),
    /// Shows an agent: its state, skills, schedules and pending runs.
    Inspect {
        /// The agent.
        agent: String,
    },
    /// Serves an agent's actions as an MCP server: on stdin and stdout (for a desktop MCP client), or over
    /// streamable HTTP.
    ServeMcp {
        /// The agent.
        #[arg(long)]
        agent: String,
        /// Serve over HTTP at this address (`127.0.0.1:8787`) instead of stdio.
        #[arg(long)]
        http: Option<String>,
    },
    /// Lists an agent's logged inputs, with their sequence numbers.
    History {
        /// The agent.
        agent: String,
        /// As JSON lines.
        #[arg(long)]
        json: bool,
    },
    /// Prints an agent's state as it was right after an input (see `agentry history`), folded from the journal.
    State {
        /// The agent.
        agent: String,
        /// The input's sequence number.
        #[arg(long)]
        at: u64,
    },
    /// Prints shell completions.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

/// `agentry config ...`.
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Prints the manifest.
    Show {
        /// Merge every layer, and say which file each value came from.
        #[arg(long)]
        resolved: bool,
    },
}

/// Tool formats.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Format {
    /// OpenAI function tools.
    Openai,
    /// OpenAI function tools, strict.
    OpenaiStrict,
    /// Anthropic tools.
    Anthropic,
    /// MCP tool definitions.
    Mcp,
}

/// `agentry approvals`.
#[derive(Debug, Args)]
pub struct ApprovalsArgs {
    /// What to do (default: list).
    #[command(subcommand)]
    pub action: Option<ApprovalAction>,
    /// As JSON lines.
    #[arg(long, global = true)]
    pub json: bool,
}

/// Deciding an approval.
#[derive(Debug, Subcommand)]
pub enum ApprovalAction {
    /// Lists the runs waiting (the default).
    List,
    /// Approves a run.
    Approve {
        /// The run's id.
        run: String,
    },
    /// Denies a run.
    Deny {
        /// The run's id.
        run: String,
    },
}

/// `agentry journal`.
#[derive(Debug, Args)]
pub struct JournalArgs {
    /// Only this agent's runs.
    #[arg(long)]
    pub agent: Option<String>,
    /// Only runs of this action.
    #[arg(long)]
    pub action: Option<String>,
    /// Only runs in this status (`queued`, `awaiting_approval`, `approved`, `running`, `completed`, `failed`,
    /// `blocked`).
    #[arg(long)]
    pub status: Option<String>,
    /// At most this many (the latest).
    #[arg(long)]
    pub limit: Option<usize>,
    /// As JSON lines.
    #[arg(long)]
    pub json: bool,
}
