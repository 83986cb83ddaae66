//! `gradcomp fit RESULTS_DIR`: fit the simulator's cost models from a results
//! directory and write them with their fit error.
//!
//! - micro_comm.csv → per (collective, world size) one alpha-beta model `t = alpha +
//!   beta * bytes`, or two or three (message size ranges) split at fitted breakpoints, via
//!   [`CommModels::from_micro_comm_csv`] (weighted least squares on relative error, see
//!   netmodel.rs): one `comm` row per regime, with the sizes it was fitted on.
//! - micro_compress.csv → per method, one linear model `t = fixed + per_element * numel`
//!   for **each phase**: `compress_s`, `feedback_s` (empty = 0) and `decompress_s`
//!   ([`crate::netmodel::CompressCost::fit`], phase by phase). Rows of one method
//!   with different parameters are fitted together. A method whose compression selects
//!   over a set whose size does not follow the tensor's
//!   ([`crate::compress::Compressor::selection_elems`]: DGC's threshold sample, the
//!   whole tensor up to 9,216 elements at density 0.001, about 2,000 above) gets a third
//!   term, `+ per_selected * selected` ([`CompressCost::fit_selection`]), each row's
//!   selection read from the method itself for the row's shape (or model's layers).
//!   Rows over a model's layers (`micro-compress --model`, `tensors` > 1) do not enter
//!   that fit: they scale it by `model_factor`, the median of measured / predicted over
//!   them (a layer inside a sweep over the model costs more than the same tensor timed
//!   alone, whose data stays in L2); a method with model rows only is fitted on their
//!   mean layers.
//!
//! - e2e.csv (with run.json) → per world size a [`HostModel`] (CPU share; start and
//!   bucket synchronisation latencies calibrated on every method's host-compression rows,
//!   see host.rs), rows of kind `host` (`start` per iteration, `sync-pipelining-off` /
//!   `-on` per wait for the device, `bwd-slowdown` a factor (unit `factor`) on the work
//!   inside backward; the value is in `fixed_s`, its spread over rounds in `round_min`
//!   and `round_max`; `points` = rows used; phase `-`), and the same rows per
//!   leave-one-method-out calibration (phase `without METHOD`).
//!
//! Output: `fits.csv` (one row per model) and `fits.json` (the same rows as a JSON array)
//! in the directory. Columns: `kind` (`comm` / `compress`), `name` (collective or
//! method), `phase` (`-` for comm; `compress`, `feedback`, `decompress`), `world_size`
//! (comm; empty for compress), `fixed_s` (alpha), `per_unit_s` (beta per byte, or per
//! element), `unit` (`byte` / `element`), `r2`, `max_rel_err`, `points`, `model_factor`
//! (compression rows with model rows; else empty), `from_bytes` and `to_bytes` (comm
//! rows: the regime's smallest and largest fitted size; else empty).

pub use super::fit_compress::fit_compress_phases;
use super::host::{self, HostCalibration, HostModel};
use super::{CostModel, MethodCosts, Result, SimError};
use crate::netmodel::{CommModels, CompressCost, FitQuality};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One fitted linear model with its fit error.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct FitRow {
    pub kind: &'static str,
    pub name: String,
    pub phase: String,
    pub world_size: Option<usize>,
    pub fixed_s: f64,
    pub per_unit_s: f64,
    pub unit: &'static str,
    pub r2: f64,
    pub max_rel_err: f64,
    pub points: usize,
    /// Compression rows: the in-model level applied to `fixed_s` and `per_unit_s`
    /// ([`super::fit_compress::model_factor`]; empty without `micro-compress --model` rows).
    pub model_factor: Option<f64>,
    /// Comm rows: the smallest and largest message size (bytes per rank) of the regime's
    /// points; a collective with several regimes has a row per regime (netmodel.rs, `CommFit`).
    pub from_bytes: Option<f64>,
    pub to_bytes: Option<f64>,
    /// Host rows: the calibration's spread over rounds (the smallest and largest
    /// per-round value, host.rs), in the unit of `fixed_s`. Compression rows: the
    /// bounds (s) of the median's interval of the phase's repeated measurement whose
    /// interval is relatively widest ([`super::fit_compress::round_range`]). Empty otherwise.
    pub round_min: Option<f64>,
    pub round_max: Option<f64>,
    /// Compression rows of a method with a selection
    /// ([`crate::compress::Compressor::selection_elems`], DGC's threshold sample): s per
    /// selected element, scaled by `model_factor` as `fixed_s` and `per_unit_s`. Empty
    /// for methods linear in the tensor.
    pub per_selected_s: Option<f64>,
}

/// What [`fit_results`] found.
#[derive(Clone, Debug, Default)]
pub struct FitReport {
    pub rows: Vec<FitRow>,
    /// The collective models (empty when the directory has no micro_comm.csv).
    pub comm: CommModels,
    pub comm_source: Option<String>,
    pub compress_source: Option<String>,
    /// Per world size of DIR/e2e.csv (empty without one).
    pub host: BTreeMap<usize, HostCalibration>,
    /// DIR/e2e.csv, which the host models were calibrated on.
    pub host_source: Option<PathBuf>,
    /// The links' shaper when DIR is a netlab run (DIR/netlab.txt; credit.rs).
    pub shaper: Option<super::credit::Shaper>,
    /// The measured run's most loaded machine (DIR/run.json; `None` without one or from
    /// before `host_cores`): whether its ranks outnumbered the cores (fit_table.rs).
    pub layout: Option<host::Layout>,
    /// Files written.
    pub written: Vec<PathBuf>,
}

impl FitReport {
    /// The relative spread over rounds of `method`'s host compression measurements
    /// (`micro-compress` rounds, summed over its phases): `(hi - lo) / hi` of the phases'
    /// summed `round_min` and `round_max`; `None` without repeated rounds.
    pub fn compress_spread(&self, method: &str) -> Option<f64> {
        let (mut lo, mut hi, mut any) = (0.0, 0.0, false);
        for r in self
            .rows
            .iter()
            .filter(|r| r.kind == "compress" && r.name == method)
        {
            if let (Some(a), Some(b)) = (r.round_min, r.round_max) {
                lo += a;
                hi += b;
                any = true;
            }
        }
        (any && hi > 0.0).then(|| (hi - lo) / hi)
    }

    /// Per-method phase costs from the compress rows.
    pub fn method_costs(&self) -> BTreeMap<String, MethodCosts> {
        let mut out: BTreeMap<String, MethodCosts> = BTreeMap::new();
        for r in self.rows.iter().filter(|r| r.kind == "compress") {
            let e = out.entry(r.name.clone()).or_default();
            let c = CompressCost {
                per_element_s: r.per_unit_s,
                fixed_s: r.fixed_s,
                per_selected_s: r.per_selected_s.unwrap_or(0.0),
            };
            match r.phase.as_str() {
                "compress" => e.compress = c,
                "feedback" => e.feedback = c,
                "decompress" => e.decompress = c,
                _ => {}
            }
        }
        out
    }

    /// The fitted cost model at `world_size`: network, compression costs, and the host
    /// model where DIR/e2e.csv calibrated one at that size.
    pub fn cost_model(&self, world_size: usize) -> Result<CostModel> {
        let mut c =
            CostModel::with_network(Box::new(self.network(world_size)?)).with_compress_fits(self);
        if let Some(h) = self.host.get(&world_size) {
            c.host = h.all.clone();
        }
        c.shaper = self.shaper;
        Ok(c)
    }

    /// The fitted network at `world_size` (an error when micro_comm.csv had no fit there).
    pub fn network(&self, world_size: usize) -> Result<super::network::Fitted> {
        super::network::Fitted::new(
            self.comm.clone(),
            world_size,
            self.comm_source.clone().unwrap_or_default(),
        )
        .map_err(|e| SimError::Input(e.0))
    }
}

/// Fit every model `dir` holds data for (micro_comm.csv, micro_compress.csv; at least
/// one must exist), write `fits.csv` and `fits.json` into `dir`, return the report.
pub fn fit_results(dir: &Path) -> Result<FitReport> {
    let mut rep = fit_dir(dir)?;
    let csv_path = dir.join("fits.csv");
    let json_path = dir.join("fits.json");
    let json = serde_json::json!({
        "comm_source": rep.comm_source,
        "compress_source": rep.compress_source,
        "host": rep.host.iter().map(|(n, h)| (n.to_string(), host_json(&h.all))).collect::<serde_json::Map<_, _>>(),
        "host_held_out": rep.host.iter().map(|(n, h)| (n.to_string(), h.held_out.iter().map(|(m, x)| (m.clone(), host_json(x))).collect::<serde_json::Map<_, _>>().into())).collect::<serde_json::Map<_, _>>(),
        "fits": rep.rows,
        "untrusted": super::trust::causes(&rep),
    });
    let text = serde_json::to_string_pretty(&json).map_err(|e| SimError::Write {
        path: json_path.display().to_string(),
        msg: e.to_string(),
    })?;
    // Both files are new or both as they were: fits.json waits beside its name until
    // fits.csv is whole under its own (each written apart and renamed, so a full disk
    // leaves neither a partial nor an empty file).
    let json_file = crate::record::Staged::write(&json_path, (text + "\n").as_bytes())?;
    crate::record::write_all(&csv_path, &rep.rows, crate::record::Existing::Replace)?;
    json_file.commit()?;
    rep.written = vec![csv_path, json_path];
    Ok(rep)
}

/// fits.json's record of one host model.
fn host_json(h: &HostModel) -> serde_json::Value {
    let (sync_on_s, (on_lo, on_hi), _) = h.sync_on_term();
    serde_json::json!({
        "cpu_share": h.cpu_share,
        "start_s": h.start_s,
        "start_range_s": [h.start_range_s.0, h.start_range_s.1],
        "sync_off_s": h.sync_s,
        "sync_on_s": sync_on_s,
        "sync_range_s": [h.sync_range_s.0, h.sync_range_s.1],
        "sync_on_range_s": [on_lo, on_hi],
        "bwd_slowdown": h.bwd_slowdown,
        "bwd_slowdown_range": [h.bwd_slowdown_range.0, h.bwd_slowdown_range.1],
        "points": h.points,
        "rounds": h.rounds,
        "methods": h.methods,
        "source": h.source,
    })
}

/// fits.csv's `host` rows of one host model (`phase`: `-`, or `without METHOD`).
fn host_rows(n: usize, phase: &str, h: &HostModel) -> Vec<FitRow> {
    let [p_start, p_sync, p_bwd] = h.term_points;
    let (on_s, on_range_s, p_on) = h.sync_on_term();
    [
        ("start", h.start_s, h.start_range_s, "iteration", p_start),
        // One latency for both schedules unless the pipelined rows calibrate their own
        // (host.rs, `HostModel::sync_on`).
        (
            "sync-pipelining-off",
            h.sync_s,
            h.sync_range_s,
            "wait",
            p_sync,
        ),
        ("sync-pipelining-on", on_s, on_range_s, "wait", p_on),
        (
            "bwd-slowdown",
            h.bwd_slowdown,
            h.bwd_slowdown_range,
            "factor",
            p_bwd,
        ),
    ]
    .into_iter()
    .map(|(name, v, (lo, hi), unit, points)| FitRow {
        kind: "host",
        name: name.into(),
        phase: phase.into(),
        world_size: Some(n),
        fixed_s: v,
        per_unit_s: 0.0,
        unit,
        r2: f64::NAN,
        max_rel_err: f64::NAN,
        points,
        model_factor: None,
        from_bytes: None,
        to_bytes: None,
        round_min: (points > 0).then_some(lo),
        round_max: (points > 0).then_some(hi),
        per_selected_s: None,
    })
    .collect()
}

/// [`fit_results`] without writing.
pub fn fit_dir(dir: &Path) -> Result<FitReport> {
    let mut rep = FitReport {
        shaper: super::credit::Shaper::from_run_dir(dir)?,
        layout: host::layout_from_run_json(&dir.join("run.json"))?,
        ..FitReport::default()
    };
    let comm = dir.join("micro_comm.csv");
    let compress = dir.join("micro_compress.csv");
    if !comm.exists() && !compress.exists() {
        return Err(SimError::Input(format!(
            "{}: neither micro_comm.csv nor micro_compress.csv found; run `gradcomp micro-comm` / `gradcomp micro-compress` with this results directory first",
            dir.display()
        )));
    }
    if comm.exists() {
        let models = CommModels::from_micro_comm_csv(&comm)?;
        for (c, n) in models.keys() {
            let fit = *models.get(&c, n).expect("listed key");
            for reg in fit.regimes() {
                let q = reg.quality.unwrap_or(FitQuality {
                    r2: f64::NAN,
                    max_rel_err: f64::NAN,
                    n: 0,
                });
                rep.rows.push(FitRow {
                    kind: "comm",
                    name: c.clone(),
                    phase: "-".into(),
                    world_size: Some(n),
                    fixed_s: reg.line.alpha_s,
                    per_unit_s: reg.line.beta_s_per_byte,
                    unit: "byte",
                    r2: q.r2,
                    max_rel_err: q.max_rel_err,
                    points: q.n,
                    model_factor: None,
                    from_bytes: Some(reg.from_bytes),
                    to_bytes: Some(reg.to_bytes),
                    ..FitRow::default()
                });
            }
        }
        rep.comm = models;
        rep.comm_source = Some(comm.display().to_string());
    }
    if compress.exists() {
        rep.rows.extend(fit_compress_phases(&compress)?);
        rep.compress_source = Some(compress.display().to_string());
    }
    let e2e = dir.join("e2e.csv");
    if e2e.exists() {
        let share = host::cpu_share_from_run_json(&dir.join("run.json"))?;
        // Host latencies are calibrated on top of the network and compression fits alone.
        let own_cores = host::device_threads_have_cores(&dir.join("run.json"))?;
        let hosts = host::calibrate(&e2e, share, own_cores, &|n| rep.cost_model(n), &|m| {
            rep.compress_spread(m)
        })?;
        for (&n, h) in &hosts {
            rep.rows.extend(host_rows(n, "-", &h.all));
            for (m, x) in &h.held_out {
                rep.rows.extend(host_rows(n, &format!("without {m}"), x));
            }
        }
        rep.host = hosts;
        rep.host_source = Some(e2e);
    }
    Ok(rep)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("gradcomp-sim-fit-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// DGC's threshold sample, the reference's rule written again (DGC's
    /// `initialize`: the whole tensor up to `ceil(2 / rho)` elements, else the stride
    /// `32 ceil(d / want / 32) + 1` lowered by 8 until `d // stride >= want`); 1-D
    /// tensors are sent dense.
    fn reference_sample(rows: usize, cols: usize, rho: f64) -> usize {
        let d = rows * cols;
        let cpr = (2.0 / rho).ceil() as usize;
        if rows == 1 {
            return 0;
        }
        if d <= cpr {
            return d;
        }
        let want = ((0.01 * d as f64).ceil() as usize).max(cpr);
        let mut stride = (d as f64 / want as f64 / 32.0).ceil() as usize * 32 + 1;
        while stride > 1 && d / stride < want {
            stride -= 8;
        }
        d / stride
    }

    /// DGC's compression timed at the config's shapes and over ResNet-20 with times
    /// from `1 ns per element + 9 ns per sampled element` (the sweep 1.5x that): the fit
    /// finds the selection term, the sweep's level 1.5, and prices a 32x288 tensor
    /// (sampled whole) above a 64x576 one (sampled at stride 17), as the law does.
    #[test]
    fn dgc_rows_fit_the_selection_term() {
        let d = tmpdir("selection");
        let law = |rows: usize, cols: usize| {
            1e-9 * (rows * cols) as f64 + 9e-9 * reference_sample(rows, cols, 0.001) as f64
        };
        let mut s = String::from(
            "schema_version,method,rows,cols,numel,model,tensors,world_size,density,compress_s,feedback_s,decompress_s\n",
        );
        for (r, c) in [(16, 144), (32, 288), (64, 576), (10, 64), (1, 128)] {
            s += &format!(
                "1,dgc,{r},{c},{},,1,2,0.001,{},1e-7,{}\n",
                r * c,
                law(r, c),
                1e-10 * (r * c) as f64
            );
        }
        let model = crate::models::build("resnet20").unwrap();
        let (mut numel, mut sweep) = (0, 0.0);
        for t in &model.tensors {
            let (r, c) = t.rows_cols();
            numel += r * c;
            sweep += law(r, c);
        }
        s += &format!(
            "1,dgc,,,{numel},resnet20,{},2,0.001,{},1e-7,{}\n",
            model.tensors.len(),
            1.5 * sweep,
            1e-10 * numel as f64
        );
        std::fs::write(d.join("micro_compress.csv"), s).unwrap();
        let rows = fit_compress_phases(&d.join("micro_compress.csv")).unwrap();
        let c = rows
            .iter()
            .find(|r| r.name == "dgc" && r.phase == "compress")
            .unwrap();
        assert!((c.model_factor.unwrap() - 1.5).abs() < 1e-6, "{c:?}");
        assert!((c.per_unit_s - 1.5e-9).abs() < 1e-14, "{c:?}");
        assert!((c.per_selected_s.unwrap() - 13.5e-9).abs() < 1e-14, "{c:?}");
        assert!(c.fixed_s.abs() < 1e-12 && c.r2 > 0.999_999, "{c:?}");
        let cost = rep_costs(&rows)["dgc"].compress;
        assert!(cost.time_s(9216, 9216) > cost.time_s(36864, 2168));
        // Decompression selects nothing: linear, no selection column.
        let dc = rows
            .iter()
            .find(|r| r.name == "dgc" && r.phase == "decompress")
            .unwrap();
        assert_eq!(dc.per_selected_s, None);
    }

    fn rep_costs(rows: &[FitRow]) -> BTreeMap<String, MethodCosts> {
        FitReport {
            rows: rows.to_vec(),
            ..FitReport::default()
        }
        .method_costs()
    }

    #[test]
    fn model_rows_set_the_level_and_single_tensors_the_shape() {
        let d = tmpdir("model");
        // One tensor alone: compress 1e-6 + 1e-9 e. Over a model of 10 layers, 1e5
        // elements: twice that (the layers come from further away); over another, 3x.
        let mut s = String::from(
            "schema_version,method,numel,model,tensors,compress_s,feedback_s,decompress_s\n",
        );
        for e in [1000.0f64, 100000.0, 1000000.0] {
            s += &format!("1,topk,{e},,1,{},0,{}\n", 1e-6 + 1e-9 * e, 1e-9 * e);
            s += &format!("1,signsgd,{e},,1,{},0,{}\n", 1e-6 + 1e-9 * e, 1e-9 * e);
        }
        let sweep = |t: f64, e: f64| t * 1e-6 + 1e-9 * e;
        s += &format!(
            "1,topk,100000,m1,10,{},0,{}\n",
            2.0 * sweep(10.0, 1e5),
            1e-9 * 1e5
        );
        s += &format!(
            "1,topk,200000,m2,20,{},0,{}\n",
            2.0 * sweep(20.0, 2e5),
            1e-9 * 2e5
        );
        s += &format!(
            "1,topk,50000,m3,5,{},0,{}\n",
            3.0 * sweep(5.0, 5e4),
            1e-9 * 5e4
        );
        // A method measured over a model only: its mean layer is the point.
        s += &format!(
            "1,ssgd,100000,m1,10,{},0,{}\n",
            10.0 * 1e-6 + 1e-9 * 1e5,
            1e-5
        );
        s += &format!(
            "1,ssgd,800000,m2,20,{},0,{}\n",
            20.0 * 1e-6 + 1e-9 * 8e5,
            2e-5
        );
        std::fs::write(d.join("micro_compress.csv"), s).unwrap();
        let rows = fit_compress_phases(&d.join("micro_compress.csv")).unwrap();
        let get = |m: &str, ph: &str| rows.iter().find(|r| r.name == m && r.phase == ph).unwrap();
        let c = get("topk", "compress");
        assert!((c.model_factor.unwrap() - 2.0).abs() < 1e-6, "{c:?}");
        assert!(
            (c.fixed_s - 2e-6).abs() < 1e-9 && (c.per_unit_s - 2e-9).abs() < 1e-12,
            "{c:?}"
        );
        let dc = get("topk", "decompress");
        assert!((dc.model_factor.unwrap() - 1.0).abs() < 1e-6, "{dc:?}");
        // feedback does no work: no level to find.
        assert_eq!(get("topk", "feedback").model_factor, None);
        let ss = get("ssgd", "compress");
        assert_eq!(ss.model_factor, Some(1.0));
        assert!(
            (ss.fixed_s - 1e-6).abs() < 1e-9 && (ss.per_unit_s - 1e-9).abs() < 1e-12,
            "{ss:?}"
        );
    }

    /// The rounds of a repeated measurement give the compression fit's own spread, the
    /// median's interval: the in-model sweep measured 1.6 / 1.6 / 2.3 ms over three
    /// rounds (the Zen 3 qsgd case of tests/data/sim-accuracy), 1.6 to 2.3 ms (of three
    /// rounds, the range); of five rounds 1.6 / 1.7 / 1.8 / 1.9 / 9.0 ms (one stalled),
    /// 1.7 to 1.9 ms; phases sum; without repeats there is none.
    #[test]
    fn repeated_rounds_give_the_compression_fits_spread() {
        let d = tmpdir("rounds");
        let mut s = String::from(
            "schema_version,method,numel,model,tensors,compress_s,feedback_s,decompress_s\n",
        );
        for e in [1000.0f64, 100000.0] {
            for _ in 0..3 {
                s += &format!("1,qsgd,{e},,1,{},0,{}\n", 1e-6 + 1e-9 * e, 1e-9 * e);
            }
            s += &format!("1,topk,{e},,1,{},0,{}\n", 1e-6 + 1e-9 * e, 1e-9 * e);
            s += &format!("1,signsgd,{e},,1,{},0,{}\n", 1e-6 + 1e-9 * e, 1e-9 * e);
        }
        for (c, dc) in [(1.6e-3, 0.4e-3), (1.6e-3, 0.4e-3), (2.3e-3, 0.5e-3)] {
            s += &format!("1,qsgd,270000,resnet20,59,{c},0,{dc}\n");
        }
        for c in [1.8e-3, 9.0e-3, 1.6e-3, 1.9e-3, 1.7e-3] {
            s += &format!("1,signsgd,270000,resnet20,59,{c},0,0\n");
        }
        std::fs::write(d.join("micro_compress.csv"), s).unwrap();
        let rows = fit_compress_phases(&d.join("micro_compress.csv")).unwrap();
        let get = |m: &str, ph: &str| rows.iter().find(|r| r.name == m && r.phase == ph).unwrap();
        let c = get("qsgd", "compress");
        assert_eq!((c.round_min, c.round_max), (Some(1.6e-3), Some(2.3e-3)));
        let dc = get("qsgd", "decompress");
        assert_eq!((dc.round_min, dc.round_max), (Some(0.4e-3), Some(0.5e-3)));
        // Feedback does nothing: every round 0, no spread to speak of.
        let fb = get("qsgd", "feedback");
        assert_eq!((fb.round_min, fb.round_max), (None, None));
        assert_eq!(get("topk", "compress").round_min, None);
        let five = get("signsgd", "compress");
        assert_eq!(
            (five.round_min, five.round_max),
            (Some(1.7e-3), Some(1.9e-3))
        );
        let report = FitReport {
            rows,
            ..FitReport::default()
        };
        let want = (2.8e-3 - 2.0e-3) / 2.8e-3;
        assert!((report.compress_spread("qsgd").unwrap() - want).abs() < 1e-12);
        assert_eq!(report.compress_spread("topk"), None);
        assert_eq!(report.compress_spread("ssgd"), None);
    }

    #[test]
    fn fits_comm_and_every_compress_phase_and_writes_files() {
        let d = tmpdir("ok");
        // allreduce at n=2: t = 1e-5 + 1e-9 * bytes, exactly.
        let mut s = String::from("schema_version,collective,world_size,bytes,median_s\n");
        for b in [1024.0f64, 65536.0, 1048576.0] {
            s += &format!("1,allreduce,2,{b},{}\n", 1e-5 + 1e-9 * b);
        }
        std::fs::write(d.join("micro_comm.csv"), s).unwrap();
        // topk: compress 1e-6 + 5e-9 e, feedback 1e-9 e (empty once = 0 is inconsistent,
        // so keep it exact), decompress 2e-6 + 0.5e-9 e.
        let mut s =
            String::from("schema_version,method,numel,compress_s,feedback_s,decompress_s\n");
        for e in [1000.0f64, 100000.0, 1000000.0] {
            s += &format!(
                "1,topk,{e},{},{},{}\n",
                1e-6 + 5e-9 * e,
                1e-9 * e,
                2e-6 + 0.5e-9 * e
            );
            s += &format!("1,ssgd,{e},{},,{}\n", 0.3e-9 * e, 0.3e-9 * e);
        }
        std::fs::write(d.join("micro_compress.csv"), s).unwrap();
        std::fs::write(
            d.join("run.json"),
            r#"{"hosts": ["vm", "vm"], "host_cores": [2, 2]}"#,
        )
        .unwrap();
        let rep = fit_results(&d).unwrap();
        assert!(d.join("fits.csv").exists() && d.join("fits.json").exists());
        // The run's layout from run.json: 2 ranks on 2 cores of vm.
        let l = rep.layout.as_ref().unwrap();
        assert_eq!((l.ranks, l.ranks_total, l.cores), (2, 2, 2));
        assert_eq!(l.machine, "vm");
        let comm: Vec<_> = rep.rows.iter().filter(|r| r.kind == "comm").collect();
        assert_eq!(comm.len(), 1);
        // fits.csv's comm row: the collective, no phase, its world size, per byte, its
        // three points and the byte range of its regime.
        let c = comm[0];
        assert_eq!(
            (
                c.name.as_str(),
                c.phase.as_str(),
                c.world_size,
                c.unit,
                c.points
            ),
            ("allreduce", "-", Some(2), "byte", 3)
        );
        assert!(c.from_bytes.is_some() && c.to_bytes.is_some(), "{c:?}");
        assert!((comm[0].fixed_s - 1e-5).abs() < 1e-9 && (comm[0].per_unit_s - 1e-9).abs() < 1e-13);
        assert!(comm[0].r2 > 0.999 && comm[0].max_rel_err < 1e-6);
        let mc = rep.method_costs();
        let t = mc["topk"];
        assert!(
            (t.compress.per_element_s - 5e-9).abs() < 1e-12
                && (t.compress.fixed_s - 1e-6).abs() < 1e-9
        );
        assert!((t.feedback.per_element_s - 1e-9).abs() < 1e-12);
        assert!((t.decompress.fixed_s - 2e-6).abs() < 1e-9);
        assert_eq!(mc["ssgd"].feedback.per_element_s, 0.0);
        assert_eq!(rep.rows.iter().filter(|r| r.kind == "compress").count(), 6);
        // The network at the measured size works, elsewhere it is refused.
        assert!(rep.network(2).is_ok() && rep.network(4).is_err());
        let text = std::fs::read_to_string(d.join("fits.csv")).unwrap();
        assert!(text.starts_with(
            "kind,name,phase,world_size,fixed_s,per_unit_s,unit,r2,max_rel_err,points"
        ));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn empty_dir_and_bad_values_are_errors() {
        let d = tmpdir("bad");
        assert!(fit_results(&d)
            .unwrap_err()
            .to_string()
            .contains("micro-comm"));
        std::fs::write(
            d.join("micro_compress.csv"),
            "schema_version,method,numel,compress_s,feedback_s,decompress_s\n1,topk,10,abc,,1\n",
        )
        .unwrap();
        assert!(fit_results(&d)
            .unwrap_err()
            .to_string()
            .contains("compress_s"));
        // A shape that is no tensor dimension, a parameter that does not parse, a model
        // the zoo lacks (for a method that selects): each named with its line and column.
        let head = "schema_version,method,rows,cols,numel,model,tensors,density,compress_s,feedback_s,decompress_s\n";
        for (body, want) in [
            ("1,dgc,16,x,2304,,1,0.001,1e-5,,1e-6\n", "line 2, column `cols`: `x`"),
            ("1,dgc,16,144,2304,,1,dense,1e-5,,1e-6\n", "line 2, column `density`: bad value `dense`"),
            (
                "1,dgc,16,144,2304,,1,0.001,1e-5,,1e-6\n1,dgc,64,576,36864,,1,0.001,5e-5,,1e-6\n1,dgc,,,100,nonet,3,0.001,1e-5,,1e-6\n",
                "line 4, column `model`: unknown model 'nonet'",
            ),
        ] {
            std::fs::write(d.join("micro_compress.csv"), format!("{head}{body}")).unwrap();
            let e = fit_results(&d).unwrap_err().to_string();
            assert!(e.contains("micro_compress.csv") && e.contains(want), "{e}");
        }
        let _ = std::fs::remove_dir_all(&d);
    }

    /// Rounds that all took 0 s have no spread (not `0 / 0`): `None`.
    #[test]
    fn rounds_of_zero_seconds_give_no_spread() {
        let row = FitRow {
            kind: "compress",
            name: "qsgd".into(),
            phase: "compress".into(),
            round_min: Some(0.0),
            round_max: Some(0.0),
            ..FitRow::default()
        };
        let report = FitReport {
            rows: vec![row],
            ..FitReport::default()
        };
        assert_eq!(report.compress_spread("qsgd"), None);
    }

    /// fits.csv's host rows and fits.json's host record by hand: without a pipelined
    /// calibration of its own, `sync-pipelining-on` repeats the one latency; a term with
    /// points has its rounds' range, one without (the latency here) none.
    #[test]
    fn host_rows_and_json_by_hand() {
        let h = HostModel {
            start_s: 1e-4,
            start_range_s: (0.9e-4, 1.2e-4),
            sync_s: 2e-5,
            sync_range_s: (1e-5, 3e-5),
            bwd_slowdown: 3.0,
            bwd_slowdown_range: (2.5, 3.5),
            term_points: [2, 0, 3],
            points: 5,
            ..HostModel::default()
        };
        let rows = host_rows(4, "without qsgd", &h);
        let got: Vec<_> = rows
            .iter()
            .map(|r| {
                (
                    r.kind,
                    r.name.as_str(),
                    r.phase.as_str(),
                    r.world_size,
                    r.fixed_s,
                    r.unit,
                    r.points,
                    r.round_min,
                    r.round_max,
                )
            })
            .collect();
        let w = Some(4);
        let p = "without qsgd";
        assert_eq!(
            got,
            [
                (
                    "host",
                    "start",
                    p,
                    w,
                    1e-4,
                    "iteration",
                    2,
                    Some(0.9e-4),
                    Some(1.2e-4)
                ),
                (
                    "host",
                    "sync-pipelining-off",
                    p,
                    w,
                    2e-5,
                    "wait",
                    0,
                    None,
                    None
                ),
                (
                    "host",
                    "sync-pipelining-on",
                    p,
                    w,
                    2e-5,
                    "wait",
                    0,
                    None,
                    None
                ),
                (
                    "host",
                    "bwd-slowdown",
                    p,
                    w,
                    3.0,
                    "factor",
                    3,
                    Some(2.5),
                    Some(3.5)
                ),
            ]
        );
        let j = host_json(&h);
        assert_eq!(j["start_range_s"], serde_json::json!([0.9e-4, 1.2e-4]));
        assert_eq!(j["sync_on_s"], serde_json::json!(2e-5));
        assert_eq!(j["bwd_slowdown"], serde_json::json!(3.0));
        assert_eq!(j["points"], serde_json::json!(5));
    }

    /// A netlab run's directory gives the report its links' shaper (netlab.txt: 1 Gbit/s
    /// is 1.25e8 bytes/s in tc's units, tc(8); a 256 KiB burst), and a comm row whose
    /// points are off its line says how far: `max_rel_err` is the largest
    /// `|alpha + beta b - t| / t` over its points (netmodel.rs, `FitQuality`), here of a
    /// point 20% above `1e-5 + 1e-9 b` (4 sizes: one regime, each needs 3).
    #[test]
    fn fit_dir_reads_the_shaper_and_the_comm_rows_worst_error() {
        let d = tmpdir("shaper");
        let points: Vec<(f64, f64)> = [1024.0f64, 16384.0, 262144.0, 1048576.0]
            .iter()
            .map(|&b| (b, (1e-5 + 1e-9 * b) * if b == 16384.0 { 1.2 } else { 1.0 }))
            .collect();
        let mut s = String::from("schema_version,collective,world_size,bytes,median_s\n");
        for (b, t) in &points {
            s += &format!("1,allreduce,2,{b},{t}\n");
        }
        std::fs::write(d.join("micro_comm.csv"), s).unwrap();
        std::fs::write(d.join("netlab.txt"), "rate=1gbit\nburst=262144\n").unwrap();
        let rep = fit_dir(&d).unwrap();
        assert_eq!(
            rep.shaper,
            Some(super::super::credit::Shaper {
                rate_bytes_per_s: 1.25e8,
                burst_bytes: 262144.0,
                dilation: 1,
            })
        );
        assert_eq!(rep.rows.len(), 1);
        let c = &rep.rows[0];
        assert_eq!(c.points, 4);
        let worst = points
            .iter()
            .map(|&(b, t)| (c.fixed_s + c.per_unit_s * b - t).abs() / t)
            .fold(0.0f64, f64::max);
        assert!(worst > 0.01, "{c:?}");
        assert!(
            (c.max_rel_err - worst).abs() < 1e-9 * worst,
            "{c:?} {worst}"
        );
        let _ = std::fs::remove_dir_all(&d);
    }
}
