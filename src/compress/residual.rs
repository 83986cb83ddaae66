//! Error-feedback state the sparsifiers share (`topk`, `dgc`, `randomk`): the per-tensor
//! slots they keep it in, and [`Sent`], what the last `compress` sent, which `feedback`
//! (or the next `compress`, when no feedback ran) zeroes in the residual buffers once:
//! `e = p` with the sent entries zeroed (Stich et al., NeurIPS 2018, Alg. 1; GRACE's
//! `residual` memory), DGC's momentum factor masking (Lin et al., ICLR 2018, Sec. 3.2).

use super::select::{tensor_err, touched_vec};
use super::{Result, TensorId};

/// The indices one tensor's last `compress` sent, and whether feedback still owes their
/// zeroing.
#[derive(Debug, Clone)]
pub struct Sent {
    /// Ascending; the first `len` are the sent ones (the rest: capacity).
    idx: Vec<u32>,
    len: usize,
    pending: bool,
}

impl Sent {
    /// Room for `k_max` indices, its pages touched ([`touched_vec`]).
    pub fn new(k_max: usize) -> Sent {
        Sent {
            idx: touched_vec(k_max, 0, 1),
            len: 0,
            pending: false,
        }
    }

    /// The whole index buffer, for `compress` to select into.
    pub fn buf_mut(&mut self) -> &mut [u32] {
        &mut self.idx
    }

    /// The indices the last `compress` sent.
    pub fn indices(&self) -> &[u32] {
        &self.idx[..self.len]
    }

    /// `compress` sent the first `n` indices of the buffer: feedback owes their zeroing.
    pub fn mark(&mut self, n: usize) {
        self.len = n.min(self.idx.len());
        self.pending = true;
    }

    /// Error feedback, once per `compress`: zero every buffer of `residual` at the sent
    /// indices (an index past a buffer's end is skipped); a no-op until the next `mark`.
    pub fn settle<B: AsMut<[f32]>, const N: usize>(&mut self, mut residual: [B; N]) {
        if !self.pending {
            return;
        }
        for &i in self.indices() {
            for b in residual.iter_mut() {
                if let Some(x) = b.as_mut().get_mut(i as usize) {
                    *x = 0.0;
                }
            }
        }
        self.pending = false;
    }
}

/// One tensor's state for a sparsifier that sends `k` of its `rows x cols` entries with
/// error feedback (Top-k, Random-k): the residual `e`, which holds `p = g + e` between
/// `compress` and `feedback`, and what was sent of it.
#[derive(Debug, Clone)]
pub struct Residual {
    pub rows: usize,
    pub cols: usize,
    pub k: usize,
    pub e: Vec<f32>,
    /// The indices the last `compress` sent (ascending).
    pub sent: Sent,
}

impl Residual {
    /// A zero residual for a `rows x cols` tensor sending `k` entries, its pages touched.
    pub fn new(rows: usize, cols: usize, k: usize) -> Residual {
        Residual {
            rows,
            cols,
            k,
            e: touched_vec(rows * cols, 0.0, 1.0),
            sent: Sent::new(k),
        }
    }

    /// Error feedback: `e = p` with the sent entries zeroed, once per `compress`.
    pub fn settle(&mut self) {
        self.sent.settle([&mut self.e]);
    }
}

/// The state of registered tensor `t`, or `method`'s "not registered" error.
pub fn registered<'a, T>(
    method: &'static str,
    slots: &'a mut [Option<T>],
    t: TensorId,
) -> Result<&'a mut T> {
    slots
        .get_mut(t)
        .and_then(Option::as_mut)
        .ok_or_else(|| tensor_err(method, t, "not registered".into()))
}

/// Keep `state` as tensor `t`'s (registering again replaces it).
pub fn register<T: Clone>(slots: &mut Vec<Option<T>>, t: TensorId, state: T) {
    if slots.len() <= t {
        slots.resize(t + 1, None);
    }
    slots[t] = Some(state);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feedback zeroes the sent entries of every buffer once per `mark`, skips indices
    /// past a buffer's end, and leaves the rest.
    #[test]
    fn settle_zeroes_the_sent_entries_once() {
        let mut s = Sent::new(4);
        s.buf_mut()[..3].copy_from_slice(&[1, 3, 5]);
        let (mut e, mut short) = (vec![1.0f32; 6], vec![2.0f32; 4]);
        s.settle([&mut e, &mut short]);
        assert_eq!(e, [1.0; 6], "nothing marked yet");
        s.mark(3);
        assert_eq!(s.indices(), [1, 3, 5]);
        s.settle([&mut e, &mut short]);
        assert_eq!(e, [1.0, 0.0, 1.0, 0.0, 1.0, 0.0]);
        assert_eq!(short, [2.0, 0.0, 2.0, 0.0]);
        e.fill(7.0);
        s.settle([&mut e]);
        assert_eq!(e, [7.0; 6], "settled already");
        // A mark beyond the buffer keeps what it holds.
        s.mark(9);
        assert_eq!(s.indices().len(), 4);
    }

    #[test]
    fn slots_register_replace_and_name_missing_tensors() {
        let mut slots: Vec<Option<u8>> = Vec::new();
        register(&mut slots, 2, 5);
        assert_eq!(slots, [None, None, Some(5)]);
        register(&mut slots, 2, 6);
        assert_eq!(*registered("m", &mut slots, 2).unwrap(), 6);
        let e = registered("m", &mut slots, 1).unwrap_err().to_string();
        assert!(e.contains("not registered"), "{e}");
        assert!(registered("m", &mut slots, 9).is_err());
    }
}
