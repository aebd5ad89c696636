//! The header carrier of Kafka records: a record's headers seen as the
//! HTTP headers every other transport's carrier, strip and propagator
//! already read and write ([`HeaderInjector`], [`HeaderExtractor`]).

use http::HeaderMap;
use http::header::{HeaderName, HeaderValue};
use opentelemetry::Context;
use opentelemetry::propagation::TextMapPropagator;
use rdkafka::message::{Header, Headers, OwnedHeaders};

use crate::telemetry::{HeaderExtractor, HeaderInjector, join_repeated};

/// The headers of a record that are text headers: each whose key is a
/// valid header name (lowercased, as HTTP's are: W3C's fields are
/// lowercase) and whose value is a valid header value, in their order, a
/// repeated key kept repeated. Other headers (binary values, keys with
/// spaces, headers with no value) are no propagator's, and left out.
pub(crate) fn header_map(headers: &impl Headers) -> HeaderMap {
    let mut map = HeaderMap::with_capacity(headers.count());
    for header in headers.iter() {
        let Some(value) = header.value else { continue };
        let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(header.key.as_bytes()),
            HeaderValue::from_bytes(value),
        ) else {
            continue;
        };
        map.append(name, value);
    }
    map
}

/// A record's `headers` with every header named in `names` (compared as
/// header names are, without case) replaced by the values `vetted` holds
/// for it, or removed when it holds none; every other header kept, in its
/// order, binary ones too. How the consumer hands its processor a record
/// whose scenario it stripped.
pub(crate) fn replace(
    headers: &impl Headers,
    vetted: &HeaderMap,
    names: &[HeaderName],
) -> OwnedHeaders {
    let named =
        |key: &str| HeaderName::from_bytes(key.as_bytes()).is_ok_and(|name| names.contains(&name));
    let mut out = OwnedHeaders::new_with_capacity(headers.count());
    for header in headers.iter().filter(|h| !named(h.key)) {
        out = out.insert(header);
    }
    for name in names {
        for value in vetted.get_all(name) {
            out = out.insert(Header {
                key: name.as_str(),
                value: Some(value.as_bytes()),
            });
        }
    }
    out
}

/// Appends the propagator's fields of `cx` (`traceparent`, `tracestate`,
/// `baggage`, …) to a record's `headers`, as a producer writes them: so
/// the consumer's span is a child of the span in `cx`, and sees its
/// baggage. A field that is not a valid header is skipped, as the HTTP
/// client's carrier skips it ([`HeaderInjector`]).
///
/// Use it with a plain rdkafka producer; `propagator` is the Setup's
/// ([`Telemetry::propagator`](crate::telemetry::Telemetry::propagator)).
/// It writes the scenario too: strip it first
/// ([`Injector::strip`](crate::fault::Injector::strip)) unless the
/// consumers take part in failure injection.
///
/// ```
/// use humus::kafka::{extract_context, inject_context};
/// use opentelemetry::Context;
/// use opentelemetry::baggage::BaggageExt as _;
/// use opentelemetry::propagation::TextMapPropagator as _;
/// use opentelemetry_sdk::propagation::BaggagePropagator;
/// use rdkafka::message::OwnedHeaders;
///
/// let propagator = BaggagePropagator::new();
/// let cx = Context::new().with_baggage([opentelemetry::KeyValue::new("tenant", "acme")]);
/// let headers = inject_context(&propagator, &cx, OwnedHeaders::new());
/// let read = extract_context(&propagator, &headers);
/// assert_eq!(read.baggage().get("tenant").unwrap().as_str(), "acme");
/// ```
pub fn inject_context(
    propagator: &dyn TextMapPropagator,
    cx: &Context,
    headers: OwnedHeaders,
) -> OwnedHeaders {
    let mut fields = HeaderMap::new();
    propagator.inject_context(cx, &mut HeaderInjector(&mut fields));
    let mut headers = headers;
    for (name, value) in &fields {
        headers = headers.insert(Header {
            key: name.as_str(),
            value: Some(value.as_bytes()),
        });
    }
    headers
}

/// The trace context and baggage a record's `headers` carry, read with
/// `propagator` (the Setup's), as a consumer reads them before its
/// processor runs: its span a child of the producer's. A field sent in
/// several headers is read joined, as W3C Baggage reads several `baggage`
/// headers. It strips nothing: the [`Consumer`](super::Consumer) strips
/// the scenario of records it does not trust.
pub fn extract_context(propagator: &dyn TextMapPropagator, headers: &impl Headers) -> Context {
    let mut map = header_map(headers);
    let fields: Vec<HeaderName> = propagator
        .fields()
        .filter_map(|f| HeaderName::try_from(f).ok())
        .collect();
    join_repeated(&mut map, &fields);
    propagator.extract_with_context(&Context::new(), &HeaderExtractor(&map))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_text_headers_are_seen() {
        let headers = OwnedHeaders::new()
            .insert(Header {
                key: "baggage",
                value: Some("a=1"),
            })
            .insert(Header {
                key: "Baggage",
                value: Some("b=2"),
            })
            .insert(Header {
                key: "bin",
                value: Some(&b"\x00\xff"[..]),
            })
            .insert(Header {
                key: "bad key",
                value: Some("v"),
            })
            .insert(Header::<&str> {
                key: "none",
                value: None,
            });
        let map = header_map(&headers);
        assert_eq!(map.len(), 2);
        let baggage: Vec<_> = map.get_all("baggage").iter().collect();
        assert_eq!(baggage, ["a=1", "b=2"]);
        let mut vetted = HeaderMap::new();
        vetted.insert("baggage", HeaderValue::from_static("a=1,b=2"));
        let names = [
            HeaderName::from_static("baggage"),
            HeaderName::from_static("none"),
        ];
        let replaced = replace(&headers, &vetted, &names);
        let keys: Vec<_> = replaced.iter().map(|h| (h.key, h.value)).collect();
        assert_eq!(
            keys,
            [
                ("bin", Some(&b"\x00\xff"[..])),
                ("bad key", Some(&b"v"[..])),
                ("baggage", Some(&b"a=1,b=2"[..])),
            ]
        );
    }
}
