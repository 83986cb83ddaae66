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
//! **Two regimes.** A collective's fit ([`CommFit`]) may instead be two such lines split
//! at a fitted breakpoint: a network whose cost per byte changes with the message size
//! (a token-bucket shaper that passes a sweep's small messages at memory speed and
//! large ones at the link rate; docs/performance.md, "Emulated network (netlab)") is
//! not one line, and one line fitted by relative error to both regimes gets both wrong.
//! Every split between consecutive measured sizes with at least [`MIN_REGIME_SIZES`]
//! sizes on each side is fitted (lower line as above; the upper one with its time at
//! its first size and its slope non-negative, so its intercept may be negative, as a
//! shaper's burst credit makes it), the split with the least squared relative error is
//! taken, and it is kept only when Schwarz's Bayesian information criterion prefers it
//! to one line: `n ln(SSR/n) + k ln n` with `k` = 2 for a line and 5 for two lines and
//! their breakpoint (docs/architecture.md, "The simulator"). Data of one regime thus
//! stays one line. Between the lower regime's largest size and the upper one's smallest
//! the cost is interpolated linearly.

use std::collections::HashMap;
use std::path::Path;
use thiserror::Error;

/// Times below this (s) are weighted as this in the relative-error fit (1 ns, below
/// any timer's resolution), so a row with `t = 0` does not get an infinite weight.
pub const TIME_FLOOR_S: f64 = 1e-9;

/// The layout version of micro_comm.csv and micro_compress.csv this reader understands.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Error)]
pub enum NetModelError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: malformed CSV: {source}")]
    Csv { path: String, source: csv::Error },
    #[error("{path}: missing column `{column}` (the header has: {header}); {fix}")]
    MissingColumn {
        path: String,
        column: String,
        header: String,
        fix: String,
    },
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
    let w = rel_weight;
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

/// Sum of squared relative errors of `pred` over `points` (what the fits minimise).
fn rel_ssr(points: &[(f64, f64)], pred: impl Fn(f64) -> f64) -> f64 {
    points
        .iter()
        .map(|&(x, y)| rel_weight(y) * (pred(x) - y).powi(2))
        .sum()
}

/// [`FitQuality`] of the predictions `pred` on `points` (weighted as the fits).
fn quality_of(points: &[(f64, f64)], pred: impl Fn(f64) -> f64) -> FitQuality {
    let sw: f64 = points.iter().map(|p| rel_weight(p.1)).sum();
    let ym = points.iter().map(|p| rel_weight(p.1) * p.1).sum::<f64>() / sw;
    let (mut ss_res, mut ss_tot, mut max_rel) = (0.0, 0.0, 0.0f64);
    for &(x, y) in points {
        let p = pred(x);
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
        n: points.len(),
    }
}

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

/// Collective cost models ([`CommFit`]: one or two alpha-beta regimes) per (collective,
/// world size), e.g. `("allreduce", 8)`. Sizes are **bytes per rank** (micro_comm.csv's
/// `bytes`: the vector all-reduced, or each rank's all-gather contribution).
#[derive(Clone, Debug, Default)]
pub struct CommModels {
    models: HashMap<(String, usize), (CommFit, Option<FitQuality>)>,
}

impl CommModels {
    /// No models.
    pub fn new() -> CommModels {
        CommModels::default()
    }

    /// Set (or replace) the model of one collective at one world size: one line.
    pub fn insert(&mut self, collective: &str, world_size: usize, model: AlphaBeta) {
        self.models.insert(
            (collective.to_string(), world_size),
            (CommFit::line(model), None),
        );
    }

    /// The model of `collective` at `world_size`, if there is one.
    pub fn get(&self, collective: &str, world_size: usize) -> Option<&CommFit> {
        self.models
            .get(&(collective.to_string(), world_size))
            .map(|m| &m.0)
    }

    /// Fit quality of a model read from CSV over all its points (`None` for given models).
    pub fn quality(&self, collective: &str, world_size: usize) -> Option<FitQuality> {
        self.models
            .get(&(collective.to_string(), world_size))
            .and_then(|m| m.1)
    }

    /// Every (collective, world size) with its own model, sorted.
    pub fn keys(&self) -> Vec<(String, usize)> {
        let mut k: Vec<_> = self.models.keys().cloned().collect();
        k.sort();
        k
    }

    /// Read micro_comm.csv (docs/csv-schema.md) and fit one model per (collective,
    /// world_size) group ([`CommFit::fit`]: one line or two regimes). Columns used:
    /// `schema_version` (must be 1), `collective`, `world_size`, `bytes` (or, in its
    /// absence, `total_bytes`, divided by `world_size` for all-gather rows), `median_s`. Overlap rows (`iallreduce-overlap`) are fitted
    /// on `t_pure_s` (the collective alone) when that column holds a value, since their
    /// `median_s` includes the overlapped compute.
    pub fn from_micro_comm_csv(path: impl AsRef<Path>) -> Result<CommModels, NetModelError> {
        let t = Table::open(path.as_ref())?;
        let fix =
            "expected micro_comm.csv as written by `gradcomp micro-comm` (docs/csv-schema.md)";
        let c_coll = t.col("collective", fix)?;
        let c_n = t.col("world_size", fix)?;
        let c_bytes = t.opt_col("bytes");
        let c_total = if c_bytes.is_none() {
            Some(t.col("total_bytes", "needs `bytes` or `total_bytes`; expected micro_comm.csv as written by `gradcomp micro-comm` (docs/csv-schema.md)")?)
        } else {
            None
        };
        let c_med = t.col("median_s", fix)?;
        let c_pure = t.opt_col("t_pure_s");
        let mut groups: HashMap<(String, usize), Vec<(f64, f64)>> = HashMap::new();
        for r in &t.rows {
            let coll = r.get(c_coll).trim().to_string();
            let n = r.usize(&t, c_n, "world_size")?;
            let bytes = match c_bytes {
                Some(c) => r.f64(&t, c, "bytes")?,
                None => {
                    let total = r.f64(&t, c_total.unwrap(), "total_bytes")?;
                    if coll.contains("allgather") && n > 0 {
                        total / n as f64
                    } else {
                        total
                    }
                }
            };
            let secs = match c_pure {
                Some(c) if coll.contains("overlap") && !r.get(c).trim().is_empty() => {
                    r.f64(&t, c, "t_pure_s")?
                }
                _ => r.f64(&t, c_med, "median_s")?,
            };
            groups.entry((coll, n)).or_default().push((bytes, secs));
        }
        let mut models = CommModels::new();
        for (key, pts) in groups {
            let (fit, q) = CommFit::fit(
                &pts,
                &format!("{} at world_size {} from {}", key.0, key.1, t.path),
            )?;
            models.models.insert(key, (fit, Some(q)));
        }
        Ok(models)
    }
}

/// Linear model of a compressor's time on a group of `elements` values.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct CompressCost {
    pub per_element_s: f64,
    pub fixed_s: f64,
}

impl CompressCost {
    /// `fixed + per_element * elements`.
    pub fn time_s(&self, elements: usize) -> f64 {
        self.fixed_s + self.per_element_s * elements as f64
    }

    /// Fit from `(elements, seconds)` points (weighted as [`AlphaBeta::fit`]).
    pub fn fit(points: &[(f64, f64)]) -> Result<(CompressCost, FitQuality), NetModelError> {
        let (a, b, q) = fit_linear(points, "compression cost model")?;
        Ok((
            CompressCost {
                per_element_s: b,
                fixed_s: a,
            },
            q,
        ))
    }
}

/// A CSV file read whole, with `schema_version` checked on every row.
struct Table {
    path: String,
    header: Vec<String>,
    rows: Vec<Row>,
}

struct Row {
    line: u64,
    rec: csv::StringRecord,
}

impl Table {
    fn open(path: &Path) -> Result<Table, NetModelError> {
        let p = path.display().to_string();
        let file = std::fs::File::open(path).map_err(|source| NetModelError::Io {
            path: p.clone(),
            source,
        })?;
        let mut rdr = csv::ReaderBuilder::new()
            .has_headers(true)
            .from_reader(file);
        let header: Vec<String> = rdr
            .headers()
            .map_err(|source| NetModelError::Csv {
                path: p.clone(),
                source,
            })?
            .iter()
            .map(|h| h.trim().to_string())
            .collect();
        let mut t = Table {
            path: p.clone(),
            header,
            rows: Vec::new(),
        };
        let c_ver = t.col(
            "schema_version",
            "the file is not a gradcomp CSV, or predates schema versions; regenerate it",
        )?;
        for rec in rdr.records() {
            let rec = rec.map_err(|source| NetModelError::Csv {
                path: p.clone(),
                source,
            })?;
            let line = rec.position().map(|q| q.line()).unwrap_or(0);
            let v = rec.get(c_ver).unwrap_or("").trim();
            if v.parse::<u32>().ok() != Some(SCHEMA_VERSION) {
                return Err(NetModelError::SchemaVersion {
                    path: p,
                    line,
                    found: v.to_string(),
                    expected: SCHEMA_VERSION,
                });
            }
            t.rows.push(Row { line, rec });
        }
        if t.rows.is_empty() {
            return Err(NetModelError::Empty { path: p });
        }
        Ok(t)
    }

    fn opt_col(&self, name: &str) -> Option<usize> {
        self.header.iter().position(|h| h == name)
    }

    fn col(&self, name: &str, fix: &str) -> Result<usize, NetModelError> {
        self.opt_col(name)
            .ok_or_else(|| NetModelError::MissingColumn {
                path: self.path.clone(),
                column: name.to_string(),
                header: self.header.join(","),
                fix: fix.to_string(),
            })
    }
}

impl Row {
    fn get(&self, c: usize) -> &str {
        self.rec.get(c).unwrap_or("")
    }

    fn bad(&self, t: &Table, c: usize, column: &str, expected: &str) -> NetModelError {
        NetModelError::BadValue {
            path: t.path.clone(),
            line: self.line,
            column: column.to_string(),
            value: self.get(c).to_string(),
            expected: expected.to_string(),
        }
    }

    fn f64(&self, t: &Table, c: usize, column: &str) -> Result<f64, NetModelError> {
        match self.get(c).trim().parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
            _ => Err(self.bad(t, c, column, "a finite non-negative number")),
        }
    }

    fn usize(&self, t: &Table, c: usize, column: &str) -> Result<usize, NetModelError> {
        self.get(c)
            .trim()
            .parse::<usize>()
            .map_err(|_| self.bad(t, c, column, "a non-negative integer"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn tmp(name: &str, body: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("gradcomp-netmodel-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, body).unwrap();
        p
    }

    #[test]
    fn fit_recovers_known_parameters() {
        let (alpha, beta) = (25e-6, 1.0 / 10e9);
        let pts: Vec<(f64, f64)> = (0..20)
            .map(|i| {
                let b = (4u64 << i) as f64;
                (b, alpha + beta * b)
            })
            .collect();
        let (ab, q) = AlphaBeta::fit(&pts).unwrap();
        assert!((ab.alpha_s - alpha).abs() / alpha < 1e-9, "{ab:?}");
        assert!((ab.beta_s_per_byte - beta).abs() / beta < 1e-9, "{ab:?}");
        assert!(
            (q.r2 - 1.0).abs() < 1e-9 && q.max_rel_err < 1e-9 && q.n == 20,
            "{q:?}"
        );
        assert!((ab.time_s(1e6) - (alpha + beta * 1e6)).abs() < 1e-15);
    }

    #[test]
    fn fit_with_noise_is_close_and_relative_weighting_keeps_alpha() {
        // +-1 % multiplicative noise (deterministic pattern); sizes from 4 B to 256 MiB.
        let (alpha, beta) = (5e-6, 1.0 / 12.5e9);
        let pts: Vec<(f64, f64)> = (0..27)
            .map(|i| {
                let b = (4u64 << i) as f64;
                let noise = if i % 2 == 0 { 1.01 } else { 0.99 };
                (b, (alpha + beta * b) * noise)
            })
            .collect();
        let (ab, q) = AlphaBeta::fit(&pts).unwrap();
        assert!((ab.alpha_s - alpha).abs() / alpha < 0.05, "{ab:?}");
        assert!((ab.beta_s_per_byte - beta).abs() / beta < 0.05, "{ab:?}");
        assert!(q.r2 > 0.99 && q.max_rel_err < 0.05, "{q:?}");
    }

    #[test]
    fn fit_clamps_negative_coefficients() {
        // Decreasing times: beta would be negative -> beta = 0, alpha = weighted mean.
        let (ab, _) = AlphaBeta::fit(&[(0.0, 2.0), (10.0, 1.0)]).unwrap();
        assert_eq!(ab.beta_s_per_byte, 0.0);
        assert!(ab.alpha_s > 1.0 && ab.alpha_s < 2.0);
        // A line through a negative intercept: alpha = 0 and beta refitted.
        let (ab, _) = AlphaBeta::fit(&[(10.0, 0.5), (20.0, 1.5)]).unwrap();
        assert_eq!(ab.alpha_s, 0.0);
        assert!(ab.beta_s_per_byte > 0.0);
        // All-zero times (nothing to compress) fit to zero.
        let (c, q) = CompressCost::fit(&[(1.0, 0.0), (2.0, 0.0)]).unwrap();
        assert_eq!(c, CompressCost::default());
        assert_eq!(q.r2, 1.0);
    }

    #[test]
    fn fit_rejects_too_few_sizes_and_bad_points() {
        assert!(AlphaBeta::fit(&[]).is_err());
        assert!(AlphaBeta::fit(&[(8.0, 1.0), (8.0, 1.1)]).is_err());
        let e = AlphaBeta::fit(&[(8.0, f64::NAN), (16.0, 1.0)])
            .unwrap_err()
            .to_string();
        assert!(e.contains("finite"), "{e}");
    }

    const COMM_HEADER: &str = "schema_version,run_id,collective,world_size,bytes,total_bytes,elements,iters,warmup,check,median_s,t_pure_s\n";

    #[test]
    fn reads_micro_comm_csv() {
        let mut body = COMM_HEADER.to_string();
        for (coll, n, a, b) in [
            ("allreduce", 2usize, 10e-6, 1e-9),
            ("allgather", 2, 20e-6, 2e-9),
            ("allreduce", 4, 30e-6, 3e-9),
        ] {
            for bytes in [4u64, 4096, 1 << 20] {
                let total = if coll == "allgather" {
                    bytes * n as u64
                } else {
                    bytes
                };
                let t = a + b * bytes as f64;
                body += &format!(
                    "1,20240101-000000,{coll},{n},{bytes},{total},{},10,2,pass,{t},\n",
                    bytes / 4
                );
            }
        }
        // Overlap rows: fitted on t_pure_s, not median_s.
        for bytes in [4u64, 1 << 20] {
            let pure = 1e-6 + 1e-9 * bytes as f64;
            body += &format!(
                "1,20240101-000000,iallreduce-overlap,2,{bytes},{bytes},1,10,2,off,{},{pure}\n",
                5.0 * pure
            );
        }
        let p = tmp("comm-good.csv", &body);
        let m = CommModels::from_micro_comm_csv(&p).unwrap();
        let fit = m.get("allreduce", 4).unwrap();
        assert!(fit.upper.is_none(), "{fit:?}");
        let ab = fit.lower.line;
        assert!(
            (ab.alpha_s - 30e-6).abs() < 1e-12 && (ab.beta_s_per_byte - 3e-9).abs() < 1e-18,
            "{ab:?}"
        );
        let ag = m.get("allgather", 2).unwrap().lower.line;
        assert!(
            (ag.alpha_s - 20e-6).abs() < 1e-12 && (ag.beta_s_per_byte - 2e-9).abs() < 1e-18,
            "{ag:?}"
        );
        let ov = m.get("iallreduce-overlap", 2).unwrap().lower.line;
        assert!((ov.alpha_s - 1e-6).abs() < 1e-12, "{ov:?}");
        assert!(m.get("allreduce", 8).is_none());
        assert!((m.quality("allreduce", 2).unwrap().r2 - 1.0).abs() < 1e-9);
        assert_eq!(m.keys().len(), 4);

        // Without `bytes`, all-gather sizes come from total_bytes / world_size.
        let mut body2 = "schema_version,collective,world_size,total_bytes,median_s\n".to_string();
        for bytes in [4u64, 4096] {
            body2 += &format!(
                "1,allgather,2,{},{}\n",
                bytes * 2,
                20e-6 + 2e-9 * bytes as f64
            );
        }
        let m2 = CommModels::from_micro_comm_csv(tmp("comm-total.csv", &body2)).unwrap();
        let ag2 = m2.get("allgather", 2).unwrap().lower.line;
        assert!((ag2.beta_s_per_byte - 2e-9).abs() < 1e-18, "{ag2:?}");
    }

    /// micro_comm.csv rows of `coll` at world size 2 over 4 B-4 MiB (powers of two), time
    /// `t(bytes)`.
    fn comm_csv(coll: &str, t: impl Fn(f64) -> f64) -> String {
        let mut body = "schema_version,collective,world_size,bytes,median_s\n".to_string();
        for i in 0..21 {
            let b = (4u64 << i) as f64;
            body += &format!("1,{coll},2,{b},{}\n", t(b));
        }
        body
    }

    /// Two regimes as a tbf-shaped link shows them in a micro-comm sweep (docs/performance.md,
    /// "Emulated network"): up to 16 KiB 15 us + 0.2 ns/B (the token bucket passes them
    /// at memory speed), from 32 KiB the link's 8 ns/B (1 Gbit/s) and no startup.
    fn tbf_like(b: f64) -> f64 {
        if b <= 16384.0 {
            15e-6 + 0.2e-9 * b
        } else {
            8e-9 * b
        }
    }

    #[test]
    fn two_regime_data_is_priced_right_in_both_regimes() {
        let p = tmp("comm-two-regimes.csv", &comm_csv("allreduce", tbf_like));
        let m = CommModels::from_micro_comm_csv(&p).unwrap();
        let fit = m.get("allreduce", 2).unwrap();
        for i in 0..21 {
            let b = (4u64 << i) as f64;
            let (got, want) = (fit.time_s(b), tbf_like(b));
            assert!(
                (got - want).abs() / want < 0.02,
                "{b} B: predicted {got:.3e} s, measured {want:.3e} s ({fit:?})"
            );
        }
    }

    #[test]
    fn two_regime_fit_recovers_both_lines_and_the_break() {
        // Exact, and with +-1 % multiplicative noise (deterministic pattern).
        for noise in [0.0, 0.01] {
            let pts: Vec<(f64, f64)> = (0..21)
                .map(|i| {
                    let b = (4u64 << i) as f64;
                    let f = if i % 2 == 0 { 1.0 + noise } else { 1.0 - noise };
                    (b, tbf_like(b) * f)
                })
                .collect();
            let (fit, q) = CommFit::fit(&pts, "test").unwrap();
            let up = fit.upper.expect("two regimes");
            let (lo, ul) = (fit.lower.line, up.line);
            let tol = 2.0 * noise + 1e-9;
            assert!(
                (lo.alpha_s - 15e-6).abs() / 15e-6 < tol + 0.01
                    && (lo.beta_s_per_byte - 0.2e-9).abs() / 0.2e-9 < 0.2,
                "{noise}: {fit:?}"
            );
            assert!(
                (ul.beta_s_per_byte - 8e-9).abs() / 8e-9 < tol
                    && ul.alpha_s.abs() < tol * 8e-9 * 32768.0,
                "{noise}: {fit:?}"
            );
            assert_eq!((fit.lower.to_bytes, up.from_bytes), (16384.0, 32768.0));
            assert_eq!((fit.lower.from_bytes, up.to_bytes), (4.0, 4194304.0));
            let (lq, uq) = (fit.lower.quality.unwrap(), up.quality.unwrap());
            assert_eq!((lq.n, uq.n, q.n), (13, 8, 21));
            assert!(q.max_rel_err < tol + 0.01 && q.r2 > 0.99, "{q:?}");
            // Between the two fitted sizes: linear from one line's end to the other's start.
            let mid = fit.time_s(24576.0);
            let ends = (lo.time_s(16384.0), ul.time_s(32768.0));
            assert!(
                (mid - (ends.0 + ends.1) / 2.0).abs() < 1e-15,
                "{mid} {ends:?}"
            );
            // The line that prices a size: its regime's, or the secant in the gap.
            assert_eq!(fit.local_line(1e6), ul);
            assert_eq!(fit.local_line(100.0), lo);
            assert!((fit.local_line(24576.0).time_s(24576.0) - mid).abs() < 1e-15);
            // Parameters survive a round trip (e.g. a max over ranks).
            let back = CommFit::from_params(fit.to_params());
            assert_eq!((back.lower.line, back.upper.unwrap().line), (lo, ul));
        }
    }

    #[test]
    fn one_regime_data_stays_one_line() {
        // Exact lines (latency-bound, bandwidth-bound, both) and two noisy ones (+-1 %,
        // +-5 %, deterministic pattern): the same line as the single-line fit.
        let cases: [(&str, f64, f64, f64); 5] = [
            ("exact", 25e-6, 1e-10, 0.0),
            ("bandwidth only", 0.0, 8e-9, 0.0),
            ("latency only", 30e-6, 0.0, 0.0),
            ("noise", 5e-6, 0.8e-10, 0.01),
            ("noise 5%", 20e-6, 8e-9, 0.05),
        ];
        for (what, alpha, beta, noise) in cases {
            let pts: Vec<(f64, f64)> = (0..21)
                .map(|i| {
                    let b = (4u64 << i) as f64;
                    let f = if i % 2 == 0 { 1.0 + noise } else { 1.0 - noise };
                    (b, (alpha + beta * b) * f)
                })
                .collect();
            let (fit, _) = CommFit::fit(&pts, "test").unwrap();
            assert!(fit.upper.is_none(), "{what}: {fit:?}");
            let (a, b, _) = fit_linear(&pts, "x").unwrap();
            assert_eq!(fit.lower.line, AlphaBeta::new(a, b), "{what}");
        }
        // Too few sizes for two regimes of three: always one line.
        let pts: Vec<(f64, f64)> = [4.0, 8.0, 16.0, 1e6, 2e6]
            .map(|b| (b, tbf_like(b)))
            .to_vec();
        assert!(CommFit::fit(&pts, "test").unwrap().0.upper.is_none());
    }

    #[test]
    fn micro_comm_csv_errors_are_clear() {
        // Missing column.
        let p = tmp(
            "comm-nocol.csv",
            "schema_version,collective,world_size,bytes\n1,allreduce,2,4\n",
        );
        let e = CommModels::from_micro_comm_csv(&p).unwrap_err().to_string();
        assert!(
            e.contains("comm-nocol.csv")
                && e.contains("`median_s`")
                && e.contains("gradcomp micro-comm"),
            "{e}"
        );
        // Wrong schema version names the file, line and value.
        let p = tmp("comm-v2.csv", "schema_version,collective,world_size,bytes,median_s\n1,allreduce,2,4,1e-5\n2,allreduce,2,8,1e-5\n");
        let e = CommModels::from_micro_comm_csv(&p).unwrap_err();
        assert!(
            matches!(e, NetModelError::SchemaVersion { line: 3, .. }),
            "{e:?}"
        );
        let e = e.to_string();
        assert!(
            e.contains("comm-v2.csv") && e.contains("`2`") && e.contains("version 1"),
            "{e}"
        );
        // No schema_version at all.
        let p = tmp(
            "comm-nover.csv",
            "collective,world_size,bytes,median_s\nallreduce,2,4,1e-5\n",
        );
        let e = CommModels::from_micro_comm_csv(&p).unwrap_err().to_string();
        assert!(e.contains("`schema_version`"), "{e}");
        // Bad value: file, line, column, value.
        let p = tmp(
            "comm-bad.csv",
            "schema_version,collective,world_size,bytes,median_s\n1,allreduce,2,4,fast\n",
        );
        let e = CommModels::from_micro_comm_csv(&p).unwrap_err().to_string();
        assert!(
            e.contains("comm-bad.csv line 2") && e.contains("`median_s`") && e.contains("`fast`"),
            "{e}"
        );
        // One size only: cannot fit, says why.
        let p = tmp(
            "comm-one.csv",
            "schema_version,collective,world_size,bytes,median_s\n1,allreduce,2,4,1e-5\n",
        );
        let e = CommModels::from_micro_comm_csv(&p).unwrap_err().to_string();
        assert!(
            e.contains("allreduce at world_size 2") && e.contains("two distinct"),
            "{e}"
        );
        // Empty and absent files.
        let p = tmp(
            "comm-empty.csv",
            "schema_version,collective,world_size,bytes,median_s\n",
        );
        assert!(matches!(
            CommModels::from_micro_comm_csv(&p),
            Err(NetModelError::Empty { .. })
        ));
        let e = CommModels::from_micro_comm_csv("/nonexistent/micro_comm.csv")
            .unwrap_err()
            .to_string();
        assert!(e.contains("/nonexistent/micro_comm.csv"), "{e}");
    }
}
