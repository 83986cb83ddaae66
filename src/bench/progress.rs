//! Progress lines on stderr from rank 0: case i of N, elapsed, estimated remaining.

use std::time::Instant;

/// A wall-clock duration for people: `0.4 s`, `12 s`, `3 min 20 s`, `1 h 05 min`.
pub fn fmt_duration(s: f64) -> String {
    if !s.is_finite() || s < 0.0 {
        return "?".into();
    }
    if s < 10.0 {
        return format!("{s:.1} s");
    }
    let t = s.round() as u64;
    match t {
        0..=59 => format!("{t} s"),
        60..=3599 => format!("{} min {:02} s", t / 60, t % 60),
        _ => format!("{} h {:02} min", t / 3600, (t % 3600) / 60),
    }
}

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
                fmt_duration(elapsed / self.done as f64 * (self.total - self.done) as f64)
            )
        } else {
            "estimating".to_string()
        };
        eprintln!(
            "[gradcomp] case {}/{}: {label}  (elapsed {}, {eta})",
            self.done + 1,
            self.total,
            fmt_duration(elapsed)
        );
    }

    pub fn finish_case(&mut self) {
        self.done += 1;
    }

    pub fn done(&self) -> usize {
        self.done
    }
}

#[cfg(test)]
mod tests {
    use super::fmt_duration;

    #[test]
    fn durations_read_as_people_say_them() {
        assert_eq!(fmt_duration(0.965171), "1.0 s");
        assert_eq!(fmt_duration(0.04), "0.0 s");
        assert_eq!(fmt_duration(9.96), "10.0 s");
        assert_eq!(fmt_duration(42.4), "42 s");
        assert_eq!(fmt_duration(200.0), "3 min 20 s");
        assert_eq!(fmt_duration(3900.0), "1 h 05 min");
        assert_eq!(fmt_duration(f64::NAN), "?");
    }
}
