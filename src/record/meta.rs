//! `run.json`: everything needed to reproduce and identify a run.

use std::path::Path;

use serde::Serialize;

use crate::error::{Error, Result};

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
    /// The most ranks sharing one host name in `hosts` (every node's count when the
    /// ranks are spread evenly): the ranks behind one NIC (`gradcomp simulate
    /// --ranks-per-node`).
    pub ranks_per_node: usize,
    /// Per rank (as `hosts`): the cores that rank may run on (`available_parallelism`:
    /// affinity and cgroup limits included). With `hosts` it tells whether ranks shared
    /// cores (the simulator's CPU share, sim/calibrate/host.rs).
    pub host_cores: Vec<u64>,
    /// Per rank (as `hosts`): the running kernel's boot id (`/proc/sys/kernel/random/boot_id`,
    /// empty where unreadable). Ranks with one boot id share one machine's cores even
    /// under different host names (scripts/netlab.sh's nodes are network namespaces of
    /// one machine); the simulator's CPU share counts ranks per boot id (sim/calibrate/host.rs).
    pub host_kernels: Vec<String>,
    /// Per rank (as `hosts`): its machine's processor model ([`cpu_model`] of
    /// `/proc/cpuinfo`; empty where it names none), so that recorded runs say which kind
    /// of CPU measured them.
    pub host_cpus: Vec<String>,
    pub slurm_job_id: Option<String>,
    pub slurm_ntasks: Option<String>,
    pub slurm_nodelist: Option<String>,
    /// `SLURM_NTASKS_PER_NODE` (set when the job asked for `--ntasks-per-node`).
    pub slurm_ntasks_per_node: Option<String>,
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
    /// Memory estimate of the largest case per rank (the up-front check; bytes); null
    /// for commands without the check (`converge`).
    pub estimated_peak_bytes: Option<u64>,
    /// Measured peak resident memory (VmHWM), the max over ranks (bytes); set at the end.
    pub peak_rss_bytes: Option<u64>,
    /// Per rank (as `hosts`): the 1-, 5- and 15-minute load averages of its machine
    /// (`/proc/loadavg`) when the run started; null where unreadable. Above the machine's
    /// cores (`host_cores`), other work competed with the run.
    pub load_avg_start: Vec<Option<[f64; 3]>>,
    /// The same when the run ended ([`RunMeta::end_load`]); empty when it ended without
    /// every rank (a failure on one rank, the `--case-timeout` watchdog).
    pub load_avg_end: Vec<Option<[f64; 3]>>,
    /// Time dilation K (1: none): the run emulated a cluster whose clocks run K times
    /// slower, and every time in its CSV files is wall time / K (src/measure/dilation.rs).
    pub time_dilation: u32,
    /// Dilated runs: the MPI library's reduction kernel as measured for the padding of
    /// reducing collectives (s per byte, MPI_Reduce_local; `comm::World::dilate`); null
    /// otherwise.
    pub reduce_s_per_byte: Option<f64>,
    /// Rank 0's transparent huge page mode (`always`, `madvise`, `never`; null where the
    /// kernel has none): with `madvise`, only the buffers gradcomp advises get 2 MiB pages.
    pub transparent_huge_pages: Option<String>,
    /// Whether gradcomp advised its large buffers for huge pages (src/measure/pages.rs; off
    /// with `GRADCOMP_HUGE_PAGES=0`).
    pub huge_pages_advised: bool,
    pub config: serde_json::Value,
    /// The file in the output directory this record is written to: `run.json`, or
    /// [`CONVERGE_BESIDE`] ([`RunMeta::beside_benchmark`]). Not written into it.
    #[serde(skip)]
    pub file_name: &'static str,
}

/// `gradcomp converge`'s record in a folder whose run.json another command wrote: `make
/// bench` runs `gradcomp run` and then `gradcomp converge` into one `--out`, and the
/// folder's run.json stays the benchmark's, with the convergence check's record beside it.
pub const CONVERGE_BESIDE: &str = "converge.run.json";

/// The subcommand of a run.json's `command_line` (its first argument that is no option),
/// `None` when the record names none.
fn subcommand(record: &serde_json::Value) -> Option<&str> {
    record["command_line"]
        .as_array()?
        .iter()
        .skip(1)
        .filter_map(serde_json::Value::as_str)
        .find(|a| !a.starts_with('-'))
}

impl RunMeta {
    /// The metadata of a run starting now on `world` (every rank calls it: the hosts and
    /// cores are gathered), `status: running`.
    pub fn begin(
        world: &crate::comm::World,
        run_id: &str,
        start_time: String,
        thread_level: String,
        config: serde_json::Value,
        cases_total: usize,
        estimated_peak_bytes: Option<u64>,
    ) -> RunMeta {
        let hosts = world.host_names();
        let host_cores = world
            .all_gather_u64(std::thread::available_parallelism().map_or(0, |n| n.get() as u64));
        let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        let host_kernels = world.all_gather_str(&boot_id);
        let cpu = cpu_model(&std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default());
        let host_cpus = world.all_gather_str(&cpu);
        RunMeta {
            schema_version: super::SCHEMA_VERSION,
            run_id: run_id.to_string(),
            command_line: std::env::args().collect(),
            gradcomp_version: env!("CARGO_PKG_VERSION"),
            git_revision: GIT_REVISION,
            rustc_version: RUSTC_VERSION,
            mpi_library: crate::comm::library_version(),
            mpi_standard: crate::comm::mpi_standard(),
            mpi_thread_level: thread_level,
            world_size: world.size,
            ranks_per_node: crate::comm::ranks_per_node(&hosts),
            hosts,
            host_cores,
            host_kernels,
            host_cpus,
            slurm_job_id: std::env::var("SLURM_JOB_ID").ok(),
            slurm_ntasks: std::env::var("SLURM_NTASKS").ok(),
            slurm_nodelist: std::env::var("SLURM_JOB_NODELIST").ok(),
            slurm_ntasks_per_node: std::env::var("SLURM_NTASKS_PER_NODE").ok(),
            start_time,
            end_time: None,
            status: "running".into(),
            error: None,
            last_case: None,
            cases_total,
            cases_done: 0,
            cases_skipped: 0,
            resumed_from: None,
            previous_run: None,
            estimated_peak_bytes,
            peak_rss_bytes: None,
            load_avg_start: load_avgs(world),
            load_avg_end: Vec::new(),
            time_dilation: 1,
            reduce_s_per_byte: None,
            transparent_huge_pages: crate::measure::pages::system_mode(),
            huge_pages_advised: crate::measure::pages::advised(),
            config,
            file_name: "run.json",
        }
    }

    /// A convergence check (`gradcomp converge`) into `dir`: when `dir/run.json` is
    /// another command's record (a benchmark's, `make bench`), write this one to
    /// [`CONVERGE_BESIDE`] and leave run.json to the benchmark; else to run.json, as
    /// every run. A run.json that is no JSON is kept as an earlier record
    /// ([`RunMeta::keep_previous`]), as before.
    pub fn beside_benchmark(&mut self, dir: &Path) {
        let path = dir.join("run.json");
        let other = crate::input::read(&path, crate::input::TEXT_BYTES, "the folder's run.json")
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .is_some_and(|v| subcommand(&v).is_some_and(|c| c != "converge"));
        if other {
            self.file_name = CONVERGE_BESIDE;
        }
    }

    /// Record every rank's load average at the end (a collective: every rank calls it).
    pub fn end_load(&mut self, world: &crate::comm::World) {
        self.load_avg_end = load_avgs(world);
    }

    /// Write `dir/run.json` (or this record's [`RunMeta::file_name`]) atomically.
    pub fn write(&self, dir: &Path) -> Result<()> {
        let json = serde_json::to_vec_pretty(self)
            .map_err(|e| Error::Runtime(format!("serialising {}: {e}", self.file_name)))?;
        super::write_meta_file(&dir.join(self.file_name), &json)
    }

    /// Keep the run.json an earlier run left in `dir` as `run.<its run_id>.json` (a free
    /// name; of a [`CONVERGE_BESIDE`] record `converge.run.<its run_id>.json`), recording
    /// it in `previous_run` (and, with `resume`, `resumed_from`), so no run's record is
    /// ever overwritten.
    pub fn keep_previous(&mut self, dir: &Path, resume: bool) -> Result<()> {
        let previous = dir.join(self.file_name);
        let stem = self.file_name.trim_end_matches(".json");
        if !previous.exists() {
            return Ok(());
        }
        let old: serde_json::Value = std::fs::read(&previous)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        let old_id = old["run_id"]
            .as_str()
            .filter(|id| {
                id.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            })
            .unwrap_or("previous")
            .to_string();
        // A free name: two runs may start within the same second.
        let keep = (0..)
            .map(|i| {
                if i == 0 {
                    format!("{stem}.{old_id}.json")
                } else {
                    format!("{stem}.{old_id}.{i}.json")
                }
            })
            .find(|n| !dir.join(n).exists())
            .unwrap_or_default();
        std::fs::rename(&previous, dir.join(&keep)).map_err(|e| Error::io(&previous, e))?;
        if resume {
            self.resumed_from = Some(old_id);
        }
        self.previous_run = Some(keep);
        Ok(())
    }
}

/// Every rank's [`load_avg`] (a collective), in rank order.
fn load_avgs(world: &crate::comm::World) -> Vec<Option<[f64; 3]>> {
    let mine = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    world
        .all_gather_str(mine.trim())
        .iter()
        .map(|s| load_avg(s))
        .collect()
}

/// The 1-, 5- and 15-minute load averages of a `/proc/loadavg` line
/// (`0.52 0.58 0.59 1/123 4567`); `None` when it is not one.
pub fn load_avg(line: &str) -> Option<[f64; 3]> {
    let mut f = line.split_whitespace().map(str::parse::<f64>);
    let mut next = || f.next()?.ok().filter(|x| x.is_finite() && *x >= 0.0);
    Some([next()?, next()?, next()?])
}

/// The processor model in a `/proc/cpuinfo` text: the first `model name` (x86), else
/// the first `Model` or `Hardware` line (Arm boards), else `CPU implementer` and `CPU
/// part` (Arm servers: their hexadecimal ids); empty when it has none of these.
pub fn cpu_model(cpuinfo: &str) -> String {
    let field = |name: &str| {
        cpuinfo.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == name && !v.trim().is_empty()).then(|| v.trim().to_string())
        })
    };
    field("model name")
        .or_else(|| field("Model"))
        .or_else(|| field("Hardware"))
        .or_else(|| {
            Some(format!(
                "CPU implementer {} part {}",
                field("CPU implementer")?,
                field("CPU part")?
            ))
        })
        .unwrap_or_default()
}

/// The run.json of this process's run as last written (rank 0 only; `None` elsewhere and
/// once the run has written its final record): kept so that run.json is right whatever
/// ends the job. [`case_done`] rewrites it as each case's rows are flushed; the paths
/// that end the process without returning (the `--case-timeout` watchdog, a panic) call
/// [`record_end`]. The lock also keeps two threads from writing run.json at once.
static LIVE: std::sync::Mutex<Option<(RunMeta, std::path::PathBuf)>> = std::sync::Mutex::new(None);

fn live() -> std::sync::MutexGuard<'static, Option<(RunMeta, std::path::PathBuf)>> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Rank 0, once run.json is first written into `dir`: follow this run from now on.
pub fn follow(meta: &RunMeta, dir: &Path) {
    *live() = Some((meta.clone(), dir.to_path_buf()));
}

/// A case's rows are flushed: record how far the run got in run.json (atomic replace),
/// so a job ended by any means (kill -9, a launcher's SIGKILL, a timeout) leaves the
/// right `cases_done` and `last_case`. A no-op on ranks that do not follow a run.
pub fn case_done(cases_done: usize, cases_skipped: usize, last_case: Option<String>) -> Result<()> {
    let mut g = live();
    let Some((meta, dir)) = g.as_mut() else {
        return Ok(());
    };
    meta.cases_done = cases_done;
    meta.cases_skipped = cases_skipped;
    meta.last_case = last_case;
    meta.write(dir)
}

/// The run ends here without returning (the watchdog, a panic): record `status` and
/// `error` in run.json, best effort (a failure is printed, not returned: the process is
/// ending anyway). Afterwards the run is no longer followed.
pub fn record_end(status: &str, error: &str) {
    // Not a blocking lock: a panic inside `case_done`'s write holds it on this thread.
    let t0 = std::time::Instant::now();
    let mut g = loop {
        match LIVE.try_lock() {
            Ok(g) => break g,
            Err(std::sync::TryLockError::Poisoned(e)) => break e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => {
                if t0.elapsed() > std::time::Duration::from_secs(2) {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        }
    };
    if let Some((mut meta, dir)) = g.take() {
        meta.status = status.into();
        meta.error = Some(error.into());
        meta.end_time = Some(crate::units::utc_now().0);
        if let Err(e) = meta.write(&dir) {
            eprintln!("gradcomp: warning: could not record the run's status in run.json: {e}");
        }
    }
}

/// The run writes its own final record: stop following it.
pub fn unfollow() {
    *live() = None;
}

/// A run id: the UTC start `stamp` (`YYYYMMDD-HHMMSS`) and 6 hex digits of this process
/// (pid and nanoseconds), so that runs started in the same second (a job array, two
/// sweeps from one script) get different ids. Rank 0 makes it and broadcasts it.
pub fn new_run_id(stamp: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for x in [u64::from(std::process::id()), nanos] {
        for b in x.to_le_bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    format!("{stamp}-{:06x}", h & 0xff_ffff)
}

/// Git revision and rustc version baked in by build.rs.
pub const GIT_REVISION: &str = env!("GRADCOMP_GIT_REVISION");
pub const RUSTC_VERSION: &str = env!("GRADCOMP_RUSTC_VERSION");

/// How far a run got (filled in as cases finish, so it is right after an error too).
#[derive(Default)]
pub struct RunSummary {
    /// Cases run (rows written) by this invocation.
    pub cases_done: usize,
    /// Cases skipped by `--resume`.
    pub cases_skipped: usize,
    /// Label and id of the last case this invocation finished.
    pub last_case: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::{cpu_model, load_avg};

    #[test]
    fn cpu_model_of_a_proc_cpuinfo_text() {
        let x86 = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel\t\t: 17\nmodel name\t: AMD EPYC 9R14 96-Core Processor\n\nprocessor\t: 1\nmodel name\t: other\n";
        assert_eq!(cpu_model(x86), "AMD EPYC 9R14 96-Core Processor");
        let arm = "processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU part\t: 0xd0c\n";
        assert_eq!(cpu_model(arm), "CPU implementer 0x41 part 0xd0c");
        assert_eq!(
            cpu_model("processor : 0\nModel : Raspberry Pi 4 Model B Rev 1.4\n"),
            "Raspberry Pi 4 Model B Rev 1.4"
        );
        assert_eq!(cpu_model(""), "");
        assert_eq!(cpu_model("model name\t:\n"), "");
    }

    #[test]
    fn load_average_of_a_proc_loadavg_line() {
        assert_eq!(
            load_avg("7.55 6.02 4.79 8/139 21262\n"),
            Some([7.55, 6.02, 4.79])
        );
        assert_eq!(load_avg(""), None);
        assert_eq!(load_avg("1.0 2.0"), None);
        assert_eq!(load_avg("1.0 x 3.0 1/2 3"), None);
    }
}
