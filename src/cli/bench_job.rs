//! The benchmark commands (`run`, micro-comm, micro-compress, micro, e2e) as an MPI job:
//! the config every rank agrees on, run.json begun, the output directory (locked, its
//! CSVs opened, an earlier run.json kept), the sweep, and run.json's end with the hint
//! that continues an interrupted run.

use super::lifecycle::resume_command;
use super::{check_dilation_env, check_world_size, Cli, Command};
use crate::bench::{self, Sinks};
use crate::comm::{ThreadLevel, World};
use crate::config::{Case, Config};
use crate::error::{Error, Result};
use crate::record::{self, meta, CsvSink};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// Run the benchmark job; `notes` collects what is printed after the run's own error.
pub(super) fn run(
    cli: &Cli,
    world: &World,
    provided: ThreadLevel,
    notes: &mut Vec<String>,
) -> Result<()> {
    let config = agreed_config(cli, world)?;
    let threads = config.uses_threads(cli.common.case_timeout);
    if threads && provided < ThreadLevel::Funneled {
        return Err(Error::Agreed {
            code: 1,
            message: world.is_root().then(|| format!("the MPI library granted thread level {provided:?}; e2e and --case-timeout need FUNNELED (rebuild MPI with thread support)")),
        });
    }
    let cases = config.cases();
    let (run_id, out_dir, mut meta) = begin(cli, world, provided, &config, &cases)?;
    // The directory lock is held (by rank 0) until this function returns.
    let (mut sinks, done, _lock) = open(cli, world, &config, &cases, &out_dir, &mut meta)?;

    let options = bench::RunOptions {
        run_id: &run_id,
        quiet: cli.common.job.quiet,
        trace: cli.common.trace.as_deref(),
        done: &done,
        case_timeout_s: cli.common.case_timeout.or(config.case_timeout_s),
        inject_fault: cli
            .common
            .inject_fault
            .map(|r| (r, bench::Fault::Gross))
            .or(cli.common.inject_ulp_fault.map(|r| (r, bench::Fault::Ulp))),
        samples: config.samples,
    };
    let mut summary = meta::RunSummary::default();
    if cli.common.inject_panic == Some(world.rank) {
        panic!("injected by --inject-panic {}", world.rank);
    }
    let result = bench::run_all(world, &config, &mut sinks, &options, &mut summary);
    // Every rank is here together unless one rank alone failed (then it aborts the job).
    if matches!(result, Ok(()) | Err(Error::Interrupted { .. })) {
        meta.peak_rss_bytes = Some(world.max_u64(crate::measure::host::peak_rss_bytes()));
        meta.end_load(world);
    }
    if world.is_root() {
        record_end(cli, world, &mut meta, &result, &summary, &out_dir, notes)?;
    }
    result?;
    Ok(())
}

/// The config, validated alike by every rank and agreed (exactly one rank reports bad
/// input); rank 0 prints its warnings and notes.
fn agreed_config(cli: &Cli, world: &World) -> Result<Config> {
    // Bad input: every rank validates the same way; agree so exactly one rank reports.
    let config = world.agree(cli.config().and_then(|c| {
        check_world_size(c.expect_ranks, world.size)?;
        check_dilation_env(
            c.time_dilation,
            std::env::var("NETLAB_DILATE").ok().as_deref(),
        )?;
        if !cli.common.skip_memory_check {
            if let (here, Some(avail)) = crate::measure::host::node_memory(world.size) {
                c.check_memory(world.size, here, avail)
                    .map_err(Error::Input)?;
            }
        }
        bench::e2e::preflight(&c.cases(), world.size)?;
        Ok(c)
    }))?;
    let warnings = crate::config::take_warnings();
    if world.is_root() {
        for w in warnings {
            eprintln!("gradcomp: warning: {w}");
        }
        let what = match &cli.command {
            Command::Run { config, .. } => config.display().to_string(),
            _ => "the command line".into(),
        };
        for n in config.notes(&what) {
            eprintln!("gradcomp: note: {n}");
        }
        let communicates =
            !(config.micro_comm.is_empty() && config.micro.is_empty() && config.e2e.is_empty());
        if world.size == 1 && communicates {
            eprintln!(
                "gradcomp: warning: running on 1 MPI rank, so collectives and exchanges communicate nothing; start it with mpirun -np N (or srun) to measure communication"
            );
        }
    }
    Ok(config)
}

/// The run's id (rank 0's, broadcast), its output directory (`--out`, else
/// `results/<run id>`) and run.json begun, with the time dilation set on the world.
fn begin(
    cli: &Cli,
    world: &World,
    provided: ThreadLevel,
    config: &Config,
    cases: &[Case],
) -> Result<(String, PathBuf, meta::RunMeta)> {
    let (start_time, stamp) = crate::units::utc_now();
    let run_id = world.broadcast_string(&if world.is_root() {
        meta::new_run_id(&stamp)
    } else {
        String::new()
    });
    let out_dir = cli
        .common
        .job
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("results").join(&run_id));
    let mut meta = meta::RunMeta::begin(
        world,
        &run_id,
        start_time,
        format!("{provided:?}"),
        serde_json::to_value(config)
            .map_err(|e| Error::Runtime(format!("serialising the config: {e}")))?,
        cases.len(),
        Some(config.estimated_peak_bytes(world.size).0),
    );
    // Time dilation (validated with the config): set on the world, which pads reducing
    // collectives by the library's measured reduction kernel.
    let dilation =
        crate::measure::dilation::Dilation::new(config.time_dilation).map_err(Error::Input)?;
    let reduce_s_per_byte = world.dilate(dilation);
    meta.time_dilation = dilation.factor();
    meta.reduce_s_per_byte = dilation.is_on().then_some(reduce_s_per_byte);
    if world.is_root() && dilation.is_on() && !cli.common.job.quiet {
        eprintln!(
            "[gradcomp] time dilation {}: device and host work {}x slower, times written / {} (MPI reduction {:.2} GB/s, padded)",
            dilation.factor(),
            dilation.factor(),
            dilation.factor(),
            1e-9 / reduce_s_per_byte.max(1e-30)
        );
    }
    Ok((run_id, out_dir, meta))
}

/// Output: only rank 0 touches files; everyone learns whether that worked, and (with
/// --resume) which cases are already done. Rank 0 holds the directory lock returned.
fn open(
    cli: &Cli,
    world: &World,
    config: &Config,
    cases: &[Case],
    out_dir: &Path,
    meta: &mut meta::RunMeta,
) -> Result<(Sinks, HashSet<String>, Option<record::DirLock>)> {
    let resume = cli.common.resume;
    let opened = if world.is_root() {
        let holder = format!(
            "host {}, pid {}, started {}",
            meta.hosts.first().map_or("unknown", String::as_str),
            std::process::id(),
            meta.start_time
        );
        check_trace(cli.common.trace.as_deref())
            .and_then(|()| open_outputs(out_dir, meta, world.size, resume, config.samples, &holder))
            .map(Some)
    } else {
        Ok(None)
    };
    let (sinks, done, lock) = match world.agree(opened)? {
        Some((s, d, l)) => (s, d, Some(l)),
        None => (Sinks::default(), HashSet::new(), None),
    };
    if world.is_root() {
        // run.json follows the cases as their rows are flushed (and a timeout or a panic).
        meta::follow(meta, out_dir);
    }
    let done_list = world.broadcast_string(&done.iter().cloned().collect::<Vec<_>>().join("\n"));
    let done: HashSet<String> = done_list.lines().map(String::from).collect();
    if world.is_root() && !cli.common.job.quiet {
        let skipping = if resume {
            let n = config
                .case_ids(cases, world.size)
                .iter()
                .filter(|id| done.contains(*id))
                .count();
            format!(", skipping {n} already done")
        } else {
            String::new()
        };
        eprintln!(
            "[gradcomp] {} rank(s), {} case(s){skipping}, results in {}",
            world.size,
            cases.len(),
            out_dir.display()
        );
    }
    Ok((sinks, done, lock))
}

/// Rank 0, after the sweep: run.json's end (status, error, counts), the line that
/// continues an interrupted run, and the closing line. The run's own error comes first:
/// a failing metadata write (the same full disk) is reported after it and never replaces it.
fn record_end(
    cli: &Cli,
    world: &World,
    meta: &mut meta::RunMeta,
    result: &Result<()>,
    summary: &meta::RunSummary,
    out_dir: &Path,
    notes: &mut Vec<String>,
) -> Result<()> {
    let resume = cli.common.resume;
    meta::unfollow();
    meta.end_time = Some(crate::units::utc_now().0);
    meta.cases_done = summary.cases_done;
    meta.cases_skipped = summary.cases_skipped;
    meta.last_case = summary.last_case.clone();
    match result {
        Ok(()) => meta.status = "ok".into(),
        Err(Error::Interrupted { .. }) => meta.status = "interrupted".into(),
        Err(e) => {
            meta.status = "failed".into();
            meta.error = Some(e.to_string());
        }
    }
    if let Err(Error::Interrupted { signal }) = result {
        meta.error = Some(format!(
            "stopped by {} at {}",
            crate::measure::stop::name(*signal),
            meta.end_time.as_deref().unwrap_or("?")
        ));
    }
    // The run's own error comes first: a failing metadata write (the same full
    // disk) is reported after it and never replaces it.
    let recorded = meta.write(out_dir);
    if let Err(Error::Interrupted { signal }) = result {
        eprintln!(
            "gradcomp: interrupted by {}: {} case(s) done by this run{}, rows are in {}; continue with: {}",
            crate::measure::stop::name(*signal),
            summary.cases_done,
            summary
                .last_case
                .as_deref()
                .map(|l| format!(" (last: {l})"))
                .unwrap_or_default(),
            out_dir.display(),
            resume_command(out_dir, cli.common.job.out.is_none(), resume, world.size)
        );
    }
    match (result, recorded) {
        (Ok(()), Err(e)) => return Err(e),
        (Err(_), Err(e)) => notes.push(format!(
            "gradcomp: warning: could not record the run's status in run.json: {e}"
        )),
        _ => {}
    }
    if result.is_ok() && !cli.common.job.quiet {
        eprintln!("[gradcomp] done: {}", out_dir.display());
    }
    Ok(())
}

/// `--trace FILE`: its folder must exist and be writable, checked before the first case
/// (not when the first e2e case has run).
fn check_trace(trace: Option<&Path>) -> crate::error::Result<()> {
    let Some(t) = trace else {
        return Ok(());
    };
    let parent = match t.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let writable = parent.is_dir() && {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(parent.as_os_str().as_bytes()).unwrap_or_default();
        // SAFETY: access(2) reads a NUL-terminated path and touches nothing else.
        unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
    };
    if !writable || t.is_dir() {
        return Err(Error::Input(format!(
            "--trace {}: {}; create the folder or give another path",
            t.display(),
            if t.is_dir() {
                "is a directory, not a file name".to_string()
            } else if parent.is_dir() {
                format!("the folder {} is not writable", parent.display())
            } else {
                format!("the folder {} does not exist", parent.display())
            }
        )));
    }
    Ok(())
}

/// Create the output directory, lock it, and create the CSV files the config needs
/// (samples.csv too, unless `samples` is off: created, or appended to when an earlier
/// run left one). With `resume`, reopen existing files to append and collect the
/// finished cases. A previous run.json (any earlier run) is kept as
/// `run.<its run_id>.json`.
fn open_outputs(
    dir: &Path,
    meta: &mut meta::RunMeta,
    world_size: usize,
    resume: bool,
    samples: bool,
    holder: &str,
) -> crate::error::Result<(Sinks, HashSet<String>, record::DirLock)> {
    record::prepare_dir(dir)?;
    let lock = record::DirLock::acquire(dir, holder)?;
    let mut done = HashSet::new();
    let mut sink = |key: &str, file: &str| -> crate::error::Result<Option<CsvSink>> {
        if !meta.config[key].as_array().is_some_and(|a| !a.is_empty()) {
            return Ok(None);
        }
        let path = dir.join(file);
        if !resume {
            return CsvSink::create(&path).map(Some);
        }
        record::check_world_size(&path, world_size)?;
        if file != "micro_compress.csv" {
            record::check_time_dilation(&path, meta.time_dilation)?;
        }
        let (s, ids) = CsvSink::resume(&path)?;
        if file == "micro_comm.csv" {
            if let Some(h) = s.existing_header() {
                if h != bench::micro_comm_header() {
                    return Err(Error::Input(format!("{}: its columns differ from what this gradcomp writes; use a new --out directory", path.display())));
                }
            }
        }
        done.extend(ids);
        Ok(Some(s))
    };
    let mut sinks = Sinks {
        micro_comm: sink("micro_comm", "micro_comm.csv")?,
        micro_compress: sink("micro_compress", "micro_compress.csv")?,
        micro: sink("micro", "micro.csv")?,
        e2e: sink("e2e", "e2e.csv")?,
        samples: None,
    };
    let timed = [
        &sinks.micro_comm,
        &sinks.micro_compress,
        &sinks.micro,
        &sinks.e2e,
    ]
    .iter()
    .any(|s| s.is_some());
    if samples && timed {
        // One samples.csv per directory, appended to by every run (any kind, --resume
        // or not); rows of cases without a summary row are dropped first.
        sinks.samples = Some(record::samples::SamplesSink::open(dir)?);
    }
    meta.keep_previous(dir, resume)?;
    meta.write(dir)?;
    Ok((sinks, done, lock))
}
