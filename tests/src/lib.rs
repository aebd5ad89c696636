//! End-to-end tests of humus across its crates.
