//! The model `gradcomp converge` trains (docs/methods.md, "Convergence check"): a ReLU
//! MLP, forward and backward written here with ndarray GEMMs (BLAS), softmax
//! cross-entropy loss. Parameters are stored in registration order
//! `[W1, b1, W2, b2, ..., WL, bL]`; `Wl` is `out x in` (a matrix for Power-SGD and
//! ACP-SGD), `bl` is `1 x out` (a 1-D tensor as the compressors see it).

use ndarray::{s, Array2, ArrayView2, Axis};
use rand::Rng;
use rand_distr::StandardNormal;

/// Layer widths `[input, hidden..., classes]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Mlp {
    pub widths: Vec<usize>,
    /// Parameters in registration order (`W1, b1, W2, b2, ...`).
    pub params: Vec<Array2<f32>>,
}

/// Activations kept from the forward pass for the backward pass.
pub struct Cache {
    /// Input of each layer (the batch, then each hidden layer's ReLU output).
    inputs: Vec<Array2<f32>>,
    /// Softmax probabilities of the output layer.
    probs: Array2<f32>,
}

impl Mlp {
    /// He-initialised weights (N(0, 2/in)) and zero biases from `rng`; the same seed gives
    /// the same model on every rank.
    pub fn new<R: Rng>(widths: &[usize], rng: &mut R) -> Mlp {
        let mut params = Vec::with_capacity(2 * (widths.len() - 1));
        for w in widths.windows(2) {
            let (fan_in, fan_out) = (w[0], w[1]);
            let std = (2.0 / fan_in as f64).sqrt();
            params.push(Array2::from_shape_simple_fn((fan_out, fan_in), || {
                (rng.sample::<f64, _>(StandardNormal) * std) as f32
            }));
            params.push(Array2::zeros((1, fan_out)));
        }
        Mlp {
            widths: widths.to_vec(),
            params,
        }
    }

    /// Number of scalar parameters.
    pub fn numel(&self) -> usize {
        self.params.iter().map(Array2::len).sum()
    }

    /// Shapes `(rows, cols)` of the parameters in registration order.
    pub fn shapes(&self) -> Vec<(usize, usize)> {
        self.params.iter().map(|p| p.dim()).collect()
    }

    /// Multiply-adds of one sample's forward pass (backward is about twice this).
    pub fn macs_per_sample(&self) -> usize {
        self.widths.windows(2).map(|w| w[0] * w[1]).sum()
    }

    /// Logits of a batch `x` (`batch x input`), and the cache for [`Mlp::backward`].
    pub fn forward(&self, x: ArrayView2<f32>) -> (Array2<f32>, Vec<Array2<f32>>) {
        let layers = self.widths.len() - 1;
        let mut inputs = Vec::with_capacity(layers);
        let mut a = x.to_owned();
        for l in 0..layers {
            let (w, b) = (&self.params[2 * l], &self.params[2 * l + 1]);
            let mut z = a.dot(&w.t());
            z += b;
            if l + 1 < layers {
                z.mapv_inplace(|v| v.max(0.0));
            }
            inputs.push(std::mem::replace(&mut a, z));
        }
        (a, inputs)
    }

    /// Mean cross-entropy loss and correct predictions of a batch with integer `labels`.
    pub fn loss(&self, x: ArrayView2<f32>, labels: &[usize]) -> (f64, usize) {
        let (logits, _) = self.forward(x);
        let (probs, loss) = softmax_xent(&logits, labels);
        let correct = argmax_rows(&probs)
            .iter()
            .zip(labels)
            .filter(|(p, l)| p == l)
            .count();
        (loss, correct)
    }

    /// Forward and backward of the mean cross-entropy over the batch: the loss, and the
    /// gradients written into `grads` (same shapes as `params`).
    pub fn loss_and_grad(
        &self,
        x: ArrayView2<f32>,
        labels: &[usize],
        grads: &mut [Array2<f32>],
    ) -> f64 {
        let (logits, inputs) = self.forward(x);
        let (probs, loss) = softmax_xent(&logits, labels);
        let cache = Cache { inputs, probs };
        self.backward(&cache, labels, grads);
        loss
    }

    fn backward(&self, c: &Cache, labels: &[usize], grads: &mut [Array2<f32>]) {
        let layers = self.widths.len() - 1;
        let batch = labels.len() as f32;
        // dL/dlogits = (softmax - onehot) / batch
        let mut delta = c.probs.clone();
        for (i, &y) in labels.iter().enumerate() {
            delta[[i, y]] -= 1.0;
        }
        delta.mapv_inplace(|v| v / batch);
        for l in (0..layers).rev() {
            let a_in = &c.inputs[l];
            // dW = delta^T a_in (out x in); db = column sums of delta.
            ndarray::linalg::general_mat_mul(1.0, &delta.t(), a_in, 0.0, &mut grads[2 * l]);
            grads[2 * l + 1].row_mut(0).assign(&delta.sum_axis(Axis(0)));
            if l > 0 {
                // Through W and the ReLU of the layer below (a_in > 0 iff its z > 0).
                let mut d = delta.dot(&self.params[2 * l]);
                ndarray::Zip::from(&mut d).and(a_in).for_each(|g, &a| {
                    if a <= 0.0 {
                        *g = 0.0;
                    }
                });
                delta = d;
            }
        }
    }
}

/// Row-wise softmax of `logits` and the mean cross-entropy against `labels` (f64 sum),
/// as `logsumexp(z) - z_y`: a NaN or infinite logit makes the loss NaN or infinite (a
/// diverged run is never hidden by a clamp).
pub fn softmax_xent(logits: &Array2<f32>, labels: &[usize]) -> (Array2<f32>, f64) {
    let mut p = logits.clone();
    let mut loss = 0f64;
    for (i, mut row) in p.outer_iter_mut().enumerate() {
        let m = row.iter().copied().fold(f32::NEG_INFINITY, |a, b| {
            if a.is_nan() || b.is_nan() {
                f32::NAN
            } else {
                a.max(b)
            }
        });
        let zy = f64::from(row[labels[i]]);
        row.mapv_inplace(|v| (v - m).exp());
        let z: f32 = row.sum();
        loss += f64::from(m) + f64::from(z).ln() - zy;
        row.mapv_inplace(|v| v / z);
    }
    (p, loss / labels.len().max(1) as f64)
}

/// Index of the largest entry of each row.
pub fn argmax_rows(a: &Array2<f32>) -> Vec<usize> {
    let mut out = vec![0; a.nrows()];
    argmax_rows_into(a, &mut out);
    out
}

/// [`argmax_rows`] into `out` (one entry per row), without allocating.
pub fn argmax_rows_into(a: &Array2<f32>, out: &mut [usize]) {
    for (o, r) in out.iter_mut().zip(a.outer_iter()) {
        *o = r
            .iter()
            .enumerate()
            .fold((0, f32::NEG_INFINITY), |(bi, bv), (i, &v)| {
                if v > bv {
                    (i, v)
                } else {
                    (bi, bv)
                }
            })
            .0;
    }
}

/// Rows `idx` of `x` gathered into `out` (a minibatch).
pub fn gather_rows(x: ArrayView2<f32>, idx: &[usize], out: &mut Array2<f32>) {
    for (o, &i) in idx.iter().enumerate() {
        out.slice_mut(s![o, ..]).assign(&x.row(i));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn loss_is_nan_or_infinite_when_logits_are() {
        let y = [1usize];
        let nan = Array2::from_shape_vec((1, 3), vec![0.0, f32::NAN, 1.0]).unwrap();
        assert!(softmax_xent(&nan, &y).1.is_nan());
        let inf = Array2::from_shape_vec((1, 3), vec![f32::INFINITY, 0.0, 1.0]).unwrap();
        assert!(!softmax_xent(&inf, &y).1.is_finite());
        let ok = Array2::from_shape_vec((1, 2), vec![0.0, 0.0]).unwrap();
        assert!((softmax_xent(&ok, &y).1 - std::f64::consts::LN_2).abs() < 1e-6);
    }

    /// Backward agrees with central finite differences of the loss (f64 check on a tiny net).
    #[test]
    #[allow(clippy::needless_range_loop)] // perturbs m.params[t] while reading g[t]
    fn gradients_match_finite_differences() {
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(3);
        let mut m = Mlp::new(&[5, 7, 6, 3], &mut rng);
        for p in m.params.iter_mut().skip(1).step_by(2) {
            p.mapv_inplace(|_| rng.gen_range(-0.3..0.3));
        }
        let x = Array2::from_shape_simple_fn((4, 5), || rng.gen_range(-1.0f32..1.0));
        let y = [0usize, 2, 1, 2];
        let mut g: Vec<Array2<f32>> = m.params.iter().map(|p| Array2::zeros(p.dim())).collect();
        m.loss_and_grad(x.view(), &y, &mut g);
        let eps = 1e-2f32;
        for t in 0..m.params.len() {
            for idx in [(0usize, 0usize), (0, 2)] {
                if idx.1 >= m.params[t].ncols() {
                    continue;
                }
                let orig = m.params[t][idx];
                m.params[t][idx] = orig + eps;
                let lp = m.loss(x.view(), &y).0;
                m.params[t][idx] = orig - eps;
                let lm = m.loss(x.view(), &y).0;
                m.params[t][idx] = orig;
                let fd = (lp - lm) / (2.0 * f64::from(eps));
                let an = f64::from(g[t][idx]);
                assert!(
                    (fd - an).abs() <= 2e-3 + 2e-2 * an.abs(),
                    "tensor {t} {idx:?}: finite difference {fd} vs backward {an}"
                );
            }
        }
    }
}
