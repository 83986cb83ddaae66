//! The device model beside a measurement (`gradcomp devcost`; docs/device.md, "The
//! device model against measurements"): every row of a measured profile priced by a
//! [`DeviceSpec`]'s roofline of the kernels the method lists for that operation
//! ([`crate::compress::Compressor::device_kernels`]), at the parameters the profile
//! records. Nothing is fitted: the model's constants are the preset's.

use super::{param_keys, parse_stage, CompressProfile, ProfileError, Row, COPY};
use crate::compress::{registry, setup, MethodParams, WorkerCtx};
use crate::roofline::{DeviceSpec, Kernel, Stage};

/// One measured operation and the model's price of it.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct PricedRow {
    pub method: String,
    pub stage: &'static str,
    pub round: usize,
    pub phase: usize,
    pub rows: usize,
    pub cols: usize,
    pub world_size: usize,
    pub measured_s: f64,
    pub model_s: f64,
    /// `model_s / measured_s` (infinite when the measurement is 0 and the model is not).
    pub model_over_measured: f64,
    /// Kernel launches the model charges.
    pub launches: usize,
    /// Bytes the model's kernels move.
    pub model_bytes: f64,
    /// The model's kernels, repeats counted: `|x| + radix select pass x4 + ...`.
    pub kernels: String,
    /// The preset that priced it.
    pub device: String,
    /// `gradcomp devcost --interpolate-from REF`: REF's interpolation in elements for
    /// this operation ([`CompressProfile::time_s_by_elements`]; empty where REF has no
    /// such method, stage or world size, or the method is not element-wise).
    pub interpolated_s: Option<f64>,
}

impl CompressProfile {
    /// The method parameters the profile records (`# density: 0.001`, ...), defaults for
    /// the others. A recorded value that is not one of the parameter's type is bad input.
    pub fn params(&self) -> Result<MethodParams, ProfileError> {
        let mut v = serde_json::to_value(MethodParams::default()).unwrap_or_default();
        for (key, _) in param_keys() {
            let Some((_, got, line)) = self.meta.iter().find(|m| m.0 == key) else {
                continue;
            };
            let parsed = match &v[key] {
                serde_json::Value::Bool(_) => got.parse::<bool>().ok().map(Into::into),
                // `density` defaults to each method's own (`null` here).
                serde_json::Value::Null => got
                    .parse::<f64>()
                    .ok()
                    .and_then(serde_json::Number::from_f64)
                    .map(Into::into),
                serde_json::Value::Number(n) if n.is_f64() => got
                    .parse::<f64>()
                    .ok()
                    .and_then(serde_json::Number::from_f64)
                    .map(Into::into),
                _ => got.parse::<u64>().ok().map(Into::into),
            };
            let Some(p) = parsed else {
                return Err(ProfileError::Param {
                    at: self.at(*line),
                    msg: format!("'# {key}: {got}' is not a value of {key}; write it as the script does (e.g. '# {key}: {}')", v[key]),
                });
            };
            v[key] = p;
        }
        serde_json::from_value(v).map_err(|e| ProfileError::Param {
            at: self.at(0),
            msg: format!("the recorded method parameters do not fit together: {e}"),
        })
    }

    /// Every row priced by `spec` (module doc). Copy rows: one copy kernel of the row's
    /// fp32 elements.
    pub fn priced(&self, spec: &DeviceSpec) -> Result<Vec<PricedRow>, ProfileError> {
        let params = self.params()?;
        let _untouched = setup::untouched_registration();
        let mut out = Vec::new();
        for row in self.rows() {
            let mut list = Vec::new();
            if row.method == COPY {
                list.push(Kernel::copy("copy", 4.0 * row.cols as f64));
            } else {
                let ctx = WorkerCtx {
                    rank: 0,
                    world_size: row.world_size,
                    seed: 1,
                };
                let fail = |e: String| ProfileError::Param {
                    at: self.at(0),
                    msg: format!(
                        "{} on a {}x{} tensor at {} workers: {e}",
                        row.method, row.rows, row.cols, row.world_size
                    ),
                };
                let mut c =
                    registry::build(&row.method, &params, ctx).map_err(|e| fail(e.to_string()))?;
                c.register(0, row.rows, row.cols)
                    .map_err(|e| fail(e.to_string()))?;
                c.begin_step(0);
                let stage = row.stage.unwrap_or(Stage::Compress);
                c.device_kernels(0, row.round, row.phase, stage, &mut |k| {
                    if spec.launches(&k) {
                        list.push(k)
                    }
                });
            }
            out.push(price(&row, spec, &list));
        }
        Ok(out)
    }
}

fn price(row: &Row, spec: &DeviceSpec, list: &[Kernel]) -> PricedRow {
    let model_s: f64 = list.iter().map(|k| spec.kernel_s(k)).sum();
    PricedRow {
        method: row.method.clone(),
        stage: row.stage.map_or(COPY, Stage::name),
        round: row.round,
        phase: row.phase,
        rows: row.rows,
        cols: row.cols,
        world_size: row.world_size,
        measured_s: row.time_s,
        model_s,
        model_over_measured: if row.time_s > 0.0 {
            model_s / row.time_s
        } else if model_s > 0.0 {
            f64::INFINITY
        } else {
            1.0
        },
        launches: list.len(),
        model_bytes: list.iter().map(|k| k.bytes).sum(),
        kernels: kernel_names(list),
        device: spec.name.clone(),
        interpolated_s: None,
    }
}

/// Fill [`PricedRow::interpolated_s`] of `rows` from `reference`.
pub fn interpolate_from(rows: &mut [PricedRow], reference: &CompressProfile) {
    for r in rows.iter_mut() {
        let Some(stage) = parse_stage(r.stage) else {
            continue;
        };
        r.interpolated_s = reference.time_s_by_elements(
            &r.method,
            stage,
            r.round,
            r.phase,
            r.rows * r.cols,
            r.world_size,
        );
    }
}

/// The kernels in launch order with repeats counted: a run of one kernel as `a x3`, a
/// repeated group as `(a + b) x8` (the per-worker loops).
fn kernel_names(list: &[Kernel]) -> String {
    let names: Vec<&str> = list.iter().map(|k| k.name).collect();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < names.len() {
        // The group length p (up to 8 kernels) whose consecutive repeats cover the most.
        let (mut best_p, mut best_c) = (1, 1);
        for p in 1..=8.min(names.len() - i) {
            let mut c = 1;
            while i + (c + 1) * p <= names.len()
                && names[i + c * p..i + (c + 1) * p] == names[i..i + p]
            {
                c += 1;
            }
            if c > 1 && p * c > best_p * best_c {
                (best_p, best_c) = (p, c);
            }
        }
        let group = names[i..i + best_p].join(" + ");
        parts.push(match (best_p, best_c) {
            (_, 1) => group,
            (1, c) => format!("{group} x{c}"),
            (_, c) => format!("({group}) x{c}"),
        });
        i += best_p * best_c;
    }
    parts.join(" + ")
}

/// Per method and stage (copy rows as `copy`): rows, median measured and model time, and
/// the median, smallest and largest `model_over_measured`, as a fixed-width table.
pub fn summary(rows: &[PricedRow]) -> String {
    let mut groups: Vec<((String, &'static str), Vec<&PricedRow>)> = Vec::new();
    for r in rows {
        let key = (r.method.clone(), r.stage);
        match groups.iter_mut().find(|g| g.0 == key) {
            Some(g) => g.1.push(r),
            None => groups.push((key, vec![r])),
        }
    }
    let mut s = format!(
        "{:<11} {:<10} {:>5} {:>12} {:>12} {:>8} {:>8} {:>8}\n",
        "method", "stage", "rows", "measured_us", "model_us", "ratio", "min", "max"
    );
    let device = rows.first().map_or("", |r| r.device.as_str());
    for ((method, stage), g) in &groups {
        let med = |f: &dyn Fn(&PricedRow) -> f64| {
            crate::measure::stats::median(&mut g.iter().map(|r| f(r)).collect::<Vec<f64>>())
                .unwrap_or(f64::NAN)
        };
        let ratios: Vec<f64> = g.iter().map(|r| r.model_over_measured).collect();
        let lo = ratios.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        s.push_str(&format!(
            "{method:<11} {stage:<10} {:>5} {:>12.1} {:>12.1} {:>8.3} {lo:>8.3} {hi:>8.3}\n",
            g.len(),
            med(&|r| r.measured_s) * 1e6,
            med(&|r| r.model_s) * 1e6,
            med(&|r| r.model_over_measured),
        ));
    }
    s.push_str(&format!(
        "ratio = model_s / measured_s per row (median, min, max over the rows); model: {device}\n"
    ));
    s
}
