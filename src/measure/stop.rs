//! Orderly stop on SIGTERM / SIGINT (scancel, a Slurm time limit, Ctrl-C, mpirun
//! forwarding a signal). The handler only records the signal; the ranks agree to stop at
//! the next synchronisation point ([`World::stop_requested`]: every timed iteration's
//! barrier and every case boundary), so no rank is left waiting in a collective. A rank
//! that cannot reach such a point within the grace time (stuck in a collective whose
//! partner is gone) prints a message and exits, and the launcher ends the other ranks.
//! A second signal while stopping ends the process at once.
//!
//! [`World::stop_requested`]: crate::comm::World::stop_requested

use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};

/// The first stop signal received (0: none).
static SIGNAL: AtomicI32 = AtomicI32::new(0);
/// Seconds a signalled rank may take to reach an agreement point before it exits.
static GRACE_S: AtomicU32 = AtomicU32::new(DEFAULT_GRACE_S);

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
    // SAFETY: alarm(2) is async-signal-safe; it arms the grace timer (on_alarm).
    unsafe {
        libc::alarm(GRACE_S.load(Ordering::SeqCst));
    }
}

extern "C" fn on_alarm(_sig: libc::c_int) {
    write_stderr(b"gradcomp: error: this rank could not reach an agreed stop point within the grace time after a stop signal (stuck in a collective?); exiting, the launcher ends the other ranks (finished rows are kept; continue with --resume)\n");
    // SAFETY: _exit is async-signal-safe.
    unsafe { libc::_exit(EXIT_STUCK) };
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
    Ok(())
}
