//! Compiles the walkthrough's protos with humus-build: protox (no system
//! `protoc`), prost's messages, tonic's stubs, and a typed humus client
//! per service (`ledger_humus::LedgerProtoClient`, `wallet_humus::WalletProtoClient`)
//! with each method's `humus.v1.policy` baked into its descriptor.

fn main() -> Result<(), humus_build::Error> {
    humus_build::configure().compile_protos(
        &[
            "proto/ledger/v1/ledger.proto",
            "proto/wallet/v1/wallet.proto",
        ],
        &["proto"],
    )
}
