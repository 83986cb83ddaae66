//! Exchange of a compressor's [`Wire`] over MPI. By default (`Native`) `sum_f32` goes by
//! MPI_Allreduce, `gather_u32` by MPI_Allgather of the counts then MPI_Allgatherv, and
//! `ring_u32` by our ring with the method's merge. The e2e collective axis can replace the
//! all-reduce by an all-gather plus local sum, or either by the parameter-server pattern
//! (reduce or gather to rank 0, then broadcast). Buffers are sized once from the largest
//! wire; exchanges allocate nothing.

use super::ring::{ring_allreduce, ring_scratch_len};
use super::{mpi_count, World};
use crate::compress::{Received, Wire, WireLen};
use crate::error::{Error, Result};
use mpi::collective::SystemOperation;
use mpi::datatype::PartitionMut;
use mpi::traits::*;

/// Which collectives carry the wire sections.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum CollectiveMode {
    /// The method's own: all-reduce for sums, all-gather-v for gathers, ring for rings.
    Native,
    /// Sums by MPI_Allreduce (methods whose wire is summable).
    AllReduce,
    /// Sums by MPI_Allgather + a local sum; gathers by MPI_Allgatherv.
    AllGather,
    /// Parameter server: sums by MPI_Reduce to rank 0 + MPI_Bcast; gathers by
    /// MPI_Gatherv to rank 0 + MPI_Bcast of the concatenation.
    Ps,
}

impl CollectiveMode {
    pub const NAMES: &'static str = "auto, allreduce, allgather, ps";

    pub fn parse(s: &str) -> Option<CollectiveMode> {
        match s {
            "auto" => Some(CollectiveMode::Native),
            "allreduce" => Some(CollectiveMode::AllReduce),
            "allgather" => Some(CollectiveMode::AllGather),
            "ps" => Some(CollectiveMode::Ps),
            _ => None,
        }
    }

    /// The name as used on the command line and in CSV (`auto` for Native).
    pub fn name(self) -> &'static str {
        match self {
            CollectiveMode::Native => "auto",
            CollectiveMode::AllReduce => "allreduce",
            CollectiveMode::AllGather => "allgather",
            CollectiveMode::Ps => "ps",
        }
    }

    /// Whether a method that aggregates by `agg` can use this mode; the reason if not.
    pub fn supports(
        self,
        agg: crate::compress::Aggregation,
    ) -> std::result::Result<(), &'static str> {
        use crate::compress::Aggregation as A;
        match (self, agg) {
            (CollectiveMode::Native, _) => Ok(()),
            (CollectiveMode::AllReduce, A::AllGather) => {
                Err("its messages (indices, signs, codes) cannot be summed in compressed form; use allgather or ps")
            }
            (_, A::Ring) => Err("its 1-bit messages are merged hop by hop along a ring; use auto"),
            _ => Ok(()),
        }
    }

    /// The collective that actually carries a method's messages in this mode.
    pub fn effective(self, agg: crate::compress::Aggregation) -> &'static str {
        match self {
            CollectiveMode::Native => agg.name(),
            m => m.name(),
        }
    }
}

/// Receive-side buffers of one exchange.
pub struct Exchange {
    mode: CollectiveMode,
    /// All-gather of sums: every rank's section, then summed locally.
    sum_gathered: Vec<f32>,
    n: usize,
    sum: Vec<f32>,
    gathered: Vec<u32>,
    counts_i32: Vec<i32>,
    displs_i32: Vec<i32>,
    counts: Vec<usize>,
    ring: Vec<u32>,
    ring_scratch: Vec<u32>,
    gather_used: bool,
    sum_len: usize,
    gather_total: usize,
}

impl Exchange {
    /// Buffers for wires up to `cap` on every rank of `world` (setup; touches memory).
    pub fn new(world: &World, cap: WireLen) -> Result<Exchange> {
        Exchange::with_mode(world, cap, CollectiveMode::Native)
    }

    /// [`Exchange::new`] with the collectives of `mode`.
    pub fn with_mode(world: &World, cap: WireLen, mode: CollectiveMode) -> Result<Exchange> {
        let n = world.size;
        mpi_count(cap.gather_u32 * n, "all-gather of the wire")?;
        mpi_count(cap.sum_f32, "all-reduce of the wire")?;
        let sum_gathered = if mode == CollectiveMode::AllGather {
            mpi_count(cap.sum_f32 * n, "all-gather of summable data")?;
            vec![0.0; cap.sum_f32 * n]
        } else {
            Vec::new()
        };
        Ok(Exchange {
            mode,
            sum_gathered,
            n,
            sum: vec![0.0; cap.sum_f32],
            gathered: vec![0; cap.gather_u32 * n],
            counts_i32: vec![0; n],
            displs_i32: vec![0; n],
            counts: vec![0; n],
            ring: Vec::with_capacity(cap.ring_u32),
            ring_scratch: vec![0; ring_scratch_len(cap.ring_u32, n)],
            gather_used: cap.gather_u32 > 0,
            sum_len: 0,
            gather_total: 0,
        })
    }

    /// Exchange `wire` with every rank. `merge` folds ring chunks (see
    /// [`ring_allreduce`]); it is only called when the wire has a ring section.
    /// The sections' presence must agree across ranks (they do: it follows the shapes).
    pub fn run<F>(&mut self, world: &World, wire: &Wire, merge: F) -> Result<()>
    where
        F: FnMut(usize, usize, &[u32], &mut [u32]) -> Result<()>,
    {
        let comm = &world.comm;
        let ns = wire.sum_f32.len();
        if ns > self.sum.len() {
            return Err(overflow("sum_f32", ns, self.sum.len()));
        }
        if ns > 0 {
            match self.mode {
                CollectiveMode::Native | CollectiveMode::AllReduce => comm.all_reduce_into(
                    &wire.sum_f32[..],
                    &mut self.sum[..ns],
                    SystemOperation::sum(),
                ),
                CollectiveMode::AllGather => {
                    let all = &mut self.sum_gathered[..ns * self.n];
                    comm.all_gather_into(&wire.sum_f32[..], all);
                    let out = &mut self.sum[..ns];
                    out.copy_from_slice(&all[..ns]);
                    for w in 1..self.n {
                        for (o, x) in out.iter_mut().zip(&all[w * ns..(w + 1) * ns]) {
                            *o += *x;
                        }
                    }
                }
                CollectiveMode::Ps => {
                    let root = comm.process_at_rank(0);
                    if world.is_root() {
                        root.reduce_into_root(
                            &wire.sum_f32[..],
                            &mut self.sum[..ns],
                            SystemOperation::sum(),
                        );
                    } else {
                        root.reduce_into(&wire.sum_f32[..], SystemOperation::sum());
                    }
                    root.broadcast_into(&mut self.sum[..ns]);
                }
            }
        }
        self.gather_total = 0;
        self.counts.iter_mut().for_each(|c| *c = 0);
        if self.gather_used {
            let ng = wire.gather_u32.len();
            if ng * self.n > self.gathered.len() {
                return Err(overflow("gather_u32", ng, self.gathered.len() / self.n));
            }
            let mine = ng as i32;
            comm.all_gather_into(&mine, &mut self.counts_i32[..]);
            let mut off = 0i32;
            for (i, &c) in self.counts_i32.iter().enumerate() {
                self.displs_i32[i] = off;
                self.counts[i] = c as usize;
                off += c;
            }
            let total = off as usize;
            self.gather_total = total;
            if self.mode == CollectiveMode::Ps {
                let root = comm.process_at_rank(0);
                if world.is_root() {
                    let mut part = PartitionMut::new(
                        &mut self.gathered[..total],
                        &self.counts_i32[..],
                        &self.displs_i32[..],
                    );
                    root.gather_varcount_into_root(&wire.gather_u32[..], &mut part);
                } else {
                    root.gather_varcount_into(&wire.gather_u32[..]);
                }
                root.broadcast_into(&mut self.gathered[..total]);
            } else {
                let mut part = PartitionMut::new(
                    &mut self.gathered[..total],
                    &self.counts_i32[..],
                    &self.displs_i32[..],
                );
                comm.all_gather_varcount_into(&wire.gather_u32[..], &mut part);
            }
        }
        let nr = wire.ring_u32.len();
        self.ring.clear();
        if nr > 0 {
            if nr > self.ring.capacity() {
                return Err(overflow("ring_u32", nr, self.ring.capacity()));
            }
            self.ring.extend_from_slice(&wire.ring_u32);
            ring_allreduce(comm, &mut self.ring, &mut self.ring_scratch, merge)?;
        }
        self.sum_len = ns;
        Ok(())
    }
}

impl Exchange {
    /// What the last [`Exchange::run`] produced.
    pub fn received(&self) -> Received<'_> {
        Received {
            sum_f32: &self.sum[..self.sum_len],
            gathered_u32: &self.gathered[..self.gather_total],
            gather_counts: &self.counts,
            ring_u32: &self.ring,
            world_size: self.n,
        }
    }
}

/// A single worker's wire seen as if exchanged among one worker (micro-compress).
pub fn received_alone<'a>(wire: &'a Wire, counts: &'a [usize]) -> Received<'a> {
    Received {
        sum_f32: &wire.sum_f32,
        gathered_u32: &wire.gather_u32,
        gather_counts: counts,
        ring_u32: &wire.ring_u32,
        world_size: 1,
    }
}

fn overflow(section: &str, len: usize, cap: usize) -> Error {
    Error::Runtime(format!(
        "wire section {section} has {len} words but the method declared at most {cap} (wire_capacity): a bug in the method"
    ))
}
