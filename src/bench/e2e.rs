//! `e2e` driver pieces: turn an [`E2eCase`] into an engine setup (model zoo + compute
//! model) and the engine's raw series into an e2e.csv row.

use crate::comm::World;
use crate::config::ComputeMode;
use crate::config::E2eCase;
use crate::devcost::profile::CompressProfile;
use crate::engine::{self, E2eSetup, TensorSpec};
use crate::error::{Error, Result};
use crate::measure::stats::Summary;
use crate::models::{self, ComputeModel};
use crate::netmodel::CommModels;
use crate::record::{Fields, SCHEMA_VERSION};
use std::collections::HashMap;
use std::sync::Arc;

/// Everything a case needs that does not depend on the method.
pub struct Workload {
    pub tensors: Vec<TensorSpec>,
    pub bwd_s: Vec<f64>,
    pub fwd_s: f64,
    pub batch: usize,
    pub compute_source: String,
}

pub fn workload(c: &E2eCase) -> Result<Workload> {
    let model = models::build(&c.model).map_err(|e| Error::Input(e.to_string()))?;
    let batch = c.batch.unwrap_or(model.default_batch);
    let cm = ComputeModel::of_case(c.compute_profile.as_deref(), &c.device, &model)
        .map_err(|e| Error::Input(e.to_string()))?;
    let tensors = TensorSpec::of_model(&model);
    let (bwd_s, fwd_s) = if c.compute == ComputeMode::None {
        (vec![0.0; model.tensors.len()], 0.0)
    } else {
        (
            cm.backward_times_s(&model, batch),
            cm.forward_time_s(&model, batch),
        )
    };
    Ok(Workload {
        tensors,
        bwd_s,
        fwd_s,
        batch,
        compute_source: cm.describe(),
    })
}

/// Before any case runs: every e2e case's compression profile (`--compress-profile`)
/// covers the case's model, method and world size, so that a truncated or foreign
/// profile is refused up front (exit 2, one message) instead of failing the first case
/// that needs a missing row, after others ran. Each (profile, model, method) is
/// checked once.
pub fn preflight(cases: &[crate::config::Case], world_size: usize) -> Result<()> {
    let mut inputs = Inputs::default();
    let mut seen = std::collections::HashSet::new();
    for c in cases {
        let crate::config::Case::E2e(c) = c else {
            continue;
        };
        let (Some(_), Some(path)) = (&c.compress_device, &c.compress_profile) else {
            continue;
        };
        if !seen.insert((path, &c.model, &c.method)) {
            continue;
        }
        let prof = inputs.compress_profile(path)?;
        crate::sim::run::check_profile(
            &prof,
            &c.model,
            std::slice::from_ref(&c.method),
            world_size,
        )
        .map_err(|e| Error::Input(format!("--compress-profile {path}: {e}")))?;
    }
    Ok(())
}

/// Files the e2e cases of a run share (`--cost-comm`, `--compress-profile`), read and
/// parsed once per run instead of once per case.
#[derive(Default)]
pub struct Inputs {
    comm: HashMap<String, Arc<CommModels>>,
    profiles: HashMap<String, Arc<CompressProfile>>,
    /// Planner fusions: each case's plan, chosen by its first run; later runs of the
    /// case (rounds) run it again (the plan is part of the case).
    plans: Vec<(E2eCase, crate::schedule::planner::Choice)>,
}

impl Inputs {
    fn comm_models(&mut self, path: &str) -> Result<Arc<CommModels>> {
        if let Some(m) = self.comm.get(path) {
            return Ok(m.clone());
        }
        let m = Arc::new(
            CommModels::from_micro_comm_csv(path)
                .map_err(|e| Error::Input(format!("--cost-comm {path}: {e}")))?,
        );
        self.comm.insert(path.to_string(), m.clone());
        Ok(m)
    }

    fn compress_profile(&mut self, path: &str) -> Result<Arc<CompressProfile>> {
        if let Some(p) = self.profiles.get(path) {
            return Ok(p.clone());
        }
        let p = Arc::new(CompressProfile::read(path).map_err(|e| Error::Input(e.to_string()))?);
        self.profiles.insert(path.to_string(), p.clone());
        Ok(p)
    }
}

/// Run one case; returns the engine's measurement and (rank 0, if asked) the trace.
pub fn measure(
    world: &World,
    c: &E2eCase,
    w: &Workload,
    seed: u64,
    want_trace: bool,
    inputs: &mut Inputs,
) -> Result<(engine::E2eMeasurement, Option<engine::trace::Trace>)> {
    let models = match &c.cost_comm {
        Some(p) => Some(inputs.comm_models(p)?),
        None => None,
    };
    let device_costs = match &c.compress_device {
        Some(d) => {
            let dc = crate::devcost::DeviceCosts::preset(d).map_err(Error::Input)?;
            match &c.compress_profile {
                Some(p) => {
                    let prof = inputs.compress_profile(p)?;
                    crate::sim::run::check_profile(
                        &prof,
                        &c.model,
                        std::slice::from_ref(&c.method),
                        world.size,
                    )
                    .map_err(|e| Error::Input(e.to_string()))?;
                    Some(dc.with_profile(prof))
                }
                None => Some(dc),
            }
        }
        None => None,
    };
    let planned = inputs
        .plans
        .iter()
        .find(|(k, _)| k == c)
        .map(|(_, p)| p.clone());
    let setup = E2eSetup {
        tensors: &w.tensors,
        bwd_s: &w.bwd_s,
        fwd_s: w.fwd_s,
        method: c.base_method(),
        params: &c.params,
        seed,
        fusion: c.fusion,
        pipelining: c.pipelining,
        collective: c.collective,
        compute: c.compute,
        merge: c.merge,
        cost_comm: models.as_deref(),
        planner_costs: None,
        compress_on: c.compress_on,
        device_costs: device_costs.as_ref(),
        planned: planned.as_ref(),
    };
    let mut trace = (want_trace && world.is_root()).then(|| engine::trace::Trace::with_capacity(0));
    let m = engine::run(world, &setup, c.timing, c.warmup, trace.as_mut())?;
    if let (None, Some(choice)) = (&planned, &m.choice) {
        inputs.plans.push((c.clone(), choice.clone()));
    }
    Ok((m, trace))
}

/// Overlap efficiency (docs/architecture.md, "The e2e iteration") of a pipelined row:
/// the share of the hideable synchronisation that was hidden,
///
/// ```text
/// hideable    = min(bwd_s, sync_seq_s)
/// overlap_eff = clamp((bwd_s + sync_seq_s - bwd_sync_s) / hideable, 0, bound)
/// bound       = min(1, sync_work_s / hideable)
/// sync_work_s = pack_s + compress_s + comm_s + decompress_s   (the row's own work)
/// ```
///
/// and 0 when nothing is hideable. The numerator is the synchronisation time pipelining
/// took off the sequential case's (`sync_seq_s`, the `off` twin's `exposed_s`); it is
/// hidden behind backward only if the row's own synchronisation work was, so the row's
/// columns allow at most `min(bwd_s, sync_seq_s, sync_work_s)` hidden: a row never claims
/// more (a twin slowed by a busy machine, or a distorted backward, would otherwise read
/// 1.0 whatever the row did).
pub fn overlap_efficiency(bwd_s: f64, sync_seq_s: f64, bwd_sync_s: f64, sync_work_s: f64) -> f64 {
    let hideable = bwd_s.min(sync_seq_s);
    if hideable <= 0.0 {
        return 0.0;
    }
    let bound = (sync_work_s.max(0.0) / hideable).min(1.0);
    ((bwd_s + sync_seq_s - bwd_sync_s) / hideable).clamp(0.0, bound)
}

/// Drift of the emulated device from its compute model above which a case is reported
/// (`compute_drift`, the median over the timed iterations): 10%.
pub const DRIFT_WARN: f64 = 0.10;

/// The warning for a case whose emulated device drifted more than [`DRIFT_WARN`] from
/// its compute model (`median` and `max` of the iterations' `compute_drift`); `None`
/// within it. `explain`: say what it means and where it is recorded (the first such
/// case of a run; the later ones get one short line each).
pub fn drift_warning(label: &str, median: f64, max: f64, explain: bool) -> Option<String> {
    (median > DRIFT_WARN).then(|| {
        let mut w = format!(
            "{label}: the emulated device's compute drifted {:.0}% from the compute model (median over iterations, worst {:.0}%)",
            100.0 * median,
            100.0 * max,
        );
        if explain {
            w += &format!(
                "; above {:.0}% a busy machine (or layers shorter than the timer's resolution) distorts the row's times and overlap_eff (e2e.csv compute_drift, run.json load_avg_start)",
                100.0 * DRIFT_WARN
            );
        }
        w
    })
}

/// Medians of a finished case, used for the row and the overlap of the "on" case.
pub struct E2eMedians {
    pub bwd_s: f64,
    pub exposed_s: f64,
    pub bwd_sync_s: f64,
    /// The row's `compute_drift` and `compute_drift_max` (none without compute).
    pub compute_drift: Option<(f64, f64)>,
}

/// One row of e2e.csv (docs/csv-schema.md). `sync_seq_s`: the same configuration's
/// exposed synchronisation with pipelining off, measured in this run.
#[allow(clippy::too_many_arguments)] // the case, its measurement and each run-level column it reports
pub fn row(
    world: &World,
    run_id: &str,
    c: &E2eCase,
    w: &Workload,
    m: &mut engine::E2eMeasurement,
    sync_seq_s: Option<f64>,
    peak_rss: u64,
    params: super::Fields,
) -> (Fields, E2eMedians) {
    let s = &mut m.series;
    let med = |v: &mut Vec<f64>| Summary::of(v).median;
    let fwd = med(&mut s.fwd_s);
    let bwd = med(&mut s.bwd_s);
    let pack = med(&mut s.pack_s);
    let compress = med(&mut s.compress_s);
    let comm = med(&mut s.comm_s);
    let decompress = med(&mut s.decompress_s);
    let exposed = med(&mut s.exposed_s);
    let bwd_sync = med(&mut s.bwd_sync_s);
    let last_bucket = med(&mut s.last_bucket_s);
    let host_compress = med(&mut s.host_compress_s);
    let host_decompress = med(&mut s.host_decompress_s);
    let it = Summary::of(&mut s.iter_s);
    let dense: u64 = w.tensors.iter().map(|t| 4 * t.numel() as u64).sum();
    let sync_seq = if c.pipelining {
        sync_seq_s
    } else {
        Some(exposed)
    };
    let overlap = match (c.pipelining, sync_seq) {
        (true, Some(seq)) => Some(overlap_efficiency(
            bwd,
            seq,
            bwd_sync,
            pack + compress + comm + decompress,
        )),
        _ => None,
    };
    let drift = (!m.compute_drift.is_empty()).then(|| Summary::of(&mut m.compute_drift));
    let opt = |x: Option<f64>| x.map(|v| v.to_string()).unwrap_or_default();
    let mut f: Fields = vec![
        ("schema_version", SCHEMA_VERSION.to_string()),
        ("run_id", run_id.to_string()),
        ("model", c.model.clone()),
        ("method", c.method.clone()),
        ("fusion", c.fusion.to_string()),
        (
            "pipelining",
            if c.pipelining { "on" } else { "off" }.to_string(),
        ),
        ("collective", m.collective.to_string()),
        ("aggregation", m.aggregation.to_string()),
        ("world_size", world.size.to_string()),
        (
            "ranks_per_node",
            world
                .ranks_per_node()
                .map_or(String::new(), |g| g.to_string()),
        ),
        ("batch", w.batch.to_string()),
        (
            "device",
            if c.compute_profile.is_some() {
                "profile".to_string()
            } else {
                c.device.clone()
            },
        ),
        ("compute", c.compute.name().to_string()),
        ("compress_on", c.compress_on.name().to_string()),
        (
            "compress_device",
            c.compress_device.clone().unwrap_or_default(),
        ),
        ("iters", c.iters.to_string()),
        ("warmup", c.warmup.to_string()),
        ("iters_run", m.series.iter_s.len().to_string()),
    ];
    f.extend(params);
    f.extend([
        ("tensors", w.tensors.len().to_string()),
        ("buckets", m.buckets.to_string()),
        ("fwd_s", fwd.to_string()),
        ("bwd_s", bwd.to_string()),
        ("pack_s", pack.to_string()),
        ("compress_s", compress.to_string()),
        ("comm_s", comm.to_string()),
        ("decompress_s", decompress.to_string()),
        ("exposed_s", exposed.to_string()),
        ("bwd_sync_s", bwd_sync.to_string()),
        ("last_bucket_s", last_bucket.to_string()),
        ("host_compress_s", host_compress.to_string()),
        ("host_decompress_s", host_decompress.to_string()),
        ("iter_s", it.median.to_string()),
        ("iter_min_s", it.min.to_string()),
        ("iter_p95_s", it.p95.to_string()),
        ("iter_ci95_s", it.ci95.to_string()),
        ("dense_bytes", dense.to_string()),
        ("wire_bytes", m.wire_bytes.to_string()),
        ("planned_s", opt(m.planned_s)),
        ("plan_source", m.plan_source.clone().unwrap_or_default()),
        ("sync_seq_s", opt(sync_seq)),
        ("overlap_eff", opt(overlap)),
        ("compute_drift", opt(drift.map(|d| d.median))),
        ("compute_drift_max", opt(drift.map(|d| d.max))),
        ("peak_rss_bytes", peak_rss.to_string()),
        ("compute_source", w.compute_source.clone()),
        ("time_dilation", world.dilation().factor().to_string()),
    ]);
    (
        f,
        E2eMedians {
            bwd_s: bwd,
            exposed_s: exposed,
            bwd_sync_s: bwd_sync,
            compute_drift: drift.map(|d| (d.median, d.max)),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlap_efficiency_bounds() {
        // Fully hidden: bwd 1 s, sync 0.5 s (all of it work), pipelined bwd+sync = 1 s.
        assert_eq!(overlap_efficiency(1.0, 0.5, 1.0, 0.5), 1.0);
        // Nothing hidden.
        assert_eq!(overlap_efficiency(1.0, 0.5, 1.5, 0.5), 0.0);
        // Half hidden.
        assert!((overlap_efficiency(1.0, 0.5, 1.25, 0.5) - 0.5).abs() < 1e-12);
        assert_eq!(overlap_efficiency(0.0, 0.5, 0.5, 0.5), 0.0);
    }

    /// The row of issue 31's kind: its `off` twin was slow (sync_seq 1 ms) but the row
    /// itself only worked 0.3 ms on synchronisation, so of its 0.56 ms backward at most
    /// 0.3 ms can have hidden work: 0.3 / 0.56, not the 1.0 the unbounded formula gives
    /// ((0.56 + 1 - 0.76) / 0.56 = 1.43, clamped to 1).
    #[test]
    fn overlap_efficiency_never_exceeds_the_rows_own_work() {
        let (bwd, seq, bwd_sync, work) = (0.56e-3, 1.0e-3, 0.76e-3, 0.3e-3);
        let eff = overlap_efficiency(bwd, seq, bwd_sync, work);
        assert!((eff - 0.3 / 0.56).abs() < 1e-12, "{eff}");
        // Work beyond the hideable span does not lift the bound above 1.
        assert_eq!(overlap_efficiency(bwd, seq, bwd_sync, 5e-3), 1.0);
        // No synchronisation work: nothing can have been hidden.
        assert_eq!(overlap_efficiency(bwd, seq, bwd_sync, 0.0), 0.0);
    }

    /// Above 10% (median) a case is reported, naming the drift and the column; at or
    /// below it, not.
    #[test]
    fn drift_warning_past_ten_percent() {
        let w = drift_warning("e2e resnet20 ssgd", 0.35, 2.2, true).expect("35% warns");
        assert!(
            w.contains("e2e resnet20 ssgd") && w.contains("35%") && w.contains("220%"),
            "{w}"
        );
        assert!(w.contains("compute_drift") && w.contains("busy"), "{w}");
        let short = drift_warning("e2e resnet20 ssgd", 0.35, 2.2, false).unwrap();
        assert!(short.contains("35%") && !short.contains("busy"), "{short}");
        assert!(drift_warning("x", 0.10, 5.0, true).is_none());
        assert!(drift_warning("x", 0.02, 0.5, true).is_none());
    }

    /// On any columns, the efficiency is in [0, 1] and the hidden time it claims
    /// (`eff * min(bwd, seq)`) is at most each of `bwd`, `seq` and the row's own work.
    #[test]
    fn overlap_efficiency_claims_no_more_than_the_columns_allow() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_pcg::Pcg64::seed_from_u64(31);
        for _ in 0..10_000 {
            let bwd = rng.gen_range(0.0..2e-3);
            let seq = rng.gen_range(0.0..4e-3);
            let bwd_sync = bwd + rng.gen_range(0.0..4e-3);
            let work = rng.gen_range(0.0..4e-3);
            let eff = overlap_efficiency(bwd, seq, bwd_sync, work);
            assert!((0.0..=1.0).contains(&eff), "{eff}");
            let claimed = eff * bwd.min(seq);
            for (name, limit) in [("bwd_s", bwd), ("sync_seq_s", seq), ("sync work", work)] {
                assert!(
                    claimed <= limit * (1.0 + 1e-12),
                    "claims {claimed} s hidden, more than {name} = {limit}"
                );
            }
        }
    }
}
