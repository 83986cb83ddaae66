//! [`TensorSpec`]: one gradient tensor as the engine and the simulator see it, a matrix
//! view of a zoo model's parameter (registration order).

/// One gradient tensor as the engine and the simulator see it (registration order).
#[derive(Clone, Debug)]
pub struct TensorSpec {
    pub name: String,
    pub rows: usize,
    pub cols: usize,
}

impl TensorSpec {
    pub fn numel(&self) -> usize {
        self.rows * self.cols
    }

    /// A zoo model's tensors as the compressors see them (matrix view, registration order).
    pub fn of_model(model: &super::Model) -> Vec<TensorSpec> {
        model
            .tensors
            .iter()
            .map(|t| {
                let (rows, cols) = t.rows_cols();
                TensorSpec {
                    name: t.name.clone(),
                    rows,
                    cols,
                }
            })
            .collect()
    }
}
