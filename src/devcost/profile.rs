//! Measured device compression costs (`--compress-profile FILE.csv`; docs/device.md,
//! "Measured device compression costs"; format in docs/csv-schema.md, "Compress
//! profile"): per method, stage, round, phase and tensor shape, the time the method's
//! GPU implementation took on a real device, as `analysis/profile_compress.py` measures
//! it. Where a profile has a row, it replaces the roofline time of the method's kernels
//! ([`super::DeviceSpec::kernel_s`]) for that stage of that tensor.
//!
//! # Format
//! Plain comma-separated text, no quoting. Blank lines are ignored. A line starting with
//! `#` is a comment; a comment `# key: value` is provenance (device, torch version, date,
//! the method parameters the times were taken at: `density`, `rank`, ... under their
//! [`crate::compress::MethodParams`] names), other comments are free text. The first
//! other line is the header, [`HEADER`] (its columns in any order); then one row per
//! measurement:
//!
//! | column | meaning |
//! |---|---|
//! | `method` | a method of [`crate::compress::registry::METHODS`], or `copy` |
//! | `stage` | `compress` (compression of one round, error feedback included) or `decompress` (every worker's piece of one round into the update) as [`Stage::name`]; `copy` on `copy` rows |
//! | `round`, `phase` | the round of the step and the phase of the step cycle, from 0 (Power-SGD: rounds 0 and 1; ACP-SGD: phases 0 (P) and 1 (Q)); 0 on `copy` rows |
//! | `rows`, `cols` | the tensor's matrix view as gradcomp registers it ([`crate::models::Tensor::rows_cols`], `gradcomp models NAME`); `copy` rows: `1` and the number of fp32 elements copied |
//! | `world_size` | the number of workers whose pieces a decompress read |
//! | `time_s` | median seconds, `>= 0` |
//!
//! **World size.** Only the decompress of an all-gather method (`signsgd`, `signsgd-mv`,
//! `topk`, `dgc`, `qsgd`) reads one piece per worker, so only its time depends on the
//! world size ([`world_size_matters`]). Its lookup needs a row at exactly the run's world
//! size: a run at a world size the profile lacks fails [`CompressProfile::check`] (no
//! extrapolation; re-run the script with `--world-size N`). Every other time is taken
//! from the row at the run's world size, or else from the row at the nearest world size
//! (ties: the smaller), since it measures the same work.
//!
//! **Copies.** `copy` rows time a device-to-device copy of `cols` fp32 elements at
//! several sizes; [`CompressProfile::copy_spec`] fits a launch latency and a bandwidth to
//! them (relative least squares of `launch_s + 8·cols / bandwidth`) for the copies that
//! are no method's (packing buckets, splitting received wires).
//!
//! Every error names the file, the line (1-based, as an editor numbers it), the column,
//! the value and the fix; every [`ProfileError`] is bad input (exit code 2). The
//! binary only reads profiles (analysis/profile_compress.py writes them).
//!
//! Files: this one holds the format's constants, [`Row`], the profile and its lookups,
//! the copy fit and writing; `read.rs` reads and validates text and rows, `check.rs`
//! checks a profile against a run, `price.rs` prices its rows with a device model,
//! `error.rs` holds [`ProfileError`].

use std::collections::{BTreeMap, HashMap};

use super::{DeviceSpec, Stage};
use crate::compress::{registry, Aggregation};

mod check;
mod error;
mod price;
mod read;

pub use error::{Loc, ProfileError};
pub use price::{interpolate_from, summary, PricedRow};

/// The header `analysis/profile_compress.py` writes (columns may come in any order).
pub const HEADER: &str = "method,stage,round,phase,rows,cols,world_size,time_s";
/// The method and stage name of copy rows.
pub const COPY: &str = "copy";
/// The script that writes profiles (named in every fix).
pub const SCRIPT: &str = "analysis/profile_compress.py";

const COLUMNS: [&str; 8] = [
    "method",
    "stage",
    "round",
    "phase",
    "rows",
    "cols",
    "world_size",
    "time_s",
];

/// Method parameters a profile's times depend on ([`crate::compress::spec::ParamSpec::sets_cost`]),
/// with the methods that read them ([`registry::readers`]), in `MethodParams` field
/// order: [`CompressProfile::check_params`] compares them with the run's.
fn param_keys() -> Vec<(&'static str, Vec<&'static str>)> {
    crate::compress::params::PARAMS
        .iter()
        .filter(|p| p.sets_cost)
        .map(|p| (p.key, registry::readers(p.key)))
        .collect()
}

/// One measurement.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// A registry method name, or [`COPY`].
    pub method: String,
    /// `None` on copy rows.
    pub stage: Option<Stage>,
    pub round: usize,
    pub phase: usize,
    pub rows: usize,
    pub cols: usize,
    pub world_size: usize,
    pub time_s: f64,
}

/// `(stage, round, phase, rows, cols)`; stage 0 = compress, 1 = decompress.
type OpKey = (u8, usize, usize, usize, usize);

fn stage_code(s: Stage) -> u8 {
    match s {
        Stage::Compress => 0,
        Stage::Decompress => 1,
    }
}

fn stage_of(code: u8) -> Stage {
    if code == 0 {
        Stage::Compress
    } else {
        Stage::Decompress
    }
}

fn parse_stage(s: &str) -> Option<Stage> {
    match s {
        "compress" => Some(Stage::Compress),
        "decompress" => Some(Stage::Decompress),
        _ => None,
    }
}

/// Rounds, phases and aggregation of a registry method (its spec).
fn method_info(name: &str) -> Option<(usize, usize, Aggregation)> {
    let s = registry::spec(name).ok()?;
    Some((s.rounds, s.phases, s.aggregation))
}

/// Whether the time of `stage` of `method` depends on the world size: only the
/// decompress of an all-gather method (it reads one piece per worker).
pub fn world_size_matters(method: &str, stage: Stage) -> bool {
    stage == Stage::Decompress
        && matches!(method_info(method), Some((_, _, Aggregation::AllGather)))
}

/// Whether `method`'s device time depends on the element count alone (its kernels view
/// the tensor flat): every method but the low-rank ones, whose GEMMs and orthogonalisation
/// depend on rows and columns, and DGC, which sends 1-D tensors dense (other kernels).
pub fn by_elements(method: &str) -> bool {
    registry::spec(method).map_or(true, |s| s.by_elements)
}

/// A measured compression profile (see the module doc for the format).
#[derive(Clone, Debug, Default)]
pub struct CompressProfile {
    path: String,
    /// `# key: value` comments in file order, with their lines (0 when set in code).
    meta: Vec<(String, String, usize)>,
    /// method -> operation -> world size -> seconds.
    times: BTreeMap<String, BTreeMap<OpKey, BTreeMap<usize, f64>>>,
    /// (elements, world size) -> seconds.
    copies: BTreeMap<(usize, usize), f64>,
    /// Line of each row read from a file (for duplicate errors).
    lines: HashMap<String, usize>,
}

impl CompressProfile {
    /// An empty profile; `path` names it in errors.
    pub fn new(path: impl Into<String>) -> CompressProfile {
        CompressProfile {
            path: path.into(),
            ..CompressProfile::default()
        }
    }

    fn at(&self, line: usize) -> Loc {
        Loc {
            path: self.path.clone(),
            line,
        }
    }

    /// Set a `# key: value` comment (replaces an earlier value of `key`).
    pub fn set_meta(&mut self, key: &str, value: &str) {
        self.meta.retain(|m| m.0 != key);
        self.meta.push((key.to_string(), value.to_string(), 0));
    }

    /// The value of comment `# key: value` (the first, when repeated).
    pub fn meta(&self, key: &str) -> Option<&str> {
        self.meta.iter().find(|m| m.0 == key).map(|m| m.1.as_str())
    }

    /// The file the profile was read from (or the name given to [`CompressProfile::new`]).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// For run metadata: `compress profile FILE (device NAME)`.
    pub fn describe(&self) -> String {
        match self.meta("device") {
            Some(d) => format!(
                "compress profile {} (device {d}; shapes it lacks interpolated in elements)",
                self.path
            ),
            None => format!(
                "compress profile {} (shapes it lacks interpolated in elements)",
                self.path
            ),
        }
    }

    /// The methods with rows (registry order).
    pub fn methods(&self) -> Vec<&str> {
        registry::METHODS
            .iter()
            .copied()
            .filter(|m| self.times.contains_key(*m))
            .collect()
    }

    /// The world sizes of `method`'s rows, ascending.
    pub fn world_sizes(&self, method: &str) -> Vec<usize> {
        let mut v: Vec<usize> = self
            .times
            .get(method)
            .into_iter()
            .flat_map(|ops| ops.values().flat_map(|w| w.keys().copied()))
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Every row: method rows in registry order, then copy rows.
    pub fn rows(&self) -> Vec<Row> {
        let mut out = Vec::new();
        for m in registry::METHODS {
            let Some(ops) = self.times.get(*m) else {
                continue;
            };
            for (&(stage, round, phase, rows, cols), ws) in ops {
                for (&world_size, &time_s) in ws {
                    out.push(Row {
                        method: m.to_string(),
                        stage: Some(stage_of(stage)),
                        round,
                        phase,
                        rows,
                        cols,
                        world_size,
                        time_s,
                    });
                }
            }
        }
        for (&(cols, world_size), &time_s) in &self.copies {
            out.push(Row {
                method: COPY.to_string(),
                stage: None,
                round: 0,
                phase: 0,
                rows: 1,
                cols,
                world_size,
                time_s,
            });
        }
        out
    }

    /// The measured seconds of `stage` of `method`'s `round` in steps of `phase` for a
    /// `rows x cols` tensor at `world_size` workers; `None` when the profile has no such
    /// row. At a world size the profile lacks, the row at the nearest world size (ties:
    /// the smaller) unless [`world_size_matters`] (an all-gather method's decompress).
    #[allow(clippy::too_many_arguments)]
    pub fn time_s(
        &self,
        method: &str,
        stage: Stage,
        round: usize,
        phase: usize,
        rows: usize,
        cols: usize,
        world_size: usize,
    ) -> Option<f64> {
        let ws = self
            .times
            .get(method)?
            .get(&(stage_code(stage), round, phase, rows, cols))?;
        if let Some(&t) = ws.get(&world_size) {
            return Some(t);
        }
        if world_size_matters(method, stage) {
            return None;
        }
        ws.iter()
            .min_by_key(|(&w, _)| (w.abs_diff(world_size), w))
            .map(|(_, &t)| t)
    }

    /// The time of an operation on a shape the profile lacks, from the method's measured
    /// shapes, for methods whose device time depends on the element count alone
    /// ([`by_elements`]: every kernel views the tensor flat; not Power-SGD or ACP-SGD,
    /// whose GEMMs and QR depend on rows and columns): the merged buckets of OMGS and
    /// Sketch-Fusion, which no model listing holds. Between two measured element counts,
    /// linear in log time over log elements; below the smallest, its time (launch
    /// bound); above the largest, its time scaled by the element ratio (memory bound).
    /// Several shapes of one element count: their median. `None` when the method has no
    /// rows at this world size ([`CompressProfile::time_s`]'s rule) or is not element-wise.
    #[allow(clippy::too_many_arguments)]
    pub fn time_s_by_elements(
        &self,
        method: &str,
        stage: Stage,
        round: usize,
        phase: usize,
        elements: usize,
        world_size: usize,
    ) -> Option<f64> {
        if !by_elements(method) {
            return None;
        }
        let code = stage_code(stage);
        // Measured times by element count, ascending.
        let mut by_numel: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
        for k in self.times.get(method)?.keys() {
            if (k.0, k.1, k.2) != (code, round, phase) {
                continue;
            }
            if let Some(t) = self.time_s(method, stage, round, phase, k.3, k.4, world_size) {
                by_numel.entry(k.3 * k.4).or_default().push(t);
            }
        }
        let by_d: Vec<(f64, f64)> = by_numel
            .into_iter()
            .filter_map(|(d, mut ts)| crate::measure::stats::median(&mut ts).map(|t| (d as f64, t)))
            .collect();
        let d = elements as f64;
        let (first, last) = (*by_d.first()?, *by_d.last()?);
        if d <= first.0 {
            return Some(first.1);
        }
        if d >= last.0 {
            return Some(last.1 * d / last.0);
        }
        let k = by_d.iter().position(|p| p.0 >= d)?;
        let ((d0, t0), (d1, t1)) = (by_d[k - 1], by_d[k]);
        if t0 <= 0.0 || t1 <= 0.0 {
            return Some(t0 + (t1 - t0) * (d - d0) / (d1 - d0));
        }
        let w = (d / d0).ln() / (d1 / d0).ln();
        Some((t0.ln() + w * (t1 / t0).ln()).exp())
    }

    /// `(launch_s, bytes_per_s)` fitted to the copy rows, `None` without copy rows.
    fn fit_copies(&self) -> Result<Option<(f64, f64)>, ProfileError> {
        if self.copies.is_empty() {
            return Ok(None);
        }
        let err = |msg: String| ProfileError::CopyFit {
            at: self.at(0),
            msg,
        };
        let pts: Vec<(f64, f64)> = self
            .copies
            .iter()
            .map(|(&(n, _), &t)| (n as f64, t))
            .collect();
        let mut sizes: Vec<usize> = self.copies.keys().map(|k| k.0).collect();
        sizes.dedup();
        if sizes.len() < 2 {
            return Err(err(format!(
                "one size only ({} elements); a launch latency and a bandwidth need two or more",
                sizes[0]
            )));
        }
        // Relative least squares of t = a + b n: weights 1/t^2.
        let (mut s, mut sx, mut sxx, mut st, mut sxt) = (0.0, 0.0, 0.0, 0.0, 0.0);
        for &(x, t) in &pts {
            let w = 1.0 / t.max(1e-12).powi(2);
            s += w;
            sx += w * x;
            sxx += w * x * x;
            st += w * t;
            sxt += w * x * t;
        }
        let det = s * sxx - sx * sx;
        let (mut a, mut b) = ((sxx * st - sx * sxt) / det, (s * sxt - sx * st) / det);
        if a.is_nan() || a < 0.0 {
            a = 0.0;
            b = sxt / sxx;
        }
        if b <= 0.0 || !b.is_finite() {
            return Err(err(format!(
                "their times do not grow with the size (fitted {b:e} s per element)"
            )));
        }
        // A copy of n fp32 elements reads and writes 4n bytes: 8n / bandwidth.
        Ok(Some((a, 8.0 / b)))
    }

    /// Launch latency and bandwidth fitted to the copy rows, as a [`DeviceSpec`] for
    /// [`DeviceSpec::copy_s`] and [`DeviceSpec::reduce_s_per_byte`]; `None` without copy
    /// rows. A profile measures no FLOP rate: `flops_per_s` is infinite, so only
    /// memory-bound kernels are priced by it.
    pub fn copy_spec(&self) -> Option<DeviceSpec> {
        let (launch_s, mem_bytes_per_s) = self.fit_copies().ok().flatten()?;
        Some(DeviceSpec {
            name: self.describe(),
            launch_s,
            mem_bytes_per_s,
            flops_per_s: f64::INFINITY,
            readings: Vec::new(),
        })
    }

    /// The profile as text: comments, [`HEADER`], the rows of [`CompressProfile::rows`]
    /// (times in Rust's shortest round-trip notation).
    pub fn to_csv(&self) -> String {
        let mut s = String::new();
        for (k, v, _) in &self.meta {
            s.push_str(&format!("# {k}: {v}\n"));
        }
        s.push_str(HEADER);
        s.push('\n');
        for r in self.rows() {
            s.push_str(&format!(
                "{},{},{},{},{},{},{},{:e}\n",
                r.method,
                r.stage.map(Stage::name).unwrap_or(COPY),
                r.round,
                r.phase,
                r.rows,
                r.cols,
                r.world_size,
                r.time_s
            ));
        }
        s
    }
}

#[cfg(test)]
mod tests;
