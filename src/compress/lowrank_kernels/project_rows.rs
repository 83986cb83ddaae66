//! `P = (g + e) Q`, `e <- g + e [- P Q^T]`: [`add_project_rows`], one pass over the big
//! matrix, four rows per sweep (two above rank 4).

#[cfg(target_arch = "x86_64")]
use super::avx;
use super::{check_args, columns, row_sub, sweep_rows, use_avx2, Lanes, L, V8};

/// For every row `i`: `e_i += g_i` (when `g` is given), `P[i, :] = e_i Q`, and with
/// `residual` also `e_i -= P[i, :] Q^T`, in one pass over `e` (and `g`). `e`, `g`: row-major
/// `rows x cols`; `q`: column-major `cols x r`; `p`: column-major `rows x r`.
///
/// With `pending = Some((P_old, Q_old))` (column-major `rows x r` and `cols x r`), each
/// row first applies a deferred residual `e_i -= P_old[i, :] Q_old^T` in the same sweep
/// as the product (per 8-lane chunk: subtract, add `g`, accumulate): the same arithmetic
/// as the eager pass it replaces, done while the chunk is in registers.
#[allow(clippy::too_many_arguments)] // a fused kernel: every slice and flag is an operand of the one pass
pub fn add_project_rows(
    e: &mut [f32],
    g: Option<&[f32]>,
    cols: usize,
    q: &[f32],
    r: usize,
    p: &mut [f32],
    residual: bool,
    pending: Option<(&[f32], &[f32])>,
) {
    let rows = check_args(e, g, cols, r, p.len(), q.len(), pending);
    if rows == 0 {
        return;
    }
    dispatch!(
        r,
        rows_body,
        rows_avx2,
        (e, g, cols, q, p, residual, pending)
    )
}

/// [`rows_body`] compiled with AVX2 + FMA, lanes [`avx::Avx`].
///
/// # Safety
/// The CPU must support AVX2 and FMA ([`use_avx2`]). Nothing more: the body's raw
/// accesses are guarded by its own length assertions.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn rows_avx2<const R: usize>(
    e: &mut [f32],
    g: Option<&[f32]>,
    cols: usize,
    q: &[f32],
    p: &mut [f32],
    residual: bool,
    pending: Option<(&[f32], &[f32])>,
) {
    rows_body::<avx::Avx, R>(e, g, cols, q, p, residual, pending)
}

#[inline(always)]
pub(super) fn rows_body<V: V8, const R: usize>(
    e: &mut [f32],
    g: Option<&[f32]>,
    cols: usize,
    q: &[f32],
    p: &mut [f32],
    residual: bool,
    pending: Option<(&[f32], &[f32])>,
) {
    let rows = e.len() / cols;
    let qs = columns::<R>(q, cols);
    let olds = pending.map(|(po, qo)| (columns::<R>(po, rows), columns::<R>(qo, cols)));
    // Several rows per sweep ([`sweep_rows`]): each factor chunk loaded from L2 serves
    // every row of the block (the `r` factor columns, ~r * 20 KB at 5k columns, do not
    // fit in L1 beside the streams). No software
    // prefetch here: on huge pages (measure::pages) the hardware prefetchers keep up and
    // the prefetches cost load slots; on 5057 x 5054 at rank 4, four rows without them
    // 10.8-11.0 ms against two rows with them 12.5-14.8 (on 4 KiB pages: alike, 12-17 ms;
    // docs/performance.md, "Compression kernels").
    let mut rest = &mut e[..];
    let mut i = 0;
    while !rest.is_empty() {
        let nr = sweep_rows(rest.len() / cols, R);
        let (block, tail) = std::mem::take(&mut rest).split_at_mut(nr * cols);
        rest = tail;
        let gi = g.map(|g| &g[i * cols..(i + nr) * cols]);
        let po: [[f32; R]; 4] = match &olds {
            Some((po, _)) => std::array::from_fn(|b| {
                std::array::from_fn(|k| if b < nr { po[k][i + b] } else { 0.0 })
            }),
            None => [[0.0; R]; 4],
        };
        let qo = olds.as_ref().map_or(&qs, |(_, qo)| qo);
        let (add, pend) = (gi.is_some(), olds.is_some());
        macro_rules! rows_of {
            ($NR:literal) => {{
                let mut es = block.chunks_exact_mut(cols);
                let er: [&mut [f32]; $NR] = std::array::from_fn(|_| es.next().expect("nr rows"));
                let gr: [&[f32]; $NR] = match gi {
                    Some(g) => {
                        let mut gs = g.chunks_exact(cols);
                        std::array::from_fn(|_| gs.next().expect("nr rows"))
                    }
                    None => [&[][..]; $NR],
                };
                let out = project_rows_block::<V, R, $NR>(er, gr, &qs, &po, qo, add, pend);
                let mut pis = [[0.0f32; R]; 4];
                pis[..$NR].copy_from_slice(&out);
                pis
            }};
        }
        let pis: [[f32; R]; 4] = match nr {
            4 => rows_of!(4),
            2 => rows_of!(2),
            _ => rows_of!(1),
        };
        for (b, pi) in pis.iter().enumerate().take(nr) {
            for k in 0..R {
                p[k * rows + i + b] = pi[k];
            }
        }
        if residual {
            for (b, eb) in block.chunks_exact_mut(cols).enumerate() {
                row_sub::<V, R>(eb, &pis[b], &qs);
            }
        }
        i += nr;
    }
}

/// [`row_project`] with its `ADD` / `PEND` flags chosen at run time.
#[inline(always)]
fn project_rows_block<V: V8, const R: usize, const NR: usize>(
    e: [&mut [f32]; NR],
    g: [&[f32]; NR],
    qs: &[&[f32]; R],
    po: &[[f32; R]],
    qos: &[&[f32]; R],
    add: bool,
    pend: bool,
) -> [[f32; R]; NR] {
    match (add, pend) {
        (true, true) => row_project::<V, R, NR, true, true>(e, g, qs, po, qos),
        (false, true) => row_project::<V, R, NR, false, true>(e, g, qs, po, qos),
        (true, false) => row_project::<V, R, NR, true, false>(e, g, qs, po, qos),
        (false, false) => row_project::<V, R, NR, false, false>(e, g, qs, po, qos),
    }
}

/// For each of `NR` rows `b` (sharing every factor load): with `PEND`
/// `e_b -= sum_k po[b][k] qos_k` (a deferred residual, summed as in [`row_sub`]), with
/// `ADD` `e_b += g_b`, and return `e_b Q`; one sweep. Each row's arithmetic is the same
/// as with `NR = 1` (bit-identical results). `g[b]`, `qs[k]`, `qos[k]` as long as `e[b]`.
#[inline(always)]
fn row_project<V: V8, const R: usize, const NR: usize, const ADD: bool, const PEND: bool>(
    mut e: [&mut [f32]; NR],
    g: [&[f32]; NR],
    qs: &[&[f32]; R],
    po: &[[f32; R]],
    qos: &[&[f32]; R],
) -> [[f32; R]; NR] {
    let n = e[0].len();
    for b in 0..NR {
        assert_eq!(e[b].len(), n);
        if ADD {
            assert_eq!(g[b].len(), n);
        }
    }
    assert!(po.len() >= NR);
    for (qk, qok) in qs.iter().zip(qos) {
        assert!(qk.len() == n && qok.len() == n);
    }
    let nc = n / L * L;
    let pov: [[V; R]; NR] = std::array::from_fn(|b| std::array::from_fn(|k| V::splat(po[b][k])));
    let mut acc = [[V::zero(); R]; NR];
    let eps: [*mut f32; NR] = std::array::from_fn(|b| e[b].as_mut_ptr());
    let mut j = 0;
    while j < nc {
        // SAFETY: j + L <= n for every e[b], g[b], qs[k] and qos[k] (asserted lengths);
        // the rows are distinct slices, written only through their own pointer.
        unsafe {
            let q: [V; R] = std::array::from_fn(|k| V::load(qs[k].as_ptr().add(j)));
            let qo: [V; R] = if PEND {
                std::array::from_fn(|k| V::load(qos[k].as_ptr().add(j)))
            } else {
                [V::zero(); R]
            };
            for b in 0..NR {
                let mut pc = V::load(eps[b].add(j));
                if PEND {
                    let mut v = V::zero();
                    for k in 0..R {
                        v = v.add(pov[b][k].mul(qo[k]));
                    }
                    pc = pc.sub(v);
                }
                if ADD {
                    pc = pc.add(V::load(g[b].as_ptr().add(j)));
                }
                if ADD || PEND {
                    pc.store(eps[b].add(j));
                }
                for k in 0..R {
                    acc[b][k] = acc[b][k].add(pc.mul(q[k]));
                }
            }
        }
        j += L;
    }
    let mut out = [[0.0f32; R]; NR];
    for b in 0..NR {
        for k in 0..R {
            out[b][k] = acc[b][k].hsum();
        }
        for j in nc..n {
            // SAFETY: j < n = e[b].len().
            let mut v = unsafe { *eps[b].add(j) };
            if PEND {
                let mut s = 0.0f32;
                for k in 0..R {
                    s += po[b][k] * qos[k][j];
                }
                v -= s;
            }
            if ADD {
                v += g[b][j];
            }
            // SAFETY: as above.
            unsafe { *eps[b].add(j) = v };
            for k in 0..R {
                out[b][k] += v * qs[k][j];
            }
        }
    }
    out
}
