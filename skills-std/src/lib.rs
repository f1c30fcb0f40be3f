//! The standard library of agentry skills. Each skill is a module of its own, written with the derive macros
//! exactly as a user would write theirs.

pub mod fs;
pub mod http;
pub mod jobs;
pub mod mcp;
pub mod memory;
pub mod system;
pub mod tls;

pub use fs::Files;
pub use http::Http;
pub use jobs::Jobs;
pub use memory::Memory;
pub use system::System;
