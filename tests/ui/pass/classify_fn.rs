//! A classify function: a path to a fn with the `ClassifyFn` signature, and
//! a closure that captures nothing.
use humus::codegen::{Classification, Outcome, Verdict};
use humus_tests::pb::ledger::v1::plain_ledger_humus;

mod policy {
    use super::*;

    pub fn never_counts(
        _method: &str,
        _status: Option<&tonic::Status>,
        _trailer: &tonic::metadata::MetadataMap,
    ) -> Classification {
        Classification {
            retry: Verdict::Stop,
            retry_after: None,
            breaker: Outcome::Ignored,
        }
    }
}

#[humus::client(service = plain_ledger_humus)]
pub trait Ledger {
    #[humus(classify_fn = policy::never_counts)]
    fn balance();
    #[humus(classify_fn = |_, _, _| Classification {
        retry: Verdict::Success,
        retry_after: None,
        breaker: Outcome::Success,
    })]
    fn entries();
}

fn main() {
    let trailer = Default::default();
    let balance = LedgerHumusClient::BALANCE.policy.classify.expect("set");
    assert_eq!(balance("/x/y", None, &trailer).breaker, Outcome::Ignored);
    let entries = LedgerHumusClient::ENTRIES.policy.classify.expect("set");
    assert_eq!(entries("/x/y", None, &trailer).retry, Verdict::Success);
    assert!(LedgerHumusClient::TRANSFER.policy.classify.is_none());
}
