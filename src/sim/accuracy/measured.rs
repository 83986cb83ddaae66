//! Measured e2e.csv rows as simulator cases, and the measured-vs-simulated comparison
//! of `gradcomp simulate --compare` (docs/performance.md, "Simulator accuracy").

use super::{simulate_with, CostModel, Result, SimCase, SimError, SimRow, SimWorkload, WireCache};
use crate::comm::exchange::CollectiveMode;
use crate::compress::MethodParams;
use crate::schedule::plan::Fusion;
use std::collections::HashMap;

/// Measured vs simulated `iter_s` of one case.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    pub key: String,
    pub method: String,
    pub world_size: usize,
    pub measured_s: f64,
    pub simulated_s: f64,
    /// `(simulated - measured) / measured`.
    pub rel_err: f64,
    /// The case ran with `compute = none` (never a host calibration row).
    pub compute_none: bool,
    /// Rows (repeats) of the case, and their run-to-run spread, the width of the
    /// median's order-statistic interval over the median of `iter_s`, `(hi - lo) /
    /// median` ([`crate::measure::stats::median_interval`]: of 2-4 rounds the range, of 5
    /// the second to fourth smallest; `None` with one row). The range of five would
    /// judge the worst round, not the median: one stalled round of five gave ranges of
    /// 100-530% of the median while the median moved under 2% (issue 29).
    pub rounds: usize,
    pub spread_rel: Option<f64>,
    /// Host compression cases: the simulated host compression and decompression time
    /// over the simulated iteration (how much of the prediction the compression fit
    /// decides); 0 on device cases.
    pub host_compress_share: f64,
}

/// The share of a simulated iteration of `iter_s` that host compression and
/// decompression take (at most 1; 0 for an empty iteration).
pub fn host_compress_share(compress_s: f64, decompress_s: f64, iter_s: f64) -> f64 {
    if iter_s > 0.0 {
        ((compress_s + decompress_s) / iter_s).min(1.0)
    } else {
        0.0
    }
}

/// The noise a case's verdict is judged against: its own spread over rounds plus its
/// compression fit's (`fit_spread`: how far the fit's spread moves the prediction), either
/// alone where the other is unknown, and at least `jitter`, how far the run's
/// [`host_jitter`] moves it: a case's rounds and its fit's can each land in one speed of
/// a machine whose host speed changes, so their own spreads miss what moves their medians
/// between runs. (Both movements: [`host_cost_sensitivity`].)
pub fn case_noise(
    spread: Option<f64>,
    fit_spread: Option<f64>,
    jitter: Option<f64>,
) -> Option<f64> {
    let own = match (spread, fit_spread) {
        (Some(a), Some(b)) => Some(a + b),
        (a, b) => a.or(b),
    };
    match (own, jitter) {
        (Some(a), Some(j)) => Some(a.max(j)),
        (a, j) => a.or(j),
    }
}

/// How far `case`'s simulated iteration (`base_s`, at `costs`) moves, relative to it,
/// when its method's host compression costs move by `rel` of their value, centred:
/// `(T(1 + rel/2) - T(1 - rel/2)) / base_s`. Compression on the iteration's critical
/// path moves it by its share of the iteration times `rel`; compression hidden under
/// backward (pipelining) moves it less, or not at all (issue 29: the share alone judged
/// pipelined cases against noise their prediction does not carry). `costs` is restored.
pub fn host_cost_sensitivity(
    case: &SimCase,
    costs: &mut CostModel,
    wires: &mut WireCache,
    rel: f64,
    base_s: f64,
) -> Result<f64> {
    if base_s <= 0.0 || rel <= 0.0 {
        return Ok(0.0);
    }
    let key = case.base_method.clone();
    let own = costs.methods.get(&key).copied();
    let at = costs.method(&key);
    let mut iter_at = |f: f64| {
        costs.methods.insert(key.clone(), at.scaled(f));
        simulate_with(case, costs, wires).map(|r| r.iter_s)
    };
    let moved = iter_at(1.0 + rel / 2.0).and_then(|hi| Ok(hi - iter_at(1.0 - rel / 2.0)?));
    match own {
        Some(c) => costs.methods.insert(key, c),
        None => costs.methods.remove(&key),
    };
    Ok((moved? / base_s).max(0.0))
}

/// Fewest host-compression rows (over all cases with two or more rounds) that
/// [`host_jitter`] reads a run's host speed from.
pub const JITTER_MIN_ROWS: usize = 10;

/// The run's host jitter (issue 29): how much the host's speed at compression moved
/// over the run, read from its repeated host-compression e2e rows `(case key, host_s)`:
/// each row's host compression time over its case's median, pooled over every case with
/// two or more rounds, and the width between the pooled 10th and 90th percentiles
/// (linear interpolation, [`crate::measure::stats::quantile_sorted`]): the central 80%
/// of the speeds the run's host compression ran at. `None` with fewer than
/// [`JITTER_MIN_ROWS`] such rows.
///
/// Why: on a shared virtual machine the host's speed can switch between two levels for
/// seconds at a time (docs/performance.md, "Simulator accuracy": a 2-vCPU EPYC guest ran
/// qsgd's compression of ResNet-20 at 1.6 or 2.3 ms, alone or not). One case's round
/// lasts well under a second, so each round sits in one level and the median of a
/// handful of rounds takes whichever level most of them hit; the run's pooled rows show
/// both levels where one case's rounds may not.
pub fn host_jitter<'a>(rows: impl IntoIterator<Item = (&'a str, f64)>) -> Option<f64> {
    let mut by_case: HashMap<&str, Vec<f64>> = HashMap::new();
    for (key, h) in rows {
        by_case.entry(key).or_default().push(h);
    }
    let mut ratios = Vec::new();
    for v in by_case.values_mut().filter(|v| v.len() > 1) {
        let Some(med) = crate::measure::stats::median(v).filter(|m| *m > 0.0) else {
            continue;
        };
        ratios.extend(v.iter().map(|h| h / med));
    }
    if ratios.len() < JITTER_MIN_ROWS {
        return None;
    }
    ratios.sort_by(f64::total_cmp);
    let q = |p: f64| crate::measure::stats::quantile_sorted(&ratios, p);
    Some(q(0.9) - q(0.1))
}

/// The method parameters of one CSV row (e2e.csv, micro_compress.csv; docs/csv-schema.md)
/// read from its columns by `col(name)`: a column the file lacks or leaves empty keeps
/// the default. `Err((column, value))` for a value that does not parse.
pub(in crate::sim) fn row_params(
    col: impl Fn(&str) -> Option<String>,
) -> std::result::Result<MethodParams, (&'static str, String)> {
    let mut params = MethodParams::default();
    let num = |name: &str| col(name).filter(|v| !v.is_empty());
    macro_rules! param {
        ($field:ident, $col:expr) => {
            if let Some(v) = num($col) {
                params.$field = v.parse().map_err(|_| ($col, v.clone()))?;
            }
        };
    }
    if let Some(v) = num("density") {
        params.density = Some(v.parse().map_err(|_| ("density", v.clone()))?);
    }
    param!(rank, "rank");
    if let Some(v) = num("min_compression_rate") {
        params.min_compression_rate =
            Some(v.parse().map_err(|_| ("min_compression_rate", v.clone()))?);
    }
    param!(start_iter, "start_iter");
    param!(momentum, "momentum");
    param!(nesterov, "nesterov");
    param!(clip_norm, "clip_norm");
    param!(warmup_steps_per_epoch, "warmup_steps_per_epoch");
    param!(sketch_rows, "sketch_rows");
    param!(sketch_cols_per_k, "sketch_cols_per_k");
    param!(qsgd_levels, "qsgd_levels");
    Ok(params)
}

/// Pair each measured case (all repeats of one e2e.csv case, [`measured_cases`]) with
/// its simulated row (`sim[i]` simulates `measured[i].case`); of the repeats the median
/// `iter_s` counts (a slow spell of a shared machine does not move it). Sorted by label.
pub fn compare(measured: &[MeasuredCase], sim: &[SimRow]) -> Result<Vec<Comparison>> {
    if measured.len() != sim.len() {
        return Err(SimError::Input(format!(
            "{} measured cases but {} simulated rows to compare",
            measured.len(),
            sim.len()
        )));
    }
    let mut out: Vec<Comparison> = measured
        .iter()
        .zip(sim)
        .filter_map(|(m, s)| {
            let mut v: Vec<f64> = m.rows.iter().map(|r| r.iter_s).collect();
            let spread_rel = crate::measure::stats::spread_about_median(&mut v);
            crate::measure::stats::median(&mut v).map(|meas| Comparison {
                key: m.label.clone(),
                method: s.method.clone(),
                world_size: s.world_size,
                measured_s: meas,
                simulated_s: s.iter_s,
                rel_err: (s.iter_s - meas) / meas,
                compute_none: m.rows.iter().any(|r| r.compute_none),
                rounds: m.rows.len(),
                spread_rel,
                host_compress_share: if s.compress_on == "host" {
                    host_compress_share(s.host_compress_s, s.host_decompress_s, s.iter_s)
                } else {
                    0.0
                },
            })
        })
        .collect();
    out.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(out)
}

/// One case of a measured e2e.csv: every non-measurement column equal (method
/// parameters, compute mode and device included), with all its rows (repeat runs).
#[derive(Clone, Debug)]
pub struct MeasuredCase {
    pub case: SimCase,
    /// `model/method/fusion/pipelining/collective/n/batch`, plus `/column=value` for the
    /// columns that tell it apart from other cases with that prefix.
    pub label: String,
    pub rows: Vec<MeasuredRow>,
    /// The device cost preset of a `compress_on = device` case.
    pub compress_device: Option<String>,
}

/// The cases of a measured e2e.csv as simulator cases (same model, method, parameters,
/// fusion, pipelining, collective, world size, batch and device preset), in first-seen
/// order, each with its rows, for the accuracy comparison. Rows with a measured compute
/// profile (`device = profile`) are skipped (their backward times are not in the CSV);
/// `compute = none` rows get zero compute.
pub fn measured_cases(path: &std::path::Path) -> Result<Vec<MeasuredCase>> {
    let mut out: Vec<(MeasuredCase, Vec<(String, String)>)> = Vec::new();
    let mut index: HashMap<Vec<(String, String)>, usize> = HashMap::new();
    for (case, m, key) in e2e_rows(path)? {
        match index.get(&key) {
            Some(&i) => out[i].0.rows.push(m),
            None => {
                index.insert(key.clone(), out.len());
                let v = |name: &str| {
                    key.iter()
                        .find(|(k, _)| k == name)
                        .map_or("", |(_, v)| v.as_str())
                };
                let label = format!(
                    "{}/{}/{}/pipelining={}/{}/n={}/batch={}",
                    v("model"),
                    v("method"),
                    v("fusion"),
                    v("pipelining"),
                    v("collective"),
                    v("world_size"),
                    v("batch")
                );
                let dev = v("compress_device");
                out.push((
                    MeasuredCase {
                        case,
                        label,
                        rows: vec![m],
                        compress_device: (!dev.is_empty()).then(|| dev.to_string()),
                    },
                    key,
                ));
            }
        }
    }
    // Cases sharing a label: append the columns whose values differ among them.
    let mut by_label: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, (m, _)) in out.iter().enumerate() {
        by_label.entry(m.label.clone()).or_default().push(i);
    }
    for ids in by_label.values().filter(|ids| ids.len() > 1) {
        let keys: Vec<&Vec<(String, String)>> = ids.iter().map(|&i| &out[i].1).collect();
        let differing: Vec<usize> = (0..keys[0].len())
            .filter(|&c| keys.iter().any(|k| k[c].1 != keys[0][c].1))
            .collect();
        for &i in ids {
            let extra: String = differing
                .iter()
                .map(|&c| format!("/{}={}", out[i].1[c].0, out[i].1[c].1))
                .collect();
            out[i].0.label.push_str(&extra);
        }
    }
    Ok(out.into_iter().map(|(m, _)| m).collect())
}

/// What a measured e2e.csv row says beyond its case (host calibration, sim/calibrate/host.rs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MeasuredRow {
    pub fwd_s: f64,
    pub iter_s: f64,
    /// `compute = none`: the emulated device never slept.
    pub compute_none: bool,
    /// The run's ranks per node (e2e.csv `ranks_per_node`; `None` in files without it).
    pub ranks_per_node: Option<usize>,
    /// Host compression and decompression per iteration (`host_compress_s +
    /// host_decompress_s`) of a `compress_on = host` row; `None` on device rows, where
    /// they are 0, or where the file predates the columns.
    pub host_s: Option<f64>,
}

/// One simulable row of an e2e.csv: its case, its measurements and its case key (every
/// non-measurement column as `(name, value)`).
pub type E2eRow = (SimCase, MeasuredRow, Vec<(String, String)>);

/// Every simulable row of an e2e.csv ([`E2eRow`]).
pub fn e2e_rows(path: &std::path::Path) -> Result<Vec<E2eRow>> {
    use crate::config::ComputeMode;
    let p = path.display().to_string();
    let rerr = |msg: String| SimError::Read {
        path: p.clone(),
        msg,
    };
    let f = crate::record::CsvFile::open(path)?;
    let need = |name: &str| {
        f.require(
            name,
            "expected e2e.csv as written by `gradcomp e2e` (docs/csv-schema.md)",
        )
    };
    let (c_model, c_method, c_fusion, c_pipe, c_coll, c_agg, c_n, c_batch, c_dev) = (
        need("model")?,
        need("method")?,
        need("fusion")?,
        need("pipelining")?,
        need("collective")?,
        need("aggregation")?,
        need("world_size")?,
        need("batch")?,
        need("device")?,
    );
    let (c_fwd, c_iter) = (need("fwd_s")?, need("iter_s")?);
    let crate::record::CsvFile {
        header, mut reader, ..
    } = f;
    let pos = |name: &str| header.iter().position(|h| h == name);
    let c_compute = pos("compute");
    let c_rpn = pos("ranks_per_node");
    let mut out = Vec::new();
    for (i, rec) in reader.records().enumerate() {
        let rec = rec.map_err(|e| crate::record::CsvFile::malformed(&p, e))?;
        let line = i + 2;
        let g = |c: usize| rec.get(c).unwrap_or("").trim().to_string();
        let bad =
            |col: &str, v: &str| rerr(format!("line {line}, column `{col}`: bad value `{v}`"));
        let device = g(c_dev);
        if device == "profile" {
            continue;
        }
        let key: Vec<(String, String)> = (0..header.len())
            .filter(|&c| !is_measurement(&header[c]))
            .map(|c| (header[c].clone(), g(c)))
            .collect();
        let params = row_params(|name| pos(name).map(&g)).map_err(|(c, v)| bad(c, &v))?;
        let fusion = Fusion::parse(&g(c_fusion)).map_err(|_| bad("fusion", &g(c_fusion)))?;
        let coll = g(c_coll);
        // The CSV names the collective that ran; the method's own is `auto`.
        let mode = if coll == g(c_agg) {
            CollectiveMode::Native
        } else {
            CollectiveMode::parse(&coll).ok_or_else(|| bad("collective", &coll))?
        };
        let n: usize = g(c_n).parse().map_err(|_| bad("world_size", &g(c_n)))?;
        let batch: usize = g(c_batch).parse().map_err(|_| bad("batch", &g(c_batch)))?;
        let compute = crate::models::ComputeModel::from_preset(
            &crate::models::preset(&device).map_err(|e| rerr(format!("line {line}: {e}")))?,
        );
        let mut wl = SimWorkload::zoo(&g(c_model), Some(batch), &compute, &device)?;
        let compute_none =
            c_compute.map(|c| ComputeMode::parse(&g(c))) == Some(Some(ComputeMode::None));
        if compute_none {
            wl.bwd_s.iter_mut().for_each(|b| *b = 0.0);
            wl.fwd_s = 0.0;
        }
        let time = |c: usize, col: &str| {
            g(c).parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| bad(col, &g(c)))
        };
        let mut measured = MeasuredRow {
            fwd_s: time(c_fwd, "fwd_s")?,
            iter_s: time(c_iter, "iter_s")?,
            compute_none,
            ranks_per_node: match c_rpn.map(&g).filter(|v| !v.is_empty()) {
                Some(v) => Some(
                    v.parse()
                        .ok()
                        .filter(|&r: &usize| r >= 1)
                        .ok_or_else(|| bad("ranks_per_node", &v))?,
                ),
                None => None,
            },
            host_s: {
                let part = |name: &str| pos(name).and_then(|c| g(c).parse::<f64>().ok());
                match (part("host_compress_s"), part("host_decompress_s")) {
                    (Some(a), Some(b)) if (a + b).is_finite() && a + b > 0.0 => Some(a + b),
                    _ => None,
                }
            },
        };
        let mut case = SimCase::new(wl, &g(c_method), fusion, g(c_pipe) == "on", mode, n, params);
        if let Some(c) = pos("compress_on") {
            let v = g(c);
            case.compress_on = if v.is_empty() {
                crate::devcost::CompressOn::Host
            } else {
                crate::devcost::CompressOn::parse(&v).ok_or_else(|| bad("compress_on", &v))?
            };
        }
        if case.compress_on != crate::devcost::CompressOn::Host {
            measured.host_s = None;
        }
        out.push((case, measured, key));
    }
    Ok(out)
}

/// e2e.csv columns that are measurements or run bookkeeping, not case axes.
fn is_measurement(col: &str) -> bool {
    col.ends_with("_s")
        || col.ends_with("_bytes")
        || matches!(
            col,
            "run_id"
                | "case_id"
                | "iters"
                | "warmup"
                | "iters_run"
                | "buckets"
                | "overlap_eff"
                | "compute_drift"
                | "compute_drift_max"
                | "compute_source"
                | "tensors"
        )
}

#[cfg(test)]
mod tests {
    use super::host_jitter;

    /// Only cases with two or more rounds are pooled: a one-round case's row is its own
    /// median (ratio 1 whatever its time) and says nothing of the host's speed. By hand:
    /// case `a` at 1, 2, 4 ms (median 2: ratios 0.5, 1, 2), case `b` at 3 ms seven times
    /// (ratios 1 x 7). Pooled, sorted: 0.5, 1 x 8, 2 (10 rows). The 10th percentile at
    /// rank 0.9 of 0..9: 0.5 + 0.9 x 0.5 = 0.95; the 90th at rank 8.1: 1 + 0.1 x 1 = 1.1;
    /// the jitter 0.15. Pooling two one-round cases too (12 rows: 0.5, 1 x 10, 2) would
    /// give 1 - 1 = 0 (ranks 1.1 and 9.9).
    #[test]
    fn host_jitter_leaves_out_cases_of_one_round() {
        let mut rows: Vec<(&str, f64)> = vec![("a", 1.0), ("a", 2.0), ("a", 4.0)];
        rows.extend([("b", 3.0); 7]);
        let j = host_jitter(rows.iter().copied()).unwrap();
        assert!((j - 0.15).abs() < 1e-12, "{j}");
        rows.extend([("single", 9.0), ("other", 0.1)]);
        let j = host_jitter(rows.iter().copied()).unwrap();
        assert!((j - 0.15).abs() < 1e-12, "{j}");
        // Nine rows of multi-round cases and two of one round each: too few to tell.
        let few: Vec<(&str, f64)> = rows[1..].to_vec();
        assert_eq!(host_jitter(few.iter().copied()), None);
    }
}
