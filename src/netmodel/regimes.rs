//! The fitted cost of one collective, [`CommFit`]: one alpha-beta line, or two or three
//! regimes split at fitted breakpoints, chosen by the rule of the parent module's doc
//! ("Regimes").

use super::{fit_linear, quality_of, rel_ssr, AlphaBeta, FitQuality, NetModelError};

/// Distinct message sizes each regime of a several-regime [`CommFit`] must span: two fix
/// its line, a third checks it.
pub const MIN_REGIME_SIZES: usize = 3;

/// A mean squared relative error below the square of this (1e-6: far below any timed
/// measurement's noise) is numerical, not a misfit; the model choice floors it there
/// so that exact data stays one line.
const REL_RESIDUAL_FLOOR: f64 = 1e-6;

/// One size range of a [`CommFit`]: a line and the message sizes it was fitted on.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Regime {
    /// `alpha + beta * bytes`; in an upper regime `alpha` may be negative (only sizes from
    /// `from_bytes` up are priced with it, and those are >= 0).
    pub line: AlphaBeta,
    /// Smallest and largest fitted message size (bytes per rank); for a given model, the
    /// whole range `0..inf`.
    pub from_bytes: f64,
    pub to_bytes: f64,
    /// Fit quality on the regime's own points (`None` for a given model).
    pub quality: Option<FitQuality>,
}

/// Most regimes a [`CommFit`] has: three is what a token-bucket-shaped link shows (messages
/// in cache, messages under the bucket's burst, messages at the rate; measured at 4
/// emulated nodes, docs/performance.md, "Time dilation").
pub const MAX_REGIMES: usize = 3;

/// The fitted cost of one collective: one alpha-beta line, or two or three regimes split
/// between measured sizes (module docs). [`CommFit::time_s`] prices a message.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CommFit {
    /// The regimes, small messages first; `parts[..len]` are used.
    parts: [Regime; MAX_REGIMES],
    len: usize,
}

impl CommFit {
    /// One line for every size (a given model, or a fit of one regime).
    pub fn line(line: AlphaBeta) -> CommFit {
        CommFit::of(&[Regime {
            line,
            from_bytes: 0.0,
            to_bytes: f64::INFINITY,
            quality: None,
        }])
    }

    /// The fit of these regimes (1 to [`MAX_REGIMES`], small messages first).
    fn of(regimes: &[Regime]) -> CommFit {
        assert!((1..=MAX_REGIMES).contains(&regimes.len()));
        let mut parts = [regimes[0]; MAX_REGIMES];
        parts[..regimes.len()].copy_from_slice(regimes);
        CommFit {
            parts,
            len: regimes.len(),
        }
    }

    /// The regimes, small messages first (one to three).
    pub fn regimes(&self) -> Vec<Regime> {
        self.parts[..self.len].to_vec()
    }

    /// The small messages' regime; with one regime, every message's.
    pub fn lower(&self) -> Regime {
        self.parts[0]
    }

    /// The large messages' regime, when the data has more than one.
    pub fn upper(&self) -> Option<Regime> {
        (self.len > 1).then(|| self.parts[self.len - 1])
    }

    /// Time of one message of `bytes` per rank: the line of the regime whose fitted sizes
    /// hold it, linear interpolation in the gap between two regimes.
    pub fn time_s(&self, bytes: f64) -> f64 {
        self.local_line(bytes).time_s(bytes)
    }

    /// The line that prices `bytes`: its regime's (below the first regime's sizes the
    /// first's, above the last's the last's), or between two regimes the secant through
    /// the lower one's last and the upper one's first fitted size.
    pub fn local_line(&self, bytes: f64) -> AlphaBeta {
        let rs = &self.parts[..self.len];
        let i = rs.iter().rposition(|r| r.from_bytes <= bytes).unwrap_or(0);
        let lo = &rs[i];
        if bytes <= lo.to_bytes || i + 1 == rs.len() {
            return lo.line;
        }
        let up = &rs[i + 1];
        let (x0, x1) = (lo.to_bytes, up.from_bytes);
        let (y0, y1) = (lo.line.time_s(x0), up.line.time_s(x1));
        let beta = (y1 - y0) / (x1 - x0);
        AlphaBeta::new(y0 - beta * x0, beta)
    }

    /// Least-squares fit of one, two or three regimes to `(bytes, seconds)` points
    /// (module docs); the quality is over all points. Needs at least two distinct sizes;
    /// `what` names the data in an error.
    pub fn fit(points: &[(f64, f64)], what: &str) -> Result<(CommFit, FitQuality), NetModelError> {
        let (a, b, q) = fit_linear(points, what)?;
        let mut sizes: Vec<f64> = points.iter().map(|p| p.0).collect();
        sizes.sort_by(f64::total_cmp);
        sizes.dedup();
        let n_sizes = sizes.len();
        let one = CommFit::of(&[Regime {
            line: AlphaBeta::new(a, b),
            from_bytes: sizes[0],
            to_bytes: sizes[n_sizes - 1],
            quality: Some(q),
        }]);
        // The regime over sizes[lo..hi]: the first as a plain line; a later one with x
        // measured from its first size, so `a >= 0` is a non-negative time at that size
        // whatever the intercept at 0 bytes.
        let regime = |lo: usize, hi: usize| -> Result<Regime, NetModelError> {
            let (from, to) = (sizes[lo], sizes[hi - 1]);
            let shift = if lo == 0 { 0.0 } else { from };
            let pts: Vec<(f64, f64)> = points
                .iter()
                .filter(|p| p.0 >= from && p.0 <= to)
                .map(|&(x, y)| (x - shift, y))
                .collect();
            let (a, b, q) = fit_linear(&pts, what)?;
            Ok(Regime {
                line: AlphaBeta::new(a - b * shift, b),
                from_bytes: from,
                to_bytes: to,
                quality: Some(q),
            })
        };
        // The best fit with each number of regimes (each spanning MIN_REGIME_SIZES sizes
        // at least), by squared relative error over every point: `best[r - 1]`.
        let mut best: [Option<(f64, CommFit)>; MAX_REGIMES] = [None; MAX_REGIMES];
        best[0] = Some((rel_ssr(points, |x| one.time_s(x)), one));
        let m = MIN_REGIME_SIZES;
        // Cut indices (the first size of each later regime), >= m sizes in every regime:
        // one or two cuts, for MAX_REGIMES = 3.
        const _: () = assert!(MAX_REGIMES == 3);
        let mut cut_sets: Vec<Vec<usize>> = Vec::new();
        for c1 in m..=n_sizes.saturating_sub(m) {
            cut_sets.push(vec![c1]);
            for c2 in c1 + m..=n_sizes.saturating_sub(m) {
                cut_sets.push(vec![c1, c2]);
            }
        }
        for cuts in &cut_sets {
            let bounds: Vec<usize> = std::iter::once(0)
                .chain(cuts.iter().copied())
                .chain(std::iter::once(n_sizes))
                .collect();
            let parts = bounds
                .windows(2)
                .map(|w| regime(w[0], w[1]))
                .collect::<Result<Vec<_>, _>>()?;
            let cand = CommFit::of(&parts);
            let ssr = rel_ssr(points, |x| cand.time_s(x));
            let slot = &mut best[parts.len() - 1];
            if slot.map_or(true, |t| ssr < t.0) {
                *slot = Some((ssr, cand));
            }
        }
        // Schwarz's criterion: `n ln(SSR / n) + k ln n`, k = 3 r - 1 for r regimes (two
        // per line, one per breakpoint).
        let n = points.len() as f64;
        let bic = |ssr: f64, regimes: usize| {
            n * (ssr / n).max(REL_RESIDUAL_FLOOR * REL_RESIDUAL_FLOOR).ln()
                + (3 * regimes - 1) as f64 * n.ln()
        };
        let fit = best
            .iter()
            .flatten()
            .map(|(ssr, f)| (bic(*ssr, f.len), *f))
            .min_by(|x, y| x.0.total_cmp(&y.0))
            .map(|(_, f)| f)
            .unwrap_or(one);
        Ok((fit, quality_of(points, |x| fit.time_s(x))))
    }

    /// The fit as `4 MAX_REGIMES` numbers, per regime (small messages first) `alpha, beta,
    /// from_bytes, to_bytes`, infinite for the regimes it lacks, e.g. to reduce over
    /// ranks; [`CommFit::from_params`] is the inverse (qualities are not kept).
    pub fn to_params(&self) -> [f64; 4 * MAX_REGIMES] {
        let mut p = [f64::INFINITY; 4 * MAX_REGIMES];
        for (q, r) in p.chunks_exact_mut(4).zip(&self.parts[..self.len]) {
            q.copy_from_slice(&[
                r.line.alpha_s,
                r.line.beta_s_per_byte,
                r.from_bytes,
                r.to_bytes,
            ]);
        }
        p
    }

    /// See [`CommFit::to_params`]. A regime with an infinite `from_bytes`, or one
    /// starting at or below the previous regime's end, ends the list.
    pub fn from_params(p: [f64; 4 * MAX_REGIMES]) -> CommFit {
        let regime = |q: &[f64]| Regime {
            line: AlphaBeta::new(q[0], q[1]),
            from_bytes: q[2],
            to_bytes: q[3],
            quality: None,
        };
        let mut parts = vec![regime(&p[..4])];
        for q in p.chunks_exact(4).skip(1) {
            let prev_to = parts[parts.len() - 1].to_bytes;
            if !(q[2].is_finite() && q[2] > prev_to) {
                break;
            }
            parts.push(regime(q));
        }
        CommFit::of(&parts)
    }
}
