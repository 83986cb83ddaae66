//! `Q = (g + e)^T P`, `e <- g + e [- P Q^T]`: [`add_project_t`], four rows at a time, in
//! column bands for wide matrices.

#[cfg(target_arch = "x86_64")]
use super::avx;
use super::{check_args, columns, row_sub, use_avx2, Lanes, AHEAD, BAND, L, RB, V8, WHOLE_ROW_Q};

/// `e += g` (when `g` is given) and `Q = e^T P` in one pass (four rows at a time, so each
/// load/store of `Q` serves four rows), then with `residual` a second pass
/// `e -= P Q^T` (the residual needs the complete `Q`). Very wide matrices are processed
/// in column bands so that `Q`'s band stays in L2. (Column panels of all rows, swept
/// twice while in the last-level cache, were measured: the strided row segments made
/// them 2-5x slower than the two sequential passes.) `e`, `g`: row-major
/// `rows x cols`; `p`: column-major `rows x r`; `q`: column-major `cols x r`, overwritten.
///
/// With `pending = Some((P_old, Q_old))`, each block of rows first applies a deferred
/// residual `e_i -= P_old[i, :] Q_old^T` in the same sweep, as in
/// [`add_project_rows`](super::add_project_rows).
#[allow(clippy::too_many_arguments)] // a fused kernel: every slice and flag is an operand of the one pass
pub fn add_project_t(
    e: &mut [f32],
    g: Option<&[f32]>,
    cols: usize,
    p: &[f32],
    r: usize,
    q: &mut [f32],
    residual: bool,
    pending: Option<(&[f32], &[f32])>,
) {
    let rows = check_args(e, g, cols, r, p.len(), q.len(), pending);
    if rows == 0 {
        q.fill(0.0);
        return;
    }
    let width = if cols * r > WHOLE_ROW_Q { BAND } else { cols };
    add_project_t_width(e, g, cols, p, r, q, residual, pending, width)
}

/// [`add_project_t`] with an explicit band width (>= 1).
#[allow(clippy::too_many_arguments)] // a fused kernel: every slice and flag is an operand of the one pass
pub(super) fn add_project_t_width(
    e: &mut [f32],
    g: Option<&[f32]>,
    cols: usize,
    p: &[f32],
    r: usize,
    q: &mut [f32],
    residual: bool,
    pending: Option<(&[f32], &[f32])>,
    width: usize,
) {
    q.fill(0.0);
    if e.is_empty() {
        return;
    }
    let width = width.max(1);
    dispatch!(
        r,
        cols_body,
        cols_avx2,
        (e, g, cols, p, q, residual, pending, width)
    )
}

/// [`cols_body`] compiled with AVX2 + FMA, lanes [`avx::Avx`].
///
/// # Safety
/// The CPU must support AVX2 and FMA ([`use_avx2`]). Nothing more: the body's raw
/// accesses are guarded by its own length assertions.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)] // a fused kernel: every slice and flag is an operand of the one pass
unsafe fn cols_avx2<const R: usize>(
    e: &mut [f32],
    g: Option<&[f32]>,
    cols: usize,
    p: &[f32],
    q: &mut [f32],
    residual: bool,
    pending: Option<(&[f32], &[f32])>,
    width: usize,
) {
    cols_body::<avx::Avx, R>(e, g, cols, p, q, residual, pending, width)
}

#[inline(always)]
#[allow(clippy::too_many_arguments)] // a fused kernel: every slice and flag is an operand of the one pass
pub(super) fn cols_body<V: V8, const R: usize>(
    e: &mut [f32],
    g: Option<&[f32]>,
    cols: usize,
    p: &[f32],
    q: &mut [f32],
    residual: bool,
    pending: Option<(&[f32], &[f32])>,
    width: usize,
) {
    let rows = e.len() / cols;
    let ps = columns::<R>(p, rows);
    let olds = pending.map(|(po, qo)| (columns::<R>(po, rows), columns::<R>(qo, cols)));
    let mut j0 = 0;
    while j0 < cols {
        let j1 = (j0 + width).min(cols);
        // Q's band j0..j1, as R separate column slices.
        let mut qb: [&mut [f32]; R] = {
            let mut rest: &mut [f32] = q;
            std::array::from_fn(|_| {
                let (head, tail) = std::mem::take(&mut rest).split_at_mut(cols);
                rest = tail;
                &mut head[j0..j1]
            })
        };
        let mut i = 0;
        while i < rows {
            let nb = if i + RB <= rows { RB } else { 1 };
            macro_rules! block {
                ($NB:expr) => {{
                    let coef: [[f32; R]; $NB] =
                        std::array::from_fn(|b| std::array::from_fn(|k| ps[k][i + b]));
                    match &olds {
                        Some((po, qo)) => {
                            let pend: [[f32; R]; $NB] =
                                std::array::from_fn(|b| std::array::from_fn(|k| po[k][i + b]));
                            let qob: [&[f32]; R] = std::array::from_fn(|k| &qo[k][j0..j1]);
                            band_accumulate::<V, R, $NB, true>(
                                e, g, cols, i, j0, j1, &coef, &mut qb, &pend, &qob,
                            )
                        }
                        None => band_accumulate::<V, R, $NB, false>(
                            e,
                            g,
                            cols,
                            i,
                            j0,
                            j1,
                            &coef,
                            &mut qb,
                            &[[0.0; R]; $NB],
                            &[&[]; R],
                        ),
                    }
                }};
            }
            if nb == RB {
                block!(RB)
            } else {
                block!(1)
            }
            i += nb;
        }
        j0 = j1;
    }
    if residual {
        let qs = columns::<R>(q, cols);
        for (i, ei) in e.chunks_exact_mut(cols).enumerate() {
            let c: [f32; R] = std::array::from_fn(|k| ps[k][i]);
            row_sub::<V, R>(ei, &c, &qs);
        }
    }
}

/// Rows `i..i+NB`, columns `j0..j1`: with `PEND` first `e[i+b] -= sum_k pend[b][k] qob[k]`
/// (a deferred residual, summed as in [`row_sub`]; `qob[k]` is the band of `Q_old`'s
/// column k), then `e += g` (when `g` is given) and
/// `q_k[j] += sum_b e[i+b, j] coef[b][k]` (`qb[k]` is the band `j0..j1` of column k).
#[inline(always)]
#[allow(clippy::too_many_arguments)] // a fused kernel: every slice and flag is an operand of the one pass
fn band_accumulate<V: V8, const R: usize, const NB: usize, const PEND: bool>(
    e: &mut [f32],
    g: Option<&[f32]>,
    cols: usize,
    i: usize,
    j0: usize,
    j1: usize,
    coef: &[[f32; R]; NB],
    qb: &mut [&mut [f32]; R],
    pend: &[[f32; R]; NB],
    qob: &[&[f32]; R],
) {
    let w = j1 - j0;
    let base = i * cols + j0;
    assert!(j1 <= cols && (i + NB - 1) * cols + j1 <= e.len());
    if let Some(g) = g {
        assert_eq!(g.len(), e.len());
    }
    for qk in qb.iter() {
        assert_eq!(qk.len(), w);
    }
    if PEND {
        for qk in qob {
            assert_eq!(qk.len(), w);
        }
    }
    let cv: [[V; R]; NB] = std::array::from_fn(|b| std::array::from_fn(|k| V::splat(coef[b][k])));
    let pendv: [[V; R]; NB] =
        std::array::from_fn(|b| std::array::from_fn(|k| V::splat(pend[b][k])));
    // Raw accesses below: rows i..i+NB, columns j0..j1 lie inside e and g (asserted),
    // the bands have w elements, and j + L <= w in the vector loop.
    // SAFETY: base = i * cols + j0 <= e.len() (asserted), in bounds or one past the end.
    let ep = unsafe { e.as_mut_ptr().add(base) };
    // SAFETY: g.len() == e.len() (asserted), so as for `ep`.
    let gp = g.map(|g| unsafe { g.as_ptr().add(base) });
    let nc = w / L * L;
    let mut j = 0;
    while j < nc {
        // SAFETY: for b < NB, ep + b * cols + j .. + L lies in row i + b, columns
        // j0 + j .. j0 + j + L <= j1 of e (and likewise gp in g); qob[k] and qb[k] have w
        // >= j + L elements (asserted). `e`'s rows are written only through `ep`, and
        // qb's bands are distinct slices, so no reference aliases a write.
        unsafe {
            // Plain loops, not closures: a closure body would not inherit the caller's
            // AVX2 target feature if it were not inlined.
            let mut qo = [V::zero(); R];
            if PEND {
                for k in 0..R {
                    qo[k] = V::load(qob[k].as_ptr().add(j));
                }
            }
            let mut pc = [V::zero(); NB];
            for b in 0..NB {
                let ptr = ep.add(b * cols + j);
                V::prefetch(ptr.wrapping_add(AHEAD));
                if let Some(gp) = gp {
                    V::prefetch(gp.wrapping_add(b * cols + j + AHEAD));
                }
                let mut v = V::load(ptr);
                if PEND {
                    let mut s = V::zero();
                    for k in 0..R {
                        s = s.add(pendv[b][k].mul(qo[k]));
                    }
                    v = v.sub(s);
                }
                if let Some(gp) = gp {
                    v = v.add(V::load(gp.add(b * cols + j)));
                }
                if PEND || gp.is_some() {
                    v.store(ptr);
                }
                pc[b] = v;
            }
            for k in 0..R {
                let mut v = pc[0].mul(cv[0][k]);
                for b in 1..NB {
                    v = v.add(pc[b].mul(cv[b][k]));
                }
                let qp = qb[k].as_mut_ptr().add(j);
                V::load(qp).add(v).store(qp);
            }
        }
        j += L;
    }
    for j in nc..w {
        // SAFETY: j < w, so ep + b * cols + j (and gp's) lies in row i + b, columns
        // j0..j1, of e (g): in bounds by the assertions above.
        let pv: [f32; NB] = std::array::from_fn(|b| unsafe {
            let ptr = ep.add(b * cols + j);
            if PEND {
                let mut s = 0.0f32;
                for k in 0..R {
                    s += pend[b][k] * qob[k][j];
                }
                *ptr -= s;
            }
            if let Some(gp) = gp {
                *ptr += *gp.add(b * cols + j);
            }
            *ptr
        });
        for k in 0..R {
            let mut v = pv[0] * coef[0][k];
            for b in 1..NB {
                v += pv[b] * coef[b][k];
            }
            qb[k][j] += v;
        }
    }
}
