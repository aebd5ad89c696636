//! Carriers that let a `TextMapPropagator` write to and read from the
//! headers of an AMQP 0-9-1 message (amqprs's [`FieldTable`]), for
//! RabbitMQ's publishers and consumers.

use amqprs::{FieldName, FieldTable, FieldValue};
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};

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

/// Replaces the propagator's fields in `headers` with those of `cx`: every
/// field the propagator writes is removed first, so a field `cx` no longer
/// has (the `baggage` of a context whose only member was stripped) goes.
pub(crate) fn reinject(
    propagator: &dyn TextMapPropagator,
    cx: &opentelemetry::Context,
    headers: &mut FieldTable,
) {
    for field in propagator.fields() {
        if let Ok(name) = FieldName::try_from(field) {
            headers.remove(&name);
        }
    }
    propagator.inject_context(cx, &mut FieldTableInjector(headers));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn injector_skips_what_is_no_header_and_extractor_reads_long_strings() {
        let mut table = FieldTable::new();
        let mut injector = FieldTableInjector(&mut table);
        injector.set("traceparent", "00-abc".to_owned());
        injector.set("bad key", "v".to_owned());
        injector.set("baggage", "line\nbreak".to_owned());
        injector.set("traceparent", "00-def".to_owned());
        table.insert(FieldName::try_from("count").unwrap(), FieldValue::I(7));
        let extractor = FieldTableExtractor(&table);
        assert_eq!(extractor.get("traceparent"), Some("00-def"));
        assert_eq!(extractor.get("baggage"), None);
        assert_eq!(extractor.get("count"), None);
        assert_eq!(extractor.keys(), vec!["traceparent"]);
    }
}
