//! Tests of the orthonormalisation (`super`): Gram-Schmidt and Householder give
//! orthonormal columns spanning the input, and the rule for which tensors are compressed.

use super::*;
use ndarray::linalg::general_mat_mul;
use ndarray::{Array2, ShapeBuilder};
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;
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

    // At the rate exactly: PyTorch (ddp_comm_hooks/powerSGD_hook.py, `_should_compress`)
    // wants `compressed_size * min_compression_rate < uncompressed_size`, strictly:
    // (4+4)*1*2 = 16 is not < 16.
    assert_eq!(compressed_rank(4, 4, 1, 2.0), None);
    assert_eq!(compressed_rank(4, 5, 1, 2.0), Some(1)); // 18 < 20
    assert_eq!(compressed_rank(3, 1000, 4, 0.9), Some(3));
    assert_eq!(compressed_rank(3, 1000, 4, 1.0), None);
    // Rate 0 (ACP-SGD's default): every matrix with two or more rows, 1-D never.
    assert_eq!(compressed_rank(8, 8, 4, 0.0), Some(4));
    assert_eq!(compressed_rank(2, 768, 4, 0.0), Some(2));
    assert_eq!(compressed_rank(1, 1000, 4, 0.0), None);
}

/// `load_memory_order` copies a slice of the factor's length in memory order (a
/// column-major factor: column by column) and refuses any other length, leaving the
/// factor as it was.
#[test]
fn load_memory_order_copies_only_a_slice_of_its_length() {
    let mut f = Array2::<f32>::zeros((2, 3).f());
    assert!(load_memory_order(&mut f, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]));
    let want = Array2::from_shape_vec((2, 3), vec![1.0, 3.0, 5.0, 2.0, 4.0, 6.0]).unwrap();
    assert_eq!(f, want);
    assert!(!load_memory_order(&mut f, &[0.0; 5]));
    assert!(!load_memory_order(&mut f, &[0.0; 7]));
    assert_eq!(f, want);
}

/// `norm2` by hand: the Euclidean norm, 0 for zeros (not 0 x inf = NaN), the largest
/// |value| when it is not finite, and no overflow or underflow at 1e30 or 1e-30, over a
/// chunk of eight and a remainder.
#[test]
fn norm2_by_hand() {
    assert_eq!(norm2(&[]), 0.0);
    assert_eq!(norm2(&[0.0; 3]), 0.0);
    assert_eq!(norm2(&[3.0, -4.0]), 5.0);
    assert_eq!(norm2(&[1.0, f32::INFINITY]), f32::INFINITY);
    assert!(norm2(&[1.0, f32::NAN]).is_nan());
    // Nine elements: eight in the chunk, one in the remainder; sum of squares 81 + 4 x 9.
    let nine = [9.0, 3.0, 0.0, 3.0, 0.0, 0.0, 3.0, 0.0, 3.0];
    assert!((norm2(&nine) - 117f32.sqrt()).abs() < 1e-5);
    let big = norm2(&[3e30, 4e30]);
    assert!((big - 5e30).abs() < 1e24, "{big}");
    let tiny = norm2(&[3e-30, 4e-30]);
    assert!((tiny - 5e-30).abs() < 1e-36, "{tiny}");
}

/// `orthonormalize`'s edges: the rank cut to the columns the slice holds, no rows or no
/// columns a no-op, and columns beyond `rows` set to zero (3 x 4: the fourth is zero, the
/// first three Gram-Schmidt's of the input, by hand).
#[test]
fn orthonormalize_edges_by_hand() {
    let mut tau = [0.0f32; 4];
    // 3 x 4, column-major: (2, 0, 0), (1, 3, 0), (1, 1, -4), (5, 6, 7).
    let mut a = [2.0, 0.0, 0.0, 1.0, 3.0, 0.0, 1.0, 1.0, -4.0, 5.0, 6.0, 7.0];
    orthonormalize(&mut a, 3, 4, &mut tau);
    assert_eq!(
        a,
        [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, -1.0, 0.0, 0.0, 0.0]
    );
    // A slice of two columns asked for three: two orthonormalised, nothing past them.
    let mut a = [0.0, 2.0, 0.0, 3.0];
    orthonormalize(&mut a, 2, 3, &mut tau);
    assert_eq!(a, [0.0, 1.0, 1.0, 0.0]);
    // No rows, no columns: nothing to do.
    let mut none: [f32; 0] = [];
    orthonormalize(&mut none, 0, 3, &mut tau);
    let mut a = [1.0, 2.0];
    orthonormalize(&mut a, 0, 3, &mut tau);
    assert_eq!(a, [1.0, 2.0]);
    let mut a = [3.0, 4.0];
    orthonormalize(&mut a, 2, 0, &mut tau);
    assert_eq!(a, [3.0, 4.0]);
}

/// Gram-Schmidt up to `MGS_MAX_RANK` (and when `tau` is too short for QR), Householder
/// above it, told apart by their signs on an upper-triangular input with a positive
/// diagonal: Gram-Schmidt keeps each column's direction (`R`'s diagonal positive: the
/// first `r` columns of the identity), Householder with LAPACK `sgeqr2`'s convention
/// reflects each `x` onto `beta = -sign(x[0]) |x|` (`tau = 2`, `v = 0`: the columns of
/// `-I`).
#[test]
fn gram_schmidt_up_to_its_rank_householder_above_by_their_signs() {
    let upper = |rows: usize, r: usize| {
        Array2::from_shape_fn((rows, r).f(), |(i, j)| match i.cmp(&j) {
            std::cmp::Ordering::Equal => 2.0f32,
            std::cmp::Ordering::Less => 1.0,
            std::cmp::Ordering::Greater => 0.0,
        })
    };
    let eye = |rows: usize, r: usize, s: f32| {
        Array2::from_shape_fn((rows, r).f(), |(i, j)| if i == j { s } else { 0.0 })
    };
    let run = |r: usize, tau_len: usize| {
        let mut a = upper(12, r);
        let mut tau = vec![0.0; tau_len];
        assert!(orthonormalize_array(&mut a, &mut tau));
        a
    };
    assert_eq!(run(MGS_MAX_RANK, MGS_MAX_RANK), eye(12, MGS_MAX_RANK, 1.0));
    let r = MGS_MAX_RANK + 1;
    assert_eq!(run(r, r), eye(12, r, -1.0));
    assert_eq!(run(r, r + 1), eye(12, r, -1.0));
    // tau shorter than the rank: Gram-Schmidt.
    assert_eq!(run(r, r - 1), eye(12, r, 1.0));
}

/// `orthonormalize_array` refuses (false, the array unchanged) an array that is not
/// column-major contiguous.
#[test]
fn orthonormalize_array_refuses_other_layouts() {
    let mut a = Array2::from_shape_vec((2, 2), vec![3.0f32, 1.0, 4.0, 2.0]).unwrap();
    let before = a.clone();
    assert!(!orthonormalize_array(&mut a, &mut [0.0; 2]));
    assert_eq!(a, before);
}

/// Gram-Schmidt's dependent columns by hand (3 x 2, column-major): a remainder below
/// `1e-6` of the column's norm is replaced by the first unit vector `e_j, e_{j+1}, ...`
/// whose remainder has `|r|^2 >= 0.5 / (j + 1)`; one above it is kept.
#[test]
fn gram_schmidt_dependent_columns_by_hand() {
    let run = |mut a: [f32; 6]| {
        orthonormalize(&mut a, 3, 2, &mut [0.0; 2]);
        a
    };
    // A zero first column is e_0 (0.5 / 1: e_0's remainder is itself).
    assert_eq!(
        run([0.0, 0.0, 0.0, 0.0, 0.0, 5.0]),
        [1.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    );
    // Beside e_1, a zero column: e_1 leaves nothing, e_2 is next.
    assert_eq!(
        run([0.0, 5.0, 0.0, 0.0, 0.0, 0.0]),
        [0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    );
    // Beside (2, 3, 0) / sqrt(13): e_1's remainder (-6, 4, 0) / 13 has |r|^2 = 4/13,
    // above 0.5 / 2 (and below 0.5): kept, normalised to (-3, 2, 0) / sqrt(13).
    let a = run([2.0, 3.0, 0.0, 0.0, 0.0, 0.0]);
    let s = 13f32.sqrt();
    for (x, w) in a
        .iter()
        .zip([2.0 / s, 3.0 / s, 0.0, -3.0 / s, 2.0 / s, 0.0])
    {
        assert!((x - w).abs() < 1e-6, "{a:?}");
    }
    // (10, -5e-6, 0) beside (10, 0, 0): a remainder of 5e-6 < 1e-6 x 10 is replaced by
    // e_1; -2e-5 is kept, so the column is -e_1.
    assert_eq!(
        run([10.0, 0.0, 0.0, 10.0, -5e-6, 0.0]),
        [1.0, 0.0, 0.0, 0.0, 1.0, 0.0]
    );
    assert_eq!(
        run([10.0, 0.0, 0.0, 10.0, -2e-5, 0.0]),
        [1.0, 0.0, 0.0, 0.0, -1.0, 0.0]
    );
}
