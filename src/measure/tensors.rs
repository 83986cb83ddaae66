//! Synthetic gradients for the compression benchmarks: seeded, heavy-tailed, generated
//! and touched in setup (never inside a timed region).

use crate::measure::rng::rng_for;
use crate::measure::shape::Shape;
use ndarray::Array2;
use rand::Rng;
use rand_distr::StandardNormal;

/// Number of gradient sets a benchmark rotates through (steps see different data).
pub const GRADIENT_SETS: usize = 2;

/// A heavy-tailed gradient (Gaussian scale mixture: N(0,1) * exp(N(0,1)/2), a
/// log-normal scale gives the heavy tails real gradients show), seeded by
/// (seed, set, rank) so ranks differ and runs repeat.
pub fn gradient(shape: Shape, seed: u64, set: usize, rank: usize) -> Array2<f32> {
    let mut rng = rng_for(seed, set as u64, rank, 0x6772_6164);
    let mut v = Vec::with_capacity(shape.numel());
    for _ in 0..shape.numel() {
        let z: f32 = rng.sample(StandardNormal);
        let s: f32 = rng.sample(StandardNormal);
        v.push(1e-3 * z * (0.5 * s).exp());
    }
    Array2::from_shape_vec((shape.rows, shape.cols), v).expect("shape matches length")
}

/// Small integer-valued gradient (sums over ranks are exact in f32, so the dense
/// S-SGD check can demand bit equality).
pub fn integer_gradient(shape: Shape, rank: usize) -> Array2<f32> {
    Array2::from_shape_fn((shape.rows, shape.cols), |(i, j)| {
        test_value(i * shape.cols + j, rank)
    })
}

/// Exactly representable test value of element `i` on rank `r` (integers in
/// [-510, 510]: sums over up to 16,000 ranks stay exact in f32).
pub fn test_value(i: usize, r: usize) -> f32 {
    ((i.wrapping_mul(7).wrapping_add(r.wrapping_mul(13))) % 1021) as f32 - 510.0
}

/// `(||a - b||_2^2, ||b||_2^2)` in f64, the parts of [`rel_error`].
pub fn sq_error_parts(a: &[f32], b: &[f32]) -> (f64, f64) {
    let (mut num, mut den) = (0f64, 0f64);
    for (x, y) in a.iter().zip(b) {
        let d = f64::from(*x) - f64::from(*y);
        num += d * d;
        den += f64::from(*y) * f64::from(*y);
    }
    (num, den)
}

/// ||a - b||_2 / ||b||_2 (0 when both are zero).
pub fn rel_error(a: &[f32], b: &[f32]) -> f64 {
    let (num, den) = sq_error_parts(a, b);
    rel_from_parts(num, den)
}

/// `sqrt(num / den)` (0 when both are zero, infinite when only `den` is).
pub fn rel_from_parts(num: f64, den: f64) -> f64 {
    if den == 0.0 {
        if num == 0.0 {
            0.0
        } else {
            f64::INFINITY
        }
    } else {
        (num / den).sqrt()
    }
}

/// Memory read bandwidth of this rank (GB/s): best of 5 sums of a 256 MiB f32 array,
/// the probe micro-compress reports its kernels against.
pub fn memory_read_gbps() -> f64 {
    let n = 64 << 20;
    let v = vec![1.0f32; n];
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let t0 = std::time::Instant::now();
        let s = sum_f32(&v);
        let dt = t0.elapsed().as_secs_f64();
        std::hint::black_box(s);
        best = best.min(dt);
    }
    (n * 4) as f64 / best / 1e9
}

/// Sum with 8 independent accumulators (vectorises; read-bandwidth bound).
fn sum_f32(v: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let chunks = v.chunks_exact(8);
    let rest = chunks.remainder();
    for c in chunks {
        for k in 0..8 {
            acc[k] += c[k];
        }
    }
    acc.iter().sum::<f32>() + rest.iter().sum::<f32>()
}
