//! Progress lines on stderr from rank 0: case i of N, elapsed, estimated remaining.

use crate::units::fmt_seconds;
use std::time::Instant;

pub struct Progress {
    enabled: bool,
    total: usize,
    done: usize,
    start: Instant,
}

impl Progress {
    pub fn new(enabled: bool, total: usize) -> Progress {
        Progress {
            enabled,
            total,
            done: 0,
            start: Instant::now(),
        }
    }

    /// Announce the case about to run.
    pub fn start_case(&self, label: &str) {
        if !self.enabled {
            return;
        }
        let elapsed = self.start.elapsed().as_secs_f64();
        let eta = if self.done > 0 {
            format!(
                "~{} left",
                fmt_seconds(elapsed / self.done as f64 * (self.total - self.done) as f64)
            )
        } else {
            "estimating".to_string()
        };
        eprintln!(
            "[gradcomp] case {}/{}: {label}  (elapsed {}, {eta})",
            self.done + 1,
            self.total,
            fmt_seconds(elapsed)
        );
    }

    pub fn finish_case(&mut self) {
        self.done += 1;
    }

    pub fn done(&self) -> usize {
        self.done
    }
}
