//! Command line (clap derive) and its translation into a [`Config`].

use crate::compress::MethodParams;
use crate::config::{
    self, CompressSection, Config, E2eSection, MicroCommSection, Origin, SizeSpec,
};
use crate::error::{Error, Result};
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

const MAIN_EXAMPLES: &str = "Examples:
  mpirun -np 4 gradcomp micro-comm --collectives allreduce,ring-allreduce --max-bytes 64MiB --check
  mpirun -np 4 gradcomp run bench-configs/laptop.toml --out results/laptop
  srun --mpi=pmix -n 16 gradcomp run bench-configs/ci.toml --expect-ranks 16";

/// gradcomp: gradient-compression benchmarks for data-parallel SGD over MPI.
///
/// Run it under mpirun/srun; every rank runs the same command. Rank 0 prints a table,
/// writes CSV files and run.json into the output directory.
#[derive(Debug, Parser)]
#[command(name = "gradcomp", version, after_help = MAIN_EXAMPLES, propagate_version = true)]
struct Parsed {
    #[command(subcommand)]
    command: Command,
}

/// The parsed command line: the subcommand, and the job flags of the subcommands that
/// take them (defaults for the others), so `--help` of each subcommand lists only the
/// flags it honours.
#[derive(Debug)]
pub struct Cli {
    pub command: Command,
    pub common: Common,
}

impl Cli {
    pub fn try_parse() -> std::result::Result<Cli, clap::Error> {
        let Parsed { command } = Parsed::try_parse()?;
        let common = match &command {
            Command::MicroComm(MicroCommArgs { common, .. })
            | Command::MicroCompress(CompressArgs { common, .. })
            | Command::Micro(CompressArgs { common, .. })
            | Command::E2e(E2eArgs { common, .. })
            | Command::Run { common, .. } => common.clone(),
            Command::Converge(a) => Common {
                job: a.job.clone(),
                ..Common::default()
            },
            Command::Simulate(_) | Command::Fit { .. } | Command::Models { .. } => {
                Common::default()
            }
        };
        Ok(Cli { command, common })
    }
}

/// Flags of every command that starts MPI ranks and writes results.
#[derive(Debug, Args, Clone, Default)]
pub struct JobFlags {
    /// Output directory (created if missing) [default: results/<UTC timestamp>]
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Abort unless the MPI world has exactly N ranks (default: $SLURM_NTASKS when set)
    #[arg(long, allow_negative_numbers = true, value_name = "N")]
    pub expect_ranks: Option<usize>,
    /// Seed of every random number generator (overrides the config's [run] seed)
    #[arg(long, allow_negative_numbers = true, value_name = "N")]
    pub seed: Option<u64>,
    /// No progress lines on stderr
    #[arg(long, short)]
    pub quiet: bool,
}

/// Flags of the benchmark commands (micro-comm, micro-compress, micro, e2e, run).
#[derive(Debug, Args, Clone, Default)]
pub struct Common {
    #[command(flatten)]
    pub job: JobFlags,
    /// e2e: write a Chrome trace (JSON for Perfetto / chrome://tracing) of rank 0's timed
    /// iterations; with several e2e cases FILE-<i>.json per case
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Skip cases whose rows are already in --out's CSV files (same case and configuration)
    #[arg(long)]
    pub resume: bool,
    /// Do not write samples.csv (every rank's time of every timed iteration; the
    /// summary CSVs are unchanged) [config: [run] samples = false]
    #[arg(long)]
    pub no_samples: bool,
    /// Run the e2e cases N times, round after round: each case's repeats spread over the
    /// run, the report takes each case's median repeat and shows the spread [config: [run]
    /// rounds] [default: 1, or the config's]
    #[arg(long, value_name = "N")]
    pub rounds: Option<usize>,
    /// End the job when one case runs longer than SECONDS (finished rows are kept)
    #[arg(long, allow_negative_numbers = true, value_name = "SECONDS", value_parser = parse_timeout)]
    pub case_timeout: Option<f64>,
    /// Run even if the estimated memory need exceeds this node's available memory
    #[arg(long)]
    pub skip_memory_check: bool,
    /// Seconds a signalled rank may take to stop in an orderly way before it exits
    /// [default: 20]
    #[arg(
        long,
        hide = true,
        allow_negative_numbers = true,
        value_name = "SECONDS"
    )]
    pub stop_grace: Option<u32>,
    /// Test hook: this rank corrupts one element of its result before --check
    #[arg(long, hide = true, value_name = "RANK")]
    pub inject_fault: Option<usize>,
    /// Test hook: this rank moves one element of its micro result by one ulp before
    /// --check (within every dense reference's tolerance: only cross-rank agreement sees it)
    #[arg(long, hide = true, value_name = "RANK")]
    pub inject_ulp_fault: Option<usize>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Collective micro-benchmarks over a sweep of message sizes (OSU / nccl-tests style)
    #[command(after_help = "Example:
  mpirun -np 4 gradcomp micro-comm --collectives allreduce,allgather,ring-allreduce,iallreduce-overlap \\
      --min-bytes 4 --max-bytes 16MiB --check --out results/comm")]
    MicroComm(MicroCommArgs),
    /// Each method's compress / feedback / decompress kernels on every rank alone
    #[command(after_help = "Examples:
  gradcomp micro-compress --methods topk,dgc,signsgd,powersgd,acpsgd --shape 5057x5054 --density 0.001 --lowrank-rank 4
  gradcomp micro-compress --methods topk,signsgd,powersgd,acpsgd --model resnet50   # every layer per step")]
    MicroCompress(CompressArgs),
    /// One tensor through compress -> collective -> decompress, per method, under MPI
    #[command(after_help = "Example:
  mpirun -np 4 gradcomp micro --methods ssgd,topk,signsgd,powersgd,marsit --shape 1024x1024 --check")]
    Micro(CompressArgs),
    /// One training iteration of a model: emulated backward, real compression, real MPI
    #[command(after_help = "Example:
  mpirun -np 4 gradcomp e2e --model resnet50 --methods ssgd,topk,powersgd,acpsgd \\
      --fusion none,25MiB,single --pipelining off,on --device v100 --batch 64 --trace trace.json")]
    E2e(E2eArgs),
    /// What-if: the e2e schedule on a virtual clock with cost models (no MPI needed)
    #[command(after_help = "Examples:
  gradcomp simulate --model resnet50,bert-base --methods ssgd,topk,powersgd,acpsgd \\
      --world-sizes 8,64,1024 --network 10gbe --fusion 25MiB --pipelining off,on --out results/sim
  gradcomp simulate --fits results/run1 --compare results/run1/e2e.csv --out results/run1-sim")]
    Simulate(SimulateArgs),
    /// Fit alpha-beta and compression cost models from a results directory (writes fits.csv, fits.json)
    #[command(after_help = "Example:
  gradcomp fit results/20261122-120000")]
    Fit {
        /// A results directory with micro_comm.csv and/or micro_compress.csv
        dir: PathBuf,
    },
    /// List the model zoo, or print one model's layers
    #[command(after_help = "Examples:
  gradcomp models
  gradcomp models resnet50")]
    Models {
        /// Model to print layer by layer (registration and backward order)
        name: Option<String>,
    },
    /// Train a real MLP under MPI with every method; loss curves beside the timings
    #[command(after_help = "Example:
  mpirun -np 2 gradcomp converge --methods ssgd,topk,powersgd,acpsgd --steps 200 --batch 32 \\
      --lr 0.05 --seed 1 --out results/converge")]
    Converge(ConvergeArgs),
    /// Run every section of a bench config (TOML)
    #[command(after_help = "Example:
  mpirun --oversubscribe -np 4 gradcomp run bench-configs/laptop.toml --out results/laptop")]
    Run {
        /// Bench config file (TOML; see bench-configs/)
        config: PathBuf,
        #[command(flatten)]
        common: Common,
    },
}

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
    #[arg(long, default_value = "4", value_name = "SIZE")]
    pub min_bytes: String,
    /// Largest message in bytes; sizes double from --min-bytes
    #[arg(long, default_value = "64MiB", value_name = "SIZE")]
    pub max_bytes: String,
    /// Explicit sizes, comma-separated (e.g. 4,28,1MiB); replaces the doubling sweep
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
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
    /// Methods, comma-separated: ssgd, signsgd, signsgd-mv, topk, dgc, powersgd, acpsgd, marsit, sketch, qsgd
    #[arg(long, value_delimiter = ',', required = true, value_name = "LIST")]
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

/// Largest simulated world size: the cost models are fitted on clusters of up to a few
/// thousand ranks, and beyond this the simulated times are meaningless.
pub const MAX_SIM_WORLD_SIZE: usize = 1 << 20;

/// The simulator's flags.
#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// Output directory (created if missing) [default: results/sim-<UTC timestamp>]
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Models, comma-separated (see `gradcomp models`)
    #[arg(
        long = "model",
        value_delimiter = ',',
        value_name = "LIST",
        required_unless_present = "compare"
    )]
    pub models: Vec<String>,
    /// Methods, comma-separated: ssgd, signsgd, signsgd-mv, topk, dgc, powersgd, acpsgd, marsit, sketch, qsgd, omgs (top-k over OMGS groups), sketch-fusion (Count Sketch over LayerFusion groups)
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "LIST",
        required_unless_present = "compare"
    )]
    pub methods: Vec<String>,
    /// Simulated world sizes, comma-separated (e.g. 8,64,1024)
    #[arg(
        long,
        value_delimiter = ',',
        allow_hyphen_values = true,
        value_name = "LIST",
        default_value = "8"
    )]
    pub world_sizes: Vec<usize>,
    /// Fusion plans, comma-separated: none, single, a byte threshold, mgwfbp, omgs, layerfusion
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "none",
        value_name = "LIST"
    )]
    pub fusion: Vec<String>,
    /// Pipelining: on, off or off,on
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "off,on",
        value_name = "LIST"
    )]
    pub pipelining: Vec<String>,
    /// Collectives: auto (the method's own), allreduce, allgather, ps, ring (sums over gradcomp's ring)
    #[arg(
        long = "collective",
        value_delimiter = ',',
        default_value = "auto",
        value_name = "LIST"
    )]
    pub collectives: Vec<String>,
    /// Per-worker batch [default: the model's]
    #[arg(long, allow_negative_numbers = true, value_name = "B")]
    pub batch: Option<usize>,
    /// Device preset of the compute model
    #[arg(long, default_value = "v100", value_name = "PRESET")]
    pub device: String,
    /// Network preset: 1gbe, 10gbe, 25gbe, 100gb-ib [default: 10gbe, or fitted with --fits]
    #[arg(long, value_name = "PRESET")]
    pub network: Option<String>,
    /// Fit collective and compression costs from this results directory (micro_comm.csv, micro_compress.csv)
    #[arg(long, value_name = "DIR")]
    pub fits: Option<PathBuf>,
    /// Ranks per node sharing one NIC (the network's link); must divide every world size [default: 1, the flat network; with --compare and --network the run's own]
    #[arg(long, allow_negative_numbers = true, value_name = "G")]
    pub ranks_per_node: Option<usize>,
    /// Link between a node's ranks with --ranks-per-node above 1: pcie3, nvlink, or ALPHA_US:GBPS (e.g. 3:20) [default: pcie3]
    #[arg(long, value_name = "LINK")]
    pub intra_link: Option<String>,
    /// Simulate every case of this measured e2e.csv and compare iter_s (fails beyond --tolerance)
    #[arg(long, value_name = "E2E_CSV")]
    pub compare: Option<PathBuf>,
    /// Largest accepted |simulated/measured - 1| with --compare
    #[arg(
        long,
        default_value = "0.15",
        allow_negative_numbers = true,
        value_name = "X"
    )]
    pub tolerance: f64,
    #[command(flatten)]
    pub placement: PlacementArgs,
    #[command(flatten)]
    pub params: ParamArgs,
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
    /// Device cost preset for --compress-on device: v100, rtx2080ti, a100, h100, optionally
    /// with the per-kernel launch latency replaced (v100:launch_us=1) [default: --device]
    #[arg(long, value_name = "PRESET")]
    pub compress_device: Option<String>,
    /// Measured device compression times (CSV from analysis/profile_compress.py) for --compress-on device
    #[arg(long, value_name = "FILE")]
    pub compress_profile: Option<String>,
}

impl SimulateArgs {
    /// Validate the flags (the same rules as e2e for the shared axes).
    pub fn request(
        &self,
        out: Option<&std::path::Path>,
    ) -> Result<crate::sim::run::SimulateRequest> {
        let models = if self.compare.is_some() && self.models.is_empty() {
            vec!["resnet20".into()]
        } else {
            self.models.clone()
        };
        let methods = if self.compare.is_some() && self.methods.is_empty() {
            vec!["ssgd".into()]
        } else {
            self.methods.clone()
        };
        let spec = E2eArgs {
            models,
            methods,
            fusion: self.fusion.clone(),
            pipelining: self.pipelining.clone(),
            collectives: self.collectives.clone(),
            device: self.device.clone(),
            batch: self.batch,
            compute: "sleep".into(),
            compute_profile: None,
            cost_comm: None,
            placement: self.placement.clone(),
            params: self.params.clone(),
            iters: None,
            warmup: None,
            min_time_s: None,
            target_ci: None,
            max_iters: None,
            max_time_s: None,
            common: Common::default(),
        }
        .section()?
        .validate(&Origin::Cli)?;
        if self.world_sizes.is_empty() || self.world_sizes.contains(&0) {
            return Err(Error::Input(
                "--world-sizes: give world sizes >= 1, e.g. 8,64,1024".into(),
            ));
        }
        if let Some(n) = self.world_sizes.iter().find(|&&n| n > MAX_SIM_WORLD_SIZE) {
            return Err(Error::Input(format!(
                "--world-sizes: {n} ranks is beyond what the simulator models; give at most {MAX_SIM_WORLD_SIZE}"
            )));
        }
        if let Some(n) = &self.network {
            if crate::sim::network::Link::preset(n).is_none() {
                return Err(Error::Input(format!(
                    "--network: unknown preset '{n}'; allowed: {}",
                    crate::sim::network::PRESETS
                        .iter()
                        .map(|p| p.0)
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        }
        if let Some(g) = self.ranks_per_node {
            if g == 0 {
                return Err(Error::Input(
                    "--ranks-per-node: 0 ranks per node; give at least 1 (1: one rank per node, the flat network)".into(),
                ));
            }
            if self.compare.is_none() {
                if let Some(n) = self.world_sizes.iter().find(|&&n| n % g != 0) {
                    return Err(Error::Input(format!(
                        "--ranks-per-node: {g} does not divide the world size {n} (--world-sizes); give a count that divides every world size, or world sizes that are multiples of {g}"
                    )));
                }
            }
        }
        let intra_link = match &self.intra_link {
            Some(l) => crate::sim::topology::IntraLink::parse(l)
                .map_err(|e| Error::Input(format!("--intra-link: {e}")))?,
            None => crate::sim::topology::IntraLink::default(),
        };
        let flat = match self.ranks_per_node {
            Some(g) => g == 1,
            None => self.compare.is_none(),
        };
        if self.intra_link.is_some() && flat {
            config::warn(
                "--intra-link has no effect with one rank per node; give --ranks-per-node G above 1".into(),
            );
        }
        if !(self.tolerance.is_finite() && self.tolerance > 0.0) {
            return Err(Error::Input(format!(
                "--tolerance: {} is not a positive number (e.g. 0.15)",
                self.tolerance
            )));
        }
        let (_, stamp) = crate::units::utc_now();
        Ok(crate::sim::run::SimulateRequest {
            models: spec.models,
            methods: spec.methods,
            fusion: spec.fusion,
            pipelining: spec.pipelining,
            collectives: spec.collectives,
            world_sizes: self.world_sizes.clone(),
            batch: spec.batch,
            device: spec.device,
            params: spec.params,
            compress_on: spec.compress_on,
            compress_device: spec.compress_device,
            compress_profile: spec.compress_profile,
            network: self.network.clone(),
            fits: self.fits.clone(),
            compare: self.compare.clone(),
            tolerance: self.tolerance,
            ranks_per_node: self.ranks_per_node,
            intra_link,
            out: out
                .map(|p| p.to_path_buf())
                .unwrap_or_else(|| PathBuf::from("results").join(format!("sim-{stamp}"))),
        })
    }
}

/// Method hyper-parameters (flags named after the TOML keys).
#[derive(Debug, Args, Clone)]
pub struct ParamArgs {
    /// Density rho in (0,1] (topk, dgc, sketch); a comma list sweeps [default: 0.001]
    #[arg(
        long,
        value_delimiter = ',',
        allow_hyphen_values = true,
        value_name = "LIST"
    )]
    pub density: Option<Vec<f64>>,
    /// Low-rank rank r (powersgd, acpsgd; not a number of MPI ranks); a comma list sweeps [default: 4]
    #[arg(
        long = "lowrank-rank",
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
    /// Power-SGD: compress only if (rows+cols)*r*rate < rows*cols [default: 2]
    #[arg(long, allow_negative_numbers = true, value_name = "X")]
    pub min_compression_rate: Option<f64>,
    /// Power-SGD dense warm-up steps [default: 0]
    #[arg(long, allow_negative_numbers = true, value_name = "N")]
    pub start_iter: Option<u64>,
    /// DGC momentum [default: 0.9]
    #[arg(long, allow_negative_numbers = true, value_name = "M")]
    pub momentum: Option<f32>,
    /// DGC Nesterov momentum
    #[arg(long)]
    pub nesterov: bool,
    /// DGC local clipping norm, 0 = off [default: 0]
    #[arg(long, allow_negative_numbers = true, value_name = "X")]
    pub clip_norm: Option<f32>,
    /// DGC steps per warm-up epoch, 0 = no warm-up [default: 0]
    #[arg(long, allow_negative_numbers = true, value_name = "N")]
    pub warmup_steps_per_epoch: Option<u64>,
    /// Count Sketch rows [default: 3]
    #[arg(long, allow_negative_numbers = true, value_name = "N")]
    pub sketch_rows: Option<usize>,
    /// Count Sketch columns per kept element [default: 10]
    #[arg(long, allow_negative_numbers = true, value_name = "X")]
    pub sketch_cols_per_k: Option<f64>,
    /// QSGD levels s [default: 127]
    #[arg(long, allow_negative_numbers = true, value_name = "S")]
    pub qsgd_levels: Option<u32>,
}

impl ParamArgs {
    /// The parameters with every flag given applied over the defaults.
    fn params(&self) -> MethodParams {
        let d = MethodParams::default();
        MethodParams {
            min_compression_rate: self.min_compression_rate.unwrap_or(d.min_compression_rate),
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

/// The e2e benchmark's flags.
#[derive(Debug, Args)]
pub struct E2eArgs {
    #[command(flatten)]
    pub common: Common,
    /// Models, comma-separated (see `gradcomp models`)
    #[arg(
        long = "model",
        value_delimiter = ',',
        required = true,
        value_name = "LIST"
    )]
    pub models: Vec<String>,
    /// Methods, comma-separated: ssgd, signsgd, signsgd-mv, topk, dgc, powersgd, acpsgd, marsit, sketch, qsgd, omgs (top-k over OMGS groups), sketch-fusion (Count Sketch over LayerFusion groups)
    #[arg(long, value_delimiter = ',', required = true, value_name = "LIST")]
    pub methods: Vec<String>,
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
    /// Device preset of the compute model: v100, rtx2080ti, a100, h100
    #[arg(long, default_value = "v100", value_name = "PRESET")]
    pub device: String,
    /// Per-worker batch size [default: the model's]
    #[arg(long, allow_negative_numbers = true, value_name = "B")]
    pub batch: Option<usize>,
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
    #[arg(long, value_name = "N")]
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
    fn section(&self) -> Result<E2eSection> {
        let pipelining = self
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
            models: self.models.clone(),
            methods: self.methods.clone(),
            fusion: self.fusion.clone(),
            pipelining,
            collective: self.collectives.clone(),
            device: self.device.clone(),
            batch: self.batch,
            compute: self.compute.clone(),
            compute_profile: self.compute_profile.clone(),
            cost_comm: self.cost_comm.clone(),
            compress_on: self.placement.compress_on.clone(),
            compress_device: self.placement.compress_device.clone(),
            compress_profile: self.placement.compress_profile.clone(),
            densities: self.params.density.clone(),
            lowrank_ranks: self.params.lowrank_rank.clone(),
            ranks: self.params.rank.clone(),
            params: self.params.params(),
            iters: self.iters,
            warmup: self.warmup,
            min_time_s: self.min_time_s,
            target_ci: self.target_ci,
            max_iters: self.max_iters,
            max_time_s: self.max_time_s,
        })
    }
}

impl CompressArgs {
    fn section(&self) -> CompressSection {
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

impl Cli {
    /// The configuration this command line asks for.
    pub fn config(&self) -> Result<Config> {
        let mut cfg =
            match &self.command {
                Command::Run { config, .. } => config::load(config)?,
                Command::MicroComm(a) => {
                    let section = MicroCommSection {
                        collectives: a.collectives.clone(),
                        min_bytes: SizeSpec::Text(a.min_bytes.clone()),
                        max_bytes: SizeSpec::Text(a.max_bytes.clone()),
                        sizes: a
                            .sizes
                            .as_ref()
                            .map(|v| v.iter().cloned().map(SizeSpec::Text).collect()),
                        iters: a.iters,
                        warmup: a.warmup,
                        check: a.check,
                    };
                    Config {
                        seed: 1,
                        expect_ranks: None,
                        case_timeout_s: None,
                        samples: true,
                        rounds: 1,
                        micro_comm: vec![section.validate(&Origin::Cli)?],
                        micro_compress: vec![],
                        micro: vec![],
                        e2e: vec![],
                    }
                }
                Command::MicroCompress(a) => Config {
                    seed: 1,
                    expect_ranks: None,
                    case_timeout_s: None,
                    samples: true,
                    rounds: 1,
                    micro_comm: vec![],
                    micro_compress: vec![a.section().validate(&Origin::Cli, false)?],
                    micro: vec![],
                    e2e: vec![],
                },
                Command::E2e(a) => Config {
                    seed: 1,
                    expect_ranks: None,
                    case_timeout_s: None,
                    samples: true,
                    rounds: 1,
                    micro_comm: vec![],
                    micro_compress: vec![],
                    micro: vec![],
                    e2e: vec![a.section()?.validate(&Origin::Cli)?],
                },
                Command::Models { .. }
                | Command::Simulate(_)
                | Command::Fit { .. }
                | Command::Converge(_) => return Err(Error::Input(
                    "this command needs no MPI configuration (a bug: handled before MPI starts)"
                        .into(),
                )),
                Command::Micro(a) => Config {
                    seed: 1,
                    expect_ranks: None,
                    case_timeout_s: None,
                    samples: true,
                    rounds: 1,
                    micro_comm: vec![],
                    micro_compress: vec![],
                    micro: vec![a.section().validate(&Origin::Cli, true)?],
                    e2e: vec![],
                },
            };
        if let Some(seed) = self.common.job.seed {
            cfg.seed = seed;
        }
        if self.common.no_samples {
            cfg.samples = false;
        }
        if let Some(r) = self.common.rounds {
            if !(1..=crate::config::MAX_ROUNDS).contains(&r) {
                return Err(Error::Input(format!(
                    "--rounds {r}: give 1 (each e2e case once) to {}",
                    crate::config::MAX_ROUNDS
                )));
            }
            cfg.rounds = r;
        }
        if let Some(n) = self.common.job.expect_ranks {
            if n == 0 {
                return Err(Error::Input(
                    "--expect-ranks: 0 is not a world size; give the number of MPI ranks (>= 1)"
                        .into(),
                ));
            }
            cfg.expect_ranks = Some(n);
        }
        let what = match &self.command {
            Command::Run { config, .. } => config.display().to_string(),
            _ => "the command line".into(),
        };
        cfg.check_cases(&what).map_err(Error::Input)?;
        Ok(cfg)
    }
}

/// Check the world size against `--expect-ranks` / the config, then `$SLURM_NTASKS`.
pub fn check_world_size(expect_ranks: Option<usize>, world_size: usize) -> Result<()> {
    if let Some(n) = expect_ranks {
        if n != world_size {
            return Err(Error::Input(format!(
                "--expect-ranks {n}: the MPI world has {world_size} rank(s); launch with mpirun -np {n} (or srun -n {n}), or change --expect-ranks"
            )));
        }
        return Ok(());
    }
    if let Ok(v) = std::env::var("SLURM_NTASKS") {
        match v.trim().parse::<usize>() {
            Ok(n) if n != world_size => {
                return Err(Error::Input(format!(
                    "SLURM_NTASKS={n} but the MPI world has {world_size} rank(s): the ranks did not join one job (with Open MPI use srun --mpi=pmix, or mpirun inside the allocation); pass --expect-ranks {world_size} to override"
                )))
            }
            Ok(_) => {}
            Err(_) => return Err(Error::Input(format!("SLURM_NTASKS='{v}' is not a number; unset it or pass --expect-ranks N"))),
        }
    }
    Ok(())
}

/// `--case-timeout`: a positive, finite number of seconds.
fn parse_timeout(s: &str) -> std::result::Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!(
            "'{s}' is not a positive number of seconds (e.g. 600)"
        )),
    }
}

/// Ranks sharing this node (from the launcher; the world size when unknown) and the
/// node's available memory (/proc/meminfo MemAvailable; `None` when unreadable).
pub fn node_memory(world_size: usize) -> (usize, Option<u64>) {
    let here = [
        "OMPI_COMM_WORLD_LOCAL_SIZE",
        "MPI_LOCALNRANKS",
        "SLURM_NTASKS_PER_NODE",
    ]
    .iter()
    .find_map(|k| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
    })
    .unwrap_or(world_size);
    let avail = std::fs::read_to_string("/proc/meminfo").ok().and_then(|s| {
        s.lines()
            .find(|l| l.starts_with("MemAvailable:"))
            .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .map(|kib| kib * 1024)
    });
    (here, avail)
}

/// `gradcomp converge` flags (the `[[converge]]` keys, src/converge/mod.rs).
#[derive(Debug, Args)]
pub struct ConvergeArgs {
    #[command(flatten)]
    pub job: JobFlags,
    /// Methods, comma-separated (as for e2e, plus the negative controls topk-noef,
    /// powersgd-noef, signsgd-noef); required unless --config
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub methods: Vec<String>,
    /// Run the [[converge]] sections of this bench config instead of the flags
    #[arg(long, value_name = "FILE", conflicts_with = "methods")]
    pub config: Option<PathBuf>,
    /// Training steps per method [default: 200]
    #[arg(long, value_name = "N")]
    pub steps: Option<u64>,
    /// Samples per worker per step [default: 32]
    #[arg(long, value_name = "B")]
    pub batch: Option<usize>,
    /// Learning rate [default: 0.05]
    #[arg(long, value_name = "X", allow_negative_numbers = true)]
    pub lr: Option<f64>,
    /// Momentum of the SGD step (DGC runs plain SGD on its own velocity) [default: 0.9]
    #[arg(long, value_name = "M", allow_negative_numbers = true)]
    pub sgd_momentum: Option<f64>,
    /// Evaluate on the held-out set every N steps and after the last [default: 50]
    #[arg(long, value_name = "N")]
    pub eval_every: Option<u64>,
    /// Fusion plan: none, single, a byte threshold (25MiB), or a planner [default: single]
    #[arg(long, value_name = "PLAN")]
    pub fusion: Option<String>,
    /// Collective: auto, allreduce, allgather, ps, ring [default: auto]
    #[arg(long, value_name = "MODE")]
    pub collective: Option<String>,
    /// Hidden layer widths, comma-separated [default: 384,384]
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub hidden: Option<Vec<usize>>,
    /// Train samples over all ranks [default: 16384]
    #[arg(long, value_name = "N")]
    pub train_samples: Option<usize>,
    /// Held-out samples [default: 2048]
    #[arg(long, value_name = "N")]
    pub eval_samples: Option<usize>,
    #[command(flatten)]
    pub params: ParamArgs,
}

impl ConvergeArgs {
    /// The sections to run with their origins, and the seed (`--seed`, else the
    /// config's `[run] seed`, else 1).
    pub fn sections(
        &self,
        seed: Option<u64>,
    ) -> Result<(u64, Vec<(Origin, crate::converge::ConvergeSection)>)> {
        if let Some(path) = &self.config {
            let (run_seed, secs) = crate::converge::sections_from_file(path)?;
            let file = path.display().to_string();
            let sections = secs
                .into_iter()
                .enumerate()
                .map(|(i, s)| {
                    (
                        Origin::File {
                            file: file.clone(),
                            section: "converge",
                            index: i + 1,
                        },
                        s,
                    )
                })
                .collect();
            return Ok((seed.unwrap_or(run_seed), sections));
        }
        let mut s = crate::converge::ConvergeSection::with_methods(self.methods.clone());
        if let Some(v) = self.steps {
            s.steps = v;
        }
        if let Some(v) = self.batch {
            s.batch = v;
        }
        if let Some(v) = self.lr {
            s.lr = v;
        }
        if let Some(v) = self.sgd_momentum {
            s.sgd_momentum = v;
        }
        if let Some(v) = self.eval_every {
            s.eval_every = v;
        }
        if let Some(v) = &self.fusion {
            s.fusion = v.clone();
        }
        if let Some(v) = &self.collective {
            s.collective = v.clone();
        }
        if let Some(v) = &self.hidden {
            s.hidden = v.clone();
        }
        if let Some(v) = self.train_samples {
            s.train_samples = v;
        }
        if let Some(v) = self.eval_samples {
            s.eval_samples = v;
        }
        s.densities = self.params.density.clone();
        s.lowrank_ranks = self.params.lowrank_rank.clone();
        s.ranks = self.params.rank.clone();
        s.params = self.params.params();
        Ok((seed.unwrap_or(1), vec![(Origin::Cli, s)]))
    }
}
