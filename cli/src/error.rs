//! What a command can fail with, and the exit code each failure gives (scripts rely on them; `docs/cli.md`
//! lists them).

use crate::manifest::diagnostic::ManifestError;
use std::process::ExitCode;

/// Exit codes: 0 success; 1 any other failure; 2 bad command line (clap's own); 3 the manifest is wrong; 4 the
/// run or call did not complete (refused, failed, denied); 5 the runtime or its data folder could not be
/// opened; 6 what was asked for does not exist (an agent, a run, a pending approval); 7 a check did not pass;
/// 130 stopped by Ctrl-C.
pub mod code {
    /// Everything went as asked.
    pub const OK: u8 = 0;
    /// A failure no other code names.
    pub const FAILURE: u8 = 1;
    /// The command line was wrong (clap exits with it).
    pub const USAGE: u8 = 2;
    /// The manifest (or a scenario) is wrong.
    pub const MANIFEST: u8 = 3;
    /// The action did not complete: refused, failed, denied or still waiting.
    pub const NOT_COMPLETED: u8 = 4;
    /// The runtime could not start, or its data folder could not be opened.
    pub const RUNTIME: u8 = 5;
    /// No such agent, run or pending approval.
    pub const NOT_FOUND: u8 = 6;
    /// A check did not pass (`agentry mcp validate` prints each).
    pub const CHECK_FAILED: u8 = 7;
    /// Stopped by Ctrl-C (after a clean shutdown).
    pub const INTERRUPTED: u8 = 130;
}

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The manifest has mistakes (each printed as a diagnostic).
    #[error("the manifest has {} mistake(s)", .0.len())]
    Manifest(Vec<ManifestError>),
    /// The runtime could not start.
    #[error("the runtime could not start: {0}")]
    Start(String),
    /// The runtime refused something.
    #[error("{0}")]
    Runtime(#[from] agentry::runtime::RuntimeError),
    /// Something asked for does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The action ran and did not complete.
    #[error("{0}")]
    NotCompleted(String),
    /// Bad input on the command line that clap could not catch (JSON params, say).
    #[error("{0}")]
    Usage(String),
    /// The scenario (`agentry sim`) has mistakes (each printed as a diagnostic).
    #[error("the scenario has {} mistake(s)", .0.len())]
    Scenario(Vec<ManifestError>),
    /// The simulator refused the scenario, or its table or plot could not be written.
    #[error("the simulation failed: {0}")]
    Simulation(#[from] agentry_sim::SimError),
    /// Checks did not pass (`agentry mcp validate` printed each).
    #[error("{failed} of {total} checks did not pass")]
    ChecksFailed {
        /// How many failed.
        failed: usize,
        /// How many were made.
        total: usize,
    },
    /// The cluster's database could not be read.
    #[error("the cluster's database: {0}")]
    Cluster(String),
    /// A file could not be read or written.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
}

impl CliError {
    /// The exit code for this failure.
    pub fn exit_code(&self) -> ExitCode {
        ExitCode::from(match self {
            Self::Manifest(_) => code::MANIFEST,
            Self::Start(_) => code::RUNTIME,
            Self::Runtime(
                agentry::runtime::RuntimeError::NoSuchAgent(_) | agentry::runtime::RuntimeError::NotAwaitingApproval(_),
            ) => code::NOT_FOUND,
            Self::Runtime(agentry::runtime::RuntimeError::NeedsApproval { .. }) => code::NOT_COMPLETED,
            Self::Runtime(_) => code::FAILURE,
            Self::NotFound(_) => code::NOT_FOUND,
            Self::NotCompleted(_) => code::NOT_COMPLETED,
            Self::Usage(_) => code::USAGE,
            Self::Io { .. } | Self::Cluster(_) => code::FAILURE,
            Self::ChecksFailed { .. } => code::CHECK_FAILED,
            Self::Scenario(_) => code::MANIFEST,
            Self::Simulation(_) => code::FAILURE,
        })
    }

    /// A file error, saying what was being done.
    pub fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let what = what.into();
        move |source| Self::Io { what, source }
    }
}
