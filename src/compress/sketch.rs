//! Count Sketch compression (Charikar et al., ICALP 2002) as used by Sketch-Fusion SGD
//! (Dai et al., JPDC 2024; docs/methods.md, "sketch"), with Sketched-SGD's exact second
//! round and per-worker residuals (Ivkin et al., NeurIPS 2019; dhroth/sketchedsgd
//! `sketchedsgd/sketched_optimizer.py` at 00c88c0: `_aggAndZeroSketched` with `p2 > 0`,
//! one error vector per worker, `self.vs`, line 242). FetchSGD (Rothchild et al., ICML
//! 2020) is not the source of either: its "true top-k" uploads the whole gradient
//! (kiddyboots216/CommEfficient `CommEfficient/fed_worker.py` at 02d621e, lines 207-208)
//! and a worker's error, when it keeps one, has the sketch's shape (`fed_aggregator.py`
//! at 02d621e, lines 95-102). The fusion planner is the e2e method `sketch-fusion`. Two
//! rounds:
//! - round 0, compress: `p = g + e` (kept in the residual buffer); a table `S` of `r` rows
//!   by `c = ceil(sketch_cols_per_k * k)` columns, `k = ceil(rho * d)`,
//!   `S[j][h_j(i)] += s_j(i) * p_i`; wire `sum_f32 = S` (`r*c` floats). Sketches are
//!   linear, so the harness all-reduces (sums) them.
//! - round 0, decompress: `est_i = median_j s_j(i) * S_sum[j][h_j(i)]` (mean of the two
//!   middle values for even `r`), the estimate of the *n-worker sum* of `p`; the
//!   candidates `I` = the `k` largest `|est_i|` (exact selection, ties broken by lower
//!   index), identical on every worker (they decode the same summed sketch).
//! - round 1, compress: wire `sum_f32 = p[I]` (`k` floats, ascending index), all-reduced:
//!   the exact n-worker sums of the candidates, not their sketch estimates.
//! - round 1, decompress: `out[I] = sum / n`, zeros elsewhere; `e[I] = 0` (every worker's
//!   whole `p_i` was applied), `e = p` elsewhere. This conserves exactly:
//!   `sum_w e_w + sum_t D_t = sum_t sum_w g_w`, and no estimation error is fed back (the
//!   divergence of the one-round method: docs/methods.md, "Count Sketch").
//!
//! Small tensors travel raw. Sketched-SGD sketches only part of the gradient; the rest
//! (its biases, `SketchedModel`, lines 128-137, and any parameter below
//! `sketchParamsLargerThan`, line 132) is summed exactly every step and its error zeroed
//! (`sketchMask`, lines 220-234; `_aggregateAndZeroUVs`). A compressor sees a shape, not a
//! name, so the choice here is by size ([`sends_raw`]): a tensor whose two rounds would
//! carry at least as many words as the tensor itself, `r*c + k >= d`, is all-reduced raw
//! in round 0 (`d` floats, the exact mean) with no residual, and sends nothing in round 1.
//! No tensor is then sent larger than raw.
//!
//! Hashes are computed on the fly, identical on every worker, from four random 64-bit
//! keys per (run seed, step, tensor, row):
//! - bucket, *block-offset*: indices are cut into blocks of `B = min(1024, c)`
//!   consecutive elements; block `u` starts at bucket `H_j(u)` = high 32 bits of
//!   `a*u + b mod 2^64` (multiply-add-shift, Dietzfelbinger 1996: 2-independent for
//!   32-bit keys) reduced to `[0, c)` by a multiply-shift (Lemire 2019), and
//!   `h_j(i) = (H_j(i / B) + i mod B) mod c`. Two indices of one block never share a
//!   bucket; indices of different blocks share one with probability ~1/c (the difference
//!   of two pairwise-independent uniform offsets is uniform). That collision bound and the
//!   signs' pairwise independence are all that Count Sketch's estimate needs
//!   (`E[est_i] = p_i`, `Var[est_i] <= ||p||^2 / c` per row; Charikar et al., Lemma 3).
//! - sign `s_j(i)` = top bit of `a'*i + b'`, per element (2-independent, independent of
//!   the buckets).
//!
//! Every block is then a contiguous streaming add into (and, in decompress, read from)
//! each row table instead of a random read-modify-write per element and row, and each cell
//! sums its inputs in index order, so the table is bit-identical to the element-by-element
//! definition (tested).
//!
//! The file stays whole (about 700 lines; its tests are in `sketch/tests.rs`): the
//! hashes, the kernels that walk them block by block, the compressor and its `--check`
//! reference share one table layout and read best together.

use ndarray::{ArrayView2, ArrayViewMut2};
use rand::RngCore;

use super::bits::{self, Slot};
use super::check::{self, CheckCtx, Verdict};
use super::device::{self, Out, F32, I64};
use super::select::TopKScratch;
use super::{
    Aggregation, Compressor, MethodParams, Received, Result, TensorId, Wire, WireLen, WorkerCtx,
};
use crate::measure::rng::{mix, rng_for};
use crate::roofline::{Kernel, Stage};

const NAME: &str = "sketch";

/// Count Sketch's description ([`super::registry::SPECS`]).
pub const SPEC: super::spec::MethodSpec = super::spec::MethodSpec {
    name: NAME,
    summary: "all-reduced Count Sketch of g + e, then the exact sums of its k heavy hitters; error feedback",
    aggregation: Aggregation::AllReduce,
    rounds: 2,
    phases: 1,
    params: &["density", "sketch_rows", "sketch_cols_per_k"],
    density: Some(super::params::SKETCH_DENSITY),
    min_compression_rate: None,
    owns_momentum: false,
    by_elements: true,
    wire_bytes: "4 sketch_rows c in round 0, 4 k in round 1, k = ceil(density d), c = ceil(sketch_cols_per_k k); 4 d in round 0 for a tensor with sketch_rows c + k >= d",
    memory: "residual e (d floats), the sketch table and its decode scratch",
    // The rank's table, the all-reduced table, the MPI library's temporary and the decode
    // scratch, of d floats for a tensor sent raw ([`sends_raw`]): 4 tables (2.6 measured, `micro --methods sketch --shape 1024x1024 --density
    // 0.01 --sketch-rows 50 --sketch-cols-per-k 100`: 529 MiB peak, 200 MiB per table).
    state_bytes: Some(|p, numels, _| {
        super::spec::state_sum(
            numels,
            |_| 0.0,
            |d| {
                let k = p.k_of(d);
                let cols = (p.sketch_cols_per_k * k as f64).ceil().max(1.0);
                // A raw tensor's buffers are the tensor's own d floats, not a table.
                let words = if sends_raw(p.sketch_rows, cols as usize, k, d) {
                    d as f64
                } else {
                    p.sketch_rows as f64 * cols
                };
                4.0 * (words * 4.0)
            },
        )
    }),
    citations: &[
        "Charikar, Chen & Farach-Colton, ICALP 2002 (Count Sketch)",
        "Ivkin et al., \"Sketched SGD\", NeurIPS 2019, Alg. 1; dhroth/sketchedsgd sketched_optimizer.py (second round, per-worker residuals, unsketched parameters)",
        "Rothchild et al., \"FetchSGD\", ICML 2020; kiddyboots216/CommEfficient utils.py (default k, for the density)",
        "Dai et al., Sketch-Fusion SGD, JPDC 2024",
    ],
    build: |p, ctx| Ok(Box::new(Sketch::new(p, ctx)?)),
    fusion_sizing: None,
    reference_costs: super::spec::ReferenceCosts {
        source: super::spec::REFERENCE_FIT,
        compress: super::spec::LinearCost::new(1.1840493027751962e-6, 9.690499518866113e-10),
        feedback: super::spec::LinearCost::new(3.2001727697162425e-8, 1.1455523298221904e-13),
        decompress: super::spec::LinearCost::new(1.3495800611799642e-6, 1.505236044455051e-9),
    },
};
/// Stream tag of the hash keys.
const STREAM_TAG: u64 = 0x534b_4554_4348; // "SKETCH"
/// Stream tag of the top-k threshold sample (does not affect the result).
const STREAM_SAMPLE: u64 = 0x534b_5350; // "SKSP"
/// Longest hash block `B` (elements mapped to consecutive buckets; 4 KiB of `f32`).
const SEG_MAX: usize = 1024;

/// Bucket and sign hash of one sketch row.
#[derive(Clone, Copy, Debug)]
struct RowHash {
    a: u64,
    b: u64,
    sa: u64,
    sb: u64,
    /// Columns `c`.
    c: usize,
    /// Block length `B = min(SEG_MAX, c)` (at most `c`, so a block never wraps onto itself).
    seg: usize,
}

impl RowHash {
    fn new(seed: u64, step: u64, t: TensorId, row: usize, c: usize) -> Self {
        let mut rng = rng_for(seed, step, t, mix(STREAM_TAG, row as u64));
        RowHash {
            a: rng.next_u64() | 1,
            b: rng.next_u64(),
            sa: rng.next_u64() | 1,
            sb: rng.next_u64(),
            c,
            seg: SEG_MAX.min(c).max(1),
        }
    }

    /// `H_j(u)`: the bucket of block `u`'s first element, in `[0, c)`.
    #[inline(always)]
    fn block_start(&self, u: usize) -> usize {
        let x = self.a.wrapping_mul(u as u64).wrapping_add(self.b) >> 32;
        ((x * self.c as u64) >> 32) as usize
    }

    /// `h_j(i)` element by element (the kernels walk whole blocks).
    #[cfg(test)]
    fn bucket(&self, i: usize) -> usize {
        (self.block_start(i / self.seg) + i % self.seg) % self.c
    }

    /// `s_j(i)` as an f32 sign-bit mask (`SIGN_BIT` for -1, 0 for +1), element by element.
    #[cfg(test)]
    fn sign_bit(&self, i: usize) -> u32 {
        ((self.sa.wrapping_mul(i as u64).wrapping_add(self.sb) >> 63) as u32) << 31
    }

    /// Sign masks of elements `i0 .. i0 + out.len()`; 8 per step with AVX2 when `AVX2`
    /// (only set by the `_avx2` kernels). Same bits either way.
    #[inline(always)]
    fn sign_bits<const AVX2: bool>(&self, i0: usize, out: &mut [u32]) {
        let s0 = self.sa.wrapping_mul(i0 as u64).wrapping_add(self.sb);
        #[cfg(target_arch = "x86_64")]
        if AVX2 {
            // SAFETY: `AVX2` is only set inside `#[target_feature(enable = "avx2")]` kernels,
            // which run only after the CPU was checked for AVX2.
            return unsafe { sign_bits_avx2(s0, self.sa, out) };
        }
        sign_bits_scalar(s0, self.sa, out);
    }
}

/// Top bits of the states `s0 + t*sa` (t = 0, 1, ...) as f32 sign masks.
#[inline(always)]
fn sign_bits_scalar(s0: u64, sa: u64, out: &mut [u32]) {
    let mut s = s0;
    for o in out {
        *o = ((s >> 63) as u32) << 31;
        s = s.wrapping_add(sa);
    }
}

/// [`sign_bits_scalar`] with four 64-bit states per AVX2 register; the high 32-bit halves
/// of two registers are packed into one (`0xDD` gives a0 a1 b0 b1 | a2 a3 b2 b3, `0xD8`
/// restores a0..a3 b0..b3).
///
/// # Safety
/// The CPU must support AVX2. Nothing more: `out` is written through `chunks_exact_mut`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn sign_bits_avx2(s0: u64, sa: u64, out: &mut [u32]) {
    use core::arch::x86_64::*;
    let st = |t: u64| s0.wrapping_add(sa.wrapping_mul(t)) as i64;
    let mut va = _mm256_setr_epi64x(st(0), st(1), st(2), st(3));
    let mut vb = _mm256_setr_epi64x(st(4), st(5), st(6), st(7));
    let inc = _mm256_set1_epi64x(sa.wrapping_mul(8) as i64);
    let sign = _mm256_set1_epi32(i32::MIN);
    let done = out.len() / 8 * 8;
    let mut chunks = out.chunks_exact_mut(8);
    for o in &mut chunks {
        let hi = _mm256_castps_si256(_mm256_shuffle_ps::<0xDD>(
            _mm256_castsi256_ps(va),
            _mm256_castsi256_ps(vb),
        ));
        let hi = _mm256_and_si256(_mm256_permute4x64_epi64::<0xD8>(hi), sign);
        // SAFETY: AVX2 is present (this function's contract); `o` is a chunk of exactly 8
        // u32 = 32 bytes, and storeu needs no alignment.
        unsafe { _mm256_storeu_si256(o.as_mut_ptr() as *mut __m256i, hi) };
        va = _mm256_add_epi64(va, inc);
        vb = _mm256_add_epi64(vb, inc);
    }
    sign_bits_scalar(st(done as u64) as u64, sa, chunks.into_remainder());
}

/// `dst[t] += s_t * x[t]` with `s_t` given as a sign mask.
#[inline(always)]
fn add_signed(dst: &mut [f32], x: &[f32], m: &[u32]) {
    for ((d, x), m) in dst.iter_mut().zip(x).zip(m) {
        *d += f32::from_bits(x.to_bits() ^ m);
    }
}

/// `dst[t] = s_t * x[t]` with `s_t` given as a sign mask.
#[inline(always)]
fn copy_signed(dst: &mut [f32], x: &[f32], m: &[u32]) {
    for ((d, x), m) in dst.iter_mut().zip(x).zip(m) {
        *d = f32::from_bits(x.to_bits() ^ m);
    }
}

/// The contiguous table ranges of block `u` of `w` elements: `[start, start + n1)` then
/// `[0, w - n1)` when it wraps past column `c`.
#[inline(always)]
fn block_ranges(
    h: &RowHash,
    u: usize,
    w: usize,
) -> (std::ops::Range<usize>, std::ops::Range<usize>) {
    let start = h.block_start(u);
    let n1 = (h.c - start).min(w);
    (start..start + n1, 0..w - n1)
}

/// Compress kernel: per block of `B` elements, `e += g` (then `e` holds `p`) and for every
/// row `table[h(i)] += s(i) * p_i` as one or two contiguous adds. `mask`: `B` scratch.
#[inline(always)]
fn compress_impl<const AVX2: bool>(
    hs: &[RowHash],
    e: &mut [f32],
    g: &[f32],
    tables: &mut [f32],
    mask: &mut [u32],
) {
    let (c, seg) = (hs[0].c, hs[0].seg);
    for (u, (eb, gb)) in e.chunks_mut(seg).zip(g.chunks(seg)).enumerate() {
        for (x, &y) in eb.iter_mut().zip(gb) {
            *x += y;
        }
        let m = &mut mask[..eb.len()];
        for (h, table) in hs.iter().zip(tables.chunks_exact_mut(c)) {
            h.sign_bits::<AVX2>(u * seg, m);
            let (r1, r2) = block_ranges(h, u, eb.len());
            let n1 = r1.len();
            add_signed(&mut table[r1], &eb[..n1], &m[..n1]);
            add_signed(&mut table[r2], &eb[n1..], &m[n1..]);
        }
    }
}

/// [`compress_impl`] compiled with AVX2 (8 sign masks per step).
///
/// # Safety
/// The CPU must support AVX2. Nothing more: the body is safe code.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn compress_avx2(
    hs: &[RowHash],
    e: &mut [f32],
    g: &[f32],
    tables: &mut [f32],
    mask: &mut [u32],
) {
    compress_impl::<true>(hs, e, g, tables, mask)
}

/// Estimate kernel: `out_i = median_j s_j(i) * S[j][h_j(i)]`, per block; `est` holds
/// `r` blocks of row estimates, `mask` one block of signs, `med` `r` values (scratch).
#[inline(always)]
fn estimate_impl<const AVX2: bool>(
    hs: &[RowHash],
    s: &[f32],
    out: &mut [f32],
    est: &mut [f32],
    mask: &mut [u32],
    med: &mut [f32],
) {
    let (c, seg, r) = (hs[0].c, hs[0].seg, hs.len());
    for (u, ob) in out.chunks_mut(seg).enumerate() {
        let w = ob.len();
        let m = &mut mask[..w];
        for ((h, table), ej) in hs
            .iter()
            .zip(s.chunks_exact(c))
            .zip(est.chunks_exact_mut(seg))
        {
            h.sign_bits::<AVX2>(u * seg, m);
            let (r1, r2) = block_ranges(h, u, w);
            let n1 = r1.len();
            copy_signed(&mut ej[..n1], &table[r1], &m[..n1]);
            copy_signed(&mut ej[n1..w], &table[r2], &m[n1..]);
        }
        match r {
            1 => ob.copy_from_slice(&est[..w]),
            3 => {
                let (e0, rest) = est.split_at(seg);
                let (e1, e2) = rest.split_at(seg);
                for (((o, &x), &y), &z) in ob.iter_mut().zip(e0).zip(e1).zip(e2) {
                    *o = x.min(y).max(x.max(y).min(z));
                }
            }
            _ => {
                for (t, o) in ob.iter_mut().enumerate() {
                    for (v, ej) in med.iter_mut().zip(est.chunks_exact(seg)) {
                        *v = ej[t];
                    }
                    *o = median(med);
                }
            }
        }
    }
}

/// [`estimate_impl`] compiled with AVX2 (8 sign masks per step).
///
/// # Safety
/// The CPU must support AVX2. Nothing more: the body is safe code.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn estimate_avx2(
    hs: &[RowHash],
    s: &[f32],
    out: &mut [f32],
    est: &mut [f32],
    mask: &mut [u32],
    med: &mut [f32],
) {
    estimate_impl::<true>(hs, s, out, est, mask, med)
}

/// Whether a tensor of `d` elements travels raw: when its sketch (`rows x c` floats in
/// round 0) and its `k` exact values (round 1) would be at least its own `d` floats.
/// Sketched-SGD's unsketched part, chosen by size (module doc).
fn sends_raw(rows: usize, c: usize, k: usize, d: usize) -> bool {
    rows.saturating_mul(c).saturating_add(k) >= d
}

/// Per-tensor state.
#[derive(Debug, Clone)]
struct State {
    /// Sent raw ([`sends_raw`]): all-reduced whole in round 0, no residual, no round 1.
    raw: bool,
    /// Residual `e`; holds `p` from round 0's compress to round 1's decompress (empty for
    /// a raw tensor).
    e: Vec<f32>,
    k: usize,
    c: usize,
    /// The candidates `I` chosen in round 0's decompress (ascending; `nsel` of them).
    sel: Vec<u32>,
    nsel: usize,
}

/// Count Sketch compressor (CLI `sketch`).
#[derive(Debug, Clone)]
pub struct Sketch {
    ctx: WorkerCtx,
    step: u64,
    density: f64,
    rows: usize,
    cols_per_k: f64,
    slots: Vec<Option<Slot<State>>>,
    /// Row hashes of the current tensor and step (scratch).
    hs: Vec<RowHash>,
    /// One block of sign masks, `r` blocks of row estimates, `r` median values (scratch).
    mask: Vec<u32>,
    est: Vec<f32>,
    med: Vec<f32>,
    /// Exact top-k of the estimates (scratch sized in `register`): values.
    topk: TopKScratch,
    vals: Vec<f32>,
    avx2: bool,
}

impl Sketch {
    /// Reads `density` in (0, 1], `sketch_rows >= 1` and
    /// `sketch_cols_per_k > 0` (finite).
    pub fn new(p: &MethodParams, ctx: WorkerCtx) -> Result<Self> {
        let density = p.density_for(NAME);
        bits::check_density(NAME, density)?;
        if p.sketch_rows == 0 {
            return Err(bits::bad_param(
                NAME,
                "sketch_rows",
                p.sketch_rows,
                "must be >= 1 (default 2)",
            ));
        }
        if !(p.sketch_cols_per_k.is_finite() && p.sketch_cols_per_k > 0.0) {
            return Err(bits::bad_param(
                NAME,
                "sketch_cols_per_k",
                p.sketch_cols_per_k,
                "must be a finite number > 0 (default 10)",
            ));
        }
        #[cfg(target_arch = "x86_64")]
        let avx2 = std::is_x86_feature_detected!("avx2");
        #[cfg(not(target_arch = "x86_64"))]
        let avx2 = false;
        Ok(Sketch {
            ctx,
            step: 0,
            density,
            rows: p.sketch_rows,
            cols_per_k: p.sketch_cols_per_k,
            slots: Vec::new(),
            hs: vec![RowHash::new(0, 0, 0, 0, 1); p.sketch_rows],
            mask: Vec::new(),
            est: Vec::new(),
            med: vec![0.0; p.sketch_rows],
            topk: TopKScratch::new(0, 0),
            vals: Vec::new(),
            avx2,
        })
    }

    /// Residual `e` of tensor `t` (holds `p` between compress and decompress).
    #[cfg(test)]
    fn residual(&self, t: TensorId) -> Option<&[f32]> {
        self.slots
            .get(t)
            .and_then(|s| s.as_ref())
            .map(|s| s.s.e.as_slice())
    }

    /// Sketch columns `c` used for tensor `t`.
    #[cfg(test)]
    fn cols_of(&self, t: TensorId) -> Option<usize> {
        self.slots.get(t).and_then(|s| s.as_ref()).map(|s| s.s.c)
    }

    /// Fill `self.hs` for registered tensor `t` at the current step; returns its
    /// column count `c`.
    fn set_hashes(&mut self, t: TensorId) -> Result<usize> {
        let c = bits::slot(NAME, &mut self.slots, t)?.s.c;
        for (j, h) in self.hs.iter_mut().enumerate() {
            *h = RowHash::new(self.ctx.seed, self.step, t, j, c);
        }
        Ok(c)
    }

    /// Whether the AVX2 kernels run (otherwise the portable ones; same results).
    #[cfg(test)]
    fn set_avx2(&mut self, on: bool) {
        self.avx2 = on && self.avx2;
    }

    /// Round 0's decompress: the estimates from the summed sketch (into `out`, as
    /// scratch) and their exact top `k` by magnitude as the candidates `I`.
    fn select_candidates(
        &mut self,
        t: TensorId,
        received: &Received,
        out: ArrayViewMut2<f32>,
    ) -> Result<()> {
        let r = self.rows;
        let c = self.set_hashes(t)?;
        let mut rng = rng_for(self.ctx.seed, self.step, t, STREAM_SAMPLE);
        let Sketch {
            slots,
            hs,
            mask,
            est,
            med,
            topk,
            vals,
            avx2,
            ..
        } = self;
        let sl = bits::slot(NAME, slots, t)?;
        if received.world_size == 0 || received.sum_f32.len() != r * c {
            return Err(bits::tensor_err(
                NAME,
                t,
                format!(
                    "received a sketch of {} floats from {} workers; expected {r} x {c}",
                    received.sum_f32.len(),
                    received.world_size
                ),
            ));
        }
        let out = bits::output_slice(NAME, t, sl, out)?;
        let k = sl.s.k.min(out.len());
        match *avx2 {
            // SAFETY: `avx2` is set only when the CPU has AVX2 (checked in `new`).
            #[cfg(target_arch = "x86_64")]
            true => unsafe { estimate_avx2(hs, received.sum_f32, out, est, mask, med) },
            _ => estimate_impl::<false>(hs, received.sum_f32, out, est, mask, med),
        }
        sl.s.nsel = if k == 0 {
            0
        } else {
            topk.top_k(out, k, &mut rng, &mut sl.s.sel[..k], &mut vals[..k])?
        };
        Ok(())
    }
}

/// The error for a round other than 0 and 1.
fn round_error(round: usize) -> super::CompressError {
    super::CompressError::Unsupported {
        method: NAME,
        msg: format!("round {round} requested; Count Sketch has rounds 0 and 1"),
    }
}

/// Median of `v` (mean of the two middle values for even length); reorders `v`.
#[inline]
fn median(v: &mut [f32]) -> f32 {
    match v.len() {
        1 => v[0],
        2 => 0.5 * (v[0] + v[1]),
        3 => v[0].min(v[1]).max(v[0].max(v[1]).min(v[2])),
        n => {
            v.sort_unstable_by(|a, b| a.total_cmp(b));
            if n % 2 == 1 {
                v[n / 2]
            } else {
                0.5 * (v[n / 2 - 1] + v[n / 2])
            }
        }
    }
}

impl Compressor for Sketch {
    fn name(&self) -> &'static str {
        NAME
    }

    fn aggregation(&self) -> Aggregation {
        Aggregation::AllReduce
    }

    /// Round 0 the sketch, round 1 the candidates' exact values.
    fn rounds(&self) -> usize {
        2
    }

    fn register(&mut self, t: TensorId, rows: usize, cols: usize) -> Result<()> {
        let d = super::select::indexable_len(NAME, t, rows, cols)?;
        let k = MethodParams {
            density: Some(self.density),
            ..MethodParams::default()
        }
        .k_of(d)
        .min(d);
        let c = (self.cols_per_k * k.max(1) as f64).ceil().max(1.0);
        if c >= (u32::MAX as f64) {
            return Err(bits::tensor_err(
                NAME,
                t,
                format!("sketch of {c} columns is too large; lower sketch_cols_per_k or density"),
            ));
        }
        let c = c as usize;
        if sends_raw(self.rows, c, k, d) {
            bits::put_slot(
                &mut self.slots,
                t,
                rows,
                cols,
                State {
                    raw: true,
                    e: Vec::new(),
                    k,
                    c,
                    sel: Vec::new(),
                    nsel: 0,
                },
            );
            return Ok(());
        }
        let seg = SEG_MAX.min(c).max(1);
        if self.mask.len() < seg {
            self.mask = bits::touched_zeros(seg);
        }
        if self.est.len() < self.rows * SEG_MAX {
            self.est = bits::touched_zeros(self.rows * SEG_MAX);
        }
        self.topk.ensure(d, k);
        if self.vals.len() < k {
            self.vals = bits::touched_zeros(k);
        }
        bits::put_slot(
            &mut self.slots,
            t,
            rows,
            cols,
            State {
                raw: false,
                e: bits::touched_zeros(d),
                k,
                c,
                sel: bits::touched_zeros(k),
                nsel: 0,
            },
        );
        Ok(())
    }

    fn wire_capacity(&self, t: TensorId, round: usize) -> WireLen {
        let words = match (self.slots.get(t).and_then(|s| s.as_ref()), round) {
            (Some(sl), 0) if sl.s.raw => sl.d(),
            (Some(sl), _) if sl.s.raw => 0,
            (Some(sl), 0) => self.rows * sl.s.c,
            (Some(sl), 1) => sl.s.k,
            _ => 0,
        };
        WireLen {
            sum_f32: words,
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
        let sl = bits::slot(NAME, &mut self.slots, t)?;
        if sl.s.raw && round < 2 {
            // Raw: the gradient itself in round 0, nothing in round 1.
            wire.clear();
            if round == 0 {
                let g = bits::input_slice(NAME, t, sl, &grad)?;
                wire.sum_f32.extend_from_slice(g);
            }
            return Ok(());
        }
        match round {
            0 => {}
            1 => {
                // The candidates' exact values of `p` (held in `e` since round 0).
                wire.clear();
                let State { e, sel, nsel, .. } = &sl.s;
                wire.sum_f32
                    .extend(sel[..*nsel].iter().map(|&i| e[i as usize]));
                return Ok(());
            }
            _ => return Err(round_error(round)),
        }
        let c = self.set_hashes(t)?;
        let Sketch {
            slots,
            hs,
            mask,
            avx2,
            rows,
            ..
        } = self;
        let sl = bits::slot(NAME, slots, t)?;
        let g = bits::input_slice(NAME, t, sl, &grad)?;
        wire.clear();
        wire.sum_f32.resize(*rows * c, 0.0);
        match *avx2 {
            // SAFETY: `avx2` is set only when the CPU has AVX2 (checked in `new`).
            #[cfg(target_arch = "x86_64")]
            true => unsafe { compress_avx2(hs, &mut sl.s.e, g, &mut wire.sum_f32, mask) },
            _ => compress_impl::<false>(hs, &mut sl.s.e, g, &mut wire.sum_f32, mask),
        }
        Ok(())
    }

    /// FetchSGD's `CSVec` (nikitaivkin/csh `csvec/csvec.py`, cached bucket and sign
    /// rows; docs/methods.md, "Device kernels"). Round 0, compress: `p = g + e`, the
    /// zeroed table, and per row `accumulateVec`'s clones of the bucket and sign rows,
    /// `signs * p`, `torch.bincount` (its `min` and `max`, the weighted histogram) and
    /// `table[j] +=`: `2 + 7r` kernels. Round 0, decompress: `_findAllValues` (zeros, per
    /// row gather, `* signs`, store; median over rows) and `_findHHK` (`vals**2`,
    /// `torch.sort`): `3r + 3` kernels and the sort. Round 1 (the exact values of the
    /// candidates, Sketched-SGD's second round): compress `p[HHs]` (one gather);
    /// decompress `zeros(d)`, `/ n`, the scatter into the update and `e[HHs] = 0`
    /// (`index_fill_`): 4 kernels. A raw tensor, as Power-SGD's: the copy into the
    /// uncompressed buffer, then `/ n` and the copy back, round 0 only.
    fn device_kernels(&self, t: TensorId, round: usize, _phase: usize, stage: Stage, out: Out) {
        let Some(sl) = self.slots.get(t).and_then(Option::as_ref) else {
            return;
        };
        if sl.s.raw {
            let bytes = F32 * sl.d() as f64;
            device::uncompressed(
                out,
                round,
                stage,
                bytes,
                "copy into the uncompressed buffer",
            );
            return;
        }
        let (d, k, c, r) = (sl.d(), sl.s.k, sl.s.c, self.rows);
        let (df, kf, cf) = (d as f64, k as f64, c as f64);
        match (round, stage) {
            (0, Stage::Compress) => {
                out(device::ew("p = g + e", d, 2, 1));
                out(device::mem("table = zeros(r, c)", F32 * (r * c) as f64));
                for _ in 0..r {
                    out(Kernel::copy("clone bucket row", I64 * df));
                    out(Kernel::copy("clone sign row", F32 * df));
                    out(device::ew("signs * p", d, 2, 1));
                    out(device::mem("bincount: buckets.min()", I64 * df));
                    out(device::mem("bincount: buckets.max()", I64 * df));
                    out(device::mem(
                        "bincount: weighted histogram into c buckets",
                        (I64 + F32) * df + F32 * cf,
                    ));
                    out(device::mem("table[j] += counts", 3.0 * F32 * cf));
                }
            }
            (0, Stage::Decompress) => {
                out(device::mem("vals = zeros(r, d)", F32 * (r * d) as f64));
                for _ in 0..r {
                    out(device::mem(
                        "table[j, buckets[j]] (gather)",
                        (I64 + 2.0 * F32) * df,
                    ));
                    out(device::ew("* signs[j]", d, 2, 1));
                    out(device::ew("vals[j] = ...", d, 1, 1));
                }
                out(device::mem(
                    "median over rows",
                    F32 * (r * d) as f64 + (F32 + I64) * df,
                ));
                out(device::ew("vals**2", d, 1, 1));
                device::radix_sort_pairs(out, d, F32, I64, device::RADIX_PASSES_F32, true);
            }
            (1, Stage::Compress) => {
                out(device::mem(
                    "p[HHs] (gather the k candidates)",
                    (I64 + 2.0 * F32) * kf,
                ));
            }
            (1, Stage::Decompress) => {
                out(device::mem("update = zeros(d)", F32 * df));
                out(device::mem("sum / n", 2.0 * F32 * kf));
                out(device::mem(
                    "update[HHs] = sum / n (scatter)",
                    (I64 + 2.0 * F32) * kf,
                ));
                out(device::mem("e[HHs] = 0 (index_fill_)", (I64 + F32) * kf));
            }
            _ => {}
        }
    }

    fn decompress(
        &mut self,
        t: TensorId,
        round: usize,
        received: &Received,
        out: ArrayViewMut2<f32>,
    ) -> Result<()> {
        let sl = bits::slot(NAME, &mut self.slots, t)?;
        if sl.s.raw && round < 2 {
            // Raw: round 0's all-reduced gradients averaged; round 1 received nothing.
            let want = if round == 0 { sl.d() } else { 0 };
            if received.world_size == 0 || received.sum_f32.len() != want {
                return Err(bits::tensor_err(
                    NAME,
                    t,
                    format!(
                        "round {round} of a raw tensor received {} values from {} workers; expected {want}",
                        received.sum_f32.len(),
                        received.world_size
                    ),
                ));
            }
            if round == 0 {
                let out = bits::output_slice(NAME, t, sl, out)?;
                let inv_n = 1.0 / received.world_size as f32;
                for (o, &v) in out.iter_mut().zip(received.sum_f32) {
                    *o = v * inv_n;
                }
            }
            return Ok(());
        }
        match round {
            0 => self.select_candidates(t, received, out),
            1 => {
                let out = bits::output_slice(NAME, t, sl, out)?;
                let State { e, sel, nsel, .. } = &mut sl.s;
                if received.world_size == 0 || received.sum_f32.len() != *nsel {
                    return Err(bits::tensor_err(
                        NAME,
                        t,
                        format!(
                            "round 1 received {} values from {} workers; expected the {} candidates",
                            received.sum_f32.len(),
                            received.world_size,
                            nsel
                        ),
                    ));
                }
                out.fill(0.0);
                let inv_n = 1.0 / received.world_size as f32;
                for (&i, &v) in sel[..*nsel].iter().zip(received.sum_f32) {
                    out[i as usize] = v * inv_n;
                    e[i as usize] = 0.0;
                }
                Ok(())
            }
            _ => Err(round_error(round)),
        }
    }
    fn check_share(&self, grad: ArrayView2<f32>, _fresh: &mut dyn Compressor) -> Result<Vec<f32>> {
        check::gradient_share(grad)
    }
    /// Against [`reference_select`], an element-by-element Count Sketch of the summed
    /// gradients in f64 (not the block kernels, nor [`median`]): at most `k` non-zeros;
    /// every kept value is the exact mean of the workers' gradients (round 1; rtol 1e-5
    /// of the largest); the kept set is the reference's but for at most 2 selections
    /// swapped by the f32 sums' rounding at the k-th largest estimate. A raw tensor
    /// ([`sends_raw`]): every element the exact mean.
    fn check_verdict(&self, out: &[f32], summed: &[f32], c: &mut CheckCtx) -> Result<Verdict> {
        let (n, t) = (c.world_size, check::CHECKED);
        let d = c.rows * c.cols;
        let k = c.params.for_method(NAME).k_of(d).min(d);
        let cols = (c.params.sketch_cols_per_k * k.max(1) as f64)
            .ceil()
            .max(1.0) as usize;
        if sends_raw(c.params.sketch_rows, cols, k, d) {
            // Raw: every element is the exact mean.
            let mean = check::mean(summed, n);
            let scale = check::max_ref(&mean);
            let wrong = (0..d)
                .filter(|&i| !check::within(out[i], mean[i], 1e-5 * scale))
                .count();
            return Ok(if wrong > 0 {
                Err(format!(
                    "{wrong} element(s) of a raw tensor differ from the exact mean of the workers' gradients"
                ))
            } else {
                Ok(())
            });
        }
        let want = reference_select(summed, c.params.sketch_rows, cols, k, self.ctx.seed, t);
        let mean = check::mean(summed, n);
        let scale = check::max_ref(&mean);
        let kept: Vec<usize> = (0..d).filter(|&i| out[i] != 0.0).collect();
        let wrong = kept
            .iter()
            .filter(|&&i| !check::within(out[i], mean[i], 1e-5 * scale))
            .count();
        let mut in_want = vec![false; d];
        for &i in &want {
            in_want[i] = true;
        }
        let swaps = kept.iter().filter(|&&i| !in_want[i]).count();
        Ok(if kept.len() > k {
            Err(format!(
                "{} non-zeros in the result, more than k = {k}",
                kept.len()
            ))
        } else if wrong > 0 {
            Err(format!(
                "{wrong} kept value(s) differ from the exact mean of the workers' gradients"
            ))
        } else if swaps > 2 {
            Err(format!("{swaps} kept element(s) are not among the reference sketch's {k} largest estimates"))
        } else {
            Ok(())
        })
    }
}

/// `micro --check`'s reference: the `k` indices with the largest `|est_i|` (ties: lower
/// index) of a Count Sketch of `x` with `r` rows and `c` columns at step 0 of tensor `t`,
/// built element by element from the definitions (`S[j][h_j(i)] += s_j(i) x_i` in f64,
/// `est_i` the median of the `r` signed cells: the middle one, or the mean of the two
/// middle ones), independently of the block kernels and of [`median`].
fn reference_select(x: &[f32], r: usize, c: usize, k: usize, seed: u64, t: TensorId) -> Vec<usize> {
    let hs: Vec<RowHash> = (0..r).map(|j| RowHash::new(seed, 0, t, j, c)).collect();
    let sign = |h: &RowHash, i: usize| {
        if h.sa.wrapping_mul(i as u64).wrapping_add(h.sb) >> 63 == 1 {
            -1.0
        } else {
            1.0
        }
    };
    let bucket = |h: &RowHash, i: usize| (h.block_start(i / h.seg) + i % h.seg) % h.c;
    let mut tables = vec![vec![0f64; c]; r];
    for (h, table) in hs.iter().zip(&mut tables) {
        for (i, &v) in x.iter().enumerate() {
            table[bucket(h, i)] += sign(h, i) * v as f64;
        }
    }
    let mut est: Vec<(f64, usize)> = (0..x.len())
        .map(|i| {
            let mut v: Vec<f64> = hs
                .iter()
                .zip(&tables)
                .map(|(h, table)| sign(h, i) * table[bucket(h, i)])
                .collect();
            v.sort_by(f64::total_cmp);
            let m = if r % 2 == 1 {
                v[r / 2]
            } else {
                0.5 * (v[r / 2 - 1] + v[r / 2])
            };
            (m.abs(), i)
        })
        .collect();
    est.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    est.iter().take(k).map(|&(_, i)| i).collect()
}

#[cfg(test)]
mod tests;
