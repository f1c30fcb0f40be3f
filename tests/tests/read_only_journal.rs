//! The journal a running runtime gives out is read only: code that holds the runtime and tries to rewrite
//! what happened (forge a run's end, append an input) fails to compile (`tests/read_only_journal/`).

#[test]
fn the_journal_a_runtime_gives_out_cannot_be_written() {
    trybuild::TestCases::new().compile_fail("tests/read_only_journal/*.rs");
}
