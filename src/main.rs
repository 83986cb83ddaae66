//! gradcomp binary: parse → run → exit code. Every rank runs this. Errors that every rank
//! agrees on (bad input, failed checks) end the job cleanly with one message; an error
//! on one rank alone aborts the whole job (MPI_Abort) so no rank is left waiting.

use anyhow::Context;
use clap::Parser;
use gradcomp::bench::{self, Sinks};
use gradcomp::cli::{self, Cli};
use gradcomp::comm::World;
use gradcomp::error::{Error, EXIT_USAGE};
use gradcomp::record::{self, meta, CsvSink, SCHEMA_VERSION};
use mpi::Threading;
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

fn main() -> ExitCode {
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
        cli::Command::Models { name } => return models_command(name.as_deref()),
        cli::Command::Simulate(a) => return simulate_command(a, cli.common.out.as_deref()),
        cli::Command::Fit { dir } => return fit_command(dir),
        _ => {}
    }
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
        Threading::Funneled
    } else {
        Threading::Single
    };
    let Some((universe, provided)) = mpi::initialize_with_threading(level) else {
        eprintln!("gradcomp: error: MPI could not be initialised (is it already initialised, or is the launcher broken?)");
        return ExitCode::FAILURE;
    };
    let world = World::new(universe.world());
    let result = match &cli.command {
        cli::Command::Converge(a) => converge_command(&cli, a, &world),
        _ => run(&cli, &world, provided),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            let code = err.downcast_ref::<Error>().map_or(1, Error::exit_code);
            match err.downcast_ref::<Error>() {
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
                    world.barrier();
                }
                _ => {
                    eprintln!(
                        "gradcomp: error on rank {} of {}: {err:#}",
                        world.rank, world.size
                    );
                    if world.size > 1 {
                        eprintln!(
                            "gradcomp: rank {} aborts the whole job (MPI_Abort)",
                            world.rank
                        );
                        world.abort(i32::from(code));
                    }
                }
            }
            drop(world);
            drop(universe);
            ExitCode::from(code)
        }
    }
}

fn run(cli: &Cli, world: &World, provided: Threading) -> anyhow::Result<()> {
    // Bad input: every rank validates the same way; agree so exactly one rank reports.
    let config = world.agree(cli.config().and_then(|c| {
        cli::check_world_size(&c, world.size)?;
        if !cli.common.skip_memory_check {
            if let (here, Some(avail)) = cli::node_memory(world.size) {
                c.check_memory(world.size, here, avail)
                    .map_err(Error::Input)?;
            }
        }
        Ok(c)
    }))?;
    let threads = config.uses_threads(cli.common.case_timeout);
    if threads && (provided as i32) < (Threading::Funneled as i32) {
        return Err(Error::Agreed {
            code: 1,
            message: world.is_root().then(|| format!("the MPI library granted thread level {provided:?}; e2e and --case-timeout need FUNNELED (rebuild MPI with thread support)")),
        }
        .into());
    }

    let (start_time, stamp) = gradcomp::units::utc_now();
    let run_id = world.broadcast_string(&stamp);
    let out_dir = cli
        .common
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("results").join(&run_id));
    let hosts = world.host_names();
    let host_cores =
        world.all_gather_u64(std::thread::available_parallelism().map_or(0, |n| n.get() as u64));
    let cases_total = config.cases().len();
    let mut meta = meta::RunMeta {
        schema_version: SCHEMA_VERSION,
        run_id: run_id.clone(),
        command_line: std::env::args().collect(),
        gradcomp_version: env!("CARGO_PKG_VERSION"),
        git_revision: meta::GIT_REVISION,
        rustc_version: meta::RUSTC_VERSION,
        mpi_library: meta::mpi_library_version(),
        mpi_standard: format!(
            "{}.{}",
            mpi::environment::version().0,
            mpi::environment::version().1
        ),
        mpi_thread_level: format!("{provided:?}"),
        world_size: world.size,
        hosts,
        host_cores,
        slurm_job_id: std::env::var("SLURM_JOB_ID").ok(),
        slurm_ntasks: std::env::var("SLURM_NTASKS").ok(),
        slurm_nodelist: std::env::var("SLURM_JOB_NODELIST").ok(),
        start_time,
        end_time: None,
        status: "running".into(),
        cases_total,
        cases_done: 0,
        cases_skipped: 0,
        resumed_from: None,
        config: serde_json::to_value(&config).context("serialising the config")?,
    };

    // Output: only rank 0 touches files; everyone learns whether that worked, and (with
    // --resume) which cases are already done.
    let resume = cli.common.resume;
    let opened = if world.is_root() {
        open_outputs(&out_dir, &mut meta, resume).map(Some)
    } else {
        Ok(None)
    };
    let (mut sinks, done) = world.agree(opened)?.unwrap_or_default();
    let done_list = world.broadcast_string(&done.iter().cloned().collect::<Vec<_>>().join("\n"));
    let done: std::collections::HashSet<String> = done_list.lines().map(String::from).collect();
    if world.is_root() && !cli.common.quiet {
        eprintln!(
            "[gradcomp] {} rank(s), {} case(s), results in {}",
            world.size,
            cases_total,
            out_dir.display()
        );
    }

    let options = bench::RunOptions {
        run_id: &run_id,
        quiet: cli.common.quiet,
        trace: cli.common.trace.as_deref(),
        done: &done,
        case_timeout_s: cli.common.case_timeout.or(config.case_timeout_s),
        inject_fault: cli
            .common
            .inject_fault
            .map(|r| (r, bench::Fault::Gross))
            .or(cli.common.inject_ulp_fault.map(|r| (r, bench::Fault::Ulp))),
    };
    let result = bench::run_all(world, &config, &mut sinks, &options);
    if world.is_root() {
        meta.end_time = Some(gradcomp::units::utc_now().0);
        match &result {
            Ok(s) => {
                meta.status = "ok".into();
                meta.cases_done = s.cases_done;
                meta.cases_skipped = s.cases_skipped;
            }
            Err(e) => meta.status = format!("failed: {e}"),
        }
        write_meta(&out_dir, &meta)?;
        if result.is_ok() && !cli.common.quiet {
            eprintln!("[gradcomp] done: {}", out_dir.display());
        }
    }
    result?;
    Ok(())
}

/// `gradcomp converge` (src/converge/mod.rs): training runs, converge.csv.
fn converge_command(cli: &Cli, a: &cli::ConvergeArgs, world: &World) -> anyhow::Result<()> {
    let req = a
        .sections(cli.common.seed)
        .map(|(seed, sections)| gradcomp::converge::Request {
            sections,
            seed,
            out: cli.common.out.clone(),
            quiet: cli.common.quiet,
        });
    gradcomp::converge::command(world, req)?;
    Ok(())
}

/// Create the output directory and the CSV files the config needs. With `resume`, reopen
/// existing files to append and collect the finished cases; the previous run.json is
/// kept as `run.<its run_id>.json`.
fn open_outputs(
    dir: &Path,
    meta: &mut meta::RunMeta,
    resume: bool,
) -> gradcomp::Result<(Sinks, HashSet<String>)> {
    record::prepare_dir(dir)?;
    let mut done = HashSet::new();
    let mut sink = |key: &str, file: &str| -> gradcomp::Result<Option<CsvSink>> {
        if !meta.config[key].as_array().is_some_and(|a| !a.is_empty()) {
            return Ok(None);
        }
        let path = dir.join(file);
        if !resume {
            return CsvSink::create(&path).map(Some);
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
    let sinks = Sinks {
        micro_comm: sink("micro_comm", "micro_comm.csv")?,
        micro_compress: sink("micro_compress", "micro_compress.csv")?,
        micro: sink("micro", "micro.csv")?,
        e2e: sink("e2e", "e2e.csv")?,
    };
    let previous = dir.join("run.json");
    if resume && previous.exists() {
        let old: serde_json::Value = std::fs::read(&previous)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        let old_id = old["run_id"].as_str().unwrap_or("previous").to_string();
        std::fs::rename(&previous, dir.join(format!("run.{old_id}.json")))
            .map_err(|e| Error::io(&previous, e))?;
        meta.resumed_from = Some(old_id);
    }
    write_meta(dir, meta)?;
    Ok((sinks, done))
}

fn write_meta(dir: &Path, meta: &meta::RunMeta) -> gradcomp::Result<()> {
    let json = serde_json::to_vec_pretty(meta)
        .map_err(|e| Error::Runtime(format!("serialising run.json: {e}")))?;
    record::write_atomic(&dir.join("run.json"), &json)
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
    match gradcomp::sim::run::run(&req) {
        Ok(o) if o.outside_tolerance.is_empty() => {
            eprintln!(
                "[gradcomp] simulated {} case(s): {}",
                o.rows,
                o.sim_csv.display()
            );
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
            ExitCode::from(EXIT_USAGE)
        }
    }
}

/// `gradcomp fit RESULTS_DIR`.
fn fit_command(dir: &Path) -> ExitCode {
    if launcher_rank().unwrap_or(0) != 0 {
        return ExitCode::SUCCESS;
    }
    match gradcomp::sim::run::fit_command(dir) {
        Ok(rep) => {
            for r in &rep.rows {
                println!("{}", serde_json::to_string(r).unwrap_or_default());
            }
            for p in &rep.written {
                eprintln!("[gradcomp] wrote {}", p.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("gradcomp: error: {e}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}
