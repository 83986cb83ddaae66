//! The synthetic classification task of `gradcomp converge` (docs/methods.md,
//! "Convergence check"): inputs `x ~ N(0, I)`, labels from a fixed random teacher MLP
//! (`input -> TEACHER_HIDDEN tanh -> classes`, argmax of its logits), all drawn from the
//! run seed, so every rank builds the same held-out set without I/O. By default every
//! step draws fresh training samples from the teacher (an endless stream: the student
//! cannot overfit, and the held-out loss measures generalisation alone); with a fixed
//! training set, rank `r` of `n` trains on the shard of train samples `r, r + n, ...`.

use super::model::{argmax_rows, argmax_rows_into};
use crate::measure::rng::rng_for;
use ndarray::Array2;
use rand::Rng;
use rand_distr::StandardNormal;

/// Hidden width of the teacher network (defined beside the memory estimate that counts it).
pub use crate::config::TEACHER_HIDDEN;

/// RNG stream tags (`measure::rng::rng_for`'s `stream`), one per use of the run seed.
pub const STREAM_TEACHER: u64 = 0xC0_01;
pub const STREAM_TRAIN: u64 = 0xC0_02;
pub const STREAM_EVAL: u64 = 0xC0_03;
pub const STREAM_INIT: u64 = 0xC0_04;
pub const STREAM_BATCH: u64 = 0xC0_05;

/// Inputs and labels.
pub struct Dataset {
    pub x: Array2<f32>,
    pub y: Vec<usize>,
}

impl Dataset {
    pub fn len(&self) -> usize {
        self.y.len()
    }
    pub fn is_empty(&self) -> bool {
        self.y.is_empty()
    }
    /// The samples `first, first + stride, ...` (a rank's shard or a slice of the eval set).
    pub fn strided(&self, first: usize, stride: usize) -> Dataset {
        let idx: Vec<usize> = (first..self.len()).step_by(stride.max(1)).collect();
        let mut x = Array2::zeros((idx.len(), self.x.ncols()));
        super::model::gather_rows(self.x.view(), &idx, &mut x);
        Dataset {
            x,
            y: idx.iter().map(|&i| self.y[i]).collect(),
        }
    }
}

/// Scratch for [`Teacher::sample_into`]: the teacher's hidden and output activations.
pub struct Batch {
    h: Array2<f32>,
    logits: Array2<f32>,
}

impl Batch {
    pub fn new(batch: usize, hidden: usize, classes: usize) -> Batch {
        Batch {
            h: Array2::zeros((batch, hidden)),
            logits: Array2::zeros((batch, classes)),
        }
    }
}

/// The teacher: `W1 (hidden x input)`, `W2 (classes x hidden)`, N(0, 1/fan_in) entries.
pub struct Teacher {
    w1: Array2<f32>,
    w2: Array2<f32>,
}

impl Teacher {
    pub fn new(seed: u64, input: usize, classes: usize) -> Teacher {
        let mut rng = rng_for(seed, 0, 0, STREAM_TEACHER);
        let mut draw = |r: usize, c: usize| {
            let std = (1.0 / c as f64).sqrt();
            Array2::from_shape_simple_fn((r, c), || {
                (rng.sample::<f64, _>(StandardNormal) * std) as f32
            })
        };
        let w1 = draw(TEACHER_HIDDEN, input);
        let w2 = draw(classes, TEACHER_HIDDEN);
        Teacher { w1, w2 }
    }

    /// `n` labelled samples from stream `stream` of the run seed.
    pub fn sample(&self, seed: u64, stream: u64, n: usize) -> Dataset {
        let mut rng = rng_for(seed, 0, 0, stream);
        let x = Array2::from_shape_simple_fn((n, self.w1.ncols()), || {
            rng.sample::<f64, _>(StandardNormal) as f32
        });
        let mut h = x.dot(&self.w1.t());
        h.mapv_inplace(f32::tanh);
        let logits = h.dot(&self.w2.t());
        let y = argmax_rows(&logits);
        Dataset { x, y }
    }

    /// Fresh labelled samples into `x` (`batch x input`) and `y`, drawn from `rng` (the
    /// step's stream): the same rule as [`Teacher::sample`], without allocating.
    pub fn sample_into<R: Rng>(
        &self,
        rng: &mut R,
        scratch: &mut Batch,
        x: &mut Array2<f32>,
        y: &mut [usize],
    ) {
        x.mapv_inplace(|_| rng.sample::<f64, _>(StandardNormal) as f32);
        ndarray::linalg::general_mat_mul(1.0, x, &self.w1.t(), 0.0, &mut scratch.h);
        scratch.h.mapv_inplace(f32::tanh);
        ndarray::linalg::general_mat_mul(1.0, &scratch.h, &self.w2.t(), 0.0, &mut scratch.logits);
        argmax_rows_into(&scratch.logits, y);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_is_deterministic_and_uses_every_class() {
        let t = Teacher::new(7, 16, 4);
        let a = t.sample(7, STREAM_TRAIN, 400);
        let b = Teacher::new(7, 16, 4).sample(7, STREAM_TRAIN, 400);
        assert_eq!(a.x, b.x);
        assert_eq!(a.y, b.y);
        for c in 0..4 {
            assert!(
                a.y.iter().filter(|&&y| y == c).count() > 20,
                "class {c} too rare"
            );
        }
        let s = a.strided(1, 3);
        assert_eq!(s.len(), 133);
        assert_eq!(s.y[1], a.y[4]);
    }

    /// Fresh samples follow the same labelling rule as a fixed set: the same draws give
    /// the same labels as `argmax(W2 tanh(W1 x))` written again here.
    #[test]
    fn fresh_samples_are_labelled_by_the_teacher() {
        let t = Teacher::new(5, 8, 3);
        let mut rng = rng_for(5, 17, 2, STREAM_BATCH);
        let (mut x, mut y) = (Array2::zeros((50, 8)), vec![9usize; 50]);
        let mut scratch = Batch::new(50, TEACHER_HIDDEN, 3);
        t.sample_into(&mut rng, &mut scratch, &mut x, &mut y);
        for (row, &label) in x.rows().into_iter().zip(&y) {
            let h: Vec<f32> = (0..TEACHER_HIDDEN)
                .map(|i| (0..8).map(|j| t.w1[[i, j]] * row[j]).sum::<f32>().tanh())
                .collect();
            let z: Vec<f32> = (0..3)
                .map(|c| (0..TEACHER_HIDDEN).map(|i| t.w2[[c, i]] * h[i]).sum())
                .collect();
            let best = (0..3).max_by(|&a, &b| z[a].total_cmp(&z[b])).unwrap();
            assert_eq!(label, best);
        }
        // Another step's stream gives other samples.
        let mut x2 = Array2::zeros((50, 8));
        let mut rng = rng_for(5, 18, 2, STREAM_BATCH);
        t.sample_into(&mut rng, &mut scratch, &mut x2, &mut y);
        assert_ne!(x, x2);
    }
}
