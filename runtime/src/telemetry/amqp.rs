//! Carriers that let a `TextMapPropagator` write to and read from the
//! headers of an AMQP 0-9-1 message (amqprs's [`FieldTable`]), for
//! RabbitMQ's publishers and consumers.

use amqprs::{FieldName, FieldTable, FieldValue};
use http::HeaderMap;
use opentelemetry::propagation::{Extractor, Injector};

use super::headers::header_field;

/// Writes a propagator's fields (`traceparent`, `tracestate`, `baggage`, …)
/// into a message's headers as long strings, replacing any header of the
/// same name.
///
/// A field is written only when it would be a valid HTTP header, as
/// [`HeaderInjector`](super::HeaderInjector) writes it, so a message's
/// context reads back the same whichever carrier a service reads it with;
/// a propagator's output never fails a publish.
///
/// ```
/// use humus::rabbitmq::FieldTable;
/// use humus::telemetry::{FieldTableExtractor, FieldTableInjector};
/// use opentelemetry::propagation::{Extractor as _, Injector as _};
///
/// let mut headers = FieldTable::new();
/// FieldTableInjector(&mut headers).set("baggage", "tenant=acme".to_owned());
/// assert_eq!(FieldTableExtractor(&headers).get("baggage"), Some("tenant=acme"));
/// ```
#[derive(Debug)]
pub struct FieldTableInjector<'a>(pub &'a mut FieldTable);

impl Injector for FieldTableInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        let Some((name, value)) = header_field(key, value) else {
            return;
        };
        // An AMQP field name is at most 255 bytes.
        let (Ok(name), Ok(value)) = (
            FieldName::try_from(name.as_str()),
            value.to_str().map(FieldValue::from),
        ) else {
            return;
        };
        self.0.insert(name, value);
    }
}

/// Reads a propagator's fields from a message's headers, as a consumer
/// extracts its publisher's trace context and baggage. Only long-string
/// headers are read; a header of any other type (a number, a table, a byte
/// array) is invisible to it.
#[derive(Debug)]
pub struct FieldTableExtractor<'a>(pub &'a FieldTable);

impl Extractor for FieldTableExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        let name = FieldName::try_from(key).ok()?;
        match self.0.get(&name)? {
            FieldValue::S(text) => Some(text.as_ref()),
            _ => None,
        }
    }

    fn keys(&self) -> Vec<&str> {
        self.0
            .as_ref()
            .iter()
            .filter(|(_, value)| matches!(value, FieldValue::S(_)))
            .map(|(name, _)| name.as_ref().as_str())
            .collect()
    }
}

/// The headers of a message that a carrier reads (its long strings whose
/// name and value are valid HTTP headers) as HTTP headers, for the strip
/// every server entry point runs; a `baggage` header of any other type is
/// named in the second value (a scenario could hide in it).
pub(crate) fn to_header_map(table: &FieldTable) -> (HeaderMap, bool) {
    let mut headers = HeaderMap::new();
    let mut unreadable_baggage = false;
    for (name, value) in table.as_ref() {
        let name = name.as_ref().as_str();
        let field = match value {
            FieldValue::S(text) => header_field(name, text.as_ref().clone()),
            _ => None,
        };
        match field {
            Some((name, value)) => {
                headers.append(name, value);
            }
            None if name.eq_ignore_ascii_case("baggage") => unreadable_baggage = true,
            None => {}
        }
    }
    (headers, unreadable_baggage)
}

/// Writes the header of each of `names` in `headers` back into `table`,
/// and removes from `table` each that `headers` no longer has: what a
/// strip changed in [`to_header_map`]'s headers.
pub(crate) fn write_back<'a>(
    table: &mut FieldTable,
    headers: &HeaderMap,
    names: impl IntoIterator<Item = &'a str>,
) {
    for name in names {
        let Ok(field) = FieldName::try_from(name) else {
            continue;
        };
        table.remove(&field);
        let mut injector = FieldTableInjector(table);
        if let Some(value) = headers.get(name).and_then(|v| v.to_str().ok()) {
            injector.set(name, value.to_owned());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::set_bad_and_repeated;

    #[test]
    fn injector_skips_what_is_no_header_and_extractor_reads_long_strings() {
        let mut table = FieldTable::new();
        set_bad_and_repeated(&mut FieldTableInjector(&mut table));
        table.insert(FieldName::try_from("count").unwrap(), FieldValue::I(7));
        let extractor = FieldTableExtractor(&table);
        assert_eq!(extractor.get("traceparent"), Some("00-def"));
        assert_eq!(extractor.get("baggage"), None);
        assert_eq!(extractor.get("count"), None);
        assert_eq!(extractor.keys(), vec!["traceparent"]);
    }

    #[test]
    fn header_map_round_trip() {
        let mut table = FieldTable::new();
        let mut injector = FieldTableInjector(&mut table);
        injector.set("baggage", "a=1,fit=x".to_owned());
        injector.set("traceparent", "00-abc".to_owned());
        let (mut headers, unreadable) = to_header_map(&table);
        assert!(!unreadable);
        assert_eq!(headers["baggage"], "a=1,fit=x");
        headers.insert("baggage", http::HeaderValue::from_static("a=1"));
        headers.remove("traceparent");
        write_back(&mut table, &headers, ["baggage", "traceparent"]);
        let extractor = FieldTableExtractor(&table);
        assert_eq!(extractor.get("baggage"), Some("a=1"));
        assert_eq!(extractor.get("traceparent"), None);
        table.insert(FieldName::try_from("baggage").unwrap(), FieldValue::I(1));
        assert!(to_header_map(&table).1, "a baggage of another type");
    }
}
