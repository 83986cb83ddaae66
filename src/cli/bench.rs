//! The benchmark subcommands' own flags (micro-comm, micro-compress and micro, e2e) and
//! the config sections they build.
//!
//! `--iters`, `--warmup` and `--check` stay declared per command: their defaults, and so
//! their help, differ (scaled by message size, by tensor size, fixed for e2e).

use super::groups::e2e_section;
use super::{Common, ParamArgs, PlacementArgs, ScheduleArgs, WorkloadArgs};
use crate::config::{CompressSection, E2eSection};
use crate::error::Result;
use clap::Args;

/// The collective micro-benchmark's flags.
#[derive(Debug, Args)]
pub struct MicroCommArgs {
    #[command(flatten)]
    pub common: Common,
    /// Collectives, comma-separated: allreduce, allgather, ring-allreduce, iallreduce-overlap
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "allreduce",
        value_name = "LIST"
    )]
    pub collectives: Vec<String>,
    /// Smallest message in bytes (accepts 4, 64KiB, 256MiB)
    #[arg(
        long,
        default_value = "4",
        value_name = "SIZE",
        allow_hyphen_values = true
    )]
    pub min_bytes: String,
    /// Largest message in bytes; sizes double from --min-bytes
    #[arg(
        long,
        default_value = "64MiB",
        value_name = "SIZE",
        allow_hyphen_values = true
    )]
    pub max_bytes: String,
    /// Explicit sizes, comma-separated (e.g. 4,28,1MiB); replaces the doubling sweep
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "LIST",
        allow_hyphen_values = true
    )]
    pub sizes: Option<Vec<String>>,
    /// Timed iterations per size [default: 1000 up to 8KiB, 200 up to 1MiB, 50 up to 64MiB, then 20]
    #[arg(long, allow_negative_numbers = true, value_name = "N")]
    pub iters: Option<u64>,
    /// Warm-up iterations per size [default: a tenth of the default iterations]
    #[arg(long, allow_negative_numbers = true, value_name = "N")]
    pub warmup: Option<u64>,
    /// Validate every result against exact expected values (inputs make sums exact)
    #[arg(long)]
    pub check: bool,
}

/// Methods, tensors and hyper-parameters of micro-compress and micro.
#[derive(Debug, Args)]
pub struct CompressArgs {
    #[command(flatten)]
    pub common: Common,
    #[arg(long, value_delimiter = ',', required = true, value_name = "LIST", help = super::groups::methods_help())]
    pub methods: Vec<String>,
    /// Tensor shapes, comma-separated: ROWSxCOLS (a matrix) or N (1-D)
    #[arg(
        long = "shape",
        value_delimiter = ',',
        value_name = "LIST",
        required_unless_present_any = ["numel", "models"]
    )]
    pub shapes: Vec<String>,
    /// 1-D tensor sizes in elements, comma-separated (same as --shape N)
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub numel: Vec<String>,
    /// micro-compress only: models, comma-separated (see `gradcomp models`); every layer is
    /// compressed in turn per step (one row per model)
    #[arg(long = "model", value_delimiter = ',', value_name = "LIST")]
    pub models: Vec<String>,
    #[command(flatten)]
    pub params: ParamArgs,
    /// Timed iterations [default: 50 up to 1M elements, 20 up to 16M, then 10]
    #[arg(long, allow_negative_numbers = true, value_name = "N")]
    pub iters: Option<u64>,
    /// Warm-up iterations [default: 5, 3, 2 by the same sizes]
    #[arg(long, allow_negative_numbers = true, value_name = "N")]
    pub warmup: Option<u64>,
    /// micro only: validate every method's result against a dense reference
    #[arg(long)]
    pub check: bool,
}

/// The e2e benchmark's flags.
#[derive(Debug, Args)]
#[command(
    mut_arg("models", |a| a.required(true)),
    mut_arg("methods", |a| a.required(true))
)]
pub struct E2eArgs {
    #[command(flatten)]
    pub common: Common,
    #[command(flatten)]
    pub workload: WorkloadArgs,
    #[command(flatten)]
    pub schedule: ScheduleArgs,
    /// How the emulated device waits: sleep, spin, none (no compute)
    #[arg(long, default_value = "sleep", value_name = "MODE")]
    pub compute: String,
    /// Measured per-layer backward times (CSV: tensor,backward_s[,forward_s])
    #[arg(long, value_name = "FILE")]
    pub compute_profile: Option<String>,
    /// Planner fusions: fit collective costs from this micro_comm.csv (default: calibrate)
    #[arg(long, value_name = "FILE")]
    pub cost_comm: Option<String>,
    #[command(flatten)]
    pub placement: PlacementArgs,
    #[command(flatten)]
    pub params: ParamArgs,
    /// Timed iterations [default: 10]; the minimum with --min-time or --target-ci
    #[arg(long, allow_negative_numbers = true, value_name = "N")]
    pub iters: Option<u64>,
    /// Warm-up iterations [default: 2]
    #[arg(long, allow_negative_numbers = true, value_name = "N")]
    pub warmup: Option<u64>,
    /// Adaptive timing: time each case for at least SECONDS
    #[arg(
        long = "min-time",
        value_name = "SECONDS",
        allow_negative_numbers = true
    )]
    pub min_time_s: Option<f64>,
    /// Adaptive timing: iterate until the 95% interval of the mean is within this share of the mean (e.g. 0.02)
    #[arg(long, value_name = "SHARE", allow_negative_numbers = true)]
    pub target_ci: Option<f64>,
    /// Adaptive timing: at most N timed iterations per case [default: 1000]
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub max_iters: Option<u64>,
    /// Adaptive timing: stop a case after SECONDS of timed iterations (once --iters ran)
    #[arg(
        long = "max-time",
        value_name = "SECONDS",
        allow_negative_numbers = true
    )]
    pub max_time_s: Option<f64>,
}

impl E2eArgs {
    pub(super) fn section(&self) -> Result<E2eSection> {
        Ok(E2eSection {
            compute: self.compute.clone(),
            compute_profile: self.compute_profile.clone(),
            cost_comm: self.cost_comm.clone(),
            iters: self.iters,
            warmup: self.warmup,
            min_time_s: self.min_time_s,
            target_ci: self.target_ci,
            max_iters: self.max_iters,
            max_time_s: self.max_time_s,
            ..e2e_section(
                &self.workload,
                &self.schedule,
                &self.placement,
                &self.params,
            )?
        })
    }
}

impl CompressArgs {
    pub(super) fn section(&self) -> CompressSection {
        CompressSection {
            methods: self.methods.clone(),
            shapes: self.shapes.iter().chain(&self.numel).cloned().collect(),
            models: self.models.clone(),
            densities: self.params.density.clone(),
            lowrank_ranks: self.params.lowrank_rank.clone(),
            ranks: self.params.rank.clone(),
            params: self.params.params(),
            iters: self.iters,
            warmup: self.warmup,
            check: self.check,
        }
    }
}
