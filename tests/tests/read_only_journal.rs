//! The journal a running runtime gives out is read only: code that holds the runtime and tries to rewrite
//! what happened (forge a run's end, append an input), or that kept the store it gave the runtime and writes
//! through it, fails to compile (`tests/read_only_journal/`).

#[test]
fn the_journal_cannot_be_written_outside_the_runtime() {
    trybuild::TestCases::new().compile_fail("tests/read_only_journal/*.rs");
}
