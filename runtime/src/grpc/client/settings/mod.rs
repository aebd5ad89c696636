//! `Settings`: one dependency's client settings, their defaults and a
//! check per field ([design](crate::design::client#the-settings)).
//!
//! The checks of the fields this crate's gRPC client alone has, and the
//! check of a whole `Settings` ([`NewError`]), are in [`check`].

mod check;

use std::sync::Arc;
use std::time::Duration;

use super::{AttemptLayers, Classify};
use crate::call::settings::{
    DEFAULT_BACKOFF_BASE, DEFAULT_BACKOFF_MAX, DEFAULT_BREAKER, DEFAULT_MAX_ATTEMPTS,
    DEFAULT_TIMEOUT, default_breaker_policy,
};
pub use crate::call::settings::{
    InvalidValue, check_attempt_timeout, check_backoff_base, check_backoff_max, check_breaker,
    check_max_attempts, check_open_for, check_probe_timeout, check_probes, check_retry_budget,
    check_timeout, check_tls, check_window,
};
use crate::{circuit, retry};
pub use check::{
    NewError, check_addr, check_authority, check_connect_backoff_max,
    check_max_decoding_message_size, check_server_name,
};
pub(super) use check::{breaker_refused, budget_refused};

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

crate::call::settings::settings_read! {
    /// [`Settings`] as read: each field given, or not (then it keeps its
    /// default), with the shared sections and their flat keys
    /// (`breaker_window`), which are all `envy` can read
    /// (`CARTS_BREAKER_OPEN_FOR=3s`).
    struct Read for Settings {
        addr: String,
        in_code tls => tls.as_ref().map(|_| "rustls::ClientConfig"),
        server_name: Option<String>,
        authority: Option<String>,
        use timeout,
        use attempt_timeout,
        use max_attempts,
        use retry_budget,
        use backoff,
        #[serde(default, with = "humantime_serde")]
        connect_backoff_max: Duration,
        in_code classify,
        use breaker,
        in_code breaker_policy,
        use forward_scenario,
        max_decoding_message_size: usize,
        in_code layers,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
