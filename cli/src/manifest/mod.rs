//! The manifest, `agentry.toml`: which agents run, with which skills, MCP servers and models, what they may do
//! and what they may spend. This module is the file's shape (every key, with its default); [`load`] reads one or
//! more layers of it, [`check`] finds what is wrong in them, and [`diagnostic`] says so with the file, line and
//! column.

pub mod check;
pub mod diagnostic;
mod durations;
pub mod layers;
pub mod mcp_json;
pub mod policy;

pub use durations::{Span, parse as parse_duration};
pub use layers::{Layer, Loaded, load};

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use toml::Spanned;

/// A whole manifest, as one file (or the merge of its layers) says it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Where the runtime keeps its data, and how.
    #[serde(default)]
    pub runtime: RuntimeSection,
    /// The agents to run, by id.
    #[serde(default)]
    pub agents: BTreeMap<String, AgentSection>,
    /// MCP servers whose tools become skills (`mcp.<name>`), by name.
    #[serde(default)]
    pub mcp_servers: BTreeMap<String, McpServerSection>,
    /// `.mcp.json` files to import as they are (`mcpServers`), relative to this file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub import_mcp_json: Vec<Spanned<String>>,
    /// Language models, by name: each becomes a model skill (`llm.<name>`).
    #[serde(default)]
    pub models: BTreeMap<String, ModelSection>,
    /// What every agent may do (an agent's own `permissions` add to it).
    #[serde(default)]
    pub permissions: Permissions,
    /// What every agent may spend, by action pattern (an agent's own `budgets` add to them).
    #[serde(default)]
    pub budgets: IndexMap<Spanned<String>, BudgetSection>,
    /// How often every agent may run actions, by action pattern, in the file's order (an agent's own come
    /// after): a run counts against the first that matches.
    #[serde(default)]
    pub rate_limits: IndexMap<Spanned<String>, RateSection>,
}

/// `[runtime]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeSection {
    /// The data folder (journal, drives), relative to the manifest. Default `.agentry`.
    #[serde(default = "default_data")]
    pub data: PathBuf,
    /// `sqlite` (durable, the default) or `memory` (nothing survives the process).
    #[serde(default)]
    pub store: StoreKind,
    /// Idle agents fall asleep after this long (`10m`); none: they stay awake.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hibernate_after: Option<Spanned<String>>,
    /// A snapshot every this many inputs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_every: Option<u64>,
    /// Keep every input and snapshot (default false), so `agentry history`, `state --at` and `fork` reach back
    /// to an agent's first input; the journal then grows with every input.
    #[serde(default)]
    pub keep_history: bool,
}

impl Default for RuntimeSection {
    fn default() -> Self {
        Self {
            data: default_data(),
            store: StoreKind::default(),
            hibernate_after: None,
            snapshot_every: None,
            keep_history: false,
        }
    }
}

fn default_data() -> PathBuf {
    PathBuf::from(".agentry")
}

/// Where the journal lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StoreKind {
    /// A SQLite file in the data folder: agents survive restarts and crashes.
    #[default]
    Sqlite,
    /// In memory: nothing survives the process.
    Memory,
}

/// `[agents.<id>]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSection {
    /// The agent type: a built-in one (`tools`, `llm`) or one the binary registers.
    #[serde(rename = "type")]
    pub kind: Spanned<String>,
    /// Skills mounted when it starts, in order, each a name or `{ name, options }`.
    #[serde(default)]
    pub skills: Vec<Spanned<SkillEntry>>,
    /// For `llm` agents: the model (a key of `[models]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<Spanned<String>>,
    /// For `llm` agents: the instructions that stand before the conversation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// For `llm` agents: patterns of the actions offered to the model as tools (default: every mounted one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// For `llm` agents: the most model calls in one exchange (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
    /// For `llm` agents: the most tokens one exchange may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_budget: Option<u64>,
    /// For types a binary registers: their own settings, handed to the type as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<toml::Value>,
    /// What this agent may do, on top of the top-level `[permissions]`.
    #[serde(default)]
    pub permissions: Permissions,
    /// What this agent may spend, on top of the top-level `[budgets]`.
    #[serde(default)]
    pub budgets: IndexMap<Spanned<String>, BudgetSection>,
    /// How often this agent may run actions, after the top-level `[rate_limits]`, in the file's order.
    #[serde(default)]
    pub rate_limits: IndexMap<Spanned<String>, RateSection>,
}

/// A start skill: its name, or its name with mount options.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged, expecting = "a skill's name, or a table `{ name = \"...\", options = { ... } }`")]
pub enum SkillEntry {
    /// `"fs"`.
    Name(String),
    /// `{ name = "memory", options = { ... } }`.
    WithOptions(SkillWithOptions),
}

/// A start skill with mount options.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillWithOptions {
    /// The skill's id.
    pub name: String,
    /// Its mount options.
    #[serde(default)]
    pub options: Option<toml::Value>,
}

impl SkillEntry {
    /// The skill's id.
    pub fn name(&self) -> &str {
        match self {
            Self::Name(name) => name,
            Self::WithOptions(with) => &with.name,
        }
    }

    /// Its mount options, as JSON (`null` when none).
    pub fn options(&self) -> serde_json::Value {
        match self {
            Self::WithOptions(SkillWithOptions { options: Some(options), .. }) => {
                serde_json::to_value(options).unwrap_or_default()
            }
            _ => serde_json::Value::Null,
        }
    }
}

/// `[permissions]` (top level, or an agent's own).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Permissions {
    /// Actions that run without asking, whatever their risk (after deny and ask).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<Spanned<String>>,
    /// Actions that always ask for approval (after deny).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ask: Vec<Spanned<String>>,
    /// Actions that never run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<Spanned<String>>,
    /// Capabilities granted (`fs`, `net`, `memory`, `jobs`, ...; `*` for all).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub grants: Vec<Spanned<String>>,
    /// Hosts network actions may reach (`api.example.com`, `*.example.com`, `*`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// The risk from which runs ask for approval: `low`, `medium`, `high` (the default) or `never`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_at: Option<Spanned<String>>,
    /// How long a run may wait for approval (`1h` by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_timeout: Option<Spanned<String>>,
    /// The most bytes an agent's drive may hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drive_quota_bytes: Option<u64>,
    /// The most entries an agent's drive may hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drive_quota_files: Option<u64>,
}

/// A budget: `"<pattern>" = { limit = 100000, window = "1h", when_spent = "ask" }`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetSection {
    /// The most the matching runs may cost in the window (in the actions' own unit: tokens for models).
    pub limit: f64,
    /// The window (`1h`, `24h`).
    pub window: Spanned<String>,
    /// `refuse` (the default) or `ask`.
    #[serde(default)]
    pub when_spent: WhenSpentText,
}

/// What a spent budget does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WhenSpentText {
    /// Refuse the run.
    #[default]
    Refuse,
    /// Pause it for approval.
    Ask,
}

/// A rate limit: `"<pattern>" = { runs = 10, per = "1m", when_limited = "queue" }`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateSection {
    /// How many runs per window (and the largest burst).
    pub runs: u32,
    /// The window (`1s`, `1m`).
    pub per: Spanned<String>,
    /// `refuse` (the default) or `queue`.
    #[serde(default)]
    pub when_limited: WhenLimitedText,
}

/// What a rate limit does with a run over it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WhenLimitedText {
    /// Refuse it.
    #[default]
    Refuse,
    /// Hold it until it may run.
    Queue,
}

/// `[mcp_servers.<name>]`, with the keys other MCP clients use.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerSection {
    /// The program of a server over stdio.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Spanned<String>>,
    /// Its arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Environment variables set for it, on top of the environment `agentry` has (values may use `${VAR}`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Its working folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// The URL of a server over streamable HTTP (instead of `command`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<Spanned<String>>,
    /// Headers sent with every HTTP request.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub http_headers: BTreeMap<String, String>,
    /// The environment variable holding a bearer token for HTTP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer_token_env_var: Option<String>,
    /// How long connecting may take, in seconds (default 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_timeout_sec: Option<f64>,
    /// How long one tool call may take, in seconds (default 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_timeout_sec: Option<f64>,
    /// Whether it starts at all (default true).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Only these tools become actions (absent or empty: every tool).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled_tools: Option<Vec<String>>,
    /// These tools never become actions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disabled_tools: Vec<String>,
    /// `untrusted` (the default: its tools' hints are ignored and they count as risky) or `trusted`.
    #[serde(default)]
    pub trust: Trust,
}

fn yes() -> bool {
    true
}

/// How far an MCP server's own description of its tools is believed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trust {
    /// Its hints are ignored: every tool has side effects and high risk.
    #[default]
    Untrusted,
    /// Its hints (read-only, idempotent, destructive) set the tools' contracts.
    Trusted,
}

/// `[models.<name>]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSection {
    /// `openai` (any OpenAI-compatible server: OpenAI, llama.cpp, vLLM, Ollama) or `anthropic`.
    pub provider: Provider,
    /// The model's name at the provider.
    pub model: String,
    /// The API's base URL (default: the provider's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The environment variable holding the API key (never the key itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// Whether answers stream (default true).
    #[serde(default = "yes")]
    pub stream: bool,
    /// How long one call may take, in seconds (default 300).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_sec: Option<f64>,
}

/// A model provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Provider {
    /// The OpenAI Chat Completions API, or a server that speaks it.
    Openai,
    /// Anthropic's Messages API.
    Anthropic,
}
