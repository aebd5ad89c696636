//! The `host:port` parsing the client's and the server's `check_addr`
//! share: each says what is wrong in its own words (a client dials a host
//! and a port from 1; a server may listen on every address, and on port 0).

use std::net::{Ipv4Addr, Ipv6Addr};

/// What is wrong with an address, for the caller to put in its words.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Problem<'a> {
    /// The address is empty.
    Empty,
    /// It starts with a scheme (`dns:///`, `unix:/`, `tcp://`).
    Scheme,
    /// It holds a character no `host:port` has (`/`, `?`, `#`, `@`, `%`
    /// outside an IPv6 zone, white space, a control character).
    Holds(char),
    /// `[` with no `]`.
    Unclosed,
    /// `[ipv6]` with no `:port` after it.
    NoPortAfterBracket,
    /// What is in brackets is no IPv6 address.
    NotIpv6(&'a str),
    /// An IPv6 address in brackets with a `%` and no zone after it, or a
    /// zone with a character an interface name or index never has.
    BadZone(&'a str),
    /// No `:` at all.
    NoPort,
    /// A `:` in the host: an IPv6 address without its brackets.
    UnbracketedIpv6,
    /// The host is no IP address and no host name; the reason says why.
    BadHost(String),
}

impl Problem<'_> {
    /// What is wrong with `addr`, in the words the client's and the
    /// server's `check_addr` share: those of a bracket, an IPv6 address and
    /// a host. (Each says the rest in its own words: an empty address, a
    /// scheme, a character, a missing port.)
    pub(crate) fn describe(&self, addr: &str) -> String {
        match self {
            Problem::Unclosed => format!("{addr:?} opens a bracket it does not close"),
            Problem::NotIpv6(host) => {
                format!("{addr:?} has {host:?} in brackets, which is no IPv6 address")
            }
            Problem::BadZone(host) => format!(
                "{addr:?} has {host:?} in brackets, whose zone is no interface name or index"
            ),
            Problem::UnbracketedIpv6 => {
                format!("{addr:?} has an IPv6 address without brackets, want [ipv6]:port")
            }
            Problem::BadHost(why) => format!("{addr:?} has a bad host: {why}"),
            Problem::Empty => "is empty".to_owned(),
            Problem::Scheme => format!("{addr:?} names a scheme"),
            Problem::Holds(c) => format!("{addr:?} holds {c:?}"),
            Problem::NoPortAfterBracket | Problem::NoPort => format!("{addr:?} has no port"),
        }
    }
}

/// An address split into its host (without brackets, an IPv6 zone kept)
/// and its port (not checked: each caller has its own range).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct HostPort<'a> {
    pub(crate) host: &'a str,
    pub(crate) port: &'a str,
}

/// Splits `addr` into host and port, and checks the host: an IPv6 address
/// in brackets (with a zone, `[fe80::1%eth0]`, if any), an IPv4 address,
/// a host name (labels of letters, digits, `-` and `_`, none empty and
/// none starting or ending with `-`, 63 characters at most each and 253
/// in all, an optional final dot), or empty (for the caller to refuse or
/// not).
pub(crate) fn split(addr: &str) -> Result<HostPort<'_>, Problem<'_>> {
    if addr.is_empty() {
        return Err(Problem::Empty);
    }
    if addr.contains("://") || addr.contains(":/") {
        return Err(Problem::Scheme);
    }
    // A `%` is an IPv6 zone's only inside the brackets.
    let bracketed = addr.find(']').filter(|_| addr.starts_with('['));
    for (i, c) in addr.char_indices() {
        let zone = c == '%' && bracketed.is_some_and(|end| i < end);
        if c.is_whitespace() || c.is_control() || (("/?#@".contains(c) || c == '%') && !zone) {
            return Err(Problem::Holds(c));
        }
    }
    if let Some(rest) = addr.strip_prefix('[') {
        let Some((host, rest)) = rest.split_once(']') else {
            return Err(Problem::Unclosed);
        };
        let Some(port) = rest.strip_prefix(':') else {
            return Err(Problem::NoPortAfterBracket);
        };
        let (ip, zone) = match host.split_once('%') {
            Some((ip, zone)) => (ip, Some(zone)),
            None => (host, None),
        };
        if ip.parse::<Ipv6Addr>().is_err() {
            return Err(Problem::NotIpv6(host));
        }
        if let Some(zone) = zone
            && (zone.is_empty()
                || !zone
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)))
        {
            return Err(Problem::BadZone(host));
        }
        return Ok(HostPort { host, port });
    }
    let Some((host, port)) = addr.rsplit_once(':') else {
        return Err(Problem::NoPort);
    };
    if host.contains(':') {
        return Err(Problem::UnbracketedIpv6);
    }
    if !host.is_empty() {
        check_host(host).map_err(Problem::BadHost)?;
    }
    Ok(HostPort { host, port })
}

/// Checks a host that is not in brackets: an IPv4 address or a host name
/// (the HTTP client's base URL's host too).
pub(crate) fn check_host(host: &str) -> Result<(), String> {
    let name = host.strip_suffix('.').unwrap_or(host);
    // Digits and dots alone are an IPv4 address, or a mistake: a resolver
    // reads `1.2.3` as 1.2.0.3, and a name's last label is never numeric.
    if name.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return match host.parse::<Ipv4Addr>() {
            Ok(_) => Ok(()),
            Err(_) => Err(format!(
                "{host:?} is no IPv4 address (four numbers from 0 to 255, with dots between)"
            )),
        };
    }
    if host.len() > 253 {
        return Err(format!(
            "the host is {} characters long, want at most 253",
            host.len()
        ));
    }
    for label in name.split('.') {
        if label.is_empty() {
            return Err(format!(
                "{host:?} has an empty label (two dots in a row, or a dot first)"
            ));
        }
        if let Some(c) = label
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
        {
            return Err(format!(
                "{host:?} holds {c:?}: a host name has letters, digits, '-' and '_'"
            ));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(format!(
                "{host:?} has the label {label:?}, which starts or ends with '-'"
            ));
        }
        if label.len() > 63 {
            return Err(format!(
                "{host:?} has a label {} characters long, want at most 63",
                label.len()
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_and_ports() {
        for (addr, host, port) in [
            ("carts:9090", "carts", "9090"),
            (":80", "", "80"),
            ("[::1]:1", "::1", "1"),
            ("[fe80::1%eth0]:50051", "fe80::1%eth0", "50051"),
            ("[fe80::1%2]:1", "fe80::1%2", "1"),
            (
                "carts.default.svc.cluster.local.:443",
                "carts.default.svc.cluster.local.",
                "443",
            ),
            ("_grpc._tcp.carts:1", "_grpc._tcp.carts", "1"),
            ("10.0.0.7:x", "10.0.0.7", "x"),
        ] {
            assert_eq!(split(addr), Ok(HostPort { host, port }), "{addr}");
        }
    }

    #[test]
    fn what_is_wrong() {
        assert_eq!(split(""), Err(Problem::Empty));
        assert_eq!(split("unix:/s"), Err(Problem::Scheme));
        assert_eq!(split("a%b:1"), Err(Problem::Holds('%')));
        assert_eq!(split("[::1]%:1"), Err(Problem::Holds('%')));
        assert_eq!(split("[::1"), Err(Problem::Unclosed));
        assert_eq!(split("[::1]"), Err(Problem::NoPortAfterBracket));
        assert_eq!(split("[x%eth0]:1"), Err(Problem::NotIpv6("x%eth0")));
        assert_eq!(split("[fe80::1%]:1"), Err(Problem::BadZone("fe80::1%")));
        assert_eq!(
            split("[fe80::1%e+0]:1"),
            Err(Problem::BadZone("fe80::1%e+0"))
        );
        assert_eq!(split("carts"), Err(Problem::NoPort));
        assert_eq!(split("::1:80"), Err(Problem::UnbracketedIpv6));
        for (addr, says) in [
            ("999.1.1.1:1", "\"999.1.1.1\" is no IPv4 address"),
            ("1.2.3:1", "no IPv4 address"),
            ("-carts:1", "starts or ends with '-'"),
            ("carts-.local:1", "starts or ends with '-'"),
            ("carts..local:1", "empty label"),
            ("*:80", "holds '*'"),
            ("a+b:1", "holds '+'"),
        ] {
            match split(addr) {
                Err(Problem::BadHost(why)) => assert!(why.contains(says), "{addr}: {why}"),
                other => panic!("{addr}: {other:?}"),
            }
        }
        let long = format!("{}:1", "a".repeat(64));
        assert!(matches!(split(&long), Err(Problem::BadHost(why)) if why.contains("at most 63")));
    }
}
