//! [`LowRank`], the per-tensor state of Power-SGD and ACP-SGD: the residual and the two
//! factors, with the products that stream the big matrix.
//!
//! The product kernels stream the big `rows x cols` matrix once per call, block by block,
//! fusing the error-feedback add `M + e` (and, where the algorithm allows, the residual
//! `e -= P Q^T`) into the same cache-resident block as the BLAS `sgemm`.

use ndarray::linalg::general_mat_mul;
use ndarray::{s, Array2, ArrayView2, ArrayViewMut2, ShapeBuilder, Zip};
use rand::Rng;
use rand_distr::StandardNormal;

use super::orthonormalize_array;
use crate::compress::lowrank_kernels::{self as lrk, MAX_FUSED_RANK};
use crate::measure::rng::rng_for;

/// Target size (f32 elements) of one cache-resident block of the big matrix (~512 KiB).
const BLOCK_ELEMS: usize = 128 * 1024;

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

/// Fill an array (in memory order) from a seeded standard normal stream.
fn fill_normal(a: &mut Array2<f32>, mut rng: impl Rng) {
    for v in a.iter_mut() {
        *v = rng.sample(StandardNormal);
    }
}

#[cfg(test)]
mod tests;
