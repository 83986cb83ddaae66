//! Cost models fitted from the micro benchmarks (pure code, no MPI): the alpha-beta
//! model of a collective, `t = alpha + beta * bytes` (Hockney; as used by OMGS-SGD and
//! MG-WFBP, Shi et al., INFOCOM 2019/2020), and a linear model of a compressor's time,
//! `t = fixed + per_element * numel`.
//!
//! **Fit.** Both are weighted least squares with weights `1 / t_i^2`, i.e. they minimise
//! the sum of squared *relative* errors `((alpha + beta x_i - t_i) / t_i)^2`. Micro
//! benchmark sizes span several orders of magnitude (bytes to hundreds of MiB); an
//! unweighted fit is dominated by the largest messages and can get the startup time
//! (alpha), which matters most to the merge planners, wrong by orders of magnitude.
//! Relative weighting fits small and large messages alike. A time of exactly 0 (a
//! method with nothing to compress) gets the weight of [`TIME_FLOOR_S`].
//! Both coefficients are clamped to be non-negative: when the unconstrained solution
//! has a negative coefficient, that coefficient is set to 0 and the other refitted
//! alone (the constrained least-squares optimum of a 2-parameter model).
//! [`FitQuality::r2`] is the weighted coefficient of determination (the same weights
//! as the fit, so it measures what the fit minimises).
//!
//! **Regimes.** A collective's fit ([`CommFit`]) may instead be two or three such lines
//! split at fitted breakpoints: a network whose cost per byte changes with the message
//! size is not one line, and one line fitted by relative error to several regimes gets
//! them all wrong. A token-bucket shaper passes a sweep's small messages at memory speed
//! and large ones at the link rate (docs/performance.md, "Emulated network (netlab)");
//! at 4 emulated nodes the all-gather showed three (in cache, under the bucket's burst,
//! at the link rate; docs/performance.md, "Time dilation"), as SMPI's piecewise-linear
//! network factors have several segments
//! (SimGrid, Degomme et al., "Simulating MPI applications: the SMPI approach", IEEE
//! TPDS 2017). Every split between consecutive measured sizes into two or three
//! regimes of at least [`MIN_REGIME_SIZES`] sizes each is fitted (the first line as
//! above; each later one with its time at its first size and its slope non-negative,
//! so its intercept may be negative, as a shaper's burst credit makes it); per number
//! of regimes the split with the least squared relative error is taken, and among one,
//! two and three regimes Schwarz's Bayesian information criterion decides:
//! `n ln(SSR/n) + k ln n` with `k = 3r - 1` for `r` regimes (two per line, one per
//! breakpoint; docs/architecture.md, "The simulator"). Data of one regime thus stays
//! one line. Between one regime's largest size and the next one's smallest the cost is
//! interpolated linearly.
//!
//! Files: this one holds the error type, [`AlphaBeta`], [`CompressCost`] and the
//! weighted fit they share; `regimes.rs` the one- to three-regime fit of a collective
//! ([`CommFit`]); `micro_comm.rs` the models read from micro_comm.csv ([`CommModels`]).

use thiserror::Error;

mod micro_comm;
mod regimes;

pub use micro_comm::CommModels;
pub use regimes::{CommFit, Regime, MAX_REGIMES, MIN_REGIME_SIZES};

/// Times below this (s) are weighted as this in the relative-error fit (1 ns, below
/// any timer's resolution), so a row with `t = 0` does not get an infinite weight.
pub const TIME_FLOOR_S: f64 = 1e-9;

/// The layout version of micro_comm.csv and micro_compress.csv this reader understands.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Error)]
pub enum NetModelError {
    /// micro_comm.csv is missing, malformed or lacks a column ([`crate::record::CsvFile`]).
    #[error(transparent)]
    Read(#[from] crate::record::ReadError),
    #[error("{path} line {line}: schema_version is `{found}`, this build reads version {expected}; regenerate the file with this gradcomp (`gradcomp micro-comm` / `micro-compress`)")]
    SchemaVersion {
        path: String,
        line: u64,
        found: String,
        expected: u32,
    },
    #[error("{path} line {line}, column `{column}`: `{value}` is not {expected}")]
    BadValue {
        path: String,
        line: u64,
        column: String,
        value: String,
        expected: String,
    },
    #[error(
        "{path}: no data rows; run the micro benchmark first or pass the model on the command line"
    )]
    Empty { path: String },
    #[error("cannot fit {what}: {reason}")]
    Fit { what: String, reason: String },
}

/// Hockney's model of one message: `t = alpha + beta * bytes`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AlphaBeta {
    /// Startup time per message (s).
    pub alpha_s: f64,
    /// Transfer time per byte (s/B): the inverse of the effective bandwidth.
    pub beta_s_per_byte: f64,
}

/// How well a fit matches its points.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FitQuality {
    /// Weighted (1/t^2) coefficient of determination; 1 is a perfect fit.
    pub r2: f64,
    /// Largest `|predicted - measured| / measured` over the points (measured floored at
    /// [`TIME_FLOOR_S`]).
    pub max_rel_err: f64,
    /// Number of points.
    pub n: usize,
}

impl AlphaBeta {
    pub fn new(alpha_s: f64, beta_s_per_byte: f64) -> AlphaBeta {
        AlphaBeta {
            alpha_s,
            beta_s_per_byte,
        }
    }

    /// Model from a startup time and a bandwidth in GB/s (1e9 B/s).
    pub fn from_gbps(alpha_s: f64, gbps: f64) -> AlphaBeta {
        AlphaBeta {
            alpha_s,
            beta_s_per_byte: if gbps > 0.0 { 1.0 / (gbps * 1e9) } else { 0.0 },
        }
    }

    /// `alpha + beta * bytes` (Hockney).
    pub fn time_s(&self, bytes: f64) -> f64 {
        self.alpha_s + self.beta_s_per_byte * bytes
    }

    /// Time of a message of `elements` values of `bytes_per_element` bytes each.
    pub fn time_elements_s(&self, elements: usize, bytes_per_element: f64) -> f64 {
        self.time_s(elements as f64 * bytes_per_element)
    }

    /// Weighted (1/t^2) least squares fit of `t = alpha + beta * bytes`, both clamped to
    /// be >= 0 (see the module docs). Needs at least two distinct sizes.
    pub fn fit(points: &[(f64, f64)]) -> Result<(AlphaBeta, FitQuality), NetModelError> {
        let (a, b, q) = fit_linear(points, "alpha-beta model")?;
        Ok((
            AlphaBeta {
                alpha_s: a,
                beta_s_per_byte: b,
            },
            q,
        ))
    }
}

/// Weighted least squares of `y = a + b x` with weights `1/max(y, floor)^2`, `a, b >= 0`.
fn fit_linear(points: &[(f64, f64)], what: &str) -> Result<(f64, f64, FitQuality), NetModelError> {
    fit_linear_by(points, what, rel_weight)
}

/// [`fit_linear`] with the weight `w(t)` of a point of time `t`.
fn fit_linear_by(
    points: &[(f64, f64)],
    what: &str,
    w: fn(f64) -> f64,
) -> Result<(f64, f64, FitQuality), NetModelError> {
    let err = |reason: String| NetModelError::Fit {
        what: what.to_string(),
        reason,
    };
    for &(x, y) in points {
        if !x.is_finite() || x < 0.0 || !y.is_finite() || y < 0.0 {
            return Err(err(format!(
                "point ({x}, {y}) is not a finite non-negative (size, seconds) pair"
            )));
        }
    }
    let xmin = points.iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
    let xmax = points.iter().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
    if points.len() < 2 || xmin == xmax {
        return Err(err(format!(
            "{} point(s) with {} distinct size(s); need at least two distinct message sizes (run the micro benchmark over a size range)",
            points.len(),
            if points.is_empty() { 0 } else if xmin == xmax { 1 } else { 2 }
        )));
    }
    let n = points.len();
    if points.iter().all(|p| p.1 == 0.0) {
        return Ok((
            0.0,
            0.0,
            FitQuality {
                r2: 1.0,
                max_rel_err: 0.0,
                n,
            },
        ));
    }
    // Center x for numerical stability of the normal equations.
    let (mut sw, mut swx, mut swy) = (0.0, 0.0, 0.0);
    for &(x, y) in points {
        let wi = w(y);
        sw += wi;
        swx += wi * x;
        swy += wi * y;
    }
    let (xm, ym) = (swx / sw, swy / sw);
    let (mut sxx, mut sxy) = (0.0, 0.0);
    for &(x, y) in points {
        let wi = w(y);
        sxx += wi * (x - xm) * (x - xm);
        sxy += wi * (x - xm) * (y - ym);
    }
    let mut b = sxy / sxx;
    let mut a = ym - b * xm;
    if b < 0.0 {
        // Refit with beta = 0: the weighted mean.
        b = 0.0;
        a = ym;
    } else if a < 0.0 {
        // Refit with alpha = 0: b = sum(w x y) / sum(w x^2).
        let (mut num, mut den) = (0.0, 0.0);
        for &(x, y) in points {
            num += w(y) * x * y;
            den += w(y) * x * x;
        }
        a = 0.0;
        b = if den > 0.0 { (num / den).max(0.0) } else { 0.0 };
    }
    Ok((a, b, quality_of(points, |x| a + b * x)))
}

/// Weight of a point in the relative-error fits: `1 / max(t, floor)^2`.
fn rel_weight(y: f64) -> f64 {
    1.0 / y.max(TIME_FLOOR_S).powi(2)
}

/// Weight of a point in [`CompressCost::fit_sums`]: `1 / max(t, floor)`.
fn sum_weight(y: f64) -> f64 {
    1.0 / y.max(TIME_FLOOR_S)
}

/// Weighted ([`rel_weight`]) squared error of `c` over `(elements, selected, seconds)`
/// points.
fn rel_ssr3(points: &[(f64, f64, f64)], c: &CompressCost) -> f64 {
    points
        .iter()
        .map(|&(e, s, t)| rel_weight(t) * (c.at(e, s) - t).powi(2))
        .sum()
}

/// Weighted ([`rel_weight`]) least squares of the seconds of `(elements, selected,
/// seconds)` points on the features `cols` of `[1, elements, selected]`: the normal
/// equations, each feature scaled to at most 1 and solved by Gaussian elimination with
/// partial pivoting. `None` when they are singular (a feature that does not vary, fewer
/// points than features).
fn weighted_lsq(points: &[(f64, f64, f64)], cols: &[usize]) -> Option<Vec<f64>> {
    let feats = |p: &(f64, f64, f64)| [1.0, p.0, p.1];
    let k = cols.len();
    if points.len() < k {
        return None;
    }
    let scale: Vec<f64> = cols
        .iter()
        .map(|&j| {
            let m = points.iter().map(|p| feats(p)[j].abs()).fold(0.0, f64::max);
            if m > 0.0 {
                m
            } else {
                1.0
            }
        })
        .collect();
    // Augmented normal equations [X'WX | X'Wy] in scaled features.
    let mut a = vec![vec![0.0; k + 1]; k];
    for p in points {
        let f = feats(p);
        let x: Vec<f64> = cols.iter().zip(&scale).map(|(&j, s)| f[j] / s).collect();
        let w = rel_weight(p.2);
        for r in 0..k {
            for c in 0..k {
                a[r][c] += w * x[r] * x[c];
            }
            a[r][k] += w * x[r] * p.2;
        }
    }
    let tiny = 1e-12 * (0..k).map(|c| a[c][c]).fold(0.0, f64::max);
    for c in 0..k {
        let piv = (c..k).max_by(|&i, &j| a[i][c].abs().total_cmp(&a[j][c].abs()))?;
        if a[piv][c].abs() <= tiny {
            return None;
        }
        a.swap(c, piv);
        let pivot_row = a[c].clone();
        for (r, row) in a.iter_mut().enumerate() {
            if r != c {
                let f = row[c] / pivot_row[c];
                for (x, p) in row.iter_mut().zip(&pivot_row).skip(c) {
                    *x -= f * p;
                }
            }
        }
    }
    let sol: Vec<f64> = (0..k).map(|r| a[r][k] / a[r][r] / scale[r]).collect();
    sol.iter().all(|v| v.is_finite()).then_some(sol)
}

/// Sum of squared relative errors of `pred` over `points` (what the fits minimise).
fn rel_ssr(points: &[(f64, f64)], pred: impl Fn(f64) -> f64) -> f64 {
    points
        .iter()
        .map(|&(x, y)| rel_weight(y) * (pred(x) - y).powi(2))
        .sum()
}

/// [`FitQuality`] of the predictions `pred` on `points` (weighted as the fits).
fn quality_of(points: &[(f64, f64)], pred: impl Fn(f64) -> f64) -> FitQuality {
    let pairs: Vec<(f64, f64)> = points.iter().map(|&(x, y)| (pred(x), y)).collect();
    quality_of_pairs(&pairs)
}

/// [`FitQuality`] of `(predicted, measured)` pairs (weighted as the fits).
fn quality_of_pairs(pairs: &[(f64, f64)]) -> FitQuality {
    let sw: f64 = pairs.iter().map(|p| rel_weight(p.1)).sum();
    let ym = pairs.iter().map(|p| rel_weight(p.1) * p.1).sum::<f64>() / sw;
    let (mut ss_res, mut ss_tot, mut max_rel) = (0.0, 0.0, 0.0f64);
    for &(p, y) in pairs {
        ss_res += rel_weight(y) * (p - y).powi(2);
        ss_tot += rel_weight(y) * (y - ym).powi(2);
        max_rel = max_rel.max((p - y).abs() / y.max(TIME_FLOOR_S));
    }
    let r2 = if ss_tot > 0.0 {
        1.0 - ss_res / ss_tot
    } else if ss_res <= 1e-24 {
        1.0
    } else {
        0.0
    };
    FitQuality {
        r2,
        max_rel_err: max_rel,
        n: pairs.len(),
    }
}

/// Linear model of a compressor's time on a group of `elements` values, of which the
/// method selects over `selected` ([`crate::compress::Compressor::selection_elems`]).
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct CompressCost {
    pub per_element_s: f64,
    pub fixed_s: f64,
    /// Per element of the method's selection (DGC's threshold sample); 0 for methods
    /// whose work is linear in the tensor.
    pub per_selected_s: f64,
}

impl CompressCost {
    /// `fixed + per_element * elements + per_selected * selected`.
    pub fn time_s(&self, elements: usize, selected: usize) -> f64 {
        self.at(elements as f64, selected as f64)
    }

    /// [`CompressCost::time_s`] at real-valued sizes (the fits' points).
    fn at(&self, elements: f64, selected: f64) -> f64 {
        self.fixed_s + self.per_element_s * elements + self.per_selected_s * selected
    }

    /// Fit from `(elements, selected, seconds)` points: `fixed + per_element * elements
    /// + per_selected * selected` by least squares on relative error (weighted as
    /// [`CompressCost::fit`]), every coefficient non-negative (of the models on each
    /// subset of the three terms whose unconstrained fit is non-negative, the one with the
    /// smallest weighted error). Points that select nothing (a method linear in the
    /// tensor) give [`CompressCost::fit`]'s model.
    pub fn fit_selection(
        points: &[(f64, f64, f64)],
    ) -> Result<(CompressCost, FitQuality), NetModelError> {
        let linear: Vec<(f64, f64)> = points.iter().map(|&(e, _, t)| (e, t)).collect();
        if points.iter().all(|p| p.1 == 0.0) {
            return CompressCost::fit(&linear);
        }
        if points.iter().any(|p| !p.1.is_finite() || p.1 < 0.0) {
            return Err(NetModelError::Fit {
                what: "compression cost model".into(),
                reason: "a selection size is not a finite non-negative count".into(),
            });
        }
        // The linear fit checks the points and is the fallback.
        let (lin, _) = CompressCost::fit(&linear)?;
        let mut best = (lin, rel_ssr3(points, &lin));
        for mask in 1u8..8 {
            let cols: Vec<usize> = (0..3).filter(|j| mask & (1 << j) != 0).collect();
            let Some(sol) = weighted_lsq(points, &cols) else {
                continue;
            };
            let mut coef = [0.0; 3];
            for (&j, v) in cols.iter().zip(sol) {
                coef[j] = v;
            }
            if coef.iter().any(|&v| v < 0.0) {
                continue;
            }
            let c = CompressCost {
                fixed_s: coef[0],
                per_element_s: coef[1],
                per_selected_s: coef[2],
            };
            let ssr = rel_ssr3(points, &c);
            if ssr < best.1 {
                best = (c, ssr);
            }
        }
        let c = best.0;
        let pairs: Vec<(f64, f64)> = points
            .iter()
            .map(|&(e, sel, t)| (c.at(e, sel), t))
            .collect();
        Ok((c, quality_of_pairs(&pairs)))
    }

    /// Fit from `(elements, seconds)` points (weighted as [`AlphaBeta::fit`]).
    pub fn fit(points: &[(f64, f64)]) -> Result<(CompressCost, FitQuality), NetModelError> {
        let (a, b, q) = fit_linear(points, "compression cost model")?;
        Ok((
            CompressCost {
                per_element_s: b,
                fixed_s: a,
                per_selected_s: 0.0,
            },
            q,
        ))
    }

    /// Fit from `(elements, seconds)` points whose costs will be summed (the planners
    /// price a group as the sum of its tensors): each point weighted by `1 / t`, so a
    /// point's squared error counts in proportion to its time, as in the variance of a
    /// sum. The relative fit ([`CompressCost::fit`]) lets ResNet-50's ~100 small tensors set
    /// the slope: per tensor, Count Sketch measured 3.9 ns per element above 1 M
    /// elements and 6.4 ns below 100 k, the relative fit 4.8 ns, this one 4.0 ns, the
    /// whole model's sum 4.3 ns (docs/methods.md, "Costs the planners are given").
    pub fn fit_sums(points: &[(f64, f64)]) -> Result<(CompressCost, FitQuality), NetModelError> {
        let (a, b, q) = fit_linear_by(points, "compression cost model", sum_weight)?;
        Ok((
            CompressCost {
                per_element_s: b,
                fixed_s: a,
                per_selected_s: 0.0,
            },
            q,
        ))
    }
}

#[cfg(test)]
mod tests;
