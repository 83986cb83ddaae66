//! Flags of the commands that start MPI ranks (`--out`, `--seed`, `--resume`, ...) and the
//! checks of the job they start (world size, node memory).

use crate::error::{Error, Result};
use clap::Args;
use std::path::PathBuf;

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
    /// iterations; with several e2e cases one file per case, named by the case and its
    /// case_id (t.json: t-resnet50-topk-25MiB-pipe_on-allgather-<case_id>.json)
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Skip cases whose rows are already in --out's CSV files (same case and configuration)
    #[arg(long)]
    pub resume: bool,
    /// Also write samples.csv: every rank's time of every timed iteration (large: tens
    /// of bytes per rank and iteration; the summary CSVs do not need it) [config: [run]
    /// samples = true]
    #[arg(long)]
    pub samples: bool,
    /// Do not write samples.csv (the default; overrides [run] samples = true)
    #[arg(long)]
    pub no_samples: bool,
    /// Run every case (micro and e2e) N times, round after round: each case's repeats
    /// spread over the run, the report takes each case's median repeat and shows the
    /// spread [config: [run] rounds] [default: 1, or the config's]
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub rounds: Option<usize>,
    /// Time dilation K of an emulated cluster: the emulated device and host work run K
    /// times slower, every time written is divided by K; needs links shaped to RATE/K
    /// (scripts/netlab.sh up N --rate RATE --dilate K, whose run passes it) [config: [run]
    /// time_dilation] [default: 1]
    #[arg(long, value_name = "K", allow_negative_numbers = true)]
    pub time_dilation: Option<u32>,
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
    /// Test hook: this rank panics before the first case (the others wait in a
    /// collective: the panic must end the whole job)
    #[arg(long, hide = true, value_name = "RANK")]
    pub inject_panic: Option<usize>,
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

/// A dilated run needs links shaped to RATE / K, which `scripts/netlab.sh run` vouches for
/// by exporting `NETLAB_DILATE=K` to every rank: refuse `--time-dilation K` without it
/// (the device and the host would be dilated, the network not, and every row would be
/// K times too fast on the wire), and a netlab dilated by K run without the flag.
pub fn check_dilation_env(k: u32, netlab_dilate: Option<&str>) -> Result<()> {
    let env = netlab_dilate.map(str::trim);
    if env.map_or(k == 1, |v| v.parse::<u32>().ok() == Some(k)) {
        return Ok(());
    }
    Err(Error::Input(match env {
        None => format!(
            "--time-dilation {k}: the network is not dilated (NETLAB_DILATE is not set): dilation needs links shaped to RATE/{k}; run it on scripts/netlab.sh up N --rate RATE --dilate {k} through scripts/netlab.sh run, or set NETLAB_DILATE={k} if you shaped the links yourself"
        ),
        Some(v) => format!(
            "--time-dilation {k}: the network is dilated by NETLAB_DILATE={v}; give --time-dilation {v} (scripts/netlab.sh run passes it), or bring netlab up again with --dilate {k}"
        ),
    }))
}

/// `--case-timeout`: a positive, finite number of seconds, at most a year.
fn parse_timeout(s: &str) -> std::result::Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) => crate::config::check_case_timeout(v),
        _ => Err(format!(
            "'{s}' is not a positive number of seconds (e.g. 600)"
        )),
    }
}
