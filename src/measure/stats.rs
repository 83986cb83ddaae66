//! Summary statistics over per-iteration times (already max-reduced over ranks).

use serde::Serialize;

/// Mean bytes per step of `total_bytes` over `steps`, rounded to the nearest byte (0 for
/// no steps): the per-step wire of methods whose message changes from step to step
/// (ACP-SGD alternates P and Q, DGC warms its density up, Power-SGD may start dense).
pub fn mean_bytes_per_step(total_bytes: u64, steps: u64) -> u64 {
    (total_bytes + steps / 2).checked_div(steps).unwrap_or(0)
}

/// Median, mean, min, max, p95, sample standard deviation and the 95% confidence
/// half-width of the mean (Student t, two-sided) of a sample.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq)]
pub struct Summary {
    pub n: usize,
    pub median: f64,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    pub p95: f64,
    pub std: f64,
    pub ci95: f64,
}

impl Summary {
    /// Summarise `xs` (sorted in place). An empty sample gives all zeros.
    pub fn of(xs: &mut [f64]) -> Summary {
        let n = xs.len();
        if n == 0 {
            return Summary::default();
        }
        xs.sort_by(f64::total_cmp);
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = if n > 1 {
            xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1) as f64
        } else {
            0.0
        };
        let std = var.sqrt();
        Summary {
            n,
            median: quantile_sorted(xs, 0.5),
            mean,
            min: xs[0],
            max: xs[n - 1],
            p95: quantile_sorted(xs, 0.95),
            std,
            ci95: if n > 1 {
                t975(n - 1) * std / (n as f64).sqrt()
            } else {
                0.0
            },
        }
    }
}

/// When a case has been timed enough: adaptive timing as hyperfine and criterion do it.
/// At least `min_iters` timed iterations and `min_time_s` of timed time, then more until
/// the 95% confidence half-width of the mean iteration time is at most `target_rel_ci` of
/// the mean; never more than `max_iters` iterations nor (once `min_iters` ran) more than
/// `max_time_s` of timed time. [`Timing::fixed`] is the plain `iters` rule.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Timing {
    pub min_iters: u64,
    pub min_time_s: f64,
    pub target_rel_ci: f64,
    pub max_iters: u64,
    pub max_time_s: f64,
}

impl Timing {
    /// Exactly `iters` timed iterations.
    pub fn fixed(iters: u64) -> Timing {
        Timing {
            min_iters: iters,
            min_time_s: 0.0,
            target_rel_ci: f64::INFINITY,
            max_iters: iters,
            max_time_s: f64::INFINITY,
        }
    }

    /// Whether the iterations summarised by `r` are enough.
    pub fn enough(&self, r: &Running) -> bool {
        if r.n >= self.max_iters || (r.n >= self.min_iters && r.sum >= self.max_time_s) {
            return true;
        }
        r.n >= self.min_iters
            && r.sum >= self.min_time_s
            && (self.target_rel_ci.is_infinite() || r.rel_ci95() <= self.target_rel_ci)
    }
}

/// Running count, sum, mean and variance of a sample (Welford), without allocation: the
/// stopping rule of [`Timing`] is evaluated between timed iterations.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Running {
    pub n: u64,
    pub sum: f64,
    mean: f64,
    m2: f64,
}

impl Running {
    pub fn push(&mut self, x: f64) {
        self.n += 1;
        self.sum += x;
        let d = x - self.mean;
        self.mean += d / self.n as f64;
        self.m2 += d * (x - self.mean);
    }

    /// The 95% confidence half-width of the mean over the mean (Student t); infinite
    /// below two samples or for a zero mean.
    pub fn rel_ci95(&self) -> f64 {
        if self.n < 2 || self.mean == 0.0 {
            return f64::INFINITY;
        }
        let sd = (self.m2 / (self.n - 1) as f64).sqrt();
        t975(self.n as usize - 1) * sd / (self.n as f64).sqrt() / self.mean.abs()
    }
}

/// The median of `xs` (sorted in place; [`quantile_sorted`] at 0.5); `None` when empty.
pub fn median(xs: &mut [f64]) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    xs.sort_by(f64::total_cmp);
    Some(quantile_sorted(xs, 0.5))
}

/// Repeated measurements of one point collapsed to their median: `(x, y)` pairs grouped
/// by equal `x`, one `(x, median y)` per group, in ascending `x`. A fit over repeated
/// rounds then weighs every point once and one slow round cannot move it.
pub fn median_per_x(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut sorted = points.to_vec();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out = Vec::new();
    let mut ys = Vec::new();
    for (i, &(x, y)) in sorted.iter().enumerate() {
        ys.push(y);
        if sorted.get(i + 1).map_or(true, |n| n.0 != x) {
            out.push((x, median(&mut ys).unwrap_or(f64::NAN)));
            ys.clear();
        }
    }
    out
}

/// The distribution-free interval of the median of `xs` by order statistics (sorts
/// `xs` in place): `(x_(j), x_(n+1-j))` with the largest `j` whose coverage
/// `1 - 2 P(B <= j - 1)`, `B ~ Binomial(n, 1/2)`, is still at least 50% (Conover,
/// *Practical Nonparametric Statistics*, 3rd ed., section 3.2; 50%: the coverage of an
/// interquartile range). Of five values the second and fourth smallest (62.5%), so one
/// slow round does not widen it; of two to four values the smallest and largest. NaN
/// when empty.
pub fn median_interval(xs: &mut [f64]) -> (f64, f64) {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n == 0 {
        return (f64::NAN, f64::NAN);
    }
    // P(B <= i) for i = 0, 1, ...: pmf(i) = C(n, i) / 2^n, built up term by term.
    let (mut j, mut pmf, mut cdf) = (1, 0.5f64.powi(n as i32), 0.0);
    for i in 0..n / 2 {
        cdf += pmf;
        pmf *= (n - i) as f64 / (i + 1) as f64;
        // j = i + 2 covers 1 - 2 P(B <= i + 1): take it while that is at least 50%.
        if 1.0 - 2.0 * (cdf + pmf) >= 0.5 {
            j = i + 2;
        } else {
            break;
        }
    }
    (xs[j - 1], xs[n - j])
}

/// The run-to-run spread of repeated measurements `xs` (reordered): the width of the
/// median's interval ([`median_interval`]) over the median; `None` with fewer than two
/// values or a median that is not positive.
pub fn spread_about_median(xs: &mut [f64]) -> Option<f64> {
    let (lo, hi) = median_interval(xs);
    let med = median(xs)?;
    (xs.len() > 1 && med > 0.0).then(|| (hi - lo) / med)
}

/// Quantile with linear interpolation between closest ranks (NumPy's default, type 7).
pub fn quantile_sorted(xs: &[f64], q: f64) -> f64 {
    let n = xs.len();
    if n == 0 {
        return f64::NAN;
    }
    let h = (n - 1) as f64 * q.clamp(0.0, 1.0);
    let lo = h.floor() as usize;
    let hi = h.ceil() as usize;
    xs[lo] + (h - lo as f64) * (xs[hi] - xs[lo])
}

/// 97.5% quantile of Student's t with `df` degrees of freedom (table to 30, then the
/// Cornish-Fisher expansion around the normal quantile 1.959964).
pub fn t975(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::NAN,
        1..=30 => T[df - 1],
        _ => {
            let z = 1.959_964f64;
            let v = df as f64;
            z + (z.powi(3) + z) / (4.0 * v)
                + (5.0 * z.powi(5) + 16.0 * z.powi(3) + 3.0 * z) / (96.0 * v * v)
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn repeated_points_collapse_to_their_median() {
        let pts = [
            (8.0, 5.0),
            (2.0, 1.0),
            (8.0, 50.0),
            (2.0, 3.0),
            (8.0, 6.0),
            (4.0, 7.0),
        ];
        // 8: {5, 6, 50} -> 6 (a slow round does not move it); 2: {1, 3} -> 2; 4 alone.
        assert_eq!(
            super::median_per_x(&pts),
            vec![(2.0, 2.0), (4.0, 7.0), (8.0, 6.0)]
        );
        assert!(super::median_per_x(&[]).is_empty());
    }

    /// The median's order-statistic interval against coverages worked by hand: n = 5,
    /// j = 2 covers 1 - 2 (1 + 5) / 32 = 62.5% (j = 3 would cover 0); n = 3, j = 1
    /// covers 75%; n = 7, j = 3 covers 1 - 2 (1 + 7 + 21) / 128 = 54.7%; n = 10, j = 4
    /// covers 1 - 2 (1 + 10 + 45 + 120) / 1024 = 65.6% (j = 5: 24.6%).
    #[test]
    fn median_interval_keeps_half_coverage() {
        assert_eq!(
            super::median_interval(&mut [9.0, 1.0, 500.0, 3.0, 2.0]),
            (2.0, 9.0)
        );
        assert_eq!(super::median_interval(&mut [4.0, 1.0, 2.0]), (1.0, 4.0));
        assert_eq!(super::median_interval(&mut [2.0, 1.0]), (1.0, 2.0));
        assert_eq!(
            super::median_interval(&mut [3.0, 1.0, 4.0, 2.0]),
            (1.0, 4.0)
        );
        let mut seven: Vec<f64> = (1..=7).rev().map(f64::from).collect();
        assert_eq!(super::median_interval(&mut seven), (3.0, 5.0));
        let mut ten: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(super::median_interval(&mut ten), (4.0, 7.0));
        assert_eq!(super::median_interval(&mut [7.0]), (7.0, 7.0));
    }

    /// Bytes per step round half up, written as f64 rounding (an independent rule):
    /// 5 B over 2 steps is 3, 4 over 3 is 1, 5 over 3 is 2; no steps, no bytes.
    #[test]
    fn mean_bytes_per_step_rounds_to_nearest() {
        for (total, steps) in [
            (5u64, 2u64),
            (4, 3),
            (5, 3),
            (7, 7),
            (1_078_888 * 3 + 1, 3),
            (1, 2),
        ] {
            let want = (total as f64 / steps as f64 + 0.5).floor() as u64;
            assert_eq!(
                super::mean_bytes_per_step(total, steps),
                want,
                "{total} / {steps}"
            );
        }
        assert_eq!(super::mean_bytes_per_step(10, 0), 0);
    }

    use super::*;

    #[test]
    fn summary_of_known_sample() {
        let mut xs = vec![5.0, 1.0, 4.0, 2.0, 3.0];
        let s = Summary::of(&mut xs);
        assert_eq!(s.median, 3.0);
        assert_eq!(s.mean, 3.0);
        assert_eq!(s.min, 1.0);
        assert_eq!(s.max, 5.0);
        assert!((s.p95 - 4.8).abs() < 1e-12);
        assert!((s.std - 2.5f64.sqrt()).abs() < 1e-12);
        assert!((s.ci95 - 2.776 * 2.5f64.sqrt() / 5f64.sqrt()).abs() < 1e-9);
    }

    #[test]
    fn t_quantile_is_continuous_at_table_end() {
        assert!((t975(31) - 2.040).abs() < 0.002);
        assert!((t975(1000) - 1.962).abs() < 0.001);
    }

    #[test]
    fn single_and_empty() {
        let s = Summary::of(&mut [2.0]);
        assert_eq!((s.median, s.std, s.ci95), (2.0, 0.0, 0.0));
        assert_eq!(Summary::of(&mut []).n, 0);
    }

    #[test]
    fn timing_stops_when_the_interval_is_narrow_enough() {
        let t = Timing {
            min_iters: 3,
            min_time_s: 0.01,
            target_rel_ci: 0.02,
            max_iters: 50,
            max_time_s: f64::INFINITY,
        };
        // Constant 1 ms: narrow at once, but the minimum time needs 10 iterations.
        let mut r = Running::default();
        let mut n = 0;
        while !t.enough(&r) {
            r.push(1e-3);
            n += 1;
        }
        assert_eq!(n, 10);
        // Alternating 1 and 2 ms never gets within 2% in 50: the cap stops it.
        let mut r = Running::default();
        let mut n = 0;
        while !t.enough(&r) {
            r.push(if n % 2 == 0 { 1e-3 } else { 2e-3 });
            n += 1;
        }
        assert_eq!(n, 50);
        // Mild noise: stops between the minimum and the cap, when the interval is narrow.
        let mut r = Running::default();
        let mut n = 0u64;
        while !t.enough(&r) {
            r.push(1e-3 * (1.0 + 0.05 * ((n * 7919 % 13) as f64 / 13.0 - 0.5)));
            n += 1;
        }
        assert!(n > 10 && n < 50, "{n}");
        assert!(r.rel_ci95() <= 0.02);
        // The time cap stops a noisy case after the minimum iterations.
        let capped = Timing {
            max_time_s: 0.0105,
            ..t
        };
        let mut r = Running::default();
        let mut n = 0;
        while !capped.enough(&r) {
            r.push(if n % 2 == 0 { 1e-3 } else { 2e-3 });
            n += 1;
        }
        assert_eq!(n, 8); // 1+2+1+2+1+2+1+2 ms >= 10.5 ms
                          // The fixed rule is the plain iteration count.
        let f = Timing::fixed(4);
        let mut r = Running::default();
        for _ in 0..3 {
            r.push(1.0);
            assert!(!f.enough(&r));
        }
        r.push(100.0);
        assert!(f.enough(&r));
    }

    #[test]
    fn running_matches_summary() {
        let mut xs = vec![3.0, 1.0, 4.0, 1.5, 9.0, 2.6];
        let mut r = Running::default();
        xs.iter().for_each(|&x| r.push(x));
        let s = Summary::of(&mut xs);
        assert!((r.rel_ci95() - s.ci95 / s.mean).abs() < 1e-12);
        assert!((r.sum - s.mean * 6.0).abs() < 1e-12);
    }
}
