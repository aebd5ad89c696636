//! The generated client imported where the attribute's was meant (both
//! were once `LedgerHumusClient`): the generated one is
//! `LedgerProtoClient`, with the `.proto`'s policy only, so the import is
//! an error rather than a client silently without the attribute's policy.
use humus_tests::pb::ledger::v1::ledger_humus::LedgerHumusClient;

fn main() {
    let _ = LedgerHumusClient::METHODS;
}
