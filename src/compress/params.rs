//! Hyper-parameters of every method, settable from the CLI and TOML, written into every
//! CSV row. Defaults and allowed ranges: docs/methods.md, "Hyper-parameters"; each
//! method validates the keys it reads in its constructor.

use serde::{Deserialize, Serialize};

/// All method hyper-parameters in one flat table (TOML keys = field names).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MethodParams {
    /// Fraction of elements kept, rho in (0, 1] (topk, dgc, sketch). Default 0.001.
    pub density: f64,
    /// Low-rank approximation rank r >= 1 (powersgd, acpsgd). Default 4 (CNNs).
    pub rank: usize,
    /// Power-SGD compresses a matrix only if (rows+cols)*r*rate < rows*cols. Default 2.
    pub min_compression_rate: f64,
    /// Power-SGD dense (uncompressed, all-reduced) warm-up steps. Default 0.
    pub start_iter: u64,
    /// DGC momentum m in [0, 1). Default 0.9.
    pub momentum: f32,
    /// DGC Nesterov momentum correction. Default false.
    pub nesterov: bool,
    /// DGC local gradient clipping: max L2 norm before dividing by sqrt(n); 0 = off (default).
    pub clip_norm: f32,
    /// DGC warm-up: steps per warm-up "epoch" (density 25%, 6.25%, 1.5625%, 0.4%, then
    /// `density`); 0 = no warm-up (default: steady state).
    pub warmup_steps_per_epoch: u64,
    /// Count Sketch rows r (independent hash rows). Default 3.
    pub sketch_rows: usize,
    /// Count Sketch columns per selected element: c = ceil(sketch_cols_per_k * k). Default 10.
    pub sketch_cols_per_k: f64,
    /// QSGD quantisation levels s >= 1. Default 127 (8-bit levels).
    pub qsgd_levels: u32,
}

impl Default for MethodParams {
    fn default() -> Self {
        MethodParams {
            density: 0.001,
            rank: 4,
            min_compression_rate: 2.0,
            start_iter: 0,
            momentum: 0.9,
            nesterov: false,
            clip_norm: 0.0,
            warmup_steps_per_epoch: 0,
            sketch_rows: 3,
            sketch_cols_per_k: 10.0,
            qsgd_levels: 127,
        }
    }
}

impl MethodParams {
    /// `k = ceil(rho * d)`, at least 1 and at most `d` (docs/methods.md, "Notation" under
    /// "The `Compressor` contract").
    pub fn k_of(&self, d: usize) -> usize {
        ((self.density * d as f64).ceil() as usize).clamp(1, d.max(1))
    }
}
