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
//!
//! The file stays whole (about 640 lines; its tests are in `dgc/tests.rs`): the sample
//! plan, the selection rules and the compress pass that applies them are one algorithm,
//! the reference's `_sparsify`, and read best side by side.

use super::device::{self, Out, BOOL, F32, I64};
use super::residual::{self, Sent};
use super::select::{
    abs_bits, grad_slice, indexable_len, out_slice, push_pairs, scatter_mean, single_round,
    strided_count, tensor_err, touched_vec, TopKScratch, TouchedSet, WideCandidates,
};
use super::ssgd::check_summed;
use super::topk::check_density;
use super::{
    Aggregation, CompressError, Compressor, MethodParams, Received, Result, TensorId, Wire,
    WireLen, WorkerCtx,
};
use crate::measure::rng::rng_for;
use crate::roofline::{Kernel, Stage};
use ndarray::{ArrayView2, ArrayViewMut2};
use rand::Rng;

const NAME: &str = "dgc";

/// DGC's description ([`super::registry::SPECS`]).
pub const SPEC: super::spec::MethodSpec = super::spec::MethodSpec {
    name: NAME,
    summary: "clipping, momentum correction, sampled-threshold sparsification, momentum factor masking, density warm-up",
    aggregation: Aggregation::AllGather,
    rounds: 1,
    phases: 1,
    params: &["density", "momentum", "nesterov", "clip_norm", "warmup_steps_per_epoch"],
    density: None,
    min_compression_rate: None,
    owns_momentum: true,
    by_elements: false,
    wire_bytes: "8 k_t (index, value) pairs at the step's warm-up density, at most 8 ceil(density d); rows = 1 tensors dense, 4 d",
    memory: "momentum u and velocity v (2 d floats), the sent indices, a candidate buffer",
    state_bytes: Some(|p, numels, world_size| {
        super::topk::sparse_state_bytes(p, numels, world_size, |d, k| {
            8.0 * wide_capacity(d, k) as f64
        })
    }),
    citations: &[
        "Lin et al., \"Deep Gradient Compression\", ICLR 2018",
        "synxlin/deep-gradient-compression dgc/compression.py (DGCCompressor)",
    ],
    build: |p, ctx| Ok(Box::new(Dgc::new(p, ctx)?)),
    fusion_sizing: None,
    reference_costs: super::spec::ReferenceCosts {
        source: super::spec::REFERENCE_FIT,
        compress: super::spec::LinearCost::new(0.0, 1.1654203216679633e-9),
        feedback: super::spec::LinearCost::new(4.023554168937838e-8, 9.791675647023015e-13),
        decompress: super::spec::LinearCost::new(2.0711495280176246e-8, 3.13257805367388e-10),
    },
};
/// RNG stream tag of the threshold sample's start.
const STREAM_SAMPLE: u64 = 0x0064_6763;
/// Elements per chunk of the single pass: the running sample bound is updated once per
/// chunk, from the chunk's samples while they are in cache.
const CHUNK: usize = 4096;
/// Elements per block of the single pass (momentum, then the block's candidates).
const BLOCK: usize = 32;
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
    /// Indices sent by the last `compress` (ascending); feedback zeroes them in `v` and
    /// `u`: momentum factor masking (DGC Sec. 3.2).
    sent: Sent,
    /// Largest `k` over the density schedule.
    k_max: usize,
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
#[inline(always)]
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

/// DGC's single pass over `u`, `v`, `g` ([`Dgc::compress_sparse`]).
struct Pass {
    m: f32,
    clip: f32,
    start: usize,
    stride: usize,
}

impl Pass {
    /// [`Pass::run`], compiled for AVX2 where the CPU has it (the same operations, no
    /// fused multiply-add: identical results).
    fn dispatch<const NESTEROV: bool>(
        &self,
        u: &mut [f32],
        v: &mut [f32],
        g: &[f32],
        sample: &mut [u32],
        bound: &mut LargestR,
        wide: &mut WideCandidates,
    ) -> usize {
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU has AVX2 (checked just above), `run_avx2`'s only contract.
                return unsafe { self.run_avx2::<NESTEROV>(u, v, g, sample, bound, wide) };
            }
        }
        self.run::<NESTEROV>(u, v, g, sample, bound, wide)
    }

    /// [`Pass::run`] compiled with AVX2.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn run_avx2<const NESTEROV: bool>(
        &self,
        u: &mut [f32],
        v: &mut [f32],
        g: &[f32],
        sample: &mut [u32],
        bound: &mut LargestR,
        wide: &mut WideCandidates,
    ) -> usize {
        self.run::<NESTEROV>(u, v, g, sample, bound, wide)
    }

    /// Per block of [`BLOCK`] elements the momentum update and the block's candidates
    /// against the running bound (one block in registers: the memory streams never
    /// wait for the scan); per chunk of [`CHUNK`] the chunk's sampled `|v|` (still in
    /// cache) into `sample` and `bound`, which sets the bound of the next chunk. Returns
    /// how many were sampled.
    #[inline(always)]
    fn run<const NESTEROV: bool>(
        &self,
        u: &mut [f32],
        v: &mut [f32],
        g: &[f32],
        sample: &mut [u32],
        bound: &mut LargestR,
        wide: &mut WideCandidates,
    ) -> usize {
        let (mut next, mut drawn, mut lower) = (self.start, 0, 0.0f32);
        for (c, ((uc, vc), gc)) in u
            .chunks_mut(CHUNK)
            .zip(v.chunks_mut(CHUNK))
            .zip(g.chunks(CHUNK))
            .enumerate()
        {
            let base = c * CHUNK;
            for (b, ((ub, vb), gb)) in uc
                .chunks_mut(BLOCK)
                .zip(vc.chunks_mut(BLOCK))
                .zip(gc.chunks(BLOCK))
                .enumerate()
            {
                momentum_chunk::<NESTEROV>(ub, vb, gb, self.m, self.clip);
                wide.scan(base + b * BLOCK, vb, lower);
            }
            while next < base + vc.len() {
                let bits = abs_bits(vc[next - base]);
                sample[drawn] = bits;
                drawn += 1;
                bound.add(bits);
                next += self.stride;
            }
            lower = bound.bound().map_or(0.0, f32::from_bits);
        }
        drawn
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
    /// The single pass's candidates and its running sample bound ([`Dgc::compress_sparse`]).
    wide: WideCandidates,
    bound: LargestR,
    /// Decompress's record of the written output entries (largest tensor).
    touched: TouchedSet,
    /// Selected values (scratch).
    vals: Vec<f32>,
    /// What the last sparse `compress` did.
    last: SelectionStats,
}

/// Room for the single pass's candidates at `k` of `d`: twice the expected
/// `k (1 + ln(d / k))` (see [`Dgc::compress_sparse`]), at most `d / 8` (a quarter of the
/// tensor's bytes; past it the pass falls back to a second scan, as it does whenever
/// the candidates do not fit).
pub fn wide_capacity(d: usize, k: usize) -> usize {
    if k == 0 {
        return 0;
    }
    let expected = k as f64 * (1.0 + (d as f64 / k as f64).ln());
    ((2.0 * expected).ceil() as usize).min(d / 8)
}

/// The `r` largest sample values drawn so far (bits of `|v|`), as a binary min-heap in a
/// buffer sized at registration: its minimum is the running lower bound of the sample
/// threshold in [`Dgc::compress_sparse`].
#[derive(Debug, Clone, Default)]
struct LargestR {
    heap: Vec<u32>,
    len: usize,
    r: usize,
}

impl LargestR {
    /// Room for `r` values (setup only).
    fn ensure(&mut self, r: usize) {
        if r > self.heap.len() {
            self.heap = touched_vec(r, 0, 1);
        }
    }

    /// Start over, keeping the `r` largest (an error past the room reserved).
    fn reset(&mut self, r: usize) -> std::result::Result<(), String> {
        if r > self.heap.len() {
            return Err(format!(
                "sample rank {r} exceeds the {} reserved",
                self.heap.len()
            ));
        }
        self.len = 0;
        self.r = r;
        Ok(())
    }

    /// The `r`-th largest so far, once `r` values were added.
    fn bound(&self) -> Option<u32> {
        (self.len == self.r && self.r > 0).then(|| self.heap[0])
    }

    #[inline]
    fn add(&mut self, bits: u32) {
        let h = &mut self.heap[..self.r];
        if self.len < self.r {
            let mut i = self.len;
            self.len += 1;
            while i > 0 && h[(i - 1) / 2] > bits {
                h[i] = h[(i - 1) / 2];
                i = (i - 1) / 2;
            }
            h[i] = bits;
        } else if self.r > 0 && bits > h[0] {
            let mut i = 0;
            loop {
                let (a, b) = (2 * i + 1, 2 * i + 2);
                let c = if b < self.r && h[b] < h[a] { b } else { a };
                if c >= self.r || h[c] >= bits {
                    break;
                }
                h[i] = h[c];
                i = c;
            }
            h[i] = bits;
        }
    }
}

impl Dgc {
    /// Reads `density` (0, 1], `momentum` [0, 1), `clip_norm` >= 0, `nesterov`,
    /// `warmup_steps_per_epoch`.
    pub fn new(p: &MethodParams, ctx: WorkerCtx) -> Result<Self> {
        let p = &p.for_method(NAME);
        check_density(NAME, p.density_for(NAME))?;
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
            density_now: warmup_density(p.density_for(NAME), p.warmup_steps_per_epoch, 0),
            tensors: Vec::new(),
            scratch: TopKScratch::new(0, 0),
            wide: WideCandidates::default(),
            bound: LargestR::default(),
            touched: TouchedSet::default(),
            vals: Vec::new(),
            last: SelectionStats::empty(),
        })
    }

    /// `k = ceil(rho d)` of `d` elements at density `rho` (the reference's `num_selects`).
    fn k_at(&self, rho: f64, d: usize) -> usize {
        MethodParams {
            density: Some(rho),
            ..self.params.clone()
        }
        .k_of(d)
    }

    /// The steady-state density `rho` (resolved in `new`).
    fn rho(&self) -> f64 {
        self.params.density_for(NAME)
    }

    /// Every density of the schedule: `density`, and the warm-up densities if on.
    fn densities(&self) -> impl Iterator<Item = f64> + '_ {
        let warm = self.params.warmup_steps_per_epoch > 0;
        std::iter::once(self.rho()).chain(
            WARMUP_DENSITIES
                .iter()
                .filter(move |_| warm)
                .map(|w| w.max(self.rho())),
        )
    }

    /// What the last sparse `compress` did (path, lowerings, sample, counts).
    pub fn last_stats(&self) -> SelectionStats {
        self.last
    }

    /// Sparse path: clipping, momentum correction, sampled threshold, selection
    /// (reference `DGCCompressor._sparsify`).
    ///
    /// One pass over memory: per chunk of [`CHUNK`] elements the momentum update, then
    /// the chunk's sampled entries (`|v|[start::stride]`, the reference's sample of the
    /// updated `v`), then the chunk's candidates: entries with `|v|` at or above the
    /// `r`-th largest sample drawn so far (`r` = [`SamplePlan::top_k_samples`]). That
    /// running value can only grow as samples are added, so it is a lower bound of the
    /// final threshold and every survivor is a candidate; the candidates then replay the
    /// survivor scan exactly ([`TopKScratch::scan_candidates`]). Where the magnitudes do
    /// not trend along the index, about `k (1 + ln(d / k))` entries are candidates (a
    /// share `r / m` of the entries pass after `m` samples, `r stride ~ k`). When they do
    /// not fit ([`wide_capacity`]) the pass stops collecting and `v` is scanned once
    /// more: the same result.
    ///
    /// Minimal memory traffic (`d` elements, f32): read `g`, `u`, `v` and write `u`, `v`
    /// back, `12 d` bytes read and `8 d` written, the write-back of lines just read; the
    /// sample and candidates stay in cache (the sample is `d / stride` values, about 1%).
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
            wide,
            bound,
            vals,
            last,
            ..
        } = self;
        let st = residual::registered(NAME, tensors, t)?;
        st.sent.settle([&mut st.v, &mut st.u]);
        let (u, v) = (&mut st.u, &mut st.v);
        let r = plan.top_k_samples;
        let n_sample = strided_count(d, start, plan.stride);
        let sample = scratch.sample_slots(n_sample)?;
        bound.reset(r).map_err(|msg| tensor_err(NAME, t, msg))?;
        wide.clear();
        let pass = Pass {
            m,
            clip,
            start,
            stride: plan.stride,
        };
        let drawn = if nesterov {
            pass.dispatch::<true>(u, v, g, sample, bound, wide)
        } else {
            pass.dispatch::<false>(u, v, g, sample, bound, wide)
        };
        let sample_thr = scratch.sample_nth_largest(drawn, r);
        let mut thr = sample_thr;
        scratch.begin(k, thr)?;
        if wide.overflowed() {
            scratch.scan(0, v);
        } else {
            scratch.scan_candidates(wide.keys(), d);
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
            scratch.finish(v, k, st.sent.buf_mut(), vals)?
        } else {
            // `indices[:num_selects]`: the first k survivors in index order.
            scratch.finish_first(v, k, st.sent.buf_mut(), vals)?
        };
        st.sent.mark(n_sent);
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
        push_pairs(wire, st.sent.indices(), &vals[..n_sent]);
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
        let sparse = rows > 1 && self.rho() < 1.0;
        let (mut k_max, mut sample_max, mut r_max) = (0, 0, 0);
        if sparse {
            for rho in self.densities() {
                k_max = k_max.max(self.k_at(rho, d));
                let plan = sample_plan(d, rho);
                sample_max = sample_max.max(d.div_ceil(plan.stride));
                r_max = r_max.max(plan.top_k_samples);
            }
            self.scratch.ensure_keys(k_max);
            self.scratch.ensure_sample(sample_max);
            self.wide.ensure(wide_capacity(d, self.k_at(self.rho(), d)));
            self.touched.ensure(d);
            self.bound.ensure(r_max);
            if self.vals.len() < k_max {
                self.vals = touched_vec(k_max, 0.0, 1.0);
            }
        }
        let state = TensorState {
            rows,
            cols,
            sparse,
            u: touched_vec(d, 0.0, 1.0),
            v: if sparse {
                touched_vec(d, 0.0, 1.0)
            } else {
                Vec::new()
            },
            sent: Sent::new(k_max),
            k_max,
        };
        residual::register(&mut self.tensors, t, state);
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
    /// The threshold sample of a sparse tensor ([`sample_plan`] at the steady density):
    /// its `top_k_samples`-th largest `|v|` is selected from all of it.
    fn selection_elems(&self, t: TensorId) -> usize {
        match self.tensors.get(t).and_then(Option::as_ref) {
            Some(s) if s.sparse => sample_plan(s.rows * s.cols, self.rho()).samples,
            _ => 0,
        }
    }
    fn begin_step(&mut self, step: u64) {
        self.step = step;
        self.density_now = warmup_density(self.rho(), self.params.warmup_steps_per_epoch, step);
    }
    fn compress(
        &mut self,
        t: TensorId,
        round: usize,
        grad: ArrayView2<f32>,
        wire: &mut Wire,
    ) -> Result<()> {
        single_round(NAME, round)?;
        let st = residual::registered(NAME, &mut self.tensors, t)?;
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
        let st = residual::registered(NAME, &mut self.tensors, t)?;
        st.sent.settle([&mut st.v, &mut st.u]);
        Ok(())
    }
    /// synxlin/deep-gradient-compression: `DGCSGDMemory.compensate` / `update`
    /// (`dgc/memory.py`), `DGCCompressor._sparsify` / `decompress` (`dgc/compression.py`)
    /// at the steady-state density, on the adaptation path that stops at once (docs/
    /// methods.md, "Device kernels"). Dense tensors: Horovod's fusion-buffer copy and
    /// average, then `compensate(accumulate=False)`.
    fn device_kernels(&self, t: TensorId, round: usize, _phase: usize, stage: Stage, out: Out) {
        let Some(st) = device::round0(&self.tensors, t, round) else {
            return;
        };
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
        let rho = self.rho();
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
        let Dgc {
            tensors, touched, ..
        } = self;
        let st = residual::registered(NAME, tensors, t)?;
        let out = out_slice(NAME, t, out, st.rows, st.cols)?;
        if st.sparse {
            return scatter_mean(NAME, t, received, out, touched);
        }
        check_summed(NAME, t, received, out.len())?;
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
mod tests;
