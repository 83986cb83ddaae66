//! Flag groups that several subcommands flatten in: the workload (models, methods) and
//! schedule of e2e and simulate, where compression is charged, and the method
//! hyper-parameters; and the e2e section they make together.

use crate::compress::{registry, MethodParams};
use crate::config::E2eSection;
use crate::error::{Error, Result};
use clap::Args;

/// Models and methods (e2e and simulate). Both are required by e2e, and by simulate
/// unless `--compare`: each command sets that with `mut_arg` (a flag of this group cannot
/// name `--compare`, which e2e does not have).
#[derive(Debug, Args, Clone)]
pub struct WorkloadArgs {
    /// Models, comma-separated (see `gradcomp models`)
    #[arg(long = "model", value_delimiter = ',', value_name = "LIST")]
    pub models: Vec<String>,
    #[arg(long, value_delimiter = ',', value_name = "LIST", help = e2e_methods_help())]
    pub methods: Vec<String>,
}

/// How the gradients of an iteration are scheduled, on which device (e2e and simulate).
#[derive(Debug, Args, Clone)]
pub struct ScheduleArgs {
    /// Fusion plans, comma-separated: none, single, a byte threshold (25MiB), or a planner:
    /// mgwfbp, omgs, layerfusion
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "none",
        value_name = "LIST"
    )]
    pub fusion: Vec<String>,
    /// Pipelining (wait-free backprop): on, off or on,off
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "off,on",
        value_name = "LIST"
    )]
    pub pipelining: Vec<String>,
    /// Collectives, comma-separated: auto (the method's own), allreduce, allgather, ps, ring (sums over gradcomp's ring)
    #[arg(
        long = "collective",
        value_delimiter = ',',
        default_value = "auto",
        value_name = "LIST"
    )]
    pub collectives: Vec<String>,
    /// Device preset of the compute model: v100, rtx2080ti, a100, h100, p102-100
    #[arg(long, default_value = "v100", value_name = "PRESET")]
    pub device: String,
    /// Per-worker batch size [default: the model's]
    #[arg(long, allow_negative_numbers = true, value_name = "B")]
    pub batch: Option<usize>,
}

/// The e2e section of these groups, with the keys only e2e has flags for (compute,
/// timing) at their defaults.
pub(super) fn e2e_section(
    workload: &WorkloadArgs,
    schedule: &ScheduleArgs,
    placement: &PlacementArgs,
    params: &ParamArgs,
) -> Result<E2eSection> {
    let pipelining = schedule
        .pipelining
        .iter()
        .map(|p| match p.trim() {
            "on" | "true" => Ok(true),
            "off" | "false" => Ok(false),
            other => Err(Error::Input(format!(
                "--pipelining: '{other}' is not on or off; use on, off or on,off"
            ))),
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(E2eSection {
        models: workload.models.clone(),
        methods: workload.methods.clone(),
        fusion: schedule.fusion.clone(),
        pipelining,
        collective: schedule.collectives.clone(),
        device: schedule.device.clone(),
        batch: schedule.batch,
        compute: "sleep".into(),
        compute_profile: None,
        cost_comm: None,
        compress_on: placement.compress_on.clone(),
        compress_device: placement.compress_device.clone(),
        compress_profile: placement.compress_profile.clone(),
        densities: params.density.clone(),
        lowrank_ranks: params.lowrank_rank.clone(),
        ranks: params.rank.clone(),
        params: params.params(),
        iters: None,
        warmup: None,
        min_time_s: None,
        target_ci: None,
        max_iters: None,
        max_time_s: None,
    })
}

/// Where compression is charged (e2e and simulate).
#[derive(Debug, Args, Clone)]
pub struct PlacementArgs {
    /// Where compression, packing and reduction arithmetic are charged: host (measured on
    /// this CPU), device (a GPU cost model; kernels still run here), or host,device
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "host",
        value_name = "LIST"
    )]
    pub compress_on: Vec<String>,
    /// Device cost preset for --compress-on device: v100, rtx2080ti, a100, h100, h200, p102-100, optionally
    /// with options: the per-kernel launch latency replaced (v100:launch_us=1), a reading of the
    /// references' launches (v100:topk_decompress=loop|dense-sum|index-add,
    /// v100:orth=reference|gram-schmidt|householder) [default: --device]
    #[arg(long, value_name = "PRESET")]
    pub compress_device: Option<String>,
    /// Measured device compression times (CSV from analysis/profile_compress.py) for --compress-on device
    #[arg(long, value_name = "FILE")]
    pub compress_profile: Option<String>,
}

/// Method hyper-parameters (flags named after the TOML keys; help from
/// [`crate::compress::params::PARAMS`] and the methods' specs, [`param_help`]).
#[derive(Debug, Args, Clone)]
pub struct ParamArgs {
    #[arg(
        long,
        help = param_help("density", "; a fraction (0.001) or a percentage (0.1%); a comma list sweeps"),
        value_delimiter = ',',
        allow_hyphen_values = true,
        value_name = "LIST",
        value_parser = parse_density
    )]
    pub density: Option<Vec<f64>>,
    #[arg(
        long = "lowrank-rank",
        help = param_help("rank", "; a comma list sweeps"),
        value_delimiter = ',',
        allow_hyphen_values = true,
        value_name = "LIST"
    )]
    pub lowrank_rank: Option<Vec<usize>>,
    /// Deprecated name of --lowrank-rank (accepted with a warning)
    #[arg(
        long = "rank",
        value_delimiter = ',',
        allow_hyphen_values = true,
        value_name = "LIST",
        hide = true
    )]
    pub rank: Option<Vec<usize>>,
    #[arg(long, allow_negative_numbers = true, value_name = "X", help = param_help("min_compression_rate", ""))]
    pub min_compression_rate: Option<f64>,
    #[arg(long, allow_negative_numbers = true, value_name = "N", help = param_help("start_iter", ""))]
    pub start_iter: Option<u64>,
    #[arg(long, allow_negative_numbers = true, value_name = "M", help = param_help("momentum", ""))]
    pub momentum: Option<f32>,
    #[arg(long, help = param_help("nesterov", ""))]
    pub nesterov: bool,
    #[arg(long, allow_negative_numbers = true, value_name = "X", help = param_help("clip_norm", ""))]
    pub clip_norm: Option<f32>,
    #[arg(long, allow_negative_numbers = true, value_name = "N", help = param_help("warmup_steps_per_epoch", ""))]
    pub warmup_steps_per_epoch: Option<u64>,
    #[arg(long, allow_negative_numbers = true, value_name = "N", help = param_help("sketch_rows", ""))]
    pub sketch_rows: Option<usize>,
    #[arg(long, allow_negative_numbers = true, value_name = "X", help = param_help("sketch_cols_per_k", ""))]
    pub sketch_cols_per_k: Option<f64>,
    #[arg(long, allow_negative_numbers = true, value_name = "S", help = param_help("qsgd_levels", ""))]
    pub qsgd_levels: Option<u32>,
}

/// `--methods` help of micro and micro-compress: the registry's methods.
pub(super) fn methods_help() -> String {
    format!("Methods, comma-separated: {}", registry::METHODS.join(", "))
}

/// `--methods` help of e2e and simulate: the registry's methods and the e2e ones.
pub(super) fn e2e_methods_help() -> String {
    let e2e: Vec<String> = crate::config::E2E_METHODS
        .iter()
        .map(|(m, k)| {
            let base = crate::config::base_method(m);
            format!("{m} ({base} over {k:?} groups)")
        })
        .collect();
    format!("{}, {}", methods_help(), e2e.join(", "))
}

/// Help of the flag of the [`MethodParams`] key `key`: its doc, the methods that read it,
/// `extra`, and its default (each method's own where a spec sets one).
pub(super) fn param_help(key: &str, extra: &str) -> String {
    let Some(p) = crate::compress::params::param(key) else {
        return String::new();
    };
    let readers = registry::readers(key).join(", ");
    let default = match crate::compress::params::default_values()[key].clone() {
        serde_json::Value::Bool(_) => String::new(),
        serde_json::Value::Null => {
            let own: Vec<String> = registry::SPECS
                .iter()
                .filter_map(|s| {
                    let v = match key {
                        "density" => s.density,
                        "min_compression_rate" => s.min_compression_rate,
                        _ => None,
                    };
                    v.map(|v| format!("{} {v}", s.name))
                })
                .collect();
            let global = match key {
                "density" => crate::compress::DEFAULT_DENSITY,
                _ => crate::compress::params::POWERSGD_MIN_COMPRESSION_RATE,
            };
            format!(
                " [default: each method's own: {global}; {}]",
                own.join(", ")
            )
        }
        v => format!(" [default: {v}]"),
    };
    format!("{} ({readers}; {}){extra}{default}", p.doc, p.limits)
}

/// `--density`: a fraction (`0.001`) or a percentage (`0.1%`); the range is checked
/// with the section.
pub fn parse_density(s: &str) -> std::result::Result<f64, String> {
    let t = s.trim();
    let (num, scale) = match t.strip_suffix('%') {
        Some(n) => (n.trim(), 0.01),
        None => (t, 1.0),
    };
    num.parse::<f64>().map(|v| v * scale).map_err(|_| {
        format!(
            "'{s}' is not a density: give a fraction such as 0.001 or a percentage such as 0.1%"
        )
    })
}

impl ParamArgs {
    /// The parameters with every flag given applied over the defaults.
    pub(super) fn params(&self) -> MethodParams {
        let d = MethodParams::default();
        MethodParams {
            min_compression_rate: self.min_compression_rate.or(d.min_compression_rate),
            start_iter: self.start_iter.unwrap_or(d.start_iter),
            momentum: self.momentum.unwrap_or(d.momentum),
            nesterov: self.nesterov,
            clip_norm: self.clip_norm.unwrap_or(d.clip_norm),
            warmup_steps_per_epoch: self
                .warmup_steps_per_epoch
                .unwrap_or(d.warmup_steps_per_epoch),
            sketch_rows: self.sketch_rows.unwrap_or(d.sketch_rows),
            sketch_cols_per_k: self.sketch_cols_per_k.unwrap_or(d.sketch_cols_per_k),
            qsgd_levels: self.qsgd_levels.unwrap_or(d.qsgd_levels),
            ..d
        }
    }
}

/// `--network NAME` of simulate and choose: a preset, else the error naming the presets.
/// `--network` of simulate and choose: a preset name; a network modelled only at some
/// worker counts (`omgs-1gbe`) also checks `nodes`, the counts it will join.
pub(super) fn check_network(name: &str, nodes: &[usize]) -> Result<()> {
    if name == crate::sim::published::OMGS_NETWORK {
        for &n in nodes {
            crate::sim::published::omgs_network_check(n).map_err(Error::Input)?;
        }
        return Ok(());
    }
    if crate::sim::network::preset_names().contains(&name) {
        return Ok(());
    }
    Err(Error::Input(format!(
        "--network: unknown preset '{}'; allowed: {}",
        crate::config::clip(name),
        crate::sim::network::preset_names().join(", ")
    )))
}

/// `--intra-link` of simulate and choose (the default pcie3 when not given).
pub(super) fn intra_link(link: Option<&str>) -> Result<crate::sim::topology::IntraLink> {
    match link {
        Some(l) => crate::sim::topology::IntraLink::parse(l)
            .map_err(|e| Error::Input(format!("--intra-link: {e}"))),
        None => Ok(crate::sim::topology::IntraLink::default()),
    }
}
