//! Deep Gradient Compression (Lin et al., ICLR 2018; docs/methods.md, "dgc"): local gradient
//! clipping, momentum correction, sampled threshold sparsification, momentum factor
//! masking and an exponential density warm-up. Tensors with `rows > 1` are sparsified;
//! `rows == 1` tensors are all-reduced dense with plain momentum.

use super::kernels::rng_for;
use super::select::{
    grad_slice, indexable_len, out_slice, push_pairs, scatter_mean, single_round, tensor_err,
    touched_vec, TopKScratch,
};
use super::topk::check_density;
use super::{
    Aggregation, CompressError, Compressor, MethodParams, Received, Result, TensorId, Wire,
    WireLen, WorkerCtx,
};
use ndarray::{ArrayView2, ArrayViewMut2};

const NAME: &str = "dgc";
/// RNG stream tag of the threshold sample.
const STREAM_SAMPLE: u64 = 0x0064_6763;
/// Elements per fused momentum-and-scan chunk (fits L1).
const CHUNK: usize = 4096;
/// Sample about 1% of `|v|`, at least this many elements (DGC Sec. 3 "sampling").
const MIN_SAMPLE: usize = 512;
/// Threshold retries (×0.8 each) before falling back to exact top-k.
const MAX_TRIES: usize = 10;
/// Warm-up densities per warm-up epoch (DGC Sec. 3.4: 75%, 93.75%, 98.4375%, 99.6% sparsity).
pub const WARMUP_DENSITIES: [f64; 4] = [0.25, 0.0625, 0.015625, 0.004];

/// Density at `step` (DGC Sec. 3.4 warm-up): `WARMUP_DENSITIES[step / steps_per_epoch]`
/// for the first four warm-up epochs, then `density`; never below `density`.
pub fn warmup_density(density: f64, warmup_steps_per_epoch: u64, step: u64) -> f64 {
    if warmup_steps_per_epoch == 0 {
        return density;
    }
    let epoch = step / warmup_steps_per_epoch;
    match WARMUP_DENSITIES.get(epoch as usize) {
        Some(&w) => w.max(density),
        None => density,
    }
}

/// Most survivors sent as they are: `floor(1.3 k)` (more: exact top-k among them).
pub fn band_hi(k: usize) -> usize {
    (1.3 * k as f64).floor() as usize
}

/// Fewest survivors sent as they are: `ceil(0.8 k)` (fewer: lower the threshold).
pub fn band_lo(k: usize) -> usize {
    (0.8 * k as f64).ceil() as usize
}

/// How the last sparse `compress` selected its entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selection {
    /// All survivors of the threshold, their count within `[band_lo(k), band_hi(k)]`.
    Band,
    /// More than `band_hi(k)` survived: the exact top-k among them.
    TopOfSurvivors,
    /// Fewer than `band_lo(k)` after `MAX_TRIES` lowerings: exact top-k.
    Fallback,
}

/// Per-tensor state, allocated and touched in `register`.
#[derive(Debug, Clone)]
struct TensorState {
    rows: usize,
    cols: usize,
    /// Sparsified (`rows > 1`) or dense.
    sparse: bool,
    /// Momentum `u` (dense tensors: the momentum buffer of the averaged gradient).
    u: Vec<f32>,
    /// Accumulated velocity `v` (sparse tensors only).
    v: Vec<f32>,
    /// Indices sent by the last `compress` (ascending), `n_sent` of them.
    sent: Vec<u32>,
    n_sent: usize,
    /// Whether momentum factor masking is still to be applied.
    pending: bool,
    /// Largest `k` over the density schedule.
    k_max: usize,
}

impl TensorState {
    /// Momentum factor masking (DGC Sec. 3.2): zero `v` and `u` at the sent indices.
    fn apply_masking(&mut self) {
        if self.pending {
            for &i in &self.sent[..self.n_sent] {
                let i = i as usize;
                if i < self.v.len() && i < self.u.len() {
                    self.v[i] = 0.0;
                    self.u[i] = 0.0;
                }
            }
            self.pending = false;
        }
    }
}

/// Momentum correction (DGC Sec. 3.2): `u = m u + g; v = v + u`; Nesterov (DGC
/// Appendix, Alg. 4): `u = m (u + g); v = v + u + g`. Returns the new `(u, v)`.
#[inline(always)]
fn momentum<const NESTEROV: bool>(u: f32, v: f32, g: f32, m: f32) -> (f32, f32) {
    if NESTEROV {
        let u = m * (u + g);
        (u, v + u + g)
    } else {
        let u = m * u + g;
        (u, v + u)
    }
}

/// Apply [`momentum`] to a chunk with the gradient scaled by `clip`.
fn momentum_chunk<const NESTEROV: bool>(
    u: &mut [f32],
    v: &mut [f32],
    g: &[f32],
    m: f32,
    clip: f32,
) {
    for ((u, v), &g) in u.iter_mut().zip(v.iter_mut()).zip(g) {
        (*u, *v) = momentum::<NESTEROV>(*u, *v, g * clip, m);
    }
}

/// Local gradient clipping factor (DGC Sec. 3.3): scale so `||g||_2 <= clip_norm / sqrt(n)`.
fn clip_factor(g: &[f32], clip_norm: f32, n: usize) -> f32 {
    if clip_norm <= 0.0 {
        return 1.0;
    }
    let sq: f64 = g
        .chunks(CHUNK)
        .map(|c| c.iter().map(|x| x * x).sum::<f32>() as f64)
        .sum();
    let norm = sq.sqrt();
    let limit = clip_norm as f64 / (n.max(1) as f64).sqrt();
    if norm > limit {
        (limit / norm) as f32
    } else {
        1.0
    }
}

/// Deep Gradient Compression; wire `gather_u32` = selected indices then value bits
/// (sparse tensors), `sum_f32` = the gradient (dense tensors).
#[derive(Debug, Clone)]
pub struct Dgc {
    params: MethodParams,
    ctx: WorkerCtx,
    step: u64,
    /// Density of the current step (warm-up schedule).
    density_now: f64,
    tensors: Vec<Option<TensorState>>,
    scratch: TopKScratch,
    /// Selected values (scratch).
    vals: Vec<f32>,
    /// How the last sparse `compress` selected, and how many threshold tries it used.
    last: (Selection, usize),
}

impl Dgc {
    /// Reads `density` (0, 1], `momentum` [0, 1), `clip_norm` >= 0, `nesterov`,
    /// `warmup_steps_per_epoch`.
    pub fn new(p: &MethodParams, ctx: WorkerCtx) -> Result<Self> {
        check_density(NAME, p.density)?;
        if !(p.momentum >= 0.0 && p.momentum < 1.0) {
            return Err(CompressError::BadParam {
                method: NAME,
                key: "momentum",
                value: p.momentum.to_string(),
                allowed: "a factor in [0, 1)".into(),
            });
        }
        if !(p.clip_norm >= 0.0 && p.clip_norm.is_finite()) {
            return Err(CompressError::BadParam {
                method: NAME,
                key: "clip_norm",
                value: p.clip_norm.to_string(),
                allowed: "a finite norm >= 0 (0 = no clipping)".into(),
            });
        }
        Ok(Dgc {
            params: p.clone(),
            ctx,
            step: 0,
            density_now: warmup_density(p.density, p.warmup_steps_per_epoch, 0),
            tensors: Vec::new(),
            scratch: TopKScratch::new(0, 0),
            vals: Vec::new(),
            last: (Selection::Band, 0),
        })
    }

    fn state(&mut self, t: TensorId) -> Result<&mut TensorState> {
        self.tensors
            .get_mut(t)
            .and_then(Option::as_mut)
            .ok_or_else(|| tensor_err(NAME, t, "not registered".into()))
    }

    /// `k` of `d` elements at density `rho`.
    fn k_at(&self, rho: f64, d: usize) -> usize {
        MethodParams {
            density: rho,
            ..self.params.clone()
        }
        .k_of(d)
    }

    /// How the last sparse `compress` selected and how many thresholds it tried.
    pub fn last_selection(&self) -> (Selection, usize) {
        self.last
    }

    /// Sparse path: clipping, momentum correction, sampled threshold, selection.
    fn compress_sparse(&mut self, t: TensorId, g: &[f32], wire: &mut Wire) -> Result<()> {
        let k = self.k_at(self.density_now, g.len());
        let (m, nesterov, clip_norm) = (
            self.params.momentum,
            self.params.nesterov,
            self.params.clip_norm,
        );
        let mut rng = rng_for(self.ctx.seed, self.step, t, STREAM_SAMPLE);
        let clip = clip_factor(g, clip_norm, self.ctx.world_size);
        let Dgc {
            tensors,
            scratch,
            vals,
            last,
            ..
        } = self;
        let st = tensors
            .get_mut(t)
            .and_then(Option::as_mut)
            .ok_or_else(|| tensor_err(NAME, t, "not registered".into()))?;
        st.apply_masking();
        let d = g.len();
        let (u, v) = (&mut st.u, &mut st.v);
        // Threshold from a strided random ~1% sample of the updated |v| (DGC Sec. 3).
        let s = (d / 100).max(MIN_SAMPLE).min(d);
        let drawn = if nesterov {
            scratch.draw_sample(d, s, &mut rng, |i| {
                momentum::<true>(u[i], v[i], g[i] * clip, m).1
            })
        } else {
            scratch.draw_sample(d, s, &mut rng, |i| {
                momentum::<false>(u[i], v[i], g[i] * clip, m).1
            })
        };
        let r = (self.density_now * drawn as f64).ceil() as usize;
        let mut thr = scratch.sample_nth_largest(drawn, r);
        // Fused momentum correction and survivor scan, one pass over memory.
        scratch.begin(k, thr)?;
        for (c, ((uc, vc), gc)) in u
            .chunks_mut(CHUNK)
            .zip(v.chunks_mut(CHUNK))
            .zip(g.chunks(CHUNK))
            .enumerate()
        {
            if nesterov {
                momentum_chunk::<true>(uc, vc, gc, m, clip);
            } else {
                momentum_chunk::<false>(uc, vc, gc, m, clip);
            }
            scratch.scan(c * CHUNK, vc);
        }
        let mut tries = 1;
        let n_sent = loop {
            let (len, compacted) = scratch.candidates();
            if compacted || len > band_hi(k) {
                *last = (Selection::TopOfSurvivors, tries);
                break scratch.finish(v, k, &mut st.sent, vals)?;
            }
            if len >= band_lo(k) {
                *last = (Selection::Band, tries);
                break scratch.finish(v, len, &mut st.sent, vals)?;
            }
            if tries >= MAX_TRIES {
                *last = (Selection::Fallback, tries);
                break scratch.top_k(v, k, &mut rng, &mut st.sent, vals)?;
            }
            tries += 1;
            thr *= 0.8;
            scratch.begin(k, thr)?;
            scratch.scan(0, v);
        };
        st.n_sent = n_sent;
        st.pending = true;
        wire.clear();
        push_pairs(wire, &st.sent[..n_sent], &vals[..n_sent]);
        Ok(())
    }
}

impl Compressor for Dgc {
    fn name(&self) -> &'static str {
        NAME
    }
    fn aggregation(&self) -> Aggregation {
        Aggregation::AllGather
    }
    fn register(&mut self, t: TensorId, rows: usize, cols: usize) -> Result<()> {
        let d = indexable_len(NAME, t, rows, cols)?;
        let sparse = rows > 1;
        let rho_max = if self.params.warmup_steps_per_epoch > 0 {
            WARMUP_DENSITIES[0].max(self.params.density)
        } else {
            self.params.density
        };
        let k_max = if sparse { self.k_at(rho_max, d) } else { 0 };
        let cap = band_hi(k_max);
        if sparse {
            self.scratch.ensure(d, k_max);
            if self.vals.len() < cap {
                self.vals = touched_vec(cap, 0.0, 1.0);
            }
        }
        if self.tensors.len() <= t {
            self.tensors.resize(t + 1, None);
        }
        self.tensors[t] = Some(TensorState {
            rows,
            cols,
            sparse,
            u: touched_vec(d, 0.0, 1.0),
            v: if sparse {
                touched_vec(d, 0.0, 1.0)
            } else {
                Vec::new()
            },
            sent: touched_vec(cap, 0, 1),
            n_sent: 0,
            pending: false,
            k_max,
        });
        Ok(())
    }
    fn wire_capacity(&self, t: TensorId, _round: usize) -> WireLen {
        match self.tensors.get(t).and_then(Option::as_ref) {
            Some(s) if s.sparse => WireLen {
                gather_u32: 2 * band_hi(s.k_max),
                ..WireLen::default()
            },
            Some(s) => WireLen {
                sum_f32: s.rows * s.cols,
                ..WireLen::default()
            },
            None => WireLen::default(),
        }
    }
    fn begin_step(&mut self, step: u64) {
        self.step = step;
        self.density_now = warmup_density(
            self.params.density,
            self.params.warmup_steps_per_epoch,
            step,
        );
    }
    fn compress(
        &mut self,
        t: TensorId,
        round: usize,
        grad: ArrayView2<f32>,
        wire: &mut Wire,
    ) -> Result<()> {
        single_round(NAME, round)?;
        let st = self.state(t)?;
        let g = grad_slice(NAME, t, &grad, st.rows, st.cols)?;
        if st.sparse {
            self.compress_sparse(t, g, wire)
        } else {
            wire.clear();
            wire.sum_f32.extend_from_slice(g);
            Ok(())
        }
    }
    fn feedback(&mut self, t: TensorId, _round: usize) -> Result<()> {
        self.state(t)?.apply_masking();
        Ok(())
    }
    fn decompress(
        &mut self,
        t: TensorId,
        _round: usize,
        received: &Received,
        out: ArrayViewMut2<f32>,
    ) -> Result<()> {
        let (m, nesterov) = (self.params.momentum, self.params.nesterov);
        let st = self.state(t)?;
        let out = out_slice(NAME, t, out, st.rows, st.cols)?;
        if st.sparse {
            return scatter_mean(NAME, t, received, out);
        }
        if received.sum_f32.len() != out.len() || received.world_size == 0 {
            return Err(tensor_err(
                NAME,
                t,
                format!(
                    "received {} summed values from {} workers for {} elements",
                    received.sum_f32.len(),
                    received.world_size,
                    out.len()
                ),
            ));
        }
        // Dense tensors: plain momentum on the worker average, the same formula as the
        // sparse path so the output is the update of every tensor alike.
        let n = received.world_size as f32;
        for ((o, u), &s) in out.iter_mut().zip(st.u.iter_mut()).zip(received.sum_f32) {
            let (un, step) = if nesterov {
                momentum::<true>(*u, 0.0, s / n, m)
            } else {
                momentum::<false>(*u, 0.0, s / n, m)
            };
            *u = un;
            *o = step;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compress::select::test_support::{ctx, grad, params};
    use ndarray::Array2;

    #[test]
    fn warmup_schedule() {
        assert_eq!(warmup_density(0.001, 0, 5), 0.001);
        let want = [
            0.25, 0.25, 0.0625, 0.0625, 0.015625, 0.015625, 0.004, 0.004, 0.001, 0.001,
        ];
        for (s, &w) in want.iter().enumerate() {
            assert_eq!(warmup_density(0.001, 2, s as u64), w, "step {s}");
        }
        let mut m = Dgc::new(
            &MethodParams {
                warmup_steps_per_epoch: 3,
                ..params(0.001)
            },
            ctx(0, 1),
        )
        .expect("new");
        m.register(0, 100, 100).expect("register");
        // Capacity covers the densest warm-up step (25%).
        assert_eq!(m.wire_capacity(0, 0).gather_u32, 2 * band_hi(2500));
        let mut wire = Wire::default();
        m.begin_step(0);
        m.compress(0, 0, grad(100, 100, 1).view(), &mut wire)
            .expect("compress");
        let n = wire.gather_u32.len() / 2;
        assert!(
            (band_lo(2500)..=band_hi(2500)).contains(&n) || n == 2500,
            "{n}"
        );
        m.begin_step(12);
        m.compress(0, 0, grad(100, 100, 2).view(), &mut wire)
            .expect("compress");
        let n = wire.gather_u32.len() / 2;
        assert!((band_lo(10)..=band_hi(10)).contains(&n), "{n}");
    }

    /// One step: returns (v before selection, sent pairs, v and u after masking).
    fn step(
        m: &mut Dgc,
        t: TensorId,
        g: &Array2<f32>,
    ) -> (Vec<f32>, Vec<(usize, f32)>, Vec<f32>, Vec<f32>) {
        let st = m.tensors[t].as_ref().expect("state");
        let (mo, nest) = (m.params.momentum, m.params.nesterov);
        let clip = clip_factor(
            g.as_slice().expect("contiguous"),
            m.params.clip_norm,
            m.ctx.world_size,
        );
        let v_before: Vec<f32> =
            st.u.iter()
                .zip(&st.v)
                .zip(g.iter())
                .map(|((&u, &v), &g)| {
                    if nest {
                        momentum::<true>(u, v, g * clip, mo).1
                    } else {
                        momentum::<false>(u, v, g * clip, mo).1
                    }
                })
                .collect();
        let mut wire = Wire::default();
        wire.reserve(m.wire_capacity(t, 0));
        let cap = wire.gather_u32.capacity();
        m.compress(t, 0, g.view(), &mut wire).expect("compress");
        assert!(wire.gather_u32.len() <= 2 * band_hi(m.tensors[t].as_ref().expect("state").k_max));
        assert_eq!(
            wire.gather_u32.capacity(),
            cap,
            "compress reallocated the wire"
        );
        m.feedback(t, 0).expect("feedback");
        let h = wire.gather_u32.len() / 2;
        let sent = wire.gather_u32[..h]
            .iter()
            .zip(&wire.gather_u32[h..])
            .map(|(&i, &b)| (i as usize, f32::from_bits(b)))
            .collect();
        let st = m.tensors[t].as_ref().expect("state");
        (v_before, sent, st.v.clone(), st.u.clone())
    }

    #[test]
    fn masking_conservation_and_band() {
        for nesterov in [false, true] {
            let p = MethodParams {
                nesterov,
                ..params(0.01)
            };
            let (rows, cols) = (200, 500);
            let k = p.k_of(rows * cols);
            let mut m = Dgc::new(&p, ctx(0, 2)).expect("new");
            m.register(1, rows, cols).expect("register");
            for s in 0..6 {
                m.begin_step(s);
                let (vb, sent, va, ua) = step(&mut m, 1, &grad(rows, cols, s));
                let mut is_sent = vec![false; vb.len()];
                for &(i, x) in &sent {
                    assert!(!is_sent[i]);
                    is_sent[i] = true;
                    assert_eq!(va[i], 0.0);
                    assert_eq!(ua[i], 0.0);
                    assert_eq!(x.to_bits(), vb[i].to_bits());
                }
                for i in 0..vb.len() {
                    if !is_sent[i] {
                        assert_eq!(va[i].to_bits(), vb[i].to_bits(), "v changed at unsent {i}");
                    }
                }
                let (sel, tries) = m.last_selection();
                match sel {
                    Selection::Band => assert!(
                        (band_lo(k)..=band_hi(k)).contains(&sent.len()),
                        "{} of k {k}",
                        sent.len()
                    ),
                    _ => {
                        assert_eq!(sent.len(), k);
                        let min_sent = sent.iter().map(|p| p.1.abs()).fold(f32::INFINITY, f32::min);
                        let max_unsent = (0..vb.len())
                            .filter(|&i| !is_sent[i])
                            .map(|i| vb[i].abs())
                            .fold(0.0, f32::max);
                        assert!(min_sent >= max_unsent);
                    }
                }
                assert!((1..=MAX_TRIES).contains(&tries));
            }
        }
    }

    #[test]
    fn adversarial_data_selects_exact_top_k() {
        let (rows, cols) = (100, 1000);
        let mut m = Dgc::new(
            &MethodParams {
                momentum: 0.0,
                ..params(0.001)
            },
            ctx(0, 1),
        )
        .expect("new");
        m.register(0, rows, cols).expect("register");
        // All equal: every element survives the threshold, the first k are kept.
        let (_, sent, _, _) = step(&mut m, 0, &Array2::from_elem((rows, cols), 0.5));
        assert_eq!(m.last_selection().0, Selection::TopOfSurvivors);
        assert_eq!(
            sent.iter().map(|p| p.0).collect::<Vec<_>>(),
            (0..100).collect::<Vec<_>>()
        );
        // 50 large values in 10 strides of 100: when the sample hits one, thr = 1 leaves
        // 50 < 0.8 k survivors however far it is lowered (exact fallback); when it
        // misses, thr = 0 and the exact top-k of all survivors is kept.
        let mut g = Array2::from_elem((rows, cols), 0.0f32);
        for b in 0..10 {
            for j in 0..5 {
                g[[b, 200 + j]] = 1.0 + (b * 5 + j) as f32;
            }
        }
        let mut fallbacks = 0;
        for s in 0..10 {
            let mut m = Dgc::new(
                &MethodParams {
                    momentum: 0.0,
                    ..params(0.001)
                },
                ctx(0, 1),
            )
            .expect("new");
            m.register(0, rows, cols).expect("register");
            m.begin_step(s);
            let (_, sent, _, _) = step(&mut m, 0, &g);
            assert_eq!(sent.len(), 100);
            for b in 0..10 {
                for j in 0..5 {
                    assert!(sent.iter().any(|p| p.0 == b * cols + 200 + j));
                }
            }
            let (sel, tries) = m.last_selection();
            assert_ne!(sel, Selection::Band);
            if sel == Selection::Fallback {
                assert_eq!(tries, MAX_TRIES);
                fallbacks += 1;
            }
        }
        assert!(fallbacks > 0, "the sample never hit a large value");
    }

    #[test]
    fn clipping_bounds_the_norm() {
        let (rows, cols, n) = (50, 80, 4);
        let p = MethodParams {
            clip_norm: 2.0,
            ..params(0.05)
        };
        let mut m = Dgc::new(&p, ctx(0, n)).expect("new");
        m.register(0, rows, cols).expect("register");
        let g = grad(rows, cols, 9);
        // First step: v = clipped g; v before selection is sent + v after.
        let (vb, _, _, _) = step(&mut m, 0, &g);
        let norm = vb.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "norm {norm}, want 2 / sqrt(4)");
        let small = g.mapv(|x| x * 1e-4);
        let mut m2 = Dgc::new(&p, ctx(0, n)).expect("new");
        m2.register(0, rows, cols).expect("register");
        let (vb, _, _, _) = step(&mut m2, 0, &small);
        assert!(
            vb.iter().zip(small.iter()).all(|(a, b)| a == b),
            "small gradients must not be scaled"
        );
    }

    #[test]
    fn one_d_tensors_are_dense_with_momentum() {
        let n = 2;
        let p = params(0.01);
        let mut ms: Vec<Dgc> = (0..n)
            .map(|w| Dgc::new(&p, ctx(w, n)).expect("new"))
            .collect();
        for m in &mut ms {
            m.register(4, 1, 10).expect("register");
            assert_eq!(
                m.wire_capacity(4, 0),
                WireLen {
                    sum_f32: 10,
                    ..WireLen::default()
                }
            );
        }
        let mut out = Array2::zeros((1, 10));
        let mut avg_prev = vec![0f32; 10];
        for s in 0..2 {
            let mut sum = vec![0f32; 10];
            for (w, m) in ms.iter_mut().enumerate() {
                let g = grad(1, 10, 100 * s + w as u64);
                let mut wire = Wire::default();
                m.compress(4, 0, g.view(), &mut wire).expect("compress");
                assert!(wire.gather_u32.is_empty());
                assert_eq!(wire.sum_f32, g.as_slice().expect("contiguous"));
                sum.iter_mut().zip(&wire.sum_f32).for_each(|(a, b)| *a += b);
            }
            let rec = Received {
                sum_f32: &sum,
                gathered_u32: &[],
                gather_counts: &[0, 0],
                ring_u32: &[],
                world_size: n,
            };
            ms[0]
                .decompress(4, 0, &rec, out.view_mut())
                .expect("decompress");
            for i in 0..10 {
                let avg = sum[i] / n as f32;
                let want = 0.9 * avg_prev[i] + avg;
                assert!(
                    (out[[0, i]] - want).abs() < 1e-6,
                    "step {s}: {} vs {want}",
                    out[[0, i]]
                );
                avg_prev[i] = want;
            }
        }
    }

    #[test]
    fn decompress_is_mean_of_sent_pairs() {
        let (rows, cols, n) = (40, 50, 3);
        let mut sections = Vec::new();
        let mut counts = Vec::new();
        let mut dense = vec![0f32; rows * cols];
        for w in 0..n {
            let mut m = Dgc::new(&params(0.02), ctx(w, n)).expect("new");
            m.register(0, rows, cols).expect("register");
            let (_, sent, _, _) = step(&mut m, 0, &grad(rows, cols, 50 + w as u64));
            for &(i, x) in &sent {
                dense[i] += x;
            }
            counts.push(2 * sent.len());
            sections.extend(sent.iter().map(|p| p.0 as u32));
            sections.extend(sent.iter().map(|p| p.1.to_bits()));
        }
        let rec = Received {
            sum_f32: &[],
            gathered_u32: &sections,
            gather_counts: &counts,
            ring_u32: &[],
            world_size: n,
        };
        let mut m = Dgc::new(&params(0.02), ctx(0, n)).expect("new");
        m.register(0, rows, cols).expect("register");
        let mut out = Array2::from_elem((rows, cols), 3.0f32);
        m.decompress(0, 0, &rec, out.view_mut())
            .expect("decompress");
        for (o, s) in out.iter().zip(&dense) {
            assert!((o - s / n as f32).abs() <= 1e-6);
        }
    }

    #[test]
    fn validates_params_and_ids() {
        assert!(Dgc::new(&params(0.0), ctx(0, 1)).is_err());
        assert!(Dgc::new(
            &MethodParams {
                momentum: 1.0,
                ..params(0.1)
            },
            ctx(0, 1)
        )
        .is_err());
        assert!(Dgc::new(
            &MethodParams {
                momentum: f32::NAN,
                ..params(0.1)
            },
            ctx(0, 1)
        )
        .is_err());
        assert!(Dgc::new(
            &MethodParams {
                clip_norm: -1.0,
                ..params(0.1)
            },
            ctx(0, 1)
        )
        .is_err());
        assert!(Dgc::new(
            &MethodParams {
                clip_norm: f32::INFINITY,
                ..params(0.1)
            },
            ctx(0, 1)
        )
        .is_err());
        let mut m = Dgc::new(&params(0.1), ctx(0, 1)).expect("new");
        assert!(m
            .compress(2, 0, grad(2, 2, 0).view(), &mut Wire::default())
            .is_err());
        assert!(m.feedback(2, 0).is_err());
        m.register(2, 2, 2).expect("register");
        assert!(m
            .compress(2, 0, grad(2, 3, 0).view(), &mut Wire::default())
            .is_err());
        assert!(m
            .compress(2, 1, grad(2, 2, 0).view(), &mut Wire::default())
            .is_err());
    }

    /// Compress throughput on ResNet-50's gradient size (`-- --ignored --nocapture`).
    #[test]
    #[ignore]
    fn speed_resnet50() {
        let d = 25_557_032;
        let rows = 2;
        let mut m = Dgc::new(&MethodParams::default(), ctx(0, 1)).expect("new");
        m.register(0, rows, d / rows).expect("register");
        let mut wire = Wire::default();
        wire.reserve(m.wire_capacity(0, 0));
        let g = grad(rows, d / rows, 3);
        for s in 0..5 {
            m.begin_step(s);
            let t = std::time::Instant::now();
            m.compress(0, 0, g.view(), &mut wire).expect("compress");
            m.feedback(0, 0).expect("feedback");
            let el_s = t.elapsed().as_secs_f64();
            println!(
                "dgc compress+feedback: {:.3} ms, {:.2} GB/s, {:?}, sent {}",
                el_s * 1e3,
                4.0 * d as f64 / el_s / 1e9,
                m.last_selection(),
                wire.gather_u32.len() / 2
            );
        }
    }
}
