//! The broker's `amqp://` or `amqps://` URI: its check, and what a
//! connection is opened with.

use std::sync::Arc;

use amqprs::callbacks::DefaultConnectionCallback;
use amqprs::connection::{Connection, OpenConnectionArguments};
use amqprs::tls::TlsAdaptor;
use percent_encoding::percent_decode_str;
use reqwest::Url;

use crate::app::BoxError;
use crate::grpc::client::{InvalidValue, check_addr};

/// The port of an `amqp://` URI that names none: 5672.
pub const AMQP_PORT: u16 = 5672;
/// The port of an `amqps://` URI that names none: 5671.
pub const AMQPS_PORT: u16 = 5671;

/// What a broker's URI says: where to connect, how, as whom, to which
/// virtual host.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct AmqpUri {
    /// `amqps://`: TLS.
    pub(crate) tls: bool,
    /// The host, as written (an IPv6 address without its brackets).
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) user: String,
    pub(crate) password: String,
    pub(crate) vhost: String,
}

impl AmqpUri {
    /// Opens a connection to the broker, as the user to the virtual host
    /// this names, named `name` (what the broker's management shows), with
    /// its default callback: over TLS for `amqps://`, with `tls` (the
    /// platform's roots when `None`). The consumer's and the publisher's
    /// one way to connect.
    pub(crate) async fn open(
        &self,
        name: &str,
        tls: Option<&Arc<rustls::ClientConfig>>,
    ) -> Result<Connection, BoxError> {
        let mut args =
            OpenConnectionArguments::new(&self.host, self.port, &self.user, &self.password);
        args.virtual_host(&self.vhost).connection_name(name);
        if self.tls {
            let config = match tls {
                Some(config) => Arc::clone(config),
                None => Arc::new(crate::http::client::default_tls()?),
            };
            args.tls_adaptor(TlsAdaptor::new(
                tokio_rustls::TlsConnector::from(config),
                self.host.clone(),
            ));
        }
        let connection = Connection::open(&args).await?;
        connection
            .register_callback(DefaultConnectionCallback)
            .await?;
        Ok(connection)
    }

    /// `host:port`, an IPv6 host in brackets: what the broker is named by
    /// in messages.
    pub(crate) fn addr(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

// Never the password.
crate::debug::debug_fields!(AmqpUri {
    tls,
    host,
    port,
    user,
    vhost,
    ..
});

/// `uri` with its password, if any, replaced by `REDACTED`: what a
/// message or a `Debug` may show.
pub(crate) fn redacted(uri: &str) -> String {
    match Url::parse(uri) {
        Ok(mut url) if url.password().is_some() => {
            let _ = url.set_password(Some("REDACTED"));
            url.into()
        }
        Ok(_) => uri.to_owned(),
        Err(_) => "(not a URI)".to_owned(),
    }
}

/// Checks a broker's URI, RabbitMQ's URI form:
/// `amqp://user:password@host:port/vhost` or the same with `amqps://`
/// (TLS).
///
/// - the scheme is `amqp` or `amqps`;
/// - the host is a host name, an IPv4 address or an IPv6 address in
///   brackets, as a client's address's is
///   ([`check_addr`](crate::grpc::client::check_addr));
/// - the port, when given, is 1 to 65535 (5672 for `amqp`, 5671 for
///   `amqps` when not);
/// - the virtual host is the one path segment, percent-encoded (`%2f` for
///   `/`), at most 255 bytes; no path is the default virtual host `/`,
///   while an empty one (a URI ending in `/`) is refused: it names the
///   virtual host `""`, which a broker does not have;
/// - the user name and password, when given, are percent-encoded
///   (`guest`/`guest`, RabbitMQ's default user, when not);
/// - no query (`?heartbeat=…`) and no fragment: those are settings.
///
/// ```
/// use humus::rabbitmq::check_uri;
/// assert!(check_uri("amqp://rabbit").is_ok());
/// assert!(check_uri("amqps://orders:s3cret@rabbit.internal:5671/shop").is_ok());
/// assert!(check_uri("amqp://[::1]:5672/%2f").is_ok());
/// assert!(check_uri("http://rabbit").is_err());
/// assert!(check_uri("amqp://").is_err());
/// assert!(check_uri("amqp://rabbit/").is_err());
/// ```
///
/// # Errors
///
/// [`InvalidValue`] saying what is wrong.
pub fn check_uri(uri: &str) -> Result<(), InvalidValue> {
    parse(uri).map(|_| ())
}

/// Parses a broker's URI, as [`check_uri`] checks it.
pub(crate) fn parse(uri: &str) -> Result<AmqpUri, InvalidValue> {
    const FORM: &str = "want amqp://host[:port][/vhost] or amqps://…";
    let bad = |why: String| Err(InvalidValue::new(why));
    let shown = redacted(uri);
    if uri.is_empty() {
        return bad(format!("is empty, {FORM}"));
    }
    let url = match Url::parse(uri) {
        Ok(url) => url,
        Err(e) => return bad(format!("{shown:?} is not a URI ({e}), {FORM}")),
    };
    let tls = match url.scheme() {
        "amqp" => false,
        "amqps" => true,
        other => return bad(format!("{shown:?} has the scheme {other:?}, {FORM}")),
    };
    let host = match url.host_str() {
        Some(host) if !host.is_empty() => host,
        _ => return bad(format!("{shown:?} has no host, {FORM}")),
    };
    let port = match url.port() {
        Some(0) => return bad(format!("{shown:?} has port 0, want 1 to 65535")),
        Some(port) => port,
        None if tls => AMQPS_PORT,
        None => AMQP_PORT,
    };
    if let Err(e) = check_addr(&format!("{host}:{port}")) {
        return bad(format!("{shown:?} has a bad host: {e}"));
    }
    if url.query().is_some() {
        return bad(format!(
            "{shown:?} has a query: set what it would in the settings, and leave it out"
        ));
    }
    if url.fragment().is_some() {
        return bad(format!("{shown:?} has a fragment, {FORM}"));
    }
    let vhost = match url.path() {
        "" => "/".to_owned(),
        "/" => {
            return bad(format!(
                "{shown:?} names the empty virtual host (its path is \"/\"): leave the path out for the default virtual host \"/\", or write it \"/%2f\""
            ));
        }
        path => {
            let segment = &path[1..];
            if segment.contains('/') {
                return bad(format!(
                    "{shown:?} has a path of more than one segment: the virtual host is one, percent-encoded (\"/\" is %2f)"
                ));
            }
            let Ok(vhost) = percent_decode_str(segment).decode_utf8() else {
                return bad(format!("{shown:?} has a virtual host that is not UTF-8"));
            };
            if vhost.len() > 255 {
                return bad(format!(
                    "{shown:?} has a virtual host of {} bytes, want at most 255",
                    vhost.len()
                ));
            }
            vhost.into_owned()
        }
    };
    let decoded = |part: &str, what: &str| {
        percent_decode_str(part)
            .decode_utf8()
            .map(|s| s.into_owned())
            .map_err(|_| InvalidValue::new(format!("{shown:?} has a {what} that is not UTF-8")))
    };
    let (user, password) = if url.username().is_empty() && url.password().is_none() {
        ("guest".to_owned(), "guest".to_owned())
    } else {
        (
            decoded(url.username(), "user name")?,
            decoded(url.password().unwrap_or_default(), "password")?,
        )
    };
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
        .to_owned();
    Ok(AmqpUri {
        tls,
        host,
        port,
        user,
        password,
        vhost,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::settings::assert_check;

    #[test]
    fn uris() {
        let uri = parse("amqps://orders:p%40ss@rabbit:5999/shop%2feu").unwrap();
        assert_eq!(
            uri,
            AmqpUri {
                tls: true,
                host: "rabbit".into(),
                port: 5999,
                user: "orders".into(),
                password: "p@ss".into(),
                vhost: "shop/eu".into(),
            }
        );
        let uri = parse("amqp://[::1]").unwrap();
        assert_eq!((uri.host.as_str(), uri.port), ("::1", AMQP_PORT));
        assert_eq!(uri.addr(), "[::1]:5672");
        assert_eq!((uri.user.as_str(), uri.vhost.as_str()), ("guest", "/"));
        assert_eq!(parse("amqps://rabbit").unwrap().port, AMQPS_PORT);
        assert!(!format!("{uri:?}").contains("guest\", password"));
        assert_check(
            check_uri,
            &[],
            &[
                ("", "is empty"),
                ("http://rabbit", "has the scheme \"http\", want amqp://"),
                ("amqp://", "has no host"),
                ("amqp:///vhost", "has no host"),
                ("rabbit:5672", "has the scheme \"rabbit\""),
                ("amqp://rabbit:0", "port 0"),
                ("amqp://rabbit:99999", "is not a URI"),
                ("amqp://-rabbit", "bad host"),
                ("amqp://rabbit/", "empty virtual host"),
                ("amqp://rabbit/a/b", "more than one segment"),
                ("amqp://rabbit?heartbeat=10", "has a query"),
                ("amqp://rabbit#x", "fragment"),
            ],
        );
        let err = check_uri("http://u:secret@rabbit").unwrap_err().to_string();
        assert!(!err.contains("secret"), "{err}");
    }
}
