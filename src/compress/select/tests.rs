//! Tests of the selection kernels (`super`) against a naive sort: exact top-k,
//! threshold selection, strided sampling, ties and edge sizes.

use super::*;
use crate::measure::rng::rng_for;
use rand::rngs::mock::StepRng;
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

/// A scratch for `k` after a full `scan` of `x` at threshold `thr`, and one after
/// `scan_candidates` of `keys` (collected from `x` at a lower threshold) in its place.
fn scan_and_replay(x: &[f32], keys: &[u64], k: usize, thr: f32) -> (TopKScratch, TopKScratch) {
    let mut full = TopKScratch::new(0, 0);
    full.ensure_keys(k);
    let mut replay = full.clone();
    full.begin(k, thr).expect("begin");
    full.scan(0, x);
    replay.begin(k, thr).expect("begin");
    replay.scan_candidates(keys, x.len());
    (full, replay)
}

/// `scan_candidates` over the keys `WideCandidates` collected at a lower threshold leaves
/// exactly the state of a full `scan`: the same candidates, compaction and selection,
/// whether the buffer compacts or not and whether `d` is a multiple of the block.
#[test]
fn candidate_replay_equals_full_scan() {
    for d in [10_000usize, 10_007, 31, 64] {
        let x = normal(d, 11 + d as u64);
        for (lower, thr, k) in [
            (1.5f32, 2.5f32, 40usize),
            (0.0, 2.5, 40),
            (0.3, 0.5, 40),
            (0.5, 0.5, 3),
            (1.0, 1.0, 1),
        ] {
            let mut wide = WideCandidates::default();
            wide.ensure(d);
            wide.clear();
            // In chunks, as DGC's pass feeds it.
            for (c, xc) in x.chunks(4096).enumerate() {
                wide.scan(c * 4096, xc, lower);
            }
            assert!(!wide.overflowed());
            let naive: Vec<usize> = (0..d).filter(|&i| x[i].abs() >= lower).collect();
            let got: Vec<usize> = wide.keys().iter().map(|&c| key_index(c) as usize).collect();
            assert_eq!(got, naive, "d {d} lower {lower}");
            let (mut full, mut replay) = scan_and_replay(&x, wide.keys(), k, thr);
            assert_eq!(
                replay.candidates(),
                full.candidates(),
                "d {d} thr {thr} k {k}"
            );
            assert_eq!(replay.thr.to_bits(), full.thr.to_bits());
            assert_eq!(replay.keys[..replay.len], full.keys[..full.len]);
            let (mut a, mut b) = (vec![0u32; k], vec![0u32; k]);
            let (mut va, mut vb) = (vec![0f32; k], vec![0f32; k]);
            let ma = full.finish_first(&x, k, &mut a, &mut va).expect("first");
            let mb = replay.finish_first(&x, k, &mut b, &mut vb).expect("first");
            assert_eq!(a[..ma], b[..mb]);
        }
    }
    // A full buffer stops the collection and says so.
    let x = normal(10_000, 3);
    let mut wide = WideCandidates::default();
    wide.ensure(10);
    wide.clear();
    wide.scan(0, &x, 0.0);
    assert!(wide.overflowed());
}

/// The mean of overlapping sections is the sum divided once per entry; entries nobody
/// sent are 0; the record of written entries is empty again for the next call.
#[test]
fn scatter_mean_divides_each_written_entry_once() {
    let d = 200;
    let idx0 = [3u32, 64, 65, 199];
    let idx1 = [3u32, 65, 128];
    let v0 = [1.0f32, 0.1, -2.5, 7.0];
    let v1 = [0.3f32, 1.7, -0.2];
    let mut words = Vec::new();
    words.extend(idx0);
    words.extend(v0.iter().map(|v| v.to_bits()));
    words.extend(idx1);
    words.extend(v1.iter().map(|v| v.to_bits()));
    let counts = [8, 6];
    let rec = Received {
        sum_f32: &[],
        gathered_u32: &words,
        gather_counts: &counts,
        ring_u32: &[],
        world_size: 2,
    };
    let mut touched = TouchedSet::default();
    touched.ensure(d);
    for _ in 0..2 {
        let mut out = vec![9.0f32; d];
        scatter_mean("t", 0, &rec, &mut out, &mut touched).expect("scatter");
        let mut want = vec![0.0f32; d];
        for (i, v) in idx0.iter().zip(&v0).chain(idx1.iter().zip(&v1)) {
            want[*i as usize] += v;
        }
        for w in want.iter_mut() {
            *w /= 2.0;
        }
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&out), bits(&want));
        assert!(touched.words.iter().all(|&w| w == 0));
    }
    let mut small = TouchedSet::default();
    small.ensure(64);
    assert!(scatter_mean("t", 0, &rec, &mut vec![0.0; d], &mut small).is_err());
}

/// The sampled threshold is the `r`-th largest of one draw per stride, with the sample
/// size `s = clamp(ceil(64 d / k), 4096, min(d / 4, 2^20))` and `r = ceil(h + 4 sqrt(h) + 4)`,
/// `h = s k / d` (the rule written again here). On `x[i] = i + 1` the sample rises with the
/// stride, so the `r`-th largest is the draw of stride `s - r`: its value lies in
/// `[(s - r) w + 1, (s - r + 1) w]`, `w = d / s`, whatever the draws. Each clamp and the
/// `r >= s` fallback (0) are reached; below `16 x 4096` elements or at `k = 0`, 0.
#[test]
fn sample_threshold_is_the_rth_largest_of_one_draw_per_stride() {
    for &(d, k, s, r) in &[
        // MIN_SAMPLE: ceil(64 x 65536 / 8192) = 512 -> 4096; h = 512, r = ceil(606.5).
        (65_536usize, 8_192usize, 4_096usize, 607usize),
        // inside: s = 8192; h = 64, r = 64 + 32 + 4.
        (65_536, 512, 8_192, 100),
        // d / 4: 65536 -> 16384; h = 16, r = 16 + 16 + 4.
        (65_536, 64, 16_384, 36),
        // inside, d not a power of two: ceil(64 x 100000 / 700) = 9143; h = 64.001..,
        // r = ceil(64.0014 + 32.0004 + 4) = 101; w = 10.
        (100_000, 700, 9_143, 101),
        // MAX_SAMPLE: d / 4 = 2^21 -> 2^20; h = 8, r = ceil(8 + 11.31 + 4) = 24.
        (1 << 23, 64, 1 << 20, 24),
    ] {
        let x: Vec<f32> = (0..d).map(|i| (i + 1) as f32).collect();
        let mut sc = TopKScratch::new(d, k);
        let thr = sc
            .sample_threshold(d, k, &mut rng_for(3, 1, 4, 1), |i| x[i])
            .expect("sample");
        let w = d / s;
        let (lo, hi) = (((s - r) * w + 1) as f32, ((s - r + 1) * w) as f32);
        assert!(
            (lo..=hi).contains(&thr),
            "d = {d} k = {k}: threshold {thr} outside [{lo}, {hi}] (s = {s}, r = {r})"
        );
    }
    let x: Vec<f32> = (0..70_000).map(|i| (i + 1) as f32).collect();
    let mut sc = TopKScratch::new(70_000, 70_000);
    let mut thr = |d: usize, k: usize| {
        sc.sample_threshold(d, k, &mut rng_for(3, 1, 4, 1), |i| x[i])
            .expect("sample")
    };
    // r >= s: ceil(64 x 65536 / 65536) = 64 -> 4096 = s, h = 4096, r > s.
    assert_eq!(thr(65_536, 65_536), 0.0);
    assert_eq!(thr(65_536, 0), 0.0);
    assert_eq!(thr(65_535, 64), 0.0);
    assert!(thr(65_536, 64) > 0.0);
}

/// `draw_sample` takes one element uniformly from each of `s` strides of `d / s`: each
/// draw lies in its own stride, and over 4,096 strides of 4 every offset occurs (a fixed
/// offset, or none, is not a random sample); a stride of 1 takes every element.
#[test]
fn draw_sample_takes_one_uniform_element_per_stride() {
    let d = 4 * 4_096;
    let x: Vec<f32> = (0..d).map(|i| i as f32).collect();
    let mut sc = TopKScratch::new(d, 1);
    let n = sc.draw_sample(d, 4_096, &mut rng_for(9, 0, 0, 0), |i| x[i]);
    assert_eq!(n, 4_096);
    let mut seen = [0usize; 4];
    for (j, &b) in sc.sample[..n].iter().enumerate() {
        let i = f32::from_bits(b) as usize;
        assert!((4 * j..4 * j + 4).contains(&i), "draw {j} at {i}");
        seen[i - 4 * j] += 1;
    }
    assert!(seen.iter().all(|&c| c > 800), "offsets {seen:?}");
    let n = sc.draw_sample(100, 100, &mut rng_for(9, 0, 0, 0), |i| x[i]);
    assert_eq!(n, 100);
    for (j, &b) in sc.sample[..n].iter().enumerate() {
        assert_eq!(f32::from_bits(b), j as f32);
    }
}

/// When the sampled threshold lets fewer than `k` elements pass, top-k scans again from
/// 0 and is still exact: with every draw 0 (`StepRng::new(0, 0)`: each draw at a stride's
/// start), `x[4j] = 10` for the first
/// 36 strides puts the 36th largest sample (r = 36 at d = 65536, k = 64) at 10, which 36
/// elements pass; the other 28 of the top 64 are 5s the sample never saw.
#[test]
fn a_threshold_too_high_rescans_from_zero() {
    let d = 65_536;
    let mut x = vec![5f32; d];
    for j in 0..d / 4 {
        x[4 * j] = if j < 36 { 10.0 } else { 1.0 };
    }
    let k = 64;
    let mut sc = TopKScratch::new(d, k);
    assert_eq!(
        sc.sample_threshold(d, k, &mut StepRng::new(0, 0), |i| x[i])
            .expect("sample"),
        10.0
    );
    let (mut idx, mut val) = (vec![0u32; k], vec![0f32; k]);
    let m = sc
        .top_k(&x, k, &mut StepRng::new(0, 0), &mut idx, &mut val)
        .expect("top_k");
    assert_eq!(m, k);
    let mut want: Vec<u32> = (0..36).map(|j| 4 * j).collect();
    // Then the 5s by the lower index: 1, 2, 3, 5, 6, 7, ... (28 of them).
    want.extend((0..d as u32).filter(|i| i % 4 != 0).take(28));
    want.sort_unstable();
    assert_eq!(idx, want);
    assert_eq!(val.iter().filter(|&&v| v == 10.0).count(), 36);
}

/// `max_k` is the largest selection the scratch was made for, at most its `d`, and
/// grows with `ensure_keys`; a scratch for `k = 0` still scans (its buffer holds the
/// two blocks a scan needs), and one grown from `k = 1` to 1,000 selects 1,000 exactly.
#[test]
fn max_k_and_the_candidate_buffer_grow_with_the_selection() {
    assert_eq!(TopKScratch::new(1_000, 10).max_k(), 10);
    assert_eq!(TopKScratch::new(5, 10).max_k(), 5);
    let x = normal(70_000, 11);
    let mut sc = TopKScratch::new(x.len(), 0);
    assert_eq!(sc.max_k(), 0);
    let (mut idx, mut val) = (vec![0u32; 1_000], vec![0f32; 1_000]);
    let m = sc
        .top_k(&x, 0, &mut rng_for(1, 0, 0, 0), &mut idx, &mut val)
        .expect("k = 0");
    assert_eq!(m, 0);
    let mut sc = TopKScratch::new(x.len(), 1);
    sc.ensure_keys(1_000);
    assert_eq!(sc.max_k(), 1_000);
    let m = sc
        .top_k(&x, 1_000, &mut rng_for(1, 0, 0, 0), &mut idx, &mut val)
        .expect("k = 1000");
    assert_eq!(m, 1_000);
    assert_eq!(idx, reference(&x, 1_000));
}

/// The candidate buffer holds `2 max_k + 2 BLOCK` keys (192 at `max_k = 64`): at
/// threshold 0 every element is a candidate, so a scan of 192 elements keeps them all;
/// a block more compacts to the top 64, whose 64th magnitude then bars the rest (only
/// the later elements strictly above it enter). A partial last block compacts only when
/// a whole block would not fit: 160 + 5 elements fit (160 + 32 = 192), 192 + 5 do not.
#[test]
fn the_candidate_buffer_holds_two_max_k_plus_two_blocks() {
    let x = normal(400, 13);
    let mut top: Vec<f32> = x[..192].iter().map(|v| v.abs()).collect();
    top.sort_by(|a, b| b.total_cmp(a));
    let above = |r: std::ops::Range<usize>| x[r].iter().filter(|v| v.abs() > top[63]).count();
    let mut sc = TopKScratch::new(x.len(), 64);
    let mut cands = |d: usize| {
        sc.begin(64, 0.0).expect("begin");
        sc.scan(0, &x[..d]);
        sc.candidates()
    };
    assert_eq!(cands(192), (192, false));
    assert_eq!(cands(224), (64 + above(192..224), true));
    assert_eq!(cands(165), (165, false));
    assert_eq!(cands(197), (64 + above(192..197), true));
}

/// A selection is refused past each bound alone (`k > max_k`, `k > d`, `d > max_d`,
/// `d > 2^32 - 1`) and accepted at each bound.
#[test]
fn check_refuses_each_bound_alone_and_accepts_each_at_equality() {
    let sc = TopKScratch::new(100, 10);
    assert!(sc.check(100, 11).is_err(), "k > max_k");
    assert!(sc.check(5, 6).is_err(), "k > d");
    assert!(sc.check(101, 10).is_err(), "d > max_d");
    assert!(sc.check(100, 10).is_ok());
    assert!(sc.check(10, 10).is_ok());
    assert!(sc.check(0, 0).is_ok());
    // Indices are u32: d = 2^32 - 1 is the largest (the scratch itself is small: a
    // 2^20-element sample and 66 keys).
    let big = TopKScratch::new(1 << 33, 1);
    assert!(big.check(u32::MAX as usize, 1).is_ok());
    assert!(big.check(u32::MAX as usize + 1, 1).is_err(), "d > 2^32 - 1");
}

/// `scan`'s partial last block checks for room whether or not it holds a candidate, and
/// the replay must too, once, compacting exactly when a block would not fit: `big` large
/// elements, then a tail of 5, with `k = 32` (a buffer of 128 keys). A small tail (0.5)
/// after 128 compacts the full scan to the top 32; after 96 a block still fits (96 + 32 =
/// 128), so nothing compacts, and a tail that passes (3.0) joins them (101, with no second
/// check for room after it). The small tail is either among the replayed keys (collected
/// at a lower threshold, 0.3) but fails the scan's (1.0), or not among them (at 1.0).
#[test]
fn a_replay_checks_for_room_at_a_tail_without_candidates() {
    for (big, tail, want) in [
        (128usize, 0.5f32, (32usize, true)),
        (96, 0.5, (96, false)),
        (96, 3.0, (101, false)),
    ] {
        let d = big + 5;
        let mut x = normal(d, 17);
        for v in &mut x[..big] {
            *v = v.signum() * (2.0 + v.abs());
        }
        x[big..].fill(tail);
        for lower in [0.3f32, 1.0] {
            let mut wide = WideCandidates::default();
            wide.ensure(d);
            wide.clear();
            wide.scan(0, &x, lower);
            let n = if tail >= lower { d } else { big };
            assert_eq!(wide.keys().len(), n);
            let (full, replay) = scan_and_replay(&x, wide.keys(), 32, 1.0);
            assert_eq!(full.candidates(), want, "{big} {tail}");
            assert_eq!(replay.candidates(), want, "{big} {tail}, lower {lower}");
            assert_eq!(replay.thr.to_bits(), full.thr.to_bits());
        }
    }
}

/// A compaction keeps the top `k` and bars every later element not strictly above the
/// `k`-th magnitude: the magnitudes 1..192 fill the buffer of `k = 64`; the next
/// block compacts to 129..192 and then meets 129 itself (barred: a tie with the 64th)
/// and 31 values of `j + 0.25` above it, 33 more follow (all admitted): 64 + 64
/// candidates, and the top 64 of all 257 exactly.
#[test]
fn a_compaction_bars_ties_with_the_kth_and_admits_everything_above() {
    // 1..192 in a scrambled order (97 i mod 193: a permutation), so no partition
    // leaves the 64th largest where a sorted input would.
    let mut x: Vec<f32> = (1..=192).map(|i| (97 * i % 193) as f32).collect();
    x.push(129.0);
    x.extend((0..64).map(|j| 129.25 + j as f32));
    assert_eq!(x.len(), 257);
    let k = 64;
    let mut sc = TopKScratch::new(x.len(), k);
    sc.begin(k, 0.0).expect("begin");
    sc.scan(0, &x);
    assert_eq!(sc.candidates(), (128, true));
    assert!(sc.complete());
    let (mut idx, mut val) = (vec![0u32; k], vec![0f32; k]);
    assert_eq!(sc.finish(&x, k, &mut idx, &mut val).expect("finish"), k);
    assert_eq!(idx, reference(&x, k));
}

/// `complete` says whether the candidates hold the exact top `k`: at least `k` passed the
/// starting threshold, or a compaction kept `k` of more.
#[test]
fn complete_needs_k_candidates_or_a_compaction() {
    let x: Vec<f32> = (1..=300).map(|v| v as f32).collect();
    let mut sc = TopKScratch::new(x.len(), 10);
    for (thr, k, want) in [
        (291.0f32, 10usize, (10usize, false, true)),
        (292.0, 10, (9, false, false)),
        // Rising values at 0 with 84 keys: blocks 1-2 (64), block 3 compacts to 10 and
        // adds 32 (42), block 4 (74), ... block 9 compacts (42), the last 12 join (54).
        (0.0, 10, (54, true, true)),
    ] {
        sc.begin(k, thr).expect("begin");
        sc.scan(0, &x);
        let (n, compacted) = sc.candidates();
        assert_eq!((n, compacted, sc.complete()), want, "thr {thr}");
    }
    sc.begin(10, 0.0).expect("begin");
    sc.scan(0, &x[..20]);
    assert_eq!(sc.candidates(), (20, false));
    assert!(sc.complete());
    sc.begin(10, 0.0).expect("begin");
    sc.scan(0, &x[..9]);
    assert!(!sc.complete());
}

/// `finish` refuses an output too short on either side (indices or values).
#[test]
fn finish_refuses_either_output_too_short() {
    let x: Vec<f32> = (1..=50).map(|v| v as f32).collect();
    let mut sc = TopKScratch::new(x.len(), 5);
    for (ni, nv) in [(4usize, 5usize), (5, 4)] {
        sc.begin(5, 0.0).expect("begin");
        sc.scan(0, &x);
        let (mut idx, mut val) = (vec![0u32; ni], vec![0f32; nv]);
        let e = sc
            .finish(&x, 5, &mut idx, &mut val)
            .unwrap_err()
            .to_string();
        assert!(e.contains("output holds 4 < 5 selected elements"), "{e}");
    }
}

/// Elements of `start, start + stride, ... < d`: `ceil((d - start) / stride)`, and none
/// for a zero stride or a start at or past the end.
#[test]
fn strided_count_by_hand() {
    assert_eq!(strided_count(10, 1, 3), 3); // 1, 4, 7
    assert_eq!(strided_count(10, 0, 3), 4); // 0, 3, 6, 9
    assert_eq!(strided_count(10, 9, 1), 1);
    assert_eq!(strided_count(10, 0, 0), 0);
    assert_eq!(strided_count(10, 10, 3), 0);
    assert_eq!(strided_count(10, 12, 3), 0);
    assert_eq!(strided_count(0, 0, 0), 0);
}

/// `WideCandidates::ensure(cap)` holds `cap + BLOCK` keys (a whole block past `cap`): at
/// threshold 0, 96 elements fit `ensure(64)` and a 97th overflows; `clear` starts a new
/// pass, empty and not overflowed; a smaller `ensure` after a larger keeps the room.
#[test]
fn wide_candidates_hold_cap_plus_a_block_and_clear_starts_again() {
    let x: Vec<f32> = (1..=97).map(|v| v as f32).collect();
    let mut w = WideCandidates::default();
    w.ensure(64);
    w.clear();
    w.scan(0, &x[..96], 0.0);
    assert!(!w.overflowed());
    assert_eq!(w.keys().len(), 96);
    w.clear();
    w.scan(0, &x, 0.0);
    assert!(w.overflowed());
    w.clear();
    assert!(!w.overflowed());
    assert!(w.keys().is_empty());
    w.scan(0, &x[..3], 2.0);
    let got: Vec<u32> = w.keys().iter().map(|&c| key_index(c)).collect();
    assert_eq!(got, [1, 2]);
    // It grows, never shrinks: after ensure(100), ensure(64) keeps its 132 keys, where
    // four blocks (128) fit; 96 keys would overflow at the fourth.
    let x: Vec<f32> = (1..=128).map(|v| v as f32).collect();
    let mut w = WideCandidates::default();
    w.ensure(100);
    w.ensure(64);
    w.clear();
    w.scan(0, &x, 0.0);
    assert!(!w.overflowed());
    assert_eq!(w.keys().len(), 128);
}

/// The streaming scan against its rule written again with a full sort: blocks of 32, a
/// block with a candidate (the partial last one always) first compacts when 32 more keys
/// would not fit in `2k + 64`, keeping the top `k` by `(|x|, lower index)` and raising the
/// threshold to just above the `k`-th magnitude; then the block's elements passing the
/// threshold enter. Random (NaN-free) inputs, several `k`: the same candidates, flag and
/// threshold.
#[test]
fn scan_matches_its_rule_with_a_full_sort() {
    for seed in 0..12u64 {
        for &(d, k) in &[(1_000usize, 1usize), (1_000, 7), (3_001, 64), (3_001, 200)] {
            let x = normal(d, 100 + seed);
            let cap = 2 * k + 64;
            let (mut cands, mut thr, mut compacted) = (Vec::<u64>::new(), 0f32, false);
            for (b, blk) in x.chunks(32).enumerate() {
                let partial = blk.len() < 32;
                if partial || blk.iter().any(|v| v.abs() >= thr) {
                    if cands.len() + 32 > cap {
                        compacted = true;
                        cands.sort_unstable_by(|a, b| b.cmp(a));
                        cands.truncate(k);
                        thr = f32::from_bits(((cands[k - 1] >> 32) as u32) + 1);
                    }
                    for (j, &v) in blk.iter().enumerate() {
                        if v.abs() >= thr {
                            let bits = u64::from(v.to_bits() & 0x7fff_ffff);
                            cands.push((bits << 32) | u64::from(!((32 * b + j) as u32)));
                        }
                    }
                }
            }
            let mut sc = TopKScratch::new(d, k);
            sc.begin(k, 0.0).expect("begin");
            sc.scan(0, &x);
            assert_eq!(
                sc.candidates(),
                (cands.len(), compacted),
                "seed {seed} k {k}"
            );
            assert_eq!(sc.thr.to_bits(), thr.to_bits(), "seed {seed} k {k}");
            let mut got = sc.keys[..sc.len].to_vec();
            got.sort_unstable();
            cands.sort_unstable();
            assert_eq!(got, cands, "seed {seed} k {k}");
        }
    }
}

/// The sample buffer holds `d / 4` elements, at least 4,096 (or `d` when smaller) and at
/// most 2^20 (4 MiB): a draw of more returns what the buffer holds.
#[test]
fn the_sample_buffer_is_a_quarter_of_d_within_its_bounds() {
    let get = |i: usize| i as f32;
    for (max_d, want) in [
        (100_000usize, 25_000usize),
        (10_000, 4_096),
        (1_000, 1_000),
        (1 << 23, 1 << 20),
    ] {
        let mut sc = TopKScratch::new(max_d, 1);
        assert_eq!(
            sc.draw_sample(max_d, max_d, &mut rng_for(5, 0, 0, 0), get),
            want,
            "{max_d}"
        );
    }
}

/// `scatter_mean` refuses each fault of the gathered sections alone: no workers, a count
/// of sections other than the world size (the words' total right), a total other than the
/// words present (the sections' count right); 3 workers of one pair each pass.
#[test]
fn scatter_mean_refuses_each_fault_of_the_sections_alone() {
    let words = [0u32, 1f32.to_bits(), 1, 2f32.to_bits(), 2, 3f32.to_bits()];
    let mut touched = TouchedSet::default();
    touched.ensure(4);
    let mut go = |n: usize, counts: &[usize], words: &[u32]| {
        let rec = Received {
            sum_f32: &[],
            gathered_u32: words,
            gather_counts: counts,
            ring_u32: &[],
            world_size: n,
        };
        scatter_mean("t", 0, &rec, &mut [0.0f32; 4], &mut touched)
    };
    assert!(go(3, &[2, 2, 2], &words).is_ok());
    assert!(go(0, &[], &[]).is_err(), "no workers");
    assert!(go(3, &[2, 4], &words).is_err(), "2 sections for 3 workers");
    assert!(
        go(3, &[2, 2, 2], &words[..4]).is_err(),
        "6 words counted, 4 present"
    );
    assert!(
        go(3, &[2, 2, 4], &words).is_err(),
        "8 words counted, 6 present"
    );
}

/// A tensor is addressable by u32 indices from 1 to 2^32 - 1 elements.
#[test]
fn indexable_len_from_one_to_u32_max() {
    assert_eq!(
        indexable_len("t", 0, 1, u32::MAX as usize).expect("max"),
        u32::MAX as usize
    );
    assert_eq!(indexable_len("t", 0, 3, 5).expect("15"), 15);
    assert!(indexable_len("t", 0, 1 << 16, 1 << 16).is_err(), "2^32");
    assert!(indexable_len("t", 0, 0, 5).is_err(), "empty");
}
