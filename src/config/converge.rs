//! The `[[converge]]` section (TOML keys and CLI flags), its defaults, and its validation
//! into [`ConvergeCase`]s; reading the sections of a bench config.

use crate::comm::exchange::CollectiveMode;
use crate::compress::noef;
use crate::compress::MethodParams;
use crate::config::{Origin, Sweep};
use crate::error::{Error, Result};
use crate::schedule::plan::Fusion;
use serde::{Deserialize, Serialize};

/// `[[converge]]`: one training sweep (TOML keys; CLI flags are the keys with `-`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConvergeSection {
    /// Methods (the registry's, `omgs`, `sketch-fusion`, and the controls of
    /// [`noef::CONTROLS`]).
    pub methods: Vec<String>,
    /// Training steps per method.
    #[serde(default = "d_steps")]
    pub steps: u64,
    /// Samples per worker per step.
    #[serde(default = "d_batch")]
    pub batch: usize,
    /// Learning rate.
    #[serde(default = "d_lr")]
    pub lr: f64,
    /// Momentum of the SGD step (not DGC's `params.momentum`).
    #[serde(default = "d_sgd_momentum")]
    pub sgd_momentum: f64,
    /// Evaluate on the held-out set every this many steps (and after the last).
    #[serde(default = "d_eval_every")]
    pub eval_every: u64,
    /// Fusion plan (as e2e): `none`, a byte threshold, `single`, or a planner.
    #[serde(default = "d_fusion")]
    pub fusion: String,
    /// Collective (as e2e): `auto`, `allreduce`, `allgather`, `ps`, `ring`.
    #[serde(default = "d_collective")]
    pub collective: String,
    /// Hidden layer widths of the MLP.
    #[serde(default = "d_hidden")]
    pub hidden: Vec<usize>,
    /// Input features and classes of the teacher task.
    #[serde(default = "d_input")]
    pub input: usize,
    #[serde(default = "d_classes")]
    pub classes: usize,
    /// Train samples (all ranks together) and held-out samples.
    #[serde(default = "d_train")]
    pub train_samples: usize,
    #[serde(default = "d_eval")]
    pub eval_samples: usize,
    /// Density sweep; this key and the next three are the parameter sweep ([`Sweep`]).
    #[serde(default)]
    pub densities: Option<Vec<f64>>,
    /// Power-SGD/ACP-SGD rank sweep (`lowrank_ranks`; `ranks` is its deprecated name).
    #[serde(default)]
    pub lowrank_ranks: Option<Vec<usize>>,
    #[serde(default)]
    pub ranks: Option<Vec<usize>>,
    #[serde(default)]
    pub params: MethodParams,
}

fn d_steps() -> u64 {
    200
}
fn d_batch() -> usize {
    32
}
fn d_lr() -> f64 {
    0.05
}
fn d_sgd_momentum() -> f64 {
    0.9
}
fn d_eval_every() -> u64 {
    50
}
fn d_fusion() -> String {
    "single".into()
}
fn d_collective() -> String {
    "auto".into()
}
fn d_hidden() -> Vec<usize> {
    vec![384, 384]
}
fn d_input() -> usize {
    128
}
fn d_classes() -> usize {
    10
}
fn d_train() -> usize {
    16384
}
fn d_eval() -> usize {
    2048
}

impl ConvergeSection {
    /// A section with the defaults for `methods`.
    pub fn with_methods(methods: Vec<String>) -> ConvergeSection {
        ConvergeSection {
            methods,
            steps: d_steps(),
            batch: d_batch(),
            lr: d_lr(),
            sgd_momentum: d_sgd_momentum(),
            eval_every: d_eval_every(),
            fusion: d_fusion(),
            collective: d_collective(),
            hidden: d_hidden(),
            input: d_input(),
            classes: d_classes(),
            train_samples: d_train(),
            eval_samples: d_eval(),
            densities: None,
            lowrank_ranks: None,
            ranks: None,
            params: MethodParams::default(),
        }
    }
}

/// One training run: a row group of converge.csv.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ConvergeCase {
    /// The name as given (`omgs`, `topk-noef`, ...).
    pub method: String,
    pub params: MethodParams,
    pub steps: u64,
    pub batch: usize,
    pub lr: f64,
    pub sgd_momentum: f64,
    pub eval_every: u64,
    pub fusion: Fusion,
    pub collective: CollectiveMode,
    pub widths: Vec<usize>,
    pub train_samples: usize,
    pub eval_samples: usize,
}

impl ConvergeCase {
    /// Upper bound of one rank's peak resident memory while training this case (bytes):
    /// the base every rank holds, 12 fp32 copies of the model (weights, gradients, the
    /// decompressed average, momentum, the dense check's sum, the compressor's residual
    /// and wires, the executor's bucket buffers), the whole synthetic data set each rank
    /// draws before taking its stride (features and labels) and its shard, a minibatch's
    /// activations (forward and backward) and the held-out shard's forward pass, and the
    /// state the method's parameters size ([`crate::config::method_state_bytes`]).
    pub fn estimated_bytes(&self, world_size: usize) -> u64 {
        let n = world_size.max(1) as f64;
        let params: f64 = self
            .widths
            .windows(2)
            .map(|w| (w[0] * w[1] + w[1]) as f64)
            .sum();
        let input = *self.widths.first().unwrap_or(&1) as f64;
        let widest = self.widths.iter().copied().max().unwrap_or(1) as f64;
        let layers: f64 = self.widths.iter().map(|&w| w as f64).sum();
        let samples = (self.train_samples + self.eval_samples) as f64;
        let data = samples * (input * 4.0 + 8.0) * (1.0 + 1.0 / n);
        let batch = 3.0 * self.batch as f64 * layers * 4.0;
        let eval = 3.0 * (self.eval_samples as f64 / n).ceil() * widest * 4.0;
        let tensors: Vec<usize> = self
            .widths
            .windows(2)
            .flat_map(|w| [w[0] * w[1], w[1]])
            .chain(std::iter::once(params as usize))
            .collect();
        let method = crate::config::method_state_bytes(
            self.base_method(),
            &self.params,
            &tensors,
            world_size as u64,
        );
        let own = 12.0 * params * 4.0 + data + batch + eval;
        crate::config::BASE_RSS_BYTES
            .saturating_add(own as u64)
            .saturating_add(method)
    }

    /// The registry compressor that runs.
    pub fn base_method(&self) -> &str {
        noef::base_of(&self.method).unwrap_or_else(|| crate::config::base_method(&self.method))
    }
    /// Merged compression of each bucket (omgs, sketch-fusion).
    pub fn merge(&self) -> bool {
        crate::config::implied_fusion(&self.method).is_some()
    }
    /// Momentum of the SGD step: 0 for DGC, whose output is already a momentum update
    /// (docs/methods.md, "dgc").
    pub fn step_momentum(&self) -> f64 {
        if self.base_method() == "dgc" {
            0.0
        } else {
            self.sgd_momentum
        }
    }
}

impl ConvergeSection {
    /// Validate for a world of `world_size` ranks; errors name the key (or CLI flag).
    pub fn validate(&self, origin: &Origin, world_size: usize) -> Result<Vec<ConvergeCase>> {
        let inv = |k: &str, m: String| Error::from(origin.invalid(k, m));
        if self.methods.is_empty() {
            return Err(inv(
                "methods",
                "is empty; give one or more methods (or --config FILE with [[converge]] sections)"
                    .into(),
            ));
        }
        let methods: Vec<String> = self.methods.iter().map(|m| m.trim().to_string()).collect();
        crate::config::no_repeats(origin, "methods", &methods, |m| m.clone())
            .map_err(Error::from)?;
        fn base(m: &str) -> &str {
            noef::base_of(m).unwrap_or_else(|| crate::config::base_method(m))
        }
        // Validated once per base method (`topk-noef` is checked as `topk`).
        let params = Sweep::new(
            &self.densities,
            &self.lowrank_ranks,
            &self.ranks,
            &self.params,
        )
        .expand_for(methods.iter().map(|m| base(m)), None, origin)?;
        if self.steps == 0 || self.steps > 10_000_000 {
            return Err(inv(
                "steps",
                format!("{} is not a number of steps in 1..=10000000", self.steps),
            ));
        }
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return Err(inv(
                "lr",
                format!("{} is not a positive finite learning rate", self.lr),
            ));
        }
        if !(self.sgd_momentum.is_finite() && (0.0..1.0).contains(&self.sgd_momentum)) {
            return Err(inv(
                "sgd_momentum",
                format!("{} is not a momentum in [0, 1)", self.sgd_momentum),
            ));
        }
        if self.eval_every == 0 {
            return Err(inv(
                "eval_every",
                "0 steps: give at least 1 (evaluate every N steps)".into(),
            ));
        }
        if self.hidden.is_empty() || self.hidden.iter().any(|&h| h == 0 || h > 1 << 16) {
            return Err(inv(
                "hidden",
                format!(
                    "{:?}: give one or more layer widths in 1..=65536",
                    self.hidden
                ),
            ));
        }
        if self.input == 0 || self.input > 1 << 16 {
            return Err(inv("input", format!("{} is not in 1..=65536", self.input)));
        }
        if self.classes < 2 || self.classes > 1 << 16 {
            return Err(inv(
                "classes",
                format!("{} is not in 2..=65536", self.classes),
            ));
        }
        if self.eval_samples < world_size || self.eval_samples > 1 << 24 {
            return Err(inv(
                "eval_samples",
                format!(
                    "{} must be between the world size ({world_size}) and 16777216",
                    self.eval_samples
                ),
            ));
        }
        if self.train_samples < world_size || self.train_samples > 1 << 24 {
            return Err(inv(
                "train_samples",
                format!(
                    "{} must be between the world size ({world_size}) and 16777216",
                    self.train_samples
                ),
            ));
        }
        // The smallest shard is floor(train_samples / world_size).
        let shard = self.train_samples / world_size.max(1);
        if self.batch == 0 || self.batch > shard {
            return Err(inv(
                "batch",
                format!(
                    "{} samples per worker: give 1..={shard} (the smallest shard: {} train samples over {world_size} ranks)",
                    self.batch, self.train_samples
                ),
            ));
        }
        let fusion = crate::config::parse_fusion(origin, "fusion", &self.fusion)?;
        let collective = CollectiveMode::parse(self.collective.trim()).ok_or_else(|| {
            inv(
                "collective",
                format!(
                    "unknown collective '{}'; allowed: {}",
                    self.collective,
                    CollectiveMode::NAMES
                ),
            )
        })?;
        for m in &methods {
            let agg = crate::compress::registry::aggregation(base(m))
                .map_err(|e| inv("methods", e.to_string()))?;
            collective.supports(agg).map_err(|why| {
                inv(
                    "collective",
                    format!("method {m} cannot use {}: {why}", self.collective),
                )
            })?;
        }
        let mut widths = vec![self.input];
        widths.extend(&self.hidden);
        widths.push(self.classes);
        let mut cases = Vec::new();
        for m in &methods {
            for p in &params {
                cases.push(ConvergeCase {
                    method: m.clone(),
                    params: p.for_method(m),
                    steps: self.steps,
                    batch: self.batch,
                    lr: self.lr,
                    sgd_momentum: self.sgd_momentum,
                    eval_every: self.eval_every,
                    fusion: crate::config::implied_fusion(m).unwrap_or(fusion),
                    collective,
                    widths: widths.clone(),
                    train_samples: self.train_samples,
                    eval_samples: self.eval_samples,
                });
            }
        }
        Ok(cases)
    }
}

/// Reads the `[run] seed` and the `[[converge]]` sections of a bench config (other
/// sections are ignored here; `gradcomp run` runs them).
pub fn sections_from_file(path: &std::path::Path) -> Result<(u64, Vec<ConvergeSection>)> {
    #[derive(Deserialize)]
    struct Only {
        #[serde(default)]
        run: crate::config::RunSection,
        #[serde(default)]
        converge: Vec<ConvergeSection>,
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::Input(format!("--config {}: cannot read it ({e})", path.display())))?;
    let only: Only = toml::from_str(&text)
        .map_err(|e| Error::Input(format!("{}: {}", path.display(), one_line(&e.to_string()))))?;
    if only.converge.is_empty() {
        return Err(Error::Input(format!(
            "{}: has no [[converge]] section",
            path.display()
        )));
    }
    if only.run.time_dilation > 1 {
        return Err(Error::Input(format!(
            "{}: [run] time_dilation = {}: {CONVERGE_NOT_DILATED}",
            path.display(),
            only.run.time_dilation
        )));
    }
    Ok((only.run.seed, only.converge))
}

/// Why `gradcomp converge` refuses time dilation (`--time-dilation`, `[run]
/// time_dilation`): its rows are losses per step, and its real MLP's forward and backward
/// run on the host, not on the emulated device that dilation slows.
pub const CONVERGE_NOT_DILATED: &str = "converge trains a real model on the host (no emulated device to slow down) and reports losses per step, which dilation cannot change: run it without time dilation, outside a dilated netlab";

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}
