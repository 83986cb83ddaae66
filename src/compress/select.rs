//! Allocation-free selection kernels shared by Top-k, DGC (and OMGS): exact top-k by
//! magnitude, threshold selection `|x| >= thr`, and strided random sampling.
//!
//! Exact top-k (docs/methods.md, "topk") without a full `select_nth` over `d` elements:
//! 1. estimate a threshold from a seeded strided random sample, chosen low enough that
//!    at least `k` elements pass with overwhelming probability;
//! 2. one streaming pass collects the keys of the elements passing it into a bounded
//!    buffer; when the buffer fills, it is compacted to its top `k` and the threshold
//!    rises to just above the `k`-th magnitude (nothing below can enter the top-k);
//! 3. if fewer than `k` passed, rescan with threshold 0 (every element a candidate);
//! 4. exact `select_nth_unstable` on the candidates only.
//!
//! Order: by `|x|` (compared through the bit pattern of `|x|`), ties broken by the lower
//! index, so the result is exact and deterministic whatever the data. Inputs are assumed
//! NaN-free; a NaN is never lost or a panic, it ranks above +inf.
//!
//! DGC uses the same streaming scan with its own threshold (from a random-start strided
//! sample, [`TopKScratch::draw_strided`]) and keeps either the top `k` of the candidates
//! ([`TopKScratch::finish`]) or the first `k` in index order
//! ([`TopKScratch::finish_first`]).

use super::{CompressError, Received, Result, TensorId, Wire};
use ndarray::{ArrayView2, ArrayViewMut2};
use rand::Rng;

/// Elements examined together by the streaming scan (the fast path skips a whole block
/// with no candidate).
const BLOCK: usize = 32;
/// Largest sample drawn by [`TopKScratch::sample_threshold`] (4 MiB of scratch).
const MAX_SAMPLE: usize = 1 << 20;
/// Smallest sample drawn by [`TopKScratch::sample_threshold`].
const MIN_SAMPLE: usize = 4096;
/// Expected number of sampled elements at or above the true k-th magnitude.
const SAMPLE_HITS: usize = 64;

/// Bits of `|x|`: for non-NaN floats their integer order is the order of `|x|`.
#[inline(always)]
pub fn abs_bits(x: f32) -> u32 {
    x.to_bits() & 0x7fff_ffff
}

/// Sort key: larger = selected first; `|x|` first, then the lower index.
#[inline(always)]
fn key(x: f32, i: usize) -> u64 {
    ((abs_bits(x) as u64) << 32) | (!(i as u32)) as u64
}

#[inline(always)]
fn key_index(k: u64) -> u32 {
    !(k as u32)
}

/// Candidate test `|x| >= thr` (true for NaN, so that no element is ever lost).
#[allow(clippy::neg_cmp_op_on_partial_ord)]
#[inline(always)]
fn passes(x: f32, thr: f32) -> bool {
    !(x.abs() < thr)
}

/// A vector of `n` copies of `v` whose pages are written (touched) now, at setup (unless
/// [`super::setup::untouched_registration`] is in force: then plain `vec![fill; n]`).
pub fn touched_vec<T: Copy>(n: usize, fill: T, other: T) -> Vec<T> {
    if !super::setup::touching() {
        return vec![fill; n];
    }
    let mut v = Vec::with_capacity(n);
    v.resize(n, other);
    std::hint::black_box(&mut v);
    v.fill(fill);
    v
}

/// Preallocated scratch for the selection kernels; create at setup with the largest
/// `d` and `k` it will see, then every call is allocation-free.
#[derive(Debug, Clone)]
pub struct TopKScratch {
    /// Candidate keys (bounded buffer of `2 max_k + 2 BLOCK`).
    keys: Vec<u64>,
    /// Sampled `|x|` bits.
    sample: Vec<u32>,
    max_d: usize,
    max_k: usize,
    /// Candidates held in `keys[..len]`.
    len: usize,
    /// Keep the top `k` (compaction target).
    k: usize,
    /// Current threshold (`|x| >= thr` enters).
    thr: f32,
    /// Threshold given to [`TopKScratch::begin`] (compaction raises `thr`, not this).
    thr_start: f32,
    /// Whether the buffer was compacted (then more than `len` elements passed the
    /// starting threshold, at least `k` of them).
    compacted: bool,
}

impl TopKScratch {
    /// Scratch for tensors of at most `max_d` elements and selections of at most `max_k`.
    pub fn new(max_d: usize, max_k: usize) -> Self {
        let mut s = TopKScratch {
            keys: Vec::new(),
            sample: Vec::new(),
            max_d: 0,
            max_k: 0,
            len: 0,
            k: 0,
            thr: 0.0,
            thr_start: 0.0,
            compacted: false,
        };
        s.ensure(max_d, max_k);
        s
    }

    /// Grow the scratch for `max_d` / `max_k` (setup only; allocates and touches).
    pub fn ensure(&mut self, max_d: usize, max_k: usize) {
        let max_k = max_k.min(max_d);
        if max_d > self.max_d {
            self.max_d = max_d;
            self.ensure_sample(sample_cap(max_d));
        }
        self.ensure_keys(max_k);
    }

    /// Grow the candidate buffer for selections of at most `max_k` (setup only). Without
    /// a compaction it holds every candidate up to `2 max_k + BLOCK` of them.
    pub fn ensure_keys(&mut self, max_k: usize) {
        if max_k > self.max_k || self.keys.is_empty() {
            self.max_k = self.max_k.max(max_k);
            self.keys = touched_vec(2 * self.max_k + 2 * BLOCK, 0, 1);
        }
    }

    /// Grow the sample buffer to at least `n` elements (setup only).
    pub fn ensure_sample(&mut self, n: usize) {
        if n > self.sample.len() {
            self.sample = touched_vec(n, 0, 1);
        }
    }

    /// Largest `k` a selection may ask for.
    pub fn max_k(&self) -> usize {
        self.max_k
    }

    /// Exact top-`k` of `x` by magnitude: writes the indices (ascending) to `idx_out`
    /// and the signed values to `val_out`; returns `k`. `rng` seeds the sample (the
    /// result does not depend on it).
    pub fn top_k<R: Rng>(
        &mut self,
        x: &[f32],
        k: usize,
        rng: &mut R,
        idx_out: &mut [u32],
        val_out: &mut [f32],
    ) -> Result<usize> {
        let thr = self.sample_threshold(x.len(), k, rng, |i| x[i])?;
        self.begin(k, thr)?;
        self.scan(0, x);
        if !self.complete() {
            self.begin(k, 0.0)?;
            self.scan(0, x);
        }
        self.finish(x, k, idx_out, val_out)
    }

    /// Threshold for an exact top-`k` of `d` elements whose value `i` is `get(i)`: the
    /// `r`-th largest of a strided random sample, `r` set 4 standard deviations above
    /// the expected number of sampled top-k elements, so that at least `k` elements pass
    /// with overwhelming probability (otherwise the caller rescans). 0 for small inputs.
    pub fn sample_threshold<R: Rng, F: Fn(usize) -> f32>(
        &mut self,
        d: usize,
        k: usize,
        rng: &mut R,
        get: F,
    ) -> Result<f32> {
        self.check(d, k)?;
        if k == 0 || d < 16 * MIN_SAMPLE {
            return Ok(0.0);
        }
        let want = (SAMPLE_HITS as f64 * d as f64 / k as f64).ceil() as usize;
        let s = want.clamp(MIN_SAMPLE, (d / 4).min(MAX_SAMPLE));
        let hits = s as f64 * k as f64 / d as f64;
        let r = (hits + 4.0 * hits.sqrt() + 4.0).ceil() as usize;
        if r >= s {
            return Ok(0.0);
        }
        let n = self.draw_sample(d, s, rng, get);
        Ok(f32::from_bits(nth_largest(&mut self.sample[..n], r)))
    }

    /// Draw `s` elements of `|get(i)|`, one uniformly in each of `s` equal strides of
    /// `0..d` (strided random sample); returns how many were drawn (`min(s, d)`).
    pub fn draw_sample<R: Rng, F: Fn(usize) -> f32>(
        &mut self,
        d: usize,
        s: usize,
        rng: &mut R,
        get: F,
    ) -> usize {
        let s = s.min(d).min(self.sample.len());
        if s == 0 {
            return 0;
        }
        let stride = d / s;
        for (j, slot) in self.sample[..s].iter_mut().enumerate() {
            let i = j * stride
                + if stride > 1 {
                    rng.gen_range(0..stride)
                } else {
                    0
                };
            *slot = abs_bits(get(i));
        }
        s
    }

    /// Draw `|get(i)|` for `i = start, start + stride, ... < d` (the reference DGC's
    /// `importance[start::stride]`); returns how many were drawn, or an error if the
    /// sample buffer ([`TopKScratch::ensure_sample`]) is too small.
    pub fn draw_strided<F: Fn(usize) -> f32>(
        &mut self,
        d: usize,
        start: usize,
        stride: usize,
        get: F,
    ) -> Result<usize> {
        let n = strided_count(d, start, stride);
        let slots = self.sample_slots(n)?;
        for (j, slot) in slots.iter_mut().enumerate() {
            *slot = abs_bits(get(start + j * stride));
        }
        Ok(n)
    }

    /// The first `n` slots of the sample buffer, for a caller that draws the sample
    /// itself (then [`TopKScratch::sample_nth_largest`]); an error if the buffer
    /// ([`TopKScratch::ensure_sample`]) is too small.
    pub fn sample_slots(&mut self, n: usize) -> Result<&mut [u32]> {
        self.sample
            .get_mut(..n)
            .ok_or_else(|| CompressError::Unsupported {
                method: "select",
                msg: format!("strided sample of {n} elements exceeds the sample buffer"),
            })
    }

    /// The `r`-th largest (1-based) `|x|` of the last sample of `n` elements, as f32.
    pub fn sample_nth_largest(&mut self, n: usize, r: usize) -> f32 {
        let n = n.min(self.sample.len());
        if n == 0 {
            return 0.0;
        }
        f32::from_bits(nth_largest(&mut self.sample[..n], r.clamp(1, n)))
    }

    fn check(&self, d: usize, k: usize) -> Result<()> {
        if k > self.max_k || k > d || d > self.max_d || d > u32::MAX as usize {
            return Err(CompressError::Unsupported {
                method: "select",
                msg: format!("selection of k = {k} of d = {d} exceeds the scratch (max_k = {}, max_d = {}, d <= 2^32-1)", self.max_k, self.max_d),
            });
        }
        Ok(())
    }

    /// Start a streaming selection: keep the top `k` of the elements with `|x| >= thr`.
    pub fn begin(&mut self, k: usize, thr: f32) -> Result<()> {
        if k > self.max_k {
            return self.check(k, k);
        }
        self.k = k;
        self.thr = thr;
        self.thr_start = thr;
        self.len = 0;
        self.compacted = false;
        Ok(())
    }

    /// Scan `x`, whose first element has index `base`: collect candidates.
    pub fn scan(&mut self, base: usize, x: &[f32]) {
        let mut thr = self.thr;
        let mut blocks = x.chunks_exact(BLOCK);
        let mut off = base;
        for b in &mut blocks {
            let mut hit = 0u32;
            for &v in b {
                hit |= passes(v, thr) as u32;
            }
            if hit != 0 {
                if self.len + BLOCK > self.keys.len() {
                    self.compact();
                    thr = self.thr;
                }
                self.push_block(off, b, thr);
            }
            off += BLOCK;
        }
        let rest = blocks.remainder();
        if !rest.is_empty() {
            if self.len + BLOCK > self.keys.len() {
                self.compact();
                thr = self.thr;
            }
            self.push_block(off, rest, thr);
        }
    }

    /// [`TopKScratch::scan`] of `d` elements of which only `cands` can pass the current
    /// threshold: `cands` are the keys of every element with `|x| >= t` for some
    /// `t <= thr` (at least all that pass), in index order, as [`WideCandidates`]
    /// collects them. The state afterwards is the one `scan(0, x)` leaves: the same
    /// blocks of `BLOCK` elements test for a hit, compact and push with the same
    /// thresholds, in the same order.
    pub fn scan_candidates(&mut self, cands: &[u64], d: usize) {
        let full_end = d / BLOCK * BLOCK;
        let mut i = 0;
        while i < cands.len() {
            let blk = key_index(cands[i]) as usize / BLOCK;
            if blk * BLOCK >= full_end {
                break;
            }
            let n = cands[i..]
                .iter()
                .take_while(|&&c| key_index(c) as usize / BLOCK == blk)
                .count();
            let group = &cands[i..i + n];
            if group.iter().any(|&c| key_passes(c, self.thr)) {
                if self.len + BLOCK > self.keys.len() {
                    self.compact();
                }
                self.push_keys(group);
            }
            i += n;
        }
        // `scan`'s partial last block checks for room whether or not it holds a hit.
        if full_end < d {
            if self.len + BLOCK > self.keys.len() {
                self.compact();
            }
            self.push_keys(&cands[i..]);
        }
    }

    /// Append the keys (at most `BLOCK`, room guaranteed) that pass the threshold.
    fn push_keys(&mut self, group: &[u64]) {
        let thr = self.thr;
        for &c in group {
            if key_passes(c, thr) {
                self.keys[self.len] = c;
                self.len += 1;
            }
        }
    }

    /// Branch-free append of the block's candidates (room for `BLOCK` is guaranteed).
    #[inline(always)]
    fn push_block(&mut self, off: usize, b: &[f32], thr: f32) {
        let dst = &mut self.keys[self.len..self.len + BLOCK];
        let mut n = 0;
        for (j, &v) in b.iter().enumerate() {
            dst[n & (BLOCK - 1)] = key(v, off + j);
            n += passes(v, thr) as usize;
        }
        self.len += n;
    }

    /// Keep only the top `k` candidates; later elements (higher indices) must then beat
    /// the `k`-th magnitude strictly.
    fn compact(&mut self) {
        self.compacted = true;
        let k = self.k;
        if k == 0 {
            self.len = 0;
            self.thr = f32::INFINITY;
            return;
        }
        if self.len > k {
            self.keys[..self.len].select_nth_unstable_by(k - 1, |a, b| b.cmp(a));
            self.len = k;
        }
        let kth = (self.keys[k - 1] >> 32) as u32;
        // Above +inf the bits are NaNs: keep everything (still exact, only slower).
        self.thr = if kth < 0x7f80_0000 {
            f32::from_bits(kth + 1)
        } else {
            f32::NAN
        };
    }

    /// Whether the candidates contain the exact top `k` (else rescan with threshold 0).
    pub fn complete(&self) -> bool {
        self.compacted || self.len >= self.k
    }

    /// Candidates collected so far, and whether a compaction dropped some of them.
    pub fn candidates(&self) -> (usize, bool) {
        (self.len, self.compacted)
    }

    /// Emit the top `min(keep, candidates)` candidates, indices ascending, values read
    /// from `x` (the scanned data); returns how many.
    pub fn finish(
        &mut self,
        x: &[f32],
        keep: usize,
        idx_out: &mut [u32],
        val_out: &mut [f32],
    ) -> Result<usize> {
        let m = keep.min(self.len);
        if idx_out.len() < m || val_out.len() < m {
            return Err(CompressError::Unsupported {
                method: "select",
                msg: format!(
                    "output holds {} < {m} selected elements",
                    idx_out.len().min(val_out.len())
                ),
            });
        }
        if m == 0 {
            return Ok(0);
        }
        if self.len > m {
            self.keys[..self.len].select_nth_unstable_by(m - 1, |a, b| b.cmp(a));
        }
        for (o, &kk) in idx_out[..m].iter_mut().zip(&self.keys[..m]) {
            *o = key_index(kk);
        }
        idx_out[..m].sort_unstable();
        for (v, &i) in val_out[..m].iter_mut().zip(&idx_out[..m]) {
            *v = x
                .get(i as usize)
                .copied()
                .ok_or_else(|| CompressError::Unsupported {
                    method: "select",
                    msg: format!("index {i} outside the scanned data of {} elements", x.len()),
                })?;
        }
        Ok(m)
    }
    /// Emit the first `keep` elements of `x` with `|x| >= thr` in index order, `thr`
    /// the threshold given to [`TopKScratch::begin`] (the reference DGC's `indices[:k]`
    /// of its survivors); values read from `x`, the scanned data. Without a compaction
    /// the candidates are already in index order; after one, `x` is scanned again.
    /// Returns how many.
    pub fn finish_first(
        &mut self,
        x: &[f32],
        keep: usize,
        idx_out: &mut [u32],
        val_out: &mut [f32],
    ) -> Result<usize> {
        let room = idx_out.len().min(val_out.len());
        if keep > room {
            return Err(CompressError::Unsupported {
                method: "select",
                msg: format!("output holds {room} < {keep} selected elements"),
            });
        }
        let m = if self.compacted {
            select_threshold(x, self.thr_start, &mut idx_out[..keep]).min(keep)
        } else {
            let m = keep.min(self.len);
            for (o, &kk) in idx_out[..m].iter_mut().zip(&self.keys[..m]) {
                *o = key_index(kk);
            }
            m
        };
        for (v, &i) in val_out[..m].iter_mut().zip(&idx_out[..m]) {
            *v = x
                .get(i as usize)
                .copied()
                .ok_or_else(|| CompressError::Unsupported {
                    method: "select",
                    msg: format!("index {i} outside the scanned data of {} elements", x.len()),
                })?;
        }
        Ok(m)
    }
}

/// Elements of `start, start + stride, ... < d` (0 for `stride == 0`).
pub fn strided_count(d: usize, start: usize, stride: usize) -> usize {
    if stride == 0 || start >= d {
        0
    } else {
        (d - start).div_ceil(stride)
    }
}

/// [`passes`] for the element a key was made from.
#[inline(always)]
fn key_passes(c: u64, thr: f32) -> bool {
    passes(f32::from_bits((c >> 32) as u32), thr)
}

/// Candidates of a streaming pass whose final threshold is known only after the pass:
/// the keys (as [`TopKScratch`] makes them) of the elements with `|x| >= t`, `t` a lower
/// bound of the final threshold given per call, in index order; a full buffer stops
/// the collection (the caller then scans the data again). DGC's single pass
/// (`dgc.rs`, `compress_sparse`) uses it; [`TopKScratch::scan_candidates`] replays it.
#[derive(Debug, Clone, Default)]
pub struct WideCandidates {
    keys: Vec<u64>,
    len: usize,
    overflow: bool,
}

impl WideCandidates {
    /// Room for at least `cap` candidates (setup only; allocates and touches).
    pub fn ensure(&mut self, cap: usize) {
        if cap + BLOCK > self.keys.len() {
            self.keys = touched_vec(cap + BLOCK, 0, 1);
        }
    }

    /// Start a pass.
    pub fn clear(&mut self) {
        self.len = 0;
        self.overflow = false;
    }

    /// Whether the buffer filled (the candidates are then incomplete).
    pub fn overflowed(&self) -> bool {
        self.overflow
    }

    /// The candidates collected, in index order (meaningless after an overflow).
    pub fn keys(&self) -> &[u64] {
        &self.keys[..self.len]
    }

    /// Collect the elements of `x` (first index `base`) with `|x| >= thr`.
    #[inline(always)]
    pub fn scan(&mut self, base: usize, x: &[f32], thr: f32) {
        if self.overflow {
            return;
        }
        let mut off = base;
        for b in x.chunks(BLOCK) {
            let mut hit = 0u32;
            for &v in b {
                hit |= passes(v, thr) as u32;
            }
            if hit != 0 {
                if self.len + BLOCK > self.keys.len() {
                    self.overflow = true;
                    return;
                }
                let dst = &mut self.keys[self.len..self.len + BLOCK];
                let mut n = 0;
                for (j, &v) in b.iter().enumerate() {
                    dst[n & (BLOCK - 1)] = key(v, off + j);
                    n += passes(v, thr) as usize;
                }
                self.len += n;
            }
            off += BLOCK;
        }
    }
}

/// Sample buffer size for [`TopKScratch::sample_threshold`] on `d` elements (DGC sizes
/// its own sample with [`TopKScratch::ensure_sample`]).
fn sample_cap(d: usize) -> usize {
    (d / 4).clamp(MIN_SAMPLE.min(d), MAX_SAMPLE)
}

/// The `r`-th largest (1-based, `1 <= r <= s.len()`) of `s` (reorders `s`).
fn nth_largest(s: &mut [u32], r: usize) -> u32 {
    let r = r.clamp(1, s.len());
    *s.select_nth_unstable_by(r - 1, |a, b| b.cmp(a)).1
}

/// Threshold selection `|x| >= thr` (DGC, Lin et al., ICLR 2018, Sec. 3): writes the
/// indices of passing elements (ascending) to `idx_out` while room lasts; returns how
/// many passed in total (may exceed `idx_out.len()`).
pub fn select_threshold(x: &[f32], thr: f32, idx_out: &mut [u32]) -> usize {
    let cap = idx_out.len();
    let mut n = 0usize;
    for (i, &v) in x.iter().enumerate() {
        if passes(v, thr) {
            if n < cap {
                idx_out[n] = i as u32;
            }
            n += 1;
        }
    }
    n
}

/// The registered `rows x cols` gradient as a row-major slice, or a `Tensor` error.
pub fn grad_slice<'a>(
    method: &'static str,
    t: TensorId,
    grad: &ArrayView2<'a, f32>,
    rows: usize,
    cols: usize,
) -> Result<&'a [f32]> {
    if grad.dim() != (rows, cols) {
        return Err(tensor_err(
            method,
            t,
            format!(
                "gradient shape {:?} differs from the registered {rows} x {cols}",
                grad.dim()
            ),
        ));
    }
    grad.to_slice().ok_or_else(|| {
        tensor_err(
            method,
            t,
            "gradient view must be contiguous row-major".into(),
        )
    })
}

/// The registered `rows x cols` output as a row-major slice, or a `Tensor` error.
pub fn out_slice<'a>(
    method: &'static str,
    t: TensorId,
    out: ArrayViewMut2<'a, f32>,
    rows: usize,
    cols: usize,
) -> Result<&'a mut [f32]> {
    if out.dim() != (rows, cols) {
        return Err(tensor_err(
            method,
            t,
            format!(
                "output shape {:?} differs from the registered {rows} x {cols}",
                out.dim()
            ),
        ));
    }
    out.into_slice()
        .ok_or_else(|| tensor_err(method, t, "output view must be contiguous row-major".into()))
}

/// Elements of a `rows x cols` tensor addressed by u32 indices (1 ..= 2^32-1), or an error.
pub fn indexable_len(method: &'static str, t: TensorId, rows: usize, cols: usize) -> Result<usize> {
    let d = rows * cols;
    if d == 0 || d > u32::MAX as usize {
        return Err(tensor_err(
            method,
            t,
            format!("{rows} x {cols} = {d} elements: need 1 ..= 2^32-1 (u32 indices)"),
        ));
    }
    Ok(d)
}

/// Single-round methods reject any other round.
pub fn single_round(method: &'static str, round: usize) -> Result<()> {
    if round != 0 {
        return Err(CompressError::Unsupported {
            method,
            msg: format!("one round per step, got round {round}"),
        });
    }
    Ok(())
}

/// A `CompressError::Tensor`.
pub fn tensor_err(method: &'static str, t: TensorId, msg: String) -> CompressError {
    CompressError::Tensor {
        method,
        tensor: t,
        msg,
    }
}

/// Sparse wire (Top-k, DGC): the selected indices, then the values' bits.
pub fn push_pairs(wire: &mut Wire, idx: &[u32], val: &[f32]) {
    wire.gather_u32.extend_from_slice(idx);
    wire.gather_u32.extend(val.iter().map(|v| v.to_bits()));
}

/// A set of indices of a tensor as a bitmap, empty between uses (setup allocates it for
/// the largest tensor): which elements of the output [`scatter_mean`] has written.
#[derive(Debug, Clone, Default)]
pub struct TouchedSet {
    words: Vec<u64>,
}

impl TouchedSet {
    /// Room for indices `0..d` (setup only; allocates and touches).
    pub fn ensure(&mut self, d: usize) {
        let n = d.div_ceil(64);
        if n > self.words.len() {
            self.words = touched_vec(n, 0, 1);
        }
    }

    /// Insert `i`; true when it was not in the set.
    #[inline(always)]
    fn insert(&mut self, i: usize) -> bool {
        let (w, b) = (i / 64, 1u64 << (i % 64));
        let fresh = self.words[w] & b == 0;
        self.words[w] |= b;
        fresh
    }

    /// Empty the set again, given every index inserted.
    fn clear_at<'a>(&mut self, idx: impl Iterator<Item = &'a u32>) {
        for &i in idx {
            self.words[i as usize / 64] = 0;
        }
    }
}

/// Decompress all-gathered sparse sections (docs/methods.md, "topk"): zero `out`, scatter-add
/// every worker's (index, value) pairs in rank order, divide by the number of workers.
///
/// Memory: one write of `out` (4 bytes per element) and the pairs. The division touches
/// only the written entries (each once: `touched` records them): an entry no worker sent
/// stays `0 = 0 / n`, so the result is the division of every entry, without a second
/// pass over `out`.
pub fn scatter_mean(
    method: &'static str,
    t: TensorId,
    received: &Received,
    out: &mut [f32],
    touched: &mut TouchedSet,
) -> Result<()> {
    let n = received.world_size;
    let total: usize = received.gather_counts.iter().sum();
    if n == 0 || received.gather_counts.len() != n || total != received.gathered_u32.len() {
        return Err(tensor_err(
            method,
            t,
            format!("received {} gather sections with {} words in all for {n} workers ({} words present)", received.gather_counts.len(), total, received.gathered_u32.len()),
        ));
    }
    out.fill(0.0);
    let d = out.len();
    let mut start = 0;
    for (w, &c) in received.gather_counts.iter().enumerate() {
        let sec = &received.gathered_u32[start..start + c];
        start += c;
        if c % 2 != 0 {
            return Err(tensor_err(
                method,
                t,
                format!("worker {w} sent {c} words, not index/value pairs"),
            ));
        }
        let (idx, val) = sec.split_at(c / 2);
        for (&i, &v) in idx.iter().zip(val) {
            let slot = out.get_mut(i as usize).ok_or_else(|| {
                tensor_err(
                    method,
                    t,
                    format!("worker {w} sent index {i} outside 0..{d}"),
                )
            })?;
            *slot += f32::from_bits(v);
        }
    }
    if touched.words.len() < d.div_ceil(64) {
        return Err(tensor_err(
            method,
            t,
            format!(
                "touched set holds {} words, {d} elements need {}",
                touched.words.len(),
                d.div_ceil(64)
            ),
        ));
    }
    let nf = n as f32;
    let sent = || {
        let mut start = 0;
        received.gather_counts.iter().flat_map(move |&c| {
            let idx = &received.gathered_u32[start..start + c / 2];
            start += c;
            idx.iter()
        })
    };
    for &i in sent() {
        if touched.insert(i as usize) {
            out[i as usize] /= nf;
        }
    }
    touched.clear_at(sent());
    Ok(())
}

#[cfg(test)]
pub(crate) mod test_support;

#[cfg(test)]
mod tests;
