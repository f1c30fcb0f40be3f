//! Every attribute mistake is a compile error that points at the attribute and says what is allowed.

#[test]
fn attribute_mistakes_fail_to_compile_with_clear_messages() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
