//! Command line (clap derive): the parser and its subcommands here; the flag groups
//! several subcommands share in `groups` and `job`, each subcommand's own flags in
//! its file, and the translation into a [`Config`](crate::config::Config) in `into_config`.
//! The commands that start MPI ranks run as a [`Job`] (`lifecycle`: start, `converge`,
//! the agreed exit code; `bench_job`: the benchmarks' outputs, run.json and resume hint).

use clap::{Parser, Subcommand};
use std::path::PathBuf;

mod bench;
mod bench_job;
mod choose;
mod converge;
mod groups;
mod into_config;
mod job;
mod lifecycle;
mod simulate;
pub use bench::{CompressArgs, E2eArgs, MicroCommArgs};
pub use choose::{ChooseArgs, ChooseRequest};
pub use converge::ConvergeArgs;
pub use groups::{ParamArgs, PlacementArgs, ScheduleArgs, WorkloadArgs};
pub use job::{check_dilation_env, check_world_size, Common, JobFlags};
pub use lifecycle::Job;
pub use simulate::{SimulateArgs, MAX_SIM_WORLD_SIZE};

const MAIN_EXAMPLES: &str = "Examples:
  mpirun -np 4 gradcomp micro-comm --collectives allreduce,ring-allreduce --max-bytes 64MiB --check
  mpirun -np 4 gradcomp run bench-configs/laptop.toml --out results/laptop
  srun --mpi=pmix -n 16 gradcomp run bench-configs/ci.toml --expect-ranks 16
More ranks than cores (a laptop): Open MPI needs mpirun --oversubscribe --bind-to none;
MPICH's mpirun runs them as written.";

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
        Ok(Cli::from_command(command))
    }

    fn from_command(command: Command) -> Cli {
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
            Command::Simulate(a) => Common {
                job: JobFlags {
                    quiet: a.quiet,
                    ..JobFlags::default()
                },
                ..Common::default()
            },
            Command::Choose(a) => Common {
                job: JobFlags {
                    quiet: a.quiet,
                    ..JobFlags::default()
                },
                ..Common::default()
            },
            Command::Fit { quiet, .. }
            | Command::Models { quiet, .. }
            | Command::Methods { quiet, .. }
            | Command::Devcost { quiet, .. } => Common {
                job: JobFlags {
                    quiet: *quiet,
                    ..JobFlags::default()
                },
                ..Common::default()
            },
        };
        Cli { command, common }
    }
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
    /// Which method reaches dense accuracy first on a cluster: every method ranked by time
    /// to accuracy (converge steps x simulated iteration), with the band of a sensitivity
    /// sweep, ties called, and a verdict line (no MPI needed)
    #[command(
        after_help = "Example (from the repository root; reads docs/data/converge-2026-11-28/converge.csv):
  gradcomp choose --model bert-large --nodes 64 --network 10gbe --gpu v100"
    )]
    Choose(ChooseArgs),
    /// Fit alpha-beta and compression cost models from a results directory (writes fits.csv, fits.json; prints a table, poor or oversubscribed fits marked)
    #[command(after_help = "Example:
  gradcomp fit results/20261122-120000")]
    Fit {
        /// A results directory with micro_comm.csv and/or micro_compress.csv
        dir: PathBuf,
        /// No progress lines on stderr
        #[arg(long, short)]
        quiet: bool,
    },
    /// The device cost model beside measured compress profiles: every row priced by a preset (writes a CSV)
    #[command(after_help = "Example:
  gradcomp devcost docs/data/h200-2026-11-26/profile-r4.csv --compress-device h200 --out model-vs-h200.csv")]
    Devcost {
        /// Compress profiles (analysis/profile_compress.py's CSV files), each priced at the parameters it records
        #[arg(required = true)]
        profiles: Vec<PathBuf>,
        /// Device cost preset whose roofline prices the rows: v100, rtx2080ti, a100, h100, h200, p102-100 (NAME:launch_us=X,topk_decompress=V,orth=V too)
        #[arg(long)]
        compress_device: String,
        /// CSV file to write (one row per measured row: measured_s, model_s, model_over_measured, launches, kernels)
        #[arg(long)]
        out: PathBuf,
        /// Also each row's time as this profile interpolates it in elements (column interpolated_s): checks the rule for shapes a profile lacks against shapes measured apart
        #[arg(long, value_name = "PROFILE")]
        interpolate_from: Option<PathBuf>,
        /// No summary table on stdout
        #[arg(long, short)]
        quiet: bool,
    },
    /// List the model zoo, or print one model's layers
    #[command(after_help = "Examples:
  gradcomp models
  gradcomp models resnet50")]
    Models {
        /// Model to print layer by layer (registration and backward order)
        name: Option<String>,
        /// Accepted for symmetry with the other subcommands (models prints no progress)
        #[arg(long, short)]
        quiet: bool,
    },
    /// Every compression method: aggregation, rounds, hyper-parameters, wire bytes,
    /// memory, device kernels and references (from each method's description in its file)
    #[command(after_help = "Examples:
  gradcomp methods
  gradcomp methods --json > analysis/methods.json   # the copy the analysis reads")]
    Methods {
        /// Print JSON (every field of every description) instead of the table
        #[arg(long)]
        json: bool,
        /// Accepted for symmetry with the other subcommands (methods prints no progress)
        #[arg(long, short)]
        quiet: bool,
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::error::ErrorKind;
    use clap::CommandFactory;

    fn parse(args: &[&str]) -> Result<Parsed, clap::Error> {
        Parsed::try_parse_from(std::iter::once("gradcomp").chain(args.iter().copied()))
    }

    #[test]
    fn the_command_definition_is_consistent() {
        Parsed::command().debug_assert();
    }

    /// `-q/--quiet` was a global flag before the subcommands got their own flags: every
    /// subcommand accepts it, short and long, and it reaches `Cli::common` (issue 30).
    #[test]
    fn every_subcommand_accepts_the_quiet_flag() {
        let base: &[&[&str]] = &[
            &["micro-comm"],
            &["micro-compress", "--methods", "topk", "--shape", "8"],
            &["micro", "--methods", "topk", "--shape", "8"],
            &["e2e", "--model", "resnet20", "--methods", "topk"],
            &["simulate", "--model", "resnet20", "--methods", "topk"],
            &["choose", "--model", "resnet20", "--nodes", "2"],
            &["fit", "dir"],
            &[
                "devcost",
                "p.csv",
                "--compress-device",
                "v100",
                "--out",
                "o.csv",
            ],
            &["models"],
            &["methods", "--json"],
            &["converge", "--methods", "topk"],
            &["run", "x.toml"],
        ];
        let names: Vec<String> = Parsed::command()
            .get_subcommands()
            .map(|c| c.get_name().to_string())
            .filter(|n| n != "help")
            .collect();
        assert_eq!(
            names.len(),
            base.len(),
            "a subcommand without a case here: {names:?}"
        );
        for b in base {
            assert!(names.contains(&b[0].to_string()), "{b:?}");
            for q in ["-q", "--quiet"] {
                let args: Vec<&str> = b.iter().copied().chain([q]).collect();
                let Parsed { command } = parse(&args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
                let cli = Cli::from_command(command);
                assert!(cli.common.job.quiet, "{args:?}");
            }
        }
    }

    /// `--density` takes a fraction or a percentage; anything else names the forms.
    #[test]
    fn density_takes_a_percentage() {
        assert_eq!(groups::parse_density("0.001"), Ok(0.001));
        assert!((groups::parse_density("0.1%").unwrap() - 0.001).abs() < 1e-15);
        let e = groups::parse_density("0.1 percent").unwrap_err();
        assert!(e.contains("percentage such as 0.1%"), "{e}");
        assert!(parse(&[
            "e2e",
            "--model",
            "resnet20",
            "--methods",
            "topk",
            "--density",
            "0.1%,1%"
        ])
        .is_ok());
    }

    /// `--trace`'s help says how per-case files are named (by case and case_id).
    #[test]
    fn trace_help_names_the_per_case_files() {
        let cmd = Parsed::command();
        let e2e = cmd.find_subcommand("e2e").unwrap();
        let help = e2e
            .get_arguments()
            .find(|a| a.get_id() == "trace")
            .and_then(|a| a.get_help())
            .unwrap()
            .to_string();
        assert!(!help.contains("<i>"), "{help}");
        assert!(help.contains("case_id"), "{help}");
    }

    /// The shared workload group is required by e2e, and by simulate unless --compare.
    #[test]
    fn each_command_sets_whether_models_and_methods_are_required() {
        let missing = |args: &[&str]| parse(args).unwrap_err().kind();
        assert_eq!(
            missing(&["e2e", "--methods", "topk"]),
            ErrorKind::MissingRequiredArgument
        );
        assert_eq!(
            missing(&["e2e", "--model", "resnet20"]),
            ErrorKind::MissingRequiredArgument
        );
        assert_eq!(
            missing(&["simulate", "--model", "resnet20"]),
            ErrorKind::MissingRequiredArgument
        );
        for ok in [
            &["e2e", "--model", "resnet20", "--methods", "topk"][..],
            &["simulate", "--model", "resnet20", "--methods", "topk"],
            &["simulate", "--compare", "e2e.csv"],
        ] {
            assert!(parse(ok).is_ok(), "{ok:?}");
        }
    }
}
