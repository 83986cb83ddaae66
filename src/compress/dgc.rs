//! Deep Gradient Compression (Lin et al., ICLR 2018; docs/methods.md, "dgc"): local gradient
//! clipping, momentum correction, sampled threshold sparsification, momentum factor
//! masking and an exponential density warm-up. Tensors with `rows > 1` are sparsified;
//! `rows == 1` tensors (and every tensor at density 1) are all-reduced dense with plain
//! momentum.
//!
//! The selection follows the authors' reference implementation,
//! synxlin/deep-gradient-compression `dgc/compression.py` (`DGCCompressor`, defaults
//! `sample_ratio = 0.01`, `strided_sample`, bounds 1.3 / 0.8, `max_adaptation_iters =
//! 10`, `resample`): the sample plan of `initialize`, the threshold and adaptation loop
//! of `_sparsify`, and its final `indices[:num_selects]`. docs/methods.md (dgc) lists
//! what is followed and what differs.

use super::device::{self, BOOL, F32, I64};
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
use crate::devcost::{Kernel, Stage};
use ndarray::{ArrayView2, ArrayViewMut2};
use rand::Rng;

const NAME: &str = "dgc";
/// RNG stream tag of the threshold sample's start.
const STREAM_SAMPLE: u64 = 0x0064_6763;
/// Elements per fused momentum-and-scan chunk (fits L1).
const CHUNK: usize = 4096;
/// Sampled fraction of the tensor, at least (reference `sample_ratio`).
const SAMPLE_RATIO: f64 = 0.01;
/// More than `UPPER_BOUND * k` survivors: keep the exact top-k of them (reference
/// `compress_upper_bound` with `resample = True`).
const UPPER_BOUND: f64 = 1.3;
/// Fewer than `LOWER_BOUND * k` survivors: lower the threshold by this factor (reference
/// `compress_lower_bound`, also the factor; f32 as the reference's threshold tensor).
const LOWER_BOUND: f32 = 0.8;
/// Most threshold lowerings (reference `max_adaptation_iters`).
pub const MAX_LOWERINGS: usize = 10;
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

/// How the threshold is sampled for a tensor of `d` elements at density `rho`
/// (reference `DGCCompressor.initialize`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SamplePlan {
    /// Distance between sampled elements; 1: the whole tensor is the sample.
    pub stride: usize,
    /// The reference's `num_samples`, `d / stride` (floor); `rho` of it sets the threshold.
    pub samples: usize,
    /// The threshold is the `top_k_samples`-th largest sampled `|v|`: `ceil(samples rho)`.
    pub top_k_samples: usize,
}

/// The reference's sample plan: with `want = max(ceil(0.01 d), ceil(2 / rho))`, the
/// whole tensor when `d <= ceil(2 / rho)`; otherwise the stride `32 ceil(d / want / 32)
/// + 1`, lowered by 8 until `d / stride >= want`. The sample is then `|v|[start::stride]`
/// for a uniform `start` in `0..stride` (`d / stride` or one more elements).
pub fn sample_plan(d: usize, rho: f64) -> SamplePlan {
    let pct = (d as f64 * SAMPLE_RATIO).ceil() as usize;
    let cpr = (2.0 / rho).ceil() as usize;
    let (stride, samples) = if d <= cpr {
        (1, d)
    } else {
        let want = pct.max(cpr);
        let mut stride = (d as f64 / want as f64 / 32.0).ceil() as usize * 32 + 1;
        // Ends at stride 1 at the latest (d >= want), as the reference's loop.
        while stride > 1 && d / stride < want {
            stride -= 8;
        }
        (stride, d / stride)
    };
    SamplePlan {
        stride,
        samples,
        top_k_samples: ((samples as f64 * rho).ceil() as usize).clamp(1, samples.max(1)),
    }
}

/// Which rule of the reference's `_sparsify` chose the last sparse `compress`'s entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selection {
    /// The whole tensor was the sample: its `k`-th largest `|v|` is the threshold, no
    /// adaptation; the first `k` survivors in index order are sent.
    Exact,
    /// Survivors within `[0.8 k, 1.3 k]` (after 0 to 9 lowerings): the first
    /// `min(survivors, k)` in index order are sent.
    Band,
    /// More than `1.3 k` survivors (after 0 to 9 lowerings): their exact top-k by `|v|`
    /// (ties to the lower index).
    TopOfSurvivors,
    /// Fewer than `0.8 k` survivors after 9 lowerings, so a 10th: the loop ends and the
    /// first `min(survivors, k)` in index order are sent, whatever their number.
    Exhausted,
}

/// What the last sparse `compress` did (diagnostics and tests).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SelectionStats {
    pub path: Selection,
    /// Threshold lowerings (x0.8 each), `0..=MAX_LOWERINGS`.
    pub lowerings: usize,
    /// Elements with `|v| >= threshold`; `None` when more than the candidate buffer
    /// held (over `2 k`).
    pub survivors: Option<usize>,
    /// Final threshold: `sample_threshold * 0.8^lowerings`.
    pub threshold: f32,
    /// The `top_k_samples`-th largest sampled `|v|`.
    pub sample_threshold: f32,
    /// [`SamplePlan::samples`] and [`SamplePlan::stride`] of this step's density.
    pub samples: usize,
    pub sample_stride: usize,
    /// First sampled index (0 when the whole tensor is sampled).
    pub sample_start: usize,
    /// Elements actually sampled: `ceil((d - sample_start) / sample_stride)`.
    pub samples_drawn: usize,
    /// Target `k = ceil(rho_t d)` and the pairs sent (at most `k`).
    pub k: usize,
    pub sent: usize,
}

impl SelectionStats {
    fn empty() -> Self {
        SelectionStats {
            path: Selection::Exact,
            lowerings: 0,
            survivors: None,
            threshold: 0.0,
            sample_threshold: 0.0,
            samples: 0,
            sample_stride: 0,
            sample_start: 0,
            samples_drawn: 0,
            k: 0,
            sent: 0,
        }
    }
}

/// Per-tensor state, allocated and touched in `register`.
#[derive(Debug, Clone)]
struct TensorState {
    rows: usize,
    cols: usize,
    /// Sparsified (`rows > 1` and density below 1) or dense.
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
    /// What the last sparse `compress` did.
    last: SelectionStats,
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
            last: SelectionStats::empty(),
        })
    }

    fn state(&mut self, t: TensorId) -> Result<&mut TensorState> {
        self.tensors
            .get_mut(t)
            .and_then(Option::as_mut)
            .ok_or_else(|| tensor_err(NAME, t, "not registered".into()))
    }

    /// `k = ceil(rho d)` of `d` elements at density `rho` (the reference's `num_selects`).
    fn k_at(&self, rho: f64, d: usize) -> usize {
        MethodParams {
            density: rho,
            ..self.params.clone()
        }
        .k_of(d)
    }

    /// Every density of the schedule: `density`, and the warm-up densities if on.
    fn densities(&self) -> impl Iterator<Item = f64> + '_ {
        let warm = self.params.warmup_steps_per_epoch > 0;
        std::iter::once(self.params.density).chain(
            WARMUP_DENSITIES
                .iter()
                .filter(move |_| warm)
                .map(|w| w.max(self.params.density)),
        )
    }

    /// What the last sparse `compress` did (path, lowerings, sample, counts).
    pub fn last_stats(&self) -> SelectionStats {
        self.last
    }

    /// Sparse path: clipping, momentum correction, sampled threshold, selection
    /// (reference `DGCCompressor._sparsify`).
    fn compress_sparse(&mut self, t: TensorId, g: &[f32], wire: &mut Wire) -> Result<()> {
        let rho = self.density_now;
        let d = g.len();
        let k = self.k_at(rho, d);
        let plan = sample_plan(d, rho);
        let (m, nesterov, clip_norm) = (
            self.params.momentum,
            self.params.nesterov,
            self.params.clip_norm,
        );
        // The reference draws `random.randint(0, stride - 1)` only for a strided sample;
        // here from (seed, step, tensor), the same on every worker.
        let start = if plan.stride > 1 {
            rng_for(self.ctx.seed, self.step, t, STREAM_SAMPLE).gen_range(0..plan.stride)
        } else {
            0
        };
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
        let (u, v) = (&mut st.u, &mut st.v);
        // The sample of the updated |v|, its momentum computed on the fly, so that the
        // momentum update and the survivor scan below share one pass over memory.
        let drawn = if nesterov {
            scratch.draw_strided(d, start, plan.stride, |i| {
                momentum::<true>(u[i], v[i], g[i] * clip, m).1
            })?
        } else {
            scratch.draw_strided(d, start, plan.stride, |i| {
                momentum::<false>(u[i], v[i], g[i] * clip, m).1
            })?
        };
        let sample_thr = scratch.sample_nth_largest(drawn, plan.top_k_samples);
        let mut thr = sample_thr;
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
        // The reference's adaptation loop (only for a strided sample): at most 10
        // passes, each either ends the loop or lowers the threshold and recounts; the
        // state after the 10th lowering is taken as it is.
        let kf = k as f64;
        let mut lowerings = 0;
        let path = loop {
            let (len, compacted) = scratch.candidates();
            let n = len as f64;
            if plan.stride == 1 {
                break Selection::Exact;
            }
            if lowerings == MAX_LOWERINGS {
                break Selection::Exhausted;
            }
            // A compaction means more than 2 k + BLOCK candidates passed.
            if compacted || n > kf * UPPER_BOUND {
                break Selection::TopOfSurvivors;
            }
            if n >= f64::from(LOWER_BOUND) * kf {
                break Selection::Band;
            }
            lowerings += 1;
            thr *= LOWER_BOUND;
            scratch.begin(k, thr)?;
            scratch.scan(0, v);
        };
        let (len, compacted) = scratch.candidates();
        let n_sent = if path == Selection::TopOfSurvivors {
            scratch.finish(v, k, &mut st.sent, vals)?
        } else {
            // `indices[:num_selects]`: the first k survivors in index order.
            scratch.finish_first(v, k, &mut st.sent, vals)?
        };
        st.n_sent = n_sent;
        st.pending = true;
        *last = SelectionStats {
            path,
            lowerings,
            survivors: (!compacted).then_some(len),
            threshold: thr,
            sample_threshold: sample_thr,
            samples: plan.samples,
            sample_stride: plan.stride,
            sample_start: start,
            samples_drawn: drawn,
            k,
            sent: n_sent,
        };
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
        // The reference compresses tensors of two or more dimensions, and only while
        // its ratio is below 1.
        let sparse = rows > 1 && self.params.density < 1.0;
        let (mut k_max, mut sample_max) = (0, 0);
        if sparse {
            for rho in self.densities() {
                k_max = k_max.max(self.k_at(rho, d));
                let plan = sample_plan(d, rho);
                sample_max = sample_max.max(d.div_ceil(plan.stride));
            }
            self.scratch.ensure_keys(k_max);
            self.scratch.ensure_sample(sample_max);
            if self.vals.len() < k_max {
                self.vals = touched_vec(k_max, 0.0, 1.0);
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
            sent: touched_vec(k_max, 0, 1),
            n_sent: 0,
            pending: false,
            k_max,
        });
        Ok(())
    }
    fn wire_capacity(&self, t: TensorId, _round: usize) -> WireLen {
        match self.tensors.get(t).and_then(Option::as_ref) {
            Some(s) if s.sparse => WireLen {
                gather_u32: 2 * s.k_max,
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
    /// synxlin/deep-gradient-compression: `DGCSGDMemory.compensate` / `update`
    /// (`dgc/memory.py`), `DGCCompressor._sparsify` / `decompress` (`dgc/compression.py`)
    /// at the steady-state density, on the adaptation path that stops at once (docs/
    /// methods.md, "Device kernels"). Dense tensors: Horovod's fusion-buffer copy and
    /// average, then `compensate(accumulate=False)`.
    fn device_kernels(
        &self,
        t: TensorId,
        round: usize,
        _phase: usize,
        stage: Stage,
        out: &mut dyn FnMut(Kernel),
    ) {
        let Some(st) = self.tensors.get(t).and_then(Option::as_ref) else {
            return;
        };
        if round != 0 {
            return;
        }
        let d = st.rows * st.cols;
        let nesterov = self.params.nesterov;
        if !st.sparse {
            match stage {
                Stage::Compress => out(Kernel::copy("copy into the fusion buffer", F32 * d as f64)),
                Stage::Decompress => {
                    out(device::ew("average: a = sum / n", d, 1, 1));
                    if nesterov {
                        out(device::ew("u += a", d, 2, 1));
                        out(device::ew("u *= m", d, 1, 1));
                        out(device::ew("out = u + a", d, 2, 1));
                    } else {
                        out(device::ew("u *= m", d, 1, 1));
                        out(device::ew("u += a", d, 2, 1));
                        out(device::ew("out = u.clone()", d, 1, 1));
                    }
                }
            }
            return;
        }
        let rho = self.params.density;
        let k = self.k_at(rho, d);
        let kf = k as f64;
        match stage {
            Stage::Compress => {
                if self.params.clip_norm > 0.0 {
                    out(device::ew("clip: |g|_2", d, 1, 0));
                    out(device::ew("clip: g *= factor", d, 1, 1));
                }
                if nesterov {
                    out(device::ew("u += g", d, 2, 1));
                    out(device::ew("u *= m", d, 1, 1));
                    out(device::ew("v += u", d, 2, 1));
                    out(device::ew("v += g", d, 2, 1));
                } else {
                    out(device::ew("u *= m", d, 1, 1));
                    out(device::ew("u += g", d, 2, 1));
                    out(device::ew("v += u", d, 2, 1));
                }
                out(device::ew("importance = |v|", d, 1, 1));
                let plan = sample_plan(d, rho);
                let sample = if plan.stride > 1 { plan.samples } else { d };
                device::torch_topk(out, sample, plan.top_k_samples, false);
                out(device::mem(
                    "threshold = min(top samples)",
                    F32 * plan.top_k_samples as f64 + F32,
                ));
                out(device::mem(
                    "mask = importance >= threshold",
                    (F32 + BOOL) * d as f64,
                ));
                out(device::mem("mask.nonzero(): count", BOOL * d as f64));
                out(device::mem(
                    "mask.nonzero(): select indices",
                    BOOL * d as f64 + I64 * kf,
                ));
                out(device::mem(
                    "values = v[indices] (gather)",
                    (I64 + 2.0 * F32) * kf,
                ));
                out(device::mem(
                    "momentum masking: u.index_fill_(indices, 0)",
                    (I64 + F32) * kf,
                ));
                out(device::mem(
                    "momentum masking: v.index_fill_(indices, 0)",
                    (I64 + F32) * kf,
                ));
            }
            Stage::Decompress => {
                out(device::mem("grad.zero_()", F32 * d as f64));
                device::index_put_accumulate(out, self.ctx.world_size.max(1) * k, d);
                out(device::ew("grad *= 1 / n", d, 1, 1));
            }
        }
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

    /// The reference's sampling plan (dgc/compression.py `initialize`), spelled out for
    /// the tests: `(stride, samples)`.
    fn reference_plan(d: usize, rho: f64) -> (usize, usize) {
        let pct = (d as f64 * 0.01).ceil() as usize;
        let cpr = (2.0 / rho).ceil() as usize;
        if d <= cpr {
            return (1, d);
        }
        let want = pct.max(cpr);
        let mut stride = (d as f64 / want as f64 / 32.0).ceil() as usize * 32 + 1;
        while d / stride < want {
            stride -= 8;
        }
        (stride, d / stride)
    }

    /// `k` at density `rho` for `d` elements.
    fn k_of(rho: f64, d: usize) -> usize {
        params(rho).k_of(d)
    }

    /// The threshold after `n` lowerings of `thr` (f32, as the reference's tensor).
    fn lowered(thr: f32, n: usize) -> f32 {
        (0..n).fold(thr, |t, _| t * 0.8)
    }

    /// Momentum-free DGC (so `v = g` on its first step) with tensor 0 registered.
    fn fresh(rows: usize, cols: usize, rho: f64, rank: usize) -> Dgc {
        let mut m = Dgc::new(
            &MethodParams {
                momentum: 0.0,
                ..params(rho)
            },
            ctx(rank, 4),
        )
        .expect("new");
        m.register(0, rows, cols).expect("register");
        m
    }

    /// Compress `g` (row-major `rows x cols`) on a fresh momentum-free DGC at `step`;
    /// returns the sent indices and the stats.
    fn select_once(
        rows: usize,
        cols: usize,
        rho: f64,
        step: u64,
        g: &[f32],
    ) -> (Vec<usize>, SelectionStats) {
        let mut m = fresh(rows, cols, rho, 0);
        m.begin_step(step);
        let mut wire = Wire::default();
        let a = ArrayView2::from_shape((rows, cols), g).expect("shape");
        m.compress(0, 0, a, &mut wire).expect("compress");
        let h = wire.gather_u32.len() / 2;
        for (&i, &b) in wire.gather_u32[..h].iter().zip(&wire.gather_u32[h..]) {
            assert_eq!(b, g[i as usize].to_bits(), "value of index {i}");
        }
        let idx = wire.gather_u32[..h].iter().map(|&i| i as usize).collect();
        (idx, m.last_stats())
    }

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
        // Capacity covers the densest warm-up step (25%): at most k pairs.
        assert_eq!(m.wire_capacity(0, 0).gather_u32, 2 * 2500);
        let mut wire = Wire::default();
        m.begin_step(0);
        m.compress(0, 0, grad(100, 100, 1).view(), &mut wire)
            .expect("compress");
        assert!(wire.gather_u32.len() / 2 <= 2500);
        assert_eq!(m.last_stats().k, 2500);
        m.begin_step(12);
        m.compress(0, 0, grad(100, 100, 2).view(), &mut wire)
            .expect("compress");
        assert!(wire.gather_u32.len() / 2 <= 10);
        assert_eq!(m.last_stats().k, 10);
    }

    /// v before selection, sent pairs, v and u after masking.
    type Stepped = (Vec<f32>, Vec<(usize, f32)>, Vec<f32>, Vec<f32>);

    /// One step of tensor `t` on `g`.
    fn step(m: &mut Dgc, t: TensorId, g: &Array2<f32>) -> Stepped {
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
        assert!(wire.gather_u32.len() <= 2 * m.tensors[t].as_ref().expect("state").k_max);
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

    /// Every path against its definition in the reference: the survivors of the final
    /// threshold, then the exact top-k of them (more than 1.3 k) or the first k of them
    /// in index order (`indices[:k]`); masking zeroes exactly the sent entries.
    #[test]
    fn masking_conservation_and_selection() {
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
                let st = m.last_stats();
                assert_eq!(st.k, k);
                assert_eq!(st.sent, sent.len());
                assert!(st.lowerings <= 10);
                assert_eq!(
                    st.threshold.to_bits(),
                    lowered(st.sample_threshold, st.lowerings).to_bits()
                );
                let survivors: Vec<usize> = (0..vb.len())
                    .filter(|&i| vb[i].abs() >= st.threshold)
                    .collect();
                if let Some(n) = st.survivors {
                    assert_eq!(n, survivors.len());
                }
                let n = survivors.len() as f64;
                let sent_idx: Vec<usize> = sent.iter().map(|p| p.0).collect();
                match st.path {
                    Selection::TopOfSurvivors => {
                        assert!(n > 1.3 * k as f64);
                        let mut order = survivors.clone();
                        order.sort_by(|&a, &b| vb[b].abs().total_cmp(&vb[a].abs()).then(a.cmp(&b)));
                        order.truncate(k);
                        order.sort_unstable();
                        assert_eq!(sent_idx, order);
                    }
                    path => {
                        if path == Selection::Band {
                            assert!(n >= 0.8 * k as f64 && n <= 1.3 * k as f64, "{n} of k {k}");
                        }
                        if path == Selection::Exhausted {
                            assert_eq!(st.lowerings, 10);
                        }
                        assert_eq!(sent_idx, survivors[..survivors.len().min(k)]);
                    }
                }
            }
        }
    }

    /// Issue 14: at most k pairs on every step of a 100-step run, over shapes, densities,
    /// warm-up and Nesterov (gradcomp used to send up to 1.3 k).
    #[test]
    fn wire_pairs_at_most_k_every_step() {
        let cases: [(usize, usize, f64, u64, bool); 6] = [
            (1536, 1536, 0.001, 0, false),
            (200, 500, 0.01, 0, true),
            (64, 48, 0.05, 0, false),
            (300, 1000, 0.001, 10, false),
            (2000, 1, 0.01, 0, false),
            (3, 7, 0.3, 0, true),
        ];
        for (rows, cols, density, warm, nesterov) in cases {
            let p = MethodParams {
                warmup_steps_per_epoch: warm,
                nesterov,
                ..params(density)
            };
            let mut m = Dgc::new(&p, ctx(1, 4)).expect("new");
            m.register(3, rows, cols).expect("register");
            let grads: Vec<Array2<f32>> = (0..3)
                .map(|s| grad(rows, cols, 1000 + s).mapv(|x| x * (1.0 + 4.0 * x.abs())))
                .collect();
            let mut wire = Wire::with_touched_capacity(m.wire_capacity(3, 0));
            let d = rows * cols;
            let mut most = 0f64;
            for s in 0..100u64 {
                m.begin_step(s);
                m.compress(3, 0, grads[s as usize % 3].view(), &mut wire)
                    .expect("compress");
                m.feedback(3, 0).expect("feedback");
                let k = k_of(warmup_density(density, warm, s), d);
                let pairs = wire.gather_u32.len() / 2;
                assert!(
                    pairs <= k,
                    "{rows}x{cols} rho {density} step {s}: {pairs} pairs > k = {k}"
                );
                most = most.max(pairs as f64 / k as f64);
            }
            assert!(most > 0.5, "{rows}x{cols}: at most {most} k sent");
        }
    }

    /// Sampled indices `start, start + stride, ...` of `d` elements.
    fn sampled(d: usize, start: usize, stride: usize) -> impl Fn(usize) -> bool {
        move |i| i < d && i >= start && (i - start) % stride == 0
    }

    /// `n` distinct unsampled indices of `0..d`, spread over the tensor, ascending.
    fn unsampled(d: usize, start: usize, stride: usize, n: usize) -> Vec<usize> {
        let is_sampled = sampled(d, start, stride);
        let out: Vec<usize> = (0..d)
            .step_by(101)
            .map(|i| i + 3)
            .filter(|&i| i < d && !is_sampled(i))
            .take(n)
            .collect();
        assert_eq!(out.len(), n);
        out
    }

    /// Issue 14 item 10: data that needs two or more lowerings (x0.8 each) before the
    /// survivors land in [0.8 k, 1.3 k]; the path (lowerings), the survivors and the
    /// sent count are asserted, including the reference's `indices[:k]` (the first k
    /// survivors in index order) and what happens after the 10th lowering.
    #[test]
    fn lowered_then_band() {
        let (rows, cols, rho, step_no) = (1000, 1000, 0.001, 7);
        let (d, k) = (rows * cols, 1000);
        // The sample's start is drawn from (seed, step, tensor), not from the data.
        let (_, probe) = select_once(rows, cols, rho, step_no, &vec![0.0; d]);
        let (start, stride) = (probe.sample_start, probe.sample_stride);
        assert_eq!((stride, probe.samples), (97, 10309));
        // 20 sampled elements at 1.0 (the sample's 11th largest, the first threshold);
        // every other element 0 unless placed below.
        let ones: Vec<usize> = (0..20).map(|j| start + 500 * j * stride).collect();
        let build = |placed: &[(usize, f32)]| {
            let mut g = vec![0f32; d];
            for &i in &ones {
                g[i] = 1.0;
            }
            for &(i, x) in placed {
                g[i] = x;
            }
            g
        };
        let union = |placed: &[(usize, f32)]| {
            let mut all: Vec<usize> = ones
                .iter()
                .copied()
                .chain(placed.iter().map(|p| p.0))
                .collect();
            all.sort_unstable();
            all
        };
        // L lowerings, then 900 survivors (within [0.8 k, k]): all are sent.
        for lowerings in [2usize, 3, 6] {
            let x = (0.9 * 0.8f64.powi(lowerings as i32 - 1)) as f32;
            assert!(x >= lowered(1.0, lowerings) && x < lowered(1.0, lowerings - 1));
            let placed: Vec<(usize, f32)> = unsampled(d, start, stride, 880)
                .into_iter()
                .map(|i| (i, -x))
                .collect();
            let (sent, st) = select_once(rows, cols, rho, step_no, &build(&placed));
            assert_eq!(st.sample_threshold, 1.0);
            assert_eq!(st.path, Selection::Band, "{lowerings} lowerings");
            assert_eq!(st.lowerings, lowerings);
            assert_eq!(st.threshold, lowered(1.0, lowerings));
            assert_eq!(st.survivors, Some(900));
            assert_eq!(sent, union(&placed));
        }
        // Two lowerings, then 1200 survivors in (k, 1.3 k]: the first k in index order
        // are sent, although the later ones are larger.
        let idx = unsampled(d, start, stride, 1180);
        let placed: Vec<(usize, f32)> = idx
            .iter()
            .enumerate()
            .map(|(j, &i)| (i, if j < 600 { 0.66 } else { 0.79 }))
            .collect();
        let (sent, st) = select_once(rows, cols, rho, step_no, &build(&placed));
        assert_eq!(
            (st.path, st.lowerings, st.survivors),
            (Selection::Band, 2, Some(1200))
        );
        assert_eq!(sent, union(&placed)[..k]);
        // Two lowerings, then 1500 survivors (> 1.3 k): the exact top-k of them.
        let idx = unsampled(d, start, stride, 1480);
        let placed: Vec<(usize, f32)> = idx
            .iter()
            .enumerate()
            .map(|(j, &i)| (i, 0.65 + 0.14 * ((j * 7919) % 1480) as f32 / 1480.0))
            .collect();
        let (sent, st) = select_once(rows, cols, rho, step_no, &build(&placed));
        assert_eq!((st.path, st.lowerings), (Selection::TopOfSurvivors, 2));
        let mut by_size = placed.clone();
        by_size.sort_by(|a, b| b.1.total_cmp(&a.1));
        let mut want: Vec<usize> = ones
            .iter()
            .copied()
            .chain(by_size[..k - 20].iter().map(|p| p.0))
            .collect();
        want.sort_unstable();
        assert_eq!(sent, want);
        // Never enough survivors: after the 10th lowering the 20 survivors are sent
        // as they are (no exact top-k fallback in the reference).
        let placed: Vec<(usize, f32)> = unsampled(d, start, stride, 500)
            .into_iter()
            .map(|i| (i, 0.05))
            .collect();
        let (sent, st) = select_once(rows, cols, rho, step_no, &build(&placed));
        assert_eq!(
            (st.path, st.lowerings, st.survivors),
            (Selection::Exhausted, 10, Some(20))
        );
        assert_eq!(sent, ones);
        // The 10th lowering lets 2020 through (> 1.3 k): the loop has ended, so the
        // reference keeps the first k in index order, not the top-k.
        let x = 0.12f32;
        assert!(x >= lowered(1.0, 10) && x < lowered(1.0, 9));
        let placed: Vec<(usize, f32)> = unsampled(d, start, stride, 2000)
            .into_iter()
            .enumerate()
            .map(|(j, i)| (i, x + 0.01 * (j % 2) as f32))
            .collect();
        let (sent, st) = select_once(rows, cols, rho, step_no, &build(&placed));
        assert_eq!((st.path, st.lowerings), (Selection::Exhausted, 10));
        assert_eq!(sent, union(&placed)[..k]);
    }

    /// Issue 14: the sample is the reference's, `max(ceil(1% d), ceil(2 / rho))` elements
    /// or more (`d // stride`, stride `32 j + 1 - 8 i`), all of them when
    /// `d <= ceil(2 / rho)`, drawn as `|v|[start::stride]` with a random start that is
    /// the same on every rank; the threshold is its `ceil(samples rho)`-th largest.
    #[test]
    fn sample_plan_matches_reference() {
        let known: [(usize, usize, f64, usize, usize); 7] = [
            (1536, 1536, 0.001, 97, 24322),
            (1000, 1000, 0.001, 97, 10309),
            (100, 1000, 0.001, 49, 2040),
            (300, 7, 0.01, 9, 233),
            (64, 48, 0.05, 73, 42),
            (40, 50, 0.001, 1, 2000),
            (3, 667, 0.001, 1, 2001),
        ];
        for (rows, cols, rho, stride, samples) in known {
            let d = rows * cols;
            assert_eq!(reference_plan(d, rho), (stride, samples), "{rows}x{cols}");
            let want = ((0.01 * d as f64).ceil() as usize).max((2.0 / rho).ceil() as usize);
            assert!(samples >= want.min(d) && samples <= d && stride % 8 == 1);
            // Distinct magnitudes, signs alternating.
            let g: Vec<f32> = (0..d)
                .map(|i| {
                    let h = ((i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as f32;
                    let x = 1.0 + h / (1u64 << 24) as f32;
                    if i % 2 == 0 {
                        x
                    } else {
                        -x
                    }
                })
                .collect();
            let mut starts = std::collections::BTreeSet::new();
            for s in 0..12 {
                let (_, st) = select_once(rows, cols, rho, s, &g);
                assert_eq!((st.sample_stride, st.samples), (stride, samples));
                assert!(st.sample_start < stride);
                let drawn: Vec<f32> = (st.sample_start..d)
                    .step_by(stride)
                    .map(|i| g[i].abs())
                    .collect();
                assert_eq!(st.samples_drawn, drawn.len());
                let mut sorted = drawn.clone();
                sorted.sort_by(|a, b| b.total_cmp(a));
                let r = (samples as f64 * rho).ceil() as usize;
                assert_eq!(st.sample_threshold, sorted[r - 1], "{rows}x{cols} step {s}");
                // The same sample on another rank.
                let mut other = fresh(rows, cols, rho, 3);
                other.begin_step(s);
                let a = ArrayView2::from_shape((rows, cols), &g[..]).expect("shape");
                other
                    .compress(0, 0, a, &mut Wire::default())
                    .expect("compress");
                assert_eq!(other.last_stats().sample_start, st.sample_start);
                starts.insert(st.sample_start);
                if stride == 1 {
                    assert_eq!(st.path, Selection::Exact);
                }
            }
            if stride > 1 {
                assert!(starts.len() > 1, "{rows}x{cols}: the start never changed");
            }
        }
    }

    /// `d <= ceil(2 / rho)` (or a stride that shrank to 1): the whole tensor is the
    /// sample, the threshold is its k-th largest, no adaptation, and `indices[:k]`
    /// keeps the first k survivors in index order, even past a larger one on a tie.
    #[test]
    fn small_tensor_samples_everything() {
        let (rows, cols, rho) = (40, 50, 0.001);
        let d = rows * cols;
        assert_eq!(k_of(rho, d), 2);
        let mut g = vec![0.001f32; d];
        g[5] = 1.0;
        g[10] = -1.0;
        g[1999] = 2.0;
        let (sent, st) = select_once(rows, cols, rho, 0, &g);
        assert_eq!(
            (st.path, st.lowerings, st.samples),
            (Selection::Exact, 0, d)
        );
        assert_eq!(st.sample_threshold, 1.0);
        assert_eq!(st.survivors, Some(3));
        assert_eq!(sent, vec![5, 10]);
        // All equal: every element survives, the first k are sent.
        let (sent, st) = select_once(rows, cols, rho, 0, &vec![0.5; d]);
        assert_eq!(st.path, Selection::Exact);
        assert_eq!(sent, vec![0, 1]);
        // A stride that shrinks to 1 (d = 2001 > ceil(2 / rho) = 2000) samples it all.
        let mut g = vec![0.001f32; 2001];
        g[2000] = 3.0;
        g[7] = 2.0;
        let (sent, st) = select_once(3, 667, rho, 1, &g);
        assert_eq!((st.path, st.sample_stride, st.k), (Selection::Exact, 1, 3));
        assert_eq!(st.sample_threshold, 0.001);
        assert_eq!(sent, vec![0, 1, 2]);
    }

    #[test]
    fn all_equal_strided_keeps_the_first_k() {
        let (rows, cols) = (100, 1000);
        // Every element survives (> 1.3 k): the exact top-k, ties to the lower index.
        let (sent, st) = select_once(rows, cols, 0.001, 0, &vec![0.5; rows * cols]);
        assert_eq!((st.path, st.lowerings), (Selection::TopOfSurvivors, 0));
        assert_eq!(sent, (0..100).collect::<Vec<_>>());
    }

    /// The reference compresses only when the ratio is below 1: at density 1 every
    /// tensor is all-reduced dense with momentum.
    #[test]
    fn density_one_is_dense() {
        let mut m = Dgc::new(&params(1.0), ctx(0, 2)).expect("new");
        m.register(0, 10, 20).expect("register");
        assert_eq!(
            m.wire_capacity(0, 0),
            WireLen {
                sum_f32: 200,
                ..WireLen::default()
            }
        );
        let mut wire = Wire::default();
        let g = grad(10, 20, 4);
        m.compress(0, 0, g.view(), &mut wire).expect("compress");
        assert_eq!(wire.sum_f32, g.as_slice().expect("contiguous"));
        assert!(wire.gather_u32.is_empty());
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
        let mut avg_prev = [0f32; 10];
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
}
