//! The scenario model: a [`Scenario`] of [`Rule`]s, each a point pattern and
//! the [`Fault`] it emulates there ([design](crate::design::failure_injection#the-model)).

use std::time::Duration;

/// What an injection point emulates for one request: a delay, an abort, or
/// both (the delay is waited first, then the attempt aborts).
///
/// The default, [`Fault::NONE`], does nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Fault {
    /// How long the point waits before going on (or before aborting, when
    /// [`abort`](Fault::abort) is also set). [`Injector::eval`] clamps it to
    /// the injector's `max_delay`.
    ///
    /// [`Injector::eval`]: super::Injector::eval
    pub delay: Duration,
    /// Whether the point fails the attempt, as the dependency being
    /// unreachable would.
    pub abort: bool,
}

impl Fault {
    /// No fault: no delay, no abort.
    pub const NONE: Fault = Fault {
        delay: Duration::ZERO,
        abort: false,
    };

    /// Whether this fault does nothing (no delay and no abort).
    pub fn is_none(&self) -> bool {
        self.delay.is_zero() && !self.abort
    }
}

/// One rule of a [`Scenario`]: the points it applies to and the fault it
/// emulates there.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Rule {
    /// The point pattern: a point name (`grpc:payments.v1.Payments/Charge`),
    /// which matches that point exactly, or a prefix ending in `*`
    /// (`grpc:payments.v1.Payments/*`, `grpc:*`, `*`), which matches every
    /// point that starts with what comes before the `*`. Only a trailing
    /// `*` is a wildcard. A `*` anywhere else would make the rule match
    /// nothing a client names, so [`check_point`] rejects it: `jsonscenario`
    /// will not decode nor encode such a rule, and an
    /// [`Injector`](super::Injector) evaluates no scenario holding one,
    /// whatever its decoder; a rule built in code and asked
    /// [`matches`](Rule::matches) directly matches such a pattern as
    /// ordinary characters.
    pub point: String,
    /// The fault emulated at the points this rule matches.
    pub fault: Fault,
}

impl Rule {
    /// A rule emulating `fault` at the points `point` matches.
    pub fn new(point: impl Into<String>, fault: Fault) -> Rule {
        Rule {
            point: point.into(),
            fault,
        }
    }

    /// Whether this rule's pattern matches the point named `point`.
    pub fn matches(&self, point: &str) -> bool {
        specificity(&self.point, point).is_some()
    }
}

/// The `error.type` of a scenario an [`Injector`](super::Injector)
/// rejects because a rule's point fails [`check_point`], whatever decoded
/// it, recorded on the `humus.fit.evaluation` event.
pub const POINT_ERROR_TYPE: &str = "humus::fault::PointError";

/// Why a point pattern is rejected where a scenario is decoded or
/// encoded: see [`check_point`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PointError {
    /// The pattern is empty.
    #[error("point must not be empty")]
    Empty,
    /// The pattern has a `*` before its end: the wildcard is only a
    /// trailing `*`, so the rule would match no point.
    #[error(
        "point {point:?} has a `*` after {before:?}, but a `*` is a wildcard only at the end of a point, \
         so this rule would match no point: end the point at the `*` ({suggestion:?}) to match every point \
         starting with {before:?}, or remove the `*`"
    )]
    StarNotAtEnd {
        /// The pattern.
        point: String,
        /// What comes before its first `*`.
        before: String,
        /// The pattern cut after that `*`, the wildcard the user likely meant.
        suggestion: String,
    },
}

/// Checks a rule's point pattern as a scenario's decoder and encoder do:
/// it is not empty, and a `*` in it comes only at its end (see
/// [`Rule::point`]). A [`Decoder`](super::Decoder) of the user's can
/// call it too.
///
/// # Errors
///
/// [`PointError`] saying what is wrong with the pattern and how to fix it.
///
/// ```
/// use humus::fault::{PointError, check_point};
///
/// assert!(check_point("grpc:payments.v1.Payments/*").is_ok());
/// let err = check_point("grpc:*/Charge").unwrap_err();
/// assert!(matches!(err, PointError::StarNotAtEnd { .. }));
/// assert!(err.to_string().contains("only at the end of a point"));
/// ```
pub fn check_point(point: &str) -> Result<(), PointError> {
    if point.is_empty() {
        return Err(PointError::Empty);
    }
    match point.find('*') {
        Some(at) if at + 1 < point.len() => Err(PointError::StarNotAtEnd {
            point: point.to_owned(),
            before: point[..at].to_owned(),
            suggestion: point[..=at].to_owned(),
        }),
        _ => Ok(()),
    }
}

/// The failure scenario one request carries: which points fail it, and how.
///
/// # Which rule wins
///
/// When several rules match a point, the most specific one wins:
///
/// 1. a rule whose pattern is the point itself (no `*`) beats every
///    wildcard;
/// 2. among wildcards, the longest prefix wins, so
///    `grpc:payments.v1.Payments/*` beats `grpc:*`, which beats `*`;
/// 3. among rules with the same pattern, the first in
///    [`rules`](Scenario::rules) wins.
///
/// So a scenario can fail one method and delay everything else, in any
/// order: `[{"point":"*","delay_ms":250},{"point":"grpc:a.A/M","abort":true}]`
/// aborts `grpc:a.A/M` and delays every other point.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Scenario {
    /// The scenario's rules, in the order the request carries them.
    pub rules: Vec<Rule>,
}

impl Scenario {
    /// A scenario of `rules`.
    pub fn new(rules: impl IntoIterator<Item = Rule>) -> Scenario {
        Scenario {
            rules: rules.into_iter().collect(),
        }
    }

    /// The rule that decides the point named `point`, as
    /// [Which rule wins](Scenario#which-rule-wins) says, or `None` when no
    /// rule matches it.
    pub fn rule_for(&self, point: &str) -> Option<&Rule> {
        let mut best: Option<(Specificity, &Rule)> = None;
        for rule in &self.rules {
            if let Some(s) = specificity(&rule.point, point)
                && best.as_ref().is_none_or(|(b, _)| s > *b)
            {
                best = Some((s, rule));
            }
        }
        best.map(|(_, rule)| rule)
    }

    /// The fault the point named `point` emulates under this scenario
    /// (unclamped), or [`Fault::NONE`] when no rule matches it.
    pub fn fault_for(&self, point: &str) -> Fault {
        self.rule_for(point).map_or(Fault::NONE, |r| r.fault)
    }
}

/// How specifically a pattern matched: an exact match beats any wildcard,
/// and a longer wildcard prefix beats a shorter one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Specificity {
    Prefix(usize),
    Exact,
}

fn specificity(pattern: &str, point: &str) -> Option<Specificity> {
    match pattern.strip_suffix('*') {
        Some(prefix) => point
            .starts_with(prefix)
            .then_some(Specificity::Prefix(prefix.len())),
        None => (pattern == point).then_some(Specificity::Exact),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn abort() -> Fault {
        Fault {
            abort: true,
            ..Fault::NONE
        }
    }

    fn delay(ms: u64) -> Fault {
        Fault {
            delay: Duration::from_millis(ms),
            ..Fault::NONE
        }
    }

    #[test]
    fn patterns_match_exactly_or_by_trailing_star() {
        let cases = [
            ("grpc:a.A/M", "grpc:a.A/M", true),
            ("grpc:a.A/M", "grpc:a.A/MM", false),
            ("grpc:a.A/M", "grpc:a.A/", false),
            ("grpc:a.A/*", "grpc:a.A/M", true),
            ("grpc:a.A/*", "grpc:a.A/", true),
            ("grpc:a.A/*", "grpc:a.B/M", false),
            ("grpc:*", "grpc:a.A/M", true),
            ("grpc:*", "http:payments:8443", false),
            ("*", "anything", true),
            ("*", "", true),
            ("gr*c:a", "grpc:a", false),
            ("gr*c:a", "gr*c:a", true),
            ("", "", true),
            ("", "x", false),
        ];
        for (pattern, point, want) in cases {
            assert_eq!(
                Rule::new(pattern, abort()).matches(point),
                want,
                "{pattern:?} against {point:?}"
            );
        }
    }

    #[test]
    fn check_point_allows_a_star_only_at_the_end() {
        for ok in ["grpc:a.A/M", "grpc:a.A/*", "grpc:*", "*", "é*"] {
            assert_eq!(check_point(ok), Ok(()), "{ok:?}");
        }
        assert_eq!(check_point(""), Err(PointError::Empty));
        let err = check_point("grpc:*/Greet").unwrap_err();
        assert_eq!(
            err,
            PointError::StarNotAtEnd {
                point: "grpc:*/Greet".into(),
                before: "grpc:".into(),
                suggestion: "grpc:*".into(),
            }
        );
        assert_eq!(
            err.to_string(),
            "point \"grpc:*/Greet\" has a `*` after \"grpc:\", but a `*` is a wildcard only at the \
             end of a point, so this rule would match no point: end the point at the `*` \
             (\"grpc:*\") to match every point starting with \"grpc:\", or remove the `*`"
        );
        for bad in ["**", "*a", "a*b*", "é*é"] {
            assert!(
                matches!(check_point(bad), Err(PointError::StarNotAtEnd { .. })),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn exact_beats_wildcards_whatever_the_order() {
        let s = Scenario::new([
            Rule::new("*", delay(250)),
            Rule::new("grpc:a.A/*", delay(1)),
            Rule::new("grpc:a.A/M", abort()),
        ]);
        assert_eq!(s.fault_for("grpc:a.A/M"), abort());
        assert_eq!(s.rule_for("grpc:a.A/M").unwrap().point, "grpc:a.A/M");
    }

    #[test]
    fn longest_prefix_wins_among_wildcards() {
        let s = Scenario::new([
            Rule::new("grpc:a.A/*", delay(1)),
            Rule::new("*", delay(250)),
            Rule::new("grpc:*", delay(2)),
        ]);
        assert_eq!(s.fault_for("grpc:a.A/M"), delay(1));
        assert_eq!(s.fault_for("grpc:b.B/M"), delay(2));
        assert_eq!(s.fault_for("kafka:orders"), delay(250));
    }

    #[test]
    fn first_of_equal_patterns_wins() {
        let s = Scenario::new([
            Rule::new("grpc:a.A/M", delay(1)),
            Rule::new("grpc:a.A/M", abort()),
        ]);
        assert_eq!(s.fault_for("grpc:a.A/M"), delay(1));
        let s = Scenario::new([Rule::new("*", abort()), Rule::new("*", delay(3))]);
        assert_eq!(s.fault_for("x"), abort());
    }

    #[test]
    fn no_match_is_no_fault() {
        let s = Scenario::new([Rule::new("grpc:a.A/M", abort())]);
        assert!(s.rule_for("grpc:a.A/N").is_none());
        assert!(s.fault_for("grpc:a.A/N").is_none());
        assert!(Scenario::default().fault_for("x").is_none());
    }

    #[test]
    fn fault_none() {
        assert!(Fault::NONE.is_none());
        assert!(Fault::default().is_none());
        assert!(!abort().is_none());
        assert!(!delay(1).is_none());
    }
}
