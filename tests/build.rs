//! Generates the test crate's code with humus-build: the ledger protos of
//! the tests, and the real-world `.proto` files of Debian's `grpc-proto`
//! package (installed by `.ci/run`).

use std::path::Path;

/// Where Debian's `grpc-proto` package puts its files.
const GRPC_PROTO: &str = "/usr/share/grpc-proto";

fn main() -> Result<(), humus_build::Error> {
    humus_build::configure().compile_protos(&["proto/ledger/v1/ledger.proto"], &["proto"])?;

    let root = Path::new(GRPC_PROTO);
    assert!(
        root.join("grpc/testing/test.proto").exists(),
        "{GRPC_PROTO} is missing: install Debian's grpc-proto package (apt-get install grpc-proto)"
    );
    humus_build::configure()
        .include_file("grpc_proto.rs")
        .compile_protos(
            &[
                root.join("grpc/testing/test.proto"),
                root.join("grpc/health/v1/health.proto"),
                root.join("grpc/reflection/v1/reflection.proto"),
                root.join("grpc/channelz/v1/channelz.proto"),
                root.join("grpc/examples/helloworld.proto"),
            ],
            &[root.to_path_buf()],
        )?;
    Ok(())
}
