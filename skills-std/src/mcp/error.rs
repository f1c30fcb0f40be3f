//! What can go wrong connecting to an MCP server or serving one.

/// Why an MCP connection or server could not be set up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpError {
    /// The server's name cannot be part of a skill id.
    #[error("MCP server name `{name}` cannot name a skill: {reason}; expected ASCII letters, digits, `_` and `-`")]
    BadName {
        /// The rejected name.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The URL is not one the client can reach.
    #[error("MCP server `{server}` has URL `{url}`: {reason}")]
    BadUrl {
        /// The server.
        server: String,
        /// The rejected URL.
        url: String,
        /// What is wrong with it, and what was expected.
        reason: String,
    },
    /// The server's configuration cannot be used: a secret's variable is not set, a header cannot be sent, a
    /// secret would go in the clear, a certificate does not parse.
    #[error("MCP server `{server}` is misconfigured: {message}")]
    Config {
        /// The server.
        server: String,
        /// What is wrong, and what was expected.
        message: String,
    },
    /// The server asked for a token and none could be got.
    #[error("MCP server `{server}` needs authorization, which failed: {message}")]
    Authorization {
        /// The server.
        server: String,
        /// What went wrong.
        message: String,
    },
    /// The server's process could not be started.
    #[error("MCP server `{server}` could not be started with `{command}`: {message}")]
    Spawn {
        /// The server.
        server: String,
        /// The command.
        command: String,
        /// The system's message.
        message: String,
    },
    /// The initialize handshake failed.
    #[error("MCP server `{server}` did not complete the initialize handshake: {message}")]
    Handshake {
        /// The server.
        server: String,
        /// What went wrong.
        message: String,
    },
    /// The server's tools could not be listed.
    #[error("MCP server `{server}` could not list its tools: {message}")]
    ListTools {
        /// The server.
        server: String,
        /// What went wrong.
        message: String,
    },
    /// The skill made from the server's tools could not be built.
    #[error("the skill for MCP server `{server}` could not be built: {message}")]
    Skill {
        /// The server.
        server: String,
        /// The builder's message.
        message: String,
    },
    /// The client was closed.
    #[error("the client of MCP server `{0}` is closed")]
    Closed(String),
    /// Serving failed.
    #[error("serving MCP failed: {0}")]
    Serve(String),
}
