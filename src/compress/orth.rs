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
//! Files: this one holds the orthonormalisation; `lowrank.rs` the per-tensor factor
//! state of a low-rank method ([`LowRank`]) and its streaming products; `slots.rs` the
//! registered tensors ([`Slot`]), the rank rule, the checks and the wire copies both
//! methods use; `sim.rs` test helpers that simulate `n` workers. All are re-exported
//! here.

use ndarray::Array2;
// Links OpenBLAS (openblas-system via ndarray-linalg -> lax) for ndarray's `blas` feature.
use ndarray_linalg as _;

mod lowrank;
mod slots;

pub use lowrank::LowRank;
pub use slots::{
    check_dims, check_len, compressed_rank, load_memory_order, push_memory_order, push_raw,
    put_slot, slot_mut, validate_lowrank_params, write_average, Slot,
};

/// Largest rank orthogonalised by Gram-Schmidt; above it Householder QR is used.
pub const MGS_MAX_RANK: usize = 8;

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

#[cfg(test)]
pub(crate) mod sim;

#[cfg(test)]
mod tests;
