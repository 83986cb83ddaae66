//! Power-SGD (Vogels, Karimireddy & Jaggi, "PowerSGD: Practical Low-Rank Gradient
//! Compression for Distributed Optimization", NeurIPS 2019, Algorithm 1 with error
//! feedback and warm start), as in PyTorch's DDP `powerSGD_hook` (docs/methods.md,
//! "powersgd").
//!
//! Per matrix `M` (rows x cols) with residual `e` and rank `r' = min(r, rows, cols)`:
//! round 0 sends `P = (M+e) Q` (rows*r' floats), the summed P is orthogonalised; round 1
//! sends `Q = (M+e)^T P` (cols*r' floats), `Q = Q_sum / n`; the result is `P Q^T` and
//! `e = (M+e) - P Q^T`. 1-D and uncompressible tensors, and every tensor during the dense
//! warm-up (`start_iter`), are all-reduced raw in round 0 (round 1 sends nothing).
//!
//! Memory traffic of a step on a `d`-element matrix (f32; the factors stay in cache): round
//! 0 reads `g` and `e` and writes `M + e` back into `e` (`8d` bytes read); round 1 reads it
//! for `Q = (M+e)^T P` (`4d`), then reads it again for `out = P Q^T`, `e -= out` and
//! writes `out` (`8d`: `e`, and `out`'s lines, streamed): `20d` bytes read, the least the
//! two dependent all-reduces allow (each of the three products needs the whole matrix
//! after the previous exchange). [`crate::compress::lowrank_kernels`] makes one pass per
//! product.

use ndarray::{ArrayView2, ArrayViewMut2};

use super::check::{self, CheckCtx, Verdict};
use super::device::{self, Out, F32};
use super::orth::{
    check_dims, check_len, load_memory_order, push_memory_order, push_raw, put_slot, slot_mut,
    validate_lowrank_params, write_average, Slot,
};
use super::{
    Aggregation, CompressError, Compressor, MethodParams, Received, Result, TensorId, Wire,
    WireLen, WorkerCtx,
};
use crate::roofline::{Kernel, Stage};

const NAME: &str = "powersgd";

/// Power-SGD's description ([`super::registry::SPECS`]).
pub const SPEC: super::spec::MethodSpec = super::spec::MethodSpec {
    name: NAME,
    summary: "rank-r power iteration with warm start and error feedback: all-reduce P, then Q",
    aggregation: Aggregation::AllReduce,
    rounds: 2,
    phases: 1,
    params: &["rank", "min_compression_rate", "start_iter"],
    density: None,
    min_compression_rate: None,
    owns_momentum: false,
    by_elements: false,
    wire_bytes: "4 r' (rows + cols) over its two rounds, r' = min(rank, rows, cols); 4 d in round 0 for 1-D, uncompressible and warm-up tensors",
    memory: "residual e (d floats), factors P (rows r') and Q (cols r')",
    state_bytes: None,
    citations: &[
        "Vogels, Karimireddy & Jaggi, \"PowerSGD\", NeurIPS 2019, Algorithm 1",
        "PyTorch torch/distributed/algorithms/ddp_comm_hooks/powerSGD_hook.py",
    ],
    build: |p, ctx| Ok(Box::new(PowerSgd::new(p, ctx)?)),
    fusion_sizing: None,
    reference_costs: super::spec::ReferenceCosts {
        source: super::spec::REFERENCE_FIT,
        compress: super::spec::LinearCost::new(3.606351224328463e-8, 8.06108707424114e-10),
        feedback: super::spec::LinearCost::new(6.811459545067136e-8, 2.1962933970944373e-13),
        decompress: super::spec::LinearCost::new(2.2642597207163757e-7, 2.277061850571385e-10),
    },
};

/// Power-SGD compressor (CLI name `powersgd`); two dependent all-reduces per step.
#[derive(Debug)]
pub struct PowerSgd {
    params: MethodParams,
    ctx: WorkerCtx,
    /// True while `step < start_iter` (dense warm-up, PyTorch `start_powerSGD_iter`).
    warm_up: bool,
    slots: Vec<Option<Slot>>,
}

impl PowerSgd {
    /// Validates `rank >= 1` and `min_compression_rate >= 0` (finite; default 2).
    pub fn new(p: &MethodParams, ctx: WorkerCtx) -> Result<Self> {
        validate_lowrank_params(NAME, p)?;
        Ok(PowerSgd {
            params: p.clone(),
            ctx,
            warm_up: p.start_iter > 0,
            slots: Vec::new(),
        })
    }

    fn round_error(round: usize) -> CompressError {
        CompressError::Unsupported {
            method: NAME,
            msg: format!("round {round} requested; Power-SGD has rounds 0 and 1"),
        }
    }
}

impl Compressor for PowerSgd {
    fn name(&self) -> &'static str {
        NAME
    }

    fn aggregation(&self) -> Aggregation {
        Aggregation::AllReduce
    }

    fn rounds(&self) -> usize {
        2
    }

    fn register(&mut self, t: TensorId, rows: usize, cols: usize) -> Result<()> {
        put_slot(
            &mut self.slots,
            t,
            Slot::new(NAME, rows, cols, &self.params, self.ctx.seed, t),
        );
        Ok(())
    }

    fn wire_capacity(&self, t: TensorId, round: usize) -> WireLen {
        let sum_f32 = match self.slots.get(t).and_then(|s| s.as_ref()) {
            None => 0,
            Some(Slot::Raw { rows, cols }) if round == 0 => rows * cols,
            Some(Slot::Raw { .. }) => 0,
            Some(Slot::LowRank(lr)) => match round {
                0 if self.params.start_iter > 0 => (lr.rows * lr.rank).max(lr.rows * lr.cols),
                0 => lr.rows * lr.rank,
                1 => lr.cols * lr.rank,
                _ => 0,
            },
        };
        WireLen {
            sum_f32,
            ..WireLen::default()
        }
    }

    fn begin_step(&mut self, step: u64) {
        self.warm_up = step < self.params.start_iter;
    }

    /// PyTorch's DDP `powerSGD_hook` after the warm-up (docs/methods.md, "Device
    /// kernels"): round 0 `M = g + e`, the copy of `M`, `P = M Q` | Gram-Schmidt of `P`
    /// (`6r' - 4` kernels); round 1 `Q = M^T P` | `Q /= n`, `out = P Q^T`, `e = M - out`.
    /// Raw tensors: the copy into and out of the uncompressed buffer and `/ n`, round 0.
    fn device_kernels(&self, t: TensorId, round: usize, _phase: usize, stage: Stage, out: Out) {
        match self.slots.get(t).and_then(|s| s.as_ref()) {
            None => {}
            Some(Slot::Raw { rows, cols }) => {
                let bytes = F32 * (rows * cols) as f64;
                device::uncompressed(
                    out,
                    round,
                    stage,
                    bytes,
                    "torch.cat into the uncompressed buffer",
                );
            }
            Some(Slot::LowRank(lr)) => {
                let (rows, cols, r) = (lr.rows, lr.cols, lr.rank);
                let d = rows * cols;
                match (round, stage) {
                    (0, Stage::Compress) => {
                        out(device::ew("M = g + e (add_ error)", d, 2, 1));
                        out(device::ew("keep a copy of M (clone)", d, 1, 1));
                        out(Kernel::gemm("P = M Q", rows, cols, r));
                    }
                    (0, Stage::Decompress) => device::orth(out, rows, r, device::gram_schmidt),
                    (1, Stage::Compress) => out(Kernel::gemm("Q = M^T P", cols, rows, r)),
                    (1, Stage::Decompress) => {
                        out(device::ew("Q /= n", cols * r, 1, 1));
                        out(Kernel::gemm("out = P Q^T", rows, r, cols));
                        out(device::ew("e = M - out", d, 2, 1));
                    }
                    _ => {}
                }
            }
        }
    }

    fn compress(
        &mut self,
        t: TensorId,
        round: usize,
        grad: ArrayView2<f32>,
        wire: &mut Wire,
    ) -> Result<()> {
        wire.clear();
        if round > 1 {
            return Err(Self::round_error(round));
        }
        let warm_up = self.warm_up;
        let slot = slot_mut(&mut self.slots, t, NAME)?;
        if round == 0 {
            check_dims(NAME, t, "gradient", slot.dims(), grad.dim())?;
        }
        match slot {
            Slot::LowRank(lr) if !warm_up => {
                if round == 0 {
                    // p = M + e and P = p Q in one pass (Alg. 1 line 3, error feedback §3).
                    lr.add_project_rows(grad, false);
                    push_memory_order(&mut wire.sum_f32, &lr.p);
                } else {
                    // Q = p^T P with the orthogonalised, summed P (Alg. 1 line 6).
                    lr.project_t();
                    push_memory_order(&mut wire.sum_f32, &lr.q);
                }
            }
            _ => {
                if round == 0 {
                    push_raw(&mut wire.sum_f32, grad);
                }
            }
        }
        Ok(())
    }

    fn decompress(
        &mut self,
        t: TensorId,
        round: usize,
        received: &Received,
        out: ArrayViewMut2<f32>,
    ) -> Result<()> {
        if round > 1 {
            return Err(Self::round_error(round));
        }
        let warm_up = self.warm_up;
        let n = received.world_size.max(1);
        let slot = slot_mut(&mut self.slots, t, NAME)?;
        match slot {
            Slot::LowRank(lr) if !warm_up => {
                if round == 0 {
                    // All-reduced P, orthogonalised (Alg. 1 lines 4-5).
                    check_len(NAME, t, lr.rows * lr.rank, received.sum_f32.len())?;
                    load_memory_order(&mut lr.p, received.sum_f32);
                    lr.orth_p();
                } else {
                    // Q = Q_sum / n; result P Q^T; e = p - P Q^T (Alg. 1 lines 7-9).
                    check_dims(NAME, t, "output", (lr.rows, lr.cols), out.dim())?;
                    check_len(NAME, t, lr.cols * lr.rank, received.sum_f32.len())?;
                    load_memory_order(&mut lr.q, received.sum_f32);
                    lr.q *= 1.0 / n as f32;
                    lr.reconstruct(1.0, out, true);
                }
            }
            _ => {
                if round == 0 {
                    let dims = slot.dims();
                    check_dims(NAME, t, "output", dims, out.dim())?;
                    check_len(NAME, t, dims.0 * dims.1, received.sum_f32.len())?;
                    write_average(out, received.sum_f32, n);
                }
            }
        }
        Ok(())
    }
    fn check_share(&self, grad: ArrayView2<f32>, _fresh: &mut dyn Compressor) -> Result<Vec<f32>> {
        check::gradient_share(grad)
    }
    /// `out = P Pᵀ S`, the projection of the dense average `S` onto the column space `out`
    /// spans; `S` itself for raw tensors and during the dense warm-up (step 0 travels raw).
    fn check_verdict(&self, out: &[f32], summed: &[f32], c: &mut CheckCtx) -> Result<Verdict> {
        let dense_now = c.params.start_iter > 0;
        Ok(check::lowrank(NAME, out, summed, c, dense_now, false))
    }
}

#[cfg(test)]
mod tests {
    use super::super::orth::sim::{self, fro, mean, randn, rank_r, rel_err, step};
    use super::*;
    use ndarray::Array2;

    /// Worker 0 of 2 (seed 1) with parameters `p`.
    fn worker0_of_2(p: &MethodParams) -> PowerSgd {
        PowerSgd::new(
            p,
            WorkerCtx {
                rank: 0,
                world_size: 2,
                seed: 1,
            },
        )
        .unwrap()
    }

    /// Kernels of tensor 0 in `round` and `stage`.
    fn kernels(c: &PowerSgd, round: usize, stage: Stage) -> Vec<Kernel> {
        device::collect(|o| c.device_kernels(0, round, 0, stage, o))
    }

    #[test]
    fn device_kernels_count_the_orthogonalisation_per_column() {
        for rank in 1..=8 {
            let p = MethodParams {
                rank,
                ..Default::default()
            };
            let mut c = worker0_of_2(&p);
            c.register(0, 300, 200).unwrap();
            // Gram-Schmidt of P in round 0's decompress: per column a norm and a divide,
            // and for every column but the last 4 kernels (dot product and subtract).
            let orth = kernels(&c, 0, Stage::Decompress);
            assert_eq!(orth.len(), 2 * rank + 4 * (rank - 1), "rank {rank}");
            assert_eq!(orth.len(), device::gram_schmidt_kernels(rank));
            // Readings of `orth`: the hook's Gram-Schmidt by default and for
            // `gram-schmidt`, unblocked Householder (7r - 1: 1 clone, 4r - 2 in geqrf,
            // 1 triu, 3r - 2 in orgqr, 1 copy back) for `householder`.
            let all = device::collect_all(|o| c.device_kernels(0, 0, 0, Stage::Decompress, o));
            for (reading, want) in [
                ("reference", 2 * rank + 4 * (rank - 1)),
                ("gram-schmidt", 2 * rank + 4 * (rank - 1)),
                ("householder", 1 + (4 * rank - 2) + 1 + (3 * rank - 2) + 1),
            ] {
                let spec =
                    crate::roofline::DeviceSpec::parse(&format!("v100:orth={reading}")).unwrap();
                let n = all.iter().filter(|k| spec.launches(k)).count();
                assert_eq!(n, want, "rank {rank} orth={reading}");
            }
            assert_eq!(kernels(&c, 0, Stage::Compress).len(), 3);
            assert_eq!(kernels(&c, 1, Stage::Compress).len(), 1);
            assert_eq!(kernels(&c, 1, Stage::Decompress).len(), 3);
            // The GEMMs are P = M Q, Q = M^T P and P Q^T with the effective rank.
            let g = kernels(&c, 1, Stage::Compress)[0];
            assert_eq!(g.flops, 2.0 * 300.0 * 200.0 * rank as f64);
        }
        // Raw (1-D) tensors: copied into the uncompressed buffer, averaged and copied
        // back in round 0; nothing in round 1.
        let mut c = worker0_of_2(&MethodParams::default());
        c.register(0, 1, 1000).unwrap();
        assert_eq!(kernels(&c, 0, Stage::Compress).len(), 1);
        assert_eq!(kernels(&c, 0, Stage::Decompress).len(), 2);
        assert!(kernels(&c, 1, Stage::Compress).is_empty());
        assert!(kernels(&c, 1, Stage::Decompress).is_empty());
    }

    /// Every kernel but the orthogonalisation by hand (PyTorch's `powerSGD_hook`; fp32 4
    /// bytes; an element-wise kernel moves `4 d` per operand read or written, a copy
    /// reads and writes its bytes, a GEMM `(m x k)(k x n)` moves `4 (mk + kn + mn)` bytes
    /// and does `2 mkn` flops): a 12 x 8 matrix at rank 2 (d = 96; P 12 x 2, Q 8 x 2;
    /// `(12 + 8) 2 x 2 = 80 < 96`: compressed at the default rate 2) and a raw 1 x 10.
    #[test]
    fn device_kernel_bytes_by_hand() {
        let p = MethodParams {
            rank: 2,
            ..Default::default()
        };
        let mut c = worker0_of_2(&p);
        c.register(0, 12, 8).unwrap();
        c.register(1, 1, 10).unwrap();
        let list =
            |t: usize, round: usize, stage: Stage| sim::kernels_but_orth(&c, t, round, 0, stage);
        let d = 96.0;
        assert_eq!(
            list(0, 0, Stage::Compress),
            [
                ("M = g + e (add_ error)", 4.0 * d * 3.0, 0.0),
                ("keep a copy of M (clone)", 4.0 * d * 2.0, 0.0),
                (
                    "P = M Q",
                    4.0 * (96.0 + 16.0 + 24.0),
                    2.0 * 12.0 * 8.0 * 2.0
                ),
            ]
        );
        assert!(list(0, 0, Stage::Decompress).is_empty());
        assert_eq!(
            list(0, 1, Stage::Compress),
            [(
                "Q = M^T P",
                4.0 * (96.0 + 24.0 + 16.0),
                2.0 * 8.0 * 12.0 * 2.0
            )]
        );
        assert_eq!(
            list(0, 1, Stage::Decompress),
            [
                ("Q /= n", 4.0 * 16.0 * 2.0, 0.0),
                (
                    "out = P Q^T",
                    4.0 * (24.0 + 16.0 + 96.0),
                    2.0 * 12.0 * 2.0 * 8.0
                ),
                ("e = M - out", 4.0 * d * 3.0, 0.0),
            ]
        );
        assert_eq!(
            list(1, 0, Stage::Compress),
            [("torch.cat into the uncompressed buffer", 2.0 * 40.0, 0.0)]
        );
        assert_eq!(
            list(1, 0, Stage::Decompress),
            [
                ("uncompressed buffer /= n", 2.0 * 40.0, 0.0),
                ("copy back from the uncompressed buffer", 2.0 * 40.0, 0.0),
            ]
        );
        for stage in [Stage::Compress, Stage::Decompress] {
            assert!(list(1, 1, stage).is_empty());
            assert!(list(0, 2, stage).is_empty());
        }
    }

    /// `micro --check`: Power-SGD's share is its gradient, row-major; the result must be
    /// the projection of the dense average `A` onto the column space it spans (`P P^T A`),
    /// or `A` itself during the dense warm-up (`start_iter > 0`: the checked step 0 is
    /// then dense). `A` (8 x 8, rank 2) summed over 2 workers, rank 1 (`(8 + 8) x 2 < 64`:
    /// compressed at the default rate 2): `e0 e0^T A` (row 0 kept) passes without a
    /// warm-up, `A e0 e0^T` (column 0 kept: the row space) and `A` do not; with
    /// `start_iter` 1 `A` passes and `e0 e0^T A` does not.
    #[test]
    fn the_check_wants_the_column_space_projection_or_the_warm_up_average() {
        let n = 8;
        let input = sim::CheckInput::new(n);
        let (a, summed) = (&input.a, &input.summed);
        let keep = |row: bool| input.keep(row);
        let dense: Vec<f32> = a.iter().copied().collect();
        let probe = sim::CheckInput::probe;
        let ctx = WorkerCtx {
            rank: 0,
            world_size: 2,
            seed: 1,
        };
        let verdict = |start_iter: u64, out: &[f32]| {
            let p = MethodParams {
                rank: 1,
                start_iter,
                ..Default::default()
            };
            let m = PowerSgd::new(&p, ctx).unwrap();
            let mut fresh = PowerSgd::new(&p, ctx).unwrap();
            let g = Array2::from_shape_vec((2, 2), vec![1.0f32, 2.0, 3.0, 4.0]).unwrap();
            assert_eq!(
                m.check_share(g.view(), &mut fresh).unwrap(),
                [1.0, 2.0, 3.0, 4.0]
            );
            let mut c = CheckCtx::two_workers((n, n), &p, &[], &mut fresh, &probe);
            m.check_verdict(out, summed, &mut c).unwrap()
        };
        assert_eq!(verdict(0, &keep(true)), Ok(()));
        assert!(verdict(0, &keep(false)).is_err());
        assert!(verdict(0, &dense).is_err());
        assert_eq!(verdict(1, &dense), Ok(()));
        assert!(verdict(1, &keep(true)).is_err());
    }

    fn workers(n: usize, p: &MethodParams, shapes: &[(usize, usize)]) -> Vec<PowerSgd> {
        sim::workers(n, 7, shapes, |ctx| PowerSgd::new(p, ctx).unwrap())
    }

    fn resid(c: &PowerSgd, t: usize) -> Array2<f32> {
        match c.slots[t].as_ref().unwrap() {
            Slot::LowRank(lr) => lr.resid.clone(),
            Slot::Raw { .. } => panic!("tensor {t} is raw"),
        }
    }

    #[test]
    fn exact_on_rank_r_single_worker() {
        let p = MethodParams {
            rank: 4,
            ..Default::default()
        };
        let mut w = workers(1, &p, &[(60, 40)]);
        for s in 0..3 {
            let g = rank_r(60, 40, 4, 100 + s);
            let (outs, lens) = step(&mut w, s, 0, std::slice::from_ref(&g));
            assert_eq!(lens, vec![60 * 4, 40 * 4]);
            // Later steps warm-start from the previous input's Q, so P = M Q can be
            // ill-conditioned: f32 accuracy is then ~1e-4 rather than ~1e-6.
            assert!(
                rel_err(&outs[0], &g) < 1e-3,
                "step {s}: {}",
                rel_err(&outs[0], &g)
            );
            assert!(fro(&resid(&w[0], 0)) < 1e-3 * fro(&g));
        }
    }

    #[test]
    fn exact_on_rank_r_simulated_workers() {
        let p = MethodParams {
            rank: 3,
            ..Default::default()
        };
        for n in 2..=3 {
            // Identical inputs.
            let g = rank_r(50, 70, 3, 5);
            let mut w = workers(n, &p, &[(50, 70)]);
            let (outs, _) = step(&mut w, 0, 0, &vec![g.clone(); n]);
            for o in &outs {
                assert!(rel_err(o, &g) < 1e-4);
            }
            // Different rank-3 inputs sharing the column space (the sum has rank 3):
            // exact average; each residual is the local input minus the global result.
            let u = randn(50, 3, 11);
            let grads: Vec<Array2<f32>> = (0..n)
                .map(|k| {
                    u.dot(&randn(70, 3, 20 + k as u64).t())
                        .as_standard_layout()
                        .to_owned()
                })
                .collect();
            let mut w = workers(n, &p, &[(50, 70)]);
            let (outs, _) = step(&mut w, 0, 0, &grads);
            let avg = mean(&grads);
            for (k, o) in outs.iter().enumerate() {
                assert!(
                    rel_err(o, &avg) < 1e-4,
                    "n={n} worker {k}: {}",
                    rel_err(o, &avg)
                );
                let want = &grads[k] - o;
                assert!((&resid(&w[k], 0) - &want).iter().all(|v| v.abs() < 1e-4));
            }
        }
    }

    #[test]
    fn error_feedback_conserves_p() {
        // Full-rank input: p = M + e_prev = out + e_new, and e is fed into the next step.
        let p = MethodParams {
            rank: 2,
            ..Default::default()
        };
        let mut w = workers(1, &p, &[(30, 20)]);
        let mut e_prev = Array2::<f32>::zeros((30, 20));
        for s in 0..4 {
            let g = randn(30, 20, 40 + s).as_standard_layout().to_owned();
            let (outs, _) = step(&mut w, s, 0, std::slice::from_ref(&g));
            let e = resid(&w[0], 0);
            assert!(
                e.iter().map(|v| v.abs()).sum::<f32>() > 1.0,
                "residual unexpectedly zero"
            );
            let lhs = &g + &e_prev;
            let rhs = &outs[0] + &e;
            assert!((&lhs - &rhs).iter().all(|v| v.abs() < 1e-4), "step {s}");
            e_prev = e;
        }
    }

    #[test]
    fn raw_path_and_wire_sizes() {
        // Tensor 0: 1-D; 1: 4x4 (not worth compressing at rank 4); 2: 3x1000 (r' = 3).
        let p = MethodParams {
            rank: 4,
            min_compression_rate: Some(0.9),
            ..Default::default()
        };
        let shapes = [(1, 100), (4, 4), (3, 1000)];
        let mut w = workers(2, &p, &shapes);
        for (t, &(r, c)) in shapes.iter().enumerate() {
            let grads = vec![
                randn(r, c, t as u64).as_standard_layout().to_owned(),
                randn(r, c, 9 + t as u64).as_standard_layout().to_owned(),
            ];
            let (outs, lens) = step(&mut w, 0, t, &grads);
            if t < 2 {
                assert_eq!(lens, vec![r * c, 0]);
                assert!((&outs[0] - &mean(&grads)).iter().all(|v| v.abs() < 1e-6));
            } else {
                assert_eq!(lens, vec![3 * 3, 1000 * 3]);
                // r' = rows: P spans everything, so the result is exact.
                assert!(rel_err(&outs[1], &mean(&grads)) < 1e-4);
            }
        }
    }

    /// The wire each round can need (`wire_capacity`), by hand: without a warm-up a
    /// 12 x 8 matrix at rank 2 sends P (24 floats) then Q (16), a raw 1 x 10 its 10
    /// floats in round 0 and nothing in round 1; with `start_iter` 3 round 0 must also
    /// hold the dense matrix (96). At rate 0 a 5 x 1 matrix is compressed at rank 1: P
    /// is 5 floats, as the dense tensor, so its warm-up capacity is 5. Nothing for a
    /// tensor never registered or a round past 1.
    #[test]
    fn wire_capacity_by_hand() {
        let cap = |start_iter: u64, rate: Option<f64>, rows: usize, cols: usize, round| {
            let p = MethodParams {
                rank: 2,
                start_iter,
                min_compression_rate: rate,
                ..Default::default()
            };
            let mut c = worker0_of_2(&p);
            c.register(0, rows, cols).unwrap();
            assert_eq!(c.wire_capacity(1, round).sum_f32, 0, "unregistered");
            c.wire_capacity(0, round).sum_f32
        };
        for (start_iter, round0) in [(0, 24), (3, 96)] {
            assert_eq!(cap(start_iter, None, 12, 8, 0), round0, "{start_iter}");
            assert_eq!(cap(start_iter, None, 12, 8, 1), 16, "{start_iter}");
            assert_eq!(cap(start_iter, None, 12, 8, 2), 0, "{start_iter}");
            assert_eq!(cap(start_iter, None, 1, 10, 0), 10, "{start_iter}");
            assert_eq!(cap(start_iter, None, 1, 10, 1), 0, "{start_iter}");
        }
        assert_eq!(cap(1, Some(0.0), 5, 1, 0), 5);
        assert_eq!(cap(1, Some(0.0), 5, 1, 1), 1);
    }

    #[test]
    fn dense_warm_up() {
        let p = MethodParams {
            rank: 2,
            start_iter: 2,
            ..Default::default()
        };
        let mut w = workers(2, &p, &[(30, 20)]);
        assert_eq!(w[0].wire_capacity(0, 0).sum_f32, 600);
        let grads = vec![
            randn(30, 20, 1).as_standard_layout().to_owned(),
            randn(30, 20, 2).as_standard_layout().to_owned(),
        ];
        for s in 0..2 {
            let (outs, lens) = step(&mut w, s, 0, &grads);
            assert_eq!(lens, vec![600, 0]);
            assert!((&outs[0] - &mean(&grads)).iter().all(|v| v.abs() < 1e-6));
        }
        let (outs, lens) = step(&mut w, 2, 0, &grads);
        assert_eq!(lens, vec![60, 40]);
        assert!(
            rel_err(&outs[0], &mean(&grads)) > 1e-2,
            "full-rank input cannot be exact at rank 2"
        );
    }

    #[test]
    fn rejects_bad_input() {
        let ctx = WorkerCtx {
            rank: 0,
            world_size: 1,
            seed: 0,
        };
        assert!(matches!(
            PowerSgd::new(
                &MethodParams {
                    rank: 0,
                    ..Default::default()
                },
                ctx
            ),
            Err(CompressError::BadParam { key: "rank", .. })
        ));
        let bad_rate = MethodParams {
            min_compression_rate: Some(f64::NAN),
            ..Default::default()
        };
        assert!(matches!(
            PowerSgd::new(&bad_rate, ctx),
            Err(CompressError::BadParam {
                key: "min_compression_rate",
                ..
            })
        ));
        let mut c = PowerSgd::new(&MethodParams::default(), ctx).unwrap();
        c.register(0, 30, 20).unwrap();
        let mut wire = Wire::default();
        let g = Array2::<f32>::zeros((20, 30));
        assert!(matches!(
            c.compress(0, 0, g.view(), &mut wire),
            Err(CompressError::Tensor { .. })
        ));
        assert!(matches!(
            c.compress(5, 0, g.view(), &mut wire),
            Err(CompressError::Tensor { .. })
        ));
        let rec = Received {
            sum_f32: &[1.0; 3],
            gathered_u32: &[],
            gather_counts: &[0],
            ring_u32: &[],
            world_size: 1,
        };
        let mut out = Array2::<f32>::zeros((30, 20));
        assert!(matches!(
            c.decompress(0, 0, &rec, out.view_mut()),
            Err(CompressError::Tensor { .. })
        ));
    }
}
