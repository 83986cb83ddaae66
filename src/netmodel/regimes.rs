//! The fitted cost of one collective, [`CommFit`]: one alpha-beta line, or two regimes
//! split at a fitted breakpoint, chosen by the rule of the parent module's doc ("Two
//! regimes").

use super::{fit_linear, quality_of, rel_ssr, AlphaBeta, FitQuality, NetModelError};

/// Distinct message sizes each regime of a two-regime [`CommFit`] must span: two fix
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

/// The fitted cost of one collective: one alpha-beta line, or two regimes split between
/// two measured sizes (module docs). [`CommFit::time_s`] prices a message.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CommFit {
    /// The small messages' regime; with one regime, every message's.
    pub lower: Regime,
    /// The large messages' regime, when the data has two.
    pub upper: Option<Regime>,
}

impl CommFit {
    /// One line for every size (a given model, or a fit without a second regime).
    pub fn line(line: AlphaBeta) -> CommFit {
        CommFit {
            lower: Regime {
                line,
                from_bytes: 0.0,
                to_bytes: f64::INFINITY,
                quality: None,
            },
            upper: None,
        }
    }

    /// The regimes, small messages first (one or two).
    pub fn regimes(&self) -> Vec<Regime> {
        std::iter::once(self.lower).chain(self.upper).collect()
    }

    /// Time of one message of `bytes` per rank: the lower line up to its largest fitted
    /// size, the upper from its smallest, linear interpolation between the two.
    pub fn time_s(&self, bytes: f64) -> f64 {
        self.local_line(bytes).time_s(bytes)
    }

    /// The line that prices `bytes`: its regime's, or between the regimes the secant
    /// through the lower line's last and the upper line's first fitted size.
    pub fn local_line(&self, bytes: f64) -> AlphaBeta {
        let lo = &self.lower;
        match &self.upper {
            None => lo.line,
            Some(up) if bytes >= up.from_bytes => up.line,
            Some(_) if bytes <= lo.to_bytes => lo.line,
            Some(up) => {
                let (x0, x1) = (lo.to_bytes, up.from_bytes);
                let (y0, y1) = (lo.line.time_s(x0), up.line.time_s(x1));
                let beta = (y1 - y0) / (x1 - x0);
                AlphaBeta::new(y0 - beta * x0, beta)
            }
        }
    }

    /// Least-squares fit of one or two regimes to `(bytes, seconds)` points (module
    /// docs); the quality is over all points. Needs at least two distinct sizes; `what`
    /// names the data in an error.
    pub fn fit(points: &[(f64, f64)], what: &str) -> Result<(CommFit, FitQuality), NetModelError> {
        let (a, b, q) = fit_linear(points, what)?;
        let mut sizes: Vec<f64> = points.iter().map(|p| p.0).collect();
        sizes.sort_by(f64::total_cmp);
        sizes.dedup();
        let range = |lo: f64, hi: f64| -> Vec<(f64, f64)> {
            points
                .iter()
                .filter(|p| p.0 >= lo && p.0 <= hi)
                .copied()
                .collect()
        };
        let one = CommFit {
            lower: Regime {
                line: AlphaBeta::new(a, b),
                from_bytes: sizes[0],
                to_bytes: sizes[sizes.len() - 1],
                quality: Some(q),
            },
            upper: None,
        };
        let mut best = (rel_ssr(points, |x| one.time_s(x)), one);
        let ssr_one = best.0;
        for k in MIN_REGIME_SIZES..=sizes.len().saturating_sub(MIN_REGIME_SIZES) {
            let (lo_to, up_from, up_to) = (sizes[k - 1], sizes[k], sizes[sizes.len() - 1]);
            let lo_pts = range(sizes[0], lo_to);
            let (la, lb, lq) = fit_linear(&lo_pts, what)?;
            // The upper line with x measured from its first size: `a >= 0` there is a
            // non-negative time at that size, whatever the intercept at 0 bytes.
            let up_pts: Vec<(f64, f64)> = range(up_from, up_to)
                .iter()
                .map(|&(x, y)| (x - up_from, y))
                .collect();
            let (ua, ub, uq) = fit_linear(&up_pts, what)?;
            let cand = CommFit {
                lower: Regime {
                    line: AlphaBeta::new(la, lb),
                    from_bytes: sizes[0],
                    to_bytes: lo_to,
                    quality: Some(lq),
                },
                upper: Some(Regime {
                    line: AlphaBeta::new(ua - ub * up_from, ub),
                    from_bytes: up_from,
                    to_bytes: up_to,
                    quality: Some(uq),
                }),
            };
            let ssr = rel_ssr(points, |x| cand.time_s(x));
            if ssr < best.0 {
                best = (ssr, cand);
            }
        }
        let n = points.len() as f64;
        let bic = |ssr: f64, k: f64| {
            n * (ssr / n).max(REL_RESIDUAL_FLOOR * REL_RESIDUAL_FLOOR).ln() + k * n.ln()
        };
        let fit = if best.1.upper.is_some() && bic(best.0, 5.0) < bic(ssr_one, 2.0) {
            best.1
        } else {
            one
        };
        Ok((fit, quality_of(points, |x| fit.time_s(x))))
    }

    /// The fit as 8 numbers, lower then upper regime's `alpha, beta, from_bytes,
    /// to_bytes` (the upper four infinite without an upper regime), e.g. to reduce over
    /// ranks; [`CommFit::from_params`] is the inverse (qualities are not kept).
    pub fn to_params(&self) -> [f64; 8] {
        let lo = &self.lower;
        let up = self.upper.map_or([f64::INFINITY; 4], |u| {
            [
                u.line.alpha_s,
                u.line.beta_s_per_byte,
                u.from_bytes,
                u.to_bytes,
            ]
        });
        [
            lo.line.alpha_s,
            lo.line.beta_s_per_byte,
            lo.from_bytes,
            lo.to_bytes,
            up[0],
            up[1],
            up[2],
            up[3],
        ]
    }

    /// See [`CommFit::to_params`]. An upper regime with an infinite `from_bytes`, or one
    /// starting below the lower regime's end, is dropped.
    pub fn from_params(p: [f64; 8]) -> CommFit {
        let regime = |q: &[f64]| Regime {
            line: AlphaBeta::new(q[0], q[1]),
            from_bytes: q[2],
            to_bytes: q[3],
            quality: None,
        };
        let lower = regime(&p[..4]);
        let upper = (p[6].is_finite() && p[6] > lower.to_bytes).then(|| regime(&p[4..]));
        CommFit { lower, upper }
    }
}
