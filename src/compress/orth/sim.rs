//! Test helpers: simulate `n` workers (one compressor each) exchanging through a
//! hand-summed [`Received`].

use super::super::{Compressor, Received, Wire, WorkerCtx};
use ndarray::{Array2, ShapeBuilder};
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;
use rand_pcg::Pcg64Mcg;

pub fn randn(rows: usize, cols: usize, seed: u64) -> Array2<f32> {
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    Array2::from_shape_simple_fn((rows, cols).f(), || rng.sample(StandardNormal))
}

/// A random `rows x cols` matrix of rank `r`: `U V^T`.
pub fn rank_r(rows: usize, cols: usize, r: usize, seed: u64) -> Array2<f32> {
    randn(rows, r, seed)
        .dot(&randn(cols, r, seed + 1000).t())
        .as_standard_layout()
        .to_owned()
}

/// Frobenius norm.
pub fn fro(a: &Array2<f32>) -> f32 {
    a.iter().map(|v| v * v).sum::<f32>().sqrt()
}

/// ||a - b|| / ||b||.
pub fn rel_err(a: &Array2<f32>, b: &Array2<f32>) -> f32 {
    fro(&(a - b)) / fro(b).max(1e-30)
}

/// One step of tensor `t` on every worker: returns each worker's output and the wire
/// length of every round (asserted equal across workers).
pub fn step<C: Compressor>(
    comps: &mut [C],
    step: u64,
    t: usize,
    grads: &[Array2<f32>],
) -> (Vec<Array2<f32>>, Vec<usize>) {
    let n = comps.len();
    let mut outs = vec![Array2::from_elem(grads[0].dim(), f32::NAN); n];
    let mut lens = Vec::new();
    for c in comps.iter_mut() {
        c.begin_step(step);
    }
    for round in 0..comps[0].rounds() {
        let mut sum: Vec<f32> = Vec::new();
        for (w, c) in comps.iter_mut().enumerate() {
            let mut wire = Wire::default();
            wire.reserve(c.wire_capacity(t, round));
            let cap = wire.sum_f32.capacity();
            c.compress(t, round, grads[w].view(), &mut wire).unwrap();
            assert!(wire.sum_f32.len() <= cap, "wire exceeds wire_capacity");
            c.feedback(t, round).unwrap();
            if w == 0 {
                sum = wire.sum_f32.clone();
                lens.push(sum.len());
            } else {
                assert_eq!(wire.sum_f32.len(), sum.len());
                sum.iter_mut().zip(&wire.sum_f32).for_each(|(s, v)| *s += v);
            }
        }
        let rec = Received {
            sum_f32: &sum,
            gathered_u32: &[],
            gather_counts: &vec![0; n],
            ring_u32: &[],
            world_size: n,
        };
        for (c, o) in comps.iter_mut().zip(outs.iter_mut()) {
            c.decompress(t, round, &rec, o.view_mut()).unwrap();
        }
    }
    (outs, lens)
}

/// One compressor per simulated rank (`make` builds it from its context), with the
/// tensors `shapes` registered as ids 0, 1, ...
pub fn workers<C: Compressor>(
    n: usize,
    seed: u64,
    shapes: &[(usize, usize)],
    make: impl Fn(WorkerCtx) -> C,
) -> Vec<C> {
    (0..n)
        .map(|rank| {
            let mut c = make(WorkerCtx {
                rank,
                world_size: n,
                seed,
            });
            for (t, &(r, k)) in shapes.iter().enumerate() {
                c.register(t, r, k).unwrap();
            }
            c
        })
        .collect()
}

/// Element-wise average of the workers' inputs.
pub fn mean(grads: &[Array2<f32>]) -> Array2<f32> {
    let mut m = grads[0].clone();
    for g in &grads[1..] {
        m += g;
    }
    m / grads.len() as f32
}

/// The kernels `c` launches for tensor `t` in `round`, `phase` and `stage` but the
/// orthogonalisation's (`orth ...`, counted in orth.rs's tests), as `(name, bytes, flops)`.
pub fn kernels_but_orth<C: Compressor>(
    c: &C,
    t: usize,
    round: usize,
    phase: usize,
    stage: crate::roofline::Stage,
) -> Vec<(&'static str, f64, f64)> {
    crate::compress::device::collect(|o| c.device_kernels(t, round, phase, stage, o))
        .into_iter()
        .filter(|k| !k.name.starts_with("orth"))
        .map(|k| (k.name, k.bytes, k.flops))
        .collect()
}

/// The low-rank methods' `micro --check` input: `A` (`n x n`, rank 2: row `i` is
/// `100 (i + 1)` plus `10 j` where `i % 3 = 1`, `20 j` where `i % 3 = 2`), the sum of
/// two workers' `A` (`2 A`, row-major), and `A` with only row 0 (`row`: `e0 e0^T A`) or
/// only column 0 (`A e0 e0^T`) kept, row-major.
pub struct CheckInput {
    pub a: Array2<f32>,
    pub summed: Vec<f32>,
}

impl CheckInput {
    pub fn new(n: usize) -> CheckInput {
        let a = Array2::from_shape_fn((n, n), |(i, j)| {
            100.0 * (i as f32 + 1.0) + 10.0 * (j as f32) * (i % 3) as f32
        });
        let summed = a.iter().map(|x| 2.0 * x).collect();
        CheckInput { a, summed }
    }

    /// `A` with row 0 (`row`) or column 0 kept, the rest zero, row-major.
    pub fn keep(&self, row: bool) -> Vec<f32> {
        Array2::from_shape_fn(self.a.dim(), |(i, j)| {
            if (row && i == 0) || (!row && j == 0) {
                self.a[[i, j]]
            } else {
                0.0
            }
        })
        .iter()
        .copied()
        .collect()
    }

    /// The check's probe matrix (any fixed `r x c` values).
    pub fn probe(r: usize, c: usize) -> Array2<f32> {
        Array2::from_shape_fn((r, c), |(i, j)| ((7 * i + 3 * j) % 11) as f32 - 5.0)
    }
}
