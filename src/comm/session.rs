//! The MPI side of a job's life, in the order MPI needs it: the thread level chosen by
//! whether the run has threads besides the MPI one, a panic that ends the whole job
//! (MPI_Abort) instead of leaving the other ranks waiting, the stop handlers installed
//! again after MPI_Init (the library may install its own), and the world dropped before
//! MPI_Finalize. The command's side of the job (outputs, run.json, the agreed exit code)
//! is `cli::lifecycle`.

use super::{mpi, Mpi, ThreadLevel, World};

/// Rust's exit code for a panic, which a panicking rank aborts the job with.
const PANIC_EXIT_CODE: i32 = 101;

/// A started MPI session: the world and the MPI environment (finalised when dropped,
/// after the world) and the thread level the library granted.
pub struct Session {
    // Dropped in this order: the world before MPI (MPI_Finalize).
    world: World,
    /// Held for its drop (MPI_Finalize).
    _env: Mpi,
    provided: ThreadLevel,
}

impl Session {
    /// Start MPI. `threads`: whether the run has threads besides the MPI one (the e2e
    /// device thread, the `--case-timeout` watchdog), which asks for FUNNELED, else
    /// SINGLE: FUNNELED costs Open MPI ~0.3 us per small collective (docs/performance.md,
    /// "MPI library effects"). A panic first runs the hook that was set, then
    /// `on_panic` with `panic: <message>` (the caller's record of it), then aborts the
    /// whole job with code 101. After MPI_Init the stop handlers (`measure::stop`, grace
    /// `grace_s`) go in again, in case the MPI library installed its own; the second value
    /// is that installation's outcome. `None` when MPI cannot start (already
    /// initialised, or a broken launcher).
    pub fn start(
        threads: bool,
        grace_s: u32,
        on_panic: fn(&str),
    ) -> Option<(Session, std::io::Result<()>)> {
        let level = if threads {
            ThreadLevel::Funneled
        } else {
            ThreadLevel::Single
        };
        let default_hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            default_hook(info);
            on_panic(&format!("panic: {info}"));
            mpi::abort_if_running(PANIC_EXIT_CODE);
        }));
        let env = Mpi::init(level)?;
        let provided = env.thread_level();
        let world = env.world();
        let handlers = crate::measure::stop::install(grace_s);
        Some((
            Session {
                world,
                _env: env,
                provided,
            },
            handlers,
        ))
    }

    /// The world communicator.
    pub fn world(&self) -> &World {
        &self.world
    }

    /// The thread support level the library granted (may be below the one asked for).
    pub fn provided(&self) -> ThreadLevel {
        self.provided
    }
}
