//! Communication: the [`Collective`] trait ([`collective`]) with its MPI backend
//! ([`mpi`], the only file that names the `mpi` crate) and its in-process loopback backend
//! ([`loopback`], ranks as threads: tests without `mpirun`), the [`World`] every
//! benchmark talks through, the exchange of compressed wires ([`exchange`]), our own
//! ring over point-to-point ([`ring`]), and a job's MPI session in the order MPI needs
//! ([`session`]).

pub mod collective;
pub mod exchange;
pub mod loopback;
pub mod mpi;
pub mod ring;
pub mod session;

pub use self::mpi::{library_version, mpi_standard, wtime, Mpi, ThreadLevel};
use crate::error::{Error, Result};
use crate::measure::dilation::Dilation;
pub use collective::{Collective, Elem, ReduceOp};

/// One rank's view of the job: its communicator ([`Collective`], MPI or loopback) plus
/// the facts every benchmark needs, with typed collectives and the agreements built on
/// them (stop, failure).
pub struct World {
    comm: Box<dyn Collective>,
    pub rank: usize,
    pub size: usize,
    /// The most ranks on one host, known once [`World::host_names`] ran.
    ranks_per_node: std::sync::OnceLock<usize>,
    /// The run's time dilation and the reduction estimate its pads use, once
    /// [`World::dilate`] ran (none before).
    dilated: std::sync::OnceLock<Dilated>,
}

/// A dilated run's clock factor and the measured reduction cost that stretches the MPI
/// library's reduction arithmetic ([`World::dilate`]).
#[derive(Clone, Copy, Debug)]
struct Dilated {
    dilation: Dilation,
    reduce_s_per_byte: f64,
}

/// Elements of the buffer [`World::dilate`] times MPI_Reduce_local on (1 MiB of f32:
/// larger than the compressed methods' messages, small enough to stay in cache as a
/// reduction of received segments does).
const REDUCE_PROBE_ELEMS: usize = 1 << 18;

/// The most ranks sharing one host name (0 for no hosts): the ranks behind the busiest
/// node's NIC, every node's count when the ranks are spread evenly.
pub fn ranks_per_node(hosts: &[String]) -> usize {
    let mut count: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for h in hosts {
        *count.entry(h.as_str()).or_default() += 1;
    }
    count.values().copied().max().unwrap_or(0)
}

impl World {
    pub fn new(comm: Box<dyn Collective>) -> World {
        let rank = comm.rank();
        let size = comm.size();
        World {
            comm,
            rank,
            size,
            ranks_per_node: std::sync::OnceLock::new(),
            dilated: std::sync::OnceLock::new(),
        }
    }

    /// Make this a dilated run (every rank calls it, once, before the first case; a
    /// collective): records `d` and, when dilated, measures the MPI library's reduction
    /// kernel, which every reducing collective is then padded by (below). Returns the
    /// estimate (s per byte of message, max over ranks; 0 without dilation).
    ///
    /// **The estimate.** A reducing collective's arithmetic runs inside the library, where
    /// it cannot be timed apart from the network. Open MPI's collectives reduce each
    /// received segment with `ompi_op_reduce` (ompi/op/op.h; e.g. the ring all-reduce of
    /// ompi/mca/coll/base/coll_base_allreduce.c, `ompi_coll_base_allreduce_intra_ring`),
    /// the function MPI_Reduce_local calls too, so MPI_Reduce_local (sum of f32) over a
    /// 1 MiB buffer, the fastest of 5 after one warm-up, measures the library's own
    /// kernel on this machine. Per collective of `m` bytes on `n` ranks the pad assumes
    /// `(n - 1) / n x m` bytes reduced per rank: the ring's and Rabenseifner's volume, the
    /// least any all-reduce algorithm reduces (recursive doubling, used for small
    /// messages, reduces `log2(n) x m`, where the pad is below a microsecond anyway).
    pub fn dilate(&self, d: Dilation) -> f64 {
        let reduce_s_per_byte = if d.is_on() {
            let input = vec![1.0f32; REDUCE_PROBE_ELEMS];
            let mut inout = vec![0.0f32; REDUCE_PROBE_ELEMS];
            let mut best = f64::INFINITY;
            for i in 0..6 {
                let t0 = std::time::Instant::now();
                self.comm.reduce_local_sum_f32(&input, &mut inout);
                let t = t0.elapsed().as_secs_f64();
                if i > 0 {
                    best = best.min(t);
                }
            }
            let mut v = [best / (4 * REDUCE_PROBE_ELEMS) as f64];
            self.max_in_place(&mut v);
            v[0]
        } else {
            0.0
        };
        self.set_dilation(d, reduce_s_per_byte);
        reduce_s_per_byte
    }

    /// [`World::dilate`] with a given reduction estimate (tests).
    pub fn set_dilation(&self, dilation: Dilation, reduce_s_per_byte: f64) {
        let _ = self.dilated.set(Dilated {
            dilation,
            reduce_s_per_byte,
        });
    }

    /// The run's time dilation (none until [`World::dilate`]).
    pub fn dilation(&self) -> Dilation {
        self.dilated.get().map_or(Dilation::NONE, |d| d.dilation)
    }

    /// Pad a reducing collective of `bytes` per rank by `(k - 1)` x its estimated
    /// reduction arithmetic ([`World::dilate`]); nothing without dilation.
    fn pad_reduction(&self, bytes: usize) {
        if let Some(d) = self.dilated.get().filter(|d| d.dilation.is_on()) {
            let n = self.size as f64;
            d.dilation
                .pad((n - 1.0) / n * bytes as f64 * d.reduce_s_per_byte);
        }
    }

    /// The most ranks sharing one host ([`ranks_per_node`]), once [`World::host_names`]
    /// ran (run.json's metadata gathers them at the start of every run); `None` before.
    pub fn ranks_per_node(&self) -> Option<usize> {
        self.ranks_per_node.get().copied()
    }

    pub fn is_root(&self) -> bool {
        self.rank == 0
    }

    pub fn barrier(&self) {
        self.comm.barrier();
    }

    /// A barrier that also agrees whether to stop: every rank contributes the stop signal
    /// it received (0: none; [`crate::measure::stop`]) to an all-reduce (max), which no rank
    /// leaves before all have entered. All ranks get the same answer, so they stop
    /// together: `Err(Error::Interrupted)` when any rank was signalled.
    pub fn sync_or_stop(&self) -> Result<()> {
        let local = crate::measure::stop::received().max(0) as u64;
        match self.max_u64(local) {
            0 => Ok(()),
            sig => Err(Error::Interrupted { signal: sig as i32 }),
        }
    }

    /// Wall clock in seconds (MPI_Wtime under MPI).
    pub fn time(&self) -> f64 {
        self.comm.time_s()
    }

    /// `recv = op over ranks of send`, element-wise (MPI_Allreduce).
    /// Under time dilation padded by its estimated reduction arithmetic ([`World::dilate`]).
    pub fn all_reduce<T: Elem>(&self, send: &[T], recv: &mut [T], op: ReduceOp) {
        self.comm.all_reduce(T::buf(send), T::buf_mut(recv), op);
        self.pad_reduction(std::mem::size_of_val(send));
    }

    /// Every rank's `send` (same length on all), in rank order (MPI_Allgather).
    pub fn all_gather<T: Elem>(&self, send: &[T], recv: &mut [T]) {
        self.comm.all_gather(T::buf(send), T::buf_mut(recv));
    }

    /// Rank `r`'s `send` (`counts[r]` elements) at `displs[r]` of `recv` (MPI_Allgatherv).
    pub fn all_gather_v<T: Elem>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[i32],
        displs: &[i32],
    ) {
        self.comm
            .all_gather_v(T::buf(send), T::buf_mut(recv), counts, displs);
    }

    /// Sum over ranks into `recv` on rank `root` (MPI_Reduce); `recv` is ignored elsewhere.
    /// Under time dilation padded by its estimated reduction arithmetic ([`World::dilate`]).
    pub fn reduce_sum_to<T: Elem>(&self, root: usize, send: &[T], recv: &mut [T]) {
        let bytes = std::mem::size_of_val(send);
        let recv = (self.rank == root).then(|| T::buf_mut(recv));
        self.comm.reduce_to(root, T::buf(send), recv, ReduceOp::Sum);
        self.pad_reduction(bytes);
    }

    /// Every rank's `send` at `displs[r]` of `recv` on rank `root` (MPI_Gatherv); `recv`
    /// is ignored elsewhere.
    pub fn gather_v_to<T: Elem>(
        &self,
        root: usize,
        send: &[T],
        recv: &mut [T],
        counts: &[i32],
        displs: &[i32],
    ) {
        let recv = (self.rank == root).then(|| T::buf_mut(recv));
        self.comm
            .gather_v_to(root, T::buf(send), recv, counts, displs);
    }

    /// Rank `root`'s `buf` on every rank (MPI_Bcast).
    pub fn broadcast<T: Elem>(&self, root: usize, buf: &mut [T]) {
        self.comm.broadcast(root, T::buf_mut(buf));
    }

    /// Send to `dest` while receiving from `src` (MPI_Sendrecv; a ring step).
    pub fn send_receive<T: Elem>(&self, send: &[T], dest: usize, recv: &mut [T], src: usize) {
        self.comm
            .send_receive(T::buf(send), dest, T::buf_mut(recv), src);
    }

    /// `recv = sum over ranks of send` (MPI_Allreduce), called as is on every rank (one
    /// rank included): the collective micro-comm times.
    pub fn allreduce_sum_f32(&self, send: &[f32], recv: &mut [f32]) {
        self.all_reduce(send, recv, ReduceOp::Sum);
    }

    /// `recv` = every rank's `send`, in rank order (MPI_Allgather), called as is on every
    /// rank (one rank included): the collective micro-comm times.
    pub fn allgather_f32(&self, send: &[f32], recv: &mut [f32]) {
        self.all_gather(send, recv);
    }

    /// Post `recv = sum over ranks of send` (MPI_Iallreduce), run `during` while it is in
    /// flight, then wait for it; returns what `during` returned (micro-comm's overlap test).
    pub fn iallreduce_sum_f32_during<R>(
        &self,
        send: &[f32],
        recv: &mut [f32],
        during: impl FnOnce() -> R,
    ) -> R {
        let mut during = Some(during);
        let mut out = None;
        self.comm.all_reduce_sum_during(send, recv, &mut || {
            if let Some(f) = during.take() {
                out = Some(f());
            }
        });
        // Both backends call `during` exactly once.
        out.unwrap_or_else(|| unreachable!("the backend did not run `during`"))
    }

    /// [`ring::ring_allreduce`] over this world.
    pub fn ring_allreduce<T, F>(&self, data: &mut [T], scratch: &mut [T], merge: F) -> Result<()>
    where
        T: Elem,
        F: FnMut(usize, usize, &[T], &mut [T]) -> Result<()>,
    {
        ring::ring_allreduce(self, data, scratch, merge)
    }

    /// Element-wise max over ranks, in place (used for per-iteration times).
    pub fn max_in_place(&self, xs: &mut [f64]) {
        if self.size == 1 || xs.is_empty() {
            return;
        }
        let send = xs.to_vec();
        self.all_reduce(&send, xs, ReduceOp::Max);
    }

    /// Element-wise sum over ranks, in place (check references; outside timed regions).
    pub fn sum_f32_in_place(&self, xs: &mut [f32]) {
        if self.size == 1 || xs.is_empty() {
            return;
        }
        let send = xs.to_vec();
        self.all_reduce(&send, xs, ReduceOp::Sum);
    }

    /// Rank 0's `xs` on every rank, in place (check references; outside timed regions).
    pub fn broadcast_f32(&self, xs: &mut [f32]) {
        if self.size > 1 && !xs.is_empty() {
            self.broadcast(0, xs);
        }
    }

    /// Sum over ranks of one value.
    pub fn sum_u64(&self, x: u64) -> u64 {
        let mut out = [0u64];
        self.all_reduce(&[x], &mut out, ReduceOp::Sum);
        out[0]
    }

    /// Max over ranks of one value.
    pub fn max_u64(&self, x: u64) -> u64 {
        let mut out = [0u64];
        self.all_reduce(&[x], &mut out, ReduceOp::Max);
        out[0]
    }

    /// Every rank's `x`, in rank order.
    pub fn all_gather_u64(&self, x: u64) -> Vec<u64> {
        let mut all = vec![0u64; self.size];
        self.all_gather(&[x], &mut all);
        all
    }

    /// Broadcast a string from rank 0.
    pub fn broadcast_string(&self, s: &str) -> String {
        self.broadcast_string_from(0, s)
    }

    /// Broadcast a string from rank `from`.
    pub fn broadcast_string_from(&self, from: usize, s: &str) -> String {
        let mut len = [s.len() as u64];
        self.broadcast(from, &mut len);
        if len[0] == 0 {
            // A zero-length broadcast passes a dangling pointer, which MPI may reject.
            return String::new();
        }
        let mut buf = if self.rank == from {
            s.as_bytes().to_vec()
        } else {
            vec![0u8; len[0] as usize]
        };
        self.broadcast(from, &mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    }

    /// Every rank's host name, in rank order.
    pub fn host_names(&self) -> Vec<String> {
        let names = self.all_gather_str(&self.comm.processor_name());
        let _ = self.ranks_per_node.set(ranks_per_node(&names));
        names
    }

    /// Every rank's `mine` (up to 256 bytes each), in rank order.
    pub fn all_gather_str(&self, mine: &str) -> Vec<String> {
        const W: usize = 256;
        let mut buf = [0u8; W];
        let b = mine.as_bytes();
        let n = b.len().min(W);
        buf[..n].copy_from_slice(&b[..n]);
        let mut all = vec![0u8; W * self.size];
        self.all_gather(&buf, &mut all);
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
        // The lowest failing rank as a max of `size - rank` (0 for ranks that did not
        // fail): no unsigned MIN reduction, which MPICH once got wrong for u64.
        let mine = if my_code > 0 {
            (self.size - self.rank) as u64
        } else {
            0
        };
        let reporter = self.size as u64 - self.max_u64(mine);
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

#[cfg(test)]
mod tests {
    use super::collective::{Buf, BufMut, Collective, ReduceOp};
    use super::World;
    use crate::measure::dilation::Dilation;
    use std::time::Duration;

    /// One rank whose library reduction takes 8 ms per call whatever its length; every
    /// other operation is unused here.
    struct SlowReduce;

    impl Collective for SlowReduce {
        fn rank(&self) -> usize {
            0
        }
        fn size(&self) -> usize {
            1
        }
        fn barrier(&self) {}
        fn time_s(&self) -> f64 {
            0.0
        }
        fn all_reduce(&self, _: Buf, _: BufMut, _: ReduceOp) {
            unreachable!()
        }
        fn all_reduce_sum_during(&self, _: &[f32], _: &mut [f32], _: &mut dyn FnMut()) {
            unreachable!()
        }
        fn all_gather(&self, _: Buf, _: BufMut) {
            unreachable!()
        }
        fn all_gather_v(&self, _: Buf, _: BufMut, _: &[i32], _: &[i32]) {
            unreachable!()
        }
        fn reduce_to(&self, _: usize, _: Buf, _: Option<BufMut>, _: ReduceOp) {
            unreachable!()
        }
        fn gather_v_to(&self, _: usize, _: Buf, _: Option<BufMut>, _: &[i32], _: &[i32]) {
            unreachable!()
        }
        fn broadcast(&self, _: usize, _: BufMut) {
            unreachable!()
        }
        fn send_receive(&self, _: Buf, _: usize, _: BufMut, _: usize) {
            unreachable!()
        }
        fn reduce_local_sum_f32(&self, input: &[f32], inout: &mut [f32]) {
            for (o, i) in inout.iter_mut().zip(input) {
                *o += *i;
            }
            std::thread::sleep(Duration::from_millis(8));
        }
        fn processor_name(&self) -> String {
            "fake".into()
        }
        fn abort(&self, code: i32) -> ! {
            panic!("abort {code}")
        }
    }

    /// The reduction probe's unit is seconds per byte of f32 message: a probe of 1 MiB
    /// (2^18 f32) whose fastest call took 8 ms (plus the sleep's overshoot) gives
    /// 8e-3 / 2^20 s per byte, not 4x that (per element). The bound below 4x leaves the
    /// fastest of the probe's calls 23 ms of overshoot on a loaded machine (no tighter
    /// timing is asserted).
    #[test]
    fn the_reduction_probe_is_seconds_per_byte() {
        let world = World::new(Box::new(SlowReduce));
        let got = world.dilate(Dilation::new(2).unwrap());
        let want = 8e-3 / (1u64 << 20) as f64;
        assert!(got >= want && got < 3.9 * want, "{got} s/byte, want {want}");
        // Without dilation: no probe, no pad.
        let plain = World::new(Box::new(SlowReduce));
        assert_eq!(plain.dilate(Dilation::NONE), 0.0);
    }

    #[test]
    fn ranks_per_node_is_the_busiest_host() {
        let h = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(super::ranks_per_node(&h(&["a", "a", "b", "b"])), 2);
        assert_eq!(
            super::ranks_per_node(&h(&["a", "b", "a", "a", "b", "b", "a"])),
            4
        );
        assert_eq!(super::ranks_per_node(&h(&["a", "b", "c"])), 1);
        assert_eq!(super::ranks_per_node(&h(&["x"; 4])), 4);
        assert_eq!(super::ranks_per_node(&[]), 0);
    }
}
