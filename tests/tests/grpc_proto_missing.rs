//! Stands in for the tests that need Debian's `grpc-proto` package
//! (`tests/grpc_proto.rs` and `tests/interop.rs`) when it is missing, so
//! `cargo test --workspace` passes with only the Rust toolchain: `build.rs`
//! then leaves `--cfg grpc_proto` unset and those tests compiled out. This
//! test says so in one line, or fails when `HUMUS_INTEROP=1` asks for every
//! test to run (`.ci/run` sets it, after installing the package).
#![cfg(not(grpc_proto))]

#[test]
fn grpc_proto_and_interop_are_skipped_without_grpc_proto() {
    let missing = env!("HUMUS_GRPC_PROTO_MISSING");
    let how = "apt-get install grpc-proto (and pip install grpcio grpcio-tools), then \
               HUMUS_INTEROP=1 cargo test -p humus-tests --test grpc_proto --test interop";
    if std::env::var("HUMUS_INTEROP").is_ok_and(|v| v == "1") {
        panic!("HUMUS_INTEROP=1, but Debian's grpc-proto is missing ({missing}): {how}");
    }
    humus_tests::skipped(
        "the grpc_proto and interop tests",
        format_args!("{missing} is missing; {how}"),
    );
}
