//! gradcomp binary: parse → run → exit code. Every rank runs this. Errors that every rank
//! agrees on (bad input, failed checks) end the job cleanly with one message; an error
//! on one rank alone aborts the whole job (MPI_Abort) so no rank is left waiting.

use anyhow::Context;
use gradcomp::bench::{self, Sinks};
use gradcomp::cli::{self, Cli};
use gradcomp::comm::{Mpi, ThreadLevel, World};
use gradcomp::error::{Error, EXIT_USAGE};
use gradcomp::record::{self, meta, CsvSink};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Rank from the launcher's environment, before MPI is initialised (to print help once).
fn launcher_rank() -> Option<usize> {
    [
        "OMPI_COMM_WORLD_RANK",
        "PMI_RANK",
        "PMIX_RANK",
        "SLURM_PROCID",
    ]
    .iter()
    .find_map(|k| std::env::var(k).ok().and_then(|v| v.parse().ok()))
}

/// Large buffers on transparent huge pages (src/measure/pages.rs).
#[global_allocator]
static ALLOC: gradcomp::measure::pages::HugePageAlloc = gradcomp::measure::pages::HugePageAlloc;

fn main() -> ExitCode {
    gradcomp::measure::pages::configure();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            let first = launcher_rank().unwrap_or(0) == 0;
            return match e.kind() {
                ErrorKind::DisplayHelp
                | ErrorKind::DisplayVersion
                | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
                    if first {
                        let _ = e.print();
                    }
                    if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                        ExitCode::from(EXIT_USAGE)
                    } else {
                        ExitCode::SUCCESS
                    }
                }
                _ => {
                    if first {
                        let text = e.to_string();
                        let line = text
                            .lines()
                            .next()
                            .unwrap_or("invalid arguments")
                            .trim_start_matches("error: ");
                        eprintln!("gradcomp: error: {line} (see gradcomp --help)");
                    }
                    ExitCode::from(EXIT_USAGE)
                }
            };
        }
    };

    match &cli.command {
        cli::Command::Models { name, .. } => return models_command(name.as_deref()),
        cli::Command::Methods { json, .. } => return methods_command(*json),
        cli::Command::Devcost {
            profiles,
            compress_device,
            out,
            interpolate_from,
            quiet,
        } => {
            return devcost_command(
                profiles,
                compress_device,
                out,
                interpolate_from.as_deref(),
                *quiet,
            )
        }
        cli::Command::Simulate(a) => return simulate_command(a, a.out.as_deref()),
        cli::Command::Choose(a) => return choose_command(a),
        cli::Command::Fit { dir, quiet } => return fit_command(dir, *quiet),
        _ => {}
    }
    // The stop handlers go in as soon as the command is known to start MPI (before
    // its config is read and MPI starts), so a signal that arrives during
    // start-up (a job cancelled right after it began) is recorded and honoured at the
    // first agreement point like any other: run.json `interrupted`, exit 128 + signal.
    let grace = cli
        .common
        .stop_grace
        .unwrap_or(gradcomp::measure::stop::DEFAULT_GRACE_S);
    let early_handlers = gradcomp::measure::stop::install(grace);
    // FUNNELED only when this run has threads besides the MPI one (the e2e device
    // thread, the --case-timeout watchdog): it costs Open MPI ~0.3 us per small
    // collective (docs/performance.md, "MPI library effects"). Errors in the config are
    // reported after MPI starts (by every rank, agreed); here they just mean "assume
    // threads".
    let threads = match (&cli.command, cli.config()) {
        (cli::Command::Converge(_), _) => false,
        (_, Ok(c)) => c.uses_threads(cli.common.case_timeout),
        (_, Err(_)) => true,
    };
    let level = if threads {
        ThreadLevel::Funneled
    } else {
        ThreadLevel::Single
    };
    // A rank that cannot stop within the grace time exits 4: rank 0 says so in run.json.
    gradcomp::measure::stop::on_stuck(|| {
        meta::record_end(
            "interrupted",
            "stopped by a signal, but this rank could not reach an agreed stop point within the grace time (stuck in a collective?) and exited with code 4; finished rows are kept, continue with --resume",
        )
    });
    // A panic ends the run without returning: run.json says so (rank 0), and the whole
    // job ends (MPI_Abort with Rust's panic exit code, 101): a rank that unwinds would
    // otherwise leave the others waiting in a collective, or hang in MPI_Finalize.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default_hook(info);
        meta::record_end("failed", &format!("panic: {info}"));
        gradcomp::comm::mpi::abort_if_running(101);
    }));
    let Some(mpi_env) = Mpi::init(level) else {
        eprintln!("gradcomp: error: MPI could not be initialised (is it already initialised, or is the launcher broken?)");
        return ExitCode::FAILURE;
    };
    let provided = mpi_env.thread_level();
    let world = mpi_env.world();
    // Again after MPI_Init, in case the MPI library installed its own.
    if let Err(e) = early_handlers.and_then(|()| gradcomp::measure::stop::install(grace)) {
        eprintln!("gradcomp: warning: cannot handle SIGTERM/SIGINT ({e}); a signal ends the run without a record");
    }
    // Secondary problems (the status could not be recorded) are printed after the run's
    // own error, which comes first.
    let mut notes = Vec::new();
    let outcome = match &cli.command {
        cli::Command::Converge(a) => converge_command(&cli, a, &world, provided),
        _ => run(&cli, &world, provided, &mut notes),
    };
    let print_notes = || notes.iter().for_each(|n| eprintln!("{n}"));
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            let code = err.downcast_ref::<Error>().map_or(1, Error::exit_code);
            match err.downcast_ref::<Error>() {
                Some(Error::Interrupted { .. }) => {
                    // Every rank agreed to stop; rank 0 has said how to continue.
                    print_notes();
                    world.barrier();
                }
                Some(Error::Agreed { message, .. }) => {
                    if let Some(m) = message {
                        eprintln!("gradcomp: error: {m}");
                    }
                    // Every rank is here: no rank leaves before the message is out.
                    world.barrier();
                }
                Some(Error::Check(_)) => {
                    if world.is_root() {
                        eprintln!("gradcomp: error: {err:#}");
                    }
                    print_notes();
                    world.barrier();
                }
                _ => {
                    // One write per message: `eprintln!` writes each formatted piece
                    // separately, and mpirun's abort banner can land between the pieces.
                    say(&format!(
                        "gradcomp: error on rank {} of {}: {err:#}\n",
                        world.rank, world.size
                    ));
                    print_notes();
                    if world.size > 1 {
                        say(&format!(
                            "gradcomp: rank {} aborts the whole job (MPI_Abort)\n",
                            world.rank
                        ));
                        world.abort(i32::from(code));
                    }
                }
            }
            drop(world);
            drop(mpi_env);
            ExitCode::from(code)
        }
    }
}

fn run(
    cli: &Cli,
    world: &World,
    provided: ThreadLevel,
    notes: &mut Vec<String>,
) -> anyhow::Result<()> {
    // Bad input: every rank validates the same way; agree so exactly one rank reports.
    let config = world.agree(cli.config().and_then(|c| {
        cli::check_world_size(c.expect_ranks, world.size)?;
        cli::check_dilation_env(
            c.time_dilation,
            std::env::var("NETLAB_DILATE").ok().as_deref(),
        )?;
        if !cli.common.skip_memory_check {
            if let (here, Some(avail)) = gradcomp::measure::host::node_memory(world.size) {
                c.check_memory(world.size, here, avail)
                    .map_err(Error::Input)?;
            }
        }
        bench::e2e::preflight(&c.cases(), world.size)?;
        Ok(c)
    }))?;
    let warnings = gradcomp::config::take_warnings();
    if world.is_root() {
        for w in warnings {
            eprintln!("gradcomp: warning: {w}");
        }
        let what = match &cli.command {
            cli::Command::Run { config, .. } => config.display().to_string(),
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
    let threads = config.uses_threads(cli.common.case_timeout);
    if threads && provided < ThreadLevel::Funneled {
        return Err(Error::Agreed {
            code: 1,
            message: world.is_root().then(|| format!("the MPI library granted thread level {provided:?}; e2e and --case-timeout need FUNNELED (rebuild MPI with thread support)")),
        }
        .into());
    }

    let (start_time, stamp) = gradcomp::units::utc_now();
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
    let cases = config.cases();
    let mut meta = meta::RunMeta::begin(
        world,
        &run_id,
        start_time,
        format!("{provided:?}"),
        serde_json::to_value(&config).context("serialising the config")?,
        cases.len(),
        Some(config.estimated_peak_bytes(world.size).0),
    );
    let cases_total = cases.len();
    // Time dilation (validated with the config): set on the world, which pads reducing
    // collectives by the library's measured reduction kernel.
    let dilation =
        gradcomp::measure::dilation::Dilation::new(config.time_dilation).map_err(Error::Input)?;
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

    // Output: only rank 0 touches files; everyone learns whether that worked, and (with
    // --resume) which cases are already done.
    let resume = cli.common.resume;
    // The directory lock is held (by rank 0) until this function returns.
    let opened = if world.is_root() {
        let holder = format!(
            "host {}, pid {}, started {}",
            meta.hosts.first().map_or("unknown", String::as_str),
            std::process::id(),
            meta.start_time
        );
        check_trace(cli.common.trace.as_deref())
            .and_then(|()| {
                open_outputs(
                    &out_dir,
                    &mut meta,
                    world.size,
                    resume,
                    config.samples,
                    &holder,
                )
            })
            .map(Some)
    } else {
        Ok(None)
    };
    let (mut sinks, done, _lock) = match world.agree(opened)? {
        Some((s, d, l)) => (s, d, Some(l)),
        None => (Sinks::default(), HashSet::new(), None),
    };
    if world.is_root() {
        // run.json follows the cases as their rows are flushed (and a timeout or a panic).
        meta::follow(&meta, &out_dir);
    }
    let done_list = world.broadcast_string(&done.iter().cloned().collect::<Vec<_>>().join("\n"));
    let done: HashSet<String> = done_list.lines().map(String::from).collect();
    if world.is_root() && !cli.common.job.quiet {
        let skipping = if resume {
            let n = config
                .case_ids(&cases, world.size)
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
            cases_total,
            out_dir.display()
        );
    }

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
        meta.peak_rss_bytes = Some(world.max_u64(gradcomp::measure::host::peak_rss_bytes()));
        meta.end_load(world);
    }
    if world.is_root() {
        meta::unfollow();
        meta.end_time = Some(gradcomp::units::utc_now().0);
        meta.cases_done = summary.cases_done;
        meta.cases_skipped = summary.cases_skipped;
        meta.last_case = summary.last_case.clone();
        match &result {
            Ok(()) => meta.status = "ok".into(),
            Err(Error::Interrupted { .. }) => meta.status = "interrupted".into(),
            Err(e) => {
                meta.status = "failed".into();
                meta.error = Some(e.to_string());
            }
        }
        if let Err(Error::Interrupted { signal }) = &result {
            meta.error = Some(format!(
                "stopped by {} at {}",
                gradcomp::measure::stop::name(*signal),
                meta.end_time.as_deref().unwrap_or("?")
            ));
        }
        // The run's own error comes first: a failing metadata write (the same full
        // disk) is reported after it and never replaces it.
        let recorded = meta.write(&out_dir);
        if let Err(Error::Interrupted { signal }) = &result {
            eprintln!(
                "gradcomp: interrupted by {}: {} case(s) done by this run{}, rows are in {}; continue with: {}",
                gradcomp::measure::stop::name(*signal),
                summary.cases_done,
                summary
                    .last_case
                    .as_deref()
                    .map(|l| format!(" (last: {l})"))
                    .unwrap_or_default(),
                out_dir.display(),
                resume_command(&out_dir, cli.common.job.out.is_none(), resume, world.size)
            );
        }
        match (&result, recorded) {
            (Ok(()), Err(e)) => return Err(e.into()),
            (Err(_), Err(e)) => notes.push(format!(
                "gradcomp: warning: could not record the run's status in run.json: {e}"
            )),
            _ => {}
        }
        if result.is_ok() && !cli.common.job.quiet {
            eprintln!("[gradcomp] done: {}", out_dir.display());
        }
    }
    result?;
    Ok(())
}

/// `gradcomp converge` (src/converge/mod.rs): training runs, converge.csv. Stopped by a
/// signal, rank 0 says how to continue (`--resume`), as the benchmarks do.
fn converge_command(
    cli: &Cli,
    a: &cli::ConvergeArgs,
    world: &World,
    provided: ThreadLevel,
) -> anyhow::Result<()> {
    let req = cli::check_world_size(a.job.expect_ranks, world.size)
        .and_then(|()| a.sections(cli.common.job.seed))
        .map(|(seed, sections)| gradcomp::converge::Request {
            sections,
            seed,
            out: cli.common.job.out.clone(),
            quiet: cli.common.job.quiet,
            thread_level: format!("{provided:?}"),
            resume: a.resume,
            skip_memory_check: a.skip_memory_check,
        });
    let mut progress = gradcomp::converge::Progress::default();
    let result = gradcomp::converge::command(world, req, &mut progress);
    if let (Err(Error::Interrupted { signal }), true) = (&result, world.is_root()) {
        let s = &progress.summary;
        eprintln!(
            "gradcomp: interrupted by {}: {} case(s) done by this run{}, rows are in {}; continue with: {}",
            gradcomp::measure::stop::name(*signal),
            s.cases_done,
            s.last_case
                .as_deref()
                .map(|l| format!(" (last: {l})"))
                .unwrap_or_default(),
            progress.out.display(),
            resume_command(
                &progress.out,
                cli.common.job.out.is_none(),
                a.resume,
                world.size
            )
        );
    }
    result?;
    Ok(())
}

/// The command line that continues this run: the same arguments with `--resume` (and
/// `--out DIR` when the directory was chosen by default), on `ranks` ranks (case ids
/// include the world size: another world size would run every case again).
fn resume_command(out_dir: &Path, add_out: bool, has_resume: bool, ranks: usize) -> String {
    let mut args: Vec<String> = std::env::args().collect();
    if add_out {
        args.push("--out".into());
        args.push(out_dir.display().to_string());
    }
    if !has_resume {
        args.push("--resume".into());
    }
    let quoted: Vec<String> = args
        .iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=,:@+".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect();
    format!("mpirun -np {ranks} {}", quoted.join(" "))
}

/// `--trace FILE`: its folder must exist and be writable, checked before the first case
/// (not when the first e2e case has run).
fn check_trace(trace: Option<&Path>) -> gradcomp::Result<()> {
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
) -> gradcomp::Result<(Sinks, HashSet<String>, record::DirLock)> {
    record::prepare_dir(dir)?;
    let lock = record::DirLock::acquire(dir, holder)?;
    let mut done = HashSet::new();
    let mut sink = |key: &str, file: &str| -> gradcomp::Result<Option<CsvSink>> {
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

/// `gradcomp methods [--json]`: every method's description (src/compress/describe.rs).
/// Needs no MPI; under a launcher only the first rank prints.
fn methods_command(json: bool) -> ExitCode {
    use std::io::Write;
    if launcher_rank().unwrap_or(0) != 0 {
        return ExitCode::SUCCESS;
    }
    let text = if json {
        match serde_json::to_string_pretty(&gradcomp::compress::describe::methods_json()) {
            Ok(t) => t + "\n",
            Err(e) => {
                eprintln!("gradcomp: error: {e}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        gradcomp::compress::describe::methods_table()
    };
    // A closed pipe (`| head`) is not an error of ours.
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
    ExitCode::SUCCESS
}

/// `gradcomp models [NAME]`: the zoo, or one model's layers. Needs no MPI; under a
/// launcher only the first rank prints.
fn models_command(name: Option<&str>) -> ExitCode {
    if launcher_rank().unwrap_or(0) != 0 {
        return ExitCode::SUCCESS;
    }
    match name {
        None => {
            for n in gradcomp::models::names() {
                match gradcomp::models::build(n) {
                    Ok(m) => println!("{}", m.summary_line()),
                    Err(e) => eprintln!("gradcomp: error: {e}"),
                }
            }
            ExitCode::SUCCESS
        }
        Some(n) => match gradcomp::models::build(n) {
            Ok(m) => {
                print!("{}", m.layer_table());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("gradcomp: error: {e}");
                ExitCode::from(EXIT_USAGE)
            }
        },
    }
}

/// `gradcomp devcost`: every row of the profiles beside the preset's price of it
/// (src/devcost/profile/price.rs), written to `out`, and the median ratio per method and
/// stage on stdout. No MPI; under a launcher only the first rank runs.
fn devcost_command(
    profiles: &[PathBuf],
    device: &str,
    out: &Path,
    interpolate_from: Option<&Path>,
    quiet: bool,
) -> ExitCode {
    if launcher_rank().unwrap_or(0) != 0 {
        return ExitCode::SUCCESS;
    }
    let run = || -> Result<Vec<gradcomp::devcost::profile::PricedRow>, gradcomp::Error> {
        let spec = gradcomp::roofline::DeviceSpec::parse(device)
            .map_err(|e| gradcomp::Error::Input(format!("--compress-device: {e}")))?;
        let mut rows = Vec::new();
        for p in profiles {
            let profile = gradcomp::devcost::profile::CompressProfile::read(p)?;
            rows.extend(profile.priced(&spec)?);
        }
        if let Some(r) = interpolate_from {
            let reference = gradcomp::devcost::profile::CompressProfile::read(r)?;
            gradcomp::devcost::profile::interpolate_from(&mut rows, &reference);
        }
        gradcomp::record::write_all(out, &rows, gradcomp::record::Existing::Replace)?;
        Ok(rows)
    };
    match run() {
        Ok(rows) => {
            if !quiet {
                print!("{}", gradcomp::devcost::profile::summary(&rows));
                eprintln!("[gradcomp] wrote {}", out.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("gradcomp: error: devcost: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// `gradcomp simulate`: no MPI; under a launcher only the first rank runs.
fn simulate_command(a: &cli::SimulateArgs, out: Option<&Path>) -> ExitCode {
    if launcher_rank().unwrap_or(0) != 0 {
        return ExitCode::SUCCESS;
    }
    let req = match a.request(out) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("gradcomp: error: {e}");
            return ExitCode::from(e.exit_code());
        }
    };
    for w in gradcomp::config::take_warnings() {
        eprintln!("gradcomp: warning: {w}");
    }
    let result = gradcomp::sim::run::run(&req);
    for w in result.iter().flat_map(|o| &o.warnings) {
        eprintln!("gradcomp: warning: {w}");
    }
    match result {
        Ok(o) if o.outside_tolerance.is_empty() => {
            if !a.quiet {
                eprintln!(
                    "[gradcomp] simulated {} case(s) in {:.3} s ({:.0} cases/s): {}",
                    o.rows,
                    o.simulate_s,
                    o.rows as f64 / o.simulate_s.max(1e-9),
                    o.sim_csv.display()
                );
            }
            ExitCode::SUCCESS
        }
        Ok(o) => {
            eprintln!(
                "gradcomp: error: {} simulated case(s) outside the {:.0}% tolerance: {}",
                o.outside_tolerance.len(),
                a.tolerance * 100.0,
                o.outside_tolerance.join("; ")
            );
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("gradcomp: error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// `gradcomp choose`: no MPI; under a launcher only the first rank runs.
fn choose_command(a: &cli::ChooseArgs) -> ExitCode {
    if launcher_rank().unwrap_or(0) != 0 {
        return ExitCode::SUCCESS;
    }
    let fail = |e: &dyn std::fmt::Display, code: u8| {
        eprintln!("gradcomp: error: choose: {e}");
        ExitCode::from(code)
    };
    let req = match a.request() {
        Ok(r) => r,
        Err(e) => return fail(&e, e.exit_code()),
    };
    for w in gradcomp::config::take_warnings() {
        eprintln!("gradcomp: warning: {w}");
    }
    let o = match gradcomp::sim::choose::run(&req.base, &req.scenarios, &req.steps) {
        Ok(o) => o,
        Err(e) => return fail(&e, e.exit_code()),
    };
    for w in &o.warnings {
        eprintln!("gradcomp: warning: {w}");
    }
    if let Some(dir) = &a.out {
        let written = std::fs::create_dir_all(dir)
            .map_err(|e| e.to_string())
            .and_then(|()| {
                gradcomp::record::write_all(
                    &dir.join("choose.csv"),
                    &o.rows,
                    gradcomp::record::Existing::Refuse,
                )
                .map_err(|e| e.to_string())
            });
        if let Err(e) = written {
            return fail(&format!("--out {}: {e}", dir.display()), 2);
        }
    }
    let n = req.scenarios.len();
    println!(
        "{} on {} node(s) x {} GPU(s) ({} ranks), {}, {} {}; compression on the {}",
        a.model,
        a.nodes,
        a.gpus_per_node,
        req.world_size,
        a.network,
        a.gpu,
        a.compress_profile
            .as_deref()
            .map_or("(roofline)".to_string(), |p| format!("(profile {p})")),
        a.compress_on
    );
    println!(
        "time to accuracy = steps to dense S-SGD's accuracy (gradcomp converge's proxy task, {}: the most over its seeds) x the method's fastest simulated iteration; band: {n} scenarios (alpha, beta x{}..x{}; launch {} us besides 5; the references' kernel readings{}) x the seeds' fewest..most steps; '=' marks a tie with the leader (bands overlap)",
        a.converge.display(),
        1.0 / a.network_factor,
        a.network_factor,
        a.launch_us
            .iter()
            .map(|u| u.to_string())
            .collect::<Vec<_>>()
            .join(","),
        if a.compress_profile.is_some() || a.fits.is_some() {
            "; measured costs and without them"
        } else {
            ""
        }
    );
    print!("{}", gradcomp::sim::choose::table(&o.ranked));
    println!("{}", gradcomp::sim::choose::verdict(&o.ranked, n));
    println!("caveat: steps come from a small proxy task at a few ranks, not from the model itself; time from the simulator's projection, never measured on this cluster");
    if !a.quiet {
        eprintln!(
            "[gradcomp] choose: {} simulated case(s) over {n} scenario(s)",
            o.cases
        );
    }
    ExitCode::SUCCESS
}

/// `gradcomp fit RESULTS_DIR`.
fn fit_command(dir: &Path, quiet: bool) -> ExitCode {
    if launcher_rank().unwrap_or(0) != 0 {
        return ExitCode::SUCCESS;
    }
    match gradcomp::sim::run::fit_command(dir) {
        Ok(rep) => {
            print!("{}", gradcomp::sim::fit_table::table(&rep));
            for p in rep.written.iter().filter(|_| !quiet) {
                eprintln!("[gradcomp] wrote {}", p.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            // The simulator's errors name `simulate`; here the command is `fit`.
            let msg = e.to_string();
            let msg = msg.strip_prefix("simulate: ").unwrap_or(&msg);
            eprintln!("gradcomp: error: fit: {msg}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// Write `msg` to stderr in one `write` call where the pipe allows (see the error path of
/// `main`: pieces of a line must not interleave with mpirun's own messages).
fn say(msg: &str) {
    use std::io::Write;
    let _ = std::io::stderr().lock().write_all(msg.as_bytes());
}
