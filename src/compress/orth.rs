//! Orthogonalisation of the columns of a tall matrix, in place and allocation-free, plus
//! the low-rank helpers Power-SGD and ACP-SGD share (docs/methods.md, "powersgd" and
//! "acpsgd").
//!
//! Matrices handled here are column-major (`.f()`) `rows x r` blocks, so every column is
//! a contiguous slice. For `r <= MGS_MAX_RANK` modified Gram-Schmidt with one
//! re-orthogonalisation pass ("twice is enough", Giraud et al., Numer. Math. 2005) is
//! used; for larger `r` Householder QR with the explicit Q formed in place (LAPACK
//! `sgeqr2` + `sorg2r`, Golub & Van Loan 4th ed. §5.2). Both always return orthonormal
//! columns for finite input, also for rank-deficient input (dependent or zero columns are
//! replaced by deterministic unit-vector directions), and never produce NaN.
//!
//! The product kernels stream the big `rows x cols` matrix once per call, block by block,
//! fusing the error-feedback add `M + e` (and, where the algorithm allows, the residual
//! `e -= P Q^T`) into the same cache-resident block as the BLAS `sgemm`.

use ndarray::linalg::general_mat_mul;
use ndarray::{s, Array2, ArrayView2, ArrayViewMut2, ShapeBuilder, Zip};
use rand::Rng;
use rand_distr::StandardNormal;

use super::kernels::rng_for;
use super::lowrank_kernels::{self as lrk, MAX_FUSED_RANK};
// Links OpenBLAS (openblas-system via ndarray-linalg -> lax) for ndarray's `blas` feature.
use super::{CompressError, MethodParams, Result};
use ndarray_linalg as _;

/// Largest rank orthogonalised by Gram-Schmidt; above it Householder QR is used.
pub const MGS_MAX_RANK: usize = 8;

/// Target size (f32 elements) of one cache-resident block of the big matrix (~512 KiB).
const BLOCK_ELEMS: usize = 128 * 1024;

/// Dot product with 8 independent accumulators (vectorisable, less rounding drift).
#[inline]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0.0f32; 8];
    let mut ca = a.chunks_exact(8);
    let mut cb = b.chunks_exact(8);
    for (x, y) in (&mut ca).zip(&mut cb) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    let mut tail = 0.0f32;
    for (x, y) in ca.remainder().iter().zip(cb.remainder()) {
        tail += x * y;
    }
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail
}

/// `y += alpha * x`.
#[inline]
fn axpy(alpha: f32, x: &[f32], y: &mut [f32]) {
    for (yi, xi) in y.iter_mut().zip(x) {
        *yi += alpha * xi;
    }
}

/// Euclidean norm, scaled so that huge or tiny entries neither overflow nor underflow.
fn norm2(x: &[f32]) -> f32 {
    let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    if amax == 0.0 || !amax.is_finite() {
        return amax;
    }
    let inv = 1.0 / amax;
    let mut acc = [0.0f32; 8];
    let mut c = x.chunks_exact(8);
    for v in &mut c {
        for k in 0..8 {
            let t = v[k] * inv;
            acc[k] += t * t;
        }
    }
    let mut s: f32 = acc.iter().sum();
    for v in c.remainder() {
        let t = v * inv;
        s += t * t;
    }
    amax * s.sqrt()
}

/// Remove from `col` its components along the (orthonormal) columns in `prev`.
fn project_out(prev: &[f32], rows: usize, col: &mut [f32]) {
    for pc in prev.chunks_exact(rows) {
        let d = dot(pc, col);
        axpy(-d, pc, col);
    }
}

/// Orthonormalise the `r` columns of the column-major `rows x r` matrix in `a` in place:
/// Gram-Schmidt for `r <= MGS_MAX_RANK`, Householder QR otherwise. `tau` is scratch of
/// at least `r` elements (used by QR). Columns beyond `rows` (impossible to make
/// orthonormal) are set to zero. Allocation-free.
pub fn orthonormalize(a: &mut [f32], rows: usize, r: usize, tau: &mut [f32]) {
    let r = r.min(a.len() / rows.max(1));
    if rows == 0 || r == 0 {
        return;
    }
    let a = &mut a[..rows * r];
    let full = r.min(rows);
    if full < r {
        a[rows * full..].fill(0.0);
    }
    if full <= MGS_MAX_RANK || tau.len() < full {
        gram_schmidt(&mut a[..rows * full], rows);
    } else {
        householder_q(&mut a[..rows * full], rows, &mut tau[..full]);
    }
}

/// [`orthonormalize`] on a column-major array; returns false (and does nothing) when the
/// array is not column-major contiguous.
pub fn orthonormalize_array(a: &mut Array2<f32>, tau: &mut [f32]) -> bool {
    let (rows, r) = a.dim();
    if !a.t().is_standard_layout() {
        return false;
    }
    match a.as_slice_memory_order_mut() {
        Some(data) => {
            orthonormalize(data, rows, r, tau);
            true
        }
        None => false,
    }
}

/// Modified Gram-Schmidt with re-orthogonalisation ("twice is enough") on column-major
/// `a` (rows x r, r <= rows). A column whose remainder is below `1e-6` of its norm (or
/// zero / non-finite) is replaced by the first unit vector e_k (k = j, j+1, ...) that
/// keeps a clear remainder, so the output is always orthonormal.
fn gram_schmidt(a: &mut [f32], rows: usize) {
    let r = a.len() / rows;
    for j in 0..r {
        let (prev, rest) = a.split_at_mut(j * rows);
        let col = &mut rest[..rows];
        let n0 = norm2(col);
        let mut n1 = 0.0;
        if n0.is_finite() && n0 > 0.0 {
            let mut before = n0;
            for _ in 0..2 {
                project_out(prev, rows, col);
                n1 = norm2(col);
                if n1 > 0.5 * before {
                    break;
                }
                before = n1;
            }
        }
        if !(n1.is_finite() && n1 > 1e-6 * n0 && n1 > 1e-30) {
            // Dependent column: the first of e_j, e_{j+1}, ... with remainder^2 >= 0.5/(j+1)
            // (one of any j+1 unit vectors has remainder^2 >= 1/(j+1)).
            let want = (0.5 / (j + 1) as f32).sqrt();
            for s in 0..rows {
                col.fill(0.0);
                col[(j + s) % rows] = 1.0;
                project_out(prev, rows, col);
                project_out(prev, rows, col);
                n1 = norm2(col);
                if n1 >= want {
                    break;
                }
            }
        }
        let inv = 1.0 / n1;
        col.iter_mut().for_each(|v| *v *= inv);
    }
}

/// Householder QR of column-major `a` (rows x r, r <= rows), overwritten by the explicit
/// orthonormal factor Q (LAPACK `sgeqr2` then `sorg2r` conventions: v[0] = 1 implicit,
/// H_k = I - tau_k v v^T).
fn householder_q(a: &mut [f32], rows: usize, tau: &mut [f32]) {
    let r = a.len() / rows;
    // Factorisation: column k stores v[1..] below the diagonal.
    for k in 0..r {
        let (left, right) = a.split_at_mut((k + 1) * rows);
        let x = &mut left[k * rows + k..];
        let nx = norm2(x);
        if !(nx.is_finite() && nx > 1e-30) {
            tau[k] = 0.0; // H = I
            x.fill(0.0);
            continue;
        }
        let alpha = x[0];
        let beta = if alpha >= 0.0 { -nx } else { nx };
        tau[k] = (beta - alpha) / beta;
        let scale = 1.0 / (alpha - beta);
        x[1..].iter_mut().for_each(|v| *v *= scale);
        x[0] = beta;
        apply_reflector(&x[1..], tau[k], right, rows, k);
    }
    // Form Q in place, backwards (sorg2r).
    for k in (0..r).rev() {
        let (left, right) = a.split_at_mut((k + 1) * rows);
        let col = &mut left[k * rows..];
        apply_reflector(&col[k + 1..], tau[k], right, rows, k);
        col[..k].fill(0.0);
        col[k] = 1.0 - tau[k];
        let t = -tau[k];
        col[k + 1..].iter_mut().for_each(|v| *v *= t);
    }
}

/// Apply H = I - tau [1; v] [1; v]^T to rows `k..` of every column in `cols`.
fn apply_reflector(v: &[f32], tau: f32, cols: &mut [f32], rows: usize, k: usize) {
    if tau == 0.0 {
        return;
    }
    for c in cols.chunks_exact_mut(rows) {
        let c = &mut c[k..];
        let w = tau * (c[0] + dot(v, &c[1..]));
        c[0] -= w;
        axpy(-w, v, &mut c[1..]);
    }
}

// ---------------------------------------------------------------------------------------
// Low-rank helpers shared by Power-SGD and ACP-SGD.

/// Validate the keys the low-rank methods read (rank >= 1, min_compression_rate > 0).
pub fn validate_lowrank_params(method: &'static str, p: &MethodParams) -> Result<()> {
    if p.rank < 1 {
        return Err(CompressError::BadParam {
            method,
            key: "rank",
            value: p.rank.to_string(),
            allowed: "an integer >= 1 (default 4 for CNNs, 32 for transformers)".into(),
        });
    }
    if !(p.min_compression_rate.is_finite() && p.min_compression_rate > 0.0) {
        return Err(CompressError::BadParam {
            method,
            key: "min_compression_rate",
            value: p.min_compression_rate.to_string(),
            allowed: "a finite number > 0 (default 2)".into(),
        });
    }
    Ok(())
}

/// Effective rank `r' = min(rank, rows, cols)` if a `rows x cols` matrix is worth
/// compressing, i.e. `(rows + cols) r' rate < rows cols` (PyTorch powerSGD hook,
/// `min_compression_rate`); `None` means it travels raw (1-D tensors always do).
pub fn compressed_rank(rows: usize, cols: usize, rank: usize, rate: f64) -> Option<usize> {
    let r = rank.min(rows).min(cols);
    if rows < 2 || r == 0 {
        return None;
    }
    (((rows + cols) * r) as f64 * rate < (rows * cols) as f64).then_some(r)
}

/// The elements of a column-major (`.f()`) array, or `None` for any other layout.
fn col_major(a: &Array2<f32>) -> Option<&[f32]> {
    if a.t().is_standard_layout() {
        a.as_slice_memory_order()
    } else {
        None
    }
}

/// Mutable [`col_major`].
fn col_major_mut(a: &mut Array2<f32>) -> Option<&mut [f32]> {
    if a.t().is_standard_layout() {
        a.as_slice_memory_order_mut()
    } else {
        None
    }
}

/// Per-tensor state of a low-rank method: the residual (holding `M + e` during a step and
/// `e` after it) and the two factors, column-major so they orthogonalise in place.
#[derive(Debug)]
pub struct LowRank {
    pub rows: usize,
    pub cols: usize,
    /// Effective rank r'.
    pub rank: usize,
    /// rows x cols, standard layout.
    pub resid: Array2<f32>,
    /// rows x r', column-major.
    pub p: Array2<f32>,
    /// cols x r', column-major.
    pub q: Array2<f32>,
    /// Householder scratch (r').
    pub tau: Vec<f32>,
    /// Factors of a deferred residual update (rows x r' and cols x r', column-major):
    /// while `pending`, the true residual is `resid - P_old Q_old^T` (see
    /// [`LowRank::add_project_rows_deferred`], [`LowRank::add_project_t_deferred`]).
    p_old: Array2<f32>,
    q_old: Array2<f32>,
    pub(crate) pending: bool,
}

impl LowRank {
    /// Allocate and touch everything; `P` and `Q` start as seeded standard normals that
    /// are identical on every worker (`rng_for(seed, 0, t, tag)`, tag 1 for Q, 2 for P).
    pub fn new(rows: usize, cols: usize, rank: usize, seed: u64, t: usize) -> LowRank {
        let mut lr = LowRank {
            rows,
            cols,
            rank,
            resid: Array2::zeros((rows, cols)),
            p: Array2::zeros((rows, rank).f()),
            q: Array2::zeros((cols, rank).f()),
            tau: vec![0.0; rank],
            p_old: Array2::zeros((rows, rank).f()),
            q_old: Array2::zeros((cols, rank).f()),
            pending: false,
        };
        fill_normal(&mut lr.q, rng_for(seed, 0, t, 1));
        fill_normal(&mut lr.p, rng_for(seed, 0, t, 2));
        lr
    }

    pub fn orth_p(&mut self) {
        orthonormalize_array(&mut self.p, &mut self.tau);
    }

    pub fn orth_q(&mut self) {
        orthonormalize_array(&mut self.q, &mut self.tau);
    }

    /// `resid += grad; P = resid Q`, and with `residual` also `resid -= P Q^T`, in one
    /// streaming pass over row blocks (the block stays in cache between the steps).
    ///
    /// A deferred residual (`pending`) is applied first, in the same sweep.
    pub fn add_project_rows(&mut self, grad: ArrayView2<f32>, residual: bool) {
        if !self.fused_rows(grad, residual) {
            self.settle();
            let br = (BLOCK_ELEMS / self.cols.max(1)).max(1);
            let mut i0 = 0;
            while i0 < self.rows {
                let i1 = (i0 + br).min(self.rows);
                let mut rb = self.resid.slice_mut(s![i0..i1, ..]);
                Zip::from(&mut rb)
                    .and(grad.slice(s![i0..i1, ..]))
                    .for_each(|e, &g| *e += g);
                let mut pb = self.p.slice_mut(s![i0..i1, ..]);
                general_mat_mul(1.0, &rb, &self.q, 0.0, &mut pb);
                if residual {
                    general_mat_mul(-1.0, &pb, &self.q.t(), 1.0, &mut rb);
                }
                i0 = i1;
            }
        }
    }

    /// The fused-kernel path of [`LowRank::add_project_rows`]; false when the rank or a
    /// layout needs the BLAS path (nothing done then).
    fn fused_rows(&mut self, grad: ArrayView2<f32>, residual: bool) -> bool {
        if self.rank > MAX_FUSED_RANK {
            return false;
        }
        let (Some(g), Some(e), Some(q), Some(p)) = (
            grad.as_slice(),
            self.resid.as_slice_mut(),
            col_major(&self.q),
            col_major_mut(&mut self.p),
        ) else {
            return false;
        };
        let pending = pending_factors(self.pending, &self.p_old, &self.q_old);
        lrk::add_project_rows(e, Some(g), self.cols, q, self.rank, p, residual, pending);
        self.pending = false;
        true
    }

    /// ACP-SGD's P step with the residual deferred: `resid += grad; P = resid Q` in one
    /// sweep (applying a pending residual first), and `resid -= P Q^T` left to the next
    /// pass over the matrix (P and Q are saved, as the next step changes both). The
    /// arithmetic is the eager update's; only the pass that does it moves.
    pub fn add_project_rows_deferred(&mut self, grad: ArrayView2<f32>) {
        if self.fused_rows(grad, false) {
            self.defer();
        } else {
            self.add_project_rows(grad, true);
        }
    }

    /// Record `resid -= P Q^T` (the current factors) as pending.
    fn defer(&mut self) {
        self.p_old.assign(&self.p);
        self.q_old.assign(&self.q);
        self.pending = true;
    }

    /// `resid += grad; Q = resid^T P` in one streaming pass over row blocks (Q accumulates
    /// block by block), then `resid -= P Q^T` as one BLAS pass (ACP-SGD's Q step: the
    /// residual needs the complete Q, so it cannot share the first pass).
    pub fn add_project_t(&mut self, grad: ArrayView2<f32>) {
        self.settle();
        if self.rank <= MAX_FUSED_RANK {
            if let (Some(g), Some(e), Some(p), Some(q)) = (
                grad.as_slice(),
                self.resid.as_slice_mut(),
                col_major(&self.p),
                col_major_mut(&mut self.q),
            ) {
                lrk::add_project_t(e, Some(g), self.cols, p, self.rank, q, true, None);
                return;
            }
        }
        let br = (BLOCK_ELEMS / self.cols.max(1)).max(1);
        self.q.fill(0.0);
        let mut i0 = 0;
        while i0 < self.rows {
            let i1 = (i0 + br).min(self.rows);
            let mut rb = self.resid.slice_mut(s![i0..i1, ..]);
            Zip::from(&mut rb)
                .and(grad.slice(s![i0..i1, ..]))
                .for_each(|e, &g| *e += g);
            general_mat_mul(
                1.0,
                &rb.t(),
                &self.p.slice(s![i0..i1, ..]),
                1.0,
                &mut self.q,
            );
            i0 = i1;
        }
        general_mat_mul(-1.0, &self.p, &self.q.t(), 1.0, &mut self.resid);
    }

    /// ACP-SGD's Q step with the residual deferred: `resid += grad; Q = resid^T P` in one
    /// pass (applying a pending residual first, row block by row block), and
    /// `resid -= P Q^T` left to the next pass over the matrix (P and Q are saved). The
    /// arithmetic is the eager update's; only the pass that does it moves, so an ACP-SGD
    /// step reads and writes the matrix once instead of twice.
    pub fn add_project_t_deferred(&mut self, grad: ArrayView2<f32>) {
        if self.rank <= MAX_FUSED_RANK {
            if let (Some(g), Some(e), Some(p), Some(q)) = (
                grad.as_slice(),
                self.resid.as_slice_mut(),
                col_major(&self.p),
                col_major_mut(&mut self.q),
            ) {
                let pending = pending_factors(self.pending, &self.p_old, &self.q_old);
                lrk::add_project_t(e, Some(g), self.cols, p, self.rank, q, false, pending);
                self.defer();
                return;
            }
        }
        self.add_project_t(grad);
    }

    /// Apply a deferred residual now (`resid -= P_old Q_old^T`); every eager pass over
    /// `resid` calls this first.
    pub fn settle(&mut self) {
        if self.pending {
            sub_deferred(&self.p_old, &self.q_old, &mut self.resid);
            self.pending = false;
        }
    }

    /// The residual `e`, with a deferred update applied (a copy; tests only).
    #[cfg(test)]
    pub(crate) fn residual(&self) -> Array2<f32> {
        let mut e = self.resid.clone();
        if self.pending {
            sub_deferred(&self.p_old, &self.q_old, &mut e);
        }
        e
    }

    /// `Q = resid^T P` (one BLAS product over the whole matrix).
    pub fn project_t(&mut self) {
        self.settle();
        if self.rank <= MAX_FUSED_RANK {
            if let (Some(e), Some(p), Some(q)) = (
                self.resid.as_slice_mut(),
                col_major(&self.p),
                col_major_mut(&mut self.q),
            ) {
                lrk::add_project_t(e, None, self.cols, p, self.rank, q, false, None);
                return;
            }
        }
        general_mat_mul(1.0, &self.resid.t(), &self.p, 0.0, &mut self.q);
    }

    /// `out = alpha P Q^T`, and with `residual` also `resid -= out`, row block by row
    /// block so the block of `out` is still in cache for the subtraction.
    pub fn reconstruct(&mut self, alpha: f32, mut out: ArrayViewMut2<f32>, residual: bool) {
        if residual {
            self.settle();
        }
        if self.rank <= MAX_FUSED_RANK {
            if let (Some(o), Some(p), Some(q)) =
                (out.as_slice_mut(), col_major(&self.p), col_major(&self.q))
            {
                let e = if residual {
                    self.resid.as_slice_mut()
                } else {
                    None
                };
                if e.is_some() || !residual {
                    lrk::reconstruct(alpha, p, q, self.rank, self.cols, o, e);
                    return;
                }
            }
        }
        if !residual {
            general_mat_mul(alpha, &self.p, &self.q.t(), 0.0, &mut out);
            return;
        }
        let br = (BLOCK_ELEMS / self.cols.max(1)).max(1);
        let mut i0 = 0;
        while i0 < self.rows {
            let i1 = (i0 + br).min(self.rows);
            let mut ob = out.slice_mut(s![i0..i1, ..]);
            general_mat_mul(
                alpha,
                &self.p.slice(s![i0..i1, ..]),
                &self.q.t(),
                0.0,
                &mut ob,
            );
            Zip::from(self.resid.slice_mut(s![i0..i1, ..]))
                .and(&ob)
                .for_each(|e, &o| *e -= o);
            i0 = i1;
        }
    }
}

/// The factors of a deferred residual, as the fused kernels take them (`None` when
/// nothing is pending).
fn pending_factors<'a>(
    pending: bool,
    p_old: &'a Array2<f32>,
    q_old: &'a Array2<f32>,
) -> Option<(&'a [f32], &'a [f32])> {
    match (pending, col_major(p_old), col_major(q_old)) {
        (true, Some(po), Some(qo)) => Some((po, qo)),
        _ => None,
    }
}

/// The deferred residual update `e -= P_old Q_old^T` ([`LowRank::settle`]).
fn sub_deferred(p: &Array2<f32>, q_old: &Array2<f32>, e: &mut Array2<f32>) {
    general_mat_mul(-1.0, p, &q_old.t(), 1.0, e);
}

/// A registered tensor of a low-rank method: raw (1-D or not worth compressing) or
/// factorised (boxed: the factors' state is large, a raw slot two words).
#[derive(Debug)]
pub enum Slot {
    Raw { rows: usize, cols: usize },
    LowRank(Box<LowRank>),
}

impl Slot {
    /// Decide raw vs low-rank (docs/methods.md, "powersgd": which tensors are compressed)
    /// and allocate the state for tensor `t`.
    pub fn new(rows: usize, cols: usize, p: &MethodParams, seed: u64, t: usize) -> Slot {
        match compressed_rank(rows, cols, p.rank, p.min_compression_rate) {
            Some(r) => Slot::LowRank(Box::new(LowRank::new(rows, cols, r, seed, t))),
            None => Slot::Raw { rows, cols },
        }
    }

    pub fn dims(&self) -> (usize, usize) {
        match self {
            Slot::Raw { rows, cols } => (*rows, *cols),
            Slot::LowRank(lr) => (lr.rows, lr.cols),
        }
    }
}

/// Store `slot` at index `t`, growing the table as needed (setup only).
pub fn put_slot(slots: &mut Vec<Option<Slot>>, t: usize, slot: Slot) {
    if slots.len() <= t {
        slots.resize_with(t + 1, || None);
    }
    slots[t] = Some(slot);
}

/// The registered slot of tensor `t`, or `CompressError::Tensor`.
pub fn slot_mut<'a>(
    slots: &'a mut [Option<Slot>],
    t: usize,
    method: &'static str,
) -> Result<&'a mut Slot> {
    slots
        .get_mut(t)
        .and_then(|s| s.as_mut())
        .ok_or_else(|| CompressError::Tensor {
            method,
            tensor: t,
            msg: "not registered (call register first)".into(),
        })
}

/// `CompressError::Tensor` unless `got == want` (`what` names the argument).
pub fn check_dims(
    method: &'static str,
    t: usize,
    what: &str,
    want: (usize, usize),
    got: (usize, usize),
) -> Result<()> {
    if want == got {
        return Ok(());
    }
    Err(CompressError::Tensor {
        method,
        tensor: t,
        msg: format!(
            "{what} is {}x{}, registered as {}x{}",
            got.0, got.1, want.0, want.1
        ),
    })
}

/// `CompressError::Tensor` unless the received sum has `want` elements.
pub fn check_len(method: &'static str, t: usize, want: usize, got: usize) -> Result<()> {
    if want == got {
        return Ok(());
    }
    Err(CompressError::Tensor {
        method,
        tensor: t,
        msg: format!("received {got} summed values, expected {want}"),
    })
}

/// Fill an array (in memory order) from a seeded standard normal stream.
fn fill_normal(a: &mut Array2<f32>, mut rng: impl Rng) {
    for v in a.iter_mut() {
        *v = rng.sample(StandardNormal);
    }
}

/// Copy `src` into `dst` (same length) in memory order; false on a length mismatch.
pub fn load_memory_order(dst: &mut Array2<f32>, src: &[f32]) -> bool {
    match dst.as_slice_memory_order_mut() {
        Some(d) if d.len() == src.len() => {
            d.copy_from_slice(src);
            true
        }
        _ => false,
    }
}

/// Append the elements of `a` in memory order to `wire` (within its reserved capacity).
pub fn push_memory_order(wire: &mut Vec<f32>, a: &Array2<f32>) {
    match a.as_slice_memory_order() {
        Some(s) => wire.extend_from_slice(s),
        None => wire.extend(a.iter()),
    }
}

/// Raw path: `out = sum / n` (shape-checked by the caller).
pub fn write_average(mut out: ArrayViewMut2<f32>, sum: &[f32], n: usize) {
    let inv = 1.0 / n.max(1) as f32;
    for (o, s) in out.iter_mut().zip(sum) {
        *o = s * inv;
    }
}

/// Raw path: append `grad` to `wire` in logical (row-major) order.
pub fn push_raw(wire: &mut Vec<f32>, grad: ArrayView2<f32>) {
    match grad.as_slice() {
        Some(s) => wire.extend_from_slice(s),
        None => wire.extend(grad.iter()),
    }
}

/// Test helpers: simulate `n` workers (one compressor each) exchanging through a
/// hand-summed [`Received`](super::Received).
#[cfg(test)]
pub(crate) mod sim {
    use super::super::{Compressor, Received, Wire, WorkerCtx};
    use ndarray::{Array2, ShapeBuilder};
    use rand::{Rng, SeedableRng};
    use rand_distr::StandardNormal;
    use rand_pcg::Pcg64Mcg;

    pub fn randn(rows: usize, cols: usize, seed: u64) -> Array2<f32> {
        let mut rng = Pcg64Mcg::seed_from_u64(seed);
        Array2::from_shape_simple_fn((rows, cols).f(), || rng.sample(StandardNormal))
    }

    /// A random `rows x cols` matrix of rank `r`: `U V^T`.
    pub fn rank_r(rows: usize, cols: usize, r: usize, seed: u64) -> Array2<f32> {
        randn(rows, r, seed)
            .dot(&randn(cols, r, seed + 1000).t())
            .as_standard_layout()
            .to_owned()
    }

    /// Frobenius norm.
    pub fn fro(a: &Array2<f32>) -> f32 {
        a.iter().map(|v| v * v).sum::<f32>().sqrt()
    }

    /// ||a - b|| / ||b||.
    pub fn rel_err(a: &Array2<f32>, b: &Array2<f32>) -> f32 {
        fro(&(a - b)) / fro(b).max(1e-30)
    }

    /// One step of tensor `t` on every worker: returns each worker's output and the wire
    /// length of every round (asserted equal across workers).
    pub fn step<C: Compressor>(
        comps: &mut [C],
        step: u64,
        t: usize,
        grads: &[Array2<f32>],
    ) -> (Vec<Array2<f32>>, Vec<usize>) {
        let n = comps.len();
        let mut outs = vec![Array2::from_elem(grads[0].dim(), f32::NAN); n];
        let mut lens = Vec::new();
        for c in comps.iter_mut() {
            c.begin_step(step);
        }
        for round in 0..comps[0].rounds() {
            let mut sum: Vec<f32> = Vec::new();
            for (w, c) in comps.iter_mut().enumerate() {
                let mut wire = Wire::default();
                wire.reserve(c.wire_capacity(t, round));
                let cap = wire.sum_f32.capacity();
                c.compress(t, round, grads[w].view(), &mut wire).unwrap();
                assert!(wire.sum_f32.len() <= cap, "wire exceeds wire_capacity");
                c.feedback(t, round).unwrap();
                if w == 0 {
                    sum = wire.sum_f32.clone();
                    lens.push(sum.len());
                } else {
                    assert_eq!(wire.sum_f32.len(), sum.len());
                    sum.iter_mut().zip(&wire.sum_f32).for_each(|(s, v)| *s += v);
                }
            }
            let rec = Received {
                sum_f32: &sum,
                gathered_u32: &[],
                gather_counts: &vec![0; n],
                ring_u32: &[],
                world_size: n,
            };
            for (c, o) in comps.iter_mut().zip(outs.iter_mut()) {
                c.decompress(t, round, &rec, o.view_mut()).unwrap();
            }
        }
        (outs, lens)
    }

    /// One compressor per simulated rank (`make` builds it from its context), with the
    /// tensors `shapes` registered as ids 0, 1, ...
    pub fn workers<C: Compressor>(
        n: usize,
        seed: u64,
        shapes: &[(usize, usize)],
        make: impl Fn(WorkerCtx) -> C,
    ) -> Vec<C> {
        (0..n)
            .map(|rank| {
                let mut c = make(WorkerCtx {
                    rank,
                    world_size: n,
                    seed,
                });
                for (t, &(r, k)) in shapes.iter().enumerate() {
                    c.register(t, r, k).unwrap();
                }
                c
            })
            .collect()
    }

    /// Element-wise average of the workers' inputs.
    pub fn mean(grads: &[Array2<f32>]) -> Array2<f32> {
        let mut m = grads[0].clone();
        for g in &grads[1..] {
            m += g;
        }
        m / grads.len() as f32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::Array2;
    use rand::SeedableRng;
    use rand_pcg::Pcg64Mcg;

    fn randn(rows: usize, cols: usize, seed: u64) -> Array2<f32> {
        let mut rng = Pcg64Mcg::seed_from_u64(seed);
        let mut a = Array2::zeros((rows, cols).f());
        for v in a.iter_mut() {
            *v = rng.sample(StandardNormal);
        }
        a
    }

    /// max |Q^T Q - I|, panics on NaN.
    fn orth_error(a: &Array2<f32>) -> f32 {
        assert!(a.iter().all(|v| v.is_finite()), "NaN/inf in output");
        let g = a.t().dot(a);
        let mut err = 0.0f32;
        for ((i, j), v) in g.indexed_iter() {
            let want = if i == j { 1.0 } else { 0.0 };
            err = err.max((v - want).abs());
        }
        err
    }

    fn check(mut a: Array2<f32>, tol: f32) {
        let r = a.ncols();
        let mut tau = vec![0.0; r];
        assert!(orthonormalize_array(&mut a, &mut tau));
        let e = orth_error(&a);
        assert!(e < tol, "rank {r}: |Q^T Q - I| = {e}");
    }

    /// Columns scaled by 10^(-k) (condition number up to 1e6), and rank-deficient cases.
    fn cases(rows: usize, r: usize, seed: u64) -> Vec<Array2<f32>> {
        let random = randn(rows, r, seed);
        let mut ill = randn(rows, r, seed + 1);
        let mix = randn(r, r, seed + 2);
        for (j, mut c) in ill.columns_mut().into_iter().enumerate() {
            c *= 10f32.powi(-((j * 6 / r.max(2)) as i32));
        }
        let ill = {
            let mut m = Array2::zeros((rows, r).f());
            general_mat_mul(1.0, &ill, &mix, 0.0, &mut m);
            m
        };
        let mut deficient = randn(rows, r, seed + 3);
        if r >= 3 {
            let c0 = deficient.column(0).to_owned();
            let c1 = deficient.column(1).to_owned();
            deficient.column_mut(2).assign(&(&c0 * 2.0 - &c1));
            deficient.column_mut(1).assign(&c0);
        }
        let mut zeros = randn(rows, r, seed + 4);
        zeros.column_mut(0).fill(0.0);
        zeros.column_mut(r - 1).fill(0.0);
        let mut allzero = Array2::zeros((rows, r).f());
        allzero[[0, 0]] = 0.0;
        vec![random, ill, deficient, zeros, allzero]
    }

    #[test]
    fn orthonormal_small_rank_gram_schmidt() {
        for &(rows, r) in &[(1usize, 1usize), (7, 4), (64, 4), (1000, 8), (8, 8)] {
            for a in cases(rows, r, 10 + r as u64) {
                check(a, 2e-5);
            }
        }
    }

    #[test]
    fn orthonormal_large_rank_householder() {
        for &(rows, r) in &[(40usize, 9usize), (500, 32), (64, 64)] {
            for a in cases(rows, r, 20 + r as u64) {
                check(a, 2e-5);
            }
        }
    }

    #[test]
    fn span_is_preserved() {
        // Orthonormalising a full-rank A keeps its column space: A = Q (Q^T A).
        for &r in &[4usize, 16] {
            let a = randn(200, r, 99);
            let mut q = a.clone();
            let mut tau = vec![0.0; r];
            orthonormalize_array(&mut q, &mut tau);
            let back = q.dot(&q.t().dot(&a));
            let err = (&back - &a).iter().fold(0.0f32, |m, v| m.max(v.abs()));
            assert!(err < 1e-4, "rank {r}: projection error {err}");
        }
    }

    #[test]
    fn compressed_rank_rule() {
        assert_eq!(compressed_rank(1, 1000, 4, 2.0), None); // 1-D
        assert_eq!(compressed_rank(64, 576, 4, 2.0), Some(4));
        assert_eq!(compressed_rank(8, 8, 4, 2.0), None); // (8+8)*4*2 = 128 >= 64
        assert_eq!(compressed_rank(3, 1000, 4, 0.9), Some(3));
        assert_eq!(compressed_rank(3, 1000, 4, 1.0), None);
    }
}
