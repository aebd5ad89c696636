//! `Settings`: one HTTP dependency's client settings, their defaults and a
//! check per field.

use std::sync::Arc;
use std::time::Duration;

use reqwest::Url;

use super::Classify;
use crate::InvalidSettings;
use crate::call::settings::{Checks, InvalidValue, check_timeout, check_tls};
use crate::{circuit, retry};

/// The settings of one HTTP dependency's [`Client`](super::Client): plain
/// values, a [`Default`] with the defaults below, and a public check per
/// field that has a valid range, which a service's configuration layer
/// runs on each value it reads (so a bad value names the variable it came
/// from, and the service exits 78). [`Client::new`](super::Client::new)
/// runs every check again, and reports every bad field at once
/// ([`NewError`]).
///
/// | field | default | check |
/// |---|---|---|
/// | [`base_url`](Settings::base_url) | none (empty: `new` rejects it) | [`check_base_url`] |
/// | [`tls`](Settings::tls) | `None`: the platform's roots, for an `https` base URL | [`check_tls`] |
/// | [`timeout`](Settings::timeout), [`max_attempts`](Settings::max_attempts), [`retry_budget`](Settings::retry_budget), [`backoff_base`](Settings::backoff_base), [`backoff_max`](Settings::backoff_max), [`breaker`](Settings::breaker), [`breaker_policy`](Settings::breaker_policy), [`forward_scenario`](Settings::forward_scenario) | the [gRPC client's](crate::grpc::client::Settings) | the same checks, listed there |
/// | [`attempt_timeout`](Settings::attempt_timeout) | 5 s | [`check_attempt_timeout`](super::check_attempt_timeout) |
/// | [`classify`](Settings::classify) | [`default_classify`](super::default_classify) | none (set in code) |
///
/// The defaults are the gRPC client's, so both kinds of dependency behave
/// alike; `attempt_timeout`, which the gRPC client leaves unset by
/// default ([its setting](crate::grpc::client::Settings::attempt_timeout)),
/// leaves room for a retry within the default timeout.
///
/// # Read with serde
///
/// The settings deserialise with serde (so `envy`, `figment` or `config`
/// read them) exactly as the [gRPC client's](crate::grpc::client::Settings)
/// do: a field not given keeps its default, and so does every field of a
/// `breaker` or `retry_budget` section not given; each section's field is
/// also a flat key (`breaker_open_for`, `RATES_BREAKER_OPEN_FOR=3s` with
/// `envy`), and one given both ways is an error naming both; durations
/// are humantime strings (`"250ms"`, `"1m30s"`); an unknown key in a
/// section is an error, an unknown top-level key is ignored (see
/// [`app::deserialize_strict`](crate::app::deserialize_strict)); the
/// fields set in code (`tls`, `classify`, `breaker_policy`) are never
/// read. Deserialising runs no check: run
/// [`check_http_client`](crate::app::check_http_client) on what was read,
/// so a bad value is a settings error naming its field.
///
/// ```
/// let rates: humus::http::client::Settings = serde_json::from_str(
///     r#"{"base_url": "https://rates:8443/v1", "attempt_timeout": "500ms"}"#,
/// )
/// .unwrap();
/// assert_eq!(rates.attempt_timeout, std::time::Duration::from_millis(500));
/// assert!(humus::app::check_http_client(&rates).is_ok());
/// ```
#[derive(Clone, serde::Deserialize)]
#[serde(try_from = "Read")]
pub struct Settings {
    /// The dependency's base URL: `http` or `https`, a host, an optional
    /// port and path, no credentials, query or fragment
    /// (`https://payments:8443/v1`). Every request's URL is on its origin,
    /// and so is every redirect the client follows (a redirect elsewhere
    /// is returned as the 3xx it is: [`Client::new`](super::Client::new));
    /// [`Client::get`](super::Client::get) and the rest append their path
    /// to it. It names the failure-injection point, `http:<host>:<port>`,
    /// with the scheme's port when the URL has none.
    pub base_url: String,

    /// The rustls config the client connects with over `https`; `None`
    /// trusts the platform's roots (with rustls' `ring` provider). Given,
    /// it trusts exactly the roots it holds; for mTLS it carries the client
    /// certificate. reqwest sets its ALPN protocols (`h2`, `http/1.1`).
    /// Set in code.
    pub tls: Option<Arc<rustls::ClientConfig>>,

    /// How long one call may take: every attempt and every wait between
    /// them. The last attempt's time is at most what is left of it, so
    /// reading the body of the response the call returns ends by it too. A
    /// request's own timeout ([`reqwest::RequestBuilder::timeout`]) wins
    /// when it is shorter.
    ///
    /// [`reqwest::RequestBuilder::timeout`]: https://docs.rs/reqwest/0.13/reqwest/struct.RequestBuilder.html#method.timeout
    pub timeout: Duration,

    /// How long one attempt may take, an injected delay and reading its
    /// response's body included (the smaller of this and what is left of
    /// [`timeout`](Settings::timeout)). It is reqwest's own timer (the
    /// reqwest client's timeout, or the request's own when the attempt has
    /// less time left), so a body read past it fails with reqwest's timeout
    /// error.
    /// An attempt it cuts short before its response is retried as a
    /// transport error is.
    pub attempt_timeout: Duration,

    /// The most attempts one call makes: 1 turns retries off.
    pub max_attempts: u32,

    /// The retry budget shared by every call of the client (gRFC A6's
    /// retry throttling), as the gRPC client's.
    pub retry_budget: retry::BudgetConfig,

    /// The backoff's base: the wait before retry `n` is drawn from 0 up to
    /// the smaller of [`backoff_max`](Settings::backoff_max) and
    /// `backoff_base · 2ⁿ⁻¹` (full jitter).
    pub backoff_base: Duration,

    /// The backoff's ceiling, and the longest `Retry-After` a call waits
    /// for: a longer one ends the call with its attempt's response. Must
    /// not be below [`backoff_base`](Settings::backoff_base).
    pub backoff_max: Duration,

    /// How each attempt's result counts, for retries and for the breaker.
    /// Set in code: what a dependency's answers mean is the user's
    /// knowledge.
    pub classify: Classify,

    /// The breaker's settings from configuration.
    pub breaker: circuit::Config,

    /// When the breaker opens and closes. Set in code.
    pub breaker_policy: circuit::Policy,

    /// Whether a failure scenario in a call's baggage is sent on to the
    /// dependency; by default the client strips it.
    pub forward_scenario: bool,
}

impl Default for Settings {
    fn default() -> Self {
        use crate::call::settings as shared;
        Settings {
            base_url: String::new(),
            tls: None,
            timeout: shared::DEFAULT_TIMEOUT,
            attempt_timeout: Duration::from_secs(5),
            max_attempts: shared::DEFAULT_MAX_ATTEMPTS,
            retry_budget: retry::BudgetConfig::DEFAULT,
            backoff_base: shared::DEFAULT_BACKOFF_BASE,
            backoff_max: shared::DEFAULT_BACKOFF_MAX,
            classify: Classify::default(),
            breaker: shared::DEFAULT_BREAKER,
            breaker_policy: shared::default_breaker_policy(),
            forward_scenario: false,
        }
    }
}

crate::call::settings::settings_read! {
    /// [`Settings`] as read: each field given, or not (then it keeps its
    /// default), with the shared sections and their flat keys.
    struct Read for Settings {
        base_url: String,
        in_code tls => tls.as_ref().map(|_| "rustls::ClientConfig"),
        use timeout,
        use attempt_timeout,
        use max_attempts,
        use retry_budget,
        use backoff,
        in_code classify,
        use breaker,
        in_code breaker_policy,
        use forward_scenario,
    }
}

/// Checks a base URL: an absolute `http` or `https` URL, written out as
/// `scheme://host[:port][/path]`, with a host, and no credentials (not even
/// an empty user info, `http://@payments`), query or fragment. The text is
/// taken as it is: white space or a control character anywhere (a space
/// before the scheme, a newline after the path) is refused, where a URL
/// parser would trim it, and so are `http:payments` and `http:///payments`,
/// which a URL parser reads as `http://payments/`, and a `.` or `..` path
/// segment (`/v1/../x`, which it reads as `/x`). The host is checked as
/// the gRPC client's [`check_addr`](crate::grpc::client::check_addr)
/// checks one: an IP address (IPv6 in brackets) or a host name of
/// letters, digits, `-` and `_` (no empty label, none starting or ending
/// with `-`); the port, when given, is from 1 to 65535.
///
/// ```
/// use humus::http::client::check_base_url;
/// assert!(check_base_url("https://payments:8443/v1").is_ok());
/// assert!(check_base_url("payments:8443").is_err());
/// assert!(check_base_url("http:///payments").is_err());
/// ```
///
/// # Errors
///
/// [`InvalidValue`] saying what is wrong (and not naming the field).
pub fn check_base_url(base_url: &str) -> Result<(), InvalidValue> {
    parse_base_url(base_url).map(|_| ())
}

pub(super) fn parse_base_url(base_url: &str) -> Result<Url, InvalidValue> {
    const EXAMPLE: &str = "such as https://payments:8443";
    if base_url.is_empty() {
        return Err(InvalidValue::new(format!(
            "is empty, want an http or https URL {EXAMPLE}"
        )));
    }
    if let Some((i, c)) = base_url
        .char_indices()
        .find(|(_, c)| c.is_whitespace() || c.is_control())
    {
        let where_ = if i == 0 {
            "starts with".to_owned()
        } else if i + c.len_utf8() == base_url.len() {
            "ends with".to_owned()
        } else {
            format!("holds, at byte {i},")
        };
        return Err(InvalidValue::new(format!(
            "{:?} {where_} {c:?}, want a URL with no white space or control character",
            shown(base_url)
        )));
    }
    if base_url.contains('\\') {
        return Err(InvalidValue::new(format!(
            "{:?} holds a backslash, want '/' between the parts of a URL",
            shown(base_url)
        )));
    }
    let url = Url::parse(base_url).map_err(|e| {
        InvalidValue::new(format!(
            "{:?} is not an absolute URL ({e}), want one {EXAMPLE}",
            shown(base_url)
        ))
    })?;
    if !matches!(url.scheme(), "http" | "https") && !base_url.contains("://") {
        // `rates:8080` parses as the scheme "rates": the scheme is missing.
        return Err(InvalidValue::new(format!(
            "{:?} has no \"http://\" or \"https://\" before it (it reads as the scheme {:?}), want one such as \"http://{}\"",
            shown(base_url),
            url.scheme(),
            shown(base_url)
        )));
    }
    if !matches!(url.scheme(), "http" | "https") {
        return Err(InvalidValue::new(format!(
            "{:?} has the scheme {:?}, want http or https",
            shown(base_url),
            url.scheme()
        )));
    }
    // What the parser forgives, the text must not have: the authority
    // starts right after `scheme://`.
    let Some(rest) = base_url
        .get(url.scheme().len()..)
        .and_then(|r| r.strip_prefix("://"))
    else {
        return Err(InvalidValue::new(format!(
            "{:?} does not follow its scheme with \"://\", want {}://host[:port][/path]",
            shown(base_url),
            url.scheme()
        )));
    };
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    if authority.is_empty() {
        return Err(InvalidValue::new(format!(
            "{:?} has no host: \"{}://\" is followed by {}, want {}://host[:port][/path]",
            shown(base_url),
            url.scheme(),
            match rest.chars().next() {
                Some(c) => format!("{c:?}"),
                None => "nothing".to_owned(),
            },
            url.scheme()
        )));
    }
    if authority.contains('@') {
        return Err(InvalidValue::new(format!(
            "{:?} holds user info before '@' (credentials, even empty ones, would be recorded in every span): remove it, and set credentials on each request (basic_auth, bearer_auth)",
            shown(base_url)
        )));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(InvalidValue::new(format!(
            "{:?} has no host",
            shown(base_url)
        )));
    }
    // The host as written, checked as the gRPC client's addresses are
    // (an IPv6 address in brackets the URL parser has checked).
    let (host, port) = match authority.strip_prefix('[') {
        Some(bracketed) => (None, bracketed.split_once("]:").map(|(_, port)| port)),
        None => match authority.rsplit_once(':') {
            Some((host, port)) => (Some(host), Some(port)),
            None => (Some(authority), None),
        },
    };
    if let Some(host) = host
        && let Err(why) = crate::addr::check_host(host)
    {
        return Err(InvalidValue::new(format!(
            "{:?} has a bad host: {why}",
            shown(base_url)
        )));
    }
    match port {
        Some("") => {
            return Err(InvalidValue::new(format!(
                "{base_url:?} has a ':' with no port after it: give the port, or no ':'"
            )));
        }
        Some(_) if url.port() == Some(0) => {
            return Err(InvalidValue::new(format!(
                "{base_url:?} has port 0, want a port from 1 to 65535"
            )));
        }
        _ => {}
    }
    // The path as written: a URL parser would resolve `.` and `..` away
    // (`/v1/../x` is `/x`), and the text is taken as it is.
    let path_text = &rest[authority.len()..];
    let path_text = &path_text[..path_text.find(['?', '#']).unwrap_or(path_text.len())];
    if let Some(segment) = path_text.split('/').find(|s| is_dot_segment(s)) {
        return Err(InvalidValue::new(format!(
            "{base_url:?} has the path segment {segment:?}, which a URL parser would resolve away: write the path it means"
        )));
    }
    if url.query().is_some() {
        return Err(InvalidValue::new(format!(
            "{base_url:?} has a query, want none (give it on each request)"
        )));
    }
    if url.fragment().is_some() {
        return Err(InvalidValue::new(format!(
            "{base_url:?} has a fragment, want none"
        )));
    }
    Ok(url)
}

/// Whether `segment` is `.` or `..`, each dot maybe percent-encoded
/// (`%2e`, `%2E`), as a URL parser reads it.
pub(super) fn is_dot_segment(segment: &str) -> bool {
    let mut rest = segment;
    let mut dots = 0;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            rest = r;
        } else if rest
            .as_bytes()
            .get(..3)
            .is_some_and(|b| b.eq_ignore_ascii_case(b"%2e"))
        {
            // Three ASCII bytes: `rest[3..]` starts on a character.
            rest = &rest[3..];
        } else {
            return false;
        }
        dots += 1;
    }
    dots == 1 || dots == 2
}

/// `base_url` as an error message shows it: any user info before an `@`
/// in its authority replaced by `REDACTED`, so no password is printed.
fn shown(base_url: &str) -> String {
    let (head, rest) = match base_url.find("://") {
        Some(i) => (&base_url[..i + 3], &base_url[i + 3..]),
        None => ("", base_url),
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..end].rfind('@') {
        Some(at) => format!("{head}REDACTED{}", &rest[at..]),
        None => base_url.to_owned(),
    }
}

/// `url` with its user name and password, if any, replaced by `REDACTED`
/// (what `url.full` records).
pub(super) fn redacted(url: &Url) -> String {
    if url.username().is_empty() && url.password().is_none() {
        return url.as_str().to_owned();
    }
    let mut url = url.clone();
    let _ = url.set_username("REDACTED");
    if url.password().is_some() {
        let _ = url.set_password(Some("REDACTED"));
    }
    url.into()
}

/// Checks an attempt's timeout: more than zero, and at most 365 days.
///
/// # Errors
///
/// [`InvalidValue`] for zero, or for more than 365 days.
pub fn check_attempt_timeout(attempt_timeout: Duration) -> Result<(), InvalidValue> {
    check_timeout(attempt_timeout)
}

/// Why [`Client::new`](super::Client::new) refused its settings: every bad
/// field, each named by its path in [`Settings`], the message naming the
/// dependency, `base_url`, when it is valid (`invalid http client
/// settings of http://rates:8080/v1: ...`). The one settings error of
/// every transport, [`InvalidSettings`]. As for the gRPC client, this is a
/// fault in the code (a service's main exits 1 on it): each value read
/// from configuration should have passed its check where it was read.
pub type NewError = InvalidSettings;

/// Whose settings a [`NewError`] is about, in its message.
pub(super) const OF: &str = "http client";

impl Settings {
    /// Runs every field's check, and the checks that take two fields; the
    /// parsed base URL.
    pub(crate) fn check(&self) -> Result<Url, NewError> {
        let Settings {
            base_url,
            tls,
            timeout,
            attempt_timeout,
            max_attempts,
            retry_budget,
            backoff_base,
            backoff_max,
            classify: _,
            breaker,
            breaker_policy: _,
            forward_scenario: _,
        } = self;
        let mut checks = Checks::default();
        let url = checks.parsed("base_url", parse_base_url(base_url));
        if let Some(tls) = tls {
            checks.put("tls", check_tls(tls));
        }
        checks.timeout(*timeout);
        checks.attempt_timeout(*attempt_timeout);
        checks.max_attempts(*max_attempts);
        checks.backoff(*backoff_base, *backoff_max);
        checks.retry_budget(retry_budget);
        checks.breaker(breaker);
        // A valid base URL holds no credentials (they are refused).
        checks.finish_with(OF, url, |url| {
            url.map(|_| base_url.clone()).unwrap_or_default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::settings::assert_check;

    /// Pieces of base URLs, right and wrong, for the property below.
    fn url_piece() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::strategy::Strategy as _;
        proptest::sample::select(vec![
            "http",
            "https",
            "HTTP",
            "ftp",
            "://",
            ":/",
            ":",
            "/",
            "//",
            "///",
            " ",
            "\\",
            "@",
            "u:p@",
            "a",
            "rates",
            "-a",
            "a-",
            "a..b",
            "10.0.0.7",
            "999.1.1.1",
            "1.2.3",
            "[::1]",
            "[fe80::1%25eth0]",
            "0",
            "80",
            "443",
            "8080",
            "65536",
            "v1",
            ".",
            "..",
            "%2e",
            "%2E%2e",
            "%2f",
            "?q",
            "#f",
            "%",
            "%41",
            "~",
            "_",
            ";",
        ])
        .prop_map(str::to_owned)
    }

    proptest::proptest! {
        /// A base URL `check_base_url` accepts is what a URL parser reads
        /// from it, nothing forgiven: the scheme written with `://`, no user
        /// info, the host and port as written, and the path as written (no
        /// `.` or `..` resolved away), with no query or fragment.
        #[test]
        fn an_accepted_base_url_is_read_as_written(
            pieces in proptest::collection::vec(url_piece(), 1..9),
        ) {
            use proptest::prop_assert;
            let text = pieces.concat();
            if let Ok(url) = parse_base_url(&text) {
                prop_assert!(!text.contains([' ', '\\', '?', '#']), "{text:?}");
                let rest = text.get(url.scheme().len()..).and_then(|r| r.strip_prefix("://"));
                prop_assert!(rest.is_some(), "{text:?}: {url}");
                let rest = rest.unwrap();
                let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
                prop_assert!(!authority.contains('@'), "{text:?}: user info, even empty");
                prop_assert!(url.username().is_empty() && url.password().is_none(), "{text:?}");
                let (host, port) = match authority.rsplit_once(':') {
                    Some((host, port)) if !port.contains(']') => (host, Some(port)),
                    _ => (authority, None),
                };
                prop_assert!(url.host_str() == Some(&*host.to_ascii_lowercase()), "{text:?}: {url}");
                if let Some(port) = port {
                    prop_assert!(url.port_or_known_default() == port.parse().ok(), "{text:?}: {url}");
                }
                let path = if path.is_empty() { "/" } else { path };
                prop_assert!(url.path() == path, "{text:?}: {url}");
            }
        }
    }

    #[test]
    fn base_urls() {
        let refused = assert_check(
            check_base_url,
            &[
                "http://payments:8080",
                "https://payments:8443/v1",
                "https://payments",
                "http://127.0.0.1:1/",
                "http://[::1]:8080/api/",
                "http://[::1]/",
                "https://payments.default.svc.cluster.local.:8443/v1..x/.a/b.",
                "http://_grpc._tcp.carts",
                "http://10.0.0.7:65535",
            ],
            &[
                ("", "empty"),
                ("payments:8443", "scheme \"payments\""),
                ("payments:8443", "no \"http://\" or \"https://\" before it"),
                ("payments:8443", "such as \"http://payments:8443\""),
                ("/v1", "not an absolute URL"),
                ("ftp://payments", "want http or https"),
                ("https://user:secret@payments", "credentials"),
                ("https://user:secret@payments/v1@x", "user info before '@'"),
                ("http://@a", "user info before '@'"),
                ("http://:@a", "user info before '@'"),
                (" http://a", "starts with ' '"),
                ("http://a ", "ends with ' '"),
                ("http://a/v1\n", "ends with '\\n'"),
                ("http://a/x y", "at byte 10"),
                ("\thttp://a", "no white space or control character"),
                ("http:///x", "has no host: \"http://\" is followed by '/'"),
                ("http://", "empty host"),
                ("http://?x", "empty host"),
                ("http:a", "does not follow its scheme with \"://\""),
                ("http:/a", "does not follow its scheme"),
                ("http:\\\\a", "backslash"),
                ("http://a\\b", "backslash"),
                ("https://payments?x=1", "query"),
                ("https://payments#top", "fragment"),
                ("https://pay ments", "at byte 11, ' '"),
                ("https://payments:99999", "not an absolute URL"),
                ("http://a:0", "port 0"),
                ("http://a:00/v1", "port 0"),
                ("http://a:/v1", "no port after it"),
                ("http://a..b", "empty label"),
                ("http://.a", "empty label"),
                ("http://-a-/", "starts or ends with '-'"),
                ("http://a_b+c", "a host name has letters"),
                ("http://1.2.3/", "no IPv4 address"),
                ("http://a%2eb/", "holds '%'"),
                ("http://a/v1/../x", "the path segment \"..\""),
                ("http://a/./x", "the path segment \".\""),
                ("http://a/v1/%2E%2e", "the path segment \"%2E%2e\""),
                ("http://a/v1/..?", "the path segment"),
            ],
        );
        for err in refused {
            assert!(!err.contains("secret"), "{err} leaks the password");
        }
    }

    #[test]
    fn credentials_are_redacted() {
        let url = Url::parse("https://user:secret@payments:8443/x").unwrap();
        assert_eq!(redacted(&url), "https://REDACTED:REDACTED@payments:8443/x");
        let url = Url::parse("https://payments:8443/x?q=1").unwrap();
        assert_eq!(redacted(&url), "https://payments:8443/x?q=1");
    }

    #[test]
    fn every_field_has_a_check() {
        assert!(check_attempt_timeout(Duration::ZERO).is_err());
        assert!(check_attempt_timeout(Duration::from_millis(1)).is_ok());
        let s = Settings {
            base_url: "http://payments:8080".into(),
            ..Settings::default()
        };
        assert!(s.check().is_ok());
        assert_eq!(s.timeout, Duration::from_secs(10));
        assert_eq!(s.attempt_timeout, Duration::from_secs(5));
        assert_eq!(s.max_attempts, 3);
        assert!(!s.forward_scenario);
    }

    #[test]
    fn every_bad_field_is_named_once_in_one_error() {
        let mut tls = crate::testing::Ca::new().client_config();
        tls.max_fragment_size = Some(1);
        let s = Settings {
            base_url: "payments:8443".into(),
            tls: Some(Arc::new(tls)),
            timeout: Duration::ZERO,
            attempt_timeout: Duration::ZERO,
            max_attempts: 0,
            retry_budget: retry::BudgetConfig {
                max_tokens: 0,
                token_ratio: 0.1,
            },
            backoff_base: Duration::from_secs(2),
            backoff_max: Duration::from_secs(1),
            breaker: circuit::Config {
                probes: 0,
                ..Settings::default().breaker
            },
            ..Settings::default()
        };
        let err = s.check().unwrap_err();
        assert_eq!(
            err.fields().collect::<Vec<_>>(),
            [
                "base_url",
                "tls",
                "timeout",
                "attempt_timeout",
                "max_attempts",
                "backoff_max",
                "retry_budget.max_tokens",
                "breaker.probes"
            ]
        );
        let text = err.to_string();
        assert!(
            text.starts_with("invalid http client settings: base_url "),
            "{text}"
        );
        assert!(
            text.contains("backoff_max 1s is below backoff_base 2s"),
            "{text}"
        );
    }

    #[test]
    fn the_error_names_a_valid_base_url() {
        let s = Settings {
            base_url: "http://rates:8080/v1".into(),
            timeout: Duration::ZERO,
            ..Settings::default()
        };
        assert_eq!(
            s.check().unwrap_err().to_string(),
            "invalid http client settings of http://rates:8080/v1: timeout is zero, want a duration more than zero"
        );
    }
}
