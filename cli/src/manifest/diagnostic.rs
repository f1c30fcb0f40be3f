//! What is wrong in a manifest, said with the file, the line and the column, the line itself with the place
//! marked, and the closest valid key where one was misspelt: a `miette` diagnostic over the file's text.

use miette::{Diagnostic, GraphicalReportHandler, GraphicalTheme, LabeledSpan, NamedSource, SourceCode};
use std::fmt;
use std::path::Path;
use std::sync::Arc;

/// One thing wrong in one manifest file.
#[derive(Debug, Clone)]
pub struct ManifestError {
    /// What kind of mistake it is (the diagnostic's code, `manifest::unknown_key` ...).
    pub code: Code,
    /// What was wrong and what was expected.
    pub message: String,
    /// The file's name and text.
    pub source: Option<Arc<NamedSource<String>>>,
    /// Where in the file (bytes), if it is about a place.
    pub span: Option<std::ops::Range<usize>>,
    /// The short note at the place.
    pub label: String,
    /// What to do about it ("did you mean `command`?").
    pub help: Option<String>,
}

/// The kinds of mistakes a manifest can have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// The file could not be read.
    Unreadable,
    /// Not TOML, or a value of the wrong type.
    Syntax,
    /// A key the manifest does not have.
    UnknownKey,
    /// A skill no registry, MCP server or model provides.
    UnknownSkill,
    /// An agent type the binary does not register.
    UnknownAgentType,
    /// A model that `[models]` does not define.
    UnknownModel,
    /// A permission rule that matches no action of any skill.
    RuleMatchesNothing,
    /// Start skills that require each other in a circle.
    SkillCycle,
    /// A value of the right type that is still wrong (a duration, a pattern, a capability).
    BadValue,
    /// An MCP server that is neither a command nor a URL, or both.
    McpServer,
    /// A `.mcp.json` file that cannot be imported.
    McpJson,
}

impl Code {
    fn as_str(self) -> &'static str {
        match self {
            Self::Unreadable => "manifest::unreadable",
            Self::Syntax => "manifest::syntax",
            Self::UnknownKey => "manifest::unknown_key",
            Self::UnknownSkill => "manifest::unknown_skill",
            Self::UnknownAgentType => "manifest::unknown_agent_type",
            Self::UnknownModel => "manifest::unknown_model",
            Self::RuleMatchesNothing => "manifest::rule_matches_nothing",
            Self::SkillCycle => "manifest::skill_cycle",
            Self::BadValue => "manifest::bad_value",
            Self::McpServer => "manifest::mcp_server",
            Self::McpJson => "manifest::mcp_json",
        }
    }
}

/// A file's name and text, shared by the errors found in it.
pub type Source = Arc<NamedSource<String>>;

/// The file's text under its name as given.
pub fn source(path: &Path, text: &str) -> Source {
    Arc::new(NamedSource::new(path.display().to_string(), text.to_owned()))
}

impl ManifestError {
    /// A mistake at a place in a file.
    pub fn at(code: Code, source: &Source, span: std::ops::Range<usize>, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            source: Some(source.clone()),
            span: Some(span),
            label: "here".into(),
            help: None,
        }
    }

    /// A mistake that is about no place (a file that cannot be read).
    pub fn whole(code: Code, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), source: None, span: None, label: String::new(), help: None }
    }

    /// With a note at the place.
    #[must_use]
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.label = label.into();
        self
    }

    /// With advice.
    #[must_use]
    pub fn help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// `file:line:column` of the place, counted from 1.
    pub fn location(&self) -> Option<String> {
        let (source, span) = (self.source.as_ref()?, self.span.as_ref()?);
        let text = source.inner();
        let before = &text[..span.start.min(text.len())];
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        Some(format!("{}:{line}:{column}", source.name()))
    }

    /// The whole diagnostic as text, without colours: what `agentry check` prints.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let handler = GraphicalReportHandler::new_themed(GraphicalTheme::unicode_nocolor()).with_width(100);
        if handler.render_report(&mut out, self).is_err() {
            out = format!("error: {self}\n");
        }
        out
    }
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.location() {
            Some(at) => write!(f, "{at}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for ManifestError {}

impl Diagnostic for ManifestError {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new(self.code.as_str()))
    }

    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.help.as_ref().map(|h| Box::new(h) as Box<dyn fmt::Display>)
    }

    fn source_code(&self) -> Option<&dyn SourceCode> {
        self.source.as_deref().map(|s| s as &dyn SourceCode)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        let span = self.span.clone()?;
        let label = LabeledSpan::new_with_span(Some(self.label.clone()), span);
        Some(Box::new(std::iter::once(label)))
    }
}

pub use crate::suggest::closest;

/// A TOML or serde error in a file, as a diagnostic: an unknown key names the closest valid one.
pub fn from_toml(source: &Source, err: &toml::de::Error) -> ManifestError {
    let message = err.message().trim().to_owned();
    let span = err.span().unwrap_or(0..0);
    // serde's own words: "unknown field `x`, expected one of `a`, `b`" (or "expected `a`").
    if let Some(rest) = message.strip_prefix("unknown field `") {
        let (wrong, expected) = rest.split_once('`').unwrap_or((rest, ""));
        let valid: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
        let mut error =
            ManifestError::at(Code::UnknownKey, source, span, format!("unknown key `{wrong}`")).label("not a key here");
        error = match closest(wrong, valid.iter().copied()) {
            Some(best) => error.help(format!("did you mean `{best}`? (valid keys here: {})", list(&valid))),
            None => error.help(format!("valid keys here: {}", list(&valid))),
        };
        return error;
    }
    let error = ManifestError::at(Code::Syntax, source, span, message.clone()).label("this value");
    // serde's "invalid type: string \"ten\", expected u32", said in the manifest's words.
    match message.rsplit_once("expected ").map(|(_, wanted)| wanted.trim()) {
        Some(wanted) if message.starts_with("invalid type") => {
            let plain = match wanted {
                "u8" | "u16" | "u32" | "u64" | "usize" | "i32" | "i64" => "a whole number, without quotes",
                "f32" | "f64" => "a number, without quotes",
                "a boolean" => "`true` or `false`, without quotes",
                "a sequence" => "a list: `[\"a\", \"b\"]`",
                "a string" => "text in quotes",
                other if other.starts_with("struct") || other == "a map" => {
                    "a table: `{ key = value }` or a `[section]`"
                }
                _ => return error,
            };
            error.help(format!("expected {plain}"))
        }
        _ => error,
    }
}

fn list(keys: &[&str]) -> String {
    keys.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ")
}
