//! `gradcomp simulate` and `gradcomp fit`: the command-line side of the simulator
//! (no MPI: both run before, and without, MPI_Init).

use super::host::Layout;
use super::topology::IntraLink;
use super::{
    compare, fit, measured_cases, simulate_with, Comparison, CostModel, MeasuredCase, Result,
    SimCase, SimError, SimRow, SimWorkload, WireCache,
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

/// One sim_vs_measured.csv row (docs/csv-schema.md): a measured case and its simulated
/// iteration. Times in their `Display` form, as this file has always had them.
#[derive(Default, serde::Serialize)]
struct VsMeasuredRow {
    schema_version: u32,
    case: String,
    method: String,
    world_size: usize,
    #[serde(serialize_with = "crate::record::display")]
    measured_iter_s: f64,
    #[serde(serialize_with = "crate::record::display")]
    simulated_iter_s: f64,
    #[serde(serialize_with = "crate::record::display")]
    rel_err: f64,
    #[serde(serialize_with = "crate::record::display")]
    tolerance: f64,
    /// `calibration`: the case calibrated the host model that priced it (in sample);
    /// `validation`: it did not (a leave-one-method-out model, or another run's).
    role: &'static str,
    /// Rows (repeats) of the measured case and their spread (the median interval's
    /// width over the median, [`crate::measure::stats::spread_about_median`]).
    rounds: usize,
    spread_rel: Option<f64>,
    /// Host compression cases: the simulated host compression and decompression time
    /// over the simulated iteration (0 on the device).
    host_compress_share: f64,
    /// Host compression cases with `--fits`: how far the compression fit's own rounds
    /// move the prediction ([`super::measured::host_cost_sensitivity`] at the method's
    /// [`super::fit::FitReport::compress_spread`]; empty otherwise). The verdict judges the
    /// error against `spread_rel` plus this.
    fit_spread_rel: Option<f64>,
    /// Host compression cases: how far the run's host jitter moves the prediction
    /// ([`super::measured::host_cost_sensitivity`] at [`super::measured::host_jitter`]); the verdict's
    /// noise is at least this.
    host_jitter_rel: Option<f64>,
    /// `within`, `outside`, `too-noisy` (spread above the tolerance) or
    /// `ranks-exceed-cores` (not held to the tolerance); [`verdict`].
    verdict: &'static str,
    /// The measured run's most loaded machine when its ranks and their device threads
    /// outnumber its cores (`4 ranks + 4 device threads on 2 cores of HOST`); else empty.
    oversubscribed: String,
}

/// A case's verdict: `ranks-exceed-cores` when the measured ranks outnumbered the cores
/// (every rank waits for cores, which the target does not cover, so the case is not held
/// to it however quiet; issue 29), `too-noisy` when its own run-to-run spread exceeds the
/// tolerance (the error cannot be told from the noise), else `within` or `outside` the
/// tolerance.
pub fn verdict(
    rel_err: f64,
    spread_rel: Option<f64>,
    ranks_exceed_cores: bool,
    tolerance: f64,
) -> &'static str {
    if ranks_exceed_cores {
        "ranks-exceed-cores"
    } else if spread_rel.is_some_and(|s| s > tolerance) {
        "too-noisy"
    } else if rel_err.abs() <= tolerance {
        "within"
    } else {
        "outside"
    }
}

/// A measured case's spread in words: `spread 3.1% of 5` (rounds), or `one round: no
/// spread` when it has none (never `NaN%`).
fn spread_text(spread_rel: Option<f64>, rounds: usize) -> String {
    match spread_rel {
        Some(s) if s.is_finite() => format!("spread {:>5.1}% of {rounds}", s * 100.0),
        _ if rounds <= 1 => "one round: no spread".into(),
        _ => format!("no spread of {rounds}"),
    }
}

/// The comparison's last line. A comparison that judged no case says so ("not judged")
/// instead of "0 of 0 within", so it never reads as a pass.
fn judged_summary(
    within: usize,
    outside: usize,
    noisy: usize,
    not_held: usize,
    tolerance: f64,
) -> String {
    let rest = format!(
        "{noisy} too noisy to judge (spread over rounds, the compression fit's included, or the host jitter's share, above the tolerance), {not_held} not held to it (more ranks than cores)"
    );
    if within + outside == 0 {
        format!(
            "not judged: no case could be held to the {:.0}% tolerance, so this comparison says nothing about the simulator's accuracy; {rest}",
            tolerance * 100.0
        )
    } else {
        format!(
            "{within} of {} judged case(s) within {:.0}%; {rest}",
            within + outside,
            tolerance * 100.0
        )
    }
}

/// Per host-compression case (by label): how far its simulated iteration moves with its
/// compression fit's spread and with the run's host jitter
/// ([`super::measured::host_cost_sensitivity`]); `None` where there is none to apply.
type Sensitivity = std::collections::HashMap<String, (Option<f64>, Option<f64>)>;

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
            (Some(rep), w.into_iter().collect())
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
    if measured.is_none() && !rows.is_empty() {
        print!("{}", super::summary::best_configurations(&rows));
        if !req.steps_to_target.is_empty() {
            print!(
                "{}",
                super::summary::time_to_accuracy(&rows, &req.steps_to_target)
            );
        }
    }
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

/// Compare the simulated `rows` with the measured cases: print each case and the
/// summary, write `OUT/sim_vs_measured.csv`, and return the cases outside the tolerance.
fn write_comparison(
    req: &SimulateRequest,
    measured: &[MeasuredCase],
    rows: &[SimRow],
    in_sample: Vec<(String, bool)>,
    sensitivity: &Sensitivity,
    jitter: Option<f64>,
) -> Result<Vec<String>> {
    let cmp = compare(measured, rows)?;
    if let Some(j) = jitter {
        println!(
            "host jitter {:.1}%: the 10th to 90th percentile of the host-compression rows' time over their case's median; each host case's noise is at least how far its simulated iteration moves when its host compression does by this much",
            j * 100.0
        );
    }
    let mut out = Vec::with_capacity(cmp.len());
    let mut outside = Vec::new();
    let in_sample: std::collections::HashMap<String, bool> = in_sample.into_iter().collect();
    let layout = measured_layout(req)?;
    for c in &cmp {
        let calibrated = in_sample.get(&c.key).copied().unwrap_or(false);
        let row = vs_measured_row(req, c, calibrated, layout.as_ref(), sensitivity);
        println!("{}", case_line(&row));
        if row.verdict == "outside" {
            outside.push(format!("{} ({:+.1}%)", c.key, c.rel_err * 100.0));
        }
        out.push(row);
    }
    println!("{}", comparison_summary(&out, req.tolerance));
    let path = req.out.join("sim_vs_measured.csv");
    crate::record::write_all(&path, &out, Existing::Replace)?;
    Ok(outside)
}

/// The sim_vs_measured.csv row of comparison `c`: its noise (own spread, compression
/// fit and host jitter, the latter two for cases with host compression) and verdict.
fn vs_measured_row(
    req: &SimulateRequest,
    c: &Comparison,
    calibrated: bool,
    layout: Option<&Layout>,
    sensitivity: &Sensitivity,
) -> VsMeasuredRow {
    let (exceed, over) = case_oversubscription(layout, c.world_size, c.compute_none);
    let (fit_spread, jitter_part) = sensitivity
        .get(&c.key)
        .filter(|_| c.host_compress_share > 0.0)
        .copied()
        .unwrap_or((None, None));
    let v = verdict(
        c.rel_err,
        super::measured::case_noise(c.spread_rel, fit_spread, jitter_part),
        exceed,
        req.tolerance,
    );
    VsMeasuredRow {
        schema_version: crate::record::SCHEMA_VERSION,
        case: c.key.clone(),
        method: c.method.clone(),
        world_size: c.world_size,
        measured_iter_s: c.measured_s,
        simulated_iter_s: c.simulated_s,
        rel_err: c.rel_err,
        tolerance: req.tolerance,
        role: if calibrated {
            "calibration"
        } else {
            "validation"
        },
        rounds: c.rounds,
        spread_rel: c.spread_rel,
        host_compress_share: c.host_compress_share,
        fit_spread_rel: fit_spread,
        host_jitter_rel: jitter_part,
        verdict: v,
        oversubscribed: over,
    }
}

/// A compared case in one line: measured (with its spread and noise parts), simulated,
/// the relative error and the verdict.
fn case_line(r: &VsMeasuredRow) -> String {
    format!(
        "{:<70} measured {:>10.3} ms ({}{}{}) simulated {:>10.3} ms  {:+6.1}%  {}{}",
        r.case,
        r.measured_iter_s * 1e3,
        spread_text(r.spread_rel, r.rounds),
        r.fit_spread_rel.map_or(String::new(), |f| format!(
            ", compression fit {:.1}%",
            f * 100.0
        )),
        r.host_jitter_rel.map_or(String::new(), |j| format!(
            ", host jitter {:.1}%",
            j * 100.0
        )),
        r.simulated_iter_s * 1e3,
        r.rel_err * 100.0,
        r.verdict,
        if r.role == "calibration" {
            " (calibration)"
        } else {
            ""
        }
    )
}

/// The comparison's closing line: the verdicts' counts ([`judged_summary`]) and the
/// oversubscribed machines, if any.
fn comparison_summary(out: &[VsMeasuredRow], tolerance: f64) -> String {
    let count = |v: &str| out.iter().filter(|r| r.verdict == v).count();
    let over: std::collections::BTreeSet<&str> = out
        .iter()
        .map(|r| r.oversubscribed.as_str())
        .filter(|o| !o.is_empty())
        .collect();
    format!(
        "{}{}",
        judged_summary(
            count("within"),
            count("outside"),
            count("too-noisy"),
            count("ranks-exceed-cores"),
            tolerance
        ),
        if over.is_empty() {
            String::new()
        } else {
            format!(
                "; oversubscribed: {}",
                over.into_iter().collect::<Vec<_>>().join("; ")
            )
        }
    )
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

/// Whether the ranks of the measured run's most loaded machine `l` outnumber its cores
/// (times the run's dilation K), and, when the ranks plus their device threads (compute
/// not `none`) do, the text saying so.
/// [`oversubscription`] for a measured case of `world_size` ranks: the run's layout applies
/// to the cases of the run's own world size (every rank of the run, on every machine;
/// `ranks_total`), not to those of one machine's count.
fn case_oversubscription(
    layout: Option<&Layout>,
    world_size: usize,
    compute_none: bool,
) -> (bool, String) {
    match layout {
        Some(l) if l.ranks_total == world_size => oversubscription(l, compute_none),
        _ => (false, String::new()),
    }
}

fn oversubscription(l: &Layout, compute_none: bool) -> (bool, String) {
    let threads = if compute_none { 0 } else { l.ranks };
    let cores = l.core_equivalents();
    let over = (l.ranks + threads) as u64 > cores;
    let text = match (over, l.dilation > 1) {
        (false, _) => String::new(),
        (true, false) => format!(
            "{} ranks + {threads} device threads on {} cores of {}",
            l.ranks, l.cores, l.machine
        ),
        (true, true) => format!(
            "{} ranks + {threads} device threads on {} cores of {} at time dilation {} ({cores} core-equivalents)",
            l.ranks, l.cores, l.machine, l.dilation
        ),
    };
    (l.ranks as u64 > cores, text)
}

/// The measured run's most loaded machine, from the run.json beside `--compare`'s file
/// (else `--fits`'s).
fn measured_layout(req: &SimulateRequest) -> Result<Option<Layout>> {
    let dirs = [
        req.compare
            .as_deref()
            .and_then(Path::parent)
            .map(Path::to_path_buf),
        req.fits.clone(),
    ];
    for d in dirs.into_iter().flatten() {
        let p = d.join("run.json");
        if let Some(layout) = super::host::layout_from_run_json(&p)? {
            return Ok(Some(layout));
        }
    }
    Ok(None)
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
            steps_to_target: Vec::new(),
            models: vec![],
            methods: vec![],
            fusion: vec![],
            pipelining: vec![],
            collectives: vec![],
            world_sizes: vec![],
            batch: None,
            device: "v100".into(),
            params: vec![],
            network: network.map(String::from),
            networks: network.map(String::from).into_iter().collect(),
            fits: None,
            untrusted_fits: false,
            compare: None,
            tolerance: 0.15,
            out: PathBuf::new(),
            compress_on: vec![crate::devcost::CompressOn::Host],
            compress_device: None,
            compress_profile: None,
            ranks_per_node: g,
            intra_link: IntraLink::default(),
            planner_fallback: true,
            validate_published: false,
            network_scale: (1.0, 1.0),
        }
    }

    /// 4 ranks on 2 cores exceed them undilated; at time dilation K they have 2K
    /// core-equivalents: K = 2 holds the ranks (not their device threads), K = 4 both.
    #[test]
    fn time_dilation_multiplies_the_cores_a_run_had() {
        let at = |dilation| Layout {
            ranks: 4,
            ranks_total: 4,
            cores: 2,
            machine: "vm".into(),
            dilation,
            load_per_core_start: None,
        };
        assert_eq!(
            oversubscription(&at(1), false),
            (true, "4 ranks + 4 device threads on 2 cores of vm".into())
        );
        assert_eq!(
            oversubscription(&at(2), false),
            (
                false,
                "4 ranks + 4 device threads on 2 cores of vm at time dilation 2 (4 core-equivalents)"
                    .into()
            )
        );
        assert_eq!(oversubscription(&at(2), true), (false, String::new()));
        assert_eq!(oversubscription(&at(4), false), (false, String::new()));
        assert_eq!(at(1).what(), "4 ranks on 2 cores of vm");
    }

    #[test]
    fn verdicts_judge_only_cases_quieter_than_the_tolerance_on_enough_cores() {
        assert_eq!(verdict(0.10, Some(0.05), false, 0.15), "within");
        assert_eq!(verdict(-0.16, Some(0.05), false, 0.15), "outside");
        // One row: no spread known, judged.
        assert_eq!(verdict(-0.16, None, false, 0.15), "outside");
        // The spread decides before the error: a small error is no pass either.
        assert_eq!(verdict(0.01, Some(0.2), false, 0.15), "too-noisy");
        // More ranks than cores: not held to the tolerance, quiet or noisy.
        assert_eq!(verdict(0.5, Some(0.2), true, 0.15), "ranks-exceed-cores");
        assert_eq!(verdict(0.5, Some(0.05), true, 0.15), "ranks-exceed-cores");
        assert_eq!(verdict(0.01, None, true, 0.15), "ranks-exceed-cores");
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

    #[test]
    fn one_round_has_no_spread_and_judging_nothing_is_not_a_pass() {
        assert_eq!(spread_text(None, 1), "one round: no spread");
        assert_eq!(spread_text(Some(f64::NAN), 1), "one round: no spread");
        assert_eq!(spread_text(Some(0.031), 5), "spread   3.1% of 5");
        assert_eq!(spread_text(None, 3), "no spread of 3");
        let none = judged_summary(0, 0, 2, 4, 0.15);
        assert!(
            none.starts_with("not judged: no case could be held to the 15% tolerance"),
            "{none}"
        );
        assert!(
            none.contains("2 too noisy") && none.contains("4 not held"),
            "{none}"
        );
        assert!(!none.contains("0 of 0"), "{none}");
        let some = judged_summary(3, 1, 0, 0, 0.15);
        assert!(
            some.starts_with("3 of 4 judged case(s) within 15%;"),
            "{some}"
        );
    }

    /// Two machines: 3 ranks on `a` (2 cores), 1 on `b`: the run has 4 ranks, so its
    /// cases of 4 ranks are not held to the tolerance (3 ranks > 2 cores on `a`), and
    /// cases of another world size (3: one machine's count) are not judged by this layout.
    #[test]
    fn the_guard_matches_cases_by_the_runs_total_ranks() {
        let l = Layout {
            ranks: 3,
            ranks_total: 4,
            cores: 2,
            machine: "a".into(),
            dilation: 1,
            load_per_core_start: None,
        };
        let (exceed, text) = case_oversubscription(Some(&l), 4, false);
        assert!(exceed, "{text}");
        assert_eq!(text, "3 ranks + 3 device threads on 2 cores of a");
        assert_eq!(
            case_oversubscription(Some(&l), 3, false),
            (false, String::new())
        );
        assert_eq!(
            case_oversubscription(None, 4, false),
            (false, String::new())
        );
        // Enough cores: not exceeded, though 3 ranks + 3 threads are named.
        let big = Layout { cores: 8, ..l };
        assert_eq!(
            case_oversubscription(Some(&big), 4, true),
            (false, String::new())
        );
    }
}
