//! Carriers that let a `TextMapPropagator` write to and read from HTTP
//! headers ([`http::HeaderMap`]), for the HTTP client and server.

use http::HeaderMap;
use http::header::{HeaderName, HeaderValue};
use opentelemetry::propagation::{Extractor, Injector};

/// Writes a propagator's fields (`traceparent`, `tracestate`, `baggage`, …)
/// into HTTP headers, replacing any header of the same name.
///
/// A field whose name is not a valid header name, or whose value is not a
/// valid header value, is skipped: a propagator's output never fails a
/// request.
#[derive(Debug)]
pub struct HeaderInjector<'a>(pub &'a mut HeaderMap);

impl Injector for HeaderInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let Some((name, value)) = header_field(key, value) {
            self.0.insert(name, value);
        }
    }
}

/// A propagator's field as a header: `None` when its name is not a valid
/// header name or its value not a valid header value (a control
/// character, a line break). Every carrier skips such a field, so what it
/// writes reads back the same through HTTP headers, gRPC metadata and
/// message headers alike.
pub(crate) fn header_field(key: &str, value: String) -> Option<(HeaderName, HeaderValue)> {
    let name = HeaderName::from_bytes(key.as_bytes()).ok()?;
    let value = HeaderValue::try_from(value).ok()?;
    Some((name, value))
}

/// Reads a propagator's fields from HTTP headers, as a server extracts its
/// caller's trace context and baggage. A header that is not valid text is
/// invisible to it; of a header sent more than once, it reads the first
/// (the HTTP server layer joins repeated headers first).
#[derive(Debug)]
pub struct HeaderExtractor<'a>(pub &'a HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(HeaderName::as_str).collect()
    }
}

/// Joins each of `fields` sent in several headers into one header, comma
/// separated, as W3C Baggage reads several `baggage` headers: so that a
/// member in a second header is neither lost nor able to slip past a
/// propagator that reads only the first. A joined value that is not a
/// valid header removes the field.
pub(crate) fn join_repeated(headers: &mut HeaderMap, fields: &[HeaderName]) {
    for field in fields {
        let mut values = headers.get_all(field).iter();
        let (Some(first), Some(_)) = (values.next(), values.next()) else {
            continue;
        };
        let mut joined = first.as_bytes().to_vec();
        for v in headers.get_all(field).iter().skip(1) {
            joined.push(b',');
            joined.extend_from_slice(v.as_bytes());
        }
        match HeaderValue::from_bytes(&joined) {
            Ok(v) => {
                headers.insert(field.clone(), v);
            }
            Err(_) => {
                headers.remove(field);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_fields_are_joined() {
        let mut map = HeaderMap::new();
        map.append("baggage", HeaderValue::from_static("a=1"));
        map.append("baggage", HeaderValue::from_static("b=2"));
        map.append("other", HeaderValue::from_static("x"));
        map.append("other", HeaderValue::from_static("y"));
        join_repeated(&mut map, &[HeaderName::from_static("baggage")]);
        assert_eq!(map.get_all("baggage").iter().count(), 1);
        assert_eq!(map["baggage"], "a=1,b=2");
        assert_eq!(map.get_all("other").iter().count(), 2);
        assert_eq!(HeaderExtractor(&map).get("baggage"), Some("a=1,b=2"));
    }
}
