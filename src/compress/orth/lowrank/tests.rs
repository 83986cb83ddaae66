//! Tests of [`LowRank`] (`super`) against the products written again in f64: the BLAS
//! path (a rank above the fused kernels', or inputs whose layout they do not take), a
//! matrix of several row blocks, the deferral and its settling.

use super::*;
use ndarray::{Array2, ShapeBuilder};
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;

fn randn(rows: usize, cols: usize, seed: u64) -> Array2<f32> {
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    Array2::from_shape_simple_fn((rows, cols), || rng.sample(StandardNormal))
}

fn f64s(a: &Array2<f32>) -> Array2<f64> {
    a.mapv(|v| v as f64)
}

/// `a` within `1e-4` of the largest |value| of `want` (at least 1) of `want`, elementwise.
fn close(a: &Array2<f32>, want: &Array2<f64>, what: &str) {
    assert_eq!(a.dim(), want.dim(), "{what}");
    let scale = want.iter().fold(1.0f64, |m, v| m.max(v.abs()));
    let err = a
        .iter()
        .zip(want)
        .fold(0.0f64, |m, (&x, &y)| m.max((x as f64 - y).abs()));
    assert!(
        err <= 1e-4 * scale,
        "{what}: max error {err} (scale {scale})"
    );
}

/// A low-rank state with orthonormal factors (so `P Q^T` stays the size of the matrix)
/// and a nonzero residual.
fn state(rows: usize, cols: usize, rank: usize, seed: u64) -> LowRank {
    let mut lr = LowRank::new(rows, cols, rank, seed, 0);
    lr.orth_p();
    lr.orth_q();
    lr.resid = randn(rows, cols, seed + 100);
    lr
}

/// Every product of one state, each against its rule from the state before it:
/// `add_project_rows` (`e += g; P = e Q; e -= P Q^T` with the residual), `add_project_t`
/// (`e += g; Q = e^T P; e -= P Q^T`), `project_t` (`Q = e^T P`), `reconstruct`
/// (`out = alpha P Q^T`, with the residual `e -= out`). `plain`: the gradient and the
/// output as row-major arrays, else as views of another layout.
fn every_product(rows: usize, cols: usize, rank: usize, plain: bool) {
    let what = |s: &str| format!("{rows} x {cols} at rank {rank}, plain {plain}: {s}");
    let mut lr = state(rows, cols, rank, 7);
    for (step, residual) in [(0u64, true), (1, false)] {
        let g = randn(rows, cols, 20 + step);
        // A gradient of another layout: the transpose of a standard-layout cols x rows.
        let tr = g.t().to_owned();
        let gv = if plain { g.view() } else { tr.t() };
        let (e0, q0) = (f64s(&lr.residual()), f64s(&lr.q));
        lr.add_project_rows(gv, residual);
        let e1 = &e0 + &f64s(&g);
        let p = e1.dot(&q0);
        close(&lr.p, &p, &what("add_project_rows' P"));
        let e2 = if residual { &e1 - &p.dot(&q0.t()) } else { e1 };
        close(&lr.residual(), &e2, &what("add_project_rows' residual"));
    }

    lr.orth_p();
    let g = randn(rows, cols, 30);
    let tr = g.t().to_owned();
    let gv = if plain { g.view() } else { tr.t() };
    let (e0, p0) = (f64s(&lr.residual()), f64s(&lr.p));
    lr.add_project_t(gv);
    let e1 = &e0 + &f64s(&g);
    let q = e1.t().dot(&p0);
    close(&lr.q, &q, &what("add_project_t's Q"));
    close(
        &lr.residual(),
        &(&e1 - &p0.dot(&q.t())),
        &what("add_project_t's residual"),
    );

    lr.resid = randn(rows, cols, 31);
    let (e0, p0) = (f64s(&lr.resid), f64s(&lr.p));
    lr.project_t();
    close(&lr.q, &e0.t().dot(&p0), &what("project_t's Q"));
    close(&lr.resid, &e0, &what("project_t leaves the residual"));

    for residual in [false, true] {
        let (e0, pq) = (f64s(&lr.resid), f64s(&lr.p).dot(&f64s(&lr.q).t()));
        let mut out = if plain {
            Array2::from_elem((rows, cols), 9.0f32)
        } else {
            Array2::from_elem((rows, cols).f(), 9.0f32)
        };
        lr.reconstruct(0.5, out.view_mut(), residual);
        let want = pq * 0.5;
        close(&out, &want, &what("reconstruct's output"));
        let e1 = if residual { &e0 - &want } else { e0 };
        close(&lr.resid, &e1, &what("reconstruct's residual"));
    }
}

#[test]
fn every_product_by_its_rule_above_the_fused_rank_and_in_other_layouts() {
    let r = MAX_FUSED_RANK + 1;
    // The BLAS path: a rank above the fused kernels', whatever the layout.
    every_product(13, 11, r, true);
    every_product(13, 11, r, false);
    // Several row blocks of BLOCK_ELEMS: 300 x 500 is 150,000 elements, 262 rows a block.
    every_product(300, 500, r, true);
    // The fused kernels' ranks with inputs of another layout: the BLAS path again.
    every_product(13, 11, 4, false);
    every_product(300, 500, 2, false);
    // And the fused kernels themselves, by the same rule.
    every_product(13, 11, MAX_FUSED_RANK, true);
}

/// The deferred steps leave `e -= P Q^T` pending exactly where the fused kernels run
/// (rank up to MAX_FUSED_RANK, plain layouts): there the stored residual is `e + g` and
/// `residual()` the eager one; above it the update is done at once.
#[test]
fn deferral_only_on_the_fused_kernels_and_settled_by_each_eager_pass() {
    let (rows, cols) = (9, 14);
    for rank in [1, MAX_FUSED_RANK, MAX_FUSED_RANK + 1] {
        let fused = rank <= MAX_FUSED_RANK;
        let mut lr = state(rows, cols, rank, 3);
        let g = randn(rows, cols, 40);
        let (e0, q0) = (f64s(&lr.resid), f64s(&lr.q));
        lr.add_project_rows_deferred(g.view());
        assert_eq!(lr.pending, fused, "rank {rank}: rows step pending");
        let e1 = &e0 + &f64s(&g);
        let p = e1.dot(&q0);
        close(&lr.p, &p, "deferred P");
        let eager = &e1 - &p.dot(&q0.t());
        close(&lr.residual(), &eager, "deferred rows residual");
        close(
            &lr.resid,
            if fused { &e1 } else { &eager },
            "stored residual",
        );

        // Each eager pass applies the pending update first.
        lr.orth_p();
        let p0 = f64s(&lr.p);
        lr.add_project_t(g.view());
        let e2 = &eager + &f64s(&g);
        let q = e2.t().dot(&p0);
        close(&lr.q, &q, "Q after a pending update");
        let e3 = &e2 - &p0.dot(&q.t());
        close(&lr.resid, &e3, "add_project_t settles");
        assert!(!lr.pending);

        lr.add_project_t_deferred(g.view());
        assert_eq!(lr.pending, fused, "rank {rank}: t step pending");
        let e4 = &e3 + &f64s(&g);
        let q = e4.t().dot(&p0);
        let e5 = &e4 - &p0.dot(&q.t());
        close(&lr.residual(), &e5, "deferred t residual");
        lr.project_t();
        close(&lr.resid, &e5, "project_t settles");
        close(
            &lr.q,
            &e5.t().dot(&p0),
            "project_t's Q of the settled residual",
        );

        lr.add_project_t_deferred(g.view());
        let e6 = &e5 + &f64s(&g);
        let q = e6.t().dot(&p0);
        let e7 = &e6 - &p0.dot(&q.t());
        let mut out = Array2::zeros((rows, cols));
        lr.reconstruct(1.0, out.view_mut(), true);
        let pq = p0.dot(&q.t());
        close(&lr.resid, &(&e7 - &pq), "reconstruct settles");

        lr.add_project_t_deferred(g.view());
        lr.settle();
        assert!(!lr.pending);
        let e8 = &(&e7 - &pq) + &f64s(&g);
        let q = e8.t().dot(&p0);
        close(&lr.resid, &(&e8 - &p0.dot(&q.t())), "settle");
    }
}
