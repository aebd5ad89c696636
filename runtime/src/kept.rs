//! Values made once per name and kept for the rest of the process (leaked),
//! up to a bound: the gRPC client's descriptors of the methods it does not
//! know, the gRPC server's method names.

use std::collections::HashMap;
use std::sync::{PoisonError, RwLock};

/// What is kept: each name's value, both leaked.
pub(crate) type Kept<V> = RwLock<HashMap<&'static str, &'static V>>;

/// `name`'s value in `kept`: the one kept, else the one `make` leaks (with
/// the name it is kept under), kept for the first `max` names; `other`
/// once `max` are kept. A kept value is read under the read lock; a new
/// one is made under the write lock, once.
pub(crate) fn kept<V: ?Sized + Sync>(
    kept: &Kept<V>,
    name: &str,
    max: usize,
    other: &'static V,
    make: impl FnOnce() -> (&'static str, &'static V),
) -> &'static V {
    if let Some(value) = kept
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .get(name)
    {
        return value;
    }
    let mut kept = kept.write().unwrap_or_else(PoisonError::into_inner);
    if let Some(value) = kept.get(name) {
        return value;
    }
    if kept.len() >= max {
        return other;
    }
    let (name, value) = make();
    kept.insert(name, value);
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_made_once_and_kept_up_to_the_bound() {
        let names: Kept<str> = RwLock::default();
        let mut made = 0;
        let mut get = |name: &str| {
            kept(&names, name, 2, "other", || {
                made += 1;
                let leaked: &'static str = Box::leak(name.into());
                (leaked, leaked)
            })
        };
        assert_eq!(get("a"), "a");
        let first = get("b");
        assert_eq!(get("c"), "other");
        assert!(std::ptr::eq(get("b"), first));
        assert_eq!(made, 2);
    }
}
