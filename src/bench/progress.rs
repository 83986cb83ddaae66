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

/// The limit on a case's timed iterations (s): `max_time_s` of adaptive e2e timing; `None`
/// for a case without one (a fixed iteration count, or adaptive timing without
/// `max_time_s`, which stops at `max_iters` whatever they take).
pub fn time_limit_s(case: &crate::config::Case) -> Option<f64> {
    match case {
        crate::config::Case::E2e(c) if c.timing.max_time_s.is_finite() => Some(c.timing.max_time_s),
        _ => None,
    }
}

/// Whether a case times adaptively (a stopping rule: `min_time_s`, `target_ci`), so noise
/// decides how long it runs.
pub fn is_adaptive(case: &crate::config::Case) -> bool {
    match case {
        crate::config::Case::E2e(c) => {
            c.timing != crate::measure::stats::Timing::fixed(c.timing.min_iters)
        }
        _ => false,
    }
}

/// The line printed before an adaptive sweep starts: its worst case, every limited
/// case's timed iterations running to its limit (`limits` per case, [`time_limit_s`]);
/// `unlimited` adaptive cases have no time limit. `None` without adaptive cases.
pub fn worst_case_line(limits: &[Option<f64>], unlimited: usize) -> Option<String> {
    let limited: Vec<f64> = limits.iter().flatten().copied().collect();
    if limited.is_empty() && unlimited == 0 {
        return None;
    }
    let others = limits.len() - limited.len() - unlimited;
    let mut line = format!(
        "[gradcomp] adaptive timing: a noisy case runs to its limit; worst case {} of timed iterations for the {} case(s) with a time limit (max_time_s)",
        fmt_duration(limited.iter().sum()),
        limited.len()
    );
    if unlimited > 0 {
        line += &format!(
            ", and {unlimited} adaptive case(s) without max_time_s run up to max_iters iterations each"
        );
    }
    if others > 0 {
        line += &format!(", plus {others} case(s) of fixed iterations");
    }
    line += "; warm-up, planning and setup come on top";
    Some(line)
}

/// The remaining time: `typical_s` (the finished cases' mean, as before) and, when every
/// remaining case has a time limit, the bound `sum of their limits + each case's overhead`
/// (`overhead_s`: the largest wall time beyond the timed iterations a case has taken so
/// far), which caps the typical estimate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Eta {
    pub typical_s: f64,
    pub at_most_s: Option<f64>,
}

/// [`Eta`] of the cases `remaining` (their limits) after `ran` cases took `ran_wall_s`
/// in all (`None` before any ran: nothing to estimate the overhead from).
pub fn eta(remaining: &[Option<f64>], ran: usize, ran_wall_s: f64, overhead_s: f64) -> Option<Eta> {
    if ran == 0 {
        return None;
    }
    let at_most_s = remaining
        .iter()
        .map(|l| l.map(|l| l + overhead_s))
        .sum::<Option<f64>>();
    let typical = ran_wall_s / ran as f64 * remaining.len() as f64;
    Some(Eta {
        typical_s: at_most_s.map_or(typical, |b| typical.min(b)),
        at_most_s,
    })
}

pub struct Progress {
    enabled: bool,
    /// Per case: the limit of its timed iterations ([`time_limit_s`]).
    limits: Vec<Option<f64>>,
    done: usize,
    start: Instant,
    case_start: Instant,
    /// Cases run (not skipped by `--resume`) and their wall time.
    ran: usize,
    ran_wall_s: f64,
    /// The largest wall time of a limited case beyond its timed iterations.
    overhead_s: f64,
}

impl Progress {
    /// Progress over `limits.len()` cases, each with its limit ([`time_limit_s`]).
    pub fn new(enabled: bool, limits: Vec<Option<f64>>) -> Progress {
        Progress {
            enabled,
            limits,
            done: 0,
            start: Instant::now(),
            case_start: Instant::now(),
            ran: 0,
            ran_wall_s: 0.0,
            overhead_s: 0.0,
        }
    }

    /// Print a line (rank 0, unless quiet).
    pub fn note(&self, line: &str) {
        if self.enabled {
            eprintln!("{line}");
        }
    }

    /// Announce the case about to run.
    pub fn start_case(&mut self, label: &str) {
        self.case_start = Instant::now();
        if !self.enabled {
            return;
        }
        let elapsed = self.start.elapsed().as_secs_f64();
        let remaining = &self.limits[self.done.min(self.limits.len())..];
        let eta = match eta(remaining, self.ran, self.ran_wall_s, self.overhead_s) {
            None => "estimating".to_string(),
            Some(Eta {
                typical_s,
                at_most_s: None,
            }) => format!("~{} left", fmt_duration(typical_s)),
            Some(Eta {
                typical_s,
                at_most_s: Some(b),
            }) => format!(
                "~{} left, at most {} at the time limits",
                fmt_duration(typical_s),
                fmt_duration(b)
            ),
        };
        eprintln!(
            "[gradcomp] case {}/{}: {label}  (elapsed {}, {eta})",
            self.done + 1,
            self.limits.len(),
            fmt_duration(elapsed)
        );
    }

    /// The case started last has finished; `timed_s`: its timed iterations' time (e2e).
    pub fn finish_case(&mut self, timed_s: Option<f64>) {
        let wall = self.case_start.elapsed().as_secs_f64();
        if let (Some(t), Some(Some(_))) = (timed_s, self.limits.get(self.done)) {
            self.overhead_s = self.overhead_s.max(wall - t);
        }
        self.ran += 1;
        self.ran_wall_s += wall;
        self.done += 1;
    }

    /// A case skipped by `--resume` (no time taken).
    pub fn skip_case(&mut self) {
        self.done += 1;
    }

    pub fn done(&self) -> usize {
        self.done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The worst case adds the limits (24 cases of 5 s: 2 min); cases without a limit are
    /// named, not guessed.
    #[test]
    fn worst_case_is_the_sum_of_the_limits() {
        let mut limits = vec![Some(5.0); 24];
        let line = worst_case_line(&limits, 0).unwrap();
        assert!(
            line.contains("worst case 2 min 00 s") && line.contains("24 case(s)"),
            "{line}"
        );
        limits.extend([None, None, None]);
        let line = worst_case_line(&limits, 1).unwrap();
        assert!(
            line.contains("1 adaptive case(s) without max_time_s"),
            "{line}"
        );
        assert!(
            line.contains("plus 2 case(s) of fixed iterations"),
            "{line}"
        );
        assert_eq!(worst_case_line(&[None, None], 0), None);
    }

    /// After a noisy case the mean would extrapolate beyond what the limits allow: the
    /// estimate is capped at the bound, 3 remaining cases x (5 s limit + 1.5 s overhead)
    /// = 19.5 s; a quiet history keeps the mean; a remaining case without a limit has
    /// no bound.
    #[test]
    fn eta_uses_the_time_limits() {
        let rem = [Some(5.0); 3];
        let e = eta(&rem, 2, 60.0, 1.5).unwrap();
        assert_eq!(e.at_most_s, Some(19.5));
        assert_eq!(e.typical_s, 19.5);
        let e = eta(&rem, 2, 4.0, 1.5).unwrap();
        assert_eq!((e.typical_s, e.at_most_s), (6.0, Some(19.5)));
        let e = eta(&[Some(5.0), None], 2, 4.0, 1.5).unwrap();
        assert_eq!((e.typical_s, e.at_most_s), (4.0, None));
        // Before the first case: estimating (the start line gave the worst case).
        assert_eq!(eta(&rem, 0, 0.0, 0.0), None);
    }

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
