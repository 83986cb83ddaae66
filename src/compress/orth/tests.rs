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
