//! Compile-time checks of `#[humus::client]`: every accepted form compiles
//! and runs (`ui/pass`), every mistake is a compile error at the user's
//! token (`ui/fail/*.rs` with their `.stderr` snapshots).

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.pass("ui/pass/*.rs");
    cases.compile_fail("ui/fail/*.rs");
}
