//! The policy declared in the `.proto` (humus-build) and with
//! `#[humus::client]` reaches each method's descriptor, and both
//! declarations of the same policy give the same descriptors.

use humus::circuit::Outcome;
use humus::grpc::client::{Classification, CodeRule, Method, RpcKind};
use humus::retry::Verdict;
use humus_tests::pb::ledger::v1::{ledger_humus, plain_ledger_humus};
use tonic::Code;

/// Issue 5's example, declared in Rust over the unannotated service.
#[humus::client(service = plain_ledger_humus)]
pub trait Ledger {
    /// Charge is never sent twice.
    #[humus(never_retry)]
    fn charge();
    /// A write race is over by the next attempt.
    #[humus(classify(Aborted => (Retry, Success)))]
    fn transfer();
}

fn classify_balance(
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

/// Every option at once, over the annotated service.
#[humus::client(service = ledger_humus, policy = Everything)]
pub trait Custom {
    #[humus(classify_fn = classify_balance)]
    #[humus(classify(Unavailable => (Retry, Failure), NotFound => (Success, Ignored)))]
    fn balance();
    #[humus(classify(Aborted => (Stop, Failure)))]
    fn charge();
    #[humus(never_retry)]
    fn entries();
    fn sync();
}

const ABORTED_RETRY: CodeRule = CodeRule {
    code: Code::Aborted,
    retry: Verdict::Retry,
    breaker: Outcome::Success,
};

#[test]
fn the_proto_policy_reaches_the_descriptors() {
    let transfer: &Method = ledger_humus::LedgerProtoClient::TRANSFER;
    assert_eq!(transfer.full_name, "/ledger.v1.Ledger/Transfer");
    assert_eq!(transfer.point, "grpc:ledger.v1.Ledger/Transfer");
    assert_eq!(transfer.kind, RpcKind::Unary);
    assert!(!transfer.policy.never_retry);
    assert_eq!(transfer.policy.table, &[ABORTED_RETRY]);
    assert!(transfer.policy.classify.is_none());

    let charge = ledger_humus::LedgerProtoClient::CHARGE;
    assert!(charge.policy.never_retry);
    assert!(charge.policy.table.is_empty());

    let balance = ledger_humus::LedgerProtoClient::BALANCE;
    assert!(!balance.policy.never_retry);
    assert!(balance.policy.table.is_empty());
}

#[test]
fn each_kind_is_known() {
    assert_eq!(
        ledger_humus::LedgerProtoClient::ENTRIES.kind,
        RpcKind::ServerStreaming
    );
    assert_eq!(
        ledger_humus::LedgerProtoClient::IMPORT.kind,
        RpcKind::ClientStreaming
    );
    assert_eq!(
        ledger_humus::LedgerProtoClient::SYNC.kind,
        RpcKind::Streaming
    );
    assert_eq!(
        ledger_humus::LedgerProtoClient::SYNC.full_name,
        "/ledger.v1.Ledger/Sync"
    );
    assert_eq!(
        ledger_humus::LedgerProtoClient::SYNC.point,
        "grpc:ledger.v1.Ledger/Sync"
    );
}

#[test]
fn the_generated_client_calls_with_the_proto_policy() {
    let methods = ledger_humus::LedgerProtoClient::METHODS;
    assert_eq!(methods.len(), 6);
    let transfer = ledger_humus::LedgerProtoClient::TRANSFER;
    assert_eq!(transfer.policy.table, &[ABORTED_RETRY]);
    assert!(ledger_humus::LedgerProtoClient::CHARGE.policy.never_retry);
}

#[test]
fn the_attribute_declares_the_same_policy_as_the_proto() {
    let from_proto = ledger_humus::LedgerProtoClient::METHODS;
    let from_rust = LedgerHumusClient::METHODS;
    assert_eq!(from_proto.len(), from_rust.len());
    for (proto, rust) in from_proto.iter().zip(from_rust) {
        assert_eq!(
            proto.full_name.replace("Ledger/", ""),
            rust.full_name.replace("PlainLedger/", "")
        );
        assert_eq!(proto.kind, rust.kind);
        assert_eq!(
            proto.policy.never_retry, rust.policy.never_retry,
            "{}",
            rust.full_name
        );
        assert_eq!(proto.policy.table, rust.policy.table, "{}", rust.full_name);
        assert_eq!(
            proto.policy.classify.is_some(),
            rust.policy.classify.is_some()
        );
    }
    assert_eq!(
        LedgerHumusClient::CHARGE.point,
        "grpc:ledger.v1.PlainLedger/Charge"
    );
}

#[test]
fn the_attribute_changes_only_what_it_sets() {
    // balance: a table and a function, over no .proto policy.
    let balance = CustomHumusClient::BALANCE;
    assert_eq!(
        balance.policy.table,
        &[
            CodeRule {
                code: Code::Unavailable,
                retry: Verdict::Retry,
                breaker: Outcome::Failure,
            },
            CodeRule {
                code: Code::NotFound,
                retry: Verdict::Success,
                breaker: Outcome::Ignored,
            },
        ]
    );
    let classify = balance.policy.classify.expect("the classify function");
    assert_eq!(
        classify("/ledger.v1.Ledger/Balance", None, &Default::default()).breaker,
        Outcome::Ignored
    );
    // charge: the .proto's never_retry stays; the table is the attribute's.
    assert!(CustomHumusClient::CHARGE.policy.never_retry);
    assert_eq!(
        CustomHumusClient::CHARGE.policy.table[0].retry,
        Verdict::Stop
    );
    // entries: never_retry added.
    assert!(CustomHumusClient::ENTRIES.policy.never_retry);
    // transfer: not named, so the .proto's table.
    assert_eq!(CustomHumusClient::TRANSFER.policy.table, &[ABORTED_RETRY]);
    // sync: named with nothing set.
    assert!(!CustomHumusClient::SYNC.policy.never_retry);
    assert!(CustomHumusClient::SYNC.policy.table.is_empty());
    let _: fn() -> Option<Everything> = || None;
}

/// A typed method's future is the humus client's own, boxed in
/// `humus::codegen::Call`: a named type, `Send` and `Unpin`, a pointer and
/// a vtable in size whatever the call's state (that state is on the heap).
#[tokio::test]
async fn a_typed_call_is_the_clients_future_boxed() {
    use humus::codegen::{Call, Streaming};
    use humus::grpc::client::{Client, Settings};
    use humus_tests::pb::ledger::v1::{Entry, TransferRequest, TransferResponse};
    fn send_unpin<T: Send + Unpin>(_: &T) {}

    let settings = Settings {
        addr: "127.0.0.1:1".to_owned(),
        ..Settings::default()
    };
    let client = Client::new(&humus::Setup::new(), settings).expect("valid settings");
    let typed = ledger_humus::LedgerProtoClient::new(client);

    let ours: Call<'_, TransferResponse> = typed.transfer(TransferRequest::default());
    send_unpin(&ours);
    assert_eq!(
        std::mem::size_of_val(&ours),
        2 * std::mem::size_of::<usize>()
    );

    let ours: Call<'_, Streaming<Entry>> = typed.sync(futures_util::stream::empty::<Entry>());
    send_unpin(&ours);
    assert_eq!(
        std::mem::size_of_val(&ours),
        2 * std::mem::size_of::<usize>()
    );
}

/// The descriptor set humus-build writes (`file_descriptor_set_path`)
/// carries the `.proto`'s `humus.v1.policy` options: the methods a stock
/// stub's channel reads from it are the generated descriptors' (kind,
/// point, `never_retry`, classify table), and the two lists join as one.
#[test]
fn humus_builds_descriptor_set_gives_a_channel_the_generated_policy() {
    use humus::grpc::client::Methods;
    let described =
        Methods::from_file_descriptor_set(humus_tests::pb::ledger::v1::FILE_DESCRIPTOR_SET)
            .expect("humus-build's set");
    let generated = ledger_humus::LedgerProtoClient::METHODS;
    for method in generated {
        let read = described.get(method.full_name).expect(method.full_name);
        assert_eq!(read.point, method.point);
        assert_eq!(read.kind, method.kind, "{}", method.full_name);
        assert_eq!(
            read.policy.never_retry, method.policy.never_retry,
            "{}",
            method.full_name
        );
        assert_eq!(
            read.policy.table, method.policy.table,
            "{}",
            method.full_name
        );
    }
    assert!(
        described
            .get(ledger_humus::LedgerProtoClient::CHARGE.full_name)
            .unwrap()
            .policy
            .never_retry
    );
    // Both services of the file: Ledger's six methods and PlainLedger's.
    assert_eq!(described.len(), 2 * generated.len());
    let joined = Methods::new(&[generated])
        .unwrap()
        .join(&described)
        .expect("described alike");
    assert_eq!(joined.len(), described.len());
}
