//! A writer for `humus::telemetry::LineLogs` whose lines a test reads
//! back.
#![allow(dead_code, unreachable_pub)]

use std::sync::{Arc, Mutex};

/// A writer into a buffer shared with the test: give a clone to
/// `LineLogs::to`, read what was written with [`Lines::written`].
#[derive(Clone, Default)]
pub struct Lines(Arc<Mutex<Vec<u8>>>);

impl Lines {
    /// Everything written so far.
    pub fn written(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).expect("lines are UTF-8")
    }
}

impl std::io::Write for Lines {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
