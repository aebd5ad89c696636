//! `Settings`: one dependency's client settings, their defaults and a
//! check per field ([design](crate::design::client#the-settings)).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use rustls_pki_types::ServerName;

use super::{AttemptLayers, Classify};
pub(crate) use crate::call::settings::{
    BreakerSection, BudgetSection, DEFAULT_BACKOFF_BASE, DEFAULT_BACKOFF_MAX, DEFAULT_BREAKER,
    DEFAULT_MAX_ATTEMPTS, DEFAULT_TIMEOUT, breaker_of, budget_of, budget_path,
    default_breaker_policy, positive_within_a_year, section_checks,
};
pub use crate::call::settings::{
    InvalidValue, check_attempt_timeout, check_backoff_base, check_backoff_max, check_breaker,
    check_max_attempts, check_open_for, check_probe_timeout, check_probes, check_retry_budget,
    check_timeout, check_tls, check_window,
};
use crate::{circuit, retry};

/// The settings of one dependency's [`Client`](super::Client): plain
/// values, a [`Default`] with the defaults below, and a public check per
/// field that has a valid range, which a service's configuration layer
/// runs on each value it reads (so a bad value names the variable it came
/// from, and the service exits 78). [`Client::new`](super::Client::new)
/// runs every check again.
///
/// | field | default | check |
/// |---|---|---|
/// | [`addr`](Settings::addr) | none (empty: `new` rejects it) | [`check_addr`]; with [`tls`](Settings::tls) and no [`server_name`](Settings::server_name), its host must be a DNS name or an IP address |
/// | [`tls`](Settings::tls) | `None`: plain text | [`check_tls`] |
/// | [`server_name`](Settings::server_name) | `None`: the host of `addr` | [`check_server_name`] |
/// | [`authority`](Settings::authority) | `None`: `server_name` if set, else `addr` | [`check_authority`] |
/// | [`timeout`](Settings::timeout) | 10 s | [`check_timeout`] |
/// | [`attempt_timeout`](Settings::attempt_timeout) | `None`: an attempt may take the call's whole time | [`check_attempt_timeout`] |
/// | [`max_attempts`](Settings::max_attempts) | 3 | [`check_max_attempts`] |
/// | [`retry_budget`](Settings::retry_budget) | 10 tokens, ratio 0.1 (gRFC A6) | one per field: [`retry::check_max_tokens`], [`retry::check_token_ratio`]; both: [`check_retry_budget`] |
/// | [`backoff_base`](Settings::backoff_base) | 100 ms | [`check_backoff_base`] |
/// | [`backoff_max`](Settings::backoff_max) | 5 s | [`check_backoff_max`] |
/// | [`connect_backoff_max`](Settings::connect_backoff_max) | 120 s (gRPC's) | [`check_connect_backoff_max`] |
/// | [`classify`](Settings::classify) | [`default_classify`](super::default_classify) | none (set in code) |
/// | [`breaker`](Settings::breaker) | window 20, 1 probe, open 10 s, probe timeout 30 s | one per field: [`check_window`], [`check_probes`], [`check_open_for`], [`check_probe_timeout`]; all four: [`check_breaker`] |
/// | [`breaker_policy`](Settings::breaker_policy) | open after 5 failures in a row or half of 20 or more; close after 3 good probes | none (set in code) |
/// | [`forward_scenario`](Settings::forward_scenario) | `false` | none |
/// | [`max_decoding_message_size`](Settings::max_decoding_message_size) | 4 MiB (tonic's) | [`check_max_decoding_message_size`] |
/// | [`layers`](Settings::layers) | none | none (set in code: [`layer`](Settings::layer), [`interceptor`](Settings::interceptor)) |
///
/// The defaults of the timeout, the backoff and the probe timeout are
/// chosen so that a pushback of up to 5 s is waited for, and a probe holds
/// its slot longer than any unary call lasts.
///
/// # Read with serde
///
/// `Settings` is `serde::Deserialize`, durations in humantime form
/// (`"250ms"`, `"1m30s"`), so `envy`, `figment` or `config` read it from
/// the environment or from files. Every field not given keeps its default,
/// and so does every field of a `breaker` or `retry_budget` section not
/// given (`{"breaker": {"open_for": "3s"}}` changes `open_for` alone).
/// Each section's field is also read as a flat key, `breaker_open_for`,
/// `retry_budget_token_ratio`, which is how `envy` (which reads no
/// section) sets it: `CARTS_BREAKER_OPEN_FOR=3s`; a field given both ways
/// is an error naming both. The fields set in code (`tls`, `classify`, `breaker_policy`) are never
/// read. An unknown key inside a section (`breaker.windw`) is an error
/// naming the keys it takes; an unknown top-level key is ignored, so that
/// `envy` can read one prefix of an environment other parts of the service
/// share (to refuse those in a file, read it with
/// [`app::deserialize_strict`](crate::app::deserialize_strict)).
/// [`app::deserialize`](crate::app::deserialize) names the path of a value
/// serde refuses (`breaker.window: invalid type: ...`), and
/// [`app::check_client`](crate::app::check_client) runs the checks after,
/// naming each bad field by its path (`breaker.window`,
/// `retry_budget.token_ratio`).
///
/// Design: [the settings](crate::design::client#the-settings), [the connection](crate::design::client#the-connection),
/// [retries](crate::design::client#retries), [the circuit breaker](crate::design::client#the-circuit-breaker).
#[derive(Clone, serde::Deserialize)]
#[serde(try_from = "Read")]
pub struct Settings {
    /// The dependency's address, `host:port` with no scheme: `carts:9090`,
    /// `10.0.0.7:9090`, `[::1]:9090`. The [`Host`](crate::Host) resolves
    /// the name at each dial. It is also every call's `:authority`, unless
    /// [`authority`](Settings::authority) or
    /// [`server_name`](Settings::server_name) is set.
    pub addr: String,

    /// The TLS config the client dials with; `None` dials in plain text.
    ///
    /// The client dials with a clone of it, with `h2` as its only ALPN
    /// protocol (and requires the server to choose it), so the config given
    /// is never changed. It trusts exactly the roots the config holds: a
    /// config built on one CA's root trusts that CA and nothing else. The
    /// certificate is checked for the host of [`addr`](Settings::addr), or
    /// for [`server_name`](Settings::server_name). For mTLS, the config
    /// carries the client certificate.
    pub tls: Option<Arc<rustls::ClientConfig>>,

    /// The name the server's certificate is checked for (and sent in TLS's
    /// SNI), otherwise the host of [`addr`](Settings::addr): a client of
    /// `10.0.0.7:9090` with the server name `carts` requires a certificate
    /// for `carts`. Unless [`authority`](Settings::authority) says another,
    /// it is also every call's `:authority`, as in grpc-go, where a TLS
    /// config's server name is the channel's authority. (rustls has no
    /// server name in its config, so this stands for Go's
    /// `tls.Config.ServerName`.)
    pub server_name: Option<String>,

    /// The `:authority` of every call, otherwise
    /// [`server_name`](Settings::server_name) if set, else
    /// [`addr`](Settings::addr): a client of `10.0.0.7:9090` with the server
    /// name `carts` and the authority `carts-api` requires a certificate
    /// for `carts` and sends `:authority carts-api` (for a proxy or a
    /// virtual host that routes by it). It changes nothing of what is
    /// dialled or checked. (grpc-go's `grpc.WithAuthority`.)
    pub authority: Option<String>,

    /// How long a unary call may take, every attempt and every wait between
    /// them included. A caller's earlier deadline (the request's
    /// `grpc-timeout`, [`tonic::Request::set_timeout`](https://docs.rs/tonic/0.14/tonic/struct.Request.html#method.set_timeout)) wins; a later one
    /// does not extend it. Streams ignore it: they end with their caller's
    /// own deadline.
    pub timeout: Duration,

    /// How long one attempt of a unary call, or one attempt to open a
    /// stream, may take; `None` (the default): as long as the call's
    /// deadline lets it. The HTTP client's setting of the same name, here
    /// unset by default.
    ///
    /// An attempt still under way when it passes is cancelled (its HTTP/2
    /// stream reset) and ends `DeadlineExceeded`, with an
    /// [`AttemptTimeout`](super::AttemptTimeout) as its status's source,
    /// whose message names the setting and its value. The client
    /// classifies it itself, not the classify functions: a failure for the
    /// breaker, retried as any retryable failure is (within
    /// [`max_attempts`](Settings::max_attempts), the retry budget, the
    /// backoff and the call's deadline) unless the method is
    /// [`never_retry`](super::MethodPolicy::never_retry). The call's own
    /// deadline still ends the call: an attempt has the earlier of the two,
    /// and a unary attempt's `grpc-timeout` says that earlier one, so the
    /// server gives up on it too.
    ///
    /// A stream's open is bounded the same way until the server answers
    /// with its response headers; once open, the stream lives as long as
    /// its caller wants, so its `grpc-timeout` is the call's deadline
    /// alone. A client-streaming call is not bounded by it: a server
    /// answers it once it has read the whole upload, whose pace is the
    /// caller's (a bidirectional stream's open ends when the server sends
    /// its headers, which tonic's server does when its handler returns). An injected delay it cuts short ends as the attempt's
    /// timeout, as a slow dependency's would, with its
    /// [`InjectedError`](crate::fault::InjectedError) among its sources. Unset, it costs a call
    /// nothing (no timer, no allocation). A value longer than
    /// [`timeout`](Settings::timeout) never fires for a unary call.
    ///
    /// Set it well above the slowest method's usual latency (its p99): it
    /// is one value for every method of the client, and each attempt it
    /// cuts counts as one failure, so with the default `max_attempts` (3)
    /// and breaker policy (five failures in a row) two calls of a method
    /// slower than it open the breaker for every caller. An attempt cut
    /// while it still waits for its connection ends the call instead of
    /// being retried ([`AttemptTimeout::was_connecting`](super::AttemptTimeout::was_connecting)).
    /// A per-attempt layer's own timeout (tower's `TimeoutLayer`) is
    /// classified the same way, but is not sent to the server as
    /// `grpc-timeout`, so the server keeps working on an attempt the client
    /// gave up on: prefer this setting.
    ///
    /// It runs from the attempt's start: a wait for the connection, and
    /// a wait in a per-attempt layer that queues (tower's
    /// `ConcurrencyLimit` without `LoadShed`, `RateLimit`, `Buffer`), count
    /// in it, and an attempt cut in such a queue counts as the dependency's
    /// failure though nothing was sent. Put `LoadShed` over a limit (the
    /// attempt is then shed, counting nothing), or a `TimeoutLayer` inside
    /// it (which times the request from when the limit lets it through).
    /// A stock tonic client over [`Client::channel`](super::Client::channel)
    /// retries a method the channel has no descriptor for on its attempt
    /// timeout: give the channel the descriptors
    /// ([`with_methods`](super::Channel::with_methods)) of any method that
    /// must never be sent twice.
    pub attempt_timeout: Option<Duration>,

    /// The most attempts one call makes (a stream's opens included): 1
    /// turns retries off.
    pub max_attempts: u32,

    /// The retry budget shared by every call of the client (gRFC A6's
    /// retry throttling): each attempt classified Retry takes a token, each
    /// success gives back `token_ratio`, and retries stop while half the
    /// tokens or fewer are left. First attempts are never limited.
    pub retry_budget: retry::BudgetConfig,

    /// The backoff's base: the wait before retry `n` is drawn from 0 up to
    /// the smaller of [`backoff_max`](Settings::backoff_max) and
    /// `backoff_base · 2ⁿ⁻¹` (full jitter).
    pub backoff_base: Duration,

    /// The backoff's ceiling, and the longest pushback
    /// (`grpc-retry-pushback-ms`) a call waits for: a longer one ends the
    /// call with its attempt's status. Must not be below
    /// [`backoff_base`](Settings::backoff_base).
    pub backoff_max: Duration,

    /// The ceiling of gRPC's connection backoff: the longest wait, from
    /// the start of a failed dial, before the connection dials again
    /// (default 120 s, gRPC's `MAX_BACKOFF`; grpc-go's
    /// `ConnectParams.Backoff.MaxDelay`). Not the retry backoff above:
    /// that one spaces a call's attempts, this one the connection's dials.
    ///
    /// After a failed dial the next is due 1 s after it started, then 1.6
    /// times longer after each further failure, ±20 % jitter, and never
    /// more than this (the jitter applies below it, so a wait is at most
    /// this ceiling, where grpc-go jitters past its own by up to 20 %).
    /// Until the next dial is due, calls fail at once with the last dial's
    /// error, so once a dependency that was down for a while comes back,
    /// calls keep failing for up to this long before a dial reaches it,
    /// and then the [breaker](Settings::breaker)'s half-open probes close
    /// the breaker: recovery is bounded by this and
    /// [`breaker.open_for`](circuit::Config::open_for), whichever is later,
    /// not by `open_for` alone. A shorter ceiling recovers sooner at the
    /// cost of more dials to a dependency that stays down. A dial may take
    /// 20 s (grpc-go's minimum connect timeout), or the wait if longer.
    pub connect_backoff_max: Duration,

    /// How each attempt's result counts, for retries and for the breaker,
    /// for methods whose own [policy](super::MethodPolicy) does not decide.
    /// Set in code: what a dependency's codes mean is the user's knowledge.
    pub classify: Classify,

    /// The breaker's settings from configuration: the window of results its
    /// policy sees, how many probes go at once, how long it stays open, and
    /// how long a probe holds its slot.
    pub breaker: circuit::Config,

    /// When the breaker opens and closes. Set in code. A policy whose trip
    /// function always answers `false` turns the breaker off.
    pub breaker_policy: circuit::Policy,

    /// Whether a failure scenario in a call's baggage is sent on to the
    /// dependency; by default the client strips it.
    pub forward_scenario: bool,

    /// The longest response message the client takes, in bytes (tonic's
    /// `max_decoding_message_size`, named as tonic names it; 4 MiB, tonic's
    /// default). A longer one ends the call `ResourceExhausted` (as
    /// grpc-go, gRPC's C core and grpc-java end it; tonic says
    /// `OutOfRange`), read no further, not retried by the default
    /// classification, and counted against the dependency. It applies to
    /// every response the client reads: a typed unary call's, a typed
    /// stream's messages, and every call through
    /// [`Client::channel`](super::Client::channel), before the stock
    /// client's own limit (so the smaller of the two wins). It does not
    /// limit what the client sends, nor what a server takes: a server
    /// refuses a request over its own limit with a status of its own
    /// (tonic's: `OutOfRange`), which is returned as it is.
    pub max_decoding_message_size: usize,

    /// The tower layers and tonic interceptors around each attempt's send,
    /// outermost first; none by default, which costs the calls nothing.
    /// Set in code, with [`Settings::layer`] and [`Settings::interceptor`].
    #[serde(skip)]
    pub layers: AttemptLayers,
}

impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settings")
            .field("addr", &self.addr)
            .field("tls", &self.tls.as_ref().map(|_| "rustls::ClientConfig"))
            .field("server_name", &self.server_name)
            .field("authority", &self.authority)
            .field("timeout", &self.timeout)
            .field("attempt_timeout", &self.attempt_timeout)
            .field("max_attempts", &self.max_attempts)
            .field("retry_budget", &self.retry_budget)
            .field("backoff_base", &self.backoff_base)
            .field("backoff_max", &self.backoff_max)
            .field("connect_backoff_max", &self.connect_backoff_max)
            .field("classify", &self.classify)
            .field("breaker", &self.breaker)
            .field("breaker_policy", &self.breaker_policy)
            .field("forward_scenario", &self.forward_scenario)
            .field("max_decoding_message_size", &self.max_decoding_message_size)
            .field("layers", &self.layers)
            .finish()
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            addr: String::new(),
            tls: None,
            server_name: None,
            authority: None,
            timeout: DEFAULT_TIMEOUT,
            attempt_timeout: None,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            retry_budget: retry::BudgetConfig::DEFAULT,
            backoff_base: DEFAULT_BACKOFF_BASE,
            backoff_max: DEFAULT_BACKOFF_MAX,
            connect_backoff_max: Duration::from_secs(120),
            classify: Classify::default(),
            breaker: DEFAULT_BREAKER,
            breaker_policy: default_breaker_policy(),
            forward_scenario: false,
            max_decoding_message_size: super::limit::DEFAULT,
            layers: AttemptLayers::default(),
        }
    }
}

/// [`Settings`] as read: each field given, or not (then it keeps its
/// default), the sections' fields each on its own, and the sections'
/// fields also as flat keys (`breaker_window`), which are all `envy` can
/// read (`CARTS_BREAKER_OPEN_FOR=3s`).
#[derive(serde::Deserialize)]
struct Read {
    addr: Option<String>,
    server_name: Option<String>,
    authority: Option<String>,
    #[serde(default, with = "humantime_serde")]
    timeout: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    attempt_timeout: Option<Duration>,
    max_attempts: Option<u32>,
    retry_budget: Option<BudgetSection>,
    retry_budget_max_tokens: Option<u32>,
    retry_budget_token_ratio: Option<f64>,
    #[serde(default, with = "humantime_serde")]
    backoff_base: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    backoff_max: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    connect_backoff_max: Option<Duration>,
    breaker: Option<BreakerSection>,
    breaker_window: Option<usize>,
    breaker_probes: Option<usize>,
    #[serde(default, with = "humantime_serde")]
    breaker_open_for: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    breaker_probe_timeout: Option<Duration>,
    forward_scenario: Option<bool>,
    max_decoding_message_size: Option<usize>,
}

impl TryFrom<Read> for Settings {
    type Error = String;

    fn try_from(read: Read) -> Result<Settings, String> {
        let d = Settings::default();
        Ok(Settings {
            addr: read.addr.unwrap_or(d.addr),
            server_name: read.server_name,
            authority: read.authority,
            timeout: read.timeout.unwrap_or(d.timeout),
            attempt_timeout: read.attempt_timeout.or(d.attempt_timeout),
            max_attempts: read.max_attempts.unwrap_or(d.max_attempts),
            retry_budget: budget_of(
                read.retry_budget,
                read.retry_budget_max_tokens,
                read.retry_budget_token_ratio,
                d.retry_budget,
            )?,
            backoff_base: read.backoff_base.unwrap_or(d.backoff_base),
            backoff_max: read.backoff_max.unwrap_or(d.backoff_max),
            connect_backoff_max: read.connect_backoff_max.unwrap_or(d.connect_backoff_max),
            breaker: breaker_of(
                read.breaker,
                (read.breaker_window, read.breaker_probes),
                (read.breaker_open_for, read.breaker_probe_timeout),
                d.breaker,
            )?,
            forward_scenario: read.forward_scenario.unwrap_or(d.forward_scenario),
            max_decoding_message_size: read
                .max_decoding_message_size
                .unwrap_or(d.max_decoding_message_size),
            ..d
        })
    }
}

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
                Problem::Unclosed => format!("{addr:?} opens a bracket it does not close"),
                Problem::NoPortAfterBracket => {
                    format!("{addr:?} has no port, want [ipv6]:port")
                }
                Problem::NotIpv6(host) => {
                    format!("{addr:?} has {host:?} in brackets, which is no IPv6 address")
                }
                Problem::BadZone(host) => format!(
                    "{addr:?} has {host:?} in brackets, whose zone is no interface name or index"
                ),
                Problem::NoPort => format!("{addr:?} has no port, want host:port"),
                Problem::UnbracketedIpv6 => {
                    format!("{addr:?} has an IPv6 address without brackets, want [ipv6]:port")
                }
                Problem::BadHost(why) => format!("{addr:?} has a bad host: {why}"),
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
    let host = super::connection::host_of(addr);
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
    if bytes == 0 {
        Err(InvalidValue::new(
            "is 0, want a size in bytes of 1 or more (tonic's default is 4194304, 4 MiB)",
        ))
    } else {
        Ok(())
    }
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

/// Why [`Client::new`](super::Client::new) refused its settings: every bad
/// field, each named by its [`Settings`] field name.
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
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewError {
    problems: Vec<(&'static str, String)>,
    /// The dependency, `addr`, when it is valid: the message names it, so
    /// that a service with several clients tells which one is wrong.
    dependency: Option<String>,
}

impl NewError {
    pub(super) fn breaker(e: circuit::ConfigError) -> NewError {
        NewError {
            problems: vec![("breaker", e.to_string())],
            dependency: None,
        }
    }

    pub(super) fn budget(e: retry::BudgetError) -> NewError {
        NewError {
            problems: vec![(budget_path(&e), e.to_string())],
            dependency: None,
        }
    }

    /// The bad fields, in the order of [`Settings`], each by its path: a
    /// field's name (`"timeout"`), or a section's and its field's
    /// (`"breaker.window"`, `"retry_budget.token_ratio"`), as a
    /// configuration names them.
    pub fn fields(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.problems.iter().map(|(field, _)| *field)
    }

    /// Each bad field's path and what is wrong with it, for
    /// [`app::Env`](crate::app::Env) to name by its variable.
    pub(crate) fn problems(&self) -> Vec<(&'static str, String)> {
        self.problems.clone()
    }
}

impl fmt::Display for NewError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("invalid client settings")?;
        if let Some(addr) = &self.dependency {
            write!(f, " of {addr}")?;
        }
        f.write_str(": ")?;
        for (i, (field, problem)) in self.problems.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{field} {problem}")?;
        }
        Ok(())
    }
}

impl std::error::Error for NewError {}

impl Settings {
    /// Runs every field's check, and the checks that take two fields.
    pub(crate) fn check(&self) -> Result<(), NewError> {
        let mut problems = Vec::new();
        let mut put = |field: &'static str, r: Result<(), InvalidValue>| {
            if let Err(e) = r {
                problems.push((field, e.reason));
            }
        };
        put("addr", check_addr(&self.addr));
        if let Some(tls) = &self.tls {
            put("tls", check_tls(tls));
        }
        if let Some(name) = &self.server_name {
            put("server_name", check_server_name(name));
        } else if self.tls.is_some() && check_addr(&self.addr).is_ok() {
            put("addr", check_tls_host(&self.addr));
        }
        if let Some(authority) = &self.authority {
            put("authority", check_authority(authority));
        }
        put("timeout", check_timeout(self.timeout));
        if let Some(attempt_timeout) = self.attempt_timeout {
            put("attempt_timeout", check_attempt_timeout(attempt_timeout));
        }
        put("max_attempts", check_max_attempts(self.max_attempts));
        put("backoff_base", check_backoff_base(self.backoff_base));
        put("backoff_max", check_backoff_max(self.backoff_max));
        if self.backoff_max < self.backoff_base {
            put(
                "backoff_max",
                Err(InvalidValue::new(format!(
                    "{:?} is below backoff_base {:?}",
                    self.backoff_max, self.backoff_base
                ))),
            );
        }
        put(
            "connect_backoff_max",
            check_connect_backoff_max(self.connect_backoff_max),
        );
        put(
            "max_decoding_message_size",
            check_max_decoding_message_size(self.max_decoding_message_size),
        );
        for (field, result) in section_checks(&self.retry_budget, &self.breaker) {
            put(field, result);
        }
        if problems.is_empty() {
            Ok(())
        } else {
            let dependency = check_addr(&self.addr).is_ok().then(|| self.addr.clone());
            Err(NewError {
                problems,
                dependency,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        for ok in [
            "carts:9090",
            "10.0.0.7:9090",
            "[::1]:9090",
            "carts.default.svc.cluster.local:443",
            "localhost:1",
            "a:65535",
            "_grpc._tcp.carts:1",
            "carts.:1",
        ] {
            assert_eq!(check_addr(ok), Ok(()), "{ok}");
        }
        for (bad, says) in [
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
        ] {
            let err = check_addr(bad).unwrap_err().to_string();
            assert!(err.contains(says), "{bad:?}: {err}");
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
    fn the_defaults_are_the_documented_ones() {
        let s = Settings::default();
        assert_eq!(s.max_attempts, 3);
        assert_eq!(s.breaker.window, 20);
        assert_eq!(s.breaker.probes, 1);
        assert_eq!(s.breaker.open_for, Duration::from_secs(10));
        let five = circuit::Counts {
            failures: 5,
            consecutive_failures: 5,
            ..circuit::Counts::default()
        };
        assert!(s.breaker_policy.trip(&five));
        let half = circuit::Counts {
            successes: 10,
            failures: 10,
            consecutive_failures: 1,
            ..circuit::Counts::default()
        };
        assert!(s.breaker_policy.trip(&half));
        let three = circuit::Counts {
            successes: 3,
            consecutive_successes: 3,
            ..circuit::Counts::default()
        };
        assert_eq!(s.breaker_policy.probe(&three), circuit::State::Closed);
        assert!(s.tls.is_none());
        assert!(!s.forward_scenario);
        assert_eq!(s.max_decoding_message_size, 4 * 1024 * 1024);
        assert_eq!(s.attempt_timeout, None);
        let s = Settings {
            addr: "carts:9090".into(),
            ..s
        };
        assert_eq!(s.check(), Ok(()));
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
