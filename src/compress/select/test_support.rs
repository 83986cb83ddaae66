//! Seeded inputs shared by the compressor tests.

use crate::compress::{MethodParams, WorkerCtx};
use crate::measure::rng::rng_for;
use ndarray::Array2;
use rand_distr::{Distribution, StandardNormal};

pub fn ctx(rank: usize, n: usize) -> WorkerCtx {
    WorkerCtx {
        rank,
        world_size: n,
        seed: 17,
    }
}

/// Standard normal `rows x cols` gradient.
pub fn grad(rows: usize, cols: usize, seed: u64) -> Array2<f32> {
    let mut r = rng_for(seed, 0, 0, 2);
    Array2::from_shape_fn((rows, cols), |_| StandardNormal.sample(&mut r))
}

pub fn params(density: f64) -> MethodParams {
    MethodParams {
        density: Some(density),
        ..MethodParams::default()
    }
}
