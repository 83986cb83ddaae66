//! Sign-SGD, two variants (docs/methods.md, "signsgd" and "signsgd-mv"):
//! - `signsgd`: EF-SignSGD (Karimireddy et al., ICML 2019, Alg. 1): `p = g + e`,
//!   `scale = ||p||_1 / d`, send `scale` and the packed signs of `p`,
//!   `e = p - scale * sgn(p)`; decompress averages `scale_j * sgn_j` over workers.
//! - `signsgd-mv`: signSGD with majority vote (Bernstein et al., ICML 2018/ICLR 2019):
//!   send the signs of `g` (no scale, no error feedback); the result is
//!   `sign(sum_j sgn_j)`, 0 on ties.
//!
//! Signs cannot be summed in packed form, so both exchange by all-gather. Wire
//! (`gather_u32`): EF: `[scale.to_bits()]` + `ceil(d/32)` sign words; MV: the sign words
//! only. Bit layout and `sgn` convention: see [`super::bits`].
//!
//! Implementation note: the EF update `e = p - scale * sgn(p)` is applied lazily: after
//! `feedback`, the residual buffer holds `p` and the pending `scale`, and the next
//! `compress` computes `g + (p - scale * sgn(p))` in the same single pass that forms the
//! new `p`, its L1 norm and its sign bits ([`bits::fused_ef_pack`]). The arithmetic is
//! the same as an eager update (the tests materialise `e` to check it).

use ndarray::{ArrayView2, ArrayViewMut2};

use super::bits::{self, Slot};
use super::check::{self, CheckCtx, Verdict};
use super::device::{self, Out};
use super::{
    Aggregation, Compressor, MethodParams, Received, Result, TensorId, Wire, WireLen, WorkerCtx,
};
use crate::roofline::Stage;

/// The memory check's share of the sign methods: every rank's packed signs received.
fn signs_state_bytes(_: &MethodParams, numels: &[usize], world_size: u64) -> u64 {
    super::spec::state_sum(
        numels,
        |_| 0.0,
        |d| world_size as f64 * (d as f64 / 8.0 + 8.0),
    )
}

/// EF-SignSGD's description ([`super::registry::SPECS`]).
pub const SPEC: super::spec::MethodSpec = super::spec::MethodSpec {
    name: "signsgd",
    summary:
        "EF-SignSGD: the scale ||p||_1 / d and the signs of p = g + e, all-gathered; error feedback",
    aggregation: Aggregation::AllGather,
    rounds: 1,
    phases: 1,
    params: &[],
    density: None,
    min_compression_rate: None,
    owns_momentum: false,
    by_elements: true,
    wire_bytes: "4 (1 + ceil(d / 32))",
    memory: "residual e (d floats)",
    state_bytes: Some(signs_state_bytes),
    citations: &[
        "Karimireddy et al., \"Error Feedback Fixes SignSGD\", ICML 2019, Alg. 1",
        "sands-lab/grace grace_dl/torch/compressor/efsignsgd.py",
    ],
    build: |p, ctx| Ok(Box::new(SignSgd::new(p, ctx, false)?)),
    fusion_sizing: None,
    reference_costs: super::spec::ReferenceCosts {
        source: super::spec::REFERENCE_FIT,
        compress: super::spec::LinearCost::new(3.517233071300745e-8, 1.169661076588301e-10),
        feedback: super::spec::LinearCost::new(3.105009010082647e-8, 1.0583002869386669e-13),
        decompress: super::spec::LinearCost::new(2.576018720496505e-8, 2.2016798390252992e-10),
    },
};

/// Majority-vote signSGD's description ([`super::registry::SPECS`]).
pub const SPEC_MV: super::spec::MethodSpec = super::spec::MethodSpec {
    name: "signsgd-mv",
    summary: "signSGD with majority vote: the signs of g, all-gathered, sign of their sum; no error feedback",
    wire_bytes: "4 ceil(d / 32)",
    memory: "none",
    citations: &[
        "Bernstein et al., \"signSGD\", ICML 2018, Alg. 3; ICLR 2019",
        "sands-lab/grace grace_dl/torch/compressor/signsgd.py",
    ],
    build: |p, ctx| Ok(Box::new(SignSgd::new(p, ctx, true)?)),
    reference_costs: super::spec::ReferenceCosts {
        source: super::spec::REFERENCE_FIT,
        compress: super::spec::LinearCost::new(1.99280931467232e-8, 8.902404143126441e-11),
        feedback: super::spec::LinearCost::new(3.103229145189472e-8, 1.2640720649427116e-13),
        decompress: super::spec::LinearCost::new(2.0933480178579854e-8, 3.539901256397187e-10),
    },
    ..SPEC
};

/// Per-tensor EF-SignSGD state.
#[derive(Debug, Clone, Default)]
struct State {
    /// `p` of the last compress (or `e` itself when `lag == 0`).
    e: Vec<f32>,
    /// Scale of the last compress (set by compress, not yet applied).
    scale: f32,
    /// Scale still to subtract: `e = self.e - lag * sgn(self.e)`.
    lag: f32,
}

/// EF-SignSGD (`signsgd`) or majority-vote signSGD (`signsgd-mv`).
#[derive(Debug, Clone)]
pub struct SignSgd {
    majority: bool,
    ctx: WorkerCtx,
    slots: Vec<Option<Slot<State>>>,
}

impl SignSgd {
    /// `majority = false`: EF-SignSGD; `true`: majority vote without error feedback.
    /// Reads no hyper-parameters.
    pub fn new(p: &MethodParams, ctx: WorkerCtx, majority: bool) -> Result<Self> {
        let _ = p;
        Ok(SignSgd {
            majority,
            ctx,
            slots: Vec::new(),
        })
    }

    /// The worker context this compressor was built for.
    pub fn ctx(&self) -> WorkerCtx {
        self.ctx
    }

    /// Current error-feedback residual `e` of tensor `t` (all zeros for `signsgd-mv`)
    /// into `out` (length `d`). Tests only.
    #[cfg(test)]
    fn residual_into(&self, t: TensorId, out: &mut [f32]) -> Result<()> {
        let sl = self
            .slots
            .get(t)
            .and_then(|s| s.as_ref())
            .ok_or_else(|| bits::tensor_err(self.name(), t, "not registered"))?;
        if out.len() != sl.d() {
            return Err(bits::tensor_err(
                self.name(),
                t,
                format!(
                    "residual buffer has {} elements, tensor has {}",
                    out.len(),
                    sl.d()
                ),
            ));
        }
        if self.majority {
            out.fill(0.0);
        } else {
            out.copy_from_slice(&sl.s.e);
            bits::apply_lag(out, sl.s.lag);
        }
        Ok(())
    }

    fn words_per_worker(&self, d: usize) -> usize {
        bits::words_for(d) + usize::from(!self.majority)
    }
}

impl Compressor for SignSgd {
    fn name(&self) -> &'static str {
        if self.majority {
            "signsgd-mv"
        } else {
            "signsgd"
        }
    }

    fn aggregation(&self) -> Aggregation {
        Aggregation::AllGather
    }

    fn register(&mut self, t: TensorId, rows: usize, cols: usize) -> Result<()> {
        let d = bits::checked_len(self.name(), t, rows, cols)?;
        let e = if self.majority {
            Vec::new()
        } else {
            bits::touched_zeros(d)
        };
        bits::put_slot(
            &mut self.slots,
            t,
            rows,
            cols,
            State {
                e,
                scale: 0.0,
                lag: 0.0,
            },
        );
        Ok(())
    }

    fn wire_capacity(&self, t: TensorId, _round: usize) -> WireLen {
        match self.slots.get(t).and_then(|s| s.as_ref()) {
            Some(sl) => WireLen {
                gather_u32: self.words_per_worker(sl.d()),
                // One bit per element plus the scale word: the same length every step.
                gather_exact: true,
                ..WireLen::default()
            },
            None => WireLen::default(),
        }
    }

    fn compress(
        &mut self,
        t: TensorId,
        _round: usize,
        grad: ArrayView2<f32>,
        wire: &mut Wire,
    ) -> Result<()> {
        let (name, majority) = (self.name(), self.majority);
        let sl = bits::slot(name, &mut self.slots, t)?;
        let g = bits::input_slice(name, t, sl, &grad)?;
        let d = g.len();
        wire.clear();
        let head = usize::from(!majority);
        wire.gather_u32.resize(head + bits::words_for(d), 0);
        if majority {
            bits::pack_signs(g, &mut wire.gather_u32);
            return Ok(());
        }
        let st = &mut sl.s;
        let l1 = bits::fused_ef_pack(g, &mut st.e, st.lag, &mut wire.gather_u32[1..]);
        st.lag = 0.0;
        st.scale = if d == 0 { 0.0 } else { (l1 / d as f64) as f32 };
        wire.gather_u32[0] = st.scale.to_bits();
        Ok(())
    }

    /// sands-lab/grace `grace_dl/torch` (docs/methods.md, "Device kernels"), with the
    /// signs packed 32 per word. EF-SignSGD (`compressor/efsignsgd.py`,
    /// `memory/residual.py`): compress `p = e + g`, `|p|`, `mean`, the packed signs, and
    /// the residual `e = p - decompress(own)` (unpack, `* scale`, subtract): 7 kernels;
    /// decompress per worker unpack, `* scale`, `+=`, then `/ n`: `3n + 1`. Majority vote
    /// (`compressor/signsgd.py`): compress the packed signs; decompress per worker unpack
    /// and `+=`, then `sign`: `2n + 1`.
    fn device_kernels(&self, t: TensorId, round: usize, _phase: usize, stage: Stage, out: Out) {
        let Some(sl) = device::round0(&self.slots, t, round) else {
            return;
        };
        let d = sl.d();
        let n = self.ctx.world_size.max(1);
        match (stage, self.majority) {
            (Stage::Compress, true) => out(device::pack_signs(d)),
            (Stage::Compress, false) => {
                device::ef_sign_compress(out, "p = e + g (residual compensate)", d);
                out(device::unpack_signs("residual: unpack own signs to +-1", d));
                out(device::ew("residual: * scale", d, 1, 1));
                out(device::ew("residual: e = p - decoded", d, 2, 1));
            }
            (Stage::Decompress, true) => {
                for _ in 0..n {
                    out(device::unpack_signs("unpack worker's signs to +-1", d));
                    out(device::ew("sum += signs", d, 2, 1));
                }
                out(device::ew("majority: sign(sum)", d, 1, 1));
            }
            (Stage::Decompress, false) => {
                for _ in 0..n {
                    out(device::unpack_signs("unpack worker's signs to +-1", d));
                    out(device::ew("* worker's scale", d, 1, 1));
                    out(device::ew("sum += decoded", d, 2, 1));
                }
                out(device::ew("sum / n", d, 1, 1));
            }
        }
    }

    /// EF-SignSGD: `e = p - scale * sgn(p)` (applied lazily by the next compress).
    fn feedback(&mut self, t: TensorId, _round: usize) -> Result<()> {
        let name = self.name();
        let sl = bits::slot(name, &mut self.slots, t)?;
        sl.s.lag = sl.s.scale;
        Ok(())
    }

    fn decompress(
        &mut self,
        t: TensorId,
        _round: usize,
        received: &Received,
        out: ArrayViewMut2<f32>,
    ) -> Result<()> {
        let name = self.name();
        let majority = self.majority;
        let sl = bits::slot(name, &mut self.slots, t)?;
        let each = bits::words_for(sl.d()) + usize::from(!majority);
        bits::check_gathered(name, t, received, each)?;
        let out = bits::output_slice(name, t, sl, out)?;
        let n = received.world_size;
        if majority {
            // sum of signs (exact in f32 for n < 2^24), then its sign
            for w in 0..n {
                let words = received.gathered(w);
                if w == 0 {
                    bits::unpack_signs(words, 1.0, out);
                } else {
                    bits::unpack_signs_add(words, 1.0, out);
                }
            }
            for v in out.iter_mut() {
                *v = if *v > 0.0 {
                    1.0
                } else if *v < 0.0 {
                    -1.0
                } else {
                    0.0
                };
            }
        } else {
            let inv_n = 1.0 / n as f32;
            for w in 0..n {
                let sec = received.gathered(w);
                let scale = f32::from_bits(sec[0]) * inv_n;
                if w == 0 {
                    bits::unpack_signs(&sec[1..], scale, out);
                } else {
                    bits::unpack_signs_add(&sec[1..], scale, out);
                }
            }
        }
        Ok(())
    }
    /// Majority vote: this worker's signs (`-1` where negative, else `+1`); EF-SignSGD: its
    /// own decode (the default).
    fn check_share(&self, grad: ArrayView2<f32>, fresh: &mut dyn Compressor) -> Result<Vec<f32>> {
        if !self.majority {
            return check::own_decode(grad, fresh);
        }
        let g = check::flat(&grad)?;
        Ok(g.iter()
            .map(|x| if x.is_sign_negative() { -1.0 } else { 1.0 })
            .collect())
    }
    /// Majority vote: exactly the sign of the summed signs (0 on ties); EF-SignSGD: the mean
    /// of the decodes (the default).
    fn check_verdict(&self, out: &[f32], summed: &[f32], c: &mut CheckCtx) -> Result<Verdict> {
        if !self.majority {
            return Ok(check::mean_of_decodes(out, summed, c.world_size));
        }
        let sign = |v: &f32| {
            if *v > 0.0 {
                1.0
            } else if *v < 0.0 {
                -1.0
            } else {
                0.0
            }
        };
        let want: Vec<f32> = summed.iter().map(sign).collect();
        Ok(check::compare(out, &want, 0.0, "sign of the sum of signs"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::rng::rng_for;
    use ndarray::Array2;
    use rand::Rng;
    use rand_distr::{Distribution, StandardNormal};

    fn ctx(rank: usize, n: usize) -> WorkerCtx {
        WorkerCtx {
            rank,
            world_size: n,
            seed: 42,
        }
    }

    fn randn(seed: u64, rows: usize, cols: usize) -> Array2<f32> {
        let mut rng = rng_for(seed, 0, 0, 0);
        Array2::from_shape_fn((rows, cols), |_| StandardNormal.sample(&mut rng))
    }

    /// Run one step on every simulated worker; returns (decompressed, per-worker p).
    fn step(ws: &mut [SignSgd], grads: &[Array2<f32>]) -> (Array2<f32>, Vec<Vec<f32>>) {
        let (rows, cols) = grads[0].dim();
        let mut gathered = Vec::new();
        let mut counts = Vec::new();
        let mut ps = Vec::new();
        for (w, g) in ws.iter_mut().zip(grads) {
            let mut e = vec![0.0; rows * cols];
            w.residual_into(0, &mut e).unwrap();
            ps.push(g.iter().zip(&e).map(|(a, b)| a + b).collect());
            let mut wire = Wire::default();
            wire.reserve(w.wire_capacity(0, 0));
            let cap = wire.gather_u32.capacity();
            w.compress(0, 0, g.view(), &mut wire).unwrap();
            assert_eq!(
                wire.gather_u32.capacity(),
                cap,
                "compress must not reallocate the wire"
            );
            w.feedback(0, 0).unwrap();
            counts.push(wire.gather_u32.len());
            gathered.extend_from_slice(&wire.gather_u32);
        }
        let r = Received {
            sum_f32: &[],
            gathered_u32: &gathered,
            gather_counts: &counts,
            ring_u32: &[],
            world_size: ws.len(),
        };
        let mut out = Array2::zeros((rows, cols));
        for w in ws.iter_mut() {
            let mut o = Array2::zeros((rows, cols));
            w.decompress(0, 0, &r, o.view_mut()).unwrap();
            out = o;
        }
        (out, ps)
    }

    fn sgn(x: f32) -> f32 {
        1.0f32.copysign(x)
    }

    #[test]
    fn wire_bytes_and_names() {
        for &(rows, cols) in &[(1usize, 1usize), (1, 32), (3, 11), (7, 100)] {
            let d = rows * cols;
            let mut s = SignSgd::new(&MethodParams::default(), ctx(0, 1), false).unwrap();
            s.register(0, rows, cols).unwrap();
            let mut wire = Wire::default();
            s.compress(0, 0, randn(1, rows, cols).view(), &mut wire)
                .unwrap();
            assert_eq!(wire.bytes(), 4 + 4 * d.div_ceil(32));
            assert_eq!(s.wire_capacity(0, 0).bytes(), wire.bytes());
            let mut m = SignSgd::new(&MethodParams::default(), ctx(0, 1), true).unwrap();
            m.register(0, rows, cols).unwrap();
            m.compress(0, 0, randn(1, rows, cols).view(), &mut wire)
                .unwrap();
            assert_eq!(wire.bytes(), 4 * d.div_ceil(32));
        }
        let p = MethodParams::default();
        assert_eq!(
            SignSgd::new(&p, ctx(0, 1), false).unwrap().name(),
            "signsgd"
        );
        assert_eq!(
            SignSgd::new(&p, ctx(0, 1), true).unwrap().name(),
            "signsgd-mv"
        );
    }

    #[test]
    fn error_feedback_conserves_p() {
        let (rows, cols) = (5, 77);
        let mut s = SignSgd::new(&MethodParams::default(), ctx(0, 1), false).unwrap();
        s.register(0, rows, cols).unwrap();
        let mut e = vec![0.0f32; rows * cols];
        for it in 0..4 {
            let g = randn(10 + it, rows, cols);
            let p: Vec<f32> = g.iter().zip(&e).map(|(a, b)| a + b).collect();
            let scale = (p.iter().map(|v| v.abs() as f64).sum::<f64>() / p.len() as f64) as f32;
            let (out, _) = step(std::slice::from_mut(&mut s), &[g]);
            s.residual_into(0, &mut e).unwrap();
            for i in 0..p.len() {
                let sent = out.as_slice().unwrap()[i];
                assert!(
                    (sent - scale * sgn(p[i])).abs() <= 1e-6 * scale,
                    "it {it} i {i}"
                );
                assert!(
                    (sent + e[i] - p[i]).abs() <= 1e-6 * (1.0 + p[i].abs()),
                    "p = sent + e violated at {i}"
                );
            }
        }
    }

    /// EF-SignSGD at n = 2 and 3 over several steps against an independent reference
    /// (Karimireddy et al., Alg. 1): each worker's residual uses its *own* scale,
    /// `e_w = p_w - (||p_w||_1 / d) sgn(p_w)`, and the result is the mean of the workers'
    /// `scale_w sgn(p_w)`. Fails if the residual used the worker-averaged scale.
    #[test]
    fn residual_uses_local_scale_at_several_workers() {
        let (rows, cols) = (6, 41);
        let d = rows * cols;
        for n in 2..=3usize {
            let mut ws: Vec<SignSgd> = (0..n)
                .map(|r| SignSgd::new(&MethodParams::default(), ctx(r, n), false).unwrap())
                .collect();
            for w in ws.iter_mut() {
                w.register(0, rows, cols).unwrap();
            }
            let mut e_ref = vec![vec![0.0f64; d]; n];
            for it in 0..5u64 {
                let grads: Vec<_> = (0..n)
                    .map(|r| randn(1000 * it + r as u64 + 7, rows, cols))
                    .collect();
                let mut avg = vec![0.0f64; d];
                for (w, g) in grads.iter().enumerate() {
                    let p: Vec<f64> = g
                        .iter()
                        .zip(&e_ref[w])
                        .map(|(&a, &b)| a as f64 + b)
                        .collect();
                    let scale = p.iter().map(|v| v.abs()).sum::<f64>() / d as f64;
                    for ((&pi, e), a) in p.iter().zip(e_ref[w].iter_mut()).zip(avg.iter_mut()) {
                        let s = scale * if pi < 0.0 { -1.0 } else { 1.0 };
                        *e = pi - s;
                        *a += s / n as f64;
                    }
                }
                let (out, _) = step(&mut ws, &grads);
                for (w, ws_w) in ws.iter().enumerate() {
                    let mut e = vec![0.0f32; d];
                    ws_w.residual_into(0, &mut e).unwrap();
                    for i in 0..d {
                        assert!(
                            (e[i] as f64 - e_ref[w][i]).abs() <= 1e-4 * (1.0 + e_ref[w][i].abs()),
                            "n {n} step {it} worker {w} i {i}: residual {} vs reference {}",
                            e[i],
                            e_ref[w][i]
                        );
                    }
                }
                for (i, (&o, &a)) in out.iter().zip(&avg).enumerate() {
                    let o = o as f64;
                    assert!(
                        (o - a).abs() <= 1e-4 * (1.0 + a.abs()),
                        "n {n} step {it} i {i}"
                    );
                }
            }
        }
    }

    #[test]
    fn decompress_is_worker_average() {
        for n in 2..=3 {
            let (rows, cols) = (4, 50);
            let mut ws: Vec<SignSgd> = (0..n)
                .map(|r| SignSgd::new(&MethodParams::default(), ctx(r, n), false).unwrap())
                .collect();
            for w in ws.iter_mut() {
                w.register(0, rows, cols).unwrap();
            }
            let grads: Vec<_> = (0..n).map(|r| randn(100 + r as u64, rows, cols)).collect();
            for _ in 0..2 {
                let (out, ps) = step(&mut ws, &grads);
                for i in 0..rows * cols {
                    let reference: f32 = ps
                        .iter()
                        .map(|p| {
                            let scale = (p.iter().map(|v| v.abs() as f64).sum::<f64>()
                                / p.len() as f64) as f32;
                            scale * sgn(p[i])
                        })
                        .sum::<f32>()
                        / n as f32;
                    assert!(
                        (out.as_slice().unwrap()[i] - reference).abs() < 1e-5,
                        "n {n} i {i}"
                    );
                }
            }
        }
    }

    #[test]
    fn majority_vote() {
        let n = 3;
        let (rows, cols) = (2, 40);
        let mut ws: Vec<SignSgd> = (0..n)
            .map(|r| SignSgd::new(&MethodParams::default(), ctx(r, n), true).unwrap())
            .collect();
        for w in ws.iter_mut() {
            w.register(0, rows, cols).unwrap();
        }
        let mut rng = rng_for(5, 0, 0, 0);
        let grads: Vec<Array2<f32>> = (0..n)
            .map(|_| Array2::from_shape_fn((rows, cols), |_| rng.gen_range(-1.0f32..1.0)))
            .collect();
        let (out, _) = step(&mut ws, &grads);
        for i in 0..rows * cols {
            let s: f32 = grads.iter().map(|g| sgn(g.as_slice().unwrap()[i])).sum();
            assert_eq!(out.as_slice().unwrap()[i], s.signum());
        }
        // ties (even n) give 0
        let mut two: Vec<SignSgd> = (0..2)
            .map(|r| SignSgd::new(&MethodParams::default(), ctx(r, 2), true).unwrap())
            .collect();
        for w in two.iter_mut() {
            w.register(0, 1, 3).unwrap();
        }
        let a = Array2::from_shape_vec((1, 3), vec![1.0, -1.0, 2.0]).unwrap();
        let b = Array2::from_shape_vec((1, 3), vec![-1.0, -1.0, 2.0]).unwrap();
        let (out, _) = step(&mut two, &[a, b]);
        assert_eq!(out.as_slice().unwrap(), &[0.0, -1.0, 1.0]);
    }

    #[test]
    fn errors_instead_of_panics() {
        let mut s = SignSgd::new(&MethodParams::default(), ctx(0, 1), false).unwrap();
        let mut wire = Wire::default();
        assert!(s.compress(3, 0, randn(1, 2, 2).view(), &mut wire).is_err());
        s.register(0, 2, 2).unwrap();
        assert!(s.compress(0, 0, randn(1, 2, 3).view(), &mut wire).is_err());
        let r = Received {
            sum_f32: &[],
            gathered_u32: &[1, 2],
            gather_counts: &[1],
            ring_u32: &[],
            world_size: 1,
        };
        let mut out = Array2::zeros((2, 2));
        assert!(s.decompress(0, 0, &r, out.view_mut()).is_err());
    }

    /// `micro --check`, majority vote: each worker's share is its signs (-0.0 counts as
    /// negative, 0.0 as positive), the result exactly the sign of their sum, 0 on a tie.
    #[test]
    fn majority_check_by_hand() {
        let m = SignSgd::new(&MethodParams::default(), ctx(0, 2), true).unwrap();
        let mut fresh = SignSgd::new(&MethodParams::default(), ctx(0, 2), true).unwrap();
        fresh.register(check::CHECKED, 1, 4).unwrap();
        let g = Array2::from_shape_vec((1, 4), vec![1.0, -0.0, -2.0, 0.0]).unwrap();
        let share = m.check_share(g.view(), &mut fresh).unwrap();
        assert_eq!(share, [1.0, -1.0, -1.0, 1.0]);
        let summed = [2.0, -1.0, 0.0, -2.0];
        let verdict = |out: &[f32], fresh: &mut SignSgd| {
            let p = MethodParams::default();
            let probe = |r: usize, c: usize| Array2::zeros((r, c));
            let mut c = CheckCtx::two_workers((1, 4), &p, &[], fresh, &probe);
            m.check_verdict(out, &summed, &mut c).unwrap()
        };
        assert_eq!(verdict(&[1.0, -1.0, 0.0, -1.0], &mut fresh), Ok(()));
        for (i, off) in [(0, 0.0), (1, 1.0), (2, 1.0), (2, -1.0), (3, 0.0)] {
            let mut out = [1.0, -1.0, 0.0, -1.0];
            out[i] = off;
            let e = verdict(&out, &mut fresh).unwrap_err();
            assert!(
                e.starts_with(&format!("sign of the sum of signs: element {i} ")),
                "{e}"
            );
        }
    }

    /// `micro --check`, EF-SignSGD: each worker's share is its own decode, `||g||_1 / d`
    /// times the signs (10 / 4 = 2.5 here); the result the mean of the shares.
    #[test]
    fn error_feedback_check_by_hand() {
        let m = SignSgd::new(&MethodParams::default(), ctx(0, 2), false).unwrap();
        let mut fresh = SignSgd::new(&MethodParams::default(), ctx(0, 2), false).unwrap();
        fresh.register(check::CHECKED, 2, 2).unwrap();
        let g = Array2::from_shape_vec((2, 2), vec![1.0, -2.0, 3.0, -4.0]).unwrap();
        let share = m.check_share(g.view(), &mut fresh).unwrap();
        assert_eq!(share, [2.5, -2.5, 2.5, -2.5]);
        let summed = [2.5, -2.5, 4.0, 0.0];
        let p = MethodParams::default();
        let probe = |r: usize, c: usize| Array2::zeros((r, c));
        let mut c = CheckCtx::two_workers((2, 2), &p, &[], &mut fresh, &probe);
        let mean = [1.25, -1.25, 2.0, 0.0];
        assert_eq!(m.check_verdict(&mean, &summed, &mut c).unwrap(), Ok(()));
        let e = m
            .check_verdict(&[1.25, -1.25, 2.0, 0.01], &summed, &mut c)
            .unwrap()
            .unwrap_err();
        assert!(
            e.starts_with("mean of every worker's own decoded message: element 3"),
            "{e}"
        );
    }

    /// Majority vote describes itself, not EF-SignSGD, whose spec it starts from: its own
    /// name, summary, wire (no scale word), memory (no residual), citations, compressor
    /// and measured costs.
    #[test]
    fn the_majority_vote_spec_is_its_own() {
        let (mv, ef) = (&SPEC_MV, &SPEC);
        assert_eq!(mv.name, "signsgd-mv");
        assert_ne!(mv.summary, ef.summary);
        assert_eq!((mv.wire_bytes, mv.memory), ("4 ceil(d / 32)", "none"));
        assert!(mv.citations.iter().any(|c| c.contains("Bernstein")));
        assert!(!ef.citations.iter().any(|c| c.contains("Bernstein")));
        assert_ne!(mv.reference_costs, ef.reference_costs);
        let c = (mv.build)(&MethodParams::default(), ctx(0, 2)).unwrap();
        assert_eq!(c.name(), "signsgd-mv");
    }

    /// Signs and scale fill the same number of words every step: the gather is exact.
    #[test]
    fn the_sign_wire_is_an_exact_gather() {
        for majority in [false, true] {
            let mut s = SignSgd::new(&MethodParams::default(), ctx(0, 2), majority).unwrap();
            s.register(0, 3, 40).unwrap();
            // 120 bits: 4 words, plus the scale word without majority vote.
            let words = 4 + usize::from(!majority);
            let want = WireLen {
                gather_u32: words,
                gather_exact: true,
                ..WireLen::default()
            };
            assert_eq!(s.wire_capacity(0, 0), want);
        }
    }

    /// The memory check's share: every rank's packed signs received, one bit an element
    /// plus 8 bytes, per tensor: 4 x (64 / 8 + 8) + 4 x (8 / 8 + 8) = 64 + 36.
    #[test]
    fn sign_state_bytes_by_hand() {
        assert_eq!(
            signs_state_bytes(&MethodParams::default(), &[64, 8], 4),
            100
        );
    }
}
