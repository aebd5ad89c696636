//! A module that is not a humus client module: the package's module, where
//! the `.proto`'s generated code is included, rather than its service's.
use humus_tests::pb::ledger::v1;

#[humus::client(service = v1)]
pub trait Ledger {
    fn charge();
}

fn main() {}
