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

/// The AVX2 lanes run only when asked for and present: asked on a CPU without AVX2 is
/// SSE2 (not SIGILL), and not asked is SSE2 on any CPU (what lets
/// `fused_pass_matches_reference` test the SSE2 path on an AVX2 machine).
#[cfg(target_arch = "x86_64")]
#[test]
fn avx2_only_when_asked_and_present() {
    assert!(use_avx2(true, true));
    assert!(!use_avx2(true, false));
    assert!(!use_avx2(false, true));
    assert!(!use_avx2(false, false));
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
        let l1_ref: f64 = p.iter().map(|v| v.abs() as f64).sum();
        let mut w_ref = vec![0u32; words_for(d)];
        pack_signs(&p, &mut w_ref);
        // the AVX2 lanes where the CPU has them, and the SSE2 lanes
        for avx2 in [true, false] {
            let mut e = e0.clone();
            let mut w = vec![0u32; words_for(d)];
            let l1 = if avx2 {
                fused_ef_pack(&g, &mut e, lag, &mut w)
            } else {
                fused_ef_pack_on(&g, &mut e, lag, &mut w, false)
            };
            assert_eq!(e, p, "d={d} avx2={avx2}");
            assert!(
                (l1 - l1_ref).abs() <= 1e-5 * l1_ref.max(1.0),
                "d={d} avx2={avx2}: {l1} vs {l1_ref}"
            );
            assert_eq!(w, w_ref, "d={d} avx2={avx2}");
        }
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

/// The merge rule `own = (incoming & !mask) | (own & mask)` on distinct bit patterns, by
/// hand: a mask of probability 1 keeps `own`, of probability 0 takes `incoming`, in both
/// halves of each 64-bit mask word and in the odd last word.
#[test]
fn merge_keeps_own_bits_under_the_mask_and_takes_incoming_elsewhere() {
    let mut rng = rng_for(11, 0, 0, 0);
    let inc: Vec<u32> = vec![
        0xAAAA_AAAA,
        0x0F0F_0F0F,
        0x1234_5678,
        0x8000_0001,
        0xFFFF_0000,
    ];
    let own0: Vec<u32> = vec![
        0x5555_5555,
        0xF0F0_F0F0,
        0x8765_4321,
        0x7FFF_FFFE,
        0x0000_FFFF,
    ];
    let mut own = own0.clone();
    merge_masked(&inc, &mut own, &BernoulliMask::new(1, 1), &mut rng);
    assert_eq!(own, own0, "mask all ones: own kept");
    merge_masked(&inc, &mut own, &BernoulliMask::new(0, 1), &mut rng);
    assert_eq!(own, inc, "mask all zeros: incoming taken");
}

/// `check_gathered` accepts exactly `world_size` sections of `each` words and refuses every
/// other shape, each fault alone (a zero world, a section count, one section's length, the
/// total), with the method in the message.
#[test]
fn check_gathered_refuses_each_fault_alone() {
    let recv = |gathered: &'static [u32], counts: &'static [usize], n: usize| Received {
        sum_f32: &[],
        gathered_u32: gathered,
        gather_counts: counts,
        ring_u32: &[],
        world_size: n,
    };
    const SIX: [u32; 6] = [0; 6];
    const FIVE: [u32; 5] = [0; 5];
    // 3 workers x 2 words = 6 (3 + 2 = 5 and 3 / 2 = 1 would differ).
    assert!(check_gathered("m", 4, &recv(&SIX, &[2, 2, 2], 3), 2).is_ok());
    // a zero world with nothing gathered
    assert!(check_gathered("m", 4, &recv(&[], &[], 0), 2).is_err());
    // two sections from three workers, the total right
    assert!(check_gathered("m", 4, &recv(&SIX, &[3, 3], 3), 2).is_err());
    // uneven sections, the total right
    assert!(check_gathered("m", 4, &recv(&SIX, &[1, 2, 3], 3), 2).is_err());
    // the sections right, the total short
    let e = check_gathered("m", 4, &recv(&FIVE, &[2, 2, 2], 3), 2).unwrap_err();
    assert!(e.to_string().contains("method m: tensor 4"), "{e}");
}

/// `density` must lie in (0, 1] (docs of `check_density`): both ends and NaN.
#[test]
fn density_bounds() {
    for ok in [1e-9, 0.5, 1.0] {
        assert!(check_density("m", ok).is_ok(), "{ok}");
    }
    for bad in [0.0, -0.5, 1.0 + 1e-12, 2.0, f64::NAN] {
        let e = check_density("m", bad).unwrap_err();
        assert!(e.to_string().contains("'density'"), "{bad}: {e}");
    }
}

/// Slots: `put_slot` grows the table to `t + 1` and never shrinks it, `slot` refuses a
/// missing or empty entry, `Slot::d` is `rows x cols`, and `checked_len` refuses an
/// overflow.
#[test]
fn slots_grow_and_refuse_missing_tensors() {
    let mut slots: Vec<Option<Slot<u8>>> = Vec::new();
    put_slot(&mut slots, 2, 3, 5, 7);
    assert_eq!(slots.len(), 3);
    assert!(slots[0].is_none() && slots[1].is_none());
    put_slot(&mut slots, 0, 4, 6, 9);
    assert_eq!(slots.len(), 3);
    let s = slot("m", &mut slots, 2).unwrap();
    assert_eq!((s.rows, s.cols, s.s, s.d()), (3, 5, 7, 15));
    assert_eq!(slot("m", &mut slots, 0).unwrap().s, 9);
    assert!(slot("m", &mut slots, 1).is_err());
    assert!(slot("m", &mut slots, 3).is_err());
    assert_eq!(checked_len("m", 0, 3, 5).unwrap(), 15);
    assert!(checked_len("m", 0, usize::MAX, 2).is_err());
}

/// `input_slice` and `output_slice` give the registered shape's elements and refuse another
/// shape or a non-contiguous view.
#[test]
fn slices_check_shape_and_layout() {
    let sl = Slot {
        rows: 2,
        cols: 3,
        s: (),
    };
    let a = ndarray::Array2::from_shape_vec((2, 3), vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    assert_eq!(
        input_slice("m", 0, &sl, &a.view()).unwrap(),
        &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    );
    let at = a.t().to_owned();
    assert!(input_slice("m", 0, &sl, &at.view()).is_err());
    let b = ndarray::Array2::from_shape_vec((3, 2), vec![0.0f32; 6]).unwrap();
    assert!(input_slice("m", 0, &sl, &b.t()).is_err(), "transposed view");
    let mut o = ndarray::Array2::<f32>::zeros((2, 3));
    assert_eq!(output_slice("m", 0, &sl, o.view_mut()).unwrap().len(), 6);
    let mut ot = ndarray::Array2::<f32>::zeros((3, 2));
    assert!(output_slice("m", 0, &sl, ot.view_mut()).is_err());
    assert!(output_slice("m", 0, &sl, ot.view_mut().reversed_axes()).is_err());
}

/// `touched_zeros` gives `len` zeros whether or not registration touches.
#[test]
fn touched_zeros_are_zeros() {
    assert_eq!(touched_zeros::<u32>(5), vec![0; 5]);
    let _g = super::super::setup::untouched_registration();
    assert_eq!(touched_zeros::<f32>(3), vec![0.0; 3]);
}
