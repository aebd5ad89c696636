//! Carriers that let a `TextMapPropagator` write to and read from gRPC
//! metadata (tonic's [`MetadataMap`]).

use opentelemetry::propagation::{Extractor, Injector};
use tonic::metadata::{KeyRef, MetadataKey, MetadataMap, MetadataValue};

/// Writes a propagator's fields (`traceparent`, `tracestate`, `baggage`, …)
/// into gRPC metadata as text entries, replacing any entry of the same key.
///
/// A field whose key is not a valid metadata key, or whose value is not a
/// valid metadata value (it holds a control character), is skipped: a
/// propagator's output never fails a call.
#[derive(Debug)]
pub struct MetadataInjector<'a>(pub &'a mut MetadataMap);

impl Injector for MetadataInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        let Ok(key) = MetadataKey::from_bytes(key.as_bytes()) else {
            return;
        };
        let Ok(value) = MetadataValue::try_from(value) else {
            return;
        };
        self.0.insert(key, value);
    }
}

/// Reads a propagator's fields from gRPC metadata, as a server extracts the
/// caller's trace context and baggage. Binary (`-bin`) entries and values
/// that are not valid text are invisible to it.
#[derive(Debug)]
pub struct MetadataExtractor<'a>(pub &'a MetadataMap);

impl Extractor for MetadataExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|value| value.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0
            .keys()
            .filter_map(|key| match key {
                KeyRef::Ascii(key) => Some(key.as_str()),
                KeyRef::Binary(_) => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extractor_reads_ascii_entries_only() {
        let mut map = MetadataMap::new();
        map.insert("baggage", "k=v".parse().unwrap());
        map.insert_bin("trace-bin", MetadataValue::from_bytes(b"\x00\x01"));
        let extractor = MetadataExtractor(&map);
        assert_eq!(extractor.get("baggage"), Some("k=v"));
        assert_eq!(extractor.get("missing"), None);
        assert_eq!(extractor.keys(), vec!["baggage"]);
    }
}
