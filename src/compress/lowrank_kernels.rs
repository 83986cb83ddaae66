//! Streaming small-rank kernels for Power-SGD (Vogels, Karimireddy & Jaggi, NeurIPS 2019,
//! Algorithm 1 with error feedback) and ACP-SGD (Zhang, Shi, Wang & Li, ICDCS 2023, §IV).
//!
//! For rank `r <= MAX_FUSED_RANK` the products `P = p Q`, `Q = p^T P` and `P Q^T` are
//! skinny (`r` FMAs per element of the big `rows x cols` matrix), so they are bound by
//! memory traffic, not arithmetic; BLAS `sgemm` treats them as general products and runs
//! far below the memory bandwidth. These kernels instead make exactly one pass over the
//! big matrix per product and fuse into that pass everything else that touches it:
//! - [`add_project_rows`]: the error-feedback add `p = g + e` (stored back into `e`), the
//!   product `P = p Q`, and optionally (ACP-SGD P step) the residual `e = p - P Q^T` while
//!   the row is still in L1;
//! - [`add_project_t`]: `p = g + e` (optional) and `Q = p^T P` in one pass; with the
//!   residual (ACP-SGD Q step), which needs the complete `Q`, one more pass
//!   `e = p - P Q^T`;
//! - [`reconstruct`]: `out = alpha P Q^T` and optionally `e -= out` in the same pass.
//!
//! The results equal the BLAS formulation up to floating-point reassociation. The code is
//! generic over the rank (`const R`, one 8-lane accumulator per rank column) and over
//! the lane type: `__m256` inside functions compiled with AVX2 + FMA (chosen by runtime
//! detection), a portable `[f32; 8]` otherwise (the x86-64 SSE2 baseline). No fused
//! multiply-add is used, so both give bit-identical results.
//!
//! Layouts: the big matrices `e`, `g`, `out` are row-major `rows x cols` slices; `p` is
//! column-major `rows x r`, `q` column-major `cols x r` (as in [`super::orth::LowRank`]).
//!
//! Files: this one holds the constants, the lanes (`V8`: portable and AVX2), the
//! runtime dispatch and the helpers the kernels share; each kernel family has its own
//! file: `project_rows.rs`, `project_t.rs`, `recon.rs`.

/// Largest rank handled by these kernels; larger ranks use BLAS.
pub const MAX_FUSED_RANK: usize = 8;

/// Vector width (f32 lanes) of the kernels.
const L: usize = 8;

/// Largest `cols * r` for which `Q` is accumulated over whole rows; wider matrices are
/// processed in column bands of [`BAND`] columns so that `Q`'s band stays in L2.
const WHOLE_ROW_Q: usize = 64 * 1024;

/// Band width (columns) for wide matrices.
const BAND: usize = 4096;

/// Outputs of at least this size are written with streaming (non-temporal) stores: they
/// exceed the caches, and a plain store would first read each line (write-allocate).
const STREAM_MIN_BYTES: usize = 16 << 20;

/// Software prefetch distance (f32 elements) on each streamed row of the big matrices
/// (`add_project_t`, `reconstruct`, the residual pass; not `add_project_rows`, whose
/// four-row sweeps run faster without it on huge pages).
/// A stream needs `latency x bandwidth` bytes in flight to run at the memory's speed
/// (about 100 ns x 25 GB/s = 2.5 KB on one core), shared by the 2-4 rows a kernel streams
/// at once: 1 KiB ahead per row. The hardware prefetchers stop at every 4 KiB page and
/// restart at every row of a row block, which left these kernels latency-bound at 55-65%
/// of a plain streaming loop of the same traffic (docs/performance.md, "Compression
/// kernels").
const AHEAD: usize = 256;

/// Rows accumulated together into `Q` (one load/store of `Q` per `RB` rows).
const RB: usize = 4;

/// Rows swept together by `add_project_rows` and by `reconstruct` with the residual, so
/// that each factor chunk loaded from L2 serves every row of the block: four at rank
/// <= 4 (16 accumulators), else two; fewer only for the last `left` rows.
#[inline(always)]
fn sweep_rows(left: usize, r: usize) -> usize {
    let wide = if r <= 4 { 4 } else { 2 };
    if left >= wide {
        wide
    } else if left >= 2 {
        2
    } else {
        1
    }
}

/// Eight f32 lanes: `__m256` under AVX2 + FMA, `[f32; 8]` otherwise. The loads and
/// stores take raw pointers; callers guarantee `L` readable (writable) elements.
trait V8: Copy {
    /// Load `L` lanes from `p` (no alignment needed).
    ///
    /// # Safety
    /// `p` must be valid for reads of `L` consecutive `f32` (any alignment).
    unsafe fn load(p: *const f32) -> Self;
    /// Store the `L` lanes to `p` (no alignment needed).
    ///
    /// # Safety
    /// `p` must be valid for writes of `L` consecutive `f32` (any alignment), and no
    /// reference to those elements may be live.
    unsafe fn store(self, p: *mut f32);
    /// Store bypassing the caches where the lanes support it; callers issue
    /// [`V8::fence`] after the last one.
    ///
    /// # Safety
    /// As [`V8::store`], and `p` must be 32-byte aligned.
    unsafe fn stream(self, p: *mut f32);
    /// Order streamed stores before later stores (`sfence`).
    fn fence();
    /// Hint that the cache line holding `p` will be read soon (`prefetcht0`); never
    /// faults, so `p` may lie outside any allocation.
    fn prefetch(p: *const f32);
    fn zero() -> Self;
    fn splat(x: f32) -> Self;
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    /// Sum of the lanes in a fixed pairwise order.
    fn hsum(self) -> f32;
}

/// Portable lanes (the SSE2 baseline vectorises the loops).
#[derive(Clone, Copy)]
struct Lanes([f32; L]);

impl V8 for Lanes {
    /// # Safety
    /// As [`V8::load`].
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        // SAFETY: the caller guarantees `L` readable f32 at `p`; read_unaligned needs no
        // alignment.
        Lanes(unsafe { std::ptr::read_unaligned(p as *const [f32; L]) })
    }
    /// # Safety
    /// As [`V8::store`].
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        // SAFETY: the caller guarantees `L` writable f32 at `p`; write_unaligned needs no
        // alignment.
        unsafe { std::ptr::write_unaligned(p as *mut [f32; L], self.0) }
    }
    /// # Safety
    /// As [`V8::stream`].
    #[inline(always)]
    unsafe fn stream(self, p: *mut f32) {
        // SAFETY: the caller's contract for `stream` includes `store`'s.
        unsafe { self.store(p) }
    }
    #[inline(always)]
    fn fence() {}
    #[inline(always)]
    fn prefetch(_p: *const f32) {}
    #[inline(always)]
    fn zero() -> Self {
        Lanes([0.0; L])
    }
    #[inline(always)]
    fn splat(x: f32) -> Self {
        Lanes([x; L])
    }
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        Lanes(std::array::from_fn(|l| self.0[l] + o.0[l]))
    }
    #[inline(always)]
    fn sub(self, o: Self) -> Self {
        Lanes(std::array::from_fn(|l| self.0[l] - o.0[l]))
    }
    #[inline(always)]
    fn mul(self, o: Self) -> Self {
        Lanes(std::array::from_fn(|l| self.0[l] * o.0[l]))
    }
    #[inline(always)]
    fn hsum(self) -> f32 {
        let a = self.0;
        ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]))
    }
}

#[cfg(target_arch = "x86_64")]
mod avx {
    use super::V8;
    use std::arch::x86_64::*;

    /// AVX2 lanes; only used inside `#[target_feature(enable = "avx2,fma")]` functions.
    ///
    /// Invariant (what makes the safe methods below sound): `V = Avx` is instantiated only
    /// by `dispatch!`, inside the `*_avx2` wrappers, which it calls only after
    /// `use_avx2()` found AVX2 and FMA on the running CPU. So the AVX intrinsics in these
    /// methods only ever execute on a CPU that has them.
    #[derive(Clone, Copy)]
    pub(super) struct Avx(__m256);

    impl V8 for Avx {
        /// # Safety
        /// As [`V8::load`], and the CPU must have AVX (the type's invariant).
        #[inline(always)]
        unsafe fn load(p: *const f32) -> Self {
            // SAFETY: AVX is present (type invariant); `L` readable f32 at `p` (caller);
            // loadu needs no alignment.
            Avx(unsafe { _mm256_loadu_ps(p) })
        }
        /// # Safety
        /// As [`V8::store`], and the CPU must have AVX (the type's invariant).
        #[inline(always)]
        unsafe fn store(self, p: *mut f32) {
            // SAFETY: AVX is present (type invariant); `L` writable f32 at `p` (caller);
            // storeu needs no alignment.
            unsafe { _mm256_storeu_ps(p, self.0) }
        }
        /// # Safety
        /// As [`V8::stream`], and the CPU must have AVX (the type's invariant).
        #[inline(always)]
        unsafe fn stream(self, p: *mut f32) {
            // SAFETY: AVX is present (type invariant); `L` writable f32 at `p`, 32-byte
            // aligned as the non-temporal store requires (caller).
            unsafe { _mm256_stream_ps(p, self.0) }
        }
        #[inline(always)]
        fn fence() {
            // SAFETY: sfence is SSE (x86-64 baseline) and touches no memory.
            unsafe { _mm_sfence() }
        }
        #[inline(always)]
        fn prefetch(p: *const f32) {
            // SAFETY: prefetcht0 is SSE (x86-64 baseline); a prefetch never faults and
            // reads nothing architecturally, so any address is sound.
            unsafe { _mm_prefetch(p as *const i8, _MM_HINT_T0) }
        }
        #[inline(always)]
        fn zero() -> Self {
            // SAFETY: AVX is present (type invariant); register-only.
            unsafe { Avx(_mm256_setzero_ps()) }
        }
        #[inline(always)]
        fn splat(x: f32) -> Self {
            // SAFETY: AVX is present (type invariant); register-only.
            unsafe { Avx(_mm256_set1_ps(x)) }
        }
        #[inline(always)]
        fn add(self, o: Self) -> Self {
            // SAFETY: AVX is present (type invariant); register-only.
            unsafe { Avx(_mm256_add_ps(self.0, o.0)) }
        }
        #[inline(always)]
        fn sub(self, o: Self) -> Self {
            // SAFETY: AVX is present (type invariant); register-only.
            unsafe { Avx(_mm256_sub_ps(self.0, o.0)) }
        }
        #[inline(always)]
        fn mul(self, o: Self) -> Self {
            // SAFETY: AVX is present (type invariant); register-only.
            unsafe { Avx(_mm256_mul_ps(self.0, o.0)) }
        }
        #[inline(always)]
        fn hsum(self) -> f32 {
            // (a0+a4, a1+a5, a2+a6, a3+a7), then (x0+x2, x1+x3), then the two: the same
            // order as `Lanes::hsum`.
            // SAFETY: AVX is present (type invariant); register-only.
            unsafe {
                let x = _mm_add_ps(
                    _mm256_castps256_ps128(self.0),
                    _mm256_extractf128_ps(self.0, 1),
                );
                let y = _mm_add_ps(x, _mm_movehl_ps(x, x));
                _mm_cvtss_f32(_mm_add_ss(y, _mm_shuffle_ps(y, y, 1)))
            }
        }
    }
}

/// True when the running CPU has AVX2 and FMA (cached by `std`).
#[inline]
fn use_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Call `$body::<V, R>(args)` for the runtime rank `$r` (1..=8), with `V = Avx` inside
/// the AVX2 + FMA compiled wrapper `$avx` when the CPU has them, else `V = Lanes`.
macro_rules! dispatch {
    ($r:expr, $body:ident, $avx:ident, ($($arg:expr),*)) => {{
        macro_rules! one {
            ($R:literal) => {{
                #[cfg(target_arch = "x86_64")]
                {
                    if use_avx2() {
                        // SAFETY: the CPU supports avx2 and fma (checked at runtime), the
                        // `$avx` wrappers' only contract.
                        return unsafe { $avx::<$R>($($arg),*) };
                    }
                }
                $body::<Lanes, $R>($($arg),*)
            }};
        }
        match $r {
            1 => one!(1),
            2 => one!(2),
            3 => one!(3),
            4 => one!(4),
            5 => one!(5),
            6 => one!(6),
            7 => one!(7),
            8 => one!(8),
            _ => panic!("rank {} above MAX_FUSED_RANK", $r),
        }
    }};
}

/// The `R` columns of a column-major `n x R` matrix.
#[inline(always)]
fn columns<const R: usize>(a: &[f32], n: usize) -> [&[f32]; R] {
    std::array::from_fn(|k| &a[k * n..(k + 1) * n])
}

/// The shape checks shared by [`add_project_rows`] and [`add_project_t`]: `e` (and `g`)
/// `rows x cols`, `P` `rows x r`, `Q` `cols x r`, pending factors shaped like `P` and `Q`.
/// Returns `rows`.
fn check_args(
    e: &[f32],
    g: Option<&[f32]>,
    cols: usize,
    r: usize,
    p_len: usize,
    q_len: usize,
    pending: Option<(&[f32], &[f32])>,
) -> usize {
    let rows = e.len().checked_div(cols).unwrap_or(0);
    assert!(r >= 1 && q_len == cols * r && p_len == rows * r && e.len() == rows * cols);
    if let Some(g) = g {
        assert_eq!(g.len(), e.len());
    }
    if let Some((po, qo)) = pending {
        assert!(po.len() == p_len && qo.len() == q_len);
    }
    rows
}

/// `e -= sum_k c[k] q_k` for one row (or row segment; `qs[k]` as long as `e`).
#[inline(always)]
fn row_sub<V: V8, const R: usize>(e: &mut [f32], c: &[f32; R], qs: &[&[f32]; R]) {
    let n = e.len();
    for qk in qs {
        assert_eq!(qk.len(), n);
    }
    let nc = n / L * L;
    let cv: [V; R] = std::array::from_fn(|k| V::splat(c[k]));
    let ep = e.as_mut_ptr();
    let mut j = 0;
    while j < nc {
        // SAFETY: j + L <= n for e and every qs[k].
        unsafe {
            V::prefetch(ep.add(j).wrapping_add(AHEAD));
            let mut v = V::zero();
            for k in 0..R {
                v = v.add(cv[k].mul(V::load(qs[k].as_ptr().add(j))));
            }
            V::load(ep.add(j)).sub(v).store(ep.add(j));
        }
        j += L;
    }
    for j in nc..n {
        let mut v = 0.0f32;
        for k in 0..R {
            v += c[k] * qs[k][j];
        }
        e[j] -= v;
    }
}

// The kernel families, declared after `dispatch!`: a `macro_rules!` macro is visible
// only in the code that follows it.
mod project_rows;
mod project_t;
mod recon;

pub use project_rows::add_project_rows;
pub use project_t::add_project_t;
pub use recon::reconstruct;

#[cfg(test)]
mod tests;
