//! The one module that speaks the MCP SDK (`rmcp`, pinned in the workspace): connecting to a server and calling
//! its tools ([`client`]), and serving an agent to clients ([`server`]). Everything crosses this boundary as the
//! plain data of [`super::contract`], so a change in the SDK's API touches this module only.

mod caller;
mod client;
mod in_order;
mod server;
mod stream_ready;

pub(crate) use client::{
    Ask, CallError, Connection, Endpoint, FromServer, HttpOptions, OAuthFlow, ServerIdentity, connect,
};
pub use server::REFUSED;
pub(crate) use server::{Change, Identity, Refusal, ToolHost, http_router, serve_io};
