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
    /// Train samples (all ranks together): 0 (the default) draws fresh samples from the
    /// teacher at every step, so the student cannot overfit; N > 0 trains on a fixed set
    /// of N samples (the task before 2026-11-28, which overfits).
    #[serde(default = "d_train")]
    pub train_samples: usize,
    /// Held-out samples (a fixed set from its own stream).
    #[serde(default = "d_eval")]
    pub eval_samples: usize,
    /// Learning-rate schedule: `cosine` (linear warm-up, then cosine decay to 0 at the
    /// last step) or `constant` (warm-up, then `lr`).
    #[serde(default = "d_lr_schedule")]
    pub lr_schedule: String,
    /// Linear learning-rate warm-up steps; default: 5% of `steps`.
    #[serde(default)]
    pub warmup_steps: Option<u64>,
    /// Seeds: each case runs once per seed (default: the run's seed alone). Steps to
    /// dense's accuracy need dense at three or more seeds (its seed-to-seed spread).
    #[serde(default)]
    pub seeds: Option<Vec<u64>>,
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
    1000
}
fn d_batch() -> usize {
    32
}
fn d_lr() -> f64 {
    0.1
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
    vec![512, 512]
}
fn d_input() -> usize {
    32
}
fn d_classes() -> usize {
    10
}
fn d_train() -> usize {
    0
}
fn d_lr_schedule() -> String {
    "cosine".into()
}
fn d_eval() -> usize {
    2048
}

/// The method a converge method is validated as: `topk-noef` as `topk`.
fn validated_as(m: &str) -> &str {
    noef::base_of(m).unwrap_or_else(|| crate::config::base_method(m))
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
            lr_schedule: d_lr_schedule(),
            warmup_steps: None,
            seeds: None,
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
    /// 0: fresh samples every step; N: a fixed training set of N samples.
    pub train_samples: usize,
    pub eval_samples: usize,
    pub lr_schedule: LrSchedule,
    pub warmup_steps: u64,
    pub seed: u64,
}

/// The learning rate over a run (Goyal et al. 2017, "Accurate, Large Minibatch SGD",
/// Sec. 2.2: linear warm-up; Loshchilov & Hutter, ICLR 2017, "SGDR", Eq. 5 without
/// restarts: cosine decay).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LrSchedule {
    Cosine,
    Constant,
}

impl LrSchedule {
    pub const NAMES: &'static str = "cosine, constant";
    pub fn parse(s: &str) -> Option<LrSchedule> {
        match s {
            "cosine" => Some(LrSchedule::Cosine),
            "constant" => Some(LrSchedule::Constant),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            LrSchedule::Cosine => "cosine",
            LrSchedule::Constant => "constant",
        }
    }
}

impl ConvergeCase {
    /// The learning rate of step `step` (0-based): `lr (step + 1) / W` over the first `W`
    /// warm-up steps; then `lr` (constant) or `lr (1 + cos(pi (step - W) / (steps - W))) / 2`
    /// (cosine, reaching 0 after the last step).
    pub fn lr_at(&self, step: u64) -> f64 {
        let w = self.warmup_steps;
        if step < w {
            return self.lr * (step + 1) as f64 / w as f64;
        }
        match self.lr_schedule {
            LrSchedule::Constant => self.lr,
            LrSchedule::Cosine => {
                let span = self.steps.saturating_sub(w).max(1) as f64;
                let t = (step - w) as f64 / span;
                self.lr * 0.5 * (1.0 + (std::f64::consts::PI * t).cos())
            }
        }
    }
}

/// Hidden width of the teacher network of `gradcomp converge`'s task (re-exported as
/// `converge::data::TEACHER_HIDDEN`; here so that the memory estimate counts its
/// activations).
pub const TEACHER_HIDDEN: usize = 64;

/// glibc malloc's bookkeeping per allocation, an upper bound (glibc malloc/malloc.c:
/// `request2size` rounds `size + SIZE_SZ` up to `MALLOC_ALIGNMENT` = 16 with a minimum
/// chunk of `MINSIZE` = 32 bytes, so a request of `s` bytes takes at most `s + 32`).
const MALLOC_SLACK_BYTES: f64 = 32.0;
/// glibc malloc serves requests of `DEFAULT_MMAP_THRESHOLD_MIN` (128 KiB) and more by
/// `mmap`, whole pages (malloc/malloc.c, `sysmalloc`): at most one 4 KiB page more.
const MMAP_THRESHOLD_BYTES: f64 = (128 << 10) as f64;
const PAGE_BYTES: f64 = 4096.0;

/// The resident bytes of one heap allocation of `bytes` bytes (its data and slack).
fn alloc_bytes(bytes: f64) -> f64 {
    if bytes >= MMAP_THRESHOLD_BYTES {
        bytes + PAGE_BYTES + 16.0
    } else {
        bytes + MALLOC_SLACK_BYTES
    }
}

/// Upper bound of the operations one tensor adds to an iteration and to the record of
/// the last one (src/schedule/mod.rs `iteration`, src/engine/exec.rs `executed`), with
/// the method's `rounds`: alone in its bucket (fusion `none`), a wait, per round a
/// compress, an exchange and a decompress, a pack and an unpack, in each phase of the
/// step cycle (its spec's phases: ACP-SGD two, its P and Q steps; every other method one).
fn ops_per_tensor(method: &str, rounds: usize) -> f64 {
    let phases = crate::compress::registry::spec(method).map_or(1, |s| s.phases) as f64;
    phases * (3.0 + 3.0 * rounds as f64)
}

/// Upper bound of the compressor's and the executor's fixed record per tensor (bytes):
/// the slot in a table grown by doubling (`Vec<Option<Slot>>`, src/compress/bits.rs
/// `put_slot`, src/compress/orth/slots.rs `put_slot`: at most 2 x a 128-byte slot) and
/// the slack of at most 8 buffers it owns (dgc's `u`, `v`, `sent`; Power-SGD's boxed
/// `LowRank` and its factors), plus the executor's unit layout (exec/bucket_wire.rs
/// `UnitLayout`, a few words): the buffers' data is in the model copies and
/// [`crate::config::method_state_bytes`].
const COMPRESSOR_RECORD_BYTES: f64 = 2.0 * 128.0 + 8.0 * MALLOC_SLACK_BYTES + 64.0;

impl ConvergeCase {
    /// Upper bound of one rank's peak resident memory while training this case (bytes),
    /// counting what src/converge/ allocates; every part that happens at a different
    /// time is added (freed memory may stay resident), so the bound holds whatever the
    /// allocator returns to the system:
    ///
    /// - [`crate::config::BASE_RSS_BYTES`], the process before any case;
    /// - the data (data.rs `Teacher::sample`, then `Dataset::strided`): every rank draws
    ///   the whole train and held-out sets before taking its stride, with the teacher's
    ///   hidden layer and logits, `N (input + TEACHER_HIDDEN + classes) x 4 + 8 N` bytes
    ///   whatever the world size, and keeps its shard (`ceil(N / n)` samples, features,
    ///   label and index);
    /// - 12 fp32 copies of the model (weights, gradients, the decompressed average,
    ///   momentum, the dense check's sum, the compressor's residual and wires, the
    ///   executor's bucket buffers and received sum), and with `--collective allgather`
    ///   every rank's dense message (comm/exchange.rs `sum_gathered`);
    /// - per tensor (model.rs, train.rs `run_case`, engine::layout and the executor): the
    ///   four `Array2` headers and allocations of weights, gradients, average and
    ///   momentum, two `TensorSpec`s with their names, the planners' per-tensor times and
    ///   shapes, a bucket of its own (fusion `none`), the operations of its bucket and their record
    ///   ([`ops_per_tensor`]), and the compressor's record ([`COMPRESSOR_RECORD_BYTES`]): what
    ///   dominates a deep, narrow MLP (50,000 layers of width 1);
    /// - the forward caches (model.rs `Mlp::forward` keeps every layer's input): a
    ///   minibatch's, 3 x `batch x sum(widths)` fp32 with the backward's deltas, and the
    ///   held-out shard's (`ceil(eval / n) x (sum(widths) + 2 classes)`), with an
    ///   `Array2` and its allocation per layer and five per layer;
    /// - the state the method's parameters size ([`crate::config::method_state_bytes`]).
    pub fn estimated_bytes(&self, world_size: usize) -> u64 {
        let n = world_size.max(1) as f64;
        let f32_bytes = 4.0;
        let word = std::mem::size_of::<usize>() as f64;
        let params: f64 = self
            .widths
            .windows(2)
            .map(|w| (w[0] * w[1] + w[1]) as f64)
            .sum();
        let input = *self.widths.first().unwrap_or(&1) as f64;
        let classes = *self.widths.last().unwrap_or(&2) as f64;
        let widest = self.widths.iter().copied().max().unwrap_or(1) as f64;
        let widths_sum: f64 = self.widths.iter().map(|&w| w as f64).sum();
        let layers = self.widths.len().saturating_sub(1) as f64;
        let tensors = 2.0 * layers;
        let array = std::mem::size_of::<ndarray::Array2<f32>>() as f64;

        // The data: the whole set drawn (x, the teacher's hidden layer and logits, labels)
        // and the rank's shard (x, labels, the stride's indices).
        let set = |samples: usize| {
            let s = samples as f64;
            let whole = s * (input + TEACHER_HIDDEN as f64 + classes) * f32_bytes + s * word;
            let shard = (s / n).ceil() * (input * f32_bytes + 2.0 * word);
            alloc_bytes(whole) + alloc_bytes(shard) + 4.0 * MALLOC_SLACK_BYTES
        };
        let teacher = (TEACHER_HIDDEN as f64 * (input + classes)) * f32_bytes;
        let data = set(self.train_samples) + set(self.eval_samples) + teacher;

        // Model-sized buffers.
        let mut dense = 12.0 * params * f32_bytes;
        if self.collective == CollectiveMode::AllGather {
            dense += n * params * f32_bytes;
        }

        // Per tensor: headers, slack and the small records of the engine's path. The
        // method's rounds per step from the compressor itself (built without tensors, it
        // holds nothing); a method that does not build runs no case: 2, the most.
        let ctx = crate::compress::WorkerCtx {
            rank: 0,
            world_size: world_size.max(1),
            seed: self.seed,
        };
        let rounds = crate::compress::registry::build(self.base_method(), &self.params, ctx)
            .map_or(2, |c| c.rounds());
        let slack = |bytes: f64| alloc_bytes(bytes) - bytes;
        let per_tensor_fixed = 4.0 * array
            + 2.0 * (std::mem::size_of::<(String, usize, usize)>() as f64 + MALLOC_SLACK_BYTES)
            + 8.0 * word
            + std::mem::size_of::<crate::schedule::Bucket>() as f64
            + 3.0 * (word + MALLOC_SLACK_BYTES + 3.0 * word)
            + ops_per_tensor(self.base_method(), rounds)
                * (std::mem::size_of::<crate::schedule::Op>()
                    + std::mem::size_of::<crate::schedule::Executed>()) as f64
            + COMPRESSOR_RECORD_BYTES;
        let model_allocs: f64 = self
            .widths
            .windows(2)
            .map(|w| {
                4.0 * (slack((w[0] * w[1]) as f64 * f32_bytes) + slack(w[1] as f64 * f32_bytes))
            })
            .sum();
        let per_tensor = tensors * per_tensor_fixed + model_allocs;

        // Forward caches and the backward's temporaries.
        let eval_rows = (self.eval_samples as f64 / n).ceil();
        let rows = eval_rows.max(self.batch as f64);
        let per_layer: f64 = self.widths[1..]
            .iter()
            .map(|&w| 5.0 * (array + slack(rows * w as f64 * f32_bytes)))
            .sum();
        let batch = 3.0 * self.batch as f64 * (widths_sum + 2.0 * widest) * f32_bytes;
        let eval = eval_rows * (widths_sum + 2.0 * classes + widest) * f32_bytes;
        let activations = batch + eval + per_layer;

        let numels: Vec<usize> = self
            .widths
            .windows(2)
            .flat_map(|w| [w[0] * w[1], w[1]])
            .chain(std::iter::once(params as usize))
            .collect();
        let method = crate::config::method_state_bytes(
            self.base_method(),
            &self.params,
            &numels,
            world_size as u64,
        );
        let own = data + dense + per_tensor + activations;
        // f64 -> u64 saturates.
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
    /// Momentum of the SGD step: 0 for a method whose output is already a momentum
    /// update (its spec's `owns_momentum`: DGC, docs/methods.md, "dgc").
    pub fn step_momentum(&self) -> f64 {
        if crate::compress::registry::spec(self.base_method()).is_ok_and(|s| s.owns_momentum) {
            0.0
        } else {
            self.sgd_momentum
        }
    }
}

impl ConvergeSection {
    /// Validate for a world of `world_size` ranks; errors name the key (or CLI flag).
    /// `run_seed` is the seed of every case when the section gives no `seeds`.
    pub fn validate(
        &self,
        origin: &Origin,
        world_size: usize,
        run_seed: u64,
    ) -> Result<Vec<ConvergeCase>> {
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
        // Validated once per base method (`topk-noef` is checked as `topk`).
        let params = Sweep::new(
            &self.densities,
            &self.lowrank_ranks,
            &self.ranks,
            &self.params,
        )
        .expand_for(methods.iter().map(|m| validated_as(m)), None, origin)?;
        self.check_training(&inv)?;
        self.check_model_and_data(&inv, world_size)?;
        let (lr_schedule, warmup_steps) = self.schedule(&inv)?;
        let seeds = self.seeds.clone().unwrap_or_else(|| vec![run_seed]);
        if seeds.is_empty() || seeds.len() > 1000 {
            return Err(inv(
                "seeds",
                format!("{} seeds: give 1 to 1000", seeds.len()),
            ));
        }
        crate::config::no_repeats(origin, "seeds", &seeds, |s| s.to_string())
            .map_err(Error::from)?;
        let fusion = crate::config::parse_fusion(origin, "fusion", &self.fusion)?;
        let collective = self.collective(&inv, &methods)?;
        Ok(self.expand(
            &methods,
            &params,
            &seeds,
            fusion,
            collective,
            lr_schedule,
            warmup_steps,
        ))
    }

    /// Steps, learning rate, momentum and evaluation interval.
    fn check_training(&self, inv: &impl Fn(&str, String) -> Error) -> Result<()> {
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
        Ok(())
    }

    /// The model's widths and the data: its sizes, and a batch that fits each rank's
    /// shard of `world_size`.
    fn check_model_and_data(
        &self,
        inv: &impl Fn(&str, String) -> Error,
        world_size: usize,
    ) -> Result<()> {
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
        if self.train_samples != 0
            && (self.train_samples < world_size || self.train_samples > 1 << 24)
        {
            return Err(inv(
                "train_samples",
                format!(
                    "{} must be 0 (fresh samples every step) or between the world size ({world_size}) and 16777216",
                    self.train_samples
                ),
            ));
        }
        // The smallest shard is floor(train_samples / world_size); fresh samples have none.
        if self.batch == 0 || self.batch > crate::config::MAX_BATCH {
            return Err(inv(
                "batch",
                format!(
                    "{} samples per worker: give 1..={}",
                    self.batch,
                    crate::config::MAX_BATCH
                ),
            ));
        }
        let shard = self.train_samples / world_size.max(1);
        if self.train_samples != 0 && self.batch > shard {
            return Err(inv(
                "batch",
                format!(
                    "{} samples per worker: give 1..={shard} (the smallest shard: {} train samples over {world_size} ranks)",
                    self.batch, self.train_samples
                ),
            ));
        }
        Ok(())
    }

    /// The learning-rate schedule and its warm-up steps (default: a twentieth of the steps).
    fn schedule(&self, inv: &impl Fn(&str, String) -> Error) -> Result<(LrSchedule, u64)> {
        let lr_schedule = LrSchedule::parse(self.lr_schedule.trim()).ok_or_else(|| {
            inv(
                "lr_schedule",
                format!(
                    "unknown schedule '{}'; allowed: {}",
                    crate::config::clip(&self.lr_schedule),
                    LrSchedule::NAMES
                ),
            )
        })?;
        let warmup_steps = self.warmup_steps.unwrap_or(self.steps / 20);
        if warmup_steps >= self.steps {
            return Err(inv(
                "warmup_steps",
                format!(
                    "{warmup_steps} is not below steps ({}): give 0..{}",
                    self.steps, self.steps
                ),
            ));
        }
        Ok((lr_schedule, warmup_steps))
    }

    /// The collective, which every method's aggregation must support.
    fn collective(
        &self,
        inv: &impl Fn(&str, String) -> Error,
        methods: &[String],
    ) -> Result<CollectiveMode> {
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
        for m in methods {
            let agg = crate::compress::registry::aggregation(validated_as(m))
                .map_err(|e| inv("methods", e.to_string()))?;
            collective.supports(agg).map_err(|why| {
                inv(
                    "collective",
                    format!("method {m} cannot use {}: {why}", self.collective),
                )
            })?;
        }
        Ok(collective)
    }

    /// Every case: seeds x methods x parameter points, in that order.
    #[allow(clippy::too_many_arguments)] // the section's validated values, each named
    fn expand(
        &self,
        methods: &[String],
        params: &[MethodParams],
        seeds: &[u64],
        fusion: Fusion,
        collective: CollectiveMode,
        lr_schedule: LrSchedule,
        warmup_steps: u64,
    ) -> Vec<ConvergeCase> {
        let mut widths = vec![self.input];
        widths.extend(&self.hidden);
        widths.push(self.classes);
        let mut cases = Vec::new();
        for &seed in seeds {
            for m in methods {
                for p in params {
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
                        lr_schedule,
                        warmup_steps,
                        seed,
                    });
                }
            }
        }
        cases
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
    let text = crate::input::read_to_string(
        path,
        crate::config::MAX_CONFIG_BYTES,
        "a TOML bench config with [[converge]] sections",
    )
    .map_err(|e| Error::Input(format!("--config {e}")))?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn case(steps: u64, warmup: Option<u64>, schedule: &str) -> ConvergeCase {
        let s = ConvergeSection {
            steps,
            warmup_steps: warmup,
            lr_schedule: schedule.into(),
            lr: 0.2,
            ..ConvergeSection::with_methods(vec!["ssgd".into()])
        };
        s.validate(&Origin::Cli, 2, 7).unwrap().remove(0)
    }

    /// The schedule against its closed form: linear warm-up `lr (t+1)/W`, then
    /// `lr/2 (1 + cos(pi (t-W)/(T-W)))`, or `lr` for the constant schedule.
    #[test]
    fn learning_rate_follows_warm_up_then_cosine_decay() {
        let c = case(100, Some(10), "cosine");
        assert!((c.lr_at(0) - 0.02).abs() < 1e-12);
        assert!((c.lr_at(9) - 0.2).abs() < 1e-12);
        assert!((c.lr_at(10) - 0.2).abs() < 1e-12); // cos(0) = 1
        assert!((c.lr_at(55) - 0.1).abs() < 1e-12); // halfway: cos(pi/2) = 0
        let t = 99.0 - 10.0;
        let want = 0.1 * (1.0 + (std::f64::consts::PI * t / 90.0).cos());
        assert!((c.lr_at(99) - want).abs() < 1e-12 && c.lr_at(99) < 1e-3);
        let k = case(100, Some(0), "constant");
        assert_eq!((k.lr_at(0), k.lr_at(99)), (0.2, 0.2));
        // Default warm-up: 5% of the steps.
        assert_eq!(case(1000, None, "cosine").warmup_steps, 50);
        assert_eq!(case(1000, None, "cosine").seed, 7);
    }

    /// The memory estimate of a 4-8-2 MLP, 100 train and 20 held-out samples, batch 10,
    /// from 1 to 4 ranks, by hand: every rank still draws the whole sets (the teacher's
    /// hidden layer included), so only its shards and the held-out forward shrink:
    ///
    /// - the train shard (4 features of 4 bytes, a label and an index of 8 bytes each):
    ///   (100 - 25) x 32 = 2400;
    /// - the held-out shard: (20 - 5) x 32 = 480;
    /// - the held-out forward (the inputs of every layer, 4 + 8 + 2, two copies of the
    ///   2 logits and the widest layer's product, 8): (20 - 5) x 26 x 4 = 1560.
    ///
    /// Growing the train set by 1000 samples adds at least the whole set's
    /// 1000 x 70 x 4 + 1000 x 8 = 288,000 bytes (4 features, 64 teacher hidden units and
    /// 2 logits of 4 bytes, an 8-byte label) at every world size. Top-k at density 0.5 adds
    /// its state (`method_state_bytes`): the largest tensor's written-entry record (the
    /// 58-element flat model: floor(58/8) = 7 bytes) and every rank's k pairs twice per
    /// tensor, 2 x 8 x 58 x n = 928 n bytes.
    #[test]
    fn memory_estimate_by_hand_at_one_and_four_ranks() {
        let section = |method: &str, train: usize| ConvergeSection {
            input: 4,
            hidden: vec![8],
            classes: 2,
            train_samples: train,
            eval_samples: 20,
            batch: 10,
            densities: (method == "topk").then(|| vec![0.5]),
            ..ConvergeSection::with_methods(vec![method.into()])
        };
        let est = |method: &str, train: usize, n: usize| {
            section(method, train)
                .validate(&Origin::Cli, n, 1)
                .unwrap()
                .remove(0)
                .estimated_bytes(n)
        };
        assert_eq!(est("ssgd", 100, 1) - est("ssgd", 100, 4), 2400 + 480 + 1560);
        for n in [1, 4] {
            assert!(est("ssgd", 1100, n) - est("ssgd", 100, n) >= 288_000);
            assert_eq!(
                est("topk", 100, n) - est("ssgd", 100, n),
                7 + 928 * n as u64,
                "topk at {n} ranks"
            );
        }
    }

    #[test]
    fn seeds_multiply_the_cases_and_bad_schedules_are_refused() {
        let s = ConvergeSection {
            seeds: Some(vec![1, 2, 3]),
            ..ConvergeSection::with_methods(vec!["ssgd".into(), "topk".into()])
        };
        let cases = s.validate(&Origin::Cli, 2, 9).unwrap();
        let got: Vec<(u64, &str)> = cases.iter().map(|c| (c.seed, c.method.as_str())).collect();
        assert_eq!(got.len(), 6);
        assert_eq!(got[0], (1, "ssgd"));
        assert_eq!(got[5], (3, "topk"));
        for (bad, key) in [
            (
                ConvergeSection {
                    lr_schedule: "step".into(),
                    ..ConvergeSection::with_methods(vec!["ssgd".into()])
                },
                "lr_schedule",
            ),
            (
                ConvergeSection {
                    warmup_steps: Some(1000),
                    ..ConvergeSection::with_methods(vec!["ssgd".into()])
                },
                "warmup_steps",
            ),
            (
                ConvergeSection {
                    seeds: Some(vec![1, 1]),
                    ..ConvergeSection::with_methods(vec!["ssgd".into()])
                },
                "seeds",
            ),
            (
                ConvergeSection {
                    seeds: Some(vec![]),
                    ..ConvergeSection::with_methods(vec!["ssgd".into()])
                },
                "seeds",
            ),
        ] {
            let e = bad.validate(&Origin::Cli, 2, 1).unwrap_err().to_string();
            assert!(
                e.contains(&format!("--{}", key.replace('_', "-"))),
                "{key}: {e}"
            );
        }
    }
}
