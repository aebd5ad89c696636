//! Generates the test crate's code with humus-build: the ledger protos of
//! the tests, and the real-world `.proto` files of Debian's `grpc-proto`
//! package (installed by `.ci/run`).
//!
//! Without `grpc-proto`, only the ledger protos are generated, and the
//! tests that need `grpc-proto` (`tests/grpc_proto.rs`, `tests/interop.rs`)
//! are compiled out; `tests/grpc_proto_missing.rs` then says so in one line,
//! or fails when `HUMUS_INTEROP=1` asks for every test to run. With it, the
//! build script sets `--cfg grpc_proto`.

use std::path::{Path, PathBuf};

/// Where Debian's `grpc-proto` package puts its files; the environment
/// variable `HUMUS_GRPC_PROTO` names another folder (to test the build
/// without the package, or with a copy elsewhere).
const GRPC_PROTO: &str = "/usr/share/grpc-proto";

/// The file dpkg rewrites whenever a package is installed.
const DPKG_STATUS: &str = "/var/lib/dpkg/status";

fn main() -> Result<(), humus_build::Error> {
    // With its encoded descriptor set (extension options included), which
    // `Methods::from_file_descriptor_set` reads (tests/descriptors.rs).
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    humus_build::configure()
        .file_descriptor_set_path(out_dir.join("ledger_descriptor_set.bin"))
        .compile_protos(&["proto/ledger/v1/ledger.proto"], &["proto"])?;
    // Names that could clash with humus-build's own (tests/names.rs).
    humus_build::configure().compile_protos(&["proto/names/v1/names.proto"], &["proto"])?;
    humus_build::configure()
        .build_client(false)
        .compile_protos(&["proto/names/v1/maker.proto"], &["proto"])?;

    println!("cargo::rustc-check-cfg=cfg(grpc_proto)");
    println!("cargo::rerun-if-env-changed=HUMUS_GRPC_PROTO");
    let root = std::env::var_os("HUMUS_GRPC_PROTO")
        .map_or_else(|| PathBuf::from(GRPC_PROTO), PathBuf::from);
    let test_proto = root.join("grpc/testing/test.proto");
    if !test_proto.exists() {
        // Build again once the package is installed: dpkg's status file
        // changes with every install. (Not the nearest existing folder:
        // cargo scans a folder it watches recursively, all of /usr/share.)
        if Path::new(DPKG_STATUS).is_file() {
            println!("cargo::rerun-if-changed={DPKG_STATUS}");
        }
        println!(
            "cargo::warning={} is missing: the grpc_proto and interop tests are compiled out \
             (apt-get install grpc-proto to run them)",
            root.display()
        );
        println!(
            "cargo::rustc-env=HUMUS_GRPC_PROTO_MISSING={}",
            root.display()
        );
        return Ok(());
    }
    println!("cargo::rustc-cfg=grpc_proto");
    humus_build::configure()
        .include_file("grpc_proto.rs")
        .compile_protos(
            &[
                test_proto,
                root.join("grpc/health/v1/health.proto"),
                root.join("grpc/reflection/v1/reflection.proto"),
                root.join("grpc/channelz/v1/channelz.proto"),
                root.join("grpc/examples/helloworld.proto"),
            ],
            &[root],
        )?;
    Ok(())
}
