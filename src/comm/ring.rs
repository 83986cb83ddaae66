//! Our own ring all-reduce over point-to-point messages (MPI_Sendrecv): a ring
//! reduce-scatter followed by a ring all-gather (Patarasuk & Yuan, JPDC 2009). The
//! merge at each reduce-scatter hop is a closure, so the same ring serves a plain sum
//! and Marsit's bit-wise merge of sign bits.

use super::{Elem, World};
use crate::error::{Error, Result};
use std::ops::Range;

/// Chunk `c` of `n` over `len` elements: balanced, the first `len % n` chunks one longer.
/// Some chunks are empty when `len < n`.
pub fn chunk(len: usize, n: usize, c: usize) -> Range<usize> {
    let base = len / n;
    let extra = len % n;
    let start = c * base + c.min(extra);
    start..start + base + usize::from(c < extra)
}

/// Disjoint views: `a` read-only, `b` mutable (ranges must not overlap).
fn split_pair<T>(data: &mut [T], a: Range<usize>, b: Range<usize>) -> (&[T], &mut [T]) {
    if a.start >= b.end {
        let (lo, hi) = data.split_at_mut(a.start);
        (&hi[..a.len()], &mut lo[b])
    } else {
        let (lo, hi) = data.split_at_mut(b.start);
        (&lo[a], &mut hi[..b.len()])
    }
}

/// Ring all-reduce of `data` in place. `scratch` must hold at least one chunk
/// (`ring_scratch_len`). `merge(aggregated, offset, incoming, own)` folds an incoming
/// chunk that already aggregates `aggregated` workers into this worker's chunk at
/// `offset`; after it, `own` aggregates `aggregated + 1` workers.
/// Rank r sends chunk (r - s) mod n at reduce-scatter step s and ends owning chunk
/// (r + 1) mod n; the all-gather then circulates the finished chunks. Under time
/// dilation each merge is stretched to `k` x its CPU time (`World::dilation`).
pub fn ring_allreduce<T, F>(
    world: &World,
    data: &mut [T],
    scratch: &mut [T],
    mut merge: F,
) -> Result<()>
where
    T: Elem,
    F: FnMut(usize, usize, &[T], &mut [T]) -> Result<()>,
{
    let n = world.size;
    if n == 1 {
        return Ok(());
    }
    let r = world.rank;
    let len = data.len();
    if scratch.len() < ring_scratch_len(len, n) {
        return Err(Error::Runtime(format!(
            "ring all-reduce: scratch of {} elements is smaller than one chunk ({})",
            scratch.len(),
            ring_scratch_len(len, n)
        )));
    }
    super::mpi_count(len, "ring all-reduce")?;
    let (right, left) = ((r + 1) % n, (r + n - 1) % n);
    for s in 0..n - 1 {
        let send_c = chunk(len, n, (r + n - s) % n);
        let recv_c = chunk(len, n, (r + 2 * n - s - 1) % n);
        let inc = &mut scratch[..recv_c.len()];
        world.send_receive(&data[send_c], right, inc, left);
        let off = recv_c.start;
        // Under time dilation the merge is host work: stretched to k x its CPU time.
        let span = world.dilation().start();
        merge(s + 1, off, inc, &mut data[recv_c])?;
        world.dilation().stretch(span);
    }
    for s in 0..n - 1 {
        let send_c = chunk(len, n, (r + 1 + n - s) % n);
        let recv_c = chunk(len, n, (r + n - s) % n);
        let (out, inc) = split_pair(data, send_c, recv_c);
        world.send_receive(out, right, inc, left);
    }
    Ok(())
}

/// Scratch elements [`ring_allreduce`] needs for `len` elements over `n` ranks.
pub fn ring_scratch_len(len: usize, n: usize) -> usize {
    if n == 0 {
        0
    } else {
        len.div_ceil(n)
    }
}

/// The merge of a plain sum ring all-reduce.
pub fn sum_merge(
    _aggregated: usize,
    _offset: usize,
    incoming: &[f32],
    own: &mut [f32],
) -> Result<()> {
    for (o, i) in own.iter_mut().zip(incoming) {
        *o += *i;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_exactly() {
        for len in [0usize, 1, 2, 3, 7, 10, 31] {
            for n in 1..6 {
                let mut next = 0;
                for c in 0..n {
                    let r = chunk(len, n, c);
                    assert_eq!(r.start, next);
                    assert!(r.len() <= ring_scratch_len(len, n));
                    next = r.end;
                }
                assert_eq!(next, len);
            }
        }
    }

    #[test]
    fn split_pair_both_orders() {
        let mut v: Vec<i32> = (0..10).collect();
        let (a, b) = split_pair(&mut v, 6..8, 1..3);
        assert_eq!(a, &[6, 7]);
        b[0] = -1;
        let (a, b) = split_pair(&mut v, 0..2, 5..9);
        assert_eq!(a, &[0, -1]);
        assert_eq!(b.len(), 4);
    }
}
