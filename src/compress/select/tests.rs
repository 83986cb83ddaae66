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
            let mut full = TopKScratch::new(0, 0);
            full.ensure_keys(k);
            let mut replay = full.clone();
            full.begin(k, thr).expect("begin");
            full.scan(0, &x);
            replay.begin(k, thr).expect("begin");
            replay.scan_candidates(wide.keys(), d);
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
