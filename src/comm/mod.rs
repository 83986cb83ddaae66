//! The only code that touches MPI (no file outside `src/comm/` names the `mpi` crate):
//! initialisation ([`Mpi`]), a thin wrapper around the world communicator ([`World`]),
//! the collectives the benchmarks time, the clock and the library's identity
//! ([`wtime`], [`library_version`], [`mpi_standard`]), and our own ring over
//! point-to-point ([`ring`]).

pub mod exchange;
pub mod netmodel;
pub mod ring;

use crate::error::{Error, Result};
use mpi::collective::SystemOperation;
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::*;

/// MPI's thread support level (MPI_THREAD_*), as requested and as granted. Ordered as
/// MPI orders them (SINGLE < FUNNELED < SERIALIZED < MULTIPLE); `Debug` prints the
/// names run.json records (`Single`, `Funneled`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ThreadLevel {
    Single,
    Funneled,
    Serialized,
    Multiple,
}

impl ThreadLevel {
    fn to_mpi(self) -> mpi::Threading {
        match self {
            ThreadLevel::Single => mpi::Threading::Single,
            ThreadLevel::Funneled => mpi::Threading::Funneled,
            ThreadLevel::Serialized => mpi::Threading::Serialized,
            ThreadLevel::Multiple => mpi::Threading::Multiple,
        }
    }

    fn from_mpi(t: mpi::Threading) -> ThreadLevel {
        match t {
            mpi::Threading::Single => ThreadLevel::Single,
            mpi::Threading::Funneled => ThreadLevel::Funneled,
            mpi::Threading::Serialized => ThreadLevel::Serialized,
            mpi::Threading::Multiple => ThreadLevel::Multiple,
        }
    }
}

/// MPI, initialised (MPI_Init_thread); finalised (MPI_Finalize) when dropped, which must
/// happen after every [`World`] taken from it is gone.
pub struct Mpi {
    universe: mpi::environment::Universe,
    granted: ThreadLevel,
}

impl Mpi {
    /// Initialise MPI, asking for thread support `level`. `None` when MPI is already
    /// initialised or could not be (a broken launcher).
    pub fn init(level: ThreadLevel) -> Option<Mpi> {
        let (universe, granted) = mpi::initialize_with_threading(level.to_mpi())?;
        Some(Mpi {
            universe,
            granted: ThreadLevel::from_mpi(granted),
        })
    }

    /// The thread support level the library granted (may be below the one asked for).
    pub fn thread_level(&self) -> ThreadLevel {
        self.granted
    }

    /// The world communicator.
    pub fn world(&self) -> World {
        World::new(self.universe.world())
    }
}

/// Wall clock in seconds (MPI_Wtime), for code without a [`World`] at hand; the same
/// clock as [`World::time`].
pub fn wtime() -> f64 {
    mpi::time()
}

/// The version of the MPI standard the library implements, e.g. `3.1`.
pub fn mpi_standard() -> String {
    let (major, minor) = mpi::environment::version();
    format!("{major}.{minor}")
}

/// The MPI library's version string, trimmed (Open MPI and MPICH end it with NUL and
/// newlines) and folded to one line.
pub fn library_version() -> String {
    let raw = mpi::environment::library_version().unwrap_or_else(|_| "unknown".into());
    raw.trim_matches(|c: char| c == '\0' || c.is_whitespace())
        .split(['\n', '\0'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

/// The world communicator plus the facts every benchmark needs.
pub struct World {
    comm: SimpleCommunicator,
    pub rank: usize,
    pub size: usize,
}

impl World {
    pub fn new(comm: SimpleCommunicator) -> World {
        let rank = comm.rank() as usize;
        let size = comm.size() as usize;
        World { comm, rank, size }
    }

    pub fn is_root(&self) -> bool {
        self.rank == 0
    }

    pub fn barrier(&self) {
        self.comm.barrier();
    }

    /// A barrier that also agrees whether to stop: every rank contributes the stop signal
    /// it received (0: none; [`crate::bench::stop`]) to an all-reduce (max), which no rank
    /// leaves before all have entered. All ranks get the same answer, so they stop
    /// together: `Err(Error::Interrupted)` when any rank was signalled.
    pub fn sync_or_stop(&self) -> Result<()> {
        let local = crate::bench::stop::received().max(0) as u64;
        match self.max_u64(local) {
            0 => Ok(()),
            sig => Err(Error::Interrupted { signal: sig as i32 }),
        }
    }

    /// Wall clock in seconds (MPI_Wtime).
    pub fn time(&self) -> f64 {
        mpi::time()
    }

    /// `recv = sum over ranks of send` (MPI_Allreduce), called as is on every rank (one
    /// rank included): the collective micro-comm times.
    pub fn allreduce_sum_f32(&self, send: &[f32], recv: &mut [f32]) {
        self.comm
            .all_reduce_into(send, recv, SystemOperation::sum());
    }

    /// `recv` = every rank's `send`, in rank order (MPI_Allgather), called as is on every
    /// rank (one rank included): the collective micro-comm times.
    pub fn allgather_f32(&self, send: &[f32], recv: &mut [f32]) {
        self.comm.all_gather_into(send, recv);
    }

    /// Post `recv = sum over ranks of send` (MPI_Iallreduce), run `during` while it is in
    /// flight, then wait for it; returns what `during` returned (micro-comm's overlap test).
    pub fn iallreduce_sum_f32_during<R>(
        &self,
        send: &[f32],
        recv: &mut [f32],
        during: impl FnOnce() -> R,
    ) -> R {
        mpi::request::scope(|scope| {
            let req =
                self.comm
                    .immediate_all_reduce_into(scope, send, recv, SystemOperation::sum());
            let r = during();
            req.wait_without_status();
            r
        })
    }

    /// [`ring::ring_allreduce`] over this world's communicator.
    pub fn ring_allreduce<T, F>(&self, data: &mut [T], scratch: &mut [T], merge: F) -> Result<()>
    where
        T: mpi::datatype::Equivalence + Copy,
        F: FnMut(usize, usize, &[T], &mut [T]) -> Result<()>,
    {
        ring::ring_allreduce(&self.comm, data, scratch, merge)
    }

    /// Element-wise max over ranks, in place (used for per-iteration times).
    pub fn max_in_place(&self, xs: &mut [f64]) {
        if self.size == 1 || xs.is_empty() {
            return;
        }
        let send = xs.to_vec();
        self.comm
            .all_reduce_into(&send[..], xs, SystemOperation::max());
    }

    /// Element-wise sum over ranks, in place (check references; outside timed regions).
    pub fn sum_f32_in_place(&self, xs: &mut [f32]) {
        if self.size == 1 || xs.is_empty() {
            return;
        }
        let send = xs.to_vec();
        self.comm
            .all_reduce_into(&send[..], xs, SystemOperation::sum());
    }

    /// Rank 0's `xs` on every rank, in place (check references; outside timed regions).
    pub fn broadcast_f32(&self, xs: &mut [f32]) {
        if self.size > 1 && !xs.is_empty() {
            self.comm.process_at_rank(0).broadcast_into(xs);
        }
    }

    /// Sum over ranks of one value.
    pub fn sum_u64(&self, x: u64) -> u64 {
        let mut out = 0u64;
        self.comm
            .all_reduce_into(&x, &mut out, SystemOperation::sum());
        out
    }

    /// Max over ranks of one value.
    pub fn max_u64(&self, x: u64) -> u64 {
        let mut out = 0u64;
        self.comm
            .all_reduce_into(&x, &mut out, SystemOperation::max());
        out
    }

    /// Every rank's `x`, in rank order.
    pub fn all_gather_u64(&self, x: u64) -> Vec<u64> {
        let mut all = vec![0u64; self.size];
        self.comm.all_gather_into(&x, &mut all[..]);
        all
    }

    /// Broadcast a string from rank 0.
    pub fn broadcast_string(&self, s: &str) -> String {
        self.broadcast_string_from(0, s)
    }

    /// Broadcast a string from rank `from`.
    pub fn broadcast_string_from(&self, from: usize, s: &str) -> String {
        let root = self.comm.process_at_rank(from as i32);
        let mut len = s.len() as u64;
        root.broadcast_into(&mut len);
        if len == 0 {
            // A zero-length broadcast passes a dangling pointer, which MPI may reject.
            return String::new();
        }
        let mut buf = if self.rank == from {
            s.as_bytes().to_vec()
        } else {
            vec![0u8; len as usize]
        };
        root.broadcast_into(&mut buf[..]);
        String::from_utf8_lossy(&buf).into_owned()
    }

    /// Every rank's host name, in rank order.
    pub fn host_names(&self) -> Vec<String> {
        const W: usize = 256;
        let name = mpi::environment::processor_name().unwrap_or_else(|_| "unknown".into());
        let mut mine = [0u8; W];
        let b = name.as_bytes();
        let n = b.len().min(W);
        mine[..n].copy_from_slice(&b[..n]);
        let mut all = vec![0u8; W * self.size];
        self.comm.all_gather_into(&mine[..], &mut all[..]);
        all.chunks(W)
            .map(|c| {
                let end = c.iter().position(|&x| x == 0).unwrap_or(W);
                String::from_utf8_lossy(&c[..end]).into_owned()
            })
            .collect()
    }

    /// Collective agreement on a fallible step: if any rank failed, every rank returns
    /// `Error::Agreed` with the highest exit code; the lowest failing rank carries the
    /// message (so it is printed once), the others none. Never hangs: all ranks call it.
    pub fn agree<T>(&self, local: Result<T>) -> Result<T> {
        let my_code = match &local {
            Ok(_) => 0u64,
            Err(e) => u64::from(e.exit_code()),
        };
        let code = self.max_u64(my_code);
        if code == 0 {
            return local;
        }
        // i32 with a large sentinel: a u64::MAX sentinel came back as the minimum under
        // MPICH (its unsigned 64-bit MIN compared as signed), so nobody reported.
        let my_rank_if_failed: i32 = if my_code > 0 {
            self.rank as i32
        } else {
            i32::MAX
        };
        let mut reporter = 0i32;
        self.comm
            .all_reduce_into(&my_rank_if_failed, &mut reporter, SystemOperation::min());
        let reporter = reporter as u64;
        let message = match local {
            Err(e) if reporter == self.rank as u64 => Some(if self.size > 1 && self.rank != 0 {
                format!("rank {}: {e}", self.rank)
            } else {
                e.to_string()
            }),
            _ => None,
        };
        Err(Error::Agreed {
            code: code as u8,
            message,
        })
    }

    /// MPI_Abort the whole job (used when one rank fails outside a collective step).
    pub fn abort(&self, code: i32) -> ! {
        self.comm.abort(code)
    }
}

/// Convert a count to MPI's `i32`, with a clear error instead of a silent wrap.
pub fn mpi_count(n: usize, what: &str) -> Result<i32> {
    i32::try_from(n).map_err(|_| {
        Error::Input(format!(
            "{what}: {n} elements exceed MPI's count limit of {} per call; use a smaller size",
            i32::MAX
        ))
    })
}
