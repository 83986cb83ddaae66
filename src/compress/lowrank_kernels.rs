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

/// Rows accumulated together into `Q` (one load/store of `Q` per `RB` rows).
const RB: usize = 4;

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

// ---------------------------------------------------------------------------------------
// P = (g + e) Q, e <- g + e [- P Q^T]

/// For every row `i`: `e_i += g_i` (when `g` is given), `P[i, :] = e_i Q`, and with
/// `residual` also `e_i -= P[i, :] Q^T`, in one pass over `e` (and `g`). `e`, `g`: row-major
/// `rows x cols`; `q`: column-major `cols x r`; `p`: column-major `rows x r`.
///
/// With `pending = Some((P_old, Q_old))` (column-major `rows x r` and `cols x r`), each
/// row first applies a deferred residual `e_i -= P_old[i, :] Q_old^T` in the same sweep
/// as the product (per 8-lane chunk: subtract, add `g`, accumulate): the same arithmetic
/// as the eager pass it replaces, done while the chunk is in registers.
#[allow(clippy::too_many_arguments)] // a fused kernel: every slice and flag is an operand of the one pass
pub fn add_project_rows(
    e: &mut [f32],
    g: Option<&[f32]>,
    cols: usize,
    q: &[f32],
    r: usize,
    p: &mut [f32],
    residual: bool,
    pending: Option<(&[f32], &[f32])>,
) {
    let rows = check_args(e, g, cols, r, p.len(), q.len(), pending);
    if rows == 0 {
        return;
    }
    dispatch!(
        r,
        rows_body,
        rows_avx2,
        (e, g, cols, q, p, residual, pending)
    )
}

/// [`rows_body`] compiled with AVX2 + FMA, lanes [`avx::Avx`].
///
/// # Safety
/// The CPU must support AVX2 and FMA ([`use_avx2`]). Nothing more: the body's raw
/// accesses are guarded by its own length assertions.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn rows_avx2<const R: usize>(
    e: &mut [f32],
    g: Option<&[f32]>,
    cols: usize,
    q: &[f32],
    p: &mut [f32],
    residual: bool,
    pending: Option<(&[f32], &[f32])>,
) {
    rows_body::<avx::Avx, R>(e, g, cols, q, p, residual, pending)
}

#[inline(always)]
fn rows_body<V: V8, const R: usize>(
    e: &mut [f32],
    g: Option<&[f32]>,
    cols: usize,
    q: &[f32],
    p: &mut [f32],
    residual: bool,
    pending: Option<(&[f32], &[f32])>,
) {
    let rows = e.len() / cols;
    let qs = columns::<R>(q, cols);
    let olds = pending.map(|(po, qo)| (columns::<R>(po, rows), columns::<R>(qo, cols)));
    // Two rows per sweep: each factor chunk loaded from L2 serves both rows (the
    // `2 r` factor columns, ~r * 40 KB at 5k columns, do not fit in L1).
    let mut rest = &mut e[..];
    let mut i = 0;
    while !rest.is_empty() {
        let nr = if rest.len() >= 2 * cols { 2 } else { 1 };
        let (block, tail) = std::mem::take(&mut rest).split_at_mut(nr * cols);
        rest = tail;
        let gi = g.map(|g| &g[i * cols..(i + nr) * cols]);
        let po: [[f32; R]; 2] = match &olds {
            Some((po, _)) => std::array::from_fn(|b| {
                std::array::from_fn(|k| if b < nr { po[k][i + b] } else { 0.0 })
            }),
            None => [[0.0; R]; 2],
        };
        let qo = olds.as_ref().map_or(&qs, |(_, qo)| qo);
        let (add, pend) = (gi.is_some(), olds.is_some());
        let pis: [[f32; R]; 2] = if nr == 2 {
            let (e0, e1) = block.split_at_mut(cols);
            let (g0, g1) = gi.map_or((&[][..], &[][..]), |g| g.split_at(cols));
            project_rows_block::<V, R, 2>([e0, e1], [g0, g1], &qs, &po, qo, add, pend)
        } else {
            let one = project_rows_block::<V, R, 1>(
                [block],
                [gi.unwrap_or(&[])],
                &qs,
                &po,
                qo,
                add,
                pend,
            );
            [one[0], [0.0; R]]
        };
        for (b, pi) in pis.iter().enumerate().take(nr) {
            for k in 0..R {
                p[k * rows + i + b] = pi[k];
            }
        }
        if residual {
            for (b, eb) in block.chunks_exact_mut(cols).enumerate() {
                row_sub::<V, R>(eb, &pis[b], &qs);
            }
        }
        i += nr;
    }
}

/// [`row_project`] with its `ADD` / `PEND` flags chosen at run time.
#[inline(always)]
fn project_rows_block<V: V8, const R: usize, const NR: usize>(
    e: [&mut [f32]; NR],
    g: [&[f32]; NR],
    qs: &[&[f32]; R],
    po: &[[f32; R]],
    qos: &[&[f32]; R],
    add: bool,
    pend: bool,
) -> [[f32; R]; NR] {
    match (add, pend) {
        (true, true) => row_project::<V, R, NR, true, true>(e, g, qs, po, qos),
        (false, true) => row_project::<V, R, NR, false, true>(e, g, qs, po, qos),
        (true, false) => row_project::<V, R, NR, true, false>(e, g, qs, po, qos),
        (false, false) => row_project::<V, R, NR, false, false>(e, g, qs, po, qos),
    }
}

/// For each of `NR` rows `b` (sharing every factor load): with `PEND`
/// `e_b -= sum_k po[b][k] qos_k` (a deferred residual, summed as in [`row_sub`]), with
/// `ADD` `e_b += g_b`, and return `e_b Q`; one sweep. Each row's arithmetic is the same
/// as with `NR = 1` (bit-identical results). `g[b]`, `qs[k]`, `qos[k]` as long as `e[b]`.
#[inline(always)]
fn row_project<V: V8, const R: usize, const NR: usize, const ADD: bool, const PEND: bool>(
    mut e: [&mut [f32]; NR],
    g: [&[f32]; NR],
    qs: &[&[f32]; R],
    po: &[[f32; R]],
    qos: &[&[f32]; R],
) -> [[f32; R]; NR] {
    let n = e[0].len();
    for b in 0..NR {
        assert_eq!(e[b].len(), n);
        if ADD {
            assert_eq!(g[b].len(), n);
        }
    }
    assert!(po.len() >= NR);
    for (qk, qok) in qs.iter().zip(qos) {
        assert!(qk.len() == n && qok.len() == n);
    }
    let nc = n / L * L;
    let pov: [[V; R]; NR] = std::array::from_fn(|b| std::array::from_fn(|k| V::splat(po[b][k])));
    let mut acc = [[V::zero(); R]; NR];
    let eps: [*mut f32; NR] = std::array::from_fn(|b| e[b].as_mut_ptr());
    let mut j = 0;
    while j < nc {
        // SAFETY: j + L <= n for every e[b], g[b], qs[k] and qos[k] (asserted lengths);
        // the rows are distinct slices, written only through their own pointer.
        unsafe {
            let q: [V; R] = std::array::from_fn(|k| V::load(qs[k].as_ptr().add(j)));
            let qo: [V; R] = if PEND {
                std::array::from_fn(|k| V::load(qos[k].as_ptr().add(j)))
            } else {
                [V::zero(); R]
            };
            for b in 0..NR {
                let mut pc = V::load(eps[b].add(j));
                if PEND {
                    let mut v = V::zero();
                    for k in 0..R {
                        v = v.add(pov[b][k].mul(qo[k]));
                    }
                    pc = pc.sub(v);
                }
                if ADD {
                    pc = pc.add(V::load(g[b].as_ptr().add(j)));
                }
                if ADD || PEND {
                    pc.store(eps[b].add(j));
                }
                for k in 0..R {
                    acc[b][k] = acc[b][k].add(pc.mul(q[k]));
                }
            }
        }
        j += L;
    }
    let mut out = [[0.0f32; R]; NR];
    for b in 0..NR {
        for k in 0..R {
            out[b][k] = acc[b][k].hsum();
        }
        for j in nc..n {
            // SAFETY: j < n = e[b].len().
            let mut v = unsafe { *eps[b].add(j) };
            if PEND {
                let mut s = 0.0f32;
                for k in 0..R {
                    s += po[b][k] * qos[k][j];
                }
                v -= s;
            }
            if ADD {
                v += g[b][j];
            }
            // SAFETY: as above.
            unsafe { *eps[b].add(j) = v };
            for k in 0..R {
                out[b][k] += v * qs[k][j];
            }
        }
    }
    out
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

// ---------------------------------------------------------------------------------------
// Q = (g + e)^T P, e <- g + e [- P Q^T]

/// `e += g` (when `g` is given) and `Q = e^T P` in one pass (four rows at a time, so each
/// load/store of `Q` serves four rows), then with `residual` a second pass
/// `e -= P Q^T` (the residual needs the complete `Q`). Very wide matrices are processed
/// in column bands so that `Q`'s band stays in L2. (Column panels of all rows, swept
/// twice while in the last-level cache, were measured: the strided row segments made
/// them 2-5x slower than the two sequential passes.) `e`, `g`: row-major
/// `rows x cols`; `p`: column-major `rows x r`; `q`: column-major `cols x r`, overwritten.
///
/// With `pending = Some((P_old, Q_old))`, each block of rows first applies a deferred
/// residual `e_i -= P_old[i, :] Q_old^T` in the same sweep, as in [`add_project_rows`].
#[allow(clippy::too_many_arguments)] // a fused kernel: every slice and flag is an operand of the one pass
pub fn add_project_t(
    e: &mut [f32],
    g: Option<&[f32]>,
    cols: usize,
    p: &[f32],
    r: usize,
    q: &mut [f32],
    residual: bool,
    pending: Option<(&[f32], &[f32])>,
) {
    let rows = check_args(e, g, cols, r, p.len(), q.len(), pending);
    if rows == 0 {
        q.fill(0.0);
        return;
    }
    let width = if cols * r > WHOLE_ROW_Q { BAND } else { cols };
    add_project_t_width(e, g, cols, p, r, q, residual, pending, width)
}

/// [`add_project_t`] with an explicit band width (>= 1).
#[allow(clippy::too_many_arguments)] // a fused kernel: every slice and flag is an operand of the one pass
fn add_project_t_width(
    e: &mut [f32],
    g: Option<&[f32]>,
    cols: usize,
    p: &[f32],
    r: usize,
    q: &mut [f32],
    residual: bool,
    pending: Option<(&[f32], &[f32])>,
    width: usize,
) {
    q.fill(0.0);
    if e.is_empty() {
        return;
    }
    let width = width.max(1);
    dispatch!(
        r,
        cols_body,
        cols_avx2,
        (e, g, cols, p, q, residual, pending, width)
    )
}

/// [`cols_body`] compiled with AVX2 + FMA, lanes [`avx::Avx`].
///
/// # Safety
/// The CPU must support AVX2 and FMA ([`use_avx2`]). Nothing more: the body's raw
/// accesses are guarded by its own length assertions.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)] // a fused kernel: every slice and flag is an operand of the one pass
unsafe fn cols_avx2<const R: usize>(
    e: &mut [f32],
    g: Option<&[f32]>,
    cols: usize,
    p: &[f32],
    q: &mut [f32],
    residual: bool,
    pending: Option<(&[f32], &[f32])>,
    width: usize,
) {
    cols_body::<avx::Avx, R>(e, g, cols, p, q, residual, pending, width)
}

#[inline(always)]
#[allow(clippy::too_many_arguments)] // a fused kernel: every slice and flag is an operand of the one pass
fn cols_body<V: V8, const R: usize>(
    e: &mut [f32],
    g: Option<&[f32]>,
    cols: usize,
    p: &[f32],
    q: &mut [f32],
    residual: bool,
    pending: Option<(&[f32], &[f32])>,
    width: usize,
) {
    let rows = e.len() / cols;
    let ps = columns::<R>(p, rows);
    let olds = pending.map(|(po, qo)| (columns::<R>(po, rows), columns::<R>(qo, cols)));
    let mut j0 = 0;
    while j0 < cols {
        let j1 = (j0 + width).min(cols);
        // Q's band j0..j1, as R separate column slices.
        let mut qb: [&mut [f32]; R] = {
            let mut rest: &mut [f32] = q;
            std::array::from_fn(|_| {
                let (head, tail) = std::mem::take(&mut rest).split_at_mut(cols);
                rest = tail;
                &mut head[j0..j1]
            })
        };
        let mut i = 0;
        while i < rows {
            let nb = if i + RB <= rows { RB } else { 1 };
            macro_rules! block {
                ($NB:expr) => {{
                    let coef: [[f32; R]; $NB] =
                        std::array::from_fn(|b| std::array::from_fn(|k| ps[k][i + b]));
                    match &olds {
                        Some((po, qo)) => {
                            let pend: [[f32; R]; $NB] =
                                std::array::from_fn(|b| std::array::from_fn(|k| po[k][i + b]));
                            let qob: [&[f32]; R] = std::array::from_fn(|k| &qo[k][j0..j1]);
                            band_accumulate::<V, R, $NB, true>(
                                e, g, cols, i, j0, j1, &coef, &mut qb, &pend, &qob,
                            )
                        }
                        None => band_accumulate::<V, R, $NB, false>(
                            e,
                            g,
                            cols,
                            i,
                            j0,
                            j1,
                            &coef,
                            &mut qb,
                            &[[0.0; R]; $NB],
                            &[&[]; R],
                        ),
                    }
                }};
            }
            if nb == RB {
                block!(RB)
            } else {
                block!(1)
            }
            i += nb;
        }
        j0 = j1;
    }
    if residual {
        let qs = columns::<R>(q, cols);
        for (i, ei) in e.chunks_exact_mut(cols).enumerate() {
            let c: [f32; R] = std::array::from_fn(|k| ps[k][i]);
            row_sub::<V, R>(ei, &c, &qs);
        }
    }
}

/// Rows `i..i+NB`, columns `j0..j1`: with `PEND` first `e[i+b] -= sum_k pend[b][k] qob[k]`
/// (a deferred residual, summed as in [`row_sub`]; `qob[k]` is the band of `Q_old`'s
/// column k), then `e += g` (when `g` is given) and
/// `q_k[j] += sum_b e[i+b, j] coef[b][k]` (`qb[k]` is the band `j0..j1` of column k).
#[inline(always)]
#[allow(clippy::too_many_arguments)] // a fused kernel: every slice and flag is an operand of the one pass
fn band_accumulate<V: V8, const R: usize, const NB: usize, const PEND: bool>(
    e: &mut [f32],
    g: Option<&[f32]>,
    cols: usize,
    i: usize,
    j0: usize,
    j1: usize,
    coef: &[[f32; R]; NB],
    qb: &mut [&mut [f32]; R],
    pend: &[[f32; R]; NB],
    qob: &[&[f32]; R],
) {
    let w = j1 - j0;
    let base = i * cols + j0;
    assert!(j1 <= cols && (i + NB - 1) * cols + j1 <= e.len());
    if let Some(g) = g {
        assert_eq!(g.len(), e.len());
    }
    for qk in qb.iter() {
        assert_eq!(qk.len(), w);
    }
    if PEND {
        for qk in qob {
            assert_eq!(qk.len(), w);
        }
    }
    let cv: [[V; R]; NB] = std::array::from_fn(|b| std::array::from_fn(|k| V::splat(coef[b][k])));
    let pendv: [[V; R]; NB] =
        std::array::from_fn(|b| std::array::from_fn(|k| V::splat(pend[b][k])));
    // Raw accesses below: rows i..i+NB, columns j0..j1 lie inside e and g (asserted),
    // the bands have w elements, and j + L <= w in the vector loop.
    // SAFETY: base = i * cols + j0 <= e.len() (asserted), in bounds or one past the end.
    let ep = unsafe { e.as_mut_ptr().add(base) };
    // SAFETY: g.len() == e.len() (asserted), so as for `ep`.
    let gp = g.map(|g| unsafe { g.as_ptr().add(base) });
    let nc = w / L * L;
    let mut j = 0;
    while j < nc {
        // SAFETY: for b < NB, ep + b * cols + j .. + L lies in row i + b, columns
        // j0 + j .. j0 + j + L <= j1 of e (and likewise gp in g); qob[k] and qb[k] have w
        // >= j + L elements (asserted). `e`'s rows are written only through `ep`, and
        // qb's bands are distinct slices, so no reference aliases a write.
        unsafe {
            // Plain loops, not closures: a closure body would not inherit the caller's
            // AVX2 target feature if it were not inlined.
            let mut qo = [V::zero(); R];
            if PEND {
                for k in 0..R {
                    qo[k] = V::load(qob[k].as_ptr().add(j));
                }
            }
            let mut pc = [V::zero(); NB];
            for b in 0..NB {
                let ptr = ep.add(b * cols + j);
                let mut v = V::load(ptr);
                if PEND {
                    let mut s = V::zero();
                    for k in 0..R {
                        s = s.add(pendv[b][k].mul(qo[k]));
                    }
                    v = v.sub(s);
                }
                if let Some(gp) = gp {
                    v = v.add(V::load(gp.add(b * cols + j)));
                }
                if PEND || gp.is_some() {
                    v.store(ptr);
                }
                pc[b] = v;
            }
            for k in 0..R {
                let mut v = pc[0].mul(cv[0][k]);
                for b in 1..NB {
                    v = v.add(pc[b].mul(cv[b][k]));
                }
                let qp = qb[k].as_mut_ptr().add(j);
                V::load(qp).add(v).store(qp);
            }
        }
        j += L;
    }
    for j in nc..w {
        // SAFETY: j < w, so ep + b * cols + j (and gp's) lies in row i + b, columns
        // j0..j1, of e (g): in bounds by the assertions above.
        let pv: [f32; NB] = std::array::from_fn(|b| unsafe {
            let ptr = ep.add(b * cols + j);
            if PEND {
                let mut s = 0.0f32;
                for k in 0..R {
                    s += pend[b][k] * qob[k][j];
                }
                *ptr -= s;
            }
            if let Some(gp) = gp {
                *ptr += *gp.add(b * cols + j);
            }
            *ptr
        });
        for k in 0..R {
            let mut v = pv[0] * coef[0][k];
            for b in 1..NB {
                v += pv[b] * coef[b][k];
            }
            qb[k][j] += v;
        }
    }
}

// ---------------------------------------------------------------------------------------
// out = alpha P Q^T [, e -= out]

/// `out = alpha P Q^T`, and with `e` also `e -= out`, in one pass. `out`, `e`: row-major
/// `rows x cols`; `p`: column-major `rows x r`; `q`: column-major `cols x r`.
pub fn reconstruct(
    alpha: f32,
    p: &[f32],
    q: &[f32],
    r: usize,
    cols: usize,
    out: &mut [f32],
    e: Option<&mut [f32]>,
) {
    let rows = out.len().checked_div(cols).unwrap_or(0);
    assert!(r >= 1 && q.len() == cols * r && p.len() == rows * r && out.len() == rows * cols);
    if let Some(e) = &e {
        assert_eq!(e.len(), out.len());
    }
    if rows == 0 {
        return;
    }
    dispatch!(r, recon_body, recon_avx2, (alpha, p, q, cols, out, e))
}

/// [`recon_body`] compiled with AVX2 + FMA, lanes [`avx::Avx`].
///
/// # Safety
/// The CPU must support AVX2 and FMA ([`use_avx2`]). Nothing more: the body's raw
/// accesses are guarded by its own length assertions.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn recon_avx2<const R: usize>(
    alpha: f32,
    p: &[f32],
    q: &[f32],
    cols: usize,
    out: &mut [f32],
    e: Option<&mut [f32]>,
) {
    recon_body::<avx::Avx, R>(alpha, p, q, cols, out, e)
}

#[inline(always)]
fn recon_body<V: V8, const R: usize>(
    alpha: f32,
    p: &[f32],
    q: &[f32],
    cols: usize,
    out: &mut [f32],
    mut e: Option<&mut [f32]>,
) {
    let rows = out.len() / cols;
    let qs = columns::<R>(q, cols);
    let stream = out.len() * 4 >= STREAM_MIN_BYTES;
    for (i, oi) in out.chunks_exact_mut(cols).enumerate() {
        let c: [f32; R] = std::array::from_fn(|k| alpha * p[k * rows + i]);
        let cv: [V; R] = std::array::from_fn(|k| V::splat(c[k]));
        let mut ei = e.as_deref_mut().map(|e| &mut e[i * cols..(i + 1) * cols]);
        let op = oi.as_mut_ptr();
        // Streamed stores need 32-byte alignment: the row's unaligned head is scalar.
        let head = if stream {
            ((32 - op as usize % 32) % 32 / 4).min(cols)
        } else {
            0
        };
        let nc = head + (cols - head) / L * L;
        // The scalar element: the vector loop's sum order, so the results are identical.
        let scalar = |j: usize| {
            let mut v = 0.0f32;
            for k in 0..R {
                v += c[k] * qs[k][j];
            }
            v
        };
        for j in (0..head).chain(nc..cols) {
            let v = scalar(j);
            oi[j] = v;
            if let Some(ei) = ei.as_deref_mut() {
                ei[j] -= v;
            }
        }
        let mut j = head;
        while j < nc {
            // SAFETY: j + L <= cols for the row of out, of e and every qs[k]; with
            // `stream`, op + j is 32-byte aligned (j - head is a multiple of L).
            unsafe {
                let mut v = V::zero();
                for k in 0..R {
                    v = v.add(cv[k].mul(V::load(qs[k].as_ptr().add(j))));
                }
                if stream {
                    v.stream(op.add(j));
                } else {
                    v.store(op.add(j));
                }
                if let Some(ei) = ei.as_deref_mut() {
                    let ptr = ei.as_mut_ptr().add(j);
                    V::load(ptr).sub(v).store(ptr);
                }
            }
            j += L;
        }
    }
    if stream {
        V::fence();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{Array2, ShapeBuilder};
    use rand::{Rng, SeedableRng};
    use rand_distr::StandardNormal;
    use rand_pcg::Pcg64Mcg;

    fn randn(rows: usize, cols: usize, colmajor: bool, rng: &mut Pcg64Mcg) -> Array2<f32> {
        let shape = if colmajor {
            (rows, cols).f()
        } else {
            (rows, cols).into_shape_with_order()
        };
        Array2::from_shape_simple_fn(shape, || rng.sample(StandardNormal))
    }

    fn cm(a: &Array2<f32>) -> &[f32] {
        assert!(a.t().is_standard_layout());
        a.as_slice_memory_order().unwrap()
    }

    fn close(a: &Array2<f32>, b: &Array2<f32>, what: &str) {
        assert_eq!(a.dim(), b.dim(), "{what}");
        let scale = b.iter().fold(1.0f32, |m, v| m.max(v.abs()));
        let err = a
            .iter()
            .zip(b.iter())
            .fold(0.0f32, |m, (x, y)| m.max((x - y).abs()));
        assert!(
            err <= 2e-5 * scale * (a.len() as f32).sqrt().max(1.0),
            "{what}: max error {err} (scale {scale})"
        );
    }

    const SHAPES: [(usize, usize); 7] = [
        (1, 1),
        (3, 7),
        (9, 17),
        (33, 8),
        (64, 100),
        (101, 37),
        (5, 300),
    ];

    #[test]
    fn project_rows_matches_blas() {
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        for &(rows, cols) in &SHAPES {
            for r in 1..=MAX_FUSED_RANK {
                let g = randn(rows, cols, false, &mut rng);
                let e0 = randn(rows, cols, false, &mut rng);
                let q = randn(cols, r, true, &mut rng);
                let pm = &g + &e0;
                let want_p = pm.dot(&q);
                for residual in [false, true] {
                    let mut e = e0.clone();
                    let mut p = Array2::<f32>::zeros((rows, r).f());
                    add_project_rows(
                        e.as_slice_mut().unwrap(),
                        Some(g.as_slice().unwrap()),
                        cols,
                        cm(&q),
                        r,
                        p.as_slice_memory_order_mut().unwrap(),
                        residual,
                        None,
                    );
                    close(&p, &want_p, &format!("P {rows}x{cols} r{r}"));
                    let want_e = if residual {
                        &pm - &want_p.dot(&q.t())
                    } else {
                        pm.clone()
                    };
                    close(
                        &e,
                        &want_e,
                        &format!("e {rows}x{cols} r{r} residual {residual}"),
                    );
                }
                // Without the add.
                let mut e = pm.clone();
                let mut p = Array2::<f32>::zeros((rows, r).f());
                add_project_rows(
                    e.as_slice_mut().unwrap(),
                    None,
                    cols,
                    cm(&q),
                    r,
                    p.as_slice_memory_order_mut().unwrap(),
                    false,
                    None,
                );
                close(&p, &want_p, "P no add");
                assert_eq!(e, pm);
            }
        }
    }

    #[test]
    fn project_t_matches_blas() {
        let mut rng = Pcg64Mcg::seed_from_u64(2);
        for &(rows, cols) in &SHAPES {
            for r in 1..=MAX_FUSED_RANK {
                let g = randn(rows, cols, false, &mut rng);
                let e0 = randn(rows, cols, false, &mut rng);
                let p = randn(rows, r, true, &mut rng);
                let pm = &g + &e0;
                let want_q = pm.t().dot(&p);
                for width in [0usize, 1, 5, 16, 24] {
                    for residual in [false, true] {
                        let mut e = e0.clone();
                        let mut q = Array2::<f32>::from_elem((cols, r).f(), f32::NAN);
                        let (es, gs, qs) = (
                            e.as_slice_mut().unwrap(),
                            Some(g.as_slice().unwrap()),
                            q.as_slice_memory_order_mut().unwrap(),
                        );
                        if width == 0 {
                            add_project_t(es, gs, cols, cm(&p), r, qs, residual, None);
                        } else {
                            add_project_t_width(es, gs, cols, cm(&p), r, qs, residual, None, width);
                        }
                        let what = format!("{rows}x{cols} r{r} width {width} residual {residual}");
                        close(&q, &want_q, &format!("Q {what}"));
                        let want_e = if residual {
                            &pm - &p.dot(&want_q.t())
                        } else {
                            pm.clone()
                        };
                        close(&e, &want_e, &format!("e {what}"));
                    }
                }
                let mut e = pm.clone();
                let mut q = Array2::<f32>::zeros((cols, r).f());
                add_project_t(
                    e.as_slice_mut().unwrap(),
                    None,
                    cols,
                    cm(&p),
                    r,
                    q.as_slice_memory_order_mut().unwrap(),
                    false,
                    None,
                );
                close(&q, &want_q, "Q no add");
                assert_eq!(e, pm);
            }
        }
    }

    #[test]
    fn deferred_residual_in_both_passes_matches_blas() {
        // pending = (P_old, Q_old): e = e0 - P_old Q_old^T + g, then P = e Q / Q = e^T P, in
        // one sweep; AVX2 and portable lanes bit-identical.
        let mut rng = Pcg64Mcg::seed_from_u64(5);
        for &(rows, cols) in &SHAPES {
            for r in [1usize, 3, 4, 8] {
                let g = randn(rows, cols, false, &mut rng);
                let e0 = randn(rows, cols, false, &mut rng);
                let (po, qo) = (
                    randn(rows, r, true, &mut rng),
                    randn(cols, r, true, &mut rng),
                );
                let (q, p) = (
                    randn(cols, r, true, &mut rng),
                    randn(rows, r, true, &mut rng),
                );
                let pm = &(&e0 - &po.dot(&qo.t())) + &g;
                let pend = Some((cm(&po), cm(&qo)));
                let mut e = e0.clone();
                let mut pout = Array2::<f32>::zeros((rows, r).f());
                let (es, gs) = (e.as_slice_mut().unwrap(), Some(g.as_slice().unwrap()));
                add_project_rows(
                    es,
                    gs,
                    cols,
                    cm(&q),
                    r,
                    pout.as_slice_memory_order_mut().unwrap(),
                    false,
                    pend,
                );
                close(&e, &pm, &format!("rows e {rows}x{cols} r{r}"));
                close(&pout, &pm.dot(&q), &format!("rows P {rows}x{cols} r{r}"));
                for width in [cols, 5] {
                    let mut e2 = e0.clone();
                    let mut qout = Array2::<f32>::zeros((cols, r).f());
                    let es = e2.as_slice_mut().unwrap();
                    add_project_t_width(
                        es,
                        gs,
                        cols,
                        cm(&p),
                        r,
                        qout.as_slice_memory_order_mut().unwrap(),
                        false,
                        pend,
                        width,
                    );
                    close(
                        &e2,
                        &pm,
                        &format!("cols e {rows}x{cols} r{r} width {width}"),
                    );
                    close(
                        &qout,
                        &pm.t().dot(&p),
                        &format!("cols Q {rows}x{cols} r{r} width {width}"),
                    );
                }
                // portable lanes give the same bits
                let (mut e3, mut e4) = (
                    e0.as_slice().unwrap().to_vec(),
                    e0.as_slice().unwrap().to_vec(),
                );
                let (mut q3, mut q4) = (vec![0.0f32; cols * r], vec![0.0f32; cols * r]);
                let (mut p3, mut p4) = (vec![0.0f32; rows * r], vec![0.0f32; rows * r]);
                add_project_t(&mut e3, gs, cols, cm(&p), r, &mut q3, false, pend);
                add_project_rows(&mut e3, gs, cols, cm(&q), r, &mut p3, false, pend);
                macro_rules! portable {
                    ($($R:literal),*) => {
                        match r {
                            $($R => {
                                q4.fill(0.0);
                                cols_body::<Lanes, $R>(&mut e4, gs, cols, cm(&p), &mut q4, false, pend, cols);
                                rows_body::<Lanes, $R>(&mut e4, gs, cols, cm(&q), &mut p4, false, pend);
                            })*
                            _ => unreachable!(),
                        }
                    };
                }
                portable!(1, 3, 4, 8);
                assert_eq!((&q3, &p3, &e3), (&q4, &p4, &e4), "{rows}x{cols} r{r}");
            }
        }
    }

    #[test]
    fn reconstruct_matches_blas() {
        let mut rng = Pcg64Mcg::seed_from_u64(3);
        for &(rows, cols) in &SHAPES {
            for r in 1..=MAX_FUSED_RANK {
                let p = randn(rows, r, true, &mut rng);
                let q = randn(cols, r, true, &mut rng);
                let e0 = randn(rows, cols, false, &mut rng);
                let want = p.dot(&q.t()) * 0.5;
                let mut out = Array2::<f32>::from_elem((rows, cols), f32::NAN);
                reconstruct(
                    0.5,
                    cm(&p),
                    cm(&q),
                    r,
                    cols,
                    out.as_slice_mut().unwrap(),
                    None,
                );
                close(&out, &want, &format!("out {rows}x{cols} r{r}"));
                let mut e = e0.clone();
                let mut out = Array2::<f32>::from_elem((rows, cols), f32::NAN);
                reconstruct(
                    0.5,
                    cm(&p),
                    cm(&q),
                    r,
                    cols,
                    out.as_slice_mut().unwrap(),
                    Some(e.as_slice_mut().unwrap()),
                );
                close(&out, &want, "out with residual");
                close(&e, &(&e0 - &want), "e with residual");
            }
        }
    }

    #[test]
    fn portable_lanes_match_dispatched_bitwise() {
        let mut rng = Pcg64Mcg::seed_from_u64(4);
        for &(rows, cols) in &[(13usize, 45usize), (8, 16), (3, 5)] {
            for r in [1usize, 3, 4, 8] {
                let g = randn(rows, cols, false, &mut rng);
                let e0 = randn(rows, cols, false, &mut rng);
                let q0 = randn(cols, r, true, &mut rng);
                let (gs, qs) = (g.as_slice().unwrap(), cm(&q0));
                let mut p1 = vec![0.0f32; rows * r];
                let mut p2 = p1.clone();
                let mut e1 = e0.as_slice().unwrap().to_vec();
                let mut e2 = e1.clone();
                add_project_rows(&mut e1, Some(gs), cols, qs, r, &mut p1, true, None);
                macro_rules! portable {
                    ($($R:literal),*) => {
                        match r {
                            $($R => {
                                rows_body::<Lanes, $R>(&mut e2, Some(gs), cols, qs, &mut p2, true, None);
                            })*
                            _ => unreachable!(),
                        }
                    };
                }
                portable!(1, 3, 4, 8);
                assert_eq!((&p1, &e1), (&p2, &e2), "rows {rows}x{cols} r{r}");
                let mut q1 = vec![0.0f32; cols * r];
                let mut q2 = q1.clone();
                add_project_t(&mut e1, Some(gs), cols, &p1, r, &mut q1, true, None);
                macro_rules! portable_t {
                    ($($R:literal),*) => {
                        match r {
                            $($R => cols_body::<Lanes, $R>(&mut e2, Some(gs), cols, &p2, &mut q2, true, None, cols),)*
                            _ => unreachable!(),
                        }
                    };
                }
                portable_t!(1, 3, 4, 8);
                assert_eq!((&q1, &e1), (&q2, &e2), "cols {rows}x{cols} r{r}");
                let mut o1 = vec![0.0f32; rows * cols];
                let mut o2 = o1.clone();
                reconstruct(0.25, &p1, &q1, r, cols, &mut o1, Some(&mut e1));
                macro_rules! portable_o {
                    ($($R:literal),*) => {
                        match r {
                            $($R => recon_body::<Lanes, $R>(0.25, &p2, &q2, cols, &mut o2, Some(&mut e2)),)*
                            _ => unreachable!(),
                        }
                    };
                }
                portable_o!(1, 3, 4, 8);
                assert_eq!((&o1, &e1), (&o2, &e2), "recon {rows}x{cols} r{r}");
            }
        }
    }
}
