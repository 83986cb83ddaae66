//! Count Sketch compression (Charikar et al., ICALP 2002) as used by Sketch-Fusion SGD
//! (Dai et al., JPDC 2024; docs/methods.md, "sketch"), without the fusion planner:
//! - compress: `p = g + e` (kept in the residual buffer); a table `S` of `r` rows by
//!   `c = ceil(sketch_cols_per_k * k)` columns, `k = ceil(rho * d)`,
//!   `S[j][h_j(i)] += s_j(i) * p_i`; wire `sum_f32 = S` (`r*c` floats). Sketches are
//!   linear, so the harness all-reduces (sums) them.
//! - decompress: `est_i = median_j s_j(i) * S_sum[j][h_j(i)]` (mean of the two middle
//!   values for even `r`), the estimate of the *n-worker sum* of `p`; `D` = the `k`
//!   largest `|est_i|` (exact selection, ties broken by lower index); `out = D / n`, zeros
//!   elsewhere; `e = p - D / n` on the kept coordinates: every worker is credited with
//!   its `1/n` share of what was applied, so
//!   `sum_w e_w + sum_t D_t = sum_t sum_w g_w` exactly (tested at 1, 2, 3 and 8 workers).
//!   Why this rule and not FetchSGD's sketch-space error: docs/methods.md, "Count Sketch".
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
use super::kernels::{mix, rng_for};
use super::select::TopKScratch;
use super::{
    Aggregation, Compressor, MethodParams, Received, Result, TensorId, Wire, WireLen, WorkerCtx,
};
use crate::devcost::{Kernel, Stage};

const NAME: &str = "sketch";
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

/// Per-tensor state.
#[derive(Debug, Clone)]
struct State {
    /// Residual `e`; holds `p` between compress and decompress.
    e: Vec<f32>,
    k: usize,
    c: usize,
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
    /// Exact top-k of the estimates (scratch sized in `register`): indices and values.
    topk: TopKScratch,
    idx: Vec<u32>,
    vals: Vec<f32>,
    avx2: bool,
}

impl Sketch {
    /// Reads `density` in (0, 1], `sketch_rows >= 1` (odd recommended) and
    /// `sketch_cols_per_k > 0` (finite).
    pub fn new(p: &MethodParams, ctx: WorkerCtx) -> Result<Self> {
        bits::check_density(NAME, p.density)?;
        if p.sketch_rows == 0 {
            return Err(bits::bad_param(
                NAME,
                "sketch_rows",
                p.sketch_rows,
                "must be >= 1 (odd recommended, e.g. 3 or 5)",
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
            density: p.density,
            rows: p.sketch_rows,
            cols_per_k: p.sketch_cols_per_k,
            slots: Vec::new(),
            hs: vec![RowHash::new(0, 0, 0, 0, 1); p.sketch_rows],
            mask: Vec::new(),
            est: Vec::new(),
            med: vec![0.0; p.sketch_rows],
            topk: TopKScratch::new(0, 0),
            idx: Vec::new(),
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

    fn register(&mut self, t: TensorId, rows: usize, cols: usize) -> Result<()> {
        let d = super::select::indexable_len(NAME, t, rows, cols)?;
        let k = MethodParams {
            density: self.density,
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
        let seg = SEG_MAX.min(c).max(1);
        if self.mask.len() < seg {
            self.mask = bits::touched_zeros(seg);
        }
        if self.est.len() < self.rows * SEG_MAX {
            self.est = bits::touched_zeros(self.rows * SEG_MAX);
        }
        self.topk.ensure(d, k);
        if self.idx.len() < k {
            self.idx = bits::touched_zeros(k);
            self.vals = bits::touched_zeros(k);
        }
        bits::put_slot(
            &mut self.slots,
            t,
            rows,
            cols,
            State {
                e: bits::touched_zeros(d),
                k,
                c,
            },
        );
        Ok(())
    }

    fn wire_capacity(&self, t: TensorId, _round: usize) -> WireLen {
        match self.slots.get(t).and_then(|s| s.as_ref()) {
            Some(sl) => WireLen {
                sum_f32: self.rows * sl.s.c,
                ..WireLen::default()
            },
            None => WireLen::default(),
        }
    }

    fn begin_step(&mut self, step: u64) {
        self.step = step;
    }

    fn compress(
        &mut self,
        t: TensorId,
        _round: usize,
        grad: ArrayView2<f32>,
        wire: &mut Wire,
    ) -> Result<()> {
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
    /// rows; docs/methods.md, "Device kernels"). Compress: `p = g + e`, the zeroed table,
    /// and per row `accumulateVec`'s clones of the bucket and sign rows, `signs * p`,
    /// `torch.bincount` (its `min` and `max`, the weighted histogram) and `table[j] +=`:
    /// `2 + 7r` kernels. Decompress: `_findAllValues` (zeros, per row gather, `* signs`,
    /// store; median over rows), `_findHHK` (`vals**2`, `torch.sort`, gather of the top
    /// k), `unSketch` (zeros, scatter), with `/ n` and the residual `e -= D / n`:
    /// `3r + 14` kernels.
    fn device_kernels(&self, t: TensorId, round: usize, _phase: usize, stage: Stage, out: Out) {
        let Some(sl) = device::round0(&self.slots, t, round) else {
            return;
        };
        let (d, k, c, r) = (sl.d(), sl.s.k, sl.s.c, self.rows);
        let (df, kf, cf) = (d as f64, k as f64, c as f64);
        match stage {
            Stage::Compress => {
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
            Stage::Decompress => {
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
                out(device::mem(
                    "vals[HHs] (gather the top k)",
                    (I64 + 2.0 * F32) * kf,
                ));
                out(device::mem("unSketched = zeros(d)", F32 * df));
                out(device::mem("D / n", 2.0 * F32 * kf));
                out(device::mem(
                    "unSketched[HHs] = D / n (scatter)",
                    (I64 + 2.0 * F32) * kf,
                ));
                out(device::mem(
                    "e[HHs] -= D / n (index_add_)",
                    (I64 + 3.0 * F32) * kf,
                ));
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
            idx,
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
        // 1. estimates into `out`
        match *avx2 {
            // SAFETY: `avx2` is set only when the CPU has AVX2 (checked in `new`).
            #[cfg(target_arch = "x86_64")]
            true => unsafe { estimate_avx2(hs, received.sum_f32, out, est, mask, med) },
            _ => estimate_impl::<false>(hs, received.sum_f32, out, est, mask, med),
        }
        // 2. exact top-k by |est| (ties: lower index), 3. keep / 1/n / residual
        let m = if k == 0 {
            0
        } else {
            topk.top_k(out, k, &mut rng, &mut idx[..k], &mut vals[..k])?
        };
        out.fill(0.0);
        let inv_n = 1.0 / received.world_size as f32;
        for (&i, &v) in idx[..m].iter().zip(&vals[..m]) {
            let share = v * inv_n;
            sl.s.e[i as usize] -= share;
            out[i as usize] = share;
        }
        Ok(())
    }
    fn check_share(&self, grad: ArrayView2<f32>, _fresh: &mut dyn Compressor) -> Result<Vec<f32>> {
        check::gradient_share(grad)
    }
    /// Linearity through MPI: the all-reduced sketch equals a fresh sketch of the summed
    /// gradients (rtol 1e-4); the result has at most k non-zeros and matches the result
    /// decoded from that fresh sketch, but for at most 2 selections swapped by rounding.
    fn check_verdict(&self, out: &[f32], summed: &[f32], c: &mut CheckCtx) -> Result<Verdict> {
        let (n, t) = (c.world_size, check::CHECKED);
        // The dense average times n (the reference's rounding).
        let sum: Vec<f32> = check::mean(summed, n)
            .iter()
            .map(|x| x * n as f32)
            .collect();
        let mut w = Wire::default();
        w.reserve(c.fresh.wire_capacity(t, 0));
        let sum_arr = ArrayView2::from_shape((c.rows, c.cols), &sum[..])
            .map_err(|e| bits::tensor_err(NAME, t, e.to_string()))?;
        c.fresh.compress(t, 0, sum_arr, &mut w)?;
        let k = c.params.k_of(c.rows * c.cols);
        let nnz = out.iter().filter(|x| **x != 0.0).count();
        // The two sketches differ by float rounding, which may swap elements tied at the
        // k-th largest estimate: at most 2 such swapped positions are tolerated.
        let counts = vec![0usize; n];
        let rec = Received {
            sum_f32: &w.sum_f32,
            gathered_u32: &[],
            gather_counts: &counts,
            ring_u32: &[],
            world_size: n,
        };
        let mut want = ndarray::Array2::<f32>::zeros((c.rows, c.cols));
        c.fresh.decompress(t, 0, &rec, want.view_mut())?;
        let want = check::flat(&want.view())?.to_vec();
        let scale = check::max_ref(&want);
        let differs = |a: f32, b: f32| !check::within(a, b, 1e-3 * scale);
        // A value mismatch (both kept) is always an error; a selection swap (kept in
        // one, not the other) is the tolerated rounding effect.
        let wrong_values = out
            .iter()
            .zip(&want)
            .filter(|(a, b)| **a != 0.0 && **b != 0.0 && differs(**a, **b))
            .count();
        let swaps = out
            .iter()
            .zip(&want)
            .filter(|(a, b)| (**a == 0.0) != (**b == 0.0) && differs(**a, **b))
            .count();
        let bad = if wrong_values > 0 { usize::MAX } else { swaps };
        Ok(check::compare(c.received.sum_f32, &w.sum_f32, 1e-4, "all-reduced sketch vs sketch of the summed gradients")
            .and_then(|_| if nnz <= k { Ok(()) } else { Err(format!("{nnz} non-zeros in the result, more than k = {k}")) })
            .and_then(|_| if bad <= 2 { Ok(()) } else { Err(format!("{wrong_values} kept value(s) and {swaps} selection(s) differ from the result decoded from the reference sketch")) }))
    }
}

#[cfg(test)]
mod tests;
