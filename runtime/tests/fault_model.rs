//! Properties of the scenario model: the rule that decides a point matches
//! it, and no matching rule is more specific or earlier among equals
//! (docs/failure-injection.md, "The model"; the precedence `Scenario` documents).

use humus::fault::{Fault, Rule, Scenario};
use proptest::prelude::*;

/// Patterns and points over a tiny alphabet, so that they collide often.
fn pattern() -> impl Strategy<Value = String> {
    ("[ab:/]{0,4}", any::<bool>()).prop_map(|(p, star)| if star { p + "*" } else { p })
}

fn scenario() -> impl Strategy<Value = Scenario> {
    prop::collection::vec(
        (pattern(), any::<bool>(), 0u64..3).prop_map(|(p, abort, ms)| {
            Rule::new(
                p,
                Fault {
                    delay: std::time::Duration::from_millis(ms),
                    abort,
                },
            )
        }),
        0..8,
    )
    .prop_map(Scenario::new)
}

/// (exact?, prefix length): larger is more specific.
fn rank(rule: &Rule) -> (bool, usize) {
    match rule.point.strip_suffix('*') {
        Some(prefix) => (false, prefix.len()),
        None => (true, rule.point.len()),
    }
}

proptest! {
    #[test]
    fn the_most_specific_first_matching_rule_decides(s in scenario(), point in "[ab:/]{0,5}") {
        let matching: Vec<(usize, &Rule)> =
            s.rules.iter().enumerate().filter(|(_, r)| r.matches(&point)).collect();
        match s.rule_for(&point) {
            None => prop_assert!(matching.is_empty()),
            Some(chosen) => {
                prop_assert!(chosen.matches(&point));
                let index = s.rules.iter().position(|r| std::ptr::eq(r, chosen)).unwrap();
                for (i, r) in &matching {
                    prop_assert!(rank(r) <= rank(chosen), "{r:?} beats {chosen:?}");
                    if rank(r) == rank(chosen) {
                        prop_assert!(*i >= index, "an earlier equal rule {r:?} was passed over");
                    }
                }
                prop_assert_eq!(s.fault_for(&point), chosen.fault);
            }
        }
    }

    #[test]
    fn a_star_pattern_matches_exactly_the_points_with_its_prefix(prefix in "[ab:/]{0,3}", point in "[ab:/]{0,5}") {
        let rule = Rule::new(format!("{prefix}*"), Fault::NONE);
        prop_assert_eq!(rule.matches(&point), point.starts_with(&prefix));
        let exact = Rule::new(prefix.clone(), Fault::NONE);
        prop_assert_eq!(exact.matches(&point), point == prefix);
    }
}
