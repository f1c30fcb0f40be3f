//! The `agentry` command: run agents from a manifest (`agentry.toml`) and operate them.
//!
//! A binary of your own gets the whole command with your agent and skill types added:
//!
//! ```no_run
//! use agentry_cli::{Registry, run_with};
//!
//! fn main() -> std::process::ExitCode {
//!     // Registry::standard().agent::<MyAgent>().skill(my_skill()?) ...
//!     run_with(Registry::standard())
//! }
//! ```
//!
//! `docs/cli.md` describes every command and its exit codes; `docs/manifest.md` every key of the manifest.

mod args;
mod commands;
pub mod error;
pub mod manifest;
mod registry;
mod render;
mod replay;
pub mod scenario;
mod simulation;
pub mod start;
mod suggest;

pub use error::CliError;
pub use registry::{Registry, Tools};

use clap::Parser;
use std::process::ExitCode;

/// Parses the command line and runs the command with the skills and agent types of `registry`; returns the
/// exit code (see [`error::code`]).
pub fn run_with(registry: Registry) -> ExitCode {
    let cli = args::Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return ExitCode::from(error::code::FAILURE);
        }
    };
    let done = runtime.block_on(commands::dispatch(cli, registry));
    // What the command left running (a read of the terminal waiting for a line) does not hold the process.
    runtime.shutdown_background();
    match done {
        Ok(code) => code,
        Err(CliError::Manifest(errors)) => {
            for error in &errors {
                eprint!("{}", error.render());
            }
            eprintln!("error: the manifest has {} mistake(s)", errors.len());
            ExitCode::from(error::code::MANIFEST)
        }
        Err(CliError::Scenario(errors)) => {
            for error in &errors {
                eprint!("{}", error.render());
            }
            eprintln!("error: the scenario has {} mistake(s)", errors.len());
            ExitCode::from(error::code::MANIFEST)
        }
        Err(err) => {
            eprintln!("error: {err}");
            err.exit_code()
        }
    }
}
