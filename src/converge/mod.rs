//! `gradcomp converge`: data-parallel training of a real model under MPI with every
//! method, reporting loss curves beside the timings (docs/methods.md, "Convergence
//! check"; docs/csv-schema.md, "converge.csv"; docs/performance.md, "Convergence runs").
//!
//! Each rank computes the gradients of an MLP ([`model`]) on its shard of a synthetic
//! teacher task ([`data`]); the gradients take the e2e engine's path: the registry's
//! compressor, the buckets of `engine::layout` (fusion plans and planners), the bucket
//! wires with their trailer of gathered lengths, one [`Exchange`] per bucket and round,
//! `engine::unit_received` and `decompress` (error feedback and the method's own update
//! rule inside the compressor). The decompressed worker average then drives an SGD step
//! with momentum (DGC: plain SGD, its velocity already carries the momentum).

pub mod data;
pub mod model;
pub mod noef;

use crate::comm::exchange::CollectiveMode;
use crate::comm::World;
use crate::compress::{Compressor, MethodParams, WorkerCtx};
use crate::config::{CompressSection, Origin};
use crate::engine::exec::{Executor, Hooks, OpTimes};
use crate::engine::{self, E2eSetup, TensorSpec};
use crate::error::{Error, Result};
use crate::record::meta::RunMeta;
use crate::record::{CsvSink, DirLock, SCHEMA_VERSION};
use crate::schedule::plan::Fusion;
use ndarray::Array2;
use rand::Rng;
use serde::{Deserialize, Serialize};

/// The documented convergence check (docs/methods.md, "Convergence check"): a method
/// passes when its final eval loss is at most `dense · (1 + TOLERANCE_REL)`.
pub const TOLERANCE_REL: f64 = 0.25;

/// Whether a final eval loss passes the check against dense S-SGD's.
pub fn within_tolerance(final_eval_loss: f64, dense_eval_loss: f64) -> bool {
    final_eval_loss.is_finite() && final_eval_loss <= dense_eval_loss * (1.0 + TOLERANCE_REL)
}

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
        let inv = |k: &str, m: String| Error::Config(origin.invalid(k, m));
        if self.methods.is_empty() {
            return Err(inv(
                "methods",
                "is empty; give one or more methods (or --config FILE with [[converge]] sections)"
                    .into(),
            ));
        }
        let methods: Vec<String> = self.methods.iter().map(|m| m.trim().to_string()).collect();
        crate::config::no_repeats(origin, "methods", &methods, |m| m.clone())
            .map_err(Error::Config)?;
        let base = |m: &str| -> String {
            noef::base_of(m)
                .unwrap_or_else(|| crate::config::base_method(m))
                .into()
        };
        // Validated once per base method (`topk-noef` is checked as `topk`).
        let mut bases: Vec<String> = Vec::new();
        for m in &methods {
            let b = base(m);
            if !bases.contains(&b) {
                bases.push(b);
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
            iters: None,
            warmup: None,
            check: false,
        }
        .validate(origin, false)?;
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
        if self.train_samples > 1 << 24 {
            return Err(inv(
                "train_samples",
                format!("{} is more than 16777216", self.train_samples),
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
        let fusion = Fusion::parse(&self.fusion).map_err(|m| inv("fusion", m))?;
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
            let agg = crate::compress::registry::aggregation(&base(m))
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
            for p in &cs.params {
                cases.push(ConvergeCase {
                    method: m.clone(),
                    params: p.clone(),
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
    Ok((only.run.seed, only.converge))
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// One row of converge.csv (docs/csv-schema.md, "converge.csv").
#[derive(Clone, Debug, Serialize)]
pub struct ConvergeRow {
    pub schema_version: u32,
    pub run_id: String,
    pub case_id: String,
    pub method: String,
    pub world_size: usize,
    pub seed: u64,
    pub steps: u64,
    pub batch: usize,
    pub lr: f64,
    pub sgd_momentum: f64,
    pub density: f64,
    pub rank: usize,
    pub fusion: String,
    pub collective: String,
    pub buckets: usize,
    pub model_params: usize,
    pub step: u64,
    pub train_loss: f64,
    pub eval_loss: Option<f64>,
    pub eval_accuracy: Option<f64>,
    pub update_rel_err: f64,
    pub wire_bytes: u64,
    pub step_s: f64,
    pub compute_s: f64,
    pub compress_s: f64,
    pub comm_s: f64,
    pub decompress_s: f64,
    pub pack_s: f64,
    pub update_s: f64,
    pub status: String,
}

/// How a case ended.
#[derive(Clone, Debug, PartialEq)]
pub struct CaseOutcome {
    pub method: String,
    pub final_eval_loss: f64,
    pub final_eval_accuracy: f64,
    pub status: String,
}

/// The compute rate the planners assume for the model's layers in `converge` (flop/s):
/// nominal (one host core with BLAS), fixed so that a plan repeats run to run.
pub const NOMINAL_FLOPS_PER_S: f64 = 1e10;

/// Planner costs of a converge case, fixed so that a planner fusion's plan (and with it
/// the training: OMGS and Sketch-Fusion compress whole buckets) is the same run to run:
/// the committed reference compression costs (src/sim/reference_costs.csv) and the
/// `10gbe` network preset's cost of the method's exchange at this world size, as a line
/// through 4 B and 4 MiB messages (docs/methods.md, "Convergence check").
fn fixed_planner_costs(
    c: &ConvergeCase,
    world_size: usize,
    seed: u64,
) -> Result<crate::schedule::planner::FixedCosts> {
    use crate::compress::{Aggregation, WireLen};
    let ctx = WorkerCtx {
        rank: 0,
        world_size,
        seed,
    };
    let agg = crate::compress::registry::build(c.base_method(), &c.params, ctx)?.aggregation();
    let mc = crate::sim::MethodCosts::reference(c.base_method())
        .or_else(|| crate::sim::MethodCosts::reference("ssgd"))
        .unwrap_or_default();
    let net = crate::sim::network::Analytic::preset("10gbe")
        .ok_or_else(|| Error::Runtime("the 10gbe network preset is missing".into()))?;
    let exchange_s = |words: usize| {
        let w = WireLen::of(agg, words, true);
        crate::sim::exchange_s(
            &net,
            c.collective,
            world_size,
            w,
            agg == Aggregation::AllGather,
        )
    };
    let (small, large) = (1usize, 1usize << 20);
    let beta_s_per_byte = (exchange_s(large) - exchange_s(small)) / (4 * (large - small)) as f64;
    Ok(crate::schedule::planner::FixedCosts {
        alpha_s: exchange_s(small) - 4.0 * beta_s_per_byte,
        beta_s_per_byte,
        per_element_s: mc.compress.per_element_s
            + mc.feedback.per_element_s
            + mc.decompress.per_element_s,
        fixed_s: mc.compress.fixed_s + mc.feedback.fixed_s + mc.decompress.fixed_s,
    })
}

/// The e2e path for one case: the layout of `engine::layout` run by the engine's
/// [`Executor`] (the same schedule and buffers as e2e, without the emulated device).
struct Sync {
    exec: Executor,
}

impl Sync {
    fn new(
        world: &World,
        c: &ConvergeCase,
        seed: u64,
        tensors: Vec<TensorSpec>,
        bwd_s: &[f64],
        fwd_s: f64,
    ) -> Result<Sync> {
        let setup = E2eSetup {
            tensors: &tensors,
            bwd_s,
            fwd_s,
            method: c.base_method(),
            params: &c.params,
            seed,
            fusion: c.fusion,
            pipelining: false,
            collective: c.collective,
            compute: crate::engine::device::ComputeMode::None,
            merge: c.merge(),
            cost_comm: None,
            planner_costs: Some(fixed_planner_costs(c, world.size, seed)?),
            compress_on: crate::devcost::CompressOn::Host,
            device_costs: None,
        };
        let mut lay = engine::layout(world, &setup)?;
        if noef::base_of(&c.method).is_some() {
            // The control: the same buckets, the same compressor without its residual.
            let ctx = WorkerCtx {
                rank: world.rank,
                world_size: world.size,
                seed,
            };
            let mut nr = noef::NoResidual::new(&c.method, &c.params, ctx)?;
            for u in lay
                .plans
                .iter()
                .flatten()
                .flat_map(|b| b.units.iter().copied())
            {
                let (r, cols) = engine::unit_shape(&tensors, &lay.plans, setup.merge, u);
                nr.register(u, r, cols)?;
            }
            lay.comp = Box::new(nr);
        }
        Ok(Sync {
            exec: Executor::new(world, &setup, lay, false)?,
        })
    }

    fn buckets_per_step(&self) -> usize {
        self.exec.buckets_per_step()
    }

    /// Synchronise one step's gradients: `outs` receives the worker average each
    /// method's `decompress` writes. Returns this rank's wire bytes.
    fn step(
        &mut self,
        world: &World,
        step: u64,
        grads: &[Array2<f32>],
        outs: &mut [Array2<f32>],
        t: &mut OpTimes,
    ) -> Result<u64> {
        *t = OpTimes::default();
        let now = || world.time();
        let mut hooks = Hooks {
            now: &now,
            wait: &mut |_| {},
            trace: None,
            device: None,
        };
        self.exec
            .iteration(world, step, grads, Some(outs), &mut hooks, t)?;
        Ok(t.wire_bytes)
    }
}

/// What one sweep needs besides its cases.
pub struct RunContext<'a> {
    pub seed: u64,
    pub run_id: &'a str,
    pub quiet: bool,
}

/// Run `cases` in order, writing converge.csv rows through `sink` (rank 0). A case whose
/// loss turns NaN or infinite ends with a `diverged` row; the sweep goes on.
pub fn run_all(
    world: &World,
    cases: &[ConvergeCase],
    ctx: &RunContext,
    mut sink: Option<&mut CsvSink>,
) -> Result<Vec<CaseOutcome>> {
    let mut outcomes = Vec::with_capacity(cases.len());
    for (i, c) in cases.iter().enumerate() {
        if world.is_root() && !ctx.quiet {
            eprintln!(
                "[gradcomp] converge case {}/{}: {} ({} steps, batch {} per worker, lr {})",
                i + 1,
                cases.len(),
                c.method,
                c.steps,
                c.batch,
                c.lr
            );
        }
        let o = run_case(world, c, ctx, sink.as_deref_mut())?;
        if world.is_root() && !ctx.quiet {
            eprintln!(
                "[gradcomp]   {}: final eval loss {:.4}, accuracy {:.3} ({})",
                o.method, o.final_eval_loss, o.final_eval_accuracy, o.status
            );
        }
        outcomes.push(o);
    }
    Ok(outcomes)
}

/// Stable id of a case in a run (FNV-1a of its JSON form, seed and world size).
fn case_id(c: &ConvergeCase, seed: u64, world_size: usize) -> String {
    let text = serde_json::to_string(&(c, seed, world_size)).unwrap_or_default();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// Train one case and write its rows.
pub fn run_case(
    world: &World,
    c: &ConvergeCase,
    ctx: &RunContext,
    mut sink: Option<&mut CsvSink>,
) -> Result<CaseOutcome> {
    let seed = ctx.seed;
    let n = world.size;
    let input = c.widths[0];
    let classes = *c.widths.last().unwrap_or(&2);
    let teacher = data::Teacher::new(seed, input, classes);
    let shard = teacher
        .sample(seed, data::STREAM_TRAIN, c.train_samples)
        .strided(world.rank, n);
    let eval = teacher
        .sample(seed, data::STREAM_EVAL, c.eval_samples)
        .strided(world.rank, n);
    if c.batch > shard.len() {
        return Err(Error::Input(format!(
            "--batch {}: larger than this rank's shard of {} samples",
            c.batch,
            shard.len()
        )));
    }
    // Identical initial weights on every rank: seeded by the run seed only.
    let mut init_rng = crate::compress::kernels::rng_for(seed, 0, 0, data::STREAM_INIT);
    let mut mlp = model::Mlp::new(&c.widths, &mut init_rng);
    let tensors: Vec<TensorSpec> = mlp
        .shapes()
        .iter()
        .enumerate()
        .map(|(i, &(rows, cols))| TensorSpec {
            name: format!("{}{}", if i % 2 == 0 { "w" } else { "b" }, i / 2 + 1),
            rows,
            cols,
        })
        .collect();
    let mut grads: Vec<Array2<f32>> = mlp.params.iter().map(|p| Array2::zeros(p.dim())).collect();
    let mut outs = grads.clone();
    let mut velocity = grads.clone();
    let mut dense: Vec<f32> = vec![0.0; mlp.numel() + 9];
    let mut xb = Array2::<f32>::zeros((c.batch, input));
    let mut yb = vec![0usize; c.batch];
    let mut idx = vec![0usize; c.batch];

    // Backward times per tensor for the planners, from each layer's multiply-adds at
    // a nominal rate rather than measured (a measured time moves run to run, and with it
    // a planner's buckets and so omgs / sketch-fusion's curves): forward 2 flops per
    // multiply-add per sample, backward twice that; biases are free.
    let macs: Vec<f64> = c.widths.windows(2).map(|w| (w[0] * w[1]) as f64).collect();
    let flop_s = c.batch as f64 / NOMINAL_FLOPS_PER_S;
    let bwd_s: Vec<f64> = (0..tensors.len())
        .map(|t| {
            if t % 2 == 0 {
                4.0 * macs[t / 2] * flop_s
            } else {
                0.0
            }
        })
        .collect();
    let fwd_s = 2.0 * macs.iter().sum::<f64>() * flop_s;
    let mut sync = Sync::new(world, c, seed, tensors, &bwd_s, fwd_s)?;
    let buckets = sync.buckets_per_step();
    let momentum = c.step_momentum() as f32;
    let lr = c.lr as f32;
    let id = case_id(c, seed, n);
    let row_base = ConvergeRow {
        schema_version: SCHEMA_VERSION,
        run_id: ctx.run_id.to_string(),
        case_id: id,
        method: c.method.clone(),
        world_size: n,
        seed,
        steps: c.steps,
        batch: c.batch,
        lr: c.lr,
        sgd_momentum: f64::from(momentum),
        density: c.params.density,
        rank: c.params.rank,
        fusion: c.fusion.to_string(),
        collective: c.collective.name().to_string(),
        buckets,
        model_params: mlp.numel(),
        step: 0,
        train_loss: 0.0,
        eval_loss: None,
        eval_accuracy: None,
        update_rel_err: 0.0,
        wire_bytes: 0,
        step_s: 0.0,
        compute_s: 0.0,
        compress_s: 0.0,
        comm_s: 0.0,
        decompress_s: 0.0,
        pack_s: 0.0,
        update_s: 0.0,
        status: "ok".into(),
    };
    let mut outcome = CaseOutcome {
        method: c.method.clone(),
        final_eval_loss: f64::NAN,
        final_eval_accuracy: f64::NAN,
        status: "done".into(),
    };
    let mut pending: Vec<ConvergeRow> = Vec::with_capacity(c.eval_every.min(c.steps) as usize);
    world.barrier();
    for step in 0..c.steps {
        // The minibatch: uniform draws from this rank's shard, seeded by (seed, step, rank).
        let mut rng = crate::compress::kernels::rng_for(seed, step, world.rank, data::STREAM_BATCH);
        for i in idx.iter_mut() {
            *i = rng.gen_range(0..shard.len());
        }
        let ts = world.time();
        model::gather_rows(shard.x.view(), &idx, &mut xb);
        for (y, &i) in yb.iter_mut().zip(&idx) {
            *y = shard.y[i];
        }
        let loss = mlp.loss_and_grad(xb.view(), &yb, &mut grads);
        let tc = world.time();
        let mut st = OpTimes::default();
        let bytes = sync.step(world, step, &grads, &mut outs, &mut st)?;
        let tu = world.time();
        for ((w, v), o) in mlp.params.iter_mut().zip(velocity.iter_mut()).zip(&outs) {
            if momentum > 0.0 {
                ndarray::Zip::from(&mut *v)
                    .and(o)
                    .for_each(|v, &o| *v = momentum * *v + o);
                w.scaled_add(-lr, v);
            } else {
                w.scaled_add(-lr, o);
            }
        }
        let te = world.time();
        // Outside the timed part, one collective: the dense sum of the same gradients,
        // with the loss, the times and the wire bytes riding along (means over ranks).
        let mut off = 0;
        for g in &grads {
            for &x in g.iter() {
                dense[off] = x;
                off += 1;
            }
        }
        let extras = [
            loss,
            te - ts,
            tc - ts,
            st.compress_s,
            st.comm_s,
            st.decompress_s,
            st.pack_s,
            te - tu,
            bytes as f64,
        ];
        for (d, &x) in dense[off..].iter_mut().zip(&extras) {
            *d = x as f32;
        }
        world.sum_f32_in_place(&mut dense);
        let (mut num, mut den) = (0f64, 0f64);
        let mut off = 0;
        for o in &outs {
            for &x in o.iter() {
                let d = f64::from(dense[off]) / n as f64;
                num += (f64::from(x) - d).powi(2);
                den += d * d;
                off += 1;
            }
        }
        let mean = |i: usize| f64::from(dense[off + i]) / n as f64;
        let train_loss = mean(0);
        let times: Vec<f64> = (1..8).map(mean).collect();
        let wire = mean(8).round() as u64;
        let last = step + 1 == c.steps;
        let diverged = !train_loss.is_finite();
        let (mut eval_loss, mut eval_acc) = (None, None);
        if !diverged && (last || (step + 1) % c.eval_every == 0) {
            let (le, acc) = evaluate(world, &mlp, &eval, c.eval_samples);
            eval_loss = Some(le);
            eval_acc = Some(acc);
            outcome.final_eval_loss = le;
            outcome.final_eval_accuracy = acc;
        }
        let status = if diverged {
            "diverged"
        } else if last {
            "done"
        } else {
            "ok"
        };
        if sink.is_some() {
            pending.push(ConvergeRow {
                step,
                train_loss,
                eval_loss,
                eval_accuracy: eval_acc,
                update_rel_err: if den > 0.0 {
                    (num / den).sqrt()
                } else {
                    num.sqrt()
                },
                wire_bytes: wire,
                step_s: times[0],
                compute_s: times[1],
                compress_s: times[2],
                comm_s: times[3],
                decompress_s: times[4],
                pack_s: times[5],
                update_s: times[6],
                status: status.into(),
                ..row_base.clone()
            });
        }
        // Rows reach the file (flushed and synced) at each evaluation, at the end and
        // when the case diverges.
        if let Some(s) = sink.as_deref_mut() {
            if eval_loss.is_some() || diverged || last {
                s.write_all(&pending)?;
                pending.clear();
            }
        }
        if diverged {
            outcome.status = format!("diverged at step {step}: train loss {train_loss}");
            outcome.final_eval_loss = f64::NAN;
            outcome.final_eval_accuracy = f64::NAN;
            break;
        }
    }
    Ok(outcome)
}

/// Mean loss and accuracy on the held-out set: each rank evaluates its stride of the
/// samples, the sums are all-reduced.
fn evaluate(world: &World, mlp: &model::Mlp, eval: &data::Dataset, total: usize) -> (f64, f64) {
    let (loss, correct) = if eval.is_empty() {
        (0.0, 0)
    } else {
        mlp.loss(eval.x.view(), &eval.y)
    };
    let mut s = [(loss * eval.len() as f64) as f32, correct as f32];
    world.sum_f32_in_place(&mut s);
    (
        f64::from(s[0]) / total as f64,
        f64::from(s[1]) / total as f64,
    )
}

/// What `gradcomp converge` was asked to run.
pub struct Request {
    /// Sections with where they came from (CLI flags or a config file's `[[converge]]`).
    pub sections: Vec<(Origin, ConvergeSection)>,
    pub seed: u64,
    pub out: Option<std::path::PathBuf>,
    pub quiet: bool,
    /// The MPI thread level granted (for run.json).
    pub thread_level: String,
}

/// `gradcomp converge`: validate (every rank agrees; bad input exits 2 with one
/// message), create `OUT/converge.csv` on rank 0, train every case, print a summary.
pub fn command(world: &World, req: Result<Request>) -> Result<Vec<CaseOutcome>> {
    let (req, cases) = world.agree(req.and_then(|r| {
        let mut cases = Vec::new();
        for (origin, s) in &r.sections {
            cases.extend(s.validate(origin, world.size)?);
        }
        Ok((r, cases))
    }))?;
    let warnings = crate::config::take_warnings();
    if world.is_root() {
        for w in warnings {
            eprintln!("gradcomp: warning: {w}");
        }
    }
    let (start_time, stamp) = crate::units::utc_now();
    let run_id = world.broadcast_string(&stamp);
    let out = req
        .out
        .clone()
        .unwrap_or_else(|| std::path::PathBuf::from("results").join(&run_id));
    let sections: Vec<&ConvergeSection> = req.sections.iter().map(|(_, s)| s).collect();
    let config = serde_json::json!({ "seed": req.seed, "converge": sections });
    let mut meta = RunMeta::begin(
        world,
        &run_id,
        start_time,
        req.thread_level.clone(),
        config,
        cases.len(),
        None,
    );
    // Rank 0 alone touches files, under the directory lock (held until we return);
    // an earlier run's run.json is kept, never overwritten.
    let opened = if world.is_root() {
        let holder = format!(
            "host {}, pid {}, started {}",
            meta.hosts.first().map_or("unknown", String::as_str),
            std::process::id(),
            meta.start_time
        );
        (|| {
            crate::record::prepare_dir(&out)?;
            let lock = DirLock::acquire(&out, &holder)?;
            let sink = CsvSink::create(&out.join("converge.csv"))?;
            meta.keep_previous(&out, false)?;
            meta.write(&out)?;
            Ok(Some((sink, lock)))
        })()
    } else {
        Ok(None)
    };
    let (mut sink, _lock) = match world.agree(opened)? {
        Some((s, l)) => (Some(s), Some(l)),
        None => (None, None),
    };
    if world.is_root() && !req.quiet {
        eprintln!(
            "[gradcomp] converge: {} rank(s), {} case(s), results in {}",
            world.size,
            cases.len(),
            out.display()
        );
    }
    let ctx = RunContext {
        seed: req.seed,
        run_id: &run_id,
        quiet: req.quiet,
    };
    let result = run_all(world, &cases, &ctx, sink.as_mut());
    // Every rank is here together unless one rank alone failed (then it aborts the job).
    if result.is_ok() {
        meta.peak_rss_bytes = Some(world.max_u64(crate::bench::e2e::peak_rss_bytes()));
    }
    if world.is_root() {
        meta.end_time = Some(crate::units::utc_now().0);
        match &result {
            Ok(outcomes) => {
                meta.status = "ok".into();
                meta.cases_done = outcomes.len();
                meta.last_case = outcomes.last().map(|o| o.method.clone());
            }
            Err(e) => {
                meta.status = "failed".into();
                meta.error = Some(e.to_string());
            }
        }
        // The run's own error comes first; a failing metadata write only replaces success.
        let recorded = meta.write(&out);
        if result.is_ok() {
            recorded?;
        } else if let Err(e) = recorded {
            eprintln!("gradcomp: warning: could not record the run's status in run.json: {e}");
        }
    }
    let outcomes = result?;
    if world.is_root() {
        print!("{}", summary_table(&outcomes));
    }
    Ok(outcomes)
}

/// The final eval loss and accuracy per case beside dense S-SGD's (the first `ssgd` case),
/// and whether each is within the documented tolerance.
pub fn summary_table(outcomes: &[CaseOutcome]) -> String {
    let dense = outcomes
        .iter()
        .find(|o| o.method == "ssgd")
        .map(|o| o.final_eval_loss);
    let mut s = format!(
        "{:<14} {:>14} {:>14} {:>10} {:>8}  status\n",
        "method", "eval_loss", "eval_accuracy", "vs_dense", "within"
    );
    for o in outcomes {
        let (ratio, within) = match dense {
            Some(d) if d.is_finite() && d > 0.0 => (
                format!("{:.3}", o.final_eval_loss / d),
                if within_tolerance(o.final_eval_loss, d) {
                    "yes"
                } else {
                    "no"
                },
            ),
            _ => ("-".into(), "-"),
        };
        s.push_str(&format!(
            "{:<14} {:>14.5} {:>14.4} {:>10} {:>8}  {}\n",
            o.method, o.final_eval_loss, o.final_eval_accuracy, ratio, within, o.status
        ));
    }
    s
}
