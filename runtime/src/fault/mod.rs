//! Failure injection (seed 002, humus `fault`).
//!
//! PLACEHOLDER: scenarios and the injector land with issue 7.

/// Evaluates failure-injection points against the scenario a request
/// carries. The default is off: it evaluates and strips nothing.
#[derive(Clone, Debug, Default)]
pub struct Injector {
    _private: (),
}
