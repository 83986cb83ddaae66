//! Random-k sparsification with error feedback (docs/methods.md, "randomk"), as GRACE's
//! `randomk` compressor with its `residual` memory and its default `allreduce`
//! communicator (sands-lab/grace at bbb127c: `grace_dl/torch/compressor/randomk.py`,
//! `grace_dl/torch/memory/residual.py`, `grace_dl/torch/helper.py`); the memory is Stich
//! et al.'s (NeurIPS 2018, "Sparsified SGD with Memory", Alg. 1 with `rand_k`).
//!
//! Per tensor and step: `p = g + e`; the `k = ceil(rho d)` indices are a uniform random
//! `k`-subset drawn from a stream every worker seeds alike, (run seed, step, tensor)
//! (GRACE: `torch.manual_seed(sum(name bytes) + global_step)`, then `randperm(numel)[:k]`,
//! randomk.py lines 26-29 and 10), so the indices never travel: the wire is the `k`
//! values `p[I]` alone (`sum_f32`, all-reduced); decompress writes `out[I] = sum / n`,
//! zeros elsewhere; the residual keeps what was not sent, `e = p` with `e[I] = 0`
//! (residual.py: `residual = tensor - decompress(own)`), in `feedback`.
//!
//! Differences from GRACE: `k` rounds up (gradcomp's `k_of`, as for every sparsifier;
//! GRACE's `int(numel * ratio)` rounds down), and the subset is drawn by Floyd's algorithm
//! (Bentley & Floyd, CACM 1987) and sent in ascending index order, not as a prefix of a
//! permutation: the same distribution, O(k) work instead of O(d).

use super::device::{self, Out, F32, I64};
use super::residual::{self, Residual};
use super::select::{grad_slice, indexable_len, out_slice, single_round, touched_vec};
use super::ssgd::check_summed;
use super::topk::check_density;
use super::{
    Aggregation, Compressor, MethodParams, Received, Result, TensorId, Wire, WireLen, WorkerCtx,
};
use crate::measure::rng::rng_for;
use crate::roofline::Stage;
use ndarray::{ArrayView2, ArrayViewMut2};
use rand::Rng;

const NAME: &str = "randomk";
/// RNG stream tag of the index draw ("rndk"); no rank: every worker draws the same set.
const STREAM_INDICES: u64 = 0x726e_646b;

/// Random-k's description ([`super::registry::SPECS`]).
pub const SPEC: super::spec::MethodSpec = super::spec::MethodSpec {
    name: NAME,
    summary: "k values of g + e at indices drawn alike on every worker, all-reduced; error feedback",
    aggregation: Aggregation::AllReduce,
    rounds: 1,
    phases: 1,
    params: &["density"],
    density: None,
    min_compression_rate: None,
    owns_momentum: false,
    by_elements: true,
    wire_bytes: "4 k, k = ceil(density d) (the values; the indices come from the shared seed)",
    memory: "residual e (d floats), the k drawn indices, a d-bit draw mask",
    state_bytes: None,
    citations: &[
        "Stich, Cordonnier & Jaggi, \"Sparsified SGD with Memory\", NeurIPS 2018 (rand_k with memory)",
        "sands-lab/grace grace_dl/torch/compressor/randomk.py at bbb127c, lines 6-12 and 23-32",
        "sands-lab/grace grace_dl/torch/memory/residual.py (ResidualMemory)",
    ],
    build: |p, ctx| Ok(Box::new(RandomK::new(p, ctx)?)),
    fusion_sizing: None,
    reference_costs: super::spec::ReferenceCosts {
        source: "reference fit, 2026-11-29, gradcomp 7d46e4c+uncommitted, \
            AMD EPYC (2 cores, load average 11-12 from other jobs), 1 rank, \
            bench-configs/reference-costs.toml at methods = [\"topk\", \"randomk\"] + gradcomp fit; \
            topk of the same run for scale: compress 5.67e-10 s/element (the reference fit: \
            5.76e-10), decompress 4.35e-11 (2.45e-10)",
        compress: super::spec::LinearCost::new(4.7425177567167626e-8, 1.2741605995695312e-10),
        feedback: super::spec::LinearCost::new(2.7428307893608517e-8, 1.35224354720136e-12),
        decompress: super::spec::LinearCost::new(2.8076141897154717e-8, 4.054918629883057e-11),
    },
};

/// Random-k with error feedback; wire `sum_f32` = the k values, ascending index.
#[derive(Debug, Clone)]
pub struct RandomK {
    params: MethodParams,
    ctx: WorkerCtx,
    step: u64,
    /// Per-tensor residual and the last draw (all of it sent), allocated and touched in
    /// `register`.
    tensors: Vec<Option<Residual>>,
    /// Floyd's draw mask, one bit per element of the largest tensor (all clear between draws).
    mask: Vec<u64>,
}

/// The `k`-subset of `0..d` drawn for (seed, step, tensor), ascending, into `idx`
/// (length `k`), with `mask` (at least `ceil(d / 64)` words, all clear; left clear).
/// Floyd's algorithm: for `j` in `d-k..d` draw `r` uniform in `0..=j` and take `r`, or
/// `j` if `r` was taken; every `k`-subset is equally likely.
fn draw(seed: u64, step: u64, t: TensorId, d: usize, idx: &mut [u32], mask: &mut [u64]) {
    let k = idx.len();
    let mut rng = rng_for(seed, step, t, STREAM_INDICES);
    for (slot, j) in idx.iter_mut().zip(d - k..d) {
        let r = rng.gen_range(0..=j);
        let pick = if mask[r / 64] >> (r % 64) & 1 == 1 {
            j
        } else {
            r
        };
        mask[pick / 64] |= 1 << (pick % 64);
        *slot = pick as u32;
    }
    for &i in idx.iter() {
        mask[i as usize / 64] = 0;
    }
    idx.sort_unstable();
}

impl RandomK {
    /// Reads `density` (rho in (0, 1]).
    pub fn new(p: &MethodParams, ctx: WorkerCtx) -> Result<Self> {
        let p = &p.for_method(NAME);
        check_density(NAME, p.density_for(NAME))?;
        Ok(RandomK {
            params: p.clone(),
            ctx,
            step: 0,
            tensors: Vec::new(),
            mask: Vec::new(),
        })
    }
}

impl Compressor for RandomK {
    fn name(&self) -> &'static str {
        NAME
    }
    fn aggregation(&self) -> Aggregation {
        Aggregation::AllReduce
    }
    fn register(&mut self, t: TensorId, rows: usize, cols: usize) -> Result<()> {
        let d = indexable_len(NAME, t, rows, cols)?;
        let k = self.params.k_of(d);
        if self.mask.len() < d.div_ceil(64) {
            self.mask = touched_vec(d.div_ceil(64), 0, 1);
        }
        residual::register(&mut self.tensors, t, Residual::new(rows, cols, k));
        Ok(())
    }
    fn wire_capacity(&self, t: TensorId, _round: usize) -> WireLen {
        let k = self
            .tensors
            .get(t)
            .and_then(Option::as_ref)
            .map_or(0, |s| s.k);
        WireLen {
            sum_f32: k,
            ..WireLen::default()
        }
    }
    fn begin_step(&mut self, step: u64) {
        self.step = step;
    }
    fn compress(
        &mut self,
        t: TensorId,
        round: usize,
        grad: ArrayView2<f32>,
        wire: &mut Wire,
    ) -> Result<()> {
        single_round(NAME, round)?;
        let (seed, step) = (self.ctx.seed, self.step);
        let RandomK { tensors, mask, .. } = self;
        let st = residual::registered(NAME, tensors, t)?;
        let g = grad_slice(NAME, t, &grad, st.rows, st.cols)?;
        st.settle();
        st.e.iter_mut().zip(g).for_each(|(e, g)| *e += *g);
        draw(seed, step, t, st.e.len(), st.sent.buf_mut(), mask);
        st.sent.mark(st.k);
        wire.clear();
        wire.sum_f32
            .extend(st.sent.indices().iter().map(|&i| st.e[i as usize]));
        Ok(())
    }
    fn feedback(&mut self, t: TensorId, _round: usize) -> Result<()> {
        residual::registered(NAME, &mut self.tensors, t)?.settle();
        Ok(())
    }
    /// GRACE's `randomk` on the GPU (docs/methods.md, "Device kernels"). Compress:
    /// `ResidualMemory.compensate` (`beta * residual + gamma * tensor`, beta = gamma = 1:
    /// two scalings and an add), `torch.randperm(numel)` (PyTorch sorts `numel` random
    /// keys with their int64 positions: [`device::radix_sort_pairs`], 64-bit keys, so
    /// 8 passes), the gather `tensor[indices]`, then `ResidualMemory.update`: decompress
    /// of its own values (`zeros`, `scatter_`) and `residual = tensor - decompressed`.
    /// Decompress: `zeros(numel)` and one `scatter_` of the all-reduced values (the
    /// average is Horovod's, on the `k` values).
    fn device_kernels(&self, t: TensorId, round: usize, _phase: usize, stage: Stage, out: Out) {
        let Some(st) = device::round0(&self.tensors, t, round) else {
            return;
        };
        let (d, k) = (st.e.len(), st.k);
        let (df, kf) = (d as f64, k as f64);
        match stage {
            Stage::Compress => {
                out(device::ew("beta * residual", d, 1, 1));
                out(device::ew("gamma * tensor", d, 1, 1));
                out(device::ew("p = beta e + gamma g", d, 2, 1));
                out(device::mem("randperm: random keys", I64 * df));
                device::radix_sort_pairs(out, d, I64, I64, 8, true);
                out(device::mem(
                    "values = p[indices] (gather)",
                    (I64 + 2.0 * F32) * kf,
                ));
                out(device::mem("own decompress: torch.zeros(numel)", F32 * df));
                out(device::mem(
                    "own decompress: scatter_(0, indices, values)",
                    (I64 + 2.0 * F32) * kf,
                ));
                out(device::ew("residual = p - decompressed", d, 2, 1));
            }
            Stage::Decompress => {
                out(device::mem("values / n (average)", 2.0 * F32 * kf));
                out(device::mem("torch.zeros(numel)", F32 * df));
                out(device::mem(
                    "scatter_(0, indices, values)",
                    (I64 + 2.0 * F32) * kf,
                ));
            }
        }
    }
    fn decompress(
        &mut self,
        t: TensorId,
        round: usize,
        received: &Received,
        out: ArrayViewMut2<f32>,
    ) -> Result<()> {
        single_round(NAME, round)?;
        let st = residual::registered(NAME, &mut self.tensors, t)?;
        check_summed(NAME, t, received, st.k)?;
        let o = out_slice(NAME, t, out, st.rows, st.cols)?;
        o.fill(0.0);
        let n = received.world_size as f32;
        for (&i, &v) in st.sent.indices().iter().zip(received.sum_f32) {
            o[i as usize] = v / n;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::Array2;

    fn ctx(rank: usize, world_size: usize) -> WorkerCtx {
        WorkerCtx {
            rank,
            world_size,
            seed: 7,
        }
    }

    fn with_density(rho: f64) -> MethodParams {
        MethodParams {
            density: Some(rho),
            ..MethodParams::default()
        }
    }

    fn grad(rows: usize, cols: usize, salt: f32) -> Array2<f32> {
        Array2::from_shape_fn((rows, cols), |(r, c)| {
            ((r * cols + c) as f32 * 0.37 + salt).sin()
        })
    }

    /// `n` simulated workers through one step: each compresses its gradient, the values
    /// are summed as MPI_Allreduce would, each decompresses. Returns the outputs and the
    /// workers' `p = g + e` before feedback, and checks the wire against the closed form.
    fn step(
        ws: &mut [RandomK],
        grads: &[Array2<f32>],
        step: u64,
    ) -> (Vec<Array2<f32>>, Vec<Vec<f32>>) {
        let n = ws.len();
        let mut wires = Vec::new();
        let mut ps = Vec::new();
        for (w, g) in ws.iter_mut().zip(grads) {
            w.begin_step(step);
            let before: Vec<f32> = w.tensors[0].as_ref().unwrap().e.clone();
            let mut wire = Wire::default();
            wire.reserve(w.wire_capacity(0, 0));
            let cap = wire.sum_f32.capacity();
            w.compress(0, 0, g.view(), &mut wire).unwrap();
            assert_eq!(
                wire.sum_f32.capacity(),
                cap,
                "compress reallocated the wire"
            );
            let d = g.len();
            // The wire: k = ceil(rho d) f32 values, 4 k bytes, nothing gathered.
            let k = ((w.params.density.unwrap() * d as f64).ceil() as usize).clamp(1, d);
            assert_eq!(wire.bytes(), 4 * k);
            assert!(wire.gather_u32.is_empty() && wire.ring_u32.is_empty());
            ps.push(
                before
                    .iter()
                    .zip(g.iter())
                    .map(|(e, g)| e + g)
                    .collect::<Vec<f32>>(),
            );
            w.feedback(0, 0).unwrap();
            wires.push(wire);
        }
        let k = wires[0].sum_f32.len();
        let sum: Vec<f32> = (0..k)
            .map(|i| wires.iter().map(|w| w.sum_f32[i]).sum())
            .collect();
        let outs = ws
            .iter_mut()
            .zip(grads)
            .map(|(w, g)| {
                let mut out = Array2::zeros(g.dim());
                let r = Received {
                    sum_f32: &sum,
                    gathered_u32: &[],
                    gather_counts: &[],
                    ring_u32: &[],
                    world_size: n,
                };
                w.decompress(0, 0, &r, out.view_mut()).unwrap();
                out
            })
            .collect();
        (outs, ps)
    }

    #[test]
    fn workers_draw_the_same_k_distinct_indices_and_steps_differ() {
        let (rows, cols) = (7, 13);
        let mut ws: Vec<RandomK> = (0..3)
            .map(|r| RandomK::new(&with_density(0.2), ctx(r, 3)).unwrap())
            .collect();
        for w in &mut ws {
            w.register(0, rows, cols).unwrap();
        }
        let grads: Vec<_> = (0..3).map(|r| grad(rows, cols, r as f32)).collect();
        step(&mut ws, &grads, 0);
        let first = ws[0].tensors[0].as_ref().unwrap().sent.indices().to_vec();
        // k = ceil(0.2 * 91) = 19 distinct ascending indices in range.
        assert_eq!(first.len(), 19);
        assert!(first.windows(2).all(|w| w[0] < w[1]) && *first.last().unwrap() < 91);
        for w in &ws {
            assert_eq!(w.tensors[0].as_ref().unwrap().sent.indices(), first);
        }
        step(&mut ws, &grads, 1);
        assert_ne!(ws[0].tensors[0].as_ref().unwrap().sent.indices(), first);
        // The mask is left clear for the next draw.
        assert!(ws.iter().all(|w| w.mask.iter().all(|&m| m == 0)));
    }

    #[test]
    fn decompress_is_the_worker_average_at_the_drawn_indices_and_feedback_conserves() {
        let (rows, cols, n) = (5, 40, 3);
        let mut ws: Vec<RandomK> = (0..n)
            .map(|r| RandomK::new(&with_density(0.1), ctx(r, n)).unwrap())
            .collect();
        for w in &mut ws {
            w.register(0, rows, cols).unwrap();
        }
        for s in 0..4 {
            let grads: Vec<_> = (0..n)
                .map(|r| grad(rows, cols, (s * n + r) as f32))
                .collect();
            let (outs, ps) = step(&mut ws, &grads, s as u64);
            let idx = ws[0].tensors[0].as_ref().unwrap().sent.indices().to_vec();
            for i in 0..rows * cols {
                let want = if idx.contains(&(i as u32)) {
                    ps.iter().map(|p| p[i]).sum::<f32>() / n as f32
                } else {
                    0.0
                };
                for o in &outs {
                    let got = o.as_slice().unwrap()[i];
                    assert!((got - want).abs() <= 1e-6 * want.abs().max(1.0), "{i}");
                }
            }
            // Each worker: p = sent + e (sent = p at the drawn indices).
            for (w, p) in ws.iter().zip(&ps) {
                let e = &w.tensors[0].as_ref().unwrap().e;
                for i in 0..rows * cols {
                    let sent = if idx.contains(&(i as u32)) { p[i] } else { 0.0 };
                    assert_eq!(sent + e[i], p[i]);
                }
            }
        }
    }

    /// Every k-subset is drawn: over many steps each index is drawn about k/d of the
    /// time (binomial, 5 sigma).
    #[test]
    fn the_draw_is_uniform_over_the_indices() {
        let (d, k, steps) = (50usize, 5usize, 4000u64);
        let mut counts = vec![0u32; d];
        let (mut idx, mut mask) = (vec![0u32; k], vec![0u64; 1]);
        for s in 0..steps {
            draw(3, s, 0, d, &mut idx, &mut mask);
            for &i in &idx {
                counts[i as usize] += 1;
            }
        }
        let p = k as f64 / d as f64;
        let mean = steps as f64 * p;
        let sd = (steps as f64 * p * (1.0 - p)).sqrt();
        for (i, &c) in counts.iter().enumerate() {
            assert!(
                (c as f64 - mean).abs() < 5.0 * sd,
                "index {i}: {c} vs {mean}"
            );
        }
        // k = d takes every index.
        let mut all = vec![0u32; 7];
        draw(1, 0, 0, 7, &mut all, &mut mask);
        assert_eq!(all, [0, 1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn bad_parameters_ids_and_shapes_are_errors() {
        for rho in [0.0, -0.1, 1.5, f64::NAN] {
            assert!(
                RandomK::new(&with_density(rho), ctx(0, 2)).is_err(),
                "{rho}"
            );
        }
        let mut w = RandomK::new(&MethodParams::default(), ctx(0, 2)).unwrap();
        w.register(0, 4, 8).unwrap();
        let mut wire = Wire::default();
        let g = grad(4, 8, 0.0);
        assert!(w.compress(1, 0, g.view(), &mut wire).is_err());
        assert!(w.compress(0, 1, g.view(), &mut wire).is_err());
        assert!(w.compress(0, 0, grad(8, 4, 0.0).view(), &mut wire).is_err());
        assert!(w.register(1, 0, 5).is_err());
        let mut out = Array2::zeros((4, 8));
        let r = Received {
            sum_f32: &[1.0, 2.0],
            gathered_u32: &[],
            gather_counts: &[],
            ring_u32: &[],
            world_size: 2,
        };
        // Default density: k = 1 of 32; two values is a mismatch.
        assert!(w.decompress(0, 0, &r, out.view_mut()).is_err());
        assert!(w.feedback(9, 0).is_err());
    }

    /// GRACE's `randomk` kernels (docs/methods.md, "Device kernels") of a 8 x 16 tensor at
    /// density 0.25 (d = 128, k = 32), bytes by hand: fp32 4 bytes, int64 8; the sort is
    /// `randperm`'s radix sort of d int64 keys with int64 positions, 8 passes.
    #[test]
    fn device_kernels_by_hand() {
        let mut m = RandomK::new(&with_density(0.25), ctx(0, 2)).unwrap();
        m.register(0, 8, 16).unwrap();
        let list = |round: usize, stage: Stage| {
            device::named_bytes(|o| m.device_kernels(0, round, 0, stage, o))
        };
        let (d, k) = (128.0, 32.0);
        let mut want = vec![
            ("beta * residual", 4.0 * d * 2.0),
            ("gamma * tensor", 4.0 * d * 2.0),
            ("p = beta e + gamma g", 4.0 * d * 3.0),
            ("randperm: random keys", 8.0 * d),
        ];
        want.extend(device::named_bytes(|o| {
            device::radix_sort_pairs(o, 128, 8.0, 8.0, 8, true)
        }));
        want.extend([
            ("values = p[indices] (gather)", (8.0 + 4.0 + 4.0) * k),
            ("own decompress: torch.zeros(numel)", 4.0 * d),
            (
                "own decompress: scatter_(0, indices, values)",
                (8.0 + 4.0 + 4.0) * k,
            ),
            ("residual = p - decompressed", 4.0 * d * 3.0),
        ]);
        assert_eq!(list(0, Stage::Compress), want);
        assert_eq!(
            list(0, Stage::Decompress),
            [
                ("values / n (average)", 2.0 * 4.0 * k),
                ("torch.zeros(numel)", 4.0 * d),
                ("scatter_(0, indices, values)", (8.0 + 4.0 + 4.0) * k),
            ]
        );
        assert!(list(1, Stage::Compress).is_empty());
    }
}
