//! Bench configuration: the TOML schema (unknown keys are errors), its validation into
//! a [`Config`], and the expansion of every section into a list of [`Case`]s (lists
//! expand to the cartesian product). The CLI subcommands build the same sections.

use crate::units::parse_bytes;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::Path;
use thiserror::Error;

/// A configuration problem, located by where the value came from.
#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("{file}: {msg}")]
    Syntax { file: String, msg: String },
    #[error("{location}: {msg}")]
    Invalid { location: String, msg: String },
    #[error("cannot read config file {file}: {source}")]
    Read {
        file: String,
        source: std::io::Error,
    },
}

/// Where a value came from, for error messages: a CLI flag or a key of a TOML section.
#[derive(Clone, Debug)]
pub enum Origin {
    Cli,
    File {
        file: String,
        section: &'static str,
        index: usize,
    },
}

impl Origin {
    /// An error for `key` (TOML spelling; the CLI flag is derived from it).
    pub fn invalid(&self, key: &str, msg: impl fmt::Display) -> ConfigError {
        // One line whatever the user typed (a value may hold a newline).
        let msg = msg.to_string().replace('\r', "\\r").replace('\n', "\\n");
        let location = match self {
            Origin::Cli => {
                let flag = match key {
                    "shapes" => "shape",
                    "models" => "model",
                    "densities" => "density",
                    "ranks" => "rank",
                    "lowrank_ranks" => "lowrank_rank",
                    "min_time_s" => "min_time",
                    "max_time_s" => "max_time",
                    k => k,
                };
                format!("--{}", flag.replace('_', "-"))
            }
            Origin::File {
                file,
                section,
                index,
            } => format!("{file}: [[{section}]] #{index}, key '{key}'"),
        };
        ConfigError::Invalid {
            location,
            msg: msg.to_string(),
        }
    }
}

/// Refuse a list that names one value twice: both entries would run the same case under
/// one case_id (so `--resume` could not tell them apart).
pub(crate) fn no_repeats<T: PartialEq>(
    origin: &Origin,
    key: &str,
    items: &[T],
    show: impl Fn(&T) -> String,
) -> Result<(), ConfigError> {
    for (i, x) in items.iter().enumerate() {
        if items[..i].contains(x) {
            return Err(origin.invalid(
                key,
                format!(
                    "'{}' appears twice; each entry is one case, remove the repeat",
                    show(x)
                ),
            ));
        }
    }
    Ok(())
}

/// Memory every rank holds whatever it runs (MPI library, code, stacks): ~19 MiB
/// measured (VmHWM, Open MPI 4.1), bounded with room.
pub const BASE_RSS_BYTES: u64 = 64 << 20;

/// The buffer micro-compress reads to measure memory bandwidth (bench::tensors).
pub const MEMORY_PROBE_BYTES: u64 = 256 << 20;

/// Share of the node's available memory a run may plan to use; the rest is a margin
/// for the OS, page cache and estimate error.
pub const MEMORY_USABLE_FRACTION: f64 = 0.9;

/// Largest config file read (bytes): far above any real sweep, small enough that a
/// wrong path (a device, a log file) is refused instead of read.
pub const MAX_CONFIG_BYTES: u64 = 4 << 20;

/// Most cases one run may expand to: a sweep beyond it is a mistake or belongs in
/// several runs (each case is one row and one collective agreement).
pub const MAX_CASES: u128 = 100_000;

/// A byte size given as an integer or a string with a unit (`"64KiB"`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SizeSpec {
    Bytes(u64),
    Text(String),
}

impl SizeSpec {
    pub fn resolve(&self, origin: &Origin, key: &str) -> Result<u64, ConfigError> {
        match self {
            SizeSpec::Bytes(b) => Ok(*b),
            SizeSpec::Text(s) => parse_bytes(s).map_err(|m| origin.invalid(key, m)),
        }
    }
}

/// The collectives `micro-comm` measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, PartialOrd, Ord, Hash)]
#[serde(rename_all = "kebab-case")]
pub enum Collective {
    /// MPI_Allreduce (sum, f32).
    Allreduce,
    /// MPI_Allgather (f32); `bytes` is each rank's contribution.
    Allgather,
    /// Our reduce-scatter + all-gather ring over MPI_Sendrecv (sum, f32).
    RingAllreduce,
    /// MPI_Iallreduce overlapped with calibrated compute (OSU / IMB overlap method).
    IallreduceOverlap,
}

impl Collective {
    pub const ALL: [Collective; 4] = [
        Collective::Allreduce,
        Collective::Allgather,
        Collective::RingAllreduce,
        Collective::IallreduceOverlap,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Collective::Allreduce => "allreduce",
            Collective::Allgather => "allgather",
            Collective::RingAllreduce => "ring-allreduce",
            Collective::IallreduceOverlap => "iallreduce-overlap",
        }
    }

    pub fn parse(s: &str) -> Option<Collective> {
        Collective::ALL.into_iter().find(|c| c.name() == s)
    }

    pub fn allowed() -> String {
        Collective::ALL.map(|c| c.name()).join(", ")
    }
}

/// Global settings (`[run]`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RunSection {
    /// Seed of every RNG of the run.
    pub seed: u64,
    /// Abort unless the world has exactly this many ranks.
    pub expect_ranks: Option<usize>,
    /// End the job when one case runs longer than this (seconds).
    pub case_timeout_s: Option<f64>,
}

impl Default for RunSection {
    fn default() -> Self {
        RunSection {
            seed: 1,
            expect_ranks: None,
            case_timeout_s: None,
        }
    }
}

/// `[[micro-comm]]`: a collective size sweep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MicroCommSection {
    pub collectives: Vec<String>,
    #[serde(default = "default_min_bytes")]
    pub min_bytes: SizeSpec,
    #[serde(default = "default_max_bytes")]
    pub max_bytes: SizeSpec,
    /// Explicit message sizes; replaces the min_bytes..max_bytes doubling sweep.
    #[serde(default)]
    pub sizes: Option<Vec<SizeSpec>>,
    /// Timed iterations per size (default scales with size, like OSU).
    #[serde(default)]
    pub iters: Option<u64>,
    /// Warm-up iterations per size (default scales with size).
    #[serde(default)]
    pub warmup: Option<u64>,
    /// Validate every result against exact expected values.
    #[serde(default)]
    pub check: bool,
}

fn default_min_bytes() -> SizeSpec {
    SizeSpec::Bytes(4)
}
fn default_max_bytes() -> SizeSpec {
    SizeSpec::Text("64MiB".into())
}

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

/// `[[micro-compress]]` and `[[micro]]`: methods over tensor shapes (and optional
/// density / rank sweeps); the cartesian product of the lists.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompressSection {
    pub methods: Vec<String>,
    /// `ROWSxCOLS` or `N` per tensor.
    #[serde(default)]
    pub shapes: Vec<String>,
    /// micro-compress only: zoo models whose every layer is compressed in turn per step.
    #[serde(default)]
    pub models: Vec<String>,
    /// Density sweep (overrides params.density).
    #[serde(default)]
    pub densities: Option<Vec<f64>>,
    /// Power-SGD/ACP-SGD rank sweep (overrides params.rank).
    #[serde(default)]
    pub lowrank_ranks: Option<Vec<usize>>,
    /// Deprecated name of `lowrank_ranks` (accepted with a warning).
    #[serde(default)]
    pub ranks: Option<Vec<usize>>,
    /// Method hyper-parameters (see docs/methods.md).
    #[serde(default)]
    pub params: crate::compress::MethodParams,
    #[serde(default)]
    pub iters: Option<u64>,
    #[serde(default)]
    pub warmup: Option<u64>,
    /// `[[micro]]` only: validate the result against a dense reference.
    #[serde(default)]
    pub check: bool,
}

/// A validated compression section.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CompressSpec {
    pub methods: Vec<String>,
    pub shapes: Vec<Shape>,
    /// micro-compress only: zoo models (every layer per step, one row per model).
    pub models: Vec<String>,
    pub params: Vec<crate::compress::MethodParams>,
    pub iters: Option<u64>,
    pub warmup: Option<u64>,
    pub check: bool,
}

impl CompressSection {
    /// Validate; `with_check` is false for micro-compress (which has no exchange to check).
    pub fn validate(&self, origin: &Origin, with_check: bool) -> Result<CompressSpec, ConfigError> {
        use crate::compress::{registry, WorkerCtx};
        if self.methods.is_empty() {
            return Err(origin.invalid(
                "methods",
                format!(
                    "is empty; give one or more of {}",
                    registry::METHODS.join(", ")
                ),
            ));
        }
        let trimmed: Vec<&str> = self.methods.iter().map(|m| m.trim()).collect();
        no_repeats(origin, "methods", &trimmed, |m| m.to_string())?;
        let mut methods: Vec<String> = Vec::new();
        for m in &self.methods {
            let m = m.trim().to_string();
            if !registry::METHODS.contains(&m.as_str()) {
                return Err(origin.invalid(
                    "methods",
                    format!(
                        "unknown method '{m}'; allowed: {}",
                        registry::METHODS.join(", ")
                    ),
                ));
            }
            if !methods.contains(&m) {
                methods.push(m);
            }
        }
        if !self.models.is_empty() && with_check {
            return Err(origin.invalid(
                "models",
                "applies to micro-compress only; give [[micro]] tensor shapes instead",
            ));
        }
        if self.shapes.is_empty() && self.models.is_empty() {
            return Err(origin.invalid(
                "shapes",
                if with_check {
                    "is empty; give one or more shapes (ROWSxCOLS or N)".to_string()
                } else {
                    format!(
                        "is empty and so is models; give shapes (ROWSxCOLS or N) or models ({})",
                        crate::models::names().join(", ")
                    )
                },
            ));
        }
        let trimmed: Vec<&str> = self.models.iter().map(|m| m.trim()).collect();
        no_repeats(origin, "models", &trimmed, |m| m.to_string())?;
        let mut models: Vec<String> = Vec::new();
        for m in &self.models {
            let m = m.trim().to_string();
            crate::models::build(&m).map_err(|e| origin.invalid("models", e))?;
            if !models.contains(&m) {
                models.push(m);
            }
        }
        let shapes = self
            .shapes
            .iter()
            .map(|s| Shape::parse(s).map_err(|m| origin.invalid("shapes", m)))
            .collect::<Result<Vec<_>, _>>()?;
        no_repeats(origin, "shapes", &shapes, |s| s.to_string())?;
        let densities = self
            .densities
            .clone()
            .unwrap_or_else(|| vec![self.params.density]);
        let ranks = lowrank_sweep(&self.lowrank_ranks, &self.ranks, origin)?
            .unwrap_or_else(|| vec![self.params.rank]);
        no_repeats(origin, "densities", &densities, |d| d.to_string())?;
        no_repeats(origin, "lowrank_ranks", &ranks, |r| r.to_string())?;
        if densities.is_empty() || ranks.is_empty() {
            return Err(origin.invalid(
                if densities.is_empty() {
                    "densities"
                } else {
                    "lowrank_ranks"
                },
                "is empty; give at least one value or leave it out",
            ));
        }
        let mut params = Vec::new();
        for &d in &densities {
            for &r in &ranks {
                let mut p = self.params.clone();
                p.density = d;
                p.rank = r;
                // Each method validates the keys it reads.
                for m in &methods {
                    registry::build(
                        m,
                        &p,
                        WorkerCtx {
                            rank: 0,
                            world_size: 1,
                            seed: 0,
                        },
                    )
                    .map_err(|e| {
                        let key = match &e {
                            crate::compress::CompressError::BadParam { key, .. } => *key,
                            _ => "params",
                        };
                        origin.invalid(key, e)
                    })?;
                }
                params.push(p);
            }
        }
        if self.iters == Some(0) {
            return Err(origin.invalid(
                "iters",
                "0 iterations: give at least 1 (or leave it out for the size-scaled default)",
            ));
        }
        if self.check && !with_check {
            return Err(origin.invalid(
                "check",
                "applies to micro (compress + exchange + decompress) only; remove it here",
            ));
        }
        Ok(CompressSpec {
            methods,
            shapes,
            models,
            params,
            iters: self.iters,
            warmup: self.warmup,
            check: self.check,
        })
    }
}

/// Default (iterations, warm-up) of the compression benchmarks by tensor size.
pub fn default_compress_iters(numel: usize) -> (u64, u64) {
    match numel {
        0..=1_048_576 => (50, 5),
        1_048_577..=16_777_216 => (20, 3),
        _ => (10, 2),
    }
}

/// `[[e2e]]`: training iterations of models, per method x fusion x pipelining.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct E2eSection {
    pub models: Vec<String>,
    pub methods: Vec<String>,
    /// Fusion plans: `none`, a byte threshold (`25MiB`), `single`, or a planner: `mgwfbp`,
    /// `omgs`, `layerfusion`.
    #[serde(default = "default_fusion")]
    pub fusion: Vec<String>,
    /// Pipelining (wait-free backprop) on and/or off.
    #[serde(default = "default_pipelining")]
    pub pipelining: Vec<bool>,
    /// Collectives: `auto` (the method's own), `allreduce`, `allgather`, `ps`.
    #[serde(default = "default_collectives")]
    pub collective: Vec<String>,
    /// Device preset for the compute model (`v100`, `rtx2080ti`, `a100`, `h100`).
    #[serde(default = "default_device")]
    pub device: String,
    /// Per-worker batch size [default: the model's].
    #[serde(default)]
    pub batch: Option<usize>,
    /// How the device waits: `sleep` (default), `spin`, `none` (no compute).
    #[serde(default = "default_compute")]
    pub compute: String,
    /// Measured per-layer backward times (CSV) instead of the device preset.
    #[serde(default)]
    pub compute_profile: Option<String>,
    /// Planner fusions: collective cost models fitted from this micro_comm.csv instead
    /// of a calibration at the start of each case.
    #[serde(default)]
    pub cost_comm: Option<String>,
    #[serde(default)]
    pub densities: Option<Vec<f64>>,
    /// Power-SGD/ACP-SGD rank sweep (overrides params.rank).
    #[serde(default)]
    pub lowrank_ranks: Option<Vec<usize>>,
    /// Deprecated name of `lowrank_ranks` (accepted with a warning).
    #[serde(default)]
    pub ranks: Option<Vec<usize>>,
    #[serde(default)]
    pub params: crate::compress::MethodParams,
    /// Timed iterations (the minimum when adaptive timing is on).
    #[serde(default)]
    pub iters: Option<u64>,
    #[serde(default)]
    pub warmup: Option<u64>,
    /// Adaptive timing: time each case for at least this long (s).
    #[serde(default)]
    pub min_time_s: Option<f64>,
    /// Adaptive timing: iterate until the 95% interval of the mean is within this share
    /// of the mean (e.g. 0.02).
    #[serde(default)]
    pub target_ci: Option<f64>,
    /// Adaptive timing: never more timed iterations than this (default 1000).
    #[serde(default)]
    pub max_iters: Option<u64>,
    /// Adaptive timing: stop once the timed iterations took this long (s), after `iters`.
    #[serde(default)]
    pub max_time_s: Option<f64>,
}

fn default_fusion() -> Vec<String> {
    vec!["none".into()]
}
fn default_pipelining() -> Vec<bool> {
    vec![false, true]
}
fn default_collectives() -> Vec<String> {
    vec!["auto".into()]
}
fn default_device() -> String {
    "v100".into()
}
fn default_compute() -> String {
    "sleep".into()
}

/// e2e-only methods: (name, base compressor, planner). They compress each bucket as one
/// merged tensor with buckets from their own planner (their `fusion` is fixed).
pub const E2E_METHODS: &[(&str, &str, crate::schedule::plan::PlannerKind)] = &[
    ("omgs", "topk", crate::schedule::plan::PlannerKind::Omgs),
    (
        "sketch-fusion",
        "sketch",
        crate::schedule::plan::PlannerKind::LayerFusion,
    ),
];

/// The fusion an e2e method implies (its planner), or `None` when the case's fusion
/// applies. Sweeps over fusion produce one case for such a method, not one per value.
pub fn implied_fusion(m: &str) -> Option<crate::schedule::plan::Fusion> {
    E2E_METHODS
        .iter()
        .find(|(a, _, _)| *a == m)
        .map(|(_, _, k)| crate::schedule::plan::Fusion::Planner(*k))
}

/// The collective modes that give distinct cases for `method`: modes that run the same
/// collectives (`auto` and `allreduce` for S-SGD, `auto` and `ring` for Marsit) give one
/// case, the first listed, not one identical row per mode.
pub fn distinct_collectives(
    method: &str,
    modes: &[crate::comm::exchange::CollectiveMode],
) -> Vec<crate::comm::exchange::CollectiveMode> {
    let Ok(agg) = crate::compress::registry::aggregation(base_method(method)) else {
        return modes.to_vec();
    };
    let mut out: Vec<crate::comm::exchange::CollectiveMode> = Vec::with_capacity(modes.len());
    for &m in modes {
        if !out.iter().any(|o| o.effective(agg) == m.effective(agg)) {
            out.push(m);
        }
    }
    out
}

/// The compressor behind an e2e method name.
pub fn base_method(m: &str) -> &str {
    E2E_METHODS
        .iter()
        .find(|(a, _, _)| *a == m)
        .map_or(m, |(_, b, _)| b)
}

/// A validated e2e section.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct E2eSpec {
    pub models: Vec<String>,
    pub methods: Vec<String>,
    pub fusion: Vec<crate::schedule::plan::Fusion>,
    pub pipelining: Vec<bool>,
    pub collectives: Vec<crate::comm::exchange::CollectiveMode>,
    pub device: String,
    pub batch: Option<usize>,
    pub compute: crate::engine::device::ComputeMode,
    pub compute_profile: Option<String>,
    pub cost_comm: Option<String>,
    pub params: Vec<crate::compress::MethodParams>,
    pub iters: u64,
    pub warmup: u64,
    pub timing: crate::bench::stats::Timing,
}

impl E2eSection {
    pub fn validate(&self, origin: &Origin) -> Result<E2eSpec, ConfigError> {
        if self.models.is_empty() {
            return Err(origin.invalid(
                "models",
                format!(
                    "is empty; give one or more of {}",
                    crate::models::names().join(", ")
                ),
            ));
        }
        for m in &self.models {
            crate::models::build(m).map_err(|e| origin.invalid("models", e))?;
        }
        no_repeats(origin, "models", &self.models, |m| m.clone())?;
        let trimmed: Vec<&str> = self.methods.iter().map(|m| m.trim()).collect();
        no_repeats(origin, "methods", &trimmed, |m| m.to_string())?;
        // Methods and hyper-parameters: the same rules as the micro benchmarks, with the
        // e2e-only names (omgs, sketch-fusion) checked as their base compressors.
        let mut methods: Vec<String> = Vec::new();
        for m in &self.methods {
            let m = m.trim().to_string();
            if !methods.contains(&m) {
                methods.push(m);
            }
        }
        let mut bases: Vec<String> = Vec::new();
        for m in &methods {
            if !bases.iter().any(|b| b == base_method(m)) {
                bases.push(base_method(m).to_string());
            }
        }
        let cs = CompressSection {
            methods: bases,
            shapes: vec!["1".into()],
            models: Vec::new(),
            densities: self.densities.clone(),
            lowrank_ranks: self.lowrank_ranks.clone(),
            ranks: self.ranks.clone(),
            params: self.params.clone(),
            iters: self.iters,
            warmup: self.warmup,
            check: false,
        }
        .validate(origin, false)?;
        if self.fusion.is_empty() {
            return Err(origin.invalid(
                "fusion",
                "is empty; give none, single or a byte threshold such as 25MiB",
            ));
        }
        let fusion = self
            .fusion
            .iter()
            .map(|f| {
                crate::schedule::plan::Fusion::parse(f).map_err(|m| origin.invalid("fusion", m))
            })
            .collect::<Result<Vec<_>, _>>()?;
        no_repeats(origin, "fusion", &fusion, |f| f.to_string())?;
        if self.pipelining.is_empty() {
            return Err(origin.invalid("pipelining", "is empty; give on, off or both"));
        }
        no_repeats(origin, "pipelining", &self.pipelining, |p| {
            if *p { "on" } else { "off" }.to_string()
        })?;
        let mut pipelining = self.pipelining.clone();
        pipelining.sort(); // off before on: the overlap efficiency of "on" needs "off"
        pipelining.dedup();
        use crate::comm::exchange::CollectiveMode;
        if self.collective.is_empty() {
            return Err(origin.invalid(
                "collective",
                format!("is empty; give one or more of {}", CollectiveMode::NAMES),
            ));
        }
        let mut collectives = Vec::new();
        for c in &self.collective {
            let mode = CollectiveMode::parse(c.trim()).ok_or_else(|| {
                origin.invalid(
                    "collective",
                    format!(
                        "unknown collective '{c}'; allowed: {}",
                        CollectiveMode::NAMES
                    ),
                )
            })?;
            // Incompatible method/collective pairs are rejected here, before anything runs.
            for m in &methods {
                let agg = crate::compress::registry::aggregation(base_method(m))
                    .map_err(|e| origin.invalid("methods", e))?;
                mode.supports(agg).map_err(|why| {
                    origin.invalid("collective", format!("method {m} cannot use {c}: {why}"))
                })?;
            }
            if collectives.contains(&mode) {
                return Err(origin.invalid(
                    "collective",
                    format!("'{c}' appears twice; each entry is one case, remove the repeat"),
                ));
            }
            collectives.push(mode);
        }
        let compute =
            crate::engine::device::ComputeMode::parse(&self.compute).ok_or_else(|| {
                origin.invalid(
                    "compute",
                    format!(
                        "unknown compute mode '{}'; allowed: sleep, spin, none",
                        self.compute
                    ),
                )
            })?;
        match &self.compute_profile {
            None => {
                crate::models::preset(&self.device).map_err(|e| origin.invalid("device", e))?;
            }
            Some(path) => {
                for m in &self.models {
                    let model = crate::models::build(m).map_err(|e| origin.invalid("models", e))?;
                    crate::models::compute::read_profile(path, &model)
                        .map_err(|e| origin.invalid("compute_profile", e))?;
                }
            }
        }
        if let Some(path) = &self.cost_comm {
            crate::comm::netmodel::CommModels::from_micro_comm_csv(path)
                .map_err(|e| origin.invalid("cost_comm", e))?;
        }
        if self.batch == Some(0) {
            return Err(origin.invalid(
                "batch",
                "0 samples: give a batch size >= 1 (or leave it out for the model's default)",
            ));
        }
        Ok(E2eSpec {
            models: self.models.clone(),
            methods,
            fusion,
            pipelining,
            collectives,
            device: self.device.clone(),
            batch: self.batch,
            compute,
            compute_profile: self.compute_profile.clone(),
            cost_comm: self.cost_comm.clone(),
            params: cs.params,
            iters: self.iters.unwrap_or(10),
            warmup: self.warmup.unwrap_or(2),
            timing: self.timing(origin)?,
        })
    }
}

impl E2eSection {
    /// The stopping rule of each case ([`crate::bench::stats::Timing`]): `iters` timed
    /// iterations, or adaptive when `min_time_s` or `target_ci` is given.
    fn timing(&self, origin: &Origin) -> Result<crate::bench::stats::Timing, ConfigError> {
        let iters = self.iters.unwrap_or(10);
        if self.min_time_s.is_none() && self.target_ci.is_none() {
            for (key, given) in [
                ("max_iters", self.max_iters.is_some()),
                ("max_time_s", self.max_time_s.is_some()),
            ] {
                if given {
                    return Err(origin.invalid(
                        key,
                        "applies to adaptive timing only: give min_time_s or target_ci too",
                    ));
                }
            }
            return Ok(crate::bench::stats::Timing::fixed(iters));
        }
        let min_time_s = self.min_time_s.unwrap_or(0.0);
        if !(min_time_s.is_finite() && (0.0..=3600.0).contains(&min_time_s)) {
            return Err(origin.invalid(
                "min_time_s",
                format!("{min_time_s} is not a time in seconds between 0 and 3600"),
            ));
        }
        let target = self.target_ci.unwrap_or(f64::INFINITY);
        if self.target_ci.is_some() && !(target > 0.0 && target <= 1.0) {
            return Err(origin.invalid(
                "target_ci",
                format!("{target} is not a share of the mean in (0, 1], e.g. 0.02"),
            ));
        }
        let max_iters = self.max_iters.unwrap_or(1000.max(iters));
        if max_iters < iters || max_iters > 1_000_000 {
            return Err(origin.invalid(
                "max_iters",
                format!("{max_iters} must be at least iters ({iters}) and at most 1000000"),
            ));
        }
        let max_time_s = self.max_time_s.unwrap_or(f64::INFINITY);
        if !(max_time_s > 0.0 && max_time_s >= min_time_s) {
            return Err(origin.invalid(
                "max_time_s",
                format!("{max_time_s} must be positive and at least min_time_s ({min_time_s})"),
            ));
        }
        Ok(crate::bench::stats::Timing {
            min_iters: iters,
            min_time_s,
            target_rel_ci: target,
            max_iters,
            max_time_s,
        })
    }
}

/// The whole TOML file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    #[serde(default)]
    pub run: RunSection,
    #[serde(default, rename = "micro-comm")]
    pub micro_comm: Vec<MicroCommSection>,
    #[serde(default, rename = "micro-compress")]
    pub micro_compress: Vec<CompressSection>,
    #[serde(default)]
    pub micro: Vec<CompressSection>,
    #[serde(default)]
    pub e2e: Vec<E2eSection>,
    /// `[[converge]]`: run by `gradcomp converge --config FILE` (src/converge/), not by
    /// `gradcomp run`.
    #[serde(default)]
    pub converge: Vec<crate::converge::ConvergeSection>,
}

/// Largest message a sweep accepts (1 GiB per rank: MPI counts are i32 and this
/// machine class has 24 GiB for all ranks).
pub const MAX_MESSAGE_BYTES: u64 = 1 << 30;

/// A validated `micro-comm` section.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MicroCommSpec {
    pub collectives: Vec<Collective>,
    /// Message sizes in bytes, in the order they run.
    pub sizes: Vec<u64>,
    pub iters: Option<u64>,
    pub warmup: Option<u64>,
    pub check: bool,
}

impl MicroCommSection {
    pub fn validate(&self, origin: &Origin) -> Result<MicroCommSpec, ConfigError> {
        if self.collectives.is_empty() {
            return Err(origin.invalid(
                "collectives",
                format!("is empty; give one or more of {}", Collective::allowed()),
            ));
        }
        let mut collectives = Vec::new();
        for c in &self.collectives {
            let col = Collective::parse(c.trim()).ok_or_else(|| {
                origin.invalid(
                    "collectives",
                    format!(
                        "unknown collective '{c}'; allowed: {}",
                        Collective::allowed()
                    ),
                )
            })?;
            if collectives.contains(&col) {
                return Err(origin.invalid(
                    "collectives",
                    format!("'{c}' appears twice; each entry is one case, remove the repeat"),
                ));
            }
            collectives.push(col);
        }
        let check_size = |key: &str, v: u64| {
            if v < 4 || v % 4 != 0 {
                return Err(origin.invalid(key, format!("{v} bytes is not a positive multiple of 4 (one f32 element); use e.g. 4, 64KiB")));
            }
            if v > MAX_MESSAGE_BYTES {
                return Err(origin.invalid(
                    key,
                    format!("{v} bytes exceeds the 1GiB per-message limit; use at most 1GiB"),
                ));
            }
            Ok(v)
        };
        let sizes = match &self.sizes {
            Some(list) => {
                if list.is_empty() {
                    return Err(origin.invalid(
                        "sizes",
                        "is empty; give one or more sizes (e.g. 4, 64KiB) or leave it out",
                    ));
                }
                let sizes = list
                    .iter()
                    .map(|s| {
                        s.resolve(origin, "sizes")
                            .and_then(|v| check_size("sizes", v))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                no_repeats(origin, "sizes", &sizes, |b| format!("{b} bytes"))?;
                sizes
            }
            None => {
                let min_bytes =
                    check_size("min_bytes", self.min_bytes.resolve(origin, "min_bytes")?)?;
                let max_bytes =
                    check_size("max_bytes", self.max_bytes.resolve(origin, "max_bytes")?)?;
                if min_bytes > max_bytes {
                    return Err(origin.invalid(
                        "min_bytes",
                        format!("{min_bytes} bytes is greater than max_bytes ({max_bytes} bytes); swap them or lower min_bytes"),
                    ));
                }
                doubling(min_bytes, max_bytes)
            }
        };
        if self.iters == Some(0) {
            return Err(origin.invalid(
                "iters",
                "0 iterations: give at least 1 (or leave it out for the size-scaled default)",
            ));
        }
        Ok(MicroCommSpec {
            collectives,
            sizes,
            iters: self.iters,
            warmup: self.warmup,
            check: self.check,
        })
    }
}

/// Message sizes: `min` doubling up to `max` (and `max` itself).
fn doubling(min: u64, max: u64) -> Vec<u64> {
    let mut v = Vec::new();
    let mut b = min;
    while b < max {
        v.push(b);
        b = b.saturating_mul(2);
    }
    v.push(max);
    v
}

/// Default (iterations, warm-up) for a message size, scaled like the OSU benchmarks.
pub fn default_iters(bytes: u64) -> (u64, u64) {
    match bytes {
        0..=8192 => (1000, 100),
        8193..=1_048_576 => (200, 20),
        1_048_577..=67_108_864 => (50, 5),
        _ => (20, 3),
    }
}

/// A resolved configuration: what one invocation will run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Config {
    pub seed: u64,
    pub expect_ranks: Option<usize>,
    pub case_timeout_s: Option<f64>,
    pub micro_comm: Vec<MicroCommSpec>,
    pub micro_compress: Vec<CompressSpec>,
    pub micro: Vec<CompressSpec>,
    pub e2e: Vec<E2eSpec>,
}

/// One benchmark case: the unit that is timed, written as one CSV row, and skipped by
/// `--resume`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum Case {
    MicroComm {
        collective: Collective,
        bytes: u64,
        iters: u64,
        warmup: u64,
        check: bool,
    },
    MicroCompress {
        method: String,
        /// The tensor; for a model, its whole gradient as one 1-D shape.
        shape: Shape,
        /// A zoo model: every layer compressed in turn per step (absent: one tensor).
        #[serde(skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        params: crate::compress::MethodParams,
        iters: u64,
        warmup: u64,
    },
    Micro {
        method: String,
        shape: Shape,
        params: crate::compress::MethodParams,
        iters: u64,
        warmup: u64,
        check: bool,
    },
    E2e(E2eCase),
}

/// One e2e case (a row of e2e.csv).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct E2eCase {
    pub model: String,
    pub method: String,
    pub fusion: crate::schedule::plan::Fusion,
    pub pipelining: bool,
    pub collective: crate::comm::exchange::CollectiveMode,
    pub device: String,
    pub batch: Option<usize>,
    pub compute: crate::engine::device::ComputeMode,
    pub compute_profile: Option<String>,
    pub cost_comm: Option<String>,
    pub params: crate::compress::MethodParams,
    pub iters: u64,
    pub warmup: u64,
    pub timing: crate::bench::stats::Timing,
    /// Compress each bucket as one merged tensor (omgs, sketch-fusion).
    pub merge: bool,
}

impl E2eCase {
    /// The compressor that runs (`topk` for `omgs`, ...).
    pub fn base_method(&self) -> &str {
        base_method(&self.method)
    }
}

/// FNV-1a (64-bit) of `text`, as 16 hex digits.
fn fnv1a(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

impl Case {
    /// Stable identity of the case in a run with `seed` on `world_size` ranks: FNV-1a
    /// (64-bit) of its JSON form, so `--resume` recognises rows of the same case and
    /// configuration (any changed parameter gives a new id).
    pub fn id(&self, seed: u64, world_size: usize) -> String {
        fnv1a(&serde_json::to_string(&(self, seed, world_size)).unwrap_or_default())
    }

    /// The id of the `nth` (2, 3, ...) occurrence of this case in one configuration.
    pub fn repeat_id(&self, seed: u64, world_size: usize, nth: u64) -> String {
        fnv1a(&serde_json::to_string(&(self, seed, world_size, nth)).unwrap_or_default())
    }

    /// Upper bound of the memory one rank adds while this case runs (bytes), beyond
    /// [`BASE_RSS_BYTES`] and, for micro-comm, beyond the message buffers that persist
    /// from case to case ([`Config::estimated_peak_bytes`] adds both). Bounds measured
    /// as peak RSS (VmHWM) at 2-4 ranks under Open MPI 4.1 (docs/reliability.md):
    /// - micro-comm: the MPI library's temporaries: 2x the message for (i)allreduce
    ///   (0.5-1x measured), the whole result for allgather (Bruck's temporary: 2x
    ///   measured at 3 ranks), nothing for our ring;
    /// - micro: gradients, residuals, wires and receive buffers, 8 fp32 copies (at most
    ///   5.5 measured); micro-compress adds the 256 MiB memory-bandwidth probe;
    /// - e2e: 5 copies of the model's gradient (4.7 measured with one fused bucket,
    ///   whose all-reduce temporary is model-sized), plus every rank's dense message
    ///   when sums travel by all-gather.
    pub fn estimated_bytes(&self, world_size: usize) -> u64 {
        let n = world_size as u64;
        match self {
            Case::MicroComm {
                collective, bytes, ..
            } => match collective {
                Collective::Allgather => bytes.saturating_mul(n),
                Collective::RingAllreduce => 0,
                _ => bytes * 2,
            },
            Case::MicroCompress { shape, .. } => 32 * shape.numel() as u64 + MEMORY_PROBE_BYTES,
            Case::Micro { shape, .. } => 32 * shape.numel() as u64,
            Case::E2e(c) => {
                let model = crate::models::build(&c.model)
                    .map(|m| m.fp32_bytes() as u64)
                    .unwrap_or(0);
                let gather = if c.collective == crate::comm::exchange::CollectiveMode::AllGather {
                    n.saturating_mul(model)
                } else {
                    0
                };
                5 * model + gather
            }
        }
    }

    /// Short description for progress lines.
    pub fn label(&self) -> String {
        match self {
            Case::MicroComm {
                collective, bytes, ..
            } => {
                format!(
                    "micro-comm {} {}",
                    collective.name(),
                    crate::units::HumanBytes(*bytes)
                )
            }
            Case::MicroCompress {
                method,
                model: Some(model),
                ..
            } => format!("micro-compress {method} {model}"),
            Case::MicroCompress { method, shape, .. } => format!("micro-compress {method} {shape}"),
            Case::Micro { method, shape, .. } => format!("micro {method} {shape}"),
            Case::E2e(c) => format!(
                "e2e {} {} collective={} fusion={} pipelining={}",
                c.model,
                c.method,
                c.collective.name(),
                c.fusion,
                if c.pipelining { "on" } else { "off" }
            ),
        }
    }
}

impl Config {
    /// Whether the run has threads besides the MPI one (the e2e device thread, the
    /// case-timeout watchdog; `cli_timeout` is `--case-timeout`): they need FUNNELED.
    pub fn uses_threads(&self, cli_timeout: Option<f64>) -> bool {
        !self.e2e.is_empty() || self.case_timeout_s.is_some() || cli_timeout.is_some()
    }

    /// Upper bound of one rank's peak resident memory over the whole run (bytes), and
    /// the case that needs the most: [`BASE_RSS_BYTES`], plus micro-comm's message
    /// buffers (the largest send, receive and ring scratch, kept from case to case),
    /// plus the largest [`Case::estimated_bytes`].
    pub fn estimated_peak_bytes(&self, world_size: usize) -> (u64, Option<Case>) {
        let n = world_size.max(1) as u64;
        let (mut send, mut recv) = (0u64, 0u64);
        let mut largest: Option<(Case, u64)> = None;
        for c in self.cases() {
            if let Case::MicroComm {
                collective, bytes, ..
            } = &c
            {
                send = send.max(*bytes);
                recv = recv.max(if *collective == Collective::Allgather {
                    bytes.saturating_mul(n)
                } else {
                    *bytes
                });
            }
            let b = c.estimated_bytes(world_size);
            if largest.as_ref().map_or(true, |(_, m)| b > *m) {
                largest = Some((c, b));
            }
        }
        let buffers = send + recv + send.div_ceil(n);
        let (case, extra) = largest.map_or((None, 0), |(c, b)| (Some(c), b));
        (
            BASE_RSS_BYTES.saturating_add(buffers).saturating_add(extra),
            case,
        )
    }

    /// Refuse up front a run that cannot fit in this node's memory with a margin:
    /// `ranks_here` ranks of [`Config::estimated_peak_bytes`] each must fit in
    /// [`MEMORY_USABLE_FRACTION`] of `available_bytes`.
    pub fn check_memory(
        &self,
        world_size: usize,
        ranks_here: usize,
        available_bytes: u64,
    ) -> Result<(), String> {
        let (need, Some(case)) = self.estimated_peak_bytes(world_size) else {
            return Ok(());
        };
        let total = need.saturating_mul(ranks_here as u64);
        let usable = (available_bytes as f64 * MEMORY_USABLE_FRACTION) as u64;
        if total > usable {
            let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
            return Err(format!(
                "case '{}' needs up to {:.1} GiB per rank, {:.1} GiB for the {ranks_here} rank(s) on this node, but only {:.1} GiB is available ({:.0}% of it usable, the rest is a safety margin); use smaller sizes, fewer ranks per node, or --skip-memory-check",
                case.label(),
                gib(need),
                gib(total),
                gib(available_bytes),
                MEMORY_USABLE_FRACTION * 100.0
            ));
        }
        Ok(())
    }

    /// The number of cases [`Config::cases`] would expand to, without expanding them.
    pub fn case_count(&self) -> u128 {
        let n = |x: usize| x as u128;
        let mut total = 0u128;
        for s in &self.micro_comm {
            total += n(s.collectives.len()) * n(s.sizes.len());
        }
        for s in self.micro_compress.iter().chain(&self.micro) {
            total +=
                n(s.methods.len()) * (n(s.shapes.len()) + n(s.models.len())) * n(s.params.len());
        }
        for s in &self.e2e {
            for method in &s.methods {
                let fusions = if implied_fusion(method).is_some() {
                    1
                } else {
                    s.fusion.len()
                };
                total += n(s.models.len())
                    * n(s.params.len())
                    * n(distinct_collectives(method, &s.collectives).len())
                    * n(fusions)
                    * n(s.pipelining.len());
            }
        }
        total
    }

    /// Refuse a configuration that expands to more than [`MAX_CASES`] cases; `what`
    /// names the config in messages.
    pub fn check_cases(&self, what: &str) -> Result<(), String> {
        let count = self.case_count();
        if count > MAX_CASES {
            return Err(format!(
                "{what}: expands to {count} cases; at most {MAX_CASES} per run: shorten its lists or split the sweep into several runs"
            ));
        }
        Ok(())
    }

    /// The case_id of every case of [`Config::cases`], in order. A case repeated by a
    /// later section (a deliberate second measurement) gets its own id, so `--resume`
    /// runs every repeat once.
    pub fn case_ids(&self, cases: &[Case], world_size: usize) -> Vec<String> {
        let mut seen: std::collections::HashMap<String, u64> = Default::default();
        cases
            .iter()
            .map(|c| {
                let first = c.id(self.seed, world_size);
                let nth = seen.entry(first.clone()).or_insert(0);
                *nth += 1;
                if *nth == 1 {
                    first
                } else {
                    c.repeat_id(self.seed, world_size, *nth)
                }
            })
            .collect()
    }

    /// Every case of every section, in order: per section, collective-major then size.
    pub fn cases(&self) -> Vec<Case> {
        let mut out = Vec::new();
        for s in &self.micro_comm {
            for &collective in &s.collectives {
                for &bytes in &s.sizes {
                    let (di, dw) = default_iters(bytes);
                    out.push(Case::MicroComm {
                        collective,
                        bytes,
                        iters: s.iters.unwrap_or(di),
                        warmup: s.warmup.unwrap_or(dw),
                        check: s.check,
                    });
                }
            }
        }
        for (s, kind) in self
            .micro_compress
            .iter()
            .map(|s| (s, false))
            .chain(self.micro.iter().map(|s| (s, true)))
        {
            for method in &s.methods {
                for &shape in &s.shapes {
                    for params in &s.params {
                        let (di, dw) = default_compress_iters(shape.numel());
                        let (iters, warmup) = (s.iters.unwrap_or(di), s.warmup.unwrap_or(dw));
                        let method = method.clone();
                        let params = params.clone();
                        out.push(if kind {
                            Case::Micro {
                                method,
                                shape,
                                params,
                                iters,
                                warmup,
                                check: s.check,
                            }
                        } else {
                            Case::MicroCompress {
                                method,
                                shape,
                                model: None,
                                params,
                                iters,
                                warmup,
                            }
                        });
                    }
                }
                for model in &s.models {
                    // Validated: the zoo has it.
                    let Ok(m) = crate::models::build(model) else {
                        continue;
                    };
                    let shape = Shape {
                        rows: 1,
                        cols: m.params(),
                    };
                    for params in &s.params {
                        let (di, dw) = default_compress_iters(shape.numel());
                        out.push(Case::MicroCompress {
                            method: method.clone(),
                            shape,
                            model: Some(model.clone()),
                            params: params.clone(),
                            iters: s.iters.unwrap_or(di),
                            warmup: s.warmup.unwrap_or(dw),
                        });
                    }
                }
            }
        }
        for s in &self.e2e {
            for model in &s.models {
                for method in &s.methods {
                    for params in &s.params {
                        let alias = E2E_METHODS.iter().find(|(a, _, _)| a == method);
                        let fusions = match implied_fusion(method) {
                            Some(f) => vec![f],
                            None => s.fusion.clone(),
                        };
                        for collective in distinct_collectives(method, &s.collectives) {
                            for &fusion in &fusions {
                                for &pipelining in &s.pipelining {
                                    out.push(Case::E2e(E2eCase {
                                        model: model.clone(),
                                        method: method.clone(),
                                        fusion,
                                        pipelining,
                                        collective,
                                        device: s.device.clone(),
                                        batch: s.batch,
                                        compute: s.compute,
                                        compute_profile: s.compute_profile.clone(),
                                        cost_comm: s.cost_comm.clone(),
                                        params: params.clone(),
                                        iters: s.iters,
                                        warmup: s.warmup,
                                        timing: s.timing,
                                        merge: alias.is_some(),
                                    }));
                                }
                            }
                        }
                    }
                }
            }
        }
        out
    }
}

static WARNINGS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Record a warning about accepted but deprecated input (printed once by rank 0).
fn warn(msg: String) {
    if let Ok(mut w) = WARNINGS.lock() {
        if !w.contains(&msg) {
            w.push(msg);
        }
    }
}

/// The warnings recorded while reading configs and flags, emptied.
pub fn take_warnings() -> Vec<String> {
    WARNINGS
        .lock()
        .map(|mut w| std::mem::take(&mut *w))
        .unwrap_or_default()
}

/// The Power-SGD/ACP-SGD rank sweep of a section: `lowrank_ranks` (`--lowrank-rank`), or
/// the deprecated `ranks` (`--rank`), which an MPI user reads as a process count; the old
/// key still works, with a warning; both at once are refused.
fn lowrank_sweep(
    lowrank_ranks: &Option<Vec<usize>>,
    ranks: &Option<Vec<usize>>,
    origin: &Origin,
) -> Result<Option<Vec<usize>>, ConfigError> {
    let (old, new) = match origin {
        Origin::Cli => ("--rank", "--lowrank-rank"),
        Origin::File { .. } => ("ranks", "lowrank_ranks"),
    };
    match (lowrank_ranks, ranks) {
        (Some(_), Some(_)) => Err(origin.invalid(
            "ranks",
            format!("{old} is the deprecated name of {new}: give {new} only"),
        )),
        (None, Some(r)) => {
            let at = match origin {
                Origin::Cli => String::new(),
                Origin::File {
                    file,
                    section,
                    index,
                } => format!("{file}: [[{section}]] #{index}: "),
            };
            warn(format!(
                "{at}{old} is deprecated (it is the Power-SGD/ACP-SGD rank, not a number of MPI ranks): write {new}"
            ));
            Ok(Some(r.clone()))
        }
        (l, None) => Ok(l.clone()),
    }
}

/// Read, parse and validate a TOML bench config.
/// Only a regular file of at most [`MAX_CONFIG_BYTES`] is read: a device (`/dev/zero`)
/// or a FIFO would never end, a huge file is not a config.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    use std::io::Read;
    let file = path.display().to_string();
    let read_err = |source| ConfigError::Read {
        file: file.clone(),
        source,
    };
    let refuse = |msg: String| ConfigError::Invalid {
        location: file.clone(),
        msg,
    };
    let meta = std::fs::metadata(path).map_err(read_err)?;
    if !meta.is_file() {
        return Err(refuse(
            "is not a regular file (a directory, device or FIFO); give the path of a TOML bench config".into(),
        ));
    }
    let too_big = || {
        refuse(format!(
            "is larger than {} MiB, the limit for a bench config; give the TOML config itself (lists expand to cases, so configs stay small)",
            MAX_CONFIG_BYTES >> 20
        ))
    };
    if meta.len() > MAX_CONFIG_BYTES {
        return Err(too_big());
    }
    // Bounded even if the file grows after the check.
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_CONFIG_BYTES + 1).read_to_end(&mut bytes))
        .map_err(read_err)?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(too_big());
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        refuse(format!(
            "is not UTF-8 text (invalid byte at offset {}); give a TOML file",
            e.utf8_error().valid_up_to()
        ))
    })?;
    parse(&text, &file)
}

/// Parse and validate TOML text; `file` names it in messages.
pub fn parse(text: &str, file: &str) -> Result<Config, ConfigError> {
    let raw: FileConfig = toml::from_str(text).map_err(|e| ConfigError::Syntax {
        file: file.to_string(),
        msg: one_line(&e, text),
    })?;
    let mut micro_comm = Vec::new();
    for (i, s) in raw.micro_comm.iter().enumerate() {
        micro_comm.push(s.validate(&Origin::File {
            file: file.to_string(),
            section: "micro-comm",
            index: i + 1,
        })?);
    }
    let section = |name: &'static str, i: usize| Origin::File {
        file: file.to_string(),
        section: name,
        index: i + 1,
    };
    let mut micro_compress = Vec::new();
    for (i, s) in raw.micro_compress.iter().enumerate() {
        micro_compress.push(s.validate(&section("micro-compress", i), false)?);
    }
    let mut micro = Vec::new();
    for (i, s) in raw.micro.iter().enumerate() {
        micro.push(s.validate(&section("micro", i), true)?);
    }
    let mut e2e = Vec::new();
    for (i, s) in raw.e2e.iter().enumerate() {
        e2e.push(s.validate(&section("e2e", i))?);
    }
    if micro_comm.is_empty() && micro_compress.is_empty() && micro.is_empty() && e2e.is_empty() {
        return Err(ConfigError::Syntax {
            file: file.to_string(),
            msg: "defines no benchmark section; add at least one [[micro-comm]], [[micro-compress]], [[micro]] or [[e2e]] table".into(),
        });
    }
    if raw.run.expect_ranks == Some(0) {
        return Err(Origin::File {
            file: file.to_string(),
            section: "run",
            index: 1,
        }
        .invalid(
            "expect_ranks",
            "0 ranks: give the number of MPI ranks the job must have (>= 1)",
        ));
    }
    if let Some(t) = raw.run.case_timeout_s {
        if !(t.is_finite() && t > 0.0) {
            return Err(Origin::File {
                file: file.to_string(),
                section: "run",
                index: 1,
            }
            .invalid(
                "case_timeout_s",
                format!("{t} is not a positive number of seconds (e.g. 600)"),
            ));
        }
    }
    Ok(Config {
        seed: raw.run.seed,
        expect_ranks: raw.run.expect_ranks,
        case_timeout_s: raw.run.case_timeout_s,
        micro_comm,
        micro_compress,
        micro,
        e2e,
    })
}

/// A TOML error as one line: `line L, column C[, key 'K']: message`. The key is read
/// from the line the error points at, so type errors (`iters = -1`) name it too.
fn one_line(e: &toml::de::Error, text: &str) -> String {
    let msg = e.message().trim().replace(['\r', '\n'], " ");
    match e.span() {
        Some(span) => {
            let start = span.start.min(text.len());
            let start = (0..=start)
                .rev()
                .find(|&i| text.is_char_boundary(i))
                .unwrap_or(0);
            let before = &text[..start];
            let line = before.matches('\n').count() + 1;
            let col = before.len() - before.rfind('\n').map_or(0, |p| p + 1) + 1;
            let line_text = text[before.rfind('\n').map_or(0, |p| p + 1)..]
                .lines()
                .next()
                .unwrap_or("");
            let key = line_text
                .split_once('=')
                .map(|(k, _)| k.trim())
                .filter(|k| {
                    !k.is_empty()
                        && k.chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
                })
                .map(|k| format!(", key '{k}'"))
                .unwrap_or_default();
            format!("line {line}, column {col}{key}: {msg}")
        }
        None => msg,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[run]
seed = 7

[[micro-comm]]
collectives = ["allreduce", "ring-allreduce"]
min_bytes = "4"
max_bytes = "16KiB"
iters = 10
"#;

    #[test]
    fn case_count_matches_the_expansion_of_every_shipped_config() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench-configs");
        let mut n = 0;
        for e in std::fs::read_dir(dir).unwrap() {
            let path = e.unwrap().path();
            if path.extension().is_some_and(|x| x == "toml") {
                let cfg = load(&path).unwrap();
                let cases = cfg.cases();
                assert_eq!(cfg.case_count(), cases.len() as u128, "{}", path.display());
                let ids = cfg.case_ids(&cases, 4);
                let unique: std::collections::HashSet<_> = ids.iter().collect();
                assert_eq!(unique.len(), ids.len(), "{}", path.display());
                n += 1;
            }
        }
        assert!(n > 3);
    }

    #[test]
    fn equivalent_collectives_are_one_case_in_count_and_expansion() {
        let c = parse(
            "[[e2e]]\nmodels = [\"resnet20\"]\nmethods = [\"ssgd\", \"signsgd\"]\ncollective = [\"auto\", \"allgather\", \"ps\"]\npipelining = [true]\n",
            "x.toml",
        )
        .unwrap();
        // ssgd: auto (all-reduce), allgather, ps; signsgd: auto = allgather, ps.
        assert_eq!(c.cases().len(), 5);
        assert_eq!(c.case_count(), 5);
    }

    #[test]
    fn parses_and_expands_cartesian_product() {
        let c = parse(GOOD, "x.toml").unwrap();
        assert_eq!(c.seed, 7);
        let cases = c.cases();
        // 4, 8, ..., 16384: 13 sizes x 2 collectives
        assert_eq!(cases.len(), 26);
        assert_eq!(
            cases[0],
            Case::MicroComm {
                collective: Collective::Allreduce,
                bytes: 4,
                iters: 10,
                warmup: 100,
                check: false
            }
        );
    }

    #[test]
    fn sizes_end_at_max_even_if_not_power_of_two() {
        let s = MicroCommSection {
            collectives: vec!["allreduce".into()],
            min_bytes: SizeSpec::Bytes(4),
            max_bytes: SizeSpec::Bytes(20),
            sizes: None,
            iters: None,
            warmup: None,
            check: false,
        };
        assert_eq!(s.validate(&Origin::Cli).unwrap().sizes, vec![4, 8, 16, 20]);
    }

    fn err(text: &str) -> String {
        parse(text, "bad.toml").unwrap_err().to_string()
    }

    #[test]
    fn rejects_bad_input_with_location() {
        let e = err("[[micro-comm]]\ncollectives = [\"allreduce\"]\nfoo = 1\n");
        assert!(
            e.contains("bad.toml: line 3") && e.contains("unknown field `foo`"),
            "{e}"
        );
        let e = err("[[micro-comm]\n");
        assert!(e.contains("line 1"), "{e}");
        let e = err("[[micro-comm]]\ncollectives = [\"bcast\"]\n");
        assert!(
            e.contains("key 'collectives'") && e.contains("'bcast'") && e.contains("allreduce"),
            "{e}"
        );
        let e = err("[[micro-comm]]\ncollectives = [\"allreduce\"]\nmin_bytes = \"1MiB\"\nmax_bytes = \"4KiB\"\n");
        assert!(e.contains("min_bytes") && e.contains("greater than"), "{e}");
        let e = err("[[micro-comm]]\ncollectives = [\"allreduce\"]\niters = 0\n");
        assert!(e.contains("iters"), "{e}");
        let e = err("[[micro-comm]]\ncollectives = [\"allreduce\"]\nmax_bytes = \"12QB\"\n");
        assert!(e.contains("max_bytes") && e.contains("12QB"), "{e}");
        let e = err("[run]\nseed = 1\n");
        assert!(e.contains("no benchmark section"), "{e}");
        for e in [
            err("[[micro-comm]]\ncollectives = [\"allreduce\"]\nmin_bytes = 6\n"),
            err("[[micro-comm]]\ncollectives = []\n"),
        ] {
            assert!(!e.contains('\n'), "{e}");
        }
    }
}
