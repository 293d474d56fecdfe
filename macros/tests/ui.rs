//! Compile-error tests for `#[tool]`: one mistake per file in `ui/fail/`,
//! with the expected message beside it; what must compile is in `ui/pass/`.
//! Bless new messages with `TRYBUILD=overwrite cargo test -p ferrobot-macros`.

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.pass("tests/ui/pass/*.rs");
    cases.compile_fail("tests/ui/fail/*.rs");
}
