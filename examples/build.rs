//! Compiles the walkthrough's protos (ledger.v1 and wallet.v1) with protox,
//! so no system `protoc` is needed.
//!
//! STOPGAP until `humus-build` lands: tonic-prost-build's messages and
//! stubs only, no typed humus client (`src/ledger_client.rs` stands in).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos = [
        "proto/ledger/v1/ledger.proto",
        "proto/wallet/v1/wallet.proto",
    ];
    let fds = protox::compile(protos, ["proto"])?;
    tonic_prost_build::configure().compile_fds(fds)?;
    for proto in protos {
        println!("cargo:rerun-if-changed={proto}");
    }
    Ok(())
}
