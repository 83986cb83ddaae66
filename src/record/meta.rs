//! `run.json`: everything needed to reproduce and identify a run.

use serde::Serialize;

/// Metadata of one invocation, written at start (with `end_time: null`) and again at
/// the end.
#[derive(Clone, Debug, Serialize)]
pub struct RunMeta {
    pub schema_version: u32,
    pub run_id: String,
    pub command_line: Vec<String>,
    pub gradcomp_version: &'static str,
    pub git_revision: &'static str,
    pub rustc_version: &'static str,
    pub mpi_library: String,
    pub mpi_standard: String,
    pub mpi_thread_level: String,
    pub world_size: usize,
    pub hosts: Vec<String>,
    /// Per rank (as `hosts`): the cores that rank may run on (`available_parallelism`:
    /// affinity and cgroup limits included). With `hosts` it tells whether ranks shared
    /// cores (the simulator's CPU share, sim/host.rs).
    pub host_cores: Vec<u64>,
    pub slurm_job_id: Option<String>,
    pub slurm_ntasks: Option<String>,
    pub slurm_nodelist: Option<String>,
    pub start_time: String,
    pub end_time: Option<String>,
    /// `running`, `ok`, `failed` or `interrupted`.
    pub status: String,
    /// Why the run failed or stopped (the first error, naming its file); null otherwise.
    pub error: Option<String>,
    /// The last case this invocation finished: label and case_id.
    pub last_case: Option<String>,
    pub cases_total: usize,
    /// Cases run (and written) by this invocation.
    pub cases_done: usize,
    /// Cases skipped by `--resume` because their rows were already there.
    pub cases_skipped: usize,
    /// `--resume`: the run_id of the run.json this one replaced (kept as run.<id>.json).
    pub resumed_from: Option<String>,
    /// The run.json this run found in the output directory, kept as this file name.
    pub previous_run: Option<String>,
    /// Memory estimate of the largest case per rank (the up-front check; bytes).
    pub estimated_peak_bytes: u64,
    /// Measured peak resident memory (VmHWM), the max over ranks (bytes); set at the end.
    pub peak_rss_bytes: Option<u64>,
    pub config: serde_json::Value,
}

/// Git revision and rustc version baked in by build.rs.
pub const GIT_REVISION: &str = env!("GRADCOMP_GIT_REVISION");
pub const RUSTC_VERSION: &str = env!("GRADCOMP_RUSTC_VERSION");

/// The MPI library's version string, trimmed (Open MPI and MPICH end it with NUL and
/// newlines) and folded to one line.
pub fn mpi_library_version() -> String {
    let raw = mpi::environment::library_version().unwrap_or_else(|_| "unknown".into());
    raw.trim_matches(|c: char| c == '\0' || c.is_whitespace())
        .split(|c: char| c == '\n' || c == '\0')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}
