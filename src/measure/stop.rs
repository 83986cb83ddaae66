//! Orderly stop on SIGTERM / SIGINT (scancel, a Slurm time limit, Ctrl-C, mpirun
//! forwarding a signal). The handler only records the signal; the ranks agree to stop at
//! the next synchronisation point ([`World::stop_requested`]: every timed iteration's
//! barrier and every case boundary), so no rank is left waiting in a collective. A rank
//! that cannot reach such a point within the grace time (stuck in a collective whose
//! partner is gone) prints a message and exits, and the launcher ends the other ranks:
//! the first signal wakes a grace thread (through a pipe: `write` is async-signal-safe),
//! which after the grace time runs the hook registered with [`on_stuck`] (rank 0 records
//! the stop in run.json there) and exits with [`EXIT_STUCK`]; a SIGALRM a few seconds
//! later exits without the hook should that thread not get to run. A second signal
//! while stopping ends the process at once.
//!
//! [`World::stop_requested`]: crate::comm::World::stop_requested

use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};
use std::sync::{Once, OnceLock};

/// The first stop signal received (0: none).
static SIGNAL: AtomicI32 = AtomicI32::new(0);
/// Seconds a signalled rank may take to reach an agreement point before it exits.
static GRACE_S: AtomicU32 = AtomicU32::new(DEFAULT_GRACE_S);

/// The grace thread's pipe (write end; -1 until [`install`] made it).
static WAKE_FD: AtomicI32 = AtomicI32::new(-1);
/// What the grace thread runs before it exits (rank 0: record the stop in run.json).
static STUCK_HOOK: OnceLock<fn()> = OnceLock::new();
/// The pipe and the grace thread are made once per process.
static GRACE_THREAD: Once = Once::new();
/// Seconds after the grace time at which SIGALRM exits should the grace thread not.
const ALARM_MARGIN_S: u32 = 5;

/// Default grace time (s): below Slurm's default KillWait (30 s).
pub const DEFAULT_GRACE_S: u32 = 20;

/// Exit code of a rank that could not stop in an orderly way within the grace time.
pub const EXIT_STUCK: i32 = 4;

/// The signal that asked this process to stop, if any (0: none).
pub fn received() -> i32 {
    SIGNAL.load(Ordering::SeqCst)
}

/// Name of a stop signal for messages.
pub fn name(sig: i32) -> &'static str {
    match sig {
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        _ => "a signal",
    }
}

/// Process exit code of a run stopped by `sig` (the shell's 128 + signal number).
pub fn exit_code(sig: i32) -> u8 {
    u8::try_from(128 + sig).unwrap_or(1)
}

/// Write `msg` to stderr from a signal handler (only async-signal-safe calls).
fn write_stderr(msg: &[u8]) {
    // SAFETY: write(2) is async-signal-safe; `msg` is a valid buffer of that length.
    unsafe {
        libc::write(2, msg.as_ptr().cast(), msg.len());
    }
}

extern "C" fn on_stop(sig: libc::c_int) {
    if SIGNAL
        .compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst)
        .is_err()
    {
        write_stderr(
            b"gradcomp: second stop signal: exiting now (the rows written so far are kept)\n",
        );
        // SAFETY: _exit is async-signal-safe and ends the process without running
        // destructors, which is what a second Ctrl-C asks for.
        unsafe { libc::_exit(i32::from(exit_code(sig))) };
    }
    let fd = WAKE_FD.load(Ordering::SeqCst);
    // SAFETY: write(2) and alarm(2) are async-signal-safe; `fd` is the grace thread's
    // pipe (or -1, when write fails harmlessly with EBADF); the alarm is the fallback
    // (on_alarm) should that thread not run.
    unsafe {
        if fd >= 0 {
            libc::write(fd, b"s".as_ptr().cast(), 1);
        }
        libc::alarm(GRACE_S.load(Ordering::SeqCst) + ALARM_MARGIN_S);
    }
}

const STUCK_MSG: &[u8] = b"gradcomp: error: this rank could not reach an agreed stop point within the grace time after a stop signal (stuck in a collective?); exiting, the launcher ends the other ranks (finished rows are kept; continue with --resume)\n";

extern "C" fn on_alarm(_sig: libc::c_int) {
    write_stderr(STUCK_MSG);
    // SAFETY: _exit is async-signal-safe.
    unsafe { libc::_exit(EXIT_STUCK) };
}

/// Register what a rank that cannot stop in time runs before it exits (the first
/// registration counts). Rank 0 records the stop in run.json there.
pub fn on_stuck(hook: fn()) {
    let _ = STUCK_HOOK.set(hook);
}

/// The grace thread: woken by the first stop signal, it waits the grace time (the main
/// thread normally ends the process first), runs the [`on_stuck`] hook and exits.
fn grace_thread(read_fd: i32) {
    let mut b = [0u8; 1];
    loop {
        // SAFETY: `read_fd` is the pipe's read end, open for the process's life; `b` is
        // a valid one-byte buffer.
        let n = unsafe { libc::read(read_fd, b.as_mut_ptr().cast(), 1) };
        if n == 1 {
            break;
        }
        if n == 0 {
            return;
        }
    }
    std::thread::sleep(std::time::Duration::from_secs(u64::from(
        GRACE_S.load(Ordering::SeqCst),
    )));
    if let Some(hook) = STUCK_HOOK.get() {
        hook();
    }
    write_stderr(STUCK_MSG);
    // SAFETY: ends the process at once, as the SIGALRM path does: the main thread is
    // stuck in a collective and must not run destructors or MPI_Finalize.
    unsafe { libc::_exit(EXIT_STUCK) };
}

/// The pipe and the grace thread, once per process.
fn start_grace_thread() -> std::io::Result<()> {
    let mut result = Ok(());
    GRACE_THREAD.call_once(|| {
        let mut fds = [0i32; 2];
        // SAFETY: `fds` is a valid array of two ints for pipe2(2) to fill.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            result = Err(std::io::Error::last_os_error());
            return;
        }
        let read_fd = fds[0];
        match std::thread::Builder::new()
            .name("gradcomp-grace".into())
            .spawn(move || grace_thread(read_fd))
        {
            Ok(_) => WAKE_FD.store(fds[1], Ordering::SeqCst),
            Err(e) => result = Err(e),
        }
    });
    result
}

/// Install the SIGTERM / SIGINT handlers (and the SIGALRM grace timer); `grace_s` is the
/// time a signalled rank may take to stop in an orderly way.
pub fn install(grace_s: u32) -> std::io::Result<()> {
    GRACE_S.store(grace_s.max(1), Ordering::SeqCst);
    for (sig, handler) in [
        (libc::SIGTERM, on_stop as extern "C" fn(libc::c_int)),
        (libc::SIGINT, on_stop),
        (libc::SIGALRM, on_alarm),
    ] {
        // SAFETY: a zeroed sigaction is a valid starting value; the handlers only touch
        // atomics and call async-signal-safe functions; SA_RESTART keeps MPI's and the
        // file writes' system calls from failing with EINTR.
        let rc = unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = handler as usize;
            act.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut act.sa_mask);
            libc::sigaction(sig, &act, std::ptr::null_mut())
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    // After the handlers: a signal from process start on is recorded (before the
    // thread exists, the SIGALRM fallback ends a stuck rank).
    start_grace_thread()
}
