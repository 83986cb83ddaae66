//! ACP-SGD (Zhang, Shi, Wang & Li, "Evaluation and Optimization of Gradient Compression
//! for Distributed Deep Learning", ICDCS 2023, §IV: alternate compressed Power-SGD),
//! docs/methods.md, "acpsgd".
//!
//! Keeps both factors `P` (rows x r') and `Q` (cols x r') per tensor and alternates which
//! one is computed and all-reduced, one round per step:
//! - P step: `Q = orth(Q_reduced_prev)`; `P = (M+e) Q`; `e = (M+e) - P Q^T`; all-reduce P;
//!   result `P_sum Q^T / n`.
//! - Q step: `P = orth(P_reduced_prev)`; `Q = (M+e)^T P`; `e = (M+e) - P Q^T`; all-reduce Q;
//!   result `P Q_sum^T / n`.
//!
//! Step parity: with the 0-based step given to `begin_step`, **even steps (0, 2, ...) are
//! P steps** (the paper's odd steps, counted from 1), odd steps are Q steps.
//!
//! The residual update is local, so each step touches the matrix in one streaming pass:
//! a step forms `M+e` and accumulates its product, and its `e -= P Q^T` (which needs the
//! complete product) is deferred to the next step's pass, applied chunk by chunk before
//! the chunk is used ([`LowRank::add_project_rows_deferred`],
//! [`LowRank::add_project_t_deferred`]; same arithmetic as the eager update). `feedback`
//! has nothing left to do. 1-D and uncompressible tensors travel raw every step.

use ndarray::{ArrayView2, ArrayViewMut2};

use super::device::{self, F32};
use super::orth::{
    check_dims, check_len, compressed_rank, load_memory_order, push_memory_order, push_raw,
    put_slot, slot_mut, validate_lowrank_params, write_average, Slot,
};
use super::{
    Aggregation, CloseRule, CompressError, Compressor, FusionSizing, MethodParams, Received,
    Result, TensorId, Wire, WireLen, WorkerCtx,
};
use crate::devcost::{Kernel, Stage};

const NAME: &str = "acpsgd";

/// ACP-SGD compressor (CLI name `acpsgd`): one all-reduce of P or Q per step.
#[derive(Debug)]
pub struct AcpSgd {
    params: MethodParams,
    ctx: WorkerCtx,
    step: u64,
    slots: Vec<Option<Slot>>,
}

impl AcpSgd {
    /// Validates `rank >= 1` and `min_compression_rate > 0` (finite).
    pub fn new(p: &MethodParams, ctx: WorkerCtx) -> Result<Self> {
        validate_lowrank_params(NAME, p)?;
        Ok(AcpSgd {
            params: p.clone(),
            ctx,
            step: 0,
            slots: Vec::new(),
        })
    }

    /// True when the current step computes and sends P (even 0-based steps).
    pub fn is_p_step(&self) -> bool {
        self.step % 2 == 0
    }
}

/// ACP-SGD's fusion buckets (lzhangbv/acpsgd, `acpsgd.py`, `_generate_groups_with_threshold`;
/// docs/methods.md, "acpsgd"): P steps group tensors by their P factor's bytes
/// (`4 rows r'`), Q steps by their Q factor's (`4 cols r'`); raw tensors count their full
/// `4 d` in both. A group closes before a tensor would take it past the threshold
/// ([`CloseRule::BeforeExceeding`]). The paper scales the dense threshold by the
/// compression ratio; the reference has one threshold for both phases, so the ratio is
/// that of the mean step, `(sum P + sum Q) / (2 sum d)`.
pub fn fusion_sizing(p: &MethodParams, shapes: &[(usize, usize)]) -> FusionSizing {
    let (mut pb, mut qb) = (
        Vec::with_capacity(shapes.len()),
        Vec::with_capacity(shapes.len()),
    );
    for &(rows, cols) in shapes {
        let d = (rows * cols) as u64;
        match compressed_rank(rows, cols, p.rank, p.min_compression_rate) {
            Some(r) => {
                pb.push(4 * (rows * r) as u64);
                qb.push(4 * (cols * r) as u64);
            }
            None => {
                pb.push(4 * d);
                qb.push(4 * d);
            }
        }
    }
    let dense: u64 = shapes.iter().map(|&(r, c)| 4 * (r * c) as u64).sum();
    let wire = (pb.iter().sum::<u64>() + qb.iter().sum::<u64>()) as f64 / 2.0;
    FusionSizing {
        threshold_scale: if dense == 0 { 1.0 } else { wire / dense as f64 },
        phase_bytes: vec![pb, qb],
        rule: CloseRule::BeforeExceeding,
    }
}

impl Compressor for AcpSgd {
    fn name(&self) -> &'static str {
        NAME
    }

    fn aggregation(&self) -> Aggregation {
        Aggregation::AllReduce
    }

    fn register(&mut self, t: TensorId, rows: usize, cols: usize) -> Result<()> {
        put_slot(
            &mut self.slots,
            t,
            Slot::new(rows, cols, &self.params, self.ctx.seed, t),
        );
        Ok(())
    }

    fn wire_capacity(&self, t: TensorId, _round: usize) -> WireLen {
        self.phase_wire(t, 0, 0).max(self.phase_wire(t, 0, 1))
    }

    /// P steps (phase 0) and Q steps (phase 1).
    fn phases(&self) -> usize {
        2
    }

    /// P steps send `rows x r'`, Q steps `cols x r'`; raw tensors `d` in both.
    fn phase_wire(&self, t: TensorId, _round: usize, phase: usize) -> WireLen {
        let sum_f32 = match self.slots.get(t).and_then(|s| s.as_ref()) {
            None => 0,
            Some(Slot::Raw { rows, cols }) => rows * cols,
            Some(Slot::LowRank(lr)) if phase % 2 == 0 => lr.rows * lr.rank,
            Some(Slot::LowRank(lr)) => lr.cols * lr.rank,
        };
        WireLen {
            sum_f32,
            ..WireLen::default()
        }
    }

    fn begin_step(&mut self, step: u64) {
        self.step = step;
    }

    /// lzhangbv/acpsgd `acpsgd.py` (docs/methods.md, "Device kernels"): compress
    /// (`_alternative_compress`) the QR of the factor kept from the previous step
    /// (`7r' - 1` kernels, [`device::householder_qr`]) and 6 kernels: `M + E`, the product,
    /// its `copy_` into the fusion buffer, `P Q^T`, `M - P Q^T`, `E +=`; decompress
    /// (`_bp_barrier`) `P Q^T`, `copy_` into the gradient, `/ n`. Raw tensors: `copy_`
    /// into the buffer | `copy_` out and `/ n`, every step, at full size.
    fn device_kernels(
        &self,
        t: TensorId,
        round: usize,
        phase: usize,
        stage: Stage,
        out: &mut dyn FnMut(Kernel),
    ) {
        if round != 0 {
            return;
        }
        match self.slots.get(t).and_then(|s| s.as_ref()) {
            None => {}
            Some(Slot::Raw { rows, cols }) => {
                let bytes = F32 * (rows * cols) as f64;
                match stage {
                    Stage::Compress => out(Kernel::copy("copy_ into the P/Q buffer", bytes)),
                    Stage::Decompress => {
                        out(Kernel::copy("grad.copy_(buffer)", bytes));
                        out(device::mem("grad /= n", 2.0 * bytes));
                    }
                }
            }
            Some(Slot::LowRank(lr)) => {
                let (rows, cols, r) = (lr.rows, lr.cols, lr.rank);
                let d = rows * cols;
                match stage {
                    Stage::Compress => {
                        if phase % 2 == 0 {
                            device::householder_qr(out, cols, r);
                            out(device::ew("M + E", d, 2, 1));
                            out(Kernel::gemm("P = (M + E) Q", rows, cols, r));
                            out(Kernel::copy(
                                "P.copy_ into the P buffer",
                                F32 * (rows * r) as f64,
                            ));
                        } else {
                            device::householder_qr(out, rows, r);
                            out(device::ew("M + E", d, 2, 1));
                            out(Kernel::gemm("Q = (M + E)^T P", cols, rows, r));
                            out(Kernel::copy(
                                "Q.copy_ into the Q buffer",
                                F32 * (cols * r) as f64,
                            ));
                        }
                        out(Kernel::gemm("P Q^T", rows, r, cols));
                        out(device::ew("M - P Q^T", d, 2, 1));
                        out(device::ew("E += M - P Q^T", d, 2, 1));
                    }
                    Stage::Decompress => {
                        out(Kernel::gemm("P Q^T", rows, r, cols));
                        out(device::ew("grad.copy_(P Q^T)", d, 1, 1));
                        out(device::ew("grad /= n", d, 1, 1));
                    }
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
        if round != 0 {
            return Err(CompressError::Unsupported {
                method: NAME,
                msg: format!("round {round} requested; ACP-SGD has one round per step"),
            });
        }
        let p_step = self.is_p_step();
        let slot = slot_mut(&mut self.slots, t, NAME)?;
        check_dims(NAME, t, "gradient", slot.dims(), grad.dim())?;
        match slot {
            Slot::Raw { .. } => push_raw(&mut wire.sum_f32, grad),
            Slot::LowRank(lr) if p_step => {
                lr.orth_q();
                lr.add_project_rows_deferred(grad);
                push_memory_order(&mut wire.sum_f32, &lr.p);
            }
            Slot::LowRank(lr) => {
                lr.orth_p();
                lr.add_project_t_deferred(grad);
                push_memory_order(&mut wire.sum_f32, &lr.q);
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
        if round != 0 {
            return Err(CompressError::Unsupported {
                method: NAME,
                msg: format!("round {round} requested; ACP-SGD has one round per step"),
            });
        }
        let p_step = self.is_p_step();
        let n = received.world_size.max(1);
        let slot = slot_mut(&mut self.slots, t, NAME)?;
        let dims = slot.dims();
        check_dims(NAME, t, "output", dims, out.dim())?;
        match slot {
            Slot::Raw { .. } => {
                check_len(NAME, t, dims.0 * dims.1, received.sum_f32.len())?;
                write_average(out, received.sum_f32, n);
            }
            Slot::LowRank(lr) => {
                // Keep the reduced factor: the next step orthogonalises it (warm start).
                let f = if p_step { &mut lr.p } else { &mut lr.q };
                check_len(NAME, t, f.len(), received.sum_f32.len())?;
                load_memory_order(f, received.sum_f32);
                lr.reconstruct(1.0 / n as f32, out, false);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::orth::sim::{self, fro, mean, randn, rank_r, rel_err, step};
    use super::super::orth::LowRank;
    use super::*;
    use ndarray::Array2;

    /// Kernels of tensor 0 in steps of `phase`.
    fn kernels(c: &AcpSgd, phase: usize, stage: Stage) -> Vec<Kernel> {
        device::collect(|o| c.device_kernels(0, 0, phase, stage, o))
    }

    #[test]
    fn device_kernels_alternate_and_count_the_qr() {
        let (rows, cols) = (300, 200);
        for rank in 1..=8 {
            let p = MethodParams {
                rank,
                ..Default::default()
            };
            let mut c = AcpSgd::new(
                &p,
                WorkerCtx {
                    rank: 0,
                    world_size: 2,
                    seed: 1,
                },
            )
            .unwrap();
            c.register(0, rows, cols).unwrap();
            for phase in 0..2 {
                // The QR of the kept factor (7r - 1 kernels) and 6 kernels.
                let ks = kernels(&c, phase, Stage::Compress);
                assert_eq!(ks.len(), 7 * rank - 1 + 6, "rank {rank} phase {phase}");
                assert_eq!(
                    ks.iter().filter(|k| k.name.starts_with("orth")).count(),
                    device::householder_qr_kernels(rank)
                );
                assert_eq!(kernels(&c, phase, Stage::Decompress).len(), 3);
            }
            // P steps orthogonalise Q (cols x r) and compute P; Q steps the reverse.
            let gemm = |phase| {
                kernels(&c, phase, Stage::Compress)
                    .into_iter()
                    .find(|k| k.name.contains(") Q") || k.name.contains("^T P"))
                    .unwrap()
            };
            assert_eq!(gemm(0).name, "P = (M + E) Q");
            assert_eq!(gemm(1).name, "Q = (M + E)^T P");
            let qr_bytes = |phase| {
                kernels(&c, phase, Stage::Compress)
                    .iter()
                    .filter(|k| k.name.starts_with("orth"))
                    .map(|k| k.bytes)
                    .sum::<f64>()
            };
            assert!(
                qr_bytes(0) < qr_bytes(1),
                "Q (cols x r) is the smaller factor"
            );
        }
        // 1-D tensors go uncompressed at full size every step.
        let mut c = AcpSgd::new(
            &MethodParams::default(),
            WorkerCtx {
                rank: 0,
                world_size: 2,
                seed: 1,
            },
        )
        .unwrap();
        c.register(0, 1, 1000).unwrap();
        for phase in 0..2 {
            let ks = kernels(&c, phase, Stage::Compress);
            assert_eq!(ks.len(), 1);
            assert_eq!(ks[0].bytes, 2.0 * 4.0 * 1000.0);
            assert_eq!(kernels(&c, phase, Stage::Decompress).len(), 2);
        }
    }

    fn workers(n: usize, p: &MethodParams, shapes: &[(usize, usize)]) -> Vec<AcpSgd> {
        sim::workers(n, 3, shapes, |ctx| AcpSgd::new(p, ctx).unwrap())
    }

    fn state(c: &AcpSgd, t: usize) -> &LowRank {
        match c.slots[t].as_ref().unwrap() {
            Slot::LowRank(lr) => lr,
            Slot::Raw { .. } => panic!("tensor {t} is raw"),
        }
    }

    #[test]
    fn alternates_p_and_q() {
        let p = MethodParams {
            rank: 3,
            ..Default::default()
        };
        let mut w = workers(2, &p, &[(40, 25)]);
        let g = randn(40, 25, 1).as_standard_layout().to_owned();
        for s in 0..5u64 {
            let (_, lens) = step(&mut w, s, 0, &[g.clone(), g.clone()]);
            assert_eq!(
                lens,
                vec![if s % 2 == 0 { 40 * 3 } else { 25 * 3 }],
                "step {s}"
            );
        }
    }

    #[test]
    fn converges_on_fixed_rank_r_input() {
        // With error feedback on a fixed rank-r M: every Q step flushes the residual
        // (col(M+e) = span(P)), so the outputs' running mean is M - e_t / t, and the
        // per-step error of the P steps shrinks (slowly: the P-step Q is orth(row space of
        // M + e), which approaches row(M) only as e does).
        let p = MethodParams {
            rank: 4,
            ..Default::default()
        };
        // n = 1, and n = 3 with different inputs sharing their column space (rank-4 sum).
        for n in [1usize, 3] {
            let u = rank_r(64, 4, 4, 9);
            let grads: Vec<Array2<f32>> = (0..n)
                .map(|k| {
                    u.dot(&randn(48, 4, 30 + k as u64).t())
                        .as_standard_layout()
                        .to_owned()
                })
                .collect();
            let avg = mean(&grads);
            let mut w = workers(n, &p, &[(64, 48)]);
            let mut running = Array2::<f32>::zeros(avg.dim());
            let (mut err_early, mut err) = (0.0, 0.0);
            let steps = 200u64;
            for s in 0..steps {
                let (outs, _) = step(&mut w, s, 0, &grads);
                for o in &outs[1..] {
                    assert!(
                        (o - &outs[0]).iter().all(|v| v.abs() < 1e-4),
                        "workers disagree"
                    );
                }
                running += &outs[0];
                err = rel_err(&outs[0], &avg);
                if s == 2 {
                    err_early = err;
                }
                if s % 2 == 1 {
                    for c in &w {
                        assert!(
                            fro(&state(c, 0).residual()) < 1e-4 * fro(&avg),
                            "n={n} step {s}: Q step left a residual"
                        );
                    }
                }
            }
            let mean_err = rel_err(&(running / steps as f32), &avg);
            assert!(mean_err < 2e-3, "n={n}: running mean error {mean_err}");
            assert!(
                err < 0.7 * err_early && err_early > 1e-3,
                "n={n}: per-step error {err_early} -> {err}"
            );
        }
    }

    #[test]
    fn deferred_residuals_equal_eager() {
        // Both steps with the residual deferred into the next step's pass, against the
        // eager updates: same factors and residuals (f32 rounding aside).
        let (rows, cols, r) = (37, 53, 4);
        let (mut eager, mut lazy) = (
            LowRank::new(rows, cols, r, 1, 0),
            LowRank::new(rows, cols, r, 1, 0),
        );
        for s in 0..6u64 {
            let g = randn(rows, cols, 70 + s).as_standard_layout().to_owned();
            if s % 2 == 1 {
                eager.orth_p();
                lazy.orth_p();
                eager.add_project_t(g.view());
                lazy.add_project_t_deferred(g.view());
                assert!(lazy.pending, "step {s}: the fused path defers");
            } else {
                eager.orth_q();
                lazy.orth_q();
                eager.add_project_rows(g.view(), true);
                lazy.add_project_rows_deferred(g.view());
                assert!(lazy.pending, "step {s}: the fused path defers");
            }
            let close = |a: &Array2<f32>, b: &Array2<f32>| (a - b).iter().all(|v| v.abs() < 1e-4);
            assert!(
                close(&eager.p, &lazy.p) && close(&eager.q, &lazy.q),
                "step {s}: factors"
            );
            assert!(close(&eager.resid, &lazy.residual()), "step {s}: residual");
        }
    }

    #[test]
    fn residual_conservation() {
        // After compress (+ feedback): M + e_prev = P Q^T + e with the local factor sent.
        let p = MethodParams {
            rank: 2,
            ..Default::default()
        };
        let mut w = workers(1, &p, &[(30, 50)]);
        let mut e_prev = Array2::<f32>::zeros((30, 50));
        for s in 0..4u64 {
            let g = randn(30, 50, 50 + s).as_standard_layout().to_owned();
            let c = &mut w[0];
            c.begin_step(s);
            let mut wire = Wire::default();
            wire.reserve(c.wire_capacity(0, 0));
            c.compress(0, 0, g.view(), &mut wire).unwrap();
            c.feedback(0, 0).unwrap();
            let lr = state(c, 0);
            let approx = lr.p.dot(&lr.q.t());
            let resid = lr.residual();
            assert!(fro(&resid) > 0.1 * fro(&g), "residual unexpectedly small");
            assert!(
                (&(&g + &e_prev) - &(&approx + &resid))
                    .iter()
                    .all(|v| v.abs() < 1e-4),
                "step {s}"
            );
            e_prev = resid;
            let rec = Received {
                sum_f32: &wire.sum_f32,
                gathered_u32: &[],
                gather_counts: &[0],
                ring_u32: &[],
                world_size: 1,
            };
            let mut out = Array2::<f32>::zeros((30, 50));
            c.decompress(0, 0, &rec, out.view_mut()).unwrap();
            // n = 1: the result is exactly the local approximation.
            assert!((&out - &approx).iter().all(|v| v.abs() < 1e-4));
        }
    }

    #[test]
    fn raw_path() {
        let p = MethodParams {
            rank: 4,
            ..Default::default()
        };
        let shapes = [(1, 100), (4, 4)];
        let mut w = workers(2, &p, &shapes);
        for (t, &(r, c)) in shapes.iter().enumerate() {
            for s in 0..2u64 {
                let grads = vec![
                    randn(r, c, s).as_standard_layout().to_owned(),
                    randn(r, c, 5 + s).as_standard_layout().to_owned(),
                ];
                let (outs, lens) = step(&mut w, s, t, &grads);
                assert_eq!(lens, vec![r * c]);
                assert!((&outs[1] - &mean(&grads)).iter().all(|v| v.abs() < 1e-6));
            }
        }
    }

    /// Fusion sizes are the bytes each phase actually sends (`phase_wire`), and the
    /// threshold scale the mean step's compression ratio.
    #[test]
    fn fusion_sizing_matches_phase_wires() {
        let p = MethodParams {
            rank: 4,
            ..Default::default()
        };
        let shapes = [(100, 200), (1, 50), (4, 4), (64, 576)];
        let c = &workers(1, &p, &shapes)[0];
        let fs = fusion_sizing(&p, &shapes);
        assert_eq!(fs.rule, CloseRule::BeforeExceeding);
        assert_eq!(fs.phase_bytes.len(), c.phases());
        for (phase, bytes) in fs.phase_bytes.iter().enumerate() {
            for (t, &b) in bytes.iter().enumerate() {
                assert_eq!(
                    b,
                    c.phase_wire(t, 0, phase).bytes() as u64,
                    "phase {phase} tensor {t}"
                );
            }
        }
        assert_eq!(fs.phase_bytes[0], vec![1600, 200, 64, 1024]);
        assert_eq!(fs.phase_bytes[1], vec![3200, 200, 64, 9216]);
        let d = 4.0 * (20_000 + 50 + 16 + 64 * 576) as f64;
        let want = (1600.0 + 200.0 + 64.0 + 1024.0 + 3200.0 + 200.0 + 64.0 + 9216.0) / 2.0 / d;
        assert!((fs.threshold_scale - want).abs() < 1e-12);
    }

    #[test]
    fn rejects_bad_input() {
        let ctx = WorkerCtx {
            rank: 0,
            world_size: 1,
            seed: 0,
        };
        assert!(matches!(
            AcpSgd::new(
                &MethodParams {
                    rank: 0,
                    ..Default::default()
                },
                ctx
            ),
            Err(CompressError::BadParam { key: "rank", .. })
        ));
        assert!(matches!(
            AcpSgd::new(
                &MethodParams {
                    min_compression_rate: -1.0,
                    ..Default::default()
                },
                ctx
            ),
            Err(CompressError::BadParam { .. })
        ));
        let mut c = AcpSgd::new(&MethodParams::default(), ctx).unwrap();
        c.register(0, 30, 20).unwrap();
        let mut wire = Wire::default();
        let g = Array2::<f32>::zeros((20, 30));
        assert!(matches!(
            c.compress(0, 0, g.view(), &mut wire),
            Err(CompressError::Tensor { .. })
        ));
        assert!(matches!(
            c.compress(1, 0, g.view(), &mut wire),
            Err(CompressError::Tensor { .. })
        ));
        assert!(c.compress(0, 1, g.t(), &mut wire).is_err());
    }
}
