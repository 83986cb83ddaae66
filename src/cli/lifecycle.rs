//! The life of an MPI job (every command that starts ranks): the stop handlers and the
//! stuck-rank hook set before the MPI session starts (`comm::session`: the thread level,
//! the panic abort, MPI's own order), the `converge` job, and the end: one message and an
//! exit code every rank agrees on, or the whole job aborted when one rank alone failed
//! (no rank is left waiting). The benchmark job itself is in `bench_job`.

use super::{check_world_size, Cli, Command, ConvergeArgs};
use crate::comm::session::Session;
use crate::comm::World;
use crate::error::{Error, Result};
use crate::record::meta;
use std::path::Path;
use std::process::ExitCode;

/// A started job: its MPI session (the world, finalised when dropped).
pub struct Job {
    session: Session,
}

impl Job {
    /// Install the stop handlers as soon as the command is known to start ranks, say
    /// whether the run has threads, set the stuck-rank hook, and start the session (with
    /// the panic hook's record). `None` (after a message) when MPI cannot start.
    pub fn start(cli: &Cli) -> Option<Job> {
        // The stop handlers go in as soon as the command is known to start MPI (before
        // its config is read and MPI starts), so a signal that arrives during
        // start-up (a job cancelled right after it began) is recorded and honoured at the
        // first agreement point like any other: run.json `interrupted`, exit 128 + signal.
        let grace = cli
            .common
            .stop_grace
            .unwrap_or(crate::measure::stop::DEFAULT_GRACE_S);
        let early_handlers = crate::measure::stop::install(grace);
        // Threads besides the MPI one: the e2e device thread, the --case-timeout watchdog
        // (`Session::start` chooses the thread level). Errors in the config are reported
        // after MPI starts (by every rank, agreed); here they just mean "assume threads".
        let threads = match (&cli.command, cli.config()) {
            (Command::Converge(_), _) => false,
            (_, Ok(c)) => c.uses_threads(cli.common.case_timeout),
            (_, Err(_)) => true,
        };
        // A rank that cannot stop within the grace time exits 4: rank 0 says so in run.json.
        crate::measure::stop::on_stuck(|| {
            meta::record_end(
                "interrupted",
                "stopped by a signal, but this rank could not reach an agreed stop point within the grace time (stuck in a collective?) and exited with code 4; finished rows are kept, continue with --resume",
            )
        });
        // A panic ends the run without returning: run.json says so (rank 0), and the
        // session ends the whole job (a rank that unwinds would otherwise leave the others
        // waiting in a collective).
        let Some((session, handlers)) =
            Session::start(threads, grace, |msg| meta::record_end("failed", msg))
        else {
            eprintln!("gradcomp: error: MPI could not be initialised (is it already initialised, or is the launcher broken?)");
            return None;
        };
        if let Err(e) = early_handlers.and(handlers) {
            eprintln!("gradcomp: warning: cannot handle SIGTERM/SIGINT ({e}); a signal ends the run without a record");
        }
        Some(Job { session })
    }

    fn world(&self) -> &World {
        self.session.world()
    }

    /// The benchmark commands' job (`bench_job`); `notes` are printed after its error.
    pub fn benchmarks(&self, cli: &Cli, notes: &mut Vec<String>) -> Result<()> {
        super::bench_job::run(cli, self.world(), self.session.provided(), notes)
    }

    /// `gradcomp converge` (src/converge/mod.rs): training runs, converge.csv. Stopped by a
    /// signal, rank 0 says how to continue (`--resume`), as the benchmarks do.
    pub fn converge(&self, cli: &Cli, a: &ConvergeArgs) -> Result<()> {
        let (world, provided) = (self.world(), self.session.provided());
        let req = check_world_size(a.job.expect_ranks, world.size)
            .and_then(|()| a.sections(cli.common.job.seed))
            .map(|(seed, sections)| crate::converge::Request {
                sections,
                seed,
                out: cli.common.job.out.clone(),
                quiet: cli.common.job.quiet,
                thread_level: format!("{provided:?}"),
                resume: a.resume,
                skip_memory_check: a.skip_memory_check,
            });
        let mut progress = crate::converge::Progress::default();
        let result = crate::converge::command(world, req, &mut progress);
        if let (Err(Error::Interrupted { signal }), true) = (&result, world.is_root()) {
            let s = &progress.summary;
            eprintln!(
                "gradcomp: interrupted by {}: {} case(s) done by this run{}, rows are in {}; continue with: {}",
                crate::measure::stop::name(*signal),
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

    /// The exit code of the job's `outcome`, every rank agreeing: an error all ranks share
    /// is reported once and the ranks leave together; an error of one rank alone ends the
    /// whole job (MPI_Abort). `notes` follow the run's own error.
    pub fn exit_code(self, outcome: Result<()>, notes: &[String]) -> ExitCode {
        let print_notes = || notes.iter().for_each(|n| eprintln!("{n}"));
        match outcome {
            Ok(()) => ExitCode::SUCCESS,
            Err(err) => {
                let code = err.exit_code();
                match &err {
                    Error::Interrupted { .. } => {
                        // Every rank agreed to stop; rank 0 has said how to continue.
                        print_notes();
                        self.world().barrier();
                    }
                    Error::Agreed { message, .. } => {
                        if let Some(m) = message {
                            eprintln!("gradcomp: error: {m}");
                        }
                        // Every rank is here: no rank leaves before the message is out.
                        self.world().barrier();
                    }
                    Error::Check(_) => {
                        if self.world().is_root() {
                            eprintln!("gradcomp: error: {}", with_causes(&err));
                        }
                        print_notes();
                        self.world().barrier();
                    }
                    _ => {
                        // One write per message: `eprintln!` writes each formatted piece
                        // separately, and mpirun's abort banner can land between the pieces.
                        say(&format!(
                            "gradcomp: error on rank {} of {}: {}\n",
                            self.world().rank,
                            self.world().size,
                            with_causes(&err)
                        ));
                        print_notes();
                        if self.world().size > 1 {
                            say(&format!(
                                "gradcomp: rank {} aborts the whole job (MPI_Abort)\n",
                                self.world().rank
                            ));
                            self.world().abort(i32::from(code));
                        }
                    }
                }
                // The session ends: the world, then MPI (MPI_Finalize).
                drop(self);
                ExitCode::from(code)
            }
        }
    }
}

/// `err` and its causes, `: `-separated (as `anyhow`'s `{:#}` prints an error).
fn with_causes(err: &Error) -> String {
    let mut text = err.to_string();
    let mut cause = std::error::Error::source(err);
    while let Some(c) = cause {
        text.push_str(&format!(": {c}"));
        cause = c.source();
    }
    text
}

/// The command line that continues this run: the same arguments with `--resume` (and
/// `--out DIR` when the directory was chosen by default), on `ranks` ranks (case ids
/// include the world size: another world size would run every case again).
pub(super) fn resume_command(
    out_dir: &Path,
    add_out: bool,
    has_resume: bool,
    ranks: usize,
) -> String {
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

/// Write `msg` to stderr in one `write` call where the pipe allows (see
/// [`Job::exit_code`]: pieces of a line must not interleave with mpirun's own messages).
fn say(msg: &str) {
    use std::io::Write;
    let _ = std::io::stderr().lock().write_all(msg.as_bytes());
}
