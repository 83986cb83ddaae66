//! `out = alpha P Q^T [, e -= out]`: [`reconstruct`], one pass, with streaming stores for
//! outputs larger than the caches.

#[cfg(target_arch = "x86_64")]
use super::avx;
use super::{columns, use_avx2, Lanes, AHEAD, L, STREAM_MIN_BYTES, V8};

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
    mut e: Option<&mut [f32]>,
) {
    let rows = out.len() / cols;
    let qs = columns::<R>(q, cols);
    let stream = out.len() * 4 >= STREAM_MIN_BYTES;
    for (i, oi) in out.chunks_exact_mut(cols).enumerate() {
        let c: [f32; R] = std::array::from_fn(|k| alpha * p[k * rows + i]);
        let cv: [V; R] = std::array::from_fn(|k| V::splat(c[k]));
        let mut ei = e.as_deref_mut().map(|e| &mut e[i * cols..(i + 1) * cols]);
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
            let v = scalar(j);
            oi[j] = v;
            if let Some(ei) = ei.as_deref_mut() {
                ei[j] -= v;
            }
        }
        let mut j = head;
        while j < nc {
            // SAFETY: j + L <= cols for the row of out, of e and every qs[k]; with
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
                if let Some(ei) = ei.as_deref_mut() {
                    let ptr = ei.as_mut_ptr().add(j);
                    V::prefetch(ptr.wrapping_add(AHEAD));
                    V::load(ptr).sub(v).store(ptr);
                }
            }
            j += L;
        }
    }
    if stream {
        V::fence();
    }
}
