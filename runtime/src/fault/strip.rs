//! The one scenario strip every humus client and server entry point runs
//! ([design](crate::design::failure_injection#trust-and-stripping)): it
//! reads the W3C `baggage` header itself, whatever propagator telemetry
//! uses, so a scenario is found even where the propagator reads no
//! baggage (the no-op one of a Setup without telemetry).
//!
//! - [`read`] joins a request's `baggage` headers into one (as W3C Baggage
//!   reads several), drops a value that cannot be read whole, and tells
//!   whether a scenario member is there;
//! - [`remove_scenario`] removes the scenario's members, every other
//!   member kept byte for byte;
//! - [`Gate`] is a server entry point's whole strip: the header, the
//!   trust function, and the context the propagator reads after it.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use http::header::{HeaderMap, HeaderName, HeaderValue};
use opentelemetry::baggage::BaggageExt as _;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::SpanRef;
use opentelemetry::{Context, KeyValue};
use percent_encoding::percent_decode_str;

use super::{Injector, names};
use crate::telemetry::{HeaderExtractor, join_repeated};

/// The W3C Baggage header, which carries failure scenarios.
pub(crate) const BAGGAGE: HeaderName = HeaderName::from_static("baggage");

/// The longest `baggage` value, in bytes, that OpenTelemetry's baggage
/// propagator reads (W3C Baggage's limit): a longer one it drops whole.
pub(crate) const MAX_BAGGAGE_BYTES: usize = 8192;

/// The most list members of a `baggage` value that OpenTelemetry's baggage
/// propagator reads (W3C Baggage's limit): it ignores the rest.
pub(crate) const MAX_BAGGAGE_MEMBERS: usize = 64;

/// Why a `baggage` value cannot be read whole, so the strip drops it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unreadable {
    /// A value that is not visible ASCII text.
    NotText,
    /// A value (the repeated headers joined) of this many bytes, over
    /// [`MAX_BAGGAGE_BYTES`].
    TooLong(usize),
    /// A value of this many list members, over [`MAX_BAGGAGE_MEMBERS`].
    TooManyMembers(usize),
}

impl fmt::Display for Unreadable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unreadable::NotText => f.write_str("the baggage header is not visible ASCII text"),
            Unreadable::TooLong(n) => write!(
                f,
                "the baggage header is {n} bytes, over the {MAX_BAGGAGE_BYTES} a propagator reads"
            ),
            Unreadable::TooManyMembers(n) => write!(
                f,
                "the baggage header has {n} members, over the {MAX_BAGGAGE_MEMBERS} a propagator reads"
            ),
        }
    }
}

/// What a strip removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stripped {
    /// The scenario's members; every other member kept.
    Scenario,
    /// The whole `baggage` header, which could not be read whole: it
    /// could hide a scenario the propagator would not see.
    Unreadable(Unreadable),
}

impl Stripped {
    /// Adds the `humus.fit.strip` event to `span`: with no attributes for
    /// a scenario's members, with `humus.fit.unreadable` (why) for a
    /// dropped header.
    pub(crate) fn record(self, span: &SpanRef<'_>) {
        match self {
            Stripped::Scenario => super::record_strip(span),
            Stripped::Unreadable(why) => span.add_event(
                names::STRIP,
                vec![KeyValue::new(names::UNREADABLE, why.to_string())],
            ),
        }
    }
}

/// What [`read`] found in the `baggage` header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Read {
    /// No header, or one with no scenario member.
    Clean,
    /// A header with a member `owns` selects.
    Scenario,
    /// A header that cannot be read whole, now removed.
    Dropped(Unreadable),
}

/// Joins the `baggage` headers of `headers` into one, removes it when it
/// cannot be read whole, and tells whether it holds a member whose key
/// (percent-decoded and trimmed, as the propagator reads it) `owns`
/// selects.
pub(crate) fn read(headers: &mut HeaderMap, owns: impl Fn(&str) -> bool) -> Read {
    join_repeated(headers, &[BAGGAGE]);
    let Some(value) = headers.get(BAGGAGE) else {
        return Read::Clean;
    };
    let why = match value.to_str() {
        Err(_) => Some(Unreadable::NotText),
        Ok(text) if text.len() > MAX_BAGGAGE_BYTES => Some(Unreadable::TooLong(text.len())),
        Ok(text) => {
            let members = text.split(',').count();
            (members > MAX_BAGGAGE_MEMBERS).then_some(Unreadable::TooManyMembers(members))
        }
    };
    if let Some(why) = why {
        headers.remove(BAGGAGE);
        return Read::Dropped(why);
    }
    let text = value.to_str().unwrap_or_default();
    if text.split(',').any(|member| is_scenario(member, &owns)) {
        Read::Scenario
    } else {
        Read::Clean
    }
}

/// Removes from the (one, text) `baggage` header of `headers` the members
/// `owns` selects, every other member kept as it came; the header goes
/// when none is left. Run after [`read`].
pub(crate) fn remove_scenario(headers: &mut HeaderMap, owns: impl Fn(&str) -> bool) {
    let Some(text) = headers.get(BAGGAGE).and_then(|v| v.to_str().ok()) else {
        headers.remove(BAGGAGE);
        return;
    };
    let kept: Vec<&str> = text
        .split(',')
        .filter(|member| !is_scenario(member, &owns))
        .collect();
    let kept = kept.join(",");
    match HeaderValue::from_str(&kept) {
        Ok(v) if !kept.trim().is_empty() => {
            headers.insert(BAGGAGE, v);
        }
        // Fails closed: a value that is no header drops the field.
        _ => {
            headers.remove(BAGGAGE);
        }
    }
}

/// Whether the list member `member` (`key=value;properties`) has a key
/// `owns` selects.
fn is_scenario(member: &str, owns: &impl Fn(&str) -> bool) -> bool {
    let key = member.split([';', '=']).next().unwrap_or_default();
    owns(percent_decode_str(key).decode_utf8_lossy().trim())
}

/// A server entry point's strip (humus's `Server`, `StripScenarioLayer`,
/// `InheritLayer`, the HTTP `ContextLayer`): the injector that knows the
/// scenario convention, and the propagator that reads the caller's context
/// once the strip is done.
#[derive(Clone)]
pub(crate) struct Gate {
    pub(crate) injector: Injector,
    pub(crate) propagator: Arc<dyn TextMapPropagator + Send + Sync>,
    /// The propagator's header names, parsed once.
    fields: Arc<[HeaderName]>,
}

crate::debug::debug_fields!(Gate {
    injector,
    propagator
});

/// What [`Gate::vet`] decided about a request.
#[derive(Debug)]
pub(crate) struct Vetted {
    /// The caller's trace context and baggage, as the handler is to see
    /// them (the scenario stripped unless trusted).
    pub(crate) cx: Context,
    /// What was stripped, if anything: record it on the server's span.
    pub(crate) stripped: Option<Stripped>,
    /// The request carried a scenario the trust function trusted.
    pub(crate) trusted: bool,
}

/// The trust function's panic, caught, and the caller's context read from
/// the request as it came (unstripped).
pub(crate) struct Panicked<P> {
    pub(crate) cx: Context,
    pub(crate) payload: P,
}

/// Up to how many header names [`Gate::carries_fields`] compares each
/// with the propagator's fields rather than looks the fields up.
const SCAN_HEADERS: usize = 8;

impl Gate {
    /// The strip of `injector`'s scenarios, the context read with
    /// `propagator`.
    pub(crate) fn new(
        injector: Injector,
        propagator: Arc<dyn TextMapPropagator + Send + Sync>,
    ) -> Gate {
        let fields = propagator
            .fields()
            .filter_map(|f| HeaderName::try_from(f).ok())
            .collect();
        Gate {
            injector,
            propagator,
            fields,
        }
    }

    /// Whether `headers` hold any of the propagator's fields.
    pub(crate) fn carries_fields(&self, headers: &HeaderMap) -> bool {
        // A few headers (a usual request's) are quicker compared by name
        // than looked up by hash, once per field.
        if headers.keys_len() <= SCAN_HEADERS {
            headers.keys().any(|k| self.fields.contains(k))
        } else {
            self.fields.iter().any(|f| headers.contains_key(f))
        }
    }

    /// The caller's context as the propagator reads it from `headers`.
    pub(crate) fn extract(&self, headers: &HeaderMap) -> Context {
        if self.carries_fields(headers) {
            self.propagator
                .extract_with_context(&Context::new(), &HeaderExtractor(headers))
        } else {
            Context::new()
        }
    }

    /// Strips the scenario of a caller `trust` does not trust from the
    /// request `parts`, then reads its context with the propagator.
    ///
    /// With the injector off, it only reads the context. Else it first
    /// joins repeated propagator fields and `baggage` headers (so nothing
    /// slips past a propagator that reads the first), drops a `baggage`
    /// value that cannot be read whole (whatever `trust` says: it is not
    /// asked), and, when the header holds a scenario member, asks `trust`
    /// (`None`: trusts no caller) and removes the scenario unless trusted.
    /// A scenario the propagator reads from another field is stripped from
    /// the context and the propagator's headers rewritten, with `trust`
    /// asked the same way.
    ///
    /// # Errors
    ///
    /// [`Panicked`] when `trust` panicked (its `Err`): the request is not
    /// to reach a handler.
    pub(crate) fn vet<P>(
        &self,
        parts: &mut http::request::Parts,
        trust: Option<impl FnOnce(&mut http::request::Parts) -> Result<bool, P>>,
    ) -> Result<Vetted, Panicked<P>> {
        if !self.injector.reads_scenarios() {
            return Ok(Vetted {
                cx: self.extract(&parts.headers),
                stripped: None,
                trusted: false,
            });
        }
        let owns = |key: &str| self.injector.owns(key);
        join_repeated(&mut parts.headers, &self.fields);
        let mut trust = trust;
        let mut ask = |parts: &mut http::request::Parts| match trust.take() {
            Some(trust) => trust(parts),
            None => Ok(false),
        };
        let mut stripped = None;
        let mut asked = None;
        match read(&mut parts.headers, owns) {
            Read::Clean => {}
            Read::Dropped(why) => stripped = Some(Stripped::Unreadable(why)),
            Read::Scenario => match ask(parts) {
                Ok(true) => asked = Some(true),
                Ok(false) => {
                    asked = Some(false);
                    remove_scenario(&mut parts.headers, owns);
                    stripped = Some(Stripped::Scenario);
                }
                Err(payload) => {
                    return Err(Panicked {
                        cx: self.extract(&parts.headers),
                        payload,
                    });
                }
            },
        }
        let cx = self.extract(&parts.headers);
        if asked == Some(true) || !self.injector.carries_scenario(&cx) {
            return Ok(Vetted {
                cx,
                stripped,
                trusted: asked == Some(true),
            });
        }
        // A propagator that reads baggage from a field of its own.
        let trusted = match asked {
            Some(trusted) => trusted,
            None => match ask(parts) {
                Ok(trusted) => trusted,
                Err(payload) => return Err(Panicked { cx, payload }),
            },
        };
        if trusted {
            return Ok(Vetted {
                cx,
                stripped,
                trusted,
            });
        }
        let baggage = super::baggage_without(cx.baggage(), owns);
        let stripped_cx = cx.with_baggage(baggage);
        rewrite(
            &mut parts.headers,
            &self.fields,
            &*self.propagator,
            &cx,
            &stripped_cx,
        );
        Ok(Vetted {
            cx: stripped_cx,
            stripped: stripped.or(Some(Stripped::Scenario)),
            trusted: false,
        })
    }
}

/// Rewrites the propagator's headers whose value stripping changed, and
/// only those: the trace context and every other field stay as they came.
fn rewrite(
    headers: &mut HeaderMap,
    fields: &[HeaderName],
    propagator: &dyn TextMapPropagator,
    before: &Context,
    after: &Context,
) {
    let mut was: HashMap<String, String> = HashMap::new();
    propagator.inject_context(before, &mut was);
    let mut now: HashMap<String, String> = HashMap::new();
    propagator.inject_context(after, &mut now);
    for field in fields {
        let value = now.get(field.as_str());
        if was.get(field.as_str()) == value {
            continue;
        }
        // A value that is not a valid header drops the field entirely:
        // stripping errs on the side of removing the scenario.
        match value.and_then(|v| HeaderValue::from_str(v).ok()) {
            Some(v) => {
                headers.insert(field.clone(), v);
            }
            None => {
                headers.remove(field);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owns(key: &str) -> bool {
        key == "fit"
    }

    fn headers(values: &[&str]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for v in values {
            map.append(BAGGAGE, HeaderValue::from_str(v).unwrap());
        }
        map
    }

    #[test]
    fn every_entry_is_read_and_the_scenario_removed_from_the_joined_one() {
        let mut map = headers(&["a=1", "fit=x;p, b=2"]);
        assert_eq!(read(&mut map, owns), Read::Scenario);
        remove_scenario(&mut map, owns);
        assert_eq!(map.get_all(BAGGAGE).iter().count(), 1);
        assert_eq!(map[BAGGAGE], "a=1, b=2");
        let mut only = headers(&["fit=x"]);
        remove_scenario(&mut only, owns);
        assert!(only.get(BAGGAGE).is_none());
    }

    #[test]
    fn keys_are_read_as_the_propagator_reads_them() {
        for member in [" fit =1", "%66it=1", "fit", "fit;p=1"] {
            let mut map = headers(&[member]);
            assert_eq!(read(&mut map, owns), Read::Scenario, "{member}");
        }
        let mut map = headers(&["fitness=1,a=fit"]);
        assert_eq!(read(&mut map, owns), Read::Clean);
    }

    #[test]
    fn a_value_past_the_limits_is_dropped_whole() {
        let members: Vec<String> = (0..MAX_BAGGAGE_MEMBERS)
            .map(|i| format!("k{i}=v"))
            .collect();
        let mut map = headers(&[&members.join(",")]);
        assert_eq!(read(&mut map, owns), Read::Clean);
        let mut map = headers(&[&members.join(","), "fit=x"]);
        assert_eq!(
            read(&mut map, owns),
            Read::Dropped(Unreadable::TooManyMembers(MAX_BAGGAGE_MEMBERS + 1))
        );
        assert!(map.get(BAGGAGE).is_none());
        let long = format!("a={}", "x".repeat(MAX_BAGGAGE_BYTES));
        let mut map = headers(&[&long]);
        assert_eq!(
            read(&mut map, owns),
            Read::Dropped(Unreadable::TooLong(MAX_BAGGAGE_BYTES + 2))
        );
        let mut map = HeaderMap::new();
        map.insert(BAGGAGE, HeaderValue::from_bytes(b"a=\xff").unwrap());
        assert_eq!(read(&mut map, owns), Read::Dropped(Unreadable::NotText));
        assert!(map.is_empty());
    }
}
