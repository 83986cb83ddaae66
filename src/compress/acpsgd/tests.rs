//! Tests of ACP-SGD (`super`): device kernels per phase, P/Q alternation, convergence on
//! rank-r input, deferred against eager residuals, residual conservation, the raw path,
//! fusion sizing and input checks.

use super::super::orth::sim::{self, fro, mean, randn, rank_r, rel_err, step};
use super::super::orth::LowRank;
use super::*;
use ndarray::Array2;

/// Kernels of tensor 0 in steps of `phase`.
fn kernels(c: &AcpSgd, phase: usize, stage: Stage) -> Vec<Kernel> {
    device::collect(|o| c.device_kernels(0, 0, phase, stage, o))
}

/// Worker 0 of 2 (seed 1) with parameters `p`.
fn worker0_of_2(p: &MethodParams) -> AcpSgd {
    AcpSgd::new(
        p,
        WorkerCtx {
            rank: 0,
            world_size: 2,
            seed: 1,
        },
    )
    .unwrap()
}

#[test]
fn device_kernels_alternate_and_count_the_qr() {
    let (rows, cols) = (300, 200);
    for rank in 1..=8 {
        let p = MethodParams {
            rank,
            ..Default::default()
        };
        let mut c = worker0_of_2(&p);
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
            // Readings of `orth`: linalg.qr read as Householder by default and for
            // `householder`; the hook's Gram-Schmidt (2r + 4(r - 1)) for `gram-schmidt`.
            let all = device::collect_all(|o| c.device_kernels(0, 0, phase, Stage::Compress, o));
            for (reading, orth) in [
                ("reference", 7 * rank - 1),
                ("householder", 7 * rank - 1),
                ("gram-schmidt", 2 * rank + 4 * (rank - 1)),
            ] {
                let spec =
                    crate::roofline::DeviceSpec::parse(&format!("v100:orth={reading}")).unwrap();
                let n = all.iter().filter(|k| spec.launches(k)).count();
                assert_eq!(n, orth + 6, "rank {rank} phase {phase} orth={reading}");
            }
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
    let mut c = worker0_of_2(&MethodParams::default());
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
    // At Power-SGD's rate 2 the 4x4 matrix is not worth compressing at rank 4.
    let p = MethodParams {
        rank: 4,
        min_compression_rate: Some(2.0),
        ..Default::default()
    };
    let shapes = [(1, 100), (4, 4)];
    let mut w = workers(2, &p, &shapes);
    assert!(w[0]
        .slots
        .iter()
        .all(|s| matches!(s, Some(Slot::Raw { .. }))));
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

/// By default every tensor with two or more rows is compressed, at `r' = min(rank, rows,
/// cols)`, as the reference compresses every tensor with two or more dimensions
/// (lzhangbv/acpsgd `acpsgd.py` at 4f560a2, lines 84-86); 1-D tensors travel raw. A
/// `min_compression_rate` given applies Power-SGD's test instead.
#[test]
fn default_compresses_every_matrix_as_the_reference() {
    let shapes = [(1, 100), (2, 768), (8, 8), (64, 576)];
    let ranks = |p: &MethodParams| -> Vec<Option<usize>> {
        let c = &workers(1, p, &shapes)[0];
        (0..shapes.len())
            .map(|t| match c.slots[t].as_ref().unwrap() {
                Slot::LowRank(lr) => Some(lr.rank),
                Slot::Raw { .. } => None,
            })
            .collect()
    };
    let p = MethodParams::default();
    assert_eq!(ranks(&p), vec![None, Some(2), Some(4), Some(4)]);
    // Phase wires follow: the 2x768 matrix sends 2x2 floats in P steps, 768x2 in Q steps.
    let c = &workers(1, &p, &shapes)[0];
    assert_eq!(c.phase_wire(1, 0, 0).sum_f32, 4);
    assert_eq!(c.phase_wire(1, 0, 1).sum_f32, 1536);
    // (2 + 768) 2 * 2 >= 1536 and (8 + 8) 4 * 2 >= 64: raw at Power-SGD's rate 2.
    let at_two = MethodParams {
        min_compression_rate: Some(2.0),
        ..p.clone()
    };
    assert_eq!(ranks(&at_two), vec![None, None, None, Some(4)]);
}

/// Fusion sizes are the bytes each phase actually sends (`phase_wire`), and each phase's
/// threshold scale that phase's compression ratio, computed by hand from the shapes.
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
    // Dense bytes 4 * (20000 + 50 + 16 + 36864) = 227720; P sends 2888, Q 12680.
    assert_eq!(fs.threshold_scale.len(), 2);
    assert!((fs.threshold_scale[0] - 2888.0 / 227_720.0).abs() < 1e-12);
    assert!((fs.threshold_scale[1] - 12_680.0 / 227_720.0).abs() < 1e-12);
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
                min_compression_rate: Some(-1.0),
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

/// Every kernel but the QR by hand (lzhangbv/acpsgd `acpsgd.py`; fp32 4 bytes; an
/// element-wise kernel reads and writes `4 d` per operand, a copy reads and writes its
/// bytes, a GEMM `(m x k)(k x n)` moves `4 (mk + kn + mn)` bytes and does `2 mkn` flops):
/// a 6 x 4 matrix at rank 2 (d = 24; P 6 x 2, Q 4 x 2) and a raw 1 x 10 tensor.
#[test]
fn device_kernel_bytes_by_hand() {
    let p = MethodParams {
        rank: 2,
        ..Default::default()
    };
    let mut c = worker0_of_2(&p);
    c.register(0, 6, 4).unwrap();
    c.register(1, 1, 10).unwrap();
    let list = |t: usize, phase: usize, stage: Stage| sim::kernels_but_orth(&c, t, 0, phase, stage);
    let ew = 4.0 * 24.0 * 3.0;
    let pq = 4.0 * (12.0 + 8.0 + 24.0);
    let pq_flops = 2.0 * 6.0 * 2.0 * 4.0;
    let tail = [
        ("P Q^T", pq, pq_flops),
        ("M - P Q^T", ew, 0.0),
        ("E += M - P Q^T", ew, 0.0),
    ];
    let mut want = vec![
        ("M + E", ew, 0.0),
        (
            "P = (M + E) Q",
            4.0 * (24.0 + 8.0 + 12.0),
            2.0 * 6.0 * 4.0 * 2.0,
        ),
        ("P.copy_ into the P buffer", 2.0 * 4.0 * 12.0, 0.0),
    ];
    want.extend(tail);
    assert_eq!(list(0, 0, Stage::Compress), want);
    let mut want = vec![
        ("M + E", ew, 0.0),
        (
            "Q = (M + E)^T P",
            4.0 * (24.0 + 12.0 + 8.0),
            2.0 * 4.0 * 6.0 * 2.0,
        ),
        ("Q.copy_ into the Q buffer", 2.0 * 4.0 * 8.0, 0.0),
    ];
    want.extend(tail);
    assert_eq!(list(0, 1, Stage::Compress), want);
    for phase in 0..2 {
        assert_eq!(
            list(0, phase, Stage::Decompress),
            [
                ("P Q^T", pq, pq_flops),
                ("grad.copy_(P Q^T)", 4.0 * 24.0 * 2.0, 0.0),
                ("grad /= n", 4.0 * 24.0 * 2.0, 0.0),
            ]
        );
        assert_eq!(
            list(1, phase, Stage::Compress),
            [("copy_ into the P/Q buffer", 2.0 * 40.0, 0.0)]
        );
        assert_eq!(
            list(1, phase, Stage::Decompress),
            [
                ("grad.copy_(buffer)", 2.0 * 40.0, 0.0),
                ("grad /= n", 2.0 * 40.0, 0.0)
            ]
        );
    }
}

/// `micro --check`: ACP-SGD's share is its gradient, row-major; step 0 is a P step, so
/// the result must be the projection of the dense average `A` onto the row space it
/// spans (`A Q Q^T`). `A` (8 x 8, rank 2) summed over 2 workers, rank 1 (compressed at
/// ACP-SGD's default rate 0): `A e0 e0^T` (column 0 kept) passes; `e0 e0^T A` (row 0
/// kept: Power-SGD's column-space projection) and `A` itself (not rank 1) fail.
#[test]
fn the_check_wants_the_row_space_projection_of_the_average() {
    let p = MethodParams {
        rank: 1,
        ..Default::default()
    };
    let ctx = WorkerCtx {
        rank: 0,
        world_size: 2,
        seed: 1,
    };
    let m = AcpSgd::new(&p, ctx).unwrap();
    let mut fresh = AcpSgd::new(&p, ctx).unwrap();
    let g = Array2::from_shape_vec((2, 2), vec![1.0f32, 2.0, 3.0, 4.0]).unwrap();
    assert_eq!(
        m.check_share(g.view(), &mut fresh).unwrap(),
        [1.0, 2.0, 3.0, 4.0]
    );
    let n = 8;
    let input = sim::CheckInput::new(n);
    let (a, summed) = (&input.a, &input.summed);
    let keep = |row: bool| input.keep(row);
    let probe = sim::CheckInput::probe;
    let mut verdict = |out: &[f32]| {
        let mut c = CheckCtx::two_workers((n, n), &p, &[], &mut fresh, &probe);
        m.check_verdict(out, summed, &mut c).unwrap()
    };
    assert_eq!(verdict(&keep(false)), Ok(()));
    assert!(verdict(&keep(true)).is_err());
    let dense: Vec<f32> = a.iter().copied().collect();
    assert!(verdict(&dense).is_err());
}
