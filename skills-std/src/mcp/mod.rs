//! MCP both ways. [`McpClient`] connects to any MCP server (a child process on stdio, or streamable HTTP) and
//! makes its tools a skill, `mcp.<server>`, with one action per tool (`mcp.<server>.<tool>`) that agents mount
//! like any other; the skill follows the server's `tools/list_changed`, and the client reconnects when the
//! server goes away. [`serve_stdio`], [`serve_io`], [`serve_http`] and [`http_router`] serve the actions
//! mounted on an agent as MCP tools, through the agent's gate.
//!
//! The MCP SDK (`rmcp`) is used in `adapter.rs` only; [`contract`] holds the mapping between MCP tools and
//! action contracts as plain data.

mod adapter;
mod client;
pub mod contract;
mod error;
mod oauth;
pub mod offers;
pub mod schema_guard;
mod serve;

pub use adapter::REFUSED;
pub use client::{
    ClientStatus, DEFAULT_CONNECT_TIMEOUT, ELICITATION, McpClient, McpServer, McpTransport, Protocol, Reconnect,
    SUPPORTED_PROTOCOL_VERSIONS, Setting, SkippedTool, tool_rule_matches,
};
pub use contract::Trust;
pub use error::McpError;
pub use oauth::{Authorize, OAuth};
pub use serve::{Served, http_router, serve_http, serve_io, serve_stdio};
