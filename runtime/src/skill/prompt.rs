//! Prompts a skill offers: named messages with arguments, for a model or its user (an MCP server serves them as
//! MCP prompts). A prompt is plain data: getting one fills its arguments in and runs nothing.

use crate::action::Role;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// One argument of a [`Prompt`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptArgument {
    /// Its name, as `{name}` in the prompt's messages.
    pub name: String,
    /// What it is for.
    pub description: String,
    /// Whether getting the prompt without it is an error (a missing optional argument becomes empty text).
    pub required: bool,
    /// Values to offer when a client asks for completions of it.
    pub values: Vec<String>,
}

/// What a prompt message holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PromptContent {
    /// Text.
    Text(String),
    /// A content block in MCP's JSON shape (an image, audio, an embedded resource), such as the
    /// `agentry_skills::mcp::contract` helpers make.
    Block(Value),
}

/// One message of a [`Prompt`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptMessage {
    /// Who speaks.
    pub role: Role,
    /// What is said.
    pub content: PromptContent,
}

/// Why a prompt could not be got.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PromptError {
    /// A required argument was not given.
    #[error("prompt `{prompt}` needs argument `{argument}`; expected a value for each of {expected:?}")]
    Missing {
        /// The prompt.
        prompt: String,
        /// The argument left out.
        argument: String,
        /// The required arguments.
        expected: Vec<String>,
    },
    /// An argument the prompt does not take was given.
    #[error("prompt `{prompt}` has no argument `{argument}`; expected one of {expected:?}")]
    Unknown {
        /// The prompt.
        prompt: String,
        /// The argument given.
        argument: String,
        /// The arguments it takes.
        expected: Vec<String>,
    },
}

/// A prompt a skill offers ([`crate::skill::SkillBuilder::prompt`]): a name, a description, arguments, and the
/// messages, where `{argument}` stands for an argument's value.
///
/// ```
/// use agentry::skill::{Prompt, PromptContent};
/// use std::collections::BTreeMap;
/// let review = Prompt::new("code.review", "Reviews a change.")
///     .argument("change", "The diff to review", true)
///     .argument("focus", "What to look at most", false)
///     .values("focus", ["security", "performance", "style"])
///     .user("Review this change, looking most at {focus}:\n{change}");
/// let given = BTreeMap::from([("change".to_owned(), "+ x = 1".to_owned()), ("focus".to_owned(), "style".to_owned())]);
/// let messages = review.render(&given)?;
/// assert_eq!(messages[0].content, PromptContent::Text("Review this change, looking most at style:\n+ x = 1".into()));
/// assert_eq!(review.complete("focus", "s"), ["security", "style"]);
/// # Ok::<(), agentry::skill::PromptError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prompt {
    /// Its name, unique among the prompts an agent offers (`<skill>.<name>` keeps it so).
    pub name: String,
    /// What it is for.
    pub description: String,
    /// Its arguments, in order.
    pub arguments: Vec<PromptArgument>,
    /// Its messages, in order.
    pub messages: Vec<PromptMessage>,
}

impl Prompt {
    /// A prompt with no arguments and no messages yet.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        Self { name: name.into(), description: description.into(), arguments: Vec::new(), messages: Vec::new() }
    }

    /// Adds an argument.
    pub fn argument(mut self, name: impl Into<String>, description: impl Into<String>, required: bool) -> Self {
        self.arguments.push(PromptArgument {
            name: name.into(),
            description: description.into(),
            required,
            values: Vec::new(),
        });
        self
    }

    /// Values a client is offered when it asks for completions of an argument (added earlier).
    pub fn values<V: Into<String>>(mut self, argument: &str, values: impl IntoIterator<Item = V>) -> Self {
        if let Some(arg) = self.arguments.iter_mut().find(|a| a.name == argument) {
            arg.values.extend(values.into_iter().map(Into::into));
        }
        self
    }

    /// Adds a user message of text.
    pub fn user(self, text: impl Into<String>) -> Self {
        self.message(Role::User, PromptContent::Text(text.into()))
    }

    /// Adds an assistant message of text.
    pub fn assistant(self, text: impl Into<String>) -> Self {
        self.message(Role::Assistant, PromptContent::Text(text.into()))
    }

    /// Adds a message.
    pub fn message(mut self, role: Role, content: PromptContent) -> Self {
        self.messages.push(PromptMessage { role, content });
        self
    }

    /// The messages with the arguments filled in: each `{name}` of a declared argument becomes its value (an
    /// optional one not given becomes empty text), in text and in every string of a block. Values are put in
    /// once and never read again, so a value that holds `{other}` stays as it is. Other braces are left alone.
    pub fn render(&self, given: &BTreeMap<String, String>) -> Result<Vec<PromptMessage>, PromptError> {
        let names = || self.arguments.iter().map(|a| a.name.clone()).collect::<Vec<_>>();
        if let Some(unknown) = given.keys().find(|k| !self.arguments.iter().any(|a| &a.name == *k)) {
            return Err(PromptError::Unknown {
                prompt: self.name.clone(),
                argument: unknown.clone(),
                expected: names(),
            });
        }
        if let Some(missing) = self.arguments.iter().find(|a| a.required && !given.contains_key(&a.name)) {
            let expected = self.arguments.iter().filter(|a| a.required).map(|a| a.name.clone()).collect();
            return Err(PromptError::Missing { prompt: self.name.clone(), argument: missing.name.clone(), expected });
        }
        let value_of = |name: &str| {
            self.arguments.iter().any(|a| a.name == name).then(|| given.get(name).map_or("", String::as_str))
        };
        let fill = |text: &str| fill(text, &value_of);
        Ok(self
            .messages
            .iter()
            .map(|m| PromptMessage {
                role: m.role,
                content: match &m.content {
                    PromptContent::Text(text) => PromptContent::Text(fill(text)),
                    PromptContent::Block(block) => PromptContent::Block(fill_strings(block, &fill)),
                },
            })
            .collect())
    }

    /// The values offered for an argument that start with `prefix` (none for an unknown argument).
    pub fn complete(&self, argument: &str, prefix: &str) -> Vec<String> {
        self.arguments
            .iter()
            .find(|a| a.name == argument)
            .map(|a| a.values.iter().filter(|v| v.starts_with(prefix)).cloned().collect())
            .unwrap_or_default()
    }
}

/// `text` with each `{name}` that `value_of` knows replaced, in one pass.
fn fill<'a>(text: &str, value_of: &dyn Fn(&str) -> Option<&'a str>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find('}').and_then(|close| value_of(&after[..close]).map(|v| (close, v))) {
            Some((close, value)) => {
                out.push_str(value);
                rest = &after[close + 1..];
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// `value` with `fill` applied to every string in it (object keys stay as they are).
fn fill_strings(value: &Value, fill: &dyn Fn(&str) -> String) -> Value {
    match value {
        Value::String(s) => Value::String(fill(s)),
        Value::Array(items) => Value::Array(items.iter().map(|v| fill_strings(v, fill)).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), fill_strings(v, fill))).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn args(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    fn greeting() -> Prompt {
        Prompt::new("greet", "Greets.").argument("who", "Whom", true).argument("mood", "How", false)
    }

    #[test]
    fn required_missing_and_unknown_arguments_are_typed_errors() {
        let prompt = greeting().user("Hello {who}{mood}");
        assert!(matches!(prompt.render(&args(&[])), Err(PromptError::Missing { argument, .. }) if argument == "who"));
        let unknown = prompt.render(&args(&[("who", "a"), ("whom", "b")]));
        assert!(matches!(unknown, Err(PromptError::Unknown { argument, .. }) if argument == "whom"));
        let filled = prompt.render(&args(&[("who", "Ann")])).unwrap();
        assert_eq!(filled[0].content, PromptContent::Text("Hello Ann".into()), "a missing optional one is empty");
    }

    #[test]
    fn blocks_are_filled_in_every_string() {
        let block = serde_json::json!({"type": "resource", "resource": {"uri": "{who}", "text": "x {mood} {other}"}});
        let prompt = greeting().message(Role::User, PromptContent::Block(block));
        let filled = prompt.render(&args(&[("who", "test://a"), ("mood", "calm")])).unwrap();
        let expected =
            serde_json::json!({"type": "resource", "resource": {"uri": "test://a", "text": "x calm {other}"}});
        assert_eq!(filled[0].content, PromptContent::Block(expected));
    }

    #[test]
    fn completions_offer_the_values_of_that_argument_that_start_with_the_prefix() {
        let prompt = greeting()
            .values("mood", ["calm", "cheerful", "angry"])
            .values("who", ["Ann"])
            .values("mood", ["cross"])
            .values("nobody", ["x"]);
        assert_eq!(prompt.complete("mood", "c"), ["calm", "cheerful", "cross"]);
        assert_eq!(prompt.complete("mood", ""), ["calm", "cheerful", "angry", "cross"]);
        assert_eq!(prompt.complete("who", "A"), ["Ann"]);
        assert!(prompt.complete("mood", "z").is_empty());
        assert!(prompt.complete("nobody", "").is_empty(), "an argument it does not take has no values");
        assert_eq!(prompt.arguments[0].values, ["Ann"], "values go to the argument they name, and to no other");
    }

    proptest! {
        /// A value is put in as it is, never read again for placeholders, and text without placeholders is kept.
        #[test]
        fn values_are_put_in_once_and_as_they_are(who in ".*", mood in ".*", text in "[^{]*") {
            let prompt = greeting().user(format!("{text}<{{who}}|{{mood}}>{text}"));
            let filled = prompt.render(&args(&[("who", &who), ("mood", &mood)])).unwrap();
            prop_assert_eq!(&filled[0].content, &PromptContent::Text(format!("{text}<{who}|{mood}>{text}")));
        }
    }
}
