//! Identifiers shared by every module: agents, skills and actions.
//!
//! Skill and action ids are dotted names (`arithmetic`, `arithmetic.add`, `mcp.github.create_issue`). They are
//! validated when made and when deserialized, so an id in hand is always well formed. Because tool names for
//! LLM providers may not contain dots, an action id turns into a tool name by writing each `.` as `__`; ids
//! never contain `__` themselves, so the mapping is reversible ([`ActionId::tool_name`],
//! [`ActionId::from_tool_name`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt;
// Ids are cloned into every event, record and context, so they share their text instead of copying it.
use std::sync::Arc;

/// The longest tool name LLM providers accept; an action id must fit in it once its dots are written `__`.
pub const MAX_TOOL_NAME_LEN: usize = 64;

/// Why a string is not a valid id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// The id was empty.
    #[error("{what} must not be empty; expected dotted segments such as `arithmetic.add`")]
    Empty {
        /// Which kind of id (`skill id`, `action id`).
        what: &'static str,
    },
    /// A dot-separated segment was empty (`a..b`, `.a`, `a.`).
    #[error("{what} `{id}` has an empty segment; expected non-empty segments separated by single dots")]
    EmptySegment {
        /// Which kind of id.
        what: &'static str,
        /// The rejected id.
        id: String,
    },
    /// A character outside letters, digits, `_` and `-`.
    #[error("{what} `{id}` contains {found:?}; expected only ASCII letters, digits, `_` and `-` between dots")]
    BadChar {
        /// Which kind of id.
        what: &'static str,
        /// The rejected id.
        id: String,
        /// The first offending character.
        found: char,
    },
    /// `__` is reserved: it stands for a dot in tool names, so no segment may contain `__` or start or end
    /// with `_`.
    #[error(
        "{what} `{id}` has `__` or a segment that starts or ends with `_`; `__` stands for a dot in tool names, \
         so expected single `_` inside segments only"
    )]
    Underscore {
        /// Which kind of id.
        what: &'static str,
        /// The rejected id.
        id: String,
    },
    /// The id is too long to become a tool name.
    #[error("{what} `{id}` is {len} characters as a tool name; expected at most {max}")]
    TooLong {
        /// Which kind of id.
        what: &'static str,
        /// The rejected id.
        id: String,
        /// Its length as a tool name.
        len: usize,
        /// The limit.
        max: usize,
    },
}

fn validate_dotted(what: &'static str, id: &str) -> Result<(), IdError> {
    if id.is_empty() {
        return Err(IdError::Empty { what });
    }
    for segment in id.split('.') {
        if segment.is_empty() {
            return Err(IdError::EmptySegment { what, id: id.to_owned() });
        }
        if let Some(found) = segment.chars().find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-')) {
            return Err(IdError::BadChar { what, id: id.to_owned(), found });
        }
    }
    let bad_underscore =
        id.contains("__") || id.split('.').any(|segment| segment.starts_with('_') || segment.ends_with('_'));
    if bad_underscore {
        return Err(IdError::Underscore { what, id: id.to_owned() });
    }
    let len = id.len() + id.matches('.').count();
    if len > MAX_TOOL_NAME_LEN {
        return Err(IdError::TooLong { what, id: id.to_owned(), len, max: MAX_TOOL_NAME_LEN });
    }
    Ok(())
}

macro_rules! dotted_id {
    ($(#[$doc:meta])* $name:ident, $what:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(Arc<str>);

        impl $name {
            /// Parses and validates an id.
            pub fn new(id: impl Into<String>) -> Result<Self, IdError> {
                let id = id.into();
                validate_dotted($what, &id)?;
                Ok(Self(id.into()))
            }

            /// The id as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = IdError;
            fn try_from(id: String) -> Result<Self, IdError> {
                Self::new(id)
            }
        }

        impl TryFrom<&str> for $name {
            type Error = IdError;
            fn try_from(id: &str) -> Result<Self, IdError> {
                Self::new(id)
            }
        }

        impl std::str::FromStr for $name {
            type Err = IdError;
            fn from_str(id: &str) -> Result<Self, IdError> {
                Self::new(id)
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0.to_string()
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                &*self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                &*self.0 == *other
            }
        }
    };
}

dotted_id!(
    /// A skill's globally unique id, such as `arithmetic` or `mcp.github`.
    SkillId,
    "skill id"
);

dotted_id!(
    /// An action's globally unique id, `skill.verb` style, such as `arithmetic.add`.
    ActionId,
    "action id"
);

impl ActionId {
    /// The name this action has as an LLM tool: the id with each `.` written as `__` (`arithmetic__add`).
    pub fn tool_name(&self) -> String {
        self.0.replace('.', "__")
    }

    /// The action id a tool name stands for: the inverse of [`ActionId::tool_name`].
    pub fn from_tool_name(name: &str) -> Result<Self, IdError> {
        Self::new(name.replace("__", "."))
    }
}

/// An agent's id: unique within a runtime. Any non-empty text; [`AgentId::random`] makes a UUID v7 one.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(try_from = "String", into = "String")]
pub struct AgentId(Arc<str>);

impl AgentId {
    /// Makes an agent id from non-empty text.
    pub fn new(id: impl Into<String>) -> Result<Self, IdError> {
        let id = id.into();
        if id.is_empty() {
            return Err(IdError::Empty { what: "agent id" });
        }
        Ok(Self(id.into()))
    }

    /// A fresh, time-ordered id for an agent nobody named. Reads the clock: call it at the edge, not in a
    /// pure handler.
    pub fn random() -> Self {
        Self(uuid::Uuid::now_v7().to_string().into())
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for AgentId {
    type Error = IdError;
    fn try_from(id: String) -> Result<Self, IdError> {
        Self::new(id)
    }
}

impl From<AgentId> for String {
    fn from(id: AgentId) -> String {
        id.0.to_string()
    }
}

impl fmt::Display for AgentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rejects_malformed_ids_with_a_reason() {
        assert!(matches!(ActionId::new(""), Err(IdError::Empty { .. })));
        assert!(matches!(ActionId::new("a..b"), Err(IdError::EmptySegment { .. })));
        assert!(matches!(ActionId::new("a.b "), Err(IdError::BadChar { found: ' ', .. })));
        assert!(matches!(SkillId::new("a__b"), Err(IdError::Underscore { .. })));
        assert!(matches!(SkillId::new("a_.b"), Err(IdError::Underscore { .. })));
        let long = "a".repeat(65);
        let err = ActionId::new(long).unwrap_err();
        assert!(err.to_string().contains("at most 64"), "{err}");
        assert!(AgentId::new("").is_err());
    }

    #[test]
    fn deserializing_validates() {
        let bad: Result<ActionId, _> = serde_json::from_str("\"a..b\"");
        assert!(bad.unwrap_err().to_string().contains("empty segment"));
        let good: ActionId = serde_json::from_str("\"arithmetic.add\"").unwrap();
        assert_eq!(good, "arithmetic.add");
    }

    proptest! {
        #[test]
        fn tool_names_map_back_to_their_ids(id in "[a-z]([a-z0-9-]|_[a-z]){0,6}(\\.[a-z0-9]([a-z0-9-]|_[a-z]){0,6}){0,3}") {
            let id = ActionId::new(id).unwrap();
            let name = id.tool_name();
            prop_assert!(name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'));
            prop_assert_eq!(ActionId::from_tool_name(&name).unwrap(), id);
        }
    }
}
