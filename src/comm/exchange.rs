//! Exchange of a compressor's [`Wire`] over MPI, as a short [`ExchangePlan`] of
//! collectives that [`Exchange::run`] executes and the simulator prices (sim/mod.rs,
//! `exchange_s`): the same plan, so the two cannot disagree on what an exchange costs.
//! By default (`Native`) `sum_f32` goes by MPI_Allreduce, `gather_u32` by MPI_Allgather
//! when every worker's section has the same fixed length ([`WireLen::gather_exact`]),
//! else by an MPI_Allgather of the lengths then MPI_Allgatherv, and `ring_u32` by our ring
//! with the method's merge. The e2e collective axis can replace the all-reduce by an
//! all-gather plus local sum, by gradcomp's own ring all-reduce (`ring`: S-SGD over the
//! same ring as Marsit), or either by the parameter-server pattern (reduce or gather to
//! rank 0, then broadcast). Buffers are sized once from the largest wire; exchanges
//! allocate nothing.

use super::ring::{ring_allreduce, ring_scratch_len, sum_merge};
use super::{mpi_count, ReduceOp, World};
use crate::compress::{Aggregation, Received, Wire, WireLen};
use crate::error::{Error, Result};

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
    /// Sums by gradcomp's ring all-reduce over MPI_Sendrecv (comm/ring.rs), the ring
    /// Marsit's bits travel on: S-SGD over it compares with Marsit like with like.
    Ring,
}

impl CollectiveMode {
    pub const NAMES: &'static str = "auto, allreduce, allgather, ps, ring";

    pub fn parse(s: &str) -> Option<CollectiveMode> {
        match s {
            "auto" => Some(CollectiveMode::Native),
            "allreduce" => Some(CollectiveMode::AllReduce),
            "allgather" => Some(CollectiveMode::AllGather),
            "ps" => Some(CollectiveMode::Ps),
            "ring" => Some(CollectiveMode::Ring),
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
            CollectiveMode::Ring => "ring",
        }
    }

    /// Whether a method that aggregates by `agg` can use this mode; the reason if not.
    pub fn supports(self, agg: Aggregation) -> std::result::Result<(), &'static str> {
        use Aggregation as A;
        match (self, agg) {
            (CollectiveMode::Native, _) => Ok(()),
            (CollectiveMode::AllReduce | CollectiveMode::Ring, A::AllGather) => {
                Err("its messages (indices, signs, codes) cannot be summed in compressed form; use allgather or ps")
            }
            (CollectiveMode::Ring, A::Ring) => Ok(()),
            (_, A::Ring) => Err("its 1-bit messages are merged hop by hop along a ring; use auto or ring"),
            _ => Ok(()),
        }
    }

    /// The collective that actually carries a method's messages in this mode.
    pub fn effective(self, agg: Aggregation) -> &'static str {
        match (self, agg) {
            (CollectiveMode::Native, _) | (CollectiveMode::Ring, Aggregation::Ring) => agg.name(),
            (m, _) => m.name(),
        }
    }
}

/// One collective of an exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExchangeOp {
    /// MPI_Allreduce of the sum section.
    SumAllReduce,
    /// MPI_Allgather of the sum section, summed locally (`n - 1` received copies).
    SumAllGather,
    /// MPI_Reduce of the sum section to rank 0, then MPI_Bcast of the result.
    SumReduceBcast,
    /// gradcomp's ring all-reduce of the sum section (plain f32 sum).
    SumRing,
    /// MPI_Allgather of each rank's gather length (one word): variable lengths only.
    GatherLengths,
    /// MPI_Allgather (exact lengths) or MPI_Allgatherv of the gather section.
    Gather,
    /// MPI_Gather(v) of the gather section to rank 0, then MPI_Bcast of the concatenation.
    GatherBcast,
    /// gradcomp's ring all-reduce of the ring section with the method's merge.
    Ring,
}

/// The collectives of one exchange, in order, each with the words one rank contributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExchangePlan {
    ops: [(ExchangeOp, usize); 4],
    len: usize,
}

impl ExchangePlan {
    /// The plan for a wire with these sections under `mode`. `gather_used`: the method has
    /// a gather section (it is exchanged, possibly empty, whenever the method declares
    /// one, so every rank issues the same collectives).
    pub fn new(mode: CollectiveMode, w: WireLen, gather_used: bool) -> ExchangePlan {
        let mut p = ExchangePlan {
            ops: [(ExchangeOp::Ring, 0); 4],
            len: 0,
        };
        let mut push = |op, words| {
            p.ops[p.len] = (op, words);
            p.len += 1;
        };
        if w.sum_f32 > 0 {
            let op = match mode {
                CollectiveMode::Native | CollectiveMode::AllReduce => ExchangeOp::SumAllReduce,
                CollectiveMode::AllGather => ExchangeOp::SumAllGather,
                CollectiveMode::Ps => ExchangeOp::SumReduceBcast,
                CollectiveMode::Ring => ExchangeOp::SumRing,
            };
            push(op, w.sum_f32);
        }
        if gather_used {
            if !w.gather_exact {
                push(ExchangeOp::GatherLengths, 1);
            }
            let op = if mode == CollectiveMode::Ps {
                ExchangeOp::GatherBcast
            } else {
                ExchangeOp::Gather
            };
            push(op, w.gather_u32);
        }
        if w.ring_u32 > 0 {
            push(ExchangeOp::Ring, w.ring_u32);
        }
        p
    }

    /// The collectives in the order they run, with the words each rank contributes.
    pub fn ops(&self) -> &[(ExchangeOp, usize)] {
        &self.ops[..self.len]
    }
}

/// Receive-side buffers of one exchange.
pub struct Exchange {
    mode: CollectiveMode,
    /// All-gather of sums: every rank's section, then summed locally.
    sum_gathered: Vec<f32>,
    /// Ring all-reduce of sums: one chunk.
    sum_scratch: Vec<f32>,
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
    collectives: u64,
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
        let sum_scratch = if mode == CollectiveMode::Ring {
            vec![0.0; ring_scratch_len(cap.sum_f32, n)]
        } else {
            Vec::new()
        };
        Ok(Exchange {
            mode,
            sum_gathered,
            sum_scratch,
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
            collectives: 0,
        })
    }

    /// Exchange `wire` with every rank by the collectives of its [`ExchangePlan`].
    /// `gather_exact`: every rank's gather section has this rank's length (the method
    /// declares it, [`WireLen::gather_exact`]), so no lengths are exchanged. `merge` folds
    /// ring chunks (see [`ring_allreduce`]); it is only called when the wire has a ring
    /// section. The sections' presence must agree across ranks (they do: it follows the
    /// shapes).
    pub fn run<F>(&mut self, world: &World, wire: &Wire, gather_exact: bool, merge: F) -> Result<()>
    where
        F: FnMut(usize, usize, &[u32], &mut [u32]) -> Result<()>,
    {
        let (ns, ng, nr) = (
            wire.sum_f32.len(),
            wire.gather_u32.len(),
            wire.ring_u32.len(),
        );
        if ns > self.sum.len() {
            return Err(overflow("sum_f32", ns, self.sum.len()));
        }
        if ng * self.n > self.gathered.len() {
            return Err(overflow("gather_u32", ng, self.gathered.len() / self.n));
        }
        if nr > self.ring.capacity() {
            return Err(overflow("ring_u32", nr, self.ring.capacity()));
        }
        let plan = ExchangePlan::new(
            self.mode,
            WireLen {
                sum_f32: ns,
                gather_u32: ng,
                ring_u32: nr,
                gather_exact,
            },
            self.gather_used,
        );
        self.gather_total = 0;
        self.counts.iter_mut().for_each(|c| *c = 0);
        self.ring.clear();
        let mut merge = merge;
        for &(op, _) in plan.ops() {
            self.collectives += 1;
            match op {
                ExchangeOp::SumAllReduce
                | ExchangeOp::SumAllGather
                | ExchangeOp::SumReduceBcast
                | ExchangeOp::SumRing => self.sum(world, op, &wire.sum_f32)?,
                ExchangeOp::GatherLengths => {
                    world.all_gather(&[ng as i32], &mut self.counts_i32[..]);
                    self.set_displacements();
                }
                ExchangeOp::Gather | ExchangeOp::GatherBcast => {
                    if gather_exact {
                        self.counts_i32.iter_mut().for_each(|c| *c = ng as i32);
                        self.set_displacements();
                    }
                    self.gather(world, op, gather_exact, &wire.gather_u32);
                }
                ExchangeOp::Ring => {
                    self.ring.extend_from_slice(&wire.ring_u32);
                    ring_allreduce(world, &mut self.ring, &mut self.ring_scratch, &mut merge)?;
                }
            }
        }
        self.sum_len = ns;
        Ok(())
    }

    /// Collectives run so far (each MPI collective or ring all-reduce counts one).
    pub fn collectives(&self) -> u64 {
        self.collectives
    }

    fn set_displacements(&mut self) {
        let mut off = 0i32;
        for (i, &c) in self.counts_i32.iter().enumerate() {
            self.displs_i32[i] = off;
            self.counts[i] = c as usize;
            off += c;
        }
        self.gather_total = off as usize;
    }

    fn sum(&mut self, world: &World, op: ExchangeOp, send: &[f32]) -> Result<()> {
        let ns = send.len();
        let out = &mut self.sum[..ns];
        match op {
            ExchangeOp::SumAllGather => {
                let all = &mut self.sum_gathered[..ns * self.n];
                world.all_gather(send, all);
                // The local sum is host work: under time dilation stretched to k x its
                // CPU time.
                let span = world.dilation().start();
                out.copy_from_slice(&all[..ns]);
                for w in 1..self.n {
                    for (o, x) in out.iter_mut().zip(&all[w * ns..(w + 1) * ns]) {
                        *o += *x;
                    }
                }
                world.dilation().stretch(span);
            }
            ExchangeOp::SumReduceBcast => {
                world.reduce_sum_to(0, send, out);
                world.broadcast(0, out);
            }
            ExchangeOp::SumRing => {
                out.copy_from_slice(send);
                ring_allreduce(world, out, &mut self.sum_scratch, sum_merge)?;
            }
            _ => world.all_reduce(send, out, ReduceOp::Sum),
        }
        Ok(())
    }

    fn gather(&mut self, world: &World, op: ExchangeOp, exact: bool, send: &[u32]) {
        let total = self.gather_total;
        let recv = &mut self.gathered[..total];
        if op == ExchangeOp::GatherBcast {
            world.gather_v_to(0, send, recv, &self.counts_i32, &self.displs_i32);
            world.broadcast(0, recv);
        } else if exact {
            world.all_gather(send, recv);
        } else {
            world.all_gather_v(send, recv, &self.counts_i32, &self.displs_i32);
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compress::{registry, MethodParams, WorkerCtx};

    /// Collectives one step of `method` issues for a `rows x cols` tensor (every round).
    fn collectives_per_step(method: &str, mode: CollectiveMode, rows: usize, cols: usize) -> usize {
        let ctx = WorkerCtx {
            rank: 1,
            world_size: 4,
            seed: 7,
        };
        let mut c = registry::build(method, &MethodParams::default(), ctx).unwrap();
        c.register(0, rows, cols).unwrap();
        (0..c.rounds())
            .map(|r| {
                let w = c.wire_capacity(0, r);
                ExchangePlan::new(mode, w, w.gather_u32 > 0).ops().len()
            })
            .sum()
    }

    /// The plans' collective counts where the mode or the tensor changes them: the
    /// parameter-server pattern keeps Top-k's and DGC's counts, a 1-D DGC tensor goes
    /// dense (one all-reduce). What each method issues per step, counted as it runs:
    /// `bench::compress::tests::collectives_issued_per_step_per_method`.
    #[test]
    fn collectives_per_step_follow_the_mode_and_the_tensor() {
        assert_eq!(collectives_per_step("topk", CollectiveMode::Ps, 64, 48), 1);
        assert_eq!(collectives_per_step("dgc", CollectiveMode::Ps, 64, 48), 2);
        assert_eq!(
            collectives_per_step("dgc", CollectiveMode::Native, 1, 3072),
            1
        );
    }

    #[test]
    fn plans_follow_the_mode() {
        let sum = WireLen {
            sum_f32: 10,
            ..WireLen::default()
        };
        let op = |m| ExchangePlan::new(m, sum, false).ops()[0].0;
        assert_eq!(op(CollectiveMode::Native), ExchangeOp::SumAllReduce);
        assert_eq!(op(CollectiveMode::AllGather), ExchangeOp::SumAllGather);
        assert_eq!(op(CollectiveMode::Ps), ExchangeOp::SumReduceBcast);
        assert_eq!(op(CollectiveMode::Ring), ExchangeOp::SumRing);
        // A variable gather: lengths first, then the data.
        let g = WireLen {
            gather_u32: 8,
            ..WireLen::default()
        };
        assert_eq!(
            ExchangePlan::new(CollectiveMode::Native, g, true).ops(),
            &[(ExchangeOp::GatherLengths, 1), (ExchangeOp::Gather, 8)]
        );
        let exact = WireLen {
            gather_exact: true,
            ..g
        };
        assert_eq!(
            ExchangePlan::new(CollectiveMode::Native, exact, true).ops(),
            &[(ExchangeOp::Gather, 8)]
        );
        // S-SGD over the ring is allowed; gathered messages cannot be summed on it.
        assert!(CollectiveMode::Ring
            .supports(Aggregation::AllReduce)
            .is_ok());
        assert!(CollectiveMode::Ring
            .supports(Aggregation::AllGather)
            .is_err());
        assert!(CollectiveMode::Ring.supports(Aggregation::Ring).is_ok());
        assert_eq!(
            CollectiveMode::Ring.effective(Aggregation::AllReduce),
            "ring"
        );
        assert_eq!(CollectiveMode::parse("ring"), Some(CollectiveMode::Ring));
    }
}
