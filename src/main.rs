//! gradcomp binary: parse → dispatch → exit code. Every rank runs this. The commands
//! without MPI are here; the others run as a [`Job`] (src/cli/lifecycle.rs): errors that
//! every rank agrees on (bad input, failed checks) end the job cleanly with one message;
//! an error on one rank alone aborts the whole job (MPI_Abort) so no rank is left waiting.

use gradcomp::cli::{self, Cli, Job};
use gradcomp::error::EXIT_USAGE;
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
    // Every other command is an MPI job (src/cli/lifecycle.rs).
    let Some(job) = Job::start(&cli) else {
        return ExitCode::FAILURE;
    };
    // Secondary problems (the status could not be recorded) are printed after the run's
    // own error, which comes first.
    let mut notes = Vec::new();
    let outcome = match &cli.command {
        cli::Command::Converge(a) => job.converge(&cli, a),
        _ => job.benchmarks(&cli, &mut notes),
    };
    job.exit_code(outcome, &notes)
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
