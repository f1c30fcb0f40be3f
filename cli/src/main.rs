//! The `agentry` binary, with the standard skills and agent types.

fn main() -> std::process::ExitCode {
    agentry_cli::run_with(agentry_cli::Registry::standard())
}
