//! Tests of the fused low-rank kernels (`super`): each kernel family against BLAS, the
//! deferred residual, and the portable lanes bit for bit against the dispatched ones.

use super::project_rows::rows_body;
use super::project_t::{add_project_t_width, cols_body};
use super::recon::recon_body;
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

// Row counts cover every remainder of the four- and two-row blocks of `add_project_rows`
// (4k + 0, 1, 2, 3) and of `add_project_t`'s four-row blocks.
const SHAPES: [(usize, usize); 9] = [
    (1, 1),
    (3, 7),
    (6, 9),
    (7, 20),
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

/// Outputs past `STREAM_MIN_BYTES` (16 MiB: 4 Mi floats) are written by streamed stores
/// after a scalar head up to 32-byte alignment: with `e` only for rows of a multiple of
/// `L` columns, without `e` row by row for any width. Each element against the rule,
/// `sum_k (alpha p[i,k]) q[j,k]` in k order (the kernels' own order, so bit for bit), for
/// a width of 64 (streamed either way) and 7 (streamed only without `e`; below `L`), the
/// output and `e` starting 1 and 3 floats past the allocation (a head of neither 0 nor 4
/// floats: a wrong head is a misaligned streamed store, a fault), and nothing written
/// past them (256 floats after each left as they were).
#[test]
fn reconstruct_past_the_stream_threshold_by_the_rule() {
    let r = 2;
    for (rows, cols, off) in [(65_537usize, 64usize, 1usize), (599_187, 7, 3)] {
        let n = rows * cols;
        assert!(n * 4 >= STREAM_MIN_BYTES);
        let val = |i: usize| ((i * 7919) % 13) as f32 * 0.25 - 1.5;
        let p: Vec<f32> = (0..rows * r).map(val).collect();
        let q: Vec<f32> = (0..cols * r).map(|i| val(i + 5)).collect();
        let alpha = 0.5f32;
        let want: Vec<f32> = (0..n)
            .map(|x| {
                let (i, j) = (x / cols, x % cols);
                let mut v = 0.0f32;
                for k in 0..r {
                    v += alpha * p[k * rows + i] * q[k * cols + j];
                }
                v
            })
            .collect();
        let end = off + n;
        let untouched = |v: &[f32], x: f32| v[end..].iter().all(|y| y.to_bits() == x.to_bits());
        let mut out = vec![f32::NAN; end + 256];
        reconstruct(alpha, &p, &q, r, cols, &mut out[off..end], None);
        assert!(out[off..end] == want[..], "{rows} x {cols} without e");
        assert!(untouched(&out, f32::NAN), "{rows} x {cols}: past the end");
        let mut out = vec![f32::NAN; end + 256];
        let mut e = vec![1.0f32; end + 256];
        reconstruct(
            alpha,
            &p,
            &q,
            r,
            cols,
            &mut out[off..end],
            Some(&mut e[off..end]),
        );
        assert!(out[off..end] == want[..], "{rows} x {cols} with e");
        assert!(
            e[off..end].iter().zip(&want).all(|(x, w)| *x == 1.0 - w),
            "{rows} x {cols}: e -= out"
        );
        assert!(
            untouched(&out, f32::NAN) && untouched(&e, 1.0),
            "{rows} x {cols}: past the end with e"
        );
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

/// Rows swept together (`sweep_rows`, its doc's rule by hand): four at rank <= 4, two
/// above, fewer only for the last rows (2 or 3 left: 2; 1 left: 1).
#[test]
fn sweep_rows_by_hand() {
    for r in 1..=4 {
        for (left, want) in [(100, 4), (4, 4), (3, 2), (2, 2), (1, 1)] {
            assert_eq!(sweep_rows(left, r), want, "left {left} rank {r}");
        }
    }
    for r in 5..=MAX_FUSED_RANK {
        for (left, want) in [(100, 2), (4, 2), (3, 2), (2, 2), (1, 1)] {
            assert_eq!(sweep_rows(left, r), want, "left {left} rank {r}");
        }
    }
}

/// An empty matrix (no rows, or no columns) is a no-op: `P` stays, `Q` is zeroed; not a
/// division by zero columns.
#[test]
fn empty_matrices_are_a_no_op() {
    for cols in [0usize, 5] {
        let (mut e, mut p, mut q) = (Vec::<f32>::new(), Vec::<f32>::new(), vec![7.0f32; cols]);
        add_project_rows(&mut e, None, cols, &q.clone(), 1, &mut p, true, None);
        add_project_t(&mut e, None, cols, &p.clone(), 1, &mut q, true, None);
        assert!(q.iter().all(|&v| v == 0.0), "{cols}: {q:?}");
    }
}
