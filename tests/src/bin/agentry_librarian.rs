//! The `agentry` command with the librarian registered, for the command-line tests (the example
//! `agentry_librarian` is the same binary, for users).

fn main() -> std::process::ExitCode {
    agentry_cli::run_with(agentry_examples::librarian::registry())
}
