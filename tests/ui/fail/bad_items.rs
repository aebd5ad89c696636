//! Trait items that are not `fn name();`, and a method named twice.
use humus_tests::pb::ledger::v1::ledger_humus;

#[humus::client(service = ledger_humus)]
pub trait Ledger {
    fn charge(amount: u64);
    fn transfer() -> bool;
    fn balance() {}
    async fn entries();
    const SYNC: u8;
    type Import;
    #[inline]
    fn import();
    fn charge();
}

fn main() {}
