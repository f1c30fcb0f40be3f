//! `agentry mcp inspect NAME` and `agentry mcp validate NAME`: one MCP server of the manifest
//! (`[mcp_servers.<name>]`), started on its own with the settings `agentry run` gives it. `inspect` lists its
//! tools with the action id, risk and status agentry gives each; `validate` checks it against what agentry
//! expects of a server, each check passed or failed with its reason. What the server sent is its word, and a
//! hostile server is an attacker: its text reaches the terminal with control and invisible characters escaped
//! (the JSON output escapes control characters as JSON does).

use crate::error::CliError;
use crate::manifest::{Loaded, McpServerSection};
use agentry::action::{ActionError, DynAction, Risk};
use agentry_skills::mcp::contract::{self, ToolDef};
use agentry_skills::mcp::{
    ELICITATION, McpClient, McpError, McpServer, SUPPORTED_PROTOCOL_VERSIONS, schema_guard, tool_rule_matches,
};
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// The checks `validate` makes, in order.
const CHECKS: [&str; 7] =
    ["starts", "protocol", "tools_list", "tool_names", "input_schemas", "tool_rules", "action_ids"];

/// The most problems one failed check lists; the rest are counted.
const MAX_PROBLEMS: usize = 10;

/// The longest text from the server shown in one place, in characters.
const SHOWN_CHARS: usize = 100;

/// A server of the manifest, started: its settings as agentry uses them, and the connection or why none.
struct Started<'a> {
    section: &'a McpServerSection,
    config: McpServer,
    connected: Result<McpClient, McpError>,
    took: Duration,
}

/// Finds the server in the manifest and connects to it as `agentry run` would (even one with `enabled = false`:
/// it was asked for by name).
async fn start<'a>(loaded: &'a Loaded, name: &str) -> Result<Started<'a>, CliError> {
    let servers = &loaded.merged.mcp_servers;
    let section = servers.get(name).ok_or_else(|| {
        let known: Vec<&str> = servers.keys().map(String::as_str).collect();
        let known = if known.is_empty() { "none".to_owned() } else { known.join(", ") };
        CliError::NotFound(format!("the manifest has no MCP server `{name}` under [mcp_servers] (it has: {known})"))
    })?;
    let config =
        crate::start::mcp_server(name, section).map_err(|e| CliError::Start(format!("MCP server `{name}`: {e}")))?;
    let began = Instant::now();
    let connected = McpClient::connect(config.clone()).await;
    Ok(Started { section, config, connected, took: began.elapsed() })
}

/// One tool as agentry sees it.
#[derive(Serialize)]
struct Row {
    tool: String,
    action: Option<String>,
    risk: Option<Risk>,
    risk_reason: &'static str,
    enabled: bool,
    skipped: Option<String>,
    description: String,
}

/// Prints the server's identity and each tool: action id, risk and why, whether it is mounted, description.
pub async fn inspect(loaded: &Loaded, name: &str, json: bool) -> Result<ExitCode, CliError> {
    let started = start(loaded, name).await?;
    let client =
        started.connected.as_ref().map_err(|e| CliError::Start(format!("MCP server `{name}` did not connect: {e}")))?;
    let (info, tools) = (server_info(client), rows(client, &started.config));
    client.close();
    let (transport, trust) = (transport(started.section), format!("{:?}", started.config.trust).to_lowercase());
    if json {
        let enabled = started.section.enabled;
        let out = json!({"server": name, "transport": transport, "trust": trust, "enabled": enabled,
            "server_info": info, "tools": tools});
        println!("{out}");
        return Ok(ExitCode::SUCCESS);
    }
    let off = if started.section.enabled { "" } else { "  (enabled = false: `agentry run` does not start it)" };
    println!("{name}  {}  trust {trust}{off}", crate::render::escape(&transport));
    let said = |key: &str| info[key].as_str().map_or_else(|| "?".to_owned(), |text| crate::render::escape(&cut(text)));
    println!("server {} {}, protocol {}", said("name"), said("version"), said("protocol_version"));
    for row in &tools {
        let risk = row.risk.map_or_else(|| "-".to_owned(), |r| format!("{r:?}").to_lowercase());
        let status = if row.enabled { "enabled" } else { "skipped" };
        let id = row.action.clone().unwrap_or_else(|| row.tool.clone());
        println!(
            "  {:<36} {:<6} {:<7} {}",
            crate::render::escape(&cut(&id)),
            risk,
            status,
            crate::render::escape(&cut(&first_line(&row.description)))
        );
        let skipped = row.skipped.as_deref().map(|why| format!("; skipped: {}", crate::render::escape(&cut(why))));
        println!("  {:<36} risk: {}{}", "", row.risk_reason, skipped.unwrap_or_default());
    }
    Ok(ExitCode::SUCCESS)
}

/// What the server said about itself in its handshake (its word), and the protocol revision settled on.
fn server_info(client: &McpClient) -> Value {
    let (name, version) = client.server_info();
    json!({"name": name, "version": version, "protocol_version": client.protocol_version()})
}

/// Each tool the server lists, with the contract agentry gives it and whether it became an action.
fn rows(client: &McpClient, config: &McpServer) -> Vec<Row> {
    let skipped: BTreeMap<String, String> = client.skipped().into_iter().map(|s| (s.tool, s.reason)).collect();
    client
        .tools()
        .iter()
        .map(|tool| {
            let spec = contract::action_spec(&config.name, tool, config.timeout, config.trust).ok();
            let skipped = skipped.get(&tool.name).cloned();
            let description = tool.description.as_deref().or(tool.title.as_deref()).unwrap_or_default();
            Row {
                tool: tool.name.clone(),
                action: spec.as_ref().map(|s| s.id.to_string()),
                risk: spec.as_ref().map(|s| s.risk),
                risk_reason: contract::risk_of(tool.hints, config.trust).1,
                enabled: skipped.is_none(),
                skipped,
                description: description.to_owned(),
            }
        })
        .collect()
}

/// A check's result.
#[derive(Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Outcome {
    Pass,
    Fail,
    /// Not made: an earlier check it needs failed.
    Skip,
}

/// One check, its result, and why.
#[derive(Serialize)]
struct Check {
    check: &'static str,
    outcome: Outcome,
    detail: String,
}

/// Runs every check and prints each; fails with [`CliError::ChecksFailed`] (exit code 7) when one fails.
pub async fn validate(loaded: &Loaded, name: &str, json: bool) -> Result<ExitCode, CliError> {
    let started = start(loaded, name).await?;
    let checks = match &started.connected {
        Ok(client) => {
            let checks = connected_checks(client, &started);
            client.close();
            checks
        }
        Err(error) => unconnected_checks(error),
    };
    let failed = checks.iter().filter(|c| c.outcome == Outcome::Fail).count();
    if json {
        println!("{}", json!({"server": name, "passed": failed == 0, "checks": checks}));
    } else {
        for c in &checks {
            let outcome = match c.outcome {
                Outcome::Pass => "pass",
                Outcome::Fail => "FAIL",
                Outcome::Skip => "skip",
            };
            println!("{outcome}  {:<14} {}", c.check, crate::render::escape(&c.detail));
        }
        if failed == 0 {
            println!("MCP server `{name}`: all {} checks pass", checks.len());
        }
    }
    match failed {
        0 => Ok(ExitCode::SUCCESS),
        failed => Err(CliError::ChecksFailed { failed, total: checks.len() }),
    }
}

/// The checks of a server that connected (it started, answered `initialize` and listed its tools in time).
fn connected_checks(client: &McpClient, started: &Started<'_>) -> Vec<Check> {
    let (config, tools) = (&started.config, client.tools());
    let limit = config.connect_timeout.as_millis();
    let took = started.took.as_millis();
    let took = format!("started, initialized and listed its tools in {took} ms (each step within {limit} ms)");
    let protocol = match client.protocol_version() {
        Some(v) if SUPPORTED_PROTOCOL_VERSIONS.contains(&v) => Ok(v.to_owned()),
        Some(v) => Err(format!("it speaks `{}`; expected one of {}", cut(v), SUPPORTED_PROTOCOL_VERSIONS.join(", "))),
        None => Err("it reported no protocol version".to_owned()),
    };
    vec![
        check("starts", Ok(took)),
        check("protocol", protocol),
        check("tools_list", Ok(format!("{} tool(s)", tools.len()))),
        verdict("tool_names", name_problems(&tools), "every name is valid (MCP 2025-11-25) and unique"),
        verdict("input_schemas", schema_problems(config, &tools), "every schema is an object schema that compiles"),
        verdict("tool_rules", rule_problems(config, &tools), "every enabled_tools and disabled_tools rule matches"),
        verdict("action_ids", id_problems(&config.name, &tools), "every tool becomes its own action id"),
    ]
}

/// The checks of a server that did not connect: the step that failed, and the rest skipped.
fn unconnected_checks(error: &McpError) -> Vec<Check> {
    let decided = match error {
        // `initialize` was answered; the connection is gone with the client, so its protocol is not known.
        McpError::ListTools { message, .. } => vec![
            check("starts", Ok("started and answered `initialize`".to_owned())),
            skipped("protocol", "not known: the client is not kept when `tools/list` fails"),
            check("tools_list", Err(message.clone())),
        ],
        other => vec![check("starts", Err(other.to_string()))],
    };
    let rest = CHECKS[decided.len()..].iter().map(|&name| skipped(name, "an earlier check failed"));
    decided.into_iter().chain(rest).collect()
}

/// A check that passed (`Ok`) or failed (`Err`), with why.
fn check(name: &'static str, result: Result<String, String>) -> Check {
    match result {
        Ok(detail) => Check { check: name, outcome: Outcome::Pass, detail },
        Err(detail) => Check { check: name, outcome: Outcome::Fail, detail },
    }
}

/// A check not made, with why.
fn skipped(name: &'static str, why: &str) -> Check {
    Check { check: name, outcome: Outcome::Skip, detail: why.to_owned() }
}

/// Passes with `passed` when there are no problems; else fails listing them (at most [`MAX_PROBLEMS`]).
fn verdict(name: &'static str, problems: Vec<String>, passed: &str) -> Check {
    if problems.is_empty() {
        return check(name, Ok(passed.to_owned()));
    }
    let more = problems.len().saturating_sub(MAX_PROBLEMS);
    let mut detail = problems.into_iter().take(MAX_PROBLEMS).collect::<Vec<_>>().join("; ");
    if more > 0 {
        detail.push_str(&format!("; and {more} more"));
    }
    check(name, Err(detail))
}

/// Names MCP 2025-11-25 does not allow (1 to 128 of `A-Z a-z 0-9 _ - .`), and names listed twice.
fn name_problems(tools: &[ToolDef]) -> Vec<String> {
    let mut seen = BTreeSet::new();
    let mut problems = Vec::new();
    for tool in tools {
        let name = tool.name.as_str();
        let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
        if name.is_empty() || name.chars().count() > 128 || !name.chars().all(allowed) {
            problems.push(format!("`{}` is not a valid name; expected 1 to 128 of A-Z a-z 0-9 _ - .", cut(name)));
        }
        if !seen.insert(name) {
            problems.push(format!("`{}` is listed twice", cut(name)));
        }
    }
    problems
}

/// Tools whose input schema is not an object schema, or whose schemas the client would refuse or not compile.
fn schema_problems(config: &McpServer, tools: &[ToolDef]) -> Vec<String> {
    let problem = |tool: &ToolDef| schema_problem(config, tool).err().map(|why| (cut(&tool.name), why));
    tools.iter().filter_map(problem).map(|(tool, why)| format!("`{tool}`: {why}")).collect()
}

/// What the client does with a tool's schemas (`build` in skills-std's `mcp/client.rs`): the guard, then the
/// compiler, under a name that is always a valid id, so a bad tool name is not taken for a bad schema.
fn schema_problem(config: &McpServer, tool: &ToolDef) -> Result<(), String> {
    match tool.input_schema.get("type") {
        Some(Value::String(kind)) if kind == "object" => {}
        other => {
            let said = other.map_or_else(|| "none".to_owned(), |t| cut(&t.to_string()));
            return Err(format!("its input schema has type {said}; expected \"object\""));
        }
    }
    schema_guard::check(&tool.input_schema).map_err(|why| format!("its input schema is refused: {why}"))?;
    if let Some(output) = &tool.output_schema {
        schema_guard::check(output).map_err(|why| format!("its output schema is refused: {why}"))?;
    }
    let probe = ToolDef { name: "schema".to_owned(), ..tool.clone() };
    let spec = contract::action_spec(&config.name, &probe, config.timeout, config.trust)?;
    DynAction::new(spec, |_, _| Box::pin(async { Ok::<Value, ActionError>(Value::Null) }))
        .map(drop)
        .map_err(|e| format!("its schema does not compile: {}", e.message))
}

/// Rules of `enabled_tools` and `disabled_tools` that match no tool the server lists.
fn rule_problems(config: &McpServer, tools: &[ToolDef]) -> Vec<String> {
    let allow = config.allow_tools.iter().map(|rule| ("enabled_tools", rule));
    let deny = config.deny_tools.iter().map(|rule| ("disabled_tools", rule));
    allow
        .chain(deny)
        .filter(|(_, rule)| !tools.iter().any(|tool| tool_rule_matches(rule, &tool.name)))
        .map(|(list, rule)| format!("`{rule}` in {list} matches no tool"))
        .collect()
}

/// Tools that cannot become an action: a name no action id takes, the name kept for elicitations, or two names
/// that become one id (their dots become `-`).
fn id_problems(server: &str, tools: &[ToolDef]) -> Vec<String> {
    let mut ids: BTreeMap<String, &str> = BTreeMap::new();
    let mut problems = Vec::new();
    for tool in tools {
        match contract::action_id(server, &tool.name) {
            Err(why) => problems.push(format!("`{}` cannot be an action id: {}", cut(&tool.name), cut(&why))),
            Ok(_) if tool.name == ELICITATION => {
                problems.push(format!("`elicitation` is kept for mcp.{server}.elicitation (the server's asks)"));
            }
            Ok(id) => match ids.insert(id.to_string(), &tool.name) {
                Some(other) if other != tool.name => {
                    problems.push(format!("`{}` and `{}` both become `{id}`", cut(other), cut(&tool.name)));
                }
                _ => {}
            },
        }
    }
    problems
}

/// How the server is reached, as the manifest writes it (before `${VAR}` expansion, so no secret is shown).
fn transport(section: &McpServerSection) -> String {
    match (&section.command, &section.url) {
        (Some(command), _) => format!("stdio `{}`", command.get_ref()),
        (None, Some(url)) => format!("http {}", url.get_ref()),
        (None, None) => "no transport".to_owned(),
    }
}

/// At most [`SHOWN_CHARS`] characters of a text, `…` marking a cut.
fn cut(text: &str) -> String {
    let mut shown: String = text.chars().take(SHOWN_CHARS).collect();
    if text.chars().nth(SHOWN_CHARS).is_some() {
        shown.push('…');
    }
    shown
}

/// A description's first line, and how many more it has (the whole description is what the model reads, and
/// what `--json` shows).
fn first_line(description: &str) -> String {
    let mut lines = description.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or_default().to_owned();
    match lines.count() {
        0 => first,
        more => format!("{first} (+{more} more line(s): --json shows them)"),
    }
}
