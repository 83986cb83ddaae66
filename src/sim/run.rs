//! `gradcomp simulate` and `gradcomp fit`: the command-line side of the simulator
//! (no MPI: both run before, and without, MPI_Init).

use super::{
    compare, fit, measured_cases, simulate_with, write_rows, CostModel, Result, SimCase, SimError,
    SimRow, SimWorkload, WireCache,
};
use crate::comm::exchange::CollectiveMode;
use crate::compress::MethodParams;
use crate::devcost::profile::CompressProfile;
use crate::schedule::plan::Fusion;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A compression profile must cover every (unmerged) method's tensors of `model` at `n`
/// workers; merged units (omgs, sketch-fusion) are priced by the roofline.
pub fn check_profile(p: &CompressProfile, model: &str, methods: &[String], n: usize) -> Result<()> {
    let m = crate::models::build(model).map_err(|e| SimError::Input(e.to_string()))?;
    let shapes: Vec<(usize, usize)> = m.tensors.iter().map(|t| t.rows_cols()).collect();
    let base: Vec<&str> = methods
        .iter()
        .filter(|x| crate::config::implied_fusion(x).is_none())
        .map(String::as_str)
        .collect();
    p.check(&base, &shapes, n)
        .map_err(|e| SimError::Input(e.to_string()))
}

/// What `gradcomp simulate` asks for (validated from the flags).
pub struct SimulateRequest {
    pub models: Vec<String>,
    pub methods: Vec<String>,
    pub fusion: Vec<Fusion>,
    pub pipelining: Vec<bool>,
    pub collectives: Vec<CollectiveMode>,
    pub world_sizes: Vec<usize>,
    pub batch: Option<usize>,
    pub device: String,
    pub params: Vec<MethodParams>,
    pub compress_on: Vec<crate::devcost::CompressOn>,
    /// Device cost preset when `compress_on` has `device`.
    pub compress_device: Option<String>,
    /// Measured device compression times (validated: it reads).
    pub compress_profile: Option<String>,
    /// Network preset, or None with `fits` set.
    pub network: Option<String>,
    /// A results directory with micro_comm.csv / micro_compress.csv to fit costs from.
    pub fits: Option<PathBuf>,
    /// Compare against this measured e2e.csv instead of sweeping the axes.
    pub compare: Option<PathBuf>,
    pub tolerance: f64,
    pub out: PathBuf,
}

/// The outcome: where sim.csv went and, for `--compare`, the cases outside the tolerance.
pub struct SimulateOutcome {
    pub sim_csv: PathBuf,
    pub rows: usize,
    pub outside_tolerance: Vec<String>,
}

fn costs_for(
    req: &SimulateRequest,
    n: usize,
    report: Option<&fit::FitReport>,
    compress_device: Option<&str>,
    profile: Option<&Arc<CompressProfile>>,
) -> Result<CostModel> {
    let mut c = match (report, &req.network) {
        (Some(rep), None) => rep.cost_model(n),
        (Some(rep), Some(net)) => Ok(CostModel::preset(net)?.with_compress_fits(rep)),
        (None, Some(net)) => CostModel::preset(net),
        (None, None) => CostModel::preset("10gbe"),
    }?;
    if let Some(d) = compress_device {
        let mut dc = crate::devcost::DeviceCosts::preset(d).map_err(SimError::Input)?;
        if let Some(p) = profile {
            dc = dc.with_profile(p.clone());
        }
        c.device = Some(dc);
    }
    Ok(c)
}

/// Run the simulator: the cartesian product of the axes, or the cases of a measured
/// e2e.csv (`--compare`), writing `OUT/sim.csv` (source=simulated) and, when comparing,
/// `OUT/sim_vs_measured.csv`.
pub fn run(req: &SimulateRequest) -> Result<SimulateOutcome> {
    // An output directory that cannot be created is bad input (exit 2), as for `run`.
    std::fs::create_dir_all(&req.out).map_err(|e| {
        SimError::Input(format!(
            "--out {}: cannot create the output directory ({e}); choose a writable path",
            req.out.display()
        ))
    })?;
    let sim_csv = req.out.join("sim.csv");
    if sim_csv.exists() {
        return Err(SimError::Input(format!(
            "{} already exists: results are never overwritten; choose a new --out",
            sim_csv.display()
        )));
    }
    let report = match &req.fits {
        Some(d) => Some(fit::fit_dir(d)?),
        None => None,
    };
    let profile = match &req.compress_profile {
        Some(p) => Some(Arc::new(
            CompressProfile::read(p).map_err(|e| SimError::Input(e.to_string()))?,
        )),
        None => None,
    };
    let mut rows = Vec::new();
    // Registered shapes' wires, shared by every case of the sweep.
    let mut wires = WireCache::default();
    let measured = req.compare.as_deref().map(measured_cases).transpose()?;
    if let Some(measured) = &measured {
        for m in measured {
            let dev = m
                .compress_device
                .as_deref()
                .or(req.compress_device.as_deref());
            let costs = costs_for(
                req,
                m.case.world_size,
                report.as_ref(),
                dev,
                profile.as_ref(),
            )?;
            let r = simulate_with(&m.case, &costs, &mut wires)?;
            rows.push(SimRow::new(&m.case, &r, &costs));
        }
    } else {
        for model in &req.models {
            let compute = crate::models::ComputeModel::from_preset(
                &crate::models::preset(&req.device).map_err(|e| SimError::Input(e.to_string()))?,
            );
            let wl = SimWorkload::zoo(model, req.batch, &compute, &req.device)?;
            for &n in &req.world_sizes {
                let dev = req.compress_device.as_deref();
                let costs = costs_for(req, n, report.as_ref(), dev, profile.as_ref())?;
                if let Some(p) = &profile {
                    check_profile(p, model, &req.methods, n)?;
                }
                for method in &req.methods {
                    // omgs / sketch-fusion imply their fusion: one case, not one per value.
                    let fusions = match crate::config::implied_fusion(method) {
                        Some(f) => vec![f],
                        None => req.fusion.clone(),
                    };
                    for p in &req.params {
                        for c in crate::config::distinct_collectives(method, &req.collectives) {
                            for &f in &fusions {
                                for &pipe in &req.pipelining {
                                    for &on in &req.compress_on {
                                        let mut case = SimCase::new(
                                            wl.clone(),
                                            method,
                                            f,
                                            pipe,
                                            c,
                                            n,
                                            p.clone(),
                                        );
                                        case.compress_on = on;
                                        let r = simulate_with(&case, &costs, &mut wires)?;
                                        rows.push(SimRow::new(&case, &r, &costs));
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    write_rows(&sim_csv, &rows)?;
    let mut outside = Vec::new();
    if let Some(measured) = &measured {
        let cmp = compare(measured, &rows)?;
        let path = req.out.join("sim_vs_measured.csv");
        let mut w = csv::Writer::from_path(&path).map_err(|e| SimError::Write {
            path: path.display().to_string(),
            msg: e.to_string(),
        })?;
        let werr = |e: &dyn std::fmt::Display| SimError::Write {
            path: path.display().to_string(),
            msg: e.to_string(),
        };
        w.write_record([
            "schema_version",
            "case",
            "method",
            "world_size",
            "measured_iter_s",
            "simulated_iter_s",
            "rel_err",
            "tolerance",
            "role",
        ])
        .map_err(|e| werr(&e))?;
        for c in &cmp {
            // These rows calibrated the host latencies at this size (sim/host.rs).
            let calibrated = req.network.is_none()
                && c.method == super::host::CALIBRATION_METHOD
                && !c.compute_none
                && report
                    .as_ref()
                    .and_then(|r| r.host.get(&c.world_size))
                    .is_some_and(|h| h.points > 0);
            let role = if calibrated {
                "calibration"
            } else {
                "validation"
            };
            w.write_record([
                crate::record::SCHEMA_VERSION.to_string(),
                c.key.clone(),
                c.method.clone(),
                c.world_size.to_string(),
                c.measured_s.to_string(),
                c.simulated_s.to_string(),
                c.rel_err.to_string(),
                req.tolerance.to_string(),
                role.to_string(),
            ])
            .map_err(|e| werr(&e))?;
            println!(
                "{:<70} measured {:>10.3} ms  simulated {:>10.3} ms  {:+6.1}%{}",
                c.key,
                c.measured_s * 1e3,
                c.simulated_s * 1e3,
                c.rel_err * 100.0,
                if calibrated { "  (calibration)" } else { "" }
            );
            if c.rel_err.abs() > req.tolerance {
                outside.push(format!("{} ({:+.1}%)", c.key, c.rel_err * 100.0));
            }
        }
        w.flush().map_err(|e| werr(&e))?;
    }
    Ok(SimulateOutcome {
        sim_csv,
        rows: rows.len(),
        outside_tolerance: outside,
    })
}

/// `gradcomp fit RESULTS_DIR`: fitted models and their errors, written next to the CSVs.
pub fn fit_command(dir: &Path) -> Result<fit::FitReport> {
    fit::fit_results(dir)
}
