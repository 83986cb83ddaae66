//! `micro --check`'s references (docs/methods.md, "`--check`"): each method says in its
//! own file what its step-0 result must equal, through [`Compressor::check_share`] and
//! [`Compressor::check_verdict`]; the harness (src/bench/check.rs) runs the step, sums
//! every worker's share over MPI, and reports the verdict. Here: the pieces several
//! methods share (comparison within a tolerance, the dense average, a worker's own
//! decode, the low-rank projection test). No MPI: a compressor never communicates.

use ndarray::{Array2, ArrayView2};

use super::{orth, Compressor, MethodParams, Received, Result, TensorId, Wire};

/// A check's outcome: `Err` says why the result is wrong.
pub type Verdict = std::result::Result<(), String>;

/// What a method's [`Compressor::check_verdict`] sees besides the result.
pub struct CheckCtx<'a> {
    /// Shape of the checked tensor (id [`CHECKED`]).
    pub rows: usize,
    pub cols: usize,
    pub world_size: usize,
    pub params: &'a MethodParams,
    /// The exchange that produced the result (this worker's view).
    pub received: Received<'a>,
    /// A new instance of the method, the checked tensor registered, at step 0, never
    /// stepped (the reference compressions run on it).
    pub fresh: &'a mut dyn Compressor,
    /// A seeded random `rows x cols` matrix (the harness's synthetic generator).
    pub probe: &'a dyn Fn(usize, usize) -> Array2<f32>,
}

/// The tensor id the check registers and steps.
pub const CHECKED: TensorId = 0;

#[cfg(test)]
impl<'a> CheckCtx<'a> {
    /// The unit tests' context: a `rows x cols` check at two workers whose exchange
    /// delivered `sum_f32` and empty gathered sections, no ring.
    pub(crate) fn two_workers(
        (rows, cols): (usize, usize),
        params: &'a MethodParams,
        sum_f32: &'a [f32],
        fresh: &'a mut dyn Compressor,
        probe: &'a dyn Fn(usize, usize) -> Array2<f32>,
    ) -> Self {
        CheckCtx {
            rows,
            cols,
            world_size: 2,
            params,
            received: Received {
                sum_f32,
                gathered_u32: &[],
                gather_counts: &[0, 0],
                ring_u32: &[],
                world_size: 2,
            },
            fresh,
            probe,
        }
    }
}

/// `|a - b| <= tol`, false when either is NaN (a NaN never passes a check).
pub fn within(a: f32, b: f32, tol: f32) -> bool {
    (a - b).abs() <= tol
}

/// Largest magnitude of `v` (at least the smallest positive f32): what tolerances scale by.
pub fn max_ref(v: &[f32]) -> f32 {
    v.iter()
        .fold(0f32, |m, x| m.max(x.abs()))
        .max(f32::MIN_POSITIVE)
}

/// `got` within `rtol * max|want|` of `want` element by element; `what` names the reference.
pub fn compare(got: &[f32], want: &[f32], rtol: f32, what: &str) -> Verdict {
    let scale = max_ref(want);
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        if !within(*a, *b, rtol * scale) {
            return Err(format!(
                "{what}: element {i} is {a}, reference {b} (tolerance {})",
                rtol * scale
            ));
        }
    }
    Ok(())
}

/// The summed shares divided by the `n` workers.
pub fn mean(summed: &[f32], n: usize) -> Vec<f32> {
    summed.iter().map(|x| *x / n as f32).collect()
}

/// The default verdict: `out` is the mean of every worker's own decoded message (the
/// summed [`own_decode`] shares of `n` workers), rtol 1e-5.
pub fn mean_of_decodes(out: &[f32], summed: &[f32], n: usize) -> Verdict {
    compare(
        out,
        &mean(summed, n),
        1e-5,
        "mean of every worker's own decoded message",
    )
}

/// A contiguous view's elements (row-major).
pub fn flat<'a>(a: &'a ArrayView2<f32>) -> Result<&'a [f32]> {
    a.as_slice()
        .ok_or_else(|| super::CompressError::Unsupported {
            method: "check",
            msg: "tensor is not contiguous".into(),
        })
}

/// This worker's gradient as its share (the dense-average references).
pub fn gradient_share(grad: ArrayView2<f32>) -> Result<Vec<f32>> {
    Ok(flat(&grad)?.to_vec())
}

/// `fresh`'s decode of this worker's own wire of `grad` alone (a one-worker exchange):
/// the default share, for methods whose aggregate is the mean of per-worker decodes.
pub fn own_decode(grad: ArrayView2<f32>, fresh: &mut dyn Compressor) -> Result<Vec<f32>> {
    let t = CHECKED;
    let mut w = Wire::default();
    w.reserve(fresh.wire_capacity(t, 0));
    fresh.compress(t, 0, grad, &mut w)?;
    fresh.feedback(t, 0)?;
    let mut mine = Array2::<f32>::zeros(grad.dim());
    let counts = [w.gather_u32.len()];
    let alone = Received {
        sum_f32: &w.sum_f32,
        gathered_u32: &w.gather_u32,
        gather_counts: &counts,
        ring_u32: &w.ring_u32,
        world_size: 1,
    };
    fresh.decompress(t, 0, &alone, mine.view_mut())?;
    Ok(flat(&mine.view())?.to_vec())
}

/// The low-rank methods' reference: `out` must equal the orthogonal projection of the
/// dense average (the mean of `summed`, every worker's gradient) onto the rank-`r'`
/// column space (Power-SGD) or row space (ACP-SGD's P step) that `out` itself spans
/// (relative Frobenius error 1e-3); the dense average itself, rtol 1e-5, for a tensor
/// sent raw or while `dense_now` (Power-SGD's warm-up). `method` picks the
/// `min_compression_rate` default.
pub fn lowrank(
    method: &str,
    out: &[f32],
    summed: &[f32],
    c: &CheckCtx,
    dense_now: bool,
    row_space: bool,
) -> Verdict {
    let avg = mean(summed, c.world_size);
    let p = c.params;
    let rate = p.min_compression_rate_for(method);
    match orth::compressed_rank(c.rows, c.cols, p.rank, rate).filter(|_| !dense_now) {
        None => compare(
            out,
            &avg,
            1e-5,
            "uncompressed tensor or dense warm-up: dense average",
        ),
        Some(r) => projection(out, &avg, c, r, row_space),
    }
}

fn projection(out: &[f32], avg: &[f32], c: &CheckCtx, r: usize, row_space: bool) -> Verdict {
    let shape = (c.rows, c.cols);
    let o = ArrayView2::from_shape(shape, out).map_err(|e| e.to_string())?;
    let a = ArrayView2::from_shape(shape, avg).map_err(|e| e.to_string())?;
    let (o, a) = if row_space {
        (o.t().to_owned(), a.t().to_owned())
    } else {
        (o.to_owned(), a.to_owned())
    };
    let (rows, cols) = o.dim();
    let x = (c.probe)(cols, r);
    let basis = o.dot(&x); // rows x r, spans col(out)
    let mut b = basis.reversed_axes().as_standard_layout().to_owned(); // r x rows = column-major rows x r
    let mut tau = vec![0f32; r];
    orth::orthonormalize(b.as_slice_mut().ok_or("basis layout")?, rows, r, &mut tau);
    let bm = b.reversed_axes(); // rows x r view
    let proj = bm.dot(&bm.t().dot(&a));
    let (mut num, mut den) = (0f64, 0f64);
    for (p, q) in proj.iter().zip(o.iter()) {
        num += f64::from(p - q).powi(2);
        den += f64::from(*q).powi(2);
    }
    let e = if den > 0.0 {
        (num / den).sqrt()
    } else {
        num.sqrt()
    };
    if e <= 1e-3 {
        Ok(())
    } else {
        Err(format!("result is not the projection of the dense average onto its own rank-{r} subspace (relative error {e:.3e})"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compress::registry;
    use crate::compress::WorkerCtx;

    #[test]
    fn within_is_an_absolute_difference_at_most_the_tolerance() {
        assert!(within(1.0, 1.5, 0.5), "the bound itself passes");
        assert!(!within(1.0, 1.625, 0.5));
        // |(-1) - 1| = 2: neither the sum (0) nor the ratio (-1) of the two.
        assert!(!within(-1.0, 1.0, 1.9));
        assert!(!within(f32::NAN, 0.0, f32::INFINITY));
    }

    #[test]
    fn max_ref_is_the_largest_magnitude_at_least_the_smallest_positive() {
        assert_eq!(max_ref(&[-3.0, 2.0]), 3.0);
        assert_eq!(max_ref(&[]), f32::MIN_POSITIVE);
        assert_eq!(max_ref(&[0.0, -0.0]), f32::MIN_POSITIVE);
    }

    /// The tolerance is `rtol` times the reference's largest magnitude (2 here: 0.04).
    #[test]
    fn compare_scales_the_tolerance_by_the_reference() {
        let want = [1.0, -2.0];
        assert_eq!(compare(&[1.0, -2.03], &want, 0.02, "x"), Ok(()));
        assert_eq!(
            compare(&[1.0, -2.05], &want, 0.02, "x"),
            Err("x: element 1 is -2.05, reference -2 (tolerance 0.04)".to_string())
        );
        assert!(compare(&[1.0, f32::NAN], &want, 1.0, "x").is_err());
    }

    #[test]
    fn mean_divides_by_the_workers() {
        assert_eq!(mean(&[3.0, -6.0], 3), [1.0, -2.0]);
        assert_eq!(mean_of_decodes(&[1.0, -2.0], &[3.0, -6.0], 3), Ok(()));
        let e = mean_of_decodes(&[1.0, -2.001], &[3.0, -6.0], 3).unwrap_err();
        assert!(e.starts_with("mean of every worker's own decoded message: element 1"));
    }

    #[test]
    fn shares_are_the_row_major_elements() {
        let a = Array2::from_shape_vec((2, 2), vec![1.0f32, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!(flat(&a.view()).unwrap(), [1.0, 2.0, 3.0, 4.0]);
        assert_eq!(gradient_share(a.view()).unwrap(), [1.0, 2.0, 3.0, 4.0]);
        // A transposed view is not contiguous row-major.
        assert!(flat(&a.t()).is_err());
        assert!(gradient_share(a.t()).is_err());
    }

    /// S-SGD alone averages over one worker: its own decode is the gradient itself.
    #[test]
    fn own_decode_of_dense_sgd_is_the_gradient() {
        let ctx = WorkerCtx {
            rank: 0,
            world_size: 4,
            seed: 1,
        };
        let mut fresh = registry::build("ssgd", &MethodParams::default(), ctx).unwrap();
        fresh.register(CHECKED, 2, 3).unwrap();
        let g = Array2::from_shape_fn((2, 3), |(i, j)| (3 * i + j) as f32 - 2.5);
        assert_eq!(
            own_decode(g.view(), fresh.as_mut()).unwrap(),
            g.iter().copied().collect::<Vec<_>>()
        );
    }

    const N: usize = 8;

    /// A rank-2 `N x N` matrix with entries in the hundreds.
    fn avg() -> Array2<f32> {
        Array2::from_shape_fn((N, N), |(i, j)| {
            100.0 * (i as f32 + 1.0) + 10.0 * (j as f32) * (i % 3) as f32
        })
    }

    /// `lowrank` on `out` for the dense average [`avg`] summed over 2 workers, Power-SGD
    /// at rank `rank` (its `min_compression_rate` 2: 8 x 8 compresses at rank 1, not 4).
    fn lowrank_of(out: &Array2<f32>, rank: usize, dense_now: bool, row_space: bool) -> Verdict {
        lowrank_of_avg(&avg(), out, rank, dense_now, row_space)
    }

    /// [`lowrank_of`] for the dense average `a`.
    fn lowrank_of_avg(
        a: &Array2<f32>,
        out: &Array2<f32>,
        rank: usize,
        dense_now: bool,
        row_space: bool,
    ) -> Verdict {
        let summed: Vec<f32> = a.iter().map(|x| 2.0 * x).collect();
        let p = MethodParams {
            rank,
            ..MethodParams::default()
        };
        let ctx = WorkerCtx {
            rank: 0,
            world_size: 2,
            seed: 1,
        };
        let mut fresh = registry::build("ssgd", &p, ctx).unwrap();
        let probe = |r: usize, c: usize| {
            Array2::from_shape_fn((r, c), |(i, j)| ((7 * i + 3 * j) % 11) as f32 - 5.0)
        };
        let c = CheckCtx::two_workers((N, N), &p, &[], fresh.as_mut(), &probe);
        let out: Vec<f32> = out.iter().copied().collect();
        lowrank("powersgd", &out, &summed, &c, dense_now, row_space)
    }

    /// Keep row 0 (`e0 e0^T A`: the projection onto the first coordinate's column
    /// space) or column 0 (`A e0 e0^T`: onto the first coordinate's row space).
    fn keep(a: &Array2<f32>, row: bool) -> Array2<f32> {
        Array2::from_shape_fn((N, N), |(i, j)| {
            if (row && i == 0) || (!row && j == 0) {
                a[[i, j]]
            } else {
                0.0
            }
        })
    }

    /// Uncompressed (rank 4 of 8 x 8 at rate 2) or in the dense warm-up: the dense
    /// average itself, rtol 1e-5.
    #[test]
    fn lowrank_wants_the_dense_average_when_not_compressed() {
        let a = avg();
        assert_eq!(lowrank_of(&a, 4, false, false), Ok(()));
        assert_eq!(lowrank_of(&a, 1, true, false), Ok(()), "dense warm-up");
        let mut off = a.clone();
        off[[3, 3]] += 1.0; // 1 > 1e-5 x 870
        let e = lowrank_of(&off, 1, true, false).unwrap_err();
        assert!(e.starts_with("uncompressed tensor or dense warm-up"), "{e}");
    }

    /// Compressed at rank 1: the projection of the average onto the space `out` spans,
    /// relative Frobenius error at most 1e-3.
    #[test]
    fn lowrank_wants_the_projection_onto_outs_own_space() {
        let a = avg();
        let col = keep(&a, true);
        let row = keep(&a, false);
        assert_eq!(lowrank_of(&col, 1, false, false), Ok(()));
        assert_eq!(lowrank_of(&row, 1, false, true), Ok(()));
        // The other space: A's projection onto col(A e0) is not A e0 e0^T.
        assert!(lowrank_of(&row, 1, false, false).is_err());
        // Off by a relative 5e-4: within 1e-3, while the absolute error, 5e-4 x 100 sqrt(8)
        // = 0.14, is not.
        assert_eq!(lowrank_of(&(&col * 1.0005), 1, false, false), Ok(()));
        // Off by a relative 2.5e-3: e = 0.0025 / 1.0025.
        let e = lowrank_of(&(&col * 1.0025), 1, false, false).unwrap_err();
        assert!(e.contains("rank-1 subspace (relative error 2.49"), "{e}");
        assert!(lowrank_of(&(&col * 2.0), 1, false, false).is_err());
    }

    /// A zero average compressed to zeros passes: the error is then taken as absolute
    /// (`out` has no norm to divide by), 0, not 0 / 0. Zeros for a nonzero average fail.
    #[test]
    fn zeros_for_a_zero_average_pass() {
        let zero = Array2::zeros((N, N));
        assert_eq!(lowrank_of_avg(&zero, &zero, 1, false, false), Ok(()));
        assert!(lowrank_of(&zero, 1, false, false).is_err());
    }
}
