//! A policy type written by hand, without `#[humus::client]`: names the
//! service's methods by their Rust names, each once, and its changes reach
//! the descriptors of the client made with it.
use humus::codegen::{Changes, Code, CodeRule, Outcome, Override, Verdict};
use humus::grpc::client::{Client, Settings};
use humus_tests::pb::ledger::v1::plain_ledger_humus;

enum MyPolicy {}

impl plain_ledger_humus::Policy for MyPolicy {
    const CHANGES: Changes = &[
        (
            "charge",
            Override {
                never_retry: true,
                ..Override::NONE
            },
        ),
        (
            "transfer",
            Override {
                table: Some(&[CodeRule {
                    code: Code::Aborted,
                    retry: Verdict::Retry,
                    breaker: Outcome::Success,
                }]),
                ..Override::NONE
            },
        ),
    ];
}

type MyClient = plain_ledger_humus::Client<MyPolicy>;

fn main() {
    assert!(MyClient::CHARGE.policy.never_retry);
    assert_eq!(MyClient::TRANSFER.policy.table.len(), 1);
    assert!(!MyClient::BALANCE.policy.never_retry);
    assert!(MyClient::BALANCE.policy.table.is_empty());
    assert_eq!(MyClient::METHODS.len(), 6);
    assert!(MyClient::METHODS[1].policy.never_retry);

    let settings = Settings {
        addr: "127.0.0.1:1".to_owned(),
        ..Settings::default()
    };
    let client = Client::new(&humus::Setup::new(), settings).expect("valid settings");
    let typed = MyClient::new(client.clone());
    let _: Client = typed.into();
    let typed: MyClient = client.into();
    let _ = typed.client();
}
