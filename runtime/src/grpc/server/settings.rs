//! `Settings`: one server's settings, their defaults and a check per field.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use super::Caller;

/// Decides whether the failure scenario a request carries reaches the
/// handler: `true` keeps it, `false` strips it. See
/// [`Settings::trust_scenario`].
#[derive(Clone)]
pub struct TrustScenario(pub(super) Arc<dyn Fn(&Caller<'_>) -> bool + Send + Sync>);

impl TrustScenario {
    /// A trust function that runs `trust`.
    pub fn new(trust: impl Fn(&Caller<'_>) -> bool + Send + Sync + 'static) -> TrustScenario {
        TrustScenario(Arc::new(trust))
    }
}

impl fmt::Debug for TrustScenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TrustScenario(fn)")
    }
}

/// The settings of one [`Server`](super::Server): plain values, a
/// [`Default`], a public check per field, and `serde::Deserialize` (the
/// durations in humantime form, `"250ms"`, `"1m30s"`), so `envy`, `figment`
/// or `config` read them from the environment or from files.
/// [`Server::new`](super::Server::new) runs every check and names every bad
/// field in one [`SettingsError`].
///
/// | field | default | check |
/// |---|---|---|
/// | [`addr`](Settings::addr) | none (empty: `new` rejects it) | [`check_addr`] |
/// | [`tls`](Settings::tls) | `None` | [`check_tls`] |
/// | [`plaintext`](Settings::plaintext) | `false`: TLS required | [`check_plaintext`] |
/// | [`trust_scenario`](Settings::trust_scenario) | `None`: trusts no caller | none (set in code) |
/// | [`max_connection_age`](Settings::max_connection_age) | `None`: connections live on | [`check_max_connection_age`] |
/// | [`max_connection_age_grace`](Settings::max_connection_age_grace) | `None`: no bound | [`check_grace`]; set only with `max_connection_age` |
/// | [`shutdown_grace`](Settings::shutdown_grace) | 10 s | [`check_grace`] |
/// | [`keepalive_interval`](Settings::keepalive_interval) | 2 h (gRPC's) | [`check_keepalive`] |
/// | [`keepalive_timeout`](Settings::keepalive_timeout) | 20 s (gRPC's) | [`check_keepalive`] |
/// | [`max_header_list_size`](Settings::max_header_list_size) | 16384 bytes (16 KiB) | [`check_max_header_list_size`] |
/// | [`env_prefix`](Settings::env_prefix) | `None`: built in code | none (set by `Env::server`) |
///
/// `tls`, `trust_scenario` and `env_prefix` are set in code and never deserialised: a
/// configuration names a certificate file, which the service reads (with
/// its [`Host`](crate::Host)) into a `rustls::ServerConfig`.
#[derive(Clone, Deserialize)]
#[serde(default)]
pub struct Settings {
    /// The address to listen on, through the Setup's
    /// [`Host`](crate::Host): `host:port` (`127.0.0.1:8443`, `[::1]:8443`,
    /// port 0 for one the system picks) or `:port` for every address of
    /// the machine, IPv6 and IPv4 (one dual-stack socket; IPv4 alone on a
    /// machine with no IPv6).
    pub addr: String,

    /// The TLS config to serve with. `None` serves plain-text HTTP/2, and
    /// only with [`plaintext`](Settings::plaintext) `true`: a server with
    /// neither is refused.
    ///
    /// The server serves with a clone of it whose only ALPN protocol is
    /// `h2`, so the config given is never changed. For mTLS, the config
    /// verifies client certificates, and [`Caller::peer_certificates`]
    /// shows them to [`trust_scenario`](Settings::trust_scenario).
    #[serde(skip)]
    pub tls: Option<Arc<rustls::ServerConfig>>,

    /// Serve plain-text HTTP/2, with no [`tls`](Settings::tls): for a
    /// server whose TLS something else terminates (a mesh sidecar, a
    /// local proxy) or that only loopback reaches. It must be said: a
    /// server with neither `tls` nor `plaintext = true` is refused
    /// ([`check_plaintext`]), so that no server serves plain text because
    /// a certificate was forgotten. Plain text shows no caller
    /// certificates to [`trust_scenario`](Settings::trust_scenario).
    ///
    /// Default: `false`.
    pub plaintext: bool,

    /// Whether the failure scenario a request carries reaches its handler.
    /// It is asked only about a request that carries a scenario, and only
    /// when the Setup's injection is on, before any handler or layer of
    /// the user's; a request it does not trust has the scenario stripped
    /// from its baggage (a `humus.fit.strip` event on its server span).
    /// Set in code. A panic in it is answered as a handler's panic is
    /// (`INTERNAL`, "the handler panicked", recorded on the server span;
    /// see the [module](super) docs), and the request reaches no
    /// handler.
    ///
    /// Trust only callers you control (tests, a chaos tool): a scenario
    /// that reaches a handler makes its calls fail for real, and those
    /// failures count in each client's circuit breaker, which every caller
    /// of that dependency shares: with the default settings, two aborted
    /// requests (each retried) can open it for everyone, unless the
    /// client's classifier spares injected failures.
    ///
    /// Default: `None`, which trusts no caller: a server nobody decided
    /// about is a trust boundary.
    #[serde(skip)]
    pub trust_scenario: Option<TrustScenario>,

    /// The age at which a connection is sent a GOAWAY, so that its client
    /// dials again and the load spreads over the service's instances (gRFC
    /// A9's `MAX_CONNECTION_AGE`). Each connection's age is drawn within
    /// ±10 % of it, so a server's clients do not all dial again at once.
    /// The calls in flight at the GOAWAY finish; a client's next call goes
    /// over a new connection. `None`: connections live until their client
    /// or the server closes them.
    #[serde(with = "humantime_serde")]
    pub max_connection_age: Option<Duration>,

    /// How long a connection that reached its age may still serve the
    /// calls and streams it has open (gRFC A9's `MAX_CONNECTION_AGE_GRACE`).
    /// Then its open streams end with `UNAVAILABLE` ("the connection
    /// reached its maximum age: call again on a new connection"), the calls whose
    /// handler has not answered are answered `UNAVAILABLE` ("the
    /// connection reached its maximum age before the call ended: call
    /// again on a new connection"), and it is closed once those answers
    /// are written, at most 100 ms later.
    /// `None`: it stays open until its last call ends. Set only with
    /// [`max_connection_age`](Settings::max_connection_age) (alone, it
    /// would never apply: [`check`](Settings::check) refuses it).
    #[serde(with = "humantime_serde")]
    pub max_connection_age_grace: Option<Duration>,

    /// How long a graceful shutdown lets the unary calls in flight finish.
    /// A shutdown stops accepting, sends every connection a GOAWAY, and
    /// only then ends the open streams with `UNAVAILABLE`. At the end of
    /// the grace, a call whose handler has not answered is answered
    /// `UNAVAILABLE` ("the server stopped before the call ended"), its
    /// handler dropped, and its connection is closed once those answers
    /// are written, at most 100 ms after the grace: a stop takes at most
    /// the grace and 100 ms. Every client, a stock tonic one too, sees
    /// `UNAVAILABLE`, which a retrying client may send again. Zero is no
    /// grace: the calls in flight are answered so at once.
    #[serde(with = "humantime_serde")]
    pub shutdown_grace: Duration,

    /// How long a connection may go without a frame from its client before
    /// the server sends it an HTTP/2 PING (gRFC A8's server keepalive
    /// time). `None`: never pinged, so a client that vanished (its node
    /// gone, a NAT that dropped the flow) holds its connection and its
    /// handlers until the server stops, and makes that stop take its whole
    /// grace. A client's own keepalive pings must be rarer than this
    /// server allows: a server answers them, but gRPC clients that ping
    /// more often than every 5 minutes are refused by gRPC's C core
    /// servers, not by this one.
    #[serde(with = "humantime_serde")]
    pub keepalive_interval: Option<Duration>,

    /// How long the server waits for the answer to its keepalive PING
    /// before it closes the connection (gRFC A8's server keepalive
    /// timeout); the calls still on it end as on a broken connection.
    #[serde(with = "humantime_serde")]
    pub keepalive_timeout: Duration,

    /// The largest request metadata the server takes, in bytes, as
    /// HTTP/2 counts a header list (each header's name and value, and 32
    /// bytes more per header; HTTP/2's `SETTINGS_MAX_HEADER_LIST_SIZE`,
    /// which the server announces to its clients). A request whose headers
    /// are larger is refused before any handler sees it: the client gets
    /// HTTP status 431 (Request Header Fields Too Large), which a gRPC
    /// client reports as `UNKNOWN` (humus's says the metadata is too
    /// large). Raise it for callers that send large tokens or
    /// baggage: gRPC's C core and Java servers take 8 KiB by default, Go's
    /// 16 MiB.
    pub max_header_list_size: u32,

    /// The prefix of the environment variables these settings were read
    /// from (`WALLET_`), which [`Env::server`](crate::app::Env::server) and
    /// [`Env::server_with_tls`](crate::app::Env::server_with_tls) set: an
    /// error the server meets once it runs, such as an address in use
    /// ([`ServeError::Listen`](super::ServeError::Listen)), names the
    /// variable an operator sets (`WALLET_ADDR`) as well as the field, as
    /// the settings errors of [`app::Env`](crate::app::Env) do.
    ///
    /// Default: `None` (settings built in code), whose errors name the
    /// field alone.
    #[serde(skip)]
    pub env_prefix: Option<String>,
}

impl Settings {
    /// The fields set in code, never read from configuration:
    /// [`app::Env`](crate::app::Env) says so of a variable named after one.
    pub(crate) const IN_CODE: &'static [&'static str] = &["tls", "trust_scenario", "env_prefix"];
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            addr: String::new(),
            tls: None,
            plaintext: false,
            trust_scenario: None,
            max_connection_age: None,
            max_connection_age_grace: None,
            shutdown_grace: Duration::from_secs(10),
            keepalive_interval: Some(Duration::from_secs(2 * 3600)),
            keepalive_timeout: Duration::from_secs(20),
            max_header_list_size: DEFAULT_MAX_HEADER_LIST_SIZE,
            env_prefix: None,
        }
    }
}

impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Settings {
            addr,
            tls,
            plaintext,
            trust_scenario,
            max_connection_age,
            max_connection_age_grace,
            shutdown_grace,
            keepalive_interval,
            keepalive_timeout,
            max_header_list_size,
            env_prefix,
        } = self;
        f.debug_struct("Settings")
            .field("addr", addr)
            .field("tls", &tls.as_ref().map(|_| "rustls::ServerConfig"))
            .field("plaintext", plaintext)
            .field("trust_scenario", trust_scenario)
            .field("max_connection_age", max_connection_age)
            .field("max_connection_age_grace", max_connection_age_grace)
            .field("shutdown_grace", shutdown_grace)
            .field("keepalive_interval", keepalive_interval)
            .field("keepalive_timeout", keepalive_timeout)
            .field("max_header_list_size", max_header_list_size)
            .field("env_prefix", env_prefix)
            .finish()
    }
}

pub use crate::call::settings::InvalidValue;

/// Checks a listening address: `host:port` or `:port`, with a numeric
/// port (0 lets the system pick one).
///
/// Unlike a client's address, the host may be empty: a server listens on
/// every address of the machine, IPv6 and IPv4 (`:8443`; not `*:8443`;
/// `0.0.0.0:8443` is every IPv4 address only, `[::]:8443` as the system
/// binds it). Otherwise the host is an IPv4 address, an IPv6
/// address in brackets (`[::1]:8443`, `[fe80::1%eth0]:8443`) or a host
/// name, as a client's is ([`client::check_addr`](crate::grpc::client::check_addr)).
/// A scheme, a named port and a path are rejected.
///
/// ```
/// use humus::grpc::server::check_addr;
/// assert!(check_addr(":8443").is_ok());
/// assert!(check_addr("127.0.0.1:0").is_ok());
/// assert!(check_addr("[::1]:8443").is_ok());
/// assert!(check_addr("tcp://:8443").is_err());
/// assert!(check_addr(":grpc").is_err());
/// assert!(check_addr("*:8443").is_err());
/// ```
///
/// # Errors
///
/// [`InvalidValue`] saying what is wrong.
pub fn check_addr(addr: &str) -> Result<(), InvalidValue> {
    use crate::grpc::addr::{HostPort, Problem, split};
    let bad = |why: String| Err(InvalidValue::new(why));
    let HostPort { host, port } = match split(addr) {
        Ok(split) => split,
        Err(problem) => {
            return bad(match problem {
                Problem::Empty => "is empty, want host:port or :port".to_owned(),
                Problem::Scheme => format!("{addr:?} names a scheme, want host:port or :port"),
                Problem::Holds(c) => format!("{addr:?} holds {c:?}, want host:port or :port"),
                Problem::NoPortAfterBracket => {
                    format!("{addr:?} has no port after its bracket, want [ipv6]:port")
                }
                Problem::NoPort => format!("{addr:?} has no port, want host:port or :port"),
                Problem::BadHost(_) if addr.starts_with("*:") => format!(
                    "{addr:?} has the host \"*\": leave it out (\":{port}\") to listen on every address",
                    port = &addr[2..]
                ),
                other => other.describe(addr),
            });
        }
    };
    let _ = host;
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
        return bad(format!(
            "{addr:?} has the port {port:?}, want a number from 0 to 65535"
        ));
    }
    if port.parse::<u16>().is_err() {
        return bad(format!("{addr:?} has the port {port}, want 0..=65535"));
    }
    Ok(())
}

/// Checks a server TLS config: it must be able to accept a connection,
/// with at least one cipher suite and one key exchange group. (rustls
/// speaks only TLS 1.2 and 1.3, so the version floor HTTP/2 needs always
/// holds.)
///
/// # Errors
///
/// [`InvalidValue`] saying what is wrong.
pub fn check_tls(config: &rustls::ServerConfig) -> Result<(), InvalidValue> {
    crate::call::settings::check_provider(config.crypto_provider())
}

/// Checks that a server says how it serves: with a TLS config (`has_tls`)
/// and `plaintext` `false`, or with none and `plaintext` `true`.
///
/// # Errors
///
/// [`InvalidValue`] naming both ways out: for neither (a server serves
/// TLS unless its settings say plain text), and for both (a contradiction).
pub fn check_plaintext(plaintext: bool, has_tls: bool) -> Result<(), InvalidValue> {
    match (plaintext, has_tls) {
        (false, false) => Err(InvalidValue::new(
            "is not set, and there is no tls config: a server serves only TLS unless its settings say plain text; set tls (a rustls::ServerConfig with the server's certificate) to serve TLS, or plaintext = true to serve plain-text HTTP/2 where something else terminates TLS (a mesh sidecar, a local proxy) or only loopback reaches the server",
        )),
        (true, true) => Err(InvalidValue::new(
            "is true, but a tls config is set too: unset tls to serve plain text, or leave plaintext unset (false) to serve TLS",
        )),
        _ => Ok(()),
    }
}

/// The longest [`Settings::max_connection_age`] [`check_max_connection_age`]
/// takes: 365 days. A longer age is no age in practice; leave it unset
/// instead.
pub const MAX_CONNECTION_AGE_LIMIT: Duration = crate::call::settings::LONGEST_SETTING;

/// Checks a maximum connection age: more than zero and at most
/// [`MAX_CONNECTION_AGE_LIMIT`] (365 days), when set.
///
/// # Errors
///
/// [`InvalidValue`] for zero, or for more than 365 days (an age so long
/// that its ±10 % jitter and its deadline are past what the clock can
/// count: leave the field unset for connections that live on).
pub fn check_max_connection_age(age: Option<Duration>) -> Result<(), InvalidValue> {
    match age {
        Some(d) if d.is_zero() => Err(InvalidValue::new(
            "is zero, want a duration more than zero (or none, for no age)",
        )),
        Some(d) => match crate::call::settings::longer_than_a_year(d) {
            Some(why) => Err(InvalidValue::new(format!("{why} (or none, for no age)"))),
            None => Ok(()),
        },
        None => Ok(()),
    }
}

/// Checks a keepalive duration (the interval between pings, or the wait
/// for a ping's answer): more than zero and at most a day.
///
/// # Errors
///
/// [`InvalidValue`] for zero (leave `keepalive_interval` unset for no
/// pings), or for more than a day.
pub fn check_keepalive(d: Duration) -> Result<(), InvalidValue> {
    if d.is_zero() {
        return Err(InvalidValue::new("is zero, want a duration more than zero"));
    }
    if d > Duration::from_secs(24 * 3600) {
        return Err(InvalidValue::new(format!(
            "is {}, want at most a day",
            humantime_serde::re::humantime::format_duration(d)
        )));
    }
    Ok(())
}

/// The default [`Settings::max_header_list_size`]: 16 KiB, in bytes (the
/// HTTP/2 server's, hyper's, default).
pub const DEFAULT_MAX_HEADER_LIST_SIZE: u32 = 16 * 1024;

/// Checks the largest request metadata a server takes, in bytes: at least
/// 1 KiB (1024), as every gRPC request's own headers (its path, content
/// type, `te`, a `grpc-timeout`) take a few hundred bytes of it.
///
/// ```
/// use humus::grpc::server::check_max_header_list_size;
/// assert!(check_max_header_list_size(64 * 1024).is_ok());
/// assert!(check_max_header_list_size(100).is_err());
/// ```
///
/// # Errors
///
/// [`InvalidValue`] for less than 1024.
pub fn check_max_header_list_size(bytes: u32) -> Result<(), InvalidValue> {
    if bytes < 1024 {
        return Err(InvalidValue::new(format!(
            "is {bytes}, want a size in bytes of at least 1024: a gRPC request's own headers take a few hundred (the default is {DEFAULT_MAX_HEADER_LIST_SIZE}, 16 KiB)"
        )));
    }
    Ok(())
}

/// Checks a grace period (of a shutdown, or of a connection past its age):
/// at most an hour. Zero is allowed: no grace.
///
/// # Errors
///
/// [`InvalidValue`] for more than an hour.
pub fn check_grace(grace: Duration) -> Result<(), InvalidValue> {
    if grace > Duration::from_secs(3600) {
        return Err(InvalidValue::new(format!(
            "is {}, want at most 1h",
            humantime_serde::re::humantime::format_duration(grace)
        )));
    }
    Ok(())
}

/// Why [`Server::new`](super::Server::new) refused its settings: every bad
/// field, each with what is wrong with it, the message naming the server
/// by its address as set (`invalid server settings of :8443: ...`). The
/// RabbitMQ clients' settings are refused with it too (feature
/// `rabbitmq`). The one settings error of every transport,
/// [`InvalidSettings`](crate::InvalidSettings).
pub type SettingsError = crate::InvalidSettings;

impl Settings {
    /// Runs every field's check, and names every bad field in one error.
    ///
    /// # Errors
    ///
    /// [`SettingsError`] naming every bad field.
    pub fn check(&self) -> Result<(), SettingsError> {
        let Settings {
            addr,
            tls,
            plaintext,
            trust_scenario: _,
            max_connection_age,
            max_connection_age_grace,
            shutdown_grace,
            keepalive_interval,
            keepalive_timeout,
            max_header_list_size,
            env_prefix: _,
        } = self;
        let mut checks = crate::call::settings::Checks::default();
        checks.put("addr", check_addr(addr));
        if let Some(tls) = tls {
            checks.put("tls", check_tls(tls));
        }
        checks.put("plaintext", check_plaintext(*plaintext, tls.is_some()));
        checks.put(
            "max_connection_age",
            check_max_connection_age(*max_connection_age),
        );
        if let Some(grace) = *max_connection_age_grace {
            checks.put("max_connection_age_grace", check_grace(grace));
            if max_connection_age.is_none() {
                checks.put(
                    "max_connection_age_grace",
                    Err(InvalidValue::new(
                        "is set, but max_connection_age is not: the grace follows a connection's age, so it would never apply; set max_connection_age too, or leave max_connection_age_grace unset",
                    )),
                );
            }
        }
        checks.put("shutdown_grace", check_grace(*shutdown_grace));
        if let Some(interval) = *keepalive_interval {
            checks.put(
                "keepalive_interval",
                check_keepalive(interval).map_err(|e| {
                    if interval.is_zero() {
                        InvalidValue::new(format!("{e} (leave it unset for no pings)"))
                    } else {
                        e
                    }
                }),
            );
        }
        checks.put("keepalive_timeout", check_keepalive(*keepalive_timeout));
        checks.put(
            "max_header_list_size",
            check_max_header_list_size(*max_header_list_size),
        );
        checks.finish("server", || addr.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::settings::assert_check;

    /// TLS unless the settings say plain text; never both.
    #[test]
    fn a_server_needs_tls_or_plaintext_said_and_not_both() {
        let neither = Settings {
            addr: ":8443".into(),
            ..Settings::default()
        };
        let err = neither.check().unwrap_err();
        assert_eq!(err.fields().collect::<Vec<_>>(), ["plaintext"]);
        let text = err.to_string();
        assert!(
            text.contains("plaintext is not set, and there is no tls config"),
            "{text}"
        );
        assert!(
            text.contains("set tls (") && text.contains("or plaintext = true"),
            "{text}"
        );
        let plain = Settings {
            plaintext: true,
            ..neither.clone()
        };
        plain.check().unwrap();
        let config = rustls::ServerConfig::builder_with_provider(crate::tls::crypto_provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(rustls::server::ResolvesServerCertUsingSni::new()));
        let both = Settings {
            tls: Some(Arc::new(config)),
            ..plain
        };
        let err = both.check().unwrap_err();
        assert_eq!(err.fields().collect::<Vec<_>>(), ["plaintext"]);
        assert!(err.to_string().contains("unset tls"), "{err}");
    }

    #[test]
    fn keepalive_defaults_are_grpcs_and_zero_is_refused() {
        let s = Settings::default();
        assert_eq!(s.keepalive_interval, Some(Duration::from_secs(7200)));
        assert_eq!(s.keepalive_timeout, Duration::from_secs(20));
        let s = Settings {
            addr: ":8443".into(),
            keepalive_interval: Some(Duration::ZERO),
            keepalive_timeout: Duration::from_secs(2 * 24 * 3600),
            plaintext: true,
            ..Settings::default()
        };
        let err = s.check().unwrap_err();
        assert_eq!(
            err.fields().collect::<Vec<_>>(),
            ["keepalive_interval", "keepalive_timeout"]
        );
        let text = err.to_string();
        assert!(
            text.contains(
                "keepalive_interval is zero, want a duration more than zero (leave it unset for no pings)"
            ),
            "{text}"
        );
        assert!(
            text.contains("keepalive_timeout is 2days, want at most a day"),
            "{text}"
        );
        let read: Settings =
            serde_json::from_str(r#"{"keepalive_interval": "30s", "keepalive_timeout": "1s"}"#)
                .unwrap();
        assert_eq!(read.keepalive_interval, Some(Duration::from_secs(30)));
        assert_eq!(read.keepalive_timeout, Duration::from_secs(1));
        let off: Settings = serde_json::from_str(r#"{"keepalive_interval": null}"#).unwrap();
        assert_eq!(off.keepalive_interval, None);
    }

    #[test]
    fn max_header_list_size_defaults_to_16_kib_and_less_than_1_kib_is_refused() {
        let s = Settings {
            addr: ":8443".into(),
            plaintext: true,
            ..Settings::default()
        };
        assert_eq!(s.max_header_list_size, 16384);
        assert!(s.check().is_ok());
        let small = Settings {
            max_header_list_size: 1023,
            ..s.clone()
        };
        let err = small.check().unwrap_err();
        assert_eq!(err.fields().collect::<Vec<_>>(), ["max_header_list_size"]);
        let text = err.to_string();
        assert!(
            text.starts_with("invalid server settings of :8443: max_header_list_size is 1023"),
            "{text}"
        );
        assert!(
            text.contains("max_header_list_size is 1023, want a size in bytes of at least 1024"),
            "{text}"
        );
        let read: Settings = serde_json::from_str(r#"{"max_header_list_size": 65536}"#).unwrap();
        assert_eq!(read.max_header_list_size, 65536);
    }

    #[test]
    fn a_connection_age_past_the_limit_is_refused() {
        assert!(check_max_connection_age(Some(MAX_CONNECTION_AGE_LIMIT)).is_ok());
        for age in [
            MAX_CONNECTION_AGE_LIMIT + Duration::from_secs(1),
            Duration::MAX,
        ] {
            let err = check_max_connection_age(Some(age)).unwrap_err().to_string();
            assert!(err.contains("want at most 365 days"), "{err}");
        }
        assert!(check_max_connection_age(None).is_ok());
    }

    #[test]
    fn addresses() {
        assert_check(
            check_addr,
            &[
                ":8443",
                "127.0.0.1:0",
                "[::1]:8443",
                "localhost:1",
                ":0",
                "0.0.0.0:80",
                "[fe80::1%eth0]:8443",
            ],
            &[
                ("", "empty"),
                ("tcp://:80", "scheme"),
                (":grpc", "port \"grpc\""),
                ("8443", "no port"),
                (":70000", "0..=65535"),
                ("::1:80", "brackets"),
                ("[::1]", "no port"),
                ("[x]:80", "IPv6"),
                ("a b:80", "' '"),
                ("a/b:80", "'/'"),
                (
                    "*:80",
                    "has the host \"*\": leave it out (\":80\") to listen on every address",
                ),
                (
                    "999.1.1.1:80",
                    "has a bad host: \"999.1.1.1\" is no IPv4 address",
                ),
                ("-api:80", "starts or ends with '-'"),
                ("[::1:80", "opens a bracket it does not close"),
                ("[fe80::1%]:80", "whose zone is no interface name"),
            ],
        );
    }

    #[test]
    fn every_bad_field_is_named() {
        let settings = Settings {
            addr: "nowhere".into(),
            max_connection_age: Some(Duration::ZERO),
            max_connection_age_grace: Some(Duration::from_secs(7200)),
            shutdown_grace: Duration::from_secs(7200),
            plaintext: true,
            ..Settings::default()
        };
        let err = settings.check().unwrap_err();
        assert_eq!(
            err.fields().collect::<Vec<_>>(),
            [
                "addr",
                "max_connection_age",
                "max_connection_age_grace",
                "shutdown_grace"
            ]
        );
        assert!(
            err.to_string()
                .contains("shutdown_grace is 2h, want at most 1h"),
            "{err}"
        );
    }

    #[test]
    fn a_grace_without_an_age_is_refused_naming_both() {
        let settings = Settings {
            addr: ":8443".into(),
            max_connection_age_grace: Some(Duration::from_secs(5)),
            plaintext: true,
            ..Settings::default()
        };
        let err = settings.check().unwrap_err();
        assert_eq!(
            err.fields().collect::<Vec<_>>(),
            ["max_connection_age_grace"]
        );
        assert!(
            err.to_string()
                .contains("max_connection_age_grace is set, but max_connection_age is not"),
            "{err}"
        );
        let settings = Settings {
            max_connection_age: Some(Duration::from_secs(60)),
            ..settings
        };
        assert_eq!(settings.check(), Ok(()));
    }

    #[test]
    fn deserialises_durations_in_humantime_form() {
        let settings: Settings = serde_json::from_str(
            r#"{"addr": ":8443", "plaintext": true, "max_connection_age": "1m30s", "max_connection_age_grace": "250ms"}"#,
        )
        .unwrap();
        assert_eq!(settings.addr, ":8443");
        assert_eq!(settings.max_connection_age, Some(Duration::from_secs(90)));
        assert_eq!(
            settings.max_connection_age_grace,
            Some(Duration::from_millis(250))
        );
        assert_eq!(settings.shutdown_grace, Duration::from_secs(10), "default");
        assert!(settings.check().is_ok());

        let err = serde_json::from_str::<Settings>(r#"{"shutdown_grace": "soon"}"#)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("soon") || err.contains("duration"), "{err}");

        // The checks run after deserialising.
        let settings: Settings = serde_json::from_str(
            r#"{"addr": ":1", "plaintext": true, "max_connection_age": "0s"}"#,
        )
        .unwrap();
        let err = settings.check().unwrap_err();
        assert_eq!(err.fields().collect::<Vec<_>>(), ["max_connection_age"]);
    }
}
