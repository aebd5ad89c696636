//! The client's and the server's settings deserialise with serde (so
//! `envy`, `figment` or `config` read them), durations in humantime form;
//! the checks run after deserialising, and name the field.

use std::time::Duration;

use humus::grpc::client::{self, Client};
use humus::grpc::server::{self, Server};
use humus::{Setup, app};

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

    // The checks run after deserialising, and name every bad field.
    let settings: client::Settings =
        serde_json::from_str(r#"{"addr": "dns:///carts:9090", "timeout": "0s"}"#).unwrap();
    let err = Client::new(&Setup::new(), settings).unwrap_err();
    assert_eq!(err.fields().collect::<Vec<_>>(), ["addr", "timeout"]);
}

fn json<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, app::Error> {
    app::deserialize(&mut serde_json::Deserializer::from_str(text))
}

#[test]
fn a_partial_section_keeps_the_default_of_every_field_it_does_not_give() {
    let d = client::Settings::default();
    let s: client::Settings = serde_json::from_str(
        r#"{"breaker": {"open_for": "3s"}, "retry_budget": {"token_ratio": 0.5}}"#,
    )
    .unwrap();
    assert_eq!(s.breaker.open_for, Duration::from_secs(3));
    assert_eq!(s.breaker.window, d.breaker.window);
    assert_eq!(s.breaker.probes, d.breaker.probes);
    assert_eq!(s.breaker.probe_timeout, d.breaker.probe_timeout);
    assert_eq!(s.retry_budget.token_ratio, 0.5);
    assert_eq!(s.retry_budget.max_tokens, d.retry_budget.max_tokens);
    // An empty section changes nothing.
    let s: client::Settings =
        serde_json::from_str(r#"{"breaker": {}, "retry_budget": {}}"#).unwrap();
    assert_eq!((s.breaker, s.retry_budget), (d.breaker, d.retry_budget));

    // The same from a TOML file, with its tables.
    let s: client::Settings = toml::from_str(
        r#"
        addr = "carts:9090"
        timeout = "2s"

        [breaker]
        window = 50

        [retry_budget]
        max_tokens = 20
        "#,
    )
    .unwrap();
    assert_eq!(s.timeout, Duration::from_secs(2));
    assert_eq!(s.breaker.window, 50);
    assert_eq!(s.breaker.open_for, d.breaker.open_for);
    assert_eq!(s.retry_budget.max_tokens, 20);
    assert_eq!(s.retry_budget.token_ratio, d.retry_budget.token_ratio);
    assert_eq!(app::check_client(&s).map_err(|e| e.to_string()), Ok(()));
}

#[test]
fn envy_sets_a_sections_fields_by_flat_variables() {
    let d = client::Settings::default();
    let s: client::Settings = envy::prefixed("LEDGER_")
        .from_iter(vars(&[
            ("LEDGER_ADDR", "ledger:50051"),
            ("LEDGER_BREAKER_OPEN_FOR", "3s"),
            ("LEDGER_BREAKER_WINDOW", "50"),
            ("LEDGER_RETRY_BUDGET_TOKEN_RATIO", "0.5"),
        ]))
        .unwrap();
    assert_eq!(s.breaker.open_for, Duration::from_secs(3));
    assert_eq!(s.breaker.window, 50);
    assert_eq!(s.breaker.probes, d.breaker.probes);
    assert_eq!(s.retry_budget.token_ratio, 0.5);
    assert_eq!(s.retry_budget.max_tokens, d.retry_budget.max_tokens);
    // The flat keys are read from files too; one field given both ways is
    // an error naming both.
    let s: client::Settings = serde_json::from_str(r#"{"breaker_probes": 2}"#).unwrap();
    assert_eq!(s.breaker.probes, 2);
    let err = json::<client::Settings>(r#"{"breaker": {"window": 5}, "breaker_window": 6}"#)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("breaker.window and breaker_window are one setting, given twice"),
        "{err}"
    );
}

#[test]
fn a_value_serde_refuses_is_a_settings_error_naming_its_path() {
    for (text, says) in [
        (
            r#"{"breaker": {"window": "many"}}"#,
            "breaker.window: invalid type: string \"many\", expected",
        ),
        (
            r#"{"timeout": "10 parsecs"}"#,
            "timeout: invalid value: string \"10 parsecs\", expected a duration such as \"2s\", \"250ms\" or \"1m30s\"",
        ),
        (
            r#"{"timeout": 2}"#,
            "timeout: invalid type: integer `2`, expected a duration such as \"2s\"",
        ),
        (
            r#"{"retry_budget": {"token_ratio": "half"}}"#,
            "retry_budget.token_ratio: invalid type: string \"half\"",
        ),
        (
            r#"{"breaker_open_for": "soon"}"#,
            "breaker_open_for: invalid value",
        ),
    ] {
        let err = json::<client::Settings>(text).unwrap_err();
        assert_eq!(err.kind(), app::ErrorKind::Settings, "{text}");
        assert_eq!(err.exit_code(), 78);
        assert!(err.to_string().starts_with(says), "{text}: {err}");
    }
    let err = app::deserialize::<server::Settings, _>(
        toml::Deserializer::parse("shutdown_grace = \"10 parsecs\"").unwrap(),
    )
    .unwrap_err();
    // toml's message has the line and column after the path.
    let text = err.to_string();
    assert!(text.starts_with("shutdown_grace: "), "{text}");
    assert!(text.contains("expected a duration"), "{text}");
    let read = err.get_ref().downcast_ref::<app::ReadError>().unwrap();
    assert_eq!(read.paths().collect::<Vec<_>>(), ["shutdown_grace"]);
}

#[test]
fn the_checks_name_a_sections_bad_field_by_its_path() {
    let s: client::Settings = serde_json::from_str(
        r#"{"addr": "carts:9090", "breaker": {"window": 0, "open_for": "0s"}, "retry_budget": {"token_ratio": 0.0001}}"#,
    )
    .unwrap();
    let err = app::check_client(&s).unwrap_err();
    assert_eq!(err.kind(), app::ErrorKind::Settings);
    let new = err.get_ref().downcast_ref::<client::NewError>().unwrap();
    assert_eq!(
        new.fields().collect::<Vec<_>>(),
        [
            "retry_budget.token_ratio",
            "breaker.window",
            "breaker.open_for"
        ]
    );
    let text = err.to_string();
    assert!(
        text.contains("breaker.window is 0, want 1 to 65536 results"),
        "{text}"
    );
    assert!(
        text.contains("retry_budget.token_ratio must have at most 3 decimal places"),
        "{text}"
    );
}

#[test]
fn an_unknown_key_in_a_section_is_refused_and_at_the_top_only_a_strict_read_refuses_it() {
    // In a section (which envy never reads): an error naming the keys.
    let err = json::<client::Settings>(r#"{"breaker": {"windw": 5}}"#)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("unknown field `windw`, expected one of `window`"),
        "{err}"
    );
    assert!(err.starts_with("breaker"), "{err}");
    let err = json::<client::Settings>(r#"{"retry_budget": {"ratio": 0.5}}"#)
        .unwrap_err()
        .to_string();
    assert!(err.contains("unknown field `ratio`"), "{err}");

    // At the top: ignored, so that envy reads one prefix other parts of the
    // service share...
    let lenient = json::<client::Settings>(r#"{"addr": "carts:9090", "timout": "2s"}"#).unwrap();
    assert_eq!(lenient.timeout, client::Settings::default().timeout);
    // ...and refused, named, by a strict read of a file.
    let err =
        app::deserialize_strict::<client::Settings, _>(&mut serde_json::Deserializer::from_str(
            r#"{"addr": "carts:9090", "timout": "2s", "retries": 2}"#,
        ))
        .unwrap_err();
    assert_eq!(err.kind(), app::ErrorKind::Settings);
    assert_eq!(
        err.to_string(),
        "unknown settings timout, retries (are they misspelled?)"
    );
    // One at the top and one in a section, which stops the read: both named.
    let err =
        app::deserialize_strict::<client::Settings, _>(&mut serde_json::Deserializer::from_str(
            r#"{"addr": "carts:9090", "timout": "1s", "retry_budget": {"max_tokns": 3}}"#,
        ))
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.starts_with("unknown setting timout (is it misspelled?); retry_budget.max_tokns: unknown field `max_tokns`"),
        "{text}"
    );
    let read = std::error::Error::source(&err)
        .and_then(|e| e.downcast_ref::<app::ReadError>())
        .unwrap();
    assert_eq!(
        read.paths().collect::<Vec<_>>(),
        ["timout", "retry_budget.max_tokns"]
    );
    let s = app::deserialize_strict::<server::Settings, _>(
        toml::Deserializer::parse("addr = \":8443\"\nshutdown_grace = \"30s\"").unwrap(),
    )
    .unwrap();
    assert_eq!(s.shutdown_grace, Duration::from_secs(30));
}

/// envy's own error names the key (without its prefix) of a number or a
/// bool it cannot parse, but not that of a value a field's own
/// deserialiser refuses (a duration), and envy's deserialiser is private,
/// so no wrapper can track the path. The pattern: on an error, read each
/// variable alone to find the one refused, and put its name in front.
fn from_env<T: serde::de::DeserializeOwned>(
    prefix: &str,
    vars: Vec<(String, String)>,
) -> Result<T, app::Error> {
    envy::prefixed(prefix)
        .from_iter::<_, T>(vars.clone())
        .map_err(|e| {
            let alone = |var: &(String, String)| {
                envy::prefixed(prefix)
                    .from_iter::<_, T>([var.clone()])
                    .is_err()
            };
            match vars
                .iter()
                .find(|var| var.0.starts_with(prefix) && alone(var))
            {
                Some((name, _)) => app::Error::settings(format!("{name}: {e}")),
                None => app::Error::settings(e),
            }
        })
}

#[test]
fn envys_error_for_a_bad_variable_is_turned_into_one_naming_it() {
    // What envy says by itself.
    let bare = envy::prefixed("LEDGER_")
        .from_iter::<_, client::Settings>(vars(&[("LEDGER_TIMEOUT", "10 parsecs")]))
        .unwrap_err()
        .to_string();
    assert!(!bare.contains("LEDGER_TIMEOUT"), "{bare}");

    let env = vars(&[
        ("LEDGER_ADDR", "ledger:50051"),
        ("LEDGER_TIMEOUT", "10 parsecs"),
        ("LEDGER_MAX_ATTEMPTS", "3"),
        ("OTHER", "x"),
    ]);
    let err = from_env::<client::Settings>("LEDGER_", env).unwrap_err();
    assert_eq!(err.exit_code(), 78);
    assert!(
        err.to_string().starts_with(
            "LEDGER_TIMEOUT: invalid value: string \"10 parsecs\", expected a duration"
        ),
        "{err}"
    );
    // A number envy cannot parse: envy names the key without its prefix.
    let err = from_env::<client::Settings>("LEDGER_", vars(&[("LEDGER_MAX_ATTEMPTS", "x")]))
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("LEDGER_MAX_ATTEMPTS: invalid digit"),
        "{err}"
    );
    // A section's field, by its flat variable.
    let err = from_env::<client::Settings>(
        "LEDGER_",
        vars(&[("LEDGER_BREAKER_PROBE_TIMEOUT", "later")]),
    )
    .unwrap_err()
    .to_string();
    assert!(err.starts_with("LEDGER_BREAKER_PROBE_TIMEOUT: "), "{err}");
}

#[test]
fn server_settings_deserialise_and_their_checks_run_after() {
    let settings: server::Settings = serde_json::from_str(
        r#"{"addr": ":8443", "plaintext": true, "max_connection_age": "1m", "max_connection_age_grace": "10s", "shutdown_grace": "30s"}"#,
    )
    .unwrap();
    assert_eq!(settings.max_connection_age, Some(Duration::from_secs(60)));
    assert_eq!(settings.shutdown_grace, Duration::from_secs(30));
    assert!(Server::new(&Setup::new(), settings).is_ok());

    let settings: server::Settings =
        serde_json::from_str(r#"{"addr": "", "plaintext": true, "max_connection_age": "0s"}"#)
            .unwrap();
    let err = Server::new(&Setup::new(), settings).unwrap_err();
    assert_eq!(
        err.fields().collect::<Vec<_>>(),
        ["addr", "max_connection_age"]
    );
}

fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn settings_read_from_environment_variables_with_envy() {
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
            ("GRPC_PLAINTEXT", "true"),
        ]))
        .unwrap();
    assert_eq!(api.addr, ":8443");
    assert!(api.plaintext);
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

#[test]
fn http_client_settings_deserialise_as_the_grpc_clients_do() {
    use humus::http::client as http_client;
    let settings: http_client::Settings = serde_json::from_str(
        r#"{
            "base_url": "https://rates:8443/v1",
            "timeout": "2s",
            "attempt_timeout": "250ms",
            "max_attempts": 4,
            "backoff_base": "10ms",
            "backoff_max": "1m30s",
            "retry_budget": {"max_tokens": 20, "token_ratio": 0.5},
            "breaker": {"window": 10, "probes": 2, "open_for": "3s", "probe_timeout": "30s"},
            "forward_scenario": true
        }"#,
    )
    .unwrap();
    assert_eq!(settings.base_url, "https://rates:8443/v1");
    assert_eq!(settings.timeout, Duration::from_secs(2));
    assert_eq!(settings.attempt_timeout, Duration::from_millis(250));
    assert_eq!(settings.max_attempts, 4);
    assert_eq!(settings.backoff_base, Duration::from_millis(10));
    assert_eq!(settings.backoff_max, Duration::from_secs(90));
    assert_eq!(settings.retry_budget.max_tokens, 20);
    assert_eq!(settings.breaker.open_for, Duration::from_secs(3));
    assert_eq!(settings.breaker.probes, 2);
    assert!(settings.forward_scenario);
    assert!(humus::app::check_http_client(&settings).is_ok());

    // What is not given keeps its default; what is set in code is never
    // read, even when given.
    let only: http_client::Settings = serde_json::from_str(
        r#"{"base_url": "http://rates:8080", "tls": "x", "classify": "x", "breaker_policy": "x"}"#,
    )
    .unwrap();
    let d = http_client::Settings::default();
    assert_eq!(only.timeout, d.timeout);
    assert_eq!(only.attempt_timeout, d.attempt_timeout);
    assert_eq!(only.breaker, d.breaker);
    assert!(only.tls.is_none());
    assert!(http_client::Client::new(&Setup::new(), only).is_ok());

    // A partial section keeps the default of each field it does not give;
    // a section's field is also a flat key (what envy sets); given both
    // ways, or misspelled in a section, it is an error.
    let partial: http_client::Settings =
        serde_json::from_str(r#"{"breaker": {"open_for": "3s"}, "retry_budget_token_ratio": 0.5}"#)
            .unwrap();
    assert_eq!(partial.breaker.open_for, Duration::from_secs(3));
    assert_eq!(partial.breaker.window, d.breaker.window);
    assert_eq!(partial.retry_budget.token_ratio, 0.5);
    assert_eq!(partial.retry_budget.max_tokens, d.retry_budget.max_tokens);
    let err = serde_json::from_str::<http_client::Settings>(
        r#"{"breaker": {"open_for": "3s"}, "breaker_open_for": "4s"}"#,
    )
    .err()
    .unwrap()
    .to_string();
    assert!(
        err.contains("breaker.open_for and breaker_open_for"),
        "{err}"
    );
    let err = serde_json::from_str::<http_client::Settings>(r#"{"breaker": {"windw": 3}}"#)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("windw"), "{err}");

    let err = serde_json::from_str::<http_client::Settings>(r#"{"attempt_timeout": "soon"}"#)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("soon"), "{err}");
}

#[test]
fn the_http_checks_run_after_deserialising_and_name_every_bad_field() {
    use humus::app::{ErrorKind, check_http_client};
    use humus::http::client as http_client;
    let settings: http_client::Settings = serde_json::from_str(
        r#"{"base_url": "http:///rates", "attempt_timeout": "0s", "max_attempts": 0}"#,
    )
    .unwrap();
    let err = check_http_client(&settings).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Settings);
    assert_eq!(err.exit_code(), 78);
    let text = err.to_string();
    assert!(
        text.contains("base_url \"http:///rates\" has no host"),
        "{text}"
    );
    assert!(text.contains("attempt_timeout is zero"), "{text}");
    assert!(text.contains("max_attempts is 0"), "{text}");

    // Client::new runs them again; its refusal with `?` is exit 1.
    let err: humus::app::Error = http_client::Client::new(&Setup::new(), settings)
        .unwrap_err()
        .into();
    assert_eq!(err.kind(), ErrorKind::Other);

    // envy reads them from the environment, as the gRPC client's.
    let rates: http_client::Settings = envy::prefixed("RATES_")
        .from_iter([
            (
                "RATES_BASE_URL".to_owned(),
                "http://rates:8080/v1".to_owned(),
            ),
            ("RATES_ATTEMPT_TIMEOUT".to_owned(), "300ms".to_owned()),
            ("RATES_BREAKER_OPEN_FOR".to_owned(), "2s".to_owned()),
        ])
        .unwrap();
    assert_eq!(rates.base_url, "http://rates:8080/v1");
    assert_eq!(rates.attempt_timeout, Duration::from_millis(300));
    assert_eq!(rates.breaker.open_for, Duration::from_secs(2));
    assert!(check_http_client(&rates).is_ok());
}

/// The client's decoding limit, in bytes, is read as tonic names it, from
/// JSON and from the environment; 0 is refused, naming the field.
#[test]
fn the_decoding_limit_is_read_and_zero_is_refused_by_name() {
    let d = client::Settings::default();
    assert_eq!(d.max_decoding_message_size, 4 * 1024 * 1024);
    let settings: client::Settings =
        serde_json::from_str(r#"{"addr": "carts:9090", "max_decoding_message_size": 8388608}"#)
            .unwrap();
    assert_eq!(settings.max_decoding_message_size, 8 << 20);
    assert!(app::check_client(&settings).is_ok());
    let from_env: client::Settings = envy::prefixed("CARTS_")
        .from_iter(vars(&[
            ("CARTS_ADDR", "carts:9090"),
            ("CARTS_MAX_DECODING_MESSAGE_SIZE", "16777216"),
        ]))
        .unwrap();
    assert_eq!(from_env.max_decoding_message_size, 16 << 20);

    let zero: client::Settings =
        serde_json::from_str(r#"{"addr": "carts:9090", "max_decoding_message_size": 0}"#).unwrap();
    let err = app::check_client(&zero).unwrap_err();
    assert_eq!(err.kind(), app::ErrorKind::Settings);
    let new = err.get_ref().downcast_ref::<client::NewError>().unwrap();
    assert_eq!(
        new.fields().collect::<Vec<_>>(),
        ["max_decoding_message_size"]
    );
    assert!(
        err.to_string()
            .contains("max_decoding_message_size is 0, want a size in bytes of 1 or more"),
        "{err}"
    );
    assert!(Client::new(&Setup::new(), zero).is_err());
    assert!(client::check_max_decoding_message_size(0).is_err());
    assert!(
        serde_json::from_str::<client::Settings>(r#"{"max_decoding_message_size": -1}"#).is_err()
    );
}

/// The gRPC client's `attempt_timeout` is read as the HTTP client's is
/// (a humantime duration, `CARTS_ATTEMPT_TIMEOUT` with `envy`), unset by
/// default; zero is refused, naming the field.
#[test]
fn the_attempt_timeout_is_read_and_zero_is_refused_by_name() {
    assert_eq!(client::Settings::default().attempt_timeout, None);
    let settings: client::Settings =
        serde_json::from_str(r#"{"addr": "carts:9090", "attempt_timeout": "250ms"}"#).unwrap();
    assert_eq!(settings.attempt_timeout, Some(Duration::from_millis(250)));
    assert!(app::check_client(&settings).is_ok());
    let unset: client::Settings = serde_json::from_str(r#"{"addr": "carts:9090"}"#).unwrap();
    assert_eq!(unset.attempt_timeout, None);
    let from_env: client::Settings = envy::prefixed("CARTS_")
        .from_iter(vars(&[
            ("CARTS_ADDR", "carts:9090"),
            ("CARTS_ATTEMPT_TIMEOUT", "1s500ms"),
        ]))
        .unwrap();
    assert_eq!(from_env.attempt_timeout, Some(Duration::from_millis(1500)));

    let zero: client::Settings =
        serde_json::from_str(r#"{"addr": "carts:9090", "attempt_timeout": "0s"}"#).unwrap();
    let err = app::check_client(&zero).unwrap_err();
    assert_eq!(err.kind(), app::ErrorKind::Settings);
    let new = err.get_ref().downcast_ref::<client::NewError>().unwrap();
    assert_eq!(new.fields().collect::<Vec<_>>(), ["attempt_timeout"]);
    assert!(
        err.to_string()
            .contains("attempt_timeout is zero, want a duration more than zero"),
        "{err}"
    );
    assert!(Client::new(&Setup::new(), zero).is_err());
}

/// The connection backoff's ceiling: 120 s by default (gRPC's), read in
/// humantime form from a file and from the environment, and zero refused
/// by its check, by `app::check_client` and by `Client::new`, each naming
/// the field.
#[test]
fn connect_backoff_max_is_read_and_checked() {
    assert_eq!(
        client::Settings::default().connect_backoff_max,
        Duration::from_secs(120)
    );
    let s: client::Settings =
        serde_json::from_str(r#"{"addr": "ledger:50051", "connect_backoff_max": "15s"}"#).unwrap();
    assert_eq!(s.connect_backoff_max, Duration::from_secs(15));
    assert_eq!(app::check_client(&s).map_err(|e| e.to_string()), Ok(()));

    let s: client::Settings = envy::prefixed("LEDGER_")
        .from_iter(vars(&[
            ("LEDGER_ADDR", "ledger:50051"),
            ("LEDGER_CONNECT_BACKOFF_MAX", "1m30s"),
        ]))
        .unwrap();
    assert_eq!(s.connect_backoff_max, Duration::from_secs(90));

    let err =
        from_env::<client::Settings>("LEDGER_", vars(&[("LEDGER_CONNECT_BACKOFF_MAX", "soon")]))
            .unwrap_err()
            .to_string();
    assert!(err.contains("LEDGER_CONNECT_BACKOFF_MAX"), "{err}");

    assert_eq!(
        client::check_connect_backoff_max(Duration::ZERO)
            .unwrap_err()
            .to_string(),
        "is zero, want a duration more than zero"
    );
    let zero = client::Settings {
        connect_backoff_max: Duration::ZERO,
        ..s
    };
    let err = app::check_client(&zero).unwrap_err().to_string();
    assert!(
        err.contains("connect_backoff_max is zero, want a duration more than zero"),
        "{err}"
    );
    let err = Client::new(&Setup::new(), zero).unwrap_err();
    assert_eq!(err.fields().collect::<Vec<_>>(), ["connect_backoff_max"]);
}

/// Every duration of the clients' settings, and failure injection's
/// `max_delay`, is at most 365 days: a longer one (a typo, or past what
/// the clock counts) is refused by name, as the breaker's are.
#[test]
fn every_duration_setting_is_at_most_365_days() {
    use humus::app::check_http_client;
    use humus::http::client as http_client;
    let year = "365days";
    let past = "366days";
    let fields = ["timeout", "attempt_timeout", "backoff_base", "backoff_max"];
    let with = |first: &str, value: &str, also: &[&str]| {
        let durations: Vec<String> = fields
            .iter()
            .chain(also)
            .map(|f| format!(r#""{f}": "{value}""#))
            .collect();
        format!("{{{first}, {}}}", durations.join(", "))
    };

    let grpc = |value| -> client::Settings {
        json(&with(
            r#""addr": "carts:9090""#,
            value,
            &["connect_backoff_max"],
        ))
        .unwrap()
    };
    app::check_client(&grpc(year)).unwrap();
    let err = app::check_client(&grpc(past)).unwrap_err();
    let text = err.to_string();
    for field in fields.iter().chain(&["connect_backoff_max"]) {
        assert!(
            text.contains(&format!("{field} is 1year 18h, want at most 365 days")),
            "{field}: {text}"
        );
    }
    let err = Client::new(&Setup::new(), grpc(past)).unwrap_err();
    assert_eq!(
        err.fields().collect::<Vec<_>>(),
        [
            "timeout",
            "attempt_timeout",
            "backoff_base",
            "backoff_max",
            "connect_backoff_max"
        ]
    );

    let http = |value| -> http_client::Settings {
        json(&with(r#""base_url": "http://rates:8080""#, value, &[])).unwrap()
    };
    check_http_client(&http(year)).unwrap();
    let err = http_client::Client::new(&Setup::new(), http(past)).unwrap_err();
    assert_eq!(err.fields().collect::<Vec<_>>(), fields);

    let a_year = Duration::from_secs(365 * 24 * 3600);
    humus::fault::check_max_delay(a_year).unwrap();
    let err = humus::fault::check_max_delay(a_year + Duration::from_secs(24 * 3600)).unwrap_err();
    assert_eq!(err.to_string(), "is 1year 18h, want at most 365 days");
    assert_eq!(
        humus::fault::check_max_delay(Duration::MAX)
            .unwrap_err()
            .value(),
        Duration::MAX
    );
}
