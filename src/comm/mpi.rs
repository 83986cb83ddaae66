//! The MPI backend of [`Collective`]: the only file in gradcomp that names the `mpi`
//! crate (rsmpi). Initialisation ([`Mpi`]), the clock and the library's identity.

use super::collective::{typed, typed_pair, Buf, BufMut, Collective, ReduceOp};
use mpi::collective::SystemOperation;
use mpi::datatype::PartitionMut;
use mpi::point_to_point as p2p;
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
/// happen after every [`super::World`] taken from it is gone.
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
    pub fn world(&self) -> super::World {
        super::World::new(Box::new(MpiComm {
            comm: self.universe.world(),
        }))
    }
}

/// For a panic hook, which has no [`super::World`] at hand: when MPI is running
/// (initialised, not finalised) say which rank panicked and MPI_Abort the whole job
/// with `code`, so that no other rank waits for this one in a collective; returns
/// when MPI is not running.
pub fn abort_if_running(code: i32) {
    if !mpi::environment::is_initialized() || mpi::environment::is_finalized() {
        return;
    }
    let world = SimpleCommunicator::world();
    // One write: the launcher's abort banner must not split the line.
    let line = format!(
        "gradcomp: rank {} of {} panicked; it aborts the whole job (MPI_Abort)\n",
        world.rank(),
        world.size()
    );
    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    world.abort(code)
}

/// Wall clock in seconds (MPI_Wtime), for code without a [`super::World`] at hand; the
/// same clock as the MPI backend's [`Collective::time_s`].
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

/// An MPI communicator as a [`Collective`].
pub struct MpiComm {
    comm: SimpleCommunicator,
}

fn op(o: ReduceOp) -> SystemOperation {
    match o {
        ReduceOp::Sum => SystemOperation::sum(),
        ReduceOp::Max => SystemOperation::max(),
        ReduceOp::Min => SystemOperation::min(),
    }
}

impl Collective for MpiComm {
    fn rank(&self) -> usize {
        self.comm.rank() as usize
    }

    fn size(&self) -> usize {
        self.comm.size() as usize
    }

    fn barrier(&self) {
        self.comm.barrier();
    }

    fn time_s(&self) -> f64 {
        mpi::time()
    }

    fn all_reduce(&self, send: Buf, recv: BufMut, o: ReduceOp) {
        typed_pair!(send, recv, |s, r| self.comm.all_reduce_into(s, r, op(o)))
    }

    fn all_reduce_sum_during(&self, send: &[f32], recv: &mut [f32], during: &mut dyn FnMut()) {
        mpi::request::scope(|scope| {
            let req =
                self.comm
                    .immediate_all_reduce_into(scope, send, recv, SystemOperation::sum());
            during();
            req.wait_without_status();
        })
    }

    fn all_gather(&self, send: Buf, recv: BufMut) {
        typed_pair!(send, recv, |s, r| self.comm.all_gather_into(s, r))
    }

    fn all_gather_v(&self, send: Buf, recv: BufMut, counts: &[i32], displs: &[i32]) {
        typed_pair!(send, recv, |s, r| {
            let mut part = PartitionMut::new(r, counts, displs);
            self.comm.all_gather_varcount_into(s, &mut part)
        })
    }

    fn reduce_to(&self, root: usize, send: Buf, recv: Option<BufMut>, o: ReduceOp) {
        let p = self.comm.process_at_rank(root as i32);
        match recv {
            Some(recv) => typed_pair!(send, recv, |s, r| p.reduce_into_root(s, r, op(o))),
            None => typed!(send, Buf, |s| p.reduce_into(s, op(o))),
        }
    }

    fn gather_v_to(
        &self,
        root: usize,
        send: Buf,
        recv: Option<BufMut>,
        counts: &[i32],
        displs: &[i32],
    ) {
        let p = self.comm.process_at_rank(root as i32);
        match recv {
            Some(recv) => typed_pair!(send, recv, |s, r| {
                let mut part = PartitionMut::new(r, counts, displs);
                p.gather_varcount_into_root(s, &mut part)
            }),
            None => typed!(send, Buf, |s| p.gather_varcount_into(s)),
        }
    }

    fn broadcast(&self, root: usize, buf: BufMut) {
        let p = self.comm.process_at_rank(root as i32);
        typed!(buf, BufMut, |b| p.broadcast_into(b))
    }

    fn send_receive(&self, send: Buf, dest: usize, recv: BufMut, src: usize) {
        let d = self.comm.process_at_rank(dest as i32);
        let s = self.comm.process_at_rank(src as i32);
        typed_pair!(send, recv, |a, b| {
            p2p::send_receive_into(a, &d, b, &s);
        })
    }

    fn reduce_local_sum_f32(&self, input: &[f32], inout: &mut [f32]) {
        mpi::collective::reduce_local_into(input, inout, SystemOperation::sum());
    }

    fn processor_name(&self) -> String {
        mpi::environment::processor_name().unwrap_or_else(|_| "unknown".into())
    }

    fn abort(&self, code: i32) -> ! {
        self.comm.abort(code)
    }
}
