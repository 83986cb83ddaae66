//! The low-rank helpers Power-SGD and ACP-SGD share besides [`LowRank`]: parameter
//! checks, which tensors are compressed, the table of registered tensors ([`Slot`]),
//! shape checks and the copies between wires and arrays.

use ndarray::{Array2, ArrayView2, ArrayViewMut2};

use super::LowRank;
use crate::compress::{CompressError, MethodParams, Result};

/// Validate the keys the low-rank methods read (rank >= 1, min_compression_rate >= 0).
pub fn validate_lowrank_params(method: &'static str, p: &MethodParams) -> Result<()> {
    if p.rank < 1 {
        return Err(CompressError::BadParam {
            method,
            key: "rank",
            value: p.rank.to_string(),
            allowed: "an integer >= 1 (default 4 for CNNs, 32 for transformers)".into(),
        });
    }
    let rate = p.min_compression_rate_for(method);
    if !(rate.is_finite() && rate >= 0.0) {
        return Err(CompressError::BadParam {
            method,
            key: "min_compression_rate",
            value: rate.to_string(),
            allowed: "a finite number >= 0 (0 compresses every matrix; default 2 for powersgd, 0 for acpsgd)".into(),
        });
    }
    Ok(())
}

/// Effective rank `r' = min(rank, rows, cols)` if a `rows x cols` matrix is worth
/// compressing, i.e. `(rows + cols) r' rate < rows cols` (PyTorch powerSGD hook,
/// `min_compression_rate`); `None` means it travels raw (1-D tensors always do). At
/// `rate = 0` every matrix with `rows >= 2` is compressed (ACP-SGD's reference rule,
/// `p.ndimension() > 1`, with `rows >= 2` standing for two or more dimensions).
pub fn compressed_rank(rows: usize, cols: usize, rank: usize, rate: f64) -> Option<usize> {
    let r = rank.min(rows).min(cols);
    if rows < 2 || r == 0 {
        return None;
    }
    (((rows + cols) * r) as f64 * rate < (rows * cols) as f64).then_some(r)
}

/// A registered tensor of a low-rank method: raw (1-D or not worth compressing) or
/// factorised (boxed: the factors' state is large, a raw slot two words).
#[derive(Debug)]
pub enum Slot {
    Raw { rows: usize, cols: usize },
    LowRank(Box<LowRank>),
}

impl Slot {
    /// Decide raw vs low-rank for `method` (docs/methods.md, "powersgd": which tensors
    /// are compressed) and allocate the state for tensor `t`.
    pub fn new(
        method: &str,
        rows: usize,
        cols: usize,
        p: &MethodParams,
        seed: u64,
        t: usize,
    ) -> Slot {
        let rate = p.min_compression_rate_for(method);
        match compressed_rank(rows, cols, p.rank, rate) {
            Some(r) => Slot::LowRank(Box::new(LowRank::new(rows, cols, r, seed, t))),
            None => Slot::Raw { rows, cols },
        }
    }

    pub fn dims(&self) -> (usize, usize) {
        match self {
            Slot::Raw { rows, cols } => (*rows, *cols),
            Slot::LowRank(lr) => (lr.rows, lr.cols),
        }
    }
}

/// Store `slot` at index `t`, growing the table as needed (setup only).
pub fn put_slot(slots: &mut Vec<Option<Slot>>, t: usize, slot: Slot) {
    if slots.len() <= t {
        slots.resize_with(t + 1, || None);
    }
    slots[t] = Some(slot);
}

/// The registered slot of tensor `t`, or `CompressError::Tensor`.
pub fn slot_mut<'a>(
    slots: &'a mut [Option<Slot>],
    t: usize,
    method: &'static str,
) -> Result<&'a mut Slot> {
    slots
        .get_mut(t)
        .and_then(|s| s.as_mut())
        .ok_or_else(|| CompressError::Tensor {
            method,
            tensor: t,
            msg: "not registered (call register first)".into(),
        })
}

/// `CompressError::Tensor` unless `got == want` (`what` names the argument).
pub fn check_dims(
    method: &'static str,
    t: usize,
    what: &str,
    want: (usize, usize),
    got: (usize, usize),
) -> Result<()> {
    if want == got {
        return Ok(());
    }
    Err(CompressError::Tensor {
        method,
        tensor: t,
        msg: format!(
            "{what} is {}x{}, registered as {}x{}",
            got.0, got.1, want.0, want.1
        ),
    })
}

/// `CompressError::Tensor` unless the received sum has `want` elements.
pub fn check_len(method: &'static str, t: usize, want: usize, got: usize) -> Result<()> {
    if want == got {
        return Ok(());
    }
    Err(CompressError::Tensor {
        method,
        tensor: t,
        msg: format!("received {got} summed values, expected {want}"),
    })
}

/// Copy `src` into `dst` (same length) in memory order; false on a length mismatch.
pub fn load_memory_order(dst: &mut Array2<f32>, src: &[f32]) -> bool {
    match dst.as_slice_memory_order_mut() {
        Some(d) if d.len() == src.len() => {
            d.copy_from_slice(src);
            true
        }
        _ => false,
    }
}

/// Append the elements of `a` in memory order to `wire` (within its reserved capacity).
pub fn push_memory_order(wire: &mut Vec<f32>, a: &Array2<f32>) {
    match a.as_slice_memory_order() {
        Some(s) => wire.extend_from_slice(s),
        None => wire.extend(a.iter()),
    }
}

/// Raw path: `out = sum / n` (shape-checked by the caller).
pub fn write_average(mut out: ArrayViewMut2<f32>, sum: &[f32], n: usize) {
    let inv = 1.0 / n.max(1) as f32;
    for (o, s) in out.iter_mut().zip(sum) {
        *o = s * inv;
    }
}

/// Raw path: append `grad` to `wire` in logical (row-major) order.
pub fn push_raw(wire: &mut Vec<f32>, grad: ArrayView2<f32>) {
    match grad.as_slice() {
        Some(s) => wire.extend_from_slice(s),
        None => wire.extend(grad.iter()),
    }
}
