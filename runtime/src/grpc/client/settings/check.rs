//! The checks of a client's settings: one per field this crate's gRPC
//! client alone has (the address, the server name, the authority, the
//! connection backoff's ceiling, the decoding limit), and the check of a
//! whole [`Settings`], every bad field named in one [`NewError`].

use std::time::Duration;

use rustls_pki_types::ServerName;

use crate::InvalidSettings;
use crate::call::settings::{
    Checks, InvalidValue, at_least_one, budget_path, check_tls, positive_within_a_year,
};
use crate::{circuit, retry};

use super::Settings;

/// Checks an address: `host:port`, with a host and a numeric port.
///
/// A client dials a host, so an empty host (`:9090`) is rejected, as are a
/// scheme (`dns:///carts:9090`: the client never resolves names itself), a
/// named port (`carts:grpc`), and `?`, `#`, `/`, `@` and `%`, so an IPv6
/// address with its zone (`[fe80::1%eth0]:9090`) too: a link-local
/// address names no certificate, and the zone would be sent in every
/// call's `:authority`, where it means nothing to the server. The host is an IPv4 address (`999.1.1.1` and `1.2.3`
/// are none), an IPv6 address in brackets (`[::1]:9090`), or a host name:
/// labels of letters, digits, `-` and `_`, none empty and none starting or
/// ending with `-` (`-carts` is none).
///
/// ```
/// use humus::grpc::client::check_addr;
/// assert!(check_addr("carts:9090").is_ok());
/// assert!(check_addr("[::1]:9090").is_ok());
/// assert!(check_addr("[fe80::1%eth0]:9090").is_err());
/// assert!(check_addr("dns:///carts:9090").is_err());
/// assert!(check_addr("999.1.1.1:9090").is_err());
/// assert!(check_addr("-carts:9090").is_err());
/// ```
///
/// # Errors
///
/// [`InvalidValue`] saying what is wrong.
///
/// Design: [the settings](crate::design::client#the-settings).
pub fn check_addr(addr: &str) -> Result<(), InvalidValue> {
    use crate::grpc::addr::{HostPort, Problem, split};
    let bad = |why: String| Err(InvalidValue::new(why));
    let HostPort { host, port } = match split(addr) {
        Ok(split) => split,
        Err(problem) => {
            return bad(match problem {
                Problem::Empty => "is empty, want host:port".to_owned(),
                Problem::Scheme => format!(
                    "{addr:?} names a scheme, want host:port with none, such as \"ledger:50051\" (set `tls` for TLS; a scheme does not choose it)"
                ),
                Problem::Holds(c) => format!("{addr:?} holds {c:?}, want host:port"),
                Problem::NoPortAfterBracket => {
                    format!("{addr:?} has no port, want [ipv6]:port")
                }
                Problem::NoPort => format!("{addr:?} has no port, want host:port"),
                other => other.describe(addr),
            });
        }
    };
    if port.is_empty() {
        return bad(format!("{addr:?} has an empty port"));
    }
    if !port.bytes().all(|b| b.is_ascii_digit()) {
        // A port that starts with a letter is a service name (`:grpc`);
        // anything else (`+1`, `-1`, `80x`) is simply not a port number.
        let what = if port.starts_with(|c: char| c.is_ascii_alphabetic()) {
            "the named port"
        } else {
            "the port"
        };
        return bad(format!(
            "{addr:?} has {what} {port:?}, want a number from 1 to 65535"
        ));
    }
    if matches!(port.parse::<u16>(), Ok(0) | Err(_)) {
        return bad(format!("{addr:?} has the port {port}, want 1..=65535"));
    }
    if host.is_empty() {
        return bad(format!("{addr:?} has an empty host: a client dials a host"));
    }
    if host.contains('%') {
        return bad(format!(
            "{addr:?} holds '%', an IPv6 zone, which a client's address does not take: want a global IPv6 address, an IPv4 address or a host name"
        ));
    }
    if format!("http://{addr}").parse::<http::Uri>().is_err() {
        return bad(format!("{addr:?} is not a valid URI authority"));
    }
    Ok(())
}

/// Checks a server name override: a DNS name or an IP address.
///
/// # Errors
///
/// [`InvalidValue`] saying what is wrong.
///
/// Design: [the connection](crate::design::client#the-connection) (`:authority` and the certificate).
pub fn check_server_name(name: &str) -> Result<(), InvalidValue> {
    if ServerName::try_from(name).is_err() {
        return Err(InvalidValue::new(format!(
            "{name:?} is neither a DNS name nor an IP address"
        )));
    }
    if format!("http://{name}").parse::<http::Uri>().is_err() {
        return Err(InvalidValue::new(format!(
            "{name:?} is not a valid URI authority"
        )));
    }
    Ok(())
}

/// Checks an `:authority` override: `host` or `host:port` (a DNS name, an
/// IP address, an IPv6 address in brackets), with no user info, as a URI's
/// authority.
///
/// ```
/// use humus::grpc::client::check_authority;
/// assert!(check_authority("carts-api").is_ok());
/// assert!(check_authority("carts-api:443").is_ok());
/// assert!(check_authority("user@carts").is_err());
/// ```
///
/// # Errors
///
/// [`InvalidValue`] saying what is wrong.
pub fn check_authority(authority: &str) -> Result<(), InvalidValue> {
    if authority.is_empty() {
        return Err(InvalidValue::new("is empty, want host or host:port"));
    }
    if authority.contains('@') {
        return Err(InvalidValue::new(format!(
            "{authority:?} holds user info ('@'), which gRPC's :authority never carries"
        )));
    }
    match format!("http://{authority}").parse::<http::Uri>() {
        Ok(uri) if uri.authority().map(http::uri::Authority::as_str) == Some(authority) => Ok(()),
        _ => Err(InvalidValue::new(format!(
            "{authority:?} is not a valid URI authority, want host or host:port"
        ))),
    }
}

/// With TLS and no server name, the host of `addr` is the name the
/// server's certificate is checked for: it must be a DNS name or an IP
/// address (rustls's reading of one, which may be narrower than
/// [`check_addr`]'s).
fn check_tls_host(addr: &str) -> Result<(), InvalidValue> {
    let host = crate::grpc::client::connection::host_of(addr);
    if ServerName::try_from(host).is_err() {
        return Err(InvalidValue::new(format!(
            "host {host:?} is neither a DNS name nor an IP address, so TLS cannot check a certificate for it; set server_name to the certificate's name"
        )));
    }
    Ok(())
}

/// Checks the longest response message the client takes, in bytes
/// ([`Settings::max_decoding_message_size`]): at least 1 (0 would refuse
/// every message, even an empty one's frame).
///
/// ```
/// use humus::grpc::client::check_max_decoding_message_size;
/// assert!(check_max_decoding_message_size(16 << 20).is_ok());
/// assert!(check_max_decoding_message_size(0).is_err());
/// ```
///
/// # Errors
///
/// [`InvalidValue`] for 0.
pub fn check_max_decoding_message_size(bytes: usize) -> Result<(), InvalidValue> {
    at_least_one(
        bytes,
        "is 0, want a size in bytes of 1 or more (tonic's default is 4194304, 4 MiB)",
    )
}

/// Checks the ceiling of the connection's backoff
/// ([`Settings::connect_backoff_max`]): more than zero, and at most 365
/// days.
///
/// ```
/// use std::time::Duration;
/// use humus::grpc::client::check_connect_backoff_max;
/// assert!(check_connect_backoff_max(Duration::from_secs(30)).is_ok());
/// assert_eq!(
///     check_connect_backoff_max(Duration::ZERO).unwrap_err().to_string(),
///     "is zero, want a duration more than zero",
/// );
/// ```
///
/// # Errors
///
/// [`InvalidValue`] for zero, or for more than 365 days.
pub fn check_connect_backoff_max(max: Duration) -> Result<(), InvalidValue> {
    positive_within_a_year(max)
}

/// Why [`Client::new`](crate::grpc::client::Client::new) refused its
/// settings: every bad field, each named by its path in [`Settings`]
/// (`timeout`, `breaker.window`), the message naming the dependency,
/// `addr`, when it is valid (`invalid client settings of carts:9090:
/// ...`). The one settings error of every transport,
/// [`InvalidSettings`](crate::InvalidSettings).
///
/// By the time settings reach `Client::new`, each value sourced from
/// configuration should have passed its check where it was read (a bad
/// value there is the operator's, exit 78). So this error is a fault in
/// the code: a value set in code, a check skipped, or a pair of values no
/// single check sees (`backoff_max` below `backoff_base`). A service's main
/// exits 1 on it.
///
/// Design: [the settings](crate::design::client#the-settings) (every bad field in one error
/// that names each one).
pub type NewError = InvalidSettings;

/// Whose settings a [`NewError`] is about, in its message.
const OF: &str = "client";

/// A breaker `Client::new` could not make of checked settings.
pub(in crate::grpc::client) fn breaker_refused(e: circuit::ConfigError) -> NewError {
    InvalidSettings::one(OF, String::new(), "breaker", e)
}

/// A retry budget `Client::new` could not make of checked settings.
pub(in crate::grpc::client) fn budget_refused(e: retry::BudgetError) -> NewError {
    InvalidSettings::one(OF, String::new(), budget_path(&e), e)
}

impl Settings {
    /// Runs every field's check, and the checks that take two fields.
    pub(crate) fn check(&self) -> Result<(), NewError> {
        let Settings {
            addr,
            tls,
            server_name,
            authority,
            timeout,
            attempt_timeout,
            max_attempts,
            retry_budget,
            backoff_base,
            backoff_max,
            connect_backoff_max,
            classify: _,
            breaker,
            breaker_policy: _,
            forward_scenario: _,
            max_decoding_message_size,
            layers: _,
        } = self;
        let mut checks = Checks::default();
        checks.put("addr", check_addr(addr));
        if let Some(tls) = tls {
            checks.put("tls", check_tls(tls));
        }
        if let Some(name) = server_name {
            checks.put("server_name", check_server_name(name));
        } else if tls.is_some() && check_addr(addr).is_ok() {
            checks.put("addr", check_tls_host(addr));
        }
        if let Some(authority) = authority {
            checks.put("authority", check_authority(authority));
        }
        checks.timeout(*timeout);
        checks.attempt_timeout(*attempt_timeout);
        checks.max_attempts(*max_attempts);
        checks.backoff(*backoff_base, *backoff_max);
        checks.put(
            "connect_backoff_max",
            check_connect_backoff_max(*connect_backoff_max),
        );
        checks.put(
            "max_decoding_message_size",
            check_max_decoding_message_size(*max_decoding_message_size),
        );
        checks.retry_budget(retry_budget);
        checks.breaker(breaker);
        checks.finish(OF, || {
            if check_addr(addr).is_ok() {
                addr.clone()
            } else {
                String::new()
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::settings::assert_check;
    use crate::grpc::client::{
        check_attempt_timeout, check_backoff_base, check_backoff_max, check_breaker,
        check_max_attempts, check_open_for, check_probe_timeout, check_probes, check_retry_budget,
        check_timeout, check_window,
    };

    /// Pieces of addresses, right and wrong, for the property below.
    fn addr_piece() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::strategy::Strategy as _;
        proptest::sample::select(vec![
            "carts",
            "a",
            "-carts",
            "carts-",
            "a..b",
            "c.",
            "_grpc._tcp.c",
            "x1",
            "1x",
            "10.0.0.7",
            "999.1.1.1",
            "1.2.3",
            "256.0.0.1",
            "[::1]",
            "[fe80::1%eth0]",
            "[fe80::1%2]",
            "[carts]",
            "::1",
            ".",
            ":",
            "::",
            "9090",
            "0",
            "65535",
            "65536",
            "grpc",
            "+1",
            "-",
            "%",
            "%20",
            "@",
            "u@",
            "/",
            "?",
            "#",
            " ",
            "[",
            "]",
            "dns:///",
            "http://",
            "é",
            "*",
        ])
        .prop_map(str::to_owned)
    }

    proptest::proptest! {
        /// An address `check_addr` accepts means what it says: a URL
        /// parser reads the same host (no IPv4 shorthand such as `1.2.3`
        /// read as 1.2.0.3, no percent-decoding) and the same port, from 1,
        /// and its host has no `%` (no IPv6 zone) and no label starting or
        /// ending with `-`.
        #[test]
        fn an_accepted_address_is_read_as_written(
            pieces in proptest::collection::vec(addr_piece(), 1..6),
        ) {
            use proptest::prop_assert;
            let addr = pieces.concat();
            if check_addr(&addr).is_ok() {
                prop_assert!(!addr.contains(['%', '/', '?', '#', '@', ' ']), "{addr:?}");
                let (host, port) = addr.rsplit_once(':').unwrap();
                let url = reqwest::Url::parse(&format!("http://{addr}"));
                prop_assert!(url.is_ok(), "{addr:?}: {url:?}");
                let url = url.unwrap();
                prop_assert!(url.host_str() == Some(&*host.to_ascii_lowercase()), "{addr:?}: {url}");
                let port: u16 = port.parse().unwrap();
                prop_assert!(port >= 1 && url.port_or_known_default() == Some(port), "{addr:?}: {url}");
                if !host.starts_with('[') {
                    let name = host.strip_suffix('.').unwrap_or(host);
                    prop_assert!(
                        name.split('.').all(|l| !l.is_empty() && !l.starts_with('-') && !l.ends_with('-')),
                        "{addr:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn addresses() {
        let refused = assert_check(
            check_addr,
            &[
                "carts:9090",
                "10.0.0.7:9090",
                "[::1]:9090",
                "carts.default.svc.cluster.local:443",
                "localhost:1",
                "a:65535",
                "_grpc._tcp.carts:1",
                "carts.:1",
            ],
            &[
                ("", "empty"),
                (":9090", "empty host"),
                ("dns:///carts:9090", "scheme"),
                ("https://carts:9090", "scheme"),
                ("unix:/tmp/s", "scheme"),
                ("carts:grpc", "named port"),
                (":grpc", "named port"),
                ("carts:+1", "has the port \"+1\", want a number"),
                ("carts:-1", "has the port \"-1\", want a number"),
                ("carts:9090?x=1", "'?'"),
                ("carts:9090#frag", "'#'"),
                ("carts%20:9090", "'%'"),
                (
                    "999.1.1.1:1",
                    "has a bad host: \"999.1.1.1\" is no IPv4 address",
                ),
                ("1.2.3:9090", "is no IPv4 address"),
                (
                    "-carts:1",
                    "\"-carts\" has the label \"-carts\", which starts or ends with '-'",
                ),
                ("carts..local:9090", "empty label"),
                ("a+b:9090", "holds '+'"),
                ("[fe80::1%]:9090", "whose zone is no interface name"),
                ("[::1]%x:9090", "holds '%'"),
                ("[fe80::1%eth0]:50051", "holds '%', an IPv6 zone"),
                ("[fe80::1%2]:50051", "holds '%', an IPv6 zone"),
                ("carts", "no port"),
                ("carts:", "empty port"),
                ("carts:0", "1..=65535"),
                ("carts:70000", "1..=65535"),
                ("::1:9090", "brackets"),
                ("[::1]", "no port"),
                ("[carts]:9090", "IPv6"),
                ("[::1:9090", "bracket"),
                ("car ts:9090", "' '"),
            ],
        );
        for err in refused {
            assert!(!err.contains("addr "), "{err} names no field");
        }
    }

    #[test]
    fn durations_and_counts() {
        assert!(check_timeout(Duration::ZERO).is_err());
        assert!(check_timeout(Duration::from_nanos(1)).is_ok());
        assert!(check_backoff_base(Duration::ZERO).is_err());
        assert!(check_backoff_max(Duration::ZERO).is_err());
        assert!(check_max_attempts(0).is_err());
        assert!(check_max_attempts(1).is_ok());
        assert!(check_attempt_timeout(Duration::ZERO).is_err());
        assert!(check_attempt_timeout(Duration::from_nanos(1)).is_ok());
        assert_eq!(
            check_max_decoding_message_size(0).unwrap_err().to_string(),
            "is 0, want a size in bytes of 1 or more (tonic's default is 4194304, 4 MiB)"
        );
        assert!(check_max_decoding_message_size(1).is_ok());
    }

    #[test]
    fn budgets_and_breakers() {
        assert!(check_retry_budget(&retry::BudgetConfig::DEFAULT).is_ok());
        let bad = retry::BudgetConfig {
            max_tokens: 0,
            token_ratio: 0.1,
        };
        let err = check_retry_budget(&bad).unwrap_err().to_string();
        assert!(err.contains("max_tokens"), "{err}");
        assert!(check_breaker(&Settings::default().breaker).is_ok());
        let err = check_breaker(&circuit::Config {
            window: 0,
            probes: 1,
            open_for: Duration::ZERO,
            probe_timeout: Duration::from_secs(1),
        })
        .unwrap_err()
        .to_string();
        assert_eq!(
            err,
            "window is 0, want 1 to 65536 results; \
             open_for is zero, want a duration more than zero"
        );
    }

    #[test]
    fn each_breaker_field_has_its_own_check() {
        let d = Settings::default().breaker;
        assert!(check_window(d.window).is_ok() && check_probes(d.probes).is_ok());
        assert!(check_open_for(d.open_for).is_ok() && check_probe_timeout(d.probe_timeout).is_ok());
        let year = Duration::from_secs(365 * 24 * 3600);
        for check in [check_open_for, check_probe_timeout] {
            assert_eq!(check(year), Ok(()));
            let err = check(year + Duration::from_secs(1))
                .unwrap_err()
                .to_string();
            assert!(err.starts_with("is 11months 30days "), "{err}");
            assert!(err.ends_with(", want at most 365 days"), "{err}");
            let err = check(Duration::MAX).unwrap_err().to_string();
            assert!(err.ends_with("want at most 365 days"), "{err}");
        }
        for n in [1, circuit::MAX_COUNT] {
            assert!(check_window(n).is_ok() && check_probes(n).is_ok(), "{n}");
        }
        let too_many = circuit::MAX_COUNT + 1;
        assert_eq!(
            check_window(0).unwrap_err().to_string(),
            "is 0, want 1 to 65536 results"
        );
        assert_eq!(
            check_window(too_many).unwrap_err().to_string(),
            "is 65537, want 1 to 65536 results"
        );
        assert_eq!(
            check_probes(0).unwrap_err().to_string(),
            "is 0, want 1 to 65536 probes"
        );
        assert!(check_probes(too_many).is_err());
        for check in [check_open_for, check_probe_timeout] {
            assert_eq!(
                check(Duration::ZERO).unwrap_err().to_string(),
                "is zero, want a duration more than zero"
            );
            assert!(check(Duration::from_nanos(1)).is_ok());
        }
    }

    #[test]
    fn server_names() {
        assert!(check_server_name("carts").is_ok());
        assert!(check_server_name("10.0.0.7").is_ok());
        assert!(check_server_name("not a name").is_err());
        assert!(check_server_name("").is_err());
    }

    #[test]
    fn authorities() {
        for ok in ["carts-api", "carts-api:443", "10.0.0.7", "[::1]:9090"] {
            assert_eq!(check_authority(ok), Ok(()), "{ok}");
        }
        for bad in ["", "user@carts", "carts api", "carts/x", "carts?x"] {
            assert!(check_authority(bad).is_err(), "{bad:?}");
        }
        let s = Settings {
            addr: "carts:9090".into(),
            authority: Some("a b".into()),
            ..Settings::default()
        };
        assert_eq!(
            s.check().unwrap_err().fields().collect::<Vec<_>>(),
            ["authority"]
        );
    }

    #[test]
    fn tls_configs() {
        let ca = crate::testing::Ca::new();
        let mut config = ca.client_config();
        assert!(check_tls(&config).is_ok());
        config.max_fragment_size = Some(10);
        assert!(check_tls(&config).unwrap_err().to_string().contains("32"));
    }

    #[test]
    fn every_bad_field_is_named_once_in_one_error() {
        let s = Settings {
            addr: "dns:///carts:9090".into(),
            timeout: Duration::ZERO,
            attempt_timeout: Some(Duration::ZERO),
            max_attempts: 0,
            backoff_base: Duration::from_secs(2),
            backoff_max: Duration::from_secs(1),
            breaker: circuit::Config {
                probes: 0,
                ..Settings::default().breaker
            },
            max_decoding_message_size: 0,
            ..Settings::default()
        };
        let err = s.check().unwrap_err();
        assert_eq!(
            err.fields().collect::<Vec<_>>(),
            [
                "addr",
                "timeout",
                "attempt_timeout",
                "max_attempts",
                "backoff_max",
                "max_decoding_message_size",
                "breaker.probes"
            ]
        );
        let text = err.to_string();
        assert!(text.starts_with("invalid client settings: addr "), "{text}");
        assert!(
            text.contains("backoff_max 1s is below backoff_base 2s"),
            "{text}"
        );
        assert!(
            text.contains("; attempt_timeout is zero, want a duration more than zero (leave it unset for no timeout of its own); "),
            "{text}"
        );
    }

    #[test]
    fn the_error_names_a_valid_addr() {
        let s = Settings {
            addr: "carts:9090".into(),
            timeout: Duration::ZERO,
            ..Settings::default()
        };
        let text = s.check().unwrap_err().to_string();
        assert!(
            text.starts_with("invalid client settings of carts:9090: timeout is zero"),
            "{text}"
        );
    }
}
