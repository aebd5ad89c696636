//! The client's and the server's settings deserialise with serde (so
//! `envy`, `figment` or `config` read them), durations in humantime form;
//! the checks run after deserialising, and name the field.

use std::time::Duration;

use humus::Setup;
use humus::grpc::client::{self, Client};
use humus::grpc::server::{self, Server};

#[test]
fn client_settings_deserialise_with_humantime_durations_over_the_defaults() {
    let settings: client::Settings = serde_json::from_str(
        r#"{
            "addr": "carts:9090",
            "timeout": "250ms",
            "max_attempts": 5,
            "backoff_base": "10ms",
            "backoff_max": "1m30s",
            "retry_budget": {"max_tokens": 20, "token_ratio": 0.5},
            "breaker": {"window": 10, "probes": 2, "open_for": "3s", "probe_timeout": "30s"},
            "forward_scenario": true
        }"#,
    )
    .unwrap();
    assert_eq!(settings.addr, "carts:9090");
    assert_eq!(settings.timeout, Duration::from_millis(250));
    assert_eq!(settings.max_attempts, 5);
    assert_eq!(settings.backoff_base, Duration::from_millis(10));
    assert_eq!(settings.backoff_max, Duration::from_secs(90));
    assert_eq!(settings.retry_budget.max_tokens, 20);
    assert_eq!(settings.breaker.open_for, Duration::from_secs(3));
    assert_eq!(settings.breaker.probes, 2);
    assert!(settings.forward_scenario);

    // What is not given keeps its default; what is set in code is skipped.
    let only: client::Settings = serde_json::from_str(r#"{"addr": "carts:9090"}"#).unwrap();
    let d = client::Settings::default();
    assert_eq!(only.timeout, d.timeout);
    assert_eq!(only.breaker, d.breaker);
    assert!(only.tls.is_none());
    assert!(Client::new(&Setup::new(), only).is_ok());
}

#[test]
fn a_bad_value_names_its_field() {
    let err = serde_json::from_str::<client::Settings>(r#"{"timeout": "soon"}"#)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("soon") || err.contains("duration"), "{err}");
    let err = serde_json::from_str::<client::Settings>(r#"{"breaker": {"window": 1}}"#)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("probes") || err.contains("missing field"),
        "{err}"
    );

    // The checks run after deserialising, and name every bad field.
    let settings: client::Settings =
        serde_json::from_str(r#"{"addr": "dns:///carts:9090", "timeout": "0s"}"#).unwrap();
    let err = Client::new(&Setup::new(), settings).unwrap_err();
    assert_eq!(err.fields().collect::<Vec<_>>(), ["addr", "timeout"]);
}

#[test]
fn server_settings_deserialise_and_their_checks_run_after() {
    let settings: server::Settings = serde_json::from_str(
        r#"{"addr": ":8443", "max_connection_age": "1m", "max_connection_age_grace": "10s", "shutdown_grace": "30s"}"#,
    )
    .unwrap();
    assert_eq!(settings.max_connection_age, Some(Duration::from_secs(60)));
    assert_eq!(settings.shutdown_grace, Duration::from_secs(30));
    assert!(Server::new(&Setup::new(), settings).is_ok());

    let settings: server::Settings =
        serde_json::from_str(r#"{"addr": "", "max_connection_age": "0s"}"#).unwrap();
    let err = Server::new(&Setup::new(), settings).unwrap_err();
    assert_eq!(
        err.fields().collect::<Vec<_>>(),
        ["addr", "max_connection_age"]
    );
}

#[test]
fn settings_read_from_environment_variables_with_envy() {
    let vars = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect::<Vec<_>>()
    };
    // Variables of other parts of the service share the prefix: ignored.
    let ledger: client::Settings = envy::prefixed("LEDGER_")
        .from_iter(vars(&[
            ("LEDGER_ADDR", "ledger:50051"),
            ("LEDGER_TIMEOUT", "2s"),
            ("LEDGER_MAX_ATTEMPTS", "5"),
            ("LEDGER_FORWARD_SCENARIO", "true"),
            ("LEDGER_LISTEN_ADDR", "127.0.0.1:50051"),
        ]))
        .unwrap();
    assert_eq!(ledger.addr, "ledger:50051");
    assert_eq!(ledger.timeout, Duration::from_secs(2));
    assert_eq!(ledger.max_attempts, 5);
    assert!(ledger.forward_scenario);

    let api: server::Settings = envy::prefixed("GRPC_")
        .from_iter(vars(&[
            ("GRPC_ADDR", ":8443"),
            ("GRPC_MAX_CONNECTION_AGE", "1m"),
            ("GRPC_SHUTDOWN_GRACE", "30s"),
        ]))
        .unwrap();
    assert_eq!(api.addr, ":8443");
    assert_eq!(api.max_connection_age, Some(Duration::from_secs(60)));
    assert_eq!(api.max_connection_age_grace, None);
    assert_eq!(api.shutdown_grace, Duration::from_secs(30));

    // A bad value's error says what is wrong with it (a loader that keeps
    // the path, such as figment, puts the key in front).
    let err = envy::prefixed("LEDGER_")
        .from_iter::<_, client::Settings>(vars(&[("LEDGER_TIMEOUT", "soon")]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("\"soon\", expected a duration"), "{err}");
}
