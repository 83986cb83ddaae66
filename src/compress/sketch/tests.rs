//! Tests of the Count Sketch compressor (`super`): hashing, the sketch and its
//! estimates against their direct definitions, error-feedback conservation, validation.

use super::*;
use ndarray::Array2;
use rand_distr::{Distribution, StandardNormal};

fn params(density: f64, rows: usize, cols_per_k: f64) -> MethodParams {
    MethodParams {
        density,
        sketch_rows: rows,
        sketch_cols_per_k: cols_per_k,
        ..MethodParams::default()
    }
}

fn make(p: &MethodParams, rank: usize, n: usize, rows: usize, cols: usize) -> Sketch {
    let mut s = Sketch::new(
        p,
        WorkerCtx {
            rank,
            world_size: n,
            seed: 5,
        },
    )
    .unwrap();
    s.register(0, rows, cols).unwrap();
    s
}

fn randn(seed: u64, rows: usize, cols: usize) -> Array2<f32> {
    let mut rng = rng_for(seed, 0, 0, 0);
    Array2::from_shape_fn((rows, cols), |_| StandardNormal.sample(&mut rng))
}

fn sketch_of(p: &MethodParams, g: &Array2<f32>) -> Vec<f32> {
    let mut s = make(p, 0, 1, g.nrows(), g.ncols());
    let mut wire = Wire::default();
    s.compress(0, 0, g.view(), &mut wire).unwrap();
    wire.sum_f32
}

#[test]
fn parameters_are_validated() {
    let ctx = WorkerCtx {
        rank: 0,
        world_size: 1,
        seed: 0,
    };
    assert!(Sketch::new(&params(0.0, 3, 10.0), ctx).is_err());
    assert!(Sketch::new(&params(1.5, 3, 10.0), ctx).is_err());
    assert!(Sketch::new(&params(0.1, 0, 10.0), ctx).is_err());
    assert!(Sketch::new(&params(0.1, 3, 0.0), ctx).is_err());
    assert!(Sketch::new(&params(0.1, 3, f64::NAN), ctx).is_err());
    assert!(Sketch::new(&params(0.1, 3, f64::INFINITY), ctx).is_err());
    assert!(Sketch::new(&params(1.0, 1, 0.5), ctx).is_ok());
}

#[test]
fn sketch_is_linear_and_wire_size() {
    for &rows in &[1usize, 3, 4, 9] {
        let p = params(0.01, rows, 10.0);
        let (a, b) = (randn(1, 7, 300), randn(2, 7, 300));
        let sum = &a + &b;
        let (sa, sb, ss) = (sketch_of(&p, &a), sketch_of(&p, &b), sketch_of(&p, &sum));
        let c = (10.0 * (0.01f64 * 2100.0).ceil()) as usize;
        assert_eq!(ss.len(), rows * c);
        assert_eq!(
            4 * ss.len(),
            make(&p, 0, 1, 7, 300).wire_capacity(0, 0).bytes()
        );
        let scale = a.iter().map(|v| v.abs()).sum::<f32>();
        for i in 0..ss.len() {
            assert!(
                (sa[i] + sb[i] - ss[i]).abs() <= 1e-5 * scale,
                "rows {rows} i {i}"
            );
        }
    }
}

/// Element-by-element definition: `S[j][h_j(i)] += s_j(i) * g_i` in index order.
fn direct_sketch(g: &Array2<f32>, r: usize, c: usize) -> Vec<f32> {
    let mut want = vec![0.0f32; r * c];
    for j in 0..r {
        let h = RowHash::new(5, 0, 0, j, c);
        for (i, &x) in g.iter().enumerate() {
            want[j * c + h.bucket(i)] += f32::from_bits(x.to_bits() ^ h.sign_bit(i));
        }
    }
    want
}

#[test]
fn compress_matches_direct_definition_exactly() {
    // c below and above the block length, blocks that wrap past column c, a partial
    // last block; AVX2 and portable kernels; every cell sums in index order.
    for &(rows, cols, density, cpk) in &[
        (3usize, SEG_MAX + 777, 0.01, 10.0),
        (1, 5000, 0.001, 7.0),
        (2, 333, 0.5, 3.0),
        (1, 100_003, 0.01, 10.0),
    ] {
        for &r in &[1usize, 3, 4] {
            let p = params(density, r, cpk);
            let g = randn(9, rows, cols);
            let c = make(&p, 0, 1, rows, cols).cols_of(0).unwrap();
            let want = direct_sketch(&g, r, c);
            for avx2 in [false, true] {
                let mut s = make(&p, 0, 1, rows, cols);
                s.set_avx2(avx2);
                let mut wire = Wire::default();
                s.compress(0, 0, g.view(), &mut wire).unwrap();
                assert_eq!(
                    wire.sum_f32, want,
                    "{rows}x{cols} rows {r} c {c} avx2 {avx2}"
                );
            }
        }
    }
}

#[test]
fn estimates_match_direct_definition_and_kernels_agree() {
    let (rows, cols) = (1, 3 * SEG_MAX + 5);
    for &r in &[1usize, 2, 3, 5] {
        let p = params(0.01, r, 10.0);
        let mut outs = Vec::new();
        for avx2 in [false, true] {
            let mut s = make(&p, 0, 1, rows, cols);
            s.set_avx2(avx2);
            let c = s.cols_of(0).unwrap();
            let (mut est, mut mask, mut med) =
                (vec![0.0; r * SEG_MAX], vec![0; SEG_MAX], vec![0.0; r]);
            let table: Vec<f32> = randn(22, 1, r * c).iter().copied().collect();
            assert_eq!(s.set_hashes(0).unwrap(), c);
            let mut out = vec![0.0f32; cols];
            if avx2 && s.avx2 {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `s.avx2` is true only when the CPU has AVX2 (`new`, `set_avx2`).
                unsafe {
                    estimate_avx2(&s.hs, &table, &mut out, &mut est, &mut mask, &mut med)
                };
            } else {
                estimate_impl::<false>(&s.hs, &table, &mut out, &mut est, &mut mask, &mut med);
            }
            for (i, &o) in out.iter().enumerate() {
                let mut v: Vec<f32> =
                    s.hs.iter()
                        .enumerate()
                        .map(|(j, h)| {
                            f32::from_bits(table[j * c + h.bucket(i)].to_bits() ^ h.sign_bit(i))
                        })
                        .collect();
                assert_eq!(o, median(&mut v), "rows {r} element {i}");
            }
            outs.push(out);
        }
        assert_eq!(outs[0], outs[1]);
    }
}

#[test]
fn bucket_collisions_are_pairwise_rare() {
    // The property Count Sketch's variance bound rests on: Pr[h(i) = h(i')] <= ~1/c for
    // i != i'; zero within a block. 40,000 seeded draws of the row keys per pair.
    let c = 50;
    let draws = 40_000u64;
    for &(i, i2) in &[
        (0usize, 1usize),
        (7, 49),
        (0, 50),
        (3, 1234),
        (49, 50),
        (10, 60),
    ] {
        let hits = (0..draws).filter(|&s| {
            let h = RowHash::new(s, 3, 1, 0, c);
            h.bucket(i) == h.bucket(i2)
        });
        let hits = hits.count() as f64;
        if i / c == i2 / c {
            assert_eq!(hits, 0.0, "({i}, {i2}) share a block");
        } else {
            let (mean, sd) = (draws as f64 / c as f64, (draws as f64 / c as f64).sqrt());
            assert!(
                (hits - mean).abs() <= 5.0 * sd,
                "({i}, {i2}): {hits} collisions, expected {mean} +- {sd}"
            );
        }
    }
    // signs: E[s(i) s(i')] = 0 for i != i'
    let agree = (0..draws).filter(|&s| {
        let h = RowHash::new(s, 3, 1, 0, c);
        h.sign_bit(5) == h.sign_bit(1234)
    });
    let agree = agree.count() as f64;
    assert!(
        (agree - draws as f64 / 2.0).abs() <= 5.0 * (draws as f64 / 4.0).sqrt(),
        "signs agree {agree} of {draws}"
    );
}

#[test]
fn single_row_estimate_is_unbiased_with_bounded_variance() {
    // E[est_i] = p_i and Var[est_i] <= ||p||^2 / c (Charikar et al., Lemma 3), over
    // 2000 seeds of a fixed p with one heavy entry at i = 1500.
    let (d, c) = (4000usize, 200usize);
    let p: Vec<f32> = (0..d)
        .map(|i| {
            if i == 1500 {
                5.0
            } else {
                ((i * 7919) % 13) as f32 / 13.0 - 0.5
            }
        })
        .collect();
    let norm2: f64 = p
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 1500)
        .map(|(_, v)| (*v as f64).powi(2))
        .sum();
    let seeds = 2000;
    let ests: Vec<f64> = (0..seeds)
        .map(|s| {
            let h = RowHash::new(s, 0, 0, 0, c);
            let mut table = vec![0.0f64; c];
            for (i, &v) in p.iter().enumerate() {
                table[h.bucket(i)] += if h.sign_bit(i) != 0 {
                    -v as f64
                } else {
                    v as f64
                };
            }
            let x = table[h.bucket(1500)];
            if h.sign_bit(1500) != 0 {
                -x
            } else {
                x
            }
        })
        .collect();
    let mean = ests.iter().sum::<f64>() / seeds as f64;
    let var = ests.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (seeds - 1) as f64;
    let bound = norm2 / c as f64;
    assert!(
        (mean - 5.0).abs() <= 5.0 * (bound / seeds as f64).sqrt(),
        "mean {mean}"
    );
    assert!(var <= 1.3 * bound, "variance {var} above the bound {bound}");
    assert!(
        var >= 0.5 * bound,
        "variance {var} suspiciously far below {bound}: collisions missing?"
    );
}

#[test]
fn heavy_hitters_recovered_exactly() {
    // d = 2000, k = 10 heavy entries, 5 rows x 1000 columns, two workers.
    let (rows, cols, n) = (1, 2000, 2);
    let p = params(0.005, 5, 100.0);
    let heavy: Vec<(usize, f32)> = (0..10)
        .map(|h| {
            (
                h * 173 + 11,
                if h % 2 == 0 {
                    10.0 + h as f32
                } else {
                    -20.0 - h as f32
                },
            )
        })
        .collect();
    let mut ws: Vec<Sketch> = (0..n).map(|r| make(&p, r, n, rows, cols)).collect();
    let mut total = vec![0.0f32; ws[0].wire_capacity(0, 0).sum_f32];
    for (r, w) in ws.iter_mut().enumerate() {
        let mut g = Array2::<f32>::zeros((rows, cols));
        for &(i, v) in &heavy {
            g[[0, i]] = v * (r + 1) as f32; // worker r contributes (r+1) * v
        }
        let mut wire = Wire::default();
        w.compress(0, 0, g.view(), &mut wire).unwrap();
        for (t, s) in total.iter_mut().zip(&wire.sum_f32) {
            *t += s;
        }
    }
    let rec = Received {
        sum_f32: &total,
        gathered_u32: &[],
        gather_counts: &[],
        ring_u32: &[],
        world_size: n,
    };
    for (r, w) in ws.iter_mut().enumerate() {
        let mut out = Array2::<f32>::zeros((rows, cols));
        w.decompress(0, 0, &rec, out.view_mut()).unwrap();
        let mut expect = vec![0.0f32; cols];
        for &(i, v) in &heavy {
            expect[i] = v * 3.0 / n as f32; // (1 + 2) * v / n
        }
        assert_eq!(out.as_slice().unwrap(), &expect[..]);
        // residual: p - (kept estimate of the sum) / n, this worker's share
        let e = w.residual(0).unwrap();
        for &(i, v) in &heavy {
            assert_eq!(e[i], v * (r + 1) as f32 - v * 3.0 / n as f32);
        }
        assert_eq!(e.iter().filter(|v| **v != 0.0).count(), heavy.len());
    }
}

#[test]
fn feedback_conserves_p_and_keeps_k() {
    let (rows, cols) = (10, 123);
    let p = params(0.02, 3, 10.0);
    let mut s = make(&p, 0, 1, rows, cols);
    let k = p.k_of(rows * cols);
    for step in 0..3 {
        s.begin_step(step);
        let g = randn(50 + step, rows, cols);
        let pv: Vec<f32> = g
            .iter()
            .zip(s.residual(0).unwrap())
            .map(|(a, b)| a + b)
            .collect();
        let mut wire = Wire::default();
        wire.reserve(s.wire_capacity(0, 0));
        let cap = wire.sum_f32.capacity();
        s.compress(0, 0, g.view(), &mut wire).unwrap();
        assert_eq!(cap, wire.sum_f32.capacity());
        let rec = Received {
            sum_f32: &wire.sum_f32,
            gathered_u32: &[],
            gather_counts: &[],
            ring_u32: &[],
            world_size: 1,
        };
        let mut out = Array2::<f32>::zeros((rows, cols));
        s.decompress(0, 0, &rec, out.view_mut()).unwrap();
        let kept = out.iter().filter(|v| **v != 0.0).count();
        assert_eq!(kept, k);
        for (i, (&o, &e)) in out.iter().zip(s.residual(0).unwrap()).enumerate() {
            assert!(
                (o + e - pv[i]).abs() <= 1e-5 * (1.0 + pv[i].abs()),
                "p = kept + e violated at {i}"
            );
        }
        // the kept estimates are the k largest in magnitude among all estimates
        let min_kept = out
            .iter()
            .filter(|v| **v != 0.0)
            .map(|v| v.abs())
            .fold(f32::MAX, f32::min);
        assert!(min_kept > 0.0);
    }
}

/// One step of `n` workers: each compresses its own gradient, the sketches are summed
/// by hand (as the all-reduce would), every worker decompresses the same sum.
/// Returns the output (all workers' outputs are asserted equal).
fn step_all(ws: &mut [Sketch], grads: &[Array2<f32>]) -> Array2<f32> {
    let (rows, cols) = grads[0].dim();
    let mut total = vec![0.0f32; ws[0].wire_capacity(0, 0).sum_f32];
    for (w, g) in ws.iter_mut().zip(grads) {
        let mut wire = Wire::default();
        wire.reserve(w.wire_capacity(0, 0));
        let cap = wire.sum_f32.capacity();
        w.compress(0, 0, g.view(), &mut wire).unwrap();
        assert_eq!(cap, wire.sum_f32.capacity(), "compress must not reallocate");
        for (t, x) in total.iter_mut().zip(&wire.sum_f32) {
            *t += x;
        }
    }
    let rec = Received {
        sum_f32: &total,
        gathered_u32: &[],
        gather_counts: &[],
        ring_u32: &[],
        world_size: ws.len(),
    };
    let mut first: Option<Array2<f32>> = None;
    for w in ws.iter_mut() {
        let mut out = Array2::<f32>::zeros((rows, cols));
        w.decompress(0, 0, &rec, out.view_mut()).unwrap();
        match &first {
            None => first = Some(out),
            Some(f) => assert_eq!(f, &out, "workers decoded different results"),
        }
    }
    first.unwrap()
}

/// Error feedback at n = 1, 2, 3 and 8 workers over 200 steps of a fixed random
/// gradient stream. The old rule `e -= D` took n shares from each worker and diverged
/// at n >= 3 (residual / gradient norm ~1e10 at n = 8). Checked in f64 bookkeeping:
/// - conservation: `sum_w e_w + sum_t D_t = sum_t sum_w g_w` (`D_t = n * out_t`);
/// - every worker is credited the same share: `e_w - e_v = sum_t (g_w - g_v)`;
/// - the summed residual (what enters the next steps' sketch) stays within a small
///   multiple of one step's summed gradient, at every world size;
/// - at most k non-zeros per step.
#[test]
fn error_feedback_conserves_and_stays_bounded_at_n_workers() {
    const SIGMA: f32 = 1.0;
    let (rows, cols) = (16, 125);
    let d = rows * cols;
    let p = params(0.02, 3, 10.0);
    let k = p.k_of(d);
    let norm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
    let mut ratio_at_one: Option<f64> = None;
    for &n in &[1usize, 2, 3, 8] {
        let mut ws: Vec<Sketch> = (0..n).map(|r| make(&p, r, n, rows, cols)).collect();
        let mut cum_g = vec![vec![0.0f64; d]; n];
        let mut sum_applied = vec![0.0f64; d];
        let mut max_ratio = 0.0f64;
        let scales = randn(99, rows, cols).mapv(|z| (SIGMA * z).exp());
        for step in 0..200u64 {
            for w in ws.iter_mut() {
                w.begin_step(step);
            }
            // Per-coordinate magnitudes fixed for the run and heavy-tailed (log-normal,
            // as real gradients' are), a random common part per step and per-worker
            // noise, as data-parallel workers see.
            let common = randn(10_000 + step, rows, cols) * &scales;
            let grads: Vec<Array2<f32>> = (0..n)
                .map(|r| {
                    &common + &(randn(20_000 + 1000 * step + r as u64, rows, cols) * &scales * 0.5)
                })
                .collect();
            let mut step_sum = vec![0.0f64; d];
            for (w, g) in grads.iter().enumerate() {
                for (i, &x) in g.iter().enumerate() {
                    cum_g[w][i] += x as f64;
                    step_sum[i] += x as f64;
                }
            }
            let out = step_all(&mut ws, &grads);
            assert!(
                out.iter().filter(|v| **v != 0.0).count() <= k,
                "n {n} step {step}: more than k non-zeros"
            );
            for (a, &o) in sum_applied.iter_mut().zip(out.iter()) {
                *a += o as f64 * n as f64;
            }
            let mut e_sum = vec![0.0f64; d];
            for w in &ws {
                for (a, &e) in e_sum.iter_mut().zip(w.residual(0).unwrap()) {
                    *a += e as f64;
                }
            }
            max_ratio = max_ratio.max(norm(&e_sum) / norm(&step_sum));
        }
        // Count Sketch error feedback is only weakly contractive when no coordinate
        // stands out (docs/methods.md, "Count Sketch"): the residual creeps up with the
        // steps even at n = 1. What the multi-worker rule must give is the single-worker
        // dynamics on the summed gradient at every n, and no blow-up.
        let one = *ratio_at_one.get_or_insert(max_ratio);
        assert!(
            max_ratio < 40.0 && max_ratio <= 1.5 * one + 1.0,
            "n {n}: summed residual reached {max_ratio:.3e} x one step's gradient (n = 1: {one:.3})"
        );
        let total: Vec<f64> = (0..d).map(|i| cum_g.iter().map(|c| c[i]).sum()).collect();
        let scale = total.iter().fold(1.0f64, |m, x| m.max(x.abs()));
        for i in 0..d {
            let e_sum: f64 = ws.iter().map(|w| w.residual(0).unwrap()[i] as f64).sum();
            assert!(
                (e_sum + sum_applied[i] - total[i]).abs() <= 1e-3 * scale,
                "n {n} i {i}: residuals {e_sum} + applied {} != gradients {}",
                sum_applied[i],
                total[i]
            );
            for w in 1..n {
                let diff =
                    ws[w].residual(0).unwrap()[i] as f64 - ws[0].residual(0).unwrap()[i] as f64;
                let want = cum_g[w][i] - cum_g[0][i];
                assert!(
                    (diff - want).abs() <= 1e-3 * scale,
                    "n {n} i {i}: worker {w} credited differently from worker 0"
                );
            }
        }
    }
}

/// Rows must use independent hashes: for one index per block, two rows' buckets agree
/// about 1/c of the time and their signs about half the time. Measured through
/// `compress` of one-hot gradients (not through `RowHash`), so a bug that gives every
/// row the same hash fails here.
#[test]
fn rows_hash_independently() {
    let r = 3;
    let p = params(1.0 / 64.0, r, 10.0);
    let (rows, cols) = (1, 64 * 2000);
    let c = make(&p, 0, 1, rows, cols).cols_of(0).unwrap();
    let seg = SEG_MAX.min(c);
    let mut g = Array2::<f32>::zeros((rows, cols));
    let mut wire = Wire::default();
    let (mut same_bucket, mut same_sign, mut pairs) = (0usize, 0usize, 0usize);
    for u in 0..cols / seg {
        let i = u * seg + (u * 7) % seg;
        g[[0, i]] = 1.0;
        // a fresh compressor: no residual from earlier probes
        make(&p, 0, 1, rows, cols)
            .compress(0, 0, g.view(), &mut wire)
            .unwrap();
        g[[0, i]] = 0.0;
        // (bucket, value) of the one non-zero cell of each row
        let cells: Vec<(usize, f32)> = wire
            .sum_f32
            .chunks_exact(c)
            .map(|row| {
                let (b, v) = row.iter().enumerate().find(|(_, v)| **v != 0.0).unwrap();
                (b, *v)
            })
            .collect();
        for a in 0..r {
            for b in a + 1..r {
                pairs += 1;
                same_bucket += usize::from(cells[a].0 == cells[b].0);
                same_sign += usize::from(cells[a].1 == cells[b].1);
            }
        }
    }
    let rate = same_bucket as f64 / pairs as f64;
    let signs = same_sign as f64 / pairs as f64;
    assert!(
        rate < 3.0 / c as f64 + 0.01,
        "rows share buckets at rate {rate} (c = {c})"
    );
    assert!(
        (0.45..0.55).contains(&signs),
        "rows agree in sign at rate {signs}"
    );
}

#[test]
fn errors_instead_of_panics() {
    let p = params(0.1, 3, 10.0);
    let mut s = make(&p, 0, 1, 2, 10);
    let mut wire = Wire::default();
    assert!(s.compress(1, 0, randn(1, 2, 10).view(), &mut wire).is_err());
    assert!(s.compress(0, 0, randn(1, 10, 2).view(), &mut wire).is_err());
    let rec = Received {
        sum_f32: &[1.0; 3],
        gathered_u32: &[],
        gather_counts: &[],
        ring_u32: &[],
        world_size: 1,
    };
    let mut out = Array2::<f32>::zeros((2, 10));
    assert!(s.decompress(0, 0, &rec, out.view_mut()).is_err());
}
