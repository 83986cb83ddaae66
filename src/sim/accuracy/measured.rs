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

#[cfg(test)]
impl MeasuredRow {
    /// The tests' row: `iter_s` measured, nothing else (no forward time, the device
    /// emulated, no layout, no host share).
    pub(crate) fn timed(iter_s: f64) -> Self {
        MeasuredRow {
            fwd_s: 0.0,
            iter_s,
            compute_none: false,
            ranks_per_node: None,
            host_s: None,
        }
    }
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
    use super::*;
    use crate::models::TensorSpec;

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

    /// `(compress + decompress) / iter`, at most 1, 0 for an empty iteration.
    #[test]
    fn host_compress_share_by_hand() {
        // (0.2 + 0.1) / 2 = 0.15
        assert!((host_compress_share(0.2, 0.1, 2.0) - 0.15).abs() < 1e-15);
        // (1.5 + 1.0) / 2 = 1.25, capped at 1
        assert_eq!(host_compress_share(1.5, 1.0, 2.0), 1.0);
        assert_eq!(host_compress_share(0.2, 0.1, 0.0), 0.0);
    }

    /// A one-tensor S-SGD iteration without pipelining, host compression on its critical
    /// path; its own costs `c` (per element, compression and decompression).
    fn one_tensor(c: f64) -> (SimCase, CostModel) {
        let wl = SimWorkload {
            model: "one".into(),
            tensors: vec![TensorSpec {
                name: "w".into(),
                rows: 1,
                cols: 1000,
            }],
            bwd_s: vec![0.01],
            fwd_s: 0.005,
            batch: 1,
            device: "test".into(),
        };
        let case = SimCase::new(
            wl,
            "ssgd",
            Fusion::None,
            false,
            CollectiveMode::Native,
            2,
            MethodParams::default(),
        );
        let mut costs = CostModel::preset("10gbe").unwrap();
        let per = crate::netmodel::CompressCost {
            per_element_s: c,
            ..Default::default()
        };
        costs.methods.insert(
            "ssgd".into(),
            crate::sim::MethodCosts {
                compress: per,
                feedback: Default::default(),
                decompress: per,
            },
        );
        (case, costs)
    }

    /// `(T(1 + rel/2) - T(1 - rel/2)) / base`, the iteration simulated again here at the
    /// method's costs times 1.1 and 0.9 (rel 0.2); the costs are left as they were, a
    /// method without costs of its own left without; no movement for a base or a rel of 0.
    #[test]
    fn host_cost_sensitivity_is_the_centred_move_over_the_base() {
        use crate::sim::simulate;
        let (case, mut costs) = one_tensor(1e-6);
        let t = |f: f64| {
            let (case, costs) = one_tensor(1e-6 * f);
            simulate(&case, &costs).unwrap().iter_s
        };
        let want = (t(1.1) - t(0.9)) / 0.5;
        // Compression and decompression (2 x 1,000 x 1 us) on the critical path: the
        // move is 0.2 x 2 ms.
        assert!((want - 0.2 * 2e-3 / 0.5).abs() < 1e-12, "{want}");
        let mut wires = WireCache::default();
        let before = costs.methods["ssgd"];
        let got = host_cost_sensitivity(&case, &mut costs, &mut wires, 0.2, 0.5).unwrap();
        assert!((got - want).abs() < 1e-12, "{got} {want}");
        assert_eq!(costs.methods["ssgd"], before);
        for (rel, base_s) in [(0.0, 0.5), (-0.2, 0.5), (0.2, 0.0), (0.2, -1.0)] {
            let z = host_cost_sensitivity(&case, &mut costs, &mut wires, rel, base_s).unwrap();
            assert_eq!(z, 0.0, "rel {rel}, base {base_s}");
        }
        costs.methods.clear();
        let got = host_cost_sensitivity(&case, &mut costs, &mut wires, 0.2, 0.5).unwrap();
        assert!(got > 0.0, "{got}");
        assert!(costs.methods.is_empty(), "{:?}", costs.methods);
    }

    /// A scratch e2e.csv of `header` and `rows` in its own directory.
    fn e2e_csv(name: &str, header: &str, rows: &[&str]) -> std::path::PathBuf {
        let d =
            std::env::temp_dir().join(format!("gradcomp-measured-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join("e2e.csv");
        std::fs::write(&p, format!("{header}\n{}\n", rows.join("\n"))).unwrap();
        p
    }

    const HEAD: &str = "run_id,model,method,fusion,pipelining,collective,aggregation,world_size,batch,device,compute,compress_on,compress_device,ranks_per_node,host_compress_s,host_decompress_s,fwd_s,iter_s,wire_bytes";

    /// Each column of a row read as the file says: the collective the method aggregates
    /// with is `Native`, another is parsed; pipelining `on`; `compute = none` zeroes the
    /// workload's compute; `ranks_per_node` read when given; host compression is the
    /// sum of its two columns on a host row with a positive sum, `None` on a device row
    /// or at 0; `device = profile` rows are skipped; the case key holds every column that
    /// is not a measurement, in file order.
    #[test]
    fn e2e_rows_read_each_column() {
        let p = e2e_csv(
            "cols",
            HEAD,
            &[
                "a,resnet20,ssgd,none,on,allreduce,allreduce,2,32,v100,sleep,host,,4,0.002,0.001,0.1,0.5,10",
                "a,resnet20,ssgd,none,off,ps,allreduce,4,32,v100,none,,,,0,0,0.1,0.25,10",
                "a,resnet20,ssgd,none,off,allreduce,allreduce,4,32,profile,sleep,host,,,0.1,0.1,0.1,0.5,10",
                "a,resnet20,topk,none,off,allgather,allgather,2,32,v100,sleep,device,a100,1,0.002,0.001,0,0,10",
            ],
        );
        let rows = e2e_rows(&p).unwrap();
        assert_eq!(rows.len(), 3, "the profile row is skipped");
        let (c, m, key) = &rows[0];
        assert_eq!(c.collective, CollectiveMode::Native);
        assert!(c.pipelining);
        assert_eq!(c.world_size, 2);
        assert!(c.workload.fwd_s > 0.0 && c.workload.bwd_s.iter().all(|&b| b > 0.0));
        assert_eq!(c.compress_on, crate::devcost::CompressOn::Host);
        assert_eq!(
            (m.fwd_s, m.iter_s, m.compute_none, m.ranks_per_node),
            (0.1, 0.5, false, Some(4))
        );
        assert!((m.host_s.unwrap() - 0.003).abs() < 1e-15, "{:?}", m.host_s);
        let names: Vec<&str> = key.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            names,
            [
                "model",
                "method",
                "fusion",
                "pipelining",
                "collective",
                "aggregation",
                "world_size",
                "batch",
                "device",
                "compute",
                "compress_on",
                "compress_device",
                "ranks_per_node"
            ]
        );
        assert_eq!(key[1], ("method".to_string(), "ssgd".to_string()));

        let (c, m, _) = &rows[1];
        assert_eq!(c.collective, CollectiveMode::Ps);
        assert!(!c.pipelining);
        assert!(m.compute_none);
        assert_eq!(c.workload.fwd_s, 0.0);
        assert!(c.workload.bwd_s.iter().all(|&b| b == 0.0));
        // An empty compress_on is host; host parts summing to 0 give no host time.
        assert_eq!(c.compress_on, crate::devcost::CompressOn::Host);
        assert_eq!((m.ranks_per_node, m.host_s), (None, None));

        let (c, m, _) = &rows[2];
        assert_eq!(c.compress_on, crate::devcost::CompressOn::Device);
        assert_eq!(
            m.host_s, None,
            "a device row's host columns are not host time"
        );
        assert_eq!((m.fwd_s, m.iter_s), (0.0, 0.0), "0 s is a time");
        let _ = std::fs::remove_dir_all(p.parent().unwrap());
    }

    /// A bad value names its line (the header is line 1) and column; negative and
    /// non-finite times, 0 ranks per node and an unknown collective are bad values.
    #[test]
    fn e2e_rows_name_the_line_and_column_of_a_bad_value() {
        let good =
            "a,resnet20,ssgd,none,on,allreduce,allreduce,2,32,v100,sleep,host,,1,0,0,0.1,0.5,10";
        for (bad, col, v) in [
            ("a,resnet20,ssgd,none,on,allreduce,allreduce,2,32,v100,sleep,host,,1,0,0,0.1,-0.5,10", "iter_s", "-0.5"),
            ("a,resnet20,ssgd,none,on,allreduce,allreduce,2,32,v100,sleep,host,,1,0,0,NaN,0.5,10", "fwd_s", "NaN"),
            ("a,resnet20,ssgd,none,on,allreduce,allreduce,2,32,v100,sleep,host,,1,0,0,0.1,inf,10", "iter_s", "inf"),
            ("a,resnet20,ssgd,none,on,allreduce,allreduce,2,32,v100,sleep,host,,0,0,0,0.1,0.5,10", "ranks_per_node", "0"),
            ("a,resnet20,ssgd,none,on,bogus,allreduce,2,32,v100,sleep,host,,1,0,0,0.1,0.5,10", "collective", "bogus"),
        ] {
            let p = e2e_csv("bad", HEAD, &[good, bad]);
            let e = e2e_rows(&p).unwrap_err().to_string();
            let want = format!("line 3, column `{col}`: bad value `{v}`");
            assert!(e.contains(&want), "{e}\nwant {want}");
            let _ = std::fs::remove_dir_all(p.parent().unwrap());
        }
    }

    /// A host row's host time is its two columns' sum where that is finite and positive:
    /// one part at 0 counts, both at 0 or a sum past `f64::MAX` do not.
    #[test]
    fn host_time_is_the_finite_positive_sum_of_its_parts() {
        let row = |c: &str, d: &str| {
            format!("a,resnet20,ssgd,none,on,allreduce,allreduce,2,32,v100,sleep,host,,1,{c},{d},0.1,0.5,10")
        };
        let cases = [
            ("0.001", "0.002", Some(0.003)),
            ("0.001", "0", Some(0.001)),
            ("0", "0.002", Some(0.002)),
            ("0", "0", None),
            ("1e200", "1e200", Some(2e200)),
            ("1e308", "1e308", None),
            ("", "0.002", None),
        ];
        let rows: Vec<String> = cases.iter().map(|(c, d, _)| row(c, d)).collect();
        let rows: Vec<&str> = rows.iter().map(String::as_str).collect();
        let p = e2e_csv("host", HEAD, &rows);
        let got: Vec<Option<f64>> = e2e_rows(&p).unwrap().iter().map(|r| r.1.host_s).collect();
        let want: Vec<Option<f64>> = cases.iter().map(|c| c.2).collect();
        assert_eq!(got, want);
        let _ = std::fs::remove_dir_all(p.parent().unwrap());
    }

    /// Measurements and run bookkeeping are not case axes; parameters and placement are.
    #[test]
    fn measurement_columns_by_name() {
        for c in [
            "iter_s",
            "host_compress_s",
            "wire_bytes",
            "run_id",
            "case_id",
            "iters",
            "warmup",
            "iters_run",
            "buckets",
            "overlap_eff",
            "compute_drift",
            "compute_drift_max",
            "compute_source",
            "tensors",
        ] {
            assert!(is_measurement(c), "{c}");
        }
        for c in [
            "model",
            "method",
            "density",
            "rank",
            "world_size",
            "compute",
            "compress_device",
            "ranks_per_node",
            "bytes",
        ] {
            assert!(!is_measurement(c), "{c}");
        }
    }

    /// A case's device preset is the `compress_device` column's, `None` where it is empty.
    #[test]
    fn measured_cases_keep_the_compress_device() {
        let p = e2e_csv(
            "dev",
            HEAD,
            &[
                "a,resnet20,ssgd,none,on,allreduce,allreduce,2,32,v100,sleep,host,,1,0,0,0.1,0.5,10",
                "a,resnet20,topk,none,off,allgather,allgather,2,32,v100,sleep,device,a100,1,0,0,0.1,0.5,10",
            ],
        );
        let m = measured_cases(&p).unwrap();
        let devs: Vec<Option<&str>> = m.iter().map(|c| c.compress_device.as_deref()).collect();
        assert_eq!(devs, [None, Some("a100")]);
        let _ = std::fs::remove_dir_all(p.parent().unwrap());
    }

    /// The comparison's host share is the simulated host compression over the simulated
    /// iteration on a host case, 0 on a device case; rounds and spread from the rows.
    #[test]
    fn compare_gives_host_cases_their_host_share() {
        let (case, costs) = one_tensor(1e-6);
        let r = crate::sim::simulate(&case, &costs).unwrap();
        let mut row = SimRow::new(&case, &r, &costs);
        row.host_compress_s = 0.002;
        row.host_decompress_s = 0.001;
        row.iter_s = 0.01;
        let m = MeasuredRow::timed;
        let measured = MeasuredCase {
            case,
            label: "one".into(),
            rows: vec![m(0.008), m(0.01), m(0.012)],
            compress_device: None,
        };
        row.compress_on = "host";
        let c = compare(std::slice::from_ref(&measured), std::slice::from_ref(&row)).unwrap();
        // (0.002 + 0.001) / 0.01
        assert!((c[0].host_compress_share - 0.3).abs() < 1e-12, "{c:?}");
        assert_eq!(c[0].rounds, 3);
        // (0.012 - 0.008) / 0.01; the error (0.01 - 0.01) / 0.01
        assert!((c[0].spread_rel.unwrap() - 0.4).abs() < 1e-12, "{c:?}");
        assert!(c[0].rel_err.abs() < 1e-12, "{c:?}");
        row.compress_on = "device";
        let c = compare(std::slice::from_ref(&measured), std::slice::from_ref(&row)).unwrap();
        assert_eq!(c[0].host_compress_share, 0.0);
    }
}
