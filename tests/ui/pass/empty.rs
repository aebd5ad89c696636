//! A trait naming no method: the `.proto`'s policy throughout.
use humus_tests::pb::ledger::v1::ledger_humus;

#[humus::client(service = ledger_humus)]
pub trait Ledger {}

fn main() {
    for (ours, proto) in LedgerHumusClient::METHODS.iter().zip(ledger_humus::LedgerProtoClient::METHODS) {
        assert_eq!(ours.full_name, proto.full_name);
        assert_eq!(ours.policy.never_retry, proto.policy.never_retry);
        assert_eq!(ours.policy.table, proto.policy.table);
    }
}
