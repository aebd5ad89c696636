//! Every transport reads every shared key it takes, flat and sectioned,
//! through [`app::Env`](crate::app::Env), `envy` and `serde_json`; and
//! refuses a section's field given both ways.

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::app::Env;
use crate::{circuit, retry};

/// The shared sections a transport's settings hold, each `None` where it
/// has no such section.
#[derive(Debug, Default, PartialEq)]
struct Shared {
    timeout: Option<Duration>,
    attempt_timeout: Option<Duration>,
    max_attempts: Option<u32>,
    backoff: Option<(Duration, Duration)>,
    retry_budget: Option<retry::BudgetConfig>,
    breaker: Option<circuit::Config>,
    forward_scenario: Option<bool>,
}

const BUDGET: retry::BudgetConfig = retry::BudgetConfig {
    max_tokens: 7,
    token_ratio: 0.5,
};

const BREAKER: circuit::Config = circuit::Config {
    window: 9,
    probes: 2,
    open_for: Duration::from_secs(4),
    probe_timeout: Duration::from_secs(6),
};

/// The values the inputs below give, none a default of any transport's,
/// for the sections named.
fn given(sections: &[&str]) -> Shared {
    let has = |s: &str| sections.contains(&s);
    Shared {
        timeout: has("timeout").then_some(Duration::from_secs(7)),
        attempt_timeout: has("attempt_timeout").then_some(Duration::from_secs(3)),
        max_attempts: has("max_attempts").then_some(4),
        backoff: has("backoff").then_some((Duration::from_millis(20), Duration::from_secs(2))),
        retry_budget: has("retry_budget").then_some(BUDGET),
        breaker: has("breaker").then_some(BREAKER),
        forward_scenario: has("forward_scenario").then_some(true),
    }
}

/// The flat keys and their values, as text, of the sections named.
fn flat(sections: &[&str]) -> Vec<(&'static str, &'static str)> {
    let mut keys = Vec::new();
    for section in sections {
        keys.extend_from_slice(match *section {
            "timeout" => &[("timeout", "7s")][..],
            "attempt_timeout" => &[("attempt_timeout", "3s")],
            "max_attempts" => &[("max_attempts", "4")],
            "backoff" => &[("backoff_base", "20ms"), ("backoff_max", "2s")],
            "retry_budget" => &[
                ("retry_budget_max_tokens", "7"),
                ("retry_budget_token_ratio", "0.5"),
            ],
            "breaker" => &[
                ("breaker_window", "9"),
                ("breaker_probes", "2"),
                ("breaker_open_for", "4s"),
                ("breaker_probe_timeout", "6s"),
            ],
            "forward_scenario" => &[("forward_scenario", "true")],
            other => panic!("no section {other}"),
        });
    }
    keys
}

/// A JSON object of the sections named, numbers as numbers, each of the
/// `breaker` and `retry_budget` sections as a section or as flat keys.
fn json_of(sections: &[&str], sectioned: bool) -> Value {
    let mut object = serde_json::Map::new();
    for (key, text) in flat(sections) {
        let value = match serde_json::from_str::<Value>(text) {
            Ok(number_or_bool) => number_or_bool,
            Err(_) => Value::from(text),
        };
        object.insert(key.to_owned(), value);
    }
    if sectioned {
        for section in ["breaker", "retry_budget"] {
            let prefix = format!("{section}_");
            let fields: serde_json::Map<String, Value> = object
                .iter()
                .filter_map(|(k, v)| Some((k.strip_prefix(&prefix)?.to_owned(), v.clone())))
                .collect();
            if !fields.is_empty() {
                object.retain(|k, _| !k.starts_with(&prefix));
                object.insert(section.to_owned(), Value::Object(fields));
            }
        }
    }
    Value::Object(object)
}

/// `T` reads every key of `sections` every way, and refuses a section's
/// field given both ways; `shared` is what it holds of them.
fn reads_every_shared_key<T: DeserializeOwned + Default>(
    sections: &[&str],
    shared: impl Fn(&T) -> Shared,
) {
    let want = given(sections);
    assert_ne!(
        shared(&T::default()),
        want,
        "the defaults differ from the values given"
    );
    let vars: Vec<(String, &str)> = flat(sections)
        .into_iter()
        .map(|(k, v)| (format!("P_{}", k.to_ascii_uppercase()), v))
        .collect();
    // app::Env refuses a variable under the prefix that nothing read.
    let read = Env::from_pairs(vars.clone())
        .read_all(|env| env.read::<T>("P_"))
        .unwrap_or_else(|e| panic!("app::Env: {e}"));
    assert_eq!(shared(&read), want, "app::Env");
    let read: T = envy::prefixed("P_")
        .from_iter(vars.iter().map(|(k, v)| (k.clone(), (*v).to_owned())))
        .unwrap_or_else(|e| panic!("envy: {e}"));
    assert_eq!(shared(&read), want, "envy");
    for sectioned in [false, true] {
        let json = json_of(sections, sectioned);
        let read: T =
            crate::app::deserialize_strict(json.clone()).unwrap_or_else(|e| panic!("{json}: {e}"));
        assert_eq!(shared(&read), want, "{json}");
    }
    for (section, field, value) in [("breaker", "window", 5), ("retry_budget", "max_tokens", 5)] {
        if sections.contains(&section) {
            let twice = json!({ section: { field: value }, format!("{section}_{field}"): value });
            let err = serde_json::from_value::<T>(twice)
                .err()
                .map(|e| e.to_string());
            let err = err.unwrap_or_default();
            assert!(
                err.contains(&format!(
                    "{section}.{field} and {section}_{field} are one setting, given twice"
                )),
                "{err}"
            );
        }
    }
}

/// Every shared section: what a client with all of them takes.
const ALL: [&str; 7] = [
    "timeout",
    "attempt_timeout",
    "max_attempts",
    "backoff",
    "retry_budget",
    "breaker",
    "forward_scenario",
];

/// What settings with every shared section hold of them, their
/// `attempt_timeout` as `Option`.
macro_rules! all_shared {
    ($s:ident, $attempt_timeout:expr) => {
        Shared {
            timeout: Some($s.timeout),
            attempt_timeout: $attempt_timeout,
            max_attempts: Some($s.max_attempts),
            backoff: Some(($s.backoff_base, $s.backoff_max)),
            retry_budget: Some($s.retry_budget),
            breaker: Some($s.breaker),
            forward_scenario: Some($s.forward_scenario),
        }
    };
}

#[test]
fn the_grpc_and_http_clients_read_every_shared_key() {
    reads_every_shared_key(&ALL, |s: &crate::grpc::client::Settings| {
        all_shared!(s, s.attempt_timeout)
    });
    reads_every_shared_key(&ALL, |s: &crate::http::client::Settings| {
        all_shared!(s, Some(s.attempt_timeout))
    });
}

#[cfg(feature = "kafka")]
#[test]
fn the_kafka_clients_read_every_shared_key() {
    let sections = ["breaker", "forward_scenario"];
    reads_every_shared_key(&sections, |s: &crate::kafka::ProducerSettings| Shared {
        breaker: Some(s.breaker),
        forward_scenario: Some(s.forward_scenario),
        ..Shared::default()
    });
    let sections = ["max_attempts", "backoff"];
    reads_every_shared_key(&sections, |s: &crate::kafka::ConsumerSettings| Shared {
        max_attempts: Some(s.max_attempts),
        backoff: Some((s.backoff_base, s.backoff_max)),
        ..Shared::default()
    });
}

#[cfg(feature = "rabbitmq")]
#[test]
fn the_rabbitmq_clients_read_every_shared_key() {
    reads_every_shared_key(&ALL, |s: &crate::rabbitmq::PublisherSettings| {
        all_shared!(s, Some(s.attempt_timeout))
    });
    let sections = ["backoff"];
    reads_every_shared_key(&sections, |s: &crate::rabbitmq::ConsumerSettings| Shared {
        backoff: Some((s.backoff_base, s.backoff_max)),
        ..Shared::default()
    });
}

/// A ceiling of zero is refused as zero, not also as below the base
/// (as every transport's check refuses it: the one backoff check).
#[test]
fn a_zero_backoff_ceiling_is_named_once() {
    let mut checks = super::Checks::default();
    checks.backoff(Duration::from_millis(100), Duration::ZERO);
    checks.backoff(Duration::from_secs(2), Duration::from_secs(1));
    assert_eq!(
        checks
            .finish("client", String::new)
            .unwrap_err()
            .to_string(),
        "invalid client settings: backoff_max is zero, want a duration more than zero; \
         backoff_max 1s is below backoff_base 2s"
    );
}

/// `Debug` (made by `settings_read!` from the list of every field) shows
/// every field, and what must not show (a TLS config, a password in a
/// URI, librdkafka's property values) only as it says.
#[test]
fn debug_shows_every_field_and_no_secret() {
    let shown = format!("{:?}", crate::grpc::client::Settings::default());
    for field in [
        "addr: \"\"",
        "tls: None",
        "server_name",
        "authority",
        "timeout: 10s",
        "attempt_timeout: None",
        "max_attempts: 3",
        "retry_budget: BudgetConfig",
        "backoff_base: 100ms",
        "backoff_max: 5s",
        "connect_backoff_max: 120s",
        "classify",
        "breaker: Config",
        "breaker_policy",
        "forward_scenario: false",
        "max_decoding_message_size: 4194304",
        "layers",
    ] {
        assert!(shown.starts_with("Settings {"), "{shown}");
        assert!(shown.contains(field), "{field}: {shown}");
    }
    let shown = format!(
        "{:?}",
        crate::http::client::Settings {
            tls: Some(std::sync::Arc::new(
                crate::testing::Ca::new().client_config()
            )),
            ..Default::default()
        }
    );
    assert!(
        shown.contains("tls: Some(\"rustls::ClientConfig\")"),
        "{shown}"
    );
    #[cfg(feature = "kafka")]
    {
        let settings = crate::kafka::ProducerSettings {
            librdkafka: [("sasl.password".to_owned(), "hunter2".to_owned())].into(),
            ..Default::default()
        };
        let shown = format!("{settings:?}");
        assert!(shown.contains("librdkafka: [\"sasl.password\"]"), "{shown}");
        assert!(!shown.contains("hunter2"), "{shown}");
    }
    #[cfg(feature = "rabbitmq")]
    {
        let settings = crate::rabbitmq::PublisherSettings {
            uri: "amqp://u:hunter2@rabbit".into(),
            ..Default::default()
        };
        let shown = format!("{settings:?}");
        assert!(shown.starts_with("PublisherSettings {"), "{shown}");
        assert!(!shown.contains("hunter2"), "{shown}");
    }
}
