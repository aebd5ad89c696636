//! Bad attribute arguments.
use humus_tests::pb::ledger::v1::ledger_humus;

#[humus::client]
pub trait NoService {}

#[humus::client(service = "ledger_humus")]
pub trait StringService {}

#[humus::client(service = ledger_humus, servce = ledger_humus, policy = a::b)]
pub trait Typo {}

#[humus::client(service = ledger_humus)]
pub struct NotATrait;

#[humus::client(service = ledger_humus)]
pub trait Generic<T>: Clone {}

fn main() {}
