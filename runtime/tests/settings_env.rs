//! Settings read from environment variables with `humus::app::Env`: every
//! bad or missing variable named, by its name, of every group read, in
//! one settings error (exit 78).

use std::time::Duration;

use humus::app::{Env, ErrorKind, from_env};

/// What [`refused`] read: the bad variables' names, in the order they
/// were found, and the error's message, which names each.
struct Refused {
    names: Vec<String>,
    message: String,
}

impl Refused {
    /// Asserts that the message holds each of `parts`.
    fn says(&self, parts: &[&str]) {
        for part in parts {
            assert!(
                self.message.contains(part),
                "{part:?} not in {}",
                self.message
            );
        }
    }
}

/// Reads `vars` with `read`, which must refuse them: a settings error
/// (exit 78) whose source is an `EnvError`.
fn refused<R>(vars: &[(&str, &str)], read: impl FnOnce(&mut Env) -> R) -> Refused {
    let Err(err) = Env::from_pairs(vars.iter().copied()).read_all(read) else {
        panic!("{vars:?} were read, not refused");
    };
    assert_eq!(err.kind(), ErrorKind::Settings, "{err}");
    assert_eq!(err.exit_code(), 78, "{err}");
    let env = err
        .get_ref()
        .downcast_ref::<humus::app::EnvError>()
        .expect("an EnvError");
    Refused {
        names: env.vars().iter().map(|v| v.name().to_owned()).collect(),
        message: err.to_string(),
    }
}

#[test]
fn every_bad_or_missing_variable_of_every_group_is_named_at_once() {
    let refused = refused(
        &[
            ("LEDGER_BREAKER_OPEN_FOR", "soon"),
            ("LEDGER_TIMEOUT", "2 parsecs"),
            ("LEDGER_MAX_ATTEMPTS", "0"),
            ("RATES_MAX_ATTEMPTS", "three"),
            ("WALLET_ADDR", "127.0.0.1:0"),
            ("WALLET_PLAINTEXT", "true"),
        ],
        |env| {
            (
                env.client("LEDGER_"),
                env.http_client("RATES_"),
                env.server("WALLET_"),
            )
        },
    );
    assert_eq!(
        refused.names,
        [
            "LEDGER_TIMEOUT",
            "LEDGER_BREAKER_OPEN_FOR",
            "LEDGER_ADDR",
            "LEDGER_MAX_ATTEMPTS",
            "RATES_MAX_ATTEMPTS",
            "RATES_BASE_URL",
        ]
    );
    refused.says(&[
        r#"LEDGER_BREAKER_OPEN_FOR: "soon" is not a duration such as "2s", "250ms" or "1m30s""#,
        "LEDGER_ADDR: not set",
        "RATES_BASE_URL: not set",
        r#"RATES_MAX_ATTEMPTS: "three" is not a whole number;"#,
    ]);
}

#[test]
fn good_variables_are_read_over_the_defaults_sections_by_their_fields() {
    let env = Env::from_pairs([
        ("LEDGER_ADDR", "ledger:50051"),
        ("LEDGER_BREAKER_OPEN_FOR", "3s"),
        ("LEDGER_RETRY_BUDGET_MAX_TOKENS", "20"),
        ("LEDGER_FORWARD_SCENARIO", "true"),
        ("RATES_BASE_URL", "http://rates:8080/v1"),
        ("RATES_ATTEMPT_TIMEOUT", "250ms"),
        ("OTHER_TIMEOUT", "soon"),
    ]);
    let (ledger, rates) = env
        .read_all(|env| (env.client("LEDGER_"), env.http_client("RATES_")))
        .unwrap();
    assert_eq!(ledger.addr, "ledger:50051");
    assert_eq!(ledger.breaker.open_for, Duration::from_secs(3));
    assert_eq!(ledger.retry_budget.max_tokens, 20);
    assert!(ledger.forward_scenario);
    assert_eq!(
        ledger.timeout,
        humus::grpc::client::Settings::default().timeout
    );
    assert_eq!(rates.base_url, "http://rates:8080/v1");
    assert_eq!(rates.attempt_timeout, Duration::from_millis(250));
}

/// A service's own struct: every field with no default that is missing is
/// named, not only the first serde meets.
#[derive(Debug, Default, PartialEq, serde::Deserialize)]
struct Wallet {
    ledger_addr: String,
    rates_addr: String,
    port: u16,
    #[serde(default)]
    verbose: bool,
    #[serde(default, with = "humantime_serde")]
    grace: Duration,
    #[serde(default)]
    regions: Vec<String>,
    #[serde(default)]
    limits: Limits,
    mode: Mode,
}

#[derive(Debug, Default, PartialEq, serde::Deserialize)]
struct Limits {
    #[serde(default)]
    max: u32,
    per_user: Option<u32>,
}

#[derive(Debug, Default, PartialEq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
enum Mode {
    #[default]
    Live,
    Dry,
}

#[test]
fn a_struct_of_the_services_own_names_each_missing_field_and_bad_value() {
    let refused = refused(
        &[
            ("WALLET_VERBOSE", "yes"),
            ("WALLET_LIMITS_MAX", "many"),
            ("WALLET_MODE", "sometimes"),
        ],
        |env| env.read::<Wallet>("WALLET_"),
    );
    assert_eq!(
        refused.message,
        r#"WALLET_VERBOSE: "yes" is not true or false; WALLET_LIMITS_MAX: "many" is not a whole number from 0 to 4294967295; WALLET_MODE: unknown variant `sometimes`, expected `live` or `dry`; WALLET_LEDGER_ADDR: not set; WALLET_RATES_ADDR: not set; WALLET_PORT: not set"#
    );

    let env = Env::from_pairs([
        ("WALLET_LEDGER_ADDR", "ledger:50051"),
        ("WALLET_RATES_ADDR", "rates:8080"),
        ("WALLET_PORT", "8443"),
        ("WALLET_GRACE", "1m30s"),
        ("WALLET_REGIONS", "eu, us"),
        ("WALLET_LIMITS_PER_USER", "7"),
        ("WALLET_MODE", "dry"),
    ]);
    let wallet = env.read_all(|env| env.read::<Wallet>("WALLET_")).unwrap();
    assert_eq!(
        wallet,
        Wallet {
            ledger_addr: "ledger:50051".into(),
            rates_addr: "rates:8080".into(),
            port: 8443,
            verbose: false,
            grace: Duration::from_secs(90),
            regions: vec!["eu".into(), "us".into()],
            limits: Limits {
                max: 0,
                per_user: Some(7)
            },
            mode: Mode::Dry,
        }
    );
}

#[test]
fn a_section_set_as_one_variable_is_named_with_the_fix() {
    let refused = refused(
        &[("LEDGER_ADDR", "ledger:50051"), ("LEDGER_BREAKER", "off")],
        |env| env.client("LEDGER_"),
    );
    assert_eq!(
        refused.message,
        "LEDGER_BREAKER: is a section: set its fields, such as LEDGER_BREAKER_WINDOW"
    );
}

#[test]
fn from_env_reads_the_process_environment() {
    // A prefix no other test or process sets.
    let err = from_env(|env| env.client("HUMUS_SETTINGS_ENV_TEST_")).unwrap_err();
    assert_eq!(err.to_string(), "HUMUS_SETTINGS_ENV_TEST_ADDR: not set");
}

/// A TLS server's settings are read with its TLS config set before the
/// check: no `PLAINTEXT` variable is needed (with none and no config, the
/// read names `PLAINTEXT`), and `PLAINTEXT=true` beside a config is refused.
#[test]
fn a_tls_servers_settings_are_read_with_its_config() {
    let tls = std::sync::Arc::new(humus::testing::Ca::new().issue("api").server_config());
    let settings = Env::from_pairs([("API_ADDR", ":8443")])
        .read_all(|env| env.server_with_tls("API_", tls.clone()))
        .unwrap();
    assert_eq!(settings.addr, ":8443");
    assert!(settings.tls.is_some() && !settings.plaintext);

    let refused_plain = refused(&[("API_ADDR", ":8443")], |env| env.server("API_"));
    assert_eq!(refused_plain.names, ["API_PLAINTEXT"]);

    let refused_both = refused(&[("API_ADDR", ":8443"), ("API_PLAINTEXT", "true")], |env| {
        env.server_with_tls("API_", tls.clone())
    });
    assert_eq!(refused_both.names, ["API_PLAINTEXT"]);
}

/// A variable under a group's prefix that no group and no `Env::get` read
/// is a misspelled setting: refused, by its name, after the groups' own
/// problems. A longer prefix's group reads its own variables, and the
/// empty prefix (a struct read from every variable) refuses none.
#[test]
fn a_misspelled_variable_of_a_group_is_named() {
    let refused = refused(
        &[
            ("LEDGER_ADDR", "ledger:50051"),
            ("LEDGER_BREAKER_OPENFOR", "30s"),
            ("LEDGER_TIMOUT", "1s"),
            ("LEDGER_TOKEN", "secret"),
            ("LEDGER_DB_ADDR", "db:50051"),
            ("OTHER", "x"),
        ],
        |env| {
            let token = env.get("LEDGER_TOKEN").map(str::to_owned);
            (env.client("LEDGER_"), env.client("LEDGER_DB_"), token)
        },
    );
    assert_eq!(refused.names, ["LEDGER_BREAKER_OPENFOR", "LEDGER_TIMOUT"]);
    refused.says(&[
        "LEDGER_TIMOUT: is set, but no setting of the LEDGER_ group has this name: did you mean LEDGER_TIMEOUT?",
        "LEDGER_BREAKER_OPENFOR: is set, but no setting of the LEDGER_ group has this name: did you mean LEDGER_BREAKER_OPEN_FOR?",
        "give the group a prefix of the service's own",
    ]);

    #[derive(serde::Deserialize, Default)]
    #[serde(default)]
    struct Own {
        home: Option<String>,
    }
    let read = Env::from_pairs([("HOME", "/root"), ("PATH", "/bin")])
        .read_all(|env| env.read::<Own>(""))
        .unwrap();
    assert_eq!(read.home.as_deref(), Some("/root"));
}

/// A section's field and its flat key are one variable
/// (`GREETER_BREAKER_OPEN_FOR`), read once: a second variable under the
/// section's name that is no setting (`GREETER_BREAKER__OPEN_FOR`, a `__`
/// that is no nesting here) is refused by its own name, the message naming
/// the setting it looks like, set too, as the one to keep; not a false
/// "given twice" of keys the user never wrote.
#[test]
fn a_variable_beside_the_setting_it_looks_like_is_named_and_the_setting_kept() {
    for other in ["GREETER_BREAKER__OPEN_FOR", "GREETER_BREAKER_OPENFOR"] {
        let refused = refused(
            &[
                ("GREETER_ADDR", "greeter:50051"),
                ("GREETER_BREAKER_OPEN_FOR", "2s"),
                (other, "3s"),
            ],
            |env| env.client("GREETER_"),
        );
        assert_eq!(refused.names, [other], "{}", refused.message);
        assert_eq!(
            refused.message,
            format!(
                "{other}: is set, but no setting of the GREETER_ group has this name: did you mean \
                 GREETER_BREAKER_OPEN_FOR? GREETER_BREAKER_OPEN_FOR is set too, and is the one read: \
                 keep GREETER_BREAKER_OPEN_FOR and unset {other}"
            )
        );
    }
    // Alone, the `__` form is a misspelling, as before.
    let refused = refused(
        &[
            ("GREETER_ADDR", "greeter:50051"),
            ("GREETER_BREAKER__OPEN_FOR", "3s"),
        ],
        |env| env.client("GREETER_"),
    );
    assert_eq!(refused.names, ["GREETER_BREAKER__OPEN_FOR"]);
    refused.says(&["did you mean GREETER_BREAKER_OPEN_FOR?"]);
    // And the setting, with any other variable under its section's name,
    // is read once, as the flat key.
    let vars = [
        ("GREETER_ADDR", "greeter:50051"),
        ("GREETER_BREAKER_OPEN_FOR", "2s"),
        ("GREETER_BREAKER_WINDOW", "20"),
    ];
    let settings = Env::from_pairs(vars).read_all(|env| env.client("GREETER_"));
    let settings = settings.unwrap();
    assert_eq!(settings.breaker.open_for, std::time::Duration::from_secs(2));
    assert_eq!(settings.breaker.window, 20);
}

/// A transport's whole number that does not parse says what it is, not
/// its type's range, which is not the setting's (the trial's
/// `GREETER_BREAKER_WINDOW=x` said "from 0 to 18446744073709551615", the
/// window being 1 to 65536); a value that parses is refused by the
/// setting's check, which says its range. A struct of the service's own,
/// whose type is its only check, quotes the type's range
/// (`a_struct_of_the_services_own_names_each_missing_field_and_bad_value`).
#[test]
fn a_whole_number_that_does_not_parse_quotes_no_types_range() {
    let unparsed = refused(
        &[
            ("GREETER_ADDR", "greeter:50051"),
            ("GREETER_BREAKER_WINDOW", "x"),
            ("GREETER_BREAKER_PROBES", "-1"),
            ("GREETER_MAX_ATTEMPTS", "abc"),
            ("GREETER_RETRY_BUDGET_MAX_TOKENS", "99999999999999999999999"),
        ],
        |env| env.client("GREETER_"),
    );
    assert_eq!(
        unparsed.message,
        "GREETER_MAX_ATTEMPTS: \"abc\" is not a whole number; \
         GREETER_RETRY_BUDGET_MAX_TOKENS: \"99999999999999999999999\" is too large a number; \
         GREETER_BREAKER_WINDOW: \"x\" is not a whole number; \
         GREETER_BREAKER_PROBES: \"-1\" is negative"
    );
    let checked = refused(
        &[
            ("GREETER_ADDR", "greeter:50051"),
            ("GREETER_BREAKER_WINDOW", "0"),
            ("GREETER_MAX_ATTEMPTS", "0"),
        ],
        |env| env.client("GREETER_"),
    );
    checked.says(&[
        "GREETER_BREAKER_WINDOW: is 0, want 1 to 65536 results",
        "GREETER_MAX_ATTEMPTS: is 0, want 1 or more",
    ]);
}

/// An unset field whose check says what not setting it means keeps that
/// hint: a server's `PLAINTEXT`, which names both ways to fix it.
#[test]
fn an_unset_variable_keeps_its_checks_hint() {
    let refused = refused(&[("API_ADDR", ":8443")], |env| env.server("API_"));
    assert!(
        refused
            .message
            .starts_with("API_PLAINTEXT: is not set, and there is no tls config"),
        "{}",
        refused.message
    );
    refused.says(&["plaintext = true"]);
}

/// The variables Kubernetes sets for a Service named as a group's prefix
/// (a Service `ledger` beside a client read under `LEDGER_`) are not
/// refused as misspellings; a name only near their shape still is.
#[test]
fn kubernetes_service_links_under_a_prefix_are_left_alone() {
    let links = [
        ("LEDGER_SERVICE_HOST", "10.0.0.11"),
        ("LEDGER_SERVICE_PORT", "50051"),
        ("LEDGER_SERVICE_PORT_GRPC", "50051"),
        ("LEDGER_PORT", "tcp://10.0.0.11:50051"),
        ("LEDGER_PORT_50051_TCP", "tcp://10.0.0.11:50051"),
        ("LEDGER_PORT_50051_TCP_PROTO", "tcp"),
        ("LEDGER_PORT_50051_TCP_PORT", "50051"),
        ("LEDGER_PORT_50051_TCP_ADDR", "10.0.0.11"),
        ("LEDGER_PORT_53_UDP_ADDR", "10.0.0.11"),
    ];
    let read = Env::from_pairs(links.into_iter().chain([("LEDGER_ADDR", "ledger:50051")]))
        .read_all(|env| env.client("LEDGER_"))
        .unwrap();
    assert_eq!(read.addr, "ledger:50051");

    let refused = refused(
        &[
            ("LEDGER_ADDR", "ledger:50051"),
            ("LEDGER_PORTS", "50051"),
            ("LEDGER_PORT_GRPC_TCP", "tcp://10.0.0.11:50051"),
            ("LEDGER_PORT_50051_HTTP", "x"),
            ("LEDGER_PORT_50051_TCP_HOST", "x"),
        ],
        |env| env.client("LEDGER_"),
    );
    assert_eq!(
        refused.names,
        [
            "LEDGER_PORTS",
            "LEDGER_PORT_50051_HTTP",
            "LEDGER_PORT_50051_TCP_HOST",
            "LEDGER_PORT_GRPC_TCP"
        ]
    );
}

/// A variable named after a setting that is set in code says so, instead
/// of asking to check its spelling; a client's `PLAINTEXT` says how a
/// client chooses plain text.
#[test]
fn a_variable_for_a_setting_set_in_code_says_so() {
    refused(
        &[
            ("LEDGER_ADDR", "ledger:50051"),
            ("LEDGER_TLS", "true"),
            ("LEDGER_CLASSIFY", "x"),
            ("LEDGER_PLAINTEXT", "true"),
        ],
        |env| env.client("LEDGER_"),
    )
    .says(&[
        "LEDGER_TLS: is set, but `tls` is set in code, never read from a variable: unset it",
        "LEDGER_CLASSIFY: is set, but `classify` is set in code, never read from a variable: unset it",
        "LEDGER_PLAINTEXT: is set, but a client has no `plaintext` setting: it dials plain text unless its `tls` is set in code: unset it",
    ]);
}

/// A required variable that is not set, but is in other letters' case,
/// is named with the one that is.
#[test]
fn a_variable_set_in_lower_case_is_named() {
    let refused = refused(&[("ledger_addr", "ledger:50051")], |env| {
        env.client("LEDGER_")
    });
    assert_eq!(
        refused.message,
        "LEDGER_ADDR: not set (ledger_addr is: a variable's name is in capitals)"
    );
}

#[test]
fn a_kafka_producers_settings_are_read_librdkafkas_properties_one_variable_each() {
    let settings = Env::from_pairs([
        ("LEDGER_KAFKA_BROKERS", "kafka-1:9092, kafka-2:9092"),
        ("LEDGER_KAFKA_CLIENT_ID", "ledger"),
        ("LEDGER_KAFKA_DELIVERY_TIMEOUT", "5s"),
        ("LEDGER_KAFKA_ACKS", "leader"),
        ("LEDGER_KAFKA_IDEMPOTENCE", "false"),
        ("LEDGER_KAFKA_BREAKER_OPEN_FOR", "3s"),
        ("LEDGER_KAFKA_FORWARD_SCENARIO", "true"),
        ("LEDGER_KAFKA_LIBRDKAFKA_LINGER_MS", "5"),
        (
            "LEDGER_KAFKA_LIBRDKAFKA_QUEUE_BUFFERING_MAX_MESSAGES",
            "1000",
        ),
    ])
    .read_all(|env| env.kafka_producer("LEDGER_KAFKA_"))
    .unwrap();
    assert_eq!(settings.brokers, ["kafka-1:9092", "kafka-2:9092"]);
    assert_eq!(settings.client_id, "ledger");
    assert_eq!(settings.delivery_timeout, Duration::from_secs(5));
    assert_eq!(settings.acks, humus::kafka::Acks::Leader);
    assert!(!settings.idempotence);
    assert_eq!(settings.breaker.open_for, Duration::from_secs(3));
    assert!(settings.forward_scenario);
    let properties: Vec<_> = settings
        .librdkafka
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        properties,
        [("linger.ms", "5"), ("queue.buffering.max.messages", "1000")]
    );
}

#[test]
fn a_kafka_producers_bad_settings_are_each_named_by_their_variable() {
    let refused_fields = refused(
        &[
            ("LEDGER_KAFKA_BROKERS", "kafka://kafka-1:9092"),
            ("LEDGER_KAFKA_DELIVERY_TIMEOUT", "0s"),
            ("LEDGER_KAFKA_ACKS", "leader"),
            ("LEDGER_KAFKA_BREAKER_WINDOW", "0"),
            ("LEDGER_KAFKA_LIBRDKAFKA_MESSAGE_TIMEOUT_MS", "5"),
            ("LEDGER_KAFKA_DELIVERY_TIMOUT", "5s"),
        ],
        |env| env.kafka_producer("LEDGER_KAFKA_"),
    );
    assert_eq!(
        refused_fields.names,
        [
            "LEDGER_KAFKA_BROKERS",
            "LEDGER_KAFKA_DELIVERY_TIMEOUT",
            "LEDGER_KAFKA_ACKS",
            "LEDGER_KAFKA_BREAKER_WINDOW",
            "LEDGER_KAFKA_LIBRDKAFKA",
            "LEDGER_KAFKA_DELIVERY_TIMOUT",
        ]
    );
    refused_fields.says(&[
        r#"LEDGER_KAFKA_LIBRDKAFKA: sets "message.timeout.ms", which humus sets"#,
        "LEDGER_KAFKA_DELIVERY_TIMOUT: is set, but no setting",
        "did you mean LEDGER_KAFKA_DELIVERY_TIMEOUT?",
    ]);
    // The map set as one variable.
    let refused_map = refused(
        &[
            ("LEDGER_KAFKA_BROKERS", "kafka-1:9092"),
            ("LEDGER_KAFKA_LIBRDKAFKA", "linger.ms=5"),
        ],
        |env| env.kafka_producer("LEDGER_KAFKA_"),
    );
    assert_eq!(
        refused_map.message,
        "LEDGER_KAFKA_LIBRDKAFKA: is a map: set one variable per entry, LEDGER_KAFKA_LIBRDKAFKA_<KEY>"
    );
}

#[test]
fn a_kafka_consumers_settings_are_read_and_checked() {
    let settings = Env::from_pairs([
        ("AUDIT_BROKERS", "kafka-1:9092"),
        ("AUDIT_GROUP", "audit"),
        ("AUDIT_TOPICS", "transfers,refunds"),
        ("AUDIT_DEAD_LETTER_TOPIC", "audit-dead"),
        ("AUDIT_COMMIT_INTERVAL", "1s"),
        ("AUDIT_LIBRDKAFKA_SESSION_TIMEOUT_MS", "6000"),
    ])
    .read_all(|env| env.kafka_consumer("AUDIT_"))
    .unwrap();
    assert_eq!(settings.topics, ["transfers", "refunds"]);
    assert_eq!(settings.group, "audit");
    assert_eq!(settings.dead_letter_topic.as_deref(), Some("audit-dead"));
    assert_eq!(settings.commit_interval, Duration::from_secs(1));
    assert_eq!(settings.librdkafka["session.timeout.ms"], "6000");

    let refused = refused(
        &[
            ("AUDIT_BROKERS", "kafka-1:9092"),
            ("AUDIT_DEAD_LETTER_TOPIC", "transfers"),
            ("AUDIT_TOPICS", "transfers"),
            ("AUDIT_MAX_ATTEMPTS", "none"),
        ],
        |env| env.kafka_consumer("AUDIT_"),
    );
    assert_eq!(
        refused.names,
        [
            "AUDIT_MAX_ATTEMPTS",
            "AUDIT_GROUP",
            "AUDIT_DEAD_LETTER_TOPIC"
        ]
    );
}

#[test]
fn rabbitmq_settings_are_read_and_checked() {
    let publisher = Env::from_pairs([
        ("EVENTS_URI", "amqp://rabbit:5672/%2f"),
        ("EVENTS_TIMEOUT", "2s"),
        ("EVENTS_MAX_ATTEMPTS", "2"),
    ])
    .read_all(|env| env.rabbitmq_publisher("EVENTS_"))
    .unwrap();
    assert_eq!(publisher.timeout, Duration::from_secs(2));
    assert_eq!(publisher.max_attempts, 2);
    let consumer = Env::from_pairs([("ORDERS_URI", "amqp://rabbit"), ("ORDERS_QUEUE", "orders")])
        .read_all(|env| env.rabbitmq_consumer("ORDERS_"))
        .unwrap();
    assert_eq!(consumer.queue, "orders");

    let refused = refused(
        &[
            ("EVENTS_URI", "http://rabbit"),
            ("EVENTS_BACKOFF_BASE", "later"),
            ("ORDERS_URI", "amqp://rabbit"),
            ("ORDERS_PREFETCH", "0"),
        ],
        |env| {
            (
                env.rabbitmq_publisher("EVENTS_"),
                env.rabbitmq_consumer("ORDERS_"),
            )
        },
    );
    assert_eq!(
        refused.names,
        [
            "EVENTS_BACKOFF_BASE",
            "EVENTS_URI",
            "ORDERS_QUEUE",
            "ORDERS_PREFETCH"
        ]
    );
}

#[test]
fn librdkafka_checks_each_property_an_unknown_one_or_a_bad_value_named_by_its_variable() {
    // A bad value, refused where the settings are read (exit 78), not when
    // the producer is built: librdkafka's own reason.
    let bad_value = refused(
        &[
            ("LEDGER_KAFKA_BROKERS", "kafka-1:9092"),
            ("LEDGER_KAFKA_LIBRDKAFKA_LINGER_MS", "abc"),
        ],
        |env| env.kafka_producer("LEDGER_KAFKA_"),
    );
    assert_eq!(bad_value.names, ["LEDGER_KAFKA_LIBRDKAFKA"]);
    bad_value.says(&[
        r#"LEDGER_KAFKA_LIBRDKAFKA: sets "linger.ms" to "abc", which librdkafka refuses: Invalid value for configuration property "queue.buffering.max.ms""#,
    ]);

    // An unknown property, and a bad value, both named.
    let unknown = refused(
        &[
            ("LEDGER_KAFKA_BROKERS", "kafka-1:9092"),
            ("LEDGER_KAFKA_LIBRDKAFKA_LINGER_MS", "5"),
            ("LEDGER_KAFKA_LIBRDKAFKA_LINGER_MSS", "5"),
            ("LEDGER_KAFKA_LIBRDKAFKA_MESSAGE_MAX_BYTES", "-1"),
        ],
        |env| env.kafka_producer("LEDGER_KAFKA_"),
    );
    assert_eq!(unknown.names, ["LEDGER_KAFKA_LIBRDKAFKA"]);
    unknown.says(&[
        r#"sets "linger.mss" to "5", which librdkafka refuses: No such configuration property: "linger.mss""#,
        r#"sets "message.max.bytes" to "-1", which librdkafka refuses"#,
    ]);
    assert!(
        !unknown.message.contains(r#""linger.ms" to"#),
        "{}",
        unknown.message
    );

    // The consumer's alike.
    let consumer = refused(
        &[
            ("AUDIT_BROKERS", "kafka-1:9092"),
            ("AUDIT_GROUP", "audit"),
            ("AUDIT_TOPICS", "transfers"),
            ("AUDIT_LIBRDKAFKA_SESSION_TIMEOUT_MS", "soon"),
        ],
        |env| env.kafka_consumer("AUDIT_"),
    );
    assert_eq!(consumer.names, ["AUDIT_LIBRDKAFKA"]);
    consumer.says(&[
        r#"AUDIT_LIBRDKAFKA: sets "session.timeout.ms" to "soon", which librdkafka refuses: Invalid value for configuration property "session.timeout.ms""#,
    ]);
}

/// A server's settings read from the environment know their prefix, so
/// that the server's errors at run time (an address in use) name the
/// variable (`API_ADDR`); settings built in code do not.
#[test]
fn a_servers_settings_read_from_the_environment_know_their_prefix() {
    let settings = Env::from_pairs([("API_ADDR", "127.0.0.1:0"), ("API_PLAINTEXT", "true")])
        .read_all(|env| env.server("API_"))
        .unwrap();
    assert_eq!(settings.env_prefix.as_deref(), Some("API_"));
    assert_eq!(humus::grpc::server::Settings::default().env_prefix, None);
}

/// A group's fields set in code are its settings type's own: a server's
/// trust function too, which no client has.
#[test]
fn each_groups_fields_set_in_code_are_its_own() {
    refused(
        &[
            ("API_ADDR", "127.0.0.1:0"),
            ("API_PLAINTEXT", "true"),
            ("API_TRUST_SCENARIO", "yes"),
            ("API_ENV_PREFIX", "OTHER_"),
            ("LEDGER_ADDR", "ledger:50051"),
            ("LEDGER_TRUST_SCENARIO", "yes"),
        ],
        |env| (env.server("API_"), env.client("LEDGER_")),
    )
    .says(&[
        "API_TRUST_SCENARIO: is set, but `trust_scenario` is set in code, never read from a variable: unset it",
        "API_ENV_PREFIX: is set, but `env_prefix` is set in code, never read from a variable: unset it",
        "LEDGER_TRUST_SCENARIO: is set, but no setting of the LEDGER_ group has this name",
    ]);
}
