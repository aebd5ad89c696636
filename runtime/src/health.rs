//! Health: readiness monitors (seed 000, "Readiness: Connected").
//!
//! PLACEHOLDER: `Monitor` lands with issue 4.
