//! Hyper-parameters of every method, settable from the CLI and TOML, written into every
//! CSV row: the flat [`MethodParams`] (the TOML and CSV schema) and [`PARAMS`], one
//! [`ParamSpec`] per field (flag, limits, doc) that the CLI help and `gradcomp methods`
//! read. Each method lists the keys it reads in its spec and validates them in its
//! constructor.

use super::spec::ParamSpec;
use serde::{Deserialize, Serialize};

/// All method hyper-parameters in one flat table (TOML keys = field names).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MethodParams {
    /// Fraction of elements kept, rho in (0, 1] (topk, dgc, sketch). `None`: the
    /// method's own default ([`default_density`]): 0.001 for topk and dgc, 0.0076 for
    /// sketch. Cases carry it resolved ([`MethodParams::for_method`]).
    pub density: Option<f64>,
    /// Low-rank approximation rank r >= 1 (powersgd, acpsgd). Default 4 (CNNs).
    pub rank: usize,
    /// Low-rank methods compress a matrix only if (rows+cols)*r*rate < rows*cols
    /// (powersgd, acpsgd). `None`: the method's own default
    /// ([`default_min_compression_rate`]): 2 for powersgd, 0 (every matrix) for acpsgd.
    /// Cases carry it resolved ([`MethodParams::for_method`]).
    pub min_compression_rate: Option<f64>,
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
    /// Count Sketch rows r (independent hash rows). Default 2 ([`SKETCH_ROWS`]).
    pub sketch_rows: usize,
    /// Count Sketch columns per selected element: c = ceil(sketch_cols_per_k * k). Default
    /// 10 ([`SKETCH_COLS_PER_K`]).
    pub sketch_cols_per_k: f64,
    /// QSGD quantisation levels s >= 1. Default 127 (8-bit levels).
    pub qsgd_levels: u32,
}

impl Default for MethodParams {
    fn default() -> Self {
        MethodParams {
            density: None,
            rank: 4,
            min_compression_rate: None,
            start_iter: 0,
            momentum: 0.9,
            nesterov: false,
            clip_norm: 0.0,
            warmup_steps_per_epoch: 0,
            sketch_rows: SKETCH_ROWS,
            sketch_cols_per_k: SKETCH_COLS_PER_K,
            qsgd_levels: 127,
        }
    }
}

/// Every field of [`MethodParams`], in its order (a test checks they agree).
pub const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        key: "density",
        flag: "--density",
        kind: "f64",
        limits: "(0, 1]",
        doc: "Density rho, the fraction of elements kept",
        // Cases carry it resolved; one left to the method is written as the sparsifiers'
        // default.
        csv: |p| p.density_or(DEFAULT_DENSITY).to_string(),
        sets_cost: true,
    },
    ParamSpec {
        key: "rank",
        flag: "--lowrank-rank",
        kind: "usize",
        limits: ">= 1",
        doc: "Low-rank rank r (not a number of MPI ranks)",
        csv: |p| p.rank.to_string(),
        sets_cost: true,
    },
    ParamSpec {
        key: "min_compression_rate",
        flag: "--min-compression-rate",
        kind: "f64",
        limits: ">= 0, finite",
        doc: "Low-rank: compress a matrix only if (rows+cols)*r*rate < rows*cols; 0 = every matrix",
        // Likewise: one left to the method is written as Power-SGD's default.
        csv: |p| {
            p.min_compression_rate
                .unwrap_or(POWERSGD_MIN_COMPRESSION_RATE)
                .to_string()
        },
        sets_cost: true,
    },
    ParamSpec {
        key: "start_iter",
        flag: "--start-iter",
        kind: "u64",
        limits: ">= 0",
        doc: "Dense (uncompressed, all-reduced) warm-up steps",
        csv: |p| p.start_iter.to_string(),
        sets_cost: false,
    },
    ParamSpec {
        key: "momentum",
        flag: "--momentum",
        kind: "f32",
        limits: "[0, 1)",
        doc: "Momentum m of the method's own momentum correction",
        csv: |p| p.momentum.to_string(),
        sets_cost: false,
    },
    ParamSpec {
        key: "nesterov",
        flag: "--nesterov",
        kind: "bool",
        limits: "true or false",
        doc: "Nesterov momentum correction",
        csv: |p| p.nesterov.to_string(),
        sets_cost: true,
    },
    ParamSpec {
        key: "clip_norm",
        flag: "--clip-norm",
        kind: "f32",
        limits: ">= 0, finite",
        doc: "Local gradient clipping: max L2 norm before dividing by sqrt(n); 0 = off",
        csv: |p| p.clip_norm.to_string(),
        sets_cost: true,
    },
    ParamSpec {
        key: "warmup_steps_per_epoch",
        flag: "--warmup-steps-per-epoch",
        kind: "u64",
        limits: ">= 0",
        doc: "Steps per warm-up epoch (densities 25%, 6.25%, 1.5625%, 0.4%, then density); 0 = no warm-up",
        csv: |p| p.warmup_steps_per_epoch.to_string(),
        sets_cost: false,
    },
    ParamSpec {
        key: "sketch_rows",
        flag: "--sketch-rows",
        kind: "usize",
        limits: ">= 1",
        doc: "Count Sketch rows r (independent hash rows)",
        csv: |p| p.sketch_rows.to_string(),
        sets_cost: true,
    },
    ParamSpec {
        key: "sketch_cols_per_k",
        flag: "--sketch-cols-per-k",
        kind: "f64",
        limits: "> 0, finite",
        doc: "Count Sketch columns per kept element: c = ceil(sketch_cols_per_k * k)",
        csv: |p| p.sketch_cols_per_k.to_string(),
        sets_cost: true,
    },
    ParamSpec {
        key: "qsgd_levels",
        flag: "--qsgd-levels",
        kind: "u32",
        limits: "[1, 2^24]",
        doc: "QSGD quantisation levels s",
        csv: |p| p.qsgd_levels.to_string(),
        sets_cost: true,
    },
];

/// The defaults of [`MethodParams`] as a JSON object (TOML keys), each number as its
/// field's type prints it (f32 `0.9`, not its f64 widening `0.8999999761581421`);
/// `null` where each method has its own ([`default_density`],
/// [`default_min_compression_rate`]).
pub fn default_values() -> serde_json::Value {
    serde_json::to_string(&MethodParams::default())
        .and_then(|t| serde_json::from_str(&t))
        .unwrap_or_default()
}

/// The spec of the [`MethodParams`] key `key`.
pub fn param(key: &str) -> Option<&'static ParamSpec> {
    PARAMS.iter().find(|p| p.key == key)
}

/// Density of the sparsifiers (topk, dgc, their e2e forms): DGC's 0.1% (Lin et al.,
/// ICLR 2018, Section 4: "99.9% of the gradient exchange is redundant"), one value for
/// all of them so that they are timed at one compression.
pub const DEFAULT_DENSITY: f64 = 0.001;

/// Count Sketch's density: FetchSGD's default `k` (kiddyboots216/CommEfficient
/// `CommEfficient/utils.py` at 02d621e, line 105: `--k` 50000) over its default model's
/// 6,573,120 trainable parameters (ResNet-9, `models/resnet9.py`: 6,568,640 weights and
/// 4,480 batch-norm scales and shifts), 50,000 / 6,573,120 = 0.00761, to two digits. At
/// the sparsifiers' 0.001 even an exact global top k of the summed residual does not
/// match dense on the converge MLP (docs/methods.md, "sketch": how large a sketch the MLP
/// needs).
pub const SKETCH_DENSITY: f64 = 0.0076;

/// Count Sketch rows: measured, with [`SKETCH_COLS_PER_K`]. The smallest sketch (rows x
/// columns per kept element) that reaches dense's accuracy at seeds 1-3 in the
/// convergence check at [`SKETCH_DENSITY`] and `-np 4` (2026-11-29, the commit "sketch:
/// small tensors travel raw"; 1-5 rows x 5-20 columns per k,
/// bench-configs/sketch-size.toml; table and data: docs/methods.md, "sketch", "Default
/// size"). 2 x 10 and 4 x 5 tie at 20 columns per k;
/// the one with fewer rows hashes and estimates half as often. FetchSGD fixes no size to
/// take: its scripts pass rows and columns as arguments (kiddyboots216/CommEfficient
/// `CommEfficient/compare_cifar.sh` at 4565fea, lines 74-76: 1 row).
pub const SKETCH_ROWS: usize = 2;

/// Count Sketch columns per kept element: measured, with [`SKETCH_ROWS`].
pub const SKETCH_COLS_PER_K: f64 = 10.0;

/// Power-SGD's `min_compression_rate`: PyTorch's DDP hook default (PyTorch
/// `torch/distributed/algorithms/ddp_comm_hooks/powerSGD_hook.py`, `PowerSGDState`,
/// `min_compression_rate: float = 2`).
pub const POWERSGD_MIN_COMPRESSION_RATE: f64 = 2.0;

/// ACP-SGD's `min_compression_rate`: 0, so every matrix is compressed, as the reference
/// compresses every tensor with two or more dimensions (lzhangbv/acpsgd `acpsgd.py` at
/// 4f560a2, line 84: `if p.ndimension() > 1: # compressed tensors`).
pub const ACPSGD_MIN_COMPRESSION_RATE: f64 = 0.0;

/// The `min_compression_rate` `method` runs at when none is given: its spec's
/// ([`super::spec::MethodSpec::min_compression_rate`]; acpsgd
/// [`ACPSGD_MIN_COMPRESSION_RATE`]), else [`POWERSGD_MIN_COMPRESSION_RATE`]. `method`
/// may be an e2e name (`sketch-fusion`) or a control (`topk-noef`):
/// [`super::registry::spec_of`].
pub fn default_min_compression_rate(method: &str) -> f64 {
    super::registry::spec_of(method)
        .and_then(|s| s.min_compression_rate)
        .unwrap_or(POWERSGD_MIN_COMPRESSION_RATE)
}

/// The density `method` (a registry name, or an e2e name or control built on one:
/// [`super::registry::spec_of`]) runs at when none is given: its spec's
/// ([`super::spec::MethodSpec::density`]; Count Sketch [`SKETCH_DENSITY`]), else
/// [`DEFAULT_DENSITY`].
pub fn default_density(method: &str) -> f64 {
    super::registry::spec_of(method)
        .and_then(|s| s.density)
        .unwrap_or(DEFAULT_DENSITY)
}

impl MethodParams {
    /// These parameters as `method` runs them: a density or `min_compression_rate` not
    /// given becomes the method's default ([`default_density`],
    /// [`default_min_compression_rate`]), so rows, estimates and the simulator see the
    /// one the method uses.
    pub fn for_method(&self, method: &str) -> MethodParams {
        MethodParams {
            density: Some(self.density_for(method)),
            min_compression_rate: Some(self.min_compression_rate_for(method)),
            ..self.clone()
        }
    }

    /// The `min_compression_rate` `method` runs at: the one given, else its default
    /// ([`default_min_compression_rate`]).
    pub fn min_compression_rate_for(&self, method: &str) -> f64 {
        self.min_compression_rate
            .unwrap_or_else(|| default_min_compression_rate(method))
    }

    /// The density `method` runs at: the one given, else its default
    /// ([`default_density`]).
    pub fn density_for(&self, method: &str) -> f64 {
        self.density_or(default_density(method))
    }

    /// The density given, else `default`.
    pub fn density_or(&self, default: f64) -> f64 {
        self.density.unwrap_or(default)
    }

    /// `k = ceil(rho * d)`, at least 1 and at most `d` (docs/methods.md, "Notation" under
    /// "The `Compressor` contract"), with `rho` the density given, else
    /// [`DEFAULT_DENSITY`] (resolve Count Sketch's first: [`MethodParams::for_method`]).
    pub fn k_of(&self, d: usize) -> usize {
        ((self.density_or(DEFAULT_DENSITY) * d as f64).ceil() as usize).clamp(1, d.max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each column's text is its own field's value as Rust prints it (`Display`: `10`,
    /// not serde's `10.0`), and changing one field changes its column alone.
    #[test]
    fn each_csv_column_writes_its_own_field() {
        let base = MethodParams::default();
        let texts = |p: &MethodParams| PARAMS.iter().map(|s| (s.csv)(p)).collect::<Vec<_>>();
        let before = texts(&base);
        assert_eq!(before[0], "0.001", "a density left to the method");
        assert_eq!(before[2], "2", "a rate left to the method");
        // (key, a value other than the default as JSON, its column's text)
        let changed = [
            ("density", "0.25", "0.25"),
            ("rank", "3", "3"),
            ("min_compression_rate", "0.5", "0.5"),
            ("start_iter", "7", "7"),
            ("momentum", "0.5", "0.5"),
            ("nesterov", "true", "true"),
            ("clip_norm", "1.5", "1.5"),
            ("warmup_steps_per_epoch", "11", "11"),
            ("sketch_rows", "5", "5"),
            ("sketch_cols_per_k", "20.0", "20"),
            ("qsgd_levels", "15", "15"),
        ];
        assert_eq!(changed.len(), PARAMS.len());
        for (i, (key, json, text)) in changed.into_iter().enumerate() {
            assert_eq!(PARAMS[i].key, key);
            let p: MethodParams = serde_json::from_str(&format!("{{\"{key}\": {json}}}")).unwrap();
            let after = texts(&p);
            for (j, (a, b)) in after.iter().zip(&before).enumerate() {
                if j == i {
                    assert_eq!(a, text, "{key}");
                } else {
                    assert_eq!(a, b, "{key} changed {}", PARAMS[j].key);
                }
            }
        }
    }

    /// The defaults as JSON by hand: `null` where the method decides, momentum as f32
    /// prints it (0.9), the integers as given above; `param` finds a key's own spec and no
    /// other.
    #[test]
    fn default_values_and_param_by_hand() {
        let v = default_values();
        assert!(
            v["density"].is_null() && v["min_compression_rate"].is_null(),
            "{v}"
        );
        assert_eq!(v["rank"], serde_json::json!(4));
        assert_eq!(v["momentum"], serde_json::json!(0.9));
        assert_eq!(v["qsgd_levels"], serde_json::json!(127));
        assert_eq!(param("rank").map(|p| p.key), Some("rank"));
        assert_eq!(param("density").map(|p| p.key), Some("density"));
        assert!(param("no_such_key").is_none());
    }

    /// Power-SGD's rate is PyTorch's 2 (also for methods without a rate of their own);
    /// ACP-SGD's is 0.
    #[test]
    fn default_min_compression_rates_by_method() {
        assert_eq!(default_min_compression_rate("powersgd"), 2.0);
        assert_eq!(default_min_compression_rate("topk"), 2.0);
        assert_eq!(default_min_compression_rate("acpsgd"), 0.0);
    }

    /// The sparsifiers' density is DGC's 0.1%, Count Sketch's 0.0076; `for_method` fills
    /// a density and a rate not given with the method's own and keeps what was given.
    #[test]
    fn default_densities_and_for_method_by_hand() {
        assert_eq!(default_density("topk"), 0.001);
        assert_eq!(default_density("sketch"), 0.0076);
        let p = MethodParams::default().for_method("sketch");
        assert_eq!(
            (p.density, p.min_compression_rate, p.rank),
            (Some(0.0076), Some(2.0), 4)
        );
        let given = MethodParams {
            density: Some(0.05),
            min_compression_rate: Some(1.5),
            rank: 8,
            ..MethodParams::default()
        };
        let p = given.for_method("topk");
        assert_eq!(
            (p.density, p.min_compression_rate, p.rank),
            (Some(0.05), Some(1.5), 8)
        );
    }

    /// `k = ceil(rho * d)` within 1 and `d`: 1% of 1000 is 10, 0.1% (the default) of 1500
    /// is 2 (1.5 rounded up), all of 5 is 5, a billionth of 10 is still 1.
    #[test]
    fn k_of_by_hand() {
        let at = |rho: Option<f64>| MethodParams {
            density: rho,
            ..MethodParams::default()
        };
        assert_eq!(at(Some(0.01)).k_of(1000), 10);
        assert_eq!(at(None).k_of(1500), 2);
        assert_eq!(at(Some(1.0)).k_of(5), 5);
        assert_eq!(at(Some(1e-9)).k_of(10), 1);
    }
}
