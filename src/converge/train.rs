//! Training one converge case on the e2e engine's path: the planners' fixed costs, the
//! gradient synchronisation through the engine's executor, the SGD loop, evaluation and
//! the converge.csv rows.

use super::{data, model, ConvergeCase};
use crate::comm::World;
use crate::compress::noef;
use crate::compress::{Compressor, WorkerCtx};
use crate::engine::exec::{Executor, Hooks, OpTimes};
use crate::engine::{self, E2eSetup, TensorSpec};
use crate::error::{Error, Result};
use crate::record::{CsvSink, SCHEMA_VERSION};
use ndarray::Array2;
use rand::Rng;
use serde::Serialize;

/// One row of converge.csv (docs/csv-schema.md, "converge.csv").
#[derive(Clone, Debug, Serialize)]
pub struct ConvergeRow {
    pub schema_version: u32,
    pub run_id: String,
    pub case_id: String,
    /// The case without its seed: rows of one configuration at several seeds share it.
    pub config_id: String,
    /// The training setup without the method (steps, batch, lr, schedule, model, data):
    /// the cases a method is held against dense S-SGD's share it.
    pub setup_id: String,
    pub method: String,
    pub world_size: usize,
    pub seed: u64,
    pub steps: u64,
    pub batch: usize,
    pub lr: f64,
    pub lr_schedule: String,
    pub warmup_steps: u64,
    pub sgd_momentum: f64,
    pub density: f64,
    pub rank: usize,
    pub sketch_rows: usize,
    pub sketch_cols_per_k: f64,
    pub qsgd_levels: u32,
    pub fusion: String,
    pub collective: String,
    pub buckets: usize,
    pub model_params: usize,
    /// Hidden widths, `-`-separated (`512-512`).
    pub hidden: String,
    /// 0: fresh samples from the teacher every step; N: a fixed set of N.
    pub train_samples: usize,
    pub step: u64,
    /// The learning rate of this step (the schedule's).
    pub step_lr: f64,
    pub train_loss: f64,
    pub eval_loss: Option<f64>,
    pub eval_accuracy: Option<f64>,
    /// `|out - dense mean| / |dense mean|` at the first step and each evaluation step
    /// (empty between them).
    pub update_rel_err: Option<f64>,
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
    /// [`config_id`]: the same configuration at another seed shares it.
    pub config_id: String,
    /// [`setup_id`]: dense S-SGD's cases of the same setup are this case's reference.
    pub setup_id: String,
    /// The method and the parameters that make it another configuration (`topk
    /// density=0.001`).
    pub label: String,
    pub seed: u64,
    /// The held-out evaluations, in step order.
    pub curve: Vec<super::target::EvalPoint>,
    pub final_eval_loss: f64,
    pub final_eval_accuracy: f64,
    pub status: String,
}

/// The compute rate the planners assume for the model's layers in `converge` (flop/s):
/// nominal (one host core with BLAS), fixed so that a plan repeats run to run.
pub const NOMINAL_FLOPS_PER_S: f64 = 1e10;

/// Planner costs of a converge case, fixed so that a planner fusion's plan (and with it
/// the training: OMGS and Sketch-Fusion compress whole buckets) is the same run to run:
/// the reference compression costs (each method's spec, `MethodCosts::reference`) and the
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
            crate::sim::Nets::same(&net),
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
            // The planners plan for wait-free backprop, the papers' schedule; the
            // executor below runs without a clock (pipelining only orders the ops).
            pipelining: true,
            collective: c.collective,
            compute: crate::config::ComputeMode::None,
            merge: c.merge(),
            cost_comm: None,
            planner_costs: Some(fixed_planner_costs(c, world.size, seed)?),
            compress_on: crate::devcost::CompressOn::Host,
            device_costs: None,
            planned: None,
        };
        let mut lay = engine::layout(world, &setup, None)?;
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
    pub run_id: &'a str,
    pub quiet: bool,
    /// Case ids finished by an earlier run into the same directory (`--resume`).
    pub done: &'a std::collections::HashSet<String>,
}

/// Run `cases` in order, writing converge.csv rows through `sink` (rank 0). A case whose
/// loss turns NaN or infinite ends with a `diverged` row; the sweep goes on.
///
/// Cases whose id is in `ctx.done` (`--resume`: finished by an earlier run) are skipped.
/// Before each case and each step the ranks agree whether a stop signal arrived
/// ([`World::sync_or_stop`]): then the case's rows so far are flushed, the last one with
/// status `interrupted`, and every rank returns `Error::Interrupted`. `summary` follows
/// along, and run.json with it as each case's rows are flushed.
pub fn run_all(
    world: &World,
    cases: &[ConvergeCase],
    ctx: &RunContext,
    mut sink: Option<&mut CsvSink>,
    summary: &mut crate::record::meta::RunSummary,
) -> Result<Vec<CaseOutcome>> {
    let mut outcomes = Vec::with_capacity(cases.len());
    for (i, c) in cases.iter().enumerate() {
        let id = case_id(c, world.size);
        if ctx.done.contains(&id) {
            summary.cases_skipped += 1;
            continue;
        }
        world.sync_or_stop()?;
        if world.is_root() && !ctx.quiet {
            eprintln!(
                "[gradcomp] converge case {}/{}: {} seed {} ({} steps, batch {} per worker, lr {} {})",
                i + 1,
                cases.len(),
                c.method,
                c.seed,
                c.steps,
                c.batch,
                c.lr,
                c.lr_schedule.name()
            );
        }
        let o = run_case(world, c, ctx, sink.as_deref_mut())?;
        if world.is_root() && !ctx.quiet {
            eprintln!(
                "[gradcomp]   {}: final eval loss {:.4}, accuracy {:.3} ({})",
                o.method, o.final_eval_loss, o.final_eval_accuracy, o.status
            );
        }
        summary.cases_done += 1;
        summary.last_case = Some(format!("{} ({id})", c.method));
        crate::record::meta::case_done(
            summary.cases_done,
            summary.cases_skipped,
            summary.last_case.clone(),
        )?;
        outcomes.push(o);
    }
    Ok(outcomes)
}

/// Stable id of a case in a run (FNV-1a of its JSON form, its seed included, and world size).
pub(crate) fn case_id(c: &ConvergeCase, world_size: usize) -> String {
    fnv(&serde_json::to_string(&(c, world_size)).unwrap_or_default())
}

/// The id of a case's configuration: [`case_id`] of the case with its seed set to 0.
pub(crate) fn config_id(c: &ConvergeCase, world_size: usize) -> String {
    let mut c = c.clone();
    c.seed = 0;
    case_id(&c, world_size)
}

/// The id of a case's training setup: [`config_id`] of the case as dense S-SGD with
/// default parameters, the `single` fusion and the `auto` collective.
pub(crate) fn setup_id(c: &ConvergeCase, world_size: usize) -> String {
    let mut c = c.clone();
    c.method = "ssgd".into();
    c.params = crate::compress::MethodParams::default();
    c.fusion = crate::schedule::plan::Fusion::Single;
    c.collective = crate::comm::exchange::CollectiveMode::Native;
    config_id(&c, world_size)
}

/// `method` and the parameters that tell its configurations apart.
pub fn label(c: &ConvergeCase) -> String {
    let base = c.base_method();
    let p = &c.params;
    let mut s = c.method.clone();
    let reads = |key| crate::compress::registry::reads(base, key);
    if reads("density") {
        s.push_str(&format!(" density={}", p.density_for(&c.method)));
    }
    if reads("rank") {
        s.push_str(&format!(" rank={}", p.rank));
    }
    if reads("sketch_rows") {
        s.push_str(&format!(" {}x{}/k", p.sketch_rows, p.sketch_cols_per_k));
    }
    if reads("qsgd_levels") {
        s.push_str(&format!(" levels={}", p.qsgd_levels));
    }
    s
}

fn fnv(text: &str) -> String {
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
    let seed = c.seed;
    let n = world.size;
    let data = CaseData::new(world, c)?;
    // Identical initial weights on every rank: seeded by the run seed only.
    let mut init_rng = crate::measure::rng::rng_for(seed, 0, 0, data::STREAM_INIT);
    let mut mlp = model::Mlp::new(&c.widths, &mut init_rng);
    let tensors = tensor_specs(&mlp);
    let mut grads: Vec<Array2<f32>> = mlp.params.iter().map(|p| Array2::zeros(p.dim())).collect();
    let mut outs = grads.clone();
    let mut velocity = grads.clone();
    let mut dense: Vec<f32> = vec![0.0; mlp.numel() + 9];
    let mut batch = Minibatch::new(c, data.input, data.classes);
    let (bwd_s, fwd_s) = nominal_times(c, tensors.len());
    let mut sync = Sync::new(world, c, seed, tensors, &bwd_s, fwd_s)?;
    let buckets = sync.buckets_per_step();
    let momentum = c.step_momentum() as f32;
    let row_base = first_row(c, ctx, n, buckets, momentum, mlp.numel());
    let mut outcome = CaseOutcome {
        method: c.method.clone(),
        config_id: row_base.config_id.clone(),
        setup_id: row_base.setup_id.clone(),
        label: label(c),
        seed,
        curve: Vec::new(),
        final_eval_loss: f64::NAN,
        final_eval_accuracy: f64::NAN,
        status: "done".into(),
    };
    let mut pending: Vec<ConvergeRow> = Vec::with_capacity(c.eval_every.min(c.steps) as usize);
    world.barrier();
    for step in 0..c.steps {
        // An agreement point: a stop signal ends the case here, its curve marked as cut.
        if let Err(e) = world.sync_or_stop() {
            if let Some(s) = sink.as_deref_mut() {
                if let Some(last) = pending.last_mut() {
                    last.status = "interrupted".into();
                }
                s.write_all(&pending)?;
            }
            return Err(e);
        }
        // The minibatch, seeded by (seed, step, rank): fresh samples from the teacher, or
        // uniform draws from this rank's shard of the fixed set.
        let mut rng = crate::measure::rng::rng_for(seed, step, world.rank, data::STREAM_BATCH);
        let ts = world.time();
        batch.draw(&data, &mut rng);
        let loss = mlp.loss_and_grad(batch.xb.view(), &batch.yb, &mut grads);
        let tc = world.time();
        let mut st = OpTimes::default();
        let bytes = sync.step(world, step, &grads, &mut outs, &mut st)?;
        let tu = world.time();
        let lr = c.lr_at(step);
        sgd_step(&mut mlp.params, &mut velocity, &outs, lr as f32, momentum);
        let te = world.time();
        let checked = step == 0 || (step + 1) % c.eval_every == 0 || step + 1 == c.steps;
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
        let means = StepMeans::reduce(world, &grads, &outs, &mut dense, checked, &extras);
        let train_loss = means.train_loss;
        let last = step + 1 == c.steps;
        let diverged = !train_loss.is_finite();
        let (mut eval_loss, mut eval_acc) = (None, None);
        if !diverged && (last || (step + 1) % c.eval_every == 0) {
            let (le, acc) = evaluate(world, &mlp, &data.eval, c.eval_samples);
            eval_loss = Some(le);
            eval_acc = Some(acc);
            outcome.evaluated(step, le, acc);
        }
        let status = step_status(diverged, last);
        if sink.is_some() {
            pending.push(ConvergeRow {
                step,
                step_lr: lr,
                eval_loss,
                eval_accuracy: eval_acc,
                status: status.into(),
                ..means.row(&row_base)
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

impl CaseOutcome {
    /// An evaluation at `step`: a point of the curve, and the final figures so far.
    fn evaluated(&mut self, step: u64, loss: f64, accuracy: f64) {
        self.curve.push(super::target::EvalPoint {
            step,
            loss,
            accuracy,
        });
        self.final_eval_loss = loss;
        self.final_eval_accuracy = accuracy;
    }
}

/// A converge.csv row's status: `diverged`, `done` at the last step, else `ok`.
fn step_status(diverged: bool, last: bool) -> &'static str {
    if diverged {
        "diverged"
    } else if last {
        "done"
    } else {
        "ok"
    }
}

/// A case's data on this rank: the teacher, this rank's shard of the fixed training set
/// (none with `train_samples = 0`: fresh samples every step) and of the evaluation set.
struct CaseData {
    teacher: data::Teacher,
    shard: Option<data::Dataset>,
    eval: data::Dataset,
    input: usize,
    classes: usize,
}

impl CaseData {
    /// The data of case `c`, seeded by its seed; a batch larger than the shard is refused.
    fn new(world: &World, c: &ConvergeCase) -> Result<CaseData> {
        let seed = c.seed;
        let n = world.size;
        let input = c.widths[0];
        let classes = *c.widths.last().unwrap_or(&2);
        let teacher = data::Teacher::new(seed, input, classes);
        // A fixed training set (train_samples > 0), else none: fresh samples every step.
        let shard = (c.train_samples > 0).then(|| {
            teacher
                .sample(seed, data::STREAM_TRAIN, c.train_samples)
                .strided(world.rank, n)
        });
        let eval = teacher
            .sample(seed, data::STREAM_EVAL, c.eval_samples)
            .strided(world.rank, n);
        if let Some(shard) = shard.as_ref().filter(|s| c.batch > s.len()) {
            return Err(Error::Input(format!(
                "--batch {}: larger than this rank's shard of {} samples",
                c.batch,
                shard.len()
            )));
        }
        Ok(CaseData {
            teacher,
            shard,
            eval,
            input,
            classes,
        })
    }
}

/// The MLP's tensors as the engine names them: `w1`, `b1`, `w2`, ...
fn tensor_specs(mlp: &model::Mlp) -> Vec<TensorSpec> {
    mlp.shapes()
        .iter()
        .enumerate()
        .map(|(i, &(rows, cols))| TensorSpec {
            name: format!("{}{}", if i % 2 == 0 { "w" } else { "b" }, i / 2 + 1),
            rows,
            cols,
        })
        .collect()
}

/// One step's minibatch and the buffers it is drawn with.
struct Minibatch {
    xb: Array2<f32>,
    yb: Vec<usize>,
    idx: Vec<usize>,
    fresh: data::Batch,
}

impl Minibatch {
    fn new(c: &ConvergeCase, input: usize, classes: usize) -> Minibatch {
        Minibatch {
            xb: Array2::<f32>::zeros((c.batch, input)),
            yb: vec![0usize; c.batch],
            idx: vec![0usize; c.batch],
            fresh: data::Batch::new(c.batch, data::TEACHER_HIDDEN, classes),
        }
    }

    /// Fresh samples from the teacher, or uniform draws from this rank's shard.
    fn draw(&mut self, data: &CaseData, rng: &mut impl Rng) {
        match &data.shard {
            None => {
                data.teacher
                    .sample_into(rng, &mut self.fresh, &mut self.xb, &mut self.yb);
            }
            Some(shard) => {
                for i in self.idx.iter_mut() {
                    *i = rng.gen_range(0..shard.len());
                }
                model::gather_rows(shard.x.view(), &self.idx, &mut self.xb);
                for (y, &i) in self.yb.iter_mut().zip(&self.idx) {
                    *y = shard.y[i];
                }
            }
        }
    }
}

/// Backward times per tensor for the planners, from each layer's multiply-adds at
/// a nominal rate rather than measured (a measured time moves run to run, and with it
/// a planner's buckets and so omgs / sketch-fusion's curves): forward 2 flops per
/// multiply-add per sample, backward twice that; biases are free. Returns the backward
/// time of each of the `tensors` and the forward time.
fn nominal_times(c: &ConvergeCase, tensors: usize) -> (Vec<f64>, f64) {
    let macs: Vec<f64> = c.widths.windows(2).map(|w| (w[0] * w[1]) as f64).collect();
    let flop_s = c.batch as f64 / NOMINAL_FLOPS_PER_S;
    let bwd_s: Vec<f64> = (0..tensors)
        .map(|t| {
            if t % 2 == 0 {
                4.0 * macs[t / 2] * flop_s
            } else {
                0.0
            }
        })
        .collect();
    let fwd_s = 2.0 * macs.iter().sum::<f64>() * flop_s;
    (bwd_s, fwd_s)
}

/// The case's fields of every converge.csv row (the step's own fields zero).
fn first_row(
    c: &ConvergeCase,
    ctx: &RunContext,
    n: usize,
    buckets: usize,
    momentum: f32,
    model_params: usize,
) -> ConvergeRow {
    ConvergeRow {
        schema_version: SCHEMA_VERSION,
        run_id: ctx.run_id.to_string(),
        case_id: case_id(c, n),
        config_id: config_id(c, n),
        setup_id: setup_id(c, n),
        method: c.method.clone(),
        world_size: n,
        seed: c.seed,
        steps: c.steps,
        batch: c.batch,
        lr: c.lr,
        lr_schedule: c.lr_schedule.name().into(),
        warmup_steps: c.warmup_steps,
        sgd_momentum: f64::from(momentum),
        density: c.params.density_for(&c.method),
        rank: c.params.rank,
        sketch_rows: c.params.sketch_rows,
        sketch_cols_per_k: c.params.sketch_cols_per_k,
        qsgd_levels: c.params.qsgd_levels,
        fusion: c.fusion.to_string(),
        collective: c.collective.name().to_string(),
        buckets,
        model_params,
        hidden: c.widths[1..c.widths.len() - 1]
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("-"),
        train_samples: c.train_samples,
        step: 0,
        step_lr: 0.0,
        train_loss: 0.0,
        eval_loss: None,
        eval_accuracy: None,
        update_rel_err: None,
        wire_bytes: 0,
        step_s: 0.0,
        compute_s: 0.0,
        compress_s: 0.0,
        comm_s: 0.0,
        decompress_s: 0.0,
        pack_s: 0.0,
        update_s: 0.0,
        status: "ok".into(),
    }
}

/// One step's figures, means over ranks: the training loss, the seven times of
/// `extras[1..8]`, the wire bytes, and (at a checked step) the update's error against
/// the dense mean of the same gradients.
struct StepMeans {
    train_loss: f64,
    times: Vec<f64>,
    wire: u64,
    update_rel_err: Option<f64>,
}

impl StepMeans {
    /// Outside the timed part, one collective: the loss, the times and the wire bytes
    /// (means over ranks); at an evaluation step the dense sum of the same gradients
    /// rides along, for `update_rel_err` (every step it cost an all-reduce of the whole
    /// model, which dominated an oversubscribed step).
    fn reduce(
        world: &World,
        grads: &[Array2<f32>],
        outs: &[Array2<f32>],
        dense: &mut [f32],
        checked: bool,
        extras: &[f64; 9],
    ) -> StepMeans {
        let n = world.size;
        let mut off = 0;
        if checked {
            for g in grads {
                for &x in g.iter() {
                    dense[off] = x;
                    off += 1;
                }
            }
        }
        for (d, &x) in dense[off..].iter_mut().zip(extras) {
            *d = x as f32;
        }
        world.sum_f32_in_place(&mut dense[..off + extras.len()]);
        let (mut num, mut den) = (0f64, 0f64);
        let mut off = 0;
        if checked {
            for o in outs {
                for &x in o.iter() {
                    let d = f64::from(dense[off]) / n as f64;
                    num += (f64::from(x) - d).powi(2);
                    den += d * d;
                    off += 1;
                }
            }
        }
        let mean = |i: usize| f64::from(dense[off + i]) / n as f64;
        StepMeans {
            train_loss: mean(0),
            times: (1..8).map(mean).collect(),
            wire: mean(8).round() as u64,
            update_rel_err: checked.then(|| {
                if den > 0.0 {
                    (num / den).sqrt()
                } else {
                    num.sqrt()
                }
            }),
        }
    }

    /// `base` with this step's means.
    fn row(&self, base: &ConvergeRow) -> ConvergeRow {
        let t = &self.times;
        ConvergeRow {
            train_loss: self.train_loss,
            update_rel_err: self.update_rel_err,
            wire_bytes: self.wire,
            step_s: t[0],
            compute_s: t[1],
            compress_s: t[2],
            comm_s: t[3],
            decompress_s: t[4],
            pack_s: t[5],
            update_s: t[6],
            ..base.clone()
        }
    }
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

/// The SGD step on the decompressed average `outs`: with momentum `m > 0`,
/// `v = m v + out; w = w - lr v` (PyTorch's `SGD(momentum=m)` without dampening);
/// without, `w = w - lr out`.
fn sgd_step(
    params: &mut [ndarray::Array2<f32>],
    velocity: &mut [ndarray::Array2<f32>],
    outs: &[ndarray::Array2<f32>],
    lr: f32,
    m: f32,
) {
    for ((w, v), o) in params.iter_mut().zip(velocity.iter_mut()).zip(outs) {
        if m > 0.0 {
            ndarray::Zip::from(&mut *v)
                .and(o)
                .for_each(|v, &o| *v = m * *v + o);
            w.scaled_add(-lr, v);
        } else {
            w.scaled_add(-lr, o);
        }
    }
}

#[cfg(test)]
mod tests {
    use ndarray::Array2;

    /// Three steps of a constant update `o` from `w0`, `v = 0`: the closed form
    /// `w3 = w0 - lr o (1 + (1 + m) + (1 + m + m^2))`, and `w0 - 3 lr o` without momentum.
    #[test]
    fn sgd_step_matches_the_closed_form() {
        let (lr, m) = (0.05f32, 0.9f32);
        let o = Array2::from_shape_fn((2, 3), |(i, j)| 0.5 - (i * 3 + j) as f32 * 0.25);
        let w0 = Array2::from_shape_fn((2, 3), |(i, j)| (i + 2 * j) as f32);
        for (mom, factor) in [(m, 1.0 + (1.0 + m) + (1.0 + m + m * m)), (0.0, 3.0)] {
            let mut w = vec![w0.clone()];
            let mut v = vec![Array2::zeros((2, 3))];
            for _ in 0..3 {
                super::sgd_step(&mut w, &mut v, std::slice::from_ref(&o), lr, mom);
            }
            for ((a, &b), &x) in w[0].iter().zip(&w0).zip(&o) {
                let want = b - lr * x * factor;
                assert!((a - want).abs() < 1e-6, "momentum {mom}: {a} vs {want}");
            }
        }
    }
}
