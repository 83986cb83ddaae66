//! Tests of the selection kernels (`super`) against a naive sort: exact top-k,
//! threshold selection, strided sampling, ties and edge sizes.

use super::*;
use crate::measure::rng::rng_for;
use rand_distr::{Distribution, StandardNormal};

/// Naive reference: sort all indices by (|x| desc, index asc), keep k, sort by index.
fn reference(x: &[f32], k: usize) -> Vec<u32> {
    let mut idx: Vec<u32> = (0..x.len() as u32).collect();
    idx.sort_by(|&a, &b| {
        abs_bits(x[b as usize])
            .cmp(&abs_bits(x[a as usize]))
            .then(a.cmp(&b))
    });
    idx.truncate(k);
    idx.sort_unstable();
    idx
}

fn check(x: &[f32], k: usize) {
    let mut s = TopKScratch::new(x.len(), k);
    let mut idx = vec![0u32; k];
    let mut val = vec![0f32; k];
    let m = s
        .top_k(x, k, &mut rng_for(7, 0, 0, 0), &mut idx, &mut val)
        .expect("top_k");
    assert_eq!(m, k);
    let r = reference(x, k);
    assert_eq!(idx, r, "d = {} k = {k}", x.len());
    for (&i, &v) in idx.iter().zip(&val) {
        assert_eq!(v.to_bits(), x[i as usize].to_bits());
    }
}

fn normal(d: usize, seed: u64) -> Vec<f32> {
    let mut r = rng_for(seed, 1, 2, 3);
    (0..d).map(|_| StandardNormal.sample(&mut r)).collect()
}

#[test]
fn random_data_matches_reference() {
    for &(d, k) in &[
        (100usize, 7usize),
        (70_000, 70),
        (200_000, 200),
        (300_001, 1),
        (150_000, 20_000),
    ] {
        check(&normal(d, d as u64), k);
    }
}

#[test]
fn heavy_tailed_data_matches_reference() {
    // Cauchy-like: ratio of normals, plus exponential magnitudes spanning decades.
    let a = normal(200_000, 1);
    let b = normal(200_000, 2);
    let x: Vec<f32> = a
        .iter()
        .zip(&b)
        .map(|(p, q)| p / (q.abs() + 1e-3) * if p > &0.0 { 1.0 } else { 1e-6 })
        .collect();
    check(&x, 200);
    check(&x, 5_000);
}

#[test]
fn ties_and_all_equal() {
    let few: Vec<f32> = normal(180_000, 3)
        .iter()
        .map(|v| (v * 2.0).round())
        .collect();
    check(&few, 180);
    check(&few, 9_000);
    let eq = vec![-0.5f32; 100_000];
    check(&eq, 100);
    check(&eq, 1);
    let zeros = vec![0f32; 70_000];
    check(&zeros, 70);
    // Only a handful of non-zeros: the sampled threshold is 0, still exact.
    let mut sparse = vec![0f32; 90_000];
    sparse[5] = 1.0;
    sparse[80_000] = -3.0;
    check(&sparse, 90);
}

#[test]
fn edge_sizes_and_k() {
    for d in 1..=3 {
        let x = normal(d, 9);
        for k in 1..=d {
            check(&x, k);
        }
    }
    let x = normal(100_000, 4);
    check(&x, 1);
    check(&x, 100_000);
    check(&x[..33], 33);
}

#[test]
fn rejects_oversized_requests() {
    let mut s = TopKScratch::new(10, 2);
    let x = [1f32; 10];
    let (mut i, mut v) = ([0u32; 3], [0f32; 3]);
    assert!(s
        .top_k(&x, 3, &mut rng_for(0, 0, 0, 0), &mut i, &mut v)
        .is_err());
}

#[test]
fn threshold_selection() {
    let x = [0.5f32, -2.0, 1.0, -1.0, 0.0];
    let mut idx = [0u32; 2];
    assert_eq!(select_threshold(&x, 1.0, &mut idx), 3);
    assert_eq!(idx, [1, 2]);
}

#[test]
fn strided_sample_and_first_survivors() {
    let x = normal(10_000, 5);
    let mut s = TopKScratch::new(0, 0);
    s.ensure_keys(40);
    s.ensure_sample(104);
    // importance[start::stride]: ceil((d - start) / stride) elements.
    assert_eq!(
        s.draw_strided(10_000, 96, 97, |i| x[i]).expect("sample"),
        103
    );
    assert_eq!(s.sample[2], abs_bits(x[96 + 2 * 97]));
    assert!(s.draw_strided(10_000, 0, 96, |i| x[i]).is_err());
    let naive = |thr: f32, keep: usize| -> Vec<u32> {
        (0..x.len() as u32)
            .filter(|&i| x[i as usize].abs() >= thr)
            .take(keep)
            .collect()
    };
    // Few candidates (no compaction) and many (compacted: x is scanned again).
    for (thr, keep) in [(2.8f32, 40usize), (2.8, 3), (0.5, 40)] {
        s.begin(keep, thr).expect("begin");
        s.scan(0, &x[..5_000]);
        s.scan(5_000, &x[5_000..]);
        assert_eq!(s.candidates().1, thr < 1.0);
        let (mut idx, mut val) = ([0u32; 40], [0f32; 40]);
        let m = s.finish_first(&x, keep, &mut idx, &mut val).expect("first");
        let want = naive(thr, keep);
        assert_eq!(&idx[..m], &want[..]);
        for (&i, &v) in idx[..m].iter().zip(&val) {
            assert_eq!(v.to_bits(), x[i as usize].to_bits());
        }
    }
}
