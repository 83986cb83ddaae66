//! `out = alpha P Q^T [, e -= out]`: [`reconstruct`], one pass, with streaming stores for
//! outputs larger than the caches.

#[cfg(target_arch = "x86_64")]
use super::avx;
use super::{columns, sweep_rows, use_avx2, Lanes, L, STREAM_MIN_BYTES, V8};

/// `out = alpha P Q^T`, and with `e` also `e -= out`, in one pass. `out`, `e`: row-major
/// `rows x cols`; `p`: column-major `rows x r`; `q`: column-major `cols x r`.
pub fn reconstruct(
    alpha: f32,
    p: &[f32],
    q: &[f32],
    r: usize,
    cols: usize,
    out: &mut [f32],
    e: Option<&mut [f32]>,
) {
    let rows = out.len().checked_div(cols).unwrap_or(0);
    assert!(r >= 1 && q.len() == cols * r && p.len() == rows * r && out.len() == rows * cols);
    if let Some(e) = &e {
        assert_eq!(e.len(), out.len());
    }
    if rows == 0 {
        return;
    }
    dispatch!(r, recon_body, recon_avx2, (alpha, p, q, cols, out, e))
}

/// [`recon_body`] compiled with AVX2 + FMA, lanes [`avx::Avx`].
///
/// # Safety
/// The CPU must support AVX2 and FMA ([`use_avx2`]). Nothing more: the body's raw
/// accesses are guarded by its own length assertions.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn recon_avx2<const R: usize>(
    alpha: f32,
    p: &[f32],
    q: &[f32],
    cols: usize,
    out: &mut [f32],
    e: Option<&mut [f32]>,
) {
    recon_body::<avx::Avx, R>(alpha, p, q, cols, out, e)
}

#[inline(always)]
pub(super) fn recon_body<V: V8, const R: usize>(
    alpha: f32,
    p: &[f32],
    q: &[f32],
    cols: usize,
    out: &mut [f32],
    e: Option<&mut [f32]>,
) {
    let Some(e) = e else {
        return recon_rowwise::<V, R>(alpha, p, q, cols, out);
    };
    let rows = out.len() / cols;
    let qs = columns::<R>(q, cols);
    // With `e` (Power-SGD): several rows per sweep ([`sweep_rows`], as in
    // `add_project_rows`), so that each chunk of `Q` loaded from L2 serves every row of
    // the block; no software prefetch (huge pages: measure::pages). Outputs beyond the
    // caches are streamed, which needs 32-byte alignment at every vector: rows of a
    // multiple of `L` columns share one alignment, so a block of them takes one scalar
    // head; rows of other widths get plain stores (the shared factor loads gain more than
    // streaming). Measured on Power-SGD's decompress, rank 4, against one streamed row
    // per sweep with prefetch (docs/performance.md, "Compression kernels").
    let stream = out.len() * 4 >= STREAM_MIN_BYTES && cols % L == 0;
    let mut i = 0;
    while i < rows {
        let nb = sweep_rows(rows - i, R);
        let rows_out = &mut out[i * cols..(i + nb) * cols];
        let rows_e = &mut e[i * cols..(i + nb) * cols];
        match nb {
            4 => recon_rows::<V, R, 4>(alpha, p, rows, i, &qs, rows_out, rows_e, stream),
            2 => recon_rows::<V, R, 2>(alpha, p, rows, i, &qs, rows_out, rows_e, stream),
            _ => recon_rows::<V, R, 1>(alpha, p, rows, i, &qs, rows_out, rows_e, stream),
        }
        i += nb;
    }
    if stream {
        V::fence();
    }
}

/// Rows `i..i+NB` of `out = alpha P Q^T, e -= out`: `out` and `e` hold exactly those
/// rows; `p` is the whole column-major `rows x R` factor. Each element sums
/// `alpha p[i,k] q[j,k]` over `k` in order from zero, in the vector lanes and the scalar
/// tail alike, so the result does not depend on `NB`.
#[inline(always)]
#[allow(clippy::too_many_arguments)] // a fused kernel: every slice and flag is an operand of the one pass
#[allow(clippy::needless_range_loop)] // `b` indexes the coefficients and offsets the row pointers
fn recon_rows<V: V8, const R: usize, const NB: usize>(
    alpha: f32,
    p: &[f32],
    rows: usize,
    i: usize,
    qs: &[&[f32]; R],
    out: &mut [f32],
    e: &mut [f32],
    stream: bool,
) {
    let cols = out.len() / NB;
    assert_eq!(out.len(), NB * cols);
    // Streaming needs one alignment for every row of the block.
    assert!(!stream || cols % L == 0);
    assert!(i + NB <= rows && p.len() >= R * rows);
    for qk in qs {
        assert_eq!(qk.len(), cols);
    }
    assert_eq!(e.len(), out.len());
    let c: [[f32; R]; NB] =
        std::array::from_fn(|b| std::array::from_fn(|k| alpha * p[k * rows + i + b]));
    let cv: [[V; R]; NB] = std::array::from_fn(|b| std::array::from_fn(|k| V::splat(c[b][k])));
    let op = out.as_mut_ptr();
    let ep = e.as_mut_ptr();
    // With `stream` (rows of a multiple of `L` columns) every row's element j has the
    // same alignment: a scalar head of `head` elements, then aligned vectors.
    let head = if stream {
        ((32 - op as usize % 32) % 32 / 4).min(cols)
    } else {
        0
    };
    let nc = head + (cols - head) / L * L;
    let mut j = head;
    while j < nc {
        // SAFETY: j + L <= cols, so for b < NB the lanes at b * cols + j lie in row b of
        // `out` and of `e` (the same length: asserted) and at j in every `qs[k]`
        // (asserted lengths); with `stream`, cols % L == 0 (asserted) and j - head is a
        // multiple of L, so op + b * cols + j is 32-byte aligned. `out` and `e` are
        // written only through op / ep.
        unsafe {
            // A plain loop, not `array::from_fn`: a closure body would not inherit the
            // caller's AVX2 target feature if it were not inlined.
            let mut qv = [V::zero(); R];
            for k in 0..R {
                qv[k] = V::load(qs[k].as_ptr().add(j));
            }
            for b in 0..NB {
                let mut v = V::zero();
                for k in 0..R {
                    v = v.add(cv[b][k].mul(qv[k]));
                }
                let o = op.add(b * cols + j);
                if stream {
                    v.stream(o);
                } else {
                    v.store(o);
                }
                let x = ep.add(b * cols + j);
                V::load(x).sub(v).store(x);
            }
        }
        j += L;
    }
    for b in 0..NB {
        for j in (0..head).chain(nc..cols) {
            let mut v = 0.0f32;
            for k in 0..R {
                v += c[b][k] * qs[k][j];
            }
            out[b * cols + j] = v;
            e[b * cols + j] -= v;
        }
    }
}

/// `out = alpha P Q^T` one row per sweep, each streamed after its own scalar head when the
/// output exceeds the caches: `reconstruct` without `e` (ACP-SGD). Four-row blocks were
/// no faster here beyond the runs' spread and, on widths that are not a multiple of `L`,
/// 10-20% slower (they lose the streamed stores).
#[inline(always)]
fn recon_rowwise<V: V8, const R: usize>(
    alpha: f32,
    p: &[f32],
    q: &[f32],
    cols: usize,
    out: &mut [f32],
) {
    let rows = out.len() / cols;
    let qs = columns::<R>(q, cols);
    let stream = out.len() * 4 >= STREAM_MIN_BYTES;
    for (i, oi) in out.chunks_exact_mut(cols).enumerate() {
        let c: [f32; R] = std::array::from_fn(|k| alpha * p[k * rows + i]);
        let cv: [V; R] = std::array::from_fn(|k| V::splat(c[k]));
        let op = oi.as_mut_ptr();
        // Streamed stores need 32-byte alignment: the row's unaligned head is scalar.
        let head = if stream {
            ((32 - op as usize % 32) % 32 / 4).min(cols)
        } else {
            0
        };
        let nc = head + (cols - head) / L * L;
        // The scalar element: the vector loop's sum order, so the results are identical.
        let scalar = |j: usize| {
            let mut v = 0.0f32;
            for k in 0..R {
                v += c[k] * qs[k][j];
            }
            v
        };
        for j in (0..head).chain(nc..cols) {
            oi[j] = scalar(j);
        }
        let mut j = head;
        while j < nc {
            // SAFETY: j + L <= cols for the row of out and every qs[k]; with
            // `stream`, op + j is 32-byte aligned (j - head is a multiple of L).
            unsafe {
                let mut v = V::zero();
                for k in 0..R {
                    v = v.add(cv[k].mul(V::load(qs[k].as_ptr().add(j))));
                }
                if stream {
                    v.stream(op.add(j));
                } else {
                    v.store(op.add(j));
                }
            }
            j += L;
        }
    }
    if stream {
        V::fence();
    }
}
