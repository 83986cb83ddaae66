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
