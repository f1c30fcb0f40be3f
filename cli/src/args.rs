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
    /// Operates a cluster of nodes sharing a PostgreSQL database.
    Cluster {
        /// What to do.
        #[command(subcommand)]
        what: ClusterCommand,
    },
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
        /// Only the inputs after this one.
        #[arg(long, default_value_t = 0)]
        after: u64,
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
    /// Talks with an LLM agent in the terminal: each line is a message; tool runs and approvals show as they
    /// come. `/exit` or Ctrl-D ends.
    Chat {
        /// The agent (of type `llm`).
        agent: String,
        /// How long one answer may take (`90s`, `10m`).
        #[arg(long, default_value = "10m", value_parser = humantime::parse_duration)]
        timeout: std::time::Duration,
    },
    /// Runs a simulation from a scenario file, with a progress bar, and writes its metrics as CSV and an SVG plot.
    Sim {
        /// The scenario (TOML; see docs/cli.md).
        scenario: PathBuf,
        /// The folder for `<scenario>.csv` and `<scenario>.svg` (default: the scenario's own).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Print a summary as one JSON object, and no progress bar.
        #[arg(long)]
        json: bool,
    },
    /// Inspects or checks one of the manifest's MCP servers (`[mcp_servers.<name>]`).
    Mcp {
        /// What to do.
        #[command(subcommand)]
        what: McpCommand,
    },
    /// Replays an agent's past into the simulator from an input on, with the inputs after it as recorded, some
    /// dropped, or replaced; runs it asks for again end as recorded, new ones are refused. The live agent and
    /// its journal are not touched.
    Fork {
        /// The agent.
        agent: String,
        /// The input to fork after (see `agentry history`).
        #[arg(long)]
        at: u64,
        /// Give these inputs instead of the recorded ones: JSON lines, as `agentry history --json` prints them.
        #[arg(long, conflicts_with = "drop")]
        inputs: Option<PathBuf>,
        /// Leave out this recorded input (by sequence number; may be repeated).
        #[arg(long)]
        drop: Vec<u64>,
        /// How long to play, in virtual time (`90s`, `2h`; default: to the last input and an hour more).
        #[arg(long = "for", value_parser = humantime::parse_duration)]
        play_for: Option<std::time::Duration>,
        /// The simulation's seed.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// As JSON.
        #[arg(long)]
        json: bool,
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

/// `agentry cluster ...`.
#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Shows the nodes (alive or not, where they listen, the leases each holds and how many ran out) and what
    /// waits in the inboxes, as the database has them at one moment. The connection string is read from an
    /// environment variable, never from the command line.
    Status {
        /// The environment variable that holds PostgreSQL's connection string.
        #[arg(long, default_value = "AGENTRY_POSTGRES")]
        postgres_env: String,
        /// List this many agents with the most signals waiting.
        #[arg(long, default_value_t = 5)]
        fullest: u32,
        /// As JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `agentry mcp ...`.
#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Lists a server's tools with the action id and risk agentry gives each, and whether each is enabled.
    Inspect {
        /// The server, as `[mcp_servers.<name>]` names it.
        name: String,
        /// As JSON.
        #[arg(long)]
        json: bool,
    },
    /// Checks a server against what agentry expects of one; exit code 7 when a check fails.
    Validate {
        /// The server, as `[mcp_servers.<name>]` names it.
        name: String,
        /// As JSON.
        #[arg(long)]
        json: bool,
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
