//! Allocation-free kernels for the 1-bit and sketch methods (EF-SignSGD, Marsit,
//! Count Sketch, QSGD): sign-bit packing, fused error-feedback passes, Bernoulli bit
//! masks built from random words, and small helpers shared by those compressors.
//!
//! **Bit layout** (every packed sign array in gradcomp): bit `i` (LSB = 0) of word `w`
//! holds element `32*w + i`; the bit is **1 when the element is non-negative**, i.e. its
//! IEEE sign bit is clear (`+0.0` gives 1, `-0.0` gives 0). Bits past the last element of
//! the last word are 0 and are ignored by every reader. Decoding maps bit 1 to `+scale`
//! and bit 0 to `-scale`, so `sgn(x)` below always means `copysign(1, x)`.

use ndarray::{ArrayView2, ArrayViewMut2};
use rand::RngCore;

use super::{CompressError, Received, Result, TensorId};

/// Mask of the IEEE-754 sign bit of an f32.
pub const SIGN_BIT: u32 = 0x8000_0000;

/// Number of u32 words holding `d` packed bits: `ceil(d / 32)`.
pub const fn words_for(d: usize) -> usize {
    d.div_ceil(32)
}

/// A 32-element chunk from `chunks_exact(32)` as an array (the length always matches).
#[inline(always)]
pub fn arr32<T>(c: &[T]) -> &[T; 32] {
    c.try_into().expect("chunks_exact(32)")
}

/// Mutable form of [`arr32`].
#[inline(always)]
pub fn arr32_mut<T>(c: &mut [T]) -> &mut [T; 32] {
    c.try_into().expect("chunks_exact_mut(32)")
}

/// Packed sign bit of 32 values (bit i = 1 iff `x[i]`'s sign bit is clear).
#[inline(always)]
fn sign_word(x: &[f32; 32]) -> u32 {
    simd::sign_word(x)
}

/// Hot loops: SSE2 (baseline on every x86-64 CPU, so no runtime detection) with a
/// portable fallback written so the compiler can vectorise it.
#[cfg(target_arch = "x86_64")]
mod simd {
    use core::arch::x86_64::*;

    /// Packed sign bits of 32 values via `movemask` (which yields 1 for a set sign bit).
    #[inline(always)]
    pub fn sign_word(x: &[f32; 32]) -> u32 {
        let mut w = 0u32;
        for k in 0..8 {
            // SAFETY: SSE2 is part of x86-64; 4*k + 3 < 32 = x.len(); unaligned loads allowed.
            w |= unsafe { _mm_movemask_ps(_mm_loadu_ps(x.as_ptr().add(4 * k))) as u32 } << (4 * k);
        }
        !w
    }

    /// Whether the CPU has AVX2 (cached by `std`).
    #[inline]
    pub fn has_avx2() -> bool {
        std::is_x86_feature_detected!("avx2")
    }

    /// [`ef_block`] with 8-wide AVX2 (half the instructions per element: the pass is
    /// memory-bound only once the loop is this cheap). Same `e` and sign bits; the norm is
    /// summed in 8 lanes instead of 4 (f32 rounding differs).
    ///
    /// # Safety
    /// The CPU must support AVX2 ([`has_avx2`]). The slices need no further contract:
    /// their lengths are checked (a mismatch panics).
    #[target_feature(enable = "avx2")]
    pub unsafe fn ef_block_avx2(g: &[f32], e: &mut [f32], lag_bits: u32, words: &mut [u32]) -> f64 {
        assert!(g.len() == e.len() && g.len() % 32 == 0 && words.len() >= g.len() / 32);
        // SAFETY: the AVX2 intrinsics run on a CPU with AVX2 (this function's contract);
        // every load and store touches elements at..at + 7 with at + 7 < g.len() ==
        // e.len() (asserted above) or the 8-element `lanes`, unaligned access allowed.
        unsafe {
            let sign = _mm256_castsi256_ps(_mm256_set1_epi32(i32::MIN));
            let lag = _mm256_castsi256_ps(_mm256_set1_epi32(lag_bits as i32));
            let mut acc = [_mm256_setzero_ps(); 2];
            for (c, w) in words[..g.len() / 32].iter_mut().enumerate() {
                let mut m = 0u32;
                for k in 0..4 {
                    let at = 32 * c + 8 * k;
                    let gv = _mm256_loadu_ps(g.as_ptr().add(at));
                    let ev = _mm256_loadu_ps(e.as_ptr().add(at));
                    let corr = _mm256_or_ps(_mm256_and_ps(ev, sign), lag);
                    let p = _mm256_add_ps(gv, _mm256_sub_ps(ev, corr));
                    _mm256_storeu_ps(e.as_mut_ptr().add(at), p);
                    acc[k & 1] = _mm256_add_ps(acc[k & 1], _mm256_andnot_ps(sign, p));
                    m |= (_mm256_movemask_ps(p) as u32) << (8 * k);
                }
                *w = !m;
            }
            let mut lanes = [0.0f32; 8];
            _mm256_storeu_ps(lanes.as_mut_ptr(), _mm256_add_ps(acc[0], acc[1]));
            lanes.iter().map(|&a| a as f64).sum()
        }
    }

    /// [`super::fused_ef_pack`] on a block of at most 1024 elements (a multiple of 32):
    /// returns the block's L1 norm (f32 lanes, then f64).
    #[inline]
    pub fn ef_block(g: &[f32], e: &mut [f32], lag_bits: u32, words: &mut [u32]) -> f64 {
        assert!(g.len() == e.len() && g.len() % 32 == 0 && words.len() >= g.len() / 32);
        // SAFETY: SSE2 (all intrinsics here) is part of the x86-64 baseline; no memory access.
        let sign = unsafe { _mm_castsi128_ps(_mm_set1_epi32(i32::MIN)) };
        // SAFETY: as for `sign`.
        let lag = unsafe { _mm_castsi128_ps(_mm_set1_epi32(lag_bits as i32)) };
        // SAFETY: as for `sign`.
        let mut acc = unsafe { [_mm_setzero_ps(); 2] };
        for (c, w) in words[..g.len() / 32].iter_mut().enumerate() {
            let mut m = 0u32;
            for k in 0..8 {
                let at = 32 * c + 4 * k;
                // SAFETY: SSE2 is baseline; at + 3 < g.len() == e.len() (asserted above), so
                // the loads and the store stay in bounds (unaligned access allowed).
                unsafe {
                    let gv = _mm_loadu_ps(g.as_ptr().add(at));
                    let ev = _mm_loadu_ps(e.as_ptr().add(at));
                    let corr = _mm_or_ps(_mm_and_ps(ev, sign), lag);
                    let p = _mm_add_ps(gv, _mm_sub_ps(ev, corr));
                    _mm_storeu_ps(e.as_mut_ptr().add(at), p);
                    acc[k & 1] = _mm_add_ps(acc[k & 1], _mm_andnot_ps(sign, p));
                    m |= (_mm_movemask_ps(p) as u32) << (4 * k);
                }
            }
            *w = !m;
        }
        let mut lanes = [0.0f32; 4];
        // SAFETY: SSE2 is baseline; 4 lanes stored into a 4-element array.
        unsafe { _mm_storeu_ps(lanes.as_mut_ptr(), _mm_add_ps(acc[0], acc[1])) };
        lanes.iter().map(|&a| a as f64).sum()
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod simd {
    use super::{arr32, arr32_mut, SIGN_BIT};

    #[inline(always)]
    pub fn sign_word(x: &[f32; 32]) -> u32 {
        let mut w = 0u32;
        for (i, v) in x.iter().enumerate() {
            w |= ((v.to_bits() >> 31) ^ 1) << i;
        }
        w
    }

    #[inline]
    pub fn ef_block(g: &[f32], e: &mut [f32], lag_bits: u32, words: &mut [u32]) -> f64 {
        let mut acc = [0.0f32; 8];
        for ((g, e), w) in g
            .chunks_exact(32)
            .map(arr32)
            .zip(e.chunks_exact_mut(32).map(arr32_mut))
            .zip(words.iter_mut())
        {
            let mut m = 0u32;
            for i in 0..32 {
                let corr = f32::from_bits((e[i].to_bits() & SIGN_BIT) | lag_bits);
                let p = g[i] + (e[i] - corr);
                e[i] = p;
                acc[i % 8] += p.abs();
                m |= ((p.to_bits() >> 31) ^ 1) << i;
            }
            *w = m;
        }
        acc.iter().map(|&a| a as f64).sum()
    }
}

/// Sign bits of `x` into `out[..words_for(x.len())]` (layout in the module docs).
///
/// # Panics
/// If `out` is shorter than `words_for(x.len())` (callers size it in setup).
pub fn pack_signs(x: &[f32], out: &mut [u32]) {
    let out = &mut out[..words_for(x.len())];
    let chunks = x.chunks_exact(32);
    let (full, tail) = (chunks.len(), chunks.remainder());
    for (c, w) in chunks.map(arr32).zip(out.iter_mut()) {
        *w = sign_word(c);
    }
    if !tail.is_empty() {
        let mut buf = [-1.0f32; 32]; // padding packs as 0 bits
        buf[..tail.len()].copy_from_slice(tail);
        out[full] = sign_word(&buf);
    }
}

/// `out[i] = +scale` where bit i is 1, `-scale` where it is 0 (`scale >= 0`), or with
/// `ADD` `out[i] += ±scale`. Reads `words_for(out.len())` words.
#[inline(always)]
fn unpack_impl<const ADD: bool>(words: &[u32], scale: f32, out: &mut [f32]) {
    let words = &words[..words_for(out.len())];
    let sb = scale.abs().to_bits();
    let mut chunks = out.chunks_exact_mut(32);
    let one = |w: u32, i: usize, o: &mut f32| {
        let v = f32::from_bits(sb | ((!(w >> i) & 1) << 31));
        if ADD {
            *o += v
        } else {
            *o = v
        }
    };
    let full = chunks.len();
    for (c, &w) in chunks.by_ref().map(arr32_mut).zip(words.iter()) {
        for (i, o) in c.iter_mut().enumerate() {
            one(w, i, o);
        }
    }
    if let Some(&w) = words.get(full) {
        for (i, o) in chunks.into_remainder().iter_mut().enumerate() {
            one(w, i, o);
        }
    }
}

/// `out[i] = scale * (2 b_i - 1)` for the bits of `words` (`scale >= 0`).
///
/// # Panics
/// If `words` is shorter than `words_for(out.len())`.
pub fn unpack_signs(words: &[u32], scale: f32, out: &mut [f32]) {
    unpack_impl::<false>(words, scale, out)
}

/// `out[i] += scale * (2 b_i - 1)` (accumulating form of [`unpack_signs`]).
pub fn unpack_signs_add(words: &[u32], scale: f32, out: &mut [f32]) {
    unpack_impl::<true>(words, scale, out)
}

/// Fused error-feedback pass (one read of `g`, one read and write of `e`):
/// `p_i = g_i + (e_i - lag * sgn(e_i))`, stored back into `e`; returns `||p||_1`
/// (accumulated in f32 lanes per 1024 elements, then in f64) and writes the packed signs
/// of `p` to `words`. With `lag = 0` this is plain `p = g + e`; EF-SignSGD passes its
/// previous scale so that the previous step's `e = p - scale * sgn(p)` (Karimireddy et
/// al., 2019, Alg. 1) is applied lazily here instead of in a separate pass.
///
/// # Panics
/// If `g.len() != e.len()` or `words` is shorter than `words_for(g.len())`.
pub fn fused_ef_pack(g: &[f32], e: &mut [f32], lag: f32, words: &mut [u32]) -> f64 {
    fused_ef_pack_on(g, e, lag, words, true)
}

/// [`fused_ef_pack`] on the AVX2 lanes when `avx2` is asked and the CPU has it, else on
/// the SSE2 (or portable) lanes: the tests run both paths on an AVX2 machine.
fn fused_ef_pack_on(g: &[f32], e: &mut [f32], lag: f32, words: &mut [u32], avx2: bool) -> f64 {
    assert_eq!(g.len(), e.len(), "fused_ef_pack: length mismatch");
    let words = &mut words[..words_for(g.len())];
    let lag_bits = lag.abs().to_bits();
    let mut total = 0.0f64;
    let full = g.len() / 32 * 32;
    let (gc, gt) = g.split_at(full);
    let (ec, et) = e.split_at_mut(full);
    #[cfg(target_arch = "x86_64")]
    let avx2 = use_avx2(avx2, simd::has_avx2());
    #[cfg(not(target_arch = "x86_64"))]
    let _ = avx2;
    for ((gb, eb), wb) in gc
        .chunks(1024)
        .zip(ec.chunks_mut(1024))
        .zip(words.chunks_mut(32))
    {
        #[cfg(target_arch = "x86_64")]
        if avx2 {
            // SAFETY: AVX2 is present (checked above).
            total += unsafe { simd::ef_block_avx2(gb, eb, lag_bits, wb) };
            continue;
        }
        total += simd::ef_block(gb, eb, lag_bits, wb);
    }
    if !gt.is_empty() {
        let mut pbuf = [-1.0f32; 32]; // padding packs as 0 bits
        for ((g, e), p) in gt.iter().zip(et.iter_mut()).zip(pbuf.iter_mut()) {
            *e = g + (*e - f32::from_bits((e.to_bits() & SIGN_BIT) | lag_bits));
            *p = *e;
            total += e.abs() as f64;
        }
        words[full / 32] = sign_word(&pbuf);
    }
    total
}

/// Whether [`fused_ef_pack_on`] runs the AVX2 lanes: only when they are asked for and
/// the CPU has AVX2 (an AVX2 instruction where it has not is SIGILL); else SSE2.
#[cfg(target_arch = "x86_64")]
fn use_avx2(asked: bool, cpu_has_avx2: bool) -> bool {
    asked && cpu_has_avx2
}

/// `e_i -= lag * sgn(e_i)` in place: materialises a lazily applied EF-SignSGD residual
/// (see [`fused_ef_pack`]).
pub fn apply_lag(e: &mut [f32], lag: f32) {
    let lag_bits = lag.abs().to_bits();
    for v in e.iter_mut() {
        *v -= f32::from_bits((v.to_bits() & SIGN_BIT) | lag_bits);
    }
}

/// Binary digits used for Bernoulli masks: the realised probability is the expansion
/// truncated to this many digits, so it is below the target by less than `2^-24`
/// (exact when the target is a dyadic fraction with at most 24 digits, e.g. 1/2, 1/4).
pub const MASK_DIGITS: u32 = 24;

/// Generator of random 64-bit masks whose bits are independently 1 with probability
/// `num/den` (truncated to [`MASK_DIGITS`] binary digits), using one random word per
/// digit instead of one RNG call per bit.
///
/// With binary digits `b_1 b_2 ... b_K` of the probability, start from `m = 0` and for
/// `k = K, ..., 1` set `m = r_k | m` if `b_k = 1`, else `m = r_k & m`, with fresh uniform
/// words `r_k`. If `q_{k+1}` is the probability of a bit of `m` before step `k`, after it
/// `q_k = (b_k + q_{k+1}) / 2`, so `q_1 = sum_k b_k 2^-k`: the truncated expansion.
/// Trailing zero digits leave `m = 0` unchanged and are skipped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BernoulliMask {
    /// Digit `b_k` is bit `MASK_DIGITS - k` (MSB first).
    digits: u32,
    /// Index (1-based) of the last 1 digit; 0 = probability 0.
    len: u32,
}

impl BernoulliMask {
    /// Masks with probability `num / den` (clamped to [0, 1]; `den = 0` gives 0).
    pub fn new(num: u64, den: u64) -> Self {
        if den == 0 || num == 0 {
            return BernoulliMask { digits: 0, len: 0 };
        }
        if num >= den {
            // probability 1: all digits of 0.111... (bias 2^-K), handled exactly in `next`.
            return BernoulliMask {
                digits: u32::MAX >> (32 - MASK_DIGITS),
                len: u32::MAX,
            };
        }
        // long division in binary: digit k = floor(2 * rem / den)
        let (mut rem, mut digits) = (num as u128, 0u32);
        for _ in 0..MASK_DIGITS {
            rem *= 2;
            digits <<= 1;
            if rem >= den as u128 {
                digits |= 1;
                rem -= den as u128;
            }
        }
        let len = if digits == 0 {
            0
        } else {
            MASK_DIGITS - digits.trailing_zeros()
        };
        BernoulliMask { digits, len }
    }

    /// The exact probability of a mask bit being 1.
    #[cfg(test)]
    fn prob(&self) -> f64 {
        if self.len == u32::MAX {
            1.0
        } else {
            self.digits as f64 / (1u64 << MASK_DIGITS) as f64
        }
    }

    /// One mask word (64 independent bits); draws `len` words from `rng`.
    #[inline]
    pub fn next<R: RngCore>(&self, rng: &mut R) -> u64 {
        if self.len == u32::MAX {
            return u64::MAX;
        }
        let mut m = 0u64;
        for k in (1..=self.len).rev() {
            let r = rng.next_u64();
            m = if (self.digits >> (MASK_DIGITS - k)) & 1 == 1 {
                r | m
            } else {
                r & m
            };
        }
        m
    }
}

/// `own = (incoming & !mask) | (own & mask)` word by word, with mask bits 1 with the
/// probability of `mask` (each u64 mask word covers two u32 words).
///
/// # Panics
/// If the lengths differ.
pub fn merge_masked<R: RngCore>(
    incoming: &[u32],
    own: &mut [u32],
    mask: &BernoulliMask,
    rng: &mut R,
) {
    assert_eq!(incoming.len(), own.len(), "merge_masked: length mismatch");
    let (ic, oc) = (incoming.chunks_exact(2), own.chunks_exact_mut(2));
    let it = ic.remainder();
    let mut oc = oc;
    for (i, o) in ic.zip(oc.by_ref()) {
        let m = mask.next(rng);
        let (lo, hi) = (m as u32, (m >> 32) as u32);
        o[0] = (i[0] & !lo) | (o[0] & lo);
        o[1] = (i[1] & !hi) | (o[1] & hi);
    }
    if let (Some(&i), Some(o)) = (it.first(), oc.into_remainder().first_mut()) {
        let m = mask.next(rng) as u32;
        *o = (i & !m) | (*o & m);
    }
}

// ---------------------------------------------------------------------------------------
// Small helpers shared by the compressors in signsgd.rs, marsit.rs, sketch.rs, qsgd.rs.

/// A [`CompressError::Tensor`].
pub(crate) fn tensor_err(
    method: &'static str,
    t: TensorId,
    msg: impl Into<String>,
) -> CompressError {
    CompressError::Tensor {
        method,
        tensor: t,
        msg: msg.into(),
    }
}

/// A [`CompressError::BadParam`].
pub(crate) fn bad_param(
    method: &'static str,
    key: &'static str,
    value: impl ToString,
    allowed: &str,
) -> CompressError {
    CompressError::BadParam {
        method,
        key,
        value: value.to_string(),
        allowed: allowed.into(),
    }
}

/// Validate `density` in (0, 1].
pub(crate) fn check_density(method: &'static str, rho: f64) -> Result<()> {
    if rho > 0.0 && rho <= 1.0 {
        Ok(())
    } else {
        Err(bad_param(method, "density", rho, "must be in (0, 1]"))
    }
}

/// Per-tensor state plus its registered shape.
#[derive(Debug, Clone)]
pub(crate) struct Slot<S> {
    pub rows: usize,
    pub cols: usize,
    pub s: S,
}

impl<S> Slot<S> {
    pub fn d(&self) -> usize {
        self.rows * self.cols
    }
}

/// `rows * cols`, or an error if it overflows.
pub(crate) fn checked_len(
    method: &'static str,
    t: TensorId,
    rows: usize,
    cols: usize,
) -> Result<usize> {
    rows.checked_mul(cols).ok_or_else(|| {
        tensor_err(
            method,
            t,
            format!("{rows} x {cols} elements overflow usize"),
        )
    })
}

/// Store `s` as tensor `t`'s state (setup only; grows `slots`).
pub(crate) fn put_slot<S>(
    slots: &mut Vec<Option<Slot<S>>>,
    t: TensorId,
    rows: usize,
    cols: usize,
    s: S,
) {
    if slots.len() <= t {
        slots.resize_with(t + 1, || None);
    }
    slots[t] = Some(Slot { rows, cols, s });
}

/// Tensor `t`'s state, or an error if it was not registered.
pub(crate) fn slot<'a, S>(
    method: &'static str,
    slots: &'a mut [Option<Slot<S>>],
    t: TensorId,
) -> Result<&'a mut Slot<S>> {
    slots
        .get_mut(t)
        .and_then(|s| s.as_mut())
        .ok_or_else(|| tensor_err(method, t, "not registered; call register first"))
}

/// `a` as a contiguous slice of the registered shape.
pub(crate) fn input_slice<'a, S>(
    method: &'static str,
    t: TensorId,
    sl: &Slot<S>,
    a: &ArrayView2<'a, f32>,
) -> Result<&'a [f32]> {
    if a.dim() != (sl.rows, sl.cols) {
        return Err(tensor_err(
            method,
            t,
            format!(
                "shape {:?} differs from registered {:?}",
                a.dim(),
                (sl.rows, sl.cols)
            ),
        ));
    }
    a.to_slice().ok_or_else(|| {
        tensor_err(
            method,
            t,
            "input is not contiguous (standard layout required)",
        )
    })
}

/// `a` as a contiguous mutable slice of the registered shape.
pub(crate) fn output_slice<'a, S>(
    method: &'static str,
    t: TensorId,
    sl: &Slot<S>,
    a: ArrayViewMut2<'a, f32>,
) -> Result<&'a mut [f32]> {
    if a.dim() != (sl.rows, sl.cols) {
        return Err(tensor_err(
            method,
            t,
            format!(
                "output shape {:?} differs from registered {:?}",
                a.dim(),
                (sl.rows, sl.cols)
            ),
        ));
    }
    a.into_slice().ok_or_else(|| {
        tensor_err(
            method,
            t,
            "output is not contiguous (standard layout required)",
        )
    })
}

/// Check that every worker gathered exactly `each` words (so [`Received::gathered`] is safe).
pub(crate) fn check_gathered(
    method: &'static str,
    t: TensorId,
    r: &Received,
    each: usize,
) -> Result<()> {
    let n = r.world_size;
    if n == 0
        || r.gather_counts.len() != n
        || r.gather_counts.iter().any(|&c| c != each)
        || r.gathered_u32.len() != n * each
    {
        return Err(tensor_err(
            method,
            t,
            format!(
                "gathered {} words in sections {:?} from {} workers; expected {} words per worker",
                r.gathered_u32.len(),
                r.gather_counts,
                n,
                each
            ),
        ));
    }
    Ok(())
}

/// Allocate a zeroed buffer and touch it (first touch of fresh pages is ~4x slower, so
/// it happens in setup; not under [`super::setup::untouched_registration`]).
pub(crate) fn touched_zeros<T: Copy + Default>(len: usize) -> Vec<T> {
    let mut v = vec![T::default(); len];
    if !super::setup::touching() {
        return v;
    }
    for x in v.iter_mut() {
        // A volatile store so the touch is not elided.
        // SAFETY: `x` comes from a `&mut T` into the initialised vector: valid for writes
        // and aligned; `T: Copy` has no destructor to skip.
        unsafe { std::ptr::write_volatile(x, T::default()) };
    }
    v
}

#[cfg(test)]
mod tests;
