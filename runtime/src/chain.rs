//! Reading an error's `source()` chain.

use std::error::Error;

/// The first error of type `E` in the chain that starts at `first` (it
/// included) and follows `source()`; `None` when there is none.
pub(crate) fn find<'e, E: Error + 'static>(
    first: Option<&'e (dyn Error + 'static)>,
) -> Option<&'e E> {
    let mut next = first;
    while let Some(err) = next {
        if let Some(found) = err.downcast_ref::<E>() {
            return Some(found);
        }
        next = err.source();
    }
    None
}
