//! Tensor shapes as the benchmarks name them (`ROWSxCOLS` or `N`).

use serde::Serialize;
use std::fmt;

/// A tensor shape `ROWSxCOLS` (a matrix) or `N` (a 1-D tensor, `1xN`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Shape {
    pub rows: usize,
    pub cols: usize,
}

impl Shape {
    pub fn numel(self) -> usize {
        self.rows * self.cols
    }

    pub fn parse(s: &str) -> Result<Shape, String> {
        let t = s.trim();
        let num = |x: &str| -> Result<usize, String> {
            x.trim().replace('_', "").parse::<usize>().map_err(|_| {
                format!("'{s}' is not a shape: use ROWSxCOLS (e.g. 512x4608) or N (e.g. 25557032)")
            })
        };
        let (rows, cols) = match t.split_once(['x', 'X']) {
            Some((r, c)) => (num(r)?, num(c)?),
            None => (1, num(t)?),
        };
        if rows == 0 || cols == 0 {
            return Err(format!(
                "'{s}' has no elements: both dimensions must be >= 1"
            ));
        }
        let n = rows.checked_mul(cols).filter(|&n| n <= MAX_TENSOR_ELEMENTS).ok_or_else(|| {
            format!("'{s}' has more than {MAX_TENSOR_ELEMENTS} elements (the MPI count limit); use a smaller tensor")
        })?;
        let _ = n;
        Ok(Shape { rows, cols })
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}", self.rows, self.cols)
    }
}

/// Largest tensor (elements) the compression benchmarks accept.
pub const MAX_TENSOR_ELEMENTS: usize = i32::MAX as usize / 2;
