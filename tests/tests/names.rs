//! Code generated for a `.proto` whose names could clash with
//! humus-build's own compiles, and every item stays reachable
//! (`proto/names/v1/`): RPCs named `Methods`, `Client`, `IntoClient`,
//! `Type`, `New` and `From`, and a message `LedgerHumus` whose module takes
//! the humus module's usual name.

use humus::codegen::{Method, RpcKind};
use humus::grpc::client::{Client, Settings};
use humus_tests::names::v1::maker::maker_humus::{self, MakerProtoClient};
use humus_tests::names::v1::{self, Req, ledger_humus_};

fn humus_client() -> Client {
    let settings = Settings {
        addr: "127.0.0.1:1".to_owned(),
        ..Settings::default()
    };
    Client::new(&humus::Setup::new(), settings).expect("valid settings")
}

#[humus::client(service = ledger_humus_)]
pub trait Ledger {
    /// The RPC named `Client`, with a table of its own.
    #[humus(classify(Unavailable => (Retry, Failure)))]
    fn client();
}

#[test]
fn prost_keeps_the_message_module_and_humus_takes_the_next_name() {
    // prost's module of message LedgerHumus: its nested type and oneof.
    let _inner = v1::ledger_humus::Inner {};
    let _kind = v1::ledger_humus::Kind::Number(1);
    // The humus module of Ledger.
    assert_eq!(
        <ledger_humus_::Client>::CLIENT.full_name,
        "/names.v1.Ledger/Client"
    );
}

#[tokio::test]
async fn rpcs_named_like_the_clients_items_are_the_rpcs() {
    // `new`, `client` and `into_client` are not taken by RPCs here; the
    // `client` and `into_client` methods are the RPCs.
    let ledger = ledger_humus_::LedgerProtoClient::from(humus_client());
    let _inner: &Client = ledger.as_ref();
    let rpcs = async {
        let _ = ledger.methods(Req {}).await;
        let _ = ledger.client(Req {}).await;
        let _ = ledger.into_client(Req {}).await;
        let _ = ledger.r#type(Req {}).await;
    };
    drop(rpcs);
    let _back: Client = ledger.into();

    // `METHODS` on the client is the descriptor of the RPC `Methods`; the
    // list is `Descriptors::METHODS`.
    let methods: &Method = ledger_humus_::LedgerProtoClient::METHODS;
    assert_eq!(methods.full_name, "/names.v1.Ledger/Methods");
    assert!(methods.policy.never_retry);
    use ledger_humus_::Descriptors;
    let all = ledger_humus_::ProtoPolicy::METHODS;
    let names: Vec<&str> = all.iter().map(|m| m.full_name).collect();
    assert_eq!(
        names,
        [
            "/names.v1.Ledger/Methods",
            "/names.v1.Ledger/Client",
            "/names.v1.Ledger/IntoClient",
            "/names.v1.Ledger/Type",
        ]
    );
    assert_eq!(<ledger_humus_::Client>::TYPE.kind, RpcKind::ServerStreaming);
}

#[test]
fn the_attribute_works_over_those_names() {
    let client = LedgerHumusClient::CLIENT;
    assert_eq!(client.full_name, "/names.v1.Ledger/Client");
    assert_eq!(client.policy.table.len(), 1);
    use ledger_humus_::Descriptors;
    assert_eq!(LedgerPolicy::METHODS.len(), 4);
    assert!(LedgerPolicy::METHODS[0].policy.never_retry);
}

#[tokio::test]
async fn an_rpc_named_new_leaves_from_to_build_the_client() {
    let maker: MakerProtoClient = humus_client().into();
    let rpcs = async {
        let _ = maker.new(maker_humus_req()).await;
        let _ = maker.from(maker_humus_req()).await;
        let _ = maker.client();
    };
    drop(rpcs);
    assert_eq!(
        <maker_humus::Client>::NEW.full_name,
        "/names.v1.maker.Maker/New"
    );
}

fn maker_humus_req() -> humus_tests::names::v1::maker::Req {
    humus_tests::names::v1::maker::Req {}
}

/// A policy type written by hand changes the RPC `Type` by its Rust name
/// without `r#`, as `CHANGES` names methods: the check of its names
/// accepts it (a client is made), and the change applies.
#[test]
fn a_hand_written_policy_names_a_keyword_rpc_without_r_hash() {
    use humus::codegen::{Changes, Override};
    enum Keyword {}
    impl ledger_humus_::Policy for Keyword {
        const CHANGES: Changes = &[(
            "type",
            Override {
                never_retry: true,
                ..Override::NONE
            },
        )];
    }
    let ledger = ledger_humus_::Client::<Keyword>::from(humus_client());
    assert!(ledger_humus_::Client::<Keyword>::TYPE.policy.never_retry);
    assert!(!ledger_humus_::Client::<Keyword>::CLIENT.policy.never_retry);
    let _back: Client = ledger.into();
}
