//! Resources a skill offers: data a client can read by URI (an MCP server serves them as MCP resources). A
//! resource is read by running one of the skill's actions that has no side effects, through the agent's gate
//! like any run, so reading is allowed, confined and journaled exactly as that action is.

use crate::id::ActionId;
use std::collections::BTreeMap;

/// The longest URI a resource is matched against.
const MAX_URI: usize = 8 * 1024;

/// One piece of a URI template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    /// Text that must appear as it is.
    Literal(String),
    /// `{name}`: one or more characters other than `/`, `?` and `#`; `{+name}`: one or more of any.
    Variable { name: String, reserved: bool },
}

/// Why a URI template does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("URI template `{template}` is malformed: {message}; expected text with `{{name}}` or `{{+name}}` variables")]
pub struct TemplateError {
    /// The template.
    pub template: String,
    /// What is wrong.
    pub message: String,
}

fn parse(template: &str) -> Result<Vec<Part>, TemplateError> {
    let error = |message: &str| TemplateError { template: template.to_owned(), message: message.to_owned() };
    let mut parts = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        if open > 0 {
            parts.push(Part::Literal(rest[..open].to_owned()));
        }
        let after = &rest[open + 1..];
        let close = after.find('}').ok_or_else(|| error("a `{` is never closed"))?;
        let (name, reserved) = match after[..close].strip_prefix('+') {
            Some(name) => (name, true),
            None => (&after[..close], false),
        };
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(error(&format!("variable `{name}` is not a name of ASCII letters, digits and `_`")));
        }
        if matches!(parts.last(), Some(Part::Variable { .. })) {
            return Err(error("two variables touch, so where one ends is ambiguous"));
        }
        if parts.iter().any(|p| matches!(p, Part::Variable { name: n, .. } if n == name)) {
            return Err(error(&format!("variable `{name}` appears twice")));
        }
        parts.push(Part::Variable { name: name.to_owned(), reserved });
        rest = &after[close + 1..];
    }
    if rest.contains('}') {
        return Err(error("a `}` is never opened"));
    }
    if !rest.is_empty() {
        parts.push(Part::Literal(rest.to_owned()));
    }
    Ok(parts)
}

/// Matches `uri` against `parts`, filling `vars`; backtracks over where each variable ends, remembering the
/// (part, position) pairs that cannot match, so that a template with many variables costs at most
/// parts × positions² steps rather than a number exponential in its variables.
fn matches(parts: &[Part], uri: &str, vars: &mut BTreeMap<String, String>) -> bool {
    let mut dead = std::collections::HashSet::new();
    matches_from(parts, uri, 0, 0, vars, &mut dead)
}

fn matches_from(
    parts: &[Part],
    uri: &str,
    part: usize,
    at: usize,
    vars: &mut BTreeMap<String, String>,
    dead: &mut std::collections::HashSet<(usize, usize)>,
) -> bool {
    if dead.contains(&(part, at)) {
        return false;
    }
    let rest = &uri[at..];
    let found = match parts.get(part) {
        None => rest.is_empty(),
        Some(Part::Literal(text)) => {
            rest.starts_with(text.as_str()) && matches_from(parts, uri, part + 1, at + text.len(), vars, dead)
        }
        Some(Part::Variable { name, reserved }) => {
            let stop = |c: char| !reserved && matches!(c, '/' | '?' | '#');
            let longest = rest.find(stop).unwrap_or(rest.len());
            // Longest first, so a `{+path}` at the end takes the whole rest.
            let ends: Vec<usize> = rest[..longest].char_indices().map(|(i, c)| i + c.len_utf8()).collect();
            let mut found = false;
            for &end in ends.iter().rev() {
                if matches_from(parts, uri, part + 1, at + end, vars, dead) {
                    vars.insert(name.clone(), rest[..end].to_owned());
                    found = true;
                    break;
                }
            }
            found
        }
    };
    if !found {
        dead.insert((part, at));
    }
    found
}

/// A resource a skill offers ([`crate::skill::SkillBuilder::resource`]): a URI, or a URI template with
/// variables (`test://items/{id}`, `drive:///{+path}`), read by running `action` with the variables as its
/// params (percent-decoded). The action's output is the content: text, or the text at `text_at` (a JSON
/// pointer) in an object output, or content blocks (a binary resource is a blob resource block).
///
/// ```
/// use agentry::skill::Resource;
/// let file = Resource::new("drive:///{+path}", "drive", "fs.read")?.mime_type("text/plain").text_at("/content");
/// assert!(file.is_template());
/// assert_eq!(file.read_params("drive:///notes/a%20b.txt").unwrap()["path"], "notes/a b.txt");
/// assert_eq!(file.read_params("other:///x"), None);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Resource {
    /// The URI, or URI template.
    pub uri: String,
    /// A short name.
    pub name: String,
    /// What it holds.
    pub description: String,
    /// The content's MIME type, if known.
    pub mime_type: Option<String>,
    /// The action that reads it (one of the skill's own, with no side effects).
    pub action: ActionId,
    /// Where the text is in the action's output when it is an object (a JSON pointer such as `/content`).
    pub text_at: Option<String>,
    /// Values to offer when a client asks for completions of a variable.
    pub values: BTreeMap<String, Vec<String>>,
    parts: Vec<Part>,
}

/// Why a resource declaration is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResourceError {
    /// The URI template does not parse.
    #[error(transparent)]
    Template(#[from] TemplateError),
    /// The action is not an action id.
    #[error("resource `{uri}` names `{action}` as its action, which is not an action id: {message}")]
    Action {
        /// The resource.
        uri: String,
        /// The text given.
        action: String,
        /// Why it is not an id.
        message: String,
    },
}

impl Resource {
    /// A resource read by running `action` (an id such as `fs.read`).
    pub fn new(uri: impl Into<String>, name: impl Into<String>, action: &str) -> Result<Self, ResourceError> {
        let uri = uri.into();
        let parts = parse(&uri)?;
        let action = ActionId::new(action).map_err(|e| ResourceError::Action {
            uri: uri.clone(),
            action: action.to_owned(),
            message: e.to_string(),
        })?;
        Ok(Self {
            uri,
            name: name.into(),
            description: String::new(),
            mime_type: None,
            action,
            text_at: None,
            values: BTreeMap::new(),
            parts,
        })
    }

    /// Says what it holds.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    /// Sets the content's MIME type.
    pub fn mime_type(mut self, mime_type: impl Into<String>) -> Self {
        self.mime_type = Some(mime_type.into());
        self
    }

    /// Where the text is in an object output (a JSON pointer such as `/content`).
    pub fn text_at(mut self, pointer: impl Into<String>) -> Self {
        self.text_at = Some(pointer.into());
        self
    }

    /// Values a client is offered when it asks for completions of a variable.
    pub fn values<V: Into<String>>(mut self, variable: &str, values: impl IntoIterator<Item = V>) -> Self {
        self.values.entry(variable.to_owned()).or_default().extend(values.into_iter().map(Into::into));
        self
    }

    /// Whether the URI has variables (a template) rather than naming one resource.
    pub fn is_template(&self) -> bool {
        self.parts.iter().any(|p| matches!(p, Part::Variable { .. }))
    }

    /// The names of its variables, in order.
    pub fn variables(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::Variable { name, .. } => Some(name.as_str()),
            Part::Literal(_) => None,
        })
    }

    /// The action's params for reading `uri`: its variables, percent-decoded, as a JSON object; `None` when
    /// `uri` is not this resource (or a variable's value does not decode to UTF-8).
    pub fn read_params(&self, uri: &str) -> Option<serde_json::Map<String, serde_json::Value>> {
        // Matching backtracks over where each variable ends: a bound on the length bounds the work.
        if uri.len() > MAX_URI {
            return None;
        }
        let mut vars = BTreeMap::new();
        if !matches(&self.parts, uri, &mut vars) {
            return None;
        }
        vars.into_iter()
            .map(|(name, raw)| {
                let value = percent_encoding::percent_decode_str(&raw).decode_utf8().ok()?;
                // Decoding must not bring back what the variable refuses raw (`%2F` for `/`), nor a NUL.
                let simple =
                    self.parts.iter().any(|p| matches!(p, Part::Variable { name: n, reserved: false } if *n == name));
                let refused = |c: char| c == '\0' || (simple && matches!(c, '/' | '?' | '#'));
                if value.contains(refused) {
                    return None;
                }
                Some((name, serde_json::Value::String(value.into_owned())))
            })
            .collect()
    }

    /// The values offered for a variable that start with `prefix`.
    pub fn complete(&self, variable: &str, prefix: &str) -> Vec<String> {
        self.values
            .get(variable)
            .map(|values| values.iter().filter(|v| v.starts_with(prefix)).cloned().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A template of many variables each followed by the same literal, against a long URI that almost
    /// matches: a plain backtracking match tries a number of splits exponential in the variables; this one
    /// remembers what failed and ends (off the test's thread, so a hang fails instead of stalling).
    #[test]
    fn a_template_with_many_variables_matches_in_polynomial_time() {
        let template: String = (0..12).map(|i| format!("{{v{i}}}x")).collect::<String>() + "end";
        let item = Resource::new(format!("test://{template}"), "many", "a.read").unwrap();
        let uri = format!("test://{}", "x".repeat(400));
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = done.send(item.read_params(&uri));
        });
        let found = finished.recv_timeout(std::time::Duration::from_secs(60)).expect("the match ended");
        assert_eq!(found, None);
    }
    use proptest::prelude::*;

    fn resource(uri: &str) -> Resource {
        Resource::new(uri, "r", "x.read").unwrap()
    }

    #[test]
    fn malformed_templates_are_refused_with_the_reason() {
        for (bad, why) in [
            ("a://{x", "never closed"),
            ("a://x}", "never opened"),
            ("a://{}", "not a name"),
            ("a://{a b}", "not a name"),
            ("a://{x}{y}", "touch"),
            ("{x}{y}", "touch"),
            ("a://{x}/{x}", "twice"),
        ] {
            let err = Resource::new(bad, "r", "x.read").unwrap_err().to_string();
            assert!(err.contains(why), "{bad}: {err}");
        }
        assert!(matches!(Resource::new("a://b", "r", "not an id"), Err(ResourceError::Action { .. })));
    }

    #[test]
    fn simple_variables_stop_at_slashes_and_reserved_ones_do_not() {
        let item = resource("test://template/{id}/data");
        assert_eq!(item.read_params("test://template/123/data").unwrap()["id"], "123");
        assert_eq!(item.read_params("test://template/1/2/data"), None, "`{{id}}` takes no `/`");
        assert_eq!(item.read_params("test://template//data"), None, "a variable is never empty");
        assert_eq!(item.read_params("test://template/123/data/more"), None);
        assert_eq!(item.read_params("test://template/..%2F..%2Fetc/data"), None, "`%2F` is a `/` after all");
        assert_eq!(item.read_params("test://template/a%00b/data"), None, "no NUL");
        assert_eq!(item.read_params(&format!("test://template/{}/data", "x".repeat(MAX_URI))), None, "too long");
        let file = resource("drive:///{+path}");
        assert_eq!(file.read_params("drive:///a/../b").unwrap()["path"], "a/../b", "the action confines it");
        let deep = "a/".repeat(4000);
        assert_eq!(file.read_params(&format!("drive:///{deep}")).unwrap()["path"], deep.as_str(), "8 KiB is allowed");
        let longest = format!("drive:///{}", "a".repeat(MAX_URI - "drive:///".len()));
        assert!(file.read_params(&longest).is_some(), "a URI of exactly the bound is read");
        assert_eq!(file.read_params(&format!("{longest}a")), None, "one byte more is not");
        assert!(!resource("test://static").is_template());
        assert_eq!(resource("test://static").read_params("test://static"), Some(serde_json::Map::new()));
    }

    #[test]
    fn a_resource_keeps_what_it_was_built_with_and_completes_its_variables() {
        let files = resource("t://{kind}/{+path}")
            .description("Files")
            .mime_type("text/plain")
            .text_at("/text")
            .values("kind", ["docs", "data", "code"])
            .values("kind", ["dev"]);
        assert_eq!((files.name.as_str(), files.action.as_str()), ("r", "x.read"));
        assert_eq!(files.description, "Files");
        assert_eq!((files.mime_type.as_deref(), files.text_at.as_deref()), (Some("text/plain"), Some("/text")));
        assert_eq!(files.variables().collect::<Vec<_>>(), ["kind", "path"]);
        assert!(files.is_template());
        assert_eq!(files.complete("kind", "d"), ["docs", "data", "dev"]);
        assert!(files.complete("kind", "x").is_empty());
        assert!(files.complete("path", "").is_empty(), "a variable without values completes to nothing");
        let plain = resource("t://static");
        assert_eq!(
            (plain.description.as_str(), plain.mime_type.as_deref(), plain.text_at.as_deref()),
            ("", None, None)
        );
        assert_eq!(plain.variables().count(), 0);
        // A template that starts with a variable.
        let leading = resource("{name}.txt");
        assert_eq!(leading.read_params("notes.txt").unwrap()["name"], "notes");
        assert_eq!(leading.read_params("notes.md"), None);
    }

    proptest! {
        /// Filling a template and matching the result gives back the values (simple values have no `/`).
        #[test]
        fn a_filled_template_matches_with_its_values(a in "[a-z0-9 %]{1,8}", b in "[a-z0-9/._-]{1,12}") {
            let template = resource("t://{a}/x/{+b}");
            let encoded = a.replace('%', "%25").replace(' ', "%20");
            let params = template.read_params(&format!("t://{encoded}/x/{b}")).unwrap();
            prop_assert_eq!(params["a"].as_str(), Some(a.as_str()));
            prop_assert_eq!(params["b"].as_str(), Some(b.as_str()));
        }
    }
}
