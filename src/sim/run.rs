//! `gradcomp simulate` and `gradcomp fit`: the command-line side of the simulator
//! (no MPI: both run before, and without, MPI_Init).

use super::accuracy::verdict::{write_comparison, Sensitivity};
use super::topology::IntraLink;
use super::{
    fit, measured_cases, simulate_with, CostModel, MeasuredCase, Result, SimCase, SimError, SimRow,
    SimWorkload, WireCache,
};
use crate::comm::exchange::CollectiveMode;
use crate::compress::MethodParams;
use crate::devcost::profile::CompressProfile;
use crate::devcost::CompressOn;
use crate::record::Existing;
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
#[derive(Clone)]
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
    /// The network preset of this pass (the first of `networks`), or None: fitted with
    /// `fits` set, else 10gbe.
    pub network: Option<String>,
    /// Every network preset asked for (`--network a,b`): the sweep runs once per
    /// network; empty: the default (fitted, or 10gbe).
    pub networks: Vec<String>,
    /// A results directory with micro_comm.csv / micro_compress.csv to fit costs from.
    pub fits: Option<PathBuf>,
    /// Price with a `fits` calibration [`super::trust`] judged untrusted.
    pub untrusted_fits: bool,
    /// Compare against this measured e2e.csv instead of sweeping the axes.
    pub compare: Option<PathBuf>,
    pub tolerance: f64,
    pub out: PathBuf,
    /// Ranks per node sharing one NIC (`--ranks-per-node`); `None`: 1, or with `--compare`
    /// and a preset network the measured run's own ([`ranks_per_node_for`]).
    pub ranks_per_node: Option<usize>,
    /// The link between a node's ranks (`--intra-link`; used when ranks per node > 1).
    pub intra_link: IntraLink,
    /// `--planner-fallback`: planner fusions may fall back to a simple plan (default), or
    /// run their own plan ([`SimCase::planner_fallback`]).
    pub planner_fallback: bool,
    /// `--validate-published omgs`: also write published_validation.csv
    /// ([`super::published::omgs_validation`]) for the network and compression device.
    pub validate_published: bool,
    /// Steps to dense accuracy per method configuration (`--converge FILE`): printed as
    /// time to accuracy after the sweep's table; empty: not printed.
    pub steps_to_target: Vec<super::summary::StepsToTarget>,
    /// Multipliers of a preset network's alpha and beta (`gradcomp choose`'s sensitivity
    /// sweep); (1, 1): the preset as specified.
    pub network_scale: (f64, f64),
}

impl SimulateRequest {
    /// The cases of a validated e2e section (models, methods, the schedule and placement
    /// axes, parameters) at `world_sizes`, written under `out`; every other setting as
    /// [`Self::unswept`] has it.
    pub fn of_cases(
        spec: crate::config::E2eSpec,
        world_sizes: Vec<usize>,
        out: PathBuf,
    ) -> SimulateRequest {
        SimulateRequest {
            models: spec.models,
            methods: spec.methods,
            fusion: spec.fusion,
            pipelining: spec.pipelining,
            collectives: spec.collectives,
            world_sizes,
            batch: spec.batch,
            device: spec.device,
            params: spec.params,
            compress_on: spec.compress_on,
            compress_device: spec.compress_device,
            compress_profile: spec.compress_profile,
            ..SimulateRequest::unswept(out)
        }
    }

    /// No case to sweep (every axis empty, no device), written under `out`; every other
    /// setting as `simulate` has it without flags: the default network (fitted with
    /// `fits`, else 10gbe), no fits or comparison, one rank per node, planner fallback on,
    /// no published validation, no steps to target, the preset's own alpha and beta.
    /// `tolerance` is `simulate --tolerance`'s default, the 15% target of
    /// docs/performance.md, "Simulator accuracy".
    pub fn unswept(out: PathBuf) -> SimulateRequest {
        SimulateRequest {
            models: Vec::new(),
            methods: Vec::new(),
            fusion: Vec::new(),
            pipelining: Vec::new(),
            collectives: Vec::new(),
            world_sizes: Vec::new(),
            batch: None,
            device: String::new(),
            params: Vec::new(),
            compress_on: Vec::new(),
            compress_device: None,
            compress_profile: None,
            network: None,
            networks: Vec::new(),
            fits: None,
            untrusted_fits: false,
            compare: None,
            tolerance: 0.15,
            out,
            ranks_per_node: None,
            intra_link: IntraLink::default(),
            planner_fallback: true,
            validate_published: false,
            steps_to_target: Vec::new(),
            network_scale: (1.0, 1.0),
        }
    }
}

/// OMGS-SGD's published constants beside our network preset's and device model's
/// predictions, into `OUT/published_validation.csv` (needs `--network` and
/// `--compress-device`, which name what is validated).
fn write_published_validation(req: &SimulateRequest) -> Result<()> {
    let (Some(net), Some(dev)) = (&req.network, &req.compress_device) else {
        return Err(SimError::Input(
            "--validate-published omgs: give --network (e.g. 1gbe) and --compress-device (e.g. p102-100): they are what the paper's constants validate".into(),
        ));
    };
    let network = CostModel::preset(net)?.network;
    let device = crate::devcost::DeviceCosts::preset(dev).map_err(SimError::Input)?;
    let rows = super::published::omgs_validation(network.as_ref(), &device);
    crate::record::write_all(
        &req.out.join("published_validation.csv"),
        &rows,
        Existing::Refuse,
    )?;
    Ok(())
}

/// The outcome: where sim.csv went and, for `--compare`, the cases outside the tolerance.
pub struct SimulateOutcome {
    pub sim_csv: PathBuf,
    pub rows: usize,
    /// Wall time of the cases' simulation (from the first case's costs to the last
    /// row; reading fits, profiles and the --compare CSV before and writing files after
    /// excluded).
    pub simulate_s: f64,
    pub outside_tolerance: Vec<String>,
    /// What the caller should print before the result (an untrusted calibration priced
    /// anyway).
    pub warnings: Vec<String>,
}

/// The costs of `n` ranks, `g` per node: the network (preset, or fitted at `n`; with
/// `g > 1` fitted at the node count `n / g`, the network between nodes) wrapped in the
/// topology when `g > 1`.
fn costs_for(
    req: &SimulateRequest,
    n: usize,
    g: usize,
    report: Option<&fit::FitReport>,
    compress_device: Option<&str>,
    profile: Option<&Arc<CompressProfile>>,
) -> Result<CostModel> {
    let flat = match (report, &req.network) {
        (Some(rep), None) if g > 1 => {
            let nodes = n.div_ceil(g);
            let net = rep.network(nodes).map_err(|e| {
                SimError::Input(format!(
                    "--ranks-per-node {g} with --fits: the fitted collectives are the network between nodes, so they are needed at {nodes} ranks (one per node of {n} ranks); {e}"
                ))
            })?;
            let mut c = CostModel::with_network(Box::new(net)).with_compress_fits(rep);
            if let Some(h) = rep.host.get(&n) {
                c.host = h.all.clone();
            }
            c
        }
        (Some(rep), None) => rep.cost_model(n)?,
        (Some(rep), Some(net)) => {
            CostModel::preset_scaled(net, req.network_scale)?.with_compress_fits(rep)
        }
        (None, Some(net)) => CostModel::preset_scaled(net, req.network_scale)?,
        (None, None) => CostModel::preset("10gbe")?,
    };
    let mut c = flat.with_topology(g, req.intra_link.clone());
    if let Some(d) = compress_device {
        let mut dc = crate::devcost::DeviceCosts::preset(d).map_err(SimError::Input)?;
        if let Some(p) = profile {
            dc = dc.with_profile(p.clone());
        }
        c.device = Some(dc);
    }
    Ok(c)
}

/// The warning for fits of a netlab run (a link shaper) priced at `--ranks-per-node`
/// above 1: [`costs_for`] then prices the collectives between nodes at the fitted rate,
/// without the shaper's burst credit, which [`super::credit`] models for one rank per
/// node only (a node's NIC carries the hierarchical collectives' inter-node step, whose
/// volume per link `credit::link_bytes` does not give). `None` when the credit is
/// modelled or there is no shaper.
fn unmodelled_shaper(req: &SimulateRequest, dir: &Path, rep: &fit::FitReport) -> Option<String> {
    match (rep.shaper, &req.network, req.ranks_per_node) {
        (Some(s), None, Some(g)) if g > 1 => Some(format!(
            "--fits {}: the calibration run's links were shaped ({}), but at --ranks-per-node {g} the collectives between nodes are priced at the fitted rate without the shaper's burst credit (modelled at one rank per node only): exchanges smaller than the burst may be priced slower than the link delivers them",
            dir.display(),
            s.describe()
        )),
        _ => None,
    }
}

/// Ranks per node for a measured case of `n` ranks: `--ranks-per-node` when given (it
/// must divide `n`); else, with a preset network, the run's own (e2e.csv
/// `ranks_per_node`) when its ranks spanned several hosts; else 1. Fitted costs
/// (`--fits` without `--network`) were measured on the run's own placement, so they
/// are not wrapped again; a run on one host never used a network, so a preset prices
/// it flat, as asked.
pub fn ranks_per_node_for(
    req: &SimulateRequest,
    label: &str,
    n: usize,
    measured: Option<usize>,
) -> Result<usize> {
    match req.ranks_per_node {
        Some(g) if g == 0 || n % g != 0 => Err(SimError::Input(format!(
            "--ranks-per-node {g} does not divide the world size {n} of the measured case {label}; give a count of ranks per node that divides every world size in the file"
        ))),
        Some(g) => Ok(g),
        None => Ok(match measured {
            Some(g) if req.network.is_some() && g > 1 && g < n => g,
            _ => 1,
        }),
    }
}

/// What simulating a `--compare` file's cases gives: the rows, whether the host model
/// that priced each case (by label) was calibrated on it, and their [`Sensitivity`].
struct MeasuredSim {
    rows: Vec<SimRow>,
    in_sample: Vec<(String, bool)>,
    sensitivity: Sensitivity,
}

/// Run the simulator: the cartesian product of the axes, or the cases of a measured
/// e2e.csv (`--compare`), writing `OUT/sim.csv` (source=simulated), with `--fits` the
/// fits it used (`OUT/fits.csv`) and, when comparing, `OUT/sim_vs_measured.csv`.
pub fn run(req: &SimulateRequest) -> Result<SimulateOutcome> {
    let sim_csv = fresh_sim_csv(req)?;
    let (report, warnings) = match &req.fits {
        Some(d) => {
            let (rep, w) = trusted_fits(d, req.untrusted_fits)?;
            let shaper = unmodelled_shaper(req, d, &rep);
            (Some(rep), w.into_iter().chain(shaper).collect())
        }
        None => (None, Vec::new()),
    };
    let profile = match &req.compress_profile {
        Some(p) => Some(Arc::new(
            CompressProfile::read(p).map_err(|e| SimError::Input(e.to_string()))?,
        )),
        None => None,
    };
    // Registered shapes' wires, shared by every case of the sweep.
    let mut wires = WireCache::default();
    let measured = req.compare.as_deref().map(measured_cases).transpose()?;
    let t0 = std::time::Instant::now();
    // Comparing the run the host model was calibrated on: each method's cases priced by
    // the model calibrated without them (host.rs, leave one method out).
    let same_run = match (
        &req.compare,
        report.as_ref().and_then(|r| r.host_source.as_ref()),
    ) {
        (Some(a), Some(b)) => same_file(a, b),
        _ => false,
    };
    // The run's host jitter (measured.rs host_jitter).
    let jitter = measured.as_deref().and_then(|ms| {
        super::measured::host_jitter(ms.iter().flat_map(|m| {
            m.rows
                .iter()
                .filter_map(|r| r.host_s.map(|h| (m.label.as_str(), h)))
        }))
    });
    let sim = if let Some(measured) = &measured {
        let (report, profile) = (report.as_ref(), profile.as_ref());
        simulate_measured(req, measured, report, profile, same_run, jitter, &mut wires)?
    } else {
        let mut rows = Vec::new();
        if req.networks.len() > 1 {
            for net in &req.networks {
                let one = SimulateRequest {
                    network: Some(net.clone()),
                    ..req.clone()
                };
                rows.extend(sweep(&one, report.as_ref(), profile.as_ref(), &mut wires)?);
            }
        } else {
            rows = sweep(req, report.as_ref(), profile.as_ref(), &mut wires)?;
        }
        MeasuredSim {
            rows,
            in_sample: Vec::new(),
            sensitivity: Sensitivity::new(),
        }
    };
    let rows = sim.rows;
    let simulate_s = t0.elapsed().as_secs_f64();
    crate::record::write_all(&sim_csv, &rows, Existing::Refuse)?;
    print!(
        "{}",
        tables(&rows, measured.is_some(), &req.steps_to_target)
    );
    if req.validate_published {
        write_published_validation(req)?;
    }
    // The fits it used beside it (the host model with its spread over rounds and its
    // leave-one-method-out calibrations; docs/csv-schema.md, fits.csv).
    if let Some(rep) = &report {
        crate::record::write_all(&req.out.join("fits.csv"), &rep.rows, Existing::Replace)?;
    }
    let outside = match &measured {
        Some(measured) => write_comparison(
            req,
            measured,
            &rows,
            sim.in_sample,
            &sim.sensitivity,
            jitter,
        )?,
        None => Vec::new(),
    };
    Ok(SimulateOutcome {
        sim_csv,
        rows: rows.len(),
        simulate_s,
        outside_tolerance: outside,
        warnings,
    })
}

/// What `simulate` prints after a sweep: the best configuration per method
/// ([`super::summary::best_configurations`]), then, with `--converge`, the time to
/// accuracy ([`super::summary::time_to_accuracy`]); nothing when `comparing` a measured
/// run (its comparison is printed instead) or when the sweep had no case.
fn tables(
    rows: &[SimRow],
    comparing: bool,
    steps_to_target: &[super::summary::StepsToTarget],
) -> String {
    let mut out = String::new();
    if !comparing && !rows.is_empty() {
        out += &super::summary::best_configurations(rows);
        if !steps_to_target.is_empty() {
            out += &super::summary::time_to_accuracy(rows, steps_to_target);
        }
    }
    out
}

/// `OUT/sim.csv`, after creating `--out`: an output directory that cannot be created is
/// bad input (exit 2), as for `run`, and an existing sim.csv is never overwritten.
fn fresh_sim_csv(req: &SimulateRequest) -> Result<PathBuf> {
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
    Ok(sim_csv)
}

/// Simulate each measured case on its own costs ([`measured_case_costs`]) and, per host
/// compression case, how far its prediction moves with its compression fit's spread and
/// with the run's `jitter` (measured.rs host_cost_sensitivity).
fn simulate_measured(
    req: &SimulateRequest,
    measured: &[MeasuredCase],
    report: Option<&fit::FitReport>,
    profile: Option<&Arc<CompressProfile>>,
    same_run: bool,
    jitter: Option<f64>,
    wires: &mut WireCache,
) -> Result<MeasuredSim> {
    let mut sim = MeasuredSim {
        rows: Vec::new(),
        in_sample: Vec::new(),
        sensitivity: Sensitivity::new(),
    };
    for m in measured {
        let (mut costs, calibrated) = measured_case_costs(req, m, report, profile, same_run)?;
        sim.in_sample.push((m.label.clone(), calibrated));
        let r = simulate_with(&m.case, &costs, wires)?;
        if m.case.compress_on == CompressOn::Host {
            let mut moved = |rel: Option<f64>| {
                rel.map(|x| {
                    super::measured::host_cost_sensitivity(&m.case, &mut costs, wires, x, r.iter_s)
                })
                .transpose()
            };
            let fit_rel = report.and_then(|rep| rep.compress_spread(&m.case.base_method));
            let moves = (moved(fit_rel)?, moved(jitter)?);
            sim.sensitivity.insert(m.label.clone(), moves);
        }
        let mut row = SimRow::new(&m.case, &r, &costs);
        row.network = network_label(req);
        sim.rows.push(row);
    }
    Ok(sim)
}

/// A measured case's costs ([`costs_for`] at its world size and ranks per node) with the
/// calibrated host model of its world size when `--fits` has one and no `--network` is
/// given, and whether that model was calibrated on the case (in sample: the same run, a
/// model whose leave-one-method-out calibration kept the method, and compute not `none`).
fn measured_case_costs(
    req: &SimulateRequest,
    m: &MeasuredCase,
    report: Option<&fit::FitReport>,
    profile: Option<&Arc<CompressProfile>>,
    same_run: bool,
) -> Result<(CostModel, bool)> {
    let n = m.case.world_size;
    let measured_g = m.rows.first().and_then(|r| r.ranks_per_node);
    let g = ranks_per_node_for(req, &m.label, n, measured_g)?;
    let dev = m
        .compress_device
        .as_deref()
        .or(req.compress_device.as_deref());
    let mut costs = costs_for(req, n, g, report, dev, profile)?;
    let host = report.and_then(|r| r.host.get(&n));
    let mut calibrated = false;
    if let (Some(h), None) = (host, &req.network) {
        let (model, inside) = if same_run {
            h.for_method(&m.case.method)
        } else {
            (&h.all, false)
        };
        costs.host = model.clone();
        calibrated = inside && model.points > 0 && !m.rows.iter().any(|r| r.compute_none);
    }
    Ok((costs, calibrated))
}

/// The network column of sim.csv: the preset, `fitted` (`--fits` without `--network`),
/// or the default `10gbe`.
fn network_label(req: &SimulateRequest) -> String {
    match (&req.network, &req.fits) {
        (Some(n), _) => n.clone(),
        (None, Some(_)) => "fitted".into(),
        (None, None) => "10gbe".into(),
    }
}

/// The cartesian product of the request's axes on its one network (`req.network`).
pub(super) fn sweep(
    req: &SimulateRequest,
    report: Option<&fit::FitReport>,
    profile: Option<&Arc<CompressProfile>>,
    wires: &mut WireCache,
) -> Result<Vec<SimRow>> {
    let mut rows = Vec::new();
    let network = network_label(req);
    for model in &req.models {
        let compute = crate::models::ComputeModel::from_preset(
            &crate::models::preset(&req.device).map_err(|e| SimError::Input(e.to_string()))?,
        );
        let wl = SimWorkload::zoo(model, req.batch, &compute, &req.device)?;
        for &n in &req.world_sizes {
            let dev = req.compress_device.as_deref();
            let g = req.ranks_per_node.unwrap_or(1);
            let costs = costs_for(req, n, g, report, dev, profile)?;
            if let Some(p) = profile {
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
                                    let mut case =
                                        SimCase::new(wl.clone(), method, f, pipe, c, n, p.clone());
                                    case.compress_on = on;
                                    case.planner_fallback = req.planner_fallback;
                                    let r = simulate_with(&case, &costs, wires)?;
                                    let mut row = SimRow::new(&case, &r, &costs);
                                    row.network = network.clone();
                                    rows.push(row);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    Ok(rows)
}

/// Whether two paths name one file (compared canonicalised; as given when either
/// cannot be).
fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

/// The fits of `dir` ([`fit::fit_dir`]), refused when [`super::trust`] finds the
/// calibration untrusted unless `accept` (then with the warning to print).
pub fn trusted_fits(dir: &Path, accept: bool) -> Result<(fit::FitReport, Option<String>)> {
    let rep = fit::fit_dir(dir)?;
    let warning = super::trust::check(&rep, dir, accept)?;
    Ok((rep, warning))
}

/// `gradcomp fit RESULTS_DIR`: fitted models and their errors, written next to the CSVs.
pub fn fit_command(dir: &Path) -> Result<fit::FitReport> {
    fit::fit_results(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(network: Option<&str>, g: Option<usize>) -> SimulateRequest {
        SimulateRequest {
            device: "v100".into(),
            network: network.map(String::from),
            networks: network.map(String::from).into_iter().collect(),
            compress_on: vec![crate::devcost::CompressOn::Host],
            ranks_per_node: g,
            ..SimulateRequest::unswept(PathBuf::new())
        }
    }

    #[test]
    fn measured_ranks_per_node_apply_to_presets_across_hosts() {
        // A preset: the run's own placement when it spanned several hosts.
        let r = req(Some("10gbe"), None);
        assert_eq!(ranks_per_node_for(&r, "c", 32, Some(4)).unwrap(), 4);
        // One host (every rank on it) never used a network: flat, as asked.
        assert_eq!(ranks_per_node_for(&r, "c", 4, Some(4)).unwrap(), 1);
        assert_eq!(ranks_per_node_for(&r, "c", 32, None).unwrap(), 1);
        // Fitted costs already hold the run's placement.
        let fitted = req(None, None);
        assert_eq!(ranks_per_node_for(&fitted, "c", 32, Some(4)).unwrap(), 1);
        // The flag wins, and must divide the case's world size.
        let flag = req(Some("10gbe"), Some(8));
        assert_eq!(ranks_per_node_for(&flag, "c", 32, Some(4)).unwrap(), 8);
        let e = ranks_per_node_for(&flag, "resnet50/ssgd", 12, Some(4)).unwrap_err();
        assert!(
            e.to_string()
                .contains("--ranks-per-node 8 does not divide the world size 12"),
            "{e}"
        );
    }

    #[test]
    fn costs_wrap_the_network_only_above_one_rank_per_node() {
        let r = req(Some("100gb-ib"), None);
        let flat = costs_for(&r, 32, 1, None, None, None).unwrap();
        assert_eq!(flat.ranks_per_node, 1);
        assert!(!flat.network.describe().contains("between nodes"));
        let topo = costs_for(&r, 32, 4, None, None, None).unwrap();
        assert_eq!(topo.ranks_per_node, 4);
        assert!(topo
            .describe()
            .contains("between nodes of 4 ranks, intra-node pcie3"));
        let op = super::super::network::Op::AllReduce;
        assert!(topo.network.time_s(op, 32, 25e6) > flat.network.time_s(op, 32, 25e6));
    }

    fn tmpdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("gradcomp-run-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    /// Column `name` of the CSV at `path`, every row.
    fn csv_column(path: &Path, name: &str) -> Vec<String> {
        let mut csv = csv::Reader::from_path(path).unwrap();
        let c = csv
            .headers()
            .unwrap()
            .iter()
            .position(|h| h == name)
            .unwrap();
        csv.records().map(|x| x.unwrap()[c].to_string()).collect()
    }

    /// sim.csv's network column: the preset, `fitted` with fits and no preset, else the
    /// default 10gbe.
    #[test]
    fn the_network_label_is_the_preset_fitted_or_10gbe() {
        assert_eq!(network_label(&req(Some("1gbe"), None)), "1gbe");
        let mut r = req(None, None);
        assert_eq!(network_label(&r), "10gbe");
        r.fits = Some(PathBuf::from("/runs/r1"));
        assert_eq!(network_label(&r), "fitted");
        r.network = Some("100gb-ib".into());
        assert_eq!(network_label(&r), "100gb-ib");
    }

    /// One file named two ways (through `sub/..`) is one file; two files are two; paths
    /// that do not exist are compared as given.
    #[test]
    fn same_file_compares_canonical_paths() {
        let d = tmpdir("same");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("a.csv"), "x").unwrap();
        std::fs::write(d.join("b.csv"), "x").unwrap();
        // `sub/..` is kept by Path's comparison (it is not `.`): only the canonical paths
        // are equal.
        std::fs::create_dir_all(d.join("sub")).unwrap();
        assert!(same_file(
            &d.join("a.csv"),
            &d.join("sub").join("..").join("a.csv")
        ));
        assert!(!same_file(&d.join("a.csv"), &d.join("b.csv")));
        assert!(same_file(
            Path::new("no/such.csv"),
            Path::new("no/such.csv")
        ));
        assert!(!same_file(
            Path::new("no/such.csv"),
            Path::new("no/other.csv")
        ));
        let _ = std::fs::remove_dir_all(&d);
    }

    /// A sweep of resnet20 at 4 ranks, S-SGD and OMGS (its own fusion: one case, not one
    /// per fusion asked), fusion none and single, pipelining off and on: 4 + 2 rows. With
    /// two networks, `run` sweeps each (sim.csv's network column names both), writes
    /// OUT/sim.csv (created with `--out`) and refuses to overwrite it.
    #[test]
    fn run_sweeps_every_network_asked_into_a_fresh_sim_csv() {
        let d = tmpdir("sweep");
        let mut r = req(Some("10gbe"), None);
        r.models = vec!["resnet20".into()];
        r.methods = vec!["ssgd".into(), "omgs".into()];
        r.fusion = vec![Fusion::None, Fusion::Single];
        r.pipelining = vec![false, true];
        r.collectives = vec![CollectiveMode::Native];
        r.world_sizes = vec![4];
        r.params = vec![MethodParams::default()];
        let rows = sweep(&r, None, None, &mut WireCache::default()).unwrap();
        assert_eq!(rows.len(), 2 * 2 + 2);
        assert!(rows
            .iter()
            .all(|x| x.network == "10gbe" && x.world_size == 4));
        r.networks = vec!["10gbe".into(), "1gbe".into()];
        r.out = d.join("out");
        let o = run(&r).unwrap();
        assert_eq!(o.sim_csv, d.join("out").join("sim.csv"));
        assert_eq!(o.rows, 12);
        assert!(o.outside_tolerance.is_empty() && o.warnings.is_empty());
        let nets = csv_column(&o.sim_csv, "network");
        assert_eq!(nets.len(), 12);
        assert_eq!(nets.iter().filter(|n| *n == "10gbe").count(), 6);
        assert_eq!(nets.iter().filter(|n| *n == "1gbe").count(), 6);
        let e = run(&r).err().unwrap().to_string();
        assert!(e.contains("sim.csv already exists"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }

    /// `--validate-published omgs` writes OMGS-SGD's 16 validation points (4 worker
    /// counts x 3 all-gather sizes, 4 top-k sizes) and needs both the network and the
    /// compression device.
    #[test]
    fn published_validation_needs_a_network_and_a_device_and_writes_its_points() {
        let d = tmpdir("published");
        std::fs::create_dir_all(&d).unwrap();
        let mut r = req(Some("1gbe"), None);
        r.out = d.clone();
        let e = write_published_validation(&r).unwrap_err().to_string();
        assert!(
            e.contains("--validate-published omgs: give --network"),
            "{e}"
        );
        r.compress_device = Some("p102-100".into());
        write_published_validation(&r).unwrap();
        let text = std::fs::read_to_string(d.join("published_validation.csv")).unwrap();
        assert_eq!(text.lines().count(), 1 + 16);
        let _ = std::fs::remove_dir_all(&d);
    }

    /// A results directory with micro_comm.csv alone: all-reduce at 2 ranks on the line
    /// `1e-5 + 1e-9 bytes` exactly; with `shaped`, the netlab.txt of a link shaped to
    /// 1 Gbit/s with a 256 KiB burst (scripts/netlab.sh's keys).
    fn fits_dir(tag: &str, shaped: bool) -> PathBuf {
        let d = tmpdir(tag);
        std::fs::create_dir_all(&d).unwrap();
        let mut s = String::from("schema_version,collective,world_size,bytes,median_s\n");
        for b in [1024.0f64, 65536.0, 1048576.0] {
            s += &format!("1,allreduce,2,{b},{}\n", 1e-5 + 1e-9 * b);
        }
        std::fs::write(d.join("micro_comm.csv"), s).unwrap();
        if shaped {
            std::fs::write(d.join("netlab.txt"), "rate=1gbit\nburst=262144\n").unwrap();
        }
        d
    }

    /// The recorded calibration beside busy loops (tests/data/loaded-calibration/a/np2:
    /// e2e.csv, micro_comm.csv, micro_compress.csv, run.json of 2 ranks).
    fn loaded_run() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/loaded-calibration/a/np2")
    }

    /// One measured resnet20 case of `method` at 2 ranks, one row.
    fn measured(method: &str, on: CompressOn, compute_none: bool) -> MeasuredCase {
        let compute =
            crate::models::ComputeModel::from_preset(&crate::models::preset("v100").unwrap());
        let wl = SimWorkload::zoo("resnet20", None, &compute, "v100").unwrap();
        let mut case = SimCase::new(
            wl,
            method,
            Fusion::None,
            false,
            CollectiveMode::Native,
            2,
            MethodParams::default(),
        );
        case.compress_on = on;
        MeasuredCase {
            case,
            label: format!("resnet20/{method}/{on:?}/none={compute_none}"),
            rows: vec![super::super::MeasuredRow {
                fwd_s: 1e-3,
                iter_s: 1e-2,
                compute_none,
                ranks_per_node: None,
                host_s: None,
            }],
            compress_device: None,
        }
    }

    /// `--fits` at one rank per node is the fitted cost model of the case's ranks, with
    /// the netlab run's shaper (`FitReport::cost_model`); at 4 per node, 8 ranks are
    /// priced with the fit at 2 ranks (one per node: micro_comm.csv has no fit at 8)
    /// between nodes, and the host model calibrated at 8 ranks.
    #[test]
    fn fitted_costs_above_one_rank_per_node_take_the_network_between_nodes() {
        let d = fits_dir("costs-fits", true);
        let mut rep = fit::fit_dir(&d).unwrap();
        // tc's units (tc(8)): 1gbit = 1e9 bit/s, 1.25e8 bytes/s.
        let shaper = super::super::credit::Shaper {
            rate_bytes_per_s: 1.25e8,
            burst_bytes: 262144.0,
            dilation: 1,
        };
        assert_eq!(rep.shaper, Some(shaper));
        let at8 = super::super::host::HostModel {
            start_s: 3e-4,
            ..Default::default()
        };
        rep.host.insert(
            8,
            super::super::host::HostCalibration {
                all: at8,
                held_out: Default::default(),
            },
        );
        let r = req(None, None);
        let one = costs_for(&r, 2, 1, Some(&rep), None, None).unwrap();
        assert_eq!((one.ranks_per_node, one.shaper), (1, Some(shaper)));
        let four = costs_for(&r, 8, 4, Some(&rep), None, None).unwrap();
        assert_eq!((four.ranks_per_node, four.host.start_s), (4, 3e-4));
        assert!(
            four.describe().contains("between nodes of 4 ranks"),
            "{}",
            four.describe()
        );
        // 8 ranks flat need a fit at 8.
        let e = costs_for(&r, 8, 1, Some(&rep), None, None)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("no fitted collective model at world size 8"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    /// Fits of a shaped (netlab) run priced above one rank per node lose the shaper's
    /// burst credit, and `simulate` says so once, naming the flag and the shaping; at one
    /// rank per node, with a preset network or without a shaper it says nothing.
    #[test]
    fn a_shaper_left_out_above_one_rank_per_node_is_a_warning() {
        let (shaped, plain) = (fits_dir("warn-shaped", true), fits_dir("warn-plain", false));
        let sweep_at = |fits: &Path, n: usize, g: Option<usize>, out: &str| {
            let mut r = req(None, g);
            r.networks = Vec::new();
            r.fits = Some(fits.to_path_buf());
            r.models = vec!["resnet20".into()];
            r.methods = vec!["ssgd".into()];
            r.fusion = vec![Fusion::None];
            r.pipelining = vec![false];
            r.collectives = vec![CollectiveMode::Native];
            r.world_sizes = vec![n];
            r.params = vec![MethodParams::default()];
            r.out = fits.join(out);
            let o = run(&r).unwrap();
            assert_eq!(o.rows, 1);
            o.warnings
        };
        let w = sweep_at(&shaped, 8, Some(4), "g4");
        assert_eq!(w.len(), 1, "{w:?}");
        for part in [
            "--ranks-per-node 4",
            "tbf 1.000 Gbit/s burst 262144 B",
            "without the shaper's burst credit",
        ] {
            assert!(w[0].contains(part), "{part}: {}", w[0]);
        }
        assert!(w[0].starts_with(&format!("--fits {}:", shaped.display())));
        assert_eq!(sweep_at(&shaped, 2, Some(1), "g1"), Vec::<String>::new());
        assert_eq!(sweep_at(&shaped, 2, None, "none"), Vec::<String>::new());
        assert_eq!(sweep_at(&plain, 8, Some(4), "plain"), Vec::<String>::new());
        // A preset network prices the links itself: no fitted shaper to leave out.
        let rep = fit::fit_dir(&shaped).unwrap();
        assert!(rep.shaper.is_some());
        assert_eq!(
            unmodelled_shaper(&req(Some("1gbe"), Some(4)), &shaped, &rep),
            None
        );
        let _ = std::fs::remove_dir_all(&shaped);
        let _ = std::fs::remove_dir_all(&plain);
    }

    /// A case is in sample (sim_vs_measured.csv's `calibration` role) only when its own
    /// run calibrated the host model that priced it: the same run, a model whose
    /// calibration kept its method (no leave-one-method-out model for it), at least one
    /// point, and compute not `none`; with `--network` the host model is not used.
    #[test]
    fn a_measured_case_is_in_sample_only_where_its_own_run_calibrated_it() {
        use super::super::host::{HostCalibration, HostModel};
        let d = fits_dir("in-sample", false);
        let mut rep = fit::fit_dir(&d).unwrap();
        let all = HostModel {
            start_s: 1e-4,
            points: 3,
            methods: vec!["ssgd".into()],
            ..HostModel::default()
        };
        rep.host.insert(
            2,
            HostCalibration {
                all: all.clone(),
                held_out: Default::default(),
            },
        );
        let r = req(None, None);
        let costs = |rep: &fit::FitReport, m: &MeasuredCase, same_run: bool| {
            measured_case_costs(&r, m, Some(rep), None, same_run).unwrap()
        };
        let ssgd = measured("ssgd", CompressOn::Host, false);
        let (c, inside) = costs(&rep, &ssgd, true);
        assert!(inside);
        assert_eq!(c.host.start_s, 1e-4);
        // Another run's cases, compute `none`, a method it was not calibrated on.
        assert!(!costs(&rep, &ssgd, false).1);
        assert!(!costs(&rep, &measured("ssgd", CompressOn::Host, true), true).1);
        assert!(!costs(&rep, &measured("topk", CompressOn::Host, false), true).1);
        // A model of no points calibrated nothing.
        let mut empty = rep.clone();
        empty.host.get_mut(&2).unwrap().all.points = 0;
        assert!(!costs(&empty, &ssgd, true).1);
        // With a leave-one-method-out model for the method, the same run prices it with
        // that model, out of sample; another run with the model of every method.
        let without = HostModel {
            start_s: 2e-4,
            points: 2,
            methods: vec!["topk".into()],
            ..HostModel::default()
        };
        let mut held = rep.clone();
        held.host
            .get_mut(&2)
            .unwrap()
            .held_out
            .insert("ssgd".into(), without);
        let (c, inside) = costs(&held, &ssgd, true);
        assert!(!inside);
        assert_eq!(c.host.start_s, 2e-4);
        assert_eq!(costs(&held, &ssgd, false).0.host.start_s, 1e-4);
        // A preset network: the fits' compression costs only.
        let preset = req(Some("10gbe"), None);
        let (c, inside) = measured_case_costs(&preset, &ssgd, Some(&rep), None, true).unwrap();
        assert!(!inside);
        assert_eq!(
            c.host.start_s,
            CostModel::preset("10gbe").unwrap().host.start_s
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    /// Each measured case gives a row and its in-sample flag; only a host-compression
    /// case gets a sensitivity (how far it moves with the fit's spread, none without
    /// fits, and with the run's jitter), not a device one.
    #[test]
    fn only_host_compression_cases_get_a_sensitivity() {
        let r = SimulateRequest {
            compress_device: Some("p102-100".into()),
            ..req(Some("10gbe"), None)
        };
        let host = measured("ssgd", CompressOn::Host, false);
        let dev = measured("ssgd", CompressOn::Device, false);
        let sim = simulate_measured(
            &r,
            &[host.clone(), dev.clone()],
            None,
            None,
            false,
            Some(0.1),
            &mut WireCache::default(),
        )
        .unwrap();
        assert_eq!(sim.rows.len(), 2);
        assert!(sim.rows.iter().all(|x| x.network == "10gbe"));
        assert_eq!(
            sim.in_sample,
            [(host.label.clone(), false), (dev.label.clone(), false)]
        );
        assert_eq!(sim.sensitivity.len(), 1);
        let (fit_part, jitter_part) = sim.sensitivity[&host.label];
        assert!(
            fit_part.is_none() && jitter_part.is_some(),
            "{fit_part:?} {jitter_part:?}"
        );
    }

    /// `--compare` with the fits' own e2e.csv (named through `sub/..`): a one-method
    /// calibration has no leave-one-method-out model (host.rs `calibrate`), so its
    /// cases priced by it are `calibration` in sim_vs_measured.csv; the same rows
    /// compared from a copy are `validation`.
    #[test]
    fn comparing_the_calibration_run_itself_marks_its_cases_calibration() {
        let d = tmpdir("same-run");
        let fits = d.join("fits");
        std::fs::create_dir_all(fits.join("sub")).unwrap();
        std::fs::create_dir_all(d.join("copy")).unwrap();
        for f in ["micro_comm.csv", "micro_compress.csv", "run.json"] {
            std::fs::copy(loaded_run().join(f), fits.join(f)).unwrap();
        }
        // S-SGD's rows alone: 4 cases (fusion none and single, pipelining off and on).
        let text = std::fs::read_to_string(loaded_run().join("e2e.csv")).unwrap();
        let head = text.lines().next().unwrap();
        let col = head.split(',').position(|c| c == "method").unwrap();
        let kept: Vec<&str> = text
            .lines()
            .filter(|l| *l == head || l.split(',').nth(col) == Some("ssgd"))
            .collect();
        assert_eq!(kept.len(), 1 + 4);
        let ssgd = kept.join("\n") + "\n";
        std::fs::write(fits.join("e2e.csv"), &ssgd).unwrap();
        std::fs::write(d.join("copy").join("e2e.csv"), &ssgd).unwrap();
        let roles = |compare: PathBuf, out: &str| -> Vec<String> {
            let r = SimulateRequest {
                fits: Some(fits.clone()),
                untrusted_fits: true,
                compare: Some(compare),
                ..SimulateRequest::unswept(d.join(out))
            };
            let o = run(&r).unwrap();
            assert_eq!(o.rows, 4);
            csv_column(&d.join(out).join("sim_vs_measured.csv"), "role")
        };
        let same = fits.join("sub").join("..").join("e2e.csv");
        assert_eq!(roles(same, "same"), ["calibration"; 4]);
        assert_eq!(
            roles(d.join("copy").join("e2e.csv"), "copy"),
            ["validation"; 4]
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    /// `--fits` of a calibration [`super::super::trust`] finds untrusted (the loaded run)
    /// is refused, naming the flag, or priced with the warning under `--untrusted-fits`;
    /// a trusted one is priced with no warning. Either way the fits are the directory's.
    #[test]
    fn trusted_fits_refuses_a_loaded_calibration_unless_accepted() {
        let e = trusted_fits(&loaded_run(), false)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("the calibration run cannot be trusted") && e.contains("--untrusted-fits"),
            "{e}"
        );
        let (rep, w) = trusted_fits(&loaded_run(), true).unwrap();
        let w = w.unwrap();
        assert!(w.contains("priced anyway: --untrusted-fits"), "{w}");
        let want = fit::fit_dir(&loaded_run()).unwrap();
        assert!(!rep.rows.is_empty());
        assert_eq!(rep.rows.len(), want.rows.len());
        assert_eq!(rep.host_source, Some(loaded_run().join("e2e.csv")));
        let d = fits_dir("trusted", false);
        let (rep, w) = trusted_fits(&d, false).unwrap();
        assert_eq!(w, None);
        assert_eq!(rep.rows.len(), 1);
        assert_eq!(
            (rep.rows[0].kind, rep.rows[0].name.as_str()),
            ("comm", "allreduce")
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    /// `gradcomp fit DIR` writes fits.csv (a header and the one comm row) and fits.json
    /// into DIR and says so.
    #[test]
    fn fit_command_writes_the_fits_beside_the_csvs() {
        let d = fits_dir("fit-command", false);
        let rep = fit_command(&d).unwrap();
        assert_eq!(rep.written, [d.join("fits.csv"), d.join("fits.json")]);
        assert_eq!(rep.rows.len(), 1);
        let csv = std::fs::read_to_string(d.join("fits.csv")).unwrap();
        assert_eq!(csv.lines().count(), 1 + 1);
        assert!(
            csv.lines()
                .nth(1)
                .unwrap()
                .starts_with("comm,allreduce,-,2,"),
            "{csv}"
        );
        assert!(d.join("fits.json").exists());
        let _ = std::fs::remove_dir_all(&d);
    }

    /// A profile must cover every unmerged method's tensors at the world size: the
    /// recorded ResNet-20 profile (2 ranks) covers topk there (OMGS, merged, is priced
    /// by the roofline); ResNet-50's shapes it lacks.
    #[test]
    fn a_profile_must_cover_every_unmerged_methods_tensors() {
        let p = CompressProfile::read(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/data/compress_profile_resnet20_cpu.csv"),
        )
        .unwrap();
        check_profile(&p, "resnet20", &["topk".into(), "omgs".into()], 2).unwrap();
        let e = check_profile(&p, "resnet50", &["topk".into()], 2)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no topk compress row for shape"), "{e}");
    }

    /// After a sweep `simulate` prints the best configurations, then the time to
    /// accuracy when `--converge` gave steps; nothing when comparing or without rows.
    #[test]
    fn the_tables_printed_after_a_sweep() {
        use super::super::summary::{best_configurations, time_to_accuracy, StepsToTarget};
        let mut r = req(Some("10gbe"), None);
        r.models = vec!["resnet20".into()];
        r.methods = vec!["ssgd".into(), "topk".into()];
        r.fusion = vec![Fusion::None];
        r.pipelining = vec![false];
        r.collectives = vec![CollectiveMode::Native];
        r.world_sizes = vec![4];
        r.params = vec![MethodParams::default()];
        let rows = sweep(&r, None, None, &mut WireCache::default()).unwrap();
        assert_eq!(rows.len(), 2);
        let steps = vec![StepsToTarget {
            method: "ssgd".into(),
            world_size: 4,
            steps: Some(1000),
            fewest_steps: Some(1000),
            verdict: "reaches dense".into(),
            ..StepsToTarget::default()
        }];
        let best = best_configurations(&rows);
        let tta = time_to_accuracy(&rows, &steps);
        assert!(!best.is_empty() && tta.starts_with("time to dense accuracy"));
        assert_eq!(tables(&rows, false, &[]), best);
        assert_eq!(tables(&rows, false, &steps), format!("{best}{tta}"));
        assert_eq!(tables(&rows, true, &steps), "");
        assert_eq!(tables(&[], false, &steps), "");
    }

    /// `of_cases` takes every case axis of the e2e section (models, methods, fusion,
    /// pipelining, collectives, batch, device, parameters, placement, compression device
    /// and profile) and the world sizes and output asked; the rest as `unswept`.
    #[test]
    fn of_cases_takes_every_axis_of_the_e2e_section() {
        let spec = crate::config::E2eSpec {
            models: vec!["resnet20".into()],
            methods: vec!["topk".into()],
            fusion: vec![Fusion::Single],
            pipelining: vec![true],
            collectives: vec![CollectiveMode::AllGather],
            device: "v100".into(),
            batch: Some(32),
            compress_on: vec![CompressOn::Device],
            compress_device: Some("p102-100".into()),
            compress_profile: Some("profile.csv".into()),
            compute: crate::config::ComputeMode::Spin,
            compute_profile: None,
            cost_comm: None,
            params: vec![MethodParams {
                density: Some(0.01),
                ..MethodParams::default()
            }],
            iters: 10,
            warmup: 2,
            timing: crate::measure::stats::Timing::fixed(10),
        };
        let r = SimulateRequest::of_cases(spec.clone(), vec![2, 8], PathBuf::from("out"));
        assert_eq!(
            (
                &r.models,
                &r.methods,
                &r.fusion,
                &r.pipelining,
                &r.collectives
            ),
            (
                &spec.models,
                &spec.methods,
                &spec.fusion,
                &spec.pipelining,
                &spec.collectives
            )
        );
        assert_eq!(
            (&r.device, r.batch, &r.params, &r.compress_on),
            (&spec.device, spec.batch, &spec.params, &spec.compress_on)
        );
        assert_eq!(
            (&r.compress_device, &r.compress_profile),
            (&spec.compress_device, &spec.compress_profile)
        );
        assert_eq!(
            (&r.world_sizes[..], &r.out),
            (&[2, 8][..], &PathBuf::from("out"))
        );
        assert_eq!(
            (r.network.as_ref(), r.fits.as_ref(), r.compare.as_ref()),
            (None, None, None)
        );
        assert_eq!(
            (r.tolerance, r.planner_fallback, r.network_scale),
            (0.15, true, (1.0, 1.0))
        );
    }
}
