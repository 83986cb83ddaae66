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
    let w = |y: f64| 1.0 / y.max(TIME_FLOOR_S).powi(2);
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
    let (mut ss_res, mut ss_tot, mut max_rel) = (0.0, 0.0, 0.0f64);
    for &(x, y) in points {
        let pred = a + b * x;
        ss_res += w(y) * (pred - y).powi(2);
        ss_tot += w(y) * (y - ym).powi(2);
        max_rel = max_rel.max((pred - y).abs() / y.max(TIME_FLOOR_S));
    }
    let r2 = if ss_tot > 0.0 {
        1.0 - ss_res / ss_tot
    } else if ss_res <= 1e-24 {
        1.0
    } else {
        0.0
    };
    Ok((
        a,
        b,
        FitQuality {
            r2,
            max_rel_err: max_rel,
            n,
        },
    ))
}

/// Alpha-beta models per (collective, world size), e.g. `("allreduce", 8)`. Sizes are
/// **bytes per rank** (micro_comm.csv's `bytes`: the vector all-reduced, or each rank's
/// all-gather contribution).
#[derive(Clone, Debug, Default)]
pub struct CommModels {
    models: HashMap<(String, usize), (AlphaBeta, Option<FitQuality>)>,
}

impl CommModels {
    /// No models.
    pub fn new() -> CommModels {
        CommModels::default()
    }

    /// Set (or replace) the model of one collective at one world size.
    pub fn insert(&mut self, collective: &str, world_size: usize, model: AlphaBeta) {
        self.models
            .insert((collective.to_string(), world_size), (model, None));
    }

    /// The model of `collective` at `world_size`, if there is one.
    pub fn get(&self, collective: &str, world_size: usize) -> Option<&AlphaBeta> {
        self.models
            .get(&(collective.to_string(), world_size))
            .map(|m| &m.0)
    }

    /// Fit quality of a model read from CSV (`None` for given models).
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
    /// world_size) group. Columns used: `schema_version` (must be 1), `collective`,
    /// `world_size`, `bytes` (or, in its absence, `total_bytes`, divided by `world_size`
    /// for all-gather rows), `median_s`. Overlap rows (`iallreduce-overlap`) are fitted
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
            let (ab, q) = fit_linear(
                &pts,
                &format!("{} at world_size {} from {}", key.0, key.1, t.path),
            )
            .map(|(a, b, q)| (AlphaBeta::new(a, b), q))?;
            models.models.insert(key, (ab, Some(q)));
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
        let ab = m.get("allreduce", 4).unwrap();
        assert!(
            (ab.alpha_s - 30e-6).abs() < 1e-12 && (ab.beta_s_per_byte - 3e-9).abs() < 1e-18,
            "{ab:?}"
        );
        let ag = m.get("allgather", 2).unwrap();
        assert!(
            (ag.alpha_s - 20e-6).abs() < 1e-12 && (ag.beta_s_per_byte - 2e-9).abs() < 1e-18,
            "{ag:?}"
        );
        let ov = m.get("iallreduce-overlap", 2).unwrap();
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
        assert!((m2.get("allgather", 2).unwrap().beta_s_per_byte - 2e-9).abs() < 1e-18);
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
