//! The micro sections: micro-comm sizes and collectives, micro-compress shapes.

use super::*;

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
    /// Write samples.csv (every rank's every timed iteration); off unless asked
    /// (`true`, or `--samples`).
    pub samples: bool,
    /// Run the e2e cases this many times, round after round (each case's repeats spread
    /// over the run; the report takes each case's median repeat); `--rounds`.
    pub rounds: usize,
    /// Time dilation K of an emulated cluster (`--time-dilation`; scripts/netlab.sh
    /// `up --dilate K`): 1 = none (src/measure/dilation.rs).
    pub time_dilation: u32,
}

impl Default for RunSection {
    fn default() -> Self {
        RunSection {
            seed: 1,
            expect_ranks: None,
            case_timeout_s: None,
            samples: false,
            rounds: 1,
            time_dilation: 1,
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
    /// Density sweep (overrides params.density); this key and the next three are the
    /// parameter sweep ([`Sweep`]).
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
        use crate::compress::registry;
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
        let params = Sweep::new(
            &self.densities,
            &self.lowrank_ranks,
            &self.ranks,
            &self.params,
        )
        .expand(&methods, origin)?;
        check_counts(origin, self.iters, self.warmup)?;
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
                check_list_len(origin, "sizes", list.len())?;
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
        check_counts(origin, self.iters, self.warmup)?;
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
