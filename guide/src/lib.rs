//! The guides, as tests: every page of `docs/` and the README, pulled into rustdoc, so that each of their Rust
//! blocks compiles (and runs, unless the block says why not) with `cargo test --workspace`. A change to the
//! API that breaks a guide fails the tests, and the guide is fixed in the same commit.
//!
//! Blocks that build on what their page defined earlier carry that setup as hidden lines (`# ` in the
//! Markdown), which rustdoc compiles and does not show.

#[doc = include_str!("../../README.md")]
pub mod readme {}

#[doc = include_str!("../../docs/getting-started.md")]
pub mod getting_started {}

#[doc = include_str!("../../docs/concepts.md")]
pub mod concepts {}

#[doc = include_str!("../../docs/durability.md")]
pub mod durability {}

#[doc = include_str!("../../docs/macros.md")]
pub mod macros {}

#[doc = include_str!("../../docs/mcp.md")]
pub mod mcp {}

#[doc = include_str!("../../docs/llm.md")]
pub mod llm {}

#[doc = include_str!("../../docs/simulation.md")]
pub mod simulation {}

#[doc = include_str!("../../docs/testing.md")]
pub mod testing {}

#[doc = include_str!("../../docs/performance.md")]
pub mod performance {}

#[doc = include_str!("../../docs/security.md")]
pub mod security {}

#[doc = include_str!("../../docs/cluster.md")]
pub mod cluster {}

/// The standard skills' pages.
pub mod skills {
    #[doc = include_str!("../../docs/skills/README.md")]
    pub mod index {}

    #[doc = include_str!("../../docs/skills/fs.md")]
    pub mod fs {}

    #[doc = include_str!("../../docs/skills/http.md")]
    pub mod http {}

    #[doc = include_str!("../../docs/skills/jobs.md")]
    pub mod jobs {}

    #[doc = include_str!("../../docs/skills/memory.md")]
    pub mod memory {}

    #[doc = include_str!("../../docs/skills/routines.md")]
    pub mod routines {}

    #[doc = include_str!("../../docs/skills/system.md")]
    pub mod system {}
}

#[doc(hidden)]
pub mod setup;

#[doc = include_str!("../../docs/manifest.md")]
pub mod manifest {}

#[doc = include_str!("../../docs/cli.md")]
pub mod cli {}
