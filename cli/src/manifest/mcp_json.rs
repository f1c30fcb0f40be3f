//! Importing an existing `.mcp.json` (`{"mcpServers": {...}}`, as desktop MCP clients write it) as it is, and
//! the `${VAR}` / `${VAR:-default}` expansion its values (and the manifest's own server settings) may use.

use super::{McpServerSection, Trust};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use toml::Spanned;

/// One server of a `.mcp.json` (keys other tools add are ignored: the file is theirs too).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct JsonServer {
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<PathBuf>,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct JsonFile {
    mcp_servers: BTreeMap<String, JsonServer>,
}

/// The servers a `.mcp.json` file lists, as manifest sections (their values not expanded yet: that happens
/// when they start, so `agentry config show` never prints a secret).
pub fn import(path: &Path) -> Result<BTreeMap<String, McpServerSection>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|err| format!("cannot read {}: {err}; expected a `.mcp.json` file", path.display()))?;
    let file: JsonFile = serde_json::from_str(&text).map_err(|err| {
        format!(
            "{} is not a `.mcp.json` file ({err}); expected {{\"mcpServers\": {{\"name\": {{\"command\": ...}}}}}}",
            path.display()
        )
    })?;
    let mut servers = BTreeMap::new();
    for (name, server) in file.mcp_servers {
        for value in server.args.iter().chain(server.env.values()).chain(server.headers.values()) {
            check_references(value).map_err(|err| format!("{}: server `{name}`: {err}", path.display()))?;
        }
        servers.insert(
            name,
            McpServerSection {
                command: server.command.map(|c| Spanned::new(0..0, c)),
                args: server.args,
                env: server.env,
                cwd: server.cwd,
                url: server.url.map(|u| Spanned::new(0..0, u)),
                http_headers: server.headers,
                bearer_token_env_var: None,
                startup_timeout_sec: None,
                tool_timeout_sec: None,
                enabled: true,
                enabled_tools: None,
                disabled_tools: Vec::new(),
                trust: Trust::Untrusted,
            },
        );
    }
    Ok(servers)
}

/// Why a `${...}` reference could not be expanded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpandError {
    /// `${` without its `}`.
    #[error("`{0}` has a `${{` without its `}}`; expected `${{VAR}}` or `${{VAR:-default}}`")]
    Unclosed(String),
    /// A name that is not a variable's.
    #[error("`${{{0}}}` does not name an environment variable; expected letters, digits and `_`")]
    BadName(String),
    /// A variable that is not set and has no default.
    #[error("environment variable `{0}` is not set, and `${{{0}}}` has no default (write `${{{0}:-default}}`)")]
    Unset(String),
}

/// Checks that every `${...}` in `text` is well formed (not that the variables are set).
pub fn check_references(text: &str) -> Result<(), ExpandError> {
    expand_with(text, |_| Some(String::new())).map(|_| ())
}

/// Expands `${VAR}` and `${VAR:-default}` from the environment.
pub fn expand(text: &str) -> Result<String, ExpandError> {
    expand_with(text, |name| std::env::var(name).ok())
}

/// Expands with `lookup` for the variables.
pub fn expand_with(text: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<String, ExpandError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let inner = &rest[start + 2..];
        let end = inner.find('}').ok_or_else(|| ExpandError::Unclosed(text.to_owned()))?;
        let reference = &inner[..end];
        let (name, default) = match reference.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (reference, None),
        };
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(ExpandError::BadName(reference.to_owned()));
        }
        match (lookup(name).filter(|v| !v.is_empty() || default.is_none()), default) {
            (Some(value), _) => out.push_str(&value),
            (None, Some(default)) => out.push_str(default),
            (None, None) => return Err(ExpandError::Unset(name.to_owned())),
        }
        rest = &inner[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "HOME_DIR" => Some("/home/a".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn references_expand_with_defaults_and_refuse_what_is_unset() {
        assert_eq!(expand_with("${HOME_DIR}/x", env).unwrap(), "/home/a/x");
        assert_eq!(expand_with("${NOPE:-/tmp}/x", env).unwrap(), "/tmp/x");
        assert_eq!(expand_with("${EMPTY:-d}", env).unwrap(), "d", "an empty variable takes the default, as in sh");
        assert_eq!(expand_with("a${HOME_DIR}b${NOPE:-}c", env).unwrap(), "a/home/ab c".replace(' ', ""));
        assert_eq!(expand_with("${NOPE}", env), Err(ExpandError::Unset("NOPE".into())));
        assert!(matches!(expand_with("${HOME_DIR", env), Err(ExpandError::Unclosed(_))));
        assert!(matches!(expand_with("${A B}", env), Err(ExpandError::BadName(_))));
    }

    proptest! {
        /// Text without `${` comes back as it is; a defined variable's value is put in place whatever it holds.
        #[test]
        fn plain_text_is_kept_and_values_are_not_expanded_again(text in "[^$]{0,20}", value in ".{0,12}") {
            prop_assert_eq!(expand_with(&text, |_| None).unwrap(), text.clone());
            let got = expand_with(&format!("{text}${{V}}{text}"), |_| Some(value.clone())).unwrap();
            prop_assert_eq!(got, format!("{text}{value}{text}"));
        }
    }
}
