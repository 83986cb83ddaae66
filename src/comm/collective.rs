//! The communication primitives gradcomp uses, as one object-safe trait with two
//! backends: MPI ([`super::mpi::MpiComm`], the only code that names rsmpi) and an
//! in-process loopback ([`super::loopback`], ranks as threads), so the e2e engine and
//! the exchanges run in plain `cargo test` without `mpirun` (docs/architecture.md,
//! "Communication"). Buffers travel as [`Buf`] / [`BufMut`] (a typed slice of one of the
//! element types below); [`super::World`] wraps the trait with typed generic methods, so
//! send and receive types always match.

/// A reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    Sum,
    Max,
    Min,
}

/// A read-only buffer of one of the element types the collectives carry.
#[derive(Clone, Copy, Debug)]
pub enum Buf<'a> {
    F32(&'a [f32]),
    F64(&'a [f64]),
    U32(&'a [u32]),
    U64(&'a [u64]),
    U8(&'a [u8]),
    I32(&'a [i32]),
}

/// A writable buffer of one of the element types the collectives carry.
#[derive(Debug)]
pub enum BufMut<'a> {
    F32(&'a mut [f32]),
    F64(&'a mut [f64]),
    U32(&'a mut [u32]),
    U64(&'a mut [u64]),
    U8(&'a mut [u8]),
    I32(&'a mut [i32]),
}

impl Buf<'_> {
    /// Elements in the buffer.
    pub fn len(&self) -> usize {
        match self {
            Buf::F32(s) => s.len(),
            Buf::F64(s) => s.len(),
            Buf::U32(s) => s.len(),
            Buf::U64(s) => s.len(),
            Buf::U8(s) => s.len(),
            Buf::I32(s) => s.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// An element type the collectives carry (f32, f64, u32, u64, u8, i32).
pub trait Elem: Copy + Send + Sync + PartialOrd + 'static {
    fn buf(s: &[Self]) -> Buf<'_>;
    fn buf_mut(s: &mut [Self]) -> BufMut<'_>;
    /// `self op other` (the loopback backend's reduction; MPI reduces itself).
    fn reduce(self, other: Self, op: ReduceOp) -> Self;
}

macro_rules! elem {
    ($t:ty, $v:ident, $add:expr) => {
        impl Elem for $t {
            fn buf(s: &[Self]) -> Buf<'_> {
                Buf::$v(s)
            }
            fn buf_mut(s: &mut [Self]) -> BufMut<'_> {
                BufMut::$v(s)
            }
            fn reduce(self, other: Self, op: ReduceOp) -> Self {
                match op {
                    ReduceOp::Sum => $add(self, other),
                    ReduceOp::Max if other > self => other,
                    ReduceOp::Min if other < self => other,
                    _ => self,
                }
            }
        }
    };
}
elem!(f32, F32, |a: f32, b: f32| a + b);
elem!(f64, F64, |a: f64, b: f64| a + b);
elem!(u32, U32, u32::wrapping_add);
elem!(u64, U64, u64::wrapping_add);
elem!(u8, U8, u8::wrapping_add);
elem!(i32, I32, i32::wrapping_add);

/// The primitives of one rank's communicator. Every collective must be called by every
/// rank in the same order (MPI's rule); `send` and `recv` hold the same element type
/// ([`super::World`]'s typed methods guarantee it). Counts and displacements are in
/// elements, rank order, as MPI's `-v` collectives take them.
pub trait Collective {
    fn rank(&self) -> usize;
    fn size(&self) -> usize;
    fn barrier(&self);
    /// Wall clock in seconds (MPI_Wtime, or a monotonic clock in-process).
    fn time_s(&self) -> f64;
    /// `recv = op over ranks of send`, element-wise (MPI_Allreduce).
    fn all_reduce(&self, send: Buf, recv: BufMut, op: ReduceOp);
    /// Post an all-reduce (sum) of `send` into `recv`, run `during` while it is in flight,
    /// then wait for it (MPI_Iallreduce; micro-comm's overlap test).
    fn all_reduce_sum_during(&self, send: &[f32], recv: &mut [f32], during: &mut dyn FnMut());
    /// Every rank's `send` (same length everywhere), in rank order (MPI_Allgather).
    fn all_gather(&self, send: Buf, recv: BufMut);
    /// Rank `r`'s `send` (`counts[r]` elements) at `displs[r]` of `recv` (MPI_Allgatherv).
    fn all_gather_v(&self, send: Buf, recv: BufMut, counts: &[i32], displs: &[i32]);
    /// `recv` (rank `root` only) = op over ranks of `send` (MPI_Reduce).
    fn reduce_to(&self, root: usize, send: Buf, recv: Option<BufMut>, op: ReduceOp);
    /// Rank `r`'s `send` at `displs[r]` of `recv` on rank `root` only (MPI_Gatherv).
    fn gather_v_to(
        &self,
        root: usize,
        send: Buf,
        recv: Option<BufMut>,
        counts: &[i32],
        displs: &[i32],
    );
    /// Rank `root`'s `buf` on every rank (MPI_Bcast).
    fn broadcast(&self, root: usize, buf: BufMut);
    /// Send `send` to `dest` while receiving `recv` from `src` (MPI_Sendrecv). The
    /// loopback backend requires every rank to call it together (as a ring step does).
    fn send_receive(&self, send: Buf, dest: usize, recv: BufMut, src: usize);
    /// `inout[i] = input[i] + inout[i]` on this rank alone, by the library's own reduction
    /// kernel (MPI_Reduce_local with MPI_SUM): what its collectives run on each received
    /// segment, timed to estimate their reduction arithmetic under time dilation
    /// ([`super::World::dilate`]).
    fn reduce_local_sum_f32(&self, input: &[f32], inout: &mut [f32]);
    /// This rank's host name.
    fn processor_name(&self) -> String;
    /// End the whole job (MPI_Abort).
    fn abort(&self, code: i32) -> !;
}

/// Run `$body` with `$s` / `$r` bound to the typed slices of a matching (Buf, BufMut)
/// pair; a mismatch is a bug in the caller ([`super::World`]'s typed methods rule it out).
macro_rules! typed_pair {
    ($send:expr, $recv:expr, |$s:ident, $r:ident| $body:expr) => {
        match ($send, $recv) {
            (Buf::F32($s), BufMut::F32($r)) => $body,
            (Buf::F64($s), BufMut::F64($r)) => $body,
            (Buf::U32($s), BufMut::U32($r)) => $body,
            (Buf::U64($s), BufMut::U64($r)) => $body,
            (Buf::U8($s), BufMut::U8($r)) => $body,
            (Buf::I32($s), BufMut::I32($r)) => $body,
            _ => unreachable!("collective: send and receive element types differ"),
        }
    };
}

/// Run `$body` with `$s` bound to the typed slice of a [`Buf`] or [`BufMut`].
macro_rules! typed {
    ($buf:expr, $variant:ident, |$s:ident| $body:expr) => {
        match $buf {
            $variant::F32($s) => $body,
            $variant::F64($s) => $body,
            $variant::U32($s) => $body,
            $variant::U64($s) => $body,
            $variant::U8($s) => $body,
            $variant::I32($s) => $body,
        }
    };
}
pub(crate) use {typed, typed_pair};
