//! A binary of your own: the whole `agentry` command, with your agent types added (here the librarian). A
//! manifest can then say `type = "librarian"`.
//!
//! ```text
//! cargo run -p agentry-examples --example agentry_librarian -- run examples/librarian.toml
//! ```

fn main() -> std::process::ExitCode {
    agentry_cli::run_with(agentry_examples::librarian::registry())
}
