//! Tests of the bit kernels (`super`): sign packing round trip, the AVX2 error-feedback
//! block against SSE, the fused pass against a reference, Bernoulli mask probabilities and
//! the masked merge.

use super::*;
use crate::measure::rng::rng_for;
use rand::Rng;

#[test]
fn pack_unpack_round_trip() {
    let mut rng = rng_for(7, 0, 0, 0);
    for &d in &[0usize, 1, 31, 32, 33, 1000] {
        let x: Vec<f32> = (0..d).map(|_| rng.gen_range(-1.0f32..1.0)).collect();
        let mut w = vec![0xdead_beefu32; words_for(d)];
        pack_signs(&x, &mut w);
        for (i, v) in x.iter().enumerate() {
            assert_eq!((w[i / 32] >> (i % 32)) & 1 == 1, *v >= 0.0, "d={d} i={i}");
        }
        if d % 32 != 0 {
            assert_eq!(w[d / 32] >> (d % 32), 0, "padding bits must be 0");
        }
        let mut y = vec![0.0f32; d];
        unpack_signs(&w, 0.5, &mut y);
        for (a, b) in x.iter().zip(&y) {
            assert_eq!(*b, 0.5f32.copysign(*a));
        }
        unpack_signs_add(&w, 0.25, &mut y);
        for (a, b) in x.iter().zip(&y) {
            assert_eq!(*b, 0.75f32.copysign(*a));
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[test]
fn avx2_ef_block_matches_sse() {
    if !simd::has_avx2() {
        return;
    }
    let mut rng = crate::measure::rng::rng_for(1, 2, 3, 4);
    let g: Vec<f32> = (0..1024)
        .map(|_| rng.next_u32() as f32 / u32::MAX as f32 - 0.5)
        .collect();
    let e0: Vec<f32> = (0..1024)
        .map(|i| {
            if i % 7 == 0 {
                0.0
            } else {
                (i as f32 - 500.0) * 1e-3
            }
        })
        .collect();
    let (mut e1, mut e2) = (e0.clone(), e0.clone());
    let (mut w1, mut w2) = (vec![0u32; 32], vec![0u32; 32]);
    let lag = 0.25f32.to_bits();
    let n1 = simd::ef_block(&g, &mut e1, lag, &mut w1);
    // SAFETY: AVX2 checked above.
    let n2 = unsafe { simd::ef_block_avx2(&g, &mut e2, lag, &mut w2) };
    assert_eq!(e1, e2);
    assert_eq!(w1, w2);
    assert!((n1 - n2).abs() <= 1e-5 * n1);
}

#[test]
fn fused_pass_matches_reference() {
    let mut rng = rng_for(8, 0, 0, 0);
    for &d in &[0usize, 1, 33, 1000, 5000] {
        let g: Vec<f32> = (0..d).map(|_| rng.gen_range(-1.0f32..1.0)).collect();
        let e0: Vec<f32> = (0..d).map(|_| rng.gen_range(-1.0f32..1.0)).collect();
        let lag = 0.3f32;
        let p: Vec<f32> = g
            .iter()
            .zip(&e0)
            .map(|(g, e)| g + (e - lag.copysign(*e)))
            .collect();
        let mut e = e0.clone();
        let mut w = vec![0u32; words_for(d)];
        let l1 = fused_ef_pack(&g, &mut e, lag, &mut w);
        assert_eq!(e, p);
        let l1_ref: f64 = p.iter().map(|v| v.abs() as f64).sum();
        assert!(
            (l1 - l1_ref).abs() <= 1e-5 * l1_ref.max(1.0),
            "{l1} vs {l1_ref}"
        );
        let mut w_ref = vec![0u32; words_for(d)];
        pack_signs(&p, &mut w_ref);
        assert_eq!(w, w_ref);
        let mut e2 = e0.clone();
        apply_lag(&mut e2, lag);
        let p2: Vec<f32> = g.iter().zip(&e2).map(|(g, e)| g + e).collect();
        assert_eq!(p2, p);
    }
}

#[test]
fn mask_probability_is_one_over_j_plus_one() {
    let mut rng = rng_for(9, 0, 0, 0);
    let words = 20_000u64; // 1.28M bits per j
    for j in 1..=7u64 {
        let m = BernoulliMask::new(1, j + 1);
        let p = 1.0 / (j + 1) as f64;
        assert!(p - m.prob() >= 0.0 && p - m.prob() < 2f64.powi(-(MASK_DIGITS as i32)));
        let ones: u64 = (0..words)
            .map(|_| m.next(&mut rng).count_ones() as u64)
            .sum();
        let n = (64 * words) as f64;
        let freq = ones as f64 / n;
        let sigma = (p * (1.0 - p) / n).sqrt();
        assert!(
            (freq - p).abs() < 5.0 * sigma,
            "j={j}: freq {freq} vs {p} (sigma {sigma})"
        );
    }
    assert_eq!(BernoulliMask::new(1, 2).len, 1);
    assert_eq!(BernoulliMask::new(0, 3).next(&mut rng), 0);
    assert_eq!(BernoulliMask::new(3, 3).next(&mut rng), u64::MAX);
}

#[test]
fn merge_takes_own_where_mask_is_set() {
    let mut rng = rng_for(10, 0, 0, 0);
    let inc = vec![0u32; 5];
    let mut own = vec![u32::MAX; 5];
    merge_masked(&inc, &mut own, &BernoulliMask::new(1, 1), &mut rng);
    assert_eq!(own, vec![u32::MAX; 5]);
    merge_masked(&inc, &mut own, &BernoulliMask::new(0, 1), &mut rng);
    assert_eq!(own, vec![0; 5]);
}
